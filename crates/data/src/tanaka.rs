//! The Tanaka corpus: contemporary, everyday Japanese for the IME's language models, beside
//! Aozora's literature and KWDLC's web text.
//!
//! Source: 147,893 Japanese sentences with English translations from Tatoeba (CC BY 2.0 FR), as
//! the file `examples.utf.xz` of the Rust crate `tanaka` 0.1.0 ships them (SHA-256
//! [`SHA256`]). Lines come in pairs: `A: japanese<TAB>english#ID=…`, then a `B:` line of the
//! sentence's words, which is ignored. [`source`] reads `--from`'s `tanaka-examples.utf.xz`, or
//! else has `cargo fetch` download the crate into cargo's own registry folders (a throwaway
//! project whose only dependency is `tanaka = "=0.1.0"`; nothing is built or linked) and takes
//! the file from there.
//!
//! [`prepare`] keeps the Japanese side of every `A:` line (trimmed; empty ones and duplicates
//! dropped, the first occurrence kept), segments it exactly as the Aozora text is segmented
//! ([`crate::ja::segment`] with mecab-ipadic), and writes into `data/ja/`:
//!
//! - `tanaka-train.txt`: the LM lines (`display/reading` words, `<unk>` where ipadic has no
//!   reading) of every sentence not held out, in file order;
//! - `tanaka-valid.txt`: the LM lines of [`HELD_OUT`] held-out sentences;
//! - `tanaka-dev.tsv`: `reading<TAB>display` of [`HELD_OUT`] further held-out sentences, those
//!   whose reading a person types as kana ([`crate::ja::conversion_set`], the rule of `dev.tsv`);
//! - `tanaka-stats.json`: what was read, dropped and written; written last.
//!
//! The held-out sentences are the ones with the smallest [`split_key`], a seeded hash of the
//! sentence text: the split depends on the sentences, not on their order in the file.
//!
//! The same corpus, both sides kept, is the translator's Japanese → English data:
//! [`crate::tanaka_pairs`].

use std::io::Read;
use std::path::{Path, PathBuf};

use fastsoftmax_infer::files::sha256_hex;

use crate::ja::{conversion_set, io, line_of, segment, write_lines, Ipadic};
use crate::{Error, Result, TempDir};

/// The corpus file as `--from`'s folder holds it.
pub const FILE: &str = "tanaka-examples.utf.xz";
/// SHA-256 of the corpus file.
pub const SHA256: &str = "5be1831f6d9a2c11c60972c249d3ae464e3e99316f5341fe97b395b84b87b1ad";
/// The crate that ships the corpus, its exact version, and the file's name inside it.
pub const CRATE: &str = "tanaka";
pub const VERSION: &str = "0.1.0";
pub const FILE_IN_CRATE: &str = "examples.utf.xz";

/// Sentences held out for `tanaka-valid.txt`, and as many again for `tanaka-dev.tsv`.
pub const HELD_OUT: usize = 1000;
/// The seed of [`split_key`]; changing it changes the split.
pub const SPLIT_SEED: u64 = 0x7a6e_616b_615f_0001;

/// The files [`prepare`] writes into `data/ja/`, [`STATS`] last.
pub const TRAIN: &str = "tanaka-train.txt";
pub const VALID: &str = "tanaka-valid.txt";
pub const DEV: &str = "tanaka-dev.tsv";
pub const STATS: &str = "tanaka-stats.json";

/// The Japanese sentences of the corpus text and what was dropped on the way.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Parsed {
    /// Distinct sentences, in the order of their first occurrence.
    pub sentences: Vec<String>,
    /// `A:` lines read.
    pub read: usize,
    /// `A:` lines whose Japanese side is empty.
    pub empty: usize,
    /// `A:` lines without a TAB (no way to tell the Japanese from the English): skipped.
    pub without_tab: usize,
    /// Repeats of a sentence already kept.
    pub duplicates: usize,
}

