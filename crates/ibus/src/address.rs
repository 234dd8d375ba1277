//! Where ibus-daemon listens, found as libibus finds it (`ibus_get_address` and
//! `ibus_get_socket_path` in `src/ibusshare.c`):
//!
//! 1. `IBUS_ADDRESS`, if set;
//! 2. else the file `IBUS_ADDRESS_FILE`, or `$XDG_CONFIG_HOME/ibus/bus/MACHINE-HOST-DISPLAY`
//!    (`~/.config` when `XDG_CONFIG_HOME` is unset; `MACHINE` from `/var/lib/dbus/machine-id`
//!    or `/etc/machine-id`; `HOST` and `DISPLAY` split from `$WAYLAND_DISPLAY`, else from
//!    `$DISPLAY` as `HOST:DISPLAY.SCREEN`, `HOST` defaulting to `unix`), whose
//!    `IBUS_ADDRESS=` line counts only while its `IBUS_DAEMON_PID=` process lives.
//!
//! The file is read again on every reconnection: a daemon that restarts listens elsewhere.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

/// The daemon's D-Bus address, or why none was found.
pub fn find() -> Result<String, String> {
    if let Some(address) = env::var("IBUS_ADDRESS").ok().filter(|a| !a.is_empty()) {
        return Ok(address);
    }
    let path = socket_path();
    let text = fs::read_to_string(&path)
        .map_err(|e| format!("no ibus-daemon address in {}: {e}", path.display()))?;
    let (address, pid) = parse(&text);
    let address = address.ok_or_else(|| format!("{} has no IBUS_ADDRESS line", path.display()))?;
    match pid {
        Some(pid) if Path::new("/proc").join(pid.to_string()).exists() => Ok(address),
        _ => Err(format!(
            "the ibus-daemon named in {} is not running",
            path.display()
        )),
    }
}

/// The address file's `IBUS_ADDRESS` and `IBUS_DAEMON_PID` (the last of each; `#` comments).
fn parse(text: &str) -> (Option<String>, Option<u32>) {
    let (mut address, mut pid) = (None, None);
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        if let Some(a) = line.strip_prefix("IBUS_ADDRESS=") {
            address = Some(a.to_string());
        } else if let Some(p) = line.strip_prefix("IBUS_DAEMON_PID=") {
            pid = p.trim().parse().ok();
        }
    }
    (address, pid)
}

/// The address file libibus would read.
pub fn socket_path() -> PathBuf {
    if let Some(path) = env::var_os("IBUS_ADDRESS_FILE") {
        return PathBuf::from(path);
    }
    let (host, display) = display_parts(
        env::var("WAYLAND_DISPLAY").ok().as_deref(),
        env::var("DISPLAY").ok().as_deref(),
    );
    let config = env::var_os("XDG_CONFIG_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .unwrap_or_else(|| PathBuf::from(".config"));
    config
        .join("ibus")
        .join("bus")
        .join(format!("{}-{host}-{display}", machine_id()))
}

/// `(host, display number)` as libibus names the address file: a Wayland display whole, an X
/// display `HOST:NUMBER.SCREEN` without its screen.
fn display_parts(wayland: Option<&str>, x: Option<&str>) -> (String, String) {
    if let Some(w) = wayland {
        return ("unix".into(), w.into());
    }
    let Some(x) = x else {
        return ("unix".into(), "0".into());
    };
    let (host, number) = match x.split_once(':') {
        Some((host, rest)) => (host, rest.split('.').next().unwrap_or("")),
        None => (x, "0"),
    };
    let host = if host.is_empty() { "unix" } else { host };
    (host.into(), number.into())
}

fn machine_id() -> String {
    ["/var/lib/dbus/machine-id", "/etc/machine-id"]
        .iter()
        .find_map(|p| fs::read_to_string(p).ok())
        .map(|id| id.trim().to_string())
        .unwrap_or_else(|| "machine-id".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_address_file_is_read_as_libibus_writes_it() {
        let text = "# This file is created by ibus-daemon, please do not modify it.\n\
                    IBUS_ADDRESS=unix:path=/tmp/ibus/dbus-x,guid=0123\n\
                    IBUS_DAEMON_PID=4242\n";
        assert_eq!(
            parse(text),
            (
                Some("unix:path=/tmp/ibus/dbus-x,guid=0123".into()),
                Some(4242)
            )
        );
        assert_eq!(parse("IBUS_DAEMON_PID=x\n"), (None, None));
    }

    #[test]
    fn displays_name_the_file_as_libibus_does() {
        let parts = |w, x| display_parts(w, x);
        assert_eq!(parts(None, Some(":99")), ("unix".into(), "99".into()));
        assert_eq!(parts(None, Some(":0.1")), ("unix".into(), "0".into()));
        assert_eq!(parts(None, Some("host:10.0")), ("host".into(), "10".into()));
        assert_eq!(
            parts(Some("wayland-0"), Some(":0")),
            ("unix".into(), "wayland-0".into())
        );
        assert_eq!(parts(None, None), ("unix".into(), "0".into()));
        assert_eq!(parts(None, Some("host")), ("host".into(), "0".into()));
    }
}
