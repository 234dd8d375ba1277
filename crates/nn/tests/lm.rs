//! Training and export of the burn language models on small seeded fixtures.

use std::path::Path;

use burn::tensor::{Device, Tensor};
use fastsoftmax_infer::model::artifact::Cell;
use fastsoftmax_infer::{LanguageModel as Engine, SoftmaxHead, TopK, Vocab};
use fastsoftmax_nn::lm::ids_tensor;
use fastsoftmax_nn::train::{train, TrainOptions};
use fastsoftmax_nn::{export, ExperimentConfig, LmConfig, TrainConfig};

/// burn's seed is global to the device: tests that seed and initialise run one at a time.
static SEEDED: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn lm_config(cell: Cell, tied: bool) -> LmConfig {
    LmConfig {
        cell,
        d_embed: 16,
        d_hidden: 16,
        n_layers: 2,
        dropout: 0.0,
        tied,
        factor_rank: None,
        init_range: 0.3,
    }
}

fn fixture_vocab(n: usize) -> Vocab {
    Vocab::from_words((0..n - 2).map(|i| format!("w{i}")).collect()).unwrap()
}

/// The engine's logits match burn's forward within 1e-4 and give the same top-5, for every
/// cell type, for tied weights and for a factorised tied embedding (exported as the product).
/// (Expected values come from burn itself on the same weights.)
#[test]
fn engine_matches_burn_forward() {
    let _seeded = SEEDED.lock().unwrap_or_else(|e| e.into_inner());
    let device = Device::flex();
    let cases = [
        (Cell::Lstm, false, None),
        (Cell::Gru, false, None),
        (Cell::Lstm, true, None),
        (Cell::Lstm, true, Some(5)),
    ];
    for (cell, tied, factor_rank) in cases {
        device.seed(7);
        let vocab = fixture_vocab(40);
        let config = LmConfig {
            factor_rank,
            ..lm_config(cell, tied)
        };
        let model = config.init(vocab.len(), &device);
        let tokens: Vec<u32> = (0..12).map(|i| (i * 7 % 40) as u32).collect();
        let (h, _) = model.hidden(
            ids_tensor(&tokens, 1, tokens.len(), &device),
            model.initial_state(1, &device),
        );
        let logits: Tensor<2> = model.logits(h.reshape([tokens.len(), 16]));
        let want: Vec<f32> = logits
            .into_data()
            .convert::<f32>()
            .try_to_vec::<f32>()
            .unwrap();

        let dir = tempfile::tempdir().unwrap();
        export::export(&model, &vocab, dir.path()).unwrap();
        let engine = Engine::load(dir.path()).unwrap();
        let mut state = engine.new_state();
        let mut got = vec![0.0f32; 40];
        for (t, &tok) in tokens.iter().enumerate() {
            engine.step(tok, &mut state).unwrap();
            engine.full_head().logits_into(state.context(), &mut got);
            let row = &want[t * 40..(t + 1) * 40];
            for (a, b) in got.iter().zip(row) {
                assert!(
                    (a - b).abs() < 1e-4,
                    "{cell:?} tied={tied} factor_rank={factor_rank:?} step {t}: {a} vs {b}"
                );
            }
            let mut top = TopK::new(5);
            engine.full_head().top_k_into(state.context(), 5, &mut top);
            let mut order: Vec<usize> = (0..40).collect();
            order.sort_by(|&x, &y| row[y].total_cmp(&row[x]));
            let ids: Vec<usize> = top.ids().map(|i| i as usize).collect();
            assert_eq!(ids, &order[..5], "{cell:?} step {t}");
        }
    }
}

/// A corpus with structure a model can learn: a fixed cycle of sentences.
fn write_corpus(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let sentences = [
        "the cat sat on the mat",
        "a dog ran in the park",
        "the bird sang a song",
    ];
    let text: String = (0..300)
        .map(|i| format!("{}\n", sentences[i % 3]))
        .collect();
    let train = dir.join("train.txt");
    let valid = dir.join("valid.txt");
    std::fs::write(&train, &text).unwrap();
    let valid_text: String = (0..30).map(|i| format!("{}\n", sentences[i % 3])).collect();
    std::fs::write(&valid, valid_text).unwrap();
    (train, valid)
}

