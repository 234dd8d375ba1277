//! burn [`Translator`] → the translation engine's artifact
//! ([`fastsoftmax_translate::artifact::NmtWeights`]); burn [`TransformerNmt`] → the
//! Transformer engine's ([`TransformerWeights`]).

use std::collections::BTreeMap;
use std::path::Path;

use fastsoftmax_infer::Vocab;
use fastsoftmax_translate::artifact::{Languages, NmtSpec, NmtWeights};
use fastsoftmax_translate::distill::TranslateLines;
use fastsoftmax_translate::tokenizer::Tokenizer;
use fastsoftmax_translate::transformer::{
    TransformerSpec, TransformerTranslator, TransformerWeights,
};

use crate::export::{bias, values, weight_rows};
use crate::lm::RecurrentLayer;
use crate::seq2seq::{NmtConfig, Translator};
use crate::transformer::{TransformerConfig, TransformerNmt};
use crate::Result;

/// A translator copied out of burn into the engine's form, of either kind: what `train-nmt`
/// validates with (the decoder an app serves) and exports.
pub enum EngineWeights {
    Recurrent(NmtWeights),
    Transformer(TransformerWeights),
}

impl EngineWeights {
    /// Writes the artifact into `dir` (atomically, validated).
    pub fn save(&self, dir: &Path) -> Result<()> {
        match self {
            EngineWeights::Recurrent(w) => w.save(dir)?,
            EngineWeights::Transformer(w) => w.save(dir)?,
        }
        Ok(())
    }

    /// The engine serving these weights.
    pub fn translator(self) -> Result<Box<dyn TranslateLines>> {
        Ok(match self {
            EngineWeights::Recurrent(w) => {
                Box::new(fastsoftmax_translate::Translator::from_weights(w)?)
            }
            EngineWeights::Transformer(w) => Box::new(TransformerTranslator::new(w)),
        })
    }
}

fn layer(t: &mut BTreeMap<String, Vec<f32>>, prefix: &str, l: &RecurrentLayer) {
    t.insert(format!("{prefix}.w_ih"), weight_rows(&l.w_ih));
    t.insert(format!("{prefix}.w_hh"), weight_rows(&l.w_hh));
    t.insert(format!("{prefix}.b_ih"), bias(&l.w_ih));
    t.insert(format!("{prefix}.b_hh"), bias(&l.w_hh));
}

/// Copies the weights of `model` out of burn.
pub fn to_weights(
    model: &Translator,
    (src, tokenizer): (&Vocab, &Tokenizer),
    tgt: &Vocab,
    cfg: &NmtConfig,
    languages: Option<&Languages>,
) -> NmtWeights {
    let mut t = BTreeMap::new();
    t.insert(
        "src_embedding".into(),
        values(model.src_embedding.weight.val()),
    );
    t.insert(
        "tgt_embedding".into(),
        values(model.tgt_embedding.weight.val()),
    );
    for (l, bi) in model.encoder.iter().enumerate() {
        layer(&mut t, &format!("encoder.{l}.fwd"), &bi.fwd);
        layer(&mut t, &format!("encoder.{l}.bwd"), &bi.bwd);
    }
    for (l, d) in model.decoder.iter().enumerate() {
        layer(&mut t, &format!("decoder.{l}"), d);
    }
    t.insert("attn.score".into(), weight_rows(&model.attn_score));
    t.insert("attn.out".into(), weight_rows(&model.attn_out));
    match (&model.output, &model.tied_bias) {
        (Some(out), _) => {
            t.insert("output.weight".into(), weight_rows(out));
            t.insert("output.bias".into(), bias(out));
        }
        (None, Some(b)) => {
            t.insert("output.bias".into(), values(b.val()));
        }
        (None, None) => unreachable!("a translator has an output layer or a tied bias"),
    }
    NmtWeights {
        spec: NmtSpec {
            cell: model.cell,
            src_vocab_size: model.src_vocab_size(),
            tgt_vocab_size: model.tgt_vocab_size(),
            d_embed: model.d_embed,
            d_hidden: model.d_hidden,
            d_attn: model.d_attn(),
            enc_layers: cfg.enc_layers,
            dec_layers: cfg.dec_layers,
            tied: model.output.is_none(),
        },
        src_vocab: src.clone(),
        tgt_vocab: tgt.clone(),
        tensors: t,
        int8: Default::default(),
        int16: Default::default(),
        src_tokenizer: tokenizer.clone(),
        languages: languages.cloned(),
        vmap: None,
    }
}

/// Writes the engine artifact of `model` into `dir` (atomically, validated).
pub fn export(
    model: &Translator,
    src: &Vocab,
    tgt: &Vocab,
    tokenizer: &Tokenizer,
    cfg: &NmtConfig,
    languages: Option<&Languages>,
    dir: &Path,
) -> Result<()> {
    to_weights(model, (src, tokenizer), tgt, cfg, languages).save(dir)?;
    Ok(())
}

