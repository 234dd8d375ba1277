//! The fused ops against the plain burn composition: same loss, same final state, and the same
//! gradient of every parameter and of the initial state, within 1e-4 — for LSTM, GRU and tied
//! output layers, on seeded fixtures; and the translator's gradients at a training shape's widths.

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::{Device, Tensor};
use fastsoftmax_infer::kernels::seeded_values;
use fastsoftmax_infer::model::artifact::Cell;
use fastsoftmax_nn::lm::{ids_tensor, LmState, Ops};
use fastsoftmax_nn::seq2seq::{NmtBatch, NmtConfig};
use fastsoftmax_nn::LmConfig;

const TOL: f32 = 1e-4;

fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().convert::<f32>().try_to_vec::<f32>().unwrap()
}

fn assert_close(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    // `f32::max` passes over NaN, so a NaN would otherwise read as agreement.
    let finite = |xs: &[f32]| xs.iter().all(|x| x.is_finite());
    assert!(
        finite(got) && finite(want),
        "{what}: not finite (got {}, want {})",
        finite(got),
        finite(want)
    );
    let worst = got
        .iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs())
        .fold(0.0f32, f32::max);
    let scale = want.iter().map(|w| w.abs()).fold(0.0f32, f32::max);
    assert!(
        worst <= TOL * scale.max(1.0),
        "{what}: fused and composed differ by {worst} (largest value {scale})"
    );
    // A test that cannot fail is no test: the gradients compared are not all zero.
    assert!(scale > 0.0, "{what}: all zero");
}

/// Every parameter's gradient, in visiting order.
fn param_grads(model: &impl Module, grads: &burn::optim::GradientsParams) -> Vec<Vec<f32>> {
    struct Collect<'a>(&'a burn::optim::GradientsParams, Vec<Vec<f32>>);
    impl ModuleVisitor for Collect<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let g = self
                .0
                .get::<D>(param.id)
                .expect("every parameter gets a gradient");
            self.1.push(values(g));
        }
    }
    let mut c = Collect(grads, Vec::new());
    model.visit(&mut c);
    c.1
}

fn random_state(layers: usize, batch: usize, hidden: usize, device: &Device) -> LmState {
    let t = |seed| {
        Tensor::<2>::from_floats(
            burn::tensor::TensorData::new(seeded_values(batch * hidden, seed), [batch, hidden]),
            device,
        )
        .require_grad()
    };
    LmState {
        h: (0..layers).map(|l| t(100 + l as u64)).collect(),
        c: (0..layers).map(|l| t(200 + l as u64)).collect(),
    }
}

fn check(cell: Cell, tied: bool, alpha: f32) {
    check_on(
        &Device::flex().autodiff(),
        Ops::Fused,
        cell,
        tied,
        alpha,
        12,
    );
}

