//! Beam search over a batch of sentences: the live hypotheses of every sentence are the rows of
//! one decoder step (one matrix product per layer for all of them), each sentence keeps its own
//! beam, finished hypotheses shrink it (so a sentence stops once it holds `beam` of them), and
//! scores are length-normalised (`log p / len^α`).

use std::time::Instant;

use fastsoftmax_infer::{log_sum_exp_top_k, Error, Result, TopK, K_MAX};

use crate::engine::{lap, Encoded, Output, Profile, Scratch, Shortlist, Translator};
use crate::placeholder::{Masked, Placeholder, Placeholders};
use crate::text;
use crate::vmap::Shortlister;

/// How to search and what to return.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchOptions {
    /// Hypotheses kept per sentence, 1 (greedy) to 10.
    pub beam: usize,
    /// Translations returned per sentence (at most `beam`).
    pub n_best: usize,
    /// α of the length normalisation `log p / len^α` (0: none; 1: mean log-probability).
    pub length_norm: f32,
    /// Source sentences longer than this many tokens are cut to it (a warning is the caller's).
    pub max_source_tokens: usize,
    /// Replace each `<unk>` of the output by the source word the decoder attended to most.
    pub replace_unk: bool,
    /// Never the same word twice in a row: a small student loops on a word it is unsure of
    /// ("in foreign foreign words"), and references rarely repeat one (35 pairs in the Tanaka
    /// corpus's 143,868 English sentences, 46 in the Bible's 29,216 German verses). Off by
    /// default, so the recorded results stay reproducible; measured in
    /// `experiments/results/nmt-distill.md`.
    pub block_repeats: bool,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            beam: 5,
            n_best: 1,
            length_norm: 1.0,
            max_source_tokens: 250,
            replace_unk: true,
            block_repeats: false,
        }
    }
}

impl SearchOptions {
    /// The words a search reads from each row: the beam's, and one more for the repeat that
    /// `block_repeats` may take out (it cannot reach a beam of `beam` otherwise).
    pub(crate) fn top_k(&self) -> usize {
        self.beam + usize::from(self.block_repeats)
    }