/// The Japanese side of every `A:` line of `text` (before the TAB, trimmed), deduplicated
/// exactly; `B:` and any other lines are ignored.
pub fn parse(text: &str) -> Parsed {
    let mut parsed = Parsed::default();
    let mut seen = std::collections::HashSet::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("A:") else {
            continue;
        };
        parsed.read += 1;
        let Some((japanese, _english)) = rest.split_once('\t') else {
            parsed.without_tab += 1;
            continue;
        };
        let japanese = japanese.trim();
        if japanese.is_empty() {
            parsed.empty += 1;
        } else if seen.insert(japanese) {
            parsed.sentences.push(japanese.to_string());
        } else {
            parsed.duplicates += 1;
        }
    }
    parsed
}

/// A stable hash of a sentence's text: [`seeded_key`] with [`SPLIT_SEED`].
pub fn split_key(sentence: &str) -> u64 {
    seeded_key(SPLIT_SEED, sentence)
}

/// A stable hash of a sentence's text under `seed`: 64-bit FNV-1a over the seed's bytes and the
/// sentence's UTF-8, then SplitMix64's finaliser so that the low and high bits mix. Another
/// seed ranks the sentences independently, so that two splits of one corpus are unrelated.
pub fn seeded_key(seed: u64, sentence: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in seed.to_le_bytes().iter().chain(sentence.as_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// Indices into the sentences of each part, each in the sentences' order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    pub train: Vec<usize>,
    pub valid: Vec<usize>,
    pub dev: Vec<usize>,
}

/// Holds out the `held_out` sentences of smallest [`split_key`] (ties by text) as valid and the
/// next `held_out` as dev; the rest is train. The sentences should be distinct.
pub fn split(sentences: &[String], held_out: usize) -> Split {
    let mut order: Vec<(u64, usize)> = sentences
        .iter()
        .enumerate()
        .map(|(i, s)| (split_key(s), i))
        .collect();
    order.sort_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| sentences[a.1].cmp(&sentences[b.1]))
    });
    // 0 = train, 1 = valid, 2 = dev.
    let mut part = vec![0u8; sentences.len()];
    for (rank, &(_, i)) in order.iter().enumerate() {
        part[i] = match rank {
            r if r < held_out => 1,
            r if r < 2 * held_out => 2,
            _ => 0,
        };
    }
    let of = |p: u8| (0..sentences.len()).filter(|&i| part[i] == p).collect();
    Split {
        train: of(0),
        valid: of(1),
        dev: of(2),
    }
}

/// Checks `bytes` (read from `path`) against [`SHA256`]; `fix` says what to do when they differ.
pub fn verify(path: &Path, bytes: &[u8], fix: &str) -> Result<()> {
    let got = sha256_hex(bytes);
    if got == SHA256 {
        return Ok(());
    }
    Err(Error::Invalid(format!(
        "{}: SHA-256 {got}, expected {SHA256}: not the Tanaka corpus ({FILE_IN_CRATE} of the \
         crate {CRATE} {VERSION}); {fix}",
        path.display()
    )))
}

/// The verified corpus file (xz-compressed bytes) and where it came from: `from/`[`FILE`] when
/// `from` holds it, else cargo's registry copy of the crate (running `cargo fetch` on a
/// throwaway project in a temporary folder inside `scratch` when cargo has not downloaded it).
pub fn source(from: Option<&Path>, scratch: &Path) -> Result<(Vec<u8>, PathBuf)> {
    if let Some(path) = from.map(|d| d.join(FILE)).filter(|p| p.is_file()) {
        let bytes = std::fs::read(&path).map_err(io(&path))?;
        verify(
            &path,
            &bytes,
            &format!(
                "replace it with the crate's {FILE_IN_CRATE}, or remove it to let cargo fetch \
                 the crate"
            ),
        )?;
        return Ok((bytes, path));
    }
    let home = cargo_home()?;
    if let Some(found) = from_registry(&home)? {
        return Ok(found);
    }
    cargo_fetch(scratch)?;
    from_registry(&home)?.ok_or_else(|| {
        Error::Invalid(format!(
            "`cargo fetch` ran but {} holds no {CRATE}-{VERSION}/{FILE_IN_CRATE} (is CARGO_HOME \
             the one cargo uses?); put {FILE} in a folder and pass it with --from",
            home.join("registry").display()
        ))
    })
}

