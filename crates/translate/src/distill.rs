//! Sequence-level knowledge distillation (Kim & Rush 2016), as the OpenNMT WNMT-2018 system
//! trains its small students: a teacher re-translates every training source sentence with beam
//! search, and the student is trained on those translations in place of the references.
//!
//! [`distill`] writes `out/train.{tgt}` (line `i` is the teacher's translation of training
//! source line `i`) and `out/distill.json` ([`DistillStats`], written last: its presence means
//! the folder is complete). Long runs resume: finished lines go to `train.{tgt}.partial` in
//! chunks, and a new run continues after the last whole chunk. Sentences are split over
//! threads, each decoding batches on its own; the output never depends on the split (a
//! translation does not depend on its batch).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use fastsoftmax_infer::files::{sha256_hex, write_atomic};
use fastsoftmax_infer::{Error, Result};
use serde::{Deserialize, Serialize};

use crate::beam::{SearchOptions, Translation};
use crate::engine::Profile;
use crate::transformer::TransformerTranslator;
use crate::{ServeOptions, Served, Translator};

/// Either translator behind one call: what a teacher (or any command that decodes) needs.
pub trait TranslateLines: Sync {
    /// Per line its `n_best` translations; line `i` of the result translates line `i`.
    fn translate_lines(
        &self,
        lines: &[&str],
        opts: &SearchOptions,
    ) -> Result<Vec<Vec<Translation>>>;
    /// How it cuts source text into tokens.
    fn src_tokenizer(&self) -> &crate::tokenizer::Tokenizer;
    /// The language pair it was trained for, when its artifact records one.
    fn languages(&self) -> Option<&crate::artifact::Languages>;
}

impl TranslateLines for Translator {
    fn translate_lines(
        &self,
        lines: &[&str],
        opts: &SearchOptions,
    ) -> Result<Vec<Vec<Translation>>> {
        self.translate(lines, opts, &mut Profile::default())
    }
    fn src_tokenizer(&self) -> &crate::tokenizer::Tokenizer {
        Translator::src_tokenizer(self)
    }
    fn languages(&self) -> Option<&crate::artifact::Languages> {
        Translator::languages(self)
    }
}

impl TranslateLines for TransformerTranslator {
    fn translate_lines(
        &self,
        lines: &[&str],
        opts: &SearchOptions,
    ) -> Result<Vec<Vec<Translation>>> {
        self.translate(lines, opts)
    }
    fn src_tokenizer(&self) -> &crate::tokenizer::Tokenizer {
        TransformerTranslator::src_tokenizer(self)
    }
    fn languages(&self) -> Option<&crate::artifact::Languages> {
        TransformerTranslator::languages(self)
    }
}

/// True when `dir` holds a Transformer translator (by its manifest's `format`); a missing or
/// unreadable manifest reads as the recurrent kind, whose loader then names the problem.
pub fn is_transformer(dir: &Path) -> bool {
    std::fs::read(dir.join(crate::artifact::MANIFEST_FILE))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .is_some_and(|m| m["format"] == crate::transformer::FORMAT)
}

/// A translator directory of either kind, loaded by its manifest's format and served as it
/// ships ([`Served`]).
pub fn load_any(dir: &Path) -> Result<Box<dyn TranslateLines>> {
    Ok(Box::new(Served::open(dir, &ServeOptions::default())?))
}

impl TranslateLines for Served {
    fn translate_lines(
        &self,
        lines: &[&str],
        opts: &SearchOptions,
    ) -> Result<Vec<Vec<Translation>>> {
        self.lines().translate_lines(lines, opts)
    }
    fn src_tokenizer(&self) -> &crate::tokenizer::Tokenizer {
        self.lines().src_tokenizer()
    }
    fn languages(&self) -> Option<&crate::artifact::Languages> {
        self.lines().languages()
    }
}

/// How to distil.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DistillOptions {
    /// The teacher's search (the paper: beam 5, one best).
    pub search: SearchOptions,
    /// Sentences per decoding batch.
    pub batch: usize,
    /// Threads decoding at once.
    pub threads: usize,
    /// Sentences per checkpointed chunk.
    pub chunk: usize,
}

impl Default for DistillOptions {
    fn default() -> Self {
        DistillOptions {
            search: SearchOptions::default(),
            batch: 32,
            threads: 1,
            chunk: 2048,
        }
    }
}

/// `distill.json`: what was distilled, by which teacher, how fast.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DistillStats {
    pub teacher: String,
    pub beam: usize,
    pub sentences: usize,
    /// SHA-256 of the training source the translations belong to (`train-nmt --distilled`
    /// refuses them for another source file).
    pub source_sha256: String,
    /// Target words the teacher wrote.
    pub words: usize,
    /// Lines whose translation is empty (the source was empty or the teacher ended at once).
    pub empty: usize,
    /// Decoding seconds of this run (a resumed run counts its own part only).
    pub seconds: f64,
    pub threads: usize,
}

/// The file names of a distilled folder for target language `tgt`.
pub fn files(out: &Path, tgt: &str) -> (PathBuf, PathBuf, PathBuf) {
    (
        out.join(format!("train.{tgt}")),
        out.join(format!("train.{tgt}.partial")),
        out.join("distill.json"),
    )
}

