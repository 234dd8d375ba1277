//! One truncated-BPTT window of an LSTM or GRU layer, forward and hand-written backward, on plain
//! slices. The input half of every gate (`x·W_ih + b_ih`, one product for the whole window) comes
//! in as `xp`; these kernels run the recurrence.
//!
//! Layouts are batch-major, as burn hands them over: `xp`, the tape and `dxp` are `[B, T, G·H]`
//! (gate order i,f,g,o for LSTM and r,z,n for GRU, as in [`crate::lm`]), `W_hh` is `[H, G·H]`.
//! Streams are independent, so the batch is split into one block of rows per thread and each
//! thread runs all `T` steps of its block: both cores busy, no barrier per step. The weight
//! gradient is one product over the whole window afterwards.

use rayon::prelude::*;

use super::gemm::{matmul, MatRef};
use super::simd::multiversion;
use super::vector::column_sums;

/// Sizes of one window: `batch` streams of `time` steps through a layer of `hidden` units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub batch: usize,
    pub time: usize,
    pub hidden: usize,
}

impl Window {
    /// Streams per thread block.
    fn rows_per_block(&self) -> usize {
        self.batch
            .div_ceil(rayon::current_num_threads().max(1))
            .max(1)
    }
}

/// The engine's branch-free `σ` and `tanh` (no subnormals, vectorisable), shared with training.
pub use fastsoftmax_infer::kernels::{sigmoid, tanh};

/// What the LSTM backward needs from the forward.
#[derive(Clone)]
pub struct LstmTape {
    pub window: Window,
    /// `[B, T, 4H]`: the activated gates i, f, g, o.
    pub gates: Vec<f32>,
    /// `[B, T, H]`: the cell state after each step.
    pub cells: Vec<f32>,
}

/// What the GRU backward needs from the forward.
#[derive(Clone)]
pub struct GruTape {
    pub window: Window,
    /// `[B, T, 4H]`: r, z, n and the hidden half of n's pre-activation (`h·W_hn + b_hn`).
    pub gates: Vec<f32>,
}

/// Gradients of one window with respect to the op's inputs.
pub struct RecurrentGrads {
    /// `[B, T, G·H]`
    pub dxp: Vec<f32>,
    /// `[H, G·H]`
    pub dw_hh: Vec<f32>,
    /// `[G·H]`
    pub db_hh: Vec<f32>,
    /// `[B, H]`
    pub dh0: Vec<f32>,
    /// `[B, H]` (LSTM only; empty for GRU)
    pub dc0: Vec<f32>,
}

/// LSTM forward. Returns `out [B, T+1, H]` (`h_1 … h_T`, then `c_T`) and the tape.
pub fn lstm_forward(
    w: Window,
    xp: &[f32],
    w_hh: MatRef,
    b_hh: &[f32],
    h0: &[f32],
    c0: &[f32],
) -> (Vec<f32>, LstmTape) {
    let (t, h) = (w.time, w.hidden);
    let g = 4 * h;
    check_shapes(w, 4, xp, w_hh, b_hh, h0);
    assert_eq!(c0.len(), w.batch * h, "c0 must be [batch, hidden]");
    let mut out = vec![0.0; w.batch * (t + 1) * h];
    let mut gates = vec![0.0; w.batch * t * g];
    let mut cells = vec![0.0; w.batch * t * h];
    let rows = w.rows_per_block();
    out.par_chunks_mut(rows * (t + 1) * h)
        .zip(gates.par_chunks_mut(rows * t * g))
        .zip(cells.par_chunks_mut(rows * t * h))
        .zip(xp.par_chunks(rows * t * g))
        .zip(h0.par_chunks(rows * h).zip(c0.par_chunks(rows * h)))
        .for_each(|((((out, gates), cells), xp), (h0, c0))| {
            lstm_forward_block(t, h, xp, w_hh, b_hh, h0, c0, out, gates, cells)
        });
    (
        out,
        LstmTape {
            window: w,
            gates,
            cells,
        },
    )
}

