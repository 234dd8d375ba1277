//! Viterbi beam decoding over the lattice, one kana at a time (the paper's section 3).
//!
//! `frames[t]` holds the best `B` hypotheses covering the first `t` kana, each with its
//! language-model state. A new kana adds `D_t` to the lattice; every node `(i → t, w)` extends
//! every hypothesis of `frames[i]` by `ln p(w | state)`; the best `B` form `frames[t]`, and their
//! states advance by `w` in one batch. Backspace drops the last frame, so the earlier frames
//! are never recomputed.

use std::collections::HashMap;
use std::sync::Arc;

use crate::lattice::{Lattice, Lexicon, Node, NodeKind};
use crate::mozc::{Class, PathCosts, BOUNDARY};

/// A language model as the decoder drives it. `&mut self` lets a scorer keep caches and timers.
pub trait Scorer {
    type State: Clone;
    /// The state before the first word (after the sentence start, or after text converted
    /// before).
    fn initial(&mut self) -> Self::State;
    /// `out[k] = ln p(words[k] | state)`.
    fn log_probs(&mut self, state: &Self::State, words: &[u32], out: &mut [f32]);
    /// The state after each `(state, word)`, computed as one batch.
    fn advance(&mut self, from: &[(&Self::State, u32)]) -> Vec<Self::State>;
    /// The end-of-sentence word, scored after the last kana.
    fn end(&self) -> u32;

    /// Vocabulary selection (the paper's Algorithm 1), for scorers whose normalisers cover only
    /// the words the lattice has shown so far. Called before kana `key`'s nodes are scored
    /// (`key` = kana typed, 1-based) with the LM ids of its nodes (`D_key`) and the states of
    /// the frames whose hypotheses may still be extended (`live`): the scorer drops what it
    /// selected for kana `key` and later (after a backspace), adds `words`, and repairs the
    /// normalisers of `live`. Returns whether any normaliser of `live` changed, in which case
    /// the decoder recomputes the path scores of those frames from [`Scorer::log_z`].
    fn select(&mut self, _key: usize, _words: &[u32], _live: &[&Self::State]) -> bool {
        false
    }

    /// `ln Z` of `state` as [`Scorer::log_probs`] subtracts it now: `log_probs(w) = logit(w) −
    /// log_z`. Only a scorer whose [`Scorer::select`] changes normalisers needs it.
    fn log_z(&self, _state: &Self::State) -> f32 {
        0.0
    }

    /// Up to `k` words likely after `state`, best first, from what the scorer computed for the
    /// state already (incremental vocabulary selection: its fixed sample's logits): next-word
    /// prediction without a softmax over the vocabulary. Empty when it has nothing that cheap.
    fn predict(&mut self, _state: &Self::State, _k: usize) -> Vec<u32> {
        Vec::new()
    }
}

/// A borrowed scorer drives a decoder too: a [`crate::Session`] over a scorer its caller keeps
/// (to read its timers afterwards).
impl<S: Scorer + ?Sized> Scorer for &mut S {
    type State = S::State;
    fn initial(&mut self) -> Self::State {
        (**self).initial()
    }
    fn log_probs(&mut self, state: &Self::State, words: &[u32], out: &mut [f32]) {
        (**self).log_probs(state, words, out)
    }
    fn advance(&mut self, from: &[(&Self::State, u32)]) -> Vec<Self::State> {
        (**self).advance(from)
    }
    fn end(&self) -> u32 {
        (**self).end()
    }
    fn select(&mut self, key: usize, words: &[u32], live: &[&Self::State]) -> bool {
        (**self).select(key, words, live)
    }
    fn log_z(&self, state: &Self::State) -> f32 {
        (**self).log_z(state)
    }
    fn predict(&mut self, state: &Self::State, k: usize) -> Vec<u32> {
        (**self).predict(state, k)
    }
}

