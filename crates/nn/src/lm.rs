//! LSTM / GRU language models on burn: embedding → `n_layers` recurrent layers → linear output.
//!
//! The recurrent layers are written here rather than taken from `burn::nn::Lstm`: all gates
//! live in one `[d_in, G*d_hidden]` matrix, so the input projection of a whole window is one
//! matrix product and each time step is one more. That is 4× fewer kernel launches per step
//! than burn's per-gate layers, and the same layout as the engine's (PyTorch's), so export is a
//! transpose.
//!
//! Every computation exists twice: composed of burn ops (any backend; the reference) and as the
//! fused ops of [`crate::fused`] (flex; hand-written backward, several times faster). [`Ops`]
//! picks one; the default picks the fused ops wherever they run.

use burn::module::{Module, Param};
use burn::nn::{
    Dropout, DropoutConfig, Embedding, EmbeddingConfig, Initializer, Linear, LinearConfig,
};
use burn::tensor::activation::{log_softmax, sigmoid};
use burn::tensor::{Device, Int, Tensor, TensorData};
use fastsoftmax_infer::model::artifact::Cell;

use crate::config::LmConfig;

/// Recurrent state of every layer: `h` (and `c` for LSTM), each `[batch, d_hidden]`.
#[derive(Debug, Clone)]
pub struct LmState {
    pub h: Vec<Tensor<2>>,
    pub c: Vec<Tensor<2>>,
}

impl LmState {
    /// Cuts the autodiff graph between truncated-BPTT windows.
    pub fn detach(self) -> Self {
        LmState {
            h: self.h.into_iter().map(Tensor::detach).collect(),
            c: self.c.into_iter().map(Tensor::detach).collect(),
        }
    }
}

/// Which implementation runs the recurrent layers and the loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ops {
    /// burn ops only: runs on every backend.
    Composed,
    /// [`crate::fused`]: whole-window ops and the output layer's loss with hand-written
    /// backwards (flex, and the cubecl devices with the cargo feature `wgpu`).
    Fused,
}

impl Ops {
    /// The fused ops where they run, the composed ones elsewhere.
    pub fn for_device(device: &Device) -> Ops {
        if crate::fused::available(device) {
            Ops::Fused
        } else {
            Ops::Composed
        }
    }
}

/// One recurrent layer with fused gates (LSTM order i,f,g,o; GRU order r,z,n).
#[derive(Module, Debug)]
pub struct RecurrentLayer {
    /// weight [d_in, G*d_hidden], bias [G*d_hidden]
    pub w_ih: Linear,
    /// weight [d_hidden, G*d_hidden], bias [G*d_hidden]
    pub w_hh: Linear,
    #[module(skip)]
    pub cell: Cell,
    pub d_hidden: usize,
}

impl RecurrentLayer {
    pub(crate) fn new(
        cell: Cell,
        d_in: usize,
        d_hidden: usize,
        init: &Initializer,
        device: &Device,
    ) -> Self {
        let g = cell.gates() * d_hidden;
        let lin = |d| {
            LinearConfig::new(d, g)
                .with_initializer(init.clone())
                .init(device)
        };
        RecurrentLayer {
            w_ih: lin(d_in),
            w_hh: lin(d_hidden),
            cell,
            d_hidden,
        }
    }

    /// x: [batch, time, d_in] → outputs [batch, time, d_hidden]; updates `h` (and `c`).
    pub fn forward(
        &self,
        x: Tensor<3>,
        h: &mut Tensor<2>,
        c: &mut Tensor<2>,
        ops: Ops,
    ) -> Tensor<3> {
        match ops {
            Ops::Fused if crate::fused::window_fits(&x.device(), self.cell, self.d_hidden) => {
                self.forward_fused(x, h, c)
            }
            _ => self.forward_composed(x, h, c),
        }
    }

