//! Linear interpolation of language models over one vocabulary, `p(w | h) = Σ λ_i p_i(w | h)`,
//! with the weights fitted by EM on held-out text: domain adaptation (a general model and an
//! in-domain one) and model combination (the LSTM with an n-gram model).

use crate::decode::Scorer;

/// EM for the weights of a mixture from each model's probability of every held-out token
/// (`probs[t][i]` = `p_i(token t | its history)`): starts from equal weights, 50 rounds.
/// Returns one weight per model, summing to 1 (equal weights when there is nothing to fit).
pub fn em_weights(probs: &[Vec<f64>]) -> Vec<f64> {
    let k = probs.first().map_or(1, Vec::len).max(1);
    let mut lambda = vec![1.0 / k as f64; k];
    for _ in 0..50 {
        let mut next = vec![0.0; k];
        for p in probs {
            let total: f64 = p.iter().zip(&lambda).map(|(p, l)| p * l).sum();
            if total > 0.0 {
                for i in 0..k {
                    next[i] += lambda[i] * p[i] / total;
                }
            }
        }
        let sum: f64 = next.iter().sum();
        if sum <= 0.0 {
            break;
        }
        lambda = next.into_iter().map(|x| x / sum).collect();
    }
    lambda
}

/// [`em_weights`] from one column of token probabilities per model (`columns[i][t]`, as
/// [`token_probs`] gives them); equal weights when there are no tokens.
pub fn fit_weights(columns: &[Vec<f64>]) -> Vec<f64> {
    let k = columns.len().max(1);
    let tokens = columns.first().map_or(0, Vec::len);
    if tokens == 0 {
        return vec![1.0 / k as f64; k];
    }
    let rows: Vec<Vec<f64>> = (0..tokens)
        .map(|t| columns.iter().map(|c| c[t]).collect())
        .collect();
    em_weights(&rows)
}

/// Each token's probability under `scorer`, over `sentences` (each ended by the scorer's end
/// word, each from the initial state): one row of [`em_weights`]'s input per model.
pub fn token_probs<S: Scorer>(scorer: &mut S, sentences: &[Vec<u32>]) -> Vec<f64> {
    let end = scorer.end();
    let mut out = Vec::new();
    let mut lp = [0.0f32];
    for sentence in sentences {
        let mut state = scorer.initial();
        for (i, &w) in sentence.iter().chain([&end]).enumerate() {
            scorer.log_probs(&state, &[w], &mut lp);
            out.push((lp[0] as f64).exp());
            if i < sentence.len() {
                state = scorer.advance(&[(&state, w)]).remove(0);
            }
        }
    }
    out
}

/// The state of two scorers run side by side.
type PairState<A, B> = (<A as Scorer>::State, <B as Scorer>::State);

/// Advances a pair of scorers' states by the same words, each as one batch.
fn advance_both<A: Scorer, B: Scorer>(
    a: &mut A,
    b: &mut B,
    from: &[(&PairState<A, B>, u32)],
) -> Vec<PairState<A, B>> {
    let next_a = a.advance(&from.iter().map(|&(s, w)| (&s.0, w)).collect::<Vec<_>>());
    let next_b = b.advance(&from.iter().map(|&(s, w)| (&s.1, w)).collect::<Vec<_>>());
    next_a.into_iter().zip(next_b).collect()
}

/// `a`'s log-probabilities of `words` into `out`, `b`'s into `scratch`.
fn log_probs_both<A: Scorer, B: Scorer>(
    a: &mut A,
    b: &mut B,
    scratch: &mut Vec<f32>,
    state: &PairState<A, B>,
    words: &[u32],
    out: &mut [f32],
) {
    a.log_probs(&state.0, words, out);
    scratch.resize(words.len(), 0.0);
    b.log_probs(&state.1, words, scratch);
}

/// Two scorers over one vocabulary as one: `p = λ p_a + (1 − λ) p_b`.
pub struct Interpolated<A, B> {
    pub a: A,
    pub b: B,
    /// The weight of `a`, in `[0, 1]`.
    pub lambda: f32,
    scratch: Vec<f32>,
}

