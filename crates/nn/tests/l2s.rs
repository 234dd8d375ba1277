//! L2S training: the knapsack respects the budget, the Gumbel straight-through estimator
//! reaches the cluster vectors, and on a clustered fixture the trained head is exact at a
//! fraction of the full softmax's dot products.

use burn::optim::GradientsParams;
use burn::tensor::{Device, Tensor, TensorData};
use fastsoftmax_infer::kernels::seeded_values as values;
use fastsoftmax_infer::{FullHead, SoftmaxHead};
use fastsoftmax_nn::l2s::{
    gumbel_loss, knapsack, train_l2s, L2sConfig, Labeled, Screener, StepBatch,
};

/// `groups` topics in `d` dimensions; word `s` belongs to topic `s % groups` and its output
/// row points along that topic's axis; each context is a noisy topic axis. So the top-5 of a
/// context come from its topic's words, and 5 contexts of a topic rarely share all five.
fn fixture(vocab: usize, d: usize, groups: usize, n: usize, seed: u64) -> (FullHead, Vec<f32>) {
    let noise = values(vocab * d, seed);
    let w: Vec<f32> = (0..vocab * d)
        .map(|i| {
            let (s, j) = (i / d, i % d);
            (if j == s % groups { 3.0 } else { 0.0 }) + 0.5 * noise[i]
        })
        .collect();
    let full = FullHead::new(&w, &vec![0.0; vocab], d).unwrap();
    let hn = values(n * d, seed + 1);
    let topic = values(n, seed + 2);
    let hs: Vec<f32> = (0..n * d)
        .map(|i| {
            let (c, j) = (i / d, i % d);
            let g = ((topic[c] + 1.0) * 0.5 * groups as f32) as usize % groups;
            (if j == g { 2.0 } else { 0.0 }) + 0.3 * hn[i]
        })
        .collect();
    (full, hs)
}

#[test]
fn knapsack_never_exceeds_the_budget() {
    let (full, hs) = fixture(300, 12, 6, 2000, 1);
    let data = Labeled::new(&full, hs, 5);
    let r = 7;
    // An arbitrary, uneven assignment.
    let z: Vec<u32> = (0..data.len() as u32)
        .map(|i| (i * i + 3 * i) % r)
        .collect();
    for budget in [5.0, 12.5, 40.0, 77.7, 300.0] {
        let sets = knapsack(&z, &data, r as usize, 300, budget, 0.0003);
        let mut share = vec![0usize; r as usize];
        for &t in &z {
            share[t as usize] += 1;
        }
        let load: f64 = sets
            .iter()
            .zip(&share)
            .map(|(s, &n)| s.len() as f64 * n as f64 / z.len() as f64)
            .sum();
        assert!(load <= budget + 1e-9, "L̄ {load} > budget {budget}");
        for s in &sets {
            assert!(
                s.windows(2).all(|w| w[0] < w[1]),
                "ids ascending, no repeats"
            );
            assert!(s.iter().all(|&id| id < 300));
        }
        // A generous budget is used: at least half of it, unless every useful item fits.
        assert!(
            load >= budget.min(20.0) * 0.5,
            "budget {budget} barely used: {load}"
        );
    }
}

#[test]
fn gumbel_straight_through_reaches_the_cluster_vectors() {
    let device = Device::flex().autodiff();
    let (b, r, d) = (16, 4, 8);
    let cfg = L2sConfig::default();
    let model = Screener::new(&values(r * d, 3), r, d, &device);
    let t =
        |v: Vec<f32>, shape: [usize; 2]| Tensor::<2>::from_data(TensorData::new(v, shape), &device);
    // Cluster t costs t per context: the gradient must push contexts towards cluster 0.
    let cost: Vec<f32> = (0..b * r).map(|i| (i % r) as f32).collect();
    let batch = StepBatch {
        h: t(values(b * d, 4), [b, d]),
        cost: t(cost, [b, r]),
        sizes: t(vec![10.0; r], [1, r]),
        noise: t(values(b * r, 5).iter().map(|x| x * 0.1).collect(), [b, r]),
    };
    let (loss, _) = gumbel_loss(&model, batch, &cfg, 0.0);
    let grads = GradientsParams::from_grads(loss.backward(), &model);
    let g: Tensor<2> = grads.get(model.v.id).expect("v has a gradient");
    let g: Vec<f32> = g.into_data().try_to_vec::<f32>().unwrap();
    assert_eq!(g.len(), r * d);
    assert!(g.iter().all(|x| x.is_finite()));
    let norm: f32 = g.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!(norm > 1e-4, "gradient norm {norm}");
}

#[test]
fn trained_head_is_exact_on_a_clustered_fixture_with_5x_fewer_products() {
    let (vocab, d, groups) = (800, 16, 8);
    let (full, train_h) = fixture(vocab, d, groups, 4000, 11);
    let (_, test_h) = fixture(vocab, d, groups, 500, 11);
    // Same output layer (same seed), fresh contexts for validation and test.
    let (_, valid_h) = {
        let (f, h) = fixture(vocab, d, groups, 1000, 11);
        (f, h.iter().rev().copied().collect::<Vec<f32>>())
    };
    let train = Labeled::new(&full, train_h, 5);
    let valid = Labeled::new(&full, valid_h, 5);
    let cfg = L2sConfig {
        clusters: 8,
        budget: 100.0,
        rounds: 2,
        batch_size: 64,
        ..L2sConfig::default()
    };
    let device = Device::flex().autodiff();
    let (head, report) =
        train_l2s("l2s", &full, &train, &valid, &cfg, &device, &mut |_| {}).unwrap();
    assert_eq!(report.rounds.len(), 3);
    let (mut hits, mut cost) = (0usize, 0usize);
    let n = test_h.len() / d;
    for h in test_h.chunks(d) {
        let want = full.top_k(h, 1).unwrap()[0].id;
        hits += (head.top_k(h, 1).unwrap()[0].id == want) as usize;
        cost += head.cost(h);
    }
    assert_eq!(hits, n, "P@1 = {}", hits as f64 / n as f64);
    let ratio = vocab as f64 / (cost as f64 / n as f64);
    assert!(ratio >= 5.0, "only {ratio:.2}× fewer dot products");
}