    /// [`RecurrentLayer::forward`] as one fused op per window.
    fn forward_fused(&self, x: Tensor<3>, h: &mut Tensor<2>, c: &mut Tensor<2>) -> Tensor<3> {
        // As one [B·T, d_in] matrix: burn's Linear on a 3-D input multiplies batch by batch and
        // its weight gradient is then a [B, d_in, G·H] tensor summed over B.
        let [batch, time, d_in] = x.dims();
        let g = self.cell.gates() * self.d_hidden;
        let xp = self
            .w_ih
            .forward(x.reshape([batch * time, d_in]))
            .reshape([batch, time, g]);
        let (w_hh, b_hh) = weight_and_bias(&self.w_hh);
        match self.cell {
            Cell::Lstm => {
                let (hs, h_last, c_last) =
                    crate::fused::lstm_window(xp, w_hh, b_hh, h.clone(), c.clone());
                (*h, *c) = (h_last, c_last);
                hs
            }
            Cell::Gru => {
                let (hs, h_last) = crate::fused::gru_window(xp, w_hh, b_hh, h.clone());
                *h = h_last;
                hs
            }
        }
    }

    /// [`RecurrentLayer::forward`] composed of burn ops, one time step after the other.
    fn forward_composed(&self, x: Tensor<3>, h: &mut Tensor<2>, c: &mut Tensor<2>) -> Tensor<3> {
        let [batch, time, _] = x.dims();
        let g = self.cell.gates() * self.d_hidden;
        // [batch, time, G*d_hidden]: the input half of every gate, for the whole window at once.
        let xp = self.w_ih.forward(x);
        let mut outs = Vec::with_capacity(time);
        for t in 0..time {
            let xt = xp
                .clone()
                .slice([0..batch, t..t + 1, 0..g])
                .reshape([batch, g]);
            self.step(xt, h, c);
            outs.push(h.clone());
        }
        Tensor::stack(outs, 1)
    }

    /// One time step composed of burn ops: `xt [batch, G*d_hidden]` is the input projection
    /// (with its bias); updates `h` (and `c` for LSTM).
    pub fn step(&self, xt: Tensor<2>, h: &mut Tensor<2>, c: &mut Tensor<2>) {
        let hp = self.w_hh.forward(h.clone());
        *h = match self.cell {
            Cell::Lstm => {
                let gates = (xt + hp).chunk(4, 1);
                let [i, f, gg, o] = <[Tensor<2>; 4]>::try_from(gates).expect("4 gates");
                *c = sigmoid(f) * c.clone() + sigmoid(i) * gg.tanh();
                sigmoid(o) * c.clone().tanh()
            }
            Cell::Gru => {
                let [xr, xz, xn] = <[Tensor<2>; 3]>::try_from(xt.chunk(3, 1)).expect("3 gates");
                let [hr, hz, hn] = <[Tensor<2>; 3]>::try_from(hp.chunk(3, 1)).expect("3 gates");
                let r = sigmoid(xr + hr);
                let z = sigmoid(xz + hz);
                let n = (xn + r * hn).tanh();
                // h' = (1 - z) * n + z * h = n + z * (h - n)
                n.clone() + z * (h.clone() - n)
            }
        };
    }
}

/// The language model trained by `train-lm`.
#[derive(Module, Debug)]
pub struct LanguageModel {
    /// weight [vocab, d_embed], or `A` [vocab, r] when factorised
    pub embedding: Embedding,
    /// `B` [r, d_embed] of a factorised embedding `A · B` (`model.factor_rank`).
    pub embedding_factor: Option<Param<Tensor<2>>>,
    pub layers: Vec<RecurrentLayer>,
    /// weight [d_hidden, vocab]; `None` when tied to the embedding.
    pub output: Option<Linear>,
    /// [vocab]; used only when tied.
    pub tied_bias: Option<Param<Tensor<1>>>,
    pub dropout: Dropout,
    #[module(skip)]
    pub cell: Cell,
    pub d_hidden: usize,
}