/// How words outside the LM's vocabulary are scored: `ln p(<unk> | h) + ln p(w | <unk>)`, where
/// `p(w | <unk>)` is Witten–Bell smoothing of the word's count among the training tokens the LM
/// reads as `<unk>`, with a character model of their displays as the base distribution:
///
/// `p(w | <unk>) = (c(w) + T · p_char(w)) / (N + T)`, `N` tokens of `T` distinct words.
///
/// A rare word the training text holds thus outranks an unseen one of the same spelling.
/// `p_char` is a character bigram model (from the word's start to its end, Witten–Bell
/// interpolated with add-one unigrams): it knows that katakana follows katakana and that no
/// word starts with ー, so an unknown loanword is read whole rather than cut into kana pieces.
#[derive(Debug, Clone)]
pub struct Spelling {
    pub unk: u32,
    /// `ln p_uni(c)` of the characters seen.
    unigrams: HashMap<char, f32>,
    /// `ln p_uni` of a character never seen.
    unseen: f32,
    /// `ln p_uni(end of word)`.
    end: f32,
    /// `ln p(c | a)` of the pairs seen (`START`/`END` included).
    pairs: HashMap<(char, char), f32>,
    /// `ln` of the weight `T(a) / (n(a) + T(a))` a history gives the unigrams.
    backoff: HashMap<char, f32>,
    /// `N`: training tokens outside the vocabulary.
    tokens: u64,
    /// `T`: distinct words among them.
    types: u64,
}

/// Word boundaries in the character model (never in a display: C0 controls).
const START: char = '\u{2}';
const END: char = '\u{3}';

impl Spelling {
    /// The model of `words` (`(display, count)`, the training words the LM reads as `<unk>`).
    pub fn estimate<'a>(unk: u32, words: impl IntoIterator<Item = (&'a str, u64)>) -> Self {
        let mut chars: HashMap<char, u64> = HashMap::new();
        let mut pair_counts: HashMap<(char, char), u64> = HashMap::new();
        let (mut n_chars, mut n_words, mut types) = (0u64, 0u64, 0u64);
        for (display, count) in words {
            let mut prev = START;
            for c in display.chars() {
                *chars.entry(c).or_default() += count;
                n_chars += count;
                *pair_counts.entry((prev, c)).or_default() += count;
                prev = c;
            }
            *pair_counts.entry((prev, END)).or_default() += count;
            n_words += count;
            types += (count > 0) as u64;
        }
        // Unigrams: add-one over the characters seen, the end with the words' mean length.
        let total = (n_chars + chars.len() as u64 + 1) as f32;
        let p_end = (n_words.max(1) as f32 / (n_chars + n_words).max(1) as f32).min(0.99);
        let cont = (1.0 - p_end).ln();
        let mut model = Spelling {
            unk,
            unigrams: chars
                .into_iter()
                .map(|(c, n)| (c, ((n + 1) as f32 / total).ln() + cont))
                .collect(),
            unseen: (1.0 / total).ln() + cont,
            end: p_end.ln(),
            pairs: HashMap::new(),
            backoff: HashMap::new(),
            tokens: n_words,
            types,
        };
        // Bigrams, Witten–Bell: p(c | a) = (n(a c) + T(a) p_uni(c)) / (n(a) + T(a)).
        let mut history: HashMap<char, (u64, u64)> = HashMap::new();
        for (&(a, _), &n) in &pair_counts {
            let h = history.entry(a).or_default();
            h.0 += n;
            h.1 += (n > 0) as u64;
        }
        for (&(a, c), &n) in &pair_counts {
            let (n_a, t_a) = history[&a];
            let p = (n as f64 + t_a as f64 * (model.unigram(c) as f64).exp()) / (n_a + t_a) as f64;
            model.pairs.insert((a, c), p.ln() as f32);
        }
        for (a, (n_a, t_a)) in history {
            if t_a > 0 {
                let w = t_a as f64 / (n_a + t_a) as f64;
                model.backoff.insert(a, w.ln() as f32);
            }
        }
        model
    }

    /// A model with no data: every character `ln p = char`, the end `ln p = end` (fixtures).
    pub fn uniform(unk: u32, char: f32, end: f32) -> Self {
        Spelling {
            unk,
            unigrams: HashMap::new(),
            unseen: char,
            end,
            pairs: HashMap::new(),
            backoff: HashMap::new(),
            tokens: 0,
            types: 0,
        }
    }

    fn unigram(&self, c: char) -> f32 {
        if c == END {
            self.end
        } else {
            self.unigrams.get(&c).copied().unwrap_or(self.unseen)
        }
    }

    /// `ln p(c | a)`.
    fn next(&self, a: char, c: char) -> f32 {
        if let Some(&p) = self.pairs.get(&(a, c)) {
            return p;
        }
        self.backoff.get(&a).copied().unwrap_or(0.0) + self.unigram(c)
    }

    /// `ln p_char(display)` under the character model, the word's end included.
    pub fn log_prob(&self, display: &str) -> f32 {
        let mut prev = START;
        let mut lp = 0.0;
        for c in display.chars().chain([END]) {
            lp += self.next(prev, c);
            prev = c;
        }
        lp
    }

    /// `ln p(w | <unk>)` of a word seen `count` times in the training text (0: a dictionary
    /// word the text lacks).
    pub fn log_prob_word(&self, display: &str, count: u64) -> f32 {
        let t = self.types.max(1) as f64;
        let p_char = (self.log_prob(display) as f64).exp();
        ((count as f64 + t * p_char) / (self.tokens as f64 + t)).ln() as f32
    }
}

