//! Segments (bunsetsu): a conversion split where a Japanese user edits it, each segment with
//! its own alternatives while the rest stays fixed, as Mozc's conversion window works.
//!
//! A segment is an independent word with the words that lean on it: particles and auxiliaries,
//! suffixes, non-independent verbs after て/で, closing punctuation; a prefix or an opening
//! bracket leans on the word after it. The classes come from ipadic
//! (`data/segment-words.tsv`, written by `experiments/ime_segment_words.py`), keyed by display
//! and reading so that 人/にん (a suffix) joins and 人/ひと does not.
//!
//! [`Conversion`] holds the segments of one input being converted. A segment's alternatives
//! are decoded over its kana only, from the LM state after the segments before it and scored
//! with the first word of the segment after it ([`Decoder::over_span`]); resizing the focused
//! segment re-decodes it and the one after it, nothing else.

use std::sync::{Arc, OnceLock};

use crate::chars;
use crate::decode::{Candidate, Decoder, Scorer, Spelling, Start, Then};
use crate::history::History;
use crate::lattice::{Lattice, Lexicon, Node, NodeKind, UserWords};

/// How a word joins the segment structure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lean {
    /// Joins the word before (particles, auxiliaries, suffixes, closing punctuation).
    Back,
    /// Joins the word before after て/で only (いる, ある: also independent verbs).
    AfterTe,
    /// Joins a word that does not end in hiragana (人/ひと, 時/とき: also nouns of their own,
    /// suffixes in 旅人 and 3時, not in その人).
    Suffix,
    /// The next word joins it (prefixes, opening brackets).
    Forward,
}

/// `(display, reading, lean)` of every word that leans, sorted by display and reading.
/// A sorted list, not a hash map: it is looked up without building a key, and a process-wide
/// table whose pointers are to the starts of its allocations is "still reachable" to leak
/// checkers (valgrind calls a hash map's pointer into its allocation "possibly lost").
fn leans() -> &'static [(String, String, Lean)] {
    static TABLE: OnceLock<Vec<(String, String, Lean)>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table: Vec<(String, String, Lean)> = include_str!("../data/segment-words.tsv")
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let (class, word) = l.split_once('\t')?;
                let (display, reading) = word.split_once('\t')?;
                let lean = match class {
                    "f" | "a" | "c" => Lean::Back,
                    "t" => Lean::AfterTe,
                    "s" => Lean::Suffix,
                    "p" | "o" => Lean::Forward,
                    _ => return None,
                };
                Some((display.to_string(), reading.to_string(), lean))
            })
            .collect();
        table.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        table
    })
}

fn lean_of(display: &str, reading: &str) -> Option<Lean> {
    let table = leans();
    table
        .binary_search_by(|(d, r, _)| (d.as_str(), r.as_str()).cmp(&(display, reading)))
        .ok()
        .map(|i| table[i].2)
}

fn is_hiragana(c: char) -> bool {
    ('ぁ'..='ゖ').contains(&c)
}

/// Letters and digits typed as they are (`12`, `USB`) join one segment.
fn alphanumeric(display: &str) -> bool {
    !display.is_empty()
        && display.chars().all(|c| {
            c.is_ascii_alphanumeric() || ('０'..='９').contains(&c) || c.is_ascii_punctuation()
        })
}

/// Splits a conversion's words (`(display, reading)`) into segments: word index ranges, in
/// order, covering every word.
pub fn split(words: &[(String, String)]) -> Vec<std::ops::Range<usize>> {
    let mut segments = Vec::new();
    let mut start = 0;
    for i in 1..words.len() {
        let (prev, prev_reading) = (&words[i - 1].0, &words[i - 1].1);
        let (word, reading) = (&words[i].0, &words[i].1);
        let joins = match lean_of(word, reading) {
            Some(Lean::Back) => true,
            Some(Lean::AfterTe) => matches!(prev.as_str(), "て" | "で"),
            Some(Lean::Suffix) => !prev.chars().last().is_some_and(is_hiragana),
            _ => false,
        } || lean_of(prev, prev_reading) == Some(Lean::Forward)
            || (alphanumeric(prev) && alphanumeric(word));
        if !joins {
            segments.push(start..i);
            start = i;
        }
    }
    if !words.is_empty() {
        segments.push(start..words.len());
    }
    segments
}

