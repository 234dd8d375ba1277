//! The fused training ops on burn's CubeCL backend (cargo feature `wgpu`): the persistent
//! recurrent kernels and the softmax cross-entropy of [`super::cube_kernels`] behind a backend
//! extension, so that burn's kernel fusion sees each as one custom operation, and the autodiff
//! nodes that run their backwards.
//!
//! Per window and layer that is one kernel forward; backward, one kernel for the recurrence plus
//! two products (the weight gradient over the whole window, the transpose it reads) and one sum
//! (the bias gradient). The input projection stays burn's `Linear` on the `[B·T, d_in]` matrix.
//! The output layer is the product `h·W` and one kernel per row (bias, `log Z`, the loss);
//! backward, one element-wise kernel for `dlogits` and the three products.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::autodiff::{Autodiff, NodeId};
use burn::backend::cubecl::dtype_to_storage_type;
use burn::backend::fusion::custom::TensorSpec;
use burn::backend::ops::{FloatTensorOps, IntTensorOps};
use burn::backend::tensor::{FloatTensor, IntTensor};
use burn::backend::{backend_extension, Backend, Cube, FloatDType, TensorMetadata};
use burn::tensor::{Shape, TensorData};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::ops::numeric::empty_device_contiguous_dtype;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::CubeBackend;
use cubecl::prelude::*;
use fastsoftmax_infer::model::artifact::Cell;

use super::cube_kernels as k;
use super::{LossOps, Negatives, RecurrentOps};

/// The kernels as one extension op each; [`RecurrentOps`] and [`LossOps`] for `Autodiff<Cube>`
/// compose them.
#[backend_extension(Cube, Fusion)]
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
pub trait CubeKernels: Backend {
    /// `(xp [B,T,4H], w_hh [H,4H], b_hh [4H], h0, c0 [B,H])` → `(out [B,T+1,H], gates [B,T,4H],
    /// cells [B,T,H], hprev [B,T,H])`; see [`k::lstm_forward_kernel`].
    #[fusion(meta = lstm_forward_meta)]
    fn lstm_forward(
        xp: FloatTensor<Self>,
        w_hh: FloatTensor<Self>,
        b_hh: FloatTensor<Self>,
        h0: FloatTensor<Self>,
        c0: FloatTensor<Self>,
    ) -> (
        FloatTensor<Self>,
        FloatTensor<Self>,
        FloatTensor<Self>,
        FloatTensor<Self>,
    );

    /// `(dout [B,T+1,H], gates, cells, hprev, c0, w_hh)` → `(dxp [B,T,4H], dw_hh [H,4H],
    /// db_hh [4H], dh0 [B,H], dc0 [B,H])`.
    #[fusion(meta = lstm_backward_meta)]
    fn lstm_backward(
        dout: FloatTensor<Self>,
        gates: FloatTensor<Self>,
        cells: FloatTensor<Self>,
        hprev: FloatTensor<Self>,
        c0: FloatTensor<Self>,
        w_hh: FloatTensor<Self>,
    ) -> (
        FloatTensor<Self>,
        FloatTensor<Self>,
        FloatTensor<Self>,
        FloatTensor<Self>,
        FloatTensor<Self>,
    );

    /// `(xp [B,T,3H], w_hh [H,3H], b_hh [3H], h0 [B,H])` → `(out [B,T,H], gates [B,T,3H],
    /// hn [B,T,H], hprev [B,T,H])`; see [`k::gru_forward_kernel`].
    #[fusion(meta = gru_forward_meta)]
    fn gru_forward(
        xp: FloatTensor<Self>,
        w_hh: FloatTensor<Self>,
        b_hh: FloatTensor<Self>,
        h0: FloatTensor<Self>,
    ) -> (
        FloatTensor<Self>,
        FloatTensor<Self>,
        FloatTensor<Self>,
        FloatTensor<Self>,
    );

    /// `(dout [B,T,H], gates, hn, hprev, w_hh)` → `(dxp [B,T,3H], dw_hh [H,3H], db_hh [3H],
    /// dh0 [B,H])`.
    #[fusion(meta = gru_backward_meta)]
    fn gru_backward(
        dout: FloatTensor<Self>,
        gates: FloatTensor<Self>,
        hn: FloatTensor<Self>,
        hprev: FloatTensor<Self>,
        w_hh: FloatTensor<Self>,
    ) -> (
        FloatTensor<Self>,
        FloatTensor<Self>,
        FloatTensor<Self>,
        FloatTensor<Self>,
    );

    /// `(h [N,H], w [H,V], b [V], targets [N], α)` → `(loss [1], logits [N,V], log_z [N])`: the
    /// mean of `log Z − z_target + α·(log Z)²`; see [`k::xent_rows_kernel`].
    #[fusion(meta = xent_forward_meta)]
    fn xent_forward(
        h: FloatTensor<Self>,
        w: FloatTensor<Self>,
        b: FloatTensor<Self>,
        targets: IntTensor<Self>,
        alpha: f32,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>);

    /// `(dloss [1], logits, log_z, h, w, targets, α)` → `(dh [N,H], dw [H,V], db [V])`.
    #[fusion(meta = xent_backward_meta)]
    fn xent_backward(
        dloss: FloatTensor<Self>,
        logits: FloatTensor<Self>,
        log_z: FloatTensor<Self>,
        h: FloatTensor<Self>,
        w: FloatTensor<Self>,
        targets: IntTensor<Self>,
        alpha: f32,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>);

    /// `(h [N,H], w [H,V], b [V], targets [N], negatives [S], log_miss [V], tries)` →
    /// `(loss [1], z [N,S], z_target [N], log_z [N], w_neg [H,S])`: the mean sampled softmax
    /// loss of `negatives` drawn in `tries` draws, with the log-Q correction of every word
    /// derived from `log_miss` (see [`k::sampled_offset_kernel`] and [`k::sampled_rows_kernel`]).
    #[fusion(meta = sampled_forward_meta)]
    fn sampled_forward(
        h: FloatTensor<Self>,
        w: FloatTensor<Self>,
        b: FloatTensor<Self>,
        targets: IntTensor<Self>,
        negatives: IntTensor<Self>,
        log_miss: FloatTensor<Self>,
        tries: f32,
    ) -> (
        FloatTensor<Self>,
        FloatTensor<Self>,
        FloatTensor<Self>,
        FloatTensor<Self>,
        FloatTensor<Self>,
    );

