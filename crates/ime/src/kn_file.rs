//! Kneser–Ney models on disk: a converter folder's trigram model ([`TRIGRAM_FILE`]), the
//! models of an interpolated mixture with their weights, gzip'd.
//!
//! Layout (little-endian): `FSKN`, version `u32`, the end word `u32`, the number of models `u32`;
//! per model its weight `f32`, vocabulary size, start word and number of orders (`u32` each),
//! per order the discounts (`3 × f64`) and two tables (the n-grams' discounted probabilities and
//! the histories' back-off weights: a count `u64`, the keys sorted and stored as varint deltas,
//! then the values `f32`), then the unigram adaptation's `ln α` (`u32` count, `f32` each; 0 when
//! not adapted), from which the adapted normalisers are recomputed at load.

use std::io::Read;
use std::path::Path;

use fastsoftmax_infer::{Error, Result};

use crate::kn::{KeyMap, KnScorer, KneserNey};

/// A converter folder's trigram model (see [`KnMixture`]).
pub const TRIGRAM_FILE: &str = "trigram.bin.gz";
const MAGIC: &[u8; 4] = b"FSKN";
const VERSION: u32 = 1;
const FIX: &str = "re-run `ime pack --trigram FILE` to write it again";

/// Kneser–Ney models over one vocabulary, interpolated: `p(w | h) = Σ λ_i p_i(w | h)` (a
/// general model and an in-domain one, weights by EM on held-out text).
#[derive(Debug, Clone)]
pub struct KnMixture {
    /// `(model, λ)`.
    pub models: Vec<(KneserNey, f32)>,
    /// The end-of-sentence word.
    pub end: u32,
}

impl KnMixture {
    /// The mixture as the decoder's scorer.
    pub fn scorer(&self) -> KnScorer<'_> {
        KnScorer {
            models: self.models.iter().map(|(m, w)| (m, *w)).collect(),
            end: self.end,
        }
    }

    pub fn vocab_size(&self) -> usize {
        self.models.first().map_or(0, |(m, _)| m.vocab_size())
    }

    /// Writes `path` (atomically).
    pub fn write(&self, path: &Path) -> Result<()> {
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        put_u32(&mut out, VERSION);
        put_u32(&mut out, self.end);
        put_u32(&mut out, self.models.len() as u32);
        for (model, weight) in &self.models {
            out.extend_from_slice(&weight.to_le_bytes());
            let parts = model.parts();
            put_u32(&mut out, parts.vocab_size as u32);
            put_u32(&mut out, parts.start);
            put_u32(&mut out, parts.orders.len() as u32);
            for (discounts, ngrams, histories) in parts.orders {
                for d in discounts {
                    out.extend_from_slice(&d.to_le_bytes());
                }
                put_table(&mut out, ngrams);
                put_table(&mut out, histories);
            }
            put_u32(&mut out, parts.ln_alpha.len() as u32);
            for a in &parts.ln_alpha {
                out.extend_from_slice(&a.to_le_bytes());
            }
        }
        crate::model::write_gz(path, &out)
    }

    /// Reads what [`KnMixture::write`] wrote; every count and id is checked, so a damaged file
    /// is an error naming it, never a panic.
    pub fn read(path: &Path) -> Result<Self> {
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let mut bytes = Vec::new();
        flate2::read::GzDecoder::new(file)
            .read_to_end(&mut bytes)
            .map_err(|e| Error::format(path, format!("not gzip ({e}); {FIX}")))?;
        let bad = |m: String| Error::format(path, format!("{m}; {FIX}"));
        let mut r = Reader {
            bytes: &bytes,
            at: 0,
        };
        if r.take(4).ok() != Some(&MAGIC[..]) {
            return Err(bad("not a fastsoftmax Kneser–Ney file".into()));
        }
        let version = r.u32().map_err(&bad)?;
        if version != VERSION {
            return Err(bad(format!(
                "version {version}, this build reads {VERSION}"
            )));
        }
        let end = r.u32().map_err(&bad)?;
        let n = r.u32().map_err(&bad)?;
        let mut models = Vec::new();
        for _ in 0..n {
            let weight = f32::from_le_bytes(r.array().map_err(&bad)?);
            let vocab_size = r.u32().map_err(&bad)? as usize;
            let start = r.u32().map_err(&bad)?;
            let orders = r.u32().map_err(&bad)? as usize;
            if !(1..=crate::kn::MAX_ORDER).contains(&orders) {
                return Err(bad(format!("{orders} orders")));
            }
            let mut parts = Vec::new();
            for _ in 0..orders {
                let mut d = [0.0; 3];
                for x in &mut d {
                    *x = f64::from_le_bytes(r.array().map_err(&bad)?);
                }
                let ngrams = r.table().map_err(&bad)?;
                let histories = r.table().map_err(&bad)?;
                parts.push((d, ngrams, histories));
            }
            let count = r.u32().map_err(&bad)? as usize;
            let mut ln_alpha = Vec::with_capacity(count.min(r.left() / 4));
            for _ in 0..count {
                ln_alpha.push(f32::from_le_bytes(r.array().map_err(&bad)?));
            }
            let model = KneserNey::from_parts(vocab_size, start, parts, &ln_alpha)
                .map_err(|e| bad(e.to_string()))?;
            models.push((model, weight));
        }
        if r.left() != 0 {
            return Err(bad(format!("{} bytes after the last model", r.left())));
        }
        let mixture = KnMixture { models, end };
        mixture.check().map_err(bad)?;
        Ok(mixture)
    }

    /// The models share a vocabulary holding the end word, and the weights are a distribution.
    fn check(&self) -> std::result::Result<(), String> {
        let v = self.vocab_size();
        if self.models.is_empty() || self.models.iter().any(|(m, _)| m.vocab_size() != v) {
            return Err("no models, or models of different vocabularies".into());
        }
        if self.end as usize >= v {
            return Err(format!("end word {} outside a vocabulary of {v}", self.end));
        }
        let total: f32 = self.models.iter().map(|(_, w)| w).sum();
        let valid = |w: f32| w.is_finite() && w >= 0.0;
        if !self.models.iter().all(|(_, w)| valid(*w)) || (total - 1.0).abs() > 1e-3 {
            return Err(format!("mixture weights summing to {total}, not 1"));
        }
        Ok(())
    }
}

