//! A caller-owned top-k buffer: the best `k` (id, logit) pairs seen so far, best first.

/// The `k` the reports and benchmarks run (accuracy@10): heads whose work depends on `k`
/// report [`crate::SoftmaxHead::cost`] for a top-`K_MAX` query.
pub const K_MAX: usize = 10;

/// One scored word.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scored {
    pub id: u32,
    pub logit: f32,
}

/// Keeps the `k` highest logits pushed into it. Ties keep the earlier push (the lower id when
/// rows are scanned in id order), so every head breaks ties the same way as the reference.
/// Capacity is reserved up front; pushing never allocates.
#[derive(Debug, Clone, Default)]
pub struct TopK {
    k: usize,
    /// Sorted by logit, descending; `len <= k`.
    items: Vec<Scored>,
}

impl TopK {
    pub fn new(k: usize) -> Self {
        TopK {
            k,
            items: Vec::with_capacity(k + 1),
        }
    }

    /// Empties the buffer for a new query; a larger `k` than before reserves once.
    pub fn reset(&mut self, k: usize) {
        self.k = k;
        self.items.clear();
        if self.items.capacity() < k + 1 {
            self.items.reserve(k + 1);
        }
    }

    pub fn k(&self) -> usize {
        self.k
    }

    /// A logit must beat this to enter (−∞ until the buffer is full).
    #[inline]
    pub fn threshold(&self) -> f32 {
        if self.k == 0 {
            f32::INFINITY
        } else if self.items.len() < self.k {
            f32::NEG_INFINITY
        } else {
            self.items[self.k - 1].logit
        }
    }

    /// Offers one candidate. NaN never enters.
    #[inline]
    pub fn push(&mut self, id: u32, logit: f32) {
        if logit > self.threshold() {
            self.insert(id, logit);
        }
    }

    /// One step of insertion sort: the new item takes the last place (dropping the k-th when
    /// full) and moves up past every strictly lower logit. An open-coded loop, where
    /// `Vec::insert` called `memmove` for a few bytes: that call was most of a short scan's
    /// time (the `l2s+int8` re-scoring pushes ~60 items per query).
    #[cold]
    fn insert(&mut self, id: u32, logit: f32) {
        let new = Scored { id, logit };
        if self.k == 0 {
            return;
        }
        if self.items.len() < self.k {
            self.items.push(new);
        } else if let Some(last) = self.items.last_mut() {
            *last = new;
        }
        let items = &mut self.items[..];
        let mut i = items.len() - 1;
        while i > 0 && items[i - 1].logit < logit {
            items[i] = items[i - 1];
            i -= 1;
        }
        items[i] = new;
    }

    /// The result, best first.
    pub fn as_slice(&self) -> &[Scored] {
        &self.items
    }

    /// Multiplies every kept logit by `s > 0` (order is unchanged).
    pub fn scale_logits(&mut self, s: f32) {
        debug_assert!(s > 0.0);
        for item in &mut self.items {
            item.logit *= s;
        }
    }

    /// Renames every kept id (a head that scored a subset's rows by their place in it gives
    /// them their word ids); logits and order are unchanged.
    pub fn map_ids(&mut self, f: impl Fn(u32) -> u32) {
        for item in &mut self.items {
            item.id = f(item.id);
        }
    }

    pub fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.items.iter().map(|s| s.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_best_k_with_stable_ties() {
        let mut t = TopK::new(3);
        for (id, l) in [
            (0, 1.0),
            (1, 5.0),
            (2, 3.0),
            (3, 5.0),
            (4, f32::NAN),
            (5, 4.0),
            (6, 0.5),
        ] {
            t.push(id, l);
        }
        let ids: Vec<u32> = t.ids().collect();
        assert_eq!(ids, vec![1, 3, 5]);
        t.reset(1);
        t.push(9, -1.0);
        assert_eq!(t.as_slice(), &[Scored { id: 9, logit: -1.0 }]);
        t.reset(0);
        t.push(1, 7.0);
        assert!(t.as_slice().is_empty());
    }

    /// Against a stable sort of everything pushed, for many `k` and streams with many ties.
    #[test]
    fn equals_a_stable_sort() {
        let mut state = 12345u64;
        for trial in 0..200 {
            let n = trial % 37;
            let k = 1 + trial % 13;
            let logits: Vec<f32> = (0..n)
                .map(|_| {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((state >> 33) % 7) as f32 - 3.0
                })
                .collect();
            let mut t = TopK::new(k);
            for (i, &l) in logits.iter().enumerate() {
                t.push(i as u32, l);
            }
            let mut want: Vec<(u32, f32)> = logits
                .iter()
                .enumerate()
                .map(|(i, &l)| (i as u32, l))
                .collect();
            want.sort_by(|a, b| b.1.total_cmp(&a.1));
            want.truncate(k);
            let got: Vec<(u32, f32)> = t.as_slice().iter().map(|s| (s.id, s.logit)).collect();
            assert_eq!(got, want, "n {n}, k {k}");
        }
    }
}
