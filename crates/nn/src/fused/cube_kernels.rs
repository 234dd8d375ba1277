//! The recurrent windows as CubeCL kernels (wgpu, CUDA, ROCm from one source): one persistent
//! kernel per BPTT window and layer, forward and backward, as cuDNN's persistent RNNs do.
//!
//! Why persistent: composed of burn ops, every time step is a dozen small kernels and the GPU
//! spends the window waiting on launches (burn #4817). Here one cube (workgroup) carries one
//! stream of the batch through all `T` steps: its state lives in shared memory, each step is the
//! recurrent product ([`vec_mat`]: every thread busy, reads of `W_hh` coalesced, several in
//! flight) and the gate nonlinearities, separated by two barriers. The streams of a batch are independent, so the
//! cubes never wait for each other. The products that do not recur — the input projection of
//! the window and the weight gradients — stay large matrix products in burn.
//!
//! Layouts (row-major, contiguous): `xp [B, T, G·H]` (the input projection with its bias),
//! `w [H, G·H]` (`W_hh` as burn's `Linear` stores it), `w_t [G·H, H]` (its transpose, for the
//! backward's coalesced reads), gates in PyTorch's order (LSTM i,f,g,o; GRU r,z,n).

use cubecl::prelude::*;

/// `1 / (1 + e^−x)`: saturates to exactly 0 or 1 without NaN for any finite `x`.
#[cube]
fn sigmoid<F: Float>(x: F) -> F {
    F::new(1.0) / (F::new(1.0) + F::exp(-x))
}

/// `tanh` as `2σ(2x) − 1`: a backend's own `tanh` may be `(e^2x − 1)/(e^2x + 1)`, NaN past
/// |x| ≈ 44 in f32.
#[cube]
fn tanh<F: Float>(x: F) -> F {
    F::new(2.0) / (F::new(1.0) + F::exp(F::new(-2.0) * x)) - F::new(1.0)
}

/// `part[s·cols + q] = Σ_{k ∈ slice s} x[k] · m[k·cols + q]` for every column `q < cols` and
/// slice `s < splits`: the product of a vector `x [rows]` in shared memory and a row-major
/// `m [rows, cols]` in global memory, read as vectors of `width` columns (the size of `N`, which
/// the launch sets to the same value), by all of the cube's threads; [`summed`] adds the slices.
///
/// Why this shape: a cube carries its stream alone, so a step's product is bound by the latency
/// of its loads, not by arithmetic. Each load brings `width` columns (one 16-byte load for 4),
/// and with more threads than column groups the rows split into `splits` slices so that no
/// thread idles (an LSTM's backward has `H / width` groups for up to 1,024 threads); four
/// accumulators keep four loads in flight per thread. Consecutive threads read consecutive
/// groups, so a warp's loads are coalesced. Ends with a barrier.
#[cube]
fn vec_mat<F: Float, N: Size>(
    x: &Shared<[F]>,
    m: &Tensor<Vector<F, N>>,
    part: &mut Shared<[F]>,
    #[comptime] rows: usize,
    #[comptime] cols: usize,
    #[comptime] width: usize,
    #[comptime] splits: usize,
) {
    let groups = comptime!(cols / width);
    let chunk = comptime!(rows.div_ceil(splits));
    let items = comptime!(splits * groups);
    let mut item = UNIT_POS_X as usize;
    while item < items {
        let q = item % groups;
        let slice = item / groups;
        let k0 = slice * chunk;
        let mut k1 = k0 + chunk;
        if k1 > rows {
            k1 = rows;
        }
        let mut a0 = Vector::<F, N>::broadcast(F::new(0.0));
        let mut a1 = Vector::<F, N>::broadcast(F::new(0.0));
        let mut a2 = Vector::<F, N>::broadcast(F::new(0.0));
        let mut a3 = Vector::<F, N>::broadcast(F::new(0.0));
        let mut k = k0;
        while k + 4 <= k1 {
            a0 += Vector::<F, N>::broadcast(x[k]) * m[k * groups + q];
            a1 += Vector::<F, N>::broadcast(x[k + 1]) * m[(k + 1) * groups + q];
            a2 += Vector::<F, N>::broadcast(x[k + 2]) * m[(k + 2) * groups + q];
            a3 += Vector::<F, N>::broadcast(x[k + 3]) * m[(k + 3) * groups + q];
            k += 4;
        }
        while k < k1 {
            a0 += Vector::<F, N>::broadcast(x[k]) * m[k * groups + q];
            k += 1;
        }
        let sum = (a0 + a1) + (a2 + a3);
        let base = slice * cols + q * width;
        #[unroll]
        for l in 0..width {
            part[base + l] = sum.extract(l);
        }
        item += CUBE_DIM_X as usize;
    }
    sync_cube();
}