/// Frames whose normalisers a selecting scorer keeps repairing, and whose paths it rescores:
/// the last 8 kana (and any older frame a new word starts from). Older frames keep the
/// normalisers they had, so the work per key stays bounded on a long unconverted input.
/// Measured on the 1,850 KWDLC sentences (IVS, top 400 + tail): windows of 8 and 64 give the
/// same conversions, and 8 spends 30 % less time in the softmax.
pub const REPAIR_WINDOW: usize = 8;

#[derive(Debug, Clone)]
struct Hyp<S> {
    score: f32,
    /// The last word's score without its context's normaliser (`score = parent's score +
    /// logit − log_z(parent's state)`), kept so a repaired normaliser can rescore the path.
    logit: f32,
    state: S,
    /// Frame and hypothesis extended, and the node (index into the lattice's `ends[t − 1]`).
    back: Option<(usize, usize, usize)>,
    /// Mozc's right POS id of the last word (the sentence boundary at the start), for the
    /// connection cost of the next ([`crate::mozc::PathCosts`]).
    rid: u16,
}

/// One conversion candidate.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// The words' displays joined.
    pub text: String,
    /// `(display, reading)` per word.
    pub words: Vec<(String, String)>,
    /// Each word's lattice node (`start` in the decoder's kana).
    pub nodes: Vec<Node>,
    /// `ln p` of the path, end of sentence (or the word after it) included.
    pub score: f32,
}

/// Where a decode starts: the LM state after the text before it and Mozc's right POS id of that
/// text's last word ([`BOUNDARY`] at a sentence start).
#[derive(Clone)]
pub struct Start<St> {
    pub state: St,
    pub rid: u16,
}

/// The converter's search state for the kana typed so far.
pub struct Decoder<S: Scorer> {
    beam: usize,
    /// Shared: a session's decoders over spans of its input score with the same model.
    spelling: Arc<Spelling>,
    lattice: Lattice,
    frames: Vec<Vec<Hyp<S::State>>>,
    /// Whether each kana's words are handed to [`Scorer::select`]; a decoder over a span of an
    /// input another decoder has shown the scorer does not, so that one's selection stays.
    selects: bool,
}

impl<S: Scorer> Decoder<S> {
    /// An empty input; `beam` hypotheses per frame (the paper: 10).
    pub fn new(scorer: &mut S, beam: usize, spelling: impl Into<Arc<Spelling>>) -> Self {
        Self::with_lattice(scorer, beam, spelling, Lattice::new())
    }

    /// As [`Decoder::new`], over `lattice` (empty; e.g. [`Lattice::with_katakana`]).
    pub fn with_lattice(
        scorer: &mut S,
        beam: usize,
        spelling: impl Into<Arc<Spelling>>,
        lattice: Lattice,
    ) -> Self {
        let start = Hyp {
            score: 0.0,
            logit: 0.0,
            state: scorer.initial(),
            back: None,
            rid: BOUNDARY,
        };
        Decoder {
            beam: beam.max(1),
            spelling: spelling.into(),
            lattice,
            frames: vec![vec![start]],
            selects: true,
        }
    }

    /// A decoder over kana that follow `start`, for a span of an input that another decoder
    /// (with the same scorer) has already decoded: it leaves the scorer's selection alone, since
    /// every word its lattice meets was selected for that input. What a segment's alternatives
    /// and a resized segment are decoded with.
    pub fn over_span(
        beam: usize,
        spelling: Arc<Spelling>,
        lattice: Lattice,
        start: Start<S::State>,
    ) -> Self {
        Decoder {
            beam: beam.max(1),
            spelling,
            lattice,
            frames: vec![vec![Hyp::from(start)]],
            selects: false,
        }
    }