/// `fused` (the ops `device` runs) against the composition, both on `device`, for a 2-layer
/// model `hidden` wide.
fn check_on(device: &Device, fused: Ops, cell: Cell, tied: bool, alpha: f32, hidden: usize) {
    let device = device.clone();
    device.seed(3);
    let (vocab, batch, time) = (53, 3, 7);
    let config = LmConfig {
        cell,
        d_embed: hidden,
        d_hidden: hidden,
        n_layers: 2,
        dropout: 0.0,
        tied,
        factor_rank: None,
        init_range: 0.5,
    };
    let model = config.init(vocab, &device);
    let ids: Vec<u32> = (0..batch * time)
        .map(|i| ((i * 17 + 5) % vocab) as u32)
        .collect();
    let targets: Vec<u32> = (0..batch * time)
        .map(|i| ((i * 11 + 2) % vocab) as u32)
        .collect();
    let name = format!("{fused:?} {cell:?} tied={tied} self-normalisation {alpha}");

    let run = |ops: Ops| {
        let state = random_state(2, batch, hidden, &device);
        let (h0, c0) = (state.h[0].clone(), state.c[1].clone());
        let (loss, next) = model.loss_with_norm(
            ids_tensor(&ids, batch, time, &device),
            ids_tensor(&targets, batch, time, &device),
            state,
            ops,
            alpha,
        );
        // The final state feeds the loss too, so that its gradient path (c_T's slot) is checked.
        let total = loss.clone() + next.h[1].clone().sum() * 0.1 + next.c[0].clone().sum() * 0.1;
        let grads = total.backward();
        let state_grads = vec![
            values(h0.grad(&grads).expect("h0 gradient")),
            c0.grad(&grads).map(values).unwrap_or_default(),
        ];
        let params = param_grads(
            &model,
            &burn::optim::GradientsParams::from_grads(grads, &model),
        );
        let finals: Vec<Vec<f32>> = next.h.into_iter().chain(next.c).map(values).collect();
        (values(loss), finals, state_grads, params)
    };
    let (loss_c, finals_c, state_c, params_c) = run(Ops::Composed);
    let (loss_f, finals_f, state_f, params_f) = run(fused);
    assert_close(&format!("{name} loss"), &loss_f, &loss_c);
    for (i, (f, c)) in finals_f.iter().zip(&finals_c).enumerate() {
        if cell == Cell::Gru && i >= 2 {
            continue; // a GRU has no cell state: both stay the zero tensors they came in as
        }
        assert_close(&format!("{name} final state {i}"), f, c);
    }
    assert_close(&format!("{name} dL/dh0"), &state_f[0], &state_c[0]);
    if cell == Cell::Lstm {
        assert_close(&format!("{name} dL/dc0"), &state_f[1], &state_c[1]);
    }
    assert_eq!(params_f.len(), params_c.len());
    for (i, (f, c)) in params_f.iter().zip(&params_c).enumerate() {
        assert_close(&format!("{name} parameter {i}"), f, c);
    }
}

#[test]
fn fused_lstm_matches_composition() {
    check(Cell::Lstm, false, 0.0);
}

#[test]
fn fused_gru_matches_composition() {
    check(Cell::Gru, false, 0.0);
}

#[test]
fn fused_tied_output_matches_composition() {
    check(Cell::Lstm, true, 0.0);
}

/// With the self-normalisation term `α·mean(log Z)²` (its gradient rides in the fused
/// backward's row scale).
#[test]
fn fused_self_normalisation_matches_composition() {
    check(Cell::Lstm, true, 0.1);
    check(Cell::Gru, false, 0.5);
}

/// The translator's encoder runs the fused windows at a tiny student's widths (256-wide
/// directions, so the kernels' blocking is the one training uses): every parameter's gradient
/// matches the composition's within 1e-4 of its norm.
#[test]
fn fused_translator_gradients_match_composition() {
    for cell in [Cell::Gru, Cell::Lstm] {
        let device = Device::flex().autodiff();
        device.seed(5);
        let config = NmtConfig {
            cell,
            d_embed: 32,
            d_hidden: 512,
            enc_layers: 2,
            dec_layers: 1,
            dropout: 0.0,
            tied: true,
            init_range: 0.1,
        };
        let model = config.init(50, 60, &device);
        let pairs: Vec<(Vec<u32>, Vec<u32>)> = (0..9u32)
            .map(|i| {
                let s = (0..6).map(|j| (i * 3 + j * 7) % 49).chain([49]).collect();
                let t = (0..i % 4 + 2).map(|j| (2 * i + j * 5) % 59).chain([59]);
                (s, t.collect())
            })
            .collect();
        let refs: Vec<(&[u32], &[u32])> = pairs.iter().map(|(s, t)| (&s[..], &t[..])).collect();
        let batch = NmtBatch::new(&refs, 59);
        let run = |ops| {
            let grads = model.loss(&batch, ops, None).backward();
            param_grads(
                &model,
                &burn::optim::GradientsParams::from_grads(grads, &model),
            )
        };
        let (fused, composed) = (run(Ops::Fused), run(Ops::Composed));
        assert_eq!(fused.len(), composed.len());
        for (i, (f, c)) in fused.iter().zip(&composed).enumerate() {
            let norm = c.iter().map(|x| x * x).sum::<f32>().sqrt();
            let diff = f.iter().zip(c).map(|(x, y)| (x - y).powi(2)).sum::<f32>();
            assert!(norm > 0.0, "{cell:?} parameter {i}: zero gradient");
            assert!(
                diff.sqrt() <= 1e-4 * norm,
                "{cell:?} parameter {i}: fused and composed gradients differ by {} (norm {norm})",
                diff.sqrt()
            );
        }
    }
}