    /// `(dloss [1], z, z_target, log_z, h, w, w_neg, targets, negatives)` → `(dh [N,H],
    /// dw [H,V], db [V])`.
    #[fusion(meta = sampled_backward_meta)]
    fn sampled_backward(
        dloss: FloatTensor<Self>,
        z: FloatTensor<Self>,
        z_target: FloatTensor<Self>,
        log_z: FloatTensor<Self>,
        h: FloatTensor<Self>,
        w: FloatTensor<Self>,
        w_neg: FloatTensor<Self>,
        targets: IntTensor<Self>,
        negatives: IntTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>);
}

fn sampled_forward_meta(
    h: &TensorSpec,
    _w: &TensorSpec,
    _b: &TensorSpec,
    _targets: &TensorSpec,
    negatives: &TensorSpec,
    _log_miss: &TensorSpec,
    _tries: &f32,
) -> (TensorSpec, TensorSpec, TensorSpec, TensorSpec, TensorSpec) {
    let (n, d, s) = (h.shape[0], h.shape[1], negatives.shape[0]);
    (
        spec(h, &[1]),
        spec(h, &[n, s]),
        spec(h, &[n]),
        spec(h, &[n]),
        spec(h, &[d, s]),
    )
}

#[allow(clippy::too_many_arguments)]
fn sampled_backward_meta(
    _dloss: &TensorSpec,
    _z: &TensorSpec,
    _z_target: &TensorSpec,
    _log_z: &TensorSpec,
    h: &TensorSpec,
    w: &TensorSpec,
    _w_neg: &TensorSpec,
    _targets: &TensorSpec,
    _negatives: &TensorSpec,
) -> (TensorSpec, TensorSpec, TensorSpec) {
    let (n, d, v) = (h.shape[0], h.shape[1], w.shape[1]);
    (spec(h, &[n, d]), spec(w, &[d, v]), spec(w, &[v]))
}

fn xent_forward_meta(
    h: &TensorSpec,
    w: &TensorSpec,
    _b: &TensorSpec,
    _targets: &TensorSpec,
    _alpha: &f32,
) -> (TensorSpec, TensorSpec, TensorSpec) {
    let (n, v) = (h.shape[0], w.shape[1]);
    (spec(h, &[1]), spec(h, &[n, v]), spec(h, &[n]))
}

fn xent_backward_meta(
    _dloss: &TensorSpec,
    _logits: &TensorSpec,
    _log_z: &TensorSpec,
    h: &TensorSpec,
    w: &TensorSpec,
    _targets: &TensorSpec,
    _alpha: &f32,
) -> (TensorSpec, TensorSpec, TensorSpec) {
    let (n, d, v) = (h.shape[0], h.shape[1], w.shape[1]);
    (spec(h, &[n, d]), spec(w, &[d, v]), spec(w, &[v]))
}

fn spec(like: &TensorSpec, dims: &[usize]) -> TensorSpec {
    TensorSpec::new(Shape::from(dims.to_vec()), like.dtype)
}

/// `[B, T, G·H]` and `H` from `xp` and `h0`.
fn bth(xp: &TensorSpec, h0: &TensorSpec) -> (usize, usize, usize) {
    (xp.shape[0], xp.shape[1], h0.shape[1])
}

fn lstm_forward_meta(
    xp: &TensorSpec,
    _w: &TensorSpec,
    _b: &TensorSpec,
    h0: &TensorSpec,
    _c0: &TensorSpec,
) -> (TensorSpec, TensorSpec, TensorSpec, TensorSpec) {
    let (b, t, h) = bth(xp, h0);
    (
        spec(xp, &[b, t + 1, h]),
        spec(xp, &[b, t, 4 * h]),
        spec(xp, &[b, t, h]),
        spec(xp, &[b, t, h]),
    )
}

fn lstm_backward_meta(
    _dout: &TensorSpec,
    gates: &TensorSpec,
    _cells: &TensorSpec,
    _hprev: &TensorSpec,
    c0: &TensorSpec,
    w: &TensorSpec,
) -> (TensorSpec, TensorSpec, TensorSpec, TensorSpec, TensorSpec) {
    let (b, t, h) = bth(gates, c0);
    (
        spec(gates, &[b, t, 4 * h]),
        spec(w, &[h, 4 * h]),
        spec(w, &[4 * h]),
        spec(c0, &[b, h]),
        spec(c0, &[b, h]),
    )
}

fn gru_forward_meta(
    xp: &TensorSpec,
    _w: &TensorSpec,
    _b: &TensorSpec,
    h0: &TensorSpec,
) -> (TensorSpec, TensorSpec, TensorSpec, TensorSpec) {
    let (b, t, h) = bth(xp, h0);
    (
        spec(xp, &[b, t, h]),
        spec(xp, &[b, t, 3 * h]),
        spec(xp, &[b, t, h]),
        spec(xp, &[b, t, h]),
    )
}

fn gru_backward_meta(
    _dout: &TensorSpec,
    gates: &TensorSpec,
    _hn: &TensorSpec,
    _hprev: &TensorSpec,
    w: &TensorSpec,
) -> (TensorSpec, TensorSpec, TensorSpec, TensorSpec) {
    let (b, t, h) = (gates.shape[0], gates.shape[1], w.shape[0]);
    (
        spec(gates, &[b, t, 3 * h]),
        spec(w, &[h, 3 * h]),
        spec(w, &[3 * h]),
        spec(w, &[b, h]),
    )
}

/// How the window kernels of one layer run: the threads of a cube, the width of `W_hh`'s loads,
/// and how many slices the rows of each step's product split into so that every thread works
/// (`cube_kernels::vec_mat`; the forward's product has `G·H` columns, the backward's `H`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowPlan {
    pub cell: Cell,
    pub hidden: usize,
    pub threads: usize,
    /// Columns per load: 4 (one 16-byte load) when `H` is a multiple of 4, else 1.
    pub width: usize,
    pub forward_splits: usize,
    pub backward_splits: usize,
}

impl WindowPlan {
    /// The most threads a cube gets: enough for the `4·H` columns of PTB-Small (800).
    const MAX_THREADS: usize = 1024;

