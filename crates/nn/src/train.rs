//! Truncated-BPTT training of [`LanguageModel`]: plain SGD on the mean token loss with the global
//! gradient norm clipped, a step learning-rate decay, per-epoch validation perplexity, an atomic
//! checkpoint after every epoch and `--resume`.
//!
//! Files in the output directory:
//! - `config.json`: the experiment config, `command.txt`: the command lines that trained it;
//! - `checkpoint.bpk` + `train_state.json`: the latest epoch, for `--resume`;
//! - `best.bpk`: the epoch with the best validation perplexity, exported as the engine artifact
//!   (`manifest.json`, `model.safetensors`) whenever it improves;
//! - `train.log`: one line per epoch; `metrics.json`: final perplexities.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::optim::{GradientsParams, ModuleOptimizer, SgdConfig};
use burn::tensor::{Device, Tensor};
use fastsoftmax_data::batch::Streams;
use fastsoftmax_infer::Vocab;
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};

use crate::config::{ExperimentConfig, TrainingSoftmax};
use crate::data_parallel::DataParallel;
use crate::fused::Sampler;
use crate::lm::{ids_tensor, LanguageModel, LmState};
use crate::{export, Error, Result};

/// Where the data is and what to do besides the config.
#[derive(Debug, Clone)]
pub struct TrainOptions {
    pub train: PathBuf,
    pub valid: PathBuf,
    /// Evaluated once at the end when given.
    pub test: Option<PathBuf>,
    pub out: PathBuf,
    pub resume: bool,
    /// Start from this trained model (a `train-lm` output folder): its vocabulary and its best
    /// weights, e.g. to adapt it to in-domain text. The model config must match.
    pub init: Option<PathBuf>,
    /// Stop each epoch after this many windows (quick runs and tests).
    pub max_windows: Option<usize>,
    /// Stop training once this much time has been spent on it (this invocation's training
    /// windows; validation excluded). The epoch in progress ends early and is validated and
    /// checkpointed like any other.
    pub budget: Option<std::time::Duration>,
    pub progress: bool,
    /// Recorded in `command.txt`.
    pub command: String,
}

/// One finished epoch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochRecord {
    pub epoch: usize,
    pub lr: f64,
    pub train_ppl: f64,
    pub valid_ppl: f64,
    pub seconds: f64,
    pub tokens_per_s: f64,
    /// Where the epoch's training time went (absent in runs from before it was recorded).
    #[serde(default)]
    pub phases: Phases,
}

/// Seconds of an epoch's training spent in each phase of a window, by the host's clock. On the
/// CPU that is the phase's work; on a GPU the device runs queued work behind the host, so a
/// phase holds whatever the host waited for there (an H200 run put "51 %" in the clip, which
/// only enqueues a few sums): [`Phases::summary`] says so.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Phases {
    /// Embedding, recurrent layers and loss, building the autodiff graph.
    pub forward_s: f64,
    /// burn's backward pass over that graph (the fused ops' hand-written backwards inside).
    pub backward_s: f64,
    /// The global gradient norm for clipping.
    pub clip_s: f64,
    /// The SGD update of every parameter.
    pub step_s: f64,
}

impl Phases {
    /// `forward 41% · backward 49% · clip 4% · step 6%`; on a device other than the CPU
    /// (`on_cpu` false) prefixed `host waits:`, since the phases are then not the device's work.
    pub fn summary(&self, on_cpu: bool) -> String {
        let total = self.forward_s + self.backward_s + self.clip_s + self.step_s;
        let pct = |x: f64| 100.0 * x / total.max(f64::MIN_POSITIVE);
        format!(
            "{}forward {:.0}% · backward {:.0}% · clip {:.0}% · step {:.0}%",
            if on_cpu { "" } else { "host waits: " },
            pct(self.forward_s),
            pct(self.backward_s),
            pct(self.clip_s),
            pct(self.step_s)
        )
    }
}

/// Seconds since `clock`, which moves to now.
pub(crate) fn lap(clock: &mut Instant) -> f64 {
    let now = Instant::now();
    let s = now.duration_since(*clock).as_secs_f64();
    *clock = now;
    s
}

/// What `--resume` needs, saved beside `checkpoint.bpk`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainState {
    pub config: ExperimentConfig,
    pub vocab_size: usize,
    pub epochs_done: usize,
    pub lr: f64,
    pub best_valid_ppl: f64,
    pub history: Vec<EpochRecord>,
}

