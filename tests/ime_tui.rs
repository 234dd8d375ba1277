//! `fastsoftmax ime` driven as a person drives it: in a terminal (tmux), keys sent one by one,
//! the screen read back. Uses the shipped converter, `assets/models/ime-ja`.

use std::process::Command;
use std::time::{Duration, Instant};

/// A detached tmux session running one command; killed when dropped.
struct Tmux {
    name: String,
}

impl Tmux {
    fn start(command: &str, width: u16, height: u16) -> Self {
        let name = format!("fastsoftmax-ime-{}", std::process::id());
        let ok = Command::new("tmux")
            .args(["new-session", "-d", "-s", &name])
            .args(["-x", &width.to_string(), "-y", &height.to_string()])
            .arg(command)
            .status()
            .expect("running tmux")
            .success();
        assert!(ok, "tmux new-session failed");
        // The pane stays after the program exits, so its last output can be read.
        Command::new("tmux")
            .args(["set-option", "-t", &name, "remain-on-exit", "on"])
            .status()
            .expect("running tmux");
        Tmux { name }
    }

    /// Keys as tmux names them (`Enter`, `BSpace`, `C-c`), or literal text with `literal`.
    fn send(&self, keys: &str, literal: bool) {
        let mut c = Command::new("tmux");
        c.args(["send-keys", "-t", &self.name]);
        if literal {
            c.arg("-l");
        }
        assert!(c.arg(keys).status().expect("running tmux").success());
    }

    /// Types text one key at a time, as a person would.
    fn type_text(&self, text: &str) {
        for c in text.chars() {
            self.send(&c.to_string(), true);
            std::thread::sleep(Duration::from_millis(15));
        }
    }

    fn screen(&self) -> String {
        let out = Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &self.name])
            .output()
            .expect("running tmux");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits (up to two minutes: the first start loads the model) until the screen shows all
    /// of `texts`; returns it.
    fn wait_for(&self, texts: &[&str]) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if texts.iter().all(|t| screen.contains(t)) {
                return screen;
            }
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "the screen never showed {texts:?}:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn resize(&self, width: u16, height: u16) {
        Command::new("tmux")
            .args(["resize-window", "-t", &self.name])
            .args(["-x", &width.to_string(), "-y", &height.to_string()])
            .status()
            .expect("running tmux");
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.name])
            .status();
    }
}

#[test]
fn a_person_types_picks_commits_and_quits() {
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!("tmux is not installed: the terminal test is skipped");
        return;
    }
    let root = env!("CARGO_MANIFEST_DIR");
    let bin = env!("CARGO_BIN_EXE_fastsoftmax");
    // The shell reports the exit status in the pane, which stays after it exits.
    let command = format!("cd {root} && {bin} ime; echo \"exited with $?\"");
    let tmux = Tmux::start(&command, 100, 24);
    tmux.wait_for(&["fastsoftmax ime", "per-key latency appears"]);

    // Every key updates the kana, the conversion and the latency line.
    tmux.type_text("kyouhaiitenki");
    let screen = tmux.wait_for(&["kana きょうはいいてんき", "→  今日はいい天気", "13 keys"]);
    assert!(screen.contains("ms · median"), "{screen}");
    // Backspace rolls back; Enter commits the best conversion.
    tmux.send("BSpace", false);
    tmux.send("BSpace", false);
    tmux.wait_for(&["kana きょうはいいて", "15 keys"]);
    tmux.type_text("nki");
    tmux.wait_for(&["kana きょうはいいてんき", "18 keys"]);
    tmux.send("Enter", false);
    tmux.wait_for(&["│今日はいい天気"]);

    // A number key picks a candidate and commits it, after the text before.
    tmux.type_text("desune");
    let screen = tmux.wait_for(&["kana ですね", "24 keys"]);
    let second = screen
        .lines()
        .find_map(|l| l.trim_start_matches('│').strip_prefix("2 "))
        .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
        .expect("a second candidate");
    tmux.send("2", true);
    tmux.wait_for(&[&format!("│今日はいい天気{second}")]);

    // Keys that are not romaji are typed as they are; a tiny window says it is too small.
    tmux.type_text("@#");
    tmux.wait_for(&["kana @#"]);
    tmux.resize(30, 8);
    tmux.wait_for(&["Terminal too small"]);
    tmux.resize(100, 24);
    tmux.wait_for(&["kana @#"]);

    // Ctrl-C leaves the converter and prints what was committed.
    tmux.send("C-c", false);
    tmux.wait_for(&[&format!("今日はいい天気{second}"), "exited with 0"]);
}
