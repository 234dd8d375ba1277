//! End to end on a virtual X display: ibus-daemon runs `fastsoftmax-ibus` as the component XML
//! says, a GTK 3 text field (`tests/field.py`) takes keys typed by `xdotool`, and the text it
//! receives is read back. Then the daemon is killed and another started: the engine reconnects
//! to it and typing goes on.
//!
//! Skipped, with the reason printed, where a tool is missing (the Debian packages are listed in
//! `crates/ibus/README.md`). `FASTSOFTMAX_IBUS_SCREENSHOT=PATH` saves a screenshot of the
//! conversion with its candidate window (the README's `crates/ibus/screenshot.png`).

use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use std::os::unix::process::CommandExt;

use rustix::process::{kill_process_group, Pid, Signal};

const ENGINE: &str = env!("CARGO_BIN_EXE_fastsoftmax-ibus");
const CRATE: &str = env!("CARGO_MANIFEST_DIR");
const TITLE: &str = "fastsoftmax-ibus e2e";
const COMPONENT: &str = "org.freedesktop.IBus.FastSoftmax";
const WAIT: Duration = Duration::from_secs(30);

/// The programs the test drives, or why it cannot run.
struct Tools {
    python: String,
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

impl Tools {
    fn find() -> Result<Tools, String> {
        for (program, package) in [
            ("Xvfb", "xvfb"),
            ("ibus-daemon", "ibus"),
            ("ibus", "ibus"),
            ("xdotool", "xdotool"),
            ("dbus-daemon", "dbus-daemon"),
        ] {
            if !on_path(program) {
                return Err(format!("{program} is missing (Debian package {package})"));
            }
        }
        let gtk_im = ["/usr/lib", "/usr/lib64"]
            .iter()
            .filter_map(|d| fs::read_dir(d).ok())
            .flat_map(|d| d.flatten().map(|e| e.path()))
            .chain([PathBuf::from("/usr/lib")])
            .any(|d| d.join("gtk-3.0/3.0.0/immodules/im-ibus.so").exists());
        if !gtk_im {
            return Err("GTK 3's IBus module im-ibus.so is missing (package ibus-gtk3)".into());
        }
        // The system Python, where Debian's python3-gi lives, before any other on the path.
        let probe = "import gi; gi.require_version('Gtk', '3.0'); from gi.repository import Gtk";
        let python = ["/usr/bin/python3", "python3"]
            .into_iter()
            .find(|p| {
                Command::new(p)
                    .args(["-c", probe])
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success())
            })
            .ok_or("python3 with GTK 3 is missing (python3-gi, gir1.2-gtk-3.0)")?;
        Ok(Tools {
            python: python.into(),
        })
    }
}

/// Processes started by the test, each leading a process group of its own (the daemon's holds
/// the engine and the panel it starts); every group is killed when the test ends, however it
/// ends.
#[derive(Default)]
struct Groups(Vec<Child>);

impl Groups {
    fn spawn(&mut self, command: &mut Command) -> u32 {
        let child = command
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
        let pid = child.id();
        self.0.push(child);
        pid
    }

