//! Experiment configs: one JSON file with a `model` and a `train` section.

use std::path::Path;

use fastsoftmax_infer::model::artifact::Cell;
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// Shape of a language model. The vocabulary size comes from the training text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LmConfig {
    /// Recurrent cell: `lstm` or `gru`.
    pub cell: Cell,
    /// Width of the word embedding.
    pub d_embed: usize,
    /// Width of every recurrent layer's state.
    pub d_hidden: usize,
    /// Number of stacked recurrent layers.
    pub n_layers: usize,
    /// Dropout on the embedding output, between layers and before the output layer (0 = none).
    #[serde(default)]
    pub dropout: f64,
    /// Share the output matrix with the embedding (needs `d_embed == d_hidden`).
    #[serde(default)]
    pub tied: bool,
    /// The shared matrix factorisation (Yu et al. 2018, the fast word predictor paper's "tying
    /// weight + matrix factorization" baseline): the embedding is `A [vocab, r] · B [r, d_embed]`,
    /// shared with the tied output layer. Needs `tied`; exported as the product, so the engine
    /// serves it as any tied model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub factor_rank: Option<usize>,
    /// Parameters start uniform in `[-init_range, init_range]`.
    #[serde(default = "default_init_range")]
    pub init_range: f64,
}

fn default_init_range() -> f64 {
    0.1
}

/// Optimisation settings (plain SGD on the mean token loss, as Zaremba et al.).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainConfig {
    /// Initial learning rate.
    pub lr: f64,
    /// Multiply the learning rate by this factor at the end of each epoch from `decay_from_epoch` on.
    pub lr_decay: f64,
    /// First epoch (1-based) after which the learning rate decays.
    pub decay_from_epoch: usize,
    /// Number of epochs.
    pub epochs: usize,
    /// Parallel streams per batch.
    pub batch_size: usize,
    /// Truncated-BPTT window length.
    pub bptt: usize,
    /// Clip the global gradient norm to this value.
    pub clip_norm: f64,
    /// Seed of parameter initialisation and dropout (burn keeps one RNG per device: do not
    /// initialise other models on the same device concurrently if runs must repeat exactly).
    pub seed: u64,
    /// The vocabulary: words seen at least this often in the training text (the others read
    /// as `<unk>`). 1 keeps every word.
    #[serde(default = "default_min_count")]
    pub min_count: usize,
    /// At most this many vocabulary entries (`<unk>` and `<eos>` included): the most frequent
    /// words, the others read as `<unk>` (the L2S paper's Figure 8 shrinks PTB so). No cap if
    /// absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_vocab: Option<usize>,
    /// The softmax of the training loss. Evaluation always uses the exact full softmax.
    #[serde(default)]
    pub softmax: TrainingSoftmax,
    /// Self-normalisation (Devlin et al. 2014): `α` of the extra loss `α·mean(log Z)²`, which
    /// teaches the model `log Z ≈ 0` so an engine may skip the normaliser (the IME paper: 0.1).
    /// 0 = off; needs `softmax` full (the term needs every row's `log Z`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub self_norm: f64,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

fn default_min_count() -> usize {
    1
}

/// The softmax of the training loss.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum TrainingSoftmax {
    /// Every word scored for every position (exact).
    #[default]
    Full,
    /// Sampled softmax (Jean et al. 2015): each position sees its target and `samples` distinct
    /// negatives per window, drawn with probability ∝ count^`power`, logits corrected by
    /// `− log E[count]`. `{"kind": "sampled", "samples": 1024}`.
    Sampled {
        samples: usize,
        #[serde(default = "default_power")]
        power: f64,
    },
}

fn default_power() -> f64 {
    0.75
}

/// A whole experiment config file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentConfig {
    pub model: LmConfig,
    pub train: TrainConfig,
}