/// Column `q` of a [`vec_mat`] product: its slices' partial sums added.
#[cube]
fn summed<F: Float>(
    part: &Shared<[F]>,
    q: usize,
    #[comptime] cols: usize,
    #[comptime] splits: usize,
) -> F {
    let mut acc = part[q];
    #[unroll]
    for s in 1..splits {
        acc += part[s * cols + q];
    }
    acc
}

/// Zeroes `part`'s `n` values (the product of a step that does not exist: `dh_T = 0`).
#[cube]
fn zero<F: Float>(part: &mut Shared<[F]>, #[comptime] n: usize) {
    let mut i = UNIT_POS_X as usize;
    while i < n {
        part[i] = F::new(0.0);
        i += CUBE_DIM_X as usize;
    }
}

/// LSTM forward over a window; cube `b` runs stream `b`. Writes `out [B, T+1, H]` (`h_1 … h_T`,
/// then `c_T`) and the tape for the backward: `gates [B, T, 4H]` (i, f, g, o after their
/// nonlinearities), `cells [B, T, H]` (`c_1 … c_T`), `hprev [B, T, H]` (`h_0 … h_{T−1}`).
/// `width`, `splits`: see [`vec_mat`] (`4H` columns).
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub fn lstm_forward_kernel<F: Float, N: Size>(
    xp: &Tensor<F>,
    w: &Tensor<Vector<F, N>>,
    bias: &Tensor<F>,
    h0: &Tensor<F>,
    c0: &Tensor<F>,
    out: &mut Tensor<F>,
    gates: &mut Tensor<F>,
    cells: &mut Tensor<F>,
    hprev: &mut Tensor<F>,
    time: u32,
    #[comptime] hidden: usize,
    #[comptime] width: usize,
    #[comptime] splits: usize,
    #[define(F)] _dtype: ElemType,
) {
    let b = CUBE_POS_X as usize;
    let tid = UNIT_POS_X as usize;
    let step = CUBE_DIM_X as usize;
    let t_len = time as usize;
    let g4 = 4 * hidden;
    let mut h = Shared::<[F]>::new_slice(hidden);
    let mut c = Shared::<[F]>::new_slice(hidden);
    let mut part = Shared::<[F]>::new_slice(comptime!(splits * 4 * hidden));

    let mut j = tid;
    while j < hidden {
        h[j] = h0[b * hidden + j];
        c[j] = c0[b * hidden + j];
        j += step;
    }
    sync_cube();
    for t in 0..t_len {
        let row = b * t_len + t;
        let x = row * g4;
        // h_{t−1} · W_hh, then the gates of xp + b_hh + that.
        vec_mat::<F, N>(&h, w, &mut part, hidden, g4, width, splits);
        let mut j = tid;
        while j < hidden {
            let pi = xp[x + j] + bias[j] + summed::<F>(&part, j, g4, splits);
            let pf =
                xp[x + hidden + j] + bias[hidden + j] + summed::<F>(&part, hidden + j, g4, splits);
            let pg = xp[x + 2 * hidden + j]
                + bias[2 * hidden + j]
                + summed::<F>(&part, 2 * hidden + j, g4, splits);
            let po = xp[x + 3 * hidden + j]
                + bias[3 * hidden + j]
                + summed::<F>(&part, 3 * hidden + j, g4, splits);
            let i = sigmoid::<F>(pi);
            let f = sigmoid::<F>(pf);
            let g = tanh::<F>(pg);
            let o = sigmoid::<F>(po);
            let ct = f * c[j] + i * g;
            let ht = o * tanh::<F>(ct);
            hprev[row * hidden + j] = h[j];
            c[j] = ct;
            h[j] = ht;
            out[(b * (t_len + 1) + t) * hidden + j] = ht;
            gates[x + j] = i;
            gates[x + hidden + j] = f;
            gates[x + 2 * hidden + j] = g;
            gates[x + 3 * hidden + j] = o;
            cells[row * hidden + j] = ct;
            j += step;
        }
        sync_cube();
    }
    let mut j = tid;
    while j < hidden {
        out[(b * (t_len + 1) + t_len) * hidden + j] = c[j];
        j += step;
    }
}