    /// Kills the process `pid` alone (SIGKILL: a crash); what it started lives on in its group.
    fn kill(&mut self, pid: u32) {
        if let Some(child) = self.0.iter_mut().find(|c| c.id() == pid) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Groups {
    fn drop(&mut self) {
        for child in self.0.iter_mut().rev() {
            if let Some(group) = i32::try_from(child.id()).ok().and_then(Pid::from_raw) {
                let _ = kill_process_group(group, Signal::KILL);
            }
            let _ = child.wait();
        }
    }
}

/// Polls `ready` until it gives a value or [`WAIT`] passes.
fn wait_for<T>(what: &str, mut ready: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(value) = ready() {
            return value;
        }
        assert!(start.elapsed() < WAIT, "timed out waiting for {what}");
        sleep(Duration::from_millis(50));
    }
}

/// The test's environment: a private display, session bus and IBus, nothing of the user's.
struct Desktop {
    dir: tempfile::TempDir,
    env: Vec<(String, String)>,
    groups: Groups,
}

impl Desktop {
    fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env_remove("IBUS_ADDRESS")
            .env_remove("WAYLAND_DISPLAY")
            .env_remove("GTK_IM_MODULE_FILE")
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        c
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Runs `program args` to its end (at most [`WAIT`]); its stdout.
    fn run(&self, program: &str, args: &[&str]) -> Result<String, String> {
        let mut child = self
            .command(program)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{program}: {e}"))?;
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
                break status;
            }
            if start.elapsed() > WAIT {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{program} {args:?} timed out"));
            }
            sleep(Duration::from_millis(20));
        };
        let mut out = String::new();
        let mut err = String::new();
        child.stdout.take().unwrap().read_to_string(&mut out).ok();
        child.stderr.take().unwrap().read_to_string(&mut err).ok();
        match status.success() {
            true => Ok(out),
            false => Err(format!("{program} {args:?}: {status}: {err}")),
        }
    }

    fn xdotool(&self, args: &[&str]) {
        self.run("xdotool", args).unwrap();
    }

    /// Starts an ibus-daemon logging to `log`; waits until it has written its address.
    ///
    /// With `panel`, the daemon starts ibus-ui-gtk3, which draws the candidate window, and
    /// which switches to the first engine of its settings as it starts; this waits for that
    /// switch, so that it cannot undo the test's. Without it, the daemon still reads every
    /// lookup table the engine sends (and would log a critical for one it cannot).
    fn start_daemon(&mut self, log: &str, panel: bool) -> u32 {
        let address_file = self.path("ibus-address");
        let _ = fs::remove_file(&address_file);
        let log = fs::File::create(self.path(log)).unwrap();
        let mut command = self.command("ibus-daemon");
        command
            .args([
                "--cache=none",
                "--config=disable",
                "--emoji-extension=disable",
                "--verbose",
            ])
            .args((!panel).then_some("--panel=disable"))
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        let pid = self.groups.spawn(&mut command);
        wait_for("ibus-daemon's address", || {
            let text = fs::read_to_string(&address_file).ok()?;
            text.contains(&format!("IBUS_DAEMON_PID={pid}"))
                .then_some(())
        });
        if panel {
            wait_for("the panel's engine", || self.run("ibus", &["engine"]).ok());
        }
        pid
    }

    /// Makes `engine` the engine and waits until the engine process has created it for the
    /// focused field (its log line `engine NAME created`, `times` in all).
    fn choose_engine(&self, engine: &str, log: &str, times: usize) {
        wait_for(&format!("`ibus engine {engine}`"), || {
            self.run("ibus", &["engine", engine]).ok()
        });
        let created = format!("engine {engine} created");
        wait_for(&created, || {
            let text = fs::read_to_string(self.path(log)).ok()?;
            (text.matches(&created).count() >= times).then_some(())
        });
    }

    fn field_text(&self) -> String {
        fs::read_to_string(self.path("field.txt")).unwrap_or_default()
    }

    /// Waits until the field holds `expected` (the commits so far).
    fn expect_text(&self, expected: &str) {
        let start = Instant::now();
        while self.field_text() != expected {
            assert!(
                start.elapsed() < WAIT,
                "the field holds {:?}, not {expected:?}",
                self.field_text()
            );
            sleep(Duration::from_millis(50));
        }
    }

    fn type_keys(&self, romaji: &str, keys: &[&str]) {
        if !romaji.is_empty() {
            self.xdotool(&["type", "--delay", "40", romaji]);
        }
        for key in keys {
            self.xdotool(&["key", "--delay", "40", key]);
        }
    }
}