/// Translates `sources` (the lines of `source_file`) with `teacher` into `out` (see the
/// module docs); `progress(done, total)` after each chunk. A folder that is already complete
/// for the same source is left alone and its stats returned.
pub fn distill(
    teacher: &dyn TranslateLines,
    teacher_name: &str,
    source_file: &Path,
    out: &Path,
    tgt: &str,
    opts: &DistillOptions,
    mut progress: impl FnMut(usize, usize),
) -> Result<DistillStats> {
    opts.search.check()?;
    if opts.batch == 0 || opts.threads == 0 || opts.chunk == 0 {
        return Err(Error::Invalid(
            "distillation needs a batch, threads and chunk of at least 1".into(),
        ));
    }
    let text = std::fs::read_to_string(source_file).map_err(|e| Error::io(source_file, e))?;
    let source_sha256 = sha256_hex(text.as_bytes());
    let lines: Vec<&str> = text.lines().collect();
    std::fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;
    let (done_path, partial_path, stats_path) = files(out, tgt);
    if let Ok(json) = std::fs::read_to_string(&stats_path) {
        if let Ok(stats) = serde_json::from_str::<DistillStats>(&json) {
            if stats.source_sha256 == source_sha256 && done_path.exists() {
                return Ok(stats);
            }
        }
        return Err(Error::Invalid(format!(
            "{} is not a finished distillation of {} (another source, or a damaged file); choose another --out or delete the folder",
            stats_path.display(),
            source_file.display()
        )));
    }
    // Resume after the whole chunks already written.
    let mut written: Vec<String> = match std::fs::read_to_string(&partial_path) {
        Ok(t) => t.lines().map(str::to_string).collect(),
        Err(_) => Vec::new(),
    };
    written.truncate(written.len() / opts.chunk * opts.chunk);
    let mut partial =
        std::fs::File::create(&partial_path).map_err(|e| Error::io(&partial_path, e))?;
    for l in &written {
        writeln!(partial, "{l}").map_err(|e| Error::io(&partial_path, e))?;
    }
    let started = Instant::now();
    let total = lines.len();
    progress(written.len(), total);
    let mut first = written.len();
    while first < total {
        let chunk = &lines[first..(first + opts.chunk).min(total)];
        let per_thread = chunk.len().div_ceil(opts.threads);
        let parts: Vec<Result<Vec<String>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = chunk
                .chunks(per_thread)
                .map(|part| {
                    scope.spawn(move || -> Result<Vec<String>> {
                        let mut texts = Vec::with_capacity(part.len());
                        for batch in part.chunks(opts.batch) {
                            let out = teacher.translate_lines(batch, &opts.search)?;
                            texts.extend(out.into_iter().map(|mut n| {
                                n.drain(..).next().map(|t| t.text).unwrap_or_default()
                            }));
                        }
                        Ok(texts)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a distillation thread panicked"))
                .collect()
        });
        for part in parts {
            for t in part? {
                // A translation is one line: a newline inside would shift every later line.
                let t = t.replace(['\n', '\r'], " ");
                writeln!(partial, "{t}").map_err(|e| Error::io(&partial_path, e))?;
                written.push(t);
            }
        }
        partial.flush().map_err(|e| Error::io(&partial_path, e))?;
        first += chunk.len();
        progress(first, total);
    }
    drop(partial);
    std::fs::rename(&partial_path, &done_path).map_err(|e| Error::io(&done_path, e))?;
    let stats = DistillStats {
        teacher: teacher_name.to_string(),
        beam: opts.search.beam,
        sentences: total,
        source_sha256,
        words: written.iter().map(|l| crate::text::tokenize(l).len()).sum(),
        empty: written.iter().filter(|l| l.trim().is_empty()).count(),
        seconds: started.elapsed().as_secs_f64(),
        threads: opts.threads,
    };
    let json = serde_json::to_vec_pretty(&stats).expect("stats serialize");
    write_atomic(&stats_path, &json)?;
    Ok(stats)
}

/// Checks that `dir` holds a complete distillation of `source_file` for language `tgt` and
/// returns its translations (what `train-nmt --distilled` trains on).
pub fn read_distilled(dir: &Path, source_file: &Path, tgt: &str) -> Result<Vec<String>> {
    let (done_path, partial_path, stats_path) = files(dir, tgt);
    let json = std::fs::read_to_string(&stats_path).map_err(|e| {
        let hint = if partial_path.exists() {
            "the distillation did not finish; run `fastsoftmax distill` again to complete it"
        } else {
            "distil a teacher into it first (`fastsoftmax distill`)"
        };
        Error::Invalid(format!("{}: {e}; {hint}", stats_path.display()))
    })?;
    let stats: DistillStats = serde_json::from_str(&json)
        .map_err(|e| Error::Invalid(format!("{}: corrupt ({e})", stats_path.display())))?;
    let source = std::fs::read(source_file).map_err(|e| Error::io(source_file, e))?;
    if sha256_hex(&source) != stats.source_sha256 {
        return Err(Error::Invalid(format!(
            "{} translates another training source than {}; distil this one",
            dir.display(),
            source_file.display()
        )));
    }
    let text = std::fs::read_to_string(&done_path).map_err(|e| Error::io(&done_path, e))?;
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    if lines.len() != stats.sentences {
        return Err(Error::Invalid(format!(
            "{} has {} lines, distill.json says {}; distil again",
            done_path.display(),
            lines.len(),
            stats.sentences
        )));
    }
    Ok(lines)
}