/// One way to write a segment.
#[derive(Clone)]
pub struct Choice<St> {
    pub text: String,
    /// `(display, reading)` per word.
    pub words: Vec<(String, String)>,
    /// The words' nodes, `start` in the input's kana.
    nodes: Vec<Node>,
    /// Where the text after it starts, once known (`None`: not computed since the text before
    /// it changed).
    end: Option<Start<St>>,
}

impl<St> Choice<St> {
    fn literal(text: String, reading: &str, start: usize) -> Self {
        Choice {
            words: vec![(text.clone(), reading.to_string())],
            nodes: vec![Node {
                start,
                kind: NodeKind::Literal(text.clone()),
            }],
            text,
            end: None,
        }
    }
}

/// A span of the input converted as one unit.
#[derive(Clone)]
pub struct Segment<St> {
    /// Kana `start..end` of the input.
    pub start: usize,
    pub end: usize,
    /// The alternatives listed so far (only the chosen one until [`Conversion::alternatives`]).
    choices: Vec<Choice<St>>,
    chosen: usize,
    listed: bool,
    /// Where it starts, once known.
    from: Option<Start<St>>,
}

impl<St> Segment<St> {
    pub fn text(&self) -> &str {
        &self.choices[self.chosen].text
    }

    pub fn chosen(&self) -> usize {
        self.chosen
    }

    /// The chosen conversion's `(display, reading)` words.
    pub fn words(&self) -> &[(String, String)] {
        &self.choices[self.chosen].words
    }
}

/// The segments of `best` (nodes' `start` in the input's kana) as `ranges` of its words, which
/// ends at kana `end`; `starts` along it ([`Decoder::starts_along`]).
fn segments_of<St: Clone>(
    best: &Candidate,
    starts: &[Start<St>],
    ranges: Vec<std::ops::Range<usize>>,
    end: usize,
) -> Vec<Segment<St>> {
    ranges
        .into_iter()
        .filter(|r| !r.is_empty())
        .map(|range| {
            let words = best.words[range.clone()].to_vec();
            Segment {
                start: best.nodes[range.start].start,
                end: best.nodes.get(range.end).map_or(end, |n| n.start),
                choices: vec![Choice {
                    text: words.iter().map(|(d, _)| d.as_str()).collect(),
                    words,
                    nodes: best.nodes[range.clone()].to_vec(),
                    end: starts.get(range.end).cloned(),
                }],
                chosen: 0,
                listed: false,
                from: starts.get(range.start).cloned(),
            }
        })
        .collect()
}

/// What a conversion needs from its session: the model and the settings to decode spans with.
pub struct Env<'a, S: Scorer> {
    pub lexicon: &'a Lexicon,
    pub spelling: &'a Arc<Spelling>,
    pub beam: usize,
    pub katakana: usize,
    pub scorer: &'a mut S,
    /// The user's dictionary.
    pub user: Option<Arc<UserWords>>,
}

/// Alternatives decoded per segment (Mozc shows 9 a page).
pub const ALTERNATIVES: usize = 18;

/// A learned conversion replaces a segment's when its reading has this many kana at least, or
/// when the user committed it after the same text before: a short reading (し, きた) is
/// written differently in different texts. Measured with `ime learn --limit 300`: top-1 on the
/// first pass (learning from each commit as it goes) / the second pass over the same text,
/// against 57.67 % with nothing learned: any length 55.67 / 77.67 %, 3 kana 56.00 / 78.33 %,
/// 5 kana 57.00 / 78.33 %, 8 kana 57.33 / 76.00 %, pairs only 57.33 / 75.33 %.
pub const LEARNED_READING: usize = 5;

/// The beam of a span's decoder (a segment's alternatives, a resize). Measured with
/// `ime segments --limit 200` on the shipped converter (beam 16): 8 fixes 42 of the 85 wrong
/// sentences within one segment's first page against 43 at 16, in half the time per window;
/// 4 fixes 39.
pub const SPAN_BEAM: usize = 8;

