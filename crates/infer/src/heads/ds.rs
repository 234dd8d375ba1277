//! DS-Softmax, the doubly sparse softmax (Liao et al., 2019): a sparse mixture of sparse experts.
//!
//! A gate `U` (`[K, d]` + bias) picks one expert per context, `k* = argmax_k U_k·h`; that
//! expert holds its own (retrained) rows for the words that survived group-lasso pruning, and
//! only those are scored: `logit_c = G_k*(h) · (W_c^(k*)·h + b_c^(k*))`, where `G` is the softmax
//! of the gate scores (Eq. 1–2). Words pruned from the chosen expert have probability zero.
//!
//! Cost per query: `K` dot products for the gate, then `|v_k*|` for the expert, against `vocab`
//! for the full softmax. Training lives in `fastsoftmax-nn` (`ds` module); this is the serving
//! side. The gate and the experts are [`PackedMatrix`]es, queries allocate nothing.

use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::head::SoftmaxHead;
use crate::heads::format::{self, HeadManifest, Tensors};
use crate::heads::full::FullHead;
use crate::heads::routed::Routed;
use crate::kernels::PackedMatrix;
use crate::topk::TopK;

/// One expert's surviving rows, as [`DsHead::new`] takes them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Expert {
    /// `[n]` word ids (any order, no repeats).
    pub ids: Vec<u32>,
    /// `[n, d]` row-major.
    pub weights: Vec<f32>,
    /// `[n]`
    pub bias: Vec<f32>,
}

/// The DS-Softmax head: gate vectors as routes, each expert's own packed rows as its set.
#[derive(Debug, Clone)]
pub struct DsHead {
    name: String,
    routed: Routed,
}

