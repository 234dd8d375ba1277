//! Screening heads inside beam search: an L2S or DS-Softmax head trained on the decoder's
//! contexts `h̃` (`fastsoftmax train-head l2s|ds --model TRANSLATOR`) sends each decoder row to
//! one route — an L2S cluster, a DS expert — and the output layer scores only that route's
//! words. Beam search then normalises over them, as the L2S paper does in its translation
//! experiments ("log-softmax values on the reduced search space", every other word at
//! probability zero).
//!
//! - **L2S**: a cluster's rows are the translator's own output rows (so a quantized translator
//!   scores them in int8), and `<eos>` joins every cluster so that every hypothesis can end.
//! - **DS**: an expert's rows are its own retrained rows, logits scaled by the gate's softmax
//!   weight (`G·(w·h + b)`, the DS model); an expert holds the words it kept.
//!
//! Unlike a vocabulary map, a route depends on the row's context only, so a translation never
//! depends on the batch it was decoded in.

use std::path::Path;

use fastsoftmax_infer::heads::read_head;
use fastsoftmax_infer::kernels::PackedMatrix;
use fastsoftmax_infer::{DsHead, Error, L2sHead, Result};

use crate::engine::{Shortlist, Translator};

/// A screening head made ready for the translator's decoder.
pub struct Screen {
    name: String,
    kind: &'static str,
    /// `[r, A]` route vectors with biases: a row goes to `argmax_t v_t·h̃ + b_t`.
    routes: PackedMatrix,
    /// `[r]` the target words each route scores, with their rows.
    sets: Vec<Shortlist>,
    /// DS: logits are multiplied by the route's softmax weight.
    gated: bool,
    /// How the routes were trained, when the head's manifest says
    /// ([`fastsoftmax_infer::heads::HeadManifest::trained_as`]).
    trained_as: Option<String>,
}

impl Screen {
    /// An L2S head of this translator (its candidate sets name target ids; `<eos>` is added
    /// to every set).
    pub fn from_l2s(translator: &Translator, head: &L2sHead) -> Result<Screen> {
        let a = translator.spec().d_attn;
        check_dim(head.n_clusters(), head.cluster_vectors().len(), a, "l2s")?;
        let eos = translator.tgt_vocab().eos();
        let sets = (0..head.n_clusters())
            .map(|t| {
                let mut ids = head.candidates(t);
                ids.push(eos);
                ids.sort_unstable();
                ids.dedup();
                check_ids(&ids, translator, t)?;
                Ok(translator.shortlist(&ids))
            })
            .collect::<Result<Vec<_>>>()?;
        let r = head.n_clusters();
        Ok(Screen {
            name: fastsoftmax_infer::SoftmaxHead::name(head).to_string(),
            kind: "l2s",
            routes: PackedMatrix::new(&head.cluster_vectors(), &vec![0.0; r], a, None),
            sets,
            gated: false,
            trained_as: None,
        })
    }

    /// A DS-Softmax head of this translator: its gate and its experts' own rows.
    pub fn from_ds(translator: &Translator, head: &DsHead) -> Result<Screen> {
        let a = translator.spec().d_attn;
        let (gate, gate_bias) = head.gate_params();
        check_dim(head.n_experts(), gate.len(), a, "ds")?;
        let sets = (0..head.n_experts())
            .map(|e| {
                let x = head.expert(e);
                if x.ids.is_empty() {
                    return Err(Error::Invalid(format!(
                        "ds head: expert {e} kept no words, so its rows could never continue a hypothesis; retrain the head with keep_every_word"
                    )));
                }
                check_ids(&x.ids, translator, e)?;
                Ok(Shortlist::from_rows(&x.weights, &x.bias, a, x.ids))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Screen {
            name: fastsoftmax_infer::SoftmaxHead::name(head).to_string(),
            kind: "ds",
            routes: PackedMatrix::new(&gate, &gate_bias, a, None),
            sets,
            gated: true,
            trained_as: None,
        })
    }

    /// Loads head `name` of the translator in `model_dir` (`model_dir/heads/name`), checked
    /// against its output layer like every head: an `l2s` or a `ds` head.
    pub fn load(translator: &Translator, model_dir: &Path, name: &str) -> Result<Screen> {
        let dir = model_dir.join("heads").join(name);
        if !dir.join("head.json").exists() {
            return Err(Error::Invalid(format!(
                "no head {name:?} in {}: train one with `fastsoftmax train-head l2s --model {} --name {name}` (or `ds`)",
                dir.display(),
                model_dir.display()
            )));
        }
        let full = translator.output_head().ok_or_else(|| {
            Error::Invalid(format!(
                "the translator in {} is {:?}: screening heads serve f32 and int8 translators; quantize with --to int8",
                model_dir.display(),
                translator.precision()
            ))
        })?;
        let (m, t) = read_head(&dir, &full)?;
        let screen = match m.kind.as_str() {
            "l2s" => Self::from_l2s(translator, &L2sHead::from_files(name, &m, &t, &full)?),
            "ds" => Self::from_ds(translator, &DsHead::from_files(name, &m, &t, &full)?),
            other => Err(Error::Invalid(format!(
                "head {name:?} is a {other} head; beam search screens with l2s or ds heads (their routes give each row a set of words to normalise over)"
            ))),
        }?;
        Ok(Screen {
            trained_as: m.trained_as(),
            ..screen
        })
    }

    /// How the routes were trained (an L2S head's clusters: learned, or k-means kept), when
    /// the head's manifest records it.
    pub fn trained_as(&self) -> Option<&str> {
        self.trained_as.as_deref()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `l2s` or `ds`.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// Number of routes `r` (clusters or experts).
    pub fn n_routes(&self) -> usize {
        self.sets.len()
    }

    /// The words route `t` scores.
    pub fn set(&self, t: usize) -> &Shortlist {
        &self.sets[t]
    }

    pub(crate) fn routes(&self) -> &PackedMatrix {
        &self.routes
    }

    pub(crate) fn gated(&self) -> bool {
        self.gated
    }

    /// Mean words per route (unweighted).
    pub fn mean_set_len(&self) -> f64 {
        self.sets.iter().map(Shortlist::len).sum::<usize>() as f64 / self.sets.len() as f64
    }
}

/// The best route of `scores` `[r]` and its softmax weight `exp(s_t) / Σ exp(s_t')`; the first
/// of equal scores wins.
pub(crate) fn route_and_gate(scores: &[f32]) -> (usize, f32) {
    let (mut best, mut max) = (0, f32::NEG_INFINITY);
    for (t, &s) in scores.iter().enumerate() {
        if s > max {
            (best, max) = (t, s);
        }
    }
    let sum: f32 = scores.iter().map(|&s| (s - max).exp()).sum();
    (best, 1.0 / sum)
}

fn check_dim(r: usize, values: usize, a: usize, kind: &str) -> Result<()> {
    if r == 0 || values != r * a {
        return Err(Error::Invalid(format!(
            "{kind} head: {values} route values for {r} routes, but the translator's contexts are {a} wide; train the head for this translator"
        )));
    }
    Ok(())
}

fn check_ids(ids: &[u32], translator: &Translator, route: usize) -> Result<()> {
    let v = translator.spec().tgt_vocab_size;
    match ids.iter().find(|&&id| id as usize >= v) {
        Some(id) => Err(Error::Invalid(format!(
            "route {route} lists target id {id}, but the translator has {v} target words; the head belongs to another model"
        ))),
        None => Ok(()),
    }
}
