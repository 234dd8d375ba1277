//! `train-nmt`'s resume on a Transformer with subword sources: one epoch, then a resumed
//! second, gives exactly the run of two epochs straight (the weights, Adam's moments and the
//! schedule's clock are all checkpointed), and `--budget-minutes` stops between whole epochs
//! only. Alone in its test binary: the device's random
//! stream (init, dropout) is shared by the tests of a binary running in parallel.

use burn::tensor::Device;
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

#[test]
fn a_resumed_run_continues_the_same_descent_and_exports_the_engine() {
    use fastsoftmax_nn::train_nmt::train_nmt;
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let device = Device::flex().autodiff();
    let straight = train_nmt(&write_run(d, 2), &options(d, &d.join("a"), false), &device).unwrap();
    train_nmt(&write_run(d, 1), &options(d, &d.join("b"), false), &device).unwrap();
    assert!(
        d.join("b/optimizer.bpk").exists(),
        "Adam's state is checkpointed"
    );
    let resumed = train_nmt(&write_run(d, 2), &options(d, &d.join("b"), true), &device).unwrap();
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
    let cut = train_nmt(&write_run(d, 3), &opts, &device).unwrap();
    assert_eq!(
        cut.epochs.len(),
        1,
        "one whole epoch, then the budget stops"
    );
    assert_eq!(cut.epochs[0].train_ppl, straight.epochs[0].train_ppl);
    opts.resume = true;
    let again = train_nmt(&write_run(d, 3), &opts, &device).unwrap();
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