/// Calls the engine as a broken or hostile client might, straight over the daemon's bus: each
/// gets an answer (an error where the call makes no sense), and the engine process serves on.
fn bad_calls(address_file: &Path) {
    let text = fs::read_to_string(address_file).unwrap();
    let address = text
        .lines()
        .find_map(|l| l.strip_prefix("IBUS_ADDRESS="))
        .unwrap()
        .to_string();
    zbus::block_on(async {
        let conn = zbus::connection::Builder::address(address.as_str())
            .build()
            .await
            .unwrap();
        let dest = Some(COMPONENT);
        let factory = Some("org.freedesktop.IBus.Factory");
        let engine = Some("org.freedesktop.IBus.Engine");
        let make = async |name: &str| {
            let path = "/org/freedesktop/IBus/Factory";
            conn.call_method(dest, path, factory, "CreateEngine", &(name,))
                .await
        };
        assert!(make("no-such-engine").await.is_err());
        let reply = make("fastsoftmax").await.unwrap();
        let path: zbus::OwnedObjectPath = reply.body().deserialize().unwrap();
        let key = async |keyval: u32, state: u32| {
            let body = (keyval, 0u32, state);
            let reply = conn
                .call_method(dest, &path, engine, "ProcessKeyEvent", &body)
                .await?;
            reply.body().deserialize::<bool>()
        };
        assert!(
            !key(u32::MAX, u32::MAX).await.unwrap(),
            "a release is not used"
        );
        assert!(
            key(0x0100_d800, 0).await.is_ok(),
            "a surrogate keysym is answered"
        );
        assert!(key(u32::from(b'k'), 0).await.unwrap(), "k is typed");
        for (method, body) in [
            ("CandidateClicked", (1000u32, 0u32, 0u32)),
            ("CandidateClicked", (0, 0, 0)),
        ] {
            conn.call_method(dest, &path, engine, method, &body)
                .await
                .unwrap();
        }
        for method in [
            "PageDown", "CursorUp", "FocusOut", "Reset", "Disable", "Enable", "FocusIn",
        ] {
            conn.call_method(dest, &path, engine, method, &())
                .await
                .unwrap();
        }
        // Arguments of the wrong type are refused, not obeyed.
        let wrong = conn
            .call_method(dest, &path, engine, "ProcessKeyEvent", &("k",))
            .await;
        assert!(wrong.is_err());
        // In a password field every key is the application's.
        let properties = Some("org.freedesktop.DBus.Properties");
        let purpose = zbus::Variant::from((8u32, 0u32));
        conn.call_method(
            dest,
            &path,
            properties,
            "Set",
            &("org.freedesktop.IBus.Engine", "ContentType", purpose),
        )
        .await
        .unwrap();
        assert!(
            !key(u32::from(b'k'), 0).await.unwrap(),
            "a password is not converted"
        );
        // Destroyed, the engine is gone from the bus; destroying it again is an error too.
        let service = Some("org.freedesktop.IBus.Service");
        conn.call_method(dest, &path, service, "Destroy", &())
            .await
            .unwrap();
        assert!(key(u32::from(b'k'), 0).await.is_err());
        assert!(conn
            .call_method(dest, &path, service, "Destroy", &())
            .await
            .is_err());
        let missing = "/org/freedesktop/IBus/Engine/999";
        assert!(conn
            .call_method(dest, missing, engine, "Reset", &())
            .await
            .is_err());
    });
}

/// A failed test shows what the daemons and the engine said.
impl Drop for Desktop {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for log in ["daemon-1.log", "daemon-2.log", "second.log"] {
                if let Ok(text) = fs::read_to_string(self.path(log)) {
                    eprintln!("--- {log}\n{text}");
                }
            }
        }
    }
}