    /// The plan for a `cell` layer `hidden` wide on a device with cubes of up to `max_units`
    /// threads and `max_shared` bytes of shared memory: fewer slices where the partial sums of
    /// more would not fit (a 2,048-wide LSTM in 48 KiB runs unsplit, as before the slices).
    pub fn new(cell: Cell, hidden: usize, max_units: usize, max_shared: usize) -> Self {
        let columns = cell.gates() * hidden;
        let cap = max_units.clamp(32, Self::MAX_THREADS);
        let threads = columns.next_power_of_two().clamp(32, cap);
        let width = if hidden.is_multiple_of(4) { 4 } else { 1 };
        let mut plan = Self {
            cell,
            hidden,
            threads,
            width,
            forward_splits: (threads / (columns / width).max(1)).max(1),
            backward_splits: (threads / (hidden / width).max(1)).max(1),
        };
        while plan.shared_bytes() > max_shared {
            let (forward, backward) = plan.shared_floats();
            if forward >= backward && plan.forward_splits > 1 {
                plan.forward_splits /= 2;
            } else if plan.backward_splits > 1 {
                plan.backward_splits /= 2;
            } else if plan.forward_splits > 1 {
                plan.forward_splits /= 2;
            } else {
                break; // does not fit unsplit either: `fused::window_fits` says no
            }
        }
        plan
    }

    /// Shared memory the larger of the two kernels holds: the state and the product's partial
    /// sums.
    pub fn shared_bytes(&self) -> usize {
        let (forward, backward) = self.shared_floats();
        forward.max(backward) * std::mem::size_of::<f32>()
    }

    /// Floats of shared memory `(forward, backward)`: LSTM forward `h, c` + `splits·4H`,
    /// backward `dc`, `dg` (`4H`) + `splits·H`; GRU forward `h` + `splits·3H`, backward
    /// `direct`, `dg` (`3H`) + `splits·H`.
    fn shared_floats(&self) -> (usize, usize) {
        let (cell, hidden) = (self.cell, self.hidden);
        let g = cell.gates() * hidden;
        let state = match cell {
            Cell::Lstm => 2 * hidden,
            Cell::Gru => hidden,
        };
        (
            state + self.forward_splits * g,
            hidden + g + self.backward_splits * hidden,
        )
    }

    fn cube_dim(&self) -> CubeDim {
        CubeDim::new_1d(self.threads as u32)
    }
}

/// The plan of a `cell` layer `hidden` wide on `t`'s device.
fn plan(t: &CubeTensor, cell: Cell, hidden: usize) -> WindowPlan {
    let hardware = &t.client.properties().hardware;
    WindowPlan::new(
        cell,
        hidden,
        hardware.max_units_per_cube as usize,
        hardware.max_shared_memory_size,
    )
}

fn empty(like: &CubeTensor, dims: &[usize]) -> CubeTensor {
    empty_device_contiguous_dtype(
        like.client.clone(),
        like.device.clone(),
        Shape::from(dims.to_vec()),
        like.dtype,
    )
}

/// Threads of a cube that runs one row of a loss (a power of two, for the tree reductions).
const ROW_THREADS: usize = 256;

/// The launch of an element-wise kernel over `units` elements on `like`'s device.
fn elementwise(like: &CubeTensor, units: usize) -> (CubeCount, CubeDim) {
    let cube_dim = CubeDim::new(&like.client, units);
    let count = cubecl::calculate_cube_count_elemwise(&like.client, units, cube_dim);
    (count, cube_dim)
}

/// `b − log E [V]` for a window of `tries` draws, from the sampler's `log(1 − Q) [V]`; see
/// [`k::sampled_offset_kernel`].
fn sampled_offsets(b: CubeTensor, log_miss: CubeTensor, tries: f32) -> CubeTensor {
    let [b, log_miss] = [b, log_miss].map(into_contiguous);
    let v = b.meta.shape()[0];
    let offset = empty(&b, &[v]);
    let (count, cube_dim) = elementwise(&offset, v);
    k::sampled_offset_kernel::launch(
        &offset.client.clone(),
        count,
        cube_dim,
        b.into_tensor_arg(),
        log_miss.into_tensor_arg(),
        offset.clone().into_tensor_arg(),
        tries,
        dtype_to_storage_type(offset.dtype),
    );
    offset
}

/// The mean of the per-row losses `[N]` → `[1]`.
fn mean_of_rows(rows: CubeTensor) -> CubeTensor {
    type B = CubeBackend;
    let n = rows.meta.shape()[0];
    B::float_div_scalar(B::float_sum(rows), (n.max(1) as f32).into())
}

/// `Σ_rows a_rowᵀ b_row` over `[B, T, ·]` windows: `a [B,T,H]`, `b [B,T,G]` → `[H, G]`, and the
/// column sums of `b` → `[G]` (the weight and bias gradients of `h·W_hh + b_hh`).
fn weight_grads(a: CubeTensor, g: CubeTensor) -> (CubeTensor, CubeTensor) {
    type B = CubeBackend;
    let [b, t, h] = a.meta.shape().dims::<3>();
    let gates = g.meta.shape()[2];
    let a = B::float_reshape(a, Shape::new([b * t, h]));
    let g = B::float_reshape(g, Shape::new([b * t, gates]));
    let dw = B::float_matmul(B::float_transpose(a), g.clone());
    let db = B::float_reshape(B::float_sum_dim(g, 0), Shape::new([gates]));
    (dw, db)
}

/// The slices the `V`-long sum of `dlogits · Wᵀ` is cut into: `FASTSOFTMAX_XENT_SPLIT` (default
/// 1, one product), an experiment's knob until a GPU has measured it.
///
/// Why: that product has only `N·D` outputs over a `V`-long sum (PTB-Small at batch 128:
/// 896k outputs, a 10,000-long sum), too few tiles for a large GPU. On an H200 it took 4.2 of a
/// window's 10.4 ms where `hᵀ · dlogits`, the same arithmetic into 2M outputs, took 0.87 ms.
fn xent_split() -> usize {
    static SPLIT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *SPLIT.get_or_init(|| {
        std::env::var("FASTSOFTMAX_XENT_SPLIT")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&s| s >= 1)
            .unwrap_or(1)
    })
}

