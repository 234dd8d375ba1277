//! The C examples (`examples/c/`: predict, translate, convert) and the bad-input program
//! (`tests/c/bad_input.c`), built with `cc` against the static library and run on the shipped
//! models: what the Rust API gives, every bad call refused with its message, and (where
//! valgrind is installed) no leak and no memory error.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use fastsoftmax_ime::session::PAGE;
use fastsoftmax_ime::{Converter, Key};
use fastsoftmax_translate::{SearchOptions, ServeOptions, Served};

mod common;
use common::{asset, model_dir, rust_top_k};

/// `target/<profile>`, where cargo put the static library beside this test's binary.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

/// The newest modification time of a file under `dir`.
fn newest(dir: &Path) -> Option<std::time::SystemTime> {
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| {
            let path = e.ok()?.path();
            if path.is_dir() {
                newest(&path)
            } else {
                std::fs::metadata(&path).and_then(|m| m.modified()).ok()
            }
        })
        .max()
}

/// The static library, when cargo made it from the sources as they are, its own and those of
/// the engines it links: `cargo build -p fastsoftmax-capi` puts it in `target/<profile>`, and
/// `cargo test` leaves it in `deps/` (the library's one build makes every crate type), so the
/// README's test command runs the examples too. The newer of the two is taken.
fn static_library() -> Result<PathBuf, String> {
    let dir = profile_dir();
    let crates = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let edited = ["capi", "infer", "translate", "ime"]
        .iter()
        .filter_map(|c| newest(&crates.join(c).join("src")))
        .max();
    let built = [
        dir.join("libfastsoftmax_c.a"),
        dir.join("deps/libfastsoftmax_c.a"),
    ]
    .into_iter()
    .filter_map(|lib| {
        Some((
            std::fs::metadata(&lib).and_then(|m| m.modified()).ok()?,
            lib,
        ))
    })
    .max();
    match (built, edited) {
        (Some((built, lib)), Some(edited)) if built >= edited => Ok(lib),
        (Some((_, lib)), _) => Err(format!(
            "{} is older than the sources of capi, infer, translate or ime",
            lib.display()
        )),
        _ => Err(format!(
            "{} is not built",
            dir.join("libfastsoftmax_c.a").display()
        )),
    }
}

/// Says why the examples do not run; `.ci/run` sets `FASTSOFTMAX_NO_SKIP=1`, where that fails.
fn skip(why: &str) {
    assert!(
        std::env::var_os("FASTSOFTMAX_NO_SKIP").is_none_or(|v| v == "0"),
        "{why}"
    );
    eprintln!("{why}");
}

/// Builds `SOURCE.c` (under the crate) into `dir`; `None` without a C compiler.
fn build(lib: &Path, source: &str, dir: &Path) -> Option<PathBuf> {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let name = Path::new(source).file_name().unwrap();
    let out = dir.join(name);
    let status = Command::new("cc")
        .arg("-Wall")
        .arg("-Wextra")
        .arg("-Werror")
        .arg("-o")
        .arg(&out)
        .arg(crate_dir.join(format!("{source}.c")))
        .arg("-I")
        .arg(crate_dir.join("include"))
        .arg(lib)
        .args(["-lm", "-lpthread", "-ldl"])
        .status()
        .ok()?;
    assert!(status.success(), "cc failed on {source}.c");
    Some(out)
}

/// Runs `exe ARGS` with `stdin`, under valgrind when `valgrind` is set: its stdout, after
/// checking that it succeeded (and, under valgrind, that no byte was lost and no memory
/// error happened).
fn run(exe: &Path, args: &[&str], stdin: &str, valgrind: bool) -> String {
    let mut command = match valgrind {
        true => {
            let mut c = Command::new("valgrind");
            c.args([
                "--leak-check=full",
                "--error-exitcode=99",
                "--errors-for-leak-kinds=definite,indirect,possible",
            ])
            .arg(exe);
            c
        }
        false => Command::new(exe),
    };
    let mut child = command
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let report = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{} {args:?}: {report}", exe.display());
    if valgrind {
        assert!(report.contains("ERROR SUMMARY: 0 errors"), "{report}");
        // Nothing may be lost, not even possibly: a process-wide table (the IME's segment
        // words) is held until exit as "still reachable".
        assert!(
            report.contains("All heap blocks were freed")
                || (report.contains("definitely lost: 0 bytes")
                    && report.contains("indirectly lost: 0 bytes")
                    && report.contains("possibly lost: 0 bytes")),
            "{report}"
        );
    }
    String::from_utf8(out.stdout).unwrap()
}

