//! `full-int8-mM`: the full softmax on the int8 output layer (one scale per row, AVX-512 VNNI),
//! then its best `M` words re-scored in f32, so the top-k is exact unless the k-th best f32 word
//! fell below the int8 scan's M-th (int8 logits are within a few hundredths of f32 ones).
//! A quarter of the bytes to stream and four times the multiply-adds per instruction.

use std::cell::RefCell;

use crate::error::{Error, Result};
use crate::head::SoftmaxHead;
use crate::heads::full::FullHead;
use crate::kernels::rows::ExactRows;
use crate::kernels::Int8Matrix;
use crate::topk::TopK;

#[derive(Debug, Clone)]
pub struct FullInt8Head {
    name: String,
    int8: Int8Matrix,
    exact: ExactRows,
    rescored: usize,
}

thread_local! {
    /// The int8 scan's candidates and their ids, reused across queries.
    static SCRATCH: RefCell<(Vec<TopK>, Vec<u32>)> = RefCell::default();
}

impl FullInt8Head {
    /// Quantizes `full`'s output layer; `rescored` (M) words are re-scored in f32.
    pub fn new(full: &FullHead, rescored: usize) -> Result<Self> {
        let m = full.matrix();
        let vocab = m.n_rows();
        if rescored == 0 || rescored > vocab {
            return Err(Error::Invalid(format!(
                "full-int8: M = {rescored} re-scored words is out of range: choose 1 ≤ M ≤ {vocab}"
            )));
        }
        let d = m.dim();
        let rows: Vec<f32> = (0..vocab).flat_map(|i| m.row(i)).collect();
        let bias: Vec<f32> = (0..vocab).map(|i| m.bias(i)).collect();
        Ok(FullInt8Head {
            name: format!("full-int8-m{rescored}"),
            int8: Int8Matrix::new(&rows, &bias, d, None),
            exact: ExactRows::new(m, None),
            rescored,
        })
    }

    /// `full-int8-m20` → 20.
    pub fn parse_name(name: &str) -> Option<usize> {
        name.strip_prefix("full-int8-m")?.parse().ok()
    }

    /// Bytes of the int8 output layer (panels, scales, row sums, bias).
    pub fn bytes(&self) -> usize {
        self.int8.bytes()
    }
}

impl SoftmaxHead for FullInt8Head {
    fn name(&self) -> &str {
        &self.name
    }
    fn dim(&self) -> usize {
        self.int8.dim()
    }
    fn vocab_size(&self) -> usize {
        self.int8.n_rows()
    }

    fn top_k_into(&self, h: &[f32], k: usize, out: &mut TopK) {
        self.top_k_batch(h, k, std::slice::from_mut(out));
    }

    fn top_k_batch(&self, hs: &[f32], k: usize, out: &mut [TopK]) {
        let m = self.rescored.max(k);
        SCRATCH.with(|s| {
            let (cands, ids) = &mut *s.borrow_mut();
            cands.resize_with(out.len(), || TopK::new(m));
            for c in cands.iter_mut() {
                c.reset(m);
            }
            self.int8.scan_batch(hs, cands);
            for ((h, c), o) in hs.chunks_exact(self.dim()).zip(cands.iter()).zip(out) {
                ids.clear();
                ids.extend(c.as_slice().iter().map(|s| s.id));
                o.reset(k);
                self.exact.push_rows(ids, h, o);
            }
        });
    }

    /// In units of an f32 dot product of length `d`: the int8 scan's `V` (the same number of
    /// multiply-adds, on a quarter of the bytes) plus the `M` re-scored rows.
    fn cost(&self, _h: &[f32]) -> usize {
        self.vocab_size() + self.rescored
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::seeded_values as values;

    #[test]
    fn rescoring_every_word_is_the_full_softmax_and_a_few_is_close() {
        let (v, d) = (700, 32);
        let full = FullHead::new(&values(v * d, 1), &values(v, 2), d).unwrap();
        let all = FullInt8Head::new(&full, v).unwrap();
        let few = FullInt8Head::new(&full, 20).unwrap();
        assert_eq!(few.name(), "full-int8-m20");
        let ids = |s: Vec<crate::topk::Scored>| s.iter().map(|x| x.id).collect::<Vec<_>>();
        let mut agree = 0;
        let hs = values(50 * d, 3);
        for h in hs.chunks(d) {
            // Ids equal; logits to the last bits (the f32 rows are summed in another order).
            let want = full.top_k(h, 5).unwrap();
            let got = all.top_k(h, 5).unwrap();
            assert_eq!(ids(got.clone()), ids(want.clone()));
            assert!(got
                .iter()
                .zip(&want)
                .all(|(a, b)| (a.logit - b.logit).abs() < 1e-5));
            agree += (ids(few.top_k(h, 5).unwrap()) == ids(want)) as usize;
        }
        assert!(agree >= 45, "top-5 exact on {agree} of 50 contexts");
        // The batched path answers like the single one.
        let mut batch = vec![TopK::new(5); 50];
        few.top_k_batch(&hs, 5, &mut batch);
        for (h, b) in hs.chunks(d).zip(&batch) {
            assert_eq!(few.top_k(h, 5).unwrap(), b.as_slice());
        }
        assert_eq!(FullInt8Head::parse_name("full-int8-m50"), Some(50));
        assert_eq!(FullInt8Head::parse_name("full-int8"), None);
        assert!(FullInt8Head::new(&full, 0).is_err());
        assert!(FullInt8Head::new(&full, v + 1).is_err());
    }
}