/// LSTM backward over a window, in reverse time; cube `b` runs stream `b`. `dout [B, T+1, H]`
/// is the gradient of the forward's `out`. Writes `dxp [B, T, 4H]` (the gradient of the
/// pre-activations, which is also `xp`'s and, summed, `b_hh`'s), `dh0`, `dc0 [B, H]`.
/// `width`, `splits`: see [`vec_mat`] (`H` columns).
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub fn lstm_backward_kernel<F: Float, N: Size>(
    dout: &Tensor<F>,
    gates: &Tensor<F>,
    cells: &Tensor<F>,
    c0: &Tensor<F>,
    w_t: &Tensor<Vector<F, N>>,
    dxp: &mut Tensor<F>,
    dh0: &mut Tensor<F>,
    dc0: &mut Tensor<F>,
    time: u32,
    #[comptime] hidden: usize,
    #[comptime] width: usize,
    #[comptime] splits: usize,
    #[define(F)] _dtype: ElemType,
) {
    let b = CUBE_POS_X as usize;
    let tid = UNIT_POS_X as usize;
    let step = CUBE_DIM_X as usize;
    let t_len = time as usize;
    let g4 = 4 * hidden;
    let one = F::new(1.0);
    // dc: dL/dc_t; dg: this step's pre-activation gradient; part: the recurrent part of
    // dL/dh_t, as the partial sums of dg_{t+1} · W_hhᵀ.
    let mut dc = Shared::<[F]>::new_slice(hidden);
    let mut dg = Shared::<[F]>::new_slice(4 * hidden);
    let mut part = Shared::<[F]>::new_slice(comptime!(splits * hidden));

    zero::<F>(&mut part, comptime!(splits * hidden));
    let mut j = tid;
    while j < hidden {
        dc[j] = dout[(b * (t_len + 1) + t_len) * hidden + j];
        j += step;
    }
    sync_cube();
    for s in 0..t_len {
        let t = t_len - 1 - s;
        let row = b * t_len + t;
        let mut j = tid;
        while j < hidden {
            let i = gates[row * g4 + j];
            let f = gates[row * g4 + hidden + j];
            let g = gates[row * g4 + 2 * hidden + j];
            let o = gates[row * g4 + 3 * hidden + j];
            let ct = cells[row * hidden + j];
            let mut cp = c0[b * hidden + j];
            if t > 0 {
                cp = cells[(row - 1) * hidden + j];
            }
            let tc = tanh::<F>(ct);
            let dht =
                dout[(b * (t_len + 1) + t) * hidden + j] + summed::<F>(&part, j, hidden, splits);
            let dct = dc[j] + dht * o * (one - tc * tc);
            let di = dct * g * i * (one - i);
            let df = dct * cp * f * (one - f);
            let dgg = dct * i * (one - g * g);
            let d_o = dht * tc * o * (one - o);
            dxp[row * g4 + j] = di;
            dxp[row * g4 + hidden + j] = df;
            dxp[row * g4 + 2 * hidden + j] = dgg;
            dxp[row * g4 + 3 * hidden + j] = d_o;
            dg[j] = di;
            dg[hidden + j] = df;
            dg[2 * hidden + j] = dgg;
            dg[3 * hidden + j] = d_o;
            dc[j] = dct * f;
            j += step;
        }
        sync_cube();
        // dL/dh_{t−1} through W_hh, read from its transpose.
        vec_mat::<F, N>(&dg, w_t, &mut part, g4, hidden, width, splits);
    }
    let mut j = tid;
    while j < hidden {
        dh0[b * hidden + j] = summed::<F>(&part, j, hidden, splits);
        dc0[b * hidden + j] = dc[j];
        j += step;
    }
}

