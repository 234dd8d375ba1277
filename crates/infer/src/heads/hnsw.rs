//! FGD (Zhang et al., EMNLP 2018): the softmax's top-k as maximum-inner-product search, reduced
//! to nearest-neighbour search by the [`Augmented`] transform and answered by a hierarchical
//! navigable small-world graph (HNSW, Malkov & Yashunin 2018). Built from the model's own output
//! layer at load time (under a second for 10k × 200 on one core), no training; named `hnsw-efE`.
//!
//! Every transformed row has the same norm, so the nearer of two rows is the one with the larger
//! inner product, and the inner product of the query `[h, 1, 0]` with a row IS that word's logit:
//! all distance work (graph construction and search) is dot products of length `d + 2`.
//! [`Space::InnerProduct`] builds the same graph without the lift coordinate, i.e. on the raw
//! inner product (non-metric, as faiss `METRIC_INNER_PRODUCT`); heads `hnsw-ip-efE`. On the PTB
//! model it needs about half the dot products of the sphere for the same P@1.
//!
//! Cost per query, in dot products of length `d + 2`: a few per upper layer (greedy descent),
//! then on layer 0 one per unvisited neighbour of each expanded candidate, growing with the beam
//! width `ef` (PTB, M = 24: 470 at ef 40, 1,240 at ef 160), against `vocab` for the full softmax.
//! [`SoftmaxHead::cost`] counts them exactly.
//!
//! Our own implementation: the Rust HNSW crates checked (`hnsw_rs`, `instant-distance`) either
//! return a freshly allocated result vector per query and draw levels without a seed, or fix
//! `ef_search` when the index is built and insert in parallel (not reproducible from a seed).
//!
//! Construction is the paper's: seeded levels with `mL = 1/ln M`, sequential insertion, beam
//! `ef_construction`, neighbours picked by the pruning heuristic (keep a candidate only if it is
//! nearer to the new node than to every neighbour kept so far), `M` links per node on the upper
//! layers and `2M` on layer 0, reverse links pruned by the same heuristic when full. Nodes are
//! inserted in id order, and our vocabularies number words most frequent first, so frequent words
//! join the graph first and become its best-connected nodes: on PTB this is worth a lot in the
//! sphere space (M = 16: P@1 0.92 at ef 40, against 0.56 when inserted in a shuffled order).
//!
//! Layout: rows padded to a multiple of 16 floats and aligned to cache lines (AVX-512 / AVX2
//! dot products picked at build time, four rows at a time); links in flat arrays — layer 0
//! `[n, 1 + 2M]` (count, then ids), and `[1 + M]` per level for the few nodes above layer 0.
//! Queries keep their state in thread-local scratch (an epoch-stamped visited array, reused
//! heaps), so they do not allocate once warm.

use std::cell::RefCell;
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::head::SoftmaxHead;
use crate::heads::full::FullHead;
use crate::heads::mips::Augmented;
use crate::kernels::rows::Stamps;
use crate::kernels::Simd;
use crate::topk::TopK;

/// Links per node on the upper layers (`2M` on layer 0). Measured on the PTB output layer
/// (10k × 200), M ∈ {12, 16, 24, 32} × ef_construction ∈ {100, 200}: within 10 % of the fewest
/// dot products at P@1 0.98 in both spaces, and the fewest for the inner-product graph at
/// P@1 0.99 and P@5 0.98.
pub const DEFAULT_M: usize = 24;
/// Beam width while inserting (200 builds twice as slowly for at most a few % fewer dot
/// products at equal precision).
pub const DEFAULT_EF_CONSTRUCTION: usize = 100;
/// Seed of the level draws.
pub const DEFAULT_SEED: u64 = 0x5eed_f6d0;
/// The highest layer a node may reach (a vocabulary of 2³² words needs fewer than 9 at M = 16).
const MAX_LEVEL: usize = 24;

/// A word and its similarity to the point being searched for (its logit, for a query).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Near {
    sim: f32,
    id: u32,
}