    /// Why these options cannot run, if they cannot.
    pub fn check(&self) -> Result<()> {
        if !(1..=K_MAX).contains(&self.beam) {
            return Err(Error::Invalid(format!(
                "beam size {} is outside 1..={K_MAX}; use --beam 1 for greedy decoding, 5 for the usual beam",
                self.beam
            )));
        }
        if !(1..=self.beam).contains(&self.n_best) {
            return Err(Error::Invalid(format!(
                "n-best {} must be between 1 and the beam size {}",
                self.n_best, self.beam
            )));
        }
        if !self.length_norm.is_finite() || self.length_norm < 0.0 {
            return Err(Error::Invalid(format!(
                "length normalisation α = {} must be a finite number ≥ 0",
                self.length_norm
            )));
        }
        if self.max_source_tokens == 0 {
            return Err(Error::Invalid(
                "max_source_tokens must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

/// Which sentences share a vocabulary-map shortlist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VmapScope {
    /// One shortlist per sentence: each sentence's rows score only its own n-grams' words, so
    /// a translation does not depend on the batch it was decoded in, and the work per row
    /// stays at one sentence's shortlist however large the batch.
    #[default]
    Sentence,
    /// One shortlist per batch, the union over its sentences (the OpenNMT paper's way and
    /// CTranslate2's): fewer, larger products, but a sentence's translation can change with
    /// the sentences it is batched with, and the union grows with the batch.
    Batch,
}

/// One translation of a sentence.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Translation {
    /// Detokenized text, with the symbols set aside from the source's edges around it.
    pub text: String,
    /// Target tokens (after `<unk>` and stand-in replacement), without `<eos>`.
    pub tokens: Vec<String>,
    /// Target ids, without `<eos>`.
    pub ids: Vec<u32>,
    /// Total log-probability (with `<eos>`).
    pub log_prob: f64,
    /// `log_prob / len^α`, what the beam ranks by.
    pub score: f64,
}

/// A source line made ready for the encoder.
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    /// Tokens of the line (cut to `max_source_tokens`).
    pub tokens: Vec<String>,
    /// Their ids and `<eos>`.
    pub ids: Vec<u32>,
    /// Tokens cut off the end.
    pub truncated: usize,
    /// What stand-ins replaced before tokenizing and what was set aside from the line's
    /// edges, put back in the translation ([`crate::placeholder`]); the line itself when the
    /// translator has no stand-ins.
    pub masked: Masked,
    /// The line as given, the stand-in tables it was masked with and the token limit: what
    /// a retry with other stand-ins needs ([`Source::with_next_stand_ins`]).
    line: String,
    placeholders: Option<Placeholders>,
    max_tokens: usize,
}

impl Source {
    /// `line` cut into `tokenizer`'s tokens (at most `max_tokens`), their ids in `vocab`
    /// (`<unk>` for unknown ones) and `<eos>`; with `placeholders`, what its tokenizer cannot
    /// read (Latin runs, emoji) replaced by stand-ins or set aside first.
    pub fn new(
        line: &str,
        tokenizer: &crate::tokenizer::Tokenizer,
        vocab: &fastsoftmax_infer::Vocab,
        max_tokens: usize,
        placeholders: Option<Placeholders>,
    ) -> Source {
        let (mut tokens, masked) = match placeholders {
            Some(p) => {
                // A run the tokenizer reads as one known piece is a word it learnt.
                let known_run = |run: &str| match tokenizer.tokenize_normalized(run).as_slice() {
                    [piece] => vocab.get(piece).is_some(),
                    _ => false,
                };
                let masked = p.mask(&tokenizer.normalize(line), known_run, |c| {
                    tokenizer.knows_char(c)
                });
                // The stand-ins are NFKC text already.
                (tokenizer.tokenize_normalized(&masked.line), masked)
            }
            None => (
                tokenizer.tokenize(line),
                Masked {
                    line: line.to_string(),
                    ..Masked::default()
                },
            ),
        };
        let truncated = tokens.len().saturating_sub(max_tokens);
        tokens.truncate(max_tokens);
        let mut ids: Vec<u32> = tokens.iter().map(|t| vocab.id_or_unk(t)).collect();
        ids.push(vocab.eos());
        Source {
            tokens,
            ids,
            truncated,
            masked,
            line: line.to_string(),
            placeholders,
            max_tokens,
        }
    }

    /// The same line with each stand-in table's next choice, if that changes what the
    /// translator reads.
    pub fn with_next_stand_ins(
        &self,
        tokenizer: &crate::tokenizer::Tokenizer,
        vocab: &fastsoftmax_infer::Vocab,
    ) -> Option<Source> {
        let next = self.placeholders?.next_round();
        let retry = Source::new(&self.line, tokenizer, vocab, self.max_tokens, Some(next));
        (retry.masked.line != self.masked.line).then_some(retry)
    }
}

/// `search`'s translations of `sources`, where each line whose best translation dropped a
/// stand-in (no word of it is the stand-in's, so the run it replaced is lost: `35度` →
/// "five degrees") is searched once more with each table's next stand-in
/// (`retry`), and the second search's translations are kept when they drop fewer.
pub(crate) fn search_keeping_stand_ins(
    sources: &[Source],
    tgt_vocab: &fastsoftmax_infer::Vocab,
    retry: impl Fn(&Source) -> Option<Source>,
    mut search: impl FnMut(&[Source]) -> Result<Vec<Vec<Translation>>>,
) -> Result<Vec<Vec<Translation>>> {
    let dropped = |src: &Source, nbest: &[Translation]| {
        nbest.first().map_or(0, |t| {
            let words = t.ids.iter().map(|&id| tgt_vocab.word(id));
            src.masked.dropped(words)
        })
    };
    let mut results = search(sources)?;
    let (lines, again): (Vec<usize>, Vec<Source>) = (0..sources.len())
        .filter(|&i| dropped(&sources[i], &results[i]) > 0)
        .filter_map(|i| Some((i, retry(&sources[i])?)))
        .unzip();
    if again.is_empty() {
        return Ok(results);
    }
    for ((i, nbest), src) in lines.into_iter().zip(search(&again)?).zip(&again) {
        if dropped(src, &nbest) < dropped(&sources[i], &results[i]) {
            results[i] = nbest;
        }
    }
    Ok(results)
}

#[derive(Debug, Clone)]
pub(crate) struct Hyp {
    ids: Vec<u32>,
    attended: Vec<u32>,
    log_prob: f64,
}

impl Hyp {
    /// No words: what an empty source translates to.
    pub fn empty() -> Hyp {
        Hyp {
            ids: Vec::new(),
            attended: Vec::new(),
            log_prob: 0.0,
        }
    }
}

/// The bookkeeping of a batch's beams, shared by the recurrent and the Transformer engines:
/// the live rows (each a hypothesis of one sentence, grouped by sentence in order), the words
/// they feed to the next step, and each sentence's finished hypotheses. A finished hypothesis
/// takes a beam slot, so a sentence stops once it holds `beam` of them; a sentence's rows
/// stop at `max_len` tokens.
pub(crate) struct Beams {
    k: usize,
    block_repeats: bool,
    alpha: f64,
    eos: u32,
    max_len: Vec<usize>,
    /// Per live row: its sentence.
    pub sentence: Vec<usize>,
    hyps: Vec<Hyp>,
    /// Per live row: the word it feeds to the next step.
    pub prev: Vec<u32>,
    finished: Vec<Vec<(f64, Hyp)>>,
    step: usize,
}

impl Beams {
    /// One row per sentence, each starting from `eos`; `max_len[s]` tokens at most.
    pub fn new(max_len: Vec<usize>, opts: &SearchOptions, eos: u32) -> Beams {
        let n = max_len.len();
        Beams {
            k: opts.beam,
            block_repeats: opts.block_repeats,
            alpha: opts.length_norm as f64,
            eos,
            max_len,
            sentence: (0..n).collect(),
            hyps: vec![Hyp::empty(); n],
            prev: vec![eos; n],
            finished: vec![Vec::new(); n],
            step: 0,
        }
    }

    /// True when no row is live.
    pub fn is_done(&self) -> bool {
        self.prev.is_empty()
    }

    /// After a step over the live rows: each row's `top` words (`word(row, id)` maps a top's id
    /// to a target id) and log-normaliser, and the source position it attended to most. Picks
    /// per sentence the best children of its rows; returns the parent row of each new row.
    pub fn advance(
        &mut self,
        tops: &[TopK],
        log_z: &[f64],
        word: impl Fn(usize, u32) -> u32,
        attended: impl Fn(usize) -> u32,
    ) -> Vec<usize> {
        let n = self.prev.len();
        let (mut parents, mut hyps, mut prev, mut sentence) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut r = 0;
        while r < n {
            let s = self.sentence[r];
            let mut end = r;
            while end < n && self.sentence[end] == s {
                end += 1;
            }
            let mut cands: Vec<(f64, usize, u32)> = Vec::with_capacity((end - r) * self.k);
            for (row, top) in tops.iter().enumerate().take(end).skip(r) {
                for sc in top.as_slice() {
                    let id = word(row, sc.id);
                    if self.block_repeats && self.step > 0 && id == self.prev[row] {
                        continue;
                    }
                    let lp = sc.logit as f64 - log_z[row];
                    cands.push((self.hyps[row].log_prob + lp, row, id));
                }
            }
            // Best first; ties to the earlier row, then the lower id (greedy = argmax).
            cands.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
            let room = self.k - self.finished[s].len();
            let last = self.step + 1 >= self.max_len[s];
            for &(lp, row, id) in cands.iter().take(room) {
                let mut h = self.hyps[row].clone();
                h.log_prob = lp;
                if id != self.eos {
                    h.ids.push(id);
                    h.attended.push(attended(row));
                }
                if id == self.eos || last {
                    let score = h.log_prob / ((h.ids.len() + 1) as f64).powf(self.alpha);
                    self.finished[s].push((score, h));
                } else {
                    parents.push(row);
                    hyps.push(h);
                    prev.push(id);
                    sentence.push(s);
                }
            }
            r = end;
        }
        (self.hyps, self.prev, self.sentence) = (hyps, prev, sentence);
        self.step += 1;
        parents
    }

    /// Each sentence's finished hypotheses with their scores, best first.
    pub fn finished(self) -> Vec<Vec<(f64, Hyp)>> {
        let mut all = self.finished;
        for f in &mut all {
            f.sort_by(|a, b| b.0.total_cmp(&a.0));
        }
        all
    }
}

/// A finished hypothesis as a translation: `<unk>` replaced by the source token its step
/// attended to most (when `replace_unk`), stand-ins by the text they replaced, detokenized,
/// the symbols set aside from the source's edges around it.
pub(crate) fn translation(
    vocab: &fastsoftmax_infer::Vocab,
    h: Hyp,
    score: f64,
    src: &Source,
    replace_unk: bool,
) -> Translation {
    let unk = vocab.unk();
    let tokens: Vec<String> = h
        .ids
        .iter()
        .zip(&h.attended)
        .map(|(&id, &pos)| match src.tokens.get(pos as usize) {
            Some(word) if replace_unk && id == unk => word.clone(),
            _ => {
                let word = vocab.word(id);
                // Any case: a stand-in's word opens a sentence capitalised ("Winter is …").
                let stand_in = |p: &&Placeholder| p.target.eq_ignore_ascii_case(word);
                match src.masked.placeholders.iter().find(stand_in) {
                    Some(p) => p.output.clone(),
                    None => word.to_string(),
                }
            }
        })
        .collect();
    // A word that ends in its own period ("3 p.m.") ends the sentence without a second one.
    let period_after = |i: usize| i > 0 && tokens[i - 1].len() > 1 && tokens[i - 1].ends_with('.');
    let words: Vec<&str> = (0..tokens.len())
        .filter(|&i| !(tokens[i] == "." && period_after(i)))
        .map(|i| tokens[i].as_str())
        .collect();
    Translation {
        text: src.masked.wrap(&text::detokenize(&words)),
        tokens,
        ids: h.ids,
        log_prob: h.log_prob,
        score,
    }
}

impl Translator {
    /// Tokenizes a source line, maps unknown words to `<unk>`, cuts it to
    /// `max_source_tokens` and appends `<eos>`.
    pub fn source(&self, line: &str, max_source_tokens: usize) -> Source {
        Source::new(
            line,
            self.src_tokenizer(),
            self.src_vocab(),
            max_source_tokens,
            Placeholders::for_languages(self.languages()),
        )
    }

    /// Translates a batch of prepared sources; per source its `n_best` translations, best
    /// first. An empty source (no tokens) translates to one empty translation. A line whose
    /// translation dropped a stand-in is tried once more with others
    /// ([`search_keeping_stand_ins`]).
    pub fn search(
        &self,
        sources: &[Source],
        opts: &SearchOptions,
        profile: &mut Profile,
    ) -> Result<Vec<Vec<Translation>>> {
        search_keeping_stand_ins(
            sources,
            self.tgt_vocab(),
            |s| s.with_next_stand_ins(self.src_tokenizer(), self.src_vocab()),
            |s| self.search_once(s, opts, profile),
        )
    }

    /// [`Translator::search`] without the retry.
    fn search_once(
        &self,
        sources: &[Source],
        opts: &SearchOptions,
        profile: &mut Profile,
    ) -> Result<Vec<Vec<Translation>>> {
        opts.check()?;
        let mut results: Vec<Vec<Translation>> = vec![Vec::new(); sources.len()];
        // Sentences with tokens go through the network; empty lines stay empty.
        let active: Vec<usize> = (0..sources.len())
            .filter(|&i| !sources[i].tokens.is_empty())
            .collect();
        for (i, s) in sources.iter().enumerate() {
            if s.tokens.is_empty() {
                results[i].push(translation(self.tgt_vocab(), Hyp::empty(), 0.0, s, false));
            }
        }
        if active.is_empty() {
            return Ok(results);
        }
        let mut clock = Instant::now();
        let srcs: Vec<&[u32]> = active.iter().map(|&i| sources[i].ids.as_slice()).collect();
        let encoded: Vec<Encoded> = self.encode_batch(&srcs)?;
        profile.encoder += lap(&mut clock);
        let (lists, of_sentence) = match self.vocab_map() {
            Some((map, scope)) => {
                let tokens: Vec<&[String]> = active
                    .iter()
                    .map(|&i| sources[i].tokens.as_slice())
                    .collect();
                self.shortlists(map, scope, &tokens)
            }
            None => (Vec::new(), Vec::new()),
        };
        let output = match (self.vocab_map(), self.screen()) {
            (Some(_), Some(screen)) => {
                return Err(Error::Invalid(format!(
                "both a vocabulary map and the screening head {} are set; decode with one of them",
                screen.name()
            )))
            }
            (Some(_), None) => Output::Shortlists {
                lists: &lists,
                of_sentence: &of_sentence,
            },
            (None, Some(screen)) => Output::Screened(screen),
            (None, None) => Output::Full,
        };
        profile.output += lap(&mut clock);

        let (d_h, d_a) = (self.spec().d_hidden, self.spec().d_attn);
        let k = opts.top_k();
        let mut rows = self.initial_rows(&encoded);
        let max_len = encoded.iter().map(|e| 2 * e.len + 10).collect();
        let mut beams = Beams::new(max_len, opts, self.tgt_vocab().eos());
        let mut scratch = Scratch::default();
        let mut tops: Vec<TopK> = Vec::new();
        let mut log_z: Vec<f64> = Vec::new();
        while !beams.is_done() {
            profile.beam += lap(&mut clock);
            self.step(
                &beams.prev,
                &mut rows,
                &encoded,
                output,
                &mut scratch,
                profile,
            );
            let mut clock_out = Instant::now();
            let n = rows.len();
            tops.resize_with(n, || TopK::new(k));
            log_z.resize(n, 0.0);
            for r in 0..n {
                tops[r].reset(k);
                log_z[r] = log_sum_exp_top_k(scratch.row_logits(r), Some(&mut tops[r]));
            }
            profile.output += lap(&mut clock_out);
            clock = Instant::now();
            let parents = beams.advance(
                &tops[..n],
                &log_z[..n],
                |row, id| output.word(scratch.list[row], id as usize),
                |row| scratch.attended[row],
            );
            rows = rows.gather(&parents, d_h, d_a);
        }
        for (fin, &i) in beams.finished().into_iter().zip(&active) {
            results[i] = fin
                .into_iter()
                .take(opts.n_best)
                .map(|(score, h)| {
                    translation(self.tgt_vocab(), h, score, &sources[i], opts.replace_unk)
                })
                .collect();
        }
        profile.beam += lap(&mut clock);
        Ok(results)
    }

    /// The shortlists of a batch's sentences (`tokens`) and which one each sentence uses.
    fn shortlists(
        &self,
        map: &Shortlister,
        scope: VmapScope,
        tokens: &[&[String]],
    ) -> (Vec<Shortlist>, Vec<usize>) {
        match scope {
            VmapScope::Batch => (
                vec![self.shortlist(&map.shortlist(tokens))],
                vec![0; tokens.len()],
            ),
            VmapScope::Sentence => (
                tokens
                    .iter()
                    .map(|t| self.shortlist(&map.shortlist(&[*t])))
                    .collect(),
                (0..tokens.len()).collect(),
            ),
        }
    }

    /// Translates lines of text (one sentence each) in batches of `batch` sentences; per line
    /// its `n_best` translations. Line `i` of the result is the translation of line `i`.
    pub fn translate(
        &self,
        lines: &[&str],
        opts: &SearchOptions,
        profile: &mut Profile,
    ) -> Result<Vec<Vec<Translation>>> {
        let sources: Vec<Source> = lines
            .iter()
            .map(|l| self.source(l, opts.max_source_tokens))
            .collect();
        self.search(&sources, opts, profile)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Greedy over a fixed table of per-step logits (words 1–3, `<eos>` = 0): each step the
    /// single row scores `steps[t]`.
    fn greedy(steps: &[[f32; 4]], block_repeats: bool) -> Vec<u32> {
        let opts = SearchOptions {
            beam: 1,
            block_repeats,
            ..SearchOptions::default()
        };
        let mut beams = Beams::new(vec![steps.len()], &opts, 0);
        for logits in steps {
            if beams.is_done() {
                break;
            }
            let mut top = TopK::new(opts.top_k());
            for (id, &l) in logits.iter().enumerate() {
                top.push(id as u32, l);
            }
            beams.advance(&[top], &[0.0], |_, id| id, |_| 0);
        }
        let (_, h) = beams.finished().remove(0).remove(0);
        h.ids
    }

    #[test]
    fn block_repeats_takes_the_next_word_instead_of_the_last_one_again() {
        // Word 2 is best twice in a row; then `<eos>`.
        let steps = [
            [0.0, 1.0, 3.0, 0.5],
            [0.0, 1.0, 3.0, 0.5],
            [5.0, 0.0, 0.0, 0.0],
        ];
        assert_eq!(greedy(&steps, false), [2, 2]);
        assert_eq!(greedy(&steps, true), [2, 1]);
        // A repeat two steps apart is no repeat.
        let steps = [
            [0.0, 1.0, 3.0, 0.5],
            [0.0, 3.0, 1.0, 0.5],
            [0.0, 1.0, 3.0, 0.5],
            [5.0, 0.0, 0.0, 0.0],
        ];
        assert_eq!(greedy(&steps, true), [2, 1, 2]);
    }
}
