//! `train-nmt`'s resume on a Transformer with subword sources: one epoch, then a resumed
//! second, gives exactly the run of two epochs straight (the weights, Adam's moments and the
//! schedule's clock are all checkpointed), and `--budget-minutes` stops between whole epochs
//! only; two devices sharing each batch train what one does. The tests take turns (`SEEDED`):
//! the device's random stream (init, dropout) is shared by the tests of a binary.

use burn::tensor::Device;
use fastsoftmax_nn::train_nmt::train_nmt;
use fastsoftmax_translate::transformer::TransformerTranslator;
use fastsoftmax_translate::SearchOptions;

/// A tiny ja→en-like parallel text and a Transformer config with subword sources.
fn write_run(
    dir: &std::path::Path,
    epochs: usize,
) -> fastsoftmax_nn::train_nmt::NmtExperimentConfig {
    let pairs = [
        ("猫が寝る。", "the cat sleeps."),
        ("犬が走る。", "the dog runs."),
        ("猫が走る。", "the cat runs."),
        ("犬が寝る。", "the dog sleeps."),
    ];
    for (part, n) in [("train", 64), ("valid", 4)] {
        let (mut ja, mut en) = (String::new(), String::new());
        for i in 0..n {
            let (j, e) = pairs[i % pairs.len()];
            ja.push_str(&format!("{j}\n"));
            en.push_str(&format!("{e}\n"));
        }
        std::fs::write(dir.join(format!("{part}.ja")), ja).unwrap();
        std::fs::write(dir.join(format!("{part}.en")), en).unwrap();
    }
    serde_json::from_str(&format!(
        r#"{{"model": {{"arch": "transformer", "d_model": 16, "d_ff": 32, "n_heads": 2,
                       "enc_layers": 1, "dec_layers": 1, "dropout": 0.1, "tied": true}},
            "train": {{"lr": 0.003, "warmup_steps": 4, "adam_beta2": 0.98, "lr_decay": 1.0,
                       "decay_from_epoch": 1, "epochs": {epochs}, "batch_size": 8, "clip_norm": 1.0,
                       "seed": 3, "src_tokens": {{"subwords": {{"size": 40}}}},
                       "label_smoothing": 0.1}}}}"#
    ))
    .unwrap()
}

fn options(
    data: &std::path::Path,
    out: &std::path::Path,
    resume: bool,
) -> fastsoftmax_nn::train_nmt::NmtOptions {
    fastsoftmax_nn::train_nmt::NmtOptions {
        data: data.to_path_buf(),
        src_lang: "ja".into(),
        tgt_lang: "en".into(),
        distilled: None,
        out: out.to_path_buf(),
        resume,
        max_batches: None,
        max_valid: None,
        budget: None,
        progress: false,
        command: "test".into(),
    }
}

static SEEDED: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn a_resumed_run_continues_the_same_descent_and_exports_the_engine() {
    let _seeded = SEEDED.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let device = Device::flex().autodiff();
    let straight = train_nmt(
        &write_run(d, 2),
        &options(d, &d.join("a"), false),
        std::slice::from_ref(&device),
    )
    .unwrap();
    train_nmt(
        &write_run(d, 1),
        &options(d, &d.join("b"), false),
        std::slice::from_ref(&device),
    )
    .unwrap();
    assert!(
        d.join("b/optimizer.bpk").exists(),
        "Adam's state is checkpointed"
    );
    let resumed = train_nmt(
        &write_run(d, 2),
        &options(d, &d.join("b"), true),
        std::slice::from_ref(&device),
    )
    .unwrap();
    let ppl = |m: &fastsoftmax_nn::train_nmt::NmtMetrics| {
        m.epochs
            .iter()
            .map(|e| (e.train_ppl, e.valid_ppl))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ppl(&straight),
        ppl(&resumed),
        "resuming changed the descent"
    );
    // A budget never cuts an epoch: a fresh run trains its first epoch whole, and no epoch
    // starts whose predecessor's time does not fit in what is left.
    let mut opts = options(d, &d.join("c"), false);
    opts.budget = Some(std::time::Duration::from_nanos(1));
    let cut = train_nmt(&write_run(d, 3), &opts, std::slice::from_ref(&device)).unwrap();
    assert_eq!(
        cut.epochs.len(),
        1,
        "one whole epoch, then the budget stops"
    );
    assert_eq!(cut.epochs[0].train_ppl, straight.epochs[0].train_ppl);
    opts.resume = true;
    let again = train_nmt(&write_run(d, 3), &opts, std::slice::from_ref(&device)).unwrap();
    assert_eq!(again.epochs.len(), 1, "no epoch fits a spent budget");

    // The run's folder is the Transformer engine's artifact, reading raw Japanese.
    let engine = TransformerTranslator::load(&d.join("b")).unwrap();
    assert!(matches!(
        engine.src_tokenizer(),
        fastsoftmax_translate::tokenizer::Tokenizer::Subwords(_)
    ));
    let out = engine
        .translate(&["猫が寝る。", "", "ｶﾀｶﾅ😀"], &SearchOptions::default())
        .unwrap();
    assert_eq!(out.len(), 3);
    assert!(out[1][0].text.is_empty());
}

