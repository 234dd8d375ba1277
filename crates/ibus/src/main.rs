//! `fastsoftmax-ibus`: the fastsoftmax Japanese input method as an IBus engine.
//!
//! ibus-daemon runs it as the component `fastsoftmax.xml` describes. It opens the shipped
//! converter, connects to the daemon's own D-Bus (not the session bus: see [`address`]), serves
//! the factory and takes the component's bus name, which is how the daemon learns the engine
//! is up. When the daemon goes away it reconnects, backing off, to whichever daemon comes next.
//!
//! ```text
//! D-Bus (zbus, main thread) ──requests──► converter thread: Converter + a Session per engine
//!        ◄──oneshot replies──
//! ```

mod address;
mod engine;
mod keys;
mod serialized;
mod worker;

use std::path::PathBuf;
use std::process::ExitCode;
use std::thread;
use std::time::{Duration, Instant};

use zbus::connection::Builder;

use crate::engine::{Factory, COMPONENT, FACTORY_PATH};
use crate::worker::Worker;

/// The first wait before reconnecting, and the longest.
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// A connection that lived this long starts the backoff over.
const STABLE: Duration = Duration::from_secs(5);
/// How long a copy that ibus-daemon started waits for a daemon to come back. The daemon that
/// started it is gone for good by then, and the next one starts a copy of its own.
const ORPHANED: Duration = Duration::from_secs(60);

const USAGE: &str = "usage: fastsoftmax-ibus [--ibus] [--model DIR]

The fastsoftmax Japanese input method as an IBus engine. ibus-daemon starts it (with --ibus) as
the component fastsoftmax.xml describes; see crates/ibus/README.md to install it.

  --model DIR  the converter folder (default: the clone's assets/models/ime-ja)
  --ibus       started by ibus-daemon (accepted for the component's exec line)";

/// The converter of the clone this binary was built in.
const DEFAULT_MODEL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../assets/models/ime-ja");

fn main() -> ExitCode {
    let mut model = PathBuf::from(DEFAULT_MODEL);
    let mut launched = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--ibus" => launched = true,
            "--model" => match args.next() {
                Some(dir) => model = dir.into(),
                None => return usage("--model needs a folder"),
            },
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => return usage(&format!("unknown argument {other:?}")),
        }
    }
    let worker = match Worker::spawn(&model) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("{}: cannot open the converter {e}", me());
            return ExitCode::FAILURE;
        }
    };
    let mut backoff = BACKOFF_MIN;
    let mut alone_since = Instant::now();
    // Said once, not at every retry.
    let mut last_error = String::new();
    loop {
        let started = Instant::now();
        match zbus::block_on(serve(&worker)) {
            Ok(Ended::Closed) => {
                eprintln!("{}: ibus-daemon went away; reconnecting", me());
                alone_since = Instant::now();
                last_error.clear();
            }
            Ok(Ended::NameTaken) => {
                eprintln!(
                    "{}: another process serves {COMPONENT}; leaving it be",
                    me()
                );
                return ExitCode::SUCCESS;
            }
            Err(e) if e != last_error => {
                eprintln!("{}: {e}", me());
                last_error = e;
            }
            Err(_) => {}
        }
        // The engines belonged to the daemon that is gone; a new one creates its own.
        worker.close_all();
        if launched && alone_since.elapsed() >= ORPHANED {
            eprintln!("{}: no ibus-daemon for {ORPHANED:?}; exiting", me());
            return ExitCode::SUCCESS;
        }
        if started.elapsed() >= STABLE {
            backoff = BACKOFF_MIN;
        }
        thread::sleep(backoff);
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

/// The prefix of every log line: ibus-daemon (with `--verbose`) passes on a component's
/// stderr, and a daemon that comes back may be served by a copy started by the one before.
fn me() -> String {
    format!("fastsoftmax-ibus[{}]", std::process::id())
}

fn usage(problem: &str) -> ExitCode {
    eprintln!("fastsoftmax-ibus: {problem}\n\n{USAGE}");
    ExitCode::from(2)
}

/// How a connection to the daemon ended.
enum Ended {
    /// The daemon closed it (it quit, crashed or restarted).
    Closed,
    /// Another process holds the component's name: the daemon started a second copy.
    NameTaken,
}

/// One connection: find the daemon, serve the factory, take the name, wait for the end.
async fn serve(worker: &Worker) -> Result<Ended, String> {
    let address = address::find()?;
    // The first copy keeps the name: zbus would otherwise let a second one take it over.
    let built = Builder::address(address.as_str())
        .serve_at(FACTORY_PATH, Factory::new(worker.clone()))
        .name(COMPONENT)
        .allow_name_replacements(false)
        .replace_existing_names(false)
        .build()
        .await;
    let connection = match built {
        Ok(c) => c,
        Err(zbus::Error::NameTaken) => return Ok(Ended::NameTaken),
        Err(e) => return Err(format!("cannot connect to ibus-daemon at {address}: {e}")),
    };
    eprintln!("{}: serving {COMPONENT} on {address}", me());
    connection.closed().await;
    Ok(Ended::Closed)
}