    pub fn lattice(&self) -> &Lattice {
        &self.lattice
    }

    /// Adds one kana: its lattice nodes, then `frames[t]`.
    pub fn push(&mut self, kana: char, lexicon: &Lexicon, scorer: &mut S) {
        self.lattice.push(kana, lexicon);
        let t = self.lattice.len();
        // Each node's LM id and extra score, once.
        let scored = self.node_words(t, lexicon);
        if self.selects {
            let ids: Vec<u32> = scored.iter().map(|&(id, _)| id).collect();
            self.select(t, &ids, scorer);
        }
        let nodes = self.lattice.ending_at(t);
        // Mozc's class of each node, when its costs score paths.
        let costs = lexicon.path_costs();
        let classes: Vec<NodeClasses> = match costs {
            Some(_) => nodes.iter().map(|n| classes_of(n, lexicon)).collect(),
            None => Vec::new(),
        };
        // (score, logit, frame, hyp, node, lm id, right POS id), best `beam` kept.
        let mut cands: Vec<(f32, f32, usize, usize, usize, u32, u16)> = Vec::new();
        let mut words = Vec::new();
        let mut extra = Vec::new();
        let mut lp = Vec::new();
        // Nodes by start frame, so each hypothesis scores all its words in one call.
        let mut starts: Vec<usize> = nodes.iter().map(|n| n.start).collect();
        starts.sort_unstable();
        starts.dedup();
        for &start in &starts {
            words.clear();
            extra.clear();
            let of_start: Vec<usize> = (0..nodes.len())
                .filter(|&k| nodes[k].start == start)
                .collect();
            for &k in &of_start {
                words.push(scored[k].0);
                extra.push(scored[k].1);
            }
            lp.resize(words.len(), 0.0);
            for (j, hyp) in self.frames[start].iter().enumerate() {
                scorer.log_probs(&hyp.state, &words, &mut lp);
                let log_z = scorer.log_z(&hyp.state);
                for (w, &k) in of_start.iter().enumerate() {
                    let (mozc, rid) =
                        costs.map_or((0.0, BOUNDARY), |c| mozc_score(c, hyp.rid, &classes[k]));
                    let score = hyp.score + lp[w] + extra[w] + mozc;
                    if score.is_finite() {
                        let logit = lp[w] + extra[w] + mozc + log_z;
                        cands.push((score, logit, start, j, k, words[w], rid));
                    }
                }
            }
        }
        // Best first; ties keep the earlier candidate.
        cands.sort_by(|a, b| b.0.total_cmp(&a.0));
        cands.truncate(self.beam);
        let from: Vec<(&S::State, u32)> = cands
            .iter()
            .map(|&(_, _, f, j, _, id, _)| (&self.frames[f][j].state, id))
            .collect();
        let states = scorer.advance(&from);
        let frame = cands
            .iter()
            .zip(states)
            .map(|(&(score, logit, f, j, k, _, rid), state)| Hyp {
                score,
                logit,
                state,
                back: Some((f, j, k)),
                rid,
            })
            .collect();
        self.frames.push(frame);
    }

    /// Removes the last kana (backspace): the lattice and the hypotheses roll back (and a
    /// selecting scorer's vocabulary and normalisers with them).
    pub fn pop(&mut self, lexicon: &Lexicon, scorer: &mut S) -> Option<char> {
        if self.lattice.is_empty() {
            return None;
        }
        self.frames.pop();
        let kana = self.lattice.pop();
        let t = self.lattice.len();
        if t > 0 && self.selects {
            let ids: Vec<u32> = self.node_words(t, lexicon).iter().map(|w| w.0).collect();
            self.select(t, &ids, scorer);
        }
        kana
    }

    /// Drops the whole input; the next kana starts from the state the input started from (the
    /// sentence start, or the last committed text).
    pub fn clear(&mut self) {
        self.frames.truncate(1);
        while self.lattice.pop().is_some() {}
    }

