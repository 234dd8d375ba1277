//! Fused training ops on burn's `flex` backend, each with a hand-written backward: a whole
//! truncated-BPTT window of an LSTM or GRU layer ([`lstm_window`], [`gru_window`]), the
//! output layer with its softmax cross-entropy ([`softmax_cross_entropy`]) or with the sampled
//! softmax that stands in for it in large-vocabulary training
//! ([`sampled_softmax_cross_entropy`]).
//!
//! Why: composed of burn ops, one LSTM window is ~40 small ops per time step, each allocating
//! its result and its gradient, and burn's autodiff graph runs them on one core. Here a window
//! is one graph node whose forward and backward are loops over slices plus a few large
//! products (`gemm` with its AVX-512 kernels, both cores).
//!
//! They plug into burn through its backend-extension route (`#[backend_extension]`, a
//! `Backward` per op for `Autodiff<Flex>`), so the model, the optimizer and checkpoints stay
//! burn's. Other backends ([`available`] is false) keep the plain composition in [`crate::lm`],
//! which is also the reference the parity tests compare against.
//!
//! - [`gemm`]: strided matrix products.
//! - [`recurrent`]: the LSTM/GRU window kernels.
//! - [`xent`]: the output layer + softmax cross-entropy kernels.
//! - [`sampled`]: the sampled softmax (large-vocabulary training) kernels.
//! - [`vector`]: the element-wise and reduction loops they share.
//! - [`dropout()`]: dropout with its mask drawn in parallel from a hash on the CPU.
//! - `cube` (cargo feature `wgpu`): the recurrent windows and the output layer's losses (full
//!   and sampled softmax) on burn's GPU backends as CubeCL kernels with their backwards
//!   ([`RecurrentOps`] and [`LossOps`] are the extensions flex and cubecl both implement;
//!   [`FusedOps`] is flex's alone).

#[cfg(feature = "wgpu")]
pub mod cube;
#[cfg(feature = "wgpu")]
mod cube_kernels;
pub mod dropout;
pub mod gemm;
pub mod recurrent;
pub mod sampled;
mod simd;
pub mod vector;
pub mod xent;

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::autodiff::{Autodiff, NodeId};
use burn::backend::flex::FlexTensor;
use burn::backend::tensor::{FloatTensor, IntTensor};
use burn::backend::{backend_extension, Backend, Dispatch, DispatchDevice, Flex};
use burn::nn::Embedding;
use burn::tensor::{DType, Device, Int, Tensor, TensorData};
use fastsoftmax_infer::model::artifact::Cell;

pub use dropout::{dropout, seed_dropout};
use gemm::MatRef;
use recurrent::{GruTape, LstmTape, Window};
pub use sampled::{Negatives, Sampler};

/// True when `device` (with or without autodiff) runs the fused windows and output layer
/// ([`lstm_window`], [`gru_window`], [`softmax_cross_entropy`]): burn's `flex` backend and, with
/// the cargo feature `wgpu`, every cubecl device.
pub fn available(device: &Device) -> bool {
    match device.clone().inner().as_dispatch() {
        DispatchDevice::Flex(_) => true,
        #[cfg(feature = "wgpu")]
        DispatchDevice::Cube(_) => true,
        #[allow(unreachable_patterns)]
        _ => false,
    }
}

/// True when `device` runs the fused window of a `cell` layer `hidden` wide: always on flex; on
/// a cubecl device when the persistent kernels' state fits its shared memory
/// ([`cube::WindowPlan::shared_bytes`]). A layer that does not fit runs the composition instead.
pub fn window_fits(device: &Device, cell: Cell, hidden: usize) -> bool {
    match device.clone().inner().as_dispatch() {
        DispatchDevice::Flex(_) => true,
        #[cfg(feature = "wgpu")]
        DispatchDevice::Cube(cube) => {
            let client = cube.client();
            let hardware = &client.properties().hardware;
            let max_shared = hardware.max_shared_memory_size;
            cube::WindowPlan::new(
                cell,
                hidden,
                hardware.max_units_per_cube as usize,
                max_shared,
            )
            .shared_bytes()
                <= max_shared
        }
        #[allow(unreachable_patterns)]
        _ => {
            let _ = (cell, hidden);
            false
        }
    }
}

