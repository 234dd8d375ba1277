//! Stand-ins for what a translator cannot read in its source: Latin words inside Japanese,
//! and symbols (emoji, `Ω`) its subwords never saw.
//!
//! A Japanese→English translator learns from text where Latin words are rare (98 of the
//! Tanaka corpus's 143,868 training sentences hold one), so its subword tokenizer cuts a name
//! such as `John` or `iPhone` into letters the network never learnt to read, and the decoder
//! makes up a word in its place or loops. Such a word is almost always a name to copy through
//! untranslated. So before tokenizing, each unknown Latin run is replaced by a name the
//! translator reads and writes reliably (ケン, which it renders as `Ken`), and the output's
//! `Ken` is put back as the original text. A run of symbols the tokenizer has no piece for
//! (`<unk>` to the network, which the decoder mostly drops; kana and kanji excluded, they
//! belong to a word) is treated alike inside the line;
//! at the line's start or end (before its final punctuation) it is set aside and put back
//! around the translation (`ありがとう😀` → `Thank you … 😀`). Placeholders exist only for
//! language pairs that have a table here (see [`Placeholders::for_languages`]).
//!
//! What counts as a Latin run, on the NFKC-normalised line: an ASCII letter, then letters and
//! digits, with connectors (`-.'&_@/:+#%?=~`) and single spaces inside when a letter or digit
//! follows (`iPhone`, `New York`, `e-mail`, `Mr. Smith`). Left alone: runs of fewer than two
//! letters (`Tシャツ`, `X線`), runs right after a digit (units: `100m`, `180g`), runs the
//! tokenizer keeps as one known piece (`CD`), and any beyond the table's length.

use crate::artifact::Languages;

/// Stand-ins for one language pair: (source text, the target word it translates to), best
/// first. Chosen by trying the shipped translator: each must translate to exactly its target
/// word in any sentence position and never be produced unprompted (トム/`Tom` and ボブ/`Bob`
/// are, so they are not here).
const JA_EN: &[(&str, &str)] = &[("ケン", "Ken"), ("ナンシー", "Nancy"), ("ベティ", "Betty")];

/// The stand-in table of a language pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placeholders {
    names: &'static [(&'static str, &'static str)],
}

/// A Latin run that a stand-in replaced: the target word to look for in the output, and the
/// run's text to put there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placeholder {
    pub target: &'static str,
    pub original: String,
}

/// A source line made readable: the line the translator reads, what its stand-ins replaced,
/// and the unreadable symbols set aside from its edges.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Masked {
    pub line: String,
    pub placeholders: Vec<Placeholder>,
    /// Put back before the translation.
    pub prefix: String,
    /// Put back after the translation.
    pub suffix: String,
}