    /// Commits `text`, one of the input's [`Decoder::n_best`] conversions: the input is cleared
    /// and what is typed next is converted after it, from the LM state of the best hypothesis
    /// that spells it (the paper's state carried over). With `end_sentence` that state also
    /// reads the end-of-sentence word, so the next input starts a new sentence. Returns false,
    /// changing nothing, when no hypothesis of the input spells `text`.
    pub fn commit(
        &mut self,
        text: &str,
        end_sentence: bool,
        lexicon: &Lexicon,
        scorer: &mut S,
    ) -> bool {
        let Some(mut start) = self.starts_along(text, lexicon).and_then(|mut s| s.pop()) else {
            return false;
        };
        if end_sentence {
            start = end_sentence_after(start, scorer);
        }
        self.restart(start);
        true
    }

    /// Drops the input and starts the next from `start` (text committed some other way: a
    /// conversion edited segment by segment).
    pub fn restart(&mut self, start: Start<S::State>) {
        self.clear();
        self.frames[0] = vec![Hyp::from(start)];
    }

    /// Where the input starts from.
    pub fn origin(&self) -> Start<S::State> {
        let h = &self.frames[0][0];
        Start {
            state: h.state.clone(),
            rid: h.rid,
        }
    }

    /// The starts along the best hypothesis spelling `text` (one of [`Decoder::n_best`]):
    /// `starts[i]` precedes word `i`, the last follows the last word. `None` when no hypothesis
    /// of the whole input spells `text`.
    pub fn starts_along(&self, text: &str, lexicon: &Lexicon) -> Option<Vec<Start<S::State>>> {
        let t = self.lattice.len();
        if t == 0 {
            return None;
        }
        let best = (0..self.frames[t].len())
            .filter(|&j| {
                let words = self.path(t, j, lexicon);
                words.iter().map(|(d, _)| d.as_str()).collect::<String>() == text
            })
            .max_by(|&a, &b| self.frames[t][a].score.total_cmp(&self.frames[t][b].score))?;
        let (mut f, mut j) = (t, best);
        let mut starts = Vec::new();
        loop {
            let h = &self.frames[f][j];
            starts.push(Start {
                state: h.state.clone(),
                rid: h.rid,
            });
            match h.back {
                Some((pf, pj, _)) => (f, j) = (pf, pj),
                None => break,
            }
        }
        starts.reverse();
        Some(starts)
    }

    /// `start` advanced through `nodes` (words the user fixed, or text typed as is), one LM step
    /// per word: where the text after them starts.
    pub fn advance_through(
        &self,
        mut start: Start<S::State>,
        nodes: &[Node],
        lexicon: &Lexicon,
        scorer: &mut S,
    ) -> Start<S::State> {
        for node in nodes {
            let (id, _) = self.word_of(node, lexicon);
            if let Some(c) = lexicon.path_costs() {
                start.rid = mozc_score(c, start.rid, &classes_of(node, lexicon)).1;
            }
            start.state = scorer.advance(&[(&start.state, id)]).remove(0);
        }
        start
    }

    /// Hands the scorer kana `t`'s words (the LM ids of its nodes) and the live states
    /// ([`Scorer::select`]), and rescores the paths through repaired normalisers.
    fn select(&mut self, t: usize, words: &[u32], scorer: &mut S) {
        let nodes = self.lattice.ending_at(t);
        // The frames of the window, and any older frame a node starts from.
        let first = t.saturating_sub(REPAIR_WINDOW);
        let mut frames: Vec<usize> = nodes
            .iter()
            .map(|n| n.start)
            .filter(|&s| s < first)
            .collect();
        frames.sort_unstable();
        frames.dedup();
        // After a backspace the last frame (t) holds hypotheses too.
        let last = self.frames.len();
        frames.extend(first..last);
        let live: Vec<&S::State> = frames
            .iter()
            .flat_map(|&f| self.frames[f].iter().map(|h| &h.state))
            .collect();
        if !scorer.select(t, words, &live) {
            return;
        }
        // Parents come first, so each frame rescores from its parents' new scores.
        for f in first.max(1)..last {
            let (before, rest) = self.frames.split_at_mut(f);
            for hyp in &mut rest[0] {
                if let Some((pf, pj, _)) = hyp.back {
                    let parent = &before[pf][pj];
                    hyp.score = parent.score + hyp.logit - scorer.log_z(&parent.state);
                }
            }
        }
    }

    /// The LM id and extra score of each node ending after kana `t`.
    fn node_words(&self, t: usize, lexicon: &Lexicon) -> Vec<(u32, f32)> {
        let nodes = self.lattice.ending_at(t);
        nodes.iter().map(|n| self.word_of(n, lexicon)).collect()
    }