#[test]
fn typing_into_a_gtk_field_commits_and_survives_a_daemon_restart() {
    let started = Instant::now();
    let tools = match Tools::find() {
        Ok(t) => t,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let mut desktop = Desktop {
        env: Vec::new(),
        groups: Groups::default(),
        dir,
    };

    // The component as shipped, with the exec line pointing at this build.
    let components = desktop.path("components");
    fs::create_dir_all(&components).unwrap();
    let xml = fs::read_to_string(Path::new(CRATE).join("fastsoftmax.xml")).unwrap();
    let model = Path::new(CRATE).join("../../assets/models/ime-ja");
    let exec = format!("<exec>{ENGINE} --ibus --model {}</exec>", model.display());
    let start = xml.find("<exec>").unwrap();
    let end = xml.find("</exec>").unwrap() + "</exec>".len();
    let xml = format!("{}{exec}{}", &xml[..start], &xml[end..]);
    fs::write(components.join("fastsoftmax.xml"), xml).unwrap();

    // A display of its own, numbered by Xvfb.
    let mut xvfb = Command::new("Xvfb");
    xvfb.args([
        "-displayfd",
        "1",
        "-screen",
        "0",
        "720x360x24",
        "-nolisten",
        "tcp",
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    let mut xvfb = xvfb.process_group(0).spawn().expect("Xvfb");
    let mut line = String::new();
    BufReader::new(xvfb.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    desktop.groups.0.push(xvfb);
    assert!(!line.trim().is_empty(), "Xvfb did not start");
    let display = format!(":{}", line.trim());

    // A session bus of its own.
    let mut bus = Command::new("dbus-daemon");
    bus.args(["--session", "--nofork", "--print-address=1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut bus = bus.process_group(0).spawn().expect("dbus-daemon");
    let mut bus_address = String::new();
    BufReader::new(bus.stdout.take().unwrap())
        .read_line(&mut bus_address)
        .unwrap();
    desktop.groups.0.push(bus);
    assert!(!bus_address.trim().is_empty(), "dbus-daemon did not start");

    let runtime = desktop.path("runtime");
    fs::create_dir_all(&runtime).unwrap();
    std::fs::set_permissions(
        &runtime,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let p = |name: &str| desktop.path(name).display().to_string();
    desktop.env = vec![
        ("DISPLAY".into(), display),
        ("DBUS_SESSION_BUS_ADDRESS".into(), bus_address.trim().into()),
        (
            "IBUS_COMPONENT_PATH".into(),
            format!("{}:/usr/share/ibus/component", components.display()),
        ),
        ("IBUS_ADDRESS_FILE".into(), p("ibus-address")),
        ("XDG_CONFIG_HOME".into(), p("config")),
        ("XDG_CACHE_HOME".into(), p("cache")),
        // The user's history and dictionary: a folder of the test's own.
        ("FASTSOFTMAX_IME_DIR".into(), p("ime")),
        ("XDG_RUNTIME_DIR".into(), runtime.display().to_string()),
        ("GTK_IM_MODULE".into(), "ibus".into()),
        ("NO_AT_BRIDGE".into(), "1".into()),
        ("LANG".into(), "C.UTF-8".into()),
    ];

    let screenshot = std::env::var_os("FASTSOFTMAX_IBUS_SCREENSHOT");
    let daemon = desktop.start_daemon("daemon-1.log", screenshot.is_some());
    let field = desktop.path("field.txt").display().to_string();
    let mut command = desktop.command(&tools.python);
    command
        .arg(Path::new(CRATE).join("tests/field.py"))
        .arg(&field)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    desktop.groups.spawn(&mut command);
    desktop.xdotool(&["search", "--sync", "--name", TITLE, "windowfocus", "--sync"]);
    desktop.choose_engine("fastsoftmax", "daemon-1.log", 1);
    let ready = started.elapsed();

    // Type, convert, commit.
    desktop.type_keys("kyouhaiitenki", &["space", "Return"]);
    let first = "今日はいい天気";
    desktop.expect_text(first);
    println!(
        "committed {first:?} ({:.1?} after the start)",
        started.elapsed()
    );

    // Again, converting, moving to the last segment and opening its candidate window (Space
    // again: the next alternative is highlighted and chosen); 1 picks the page's first.
    desktop.type_keys("kyouhaiitenki", &["space", "Right", "Right", "space"]);
    // (Time for the panel to draw the window, when there is one.)
    sleep(Duration::from_millis(if screenshot.is_some() {
        1500
    } else {
        300
    }));
    if let Some(path) = screenshot {
        let grab = "import sys, gi; gi.require_version('Gdk', '3.0'); \
                    from gi.repository import Gdk; w = Gdk.get_default_root_window(); \
                    Gdk.pixbuf_get_from_window(w, 0, 0, w.get_width(), w.get_height())\
                    .savev(sys.argv[1], 'png', [], [])";
        let path = Path::new(&path).display().to_string();
        desktop.run(&tools.python, &["-c", grab, &path]).unwrap();
        println!("screenshot saved to {path}");
    }
    assert_eq!(
        desktop.field_text(),
        first,
        "nothing commits while converting"
    );
    desktop.type_keys("", &["1", "Return"]);
    let second = first.repeat(2);
    desktop.expect_text(&second);

    // The daemon dies; another starts. The engine process reconnects to it (the same process:
    // its pid names both `serving` lines, in the first daemon's log, which it still writes).
    desktop.groups.kill(daemon);
    desktop.start_daemon("daemon-2.log", false);
    let serving = wait_for("the engine's reconnection", || {
        let log = fs::read_to_string(desktop.path("daemon-1.log")).ok()?;
        let lines: Vec<String> = log
            .lines()
            .filter(|l| l.contains(": serving "))
            .map(String::from)
            .collect();
        (lines.len() >= 2).then_some(lines)
    });
    let pid = |line: &str| line.split(']').next().unwrap_or_default().to_string();
    assert_eq!(pid(&serving[0]), pid(&serving[1]), "{serving:?}");
    desktop.choose_engine("fastsoftmax", "daemon-1.log", 2);
    desktop.type_keys("kyouhaiitenki", &["space", "Return"]);
    desktop.expect_text(&first.repeat(3));

    // A second copy, as a daemon might start while the first reconnects: it finds the name
    // taken and leaves (checked at the end; it loads the converter meanwhile).
    let second = fs::File::create(desktop.path("second.log")).unwrap();
    let mut command = desktop.command(ENGINE);
    command
        .args(["--model", &model.display().to_string()])
        .stdout(Stdio::null())
        .stderr(second);
    let second = desktop.groups.spawn(&mut command);
    // Bad input; then the other engine and back: each switch destroys the field's engine and
    // makes another, in the process that has answered everything so far.
    bad_calls(&desktop.path("ibus-address"));
    desktop.choose_engine("fastsoftmax-us", "daemon-1.log", 1);
    desktop.type_keys("kyouhaiitenki", &["space", "Return"]);
    desktop.expect_text(&first.repeat(4));
    desktop.choose_engine("fastsoftmax", "daemon-1.log", 4);
    desktop.type_keys("kyouhaiitenki", &["space", "Return"]);
    desktop.expect_text(&first.repeat(5));
    let log = fs::read_to_string(desktop.path("daemon-1.log")).unwrap();
    assert_eq!(log.matches(": serving ").count(), 2, "{log}");
    // The destroyed engines saved what their sessions learned.
    let history = fs::read_to_string(desktop.path("ime/history.tsv")).unwrap_or_default();
    assert!(history.contains("\tてんき\t天気\t"), "{history}");
    assert!(log.matches(" destroyed").count() >= 3, "{log}");
    let child = desktop
        .groups
        .0
        .iter_mut()
        .find(|c| c.id() == second)
        .unwrap();
    let status = wait_for("the second copy's exit", || child.try_wait().unwrap());
    let said = fs::read_to_string(desktop.path("second.log")).unwrap();
    assert!(
        status.success() && said.contains("another process serves"),
        "{status}: {said}"
    );
    for log in ["daemon-1.log", "daemon-2.log"] {
        let text = fs::read_to_string(desktop.path(log)).unwrap();
        assert!(!text.contains("CRITICAL"), "{log}: {text}");
    }
    println!(
        "ready after {ready:.1?}; the whole test took {:.1?}",
        started.elapsed()
    );
}
