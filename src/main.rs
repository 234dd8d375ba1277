//! The `fastsoftmax` command line.

mod cli;

// Training hands tensors of megabytes back and forth every window; mimalloc reuses them where
// the system allocator maps and unmaps fresh pages (measured: ~6% more tokens/s, see
// experiments/results/training-speed.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc's `mi_option_t` (the same index in mimalloc 2 and 3).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Keep freed pages instead of returning them to the OS after mimalloc's purge delay: a translator's training
/// step frees and re-requests the same megabytes every batch, and with purging on, 30% of its
/// time went to the kernel clearing fresh pages (measured: +12% tokens/s). The environment
/// variable `MIMALLOC_PURGE_DELAY` still wins when set.
fn keep_freed_pages() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets one integer option; mimalloc reads it on its next purge decision.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    }
}

fn main() -> std::process::ExitCode {
    keep_freed_pages();
    match cli::run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purge_delay_is_the_option_we_set() {
        // The default purge delay is 10 ms in mimalloc 2 and 1000 ms in mimalloc 3; a wrong
        // index reads another option.
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            let delay = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
            assert!(delay == 10 || delay == 1000, "option 15 reads {delay}");
        }
    }
}
