//! PCA-MIPS (Bachrach et al., 2014), a baseline of the L2S paper: reduce MIPS to nearest-
//! neighbour search ([`Augmented`]: rows `[w_i, b_i, sqrt(φ² − ‖x_i‖²)]` on a sphere, query
//! `[h, 1, 0]`), then search a PCA tree over the rows. Named `pca-dD`.
//!
//! [`PcaIndex`] takes the principal directions `v_0, v_1, …` of the centred rows (one
//! eigen-decomposition of their `[d + 2, d + 2]` covariance) and splits the rows recursively:
//! every node at level `l` splits its rows at the median of their projections onto `v_l`, the
//! lower half to the left. It is built once to the greatest depth whose leaves still hold a
//! word (`⌊log₂ vocab⌋`, at most `d + 2`), and a head descends only `D` levels, so a depth sweep
//! shares one index. A query goes down one path, comparing its projection onto `v_l` with the
//! node's split, and gets exact logits for the words of the node it reaches (about
//! `vocab / 2^D` of them). A node with fewer than `k` words is widened to its parent, then the
//! grandparent, and so on, until it holds `k`. `D = 0` is the root, the exact full softmax.
//!
//! Every positive multiple of the query has the same nearest rows but not the same path down
//! the tree, which compares projections with fixed split values. The query descends as it is,
//! `[h, 1, 0]`, as in Bachrach et al. (On the PTB model's contexts, scaling it onto the rows'
//! sphere, `‖q‖ = φ`, changed P@1 by a few points either way: 0.68 instead of 0.71 at `D = 2`,
//! 0.14 instead of 0.12 at `D = 5`.)
//!
//! Cost per query, in length-`d` dot products: `D (d + 1)/d` (projections of `[h, 1]`; the
//! lift coordinate meets the query's 0) + the words of the node reached, against `vocab` for
//! the full softmax. The node depends on `k` (widening), so
//! [`SoftmaxHead::cost`] reports a top-[`K_MAX`] query, the `k` the benchmarks run, and
//! [`PcaHead::cost_k`] any other.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::head::SoftmaxHead;
use crate::heads::full::FullHead;
use crate::heads::lowrank::symmetric_eigen;
use crate::heads::mips::Augmented;
use crate::kernels::dot;
use crate::kernels::rows::ExactRows;
use crate::topk::TopK;
use crate::topk::K_MAX;

/// A PCA tree over the augmented output layer, built once to its maximum depth and shared
/// (through `Arc`) by heads of any depth.
#[derive(Debug, Clone, PartialEq)]
pub struct PcaIndex {
    d: usize,
    max_depth: usize,
    /// `[max_depth, d + 1]`: principal direction `v_l` (by decreasing variance) on the query's
    /// coordinates `[h, 1]`.
    directions: Vec<f32>,
    /// `[2^max_depth − 1]`: split value of each inner node; node `n` has children `2n + 1`
    /// (projections below the split) and `2n + 2`.
    splits: Vec<f32>,
    /// `[2^(max_depth + 1) − 1]`: each node's words, as the range `start..end` of tree order.
    ranges: Vec<(u32, u32)>,
    /// `[vocab]`: word id at each position of tree order.
    ids: Vec<u32>,
    /// The output layer's rows in tree order, so a node's rows are contiguous.
    exact: ExactRows,
}