/// `g [N, V] · wᵀ` for `w [D, V]` → `[N, D]`, with the sum over `V` cut into `split` slices
/// (fewer where `split` does not divide `V`: the largest count that does) run as one batched
/// product `[S, N, V/S] · [S, V/S, D]` → `[S, N, D]` with `S`× the output tiles, then summed over
/// the slices. CubeCL's product reads the sliced `g` through a contiguous copy.
fn split_k_product(g: CubeTensor, w: CubeTensor, split: usize) -> CubeTensor {
    type B = CubeBackend;
    let [n, v] = g.meta.shape().dims::<2>();
    let d = w.meta.shape()[0];
    let s = (1..=split.min(v)).rev().find(|s| v % s == 0).unwrap_or(1);
    if s == 1 {
        return B::float_matmul(g, B::float_transpose(w));
    }
    let g = B::float_swap_dims(B::float_reshape(g, Shape::new([n, s, v / s])), 0, 1);
    let w = B::float_permute(B::float_reshape(w, Shape::new([d, s, v / s])), &[1, 2, 0]);
    let partial = B::float_matmul(g, w);
    B::float_reshape(B::float_sum_dim(partial, 0), Shape::new([n, d]))
}

impl CubeKernels for CubeBackend {
    fn lstm_forward(
        xp: CubeTensor,
        w_hh: CubeTensor,
        b_hh: CubeTensor,
        h0: CubeTensor,
        c0: CubeTensor,
    ) -> (CubeTensor, CubeTensor, CubeTensor, CubeTensor) {
        let [xp, w_hh, b_hh, h0, c0] = [xp, w_hh, b_hh, h0, c0].map(into_contiguous);
        let [b, t, _] = xp.meta.shape().dims::<3>();
        let h = h0.meta.shape()[1];
        let out = empty(&xp, &[b, t + 1, h]);
        let gates = empty(&xp, &[b, t, 4 * h]);
        let cells = empty(&xp, &[b, t, h]);
        let hprev = empty(&xp, &[b, t, h]);
        let dtype = dtype_to_storage_type(xp.dtype);
        let plan = plan(&xp, Cell::Lstm, h);
        k::lstm_forward_kernel::launch(
            &xp.client.clone(),
            CubeCount::Static(b as u32, 1, 1),
            plan.cube_dim(),
            plan.width,
            xp.into_tensor_arg(),
            w_hh.into_tensor_arg(),
            b_hh.into_tensor_arg(),
            h0.into_tensor_arg(),
            c0.into_tensor_arg(),
            out.clone().into_tensor_arg(),
            gates.clone().into_tensor_arg(),
            cells.clone().into_tensor_arg(),
            hprev.clone().into_tensor_arg(),
            t as u32,
            h,
            plan.width,
            plan.forward_splits,
            dtype,
        );
        (out, gates, cells, hprev)
    }

    fn lstm_backward(
        dout: CubeTensor,
        gates: CubeTensor,
        cells: CubeTensor,
        hprev: CubeTensor,
        c0: CubeTensor,
        w_hh: CubeTensor,
    ) -> (CubeTensor, CubeTensor, CubeTensor, CubeTensor, CubeTensor) {
        let w_t = into_contiguous(CubeBackend::float_transpose(w_hh));
        let [dout, gates, cells, c0] = [dout, gates, cells, c0].map(into_contiguous);
        let [b, t, h] = cells.meta.shape().dims::<3>();
        let dxp = empty(&gates, &[b, t, 4 * h]);
        let dh0 = empty(&c0, &[b, h]);
        let dc0 = empty(&c0, &[b, h]);
        let dtype = dtype_to_storage_type(gates.dtype);
        let plan = plan(&gates, Cell::Lstm, h);
        k::lstm_backward_kernel::launch(
            &gates.client.clone(),
            CubeCount::Static(b as u32, 1, 1),
            plan.cube_dim(),
            plan.width,
            dout.into_tensor_arg(),
            gates.into_tensor_arg(),
            cells.into_tensor_arg(),
            c0.into_tensor_arg(),
            w_t.into_tensor_arg(),
            dxp.clone().into_tensor_arg(),
            dh0.clone().into_tensor_arg(),
            dc0.clone().into_tensor_arg(),
            t as u32,
            h,
            plan.width,
            plan.backward_splits,
            dtype,
        );
        // In an LSTM the pre-activation gradient is both xp's and h·W_hh + b_hh's.
        let (dw, db) = weight_grads(hprev, dxp.clone());
        (dxp, dw, db, dh0, dc0)
    }

    fn gru_forward(
        xp: CubeTensor,
        w_hh: CubeTensor,
        b_hh: CubeTensor,
        h0: CubeTensor,
    ) -> (CubeTensor, CubeTensor, CubeTensor, CubeTensor) {
        let [xp, w_hh, b_hh, h0] = [xp, w_hh, b_hh, h0].map(into_contiguous);
        let [b, t, _] = xp.meta.shape().dims::<3>();
        let h = h0.meta.shape()[1];
        let out = empty(&xp, &[b, t, h]);
        let gates = empty(&xp, &[b, t, 3 * h]);
        let hn = empty(&xp, &[b, t, h]);
        let hprev = empty(&xp, &[b, t, h]);
        let dtype = dtype_to_storage_type(xp.dtype);
        let plan = plan(&xp, Cell::Gru, h);
        k::gru_forward_kernel::launch(
            &xp.client.clone(),
            CubeCount::Static(b as u32, 1, 1),
            plan.cube_dim(),
            plan.width,
            xp.into_tensor_arg(),
            w_hh.into_tensor_arg(),
            b_hh.into_tensor_arg(),
            h0.into_tensor_arg(),
            out.clone().into_tensor_arg(),
            gates.clone().into_tensor_arg(),
            hn.clone().into_tensor_arg(),
            hprev.clone().into_tensor_arg(),
            t as u32,
            h,
            plan.width,
            plan.forward_splits,
            dtype,
        );
        (out, gates, hn, hprev)
    }