impl Eq for Near {}
impl PartialOrd for Near {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Near {
    /// By similarity, then the lower id first on ties (so builds are reproducible).
    fn cmp(&self, other: &Self) -> Ordering {
        self.sim
            .total_cmp(&other.sim)
            .then_with(|| other.id.cmp(&self.id))
    }
}

/// Search state, reused across queries (thread-local) and insertions.
#[derive(Debug, Default)]
struct Scratch {
    /// The nodes reached in this search.
    visited: Stamps,
    /// Best first: the frontier still to expand.
    candidates: BinaryHeap<Near>,
    /// Worst first: the best `ef` found so far.
    results: BinaryHeap<Reverse<Near>>,
    /// The transformed query `[width]`.
    query: Vec<f32>,
    /// Search results sorted best first (construction).
    found: Vec<Near>,
    /// Neighbours kept by the heuristic (construction).
    kept: Vec<Near>,
    /// A full neighbour's links plus the new node, and the ones it keeps (construction).
    pool: Vec<Near>,
    pool_kept: Vec<Near>,
    /// The row being inserted `[width]` (construction).
    row: Vec<f32>,
    /// Unvisited neighbours of the node being expanded.
    fresh: Vec<u32>,
}

thread_local! {
    /// Per-thread search state, so queries do not allocate once warm.
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// 16 floats on one cache line: rows are stored as whole lines so that none straddles two.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
struct Line([f32; 16]);

impl Line {
    /// The floats of consecutive lines.
    #[inline(always)]
    fn floats(lines: &[Line]) -> &[f32] {
        // SAFETY: `Line` is `repr(C)` around `[f32; 16]` and exactly 64 bytes (no padding), so
        // `n` consecutive lines are `16 n` consecutive, initialised floats.
        unsafe { std::slice::from_raw_parts(lines.as_ptr().cast(), lines.len() * 16) }
    }

    fn floats_mut(lines: &mut [Line]) -> &mut [f32] {
        // SAFETY: as in `floats`, and the borrow is unique.
        unsafe { std::slice::from_raw_parts_mut(lines.as_mut_ptr().cast(), lines.len() * 16) }
    }
}

/// The space the graph is built and searched in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Space {
    /// The MIPS → nearest-neighbour transform ([`Augmented`]): every row lifted onto a sphere,
    /// a metric space in which nearest = largest inner product (FGD). Heads `hnsw-efE`.
    Sphere,
    /// The inner product with `[w_i, b_i]` as the similarity, without the lift (non-metric:
    /// ip-NSW, faiss `METRIC_INNER_PRODUCT`). Heads `hnsw-ip-efE`.
    InnerProduct,
}

/// The graph over the transformed output layer; shared by heads with different `ef_search`.
#[derive(Debug, Clone)]
pub struct HnswIndex {
    space: Space,
    /// Width of a context, `d`.
    d: usize,
    /// Width of a stored row: `d + 2` rounded up to a multiple of 16 (zero padding).
    width: usize,
    /// `[n, width / 16]` cache lines: row `i` is `[w_i, b_i, lift_i, 0…]` (`lift_i = 0` in
    /// [`Space::InnerProduct`]), starting on a cache line.
    rows: Vec<Line>,
    m: usize,
    ef_construction: usize,
    seed: u64,
    /// `[n]`: top layer of each node.
    levels: Vec<u8>,
    /// `[n, 1 + 2M]`: layer-0 links of node `i`: count, then ids.
    links0: Vec<u32>,
    /// `[n]`: start in `links_up` of the upper links of node `i` (`u32::MAX` on layer 0 only).
    up_start: Vec<u32>,
    /// For each node above layer 0, its levels `1..=level`, each `[1 + M]`: count, then ids.
    links_up: Vec<u32>,
    entry: u32,
    max_level: usize,
    simd: Simd,
}

impl HnswIndex {
    /// Builds the graph over `full`'s transformed rows: `m` links per node on the upper layers
    /// (`2m` on layer 0), beam `ef_construction` while inserting, levels drawn from `seed`.
    /// The same inputs always give the same graph.
    pub fn build(
        full: &FullHead,
        m: usize,
        ef_construction: usize,
        seed: u64,
    ) -> Result<Arc<Self>> {
        Self::build_in(full, Space::Sphere, m, ef_construction, seed)
    }