/// Final numbers of a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Metrics {
    pub best_epoch: usize,
    pub valid_ppl: f64,
    pub test_ppl: Option<f64>,
    pub epochs: Vec<EpochRecord>,
}

const STATE_FILE: &str = "train_state.json";
const CHECKPOINT: &str = "checkpoint.bpk";
const BEST: &str = "best.bpk";

/// Trains (or resumes) and returns the final metrics. The best model is exported to `opts.out`.
///
/// Trains on `devices`: one, or several that split each window's batch
/// ([`DataParallel`]; the first holds the model and runs validation).
pub fn train(cfg: &ExperimentConfig, opts: &TrainOptions, devices: &[Device]) -> Result<Metrics> {
    let parallel = DataParallel::new(devices, cfg.train.batch_size)?;
    let device = parallel.main();
    let vocab = match &opts.init {
        Some(dir) => fastsoftmax_infer::LanguageModel::load(dir)
            .map_err(|e| {
                Error::Invalid(format!(
                    "--init {}: {e}; give a `train-lm` output folder",
                    dir.display()
                ))
            })?
            .vocab()
            .clone(),
        None => fastsoftmax_data::corpus::vocab_of_file_limited(
            &opts.train,
            cfg.train.min_count,
            cfg.train.max_vocab,
        )?,
    };
    let train_ids = fastsoftmax_data::corpus::read_tokens(&opts.train, &vocab)?;
    // The sampled softmax's proposal (unigram counts of the training text) and its sample size.
    let sampler = match cfg.train.softmax {
        TrainingSoftmax::Full => None,
        TrainingSoftmax::Sampled { samples, power } => {
            if samples >= vocab.len() {
                return Err(Error::Invalid(format!(
                    "train.softmax samples ({samples}) must be smaller than the vocabulary ({} words); use kind full for a vocabulary this small",
                    vocab.len()
                )));
            }
            let mut counts = vec![0u64; vocab.len()];
            for &id in &train_ids {
                counts[id as usize] += 1;
            }
            Some((Arc::new(Sampler::new(&counts, power)), samples))
        }
    };
    let valid_ids = fastsoftmax_data::corpus::read_tokens(&opts.valid, &vocab)?;
    let t = &cfg.train;
    let streams = Streams::new(&train_ids, t.batch_size).ok_or_else(|| {
        Error::Invalid(format!(
            "{}: {} tokens are too few for batch_size {}",
            opts.train.display(),
            train_ids.len(),
            t.batch_size
        ))
    })?;
    std::fs::create_dir_all(&opts.out)
        .map_err(|e| Error::Invalid(format!("{}: {e}", opts.out.display())))?;
    let out = |f: &str| opts.out.join(f);

    device.seed(cfg.train.seed);
    let mut model = cfg.model.init(vocab.len(), device);
    if let (Some(dir), false) = (&opts.init, opts.resume) {
        // A `train-lm` folder keeps burn's checkpoint; any other model folder (a shipped one,
        // its rows int8 or 4-bit) is read through the engine's artifact, widened to f32.
        model = if dir.join(BEST).exists() {
            load_module(model, &dir.join(BEST))
        } else {
            fastsoftmax_infer::model::LmWeights::load(dir)
                .map_err(Error::from)
                .and_then(|w| crate::export::from_weights(model, &w, device))
        }
        .map_err(|e| {
            Error::Invalid(format!(
                "--init {}: {e}; its model section must equal the config's",
                dir.display()
            ))
        })?;
    }
    let mut state = TrainState {
        config: cfg.clone(),
        vocab_size: vocab.len(),
        epochs_done: 0,
        lr: t.lr,
        best_valid_ppl: f64::INFINITY,
        history: Vec::new(),
    };
    if opts.resume {
        let (s, m) = resume(cfg, &vocab, &opts.out, model)?;
        state = s;
        model = m;
        eprintln!(
            "resuming {} after epoch {} (lr {}, best valid ppl {:.2})",
            opts.out.display(),
            state.epochs_done,
            state.lr,
            state.best_valid_ppl
        );
    } else if out(STATE_FILE).exists() {
        return Err(Error::Invalid(format!(
            "{} already holds a training run; pass --resume to continue it or choose another --out",
            opts.out.display()
        )));
    }
    write_text(
        &out("config.json"),
        &serde_json::to_string_pretty(cfg).unwrap(),
    )?;
    record_command(&opts.out, opts.resume, &opts.command)?;

    // Self-normalisation from a trained model: shift the output biases so that the mean log Z
    // of the first window is 0. The softmax is unchanged, and the term starts from the spread
    // of log Z rather than from its offset (tens of nats, which would swamp the first updates).
    if t.self_norm > 0.0 && opts.init.is_some() && !opts.resume {
        if let Some(w) = streams.windows(t.bptt).next() {
            let x = ids_tensor(&w.inputs, w.batch_size, w.len, device);
            let mean = model.mean_log_z(x);
            model = model.shift_output_bias(-mean as f32);
            eprintln!("self-normalisation: output biases shifted by {:.3} (the first window's mean log Z)", -mean);
        }
    }
    let mut optim = SgdConfig::new().init();
    // On the CPU the clip reads its norm; on a GPU it stays on the device (`clip_scale`).
    let on_cpu = crate::fused::on_cpu(device);
    let mut trained = std::time::Duration::ZERO;
    for epoch in state.epochs_done + 1..=t.epochs {
        if opts.budget.is_some_and(|b| trained >= b) {
            eprintln!(
                "time budget spent after {:.0} s of training",
                trained.as_secs_f64()
            );
            break;
        }
        device.seed(t.seed.wrapping_add(epoch as u64));
        let started = Instant::now();
        let n_windows = streams
            .num_windows(t.bptt)
            .min(opts.max_windows.unwrap_or(usize::MAX));
        let bar = progress_bar(
            opts.progress,
            n_windows as u64,
            &format!("epoch {epoch}/{}", t.epochs),
            "windows",
        );
        // Each device carries its own streams' state from window to window.
        let mut lstates: Vec<LmState> = parallel
            .devices()
            .iter()
            .map(|d| model.initial_state(parallel.rows(), d))
            .collect();
        let mut losses = PendingLosses::new(device);
        let mut phases = Phases::default();
        for (i, w) in streams.windows(t.bptt).take(n_windows).enumerate() {
            if opts
                .budget
                .is_some_and(|b| trained + started.elapsed() >= b)
            {
                break;
            }
            let mut clock = Instant::now();
            // Negatives drawn afresh per window, seeded by (seed, epoch, window), shared by the devices.
            let negatives = sampler.as_ref().map(|(sampler, samples)| {
                sampler.draw(*samples, t.seed ^ ((epoch as u64) << 40) ^ i as u64)
            });
            let carried = std::mem::take(&mut lstates);
            let window = parallel.gradients(&model, carried, |d, replica, state| {
                let at = &parallel.devices()[d];
                let x = ids_tensor(
                    parallel.slice(d, &w.inputs, w.len),
                    parallel.rows(),
                    w.len,
                    at,
                );
                let y = ids_tensor(
                    parallel.slice(d, &w.targets, w.len),
                    parallel.rows(),
                    w.len,
                    at,
                );
                let (loss, next) = match &negatives {
                    Some(negatives) => replica.loss_sampled(x, y, state, negatives),
                    None => replica.loss_self_normalised(x, y, state, t.self_norm as f32),
                };
                (loss, 1.0 / parallel.devices().len() as f64, next.detach())
            });
            lstates = window.carried;
            for loss in window.losses {
                losses.push(loss, parallel.rows() * w.len);
            }
            let grads = window.grads;
            let window_s = lap(&mut clock);
            phases.forward_s += window.forward_s;
            phases.backward_s += window_s - window.forward_s;
            let scale = clip_scale(&model, &grads, t.clip_norm, on_cpu);
            phases.clip_s += lap(&mut clock);
            model = sgd_step(model, &mut optim, grads, state.lr, scale);
            phases.step_s += lap(&mut clock);
            bar.inc(1);
            if losses.due() {
                losses.read().map_err(|e| e.in_epoch(epoch))?;
                bar.set_message(format!(
                    "ppl {:.1} · {:.0} tok/s",
                    losses.perplexity(),
                    losses.tokens() as f64 / started.elapsed().as_secs_f64()
                ));
            }
        }
        losses.read().map_err(|e| e.in_epoch(epoch))?;
        let tokens = losses.tokens();
        bar.finish_and_clear();
        trained += started.elapsed();
        let seconds = started.elapsed().as_secs_f64();
        if tokens == 0 {
            break; // the budget ran out before this epoch began
        }
        let valid_ppl = perplexity(&model.valid(), &valid_ids, device.clone(), 10, t.bptt);
        let record = EpochRecord {
            epoch,
            lr: state.lr,
            train_ppl: losses.perplexity(),
            valid_ppl,
            seconds,
            tokens_per_s: tokens as f64 / seconds,
            phases,
        };
        let line = format!(
            "epoch {epoch:>3} | lr {:.4} | train ppl {:8.2}{} | valid ppl {:8.2} | {:.0} s | {:.0} tok/s | {}",
            record.lr,
            record.train_ppl,
            if sampler.is_some() { " (sampled loss)" } else { "" },
            record.valid_ppl,
            record.seconds,
            record.tokens_per_s,
            phases.summary(on_cpu)
        );
        eprintln!("{line}");
        append_line(&out("train.log"), &line)?;
        if !valid_ppl.is_finite() {
            return Err(Error::Invalid(format!(
                "validation perplexity is {valid_ppl} after epoch {epoch}; lower train.lr"
            )));
        }
        if valid_ppl < state.best_valid_ppl {
            state.best_valid_ppl = valid_ppl;
            save_module(&model, &out(BEST))?;
            export::export(&model.valid(), &vocab, &opts.out)?;
        }
        state.history.push(record);
        state.epochs_done = epoch;
        if epoch >= t.decay_from_epoch {
            state.lr *= t.lr_decay;
        }
        // The checkpoint goes first: a crash between the two writes leaves a state file that
        // points one epoch back, and resume redoes that epoch.
        save_module(&model, &out(CHECKPOINT))?;
        write_text(
            &out(STATE_FILE),
            &serde_json::to_string_pretty(&state).unwrap(),
        )?;
    }

    if state.history.is_empty() {
        return Err(Error::Invalid(
            "the time budget (--budget-minutes) ran out before the first window was trained; give it more time".into(),
        ));
    }
    let best = load_module(cfg.model.init(vocab.len(), device), &out(BEST))?.valid();
    export::export(&best, &vocab, &opts.out)?;
    let test_ppl = match &opts.test {
        Some(p) => {
            let ids = fastsoftmax_data::corpus::read_tokens(p, &vocab)?;
            Some(perplexity(&best, &ids, device.clone(), 1, t.bptt))
        }
        None => None,
    };
    let best_epoch = state
        .history
        .iter()
        .min_by(|a, b| a.valid_ppl.total_cmp(&b.valid_ppl))
        .map(|r| r.epoch)
        .unwrap_or(0);
    let metrics = Metrics {
        best_epoch,
        valid_ppl: state.best_valid_ppl,
        test_ppl,
        epochs: state.history.clone(),
    };
    write_text(
        &out("metrics.json"),
        &serde_json::to_string_pretty(&metrics).unwrap(),
    )?;
    Ok(metrics)
}