impl PcaIndex {
    /// The PCA tree of `full`'s output layer, to depth `⌊log₂ vocab⌋` (at most `d + 2`).
    pub fn new(full: &FullHead) -> Self {
        let (d, vocab) = (full.dim(), full.vocab_size());
        let aug = Augmented::new(full);
        let dim = aug.dim;
        let max_depth = (vocab.ilog2() as usize).min(dim);

        // Principal directions of the centred rows.
        let mut mean = vec![0.0f64; dim];
        for i in 0..vocab {
            for (m, &x) in mean.iter_mut().zip(aug.row(i)) {
                *m += x as f64;
            }
        }
        mean.iter_mut().for_each(|m| *m /= vocab as f64);
        let mut cov = vec![0.0f64; dim * dim];
        let mut c = vec![0.0f64; dim];
        for i in 0..vocab {
            for ((c, &x), m) in c.iter_mut().zip(aug.row(i)).zip(&mean) {
                *c = x as f64 - m;
            }
            for a in 0..dim {
                let ca = c[a];
                for (cov, &cb) in cov[a * dim + a..(a + 1) * dim].iter_mut().zip(&c[a..]) {
                    *cov += ca * cb;
                }
            }
        }
        for a in 0..dim {
            for b in 0..a {
                cov[a * dim + b] = cov[b * dim + a];
            }
        }
        let (values, vectors) = symmetric_eigen(cov, dim);
        let mut order: Vec<usize> = (0..dim).collect();
        order.sort_by(|&a, &b| values[b].total_cmp(&values[a]));
        let full_directions: Vec<f32> = order[..max_depth]
            .iter()
            .flat_map(|&col| {
                let v: Vec<f64> = (0..dim).map(|j| vectors[j * dim + col]).collect();
                // A fixed sign: the largest component positive.
                let big = v
                    .iter()
                    .copied()
                    .fold(0.0f64, |a, x| if x.abs() > a.abs() { x } else { a });
                v.into_iter().map(move |x| (x * big.signum()) as f32)
            })
            .collect();

        // Median splits, level by level, sorting each node's range of tree order in place.
        let proj = |l: usize, i: u32| {
            dot(
                aug.row(i as usize),
                &full_directions[l * dim..(l + 1) * dim],
            )
        };
        let mut tree_order: Vec<u32> = (0..vocab as u32).collect();
        let mut ranges = vec![(0u32, vocab as u32)];
        let mut splits = Vec::with_capacity((1 << max_depth) - 1);
        for l in 0..max_depth {
            for node in (1 << l) - 1..(1 << (l + 1)) - 1 {
                let (s, e) = ranges[node];
                let slice = &mut tree_order[s as usize..e as usize];
                let mut keyed: Vec<(f32, u32)> = slice.iter().map(|&i| (proj(l, i), i)).collect();
                keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                for (o, &(_, i)) in slice.iter_mut().zip(&keyed) {
                    *o = i;
                }
                // Each node at a level above max_depth holds at least 2 words.
                let mid = keyed.len() / 2;
                splits.push(0.5 * (keyed[mid - 1].0 + keyed[mid].0));
                ranges.push((s, s + mid as u32));
                ranges.push((s + mid as u32, e));
            }
        }
        PcaIndex {
            d,
            max_depth,
            directions: full_directions
                .chunks_exact(dim)
                .flat_map(|v| v[..d + 1].to_vec())
                .collect(),
            splits,
            ranges,
            exact: ExactRows::new(full.matrix(), Some(&tree_order)),
            ids: tree_order,
        }
    }

    pub fn dim(&self) -> usize {
        self.d
    }

    pub fn vocab_size(&self) -> usize {
        self.ids.len()
    }

    /// The deepest level a head may descend to.
    pub fn max_depth(&self) -> usize {
        self.max_depth
    }

    /// The node a query reaches after `depth` levels, widened until it holds `k` words.
    fn descend(&self, h: &[f32], depth: usize, k: usize) -> usize {
        let d = self.d;
        debug_assert_eq!(h.len(), d);
        let mut node = 0;
        for v in self.directions.chunks_exact(d + 1).take(depth) {
            let p = dot(h, &v[..d]) + v[d];
            node = 2 * node + if p < self.splits[node] { 1 } else { 2 };
        }
        while node > 0 && self.len(node) < k {
            node = (node - 1) / 2;
        }
        node
    }

    fn len(&self, node: usize) -> usize {
        let (s, e) = self.ranges[node];
        (e - s) as usize
    }
}

/// PCA-MIPS descending `D` levels of a shared [`PcaIndex`].
#[derive(Debug, Clone)]
pub struct PcaHead {
    name: String,
    index: Arc<PcaIndex>,
    depth: usize,
}

impl PcaHead {
    /// The head that descends `depth` (`0..=index.max_depth()`) levels.
    pub fn new(index: Arc<PcaIndex>, depth: usize) -> Result<Self> {
        let max = index.max_depth;
        if depth > max {
            return Err(Error::Invalid(format!(
                "pca: depth D = {depth} is out of range: choose 0 ≤ D ≤ {max} (a query scores \
                 about {} / 2^D words; D = 0 is the exact full softmax, deeper is faster)",
                index.vocab_size()
            )));
        }
        Ok(PcaHead {
            name: format!("pca-d{depth}"),
            index,
            depth,
        })
    }

    /// `D` if `name` is `pca-dD`.
    pub fn parse_name(name: &str) -> Option<usize> {
        name.strip_prefix("pca-d")?.parse().ok()
    }

    pub fn depth(&self) -> usize {
        self.depth
    }

    pub fn index(&self) -> &Arc<PcaIndex> {
        &self.index
    }
}

impl SoftmaxHead for PcaHead {
    fn name(&self) -> &str {
        &self.name
    }
    fn dim(&self) -> usize {
        self.index.d
    }
    fn vocab_size(&self) -> usize {
        self.index.vocab_size()
    }

    fn top_k_into(&self, h: &[f32], k: usize, out: &mut TopK) {
        let ix = &*self.index;
        let (s, e) = ix.ranges[ix.descend(h, self.depth, k)];
        out.reset(k);
        ix.exact.push_range(s as usize..e as usize, &ix.ids, h, out);
    }