impl<A: Scorer, B: Scorer> Interpolated<A, B> {
    /// `a` and `b` must share the vocabulary and the end word.
    pub fn new(a: A, b: B, lambda: f32) -> Self {
        Interpolated {
            a,
            b,
            lambda: lambda.clamp(0.0, 1.0),
            scratch: Vec::new(),
        }
    }
}

impl<A: Scorer, B: Scorer> Scorer for Interpolated<A, B> {
    type State = (A::State, B::State);

    fn initial(&mut self) -> Self::State {
        (self.a.initial(), self.b.initial())
    }

    fn log_probs(&mut self, state: &Self::State, words: &[u32], out: &mut [f32]) {
        log_probs_both(
            &mut self.a,
            &mut self.b,
            &mut self.scratch,
            state,
            words,
            out,
        );
        let (la, lb) = (self.lambda.ln(), (1.0 - self.lambda).ln());
        for (o, &b) in out.iter_mut().zip(&self.scratch) {
            // ln(λ e^a + (1 − λ) e^b), stable.
            let (x, y) = (*o + la, b + lb);
            let m = x.max(y);
            *o = if m == f32::NEG_INFINITY {
                m
            } else {
                m + ((x - m).exp() + (y - m).exp()).ln()
            };
        }
    }

    fn advance(&mut self, from: &[(&Self::State, u32)]) -> Vec<Self::State> {
        advance_both(&mut self.a, &mut self.b, from)
    }

    fn end(&self) -> u32 {
        self.a.end()
    }
}

/// Two scorers over one vocabulary as one log-linear score: `ln p_a + μ ln p_b` (not a
/// distribution; the decoder only compares paths). Unlike [`Interpolated`] it keeps `a`'s
/// normalisers apart, so `a` may select its vocabulary ([`Scorer::select`]) and the decoder
/// repairs paths exactly: the LSTM with incremental vocabulary selection beside an n-gram model.
pub struct LogLinear<A, B> {
    pub a: A,
    pub b: B,
    /// The weight `μ` of `b`.
    pub mu: f32,
    scratch: Vec<f32>,
}

impl<A: Scorer, B: Scorer> LogLinear<A, B> {
    /// `a` and `b` must share the vocabulary and the end word.
    pub fn new(a: A, b: B, mu: f32) -> Self {
        LogLinear {
            a,
            b,
            mu,
            scratch: Vec::new(),
        }
    }
}

impl<A: Scorer, B: Scorer> Scorer for LogLinear<A, B> {
    type State = (A::State, B::State);

    fn initial(&mut self) -> Self::State {
        (self.a.initial(), self.b.initial())
    }

    fn log_probs(&mut self, state: &Self::State, words: &[u32], out: &mut [f32]) {
        log_probs_both(
            &mut self.a,
            &mut self.b,
            &mut self.scratch,
            state,
            words,
            out,
        );
        for (o, &b) in out.iter_mut().zip(&self.scratch) {
            *o += self.mu * b;
        }
    }

    fn advance(&mut self, from: &[(&Self::State, u32)]) -> Vec<Self::State> {
        advance_both(&mut self.a, &mut self.b, from)
    }

    fn end(&self) -> u32 {
        self.a.end()
    }

    fn select(&mut self, key: usize, words: &[u32], live: &[&Self::State]) -> bool {
        let live: Vec<&A::State> = live.iter().map(|s| &s.0).collect();
        self.a.select(key, words, &live)
    }

    fn log_z(&self, state: &Self::State) -> f32 {
        self.a.log_z(&state.0)
    }

    fn predict(&mut self, state: &Self::State, k: usize) -> Vec<u32> {
        self.a.predict(&state.0, k)
    }
}

/// A scorer that may be absent: absent, every word scores `ln 1 = 0` and the state is `None`.
/// The second part of a [`LogLinear`] a converter may not ship (its end word is the first
/// part's).
impl<S: Scorer> Scorer for Option<S> {
    type State = Option<S::State>;

    fn initial(&mut self) -> Self::State {
        self.as_mut().map(|s| s.initial())
    }

