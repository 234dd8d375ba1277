//! The translator end to end on seeded fixtures: burn's model exported to the burn-free engine
//! gives the same logits (within 1e-4) and the same greedy translation; fused and composed
//! training losses agree; batches never mix source lengths; a short training run lowers the loss.

use burn::tensor::activation::log_softmax;
use burn::tensor::{Device, Int, Tensor, TensorData};
use fastsoftmax_infer::model::artifact::Cell;
use fastsoftmax_infer::Vocab;
use fastsoftmax_nn::export_nmt;
use fastsoftmax_nn::lm::Ops;
use fastsoftmax_nn::seq2seq::{NmtBatch, NmtConfig};
use fastsoftmax_nn::train_nmt::batches;
use fastsoftmax_translate::tokenizer::Tokenizer;
use fastsoftmax_translate::{Profile, SearchOptions, Translator};

fn config(cell: Cell, tied: bool) -> NmtConfig {
    NmtConfig {
        cell,
        d_embed: 8,
        d_hidden: 12,
        enc_layers: 2,
        dec_layers: if cell == Cell::Lstm { 2 } else { 1 },
        dropout: 0.0,
        tied,
        init_range: 0.4,
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
    for (cell, tied) in [(Cell::Gru, true), (Cell::Lstm, false)] {
        let device = Device::flex();
        device.seed(7);
        let cfg = config(cell, tied);
        let (sv, tv) = (vocab(23, "s"), vocab(31, "t"));
        let model = cfg.init(sv.len(), tv.len(), &device);
        let dir = tempfile::tempdir().unwrap();
        export_nmt::export(&model, &sv, &tv, &Tokenizer::Words, &cfg, None, dir.path()).unwrap();
        let engine = Translator::load(dir.path()).unwrap();

        let src = [3u32, 9, 17, 4, 20, sv.eos()];
        let tgt_in = [tv.eos(), 5, 28, 11, 2];
        let (encoded, state) = model.encode(ids(&src, &device), Ops::Composed);
        let attn = model.decode(ids(&tgt_in, &device), &encoded, state);
        let [_, t, a] = attn.dims();
        let want = values(model.logits(attn.reshape([t, a])));
        let got = engine.forced_logits(&src, &tgt_in).unwrap().concat();
        assert_eq!(got.len(), want.len());
        let worst = got
            .iter()
            .zip(&want)
            .map(|(g, w)| (g - w).abs())
            .fold(0.0, f32::max);
        let scale = want.iter().map(|w| w.abs()).fold(0.0, f32::max);
        assert!(scale > 0.1, "{cell:?}: logits all near zero");
        assert!(
            worst <= 1e-4 * scale.max(1.0),
            "{cell:?}: engine and burn differ by {worst}"
        );

        // Greedy: burn's argmax loop and the engine's beam of 1 write the same ids.
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
            .translate(&[words.join(" ").as_str()], &opts, &mut Profile::default())
            .unwrap();
        assert_eq!(
            out[0][0].ids, burn_greedy[0],
            "{cell:?}: greedy outputs differ"
        );
    }
}

#[test]
fn beam_search_keeps_line_order_empty_lines_and_n_best() {
    let device = Device::flex();
    device.seed(3);
    let cfg = config(Cell::Gru, true);
    let (sv, tv) = (vocab(23, "s"), vocab(31, "t"));
    let model = cfg.init(sv.len(), tv.len(), &device);
    let dir = tempfile::tempdir().unwrap();
    export_nmt::export(&model, &sv, &tv, &Tokenizer::Words, &cfg, None, dir.path()).unwrap();
    let engine = Translator::load(dir.path()).unwrap();
    let lines = ["s1 s2 s3", "", "s4 unknown-word s5 s6 s7", "   ", "s8"];
    let opts = SearchOptions {
        beam: 4,
        n_best: 3,
        ..SearchOptions::default()
    };
    let out = engine
        .translate(&lines, &opts, &mut Profile::default())
        .unwrap();
    assert_eq!(out.len(), lines.len());
    assert_eq!(out[1].len(), 1);
    assert!(out[1][0].text.is_empty() && out[3][0].text.is_empty());
    for i in [0, 2, 4] {
        assert_eq!(out[i].len(), 3, "line {i}: n-best of 3");
        for pair in out[i].windows(2) {
            assert!(pair[0].score >= pair[1].score, "n-best is best first");
        }
    }
    // A sentence translates the same alone as in a batch.
    let alone = engine
        .translate(&lines[2..3], &opts, &mut Profile::default())
        .unwrap();
    assert_eq!(alone[0], out[2]);
    // A wider beam finds a translation at least as probable as greedy (by the model's score).
    let greedy = engine
        .translate(
            &lines[..1],
            &SearchOptions {
                beam: 1,
                n_best: 1,
                ..opts
            },
            &mut Profile::default(),
        )
        .unwrap();
    assert!(out[0][0].score >= greedy[0][0].score - 1e-9);
    // Bad options are errors, not panics.
    for bad in [0, 11] {
        let e = engine.translate(
            &lines,
            &SearchOptions {
                beam: bad,
                n_best: 1,
                ..opts
            },
            &mut Profile::default(),
        );
        assert!(e.unwrap_err().to_string().contains("beam size"));
    }
}

#[test]
fn fused_and_composed_losses_agree_and_batches_hold_one_source_length() {
    let device = Device::flex();
    device.seed(5);
    let cfg = config(Cell::Gru, true);
    let model = cfg.init(23, 31, &device);
    let pairs: Vec<(Vec<u32>, Vec<u32>)> = (0..40u32)
        .map(|i| {
            let s: Vec<u32> = (0..(i % 4 + 2)).map(|j| (i + j) % 21).chain([22]).collect();
            let t: Vec<u32> = (0..(i % 5 + 1))
                .map(|j| (2 * i + j) % 29)
                .chain([30])
                .collect();
            (s, t)
        })
        .collect();
    let order = batches(&pairs, 6, 1);
    assert_eq!(order.iter().map(Vec::len).sum::<usize>(), pairs.len());
    for b in &order {
        assert!(b.len() <= 6);
        assert!(b.iter().all(|&i| pairs[i].0.len() == pairs[b[0]].0.len()));
    }
    let refs: Vec<(&[u32], &[u32])> = order[0]
        .iter()
        .map(|&i| (pairs[i].0.as_slice(), pairs[i].1.as_slice()))
        .collect();
    let batch = NmtBatch::new(&refs, 30);
    assert_eq!(
        batch.num_targets(),
        refs.iter().map(|p| p.1.len()).sum::<usize>()
    );
    let fused = model.loss(&batch, Ops::Fused, None).into_scalar::<f32>();
    let composed = model.loss(&batch, Ops::Composed, None).into_scalar::<f32>();
    assert!((fused - composed).abs() < 1e-4, "{fused} vs {composed}");
    assert!(fused > 1.0, "an untrained model is uncertain: loss {fused}");

    // Label smoothing, against its definition: (1 − ε)·(−log p_target) + ε·mean_v(−log p_v).
    let eps = 0.1;
    let (objective, nll) = model.smoothed_loss(&batch, Ops::Fused, None, eps);
    assert!((nll.into_scalar::<f32>() - fused).abs() < 1e-6);
    let (src, tgt_in, targets, rows) = batch.tensors(&device);
    let (encoded, state) = model.encode(src, Ops::Composed);
    let attn = model.decode(tgt_in, &encoded, state);
    let [b, t, a] = attn.dims();
    let logp = values(log_softmax(
        model.logits(attn.reshape([b * t, a]).select(0, rows)),
        1,
    ));
    let targets: Vec<i64> = targets.into_data().convert::<i64>().try_to_vec().unwrap();
    let v = logp.len() / targets.len();
    let want = targets
        .iter()
        .enumerate()
        .map(|(i, &y)| {
            let row = &logp[i * v..(i + 1) * v];
            let mean = row.iter().map(|&l| -l as f64).sum::<f64>() / v as f64;
            (1.0 - eps) * -row[y as usize] as f64 + eps * mean
        })
        .sum::<f64>()
        / targets.len() as f64;
    let got = objective.into_scalar::<f32>() as f64;
    assert!((got - want).abs() < 1e-4, "smoothed {got} vs {want}");
}

#[test]
fn batches_start_targets_with_the_target_eos_as_decoding_does() {
    // Vocabularies of different sizes put `<eos>` at different ids: the decoder's first input
    // in training must be the one decoding starts from (the target's).
    let (sv, tv) = (vocab(23, "s"), vocab(31, "t"));
    assert_ne!(sv.eos(), tv.eos());
    let pairs = [
        (vec![3u32, 4, sv.eos()], vec![5u32, tv.eos()]),
        (vec![6, 7, sv.eos()], vec![8, 9, 10, tv.eos()]),
    ];
    let refs: Vec<(&[u32], &[u32])> = pairs.iter().map(|(s, t)| (&s[..], &t[..])).collect();
    let batch = NmtBatch::new(&refs, tv.eos());
    assert_eq!(batch.tgt_len, 4);
    assert_eq!(batch.tgt_in[..4], [tv.eos(), 5, tv.eos(), tv.eos()]);
    assert_eq!(batch.tgt_in[4..], [tv.eos(), 8, 9, 10]);
    assert_eq!(batch.targets, [5, tv.eos(), 8, 9, 10, tv.eos()]);
}