fn train_config(epochs: usize) -> ExperimentConfig {
    ExperimentConfig {
        model: lm_config(Cell::Lstm, false),
        train: TrainConfig {
            lr: 5.0,
            lr_decay: 0.5,
            decay_from_epoch: 10,
            epochs,
            batch_size: 4,
            bptt: 8,
            clip_norm: 5.0,
            seed: 3,
            min_count: 1,
            max_vocab: None,
            softmax: Default::default(),
            self_norm: 0.0,
        },
    }
}

fn options(dir: &Path, train: &Path, valid: &Path, resume: bool) -> TrainOptions {
    TrainOptions {
        init: None,
        train: train.to_path_buf(),
        valid: valid.to_path_buf(),
        test: None,
        out: dir.join("run"),
        resume,
        max_windows: None,
        budget: None,
        progress: false,
        command: "test".into(),
    }
}

/// Gradients flow through every layer: the loss falls, the run resumes from its checkpoint,
/// and a checkpoint of another config is refused.
#[test]
fn training_learns_checkpoints_and_resumes() {
    let _seeded = SEEDED.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (tr, va) = write_corpus(dir.path());
    let device = Device::flex().autodiff();
    let m1 = train(
        &train_config(2),
        &options(dir.path(), &tr, &va, false),
        std::slice::from_ref(&device),
    )
    .unwrap();
    assert_eq!(m1.epochs.len(), 2);
    assert!(
        m1.epochs[1].valid_ppl < m1.epochs[0].valid_ppl,
        "{:?}",
        m1.epochs
    );
    assert!(m1.epochs[1].valid_ppl < 5.0, "{:?}", m1.epochs);

    // Starting over in a used directory without --resume is refused.
    let err = train(
        &train_config(2),
        &options(dir.path(), &tr, &va, false),
        std::slice::from_ref(&device),
    )
    .unwrap_err();
    assert!(err.to_string().contains("--resume"), "{err}");

    // Resume for one more epoch continues from epoch 3.
    let m2 = train(
        &train_config(3),
        &options(dir.path(), &tr, &va, true),
        std::slice::from_ref(&device),
    )
    .unwrap();
    assert_eq!(
        m2.epochs.iter().map(|e| e.epoch).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    // The first two epochs are the saved history (JSON round trip: equal up to float printing).
    for (a, b) in m2.epochs[..2].iter().zip(&m1.epochs) {
        assert!(
            (a.valid_ppl - b.valid_ppl).abs() < 1e-9 * b.valid_ppl,
            "{a:?} vs {b:?}"
        );
    }

    // Another model shape cannot resume this checkpoint.
    let mut other = train_config(4);
    other.model.d_hidden = 8;
    other.model.d_embed = 8;
    let err = train(
        &other,
        &options(dir.path(), &tr, &va, true),
        std::slice::from_ref(&device),
    )
    .unwrap_err();
    assert!(err.to_string().contains("another model config"), "{err}");

    // The exported artifact loads and predicts the cycle: "on" is always followed by "the".
    // (It once asked for "mat" after "the cat sat on the", which needs the word two back:
    // where a run at lr 5 lands differs between CPUs, and on a Zen 2 without AVX-512 this
    // model scored "cat" 5.28 against "mat" 5.05 there, with or without a cycle of context
    // before, while the engine scored the validation text at perplexity 1.11, burn 1.16.)
    let engine = Engine::load(&dir.path().join("run")).unwrap();
    let mut state = engine.new_state();
    for w in [
        "a", "dog", "ran", "in", "the", "park", "<eos>", "the", "cat", "sat", "on",
    ] {
        engine
            .step(engine.vocab().get(w).unwrap(), &mut state)
            .unwrap();
    }
    let best = engine.full_head().top_k(state.context(), 1).unwrap();
    assert_eq!(engine.vocab().word(best[0].id), "the");

    // --init starts a new run from these weights and this vocabulary: on a text with a new
    // word, at a learning rate too small to move it, the first epoch already scores like the
    // trained model and the vocabulary is unchanged.
    let other_text = dir.path().join("other.txt");
    std::fs::write(&other_text, "the cat sat on the rug\n".repeat(40)).unwrap();
    let mut tune = train_config(1);
    tune.train.lr = 1e-9;
    let mut opts = options(dir.path(), &other_text, &va, false);
    opts.out = dir.path().join("tuned");
    opts.init = Some(dir.path().join("run"));
    let m3 = train(&tune, &opts, std::slice::from_ref(&device)).unwrap();
    assert!(
        (m3.valid_ppl - m2.valid_ppl).abs() < 1e-3 * m2.valid_ppl,
        "{} vs {}",
        m3.valid_ppl,
        m2.valid_ppl
    );
    let tuned = Engine::load(&opts.out).unwrap();
    assert_eq!(tuned.vocab(), engine.vocab());
    opts.out = dir.path().join("nowhere");
    opts.init = Some(dir.path().join("missing"));
    let err = train(&tune, &opts, std::slice::from_ref(&device)).unwrap_err();
    assert!(err.to_string().contains("--init"), "{err}");
}

/// Sampled-softmax training learns too (judged by the exact full-softmax perplexity), the
/// vocabulary keeps only words seen `min_count` times, and the time budget stops a run.
#[test]
fn sampled_softmax_min_count_and_budget() {
    let _seeded = SEEDED.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (tr, va) = write_corpus(dir.path());
    // One rare word, seen once: min_count 2 leaves it out of the vocabulary.
    let mut text = std::fs::read_to_string(&tr).unwrap();
    text.push_str("the zebra sat\n");
    std::fs::write(&tr, text).unwrap();
    let device = Device::flex().autodiff();
    let mut cfg = train_config(2);
    cfg.train.min_count = 2;
    cfg.train.softmax = fastsoftmax_nn::TrainingSoftmax::Sampled {
        samples: 8,
        power: 0.75,
    };
    let m = train(
        &cfg,
        &options(dir.path(), &tr, &va, false),
        std::slice::from_ref(&device),
    )
    .unwrap();
    assert!(
        m.epochs[1].valid_ppl < m.epochs[0].valid_ppl,
        "{:?}",
        m.epochs
    );
    assert!(m.epochs[1].valid_ppl < 6.0, "{:?}", m.epochs);
    let engine = Engine::load(&dir.path().join("run")).unwrap();
    assert_eq!(engine.vocab().get("zebra"), None);
    assert!(engine.vocab().get("cat").is_some());
    let log = std::fs::read_to_string(dir.path().join("run/train.log")).unwrap();
    assert!(log.contains("(sampled loss)"), "{log}");

    // A budget too small for one window ends the run before its first epoch completes.
    let mut opts = options(dir.path(), &tr, &va, false);
    opts.out = dir.path().join("budget");
    opts.budget = Some(std::time::Duration::from_nanos(1));
    let err = train(&train_config(3), &opts, std::slice::from_ref(&device)).unwrap_err();
    assert!(err.to_string().contains("budget"), "{err}");

    // Sampled softmax needs the fused ops' backend.
    #[cfg(feature = "ndarray")]
    {
        let mut opts = options(dir.path(), &tr, &va, false);
        opts.out = dir.path().join("ndarray");
        #[allow(deprecated)]
        let err = train(&cfg, &opts, &[Device::ndarray().autodiff()]).unwrap_err();
        assert!(err.to_string().contains("flex"), "{err}");
    }
}

/// Every weight of the model `train` exported to `out`, in one vector.
fn exported_weights(out: &Path) -> Vec<f32> {
    let w = fastsoftmax_infer::model::LmWeights::load(out).unwrap();
    let mut v = w.embedding;
    for l in w.layers {
        v.extend(l.w_ih.into_iter().chain(l.w_hh).chain(l.b_ih).chain(l.b_hh));
    }
    v.extend(
        w.output_weight
            .unwrap_or_default()
            .into_iter()
            .chain(w.output_bias),
    );
    v
}

/// Trains `cfg` on the fixture corpus once on `[device]` and once split over two replicas of
/// it, and checks that both runs took the same steps (weights within 1e-5, the same perplexities).
fn two_devices_match_one(cfg: &ExperimentConfig, device: &Device, max_windows: Option<usize>) {
    let dir = tempfile::tempdir().unwrap();
    let (tr, va) = write_corpus(dir.path());
    let run = |name: &str, devices: &[Device]| {
        let opts = TrainOptions {
            out: dir.path().join(name),
            max_windows,
            ..options(dir.path(), &tr, &va, false)
        };
        let m = train(cfg, &opts, devices).unwrap();
        (m, exported_weights(&opts.out))
    };
    let (m1, one) = run("one", std::slice::from_ref(device));
    let (m2, two) = run("two", &[device.clone(), device.clone()]);
    assert_eq!(one.len(), two.len());
    let worst = one
        .iter()
        .zip(&two)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(
        worst < 1e-5,
        "{:?}: weights differ by up to {worst}",
        cfg.train.softmax
    );
    for (a, b) in m1.epochs.iter().zip(&m2.epochs) {
        assert!(
            (a.valid_ppl - b.valid_ppl).abs() < 1e-5 * a.valid_ppl,
            "{a:?} vs {b:?}"
        );
        assert!(
            (a.train_ppl - b.train_ppl).abs() < 1e-5 * a.train_ppl,
            "{a:?} vs {b:?}"
        );
    }
}

/// Data parallelism (`--devices 2`): two replicas on the CPU device, each taking half of every
/// window's streams, train the same weights as one device on the whole batch (within float
/// rounding: the rows' sums run in another order), with the full and the sampled softmax. A
/// batch that does not split over the devices is refused before anything is written.
#[test]
fn two_devices_train_the_same_weights_as_one() {
    let _seeded = SEEDED.lock().unwrap_or_else(|e| e.into_inner());
    let device = Device::flex().autodiff();
    let mut cfg = train_config(2);
    // At the fixture's usual 5.0 the loss falls so fast that rounding differences grow past
    // 1e-5 within two epochs; at 1.0 they stay at rounding (3e-7).
    cfg.train.lr = 1.0;
    two_devices_match_one(&cfg, &device, None);
    cfg.train.softmax = fastsoftmax_nn::TrainingSoftmax::Sampled {
        samples: 8,
        power: 0.75,
    };
    two_devices_match_one(&cfg, &device, None);

    let dir = tempfile::tempdir().unwrap();
    let (tr, va) = write_corpus(dir.path());
    let opts = options(dir.path(), &tr, &va, false);
    let err = train(
        &train_config(1),
        &opts,
        &[device.clone(), device.clone(), device],
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("batch_size 4") && err.contains("3 devices"),
        "{err}"
    );
    assert!(!opts.out.exists());
    let err = fastsoftmax_nn::Backend::Flex
        .autodiff_devices(0)
        .unwrap_err()
        .to_string();
    assert!(err.contains("--devices"), "{err}");
}

#[test]
fn bad_configs_name_the_field() {
    let mut cfg = train_config(1);
    cfg.model.tied = true;
    cfg.model.d_embed = 8;
    assert!(cfg.validate().unwrap_err().contains("tied"));
    let mut cfg = train_config(1);
    cfg.train.lr = f64::NAN;
    assert!(cfg.validate().unwrap_err().contains("train.lr"));
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.json");
    std::fs::write(&p, r#"{"model": {"cell": "rnn"}}"#).unwrap();
    let err = ExperimentConfig::load(&p).unwrap_err().to_string();
    assert!(err.contains("c.json"), "{err}");
}

/// The backend swap is real: a few steps on wgpu (Mesa's software Vulkan on CPU-only machines).
#[cfg(feature = "wgpu")]
#[test]
fn wgpu_training_steps_reduce_the_loss() {
    use burn::optim::{GradientsParams, SgdConfig};
    let _seeded = SEEDED.lock().unwrap_or_else(|e| e.into_inner());
    let Some(device) = fastsoftmax_nn::backend::wgpu_test_device() else {
        return;
    };
    let device = device.autodiff();
    device.seed(1);
    let mut model = lm_config(Cell::Lstm, false).init(20, &device);
    let tokens: Vec<u32> = (0..32).map(|i| (i % 5) as u32).collect();
    let x = ids_tensor(&tokens[..24], 3, 8, &device);
    let y = ids_tensor(&tokens[1..25], 3, 8, &device);
    let mut optim = SgdConfig::new().init();
    let mut losses = Vec::new();
    for _ in 0..5 {
        let (loss, _) = model.loss(x.clone(), y.clone(), model.initial_state(3, &device));
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        losses.push(loss.into_scalar::<f32>());
        model = optim.step(0.5, model, grads);
    }
    assert!(losses.iter().all(|l| l.is_finite()), "{losses:?}");
    assert!(losses[4] < losses[0], "{losses:?}");
}

/// Data parallelism on wgpu: two replicas of the adapter's device train what one does; more
/// GPUs than the machine has are refused by name.
#[cfg(feature = "wgpu")]
#[test]
fn wgpu_two_devices_train_the_same_weights_as_one() {
    let _seeded = SEEDED.lock().unwrap_or_else(|e| e.into_inner());
    let Some(device) = fastsoftmax_nn::backend::wgpu_test_device() else {
        return;
    };
    let device = device.autodiff();
    let mut cfg = train_config(1);
    cfg.train.lr = 1.0;
    two_devices_match_one(&cfg, &device, Some(6));
    let err = fastsoftmax_nn::Backend::Wgpu
        .autodiff_devices(64)
        .unwrap_err()
        .to_string();
    assert!(err.contains("--devices 64") && err.contains("GPU"), "{err}");
    // Never a suggestion of --devices 0.
    assert!(!err.contains("--devices 0"), "{err}");
}

/// The artifact reads back into burn as it was exported (tied and untied, LSTM and GRU), a
/// config of another shape is refused by name, and `--init` from a folder without burn's
/// checkpoint (a model stored with 4-bit rows) trains on from the weights it serves.
#[test]
fn artifact_weights_read_back_into_burn_and_train_on() {
    let _seeded = SEEDED.lock().unwrap_or_else(|e| e.into_inner());
    let device = Device::flex();
    let vocab = fixture_vocab(40);
    for (cell, tied) in [(Cell::Lstm, false), (Cell::Gru, false), (Cell::Lstm, true)] {
        device.seed(5);
        let config = lm_config(cell, tied);
        let w = export::to_weights(&config.init(vocab.len(), &device), &vocab);
        device.seed(6);
        let fresh = config.init(vocab.len(), &device);
        assert_ne!(
            export::to_weights(&fresh, &vocab),
            w,
            "the seeds should differ"
        );
        let back = export::from_weights(fresh, &w, &device).unwrap();
        assert_eq!(export::to_weights(&back, &vocab), w, "{cell:?} tied={tied}");
    }
    let w = export::to_weights(&lm_config(Cell::Lstm, false).init(40, &device), &vocab);
    let wider = LmConfig {
        d_hidden: 24,
        ..lm_config(Cell::Lstm, false)
    };
    let e = export::from_weights(wider.init(40, &device), &w, &device)
        .expect_err("refused")
        .to_string();
    assert!(e.contains("make the config's model section match"), "{e}");

    // --init from a 4-bit folder: the first epoch starts from its weights (a validation
    // perplexity far below a fresh model's), the run's vocabulary is the folder's.
    let dir = tempfile::tempdir().unwrap();
    let (tr, va) = write_corpus(dir.path());
    let autodiff = Device::flex().autodiff();
    let trained = train(
        &train_config(3),
        &options(dir.path(), &tr, &va, false),
        std::slice::from_ref(&autodiff),
    )
    .unwrap();
    let shipped = dir.path().join("shipped");
    fastsoftmax_infer::model::LmWeights::load(&dir.path().join("run"))
        .unwrap()
        .save_as(&shipped, fastsoftmax_infer::model::RowStorage::Int4)
        .unwrap();
    let tuned_dir = dir.path().join("tuned");
    std::fs::create_dir_all(&tuned_dir).unwrap();
    let opts = TrainOptions {
        init: Some(shipped),
        ..options(&tuned_dir, &tr, &va, false)
    };
    let tuned = train(&train_config(1), &opts, std::slice::from_ref(&autodiff)).unwrap();
    let fresh = train(
        &train_config(1),
        &options(&dir.path().join("fresh"), &tr, &va, false),
        std::slice::from_ref(&autodiff),
    )
    .unwrap();
    let best = trained.epochs.last().unwrap().valid_ppl;
    assert!(
        tuned.epochs[0].valid_ppl < fresh.epochs[0].valid_ppl
            && tuned.epochs[0].valid_ppl < 2.0 * best,
        "from 4-bit rows {} · fresh {} · the model's own {best}",
        tuned.epochs[0].valid_ppl,
        fresh.epochs[0].valid_ppl
    );
}