#[test]
fn fused_ops_run_without_autodiff() {
    let device = Device::flex();
    device.seed(5);
    for cell in [Cell::Lstm, Cell::Gru] {
        let model = LmConfig {
            cell,
            d_embed: 8,
            d_hidden: 8,
            n_layers: 1,
            dropout: 0.0,
            tied: false,
            factor_rank: None,
            init_range: 0.5,
        }
        .init(20, &device);
        let ids: Vec<u32> = (0..10).map(|i| (i * 3 % 20) as u32).collect();
        let x = || ids_tensor(&ids, 2, 5, &device);
        let loss = |ops| {
            let state = model.initial_state(2, &device);
            values(model.loss_with(x(), x(), state, ops).0)
        };
        assert_close(
            &format!("{cell:?} inference loss"),
            &loss(Ops::Fused),
            &loss(Ops::Composed),
        );
    }
}

#[test]
fn sum_of_squares_and_its_gradient() {
    let device = Device::flex().autodiff();
    let data = seeded_values(2 * 70_001, 9);
    let want: f64 = data.iter().map(|&v| (v as f64) * (v as f64)).sum();
    let x = Tensor::<2>::from_floats(
        burn::tensor::TensorData::new(data.clone(), [2, 70_001]),
        &device,
    )
    .require_grad();
    let got = fastsoftmax_nn::fused::sum_of_squares(x.clone().inner());
    assert!((got - want).abs() < 1e-6 * want, "{got} vs {want}");
    // Through autodiff: d Σx² / dx = 2x.
    let s = Tensor::<1>::from_dispatch(
        <burn::backend::Dispatch as fastsoftmax_nn::fused::FusedOps>::sum_squares(
            x.clone().reshape([2 * 70_001]).into_dispatch(),
        ),
    );
    let grads = (s * 3.0).backward();
    let g = values(x.grad(&grads).unwrap());
    for (i, (&gi, &v)) in g.iter().zip(&data).enumerate().step_by(997) {
        assert!((gi - 6.0 * v).abs() < 1e-5, "dx[{i}] {gi} vs {}", 6.0 * v);
    }
}

/// Shifting the output biases by −mean log Z leaves the cross-entropy as it was and makes the
/// mean log Z 0: where self-normalisation training starts from a trained model.
#[test]
fn shifted_biases_keep_the_loss_and_centre_log_z() {
    let device = Device::flex();
    device.seed(7);
    for tied in [true, false] {
        let model = LmConfig {
            cell: Cell::Lstm,
            d_embed: 8,
            d_hidden: 8,
            n_layers: 1,
            dropout: 0.0,
            tied,
            factor_rank: None,
            init_range: 0.5,
        }
        .init(300, &device);
        let ids: Vec<u32> = (0..2 * 40).map(|i| (i * 7 % 300) as u32).collect();
        let x = || ids_tensor(&ids, 2, 40, &device);
        let loss = |m: &fastsoftmax_nn::lm::LanguageModel| {
            values(m.loss(x(), x(), m.initial_state(2, &device)).0)
        };
        let mean = model.mean_log_z(x());
        assert!(mean.abs() > 1.0, "{mean}");
        let before = loss(&model);
        let shifted = model.shift_output_bias(-mean as f32);
        assert!(shifted.mean_log_z(x()).abs() < 1e-4);
        assert_close("loss after the shift", &loss(&shifted), &before);
    }
}