/// GRU forward over a window; cube `b` runs stream `b`. Writes `out [B, T, H]` and the tape:
/// `gates [B, T, 3H]` (r, z, n after their nonlinearities), `hn [B, T, H]` (`h·W_hn + b_hn`,
/// which r multiplies), `hprev [B, T, H]` (`h_0 … h_{T−1}`). `width`, `splits`: see
/// [`vec_mat`] (`3H` columns).
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub fn gru_forward_kernel<F: Float, N: Size>(
    xp: &Tensor<F>,
    w: &Tensor<Vector<F, N>>,
    bias: &Tensor<F>,
    h0: &Tensor<F>,
    out: &mut Tensor<F>,
    gates: &mut Tensor<F>,
    hn: &mut Tensor<F>,
    hprev: &mut Tensor<F>,
    time: u32,
    #[comptime] hidden: usize,
    #[comptime] width: usize,
    #[comptime] splits: usize,
    #[define(F)] _dtype: ElemType,
) {
    let b = CUBE_POS_X as usize;
    let tid = UNIT_POS_X as usize;
    let step = CUBE_DIM_X as usize;
    let t_len = time as usize;
    let g3 = 3 * hidden;
    let mut h = Shared::<[F]>::new_slice(hidden);
    let mut part = Shared::<[F]>::new_slice(comptime!(splits * 3 * hidden));

    let mut j = tid;
    while j < hidden {
        h[j] = h0[b * hidden + j];
        j += step;
    }
    sync_cube();
    for t in 0..t_len {
        let row = b * t_len + t;
        let x = row * g3;
        // h_{t−1} · W_hh, then the gates (b_hh added here: r multiplies the n part with it).
        vec_mat::<F, N>(&h, w, &mut part, hidden, g3, width, splits);
        let mut j = tid;
        while j < hidden {
            let hr = bias[j] + summed::<F>(&part, j, g3, splits);
            let hz = bias[hidden + j] + summed::<F>(&part, hidden + j, g3, splits);
            let hnn = bias[2 * hidden + j] + summed::<F>(&part, 2 * hidden + j, g3, splits);
            let r = sigmoid::<F>(xp[x + j] + hr);
            let z = sigmoid::<F>(xp[x + hidden + j] + hz);
            let n = tanh::<F>(xp[x + 2 * hidden + j] + r * hnn);
            let hj = h[j];
            let ht = n + z * (hj - n);
            hprev[row * hidden + j] = hj;
            hn[row * hidden + j] = hnn;
            gates[x + j] = r;
            gates[x + hidden + j] = z;
            gates[x + 2 * hidden + j] = n;
            out[row * hidden + j] = ht;
            h[j] = ht;
            j += step;
        }
        sync_cube();
    }
}

/// GRU backward over a window, in reverse time; cube `b` runs stream `b`. Writes `dxp [B, T, 3H]`
/// (the gradient of `xp`), `dhp [B, T, 3H]` (of `h·W_hh + b_hh`: the weight and bias gradients
/// are products and sums of it), `dh0 [B, H]`. `width`, `splits`: see [`vec_mat`] (`H` columns).
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub fn gru_backward_kernel<F: Float, N: Size>(
    dout: &Tensor<F>,
    gates: &Tensor<F>,
    hn: &Tensor<F>,
    hprev: &Tensor<F>,
    w_t: &Tensor<Vector<F, N>>,
    dxp: &mut Tensor<F>,
    dhp: &mut Tensor<F>,
    dh0: &mut Tensor<F>,
    time: u32,
    #[comptime] hidden: usize,
    #[comptime] width: usize,
    #[comptime] splits: usize,
    #[define(F)] _dtype: ElemType,
) {
    let b = CUBE_POS_X as usize;
    let tid = UNIT_POS_X as usize;
    let step = CUBE_DIM_X as usize;
    let t_len = time as usize;
    let g3 = 3 * hidden;
    let one = F::new(1.0);
    // dL/dh_t from the later steps is direct + Σ part: direct = z·dL/dh_{t+1} skips W_hh, part
    // holds the partial sums of dg_{t+1} · W_hhᵀ.
    let mut direct = Shared::<[F]>::new_slice(hidden);
    let mut dg = Shared::<[F]>::new_slice(3 * hidden);
    let mut part = Shared::<[F]>::new_slice(comptime!(splits * hidden));

    zero::<F>(&mut part, comptime!(splits * hidden));
    zero::<F>(&mut direct, hidden);
    sync_cube();
    for s in 0..t_len {
        let t = t_len - 1 - s;
        let row = b * t_len + t;
        let x = row * g3;
        let mut j = tid;
        while j < hidden {
            let r = gates[x + j];
            let z = gates[x + hidden + j];
            let n = gates[x + 2 * hidden + j];
            let dht = dout[row * hidden + j] + direct[j] + summed::<F>(&part, j, hidden, splits);
            let dn = dht * (one - z) * (one - n * n);
            let dz = dht * (hprev[row * hidden + j] - n) * z * (one - z);
            let dr = dn * hn[row * hidden + j] * r * (one - r);
            dxp[x + j] = dr;
            dxp[x + hidden + j] = dz;
            dxp[x + 2 * hidden + j] = dn;
            dhp[x + j] = dr;
            dhp[x + hidden + j] = dz;
            dhp[x + 2 * hidden + j] = dn * r;
            dg[j] = dr;
            dg[hidden + j] = dz;
            dg[2 * hidden + j] = dn * r;
            direct[j] = dht * z;
            j += step;
        }
        sync_cube();
        vec_mat::<F, N>(&dg, w_t, &mut part, g3, hidden, width, splits);
    }
    let mut j = tid;
    while j < hidden {
        dh0[b * hidden + j] = direct[j] + summed::<F>(&part, j, hidden, splits);
        j += step;
    }
}

