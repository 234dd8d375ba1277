//! The lexicon (reading → words) and the word lattice over the kana typed so far.
//!
//! After `t` kana the lattice holds `D_t`, the paper's Eq. 1: every lexicon word whose reading
//! is a suffix `x_i … x_t` of the input. A kana that no single-kana word displays as itself also
//! gets a *passthrough* node (the kana as its own display), so every input has a path, whatever
//! the lexicon lacks.

use std::collections::HashMap;
use std::sync::Arc;

use crate::mozc::{Class, MozcDictionary, MozcWeights, PathCosts};

/// A word the lattice can place.
#[derive(Debug, Clone, PartialEq)]
pub struct Word {
    /// What the user sees when the word is chosen.
    pub display: String,
    /// The language model's id for it (`<unk>`'s for a word outside its vocabulary).
    pub lm_id: u32,
    /// `ln` of a score added to the LM's for this word: 0 for vocabulary words, the spelling
    /// model's log-probability for words scored through `<unk>`.
    pub extra: f32,
}

/// Readings (hiragana) → words.
#[derive(Debug, Clone, Default)]
pub struct Lexicon {
    words: Vec<Word>,
    by_reading: HashMap<String, Vec<u32>>,
    /// Longest reading, in kana.
    max_len: usize,
    /// Mozc's classes of each word (empty: a word Mozc's dictionary lacks). A word may have
    /// several (いい as an adjective and as a conjugated form): a path takes the one that
    /// connects best.
    classes: Vec<Vec<Class>>,
    /// Mozc's cost of a path, when its dictionary joined the lexicon.
    costs: Option<Arc<PathCosts>>,
    /// The language model's words by reading and by id, built on first use (prediction).
    vocabulary: std::sync::OnceLock<Vocabulary>,
}

/// The words the language model scores itself (not through `<unk>`).
#[derive(Debug, Clone, Default)]
struct Vocabulary {
    /// `(reading, lexicon id)`, by reading, then the LM's id (the more frequent first).
    by_reading: Vec<(String, u32)>,
    /// The lexicon id of each LM id.
    of_lm: HashMap<u32, u32>,
    /// Each word's place in `by_reading`, by lexicon id.
    place: HashMap<u32, usize>,
}

impl Lexicon {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a word under `reading` and returns its id; an identical (reading, display) pair is
    /// kept once, with the first id and score.
    pub fn insert(&mut self, reading: &str, word: Word) -> u32 {
        let ids = self.by_reading.entry(reading.to_string()).or_default();
        if let Some(&i) = ids
            .iter()
            .find(|&&i| self.words[i as usize].display == word.display)
        {
            return i;
        }
        let id = self.words.len() as u32;
        ids.push(id);
        self.words.push(word);
        self.classes.push(Vec::new());
        self.max_len = self.max_len.max(reading.chars().count());
        id
    }

    /// Mozc's dictionary joins the lexicon: each entry gives its class to the same (reading,
    /// display) word, or joins as a word scored through `<unk>` (the spelling model and an even
    /// share, [`MozcWeights::spelling_share`]). Paths then also pay Mozc's cost
    /// ([`MozcWeights`]); a word Mozc lacks is taken as Mozc's commonest class. Returns how many
    /// words joined.
    pub fn add_mozc(
        &mut self,
        dict: &MozcDictionary,
        spelling: &crate::decode::Spelling,
        weights: MozcWeights,
    ) -> usize {
        let before = self.words.len();
        let mut counts: HashMap<(u16, u16), usize> = HashMap::new();
        for e in &dict.entries {
            *counts.entry((e.class.lid, e.class.rid)).or_default() += 1;
            let word = Word {
                display: e.surface.clone(),
                lm_id: spelling.unk,
                extra: 0.0,
            };
            let next = self.words.len();
            let id = self.insert(&e.reading, word) as usize;
            // A word that joined now is scored by its spelling (computed once, not per entry).
            if id == next {
                self.words[id].extra = spelling.log_prob_word(&e.surface, 0);
            }
            let classes = &mut self.classes[id];
            if !classes.contains(&e.class) {
                classes.push(e.class);
            }
        }
        self.share_unknown_mass(spelling.unk, weights.spelling_share);
        let ((lid, rid), _) = counts
            .into_iter()
            .max_by_key(|&(ids, n)| (n, std::cmp::Reverse(ids)))
            .unwrap_or(((0, 0), 0));
        self.costs = Some(Arc::new(PathCosts {
            connection: dict.connection.clone(),
            weight: weights.weight,
            unknown: Class {
                lid,
                rid,
                cost: weights.unknown_cost,
            },
        }));
        self.words.len() - before
    }