    fn gru_backward(
        dout: CubeTensor,
        gates: CubeTensor,
        hn: CubeTensor,
        hprev: CubeTensor,
        w_hh: CubeTensor,
    ) -> (CubeTensor, CubeTensor, CubeTensor, CubeTensor) {
        let w_t = into_contiguous(CubeBackend::float_transpose(w_hh));
        let [dout, gates, hn, hprev] = [dout, gates, hn, hprev].map(into_contiguous);
        let [b, t, h] = hn.meta.shape().dims::<3>();
        let dxp = empty(&gates, &[b, t, 3 * h]);
        let dhp = empty(&gates, &[b, t, 3 * h]);
        let dh0 = empty(&gates, &[b, h]);
        let dtype = dtype_to_storage_type(gates.dtype);
        let plan = plan(&gates, Cell::Gru, h);
        k::gru_backward_kernel::launch(
            &gates.client.clone(),
            CubeCount::Static(b as u32, 1, 1),
            plan.cube_dim(),
            plan.width,
            dout.into_tensor_arg(),
            gates.into_tensor_arg(),
            hn.into_tensor_arg(),
            hprev.clone().into_tensor_arg(),
            w_t.into_tensor_arg(),
            dxp.clone().into_tensor_arg(),
            dhp.clone().into_tensor_arg(),
            dh0.clone().into_tensor_arg(),
            t as u32,
            h,
            plan.width,
            plan.backward_splits,
            dtype,
        );
        let (dw, db) = weight_grads(hprev, dhp);
        (dxp, dw, db, dh0)
    }

    fn xent_forward(
        h: CubeTensor,
        w: CubeTensor,
        b: CubeTensor,
        targets: CubeTensor,
        alpha: f32,
    ) -> (CubeTensor, CubeTensor, CubeTensor) {
        type B = CubeBackend;
        let n = h.meta.shape()[0];
        // The product into a fresh contiguous [N, V]; the kernel adds the bias in place.
        let logits = into_contiguous(B::float_matmul(h, w));
        let [b, targets] = [b, targets].map(into_contiguous);
        let log_z = empty(&logits, &[n]);
        let rows = empty(&logits, &[n]);
        k::xent_rows_kernel::launch(
            &logits.client.clone(),
            CubeCount::Static(n as u32, 1, 1),
            CubeDim::new_1d(ROW_THREADS as u32),
            logits.clone().into_tensor_arg(),
            b.into_tensor_arg(),
            targets.clone().into_tensor_arg(),
            log_z.clone().into_tensor_arg(),
            rows.clone().into_tensor_arg(),
            alpha,
            ROW_THREADS,
            [
                dtype_to_storage_type(logits.dtype),
                dtype_to_storage_type(targets.dtype),
            ],
        );
        (mean_of_rows(rows), logits, log_z)
    }

    fn xent_backward(
        dloss: CubeTensor,
        logits: CubeTensor,
        log_z: CubeTensor,
        h: CubeTensor,
        w: CubeTensor,
        targets: CubeTensor,
        alpha: f32,
    ) -> (CubeTensor, CubeTensor, CubeTensor) {
        type B = CubeBackend;
        let [dloss, targets] = [dloss, targets].map(into_contiguous);
        let [n, v] = logits.meta.shape().dims::<2>();
        let grad = empty(&logits, &[n, v]);
        let (count, cube_dim) = elementwise(&logits, n * v);
        k::xent_grad_kernel::launch(
            &logits.client.clone(),
            count,
            cube_dim,
            logits.clone().into_tensor_arg(),
            log_z.into_tensor_arg(),
            targets.clone().into_tensor_arg(),
            dloss.into_tensor_arg(),
            grad.clone().into_tensor_arg(),
            alpha,
            [
                dtype_to_storage_type(logits.dtype),
                dtype_to_storage_type(targets.dtype),
            ],
        );
        let dh = split_k_product(grad.clone(), w, xent_split());
        let dw = B::float_matmul(B::float_transpose(h), grad.clone());
        let db = B::float_reshape(B::float_sum_dim(grad, 0), Shape::new([v]));
        (dh, dw, db)
    }

    fn sampled_forward(
        h: CubeTensor,
        w: CubeTensor,
        b: CubeTensor,
        targets: CubeTensor,
        negatives: CubeTensor,
        log_miss: CubeTensor,
        tries: f32,
    ) -> (CubeTensor, CubeTensor, CubeTensor, CubeTensor, CubeTensor) {
        type B = CubeBackend;
        let n = h.meta.shape()[0];
        // b − log E [V], W's sampled columns [H, S], and their logits h·W_neg [N, S], which the
        // row kernel completes in place.
        let offset = sampled_offsets(b, log_miss, tries);
        let w_neg = into_contiguous(B::float_select(w.clone(), 1, negatives.clone()));
        let h = into_contiguous(h);
        let z = into_contiguous(B::float_matmul(h.clone(), w_neg.clone()));
        let [targets, negatives] = [targets, negatives].map(into_contiguous);
        let z_target = empty(&z, &[n]);
        let log_z = empty(&z, &[n]);
        let rows = empty(&z, &[n]);
        k::sampled_rows_kernel::launch(
            &z.client.clone(),
            CubeCount::Static(n as u32, 1, 1),
            CubeDim::new_1d(ROW_THREADS as u32),
            z.clone().into_tensor_arg(),
            h.into_tensor_arg(),
            w.into_tensor_arg(),
            offset.into_tensor_arg(),
            negatives.into_tensor_arg(),
            targets.clone().into_tensor_arg(),
            z_target.clone().into_tensor_arg(),
            log_z.clone().into_tensor_arg(),
            rows.clone().into_tensor_arg(),
            ROW_THREADS,
            [
                dtype_to_storage_type(z.dtype),
                dtype_to_storage_type(targets.dtype),
            ],
        );
        (mean_of_rows(rows), z, z_target, log_z, w_neg)
    }