/// Loads `train_state.json` and `checkpoint.bpk`, refusing a run of another config or vocabulary.
fn resume(
    cfg: &ExperimentConfig,
    vocab: &Vocab,
    dir: &Path,
    model: LanguageModel,
) -> Result<(TrainState, LanguageModel)> {
    let path = dir.join(STATE_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        Error::Invalid(format!(
            "{}: {e}; there is no run to resume here — drop --resume to start one",
            path.display()
        ))
    })?;
    let state: TrainState = serde_json::from_str(&text)
        .map_err(|e| Error::Invalid(format!("{}: corrupt training state ({e})", path.display())))?;
    if state.config.model != cfg.model || state.vocab_size != vocab.len() {
        return Err(Error::Invalid(format!(
            "{}: the checkpoint was trained with another model config or vocabulary ({:?}, {} words) than the one given ({:?}, {} words); resume with the original config or choose another --out",
            path.display(),
            state.config.model,
            state.vocab_size,
            cfg.model,
            vocab.len()
        )));
    }
    if state.config.train != cfg.train {
        eprintln!(
            "note: training settings differ from the checkpoint's; continuing with the new ones"
        );
    }
    let model = load_module(model, &dir.join(CHECKPOINT))?;
    Ok((state, model))
}

pub(crate) fn save_module<M: Module + Clone>(model: &M, path: &Path) -> Result<()> {
    // burnpack writes through a scratch file and renames it into place: atomic.
    model
        .clone()
        .save_file(path)
        .map_err(|e| Error::Invalid(format!("{}: could not save ({e:?})", path.display())))
}