impl ExperimentConfig {
    /// Reads and checks a config file.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::Invalid(format!(
                "{}: {e}; configs live in experiments/configs/",
                path.display()
            ))
        })?;
        let cfg: Self = serde_json::from_str(&text)
            .map_err(|e| Error::Invalid(format!("{}: {e}", path.display())))?;
        cfg.validate()
            .map_err(|m| Error::Invalid(format!("{}: {m}", path.display())))?;
        Ok(cfg)
    }

    /// Names the first field that cannot work.
    pub fn validate(&self) -> Result<(), String> {
        let m = &self.model;
        let t = &self.train;
        let sampled_ok = match t.softmax {
            TrainingSoftmax::Full => true,
            TrainingSoftmax::Sampled { samples, power } => {
                samples > 0 && (0.0..=1.0).contains(&power)
            }
        };
        let checks: [(bool, &str); 14] = [
            (m.d_embed > 0, "model.d_embed must be > 0"),
            (m.d_hidden > 0, "model.d_hidden must be > 0"),
            (m.n_layers > 0, "model.n_layers must be > 0"),
            (
                (0.0..1.0).contains(&m.dropout),
                "model.dropout must be in [0, 1)",
            ),
            (
                !m.tied || m.d_embed == m.d_hidden,
                "model.tied needs d_embed == d_hidden",
            ),
            (
                m.factor_rank
                    .is_none_or(|r| m.tied && r >= 1 && r < m.d_embed),
                "model.factor_rank needs tied: true and 1 ≤ factor_rank < d_embed",
            ),
            (
                t.lr > 0.0 && t.lr.is_finite(),
                "train.lr must be a positive number",
            ),
            (
                t.lr_decay > 0.0 && t.lr_decay <= 1.0,
                "train.lr_decay must be in (0, 1]",
            ),
            (
                t.epochs > 0 && t.batch_size > 0,
                "train.epochs and train.batch_size must be > 0",
            ),
            (t.bptt > 0, "train.bptt must be > 0"),
            (t.clip_norm > 0.0, "train.clip_norm must be > 0"),
            (
                t.min_count > 0,
                "train.min_count must be ≥ 1 (1 keeps every word)",
            ),
            (
                sampled_ok,
                "train.softmax sampled needs samples > 0 and power in [0, 1]",
            ),
            (
                t.self_norm == 0.0
                    || (t.self_norm > 0.0
                        && t.self_norm.is_finite()
                        && t.softmax == TrainingSoftmax::Full),
                "train.self_norm must be ≥ 0, and > 0 only with softmax kind full",
            ),
        ];
        match checks.iter().find(|(ok, _)| !ok) {
            Some((_, msg)) => Err(msg.to_string()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(model_extra: &str, train_extra: &str) -> ExperimentConfig {
        serde_json::from_str(&format!(
            r#"{{"model": {{"cell": "lstm", "d_embed": 8, "d_hidden": 8, "n_layers": 1{model_extra}}},
                "train": {{"lr": 1.0, "lr_decay": 1.0, "decay_from_epoch": 1, "epochs": 1,
                           "batch_size": 2, "bptt": 4, "clip_norm": 1.0, "seed": 1{train_extra}}}}}"#
        ))
        .unwrap()
    }

    #[test]
    fn a_factorised_embedding_needs_tied_weights_and_a_rank_below_d_embed() {
        let c = config("", "");
        assert_eq!((c.model.factor_rank, c.train.max_vocab), (None, None));
        assert!(c.validate().is_ok());
        assert!(config(r#", "tied": true, "factor_rank": 4"#, "")
            .validate()
            .is_ok());
        for bad in [
            r#", "factor_rank": 4"#,
            r#", "tied": true, "factor_rank": 8"#,
        ] {
            let err = config(bad, "").validate().unwrap_err();
            assert!(err.contains("factor_rank"), "{err}");
        }
        assert_eq!(config("", r#", "max_vocab": 50"#).train.max_vocab, Some(50));
    }
}