    fn sampled_backward(
        dloss: CubeTensor,
        z: CubeTensor,
        z_target: CubeTensor,
        log_z: CubeTensor,
        h: CubeTensor,
        w: CubeTensor,
        w_neg: CubeTensor,
        targets: CubeTensor,
        negatives: CubeTensor,
    ) -> (CubeTensor, CubeTensor, CubeTensor) {
        type B = CubeBackend;
        let [dloss, h, targets, negatives] = [dloss, h, targets, negatives].map(into_contiguous);
        let [n, s] = z.meta.shape().dims::<2>();
        let [d, v] = w.meta.shape().dims::<2>();
        let (float, int) = (
            dtype_to_storage_type(z.dtype),
            dtype_to_storage_type(targets.dtype),
        );
        let client = z.client.clone();

        let dz = empty(&z, &[n, s]);
        let dz_target = empty(&z, &[n]);
        let (count, cube_dim) = elementwise(&z, n * s);
        k::sampled_grad_kernel::launch(
            &client,
            count,
            cube_dim,
            z.into_tensor_arg(),
            z_target.into_tensor_arg(),
            log_z.into_tensor_arg(),
            dloss.into_tensor_arg(),
            dz.clone().into_tensor_arg(),
            dz_target.clone().into_tensor_arg(),
            float,
        );

        // dh = dz·W_negᵀ, then each row's target column.
        let dh = into_contiguous(B::float_matmul(dz.clone(), B::float_transpose(w_neg)));
        let (count, cube_dim) = elementwise(&dh, n * d);
        k::sampled_target_rows_kernel::launch(
            &client,
            count,
            cube_dim,
            dh.clone().into_tensor_arg(),
            dz_target.clone().into_tensor_arg(),
            w.into_tensor_arg(),
            targets.clone().into_tensor_arg(),
            [float, int],
        );

        // The sampled columns' gradients hᵀ·dz [H, S] and Σ_rows dz [S], then everything added
        // into the dense dW and db.
        let g_neg = into_contiguous(B::float_matmul(B::float_transpose(h.clone()), dz.clone()));
        let db_neg = into_contiguous(B::float_sum_dim(dz, 0));
        let dtype = FloatDType::from(dh.dtype);
        let dw = B::float_zeros(Shape::new([d, v]), &dh.device, dtype);
        let db = B::float_zeros(Shape::new([v]), &dh.device, dtype);
        let (count, cube_dim) = elementwise(&dh, (d + 1) * (s + n));
        k::sampled_scatter_kernel::launch(
            &client,
            count,
            cube_dim,
            g_neg.into_tensor_arg(),
            db_neg.into_tensor_arg(),
            h.into_tensor_arg(),
            dz_target.into_tensor_arg(),
            negatives.into_tensor_arg(),
            targets.into_tensor_arg(),
            dw.clone().into_tensor_arg(),
            db.clone().into_tensor_arg(),
            [float, int],
        );
        (dh, dw, db)
    }
}

// ---- RecurrentOps and LossOps on Cube, with and without autodiff----------------------------------------

impl RecurrentOps for Cube {
    fn lstm_window(
        xp: FloatTensor<Self>,
        w_hh: FloatTensor<Self>,
        b_hh: FloatTensor<Self>,
        h0: FloatTensor<Self>,
        c0: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        Cube::lstm_forward(xp, w_hh, b_hh, h0, c0).0
    }

    fn gru_window(
        xp: FloatTensor<Self>,
        w_hh: FloatTensor<Self>,
        b_hh: FloatTensor<Self>,
        h0: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        Cube::gru_forward(xp, w_hh, b_hh, h0).0
    }
}

impl<C: CheckpointStrategy> RecurrentOps for Autodiff<Cube, C> {
    fn lstm_window(
        xp: FloatTensor<Self>,
        w_hh: FloatTensor<Self>,
        b_hh: FloatTensor<Self>,
        h0: FloatTensor<Self>,
        c0: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        let nodes = [xp.node(), w_hh.node(), b_hh.node(), h0.node(), c0.node()];
        match LstmBackward.prepare::<C>(nodes).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let [xp, w_hh, b_hh, h0, c0] = [xp, w_hh, b_hh, h0, c0].map(|t| t.into_primitive());
                let (out, gates, cells, hprev) =
                    Cube::lstm_forward(xp, w_hh.clone(), b_hh, h0, c0.clone());
                let state = LstmState {
                    gates,
                    cells,
                    hprev,
                    c0,
                    w_hh,
                };
                prep.finish(state, out)
            }
            OpsKind::UnTracked(prep) => prep.finish(Cube::lstm_window(
                xp.into_primitive(),
                w_hh.into_primitive(),
                b_hh.into_primitive(),
                h0.into_primitive(),
                c0.into_primitive(),
            )),
        }
    }

    fn gru_window(
        xp: FloatTensor<Self>,
        w_hh: FloatTensor<Self>,
        b_hh: FloatTensor<Self>,
        h0: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        let nodes = [xp.node(), w_hh.node(), b_hh.node(), h0.node()];
        match GruBackward.prepare::<C>(nodes).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let [xp, w_hh, b_hh, h0] = [xp, w_hh, b_hh, h0].map(|t| t.into_primitive());
                let (out, gates, hn, hprev) = Cube::gru_forward(xp, w_hh.clone(), b_hh, h0);
                let state = GruState {
                    gates,
                    hn,
                    hprev,
                    w_hh,
                };
                prep.finish(state, out)
            }
            OpsKind::UnTracked(prep) => prep.finish(Cube::gru_window(
                xp.into_primitive(),
                w_hh.into_primitive(),
                b_hh.into_primitive(),
                h0.into_primitive(),
            )),
        }
    }
}

#[derive(Debug)]
struct LstmBackward;

#[derive(Debug, Clone)]
struct LstmState {
    gates: FloatTensor<Cube>,
    cells: FloatTensor<Cube>,
    hprev: FloatTensor<Cube>,
    c0: FloatTensor<Cube>,
    w_hh: FloatTensor<Cube>,
}

impl Backward<Cube, 5> for LstmBackward {
    type State = LstmState;

    fn backward(self, ops: Ops<LstmState, 5>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [xp, w_hh, b_hh, h0, c0] = ops.parents.map(|p| p.map(|node| node.id));
        let dout = grads.consume::<Cube>(&ops.node);
        let s = ops.state;
        let (dxp, dw, db, dh0, dc0) =
            Cube::lstm_backward(dout, s.gates, s.cells, s.hprev, s.c0, s.w_hh);
        for (id, g) in [(xp, dxp), (w_hh, dw), (b_hh, db), (h0, dh0), (c0, dc0)] {
            register(grads, id, g);
        }
    }
}

#[derive(Debug)]
struct GruBackward;

#[derive(Debug, Clone)]
struct GruState {
    gates: FloatTensor<Cube>,
    hn: FloatTensor<Cube>,
    hprev: FloatTensor<Cube>,
    w_hh: FloatTensor<Cube>,
}

impl Backward<Cube, 4> for GruBackward {
    type State = GruState;

