//! Learning from what the user commits: the words and segments they chose rise in later
//! conversions, beside the language model.
//!
//! Two tables of decayed counts, both keyed by a pair of strings:
//!
//! - words: `(reading, surface)`, one per committed segment;
//! - pairs: `(previous surface, surface)`, when the segment followed another.
//!
//! A conversion shows a segment as the user committed it most ([`History::best`]), when its
//! reading is long enough or it follows the same text ([`History::follows`]):
//! [`crate::segment::Conversion::new`].
//!
//! The clock is logical: it advances by one per [`History::record`] (one committed segment), so
//! tests and replays are deterministic. An entry keeps its count as of its last use; at clock
//! `now` its weight is `count · γ^(now − last)` with `γ = 0.5^(1 / half_life)`, and a use sets
//! `count ← weight + 1`: frequent and recent choices weigh most, old ones fade. At most `capacity` entries (words and pairs together)
//! are kept; a full table drops its lightest tenth at once, so eviction is amortised O(1).
//!
//! File (UTF-8 text, one record per line, so a crash that cuts the file loses only the cut
//! line): a header, the records heaviest first, and a closing line with the record count.
//!
//! ```text
//! fastsoftmax-ime-history<TAB>1<TAB>CLOCK
//! w<TAB>READING<TAB>SURFACE<TAB>COUNT<TAB>LAST
//! p<TAB>PREVIOUS<TAB>SURFACE<TAB>COUNT<TAB>LAST
//! end<TAB>RECORDS
//! ```
//!
//! `COUNT` is the count as of clock `LAST` (`f32`, shortest round-trip decimal). A file without
//! its `end` line was cut short: its complete records load, with a warning.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::path::Path;

use fastsoftmax_infer::files::write_atomic;
use fastsoftmax_infer::{Error, Result};

/// The first field of a history file's first line.
pub const MAGIC: &str = "fastsoftmax-ime-history";
/// The file format this build writes and reads.
pub const VERSION: u32 = 1;
const FIX: &str = "remove the file to start a new history (what was learned is lost)";

/// The constants of the learning model, to be tuned by measurement.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HistoryConfig {
    /// Commits after which a use counts half: 2,000.
    pub half_life: f32,
    /// Entries kept, words and pairs together: 60,000 (a few MB). Each committed segment adds
    /// up to two; the 1,850 KWDLC test sentences add about 26,000, and with 20,000 a second
    /// pass over them found the first pass's entries evicted (`ime learn`: no gain at all).
    pub capacity: usize,
}

impl Default for HistoryConfig {
    fn default() -> Self {
        HistoryConfig {
            half_life: 2000.0,
            capacity: 60_000,
        }
    }
}

impl HistoryConfig {
    /// Refuses constants no history can use.
    pub fn check(&self) -> std::result::Result<(), String> {
        if !(self.half_life.is_finite() && self.half_life > 0.0) {
            return Err(format!(
                "history half_life {} must be a finite number of commits > 0",
                self.half_life
            ));
        }
        if self.capacity == 0 {
            return Err("history capacity must be at least 1".into());
        }
        Ok(())
    }
}

/// What an entry learned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Learned<'a> {
    /// The reading was converted to the surface.
    Word { reading: &'a str, surface: &'a str },
    /// The surface followed the previous one.
    Pair { prev: &'a str, surface: &'a str },
}

/// One entry as listed by [`History::entries`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HistoryEntry<'a> {
    pub learned: Learned<'a>,
    /// The decayed count now.
    pub weight: f32,
    /// Commits since its last use.
    pub age: u64,
}

/// The user's history of choices (see the module docs).
#[derive(Debug, Clone)]
pub struct History {
    config: HistoryConfig,
    /// `ln γ` per commit.
    ln_decay: f32,
    clock: u64,
    words: Table,
    pairs: Table,
    /// Each reading's surfaces (an index of `words`).
    /// Ordered, so that the readings starting with what is typed are one range.
    readings: std::collections::BTreeMap<String, Vec<String>>,
}

