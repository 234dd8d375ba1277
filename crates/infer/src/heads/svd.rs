//! SVD-softmax (Shim et al., NeurIPS 2017): preview every word's logit from a rank-`r`
//! factorisation of the output layer, then compute exact logits only for the `N` words with the
//! best previews. Built from the model's own output layer, no training; named `svd-rR-nN`.
//!
//! Cost per query, in length-`d` dot products: `r` (projecting `h`) + `vocab·r/d` (the
//! preview) + `N` (exact logits), against `vocab` for the full softmax. With `r = d` and
//! `N = vocab` it is the full softmax.

use std::cell::RefCell;

use crate::error::{Error, Result};
use crate::head::SoftmaxHead;
use crate::heads::full::FullHead;
use crate::heads::lowrank::LowRank;
use crate::kernels::dot;
use crate::kernels::rows::ExactRows;
use crate::topk::TopK;

#[derive(Debug, Clone)]
pub struct SvdHead {
    name: String,
    /// Rank-`r` preview of every word's logit.
    preview: LowRank,
    /// The exact logits of the previewed candidates.
    exact: ExactRows,
    n_candidates: usize,
}

/// Per-thread scratch, so queries do not allocate once warm.
#[derive(Default)]
struct Scratch {
    /// The projected context `[r]`.
    q: Vec<f32>,
    /// Preview logits `[vocab]` (top-k only: `logits_into` previews into its output).
    preview: Vec<f32>,
    /// A copy of them, for selecting the `N`-th largest.
    sorted: Vec<f32>,
    /// The candidates `[N]`, in id order.
    chosen: Vec<u32>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

impl SvdHead {
    /// The head with preview width `rank` (`1..=d`) and `n_candidates` (`1..=vocab`) exact
    /// logits per query.
    pub fn new(full: &FullHead, rank: usize, n_candidates: usize) -> Result<Self> {
        let vocab = full.vocab_size();
        if n_candidates == 0 || n_candidates > vocab {
            return Err(Error::Invalid(format!(
                "svd: N = {n_candidates} candidates is out of range: choose 1 ≤ N ≤ {vocab}"
            )));
        }
        Ok(SvdHead {
            name: format!("svd-r{rank}-n{n_candidates}"),
            preview: LowRank::new(full, rank)?,
            exact: ExactRows::new(full.matrix(), None),
            n_candidates,
        })
    }

    /// `(r, N)` if `name` is `svd-rR-nN`.
    pub fn parse_name(name: &str) -> Option<(usize, usize)> {
        let rest = name.strip_prefix("svd-r")?;
        let (r, n) = rest.split_once("-n")?;
        Some((r.parse().ok()?, n.parse().ok()?))
    }

    pub fn rank(&self) -> usize {
        self.preview.rank()
    }

    pub fn n_candidates(&self) -> usize {
        self.n_candidates
    }

    /// Every word's logit `out [vocab]` as SVD-softmax gives it (the preview, exact for the best
    /// `N`), for a whole distribution (perplexity); returns the cost in length-`d` dot products.
    pub fn logits_into(&self, h: &[f32], out: &mut [f32]) -> f64 {
        SCRATCH.with(|s| {
            let Scratch {
                q, sorted, chosen, ..
            } = &mut *s.borrow_mut();
            q.resize(self.rank(), 0.0);
            self.preview.logits_into(h, q, out);
            choose(out, self.n_candidates, sorted, chosen);
            for &id in chosen.iter() {
                let (row, b) = self.exact.row(id as usize);
                out[id as usize] = dot(row, h) + b;
            }
        });
        self.preview.cost() + self.n_candidates as f64
    }
}

/// The ids of the `n` best `preview`s into `chosen`, in id order: ties at the cut go to the
/// lower ids, as in the full head. `sorted` is scratch.
fn choose(preview: &[f32], n: usize, sorted: &mut Vec<f32>, chosen: &mut Vec<u32>) {
    // The n-th best preview, by selection (linear) rather than a size-n heap.
    sorted.clear();
    sorted.extend_from_slice(preview);
    let (_, &mut cut, _) = sorted.select_nth_unstable_by(n - 1, |a, b| b.total_cmp(a));
    let above = preview.iter().filter(|&&p| p > cut).count();
    let mut ties = n - above;
    chosen.clear();
    for (i, &p) in preview.iter().enumerate() {
        if p > cut || (p == cut && ties > 0) {
            ties -= (p == cut) as usize;
            chosen.push(i as u32);
        }
    }
}

impl SoftmaxHead for SvdHead {
    fn name(&self) -> &str {
        &self.name
    }
    fn dim(&self) -> usize {
        self.exact.dim()
    }
    fn vocab_size(&self) -> usize {
        self.exact.len()
    }