/// The max (`max`) or the sum of the cube's values (one per thread) by a tree in shared memory;
/// every thread gets it.
#[cube]
fn cube_reduce<F: Float>(value: F, scratch: &mut Shared<[F]>, #[comptime] max: bool) -> F {
    let tid = UNIT_POS_X as usize;
    scratch[tid] = value;
    sync_cube();
    let mut s = CUBE_DIM_X as usize / 2;
    while s > 0 {
        if tid < s {
            let other = scratch[tid + s];
            if max {
                if other > scratch[tid] {
                    scratch[tid] = other;
                }
            } else {
                scratch[tid] += other;
            }
        }
        sync_cube();
        s /= 2;
    }
    let out = scratch[0];
    sync_cube();
    out
}

/// Softmax cross-entropy per row; cube `n` runs row `n` of `logits [N, V]` (`h·W`, the bias
/// added here in place so the backward reads the true logits). Writes `log_z [N]` and
/// `loss [N]` = `log Z − z_target + α·(log Z)²`. `threads` is the cube's size, a power of two.
#[cube(launch)]
pub fn xent_rows_kernel<F: Float, I: Int>(
    logits: &mut Tensor<F>,
    bias: &Tensor<F>,
    targets: &Tensor<I>,
    log_z: &mut Tensor<F>,
    loss: &mut Tensor<F>,
    alpha: f32,
    #[comptime] threads: usize,
    #[define(F, I)] _dtypes: [ElemType; 2],
) {
    let n = CUBE_POS_X as usize;
    let tid = UNIT_POS_X as usize;
    let step = CUBE_DIM_X as usize;
    let vocab = logits.shape(1);
    let row = n * vocab;
    let target = u32::cast_from(targets[n]) as usize;
    let mut scratch = Shared::<[F]>::new_slice(threads);
    // The target's logit, handed to thread 0 through shared memory: the barriers order shared
    // memory, not another thread's writes to the logits buffer.
    let mut z_target = Shared::<[F]>::new_slice(1usize);

    let mut local = F::new(-3.0e38);
    let mut v = tid;
    while v < vocab {
        let z = logits[row + v] + bias[v];
        logits[row + v] = z;
        if v == target {
            z_target[0] = z;
        }
        if z > local {
            local = z;
        }
        v += step;
    }
    let max = cube_reduce::<F>(local, &mut scratch, true);
    let mut local = F::new(0.0);
    let mut v = tid;
    while v < vocab {
        local += F::exp(logits[row + v] - max);
        v += step;
    }
    let lz = max + F::ln(cube_reduce::<F>(local, &mut scratch, false));
    if tid == 0 {
        log_z[n] = lz;
        loss[n] = lz - z_target[0] + F::cast_from(alpha) * lz * lz;
    }
}

/// The gradient of [`xent_rows_kernel`]'s mean loss with respect to the logits, one element per
/// unit: `dloss[0] / N · (p_v·(1 + 2α log Z) − [v = target])`, `p_v = exp(z_v − log Z)`.
#[cube(launch)]
pub fn xent_grad_kernel<F: Float, I: Int>(
    logits: &Tensor<F>,
    log_z: &Tensor<F>,
    targets: &Tensor<I>,
    dloss: &Tensor<F>,
    grad: &mut Tensor<F>,
    alpha: f32,
    #[define(F, I)] _dtypes: [ElemType; 2],
) {
    let pos = ABSOLUTE_POS;
    let rows = log_z.shape(0);
    let vocab = logits.shape(1);
    if pos >= rows * vocab {
        terminate!();
    }
    let n = pos / vocab;
    let lz = log_z[n];
    let mut g = F::exp(logits[pos] - lz) * (F::new(1.0) + F::new(2.0) * F::cast_from(alpha) * lz);
    if pos % vocab == u32::cast_from(targets[n]) as usize {
        g -= F::new(1.0);
    }
    grad[pos] = g * dloss[0] / F::cast_from(rows as u32);
}