pub(crate) fn load_module<M: Module>(model: M, path: &Path) -> Result<M> {
    model.try_load_file(path).map_err(|e| {
        Error::Invalid(format!(
            "{}: could not load the checkpoint ({e:?}); it is corrupt or from another model",
            path.display()
        ))
    })
}

/// How much of the gradient an SGD step takes: `min(1, clip / ‖g‖)` for the global norm `‖g‖`.
pub(crate) enum ClipScale {
    /// Read to the host (the CPU, where a read costs nothing).
    Host(f64),
    /// Kept on the device as `[1]`: on a GPU a read would wait for the whole window every window.
    Device(Box<Tensor<1>>),
}

/// The clip of the global gradient norm to `clip_norm`, read to the host when `on_host`.
pub(crate) fn clip_scale(
    model: &LanguageModel,
    grads: &GradientsParams,
    clip_norm: f64,
    on_host: bool,
) -> ClipScale {
    if on_host {
        let norm = global_grad_norm(model, grads);
        return ClipScale::Host(if norm > clip_norm {
            clip_norm / norm
        } else {
            1.0
        });
    }
    struct SumSquares<'a> {
        grads: &'a GradientsParams,
        total: Option<Tensor<1>>,
    }
    impl ModuleVisitor for SumSquares<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            if let Some(g) = self.grads.get::<D>(param.id) {
                let s = g.clone().mul(g).sum();
                self.total = Some(match self.total.take() {
                    Some(t) => t + s,
                    None => s,
                });
            }
        }
    }
    let mut sum = SumSquares { grads, total: None };
    model.visit(&mut sum);
    match sum.total {
        Some(total) => ClipScale::Device(Box::new(
            total
                .sqrt()
                .clamp_min(clip_norm)
                .recip()
                .mul_scalar(clip_norm),
        )),
        None => ClipScale::Host(1.0),
    }
}

