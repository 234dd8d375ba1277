//! The `fastsoftmax` command line.

mod cli;

// Training hands tensors of megabytes back and forth every window; mimalloc reuses them where
// the system allocator maps and unmaps fresh pages (measured: ~6% more tokens/s, see
// experiments/results/training-speed.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    match cli::run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
