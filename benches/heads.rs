//! Criterion benchmarks of every head on the same fixture: the shipped PTB-Small LSTM's output
//! layer (and the heads trained for it under `heads/`) and contexts from running it over PTB test text (`data/ptb/ptb.test.txt` when fetched,
//! else a few built-in PTB sentences). Also the same full softmax as a burn module on flex (and
//! on ndarray with `--features ndarray`), to show what the burn-free engine buys.
//!
//! Run: `cargo bench --bench heads` (single thread: the engine never spawns threads; burn's
//! backends are pinned with RAYON_NUM_THREADS=1 below).

use std::path::Path;

use burn::module::Param;
use burn::nn::Linear;
use burn::tensor::{Device, Tensor, TensorData};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use fastsoftmax_infer::eval::{collect_contexts, Contexts};
use fastsoftmax_infer::{FullHead, LanguageModel, LmWeights, NaiveFullHead, Predictor, TopK};

const MODEL: &str = "assets/models/ptb-small-lstm";
const K: usize = 5;
const FALLBACK_TEXT: &str = "no it was n't black monday\n\
but while the new york stock exchange did n't fall apart friday as the dow jones industrial average plunged N points\n\
the finance ministry said it would take steps to stabilize the market\n";

struct Fixture {
    weights: LmWeights,
    lm: LanguageModel,
    contexts: Contexts,
}

fn fixture() -> Fixture {
    let weights = LmWeights::load(Path::new(MODEL))
        .unwrap_or_else(|e| panic!("the benchmark needs the shipped model: {e}"));
    let lm = LanguageModel::from_weights(weights.clone()).unwrap();
    let text = std::fs::read_to_string("data/ptb/ptb.test.txt")
        .unwrap_or_else(|_| FALLBACK_TEXT.repeat(30));
    let tokens = fastsoftmax_data::corpus::encode_text(&text, lm.vocab());
    // Enough contexts that screening heads visit their clusters as real text does, rather than
    // re-reading a few cache-hot candidate sets.
    let contexts = collect_contexts(&lm, &tokens, 4096).unwrap();
    Fixture {
        weights,
        lm,
        contexts,
    }
}

fn engine_heads(c: &mut Criterion) {
    let f = fixture();
    let d = f.weights.spec.d_hidden;
    let w = f.weights.output_matrix();
    let b = &f.weights.output_bias;
    let mut heads: Vec<Box<dyn Predictor + '_>> = vec![
        Box::new(FullHead::new(w, b, d).unwrap()),
        Box::new(NaiveFullHead::new(w, b, d)),
    ];
    // Every trained head shipped with the model (e.g. `l2s`).
    for name in fastsoftmax_infer::heads::available(Path::new(MODEL))
        .iter()
        .skip(1)
    {
        heads.push(fastsoftmax_infer::heads::load(name, Path::new(MODEL), &f.lm).unwrap());
    }
    let n = f.contexts.len();
    let mut group = c.benchmark_group("head_batch1");
    group.throughput(Throughput::Elements(1));
    for head in &heads {
        let mut out = TopK::new(K);
        let mut i = 0;
        group.bench_function(BenchmarkId::from_parameter(head.name()), |bench| {
            bench.iter(|| {
                head.predict_into(f.contexts.context(i % n), K, &mut out);
                i += 1;
                out.as_slice()[0].id
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("head_batch64");
    group.throughput(Throughput::Elements(64));
    let hs = &f.contexts.hs[..64 * d];
    let histories: Vec<&[u32]> = (0..64).map(|i| f.contexts.history(i)).collect();
    for head in &heads {
        let mut outs = vec![TopK::new(K); 64];
        group.bench_function(BenchmarkId::from_parameter(head.name()), |bench| {
            bench.iter(|| {
                head.predict_batch(hs, &histories, K, &mut outs);
                outs[63].as_slice()[0].id
            })
        });
    }
    group.finish();
}

/// The same product `H · Wᵀ + b` through a burn `Linear` on `device`, then the same top-k.
fn burn_full(c: &mut Criterion, device: Device, label: &str) {
    let f = fixture();
    let d = f.weights.spec.d_hidden;
    let v = f.weights.spec.vocab_size;
    // The output layer as burn's own `Linear` module (weight stored `[d_in, d_out]`).
    let wt = Tensor::<2>::from_data(
        TensorData::new(f.weights.output_matrix().to_vec(), [v, d]),
        &device,
    )
    .transpose();
    let b = Tensor::<1>::from_data(TensorData::new(f.weights.output_bias.clone(), [v]), &device);
    let linear = Linear {
        weight: Param::from_tensor(wt),
        bias: Some(Param::from_tensor(b)),
    };
    let mut group = c.benchmark_group("burn_full");
    for batch in [1usize, 64] {
        group.throughput(Throughput::Elements(batch as u64));
        let h = Tensor::<2>::from_data(
            TensorData::new(f.contexts.hs[..batch * d].to_vec(), [batch, d]),
            &device,
        );
        let mut outs = vec![TopK::new(K); batch];
        group.bench_function(BenchmarkId::new(label, batch), |bench| {
            bench.iter(|| {
                let logits = linear.forward(h.clone());
                let data: Vec<f32> = logits
                    .into_data()
                    .convert::<f32>()
                    .try_to_vec::<f32>()
                    .unwrap();
                for (row, out) in data.chunks(v).zip(outs.iter_mut()) {
                    out.reset(K);
                    for (i, &x) in row.iter().enumerate() {
                        out.push(i as u32, x);
                    }
                }
                outs[0].as_slice()[0].id
            })
        });
    }
    group.finish();
}

fn burn_heads(c: &mut Criterion) {
    // Single thread, like the engine and the numpy peer.
    std::env::set_var("RAYON_NUM_THREADS", "1");
    burn_full(c, Device::flex(), "flex");
    #[cfg(feature = "ndarray")]
    #[allow(deprecated)]
    burn_full(c, Device::ndarray(), "ndarray");
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(3));
    targets = engine_heads, burn_heads
}
criterion_main!(benches);
