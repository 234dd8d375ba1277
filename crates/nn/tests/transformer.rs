//! The Transformer teacher end to end on seeded fixtures: burn's model exported to the
//! burn-free engine gives the same logits (within 1e-4) and the same greedy translation (also
//! through validation's parallel chunks, in line order), the artifact round-trips and refuses
//! damage, and a short training run lowers the loss; the model's own walk over burn's layers
//! computes burn's `forward`, and its dropout keeps the asked share and passes gradients
//! through its mask.

use burn::tensor::{Device, Int, Tensor, TensorData};
use fastsoftmax_infer::Vocab;
use fastsoftmax_nn::export_nmt;
use fastsoftmax_nn::lm::Ops;
use fastsoftmax_nn::seq2seq::NmtBatch;
use fastsoftmax_nn::transformer::TransformerConfig;
use fastsoftmax_translate::tokenizer::Tokenizer;
use fastsoftmax_translate::transformer::{TransformerTranslator, TransformerWeights};
use fastsoftmax_translate::SearchOptions;

/// burn's generator is one per backend, shared by the tests this file runs in parallel: a test
/// holds this lock from its seed on, so no other test draws from the stream between its seed
/// and its model's initialisation (one did under load, and greedy outputs differed).
fn seeded() -> std::sync::MutexGuard<'static, ()> {
    static RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());
    RNG.lock().unwrap_or_else(|e| e.into_inner())
}

fn config(tied: bool) -> TransformerConfig {
    TransformerConfig {
        d_model: 16,
        d_ff: 24,
        n_heads: 4,
        enc_layers: 2,
        dec_layers: 2,
        dropout: 0.0,
        tied,
    }
}

fn vocab(n: usize, prefix: &str) -> Vocab {
    Vocab::from_words((0..n - 2).map(|i| format!("{prefix}{i}")).collect()).unwrap()
}

fn ids(v: &[u32], device: &Device) -> Tensor<2, Int> {
    let data: Vec<i64> = v.iter().map(|&i| i as i64).collect();
    Tensor::from_data(TensorData::new(data, [1, v.len()]), device)
}

fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().convert::<f32>().try_to_vec::<f32>().unwrap()
}

#[test]
fn engine_matches_burn_logits_and_greedy_output() {
    for tied in [true, false] {
        let device = Device::flex();
        let _rng = seeded();
        device.seed(11);
        let cfg = config(tied);
        let (sv, tv) = (vocab(23, "s"), vocab(31, "t"));
        let model = cfg.init(sv.len(), tv.len(), &device);
        let dir = tempfile::tempdir().unwrap();
        export_nmt::export_transformer(
            &model,
            (&sv, &Tokenizer::Words),
            &tv,
            &cfg,
            None,
            dir.path(),
        )
        .unwrap();
        let engine = TransformerTranslator::load(dir.path()).unwrap();

        let src = [3u32, 9, 17, 4, 20, sv.eos()];
        let tgt_in = [tv.eos(), 5, 28, 11, 2];
        let h = model.decode(ids(&tgt_in, &device), model.encode(ids(&src, &device)));
        let [_, t, d] = h.dims();
        let (w, b) = model.output_layer();
        let want = values(h.reshape([t, d]).matmul(w) + b.unsqueeze_dim(0));
        let got = engine.forced_logits(&src, &tgt_in);
        assert_eq!(got.len(), want.len());
        let worst = got
            .iter()
            .zip(&want)
            .map(|(g, w)| (g - w).abs())
            .fold(0.0, f32::max);
        let scale = want.iter().map(|w| w.abs()).fold(0.0, f32::max);
        assert!(scale > 0.1, "tied {tied}: logits all near zero");
        assert!(
            worst <= 1e-4 * scale.max(1.0),
            "tied {tied}: engine and burn differ by {worst}"
        );

        let burn_greedy = model.greedy(ids(&src, &device), tv.eos(), 2 * src.len() + 10);
        let words: Vec<String> = src[..src.len() - 1]
            .iter()
            .map(|&i| sv.word(i).to_string())
            .collect();
        let opts = SearchOptions {
            beam: 1,
            replace_unk: false,
            ..SearchOptions::default()
        };
        let out = engine
            .translate(&[words.join(" ").as_str()], &opts)
            .unwrap();
        assert_eq!(
            out[0][0].ids, burn_greedy[0],
            "tied {tied}: greedy outputs differ"
        );
    }
}