/// True when `device` runs [`sampled_softmax_cross_entropy`]: flex, and the cubecl devices that
/// add f32 atomically (on those the backward adds the target columns into the weight gradient
/// atomically, since rows share targets). Elsewhere [`crate::lm::sampled_cross_entropy_composed`]
/// stands in.
pub fn samples_fused(device: &Device) -> bool {
    match device.clone().inner().as_dispatch() {
        DispatchDevice::Flex(_) => true,
        #[cfg(feature = "wgpu")]
        DispatchDevice::Cube(cube) => {
            use cubecl::features::AtomicUsage;
            use cubecl::ir::{ElemType, FloatKind, Type};
            cube.client()
                .properties()
                .atomic_type_usage(Type::atomic(ElemType::Float(FloatKind::F32)))
                .contains(AtomicUsage::Add)
        }
        #[allow(unreachable_patterns)]
        _ => false,
    }
}

/// True on burn's `flex` backend: the CPU, where the op of [`FusedOps`] (the one-pass clipping
/// norm) runs and reading a scalar back costs nothing.
pub fn on_cpu(device: &Device) -> bool {
    matches!(
        device.clone().inner().as_dispatch(),
        DispatchDevice::Flex(_)
    )
}

/// `t.select(dim, ids)` (`ids [K]`), with a backward that is fast on a GPU. On burn's CubeCL
/// devices (wgpu) it is a gather, whose backward burn runs as one atomic add per value;
/// elsewhere burn's `select`. `select`'s backward on a GPU (`select_assign`) runs one thread per
/// element of the other dimensions, each walking all `K` ids in turn: for an embedding that was
/// 2.2 ms of each PTB-Small window at batch 128 on an H200, against 9 µs for the gather's
/// (CubeCL's profiler); a 1-D tensor gets one thread.
pub fn select<const D: usize>(t: Tensor<D>, dim: usize, ids: Tensor<1, Int>) -> Tensor<D> {
    if !gathers(&t.device()) {
        return t.select(dim, ids);
    }
    let k = ids.dims()[0];
    let mut along = [1; D];
    along[dim] = k;
    let mut shape = t.dims();
    shape[dim] = k;
    let index = ids.reshape(along).expand(shape);
    t.gather(dim, index)
}

/// True on burn's CubeCL devices, where [`select`] and [`embed`] gather.
fn gathers(device: &Device) -> bool {
    available(device) && !on_cpu(device)
}

/// The rows `ids [B, T]` of an embedding table: `[B, T, D]`, by [`select`] (burn's `Embedding`
/// where that is burn's `select`).
pub fn embed(table: &Embedding, ids: Tensor<2, Int>) -> Tensor<3> {
    if !gathers(&ids.device()) {
        return table.forward(ids);
    }
    let [b, t] = ids.dims();
    let rows = select(table.weight.val(), 0, ids.reshape([b * t]));
    let d = rows.dims()[1];
    rows.reshape([b, t, d])
}

/// LSTM window: `xp [B, T, 4H]` (input projection with its bias), `w_hh [H, 4H]`, `b_hh [4H]`,
/// `h0, c0 [B, H]` → (`hs [B, T, H]`, `h_T [B, H]`, `c_T [B, H]`). Differentiable in every input.
pub fn lstm_window(
    xp: Tensor<3>,
    w_hh: Tensor<2>,
    b_hh: Tensor<1>,
    h0: Tensor<2>,
    c0: Tensor<2>,
) -> (Tensor<3>, Tensor<2>, Tensor<2>) {
    let [b, t, _] = xp.dims();
    let h = h0.dims()[1];
    let out = Tensor::<3>::from_dispatch(<Dispatch as RecurrentOps>::lstm_window(
        xp.into_dispatch(),
        w_hh.into_dispatch(),
        b_hh.into_dispatch(),
        h0.into_dispatch(),
        c0.into_dispatch(),
    ));
    let h_last = out.clone().slice([0..b, t - 1..t, 0..h]).reshape([b, h]);
    let c_last = out.clone().slice([0..b, t..t + 1, 0..h]).reshape([b, h]);
    (out.slice([0..b, 0..t, 0..h]), h_last, c_last)
}