/// A layer norm's `.gamma` and `.beta` (zeros when it has no bias).
fn norm(t: &mut BTreeMap<String, Vec<f32>>, name: &str, n: &burn::nn::LayerNorm) {
    let gamma = values(n.gamma.val());
    let beta = n
        .beta
        .as_ref()
        .map(|b| values(b.val()))
        .unwrap_or_else(|| vec![0.0; gamma.len()]);
    t.insert(format!("{name}.gamma"), gamma);
    t.insert(format!("{name}.beta"), beta);
}

fn linear(t: &mut BTreeMap<String, Vec<f32>>, name: &str, l: &burn::nn::Linear) {
    t.insert(format!("{name}.weight"), weight_rows(l));
    t.insert(format!("{name}.bias"), bias(l));
}

fn attention(
    t: &mut BTreeMap<String, Vec<f32>>,
    name: &str,
    a: &burn::nn::attention::MultiHeadAttention,
) {
    linear(t, &format!("{name}.q"), &a.query);
    linear(t, &format!("{name}.k"), &a.key);
    linear(t, &format!("{name}.v"), &a.value);
    linear(t, &format!("{name}.o"), &a.output);
}

fn feed_forward(
    t: &mut BTreeMap<String, Vec<f32>>,
    name: &str,
    ff: &burn::nn::transformer::PositionWiseFeedForward,
) {
    linear(t, &format!("{name}.inner"), &ff.linear_inner);
    linear(t, &format!("{name}.outer"), &ff.linear_outer);
}

/// Copies a burn [`TransformerNmt`] out into the engine's names (burn's pre-norm layers name
/// their norms by position: the encoder's `norm_2` precedes attention and `norm_1` the
/// feed-forward; the decoder's `norm_3` precedes self-attention, `norm_1` cross-attention and
/// `norm_2` the feed-forward).
pub fn transformer_weights(
    model: &TransformerNmt,
    (src, tokenizer): (&Vocab, &Tokenizer),
    tgt: &Vocab,
    cfg: &TransformerConfig,
    languages: Option<&Languages>,
) -> TransformerWeights {
    let mut t = BTreeMap::new();
    t.insert(
        "src_embedding".into(),
        values(model.src_embedding.weight.val()),
    );
    t.insert(
        "tgt_embedding".into(),
        values(model.tgt_embedding.weight.val()),
    );
    for (l, layer) in model.encoder.layers.iter().enumerate() {
        attention(&mut t, &format!("encoder.{l}.attn"), &layer.mha);
        norm(&mut t, &format!("encoder.{l}.norm_attn"), &layer.norm_2);
        feed_forward(&mut t, &format!("encoder.{l}.ff"), &layer.pwff);
        norm(&mut t, &format!("encoder.{l}.norm_ff"), &layer.norm_1);
    }
    for (l, layer) in model.decoder.layers.iter().enumerate() {
        attention(&mut t, &format!("decoder.{l}.self"), &layer.self_attn);
        norm(&mut t, &format!("decoder.{l}.norm_self"), &layer.norm_3);
        attention(&mut t, &format!("decoder.{l}.cross"), &layer.cross_attn);
        norm(&mut t, &format!("decoder.{l}.norm_cross"), &layer.norm_1);
        feed_forward(&mut t, &format!("decoder.{l}.ff"), &layer.pwff);
        norm(&mut t, &format!("decoder.{l}.norm_ff"), &layer.norm_2);
    }
    norm(&mut t, "enc_norm", &model.enc_norm);
    norm(&mut t, "dec_norm", &model.dec_norm);
    if let Some(out) = &model.output {
        t.insert("output.weight".into(), weight_rows(out));
    }
    t.insert("output.bias".into(), values(model.output_bias.val()));
    TransformerWeights {
        spec: TransformerSpec {
            src_vocab_size: src.len(),
            tgt_vocab_size: tgt.len(),
            d_model: cfg.d_model,
            d_ff: cfg.d_ff,
            n_heads: cfg.n_heads,
            enc_layers: cfg.enc_layers,
            dec_layers: cfg.dec_layers,
            tied: cfg.tied,
        },
        src_tokenizer: tokenizer.clone(),
        languages: languages.cloned(),
        src_vocab: src.clone(),
        tgt_vocab: tgt.clone(),
        tensors: t,
    }
}

/// Writes the Transformer engine artifact of `model` into `dir` (atomically, validated).
pub fn export_transformer(
    model: &TransformerNmt,
    (src, tokenizer): (&Vocab, &Tokenizer),
    tgt: &Vocab,
    cfg: &TransformerConfig,
    languages: Option<&Languages>,
    dir: &Path,
) -> Result<()> {
    transformer_weights(model, (src, tokenizer), tgt, cfg, languages).save(dir)?;
    Ok(())
}