impl Default for History {
    fn default() -> Self {
        let config = HistoryConfig::default();
        History {
            config,
            ln_decay: ln_decay(&config),
            clock: 0,
            words: Table::default(),
            pairs: Table::default(),
            readings: Default::default(),
        }
    }
}

impl History {
    /// An empty history with these constants.
    pub fn new(config: HistoryConfig) -> Result<Self> {
        config.check().map_err(Error::Invalid)?;
        Ok(History {
            config,
            ln_decay: ln_decay(&config),
            ..History::default()
        })
    }

    pub fn config(&self) -> &HistoryConfig {
        &self.config
    }

    /// Changes the constants; a smaller capacity drops the lightest entries.
    pub fn set_config(&mut self, config: HistoryConfig) -> Result<()> {
        config.check().map_err(Error::Invalid)?;
        self.config = config;
        self.ln_decay = ln_decay(&config);
        self.evict_to(config.capacity);
        Ok(())
    }

    /// Entries held, words and pairs together.
    pub fn len(&self) -> usize {
        self.words.len() + self.pairs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Commits recorded so far (the logical clock).
    pub fn clock(&self) -> u64 {
        self.clock
    }

    /// Learns one committed segment: `reading` became `surface`, after `prev_surface` when
    /// given. Text with a tab or line break (or empty) is not learned: the file holds one record
    /// per line.
    pub fn record(&mut self, reading: &str, surface: &str, prev_surface: Option<&str>) {
        if !learnable(reading) || !learnable(surface) {
            return;
        }
        self.clock += 1;
        self.bump(false, reading, surface);
        if let Some(prev) = prev_surface.filter(|p| learnable(p)) {
            self.bump(true, prev, surface);
        }
    }

    /// The decayed count of `reading` converted to `surface` now (0: never). Hashed, no
    /// allocation.
    pub fn weight_of(&self, reading: &str, surface: &str) -> f32 {
        get(&self.words, reading, surface).map_or(0.0, |c| self.weight(c))
    }

    /// The decayed count of `surface` committed after `prev` now (0: never).
    pub fn pair_weight_of(&self, prev: &str, surface: &str) -> f32 {
        get(&self.pairs, prev, surface).map_or(0.0, |c| self.weight(c))
    }

    /// Up to `limit` conversions the user committed for readings that start with `prefix`, the
    /// heaviest first: `(reading, surface, weight)`.
    pub fn completions(&self, prefix: &str, limit: usize) -> Vec<(&str, &str, f32)> {
        let mut found: Vec<(&str, &str, f32)> = self
            .readings
            .range::<str, _>((
                std::ops::Bound::Included(prefix),
                std::ops::Bound::Unbounded,
            ))
            .take_while(|(r, _)| r.starts_with(prefix))
            .flat_map(|(r, surfaces)| {
                surfaces.iter().filter_map(move |s| {
                    let count = get(&self.words, r, s)?;
                    Some((r.as_str(), s.as_str(), self.weight(count)))
                })
            })
            .collect();
        found.sort_by(|a, b| b.2.total_cmp(&a.2));
        found.truncate(limit);
        found
    }

    /// Whether `surface` was committed after `prev` before.
    pub fn follows(&self, prev: &str, surface: &str) -> bool {
        get(&self.pairs, prev, surface).is_some()
    }

    /// The surface chosen most for `reading` (by decayed count), with its count.
    pub fn best(&self, reading: &str) -> Option<(&str, f32)> {
        self.readings
            .get(reading)?
            .iter()
            .filter_map(|s| Some((s.as_str(), self.weight(get(&self.words, reading, s)?))))
            .max_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// Forgets the word `(reading, surface)` and every pair the surface is part of; returns
    /// the entries removed.
    pub fn forget(&mut self, reading: &str, surface: &str) -> usize {
        let before = self.len();
        self.words.remove(&(reading, surface) as &dyn AsPair);
        self.pairs
            .retain(|key, _| key.first != surface && key.second != surface);
        self.rebuild_readings();
        before - self.len()
    }

    /// Forgets everything (the clock goes on).
    pub fn forget_all(&mut self) {
        self.words.clear();
        self.pairs.clear();
        self.readings.clear();
    }

    /// Every entry, heaviest first (ties: the most recent first, words before pairs, then by
    /// text), for a listing.
    pub fn entries(&self) -> Vec<HistoryEntry<'_>> {
        let mut all: Vec<(HistoryEntry<'_>, bool, (&str, &str))> = self
            .words
            .iter()
            .map(|(key, count)| (false, key, count))
            .chain(self.pairs.iter().map(|(key, count)| (true, key, count)))
            .map(|(is_pair, key, count)| {
                let (first, second) = key.parts();
                let learned = if is_pair {
                    Learned::Pair {
                        prev: first,
                        surface: second,
                    }
                } else {
                    Learned::Word {
                        reading: first,
                        surface: second,
                    }
                };
                let entry = HistoryEntry {
                    learned,
                    weight: self.weight(count),
                    age: self.clock.saturating_sub(count.last),
                };
                (entry, is_pair, (first, second))
            })
            .collect();
        all.sort_by(|a, b| {
            b.0.weight
                .total_cmp(&a.0.weight)
                .then(a.0.age.cmp(&b.0.age))
                .then(a.1.cmp(&b.1))
                .then(a.2.cmp(&b.2))
        });
        all.into_iter().map(|(entry, _, _)| entry).collect()
    }

    /// Writes the history to `path` atomically, heaviest records first (so a file cut short
    /// keeps the most useful ones).
    pub fn save(&self, path: &Path) -> Result<()> {
        let mut text = format!("{MAGIC}\t{VERSION}\t{}\n", self.clock);
        let entries = self.entries();
        for entry in &entries {
            let (kind, first, second, table) = match entry.learned {
                Learned::Word { reading, surface } => ('w', reading, surface, &self.words),
                Learned::Pair { prev, surface } => ('p', prev, surface, &self.pairs),
            };
            let Some(count) = get(table, first, second) else {
                continue;
            };
            text.push_str(&format!(
                "{kind}\t{first}\t{second}\t{}\t{}\n",
                count.count, count.last
            ));
        }
        text.push_str(&format!("end\t{}\n", entries.len()));
        write_atomic(path, text.as_bytes())
    }

    /// The history saved at `path`, with the default constants (see [`History::load_with`]).
    pub fn load(path: &Path) -> Result<(Self, Option<String>)> {
        Self::load_with(path, HistoryConfig::default())
    }

    /// The history saved at `path`, and a warning when the file was cut short (its complete
    /// records are kept). A missing file is an empty history; a file that is not a history
    /// file, or a damaged record, is an error naming the file.
    pub fn load_with(path: &Path, config: HistoryConfig) -> Result<(Self, Option<String>)> {
        let history = History::new(config)?;
        match std::fs::read(path) {
            Ok(bytes) => history.parse(path, &bytes).map(|(mut h, warning)| {
                h.rebuild_readings();
                (h, warning)
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((history, None)),
            Err(e) => Err(Error::io(path, e)),
        }
    }

    fn parse(mut self, path: &Path, bytes: &[u8]) -> Result<(Self, Option<String>)> {
        let bad = |line: usize, problem: String| {
            Error::format(path, format!("line {line}: {problem}; {FIX}"))
        };
        let not_history = || {
            Error::format(
                path,
                format!(
                    "not a history file (it does not start with `{MAGIC}`): give the path of a history file, or move this file away"
                ),
            )
        };
        let cut = |records: usize| {
            format!(
                "{}: the history file was cut short (a crash while it was written?); kept its {records} complete records",
                path.display()
            )
        };
        // Only lines ended by '\n' are complete: a crash may cut the last one anywhere.
        let mut pieces: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
        let tail = pieces.pop().unwrap_or_default();
        let Some((header, records)) = pieces.split_first() else {
            let magic = MAGIC.as_bytes();
            return if magic.starts_with(tail) || tail.starts_with(magic) {
                Ok((self, Some(cut(0))))
            } else {
                Err(not_history())
            };
        };
        let header = std::str::from_utf8(header).map_err(|_| not_history())?;
        let fields: Vec<&str> = header.split('\t').collect();
        if fields[0] != MAGIC {
            return Err(not_history());
        }
        if fields.len() != 3 {
            return Err(bad(
                1,
                format!("the header has {} fields, not 3", fields.len()),
            ));
        }
        if fields[1].parse::<u32>().ok() != Some(VERSION) {
            return Err(Error::format(
                path,
                format!(
                    "history file version {} (this build reads version {VERSION}): it was written by another fastsoftmax; use that one, or {FIX}",
                    fields[1]
                ),
            ));
        }
        self.clock = fields[2]
            .parse()
            .map_err(|_| bad(1, format!("the clock `{}` is not a count", fields[2])))?;
        let mut loaded = 0usize;
        let mut ended = false;
        for (i, line) in records.iter().enumerate() {
            let number = i + 2;
            if ended {
                if line.is_empty() {
                    continue;
                }
                return Err(bad(number, "a record after the `end` line".into()));
            }
            let line = std::str::from_utf8(line)
                .map_err(|_| bad(number, "the record is not UTF-8".into()))?;
            let fields: Vec<&str> = line.split('\t').collect();
            if let ["end", n] = fields[..] {
                if n.parse::<usize>().ok() != Some(loaded) {
                    return Err(bad(
                        number,
                        format!("the file says {n} records, but holds {loaded}"),
                    ));
                }
                ended = true;
                continue;
            }
            let [kind, first, second, count, last] = fields[..] else {
                return Err(bad(number, format!("{} fields, not 5", fields.len())));
            };
            let is_pair = match kind {
                "w" => false,
                "p" => true,
                _ => return Err(bad(number, format!("unknown record kind `{kind}`"))),
            };
            if first.is_empty() || second.is_empty() {
                return Err(bad(number, "an empty text field".into()));
            }
            let count: f32 = count
                .parse()
                .ok()
                .filter(|c: &f32| c.is_finite() && *c >= 0.0)
                .ok_or_else(|| bad(number, format!("the count `{count}` is not a number ≥ 0")))?;
            let last: u64 = last
                .parse()
                .ok()
                .filter(|&l| l <= self.clock)
                .ok_or_else(|| {
                    bad(
                        number,
                        format!(
                            "the last use `{last}` is not a commit ≤ the clock {}",
                            self.clock
                        ),
                    )
                })?;
            let table = if is_pair {
                &mut self.pairs
            } else {
                &mut self.words
            };
            if table
                .insert(Key::new(first, second), Count { count, last })
                .is_some()
            {
                return Err(bad(number, "a record repeated".into()));
            }
            loaded += 1;
        }
        if ended && !tail.is_empty() {
            return Err(bad(records.len() + 2, "text after the `end` line".into()));
        }
        self.evict_to(self.config.capacity);
        Ok((self, (!ended).then(|| cut(loaded))))
    }

    /// The decayed count of `count` now.
    fn weight(&self, count: &Count) -> f32 {
        let age = self.clock.saturating_sub(count.last) as f32;
        count.count * (age * self.ln_decay).exp()
    }

    /// Rebuilds the index of each reading's surfaces.
    fn rebuild_readings(&mut self) {
        self.readings.clear();
        for key in self.words.keys() {
            let surfaces = self.readings.entry(key.first.clone()).or_default();
            surfaces.push(key.second.clone());
        }
    }

    fn bump(&mut self, is_pair: bool, first: &str, second: &str) {
        let (now, ln_decay) = (self.clock, self.ln_decay);
        if !is_pair {
            let surfaces = match self.readings.get_mut(first) {
                Some(surfaces) => surfaces,
                None => self.readings.entry(first.to_string()).or_default(),
            };
            if !surfaces.iter().any(|s| s == second) {
                surfaces.push(second.to_string());
            }
        }
        let table = if is_pair {
            &mut self.pairs
        } else {
            &mut self.words
        };
        if let Some(count) = table.get_mut(&(first, second) as &dyn AsPair) {
            let age = now.saturating_sub(count.last) as f32;
            count.count = count.count * (age * ln_decay).exp() + 1.0;
            count.last = now;
            return;
        }
        let capacity = self.config.capacity;
        if self.len() >= capacity {
            self.evict_to(capacity - (capacity / 10).max(1));
        }
        let table = if is_pair {
            &mut self.pairs
        } else {
            &mut self.words
        };
        table.insert(
            Key::new(first, second),
            Count {
                count: 1.0,
                last: now,
            },
        );
    }

    /// Drops the lightest entries until at most `target` remain (ties: the oldest first).
    fn evict_to(&mut self, target: usize) {
        let n = self.len();
        if n <= target {
            return;
        }
        let drop = n - target;
        let mut all: Vec<(f32, u64, bool, &Key)> = self
            .words
            .iter()
            .map(|(key, count)| (false, key, count))
            .chain(self.pairs.iter().map(|(key, count)| (true, key, count)))
            .map(|(is_pair, key, count)| (self.weight(count), count.last, is_pair, key))
            .collect();
        all.select_nth_unstable_by(drop - 1, |a, b| {
            a.0.total_cmp(&b.0)
                .then(a.1.cmp(&b.1))
                .then(a.2.cmp(&b.2))
                .then_with(|| a.3.parts().cmp(&b.3.parts()))
        });
        let victims: Vec<(bool, Key)> = all[..drop]
            .iter()
            .map(|&(_, _, is_pair, key)| (is_pair, key.clone()))
            .collect();
        for (is_pair, key) in victims {
            let table = if is_pair {
                &mut self.pairs
            } else {
                &mut self.words
            };
            table.remove(&key);
        }
        self.rebuild_readings();
    }
}

fn ln_decay(config: &HistoryConfig) -> f32 {
    -std::f32::consts::LN_2 / config.half_life
}

fn learnable(text: &str) -> bool {
    !text.is_empty() && !text.contains(['\t', '\n', '\r'])
}

/// A count as of commit `last`.
#[derive(Debug, Clone, Copy)]
struct Count {
    count: f32,
    last: u64,
}

type Table = HashMap<Key, Count, BuildHasherDefault<FxHasher>>;

fn get<'t>(table: &'t Table, first: &str, second: &str) -> Option<&'t Count> {
    if table.is_empty() {
        return None;
    }
    table.get(&(first, second) as &dyn AsPair)
}

/// Two strings as one key. A borrowed `(&str, &str)` finds it through [`AsPair`] without
/// building a `Key`: the lookups allocate nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Key {
    first: String,
    second: String,
}

impl Key {
    fn new(first: &str, second: &str) -> Self {
        Key {
            first: first.to_string(),
            second: second.to_string(),
        }
    }
}

trait AsPair {
    fn parts(&self) -> (&str, &str);
}

impl AsPair for Key {
    fn parts(&self) -> (&str, &str) {
        (&self.first, &self.second)
    }
}

impl AsPair for (&str, &str) {
    fn parts(&self) -> (&str, &str) {
        (self.0, self.1)
    }
}

// `Key` and `dyn AsPair` hash and compare by their parts alike, as `Borrow` requires.
impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.parts().hash(state);
    }
}