/// GRU window: `xp [B, T, 3H]`, `w_hh [H, 3H]`, `b_hh [3H]`, `h0 [B, H]` → (`hs [B, T, H]`,
/// `h_T [B, H]`). Differentiable in every input.
pub fn gru_window(
    xp: Tensor<3>,
    w_hh: Tensor<2>,
    b_hh: Tensor<1>,
    h0: Tensor<2>,
) -> (Tensor<3>, Tensor<2>) {
    let [b, t, _] = xp.dims();
    let h = h0.dims()[1];
    let out = Tensor::<3>::from_dispatch(<Dispatch as RecurrentOps>::gru_window(
        xp.into_dispatch(),
        w_hh.into_dispatch(),
        b_hh.into_dispatch(),
        h0.into_dispatch(),
    ));
    let h_last = out.clone().slice([0..b, t - 1..t, 0..h]).reshape([b, h]);
    (out, h_last)
}

/// Mean over rows of `−log softmax(h·w + b)[target]`: `h [N, H]`, `w [H, V]` (any strides, so a
/// tied embedding's transpose is free), `b [V]`, `targets [N]` → `[1]`. Differentiable in `h`,
/// `w` and `b`.
pub fn softmax_cross_entropy(
    h: Tensor<2>,
    w: Tensor<2>,
    b: Tensor<1>,
    targets: Tensor<1, Int>,
) -> Tensor<1> {
    self_normalised_cross_entropy(h, w, b, targets, 0.0)
}

/// [`softmax_cross_entropy`] plus `alpha · mean(log Z²)` (self-normalisation).
pub fn self_normalised_cross_entropy(
    h: Tensor<2>,
    w: Tensor<2>,
    b: Tensor<1>,
    targets: Tensor<1, Int>,
    alpha: f32,
) -> Tensor<1> {
    Tensor::from_dispatch(<Dispatch as LossOps>::softmax_xent(
        h.into_dispatch(),
        w.into_dispatch(),
        b.into_dispatch(),
        targets.into_dispatch(),
        alpha,
    ))
}

/// [`softmax_cross_entropy`]'s training stand-in, the sampled softmax of [`sampled`]: each row
/// sees its target and the window's `negatives` only. Differentiable in `h`, `w` and `b`.
pub fn sampled_softmax_cross_entropy(
    h: Tensor<2>,
    w: Tensor<2>,
    b: Tensor<1>,
    targets: Tensor<1, Int>,
    negatives: &Negatives,
) -> Tensor<1> {
    Tensor::from_dispatch(<Dispatch as LossOps>::sampled_xent(
        h.into_dispatch(),
        w.into_dispatch(),
        b.into_dispatch(),
        targets.into_dispatch(),
        negatives.clone(),
    ))
}

/// `Σ x²` of a tensor of any shape, in one pass over its values (gradient clipping reads the
/// norm of every gradient each window). Not differentiable.
pub fn sum_of_squares<const D: usize>(x: Tensor<D>) -> f64 {
    let n = x.shape().num_elements();
    let flat = Tensor::<1>::from_dispatch(<Dispatch as FusedOps>::sum_squares(
        x.reshape([n]).into_dispatch(),
    ));
    flat.into_scalar::<f64>()
}

/// The recurrent windows as a burn backend extension: flex's loops ([`recurrent`]) and, with the
/// cargo feature `wgpu`, the CubeCL kernels of [`cube`] on every cubecl runtime.
#[backend_extension(Flex, Cube: cfg(feature = "wgpu"), Autodiff)]
pub trait RecurrentOps: Backend {
    /// See [`lstm_window`]; returns `[B, T+1, H]`: `h_1 … h_T`, then `c_T`.
    fn lstm_window(
        xp: FloatTensor<Self>,
        w_hh: FloatTensor<Self>,
        b_hh: FloatTensor<Self>,
        h0: FloatTensor<Self>,
        c0: FloatTensor<Self>,
    ) -> FloatTensor<Self>;
    /// See [`gru_window`]; returns `[B, T, H]`.
    fn gru_window(
        xp: FloatTensor<Self>,
        w_hh: FloatTensor<Self>,
        b_hh: FloatTensor<Self>,
        h0: FloatTensor<Self>,
    ) -> FloatTensor<Self>;
}