/// The sampled softmax's per-word offsets `offset [V] = b − log E(w)`, one unit per word, where
/// `E(w) = 1 − exp(tries · log_miss[w])` is the chance that `tries` draws hit `w`
/// ([`super::sampled::Sampler::log_expected`], which the host would compute in f64 for every
/// word each window). `1 − exp(x)` cancels for a rare word's small `|x|`, so there it is the
/// series `−x (1 + x/2 + x²/6 + x³/24 + x⁴/120)`, whose next term is below 2e-8 of it at
/// `|x| = 0.1`; beyond it `1 − exp(x) ≥ 0.095`, so the subtraction loses only a few ulps.
#[cube(launch)]
pub fn sampled_offset_kernel<F: Float>(
    b: &Tensor<F>,
    log_miss: &Tensor<F>,
    offset: &mut Tensor<F>,
    tries: f32,
    #[define(F)] _dtype: ElemType,
) {
    let j = ABSOLUTE_POS;
    if j >= offset.len() {
        terminate!();
    }
    let x = log_miss[j] * F::cast_from(tries);
    let mut hit = F::new(1.0) - F::exp(x);
    if x > F::new(-0.1) {
        let series = F::new(1.0 / 24.0) + x * F::new(1.0 / 120.0);
        let series = F::new(1.0 / 6.0) + x * series;
        let series = F::new(0.5) + x * series;
        hit = -x * (F::new(1.0) + x * series);
    }
    offset[j] = b[j] - F::ln(hit);
}

/// The sampled softmax's loss per row (see [`super::sampled`]); cube `n` runs row `n`.
/// `z [N, S]` arrives as `h·W_neg`: the kernel adds each sampled word's offset
/// `offset[negatives[j]]` (`b − log E`) in place and pushes an accidental hit
/// (`negatives[j] = target`) out of the row as `−3e38`, whose exponential is 0, so the backward
/// reads the row as it is. The target's logit `z_t = h_n · W[:, target] + offset[target]` is
/// summed by the cube from `h [N, H]` (contiguous) and `w [H, V]` (any strides: a tied
/// embedding's transpose is read as it lies). Writes `z_target [N]`, `log_z [N]` (over the
/// target and the sampled words) and `loss [N]` = `log Z − z_t`. `threads` is the cube's size,
/// a power of two.
#[cube(launch)]
pub fn sampled_rows_kernel<F: Float, I: Int>(
    z: &mut Tensor<F>,
    h: &Tensor<F>,
    w: &Tensor<F>,
    offset: &Tensor<F>,
    negatives: &Tensor<I>,
    targets: &Tensor<I>,
    z_target: &mut Tensor<F>,
    log_z: &mut Tensor<F>,
    loss: &mut Tensor<F>,
    #[comptime] threads: usize,
    #[define(F, I)] _dtypes: [ElemType; 2],
) {
    let n = CUBE_POS_X as usize;
    let tid = UNIT_POS_X as usize;
    let step = CUBE_DIM_X as usize;
    let samples = z.shape(1);
    let hidden = h.shape(1);
    let row = n * samples;
    let target = u32::cast_from(targets[n]) as usize;
    let mut scratch = Shared::<[F]>::new_slice(threads);

    let mut local = F::new(0.0);
    let mut k = tid;
    while k < hidden {
        local += h[n * hidden + k] * w[k * w.stride(0) + target * w.stride(1)];
        k += step;
    }
    let zt = cube_reduce::<F>(local, &mut scratch, false) + offset[target];

    // Every thread starts its max from z_t, so the row's max covers the target too.
    let mut local = zt;
    let mut j = tid;
    while j < samples {
        let id = u32::cast_from(negatives[j]) as usize;
        let mut zj = z[row + j] + offset[id];
        if id == target {
            zj = F::new(-3.0e38);
        }
        z[row + j] = zj;
        if zj > local {
            local = zj;
        }
        j += step;
    }
    let max = cube_reduce::<F>(local, &mut scratch, true);
    let mut local = F::new(0.0);
    let mut j = tid;
    while j < samples {
        local += F::exp(z[row + j] - max);
        j += step;
    }
    let sum = cube_reduce::<F>(local, &mut scratch, false) + F::exp(zt - max);
    if tid == 0 {
        let lz = max + F::ln(sum);
        z_target[n] = zt;
        log_z[n] = lz;
        loss[n] = lz - zt;
    }
}