    /// `p(w | <unk>)` of the words scored through `unk` that Mozc's dictionary has: a share
    /// `spelling` of the spelling model's probability plus the rest spread evenly over them, so
    /// Mozc's costs rank them. The character model alone undercharges short words and
    /// overcharges long ones (loanwords, names) by tens of nats: on the KWDLC dev sentences the
    /// even share lifts top-1 by 4 points. The mixture stays a distribution.
    fn share_unknown_mass(&mut self, unk: u32, spelling: f32) {
        if spelling >= 1.0 {
            return;
        }
        let ids: Vec<usize> = (0..self.words.len())
            .filter(|&i| self.words[i].lm_id == unk && !self.classes[i].is_empty())
            .collect();
        let even = (1.0 - spelling as f64) / ids.len().max(1) as f64;
        for i in ids {
            let w = &mut self.words[i];
            w.extra = (spelling as f64 * (w.extra as f64).exp() + even).ln() as f32;
        }
    }

    /// Mozc's cost of paths, when its dictionary joined ([`Lexicon::add_mozc`]).
    pub fn path_costs(&self) -> Option<&PathCosts> {
        self.costs.as_deref()
    }

    /// Mozc's classes of word `id` (empty for a word Mozc lacks, or before [`Lexicon::add_mozc`]).
    pub fn classes(&self, id: u32) -> &[Class] {
        &self.classes[id as usize]
    }

    /// The words read as `reading`.
    pub fn lookup(&self, reading: &str) -> impl Iterator<Item = (u32, &Word)> + '_ {
        self.by_reading
            .get(reading)
            .into_iter()
            .flatten()
            .map(|&i| (i, &self.words[i as usize]))
    }

    /// Every word, to rescore in place (the readings stay).
    pub fn words_mut(&mut self) -> impl Iterator<Item = &mut Word> {
        self.words.iter_mut()
    }

    pub fn word(&self, id: u32) -> &Word {
        &self.words[id as usize]
    }

    /// Distinct (reading, display) entries.
    pub fn len(&self) -> usize {
        self.words.len()
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// Distinct readings.
    pub fn readings(&self) -> usize {
        self.by_reading.len()
    }

    /// The longest reading, in kana: how far back a new kana's lookups reach.
    pub fn max_reading(&self) -> usize {
        self.max_len
    }

    /// Builds the index of the language model's words now (tens of milliseconds on the shipped
    /// converter), so that the first suggestion is not the key that pays for it.
    pub fn index_vocabulary(&self, unk: u32) {
        self.vocabulary(unk);
    }

    fn vocabulary(&self, unk: u32) -> &Vocabulary {
        self.vocabulary.get_or_init(|| {
            let mut v = Vocabulary::default();
            for (reading, ids) in &self.by_reading {
                for &id in ids {
                    let lm_id = self.words[id as usize].lm_id;
                    if lm_id != unk {
                        v.by_reading.push((reading.clone(), id));
                        v.of_lm.entry(lm_id).or_insert(id);
                    }
                }
            }
            v.by_reading.sort_by(|a, b| {
                (a.0.as_str(), self.words[a.1 as usize].lm_id)
                    .cmp(&(b.0.as_str(), self.words[b.1 as usize].lm_id))
            });
            v.place = v
                .by_reading
                .iter()
                .enumerate()
                .map(|(i, &(_, id))| (id, i))
                .collect();
            v
        })
    }

    /// The language model's words whose reading starts with `prefix` (`unk`: the LM's id of
    /// words it does not know), at most `limit`, the most frequent first.
    pub fn completions(&self, prefix: &str, unk: u32, limit: usize) -> Vec<u32> {
        let v = &self.vocabulary(unk).by_reading;
        let start = v.partition_point(|(r, _)| r.as_str() < prefix);
        let mut ids: Vec<u32> = v[start..]
            .iter()
            .take_while(|(r, _)| r.starts_with(prefix))
            .map(|&(_, id)| id)
            .collect();
        ids.sort_by_key(|&id| self.words[id as usize].lm_id);
        ids.truncate(limit);
        ids
    }

    /// The reading of the language model's word `id` (a lexicon id).
    pub fn vocabulary_reading(&self, id: u32, unk: u32) -> Option<&str> {
        let v = self.vocabulary(unk);
        v.place.get(&id).map(|&i| v.by_reading[i].0.as_str())
    }

    /// The lexicon's word of the language model's id `lm_id`.
    pub fn of_lm_id(&self, lm_id: u32, unk: u32) -> Option<u32> {
        self.vocabulary(unk).of_lm.get(&lm_id).copied()
    }
}