impl LmConfig {
    /// Builds a freshly initialised model for a vocabulary of `vocab_size` words.
    pub fn init(&self, vocab_size: usize, device: &Device) -> LanguageModel {
        let r = self.init_range;
        let init = Initializer::Uniform { min: -r, max: r };
        let layers = (0..self.n_layers)
            .map(|l| {
                let d_in = if l == 0 { self.d_embed } else { self.d_hidden };
                RecurrentLayer::new(self.cell, d_in, self.d_hidden, &init, device)
            })
            .collect();
        let (output, tied_bias) = if self.tied {
            let b = Tensor::<1>::zeros([vocab_size], device);
            (None, Some(Param::from_tensor(b)))
        } else {
            let out = LinearConfig::new(self.d_hidden, vocab_size)
                .with_initializer(init.clone())
                .init(device);
            (Some(out), None)
        };
        // A · B starts with the spread of a plain embedding: B ~ U(±√(3/r)).
        let (d_rows, embedding_factor) = match self.factor_rank {
            Some(rank) => {
                let s = (3.0 / rank as f64).sqrt();
                let b = Initializer::Uniform { min: -s, max: s }.init([rank, self.d_embed], device);
                (rank, Some(b))
            }
            None => (self.d_embed, None),
        };
        LanguageModel {
            embedding: EmbeddingConfig::new(vocab_size, d_rows)
                .with_initializer(init)
                .init(device),
            embedding_factor,
            layers,
            output,
            tied_bias,
            dropout: DropoutConfig::new(self.dropout).init(),
            cell: self.cell,
            d_hidden: self.d_hidden,
        }
    }
}

impl LanguageModel {
    pub fn vocab_size(&self) -> usize {
        self.embedding.weight.dims()[0]
    }

    /// Zero state for `batch` streams.
    pub fn initial_state(&self, batch: usize, device: &Device) -> LmState {
        let z = || Tensor::<2>::zeros([batch, self.d_hidden], device);
        LmState {
            h: self.layers.iter().map(|_| z()).collect(),
            c: self.layers.iter().map(|_| z()).collect(),
        }
    }

    /// tokens: [batch, time] → (last layer's outputs [batch, time, d_hidden], new state).
    pub fn hidden(&self, tokens: Tensor<2, Int>, state: LmState) -> (Tensor<3>, LmState) {
        let ops = Ops::for_device(&tokens.device());
        self.hidden_with(tokens, state, ops)
    }

    /// [`LanguageModel::hidden`] with the implementation chosen by the caller.
    pub fn hidden_with(
        &self,
        tokens: Tensor<2, Int>,
        mut state: LmState,
        ops: Ops,
    ) -> (Tensor<3>, LmState) {
        let mut x = crate::fused::embed(&self.embedding, tokens);
        if let Some(b) = &self.embedding_factor {
            let [n, t, r] = x.dims();
            let d = b.dims()[1];
            x = x.reshape([n * t, r]).matmul(b.val()).reshape([n, t, d]);
        }
        let mut x = self.dropout.forward(x);
        for (l, layer) in self.layers.iter().enumerate() {
            x = self
                .dropout
                .forward(layer.forward(x, &mut state.h[l], &mut state.c[l], ops));
        }
        (x, state)
    }

    /// h: [n, d_hidden] → logits [n, vocab].
    pub fn logits(&self, h: Tensor<2>) -> Tensor<2> {
        let (w, b) = self.output_layer();
        h.matmul(w) + b.unsqueeze_dim(0)
    }

    /// The output layer: weight [d_hidden, vocab] (the embedding's transpose when tied), bias [vocab].
    pub fn output_layer(&self) -> (Tensor<2>, Tensor<1>) {
        match (&self.output, &self.tied_bias) {
            (Some(out), _) => weight_and_bias(out),
            (None, Some(b)) => (self.embedding_matrix().transpose(), b.val()),
            (None, None) => unreachable!("a model has an output layer or a tied bias"),
        }
    }

    /// The word embeddings [vocab, d_embed] (`A · B` when factorised).
    pub fn embedding_matrix(&self) -> Tensor<2> {
        let a = self.embedding.weight.val();
        match &self.embedding_factor {
            Some(b) => a.matmul(b.val()),
            None => a,
        }
    }

    /// Mean `log Z` of the output layer over the contexts after `tokens` ([batch, time] ids, from
    /// the zero state), in chunks of 256 rows.
    pub fn mean_log_z(&self, tokens: Tensor<2, Int>) -> f64 {
        let [batch, time] = tokens.dims();
        let state = self.initial_state(batch, &tokens.device());
        let (h, _) = self.hidden(tokens, state);
        let n = batch * time;
        let h = h.reshape([n, self.d_hidden]).detach();
        // Detached, so that no autodiff graph reaches the parameters.
        let (w, b) = self.output_layer();
        let (w, b) = (w.detach(), b.detach().unsqueeze_dim(0));
        let mut sum = 0.0f64;
        for start in (0..n).step_by(256) {
            let rows = h
                .clone()
                .slice([start..(start + 256).min(n), 0..self.d_hidden]);
            let logits = rows.matmul(w.clone()) + b.clone();
            let logp = log_softmax(logits.clone(), 1);
            sum += log_z(logits, logp).sum().into_scalar::<f32>() as f64;
        }
        sum / n.max(1) as f64
    }

