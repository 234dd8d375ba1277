//! Kernel launches of a training window on wgpu (Mesa's software Vulkan on machines without a
//! GPU): the persistent recurrent kernels hold a 2-layer LSTM or GRU to at most 12 launches per
//! time step, forward and backward together. Its own test binary: the launch observer is global, and
//! another test's kernels running beside it would be counted.
#![cfg(feature = "wgpu")]

use fastsoftmax_infer::model::artifact::Cell;
use fastsoftmax_nn::launches::{training_window, WindowLoss};
use fastsoftmax_nn::lm::Ops;
use fastsoftmax_nn::LmConfig;

#[test]
fn wgpu_launches_per_time_step_of_a_two_layer_lstm_and_gru() {
    for cell in [Cell::Lstm, Cell::Gru] {
        check(cell);
    }
}

fn check(cell: Cell) {
    let Some(device) = fastsoftmax_nn::backend::wgpu_test_device() else {
        return;
    };
    let device = device.autodiff();
    let config = LmConfig {
        cell,
        d_embed: 32,
        d_hidden: 32,
        n_layers: 2,
        dropout: 0.0,
        tied: false,
        factor_rank: None,
        init_range: 0.1,
    };
    let (vocab, batch, bptt) = (300, 4, 20);
    let window = |loss| training_window(&config, loss, vocab, batch, bptt, &device);
    let fused = window(WindowLoss::Full(Ops::Fused));
    let composed = window(WindowLoss::Full(Ops::Composed));
    let per_step = |n: usize| n as f64 / bptt as f64;
    eprintln!(
        "{cell:?} launches per window: fused {} ({:.2} per step), composed {} ({:.2} per step)",
        fused.total(),
        per_step(fused.total()),
        composed.total(),
        per_step(composed.total()),
    );
    assert!(
        per_step(fused.total()) <= 12.0,
        "{} launches per time step: {:?}",
        per_step(fused.total()),
        fused.0
    );
    // The count sees the window: the composed path's per-step kernels show up in it.
    assert!(
        composed.total() > 2 * fused.total(),
        "{composed:?} vs {fused:?}"
    );

    // The sampled softmax (the IME recipe's loss) on its kernels, against its composition.
    let sampled = |composed| {
        window(WindowLoss::Sampled {
            samples: 64,
            composed,
        })
    };
    let (fused_sampled, composed_sampled) = (sampled(false), sampled(true));
    eprintln!(
        "{cell:?} sampled softmax launches per window: fused {} ({:.2} per step), composed {} \
         ({:.2} per step)",
        fused_sampled.total(),
        per_step(fused_sampled.total()),
        composed_sampled.total(),
        per_step(composed_sampled.total()),
    );
    assert!(per_step(fused_sampled.total()) <= 12.0, "{fused_sampled:?}");
    assert!(
        fused_sampled.total() < composed_sampled.total(),
        "{fused_sampled:?} vs {composed_sampled:?}"
    );
}