/// `$CARGO_HOME`, else `~/.cargo`.
fn cargo_home() -> Result<PathBuf> {
    if let Some(h) = std::env::var_os("CARGO_HOME").filter(|h| !h.is_empty()) {
        return Ok(PathBuf::from(h));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".cargo"))
        .ok_or_else(|| {
            Error::Invalid(format!(
                "neither CARGO_HOME nor HOME is set, so cargo's registry cannot be found; put \
                 {FILE} in a folder and pass it with --from"
            ))
        })
}

/// The folders of `dir`, sorted (none when it does not exist).
fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// The corpus from cargo's registry: the unpacked crate (`registry/src/*/tanaka-0.1.0/`), else
/// the downloaded `.crate` (`registry/cache/*/`, a .tar.gz). `None` when cargo has neither.
fn from_registry(home: &Path) -> Result<Option<(Vec<u8>, PathBuf)>> {
    let registry = home.join("registry");
    let fix = |what: &Path| {
        format!(
            "delete {} so that cargo downloads it again, or pass {FILE} with --from",
            what.display()
        )
    };
    let unpacked = format!("{CRATE}-{VERSION}");
    for index in subdirs(&registry.join("src")) {
        let path = index.join(&unpacked).join(FILE_IN_CRATE);
        if path.is_file() {
            let bytes = std::fs::read(&path).map_err(io(&path))?;
            verify(&path, &bytes, &fix(&index.join(&unpacked)))?;
            return Ok(Some((bytes, path)));
        }
    }
    let wanted = Path::new(&unpacked).join(FILE_IN_CRATE);
    for index in subdirs(&registry.join("cache")) {
        let archive = index.join(format!("{unpacked}.crate"));
        if !archive.is_file() {
            continue;
        }
        let bad = |e: std::io::Error| {
            Error::Invalid(format!(
                "{}: not a readable .crate ({e}); {}",
                archive.display(),
                fix(&archive)
            ))
        };
        let file = std::fs::File::open(&archive).map_err(io(&archive))?;
        let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
        for entry in tar.entries().map_err(bad)? {
            let mut entry = entry.map_err(bad)?;
            if entry.path().map_err(bad)? == wanted {
                let mut bytes = Vec::new();
                entry.read_to_end(&mut bytes).map_err(bad)?;
                let path = archive.join(&wanted);
                verify(&path, &bytes, &fix(&archive))?;
                return Ok(Some((bytes, path)));
            }
        }
        return Err(Error::Invalid(format!(
            "{} holds no {}; {}",
            archive.display(),
            wanted.display(),
            fix(&archive)
        )));
    }
    Ok(None)
}