    fn log_probs(&mut self, state: &Self::State, words: &[u32], out: &mut [f32]) {
        match (self, state) {
            (Some(s), Some(state)) => s.log_probs(state, words, out),
            _ => out.fill(0.0),
        }
    }

    fn advance(&mut self, from: &[(&Self::State, u32)]) -> Vec<Self::State> {
        match self {
            Some(s) => {
                let from: Vec<(&S::State, u32)> = from
                    .iter()
                    .filter_map(|&(state, w)| state.as_ref().map(|state| (state, w)))
                    .collect();
                s.advance(&from).into_iter().map(Some).collect()
            }
            None => vec![None; from.len()],
        }
    }

    fn end(&self) -> u32 {
        self.as_ref().map_or(0, |s| s.end())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kn::{KnScorer, KneserNey};

    // Words: 0 = <s>/</s>, 1 = a, 2 = b, 3 = c.
    fn models() -> (KneserNey, KneserNey) {
        let general = vec![vec![1, 2], vec![1, 3], vec![2, 3], vec![1, 2, 3]];
        let local = vec![vec![3, 3, 1]; 4];
        (
            KneserNey::estimate(&general, 2, 4, 0, 0).unwrap(),
            KneserNey::estimate(&local, 2, 4, 0, 0).unwrap(),
        )
    }

    /// An absent second part leaves the first one's scores and states as they are.
    #[test]
    fn log_linear_without_its_second_part_is_the_first() {
        let (g, l) = models();
        let mut alone = KnScorer::new(&g);
        let mut with: LogLinear<KnScorer, Option<KnScorer>> =
            LogLinear::new(KnScorer::new(&g), None, 0.5);
        let mut both = LogLinear::new(KnScorer::new(&g), Some(KnScorer::new(&l)), 0.5);
        let (s0, p0, b0) = (alone.initial(), with.initial(), both.initial());
        let s = alone.advance(&[(&s0, 3)]).remove(0);
        let p = with.advance(&[(&p0, 3)]).remove(0);
        let b = both.advance(&[(&b0, 3)]).remove(0);
        let (mut x, mut y, mut z) = ([0.0f32; 4], [0.0f32; 4], [0.0f32; 4]);
        alone.log_probs(&s, &[0, 1, 2, 3], &mut x);
        with.log_probs(&p, &[0, 1, 2, 3], &mut y);
        both.log_probs(&b, &[0, 1, 2, 3], &mut z);
        assert_eq!(x, y);
        for w in 0..4 {
            let want = x[w] + 0.5 * l.log_prob(&[0, 3], w as u32);
            assert!((z[w] - want).abs() < 1e-6);
        }
    }

    /// The interpolated scorer is the weighted sum of its parts, a distribution, and advances
    /// both; EM weights follow the held-out text's domain.
    #[test]
    fn interpolates_and_fits_the_weight() {
        let (g, l) = models();
        let held_out = vec![vec![3, 3, 1], vec![3, 1]];
        let pg = token_probs(&mut KnScorer::new(&g), &held_out);
        let pl = token_probs(&mut KnScorer::new(&l), &held_out);
        assert_eq!(pg.len(), 7);
        let rows: Vec<Vec<f64>> = pg.iter().zip(&pl).map(|(&a, &b)| vec![a, b]).collect();
        let w = em_weights(&rows);
        assert!((w[0] + w[1] - 1.0).abs() < 1e-9 && w[1] > 0.7, "{w:?}");
        assert_eq!(em_weights(&[]), vec![1.0]);

        let mut mix = Interpolated::new(KnScorer::new(&g), KnScorer::new(&l), 0.3);
        let start = mix.initial();
        let next = mix.advance(&[(&start, 3)]).remove(0);
        let all = [0, 1, 2, 3];
        let mut got = [0.0f32; 4];
        mix.log_probs(&next, &all, &mut got);
        let total: f32 = got.iter().map(|x| x.exp()).sum();
        assert!((total - 1.0).abs() < 1e-5, "{total}");
        for (k, &w) in all.iter().enumerate() {
            let want = 0.3 * g.prob(&[0, 3], w) + 0.7 * l.prob(&[0, 3], w);
            assert!((got[k].exp() - want).abs() < 1e-6);
        }
    }
}