/// The CubeCL kernels of `fused::cube` (the persistent recurrent windows, the softmax
/// cross-entropy) against the composition on wgpu (Mesa's software Vulkan on machines without a
/// GPU): loss, final state and every gradient.
#[cfg(feature = "wgpu")]
#[test]
fn wgpu_fused_ops_match_composition() {
    let Some(device) = fastsoftmax_nn::backend::wgpu_test_device() else {
        return;
    };
    let device = device.autodiff();
    assert_eq!(Ops::for_device(&device), Ops::Fused);
    check_on(&device, Ops::Fused, Cell::Lstm, false, 0.0, 12);
    check_on(&device, Ops::Fused, Cell::Gru, false, 0.0, 12);
    check_on(&device, Ops::Fused, Cell::Lstm, true, 0.1, 12);
    // A width 4 does not divide: the kernels read W_hh one column at a time (WindowPlan::width).
    check_on(&device, Ops::Fused, Cell::Lstm, false, 0.0, 10);
    check_on(&device, Ops::Fused, Cell::Gru, false, 0.0, 10);
}

/// `fused::embed` and `fused::select` (gathers on wgpu) against burn's `Embedding` and `select`:
/// the values, and the gradients where ids repeat (the atomic adds must sum every occurrence).
#[cfg(feature = "wgpu")]
#[test]
fn wgpu_gathers_match_burns_embedding_and_select() {
    use burn::nn::EmbeddingConfig;
    use burn::tensor::{Int, TensorData};
    let Some(device) = fastsoftmax_nn::backend::wgpu_test_device() else {
        return;
    };
    let device = device.autodiff();
    // The gathers' path, not burn's: a cubecl device.
    assert!(fastsoftmax_nn::fused::available(&device) && !fastsoftmax_nn::fused::on_cpu(&device));
    device.seed(9);

    let table = EmbeddingConfig::new(11, 6).init(&device);
    let ids: Vec<u32> = (0..4 * 9).map(|i| (i * 5 % 7) as u32).collect();
    let mix = Tensor::<3>::from_data(
        TensorData::new(seeded_values(4 * 9 * 6, 4), [4, 9, 6]),
        &device,
    );
    let run = |gather: bool| {
        let x = ids_tensor(&ids, 4, 9, &device);
        let rows = if gather {
            fastsoftmax_nn::fused::embed(&table, x)
        } else {
            table.forward(x)
        };
        let grads = (rows.clone() * mix.clone()).sum().backward();
        (
            values(rows),
            values(table.weight.val().grad(&grads).expect("table gradient")),
        )
    };
    let (rows_g, grad_g) = run(true);
    let (rows_e, grad_e) = run(false);
    assert_eq!(rows_g, rows_e, "embedding rows");
    assert_close("embedding table gradient", &grad_g, &grad_e);

    // A matrix along its columns, and a vector: `select`'s two shapes in the sampled softmax.
    let m = Tensor::<2>::from_data(TensorData::new(seeded_values(5 * 13, 6), [5, 13]), &device)
        .require_grad();
    let cols =
        Tensor::<1, Int>::from_data(TensorData::new(vec![3i64, 12, 3, 0, 7, 3], [6]), &device);
    let mix = Tensor::<2>::from_data(TensorData::new(seeded_values(5 * 6, 8), [5, 6]), &device);
    let run = |gather: bool| {
        let (picked, from_vector) = if gather {
            (
                fastsoftmax_nn::fused::select(m.clone(), 1, cols.clone()),
                fastsoftmax_nn::fused::select(m.clone().sum_dim(0).reshape([13]), 0, cols.clone()),
            )
        } else {
            (
                m.clone().select(1, cols.clone()),
                m.clone().sum_dim(0).reshape([13]).select(0, cols.clone()),
            )
        };
        let loss = (picked.clone() * mix.clone()).sum() + (from_vector.clone() * 0.5).sum();
        let grad = m.grad(&loss.backward()).expect("matrix gradient");
        (values(picked), values(from_vector), values(grad))
    };
    let (picked_g, vector_g, grad_g) = run(true);
    let (picked_s, vector_s, grad_s) = run(false);
    assert_eq!(picked_g, picked_s, "columns");
    assert_eq!(vector_g, vector_s, "vector");
    assert_close("select gradient", &grad_g, &grad_s);
}