/// The output layer with its softmax cross-entropy, full or sampled, as a burn backend
/// extension: flex's loops ([`xent`], [`sampled`]) and, with the cargo feature `wgpu`, the CubeCL
/// kernels of [`cube`].
#[backend_extension(Flex, Cube: cfg(feature = "wgpu"), Autodiff)]
pub trait LossOps: Backend {
    /// See [`self_normalised_cross_entropy`].
    fn softmax_xent(
        h: FloatTensor<Self>,
        w: FloatTensor<Self>,
        b: FloatTensor<Self>,
        targets: IntTensor<Self>,
        alpha: f32,
    ) -> FloatTensor<Self>;
    /// See [`sampled_softmax_cross_entropy`].
    fn sampled_xent(
        h: FloatTensor<Self>,
        w: FloatTensor<Self>,
        b: FloatTensor<Self>,
        targets: IntTensor<Self>,
        negatives: Negatives,
    ) -> FloatTensor<Self>;
}

/// The op that runs on the CPU only: the clipping norm read to the host (flex, with and without
/// autodiff; on a GPU the norm stays a tensor, `train::clip_scale`).
#[backend_extension(Flex, Autodiff)]
pub trait FusedOps: Backend {
    /// See [`sum_of_squares`]; returns `[1]`.
    fn sum_squares(x: FloatTensor<Self>) -> FloatTensor<Self>;
}

impl RecurrentOps for Flex {
    fn lstm_window(
        xp: FlexTensor,
        w_hh: FlexTensor,
        b_hh: FlexTensor,
        h0: FlexTensor,
        c0: FlexTensor,
    ) -> FlexTensor {
        lstm_forward(&xp, &w_hh, &b_hh, &h0, &c0).0
    }

    fn gru_window(
        xp: FlexTensor,
        w_hh: FlexTensor,
        b_hh: FlexTensor,
        h0: FlexTensor,
    ) -> FlexTensor {
        gru_forward(&xp, &w_hh, &b_hh, &h0).0
    }
}

impl LossOps for Flex {
    fn softmax_xent(
        h: FlexTensor,
        w: FlexTensor,
        b: FlexTensor,
        targets: FlexTensor,
        alpha: f32,
    ) -> FlexTensor {
        let (loss, tape) = xent_forward(&h, &w, &b, &ids(&targets), alpha);
        tape.recycle();
        loss
    }

    fn sampled_xent(
        h: FlexTensor,
        w: FlexTensor,
        b: FlexTensor,
        targets: FlexTensor,
        negatives: Negatives,
    ) -> FlexTensor {
        sampled_forward(&h, &w, &b, &ids(&targets), &negatives).0
    }
}

impl FusedOps for Flex {
    fn sum_squares(x: FlexTensor) -> FlexTensor {
        use rayon::prelude::*;
        let x = dense(&x);
        // Fixed chunks summed in order: the same bits whatever the threads did.
        let partial: Vec<f64> = slice(&x)
            .par_chunks(1 << 14)
            .map(vector::sum_of_squares_f32)
            .collect();
        let sum: f64 = partial.iter().sum();
        tensor(vec![sum as f32], &[1])
    }
}