    /// Adds `delta` to every output bias (the softmax is unchanged; `log Z` moves by `delta`).
    pub fn shift_output_bias(mut self, delta: f32) -> Self {
        // A new leaf (detached, then tracked again if it was): the shift is not part of any
        // graph the training step differentiates.
        let shift = |t: Tensor<1>| {
            let tracked = t.is_require_grad();
            let t = t.add_scalar(delta).detach();
            if tracked {
                t.require_grad()
            } else {
                t
            }
        };
        if let Some(b) = self.tied_bias.take() {
            self.tied_bias = Some(b.map(shift));
        }
        if let Some(mut out) = self.output.take() {
            out.bias = out.bias.map(|b| b.map(shift));
            self.output = Some(out);
        }
        self
    }

    /// Mean negative log-likelihood of `targets` ([batch, time] ids) after `tokens`, and the new state.
    pub fn loss(
        &self,
        tokens: Tensor<2, Int>,
        targets: Tensor<2, Int>,
        state: LmState,
    ) -> (Tensor<1>, LmState) {
        self.loss_self_normalised(tokens, targets, state, 0.0)
    }

    /// [`LanguageModel::loss`] with the implementation chosen by the caller.
    pub fn loss_with(
        &self,
        tokens: Tensor<2, Int>,
        targets: Tensor<2, Int>,
        state: LmState,
        ops: Ops,
    ) -> (Tensor<1>, LmState) {
        self.loss_with_norm(tokens, targets, state, ops, 0.0)
    }

    /// [`LanguageModel::loss_with`] plus `alpha · mean(log Z)²` (0: none).
    pub fn loss_with_norm(
        &self,
        tokens: Tensor<2, Int>,
        targets: Tensor<2, Int>,
        state: LmState,
        ops: Ops,
        alpha: f32,
    ) -> (Tensor<1>, LmState) {
        let [batch, time] = tokens.dims();
        let n = batch * time;
        let (h, state) = self.hidden_with(tokens, state, ops);
        let h = h.reshape([n, self.d_hidden]);
        let targets = targets.reshape([n]);
        let loss = match ops {
            Ops::Fused => {
                let (w, b) = self.output_layer();
                crate::fused::self_normalised_cross_entropy(h, w, b, targets, alpha)
            }
            Ops::Composed => {
                let logits = self.logits(h);
                let logp = log_softmax(logits.clone(), 1);
                let picked = logp.clone().gather(1, targets.reshape([n, 1]));
                let ce = picked.mean().neg();
                if alpha == 0.0 {
                    ce
                } else {
                    ce + log_z(logits, logp)
                        .powf_scalar(2.0)
                        .mean()
                        .mul_scalar(alpha)
                }
            }
        };
        (loss, state)
    }

    /// [`LanguageModel::loss`] plus `alpha · mean(log Z)²` over the positions (self-normalisation
    /// training; the reported loss includes the term).
    pub fn loss_self_normalised(
        &self,
        tokens: Tensor<2, Int>,
        targets: Tensor<2, Int>,
        state: LmState,
        alpha: f32,
    ) -> (Tensor<1>, LmState) {
        let ops = Ops::for_device(&tokens.device());
        self.loss_with_norm(tokens, targets, state, ops, alpha)
    }

    /// [`LanguageModel::loss`] with the sampled softmax of [`crate::fused::sampled`] in place of
    /// the full one (training only; see [`sampled_cross_entropy`]).
    pub fn loss_sampled(
        &self,
        tokens: Tensor<2, Int>,
        targets: Tensor<2, Int>,
        state: LmState,
        negatives: &crate::fused::Negatives,
    ) -> (Tensor<1>, LmState) {
        let [batch, time] = tokens.dims();
        let ops = Ops::for_device(&tokens.device());
        let (h, state) = self.hidden_with(tokens, state, ops);
        let (w, b) = self.output_layer();
        let loss = sampled_cross_entropy(
            h.reshape([batch * time, self.d_hidden]),
            w,
            b,
            targets.reshape([batch * time]),
            negatives,
        );
        (loss, state)
    }
}