    /// The cost of a top-[`K_MAX`] query, the `k` the benchmarks run (see [`Self::cost_k`]).
    fn cost(&self, h: &[f32]) -> usize {
        self.cost_k(h, K_MAX)
    }
}

impl PcaHead {
    /// [`SoftmaxHead::cost`] of a top-`k` query (a node is widened to hold `k` words).
    pub fn cost_k(&self, h: &[f32], k: usize) -> usize {
        let ix = &*self.index;
        let d = ix.d as f64;
        let words = ix.len(ix.descend(h, self.depth, k)) as f64;
        (self.depth as f64 * (d + 1.0) / d + words).ceil() as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::seeded_values as values;

    fn ids(head: &dyn SoftmaxHead, h: &[f32], k: usize) -> Vec<u32> {
        head.top_k(h, k).unwrap().iter().map(|s| s.id).collect()
    }

    #[test]
    fn depth_zero_is_the_full_softmax_and_builds_are_deterministic() {
        let (v, d) = (300, 16);
        let full = FullHead::new(&values(v * d, 1), &values(v, 2), d).unwrap();
        let index = Arc::new(PcaIndex::new(&full));
        assert_eq!(index.max_depth(), 8);
        let head = PcaHead::new(index.clone(), 0).unwrap();
        assert_eq!(head.name(), "pca-d0");
        for h in values(40 * d, 3).chunks(d) {
            assert_eq!(ids(&head, h, 10), ids(&full, h, 10));
            assert_eq!(head.cost(h), v);
        }
        assert_eq!(PcaIndex::new(&full), *index);
        // Every level partitions the words.
        let mut seen = index.ids.clone();
        seen.sort_unstable();
        assert_eq!(seen, (0..v as u32).collect::<Vec<_>>());
        let leaves = &index.ranges[(1 << 8) - 1..];
        assert!(leaves.iter().all(|&(s, e)| e > s));
        assert_eq!(leaves.iter().map(|&(s, e)| e - s).sum::<u32>(), v as u32);
    }

    #[test]
    fn shallow_trees_find_the_top_word_and_deeper_trees_cost_less() {
        // Structured fixture: words in 8 well-separated groups, contexts near one group.
        let (v, d, groups) = (1024, 16, 8);
        let centres = values(groups * d, 4);
        let noise = values(v * d, 5);
        let w: Vec<f32> = (0..v * d)
            .map(|i| 2.0 * centres[(i / d % groups) * d + i % d] + 0.3 * noise[i])
            .collect();
        let full = FullHead::new(&w, &vec![0.0; v], d).unwrap();
        let index = Arc::new(PcaIndex::new(&full));
        let picks = values(200 * d, 6);
        let hs: Vec<f32> = picks
            .chunks(d)
            .enumerate()
            .flat_map(|(q, p)| {
                let (g, centres) = (q % groups, &centres);
                (0..d).map(move |j| centres[g * d + j] + 0.2 * p[j])
            })
            .collect();
        let agree = |depth: usize| {
            let head = PcaHead::new(index.clone(), depth).unwrap();
            let hits = hs
                .chunks(d)
                .filter(|h| ids(&head, h, 1) == ids(&full, h, 1))
                .count();
            let cost: usize = hs.chunks(d).map(|h| head.cost(h)).sum();
            (hits as f64 / 200.0, cost as f64 / 200.0)
        };
        let (p1, c1) = agree(1);
        let (p2, c2) = agree(2);
        let (_, c6) = agree(6);
        assert!(p1 >= 0.8 && p2 >= 0.6, "P@1 {p1} {p2}");
        assert!(c6 < c2 && c2 < c1 && c1 < v as f64 * 0.6, "{c1} {c2} {c6}");
    }

    #[test]
    fn small_leaves_widen_to_k_words_and_bad_depths_are_errors() {
        let (v, d) = (64, 8);
        let full = FullHead::new(&values(v * d, 7), &values(v, 8), d).unwrap();
        let index = Arc::new(PcaIndex::new(&full));
        let head = PcaHead::new(index.clone(), 6).unwrap();
        let h = values(d, 9);
        assert_eq!(head.top_k(&h, 5).unwrap().len(), 5);
        assert!(head.cost_k(&h, 5) > head.cost_k(&h, 1));
        assert_eq!(head.cost(&h), head.cost_k(&h, K_MAX));
        let err = PcaHead::new(index, 7).unwrap_err().to_string();
        assert!(err.contains("0 ≤ D ≤ 6"), "{err}");
        assert_eq!(PcaHead::parse_name("pca-d4"), Some(4));
        assert_eq!(PcaHead::parse_name("pca-4"), None);
    }
}