/// Splits an LM word `display/reading` at its last `/`.
pub fn split_word(word: &str) -> Option<(&str, &str)> {
    let (display, reading) = word.rsplit_once('/')?;
    (!display.is_empty() && !reading.is_empty()).then_some((display, reading))
}

impl Lexicon {
    /// The lattice's lexicon: every LM word `display/reading` (`vocab[id]`; words of another
    /// form, such as `<unk>`, are skipped), then every `(reading, display, count)` of `extra`
    /// the vocabulary lacks (`count`: its training count, 0 for a dictionary word the text
    /// lacks; a pair already present keeps its first score), scored through `unk` and
    /// [`Spelling::log_prob_word`](crate::decode::Spelling::log_prob_word).
    pub fn build<'a>(
        vocab: &[String],
        extra: impl IntoIterator<Item = (&'a str, &'a str, u64)>,
        spelling: &crate::decode::Spelling,
    ) -> Self {
        let mut lex = Lexicon::new();
        for (id, w) in vocab.iter().enumerate() {
            if let Some((display, reading)) = split_word(w) {
                let word = Word {
                    display: display.to_string(),
                    lm_id: id as u32,
                    extra: 0.0,
                };
                lex.insert(reading, word);
            }
        }
        for (reading, display, count) in extra {
            let word = Word {
                display: display.to_string(),
                lm_id: spelling.unk,
                extra: spelling.log_prob_word(display, count),
            };
            lex.insert(reading, word);
        }
        lex
    }
}

/// `s` in katakana when it is all hiragana (ー allowed, not first), else `None`.
fn to_katakana(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    for (i, c) in s.chars().enumerate() {
        match c {
            'ぁ'..='ゖ' => out.push(char::from_u32(c as u32 + 0x60)?),
            'ー' if i > 0 => out.push(c),
            _ => return None,
        }
    }
    Some(out)
}

/// A word of the user's dictionary as the lattice places it (built by
/// [`crate::UserDictionary::lattice_words`]).
#[derive(Debug, Clone, PartialEq)]
pub struct UserEntry {
    pub display: String,
    /// The LM's id (the lexicon's word of the same reading and display, else `<unk>`).
    pub lm_id: u32,
    /// The lexicon word's extra score (or the spelling model's), plus the user's bonus.
    pub extra: f32,
    /// Mozc's classes of the lexicon word of the same reading and display (empty: unknown).
    pub classes: Vec<Class>,
}

/// The user's words by reading, and the lexicon words the user suppressed.
#[derive(Debug, Clone, Default)]
pub struct UserWords {
    by_reading: HashMap<String, Vec<Arc<UserEntry>>>,
    /// Reading → displays of lexicon words never to place.
    suppressed: HashMap<String, Vec<String>>,
    max_len: usize,
}