/// The beam of a resize's decoder, which keeps only its best path. `ime segments` with
/// nothing else running: Shift+→/← p99 2.36 ms at 8, 1.52 ms at 4 (a window's decode, beam 8:
/// p99 1.65 ms). How often 4 finds a worse path than 8 is not measured.
pub const RESIZE_BEAM: usize = 4;

/// An input being converted segment by segment.
pub struct Conversion<S: Scorer> {
    kana: Vec<char>,
    segments: Vec<Segment<S::State>>,
    focus: usize,
}

impl<S: Scorer> Conversion<S> {
    /// The conversion of `kana` as `best` (one of the decoder's n-best, with the starts along
    /// it, [`Decoder::starts_along`]), split into segments; the focus on the first. A segment
    /// whose reading the user converted otherwise before (`learned`) shows that conversion.
    pub fn new(
        kana: Vec<char>,
        best: &Candidate,
        starts: Vec<Start<S::State>>,
        learned: Option<&History>,
    ) -> Self {
        let mut segments = segments_of(best, &starts, split(&best.words), kana.len());
        let mut prev: Option<String> = None;
        for s in &mut segments {
            let reading: String = kana[s.start..s.end].iter().collect();
            let learned = learned.and_then(|h| {
                let (surface, _) = h.best(&reading)?;
                let sure = reading.chars().count() >= LEARNED_READING
                    || prev.as_deref().is_some_and(|p| h.follows(p, surface));
                sure.then_some(surface)
            });
            if let Some(surface) = learned.filter(|&l| l != s.text()) {
                s.choices
                    .insert(0, Choice::literal(surface.to_string(), &reading, s.start));
            }
            prev = Some(s.text().to_string());
        }
        let mut conversion = Conversion {
            kana,
            segments,
            focus: 0,
        };
        // What follows a learned segment starts after other text now.
        for i in 0..conversion.segments.len() {
            if conversion.segments[i].choices[0].end.is_none() {
                conversion.stale_after(i);
            }
        }
        conversion
    }

    pub fn segments(&self) -> &[Segment<S::State>] {
        &self.segments
    }

    pub fn focus(&self) -> usize {
        self.focus
    }

    /// Moves the focus by `delta` segments, clamped. Returns whether it moved.
    pub fn move_focus(&mut self, delta: isize) -> bool {
        let to = (self.focus as isize + delta).clamp(0, self.segments.len() as isize - 1) as usize;
        let moved = to != self.focus;
        self.focus = to;
        moved
    }

    /// The whole conversion as chosen.
    pub fn text(&self) -> String {
        self.segments.iter().map(|s| s.text()).collect()
    }

    /// The reading of segment `i`.
    pub fn reading(&self, i: usize) -> String {
        let s = &self.segments[i];
        self.kana[s.start..s.end].iter().collect()
    }

    /// The focused segment's alternatives, decoded the first time they are asked for.
    pub fn alternatives(&mut self, env: &mut Env<S>) -> Vec<&str> {
        self.list(self.focus, env);
        let s = &self.segments[self.focus];
        s.choices.iter().map(|c| c.text.as_str()).collect()
    }

    /// Chooses alternative `k` of the focused segment; the segments after it keep their text.
    /// Returns false when there is no alternative `k`.
    pub fn choose(&mut self, k: usize, env: &mut Env<S>) -> bool {
        self.list(self.focus, env);
        let i = self.focus;
        if k >= self.segments[i].choices.len() {
            return false;
        }
        if k != self.segments[i].chosen {
            self.segments[i].chosen = k;
            self.stale_after(i);
        }
        true
    }

    /// Replaces the focused segment with `text` as typed (F6–F10).
    pub fn set_literal(&mut self, text: String) {
        let i = self.focus;
        let reading = self.reading(i);
        let s = &mut self.segments[i];
        let choice = Choice::literal(text, &reading, s.start);
        match s.choices.iter().position(|c| c.text == choice.text) {
            Some(k) => s.chosen = k,
            None => {
                s.choices.push(choice);
                s.chosen = s.choices.len() - 1;
            }
        }
        self.stale_after(i);
    }