impl<'a> Borrow<dyn AsPair + 'a> for Key {
    fn borrow(&self) -> &(dyn AsPair + 'a) {
        self
    }
}

impl Hash for dyn AsPair + '_ {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.parts().hash(state);
    }
}

impl PartialEq for dyn AsPair + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn AsPair + '_ {}

/// FxHash over 8-byte words with MurmurHash3's finaliser: deterministic (the eviction order
/// does not depend on a random seed) and a few times faster than SipHash on short keys.
#[derive(Default, Clone, Copy)]
struct FxHasher(u64);

impl FxHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.add(u64::from_le_bytes(chunk.try_into().unwrap_or_default()));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> History {
        let mut h = History::default();
        h.record("きょう", "今日", None);
        h.record("は", "は", Some("今日"));
        h.record("はし", "橋", Some("は"));
        h.record("きょう", "今日", None);
        h.record("はし", "箸", Some("今日"));
        h.record("かわ", "川", Some("箸"));
        h
    }

    #[test]
    fn chosen_words_and_pairs_rise_and_fade() {
        let h = sample();
        assert_eq!(h.clock(), 6);
        assert_eq!(h.len(), 5 + 4);
        assert_eq!(h.weight_of("きょう", "京"), 0.0);
        assert_eq!(h.weight_of("はし", "端"), 0.0);
        // Twice beats once; a recent use beats an older one of the same count.
        assert!(h.weight_of("きょう", "今日") > h.weight_of("はし", "箸"));
        assert!(h.weight_of("はし", "箸") > h.weight_of("はし", "橋"));
        assert!(h.weight_of("はし", "橋") > 0.0);
        // A pair counts only after the surface it followed: one use, one commit ago.
        let after = h.pair_weight_of("今日", "箸");
        assert!((after - 2f32.powf(-1.0 / 2000.0)).abs() < 1e-5);
        assert_eq!(h.pair_weight_of("は", "箸"), 0.0);
        // One use now: 1.
        let mut h = History::default();
        h.record("あ", "亜", None);
        assert!((h.weight_of("あ", "亜") - 1.0).abs() < 1e-6);
        // A half-life later the count is halved.
        for _ in 0..2000 {
            h.record("い", "胃", None);
        }
        assert!((h.weight_of("あ", "亜") - 0.5).abs() < 1e-4);
        // Text the file cannot hold is not learned.
        h.record("う\t", "鵜", None);
        assert_eq!(h.clock(), 2001);
    }

    #[test]
    fn the_surface_chosen_most_is_best_and_survives_saving() {
        let mut h = History::default();
        h.record("きょうは", "今日は", None);
        h.record("きょうは", "京は", Some("明日"));
        h.record("きょうは", "京は", None);
        assert_eq!(h.best("きょうは").map(|b| b.0), Some("京は"));
        assert!(h.follows("明日", "京は"));
        assert!(!h.follows("明日", "今日は"));
        assert_eq!(h.best("あした"), None);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.tsv");
        h.save(&path).unwrap();
        let (loaded, warning) = History::load(&path).unwrap();
        assert_eq!(warning, None);
        assert_eq!(loaded.best("きょうは").map(|b| b.0), Some("京は"));
        let mut forgot = loaded.clone();
        forgot.forget("きょうは", "京は");
        assert_eq!(forgot.best("きょうは").map(|b| b.0), Some("今日は"));
    }

    #[test]
    fn forgetting_removes_the_word_and_its_pairs() {
        let mut h = sample();
        assert_eq!(h.forget("はし", "箸"), 3);
        assert_eq!(h.weight_of("はし", "箸"), 0.0);
        assert_eq!(h.pair_weight_of("今日", "箸"), 0.0);
        assert_eq!(h.pair_weight_of("箸", "川"), 0.0);
        assert!(h.weight_of("かわ", "川") > 0.0);
        assert!(h.pair_weight_of("は", "橋") > 0.0);
        assert_eq!(h.forget("はし", "箸"), 0);
        h.forget_all();
        assert!(h.is_empty() && h.entries().is_empty());
    }

    #[test]
    fn a_full_history_drops_its_lightest_entries() {
        let config = HistoryConfig {
            capacity: 10,
            ..HistoryConfig::default()
        };
        let mut h = History::new(config).unwrap();
        for _ in 0..5 {
            h.record("よく", "良く", None);
        }
        for i in 0..30 {
            h.record(&format!("k{i}"), &format!("w{i}"), None);
            assert!(h.len() <= 10);
        }
        assert!(h.weight_of("よく", "良く") > 0.0);
        assert!(h.weight_of("k29", "w29") > 0.0);
        assert_eq!(h.weight_of("k0", "w0"), 0.0);
        let mut smaller = h.clone();
        smaller
            .set_config(HistoryConfig {
                capacity: 2,
                ..config
            })
            .unwrap();
        let kept: Vec<_> = smaller.entries().iter().map(|e| e.learned).collect();
        assert_eq!(
            kept,
            [
                Learned::Word {
                    reading: "よく",
                    surface: "良く"
                },
                Learned::Word {
                    reading: "k29",
                    surface: "w29"
                }
            ]
        );
        assert!(History::new(HistoryConfig {
            half_life: 0.0,
            ..config
        })
        .is_err());
    }

    #[test]
    fn saves_and_loads_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.tsv");
        let (empty, warning) = History::load(&path).unwrap();
        assert!(empty.is_empty() && warning.is_none());
        let h = sample();
        h.save(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("fastsoftmax-ime-history\t1\t6\nw\tきょう\t今日\t"));
        assert!(text.ends_with("\nend\t9\n"), "{text}");
        let (back, warning) = History::load(&path).unwrap();
        assert!(warning.is_none());
        assert_eq!(back.clock(), 6);
        assert_eq!(back.entries(), h.entries());
    }

    #[test]
    fn a_file_cut_at_any_byte_keeps_its_complete_records() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.tsv");
        let full = sample();
        full.save(&path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let all = full.entries();
        for cut in 0..bytes.len() {
            let (h, warning) = History::default()
                .parse(&path, &bytes[..cut])
                .unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
            assert!(warning.is_some(), "cut at {cut}");
            // Lines ended before the cut, less the header, less a complete `end` line.
            let complete = bytes[..cut].iter().filter(|&&b| b == b'\n').count();
            let kept = complete.saturating_sub(1).min(all.len());
            assert_eq!(h.entries(), all[..kept], "cut at {cut}");
            if complete > 0 {
                assert_eq!(h.clock(), 6);
            }
        }
    }

    #[test]
    fn refuses_files_that_are_not_histories() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("words.txt");
        for (bytes, wanted) in [
            (&b"\xff\xfe\x00binary"[..], "not a history file"),
            (b"hello", "not a history file"),
            (b"fastsoftmax-ime-history\t2\t5\nend\t0\n", "version 2"),
            (
                b"fastsoftmax-ime-history\t1\t5\nw\ta\tb\t1\t9\nend\t1\n",
                "line 2",
            ),
            (
                b"fastsoftmax-ime-history\t1\t5\nw\ta\tb\t1\t3\nend\t2\n",
                "line 3",
            ),
            (b"fastsoftmax-ime-history\t1\t5\nx\ta\tb\t1\t3\n", "line 2"),
        ] {
            std::fs::write(&path, bytes).unwrap();
            let err = History::load(&path).unwrap_err().to_string();
            assert!(
                err.starts_with(&path.display().to_string()) && err.contains(wanted),
                "{err}"
            );
        }
        std::fs::write(&path, b"fastsoftmax-ime").unwrap();
        let (h, warning) = History::load(&path).unwrap();
        assert!(h.is_empty() && warning.unwrap().contains("cut short"));
    }
}