impl<C: CheckpointStrategy> RecurrentOps for Autodiff<Flex, C> {
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
                let (out, tape) = lstm_forward(&xp, &w_hh, &b_hh, &h0, &c0);
                let state = LstmState {
                    tape,
                    out: out.clone(),
                    w_hh,
                    h0,
                    c0,
                };
                prep.finish(state, out)
            }
            OpsKind::UnTracked(prep) => prep.finish(Flex::lstm_window(
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
                let (out, tape) = gru_forward(&xp, &w_hh, &b_hh, &h0);
                let state = GruState {
                    tape,
                    out: out.clone(),
                    w_hh,
                    h0,
                };
                prep.finish(state, out)
            }
            OpsKind::UnTracked(prep) => prep.finish(Flex::gru_window(
                xp.into_primitive(),
                w_hh.into_primitive(),
                b_hh.into_primitive(),
                h0.into_primitive(),
            )),
        }
    }
}

impl<C: CheckpointStrategy> LossOps for Autodiff<Flex, C> {
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
                let targets = ids(&targets);
                let (loss, tape) = xent_forward(&h, &w, &b, &targets, alpha);
                let state = XentState {
                    h,
                    w,
                    targets,
                    tape,
                };
                prep.finish(state, loss)
            }
            OpsKind::UnTracked(prep) => prep.finish(Flex::softmax_xent(
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
                let targets = ids(&targets);
                let (loss, tape) = sampled_forward(&h, &w, &b, &targets, &negatives);
                let state = SampledState {
                    h,
                    vocab: matrix(&w).cols,
                    targets,
                    negatives,
                    tape,
                };
                prep.finish(state, loss)
            }
            OpsKind::UnTracked(prep) => prep.finish(Flex::sampled_xent(
                h.into_primitive(),
                w.into_primitive(),
                b.into_primitive(),
                targets,
                negatives,
            )),
        }
    }
}

impl<C: CheckpointStrategy> FusedOps for Autodiff<Flex, C> {
    fn sum_squares(x: FloatTensor<Self>) -> FloatTensor<Self> {
        match SumSquaresBackward
            .prepare::<C>([x.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let x = x.into_primitive();
                let out = Flex::sum_squares(x.clone());
                prep.finish(x, out)
            }
            OpsKind::UnTracked(prep) => prep.finish(Flex::sum_squares(x.into_primitive())),
        }
    }
}

/// `d Σx² / dx = 2x`.
#[derive(Debug)]
struct SumSquaresBackward;

impl Backward<Flex, 1> for SumSquaresBackward {
    type State = FlexTensor;

    fn backward(self, ops: Ops<FlexTensor, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [x_id] = ops.parents.map(|p| p.map(|node| node.id));
        let dout = dense(&grads.consume::<Flex>(&ops.node));
        let two_g = 2.0 * slice(&dout)[0];
        let x = dense(&ops.state);
        let shape = x.layout().shape().to_vec();
        let dx = slice(&x).iter().map(|&v| two_g * v).collect();
        register(grads, x_id, dx, &shape);
    }
}

// ---- the forwards on flex primitives -------------------------------------------------------

fn lstm_forward(
    xp: &FlexTensor,
    w_hh: &FlexTensor,
    b_hh: &FlexTensor,
    h0: &FlexTensor,
    c0: &FlexTensor,
) -> (FlexTensor, LstmTape) {
    let w = window(xp, h0);
    let (xp, b_hh, h0, c0) = (dense(xp), dense(b_hh), dense(h0), dense(c0));
    let (out, tape) = recurrent::lstm_forward(
        w,
        slice(&xp),
        matrix(w_hh),
        slice(&b_hh),
        slice(&h0),
        slice(&c0),
    );
    (tensor(out, &[w.batch, w.time + 1, w.hidden]), tape)
}

fn gru_forward(
    xp: &FlexTensor,
    w_hh: &FlexTensor,
    b_hh: &FlexTensor,
    h0: &FlexTensor,
) -> (FlexTensor, GruTape) {
    let w = window(xp, h0);
    let (xp, b_hh, h0) = (dense(xp), dense(b_hh), dense(h0));
    let (out, tape) = recurrent::gru_forward(w, slice(&xp), matrix(w_hh), slice(&b_hh), slice(&h0));
    (tensor(out, &[w.batch, w.time, w.hidden]), tape)
}