impl DsHead {
    /// Builds the head from the gate (`gate` `[K, d]`, `gate_bias` `[K]`) and `K` experts.
    /// `full` serves queries whose `k` exceeds the chosen expert's size. Shapes, ids and
    /// finiteness are checked; each expert's rows are reordered by id.
    pub fn new(
        name: &str,
        full: &FullHead,
        gate: &[f32],
        gate_bias: &[f32],
        experts: &[Expert],
    ) -> Result<Self> {
        let (d, vocab) = (full.dim(), full.vocab_size());
        let k = experts.len();
        let bad = |m: String| Err(Error::Invalid(format!("ds head: {m}; retrain the head")));
        if k == 0 || gate.len() != k * d || gate_bias.len() != k {
            return bad(format!(
                "{} gate values and {} gate biases for {k} experts of width {d}; need [K, d] and [K] with K ≥ 1",
                gate.len(),
                gate_bias.len()
            ));
        }
        if gate.iter().chain(gate_bias).any(|x| !x.is_finite()) {
            return bad("the gate holds a non-finite value".into());
        }
        let mut sets = Vec::with_capacity(k);
        for (e, x) in experts.iter().enumerate() {
            let n = x.ids.len();
            if x.weights.len() != n * d || x.bias.len() != n {
                return bad(format!(
                    "expert {e} has {n} ids, {} weights and {} biases; need [n], [n, {d}], [n]",
                    x.weights.len(),
                    x.bias.len()
                ));
            }
            if x.weights.iter().chain(&x.bias).any(|v| !v.is_finite()) {
                return bad(format!("expert {e} holds a non-finite value"));
            }
            let mut order: Vec<usize> = (0..n).collect();
            order.sort_unstable_by_key(|&i| x.ids[i]);
            let ids: Vec<u32> = order.iter().map(|&i| x.ids[i]).collect();
            if let Some(&id) = ids.iter().find(|&&id| id as usize >= vocab) {
                return bad(format!(
                    "expert {e} lists word id {id}, but the vocabulary has {vocab} words"
                ));
            }
            if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
                return bad(format!("expert {e} lists word id {} twice", w[0]));
            }
            let rows: Vec<f32> = order
                .iter()
                .flat_map(|&i| x.weights[i * d..(i + 1) * d].iter().copied())
                .collect();
            let bias: Vec<f32> = order.iter().map(|&i| x.bias[i]).collect();
            sets.push(PackedMatrix::new(&rows, &bias, d, Some(ids)));
        }
        Ok(DsHead {
            name: name.to_string(),
            routed: Routed {
                routes: PackedMatrix::new(gate, gate_bias, d, None),
                sets,
                full: Arc::clone(full.matrix()),
            },
        })
    }

    /// Number of experts `K`.
    pub fn n_experts(&self) -> usize {
        self.routed.n_routes()
    }

    /// The expert that serves `h`.
    pub fn expert_of(&self, h: &[f32]) -> usize {
        self.routed.route_of(h)
    }

    /// The expert that serves `h` and its gate value `G_k(h)` (Eq. 1).
    pub fn gate(&self, h: &[f32]) -> (usize, f32) {
        self.routed.route_and_weight(h)
    }

    /// Surviving word count `|v_k|` of each expert.
    pub fn expert_sizes(&self) -> Vec<usize> {
        self.routed.sets.iter().map(|s| s.n_rows()).collect()
    }

    /// `|v_e|`
    pub fn expert_size(&self, e: usize) -> usize {
        self.routed.sets[e].n_rows()
    }

    /// The word id of expert `e`'s `i`-th word (its words are in ascending id order).
    pub fn expert_id(&self, e: usize, i: usize) -> u32 {
        self.routed.sets[e].id(i)
    }

    /// Whether word `c` survives in expert `e`.
    pub fn expert_covers(&self, e: usize, c: u32) -> bool {
        let set = &self.routed.sets[e];
        let (mut lo, mut hi) = (0, set.n_rows());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if set.id(mid) < c {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo < set.n_rows() && set.id(lo) == c
    }

    /// Expert `e`'s word ids (ascending), rows and biases.
    pub fn expert(&self, e: usize) -> Expert {
        let set = &self.routed.sets[e];
        Expert {
            ids: self.routed.ids(e),
            weights: (0..set.n_rows()).flat_map(|i| set.row(i)).collect(),
            bias: (0..set.n_rows()).map(|i| set.bias(i)).collect(),
        }
    }

    /// Gate vectors `[K, d]` and biases `[K]`.
    pub fn gate_params(&self) -> (Vec<f32>, Vec<f32>) {
        let g = &self.routed.routes;
        (
            (0..self.n_experts()).flat_map(|e| g.row(e)).collect(),
            (0..self.n_experts()).map(|e| g.bias(e)).collect(),
        )
    }

    /// Writes the head to `dir` (atomically), recording `training` in its manifest and
    /// writing `extra` files (config, command, log) beside it.
    pub fn save(
        &self,
        dir: &Path,
        output: &impl AsRef<FullHead>,
        training: serde_json::Value,
        extra: &[(&str, &[u8])],
    ) -> Result<()> {
        let (k, d) = (self.n_experts(), self.dim());
        let mut manifest = HeadManifest::new("ds", output, serde_json::json!({ "experts": k }));
        manifest.training = training;
        let (gate, gate_bias) = self.gate_params();
        let mut t = Tensors::default();
        t.put_f32("gate", &[k, d], &gate);
        t.put_f32("gate_bias", &[k], &gate_bias);
        let (mut ids, mut weights, mut bias, mut offsets) = (vec![], vec![], vec![], vec![0u32]);
        for e in 0..k {
            let x = self.expert(e);
            ids.extend(x.ids);
            weights.extend(x.weights);
            bias.extend(x.bias);
            offsets.push(ids.len() as u32);
        }
        t.put_u32("ids", &ids);
        t.put_u32("offsets", &offsets);
        t.put_f32("weights", &[ids.len(), d], &weights);
        t.put_f32("bias", &[ids.len()], &bias);
        format::save_head(dir, &manifest, &t, extra)
    }

    /// Loads the head in `dir` for the output layer `output` (a model or its full head); its name is the directory's name.
    pub fn load(dir: &Path, output: &impl AsRef<FullHead>) -> Result<Self> {
        let (m, t) = format::read_head(dir, output)?;
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("ds");
        Self::from_files(name, &m, &t, output.as_ref())
    }

    /// Builds the head from a head directory's contents, already checked against the output layer by
    /// [`format::read_head`].
    pub fn from_files(name: &str, m: &HeadManifest, t: &Tensors, full: &FullHead) -> Result<Self> {
        let (k, d) = (m.params["experts"].as_u64().unwrap_or(0) as usize, m.d);
        let gate = t.f32("gate", &[k, d])?;
        let gate_bias = t.f32("gate_bias", &[k])?;
        let ids = t.u32("ids")?;
        let n = ids.len();
        let weights = t.f32("weights", &[n, d])?;
        let bias = t.f32("bias", &[n])?;
        let experts: Vec<Expert> = t
            .groups(n, k, "rows", "experts")?
            .into_iter()
            .map(|g| Expert {
                ids: ids[g.clone()].to_vec(),
                weights: weights[g.start * d..g.end * d].to_vec(),
                bias: bias[g].to_vec(),
            })
            .collect();
        Self::new(name, full, &gate, &gate_bias, &experts)
            .map_err(|e| Error::format(t.origin(), e.to_string()))
    }
}

impl SoftmaxHead for DsHead {
    fn name(&self) -> &str {
        &self.name
    }
    fn dim(&self) -> usize {
        self.routed.routes.dim()
    }
    fn vocab_size(&self) -> usize {
        self.routed.full.n_rows()
    }