impl UserWords {
    pub fn insert(&mut self, reading: &str, entry: UserEntry) {
        self.max_len = self.max_len.max(reading.chars().count());
        self.by_reading
            .entry(reading.to_string())
            .or_default()
            .push(Arc::new(entry));
    }

    pub fn suppress(&mut self, reading: &str, display: &str) {
        self.suppressed
            .entry(reading.to_string())
            .or_default()
            .push(display.to_string());
    }

    pub fn is_empty(&self) -> bool {
        self.by_reading.is_empty() && self.suppressed.is_empty()
    }

    /// Looked up for every lexicon word of every key: no allocation.
    fn suppresses(&self, reading: &str, display: &str) -> bool {
        self.suppressed
            .get(reading)
            .is_some_and(|d| d.iter().any(|d| d == display))
    }
}

/// One lattice node: a word spanning kana `start..end`.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub start: usize,
    pub kind: NodeKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum NodeKind {
    /// A lexicon word (its id in the lexicon).
    Word(u32),
    /// A kana with no single-kana word of its own display: shown as typed.
    Passthrough(char),
    /// A span of hiragana shown in katakana, where the lexicon has no such word: the loanwords
    /// and names no dictionary lists (IMEs offer the same).
    Katakana(String),
    /// A word of the user's dictionary.
    User(Arc<UserEntry>),
    /// Text the user asked for with a conversion key (F6–F10: the reading in hiragana,
    /// katakana, half-width, or the keys typed), scored as a word outside the vocabulary.
    Literal(String),
}

/// The lattice over the kana typed so far; `ends[t]` holds the nodes ending after kana `t`.
#[derive(Debug, Clone, Default)]
pub struct Lattice {
    kana: Vec<char>,
    ends: Vec<Vec<Node>>,
    /// Longest span offered in katakana (0: none).
    katakana: usize,
    /// A word boundary every path keeps: no node spans across it.
    boundary: Option<usize>,
    /// The user's dictionary.
    user: Option<Arc<UserWords>>,
}

impl Lattice {
    pub fn new() -> Self {
        Self::default()
    }

    /// Also offers every span of 2 to `max` hiragana in katakana when the lexicon lacks it.
    pub fn with_katakana(max: usize) -> Self {
        Lattice {
            katakana: max,
            ..Self::default()
        }
    }

    /// Keeps a word boundary after the first `at` kana: no node crosses it (a segment's end
    /// the user set).
    pub fn with_boundary(mut self, at: usize) -> Self {
        self.boundary = Some(at);
        self
    }

    /// Also places the user's words (and leaves out the lexicon words they suppress).
    pub fn with_user(mut self, user: Option<Arc<UserWords>>) -> Self {
        self.user = user.filter(|u| !u.is_empty());
        self
    }

    /// Kana typed so far.
    pub fn len(&self) -> usize {
        self.kana.len()
    }

    pub fn is_empty(&self) -> bool {
        self.kana.is_empty()
    }

    pub fn kana(&self) -> &[char] {
        &self.kana
    }

    /// The nodes ending after the first `t` kana (`1 ≤ t ≤ len`).
    pub fn ending_at(&self, t: usize) -> &[Node] {
        &self.ends[t - 1]
    }