multiversion! {
    fn lstm_forward_block(
        time: usize,
        h: usize,
        xp: &[f32],
        w_hh: MatRef,
        b_hh: &[f32],
        h0: &[f32],
        c0: &[f32],
        out: &mut [f32],
        gates: &mut [f32],
        cells: &mut [f32],
    ) {
        let g = 4 * h;
        let rows = h0.len() / h;
        let mut hp = vec![0.0; rows * g];
        for t in 0..time {
            let prev = if t == 0 {
                MatRef::rows(h0, rows, h)
            } else {
                strided_rows(out, (t - 1) * h, rows, h, (time + 1) * h)
            };
            matmul(&mut hp, g, prev, w_hh, false);
            for b in 0..rows {
                let bt = b * time + t;
                let gt = &mut gates[bt * g..(bt + 1) * g];
                for ((a, &x), (&p, &bias)) in gt
                    .iter_mut()
                    .zip(&xp[bt * g..(bt + 1) * g])
                    .zip(hp[b * g..(b + 1) * g].iter().zip(b_hh))
                {
                    *a = x + p + bias;
                }
                let (ifg, o) = gt.split_at_mut(3 * h);
                let (if_, gg) = ifg.split_at_mut(2 * h);
                if_.iter_mut()
                    .chain(o.iter_mut())
                    .for_each(|v| *v = sigmoid(*v));
                gg.iter_mut().for_each(|v| *v = tanh(*v));
                let (i, f) = if_.split_at(h);
                let (before, rest) = cells.split_at_mut(bt * h);
                let c_prev = if t == 0 {
                    &c0[b * h..(b + 1) * h]
                } else {
                    &before[(bt - 1) * h..]
                };
                let c_t = &mut rest[..h];
                let h_t = &mut out[(b * (time + 1) + t) * h..][..h];
                for j in 0..h {
                    let c = f[j] * c_prev[j] + i[j] * gg[j];
                    c_t[j] = c;
                    h_t[j] = o[j] * tanh(c);
                }
            }
        }
        for b in 0..rows {
            let c_last = (b * time + time - 1) * h;
            out[(b * (time + 1) + time) * h..][..h].copy_from_slice(&cells[c_last..c_last + h]);
        }
    }
}

/// LSTM backward. `dout [B, T+1, H]` is the gradient of the forward's `out` (the last slot is
/// `c_T`'s), `out` the forward's output.
pub fn lstm_backward(
    tape: &LstmTape,
    out: &[f32],
    w_hh: MatRef,
    h0: &[f32],
    c0: &[f32],
    dout: &[f32],
) -> RecurrentGrads {
    let w = tape.window;
    let (t, h) = (w.time, w.hidden);
    let g = 4 * h;
    assert_eq!(
        dout.len(),
        w.batch * (t + 1) * h,
        "LSTM output gradient shape"
    );
    let wt = transposed(w_hh);
    let wt = MatRef::rows(&wt, g, h);
    let mut dxp = vec![0.0; w.batch * t * g];
    let mut dh0 = vec![0.0; w.batch * h];
    let mut dc0 = vec![0.0; w.batch * h];
    let rows = w.rows_per_block();
    dxp.par_chunks_mut(rows * t * g)
        .zip(
            dh0.par_chunks_mut(rows * h)
                .zip(dc0.par_chunks_mut(rows * h)),
        )
        .zip(tape.gates.par_chunks(rows * t * g))
        .zip(tape.cells.par_chunks(rows * t * h))
        .zip(
            dout.par_chunks(rows * (t + 1) * h)
                .zip(c0.par_chunks(rows * h)),
        )
        .for_each(|((((dxp, (dh0, dc0)), gates), cells), (dout, c0))| {
            lstm_backward_block(t, h, wt, gates, cells, c0, dout, dxp, dh0, dc0)
        });
    let (dw_hh, db_hh) = weight_grads(w, g, out, t + 1, h0, &dxp);
    RecurrentGrads {
        dxp,
        dw_hh,
        db_hh,
        dh0,
        dc0,
    }
}