    /// Logits are the DS model's `G·(w·h + b)`; when `k` exceeds the chosen expert's words,
    /// the exact output layer answers (its own logits).
    fn top_k_into(&self, h: &[f32], k: usize, out: &mut TopK) {
        let (e, g) = self.gate(h);
        self.routed.scan_route(e, h, k, out);
        if self.routed.sets[e].n_rows() >= k {
            out.scale_logits(g);
        }
    }

    /// Groups the batch by expert so each expert's rows stream once for all its queries.
    fn top_k_batch(&self, hs: &[f32], k: usize, out: &mut [TopK]) {
        let gates: Vec<(usize, f32)> = hs.chunks_exact(self.dim()).map(|h| self.gate(h)).collect();
        let routed: Vec<u32> = gates.iter().map(|&(e, _)| e as u32).collect();
        self.routed.scan_batch(hs, &routed, k, out);
        for (o, &(e, g)) in out.iter_mut().zip(&gates) {
            if self.routed.sets[e].n_rows() >= k {
                o.scale_logits(g);
            }
        }
    }

    fn cost(&self, h: &[f32]) -> usize {
        self.routed.cost(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::seeded_values as values;

    /// Two experts along ±e0 with their own rows for a few words.
    fn two_experts(d: usize) -> (FullHead, DsHead) {
        let v = 50;
        let full = FullHead::new(&values(v * d, 1), &vec![0.0; v], d).unwrap();
        let mut gate = vec![0.0; 2 * d];
        gate[0] = 2.0;
        gate[d] = -2.0;
        let experts = vec![
            Expert {
                ids: vec![7, 3, 11],
                weights: values(3 * d, 2),
                bias: vec![0.5, -0.5, 0.0],
            },
            Expert {
                ids: vec![40, 1],
                weights: values(2 * d, 3),
                bias: vec![0.0, 0.1],
            },
        ];
        let head = DsHead::new("ds", &full, &gate, &[0.0, 0.0], &experts).unwrap();
        (full, head)
    }

    #[test]
    fn scores_only_the_chosen_expert_scaled_by_its_gate() {
        let d = 6;
        let (full, head) = two_experts(d);
        let mut h = values(d, 4);
        h[0] = 1.5;
        let (e, g) = head.gate(&h);
        assert_eq!(e, 0);
        // G = softmax([3, -3])[0]
        assert!((g - 1.0 / (1.0 + (-6.0f32).exp())).abs() < 1e-6);
        let x = head.expert(0);
        assert_eq!(x.ids, vec![3, 7, 11]);
        let got = head.top_k(&h, 3).unwrap();
        for s in &got {
            let i = x.ids.iter().position(|&id| id == s.id).unwrap();
            let raw: f32 = (0..d).map(|j| x.weights[i * d + j] * h[j]).sum::<f32>() + x.bias[i];
            assert!((s.logit - g * raw).abs() < 1e-5);
        }
        assert!(got.windows(2).all(|w| w[0].logit >= w[1].logit));
        assert_eq!(head.cost(&h), 2 + 3);
        // k beyond the expert's 3 words: the exact answer.
        assert_eq!(head.top_k(&h, 4).unwrap(), full.top_k(&h, 4).unwrap());
        // The batched path agrees, screened or falling back.
        let hs = values(11 * d, 5);
        for k in [1, 2, 3] {
            let mut batch = vec![TopK::new(k); 11];
            head.top_k_batch(&hs, k, &mut batch);
            for (h, got) in hs.chunks(d).zip(&batch) {
                assert_eq!(got.as_slice(), head.top_k(h, k).unwrap().as_slice());
            }
        }
    }

    #[test]
    fn bad_experts_are_errors() {
        let d = 4;
        let full = FullHead::new(&values(10 * d, 1), &[0.0; 10], d).unwrap();
        let ok = Expert {
            ids: vec![1, 2],
            weights: values(2 * d, 2),
            bias: vec![0.0; 2],
        };
        let gate = values(d, 3);
        assert!(DsHead::new("x", &full, &gate, &[0.0], std::slice::from_ref(&ok)).is_ok());
        let with = |f: &dyn Fn(&mut Expert)| {
            let mut x = ok.clone();
            f(&mut x);
            DsHead::new("x", &full, &gate, &[0.0], &[x])
                .unwrap_err()
                .to_string()
        };
        assert!(with(&|x| x.ids[1] = 10).contains("word id 10"));
        assert!(with(&|x| x.ids[1] = 1).contains("twice"));
        assert!(with(&|x| x.bias.pop().map(|_| ()).unwrap()).contains("biases"));
        assert!(with(&|x| x.weights[0] = f32::NAN).contains("non-finite"));
        assert!(DsHead::new("x", &full, &gate, &[0.0, 0.0], std::slice::from_ref(&ok)).is_err());
        assert!(DsHead::new("x", &full, &[], &[], &[]).is_err());
    }
}