    fn backward(self, ops: Ops<GruState, 4>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [xp, w_hh, b_hh, h0] = ops.parents.map(|p| p.map(|node| node.id));
        let dout = grads.consume::<Cube>(&ops.node);
        let s = ops.state;
        let (dxp, dw, db, dh0) = Cube::gru_backward(dout, s.gates, s.hn, s.hprev, s.w_hh);
        for (id, g) in [(xp, dxp), (w_hh, dw), (b_hh, db), (h0, dh0)] {
            register(grads, id, g);
        }
    }
}

fn register(grads: &mut Gradients, parent: Option<NodeId>, g: FloatTensor<Cube>) {
    if let Some(id) = parent {
        grads.register::<Cube>(id, g);
    }
}

impl LossOps for Cube {
    fn softmax_xent(
        h: FloatTensor<Self>,
        w: FloatTensor<Self>,
        b: FloatTensor<Self>,
        targets: IntTensor<Self>,
        alpha: f32,
    ) -> FloatTensor<Self> {
        Cube::xent_forward(h, w, b, targets, alpha).0
    }

    fn sampled_xent(
        h: FloatTensor<Self>,
        w: FloatTensor<Self>,
        b: FloatTensor<Self>,
        targets: IntTensor<Self>,
        negatives: Negatives,
    ) -> FloatTensor<Self> {
        let (ids, log_miss) = sampled_inputs(&h, &w, &targets, &negatives);
        Cube::sampled_forward(h, w, b, targets, ids, log_miss, negatives.tries as f32).0
    }
}

/// The window's sampled ids `[S]` (in `targets`' int type) and the sampler's `log(1 − Q)` of
/// every word `[V]` on `h`'s device, from the host's [`Negatives`]: with the number of draws
/// they decide the log-Q corrections, so nothing is read back.
fn sampled_inputs(
    h: &FloatTensor<Cube>,
    w: &FloatTensor<Cube>,
    targets: &IntTensor<Cube>,
    negatives: &Negatives,
) -> (IntTensor<Cube>, FloatTensor<Cube>) {
    let vocab = w.shape()[1];
    assert_eq!(
        negatives.sampler.vocab_size(),
        vocab,
        "the sampler's vocabulary is not W's"
    );
    assert!(
        !negatives.ids.is_empty(),
        "the sampled softmax drew no words"
    );
    let device = h.device();
    let ids: Vec<i64> = negatives.ids.iter().map(|&j| j as i64).collect();
    let ids = TensorData::new(ids, [negatives.ids.len()]).convert_dtype(targets.dtype());
    let log_miss =
        TensorData::new(negatives.sampler.log_miss().to_vec(), [vocab]).convert_dtype(h.dtype());
    (
        Cube::int_from_data(ids, &device),
        Cube::float_from_data(log_miss, &device),
    )
}

impl<C: CheckpointStrategy> LossOps for Autodiff<Cube, C> {
    fn softmax_xent(
        h: FloatTensor<Self>,
        w: FloatTensor<Self>,
        b: FloatTensor<Self>,
        targets: IntTensor<Self>,
        alpha: f32,
    ) -> FloatTensor<Self> {
        let nodes = [h.node(), w.node(), b.node()];
        match XentBackward.prepare::<C>(nodes).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let [h, w, b] = [h, w, b].map(|t| t.into_primitive());
                let (loss, logits, log_z) =
                    Cube::xent_forward(h.clone(), w.clone(), b, targets.clone(), alpha);
                let state = XentState {
                    logits,
                    log_z,
                    h,
                    w,
                    targets,
                    alpha,
                };
                prep.finish(state, loss)
            }
            OpsKind::UnTracked(prep) => prep.finish(Cube::softmax_xent(
                h.into_primitive(),
                w.into_primitive(),
                b.into_primitive(),
                targets,
                alpha,
            )),
        }
    }

    fn sampled_xent(
        h: FloatTensor<Self>,
        w: FloatTensor<Self>,
        b: FloatTensor<Self>,
        targets: IntTensor<Self>,
        negatives: Negatives,
    ) -> FloatTensor<Self> {
        let nodes = [h.node(), w.node(), b.node()];
        match SampledBackward
            .prepare::<C>(nodes)
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let [h, w, b] = [h, w, b].map(|t| t.into_primitive());
                let (ids, log_miss) = sampled_inputs(&h, &w, &targets, &negatives);
                let (loss, z, z_target, log_z, w_neg) = Cube::sampled_forward(
                    h.clone(),
                    w.clone(),
                    b,
                    targets.clone(),
                    ids.clone(),
                    log_miss,
                    negatives.tries as f32,
                );
                let state = SampledState {
                    z,
                    z_target,
                    log_z,
                    h,
                    w,
                    w_neg,
                    targets,
                    negatives: ids,
                };
                prep.finish(state, loss)
            }
            OpsKind::UnTracked(prep) => prep.finish(Cube::sampled_xent(
                h.into_primitive(),
                w.into_primitive(),
                b.into_primitive(),
                targets,
                negatives,
            )),
        }
    }
}

#[derive(Debug)]
struct XentBackward;

#[derive(Debug, Clone)]
struct XentState {
    logits: FloatTensor<Cube>,
    log_z: FloatTensor<Cube>,
    h: FloatTensor<Cube>,
    w: FloatTensor<Cube>,
    targets: IntTensor<Cube>,
    alpha: f32,
}

impl Backward<Cube, 3> for XentBackward {
    type State = XentState;

    fn backward(self, ops: Ops<XentState, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [h, w, b] = ops.parents.map(|p| p.map(|node| node.id));
        let dloss = grads.consume::<Cube>(&ops.node);
        let s = ops.state;
        let (dh, dw, db) =
            Cube::xent_backward(dloss, s.logits, s.log_z, s.h, s.w, s.targets, s.alpha);
        for (id, g) in [(h, dh), (w, dw), (b, db)] {
            register(grads, id, g);
        }
    }
}

#[derive(Debug)]
struct SampledBackward;

#[derive(Debug, Clone)]
struct SampledState {
    z: FloatTensor<Cube>,
    z_target: FloatTensor<Cube>,
    log_z: FloatTensor<Cube>,
    h: FloatTensor<Cube>,
    w: FloatTensor<Cube>,
    w_neg: FloatTensor<Cube>,
    targets: IntTensor<Cube>,
    negatives: IntTensor<Cube>,
}

impl Backward<Cube, 3> for SampledBackward {
    type State = SampledState;

