//! `fastsoftmax ime` driven as a person drives it: in a terminal (tmux), keys sent one by one,
//! the screen read back: typing, converting into segments, the candidate window, F7, digits
//! typed. Uses the shipped converter, `assets/models/ime-ja`.

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

/// The candidate window's lines as `(number, text, highlighted)`: ` 1 いい`, `>2 イイ`.
fn window(screen: &str) -> Vec<(usize, String, bool)> {
    screen
        .lines()
        .skip_while(|l| !l.contains(" candidates · "))
        .skip(1)
        .map_while(|l| l.strip_prefix('│'))
        .filter_map(|l| {
            let mut chars = l.chars();
            let mark = chars.next()?;
            let digit = chars.next()?.to_digit(10)? as usize;
            let text = chars.as_str().split_whitespace().next()?.to_string();
            Some((digit, text, mark == '>'))
        })
        .collect()
}

#[test]
fn a_person_types_converts_picks_commits_and_quits() {
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!("tmux is not installed: the terminal test is skipped");
        return;
    }
    let root = env!("CARGO_MANIFEST_DIR");
    let bin = env!("CARGO_BIN_EXE_fastsoftmax");
    // The shell reports the exit status in the pane, which stays after it exits.
    // The user's data goes to a fresh folder: what the session learns is saved there.
    let data = std::env::temp_dir().join(format!("fastsoftmax-tui-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    let command = format!(
        "cd {root} && FASTSOFTMAX_IME_DIR={} {bin} ime; echo \"exited with $?\"",
        data.display()
    );
    let tmux = Tmux::start(&command, 100, 24);
    tmux.wait_for(&["fastsoftmax ime", "per-key latency appears", "type romaji"]);

    // Every key updates the kana, the conversion and the latency line.
    tmux.type_text("kyouhaiitenki");
    let screen = tmux.wait_for(&["kana きょうはいいてんき", "→  今日はいい天気", "· 13 keys"]);
    assert!(screen.contains("ms · median"), "{screen}");
    assert!(screen.contains("conversions (ln p)"), "{screen}");
    // Backspace rolls back.
    tmux.send("BSpace", false);
    tmux.send("BSpace", false);
    tmux.wait_for(&["kana きょうはいいて", "· 15 keys"]);
    tmux.type_text("nki");
    tmux.wait_for(&["kana きょうはいいてんき", "· 18 keys"]);

    // Space converts into segments, the first focused; → moves to the second.
    tmux.send("Space", false);
    tmux.wait_for(&[
        "kana きょうは いい てんき",
        "→  今日は いい 天気",
        "segment 1/3",
        "Space or ↓: the candidates for きょうは",
        "· 19 keys",
    ]);
    // Shift+← gives the focused segment's last kana to a segment of its own; Shift+→ takes
    // it back.
    tmux.send("S-Left", false);
    tmux.wait_for(&["kana きょう は いい てんき", "segment 1/4", "· 20 keys"]);
    tmux.send("S-Right", false);
    tmux.wait_for(&[
        "kana きょうは いい てんき",
        "→  今日は いい 天気",
        "· 21 keys",
    ]);
    tmux.send("Right", false);
    tmux.wait_for(&["segment 2/3", "the candidates for いい", "· 22 keys"]);

    // Space again opens いい's window on its next candidate, chosen in the preedit.
    tmux.send("Space", false);
    let screen = tmux.wait_for(&[" candidates · いい · 1/", "1-9 pick", "· 23 keys"]);
    let page = window(&screen);
    assert!(page.len() >= 2, "{screen}");
    let (_, shown, _) = page.iter().find(|c| c.2).expect("a highlighted candidate");
    assert!(
        screen.contains(&format!("→  今日は {shown} 天気")),
        "{screen}"
    );
    // A digit picks from the page: the window closes, nothing is typed.
    let (n, picked, _) = page.iter().find(|c| !c.2).unwrap().clone();
    tmux.send(&n.to_string(), true);
    tmux.wait_for(&[
        &format!("→  今日は {picked} 天気"),
        "the candidates for いい",
        "· 24 keys",
    ]);
    // Enter commits the segments as chosen.
    tmux.send("Enter", false);
    let first = format!("今日は{picked}天気");
    tmux.wait_for(&[&format!("│{first}"), "type romaji", "· 25 keys"]);

    // Digits are typed while composing; Esc clears the input.
    tmux.type_text("12ji");
    tmux.wait_for(&["kana 12じ", "· 29 keys"]);
    tmux.send("Escape", false);
    tmux.wait_for(&["type romaji", "· 30 keys"]);

    // F7 writes the input in katakana; Enter commits it after the text before.
    tmux.type_text("tenki");
    tmux.wait_for(&["kana てんき", "· 35 keys"]);
    tmux.send("F7", false);
    tmux.wait_for(&["→  テンキ", "segment 1/1", "· 36 keys"]);
    tmux.send("Enter", false);
    tmux.wait_for(&[&format!("│{first}テンキ")]);

    // Keys that are not romaji are typed as they are; a tiny window says it is too small.
    tmux.type_text("@#");
    tmux.wait_for(&["kana @#"]);
    tmux.resize(30, 8);
    tmux.wait_for(&["Terminal too small"]);
    tmux.resize(100, 24);
    tmux.wait_for(&["kana @#"]);

    // Ctrl-C leaves the converter and prints what was committed.
    tmux.send("C-c", false);
    tmux.wait_for(&[&format!("{first}テンキ"), "exited with 0"]);
    // What was committed was learned and saved: the segments and the katakana.
    let history = std::fs::read_to_string(data.join("history.tsv")).expect("history saved");
    assert!(history.contains("w\tてんき\tテンキ\t"), "{history}");
    assert!(
        history.contains(&format!("w\tいい\t{picked}\t")),
        "{history}"
    );
    std::fs::remove_dir_all(&data).unwrap();
}