/// Has cargo download the crate: a throwaway project (removed afterwards) inside `scratch`
/// whose only dependency is the crate, and `cargo fetch` on it. Nothing is compiled.
fn cargo_fetch(scratch: &Path) -> Result<()> {
    let project = TempDir::create(scratch.join(format!(".tanaka-fetch-{}", std::process::id())))?;
    let manifest = project.0.join("Cargo.toml");
    // `[workspace]`: the project stands alone even inside another workspace's folder.
    let toml = format!(
        "[package]\nname = \"tanaka-corpus-fetch\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
         publish = false\n\n[dependencies]\n{CRATE} = \"={VERSION}\"\n\n[workspace]\n"
    );
    std::fs::write(&manifest, toml).map_err(io(&manifest))?;
    let src = project.0.join("src");
    std::fs::create_dir_all(&src).map_err(io(&src))?;
    std::fs::write(src.join("lib.rs"), "").map_err(io(&src))?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = std::process::Command::new(&cargo)
        .arg("fetch")
        .arg("--manifest-path")
        .arg(&manifest)
        .output()
        .map_err(|e| {
            Error::Invalid(format!(
                "could not run `cargo fetch` to download the crate {CRATE} {VERSION} ({e}); \
                 install cargo, or put {FILE} (the crate's {FILE_IN_CRATE}) in a folder and \
                 pass it with --from"
            ))
        })?;
    if !out.status.success() {
        return Err(Error::Invalid(format!(
            "`cargo fetch` of the crate {CRATE} {VERSION} failed: {}; check the network and \
             cargo's registry settings, or put {FILE} (the crate's {FILE_IN_CRATE}) in a \
             folder and pass it with --from",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// The corpus text of [`source`]'s xz bytes; errors name `origin`, the file they came from.
pub fn decompress(compressed: &[u8], origin: &Path) -> Result<String> {
    let mut raw = Vec::new();
    lzma_rs::xz_decompress(&mut &compressed[..], &mut raw).map_err(|e| {
        Error::Invalid(format!(
            "{}: not an xz file ({e}); replace it with the crate {CRATE} {VERSION}'s \
             {FILE_IN_CRATE}",
            origin.display()
        ))
    })?;
    String::from_utf8(raw).map_err(|e| {
        Error::Invalid(format!(
            "{}: not UTF-8 text ({e}); replace it with the crate {CRATE} {VERSION}'s \
             {FILE_IN_CRATE}",
            origin.display()
        ))
    })
}

/// What [`prepare`] did; written as `tanaka-stats.json`.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct Stats {
    /// `A:` lines read.
    pub sentences_read: usize,
    pub duplicates_dropped: usize,
    pub empty_dropped: usize,
    /// `A:` lines without a TAB, skipped.
    pub without_tab_dropped: usize,
    pub train_sentences: usize,
    pub valid_sentences: usize,
    /// Held-out sentences for the conversion set …
    pub dev_sentences: usize,
    /// … and those typed as kana, the lines of `tanaka-dev.tsv`.
    pub dev_conversion_sentences: usize,
    /// Words of all the kept sentences (train, valid and dev), `<unk>` included.
    pub tokens: usize,
    pub train_tokens: usize,
    /// Words ipadic could not read, written as `<unk>` (all parts).
    pub unk_tokens: usize,
    pub split_seed: u64,
    pub source_sha256: String,
}

/// Writes the Tanaka files into `out` (usually `data/ja`); see the module docs. `from` is
/// `--from`'s folder, if any; `ipadic_root` holds (or receives) mecab-ipadic.
/// `progress(done, total)` is called as the sentences are segmented.
pub fn prepare(
    from: Option<&Path>,
    out: &Path,
    ipadic_root: &Path,
    mut progress: impl FnMut(usize, usize),
) -> Result<Stats> {
    std::fs::create_dir_all(out).map_err(io(out))?;
    let (compressed, origin) = source(from, out)?;
    let text = decompress(&compressed, &origin)?;
    drop(compressed);
    let parsed = parse(&text);
    drop(text);

    let tokenizer = Ipadic::fetch(ipadic_root)?.tokenizer()?;
    let mut worker = tokenizer.new_worker();
    let total = parsed.sentences.len();
    let mut lines = Vec::with_capacity(total);
    let mut tokens = vec![0usize; total];
    let mut unk_tokens = 0;
    for (i, s) in parsed.sentences.iter().enumerate() {
        let words = segment(&mut worker, s);
        tokens[i] = words.len();
        unk_tokens += words.iter().filter(|t| t.is_none()).count();
        lines.push(line_of(&words));
        if i % 5_000 == 0 {
            progress(i, total);
        }
    }
    progress(total, total);

    let parts = split(&parsed.sentences, HELD_OUT);
    let pick = |ids: &[usize]| -> Vec<String> { ids.iter().map(|&i| lines[i].clone()).collect() };
    let (train, valid) = (pick(&parts.train), pick(&parts.valid));
    let dev = conversion_set(&pick(&parts.dev));
    let stats = Stats {
        sentences_read: parsed.read,
        duplicates_dropped: parsed.duplicates,
        empty_dropped: parsed.empty,
        without_tab_dropped: parsed.without_tab,
        train_sentences: train.len(),
        valid_sentences: valid.len(),
        dev_sentences: parts.dev.len(),
        dev_conversion_sentences: dev.len(),
        tokens: tokens.iter().sum(),
        train_tokens: parts.train.iter().map(|&i| tokens[i]).sum(),
        unk_tokens,
        split_seed: SPLIT_SEED,
        source_sha256: SHA256.to_string(),
    };
    write_lines(&out.join(TRAIN), &train)?;
    write_lines(&out.join(VALID), &valid)?;
    write_lines(&out.join(DEV), &dev)?;
    // Last, so its presence means the Tanaka files are complete.
    let json = serde_json::to_string_pretty(&stats).unwrap_or_default();
    write_lines(&out.join(STATS), [&json])?;
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "A: 彼は忙しい。\tHe is busy.#ID=1_2\n\
        B: 彼(かれ)[01] は 忙しい\n\
        A:   \tOnly English.#ID=3_4\n\
        B: \n\
        A: 雨が降る。\tIt rains.#ID=5_6\n\
        B: 雨 が 降る\n\
        A:  彼は忙しい。 \tHe's busy.#ID=7_8\n\
        B: 彼(かれ)[01] は 忙しい\n\
        A: タブのない行\n\
        B: 行\n\
        \n\
        A: 猫だ。\tA cat.#ID=9_10\r\n\
        B: 猫 だ\r\n";

    #[test]
    fn a_lines_parse_into_distinct_japanese_sentences() {
        let p = parse(SAMPLE);
        assert_eq!(p.sentences, ["彼は忙しい。", "雨が降る。", "猫だ。"]);
        assert_eq!((p.read, p.empty, p.without_tab, p.duplicates), (6, 1, 1, 1));
        assert_eq!(parse(""), Parsed::default());
    }

    #[test]
    fn the_split_is_deterministic_disjoint_and_independent_of_order() {
        let sentences: Vec<String> = (0..500).map(|i| format!("文{i}です。")).collect();
        let s = split(&sentences, 40);
        assert_eq!((s.train.len(), s.valid.len(), s.dev.len()), (420, 40, 40));
        assert_eq!(s, split(&sentences, 40));
        let mut all: Vec<usize> = [&s.train[..], &s.valid[..], &s.dev[..]].concat();
        all.sort_unstable();
        assert_eq!(all, (0..500).collect::<Vec<_>>());
        for part in [&s.train, &s.valid, &s.dev] {
            assert!(
                part.windows(2).all(|w| w[0] < w[1]),
                "each part in file order"
            );
        }
        // The same sentences in another order: the same sentences held out.
        let reversed: Vec<String> = sentences.iter().rev().cloned().collect();
        let r = split(&reversed, 40);
        let texts = |ss: &[String], ids: &[usize]| {
            let mut t: Vec<String> = ids.iter().map(|&i| ss[i].clone()).collect();
            t.sort();
            t
        };
        assert_eq!(texts(&sentences, &s.valid), texts(&reversed, &r.valid));
        assert_eq!(texts(&sentences, &s.dev), texts(&reversed, &r.dev));
        // Fewer sentences than held out: nothing is lost.
        let few = split(&sentences[..50], 40);
        assert_eq!(
            (few.train.len(), few.valid.len(), few.dev.len()),
            (0, 40, 10)
        );
        assert_eq!(split_key("彼は忙しい。"), split_key("彼は忙しい。"));
        assert_ne!(split_key("彼は忙しい。"), split_key("彼は忙しい"));
    }

    #[test]
    fn a_corpus_file_with_another_digest_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE), b"not the corpus").unwrap();
        let err = source(Some(dir.path()), dir.path())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&dir.path().join(FILE).display().to_string()),
            "{err}"
        );
        assert!(
            err.contains(SHA256) && err.contains("examples.utf.xz"),
            "{err}"
        );
        assert!(verify(Path::new("x"), b"", "fix").is_err());
    }

    #[test]
    fn bytes_that_are_not_xz_are_refused_by_name() {
        let err = decompress(b"not xz", Path::new("some/examples.utf.xz"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("some/examples.utf.xz") && err.contains("not an xz file"),
            "{err}"
        );
        assert_eq!(split_key("猫だ。"), seeded_key(SPLIT_SEED, "猫だ。"));
        assert_ne!(seeded_key(1, "猫だ。"), seeded_key(2, "猫だ。"));
    }
}