    /// Shrinks (`delta` < 0) or grows the focused segment by one kana, as Shift+←/→ do: the kana
    /// moves to or from the segment after it, and only these two spans are decoded again, as
    /// one path with a word boundary at the new end, the text after them fixed. Returns false
    /// when the segment cannot change (one kana left, or nothing after it to take).
    pub fn resize(&mut self, delta: isize, env: &mut Env<S>) -> bool {
        let i = self.focus;
        let (start, end) = (self.segments[i].start, self.segments[i].end);
        let new_end = if delta < 0 {
            if end - start <= 1 {
                return false;
            }
            end - 1
        } else {
            if end >= self.kana.len() {
                return false;
            }
            end + 1
        };
        let next_end = self.segments.get(i + 1).map_or(self.kana.len(), |s| s.end);
        let from = self.start_of(i, env);
        let then_node = self
            .segments
            .get(i + 2)
            .map(|s| s.choices[s.chosen].nodes[0].clone());
        let then = then_node.as_ref().map_or(Then::End, Then::Word);
        let lattice = Lattice::with_katakana(env.katakana)
            .with_boundary(new_end - start)
            .with_user(env.user.clone());
        let mut decoder = Decoder::over_span(
            env.beam.min(RESIZE_BEAM),
            env.spelling.clone(),
            lattice,
            from,
        );
        for &c in &self.kana[start..next_end] {
            decoder.push(c, env.lexicon, env.scorer);
        }
        let Some((mut best, _)) = decoder
            .n_best_before(1, then, env.lexicon, env.scorer)
            .into_iter()
            .next()
        else {
            return false;
        };
        let Some(starts) = decoder.starts_along(&best.text, env.lexicon) else {
            return false;
        };
        for node in &mut best.nodes {
            node.start += start;
        }
        // The focused segment is exactly its kana; the rest splits as a conversion does.
        let focused = best.nodes.iter().take_while(|n| n.start < new_end).count();
        let rest = split(&best.words[focused..]);
        let ranges = std::iter::once(0..focused)
            .chain(rest.into_iter().map(|r| r.start + focused..r.end + focused))
            .collect();
        let rebuilt = segments_of(&best, &starts, ranges, next_end);
        let after = self.segments.len().min(i + 2);
        let added = rebuilt.len();
        self.segments.splice(i..after, rebuilt);
        self.stale_after(i + added - 1);
        true
    }

    /// Where the text after the whole conversion starts (to carry the LM state over a commit).
    pub fn end(&mut self, env: &mut Env<S>) -> Start<S::State> {
        let last = self.segments.len() - 1;
        self.end_of(last, env)
    }

    /// Decodes kana `start..end` from `from`: a listed segment of its alternatives, the kana
    /// in hiragana and katakana last (as Mozc lists them).
    fn decode(
        &self,
        from: Start<S::State>,
        start: usize,
        end: usize,
        then: Then,
        env: &mut Env<S>,
    ) -> Segment<S::State> {
        let mut decoder = Decoder::over_span(
            env.beam.min(SPAN_BEAM),
            env.spelling.clone(),
            Lattice::with_katakana(env.katakana).with_user(env.user.clone()),
            from.clone(),
        );
        for &c in &self.kana[start..end] {
            decoder.push(c, env.lexicon, env.scorer);
        }
        let mut choices: Vec<Choice<S::State>> = decoder
            .n_best_before(ALTERNATIVES, then, env.lexicon, env.scorer)
            .into_iter()
            .map(|(c, after)| Choice {
                text: c.text,
                words: c.words,
                nodes: c
                    .nodes
                    .into_iter()
                    .map(|n| Node {
                        start: n.start + start,
                        kind: n.kind,
                    })
                    .collect(),
                end: Some(after),
            })
            .collect();
        let reading: String = self.kana[start..end].iter().collect();
        for text in [reading.clone(), chars::to_katakana(&reading)] {
            if choices.iter().all(|c| c.text != text) {
                choices.push(Choice::literal(text, &reading, start));
            }
        }
        Segment {
            start,
            end,
            choices,
            chosen: 0,
            listed: true,
            from: Some(from),
        }
    }