/// Validation decodes with the engine, in parallel chunks of 32 sentences: every line comes
/// back in its place and equals burn's own greedy decoding of it.
#[test]
fn validation_greedy_is_burns_greedy_in_input_order() {
    let device = Device::flex();
    let _rng = seeded();
    device.seed(12);
    let cfg = config(true);
    let (sv, tv) = (vocab(23, "s"), vocab(31, "t"));
    let model = cfg.init(sv.len(), tv.len(), &device);
    let engine = export_nmt::EngineWeights::Transformer(export_nmt::transformer_weights(
        &model,
        (&sv, &Tokenizer::Words),
        &tv,
        &cfg,
        None,
    ))
    .translator()
    .unwrap();
    // 70 sentences of 1 to 7 words (ids 0..21; `<unk>` and `<eos>` follow): three chunks, the
    // last one short.
    let sources: Vec<Vec<u32>> = (0..70u32)
        .map(|i| (0..1 + i % 7).map(|j| (i * 7 + j * 5) % 21).collect())
        .collect();
    let lines: Vec<String> = sources
        .iter()
        .map(|s| s.iter().map(|&i| sv.word(i)).collect::<Vec<_>>().join(" "))
        .collect();
    let got = fastsoftmax_nn::train_nmt::translate_greedy(&*engine, &lines).unwrap();
    assert_eq!(got.len(), lines.len());
    let mut words_out = 0;
    for (i, src) in sources.iter().enumerate() {
        let mut src = src.clone();
        src.push(sv.eos());
        let burn = &model.greedy(ids(&src, &device), tv.eos(), 2 * src.len() + 10)[0];
        let words: Vec<&str> = burn.iter().map(|&y| tv.word(y)).collect();
        assert_eq!(
            got[i],
            fastsoftmax_translate::text::detokenize(&words),
            "line {i}"
        );
        words_out += words.len();
    }
    assert!(
        words_out > 0,
        "every translation is empty: the test compares nothing"
    );
}

#[test]
fn beam_keeps_line_order_empty_lines_and_n_best() {
    let device = Device::flex();
    let _rng = seeded();
    device.seed(5);
    let cfg = config(true);
    let (sv, tv) = (vocab(23, "s"), vocab(31, "t"));
    let model = cfg.init(sv.len(), tv.len(), &device);
    let dir = tempfile::tempdir().unwrap();
    export_nmt::export_transformer(
        &model,
        (&sv, &Tokenizer::Words),
        &tv,
        &cfg,
        None,
        dir.path(),
    )
    .unwrap();
    let engine = TransformerTranslator::load(dir.path()).unwrap();
    let lines = ["s1 s2 s3", "", "s4 unknown-word s5 s6 s7", "   ", "s8"];
    let opts = SearchOptions {
        beam: 4,
        n_best: 3,
        ..SearchOptions::default()
    };
    let out = engine.translate(&lines, &opts).unwrap();
    assert_eq!(out.len(), lines.len());
    assert!(out[1][0].text.is_empty() && out[3][0].text.is_empty());
    for i in [0, 2, 4] {
        assert_eq!(out[i].len(), 3, "line {i}: n-best of 3");
        for pair in out[i].windows(2) {
            assert!(pair[0].score >= pair[1].score, "n-best is best first");
        }
        // Every n-best hypothesis scores what teacher forcing gives its words: the beam's
        // key/value caches followed their hypotheses through every reorder.
        let src = engine.source(lines[i], 250);
        for t in &out[i] {
            let mut tgt_in = vec![tv.eos()];
            tgt_in.extend(&t.ids);
            let logits = engine.forced_logits(&src.ids, &tgt_in);
            let v = tv.len();
            // The length limit ends a hypothesis without <eos>: its log p lacks that term.
            let limited = t.ids.len() == 2 * src.ids.len() + 10;
            let ended = if limited { None } else { Some(&tv.eos()) };
            let mut want = 0.0f64;
            for (pos, &y) in t.ids.iter().chain(ended).enumerate() {
                let row = &logits[pos * v..(pos + 1) * v];
                let max = row.iter().cloned().fold(f32::MIN, f32::max);
                let lse = max as f64
                    + row
                        .iter()
                        .map(|&z| ((z - max) as f64).exp())
                        .sum::<f64>()
                        .ln();
                want += row[y as usize] as f64 - lse;
            }
            assert!(
                (t.log_prob - want).abs() < 1e-3,
                "line {i}: {} vs {want}",
                t.log_prob
            );
        }
        // Alone or in a batch: the same translation.
        let alone = engine.translate(&[lines[i]], &opts).unwrap();
        assert_eq!(
            alone[0][0].ids, out[i][0].ids,
            "line {i} depends on its batch"
        );
    }
}