    /// [`Self::build`] in the given [`Space`].
    pub fn build_in(
        full: &FullHead,
        space: Space,
        m: usize,
        ef_construction: usize,
        seed: u64,
    ) -> Result<Arc<Self>> {
        if m < 2 {
            return Err(Error::Invalid(format!(
                "hnsw: M = {m} links per node is too few: choose M ≥ 2 (8–48 is usual; \
                 the default is {DEFAULT_M})"
            )));
        }
        if m > 1024 {
            return Err(Error::Invalid(format!(
                "hnsw: M = {m} links per node is too many: choose 2 ≤ M ≤ 1024 (8–48 is usual; \
                 the default is {DEFAULT_M})"
            )));
        }
        if ef_construction < m {
            return Err(Error::Invalid(format!(
                "hnsw: ef_construction = {ef_construction} is below M = {m}: choose \
                 ef_construction ≥ M (the default is {DEFAULT_EF_CONSTRUCTION})"
            )));
        }
        let aug = Augmented::new(full);
        let (n, d) = (aug.len(), full.dim());
        let width = aug.dim.div_ceil(16) * 16;
        let mut rows = vec![Line([0.0; 16]); n * width / 16];
        for (i, lines) in rows.chunks_exact_mut(width / 16).enumerate() {
            let row = Line::floats_mut(lines);
            row[..aug.dim].copy_from_slice(aug.row(i));
            if space == Space::InnerProduct {
                row[aug.dim - 1] = 0.0;
            }
        }
        // Seeded levels: floor(−ln U · mL), mL = 1 / ln M.
        let ml = 1.0 / (m as f64).ln();
        let mut rng = seed;
        let levels: Vec<u8> = (0..n)
            .map(|_| {
                let u = 1.0 - (splitmix64(&mut rng) >> 11) as f64 / (1u64 << 53) as f64;
                ((-u.ln() * ml).floor() as usize).min(MAX_LEVEL) as u8
            })
            .collect();
        let mut up_start = vec![u32::MAX; n];
        let mut up_len = 0usize;
        for (i, &l) in levels.iter().enumerate() {
            if l > 0 {
                up_start[i] = up_len as u32;
                up_len += l as usize * (1 + m);
            }
        }
        let mut index = HnswIndex {
            space,
            d,
            width,
            rows,
            m,
            ef_construction,
            seed,
            links0: vec![0; n * (1 + 2 * m)],
            up_start,
            links_up: vec![0; up_len],
            levels,
            entry: 0,
            max_level: 0,
            simd: Simd::detect(),
        };
        index.max_level = index.levels[0] as usize;
        let mut s = Scratch::default();
        match index.simd {
            // SAFETY: the variant was chosen after detecting the CPU feature.
            #[cfg(target_arch = "x86_64")]
            Simd::Avx512 => unsafe { index.insert_all_avx512(&mut s) },
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2 => unsafe { index.insert_all_avx2(&mut s) },
            Simd::Portable => unsafe { index.insert_all::<Portable>(&mut s) },
        }
        Ok(Arc::new(index))
    }

    pub fn space(&self) -> Space {
        self.space
    }

    /// Vocabulary size.
    pub fn len(&self) -> usize {
        self.levels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.levels.is_empty()
    }

    /// Width `d` of a context.
    pub fn dim(&self) -> usize {
        self.d
    }

    /// Links per node on the upper layers (`2M` on layer 0).
    pub fn m(&self) -> usize {
        self.m
    }