/// The sampled softmax loss (see [`crate::fused::sampled`]): the fused op where it runs
/// ([`crate::fused::samples_fused`]: flex, and the cubecl devices that add f32 atomically), the
/// composition [`sampled_cross_entropy_composed`] elsewhere. `h [N, H]`, `w [H, V]`, `b [V]`,
/// `targets [N]` → `[1]`.
pub fn sampled_cross_entropy(
    h: Tensor<2>,
    w: Tensor<2>,
    b: Tensor<1>,
    targets: Tensor<1, Int>,
    negatives: &crate::fused::Negatives,
) -> Tensor<1> {
    if crate::fused::samples_fused(&h.device()) {
        crate::fused::sampled_softmax_cross_entropy(h, w, b, targets, negatives)
    } else {
        sampled_cross_entropy_composed(h, w, b, targets, negatives)
    }
}

/// [`sampled_cross_entropy`] composed of burn ops, differentiated by burn: row n's loss is
/// `logsumexp(z_t, z_1 … z_S) − z_t` with every logit corrected by `− log E[count]`, and a
/// sampled word equal to the row's target left out of that row. The correction of every word is
/// computed on the host from the ids alone, so nothing is read back from the device.
pub fn sampled_cross_entropy_composed(
    h: Tensor<2>,
    w: Tensor<2>,
    b: Tensor<1>,
    targets: Tensor<1, Int>,
    negatives: &crate::fused::Negatives,
) -> Tensor<1> {
    use crate::fused::select;
    let device = h.device();
    let [n, _] = h.dims();
    let vocab = w.dims()[1];
    let s = negatives.ids.len();
    let log_e = negatives.log_expected_all();
    // b − log E, per word [V].
    let offset = b - Tensor::<1>::from_data(TensorData::new(log_e, [vocab]), &device);
    let ids: Vec<i64> = negatives.ids.iter().map(|&j| j as i64).collect();
    let neg = Tensor::<1, Int>::from_data(TensorData::new(ids, [s]), &device);
    // [N, S]: the sampled logits, an accidental hit pushed out of its row's softmax.
    let z_neg = h.clone().matmul(select(w.clone(), 1, neg.clone()))
        + select(offset.clone(), 0, neg.clone()).unsqueeze_dim(0);
    let hits = targets
        .clone()
        .reshape([n, 1])
        .expand([n, s])
        .equal(neg.reshape([1, s]).expand([n, s]));
    let z_neg = z_neg.mask_fill(hits, -1.0e9);
    // [N, 1]: the target's logit.
    let z_t = (h * select(w, 1, targets.clone()).transpose()).sum_dim(1)
        + select(offset, 0, targets).unsqueeze_dim(1);
    let logp = log_softmax(Tensor::cat(vec![z_t, z_neg], 1), 1);
    logp.slice([0..n, 0..1]).mean().neg()
}

/// `log Z` of each row `[n, 1]` from its logits and log-softmax `[n, V]`: logit − log p, in any
/// column.
fn log_z(logits: Tensor<2>, logp: Tensor<2>) -> Tensor<2> {
    let n = logits.dims()[0];
    logits.slice([0..n, 0..1]) - logp.slice([0..n, 0..1])
}

/// A linear layer's weight `[d_in, d_out]` and bias `[d_out]` (zeros when it has none).
pub(crate) fn weight_and_bias(layer: &Linear) -> (Tensor<2>, Tensor<1>) {
    let w = layer.weight.val();
    let b = match &layer.bias {
        Some(b) => b.val(),
        None => Tensor::zeros([w.dims()[1]], &w.device()),
    };
    (w, b)
}

/// Ids `[batch, time]` row-major as an int tensor on `device`.
pub fn ids_tensor(ids: &[u32], batch: usize, time: usize, device: &Device) -> Tensor<2, Int> {
    let data: Vec<i64> = ids.iter().map(|&i| i as i64).collect();
    Tensor::from_data(TensorData::new(data, [batch, time]), device)
}