/// A layer whose state fits a cube's shared memory runs the kernels; one that does not runs the
/// composition (lavapipe's limit is tens of kilobytes, not megabytes).
#[cfg(feature = "wgpu")]
#[test]
fn wgpu_windows_fall_back_where_shared_memory_is_short() {
    use fastsoftmax_nn::fused::window_fits;
    let Some(device) = fastsoftmax_nn::backend::wgpu_test_device() else {
        return;
    };
    for cell in [Cell::Lstm, Cell::Gru] {
        assert!(window_fits(&device, cell, 256), "{cell:?} 256");
        assert!(!window_fits(&device, cell, 1 << 20), "{cell:?} 2^20");
        assert!(window_fits(&Device::flex(), cell, 1 << 20));
    }
}

/// Without autodiff (validation, inference) the forward kernels run alone: layers wider than a
/// cube has threads (1,024), so every kernel strides, and so narrow that the forward's product
/// splits its rows (`WindowPlan::forward_splits` 8); a larger vocabulary than a cube has threads.
#[cfg(feature = "wgpu")]
#[test]
fn wgpu_fused_ops_run_without_autodiff() {
    let Some(device) = fastsoftmax_nn::backend::wgpu_test_device() else {
        return;
    };
    device.seed(5);
    for (cell, d_hidden) in [Cell::Lstm, Cell::Gru]
        .into_iter()
        .flat_map(|c| [(c, 350), (c, 4)])
    {
        let model = LmConfig {
            cell,
            d_embed: 8,
            d_hidden,
            n_layers: 1,
            dropout: 0.0,
            tied: false,
            factor_rank: None,
            init_range: 0.5,
        }
        .init(700, &device);
        let ids: Vec<u32> = (0..30).map(|i| (i * 97 % 700) as u32).collect();
        let x = || ids_tensor(&ids, 3, 10, &device);
        let loss = |ops| {
            let state = model.initial_state(3, &device);
            values(model.loss_with(x(), x(), state, ops).0)
        };
        assert_close(
            &format!("{cell:?} {d_hidden} wgpu inference loss"),
            &loss(Ops::Fused),
            &loss(Ops::Composed),
        );
    }
}

type Grads = (Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>);

/// A sampled softmax fixture: `n` rows of width `d`, a vocabulary of `v`, `samples` drawn.
/// `tied`: `w` is the transpose of a `[V, D]` leaf, as a tied embedding hands it over.
#[derive(Clone, Copy)]
struct SampledCase {
    n: usize,
    d: usize,
    v: usize,
    samples: usize,
    tied: bool,
    /// Counts over twelve orders of magnitude, and half the rows' targets among the rarest
    /// words: the log-Q corrections then run from words drawn almost surely to targets whose
    /// `tries · Q` is ~1e-8 (an offset near +19).
    skewed: bool,
}

/// Smaller than a cube of threads everywhere, with accidental hits.
const SMALL: SampledCase = SampledCase {
    n: 9,
    d: 5,
    v: 40,
    samples: 12,
    tied: false,
    skewed: false,
};