/// One order's tables as stored: `(discounts, n-grams, histories)`.
pub(crate) type OrderParts = ([f64; 3], KeyMap<f32>, KeyMap<f32>);

fn put_u32(out: &mut Vec<u8>, x: u32) {
    out.extend_from_slice(&x.to_le_bytes());
}

fn put_table(out: &mut Vec<u8>, table: &KeyMap<f32>) {
    let mut rows: Vec<(u64, f32)> = table.iter().map(|(&k, &v)| (k, v)).collect();
    rows.sort_unstable_by_key(|r| r.0);
    out.extend_from_slice(&(rows.len() as u64).to_le_bytes());
    let mut last = 0u64;
    for &(k, _) in &rows {
        let mut d = k - last;
        last = k;
        loop {
            let byte = (d & 0x7f) as u8;
            d >>= 7;
            if d == 0 {
                out.push(byte);
                break;
            }
            out.push(byte | 0x80);
        }
    }
    for &(_, v) in &rows {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn take(&mut self, n: usize) -> std::result::Result<&'a [u8], String> {
        if self.left() < n {
            return Err(format!("truncated at byte {}", self.at));
        }
        self.at += n;
        Ok(&self.bytes[self.at - n..self.at])
    }

    fn array<const N: usize>(&mut self) -> std::result::Result<[u8; N], String> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }

    fn u32(&mut self) -> std::result::Result<u32, String> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn table(&mut self) -> std::result::Result<KeyMap<f32>, String> {
        let n = u64::from_le_bytes(self.array()?) as usize;
        // Each row takes at least 5 bytes: a count beyond the file is damage, not a size.
        if n > self.left() / 5 {
            return Err(format!("a table of {n} rows in {} bytes", self.left()));
        }
        let mut keys = Vec::with_capacity(n);
        let mut last = 0u64;
        for _ in 0..n {
            let (mut d, mut shift) = (0u64, 0u32);
            loop {
                let byte = self.take(1)?[0];
                if shift > 63 {
                    return Err(format!("a key overflows at byte {}", self.at));
                }
                d |= ((byte & 0x7f) as u64) << shift;
                shift += 7;
                if byte & 0x80 == 0 {
                    break;
                }
            }
            last = last
                .checked_add(d)
                .ok_or_else(|| format!("a key overflows at byte {}", self.at))?;
            keys.push(last);
        }
        let mut table = KeyMap::with_capacity_and_hasher(n, Default::default());
        for k in keys {
            table.insert(k, f32::from_le_bytes(self.array()?));
        }
        Ok(table)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Words: 0 = <s>/</s>, 1 = a, 2 = b, 3 = c.
    fn mixture() -> KnMixture {
        let general = vec![
            vec![1, 2],
            vec![1, 3],
            vec![2, 3],
            vec![1, 2, 3],
            vec![3, 3, 1],
        ];
        let local = vec![vec![3, 3, 1]; 4];
        let mut g = KneserNey::estimate(&general, 3, 4, 0, 0).unwrap();
        g.adapt(&[0.0, 0.5, -0.25, 0.1]).unwrap();
        let l = KneserNey::estimate(&local, 2, 4, 0, 0).unwrap();
        KnMixture {
            models: vec![(g, 0.7), (l, 0.3)],
            end: 0,
        }
    }

    /// Written and read back, the mixture gives the same probabilities, adaptation included.
    #[test]
    fn round_trips_every_probability() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(TRIGRAM_FILE);
        let want = mixture();
        want.write(&path).unwrap();
        let got = KnMixture::read(&path).unwrap();
        assert_eq!(got.end, 0);
        for h in [vec![0], vec![0, 1], vec![1, 2], vec![3, 3], vec![2]] {
            for w in 0..4 {
                let (a, b) = (want.scorer().log_prob(&h, w), got.scorer().log_prob(&h, w));
                assert!((a - b).abs() < 1e-6, "{h:?} {w}: {a} vs {b}");
            }
        }
    }

    /// A damaged file is an error that names it, never a panic: truncations, another format,
    /// and every single-byte change of the payload.
    #[test]
    fn damaged_files_are_named_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(TRIGRAM_FILE);
        mixture().write(&path).unwrap();
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap())
            .read_to_end(&mut raw)
            .unwrap();
        let write = |bytes: &[u8]| crate::model::write_gz(&path, bytes).unwrap();
        let named = |e: Error| assert!(e.to_string().contains(TRIGRAM_FILE), "{e}");
        for cut in [0, 3, 8, 20, raw.len() / 2, raw.len() - 1] {
            write(&raw[..cut]);
            named(KnMixture::read(&path).unwrap_err());
        }
        std::fs::write(&path, b"not gzip").unwrap();
        named(KnMixture::read(&path).unwrap_err());
        // Seeded byte flips: read or refused, never a panic.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..300 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let mut bytes = raw.clone();
            let at = (state % bytes.len() as u64) as usize;
            bytes[at] ^= 1 << (state >> 61);
            write(&bytes);
            if let Err(e) = KnMixture::read(&path) {
                named(e);
            }
        }
    }
}