/// One plain-SGD step of `lr · scale` (SGD is linear in the gradient, so the clip is a scaled
/// step): burn's SGD for a host scale; for a device scale every parameter takes
/// `p − lr · scale · g` in one element-wise pass, nothing read back.
pub(crate) fn sgd_step(
    model: LanguageModel,
    optim: &mut ModuleOptimizer,
    grads: GradientsParams,
    lr: f64,
    scale: ClipScale,
) -> LanguageModel {
    let scale = match scale {
        ClipScale::Host(scale) => return optim.step(lr * scale, model, grads),
        ClipScale::Device(scale) => *scale,
    };
    struct Step {
        grads: GradientsParams,
        step: Tensor<1>,
    }
    impl ModuleMapper for Step {
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
            let (id, tensor, mapper) = param.consume();
            let tensor = match self.grads.remove::<D>(id) {
                Some(g) => {
                    let tracked = tensor.is_require_grad();
                    let step = self.step.clone().reshape([1; D]);
                    let updated = Tensor::from_inner(tensor.inner() - g * step);
                    if tracked {
                        updated.require_grad()
                    } else {
                        updated
                    }
                }
                None => tensor,
            };
            Param::from_mapped_value(id, tensor, mapper)
        }
    }
    model.map(&mut Step {
        grads,
        step: scale.mul_scalar(lr),
    })
}

/// Global L2 norm of all parameter gradients.
fn global_grad_norm(model: &LanguageModel, grads: &GradientsParams) -> f64 {
    struct SumSquares<'a> {
        grads: &'a GradientsParams,
        total: f64,
    }
    impl ModuleVisitor for SumSquares<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            if let Some(g) = self.grads.get::<D>(param.id) {
                self.total += if crate::fused::on_cpu(&g.device()) {
                    crate::fused::sum_of_squares(g)
                } else {
                    (g.clone() * g).sum().into_scalar::<f64>()
                };
            }
        }
    }
    let mut v = SumSquares { grads, total: 0.0 };
    model.visit(&mut v);
    v.total.sqrt()
}