impl Masked {
    /// `text` (a translation) with the edges' symbols put back around it.
    pub fn wrap(&self, text: &str) -> String {
        [self.prefix.as_str(), text, self.suffix.as_str()]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

impl Placeholders {
    /// The table of `languages`, if the pair has one (today: `ja` → `en`).
    pub fn for_languages(languages: Option<&Languages>) -> Option<Placeholders> {
        match languages {
            Some(l) if l.src == "ja" && l.tgt == "en" => Some(Placeholders { names: JA_EN }),
            _ => None,
        }
    }

    /// `line` (already NFKC-normalised) made readable (see the module docs). `known_run(run)`
    /// says whether the tokenizer reads a Latin run as one piece of its vocabulary (such a run
    /// is left alone); `known_char(c)` whether the tokenizer has a piece for `c`. A stand-in
    /// whose source text is already in the line is not used, so the output's name is never
    /// ambiguous.
    pub fn mask(
        &self,
        line: &str,
        known_run: impl Fn(&str) -> bool,
        known_char: impl Fn(char) -> bool,
    ) -> Masked {
        // An unknown kanji or kana is part of a Japanese word: `<unk>` in place keeps the
        // word's other characters where the network expects them.
        let unknown = |c: char| !c.is_whitespace() && !known_char(c) && !is_cjk(c);
        let (body, prefix, suffix) = edges(line, unknown);
        let mut runs: Vec<(usize, usize)> = latin_runs(&line[body.clone()])
            .into_iter()
            .filter(|&(a, b)| !known_run(&line[body.start + a..body.start + b]))
            .chain(symbol_runs(&line[body.clone()], unknown))
            .map(|(a, b)| (body.start + a, body.start + b))
            .collect();
        runs.sort_unstable();
        let mut free = self.names.iter().filter(|(src, _)| !line.contains(src));
        let mut out = String::with_capacity(line.len());
        let mut placeholders = Vec::new();
        let mut last = body.start;
        for (a, b) in runs {
            if a < last {
                continue; // overlaps the run before
            }
            let Some(&(src, target)) = free.next() else {
                break;
            };
            out.push_str(&line[last..a]);
            out.push_str(src);
            last = b;
            placeholders.push(Placeholder {
                target,
                original: line[a..b].to_string(),
            });
        }
        out.push_str(&line[last..body.end]);
        out.push_str(&line[suffix.end..]);
        Masked {
            line: out,
            placeholders,
            prefix: line[prefix].trim().to_string(),
            suffix: line[suffix].trim().to_string(),
        }
    }
}

/// The byte ranges `(body, prefix, suffix)` of `line`: the unreadable symbols (and spaces)
/// at its start are `prefix = 0..body.start`; those at its end, before any closing
/// punctuation, are `suffix`, from `body.end`; the closing punctuation after the suffix is
/// read with the body.
fn edges(
    line: &str,
    unknown: impl Fn(char) -> bool,
) -> (
    std::ops::Range<usize>,
    std::ops::Range<usize>,
    std::ops::Range<usize>,
) {
    let symbol_or_space = |c: char| c.is_whitespace() || unknown(c);
    let mut start = line.len() - line.trim_start_matches(symbol_or_space).len();
    if !line[..start].chars().any(&unknown) {
        start = 0;
    }
    let rest = &line[start..];
    let closing = |c: char| c.is_whitespace() || "。．.！!？?、，,」』）)".contains(c);
    let tail = rest.len() - rest.trim_end_matches(closing).len();
    let body_and_symbols = &rest[..rest.len() - tail];
    let symbols_at = body_and_symbols.trim_end_matches(symbol_or_space).len();
    let mut end = start + symbols_at;
    if !body_and_symbols[symbols_at..].chars().any(&unknown) {
        end = start + body_and_symbols.len();
    }
    let suffix_end = start + body_and_symbols.len();
    (start..end, 0..start, end..suffix_end)
}

/// Kana and CJK ideographs (the unified blocks, their extensions and compatibility forms).
fn is_cjk(c: char) -> bool {
    matches!(c as u32, 0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0x20000..=0x3FFFF)
}

/// Byte ranges of the runs of unreadable symbols in `line` (joined across the spaces between
/// them).
fn symbol_runs(line: &str, unknown: impl Fn(char) -> bool) -> Vec<(usize, usize)> {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for (i, c) in line.char_indices() {
        if !unknown(c) {
            continue;
        }
        let end = i + c.len_utf8();
        match runs.last_mut() {
            Some(run) if line[run.1..i].chars().all(char::is_whitespace) => run.1 = end,
            _ => runs.push((i, end)),
        }
    }
    runs
}

/// Byte ranges of the Latin runs of `line` worth a stand-in (see the module docs).
fn latin_runs(line: &str) -> Vec<(usize, usize)> {
    const CONNECTORS: &str = "-.'&_@/:+#%?=~";
    let chars: Vec<(usize, char)> = line.char_indices().collect();
    let word = |c: char| c.is_ascii_alphanumeric();
    let mut runs = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let (start, c) = chars[i];
        if !c.is_ascii_alphabetic() {
            i += 1;
            continue;
        }
        if i > 0 && chars[i - 1].1.is_ascii_digit() {
            // A unit after a number (`100m`): none of its letters starts a run.
            while i < chars.len() && word(chars[i].1) {
                i += 1;
            }
            continue;
        }
        let mut end = i + 1;
        loop {
            while end < chars.len() && word(chars[end].1) {
                end += 1;
            }
            // Connectors, or one space before a letter, continue the run.
            let mut k = end;
            if k < chars.len() && chars[k].1 == ' ' {
                k += 1;
                if k < chars.len() && chars[k].1.is_ascii_alphabetic() {
                    end = k;
                    continue;
                }
                break;
            }
            while k < chars.len() && CONNECTORS.contains(chars[k].1) {
                k += 1;
            }
            if k > end && k < chars.len() && word(chars[k].1) {
                end = k;
                continue;
            }
            // An abbreviation's full stop before a name (`Mr. Smith`).
            let letter_at = |j: usize| chars.get(j).is_some_and(|(_, c)| c.is_ascii_alphabetic());
            if k == end + 1
                && chars[end].1 == '.'
                && chars.get(k).is_some_and(|x| x.1 == ' ')
                && letter_at(k + 1)
            {
                end = k + 1;
                continue;
            }
            break;
        }
        let letters = chars[i..end]
            .iter()
            .filter(|(_, c)| c.is_ascii_alphabetic())
            .count();
        if letters >= 2 {
            let stop = chars.get(end).map_or(line.len(), |&(b, _)| b);
            runs.push((start, stop));
        }
        i = end;
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ja_en() -> Placeholders {
        let l = Languages {
            src: "ja".into(),
            tgt: "en".into(),
        };
        Placeholders::for_languages(Some(&l)).unwrap()
    }

    fn runs(line: &str) -> Vec<&str> {
        latin_runs(line).iter().map(|&(a, b)| &line[a..b]).collect()
    }

    #[test]
    fn latin_runs_take_names_and_leave_units_and_single_letters() {
        assert_eq!(runs("iPhoneを買いました。"), ["iPhone"]);
        assert_eq!(runs("JohnとMaryは友達です。"), ["John", "Mary"]);
        assert_eq!(runs("New Yorkに行った。"), ["New York"]);
        assert_eq!(runs("e-mailを送る。"), ["e-mail"]);
        assert_eq!(runs("www.example.comを見て。"), ["www.example.com"]);
        assert_eq!(runs("Windows10を使う。"), ["Windows10"]);
        // Units after a number, single letters, and a trailing connector stay out.
        assert!(runs("100mを走った。180gです。").is_empty());
        assert!(runs("Tシャツを着た。X線だ。").is_empty());
        assert_eq!(runs("Mr. Smithだ。"), ["Mr. Smith"]);
        assert_eq!(runs("C++とJavaだ。"), ["Java"]);
        assert!(runs("").is_empty());
        assert!(runs("私は学生です。").is_empty());
    }

    /// Every character is known but emoji, `Ω` and `陛`.
    fn known_char(c: char) -> bool {
        !matches!(c, '😀' | '🐱' | 'Ω' | '\u{200d}' | '👍' | '陛')
    }

    #[test]
    fn mask_uses_each_name_once_skips_known_and_present_ones() {
        let p = ja_en();
        let m = p.mask("JohnはiPhoneを買った。", |_| false, known_char);
        assert_eq!(m.line, "ケンはナンシーを買った。");
        assert_eq!(m.placeholders[0].target, "Ken");
        assert_eq!(m.placeholders[0].original, "John");
        assert_eq!(m.placeholders[1].target, "Nancy");
        assert_eq!(m.placeholders[1].original, "iPhone");
        assert_eq!((m.prefix.as_str(), m.suffix.as_str()), ("", ""));
        // A known piece stays; a name already in the line is not a stand-in.
        let m = p.mask("ケンはCDとiPodを買った。", |r| r == "CD", known_char);
        assert_eq!(m.line, "ケンはCDとナンシーを買った。");
        assert_eq!(m.placeholders.len(), 1);
        // More runs than names: the rest stay as they are.
        let m = p.mask("Aa Bb、Cc、Dd、Ee", |_| false, known_char);
        assert_eq!(m.line, "ケン、ナンシー、ベティ、Ee");
        assert_eq!(m.placeholders.len(), 3);
        // No Latin, no symbols: nothing changes.
        let m = p.mask("猫です。", |_| false, known_char);
        assert_eq!(
            m,
            Masked {
                line: "猫です。".into(),
                ..Masked::default()
            }
        );
    }

    #[test]
    fn symbols_at_the_edges_are_set_aside_and_inside_stand_in() {
        let p = ja_en();
        let m = p.mask("😀 ありがとう😀😀。", |_| false, known_char);
        assert_eq!(m.line, "ありがとう。");
        assert_eq!((m.prefix.as_str(), m.suffix.as_str()), ("😀", "😀😀"));
        assert_eq!(m.wrap("Thank you."), "😀 Thank you. 😀😀");
        assert_eq!(m.wrap(""), "😀 😀😀");
        let m = p.mask("これはΩです。", |_| false, known_char);
        assert_eq!(m.line, "これはケンです。");
        assert_eq!(m.placeholders[0].original, "Ω");
        // A run of symbols is one stand-in, across the spaces and joiners between them.
        let m = p.mask("猫👍\u{200d}👍 👍が好き。Tomも", |_| false, known_char);
        assert_eq!(m.line, "猫ケンが好き。ナンシーも");
        assert_eq!(m.placeholders[0].original, "👍\u{200d}👍 👍");
        // A line of symbols only is all prefix; nothing is left to translate.
        let m = p.mask(" 😀 ", |_| false, known_char);
        assert_eq!((m.line.as_str(), m.prefix.as_str()), ("", "😀"));
        assert_eq!(m.wrap(""), "😀");
        // Known characters at the edges stay in the line, and so do unknown kanji (a word's).
        let m = p.mask("猫。", |_| false, known_char);
        assert_eq!((m.line.as_str(), m.suffix.as_str()), ("猫。", ""));
        let m = p.mask("陛下万歳陛", |_| false, known_char);
        assert_eq!(
            m,
            Masked {
                line: "陛下万歳陛".into(),
                ..Masked::default()
            }
        );
    }

    #[test]
    fn only_pairs_with_a_table_have_placeholders() {
        let de_en = Languages {
            src: "de".into(),
            tgt: "en".into(),
        };
        assert!(Placeholders::for_languages(Some(&de_en)).is_none());
        assert!(Placeholders::for_languages(None).is_none());
    }
}
