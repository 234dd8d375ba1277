//! burn [`Translator`] → the translation engine's artifact
//! ([`fastsoftmax_translate::artifact::NmtWeights`]).

use std::collections::BTreeMap;
use std::path::Path;

use fastsoftmax_infer::Vocab;
use fastsoftmax_translate::artifact::{NmtSpec, NmtWeights};

use crate::export::{bias, values, weight_rows};
use crate::lm::RecurrentLayer;
use crate::seq2seq::{NmtConfig, Translator};
use crate::Result;

fn layer(t: &mut BTreeMap<String, Vec<f32>>, prefix: &str, l: &RecurrentLayer) {
    t.insert(format!("{prefix}.w_ih"), weight_rows(&l.w_ih));
    t.insert(format!("{prefix}.w_hh"), weight_rows(&l.w_hh));
    t.insert(format!("{prefix}.b_ih"), bias(&l.w_ih));
    t.insert(format!("{prefix}.b_hh"), bias(&l.w_hh));
}

/// Copies the weights of `model` out of burn.
pub fn to_weights(model: &Translator, src: &Vocab, tgt: &Vocab, cfg: &NmtConfig) -> NmtWeights {
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
    }
}

/// Writes the engine artifact of `model` into `dir` (atomically, validated).
pub fn export(
    model: &Translator,
    src: &Vocab,
    tgt: &Vocab,
    cfg: &NmtConfig,
    dir: &Path,
) -> Result<()> {
    to_weights(model, src, tgt, cfg).save(dir)?;
    Ok(())
}