fn xent_forward(
    h: &FlexTensor,
    w: &FlexTensor,
    b: &FlexTensor,
    targets: &[u32],
    alpha: f32,
) -> (FlexTensor, xent::Tape) {
    let b = dense(b);
    let (sum, tape) = xent::forward(matrix(h), matrix(w), slice(&b), targets, alpha);
    let mean = (sum / targets.len().max(1) as f64) as f32;
    (tensor(vec![mean], &[1]), tape)
}

fn sampled_forward(
    h: &FlexTensor,
    w: &FlexTensor,
    b: &FlexTensor,
    targets: &[u32],
    negatives: &Negatives,
) -> (FlexTensor, sampled::Tape) {
    let b = dense(b);
    let (sum, tape) = sampled::forward(matrix(h), matrix(w), slice(&b), targets, negatives);
    let mean = (sum / targets.len().max(1) as f64) as f32;
    (tensor(vec![mean], &[1]), tape)
}

// ---- the backwards -------------------------------------------------------------------------

#[derive(Debug)]
struct LstmBackward;

#[derive(Clone)]
struct LstmState {
    tape: LstmTape,
    out: FlexTensor,
    w_hh: FlexTensor,
    h0: FlexTensor,
    c0: FlexTensor,
}

impl Backward<Flex, 5> for LstmBackward {
    type State = LstmState;

    fn backward(self, ops: Ops<LstmState, 5>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [xp, w_hh, b_hh, h0, c0] = ops.parents.map(|p| p.map(|node| node.id));
        let dout = dense(&grads.consume::<Flex>(&ops.node));
        let s = ops.state;
        let w = s.tape.window;
        let (out, h0_values, c0_values) = (dense(&s.out), dense(&s.h0), dense(&s.c0));
        let g = recurrent::lstm_backward(
            &s.tape,
            slice(&out),
            matrix(&s.w_hh),
            slice(&h0_values),
            slice(&c0_values),
            slice(&dout),
        );
        let (bh, gh) = ([w.batch, w.hidden], 4 * w.hidden);
        register(grads, xp, g.dxp, &[w.batch, w.time, gh]);
        register(grads, w_hh, g.dw_hh, &[w.hidden, gh]);
        register(grads, b_hh, g.db_hh, &[gh]);
        register(grads, h0, g.dh0, &bh);
        register(grads, c0, g.dc0, &bh);
    }
}

#[derive(Debug)]
struct GruBackward;

#[derive(Clone)]
struct GruState {
    tape: GruTape,
    out: FlexTensor,
    w_hh: FlexTensor,
    h0: FlexTensor,
}

impl Backward<Flex, 4> for GruBackward {
    type State = GruState;

    fn backward(self, ops: Ops<GruState, 4>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [xp, w_hh, b_hh, h0] = ops.parents.map(|p| p.map(|node| node.id));
        let dout = dense(&grads.consume::<Flex>(&ops.node));
        let s = ops.state;
        let w = s.tape.window;
        let (out, h0_values) = (dense(&s.out), dense(&s.h0));
        let g = recurrent::gru_backward(
            &s.tape,
            slice(&out),
            matrix(&s.w_hh),
            slice(&h0_values),
            slice(&dout),
        );
        let gh = 3 * w.hidden;
        register(grads, xp, g.dxp, &[w.batch, w.time, gh]);
        register(grads, w_hh, g.dw_hh, &[w.hidden, gh]);
        register(grads, b_hh, g.db_hh, &[gh]);
        register(grads, h0, g.dh0, &[w.batch, w.hidden]);
    }
}

#[derive(Debug)]
struct XentBackward;

#[derive(Clone)]
struct XentState {
    h: FlexTensor,
    w: FlexTensor,
    targets: Vec<u32>,
    tape: xent::Tape,
}

impl Backward<Flex, 3> for XentBackward {
    type State = XentState;

    fn backward(self, ops: Ops<XentState, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [h, w, b] = ops.parents.map(|p| p.map(|node| node.id));
        let dloss = dense(&grads.consume::<Flex>(&ops.node));
        let s = ops.state;
        let n = s.targets.len();
        let scale = slice(&dloss)[0] / n.max(1) as f32;
        let (hm, wm) = (matrix(&s.h), matrix(&s.w));
        let (dh, dw, db) = xent::backward(scale, hm, wm, &s.targets, s.tape);
        register(grads, h, dh, &[hm.rows, hm.cols]);
        register(grads, w, dw, &[wm.rows, wm.cols]);
        register(grads, b, db, &[wm.cols]);
    }
}