#[test]
fn the_artifact_round_trips_and_refuses_damage() {
    let device = Device::flex();
    let _rng = seeded();
    device.seed(2);
    let cfg = config(false);
    let (sv, tv) = (vocab(13, "s"), vocab(17, "t"));
    let model = cfg.init(sv.len(), tv.len(), &device);
    let dir = tempfile::tempdir().unwrap();
    export_nmt::export_transformer(
        &model,
        (&sv, &Tokenizer::Words),
        &tv,
        &cfg,
        None,
        dir.path(),
    )
    .unwrap();
    let w = TransformerWeights::load(dir.path()).unwrap();
    assert_eq!(w.spec.d_model, 16);
    assert_eq!(w.tgt_vocab.len(), tv.len());
    // A flipped byte in the weights: refused by its digest, the file named.
    let path = dir.path().join("model.safetensors");
    let mut bytes = std::fs::read(&path).unwrap();
    let n = bytes.len();
    bytes[n - 3] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let err = TransformerWeights::load(dir.path())
        .unwrap_err()
        .to_string();
    assert!(err.contains("model.safetensors"), "{err}");
    // A recurrent translator's manifest is named as such.
    std::fs::write(
        dir.path().join("manifest.json"),
        r#"{"format": "fastsoftmax-nmt", "format_version": 1}"#,
    )
    .unwrap();
    let err = TransformerWeights::load(dir.path())
        .unwrap_err()
        .to_string();
    assert!(err.contains("holds a recurrent translator"), "{err}");
}

#[test]
fn training_steps_lower_the_loss() {
    use burn::module::Module;
    use burn::optim::{AdamConfig, GradientsParams};
    let device = Device::flex().autodiff();
    let _rng = seeded();
    device.seed(9);
    let cfg = config(true);
    let mut model = cfg.init(23, 31, &device);
    let pairs: Vec<(Vec<u32>, Vec<u32>)> = (0..8u32)
        .map(|i| (vec![2 + i, 3 + i, 1], vec![4 + i, 5 + i, 6, 1]))
        .collect();
    let refs: Vec<(&[u32], &[u32])> = pairs.iter().map(|(s, t)| (&s[..], &t[..])).collect();
    let batch = NmtBatch::new(&refs, 1);
    let mut optim = AdamConfig::new().init();
    let first = values(model.smoothed_loss(&batch, Ops::Composed, None, 0.1).1)[0];
    for _ in 0..30 {
        let (objective, _) = model.smoothed_loss(&batch, Ops::Composed, None, 0.1);
        let grads = GradientsParams::from_grads(objective.backward(), &model);
        model = optim.step(3e-3, model, grads);
    }
    let last = values(
        model
            .valid()
            .smoothed_loss(&batch, Ops::Composed, None, 0.0)
            .1,
    )[0];
    assert!(last < first * 0.7, "loss {first} → {last}");
}

#[test]
fn our_walk_over_burns_layers_is_burns_forward() {
    use burn::nn::attention::generate_autoregressive_mask;
    use burn::nn::transformer::{TransformerDecoderInput, TransformerEncoderInput};
    use fastsoftmax_nn::transformer::{decoder_layer, encoder_layer};
    let device = Device::flex();
    let _rng = seeded();
    device.seed(5);
    let model = config(false).init(23, 31, &device);
    let x = Tensor::<3>::random([2, 7, 16], burn::tensor::Distribution::Default, &device);
    let memory = Tensor::<3>::random([2, 5, 16], burn::tensor::Distribution::Default, &device);
    let burns = model
        .encoder
        .forward(TransformerEncoderInput::new(x.clone()));
    let ours = model.encoder.layers.iter().fold(x.clone(), encoder_layer);
    assert_eq!(values(burns), values(ours), "encoder");
    let mask = generate_autoregressive_mask(2, 7, &device);
    let burns = model.decoder.forward(
        TransformerDecoderInput::new(x.clone(), memory.clone()).target_mask_attn(mask.clone()),
    );
    let ours = model
        .decoder
        .layers
        .iter()
        .fold(x, |x, layer| decoder_layer(x, layer, &memory, &mask));
    assert_eq!(values(burns), values(ours), "decoder");
}

#[test]
fn dropout_keeps_its_share_and_passes_gradients_through_its_mask() {
    use burn::nn::DropoutConfig;
    use fastsoftmax_nn::fused::dropout;
    let module = DropoutConfig::new(0.25).init();
    let device = Device::flex().autodiff();
    let x = Tensor::<2>::ones([300, 400], &device).require_grad();
    let y = dropout(&module, x.clone());
    let grads = y.clone().sum().backward();
    let y = values(y);
    let scale = (1.0 / 0.75f64) as f32;
    assert!(
        y.iter().all(|&v| v == 0.0 || v == scale),
        "kept values are scaled by 1/(1 − p)"
    );
    let kept = y.iter().filter(|&&v| v != 0.0).count() as f64 / y.len() as f64;
    // 120k draws: the share's standard deviation is about 0.0013.
    assert!((kept - 0.75).abs() < 0.01, "kept share {kept}");
    // d Σ (x ∘ m) / dx = m, which is y itself at x = 1.
    assert_eq!(
        values(x.grad(&grads).unwrap()),
        y,
        "the gradient is the mask"
    );
    // Without autodiff (inference) and outside training it is the identity.
    let plain = Tensor::<2>::ones([3, 4], &Device::flex());
    assert_eq!(values(dropout(&module, plain)), vec![1.0; 12]);
    use burn::module::Module;
    let x = Tensor::<2>::ones([3, 4], &device);
    assert_eq!(values(dropout(&module.valid(), x)), vec![1.0; 12]);
}