/// The token-weighted loss of an epoch or an evaluation, with the window losses not yet read
/// to the host. On the CPU each is read at once; on a GPU a read waits for the device to finish,
/// so they are read together every [`PendingLosses::BATCH`] windows (one wait instead of
/// sixteen).
pub(crate) struct PendingLosses {
    pending: Vec<(Tensor<1>, usize)>,
    /// Reading a scalar costs nothing here (burn's CPU backend).
    on_host: bool,
    /// `Σ loss · tokens` and `Σ tokens` of the windows read so far.
    sum: f64,
    tokens: usize,
}

impl PendingLosses {
    const BATCH: usize = 16;

    pub(crate) fn new(device: &Device) -> Self {
        PendingLosses {
            pending: Vec::new(),
            on_host: crate::fused::on_cpu(device),
            sum: 0.0,
            tokens: 0,
        }
    }

    /// A window's mean loss `[1]` over `tokens` targets.
    pub(crate) fn push(&mut self, loss: Tensor<1>, tokens: usize) {
        self.pending.push((loss, tokens));
    }

    /// Time to read: every window on the CPU, every `BATCH` on a GPU.
    pub(crate) fn due(&self) -> bool {
        self.pending.len() >= if self.on_host { 1 } else { Self::BATCH }
    }

    /// Reads the pending losses, in one read, into the totals.
    pub(crate) fn read(&mut self) -> std::result::Result<(), LossError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let (tensors, counts): (Vec<_>, Vec<_>) = self.pending.drain(..).unzip();
        let values = Tensor::cat(tensors, 0)
            .try_into_data()
            .map_err(|e| LossError::Device(e.to_string()))?
            .convert::<f32>()
            .try_to_vec::<f32>()
            .map_err(|e| LossError::Device(format!("{e:?}")))?;
        for (&loss, &n) in values.iter().zip(&counts) {
            if !loss.is_finite() {
                return Err(LossError::NotFinite(loss));
            }
            self.sum += loss as f64 * n as f64;
            self.tokens += n;
        }
        Ok(())
    }

    /// Tokens of the windows read so far.
    pub(crate) fn tokens(&self) -> usize {
        self.tokens
    }

    /// `exp` of the mean token loss of the windows read so far.
    pub(crate) fn perplexity(&self) -> f64 {
        (self.sum / self.tokens.max(1) as f64).exp()
    }
}

/// Why [`PendingLosses::read`] has no losses.
#[derive(Debug)]
pub(crate) enum LossError {
    /// A window's loss is NaN or infinite: training diverged.
    NotFinite(f32),
    /// The device failed while running the windows (out of memory, a lost device, a kernel
    /// its driver cannot run).
    Device(String),
}

impl LossError {
    /// The error `train-lm` reports in `epoch`.
    pub(crate) fn in_epoch(self, epoch: usize) -> Error {
        match self {
            LossError::NotFinite(loss) => Error::Invalid(format!(
                "training diverged in epoch {epoch} (loss {loss}); lower train.lr or train.clip_norm in the config"
            )),
            LossError::Device(e) => Error::Invalid(format!(
                "the device failed in epoch {epoch}: {e}; if it ran out of memory, lower train.batch_size or train.bptt, else train on --backend flex"
            )),
        }
    }
}

/// Perplexity of `ids` under `model` (no autodiff), read as `streams` parallel streams.
pub fn perplexity(
    model: &LanguageModel,
    ids: &[u32],
    device: Device,
    streams: usize,
    bptt: usize,
) -> f64 {
    let device = device.inner();
    let Some(s) = Streams::new(ids, streams) else {
        return f64::NAN;
    };
    let mut state = model.initial_state(s.batch_size(), &device);
    let mut losses = PendingLosses::new(&device);
    for w in s.windows(bptt) {
        let x = ids_tensor(&w.inputs, w.batch_size, w.len, &device);
        let y = ids_tensor(&w.targets, w.batch_size, w.len, &device);
        let (loss, next) = model.loss(x, y, state);
        state = next;
        losses.push(loss, w.batch_size * w.len);
        if losses.due() && losses.read().is_err() {
            return f64::NAN;
        }
    }
    match losses.read() {
        Ok(()) if losses.tokens() > 0 => losses.perplexity(),
        _ => f64::NAN,
    }
}