#[derive(Debug)]
struct SampledBackward;

#[derive(Clone)]
struct SampledState {
    h: FlexTensor,
    vocab: usize,
    targets: Vec<u32>,
    negatives: Negatives,
    tape: sampled::Tape,
}

impl Backward<Flex, 3> for SampledBackward {
    type State = SampledState;

    fn backward(self, ops: Ops<SampledState, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [h, w, b] = ops.parents.map(|p| p.map(|node| node.id));
        let dloss = dense(&grads.consume::<Flex>(&ops.node));
        let s = ops.state;
        let scale = slice(&dloss)[0] / s.targets.len().max(1) as f32;
        let hm = matrix(&s.h);
        let (dh, dw, db) = sampled::backward(scale, hm, s.vocab, &s.targets, &s.negatives, s.tape);
        register(grads, h, dh, &[hm.rows, hm.cols]);
        register(grads, w, dw, &[hm.cols, s.vocab]);
        register(grads, b, db, &[s.vocab]);
    }
}

// Tapes hold megabytes: print their shapes, not their values.
macro_rules! debug_as_shapes {
    ($($ty:ty),*) => {$(
        impl std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(stringify!($ty))
            }
        }
    )*};
}
debug_as_shapes!(LstmState, GruState, XentState, SampledState);

// ---- flex primitives ↔ slices --------------------------------------------------------------

fn register(grads: &mut Gradients, parent: Option<NodeId>, values: Vec<f32>, shape: &[usize]) {
    if let Some(id) = parent {
        grads.register::<Flex>(id, tensor(values, shape));
    }
}

fn tensor(values: Vec<f32>, shape: &[usize]) -> FlexTensor {
    FlexTensor::from_data(TensorData::new(values, shape.to_vec()))
}

/// `t` with its values contiguous from offset 0 (a cheap clone when they already are).
fn dense(t: &FlexTensor) -> FlexTensor {
    assert_eq!(
        t.dtype(),
        DType::F32,
        "the fused ops train in f32; this tensor is {:?}",
        t.dtype()
    );
    if t.as_slice::<f32>().is_some() {
        t.clone()
    } else {
        t.to_contiguous()
    }
}

fn slice(t: &FlexTensor) -> &[f32] {
    t.as_slice::<f32>().expect("dense tensor")
}

/// A 2-D tensor as a strided matrix view (transposed views included, no copy).
fn matrix(t: &FlexTensor) -> MatRef<'_> {
    assert_eq!(t.dtype(), DType::F32, "the fused ops train in f32");
    let layout = t.layout();
    let shape = layout.shape();
    assert_eq!(
        shape.num_dims(),
        2,
        "expected a matrix, got shape {shape:?}"
    );
    let strides = layout.strides();
    assert!(
        strides.iter().all(|&s| s >= 0),
        "negative strides are not supported here"
    );
    MatRef {
        data: t.storage::<f32>(),
        offset: layout.start_offset(),
        rows: shape[0],
        cols: shape[1],
        rs: strides[0] as usize,
        cs: strides[1] as usize,
    }
}

fn window(xp: &FlexTensor, h0: &FlexTensor) -> Window {
    let (x, h) = (xp.layout().shape(), h0.layout().shape());
    assert!(
        x.num_dims() == 3 && h.num_dims() == 2,
        "xp must be [batch, time, gates·hidden] and h0 [batch, hidden]"
    );
    Window {
        batch: x[0],
        time: x[1],
        hidden: h[1],
    }
}

fn ids(targets: &FlexTensor) -> Vec<u32> {
    targets
        .clone()
        .into_data()
        .iter::<i64>()
        .map(|y| u32::try_from(y).unwrap_or_else(|_| panic!("target id {y} is not a word id")))
        .collect()
}