    fn backward(self, ops: Ops<SampledState, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [h, w, b] = ops.parents.map(|p| p.map(|node| node.id));
        let dloss = grads.consume::<Cube>(&ops.node);
        let s = ops.state;
        let (dh, dw, db) = Cube::sampled_backward(
            dloss,
            s.z,
            s.z_target,
            s.log_z,
            s.h,
            s.w,
            s.w_neg,
            s.targets,
            s.negatives,
        );
        for (id, g) in [(h, dh), (w, dw), (b, db)] {
            register(grads, id, g);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::TensorData;

    /// The wgpu device (lavapipe without a GPU), or `None` where it has no usable adapter.
    fn wgpu() -> Option<cubecl::Device> {
        crate::backend::wgpu_test_device()?;
        Some(cubecl::Device::Wgpu(Default::default()))
    }

    /// A tensor's values, read back to the host.
    fn read(t: CubeTensor) -> Vec<f32> {
        cubecl::future::block_on(CubeBackend::float_into_data(t))
            .expect("read back")
            .try_to_vec::<f32>()
            .expect("f32")
    }

    /// The split product against one product on wgpu (lavapipe without a GPU), for splits that
    /// divide `V`, splits that do not (7 → 5, 16 → 10) and a transposed `w`, as a tied output
    /// layer hands it over.
    #[test]
    fn wgpu_split_k_product_matches_one_product() {
        let Some(device) = wgpu() else {
            return;
        };
        type B = CubeBackend;
        let (n, d, v) = (21, 12, 1000);
        let seeded = |len: usize, seed: usize| -> Vec<f32> {
            (0..len)
                .map(|i| ((i * 7919 + seed * 104_729) % 2001) as f32 / 1000.0 - 1.0)
                .collect()
        };
        let g = B::float_from_data(TensorData::new(seeded(n * v, 1), [n, v]), &device);
        let w = B::float_from_data(TensorData::new(seeded(d * v, 2), [d, v]), &device);
        let w_tied = B::float_transpose(B::float_from_data(
            TensorData::new(seeded(d * v, 3), [v, d]),
            &device,
        ));
        for w in [w, w_tied] {
            let want = read(split_k_product(g.clone(), w.clone(), 1));
            assert_eq!(want.len(), n * d);
            for split in [2, 4, 7, 16] {
                let got = read(split_k_product(g.clone(), w.clone(), split));
                for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                    assert!(
                        (a - b).abs() <= 1e-4 * (1.0 + b.abs()),
                        "split {split}, output {i}: {a} against {b}"
                    );
                }
            }
        }
    }

    /// The offsets kernel against the host's f64 [`Sampler::log_expected`] for words from
    /// almost surely drawn (`tries · Q` ≈ 700) down to `tries · Q` ≈ 1e-12, both sides of its
    /// series' edge at 0.1 included. `1 − exp(x)` alone fails it on lavapipe: 7e-4 off at
    /// `tries · Q` = 9e-5, already.
    #[test]
    fn wgpu_sampled_offsets_match_the_hosts_log_expected() {
        let Some(device) = wgpu() else {
            return;
        };
        type B = CubeBackend;
        // Counts over twelve orders of magnitude, every decade of Q represented.
        let counts: Vec<u64> = (0..48u32)
            .map(|i| 10u64.pow(12 - i / 4) * u64::from(1 + i % 4))
            .collect();
        let sampler = super::super::Sampler::new(&counts, 1.0);
        let b: Vec<f32> = (0..counts.len())
            .map(|i| (i % 5) as f32 * 0.25 - 0.5)
            .collect();
        for tries in [1u64, 30, 2_000] {
            let offsets = sampled_offsets(
                B::float_from_data(TensorData::new(b.clone(), [b.len()]), &device),
                B::float_from_data(
                    TensorData::new(sampler.log_miss().to_vec(), [b.len()]),
                    &device,
                ),
                tries as f32,
            );
            for (j, &got) in read(offsets).iter().enumerate() {
                let want = b[j] - sampler.log_expected(j as u32, tries);
                assert!(
                    (got - want).abs() <= 1e-5 * (1.0 + want.abs()),
                    "{tries} draws, word {j}: {got} against {want}"
                );
            }
        }
    }

    #[test]
    fn wgpu_plans_keep_every_thread_busy_within_the_device() {
        // PTB-Small's LSTM on 1,024 threads, 4 columns a load: the forward's 200 column groups
        // take 5 slices of the 200 rows, the backward's 50 groups 20 slices of the 800 rows.
        let ptb = WindowPlan::new(Cell::Lstm, 200, 1024, 48 << 10);
        assert_eq!(
            (
                ptb.threads,
                ptb.width,
                ptb.forward_splits,
                ptb.backward_splits
            ),
            (1024, 4, 5, 20)
        );
        assert_eq!(ptb.shared_bytes(), (200 + 800 + 20 * 200) * 4);
        // A device with smaller cubes: the forward's threads stride over its 150 groups unsplit.
        let small = WindowPlan::new(Cell::Gru, 200, 256, 48 << 10);
        assert_eq!(
            (small.threads, small.forward_splits, small.backward_splits),
            (256, 1, 5)
        );
        // A narrow layer: 32 threads (the floor) over 4 groups of 4 columns split the rows too.
        let narrow = WindowPlan::new(Cell::Lstm, 4, 1024, 48 << 10);
        assert_eq!(
            (
                narrow.threads,
                narrow.width,
                narrow.forward_splits,
                narrow.backward_splits
            ),
            (32, 4, 8, 32)
        );
        // Where the slices' partial sums would not fit, fewer slices: a 2,048-wide LSTM fills
        // 48 KiB unsplit, and a wider one fits nowhere.
        let wide = WindowPlan::new(Cell::Lstm, 2048, 1024, 48 << 10);
        assert_eq!((wide.forward_splits, wide.backward_splits), (1, 1));
        assert_eq!(wide.shared_bytes(), 48 << 10);
        assert!(WindowPlan::new(Cell::Lstm, 2052, 1024, 48 << 10).shared_bytes() > 48 << 10);
        // A width that 4 does not divide loads one column at a time.
        let odd = WindowPlan::new(Cell::Gru, 6, 1024, 48 << 10);
        assert_eq!(
            (
                odd.threads,
                odd.width,
                odd.forward_splits,
                odd.backward_splits
            ),
            (32, 1, 1, 5)
        );
    }
}