/// A bar counting `unit`s (e.g. "windows") with a message and the ETA; hidden unless `show`.
pub(crate) fn progress_bar(show: bool, len: u64, prefix: &str, unit: &str) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{prefix}} {{bar:30}} {{pos}}/{{len}} {unit} · {{msg}} · eta {{eta}}"
        ))
        .expect("valid template"),
    );
    bar.set_prefix(prefix.to_string());
    bar
}

/// Appends `command` to `out/command.txt`: every command that worked on a run, in order (the
/// first trained it, later ones resumed). A fresh run starts the file anew.
pub(crate) fn record_command(out: &Path, resume: bool, command: &str) -> Result<()> {
    let path = out.join("command.txt");
    let earlier = if resume {
        std::fs::read_to_string(&path).unwrap_or_default()
    } else {
        String::new()
    };
    write_text(&path, &format!("{earlier}{command}\n"))
}

pub(crate) fn write_text(path: &Path, text: &str) -> Result<()> {
    fastsoftmax_infer::files::write_atomic(path, text.as_bytes()).map_err(Error::from)
}

pub(crate) fn append_line(path: &Path, line: &str) -> Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| Error::Invalid(format!("{}: {e}", path.display())))?;
    writeln!(f, "{line}").map_err(|e| Error::Invalid(format!("{}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LmConfig;
    use fastsoftmax_infer::model::artifact::Cell;

    /// Off the CPU the phases are the host's waits, and the log line says so.
    #[test]
    fn phases_off_the_cpu_are_labelled_host_waits() {
        let p = Phases {
            forward_s: 1.0,
            backward_s: 2.0,
            clip_s: 0.5,
            step_s: 0.5,
        };
        assert_eq!(
            p.summary(true),
            "forward 25% · backward 50% · clip 12% · step 12%"
        );
        assert_eq!(
            p.summary(false),
            "host waits: forward 25% · backward 50% · clip 12% · step 12%"
        );
    }

    /// The clipped step kept on the device (as on a GPU) moves every parameter as the host's
    /// scaled step of burn's SGD does, clipping or not.
    #[test]
    fn device_step_equals_the_host_step() {
        device_step_equals_the_host_step_on(Device::flex().autodiff());
    }

    #[cfg(feature = "wgpu")]
    #[test]
    fn wgpu_device_step_equals_the_host_step() {
        if let Some(device) = crate::backend::wgpu_test_device() {
            device_step_equals_the_host_step_on(device.autodiff());
        }
    }

    fn device_step_equals_the_host_step_on(device: Device) {
        device.seed(2);
        let config = LmConfig {
            cell: Cell::Lstm,
            d_embed: 6,
            d_hidden: 6,
            n_layers: 1,
            dropout: 0.0,
            tied: false,
            factor_rank: None,
            init_range: 0.5,
        };
        let model = config.init(17, &device);
        let ids: Vec<u32> = (0..12).map(|i| (i * 5 % 17) as u32).collect();
        let grads = || {
            let x = ids_tensor(&ids, 2, 6, &device);
            let (loss, _) = model.loss(x.clone(), x, model.initial_state(2, &device));
            GradientsParams::from_grads(loss.backward(), &model)
        };
        let params = |m: &LanguageModel| {
            struct Collect(Vec<f32>);
            impl ModuleVisitor for Collect {
                fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
                    let data = param.val().into_data().convert::<f32>();
                    self.0.extend(data.iter::<f32>());
                }
            }
            let mut c = Collect(Vec::new());
            m.visit(&mut c);
            c.0
        };
        let norm = global_grad_norm(&model, &grads());
        assert!(norm > 0.0);
        let before = params(&model);
        for limit in [norm / 3.0, norm * 2.0] {
            let step = |on_host| {
                let g = grads();
                let scale = clip_scale(&model, &g, limit, on_host);
                params(&sgd_step(
                    model.clone(),
                    &mut SgdConfig::new().init(),
                    g,
                    0.5,
                    scale,
                ))
            };
            let (host, on_device) = (step(true), step(false));
            let moved = host.iter().zip(&before).any(|(a, b)| a != b);
            assert!(moved, "limit {limit}: the step moved nothing");
            for (i, (h, d)) in host.iter().zip(&on_device).enumerate() {
                assert!((h - d).abs() < 1e-6, "limit {limit}, value {i}: {h} vs {d}");
            }
        }
    }
}