/// The gradient of [`sampled_rows_kernel`]'s mean loss with respect to its logits, one unit
/// per element of `z [N, S]`: `dz = dloss[0] / N · exp(z − log Z)` (0 at an accidental hit), and
/// the first unit of each row writes the target's, `dz_target [N]` =
/// `dloss[0] / N · (exp(z_t − log Z) − 1)`.
#[cube(launch)]
pub fn sampled_grad_kernel<F: Float>(
    z: &Tensor<F>,
    z_target: &Tensor<F>,
    log_z: &Tensor<F>,
    dloss: &Tensor<F>,
    dz: &mut Tensor<F>,
    dz_target: &mut Tensor<F>,
    #[define(F)] _dtype: ElemType,
) {
    let pos = ABSOLUTE_POS;
    let rows = log_z.shape(0);
    let samples = z.shape(1);
    if pos >= rows * samples {
        terminate!();
    }
    let n = pos / samples;
    let lz = log_z[n];
    let scale = dloss[0] / F::cast_from(rows as u32);
    dz[pos] = F::exp(z[pos] - lz) * scale;
    if pos == n * samples {
        dz_target[n] = (F::exp(z_target[n] - lz) - F::new(1.0)) * scale;
    }
}

/// `dh[n, :] += dz_target[n] · W[:, target_n]`: the target's share of the sampled softmax's
/// `dh [N, H]` (contiguous), one unit per element; `w [H, V]` read through its strides.
#[cube(launch)]
pub fn sampled_target_rows_kernel<F: Float, I: Int>(
    dh: &mut Tensor<F>,
    dz_target: &Tensor<F>,
    w: &Tensor<F>,
    targets: &Tensor<I>,
    #[define(F, I)] _dtypes: [ElemType; 2],
) {
    let pos = ABSOLUTE_POS;
    let rows = dh.shape(0);
    let hidden = dh.shape(1);
    if pos >= rows * hidden {
        terminate!();
    }
    let n = pos / hidden;
    let k = pos % hidden;
    let target = u32::cast_from(targets[n]) as usize;
    dh[pos] += dz_target[n] * w[k * w.stride(0) + target * w.stride(1)];
}

/// The sampled softmax's weight and bias gradients added into `dw [H, V]` and `db [V]`
/// (contiguous, zero on entry): column `negatives[j]` takes `g_neg[:, j]` (`hᵀ·dz`, `[H, S]`)
/// and `db_neg[j]` (the column sums of `dz`), and row `n`'s target column takes
/// `dz_target[n] · h[n, :]` and `dz_target[n]`. One unit per (row of `dw` or `db`, entry):
/// `(H + 1)·(S + N)` units. The adds are atomic: rows share targets, and a target can be a
/// sampled word.
#[cube(launch)]
pub fn sampled_scatter_kernel<F: Float, I: Int>(
    g_neg: &Tensor<F>,
    db_neg: &Tensor<F>,
    h: &Tensor<F>,
    dz_target: &Tensor<F>,
    negatives: &Tensor<I>,
    targets: &Tensor<I>,
    dw: &mut Tensor<Atomic<F>>,
    db: &mut Tensor<Atomic<F>>,
    #[define(F, I)] _dtypes: [ElemType; 2],
) {
    let pos = ABSOLUTE_POS;
    let hidden = h.shape(1);
    let samples = negatives.shape(0);
    let entries = samples + targets.shape(0);
    if pos >= (hidden + 1) * entries {
        terminate!();
    }
    let k = pos / entries;
    let e = pos % entries;
    if e < samples {
        let id = u32::cast_from(negatives[e]) as usize;
        if k < hidden {
            dw[k * dw.stride(0) + id].fetch_add(g_neg[k * samples + e]);
        } else {
            db[id].fetch_add(db_neg[e]);
        }
    } else {
        let n = e - samples;
        let id = u32::cast_from(targets[n]) as usize;
        if k < hidden {
            dw[k * dw.stride(0) + id].fetch_add(dz_target[n] * h[n * hidden + k]);
        } else {
            db[id].fetch_add(dz_target[n]);
        }
    }
}