    /// The LM id and extra score of a node.
    fn word_of(&self, node: &Node, lexicon: &Lexicon) -> (u32, f32) {
        match &node.kind {
            NodeKind::Word(id) => {
                let w = lexicon.word(*id);
                (w.lm_id, w.extra)
            }
            NodeKind::Passthrough(c) => {
                let mut buf = [0u8; 4];
                (
                    self.spelling.unk,
                    self.spelling.log_prob_word(c.encode_utf8(&mut buf), 0),
                )
            }
            NodeKind::Katakana(k) | NodeKind::Literal(k) => {
                (self.spelling.unk, self.spelling.log_prob_word(k, 0))
            }
            NodeKind::User(u) => (u.lm_id, u.extra),
        }
    }

    /// The `n` best distinct conversions of the whole input, best first (end of sentence
    /// scored). Empty input gives no candidates.
    pub fn n_best(&self, n: usize, lexicon: &Lexicon, scorer: &mut S) -> Vec<Candidate> {
        self.n_best_before(n, Then::End, lexicon, scorer)
            .into_iter()
            .map(|(c, _)| c)
            .collect()
    }

    /// The `n` best distinct conversions of the input followed by `then`, each with where the
    /// text after it starts.
    pub fn n_best_before(
        &self,
        n: usize,
        then: Then,
        lexicon: &Lexicon,
        scorer: &mut S,
    ) -> Vec<(Candidate, Start<S::State>)> {
        let t = self.lattice.len();
        if t == 0 {
            return Vec::new();
        }
        let next = match then {
            Then::End => Some((scorer.end(), 0.0, None)),
            Then::Word(node) => {
                let (id, extra) = self.word_of(node, lexicon);
                Some((id, extra, Some(classes_of(node, lexicon))))
            }
            Then::Open => None,
        };
        let mut lp = [0.0f32];
        let mut finals: Vec<(f32, usize)> = self.frames[t]
            .iter()
            .enumerate()
            .map(|(j, h)| {
                let Some((id, extra, classes)) = &next else {
                    return (h.score, j);
                };
                scorer.log_probs(&h.state, &[*id], &mut lp);
                let mozc = lexicon.path_costs().map_or(0.0, |c| match classes {
                    Some(classes) => mozc_score(c, h.rid, classes).0,
                    None => c.end(h.rid),
                });
                (h.score + lp[0] + extra + mozc, j)
            })
            .collect();
        finals.sort_by(|a, b| b.0.total_cmp(&a.0));
        let mut out: Vec<(Candidate, Start<S::State>)> = Vec::new();
        for (score, j) in finals {
            let (words, nodes) = self.path_nodes(t, j, lexicon);
            let text: String = words.iter().map(|(d, _)| d.as_str()).collect();
            if out.iter().all(|(c, _)| c.text != text) {
                let h = &self.frames[t][j];
                let end = Start {
                    state: h.state.clone(),
                    rid: h.rid,
                };
                let candidate = Candidate {
                    text,
                    words,
                    nodes,
                    score,
                };
                out.push((candidate, end));
                if out.len() == n {
                    break;
                }
            }
        }
        out
    }

    /// `(display, reading)` of the words of hypothesis `j` of frame `t`, first word first.
    fn path(&self, t: usize, j: usize, lexicon: &Lexicon) -> Vec<(String, String)> {
        self.path_nodes(t, j, lexicon).0
    }

    /// [`Decoder::path`] and the words' nodes.
    #[allow(clippy::type_complexity)]
    fn path_nodes(
        &self,
        mut t: usize,
        mut j: usize,
        lexicon: &Lexicon,
    ) -> (Vec<(String, String)>, Vec<Node>) {
        let mut words = Vec::new();
        let mut nodes = Vec::new();
        while let Some((f, prev, k)) = self.frames[t][j].back {
            let node = &self.lattice.ending_at(t)[k];
            let reading: String = self.lattice.kana()[node.start..t].iter().collect();
            words.push((Lattice::display(node, lexicon).into_owned(), reading));
            nodes.push(node.clone());
            (t, j) = (f, prev);
        }
        words.reverse();
        nodes.reverse();
        (words, nodes)
    }
}

impl<St> From<Start<St>> for Hyp<St> {
    fn from(start: Start<St>) -> Self {
        Hyp {
            score: 0.0,
            logit: 0.0,
            state: start.state,
            back: None,
            rid: start.rid,
        }
    }
}

