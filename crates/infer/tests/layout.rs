//! The engine's folders depend on each other one way (ARCHITECTURE.md): no import cycle between
//! `heads/`, `kernels/`, `model/` and the files at the root of `src/`, and no head reaches into
//! the registry. Read from the source, so a new `use` that closes a cycle fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const FOLDERS: [&str; 3] = ["heads", "kernels", "model"];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The unit a file belongs to: its folder under `src/`, or the file itself at the root.
fn unit_of(rel: &Path) -> String {
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

/// The code of a file without comments and without its unit tests (which sit at the end).
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap();
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `crate::NAME` references in `code`, as the units they name.
fn references(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            out.insert(name);
        }
    }
    out
}

/// unit → units it imports (itself excluded); `lib.rs`, the crate root that re-exports
/// everything, is not a unit.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let rel = file.strip_prefix(&src).unwrap();
        if rel == Path::new("lib.rs") {
            continue;
        }
        let unit = unit_of(rel);
        let refs = references(&code(&std::fs::read_to_string(&file).unwrap()));
        let entry = g.entry(unit.clone()).or_default();
        entry.extend(refs.into_iter().filter(|r| *r != unit));
    }
    g
}

/// A cycle through `start`, if any, as the path of units.
fn cycle_from(g: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    fn walk(
        g: &BTreeMap<String, BTreeSet<String>>,
        at: &str,
        start: &str,
        path: &mut Vec<String>,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        for next in g.get(at).into_iter().flatten() {
            if next == start {
                path.push(next.clone());
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if walk(g, next, start, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut path = vec![start.to_string()];
    walk(g, start, start, &mut path, &mut BTreeSet::new()).then_some(path)
}

#[test]
fn folders_import_each_other_one_way() {
    let g = graph();
    for folder in FOLDERS {
        assert!(g.contains_key(folder), "src/{folder}/ is missing");
    }
    let cycles: Vec<String> = g
        .keys()
        .filter_map(|u| cycle_from(&g, u))
        .map(|c| c.join(" → "))
        .collect();
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
    // The measured direction, as ARCHITECTURE.md draws it.
    assert!(!g["kernels"].contains("heads") && !g["kernels"].contains("model"));
    assert!(
        !g["heads"].contains("model"),
        "heads serve an output layer, not a model"
    );
    #[cfg(feature = "eval")]
    assert!(g.values().all(|deps| !deps.contains("eval")));
}

#[test]
fn the_checker_sees_a_cycle() {
    let mut g = graph();
    g.get_mut("kernels").unwrap().insert("heads".into());
    assert!(cycle_from(&g, "kernels").is_some());
}

#[test]
fn no_head_imports_the_registry() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/heads");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name == "registry.rs" || name == "mod.rs" {
            continue;
        }
        let code = code(&std::fs::read_to_string(&path).unwrap());
        assert!(
            !code.contains("registry") && !code.contains("crate::heads::{"),
            "{name} imports the registry (or the heads module as a whole); import heads::format and the head files it needs instead"
        );
    }
}