    /// Decodes segment `i`'s alternatives once, keeping its current choice chosen.
    fn list(&mut self, i: usize, env: &mut Env<S>) {
        if self.segments[i].listed {
            return;
        }
        let from = self.start_of(i, env);
        let then_node = self
            .segments
            .get(i + 1)
            .map(|s| s.choices[s.chosen].nodes[0].clone());
        let then = then_node.as_ref().map_or(Then::End, Then::Word);
        let (start, end) = (self.segments[i].start, self.segments[i].end);
        let mut listed = self.decode(from, start, end, then, env);
        let current = self.segments[i].choices[self.segments[i].chosen].clone();
        listed.chosen = match listed.choices.iter().position(|c| c.text == current.text) {
            Some(k) => k,
            None => {
                listed.choices.insert(0, current);
                0
            }
        };
        self.segments[i] = listed;
    }

    /// Marks what segments after `i` start from as unknown (the text before them changed).
    fn stale_after(&mut self, i: usize) {
        for s in self.segments.iter_mut().skip(i + 1) {
            s.from = None;
            for c in &mut s.choices {
                c.end = None;
            }
        }
    }

    /// Where segment `i` starts, computed from the segments before it when unknown.
    fn start_of(&mut self, i: usize, env: &mut Env<S>) -> Start<S::State> {
        if let Some(from) = &self.segments[i].from {
            return from.clone();
        }
        // Segment 0 always knows its start (the session's origin).
        let from = self.end_of(i - 1, env);
        self.segments[i].from = Some(from.clone());
        from
    }

    /// Where the text after segment `i`'s chosen conversion starts.
    fn end_of(&mut self, i: usize, env: &mut Env<S>) -> Start<S::State> {
        let k = self.segments[i].chosen;
        if let Some(end) = &self.segments[i].choices[k].end {
            return end.clone();
        }
        let from = self.start_of(i, env);
        let nodes = self.segments[i].choices[k].nodes.clone();
        let decoder =
            Decoder::over_span(env.beam, env.spelling.clone(), Lattice::new(), from.clone());
        let end = decoder.advance_through(from, &nodes, env.lexicon, env.scorer);
        self.segments[i].choices[k].end = Some(end.clone());
        end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<(String, String)> {
        s.split(' ')
            .map(|w| {
                let (d, r) = w.split_once('/').unwrap();
                (d.to_string(), r.to_string())
            })
            .collect()
    }

    fn segments(s: &str) -> Vec<String> {
        let w = words(s);
        split(&w)
            .into_iter()
            .map(|r| w[r].iter().map(|(d, _)| d.as_str()).collect())
            .collect()
    }

    #[test]
    fn splits_as_bunsetsu() {
        assert_eq!(
            segments("今日/きょう は/は いい/いい 天気/てんき です/です ね/ね 。/。"),
            ["今日は", "いい", "天気ですね。"]
        );
        assert_eq!(
            segments("ドクター/どくたー を/を 探し/さがし て/て い/い ます/ます 。/。"),
            ["ドクターを", "探しています。"]
        );
        // A prefix leans forward, a suffix back; digits typed stay one segment.
        assert_eq!(
            segments("ご/ご 協力/きょうりょく を/を 1/1 2/2 時/じ に/に"),
            ["ご協力を", "12時に"]
        );
        // 人 read ひと is a word of its own; read にん it is a suffix.
        assert_eq!(segments("三/さん 人/にん"), ["三人"]);
        assert_eq!(segments("その/その 人/ひと"), ["その", "人"]);
        assert_eq!(segments("旅/たび 人/ひと"), ["旅人"]);
        // いる after a noun is a verb of its own.
        assert_eq!(segments("猫/ねこ が/が いる/いる"), ["猫が", "いる"]);
        assert!(split(&[]).is_empty());
    }
}