/// The three examples, built and run on the shipped models: each prints what the Rust API
/// gives, fails with the file named on a missing model, and, under valgrind, loses nothing.
#[test]
fn the_c_examples_do_what_rust_does_and_leak_nothing() {
    let lib = match static_library() {
        Ok(lib) => lib,
        Err(why) => {
            return skip(&format!(
                "the C examples are skipped: {why} (cargo build --release -p fastsoftmax-capi \
                 builds it)"
            ))
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let Some(predict) = build(&lib, "examples/c/predict", dir.path()) else {
        return skip("no C compiler (cc): the C examples are skipped");
    };
    let translate = build(&lib, "examples/c/translate", dir.path()).unwrap();
    let convert = build(&lib, "examples/c/convert", dir.path()).unwrap();
    // The overhead measurement's C path (experiments/bindings_overhead.sh runs it): it builds.
    build(&lib, "examples/c/overhead", dir.path()).unwrap();
    let valgrind = Command::new("valgrind").arg("--version").output().is_ok();
    if !valgrind {
        eprintln!("valgrind is not installed: the memory checks are skipped");
    }

    // Predict: the five likeliest next words, as the full softmax ranks them.
    let model = model_dir();
    let words: Vec<String> = run(
        &predict,
        &[model.to_str().unwrap(), "full", "the company said"],
        "",
        valgrind,
    )
    .lines()
    .map(|l| l.split('\t').next().unwrap().to_string())
    .collect();
    let (best, lm) = rust_top_k(&model, "the company said", 5);
    let expected: Vec<String> = best
        .iter()
        .map(|s| lm.vocab().word(s.id).to_string())
        .collect();
    assert_eq!(words, expected);

    // Translate: the best and 2-best of each line, as `fastsoftmax translate` prints them.
    let bible = asset("bible-en-de-tiny");
    let lines = ["In the beginning was the Word.", "", "Jesus wept."];
    let got = run(
        &translate,
        &[bible.to_str().unwrap(), "2"],
        &lines.join("\n"),
        valgrind,
    );
    let served = Served::open(&bible, &ServeOptions::default()).unwrap();
    let opts = SearchOptions {
        n_best: 2,
        ..SearchOptions::default()
    };
    let mut expected = String::new();
    for nbest in served.translate(&lines, &opts).unwrap() {
        for (rank, t) in nbest.iter().enumerate() {
            match rank {
                0 => expected += &format!("{}\n", t.text),
                _ => expected += &format!("{rank} ||| {} ||| {:.4}\n", t.text, t.score),
            }
        }
    }
    assert_eq!(got, expected);

    // Convert: what the Rust session commits for the same keys; `-` picks the second
    // candidate of the first segment's window.
    let ime = asset("ime-ja");
    let got = run(
        &convert,
        &[
            ime.to_str().unwrap(),
            "kyouhaiitenki",
            "-",
            "watashinonamaeha",
        ],
        "",
        valgrind,
    );
    let converter = Converter::open(&ime).unwrap();
    let mut session = converter.session(PAGE).unwrap();
    let mut commit = |romaji: &str, pick_second: bool| {
        romaji
            .chars()
            .for_each(|c| drop(session.press(Key::Char(c))));
        session.press(Key::Space);
        if pick_second {
            session.press(Key::Space);
            session.press(Key::Char('2'));
        }
        session.press(Key::Enter).committed.unwrap()
    };
    let first = commit("kyouhaiitenki", false);
    let second = commit("watashinonamaeha", true);
    let committed: Vec<&str> = got
        .lines()
        .filter(|l| !l.starts_with("preedit:") && !l.starts_with(' ') && !l.starts_with('*'))
        .collect();
    assert_eq!(committed, [first.as_str(), second.as_str()], "{got}");
    assert!(
        got.lines().filter(|l| l.starts_with('*')).count() == 1,
        "{got}"
    );

    // Bad input from C (tests/c/bad_input.c): every bad call refused with its message.
    let bad_input = build(&lib, "tests/c/bad_input", dir.path()).unwrap();
    let out = run(
        &bad_input,
        &[
            model.to_str().unwrap(),
            bible.to_str().unwrap(),
            ime.to_str().unwrap(),
        ],
        "",
        valgrind,
    );
    assert!(out.contains("every bad call was refused"), "{out}");

    // A missing model: exit status 1 and the folder named.
    let missing = "/no/such/model";
    for (exe, args) in [
        (&predict, vec![missing, "full", "the"]),
        (&translate, vec![missing]),
        (&convert, vec![missing, "a"]),
    ] {
        let out = Command::new(exe)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", exe.display());
        assert!(String::from_utf8_lossy(&out.stderr).contains(missing));
    }
}