/// `--devices 2`: two replicas on the CPU device, each taking a share of every batch's
/// sentences (weighted by its targets), train what one device does on the whole batch, for the
/// recurrent translator (every weight within 1e-5) and the Transformer (the same perplexities);
/// a batch that does not split over the devices is refused.
#[test]
fn two_devices_train_the_same_translator_as_one() {
    let _seeded = SEEDED.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let device = Device::flex().autodiff();
    let gru: fastsoftmax_nn::train_nmt::NmtExperimentConfig = serde_json::from_str(
        r#"{"model": {"cell": "gru", "d_embed": 8, "d_hidden": 16, "enc_layers": 1,
                      "dec_layers": 1, "dropout": 0.0, "tied": true, "init_range": 0.1},
            "train": {"lr": 0.003, "lr_decay": 1.0, "decay_from_epoch": 1, "epochs": 2,
                      "batch_size": 6, "clip_norm": 1.0, "seed": 3,
                      "src_tokens": {"subwords": {"size": 40}}, "label_smoothing": 0.1}}"#,
    )
    .unwrap();
    let mut transformer = write_run(d, 2);
    if let fastsoftmax_nn::train_nmt::NmtModelConfig::Transformer(m) = &mut transformer.model {
        m.dropout = 0.0;
    }
    for (name, cfg) in [("gru", &gru), ("transformer", &transformer)] {
        let one = d.join(format!("{name}-one"));
        let two = d.join(format!("{name}-two"));
        let m1 = train_nmt(cfg, &options(d, &one, false), std::slice::from_ref(&device)).unwrap();
        let m2 = train_nmt(
            cfg,
            &options(d, &two, false),
            &[device.clone(), device.clone()],
        )
        .unwrap();
        for (a, b) in m1.epochs.iter().zip(&m2.epochs) {
            assert!(
                (a.train_ppl - b.train_ppl).abs() < 1e-5 * a.train_ppl,
                "{name}: {a:?} vs {b:?}"
            );
            assert!(
                (a.valid_ppl - b.valid_ppl).abs() < 1e-5 * a.valid_ppl,
                "{name}: {a:?} vs {b:?}"
            );
        }
        assert!(
            m1.epochs[1].train_ppl < m1.epochs[0].train_ppl,
            "{name}: {:?}",
            m1.epochs
        );
        if name == "gru" {
            let (w1, w2) = (
                fastsoftmax_translate::artifact::NmtWeights::load(&one).unwrap(),
                fastsoftmax_translate::artifact::NmtWeights::load(&two).unwrap(),
            );
            for (k, v) in &w1.tensors {
                let worst = v
                    .iter()
                    .zip(&w2.tensors[k])
                    .map(|(a, b)| (a - b).abs())
                    .fold(0f32, f32::max);
                assert!(worst < 1e-5, "{k} differs by up to {worst}");
            }
        }
    }
    let err = train_nmt(
        &gru,
        &options(d, &d.join("three"), false),
        &[device.clone(), device.clone(), device.clone(), device],
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("batch_size 6") && err.contains("4 devices"),
        "{err}"
    );
}