/// The sampled softmax's loss and its gradients of `h`, `w`, `b` on `device`, composed of burn
/// ops or the fused op, on a seeded fixture whose negatives include some rows' targets
/// (accidental hits) and whose rows share targets.
fn sampled_run(device: &Device, composed: bool, case: SampledCase) -> Grads {
    use fastsoftmax_nn::fused::Sampler;
    use std::sync::Arc;
    let SampledCase {
        n,
        d,
        v,
        samples,
        tied,
        skewed,
    } = case;
    let leaf = |len, dims: Vec<usize>, seed| {
        Tensor::<2>::from_floats(
            burn::tensor::TensorData::new(seeded_values(len, seed), dims),
            device,
        )
        .require_grad()
    };
    let counts: Vec<u64> = if skewed {
        (0..v as u64)
            .map(|i| 1_000_000_000_000 / (i + 1).pow(4))
            .collect()
    } else {
        (0..v as u64).map(|i| 1 + (v as u64 - i) * 3).collect()
    };
    let negatives = Arc::new(Sampler::new(&counts, 0.75)).draw(samples, 4);
    // Rows in pairs share a target; with skewed counts, every other pair's is among the rarest.
    let targets: Vec<u32> = (0..n)
        .map(|i| match skewed && i / 2 % 2 == 1 {
            true => (v - 1 - i / 4) as u32,
            false => ((i / 2 * 7) % v) as u32,
        })
        .collect();
    assert!(
        targets.iter().any(|t| negatives.ids.contains(t)),
        "no accidental hit"
    );
    let h = leaf(n * d, vec![n, d], 31);
    let w_leaf = if tied {
        leaf(v * d, vec![v, d], 32)
    } else {
        leaf(d * v, vec![d, v], 32)
    };
    let w = if tied {
        w_leaf.clone().transpose()
    } else {
        w_leaf.clone()
    };
    let b = leaf(v, vec![1, v], 33);
    let y = ids_tensor(&targets, 1, n, device).reshape([n]);
    let b1 = b.clone().reshape([v]);
    let loss = if composed {
        fastsoftmax_nn::lm::sampled_cross_entropy_composed(h.clone(), w, b1, y, &negatives)
    } else {
        fastsoftmax_nn::fused::sampled_softmax_cross_entropy(h.clone(), w, b1, y, &negatives)
    };
    let grads = loss.backward();
    let g = |t: &Tensor<2>| values(t.grad(&grads).expect("gradient"));
    (values(loss), g(&h), g(&w_leaf), g(&b))
}

fn assert_sampled_close(what: &str, got: &Grads, want: &Grads) {
    assert_close(&format!("{what} loss"), &got.0, &want.0);
    assert_close(&format!("{what} dL/dh"), &got.1, &want.1);
    assert_close(&format!("{what} dL/dW"), &got.2, &want.2);
    assert_close(&format!("{what} dL/db"), &got.3, &want.3);
}

/// The sampled softmax composed of burn ops (what a backend without the fused op trains with)
/// against flex's fused op.
#[test]
fn composed_sampled_softmax_matches_the_fused_op() {
    let device = Device::flex().autodiff();
    assert_sampled_close(
        "sampled, composed on flex",
        &sampled_run(&device, true, SMALL),
        &sampled_run(&device, false, SMALL),
    );
}

/// The CubeCL sampled softmax (its row kernel, its gradient and scatter kernels) against flex's
/// fused op and against the composition on wgpu itself: the small fixture, a tied `w`, one with
/// more rows, more width and more samples than a cube has threads (256), and one with very rare
/// targets. (Their offsets dominate their rows, so an offset's rounding hardly shows in the
/// loss: `wgpu_sampled_offsets_match_the_hosts_log_expected` checks the offsets themselves.)
#[cfg(feature = "wgpu")]
#[test]
fn wgpu_sampled_softmax_matches_the_fused_op() {
    let Some(wgpu) = fastsoftmax_nn::backend::wgpu_test_device() else {
        return;
    };
    let wgpu = wgpu.autodiff();
    let flex = Device::flex().autodiff();
    assert!(fastsoftmax_nn::fused::samples_fused(&wgpu));
    let large = SampledCase {
        n: 270,
        d: 260,
        v: 1200,
        samples: 300,
        tied: false,
        skewed: false,
    };
    let skewed = SampledCase {
        n: 12,
        d: 7,
        v: 1200,
        samples: 8,
        tied: false,
        skewed: true,
    };
    let tied = SampledCase {
        tied: true,
        ..SMALL
    };
    for (name, case) in [
        ("small", SMALL),
        ("tied", tied),
        ("large", large),
        ("skewed", skewed),
    ] {
        let fused = sampled_run(&wgpu, false, case);
        assert_sampled_close(
            &format!("sampled {name}, wgpu against flex"),
            &fused,
            &sampled_run(&flex, false, case),
        );
        assert_sampled_close(
            &format!("sampled {name}, wgpu fused against composed"),
            &fused,
            &sampled_run(&wgpu, true, case),
        );
    }
}