multiversion! {
    fn lstm_backward_block(
        time: usize,
        h: usize,
        wt: MatRef,
        gates: &[f32],
        cells: &[f32],
        c0: &[f32],
        dout: &[f32],
        dgates: &mut [f32],
        dh_next: &mut [f32],
        dc: &mut [f32],
    ) {
        let g = 4 * h;
        let rows = dh_next.len() / h;
        // dc starts as the gradient of c_T; dh_next (zero) carries dL/dh_{t-1} between steps.
        for b in 0..rows {
            dc[b * h..(b + 1) * h].copy_from_slice(&dout[(b * (time + 1) + time) * h..][..h]);
        }
        for t in (0..time).rev() {
            for b in 0..rows {
                let bt = b * time + t;
                let gt = &gates[bt * g..(bt + 1) * g];
                let (i, rest) = gt.split_at(h);
                let (f, rest) = rest.split_at(h);
                let (gg, o) = rest.split_at(h);
                let c = &cells[bt * h..(bt + 1) * h];
                let c_prev = if t == 0 {
                    &c0[b * h..(b + 1) * h]
                } else {
                    &cells[(bt - 1) * h..bt * h]
                };
                let dh_out = &dout[(b * (time + 1) + t) * h..][..h];
                let dh_in = &dh_next[b * h..(b + 1) * h];
                let dct = &mut dc[b * h..(b + 1) * h];
                let dg = &mut dgates[bt * g..(bt + 1) * g];
                for j in 0..h {
                    let dh = dh_out[j] + dh_in[j];
                    let tc = tanh(c[j]);
                    let d_o = dh * tc;
                    let dcc = dct[j] + dh * o[j] * (1.0 - tc * tc);
                    dg[j] = dcc * gg[j] * i[j] * (1.0 - i[j]);
                    dg[h + j] = dcc * c_prev[j] * f[j] * (1.0 - f[j]);
                    dg[2 * h + j] = dcc * i[j] * (1.0 - gg[j] * gg[j]);
                    dg[3 * h + j] = d_o * o[j] * (1.0 - o[j]);
                    dct[j] = dcc * f[j];
                }
            }
            let dg_t = strided_rows(dgates, t * g, rows, g, time * g);
            matmul(dh_next, h, dg_t, wt, false);
        }
    }
}

/// GRU forward. Returns `out [B, T, H]` (`h_1 … h_T`) and the tape.
pub fn gru_forward(
    w: Window,
    xp: &[f32],
    w_hh: MatRef,
    b_hh: &[f32],
    h0: &[f32],
) -> (Vec<f32>, GruTape) {
    let (t, h) = (w.time, w.hidden);
    check_shapes(w, 3, xp, w_hh, b_hh, h0);
    let mut out = vec![0.0; w.batch * t * h];
    let mut gates = vec![0.0; w.batch * t * 4 * h];
    let rows = w.rows_per_block();
    out.par_chunks_mut(rows * t * h)
        .zip(gates.par_chunks_mut(rows * t * 4 * h))
        .zip(xp.par_chunks(rows * t * 3 * h).zip(h0.par_chunks(rows * h)))
        .for_each(|((out, gates), (xp, h0))| {
            gru_forward_block(t, h, xp, w_hh, b_hh, h0, out, gates)
        });
    (out, GruTape { window: w, gates })
}