    /// Appends one kana and the nodes it ends: `D_t`. Work is bounded by the longest reading,
    /// not by the input's length.
    pub fn push(&mut self, kana: char, lexicon: &Lexicon) {
        self.kana.push(kana);
        let t = self.kana.len();
        let mut nodes = Vec::new();
        let mut reading = String::new();
        let mut own_display = false;
        let user = self.user.as_deref();
        let reach = lexicon
            .max_reading()
            .max(self.katakana)
            .max(user.map_or(0, |u| u.max_len));
        let crosses = |start: usize| self.boundary.is_some_and(|b| start < b && b < t);
        for start in (t.saturating_sub(reach)..t).rev() {
            if crosses(start) {
                break;
            }
            reading.insert(0, self.kana[start]);
            let mut katakana = (t - start >= 2 && t - start <= self.katakana)
                .then(|| to_katakana(&reading))
                .flatten();
            for (id, word) in lexicon.lookup(&reading) {
                if user.is_some_and(|u| u.suppresses(&reading, &word.display)) {
                    continue;
                }
                own_display |= start + 1 == t && word.display == reading;
                if katakana.as_deref() == Some(word.display.as_str()) {
                    katakana = None;
                }
                nodes.push(Node {
                    start,
                    kind: NodeKind::Word(id),
                });
            }
            if let Some(k) = katakana {
                nodes.push(Node {
                    start,
                    kind: NodeKind::Katakana(k),
                });
            }
            for entry in user
                .and_then(|u| u.by_reading.get(&reading))
                .into_iter()
                .flatten()
            {
                nodes.push(Node {
                    start,
                    kind: NodeKind::User(entry.clone()),
                });
            }
        }
        if !own_display {
            nodes.push(Node {
                start: t - 1,
                kind: NodeKind::Passthrough(kana),
            });
        }
        self.ends.push(nodes);
    }

    /// Removes the last kana and its nodes (backspace).
    pub fn pop(&mut self) -> Option<char> {
        self.ends.pop();
        self.kana.pop()
    }

    /// The display string of a node.
    pub fn display<'a>(node: &'a Node, lexicon: &'a Lexicon) -> std::borrow::Cow<'a, str> {
        match node.kind {
            NodeKind::Word(id) => lexicon.word(id).display.as_str().into(),
            NodeKind::Passthrough(c) => c.to_string().into(),
            NodeKind::Katakana(ref k) | NodeKind::Literal(ref k) => k.as_str().into(),
            NodeKind::User(ref u) => u.display.as_str().into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(display: &str, lm_id: u32) -> Word {
        Word {
            display: display.into(),
            lm_id,
            extra: 0.0,
        }
    }

    #[test]
    fn holds_every_word_ending_at_each_kana() {
        let mut lex = Lexicon::new();
        lex.insert("きょう", word("今日", 1));
        lex.insert("きょう", word("京", 2));
        lex.insert("きょう", word("今日", 9)); // duplicate display: kept once
        lex.insert("う", word("う", 3));
        lex.insert("ょう", word("用", 4)); // odd, but a lexicon may hold it
        assert_eq!((lex.len(), lex.readings(), lex.max_reading()), (4, 3, 3));
        let mut lat = Lattice::new();
        for c in "きょう".chars() {
            lat.push(c, &lex);
        }
        // After き and ょ: passthrough only.
        assert_eq!(
            lat.ending_at(1),
            &[Node {
                start: 0,
                kind: NodeKind::Passthrough('き')
            }]
        );
        assert_eq!(
            lat.ending_at(2),
            &[Node {
                start: 1,
                kind: NodeKind::Passthrough('ょ')
            }]
        );
        // After う: う (its own display, so no passthrough), 用 from 1, 今日 and 京 from 0.
        let ends: Vec<(usize, String)> = lat
            .ending_at(3)
            .iter()
            .map(|n| (n.start, Lattice::display(n, &lex).into_owned()))
            .collect();
        assert_eq!(
            ends,
            [
                (2, "う".into()),
                (1, "用".into()),
                (0, "今日".into()),
                (0, "京".into())
            ]
        );
        assert_eq!(lat.pop(), Some('う'));
        assert_eq!(lat.len(), 2);
        lat.push('う', &lex);
        assert_eq!(lat.ending_at(3).len(), 4);
    }

    #[test]
    fn input_outside_the_lexicon_passes_through() {
        let lex = Lexicon::new();
        let mut lat = Lattice::new();
        for c in "ab漢".chars() {
            lat.push(c, &lex);
        }
        assert!(lat
            .kana()
            .iter()
            .enumerate()
            .all(|(i, &c)| lat.ending_at(i + 1)
                == [Node {
                    start: i,
                    kind: NodeKind::Passthrough(c)
                }]));
    }
}