    pub fn ef_construction(&self) -> usize {
        self.ef_construction
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Number of layers above layer 0.
    pub fn max_level(&self) -> usize {
        self.max_level
    }

    /// Average layer-0 degree (a graph-quality diagnostic).
    pub fn mean_degree(&self) -> f64 {
        let stride = 1 + 2 * self.m;
        let links: usize = (0..self.len())
            .map(|i| self.links0[i * stride] as usize)
            .sum();
        links as f64 / self.len().max(1) as f64
    }

    #[inline(always)]
    fn row(&self, i: u32) -> &[f32] {
        let (i, lines) = (i as usize, self.width / 16);
        Line::floats(&self.rows[i * lines..(i + 1) * lines])
    }

    /// Capacity of a node's link list on `layer`.
    #[inline(always)]
    fn cap(&self, layer: usize) -> usize {
        if layer == 0 {
            2 * self.m
        } else {
            self.m
        }
    }

    /// Start of node `i`'s link list (count, then ids) on `layer` in `links0` / `links_up`.
    #[inline(always)]
    fn list_start(&self, i: u32, layer: usize) -> usize {
        if layer == 0 {
            i as usize * (1 + 2 * self.m)
        } else {
            debug_assert!(layer <= self.levels[i as usize] as usize);
            self.up_start[i as usize] as usize + (layer - 1) * (1 + self.m)
        }
    }

    #[inline(always)]
    fn links(&self, i: u32, layer: usize) -> &[u32] {
        let start = self.list_start(i, layer);
        let list = if layer == 0 {
            &self.links0
        } else {
            &self.links_up
        };
        let count = list[start] as usize;
        &list[start + 1..start + 1 + count]
    }

    fn set_links(&mut self, i: u32, layer: usize, ids: impl ExactSizeIterator<Item = u32>) {
        let start = self.list_start(i, layer);
        let list = if layer == 0 {
            &mut self.links0
        } else {
            &mut self.links_up
        };
        list[start] = ids.len() as u32;
        for (slot, id) in list[start + 1..].iter_mut().zip(ids) {
            *slot = id;
        }
    }

    /// Beam search on one layer from the entries already in `s.candidates` / `s.results`
    /// (marked visited): leaves the best `ef` in `s.results`; returns dot products spent.
    #[inline(always)]
    unsafe fn search_layer<K: Kernel>(
        &self,
        q: &[f32],
        ef: usize,
        layer: usize,
        s: &mut Scratch,
    ) -> usize {
        let mut dots = 0;
        let Scratch {
            visited,
            candidates,
            results,
            fresh,
            ..
        } = s;
        let (visited, epoch) = visited.raw();
        if fresh.len() < self.cap(0) {
            fresh.resize(self.cap(0), 0);
        }
        let mut worst = if results.len() >= ef {
            results.peek().map_or(f32::NEG_INFINITY, |r| r.0.sim)
        } else {
            f32::NEG_INFINITY
        };
        // Offers one scored neighbour to the beam.
        macro_rules! offer {
            ($sim:expr, $id:expr) => {{
                let (sim, id) = ($sim, $id);
                if sim > worst || results.len() < ef {
                    candidates.push(Near { sim, id });
                    results.push(Reverse(Near { sim, id }));
                    if results.len() > ef {
                        results.pop();
                    }
                    if results.len() >= ef {
                        worst = results.peek().map_or(f32::NEG_INFINITY, |r| r.0.sim);
                    }
                }
            }};
        }
        while let Some(c) = candidates.pop() {
            if c.sim < worst {
                break;
            }
            // The next candidate's links, while this one's neighbours are scored.
            #[cfg(target_arch = "x86_64")]
            if let (0, Some(next)) = (layer, candidates.peek()) {
                prefetch_u32(&self.links0[self.list_start(next.id, 0)..]);
            }
            // The unvisited neighbours first (their rows prefetched), then their dot products
            // four at a time. Branch-free: whether a neighbour was seen is a coin flip for the
            // predictor.
            let links = self.links(c.id, layer);
            let mut len = 0;
            for &nb in links {
                // SAFETY: link ids are < n ≤ visited.len() (`Stamps::clear`), and
                // fresh.len() ≥ 2M ≥ links.len() (resized above).
                debug_assert!((nb as usize) < visited.len() && len < fresh.len());
                let seen = visited.get_unchecked_mut(nb as usize);
                *fresh.get_unchecked_mut(len) = nb;
                len += (*seen != epoch) as usize;
                *seen = epoch;
            }
            let fresh = &fresh[..len];
            #[cfg(target_arch = "x86_64")]
            for &nb in fresh {
                prefetch(self.row(nb));
            }
            dots += len;
            let mut quads = fresh.chunks_exact(4);
            for ids in &mut quads {
                let sims = K::dot4(
                    q,
                    [
                        self.row(ids[0]),
                        self.row(ids[1]),
                        self.row(ids[2]),
                        self.row(ids[3]),
                    ],
                );
                for (&sim, &id) in sims.iter().zip(ids) {
                    offer!(sim, id);
                }
            }
            for &id in quads.remainder() {
                offer!(K::dot(q, self.row(id)), id);
            }
        }
        dots
    }

    /// Greedy descent through the upper layers from the entry point down to `stop + 1`:
    /// returns the nearest node found and the dot products spent.
    #[inline(always)]
    unsafe fn descend<K: Kernel>(&self, q: &[f32], stop: usize) -> (Near, usize) {
        let mut best = Near {
            sim: K::dot(q, self.row(self.entry)),
            id: self.entry,
        };
        let mut dots = 1;
        for layer in (stop + 1..=self.max_level).rev() {
            loop {
                let mut moved = false;
                for &nb in self.links(best.id, layer) {
                    let sim = K::dot(q, self.row(nb));
                    dots += 1;
                    if sim > best.sim {
                        best = Near { sim, id: nb };
                        moved = true;
                    }
                }
                if !moved {
                    break;
                }
            }
        }
        (best, dots)
    }

    /// The query `[h, 1, 0…]` into `s.query`, then the best `ef` rows into `s.results`;
    /// returns the dot products spent.
    #[inline(always)]
    unsafe fn search<K: Kernel>(&self, h: &[f32], ef: usize, s: &mut Scratch) -> usize {
        debug_assert_eq!(h.len(), self.d);
        let mut q = std::mem::take(&mut s.query);
        q.clear();
        q.extend_from_slice(h);
        q.push(1.0);
        q.resize(self.width, 0.0);
        let (start, mut dots) = self.descend::<K>(&q, 0);
        s.visited.clear(self.len());
        s.visited.insert(start.id as usize);
        s.candidates.clear();
        s.results.clear();
        s.candidates.push(start);
        s.results.push(Reverse(start));
        dots += self.search_layer::<K>(&q, ef, 0, s);
        s.query = q;
        dots
    }

    /// The `k` best words for context `h` into `out` (searching with beam `max(ef, k)`);
    /// returns the dot products spent.
    fn top_k_into(&self, h: &[f32], k: usize, ef: usize, out: Option<&mut TopK>) -> usize {
        let ef = ef.max(k);
        SCRATCH.with(|s| {
            let s = &mut *s.borrow_mut();
            let dots = match self.simd {
                // SAFETY: the variant was chosen after detecting the CPU feature.
                #[cfg(target_arch = "x86_64")]
                Simd::Avx512 => unsafe { self.search_avx512(h, ef, s) },
                #[cfg(target_arch = "x86_64")]
                Simd::Avx2 => unsafe { self.search_avx2(h, ef, s) },
                Simd::Portable => unsafe { self.search::<Portable>(h, ef, s) },
            };
            if let Some(out) = out {
                out.reset(k);
                for r in s.results.iter() {
                    out.push(r.0.id, r.0.sim);
                }
            }
            dots
        })
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn search_avx512(&self, h: &[f32], ef: usize, s: &mut Scratch) -> usize {
        self.search::<Avx512>(h, ef, s)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn search_avx2(&self, h: &[f32], ef: usize, s: &mut Scratch) -> usize {
        self.search::<Avx2>(h, ef, s)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn insert_all_avx512(&mut self, s: &mut Scratch) {
        self.insert_all::<Avx512>(s)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn insert_all_avx2(&mut self, s: &mut Scratch) {
        self.insert_all::<Avx2>(s)
    }

    /// Sequential insertion of nodes `1..n` (node 0 is the first entry point).
    #[inline(always)]
    unsafe fn insert_all<K: Kernel>(&mut self, s: &mut Scratch) {
        for i in 1..self.len() as u32 {
            self.insert::<K>(i, s);
        }
    }

    #[inline(always)]
    unsafe fn insert<K: Kernel>(&mut self, new: u32, s: &mut Scratch) {
        let level = self.levels[new as usize] as usize;
        let mut q = std::mem::take(&mut s.row);
        q.clear();
        q.extend_from_slice(self.row(new));
        let (start, _) = self.descend::<K>(&q, level);
        s.found.clear();
        s.found.push(start);
        for layer in (0..=level.min(self.max_level)).rev() {
            // A fresh visited set per layer, seeded with the beam of the layer above.
            s.visited.clear(self.len());
            s.candidates.clear();
            s.results.clear();
            for &f in &s.found {
                s.visited.insert(f.id as usize);
                s.candidates.push(f);
                s.results.push(Reverse(f));
            }
            self.search_layer::<K>(&q, self.ef_construction, layer, s);
            s.found.clear();
            s.found.extend(s.results.iter().map(|r| r.0));
            s.found.sort_unstable_by(|a, b| b.cmp(a));
            let mut kept = std::mem::take(&mut s.kept);
            self.select::<K>(&s.found, self.cap(layer), &mut kept);
            self.set_links(new, layer, kept.iter().map(|x| x.id));
            for nb in &kept {
                self.link_back::<K>(nb.id, new, nb.sim, layer, s);
            }
            s.kept = kept;
        }
        s.row = q;
        if level > self.max_level {
            self.max_level = level;
            self.entry = new;
        }
    }

    /// The neighbour-selection heuristic: from `found` (best first), keep a candidate only if
    /// it is more similar to the base point than to every candidate kept so far; at most `cap`.
    #[inline(always)]
    unsafe fn select<K: Kernel>(&self, found: &[Near], cap: usize, kept: &mut Vec<Near>) {
        kept.clear();
        for &c in found {
            if kept.len() >= cap {
                break;
            }
            let row = self.row(c.id);
            if kept.iter().all(|k| K::dot(row, self.row(k.id)) < c.sim) {
                kept.push(c);
            }
        }
    }

    /// Adds `new` to `node`'s links on `layer`, re-selecting them by the heuristic when full.
    #[inline(always)]
    unsafe fn link_back<K: Kernel>(
        &mut self,
        node: u32,
        new: u32,
        sim: f32,
        layer: usize,
        s: &mut Scratch,
    ) {
        let cap = self.cap(layer);
        let links = self.links(node, layer);
        let count = links.len();
        if count < cap {
            let start = self.list_start(node, layer);
            let list = if layer == 0 {
                &mut self.links0
            } else {
                &mut self.links_up
            };
            list[start] += 1;
            list[start + 1 + count] = new;
            return;
        }
        let row = self.row(node);
        let mut pool = std::mem::take(&mut s.pool);
        let mut kept = std::mem::take(&mut s.pool_kept);
        pool.clear();
        pool.extend(links.iter().map(|&id| Near {
            sim: K::dot(row, self.row(id)),
            id,
        }));
        pool.push(Near { sim, id: new });
        pool.sort_unstable_by(|a, b| b.cmp(a));
        self.select::<K>(&pool, cap, &mut kept);
        self.set_links(node, layer, kept.iter().map(|x| x.id));
        (s.pool, s.pool_kept) = (pool, kept);
    }
}

/// The FGD head: HNSW search over the transformed output layer with beam `ef_search`.
#[derive(Debug, Clone)]
pub struct HnswHead {
    name: String,
    index: Arc<HnswIndex>,
    ef_search: usize,
}

impl HnswHead {
    /// The head over `index` searching with beam `ef_search` (≥ 1; a query for `k` words
    /// searches with `max(ef_search, k)`).
    pub fn new(index: Arc<HnswIndex>, ef_search: usize) -> Result<Self> {
        if ef_search == 0 {
            return Err(Error::Invalid(
                "hnsw: ef_search = 0 explores nothing: choose ef ≥ 1 (larger is more exact and \
                 slower; 20–200 is usual, and a query for k words uses at least k)"
                    .into(),
            ));
        }
        let prefix = match index.space {
            Space::Sphere => "hnsw",
            Space::InnerProduct => "hnsw-ip",
        };
        Ok(HnswHead {
            name: format!("{prefix}-ef{ef_search}"),
            index,
            ef_search,
        })
    }

    /// `ef` if `name` is `hnsw-efE` (a [`Space::Sphere`] head).
    pub fn parse_name(name: &str) -> Option<usize> {
        parse_ef(name.strip_prefix("hnsw-ef")?)
    }

    /// `ef` if `name` is `hnsw-ip-efE` (a [`Space::InnerProduct`] head).
    pub fn parse_ip_name(name: &str) -> Option<usize> {
        parse_ef(name.strip_prefix("hnsw-ip-ef")?)
    }

    pub fn ef_search(&self) -> usize {
        self.ef_search
    }

    /// [`SoftmaxHead::top_k_into`] that also returns the dot products it spent.
    pub fn search_into(&self, h: &[f32], k: usize, out: &mut TopK) -> usize {
        self.index.top_k_into(h, k, self.ef_search, Some(out))
    }

    pub fn index(&self) -> &Arc<HnswIndex> {
        &self.index
    }
}

impl SoftmaxHead for HnswHead {
    fn name(&self) -> &str {
        &self.name
    }
    fn dim(&self) -> usize {
        self.index.dim()
    }
    fn vocab_size(&self) -> usize {
        self.index.len()
    }

    fn top_k_into(&self, h: &[f32], k: usize, out: &mut TopK) {
        debug_assert!(h.len() == self.dim() && k >= 1 && k <= self.vocab_size());
        self.index.top_k_into(h, k, self.ef_search, Some(out));
    }

    /// Dot products of length `d + 2` (one per distance evaluation) this query spends.
    fn cost(&self, h: &[f32]) -> usize {
        self.index.top_k_into(h, 1, self.ef_search, None)
    }
}

fn parse_ef(digits: &str) -> Option<usize> {
    if digits.starts_with('+') {
        return None;
    }
    digits.parse().ok()
}

/// SplitMix64: the seeded generator of the level draws.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn prefetch(row: &[f32]) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    // SAFETY: prefetching is a hint; any address is allowed.
    unsafe { _mm_prefetch::<_MM_HINT_T0>(row.as_ptr() as *const i8) }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn prefetch_u32(list: &[u32]) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    // SAFETY: prefetching is a hint; any address is allowed.
    unsafe { _mm_prefetch::<_MM_HINT_T0>(list.as_ptr() as *const i8) }
}

/// A dot product over rows padded to a multiple of 16 floats.
trait Kernel {
    /// # Safety
    /// The CPU supports the kernel's features; `a.len() == b.len()`, a multiple of 16.
    unsafe fn dot(a: &[f32], b: &[f32]) -> f32;

    /// `q · r` for four rows at once (more loads in flight).
    /// # Safety
    /// As [`Kernel::dot`], for every row.
    #[inline(always)]
    unsafe fn dot4(q: &[f32], r: [&[f32]; 4]) -> [f32; 4] {
        [
            Self::dot(q, r[0]),
            Self::dot(q, r[1]),
            Self::dot(q, r[2]),
            Self::dot(q, r[3]),
        ]
    }
}

struct Portable;
impl Kernel for Portable {
    #[inline(always)]
    unsafe fn dot(a: &[f32], b: &[f32]) -> f32 {
        crate::kernels::dot(a, b)
    }
}

#[cfg(target_arch = "x86_64")]
struct Avx512;
#[cfg(target_arch = "x86_64")]
impl Kernel for Avx512 {
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn dot(a: &[f32], b: &[f32]) -> f32 {
        crate::kernels::rows::dot_avx512(a, b)
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn dot4(q: &[f32], r: [&[f32]; 4]) -> [f32; 4] {
        crate::kernels::rows::dot4_avx512(r, q)
    }
}

#[cfg(target_arch = "x86_64")]
struct Avx2;
#[cfg(target_arch = "x86_64")]
impl Kernel for Avx2 {
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn dot(a: &[f32], b: &[f32]) -> f32 {
        crate::kernels::rows::dot_avx2(a, b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::seeded_values as values;

    fn fixture(v: usize, d: usize, seed: u64) -> FullHead {
        // Rows of different norms, as in a trained output layer.
        let mut w = values(v * d, seed);
        for (i, x) in w.iter_mut().enumerate() {
            *x *= 0.5 + (i / d % 5) as f32 * 0.25;
        }
        FullHead::new(&w, &values(v, seed + 1), d).unwrap()
    }

    fn ids(s: &[crate::Scored]) -> Vec<u32> {
        s.iter().map(|x| x.id).collect()
    }

    #[test]
    fn a_beam_as_wide_as_the_vocabulary_is_the_full_softmax() {
        let (v, d) = (600, 16);
        let full = fixture(v, d, 1);
        for space in [Space::Sphere, Space::InnerProduct] {
            let index = HnswIndex::build_in(&full, space, 8, 40, DEFAULT_SEED).unwrap();
            let head = HnswHead::new(index, v).unwrap();
            for h in values(40 * d, 3).chunks(d) {
                let want = full.top_k(h, 10).unwrap();
                let got = head.top_k(h, 10).unwrap();
                assert_eq!(ids(&got), ids(&want), "{space:?}");
                for (a, b) in got.iter().zip(&want) {
                    assert!((a.logit - b.logit).abs() < 1e-4 * (1.0 + b.logit.abs()));
                }
            }
        }
        let head = HnswHead::new(HnswIndex::build(&full, 8, 40, 1).unwrap(), v).unwrap();
        assert_eq!(head.name(), "hnsw-ef600");
    }

    #[test]
    fn the_same_seed_gives_the_same_graph_and_answers() {
        let (v, d) = (800, 16);
        let full = fixture(v, d, 4);
        let a = HnswIndex::build(&full, 6, 30, 7).unwrap();
        let b = HnswIndex::build(&full, 6, 30, 7).unwrap();
        let c = HnswIndex::build(&full, 6, 30, 8).unwrap();
        assert_eq!(
            (&a.levels, &a.links0, &a.links_up, a.entry),
            (&b.levels, &b.links0, &b.links_up, b.entry)
        );
        assert_ne!(a.levels, c.levels);
        let (ha, hb) = (HnswHead::new(a, 10).unwrap(), HnswHead::new(b, 10).unwrap());
        for h in values(30 * d, 5).chunks(d) {
            assert_eq!(ha.top_k(h, 5).unwrap(), hb.top_k(h, 5).unwrap());
            assert_eq!(ha.cost(h), hb.cost(h));
        }
    }

    #[test]
    fn a_moderate_beam_finds_the_top_word_almost_always() {
        let (v, d, n) = (3000, 8, 300);
        let full = fixture(v, d, 6);
        // Measured (top-1 agreement / dot products per query): sphere 295 / 269, inner
        // product 300 / 412.
        for (space, min_hits) in [(Space::Sphere, 280), (Space::InnerProduct, 285)] {
            let index = HnswIndex::build_in(&full, space, 12, 60, DEFAULT_SEED).unwrap();
            assert!(index.max_level() >= 1);
            let head = HnswHead::new(index, 40).unwrap();
            let (mut hits, mut cost) = (0, 0);
            for h in values(n * d, 7).chunks(d) {
                let want = full.top_k(h, 1).unwrap()[0].id;
                hits += (head.top_k(h, 1).unwrap()[0].id == want) as usize;
                cost += head.cost(h);
            }
            assert!(hits >= min_hits, "{space:?}: top-1 agreement {hits} / {n}");
            assert!(
                cost / n < v / 5,
                "{space:?}: {} dot products per query",
                cost / n
            );
            // k above ef widens the beam to k.
            let narrow = HnswHead::new(head.index().clone(), 1).unwrap();
            assert_eq!(narrow.top_k(&values(d, 8), 20).unwrap().len(), 20);
        }
    }

    #[test]
    fn bad_knobs_and_names() {
        let full = fixture(50, 4, 9);
        let err = |r: Result<Arc<HnswIndex>>| r.unwrap_err().to_string();
        assert!(err(HnswIndex::build(&full, 1, 40, 0)).contains("M ≥ 2"));
        assert!(err(HnswIndex::build(&full, 0, 40, 0)).contains("M ≥ 2"));
        assert!(err(HnswIndex::build(&full, 4000, 4000, 0)).contains("M ≤ 1024"));
        assert!(err(HnswIndex::build(&full, 8, 4, 0)).contains("ef_construction ≥ M"));
        let index = HnswIndex::build(&full, 4, 8, 0).unwrap();
        let e = HnswHead::new(index.clone(), 0).unwrap_err().to_string();
        assert!(e.contains("ef ≥ 1"), "{e}");
        // A one-word vocabulary is a valid (trivial) graph.
        let one = FullHead::new(&[1.0, 2.0], &[0.5], 2).unwrap();
        let head = HnswHead::new(HnswIndex::build(&one, 2, 2, 0).unwrap(), 3).unwrap();
        assert_eq!(ids(&head.top_k(&[1.0, 1.0], 1).unwrap()), vec![0]);
        assert_eq!(HnswHead::parse_name("hnsw-ef50"), Some(50));
        assert_eq!(HnswHead::parse_name("hnsw-50"), None);
        assert_eq!(HnswHead::parse_name("hnsw-ef"), None);
        assert_eq!(HnswHead::parse_name("hnsw-ef+5"), None);
        assert_eq!(HnswHead::parse_name("hnsw-ip-ef50"), None);
        assert_eq!(HnswHead::parse_ip_name("hnsw-ip-ef50"), Some(50));
        assert_eq!(HnswHead::parse_ip_name("hnsw-ef50"), None);
        let ip = HnswIndex::build_in(&full, Space::InnerProduct, 4, 8, 0).unwrap();
        assert_eq!(HnswHead::new(ip, 7).unwrap().name(), "hnsw-ip-ef7");
    }
}