multiversion! {
    fn gru_forward_block(
        time: usize,
        h: usize,
        xp: &[f32],
        w_hh: MatRef,
        b_hh: &[f32],
        h0: &[f32],
        out: &mut [f32],
        gates: &mut [f32],
    ) {
        let g = 3 * h;
        let rows = h0.len() / h;
        let mut hp = vec![0.0; rows * g];
        for t in 0..time {
            let prev = if t == 0 {
                MatRef::rows(h0, rows, h)
            } else {
                strided_rows(out, (t - 1) * h, rows, h, time * h)
            };
            matmul(&mut hp, g, prev, w_hh, false);
            for b in 0..rows {
                let bt = b * time + t;
                let x = &xp[bt * g..(bt + 1) * g];
                let p = &hp[b * g..(b + 1) * g];
                let tape = &mut gates[bt * 4 * h..(bt + 1) * 4 * h];
                let (before, rest) = out.split_at_mut(bt * h);
                let h_prev = if t == 0 {
                    &h0[b * h..(b + 1) * h]
                } else {
                    &before[(bt - 1) * h..]
                };
                let h_t = &mut rest[..h];
                for j in 0..h {
                    let r = sigmoid(x[j] + p[j] + b_hh[j]);
                    let z = sigmoid(x[h + j] + p[h + j] + b_hh[h + j]);
                    let hn = p[2 * h + j] + b_hh[2 * h + j];
                    let n = tanh(x[2 * h + j] + r * hn);
                    h_t[j] = n + z * (h_prev[j] - n);
                    tape[j] = r;
                    tape[h + j] = z;
                    tape[2 * h + j] = n;
                    tape[3 * h + j] = hn;
                }
            }
        }
    }
}

/// GRU backward. `dout [B, T, H]` is the gradient of the forward's `out`.
pub fn gru_backward(
    tape: &GruTape,
    out: &[f32],
    w_hh: MatRef,
    h0: &[f32],
    dout: &[f32],
) -> RecurrentGrads {
    let w = tape.window;
    let (t, h) = (w.time, w.hidden);
    let g = 3 * h;
    assert_eq!(dout.len(), w.batch * t * h, "GRU output gradient shape");
    let wt = transposed(w_hh);
    let wt = MatRef::rows(&wt, g, h);
    let mut dxp = vec![0.0; w.batch * t * g];
    let mut dhp = vec![0.0; w.batch * t * g];
    let mut dh0 = vec![0.0; w.batch * h];
    let rows = w.rows_per_block();
    dxp.par_chunks_mut(rows * t * g)
        .zip(dhp.par_chunks_mut(rows * t * g))
        .zip(dh0.par_chunks_mut(rows * h))
        .zip(tape.gates.par_chunks(rows * t * 4 * h))
        .zip(
            out.par_chunks(rows * t * h)
                .zip(h0.par_chunks(rows * h))
                .zip(dout.par_chunks(rows * t * h)),
        )
        .for_each(|((((dxp, dhp), dh0), gates), ((out, h0), dout))| {
            gru_backward_block(t, h, wt, gates, out, h0, dout, dxp, dhp, dh0)
        });
    let (dw_hh, db_hh) = weight_grads(w, g, out, t, h0, &dhp);
    RecurrentGrads {
        dxp,
        dw_hh,
        db_hh,
        dh0,
        dc0: Vec::new(),
    }
}

multiversion! {
    fn gru_backward_block(
        time: usize,
        h: usize,
        wt: MatRef,
        gates: &[f32],
        out: &[f32],
        h0: &[f32],
        dout: &[f32],
        dxp: &mut [f32],
        dhp: &mut [f32],
        dh_next: &mut [f32],
    ) {
        let g = 3 * h;
        let rows = dh_next.len() / h;
        for t in (0..time).rev() {
            for b in 0..rows {
                let bt = b * time + t;
                let tape = &gates[bt * 4 * h..(bt + 1) * 4 * h];
                let h_prev = if t == 0 {
                    &h0[b * h..(b + 1) * h]
                } else {
                    &out[(bt - 1) * h..bt * h]
                };
                let dh_out = &dout[bt * h..(bt + 1) * h];
                let dh_carry = &mut dh_next[b * h..(b + 1) * h];
                let dx = &mut dxp[bt * g..(bt + 1) * g];
                let dp = &mut dhp[bt * g..(bt + 1) * g];
                for j in 0..h {
                    let (r, z, n, hn) = (tape[j], tape[h + j], tape[2 * h + j], tape[3 * h + j]);
                    let dh = dh_out[j] + dh_carry[j];
                    let dn = dh * (1.0 - z) * (1.0 - n * n);
                    let dr = dn * hn * r * (1.0 - r);
                    let dz = dh * (h_prev[j] - n) * z * (1.0 - z);
                    dx[j] = dr;
                    dx[h + j] = dz;
                    dx[2 * h + j] = dn;
                    dp[j] = dr;
                    dp[h + j] = dz;
                    dp[2 * h + j] = dn * r;
                    dh_carry[j] = dh * z;
                }
            }
            let dp_t = strided_rows(dhp, t * g, rows, g, time * g);
            matmul(dh_next, h, dp_t, wt, true);
        }
    }
}

