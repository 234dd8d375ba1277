//! `NAME+svd-rR-pP`: SVD-softmax inside the experts of a trained DS-Softmax head (the DS paper's
//! Table 3, "post-approximation of learned experts"). Each expert is a softmax over its own
//! words, so SVD-softmax applies to it as to a full output layer: a rank-`R` preview of the
//! expert's logits, then exact logits for its best `P` % by preview.
//!
//! The preview goes only into experts where it cuts work, `R + n·R/d + ⌈P·n/100⌉ < n` dot
//! products for an expert of `n` words (the paper applies it to experts of over a thousand
//! words); the others are scanned whole, as the DS head does. Logits keep DS's gate scaling.

use crate::error::{Error, Result};
use crate::head::SoftmaxHead;
use crate::heads::ds::DsHead;
use crate::heads::full::FullHead;
use crate::heads::svd::SvdHead;
use crate::topk::{TopK, K_MAX};

#[derive(Debug, Clone)]
pub struct DsSvdHead {
    name: String,
    ds: DsHead,
    /// Per expert: SVD-softmax over its rows (word `i` of it = [`DsHead::expert_id`]), where
    /// it cuts the expert's cost.
    previews: Vec<Option<SvdHead>>,
}

impl DsSvdHead {
    /// `ds` with a rank-`rank` preview and `percent` % of exact logits in each expert it speeds up.
    pub fn new(ds: DsHead, rank: usize, percent: usize) -> Result<Self> {
        let d = ds.dim();
        if rank == 0 || rank > d || percent == 0 || percent > 100 {
            return Err(Error::Invalid(format!(
                "{}+svd-r{rank}-p{percent}: choose a rank 1 ≤ R ≤ {d} and a share 1 ≤ P ≤ 100 % of each expert's words",
                ds.name()
            )));
        }
        let mut previews = vec![];
        for e in 0..ds.n_experts() {
            let x = ds.expert(e);
            let n = x.ids.len();
            let exact = (n * percent).div_ceil(100);
            let preview_cost = rank as f64 + (n * rank) as f64 / d as f64 + exact as f64;
            previews.push(if preview_cost < n as f64 {
                let rows = FullHead::new(&x.weights, &x.bias, d)?;
                Some(SvdHead::new(&rows, rank, exact)?)
            } else {
                None
            });
        }
        Ok(DsSvdHead {
            name: format!("{}+svd-r{rank}-p{percent}", ds.name()),
            ds,
            previews,
        })
    }

    /// `(base, R, P)` if `name` is `BASE+svd-rR-pP`.
    pub fn parse_name(name: &str) -> Option<(&str, usize, usize)> {
        let (base, knobs) = name.split_once("+svd-r")?;
        let (r, p) = knobs.split_once("-p")?;
        Some((base, r.parse().ok()?, p.parse().ok()?))
    }

    /// Experts served through a preview.
    pub fn n_previewed(&self) -> usize {
        self.previews.iter().flatten().count()
    }
}

impl SoftmaxHead for DsSvdHead {
    fn name(&self) -> &str {
        &self.name
    }
    fn dim(&self) -> usize {
        self.ds.dim()
    }
    fn vocab_size(&self) -> usize {
        self.ds.vocab_size()
    }

    /// The chosen expert's best `k` by the preview's candidates, scaled by its gate value; an
    /// expert without a preview, or a `k` beyond its candidates, is served as DS serves it.
    fn top_k_into(&self, h: &[f32], k: usize, out: &mut TopK) {
        let (e, g) = self.ds.gate(h);
        match &self.previews[e] {
            Some(svd) if k <= svd.n_candidates() => {
                svd.top_k_into(h, k, out);
                out.map_ids(|i| self.ds.expert_id(e, i as usize));
                out.scale_logits(g);
            }
            _ => self.ds.top_k_into(h, k, out),
        }
    }

    fn cost(&self, h: &[f32]) -> usize {
        let e = self.ds.expert_of(h);
        match &self.previews[e] {
            Some(svd) if K_MAX <= svd.n_candidates() => self.ds.n_experts() + svd.cost(h),
            _ => self.ds.cost(h),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::heads::ds::Expert;
    use crate::kernels::seeded_values as values;

    /// Two experts along ±e0, one of 300 words (ids 0, 2, 4, …) and one of 5.
    fn ds_head(d: usize) -> DsHead {
        let v = 700;
        let full = FullHead::new(&values(v * d, 1), &vec![0.0; v], d).unwrap();
        let mut gate = vec![0.0; 2 * d];
        gate[0] = 2.0;
        gate[d] = -2.0;
        let big = Expert {
            ids: (0..300).map(|i| 2 * i).collect(),
            weights: values(300 * d, 2),
            bias: values(300, 3),
        };
        let small = Expert {
            ids: (0..5).map(|i| 3 * i + 1).collect(),
            weights: values(5 * d, 4),
            bias: vec![0.0; 5],
        };
        DsHead::new("ds", &full, &gate, &[0.0, 0.0], &[big, small]).unwrap()
    }

    #[test]
    fn a_full_preview_of_every_word_is_the_ds_head() {
        let d = 16;
        let ds = ds_head(d);
        // Rank d and 100 %: the preview chooses all words, so the answer is DS's own; but it
        // would cost more than the scan, so no expert takes it.
        let head = DsSvdHead::new(ds.clone(), d, 100).unwrap();
        assert_eq!(head.n_previewed(), 0);
        // Rank 4, 40 %: only the big expert gains (4 + 300·4/16 + 120 < 300, 4 + 5·4/16 + 2 > 5).
        let head = DsSvdHead::new(ds.clone(), 4, 40).unwrap();
        assert_eq!(head.name(), "ds+svd-r4-p40");
        assert_eq!(head.n_previewed(), 1);
        let mut agree = 0;
        for h in values(200 * d, 5).chunks(d) {
            let got = head.top_k(h, 5).unwrap();
            let want = ds.top_k(h, 5).unwrap();
            let (e, g) = ds.gate(h);
            // Every answer is a word of the chosen expert with DS's logit.
            let x = ds.expert(e);
            for s in &got {
                let i = x.ids.iter().position(|&id| id == s.id).unwrap();
                let raw: f32 = (0..d).map(|j| x.weights[i * d + j] * h[j]).sum::<f32>() + x.bias[i];
                assert!((s.logit - g * raw).abs() < 1e-4);
            }
            assert!(got.windows(2).all(|w| w[0].logit >= w[1].logit));
            agree += (got[0].id == want[0].id) as usize;
            let expected_cost = if e == 0 {
                2 + 4 + 300 * 4 / 16 + 120
            } else {
                2 + 5
            };
            assert_eq!(head.cost(h), expected_cost);
        }
        // The preview keeps most top words of a random layer at 40 %.
        assert!(agree > 150, "{agree} of 200");
    }

    #[test]
    fn names_and_bad_knobs() {
        assert_eq!(
            DsSvdHead::parse_name("ds-2+svd-r20-p10"),
            Some(("ds-2", 20, 10))
        );
        assert_eq!(DsSvdHead::parse_name("ds+svd-r20"), None);
        assert_eq!(DsSvdHead::parse_name("svd-r20-n100"), None);
        let ds = ds_head(8);
        for (r, p) in [(0, 10), (9, 10), (4, 0), (4, 101)] {
            let err = DsSvdHead::new(ds.clone(), r, p).unwrap_err().to_string();
            assert!(err.contains("choose a rank"), "{err}");
        }
    }
}