/// `start` after the end-of-sentence word: the next text starts a sentence.
pub fn end_sentence_after<S: Scorer>(start: Start<S::State>, scorer: &mut S) -> Start<S::State> {
    let end = scorer.end();
    Start {
        state: scorer.advance(&[(&start.state, end)]).remove(0),
        rid: BOUNDARY,
    }
}

/// What follows the kana a candidate converts, scored with it.
#[derive(Debug, Clone, Copy)]
pub enum Then<'a> {
    /// The end of the sentence (a whole input).
    End,
    /// A word fixed after it (the next segment's first word).
    Word(&'a Node),
    /// Nothing scored (the text after it is being decoded anew).
    Open,
}

/// Mozc's classes of a lattice node.
enum NodeClasses<'a> {
    /// A word's classes (the best connecting one is taken).
    Word(&'a [Class]),
    /// A word Mozc lacks, or a passthrough kana: the unknown class.
    Unknown,
    /// A katakana span of this many kana: the unknown class at its cost per kana.
    Span(usize),
}

/// Mozc's classes of a node. Mozc offers no unknown span whole, so a katakana span pays the
/// unknown cost per kana: charged once, a long span would be cheaper than the words it covers.
fn classes_of<'a>(node: &'a Node, lexicon: &'a Lexicon) -> NodeClasses<'a> {
    match &node.kind {
        NodeKind::Word(id) if !lexicon.classes(*id).is_empty() => {
            NodeClasses::Word(lexicon.classes(*id))
        }
        NodeKind::User(u) if !u.classes.is_empty() => NodeClasses::Word(&u.classes),
        NodeKind::Word(_) | NodeKind::Passthrough(_) | NodeKind::User(_) => NodeClasses::Unknown,
        NodeKind::Katakana(k) | NodeKind::Literal(k) => NodeClasses::Span(k.chars().count()),
    }
}

/// Mozc's score of a node after a word of right id `rid`, and the right id it leaves.
fn mozc_score(costs: &PathCosts, rid: u16, classes: &NodeClasses) -> (f32, u16) {
    match classes {
        NodeClasses::Word(c) => costs.best(rid, c),
        NodeClasses::Unknown => (costs.word(rid, costs.unknown), costs.unknown.rid),
        NodeClasses::Span(n) => (costs.span(rid, *n), costs.unknown.rid),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seen_rare_words_outrank_unseen_ones_and_mass_stays_below_one() {
        let s = Spelling::estimate(1, [("猫", 3), ("犬", 1), ("猫又", 1)]);
        assert_eq!((s.tokens, s.types), (5, 3));
        assert!(s.log_prob_word("猫", 3) > s.log_prob_word("犬", 1));
        assert!(s.log_prob_word("犬", 1) > s.log_prob_word("犬", 0));
        // Witten–Bell: the seen words take N / (N + T) and leave T / (N + T) to the rest.
        let seen: f64 = [("猫", 3), ("犬", 1), ("猫又", 1)]
            .iter()
            .map(|&(d, c)| (s.log_prob_word(d, c) as f64).exp())
            .sum();
        assert!(seen > 5.0 / 8.0 && seen < 1.0, "{seen}");
    }

    /// The character model is a distribution over words, and its bigrams prefer the spellings
    /// the words showed: a word may end in ー but not start with it.
    #[test]
    fn character_bigrams_sum_to_one_and_learn_order() {
        let s = Spelling::estimate(1, [("ラー", 2), ("ラズ", 1), ("ズラー", 1)]);
        // All strings over {ラ, ズ, ー} up to length 8 (and an unseen character) carry almost
        // all the mass; longer ones the rest.
        let alphabet = ['ラ', 'ズ', 'ー', '猫'];
        let mut total = 0.0f64;
        let mut frontier = vec![String::new()];
        for _ in 0..8 {
            let mut next = Vec::new();
            for w in &frontier {
                for c in alphabet {
                    let v = format!("{w}{c}");
                    total += (s.log_prob(&v) as f64).exp();
                    next.push(v);
                }
            }
            frontier = next;
        }
        assert!(total < 1.0 + 1e-3, "{total}");
        assert!(s.log_prob("ラー") > s.log_prob("ーラ"));
        assert!(s.log_prob("ズラー") > s.log_prob("ズーラ"));
    }
}
