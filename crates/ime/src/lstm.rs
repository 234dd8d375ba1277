//! The LSTM language model as the decoder's [`Scorer`], with the full softmax: every new
//! hypothesis state pays one product over the whole vocabulary for its normaliser `log Z`
//! (the paper's "LSTM baseline w/ batch": the states of a keystroke share one batched product).
//! A word's log-probability is then its own logit minus `log Z`: one dot product.

use std::rc::Rc;
use std::time::{Duration, Instant};

use fastsoftmax_infer::kernels::dot;
use fastsoftmax_infer::kernels::rows::ExactRows;
use fastsoftmax_infer::{log_sum_exp, LanguageModel, LmState, Result};

use crate::decode::Scorer;

/// A hypothesis' LM state: the recurrent state after its last word and that context's `log Z`.
/// Shared (`Rc`) because hypotheses are cloned far more often than they advance.
#[derive(Clone)]
pub struct LstmState(Rc<(LmState, f32)>);

impl LstmState {
    /// The context vector `[d]` the output layer scores.
    pub fn context(&self) -> &[f32] {
        self.0 .0.context()
    }

    pub fn log_z(&self) -> f32 {
        self.0 .1
    }
}

/// The LM state after the sentence start, `<eos>` read (each scorer checks that its LM has
/// the word when it is made, so the step cannot fail).
pub(crate) fn sentence_start(lm: &LanguageModel, eos: u32) -> LmState {
    let mut s = lm.new_state();
    let _ = lm.step(eos, &mut s);
    s
}

/// The recurrent states after each `(state, word)`, stepped as one batch.
pub(crate) fn step_each<'s>(
    lm: &LanguageModel,
    from: impl Iterator<Item = (&'s LmState, u32)>,
) -> Vec<LmState> {
    let (mut states, words): (Vec<LmState>, Vec<u32>) = from.map(|(s, w)| (s.clone(), w)).unzip();
    // Lattice words carry ids of this LM's vocabulary.
    let _ = lm.step_batch(&words, &mut states);
    states
}

/// Time spent per part, for the per-keystroke report.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timers {
    /// Recurrent steps.
    pub lstm: Duration,
    /// Normalisers and word logits.
    pub softmax: Duration,
}

pub struct LstmScorer<'a> {
    lm: &'a LanguageModel,
    rows: ExactRows,
    eos: u32,
    /// `[n, vocab]` logits of a batch of new states.
    logits: Vec<f32>,
    contexts: Vec<f32>,
    pub timers: Timers,
    /// Logits computed for normalisers (vocabulary × contexts).
    pub normaliser_rows: u64,
    /// Self-normalised: `log Z` taken as 0, no normaliser computed.
    self_normalised: bool,
}

impl<'a> LstmScorer<'a> {
    /// `lm` scores sentences that start after its `<eos>` (as it was trained: one sentence per
    /// line, `<eos>` between them).
    pub fn new(lm: &'a LanguageModel) -> Result<Self> {
        let eos = lm.vocab().get("<eos>").ok_or_else(|| {
            fastsoftmax_infer::Error::Invalid(
                "the language model has no <eos> word: train it on one sentence per line".into(),
            )
        })?;
        Ok(LstmScorer {
            lm,
            rows: ExactRows::new(lm.full_head().matrix(), None),
            eos,
            logits: Vec::new(),
            contexts: Vec::new(),
            timers: Timers::default(),
            normaliser_rows: 0,
            self_normalised: false,
        })
    }

    /// The scorer of a model trained with self-normalisation (`train.self_norm`): a word's
    /// log-probability is its logit, `log Z` being taught to be 0, so no normaliser is
    /// computed at all. On a model trained without it the scores are not probabilities.
    pub fn self_normalised(lm: &'a LanguageModel) -> Result<Self> {
        let mut s = Self::new(lm)?;
        s.self_normalised = true;
        Ok(s)
    }

    pub fn model(&self) -> &LanguageModel {
        self.lm
    }

    /// `log Z` of each context `[n, d]`, one batched product over the vocabulary.
    fn normalisers(&mut self, n: usize) -> Vec<f32> {
        if self.self_normalised {
            return vec![0.0; n];
        }
        let t = Instant::now();
        let v = self.lm.vocab().len();
        self.normaliser_rows += (n * v) as u64;
        self.logits.resize(n * v, 0.0);
        self.lm
            .full_head()
            .matrix()
            .logits_batch(&self.contexts, &mut self.logits);
        let z = self
            .logits
            .chunks_exact(v)
            .map(|l| log_sum_exp(l) as f32)
            .collect();
        self.timers.softmax += t.elapsed();
        z
    }
}

impl Scorer for LstmScorer<'_> {
    type State = LstmState;

    fn initial(&mut self) -> LstmState {
        let s = sentence_start(self.lm, self.eos);
        self.contexts.clear();
        self.contexts.extend_from_slice(s.context());
        let z = self.normalisers(1)[0];
        LstmState(Rc::new((s, z)))
    }

    fn log_probs(&mut self, state: &LstmState, words: &[u32], out: &mut [f32]) {
        let t = Instant::now();
        let h = state.context();
        for (o, &w) in out.iter_mut().zip(words) {
            let (row, bias) = self.rows.row(w as usize);
            *o = dot(row, h) + bias - state.log_z();
        }
        self.timers.softmax += t.elapsed();
    }

    fn advance(&mut self, from: &[(&LstmState, u32)]) -> Vec<LstmState> {
        let t = Instant::now();
        let states = step_each(self.lm, from.iter().map(|&(s, w)| (&s.0 .0, w)));
        self.contexts.clear();
        for s in &states {
            self.contexts.extend_from_slice(s.context());
        }
        self.timers.lstm += t.elapsed();
        let z = self.normalisers(states.len());
        states
            .into_iter()
            .zip(z)
            .map(|(s, z)| LstmState(Rc::new((s, z))))
            .collect()
    }

    fn end(&self) -> u32 {
        self.eos
    }
}