/// `dW_hh = Σ_{b,t} h_{t−1}ᵀ · dG_{b,t}` as one product, and `db_hh = Σ dG`. `out` holds
/// `h_1 …` with `slots` time slots per stream.
fn weight_grads(
    w: Window,
    g: usize,
    out: &[f32],
    slots: usize,
    h0: &[f32],
    dg: &[f32],
) -> (Vec<f32>, Vec<f32>) {
    let (t, h) = (w.time, w.hidden);
    let mut h_prev = vec![0.0; w.batch * t * h];
    for b in 0..w.batch {
        for s in 0..t {
            let src = if s == 0 {
                &h0[b * h..(b + 1) * h]
            } else {
                &out[(b * slots + s - 1) * h..][..h]
            };
            h_prev[(b * t + s) * h..][..h].copy_from_slice(src);
        }
    }
    let n = w.batch * t;
    let mut dw = vec![0.0; h * g];
    matmul(
        &mut dw,
        g,
        MatRef::rows(&h_prev, n, h).t(),
        MatRef::rows(dg, n, g),
        false,
    );
    (dw, column_sums(dg, g))
}

/// A contiguous copy of `m`'s transpose.
fn transposed(m: MatRef) -> Vec<f32> {
    let mut t = vec![0.0; m.rows * m.cols];
    for i in 0..m.rows {
        for j in 0..m.cols {
            t[j * m.rows + i] = m.data[m.offset + i * m.rs + j * m.cs];
        }
    }
    t
}

/// `rows` rows of `cols` values, `stride` apart, starting at `offset`.
fn strided_rows(
    data: &[f32],
    offset: usize,
    rows: usize,
    cols: usize,
    stride: usize,
) -> MatRef<'_> {
    MatRef {
        data,
        offset,
        rows,
        cols,
        rs: stride,
        cs: 1,
    }
}

fn check_shapes(w: Window, gates: usize, xp: &[f32], w_hh: MatRef, b_hh: &[f32], h0: &[f32]) {
    let g = gates * w.hidden;
    assert!(
        w.batch > 0 && w.time > 0 && w.hidden > 0,
        "empty window {w:?}"
    );
    assert_eq!(
        xp.len(),
        w.batch * w.time * g,
        "xp must be [batch, time, {gates}·hidden]"
    );
    assert_eq!(
        (w_hh.rows, w_hh.cols),
        (w.hidden, g),
        "W_hh must be [hidden, {gates}·hidden]"
    );
    assert_eq!(b_hh.len(), g, "b_hh must be [{gates}·hidden]");
    assert_eq!(h0.len(), w.batch * w.hidden, "h0 must be [batch, hidden]");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn activations_match_libm() {
        for i in -2000..=2000 {
            let x = i as f32 * 0.01;
            assert!(
                (sigmoid(x) - 1.0 / (1.0 + (-x).exp())).abs() < 3e-7,
                "sigmoid({x})"
            );
            assert!((tanh(x) - x.tanh()).abs() < 3e-7, "tanh({x})");
        }
        // Saturated inputs are clamped at |x| = 40: tiny but never subnormal.
        assert!(sigmoid(-200.0) > 0.0 && sigmoid(-200.0) < 1e-17);
        assert_eq!(sigmoid(200.0), 1.0);
        assert_eq!(tanh(200.0), 1.0);
    }
}