    fn top_k_into(&self, h: &[f32], k: usize, out: &mut TopK) {
        SCRATCH.with(|s| {
            let Scratch {
                q,
                preview,
                sorted,
                chosen,
            } = &mut *s.borrow_mut();
            q.resize(self.rank(), 0.0);
            preview.resize(self.vocab_size(), 0.0);
            self.preview.logits_into(h, q, preview);
            choose(preview, self.n_candidates.max(k), sorted, chosen);
            out.reset(k);
            self.exact.push_rows(chosen, h, out);
        });
    }

    fn cost(&self, _h: &[f32]) -> usize {
        (self.preview.cost() + self.n_candidates as f64).round() as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::seeded_values as values;

    #[test]
    fn full_rank_and_every_candidate_is_the_full_softmax() {
        let (v, d) = (300, 16);
        let full = FullHead::new(&values(v * d, 1), &values(v, 2), d).unwrap();
        let head = SvdHead::new(&full, d, v).unwrap();
        assert_eq!(head.name(), "svd-r16-n300");
        for h in values(40 * d, 3).chunks(d) {
            let want: Vec<u32> = full.top_k(h, 10).unwrap().iter().map(|s| s.id).collect();
            let got: Vec<u32> = head.top_k(h, 10).unwrap().iter().map(|s| s.id).collect();
            assert_eq!(got, want);
        }
    }

    #[test]
    fn logits_are_the_preview_with_the_best_n_exact() {
        let (v, d, n) = (120, 10, 7);
        let (w, bias) = (values(v * d, 7), values(v, 8));
        let full = FullHead::new(&w, &bias, d).unwrap();
        let head = SvdHead::new(&full, 3, n).unwrap();
        let preview = LowRank::new(&full, 3).unwrap();
        let (mut got, mut want, mut q) = (vec![0.0; v], vec![0.0; v], vec![0.0; 3]);
        for h in values(20 * d, 9).chunks(d) {
            let cost = head.logits_into(h, &mut got);
            assert_eq!(cost, preview.cost() + n as f64);
            preview.logits_into(h, &mut q, &mut want);
            let mut order: Vec<usize> = (0..v).collect();
            order.sort_by(|&a, &b| want[b].total_cmp(&want[a]));
            for &i in &order[..n] {
                want[i] = dot(&w[i * d..(i + 1) * d], h) + bias[i];
            }
            assert_eq!(got, want);
        }
    }

    #[test]
    fn a_narrow_preview_still_finds_the_top_word_of_a_low_rank_layer() {
        // A rank-2 layer: a rank-2 preview is exact, so 5 candidates always hold the top word.
        let (v, d) = (200, 12);
        let a = values(v * 2, 4);
        let b = values(2 * d, 5);
        let w: Vec<f32> = (0..v)
            .flat_map(|i| (0..d).map(move |j| (i, j)))
            .map(|(i, j)| a[i * 2] * b[j] + a[i * 2 + 1] * b[d + j])
            .collect();
        let full = FullHead::new(&w, &vec![0.0; v], d).unwrap();
        let head = SvdHead::new(&full, 2, 5).unwrap();
        for h in values(30 * d, 6).chunks(d) {
            assert_eq!(
                head.top_k(h, 1).unwrap()[0].id,
                full.top_k(h, 1).unwrap()[0].id
            );
        }
        assert!(head.cost(&[]) < v);
        assert_eq!(SvdHead::parse_name("svd-r20-n500"), Some((20, 500)));
        assert_eq!(SvdHead::parse_name("svd-20"), None);
        assert!(SvdHead::new(&full, 0, 5).is_err());
        assert!(SvdHead::new(&full, 2, 0).is_err());
        assert!(SvdHead::new(&full, 2, v + 1).is_err());
    }
}
