//! Stand-ins for Latin-script words inside a source written in another script.
//!
//! A Japanese→English translator learns from text where Latin words are rare (98 of the
//! Tanaka corpus's 143,868 training sentences hold one), so its subword tokenizer cuts a name
//! such as `John` or `iPhone` into letters the network never learnt to read, and the decoder
//! makes up a word in its place or loops. Such a word is almost always a name to copy through
//! untranslated. So before tokenizing, each unknown Latin run is replaced by a name the
//! translator reads and writes reliably (ケン, which it renders as `Ken`), and the output's
//! `Ken` is put back as the original text. Placeholders exist only for language pairs that
//! have a table here (see [`Placeholders::for_languages`]).
//!
//! What counts as a run, on the NFKC-normalised line: an ASCII letter, then letters and digits,
//! with connectors (`-.'&_@/:+#%?=~`) and single spaces inside when a letter or digit follows
//! (`iPhone`, `New York`, `e-mail`, `Mr. Smith`). Left alone: runs of fewer than two
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

impl Placeholders {
    /// The table of `languages`, if the pair has one (today: `ja` → `en`).
    pub fn for_languages(languages: Option<&Languages>) -> Option<Placeholders> {
        match languages {
            Some(l) if l.src == "ja" && l.tgt == "en" => Some(Placeholders { names: JA_EN }),
            _ => None,
        }
    }

    /// `line` (already NFKC-normalised) with its unknown Latin runs replaced by stand-ins, and
    /// what each stand-in replaced. `known(run)` says whether the tokenizer reads `run` as one
    /// piece of its vocabulary (such a run is left alone). A stand-in whose source text is
    /// already in the line is not used, so the output's name is never ambiguous.
    pub fn mask(&self, line: &str, known: impl Fn(&str) -> bool) -> (String, Vec<Placeholder>) {
        let mut free = self
            .names
            .iter()
            .filter(|(src, _)| !line.contains(src))
            .peekable();
        let mut out = String::with_capacity(line.len());
        let mut used = Vec::new();
        let mut last = 0;
        for (a, b) in latin_runs(line) {
            let run = &line[a..b];
            if known(run) {
                continue;
            }
            let Some(&(src, target)) = free.next() else {
                break;
            };
            out.push_str(&line[last..a]);
            out.push_str(src);
            last = b;
            used.push(Placeholder {
                target,
                original: run.to_string(),
            });
        }
        out.push_str(&line[last..]);
        (out, used)
    }
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

    #[test]
    fn mask_uses_each_name_once_skips_known_and_present_ones() {
        let p = ja_en();
        let (line, used) = p.mask("JohnはiPhoneを買った。", |_| false);
        assert_eq!(line, "ケンはナンシーを買った。");
        assert_eq!(used[0].target, "Ken");
        assert_eq!(used[0].original, "John");
        assert_eq!(used[1].target, "Nancy");
        assert_eq!(used[1].original, "iPhone");
        // A known piece stays; a name already in the line is not a stand-in.
        let (line, used) = p.mask("ケンはCDとiPodを買った。", |r| r == "CD");
        assert_eq!(line, "ケンはCDとナンシーを買った。");
        assert_eq!(used.len(), 1);
        // More runs than names: the rest stay as they are.
        let (line, used) = p.mask("Aa Bb、Cc、Dd、Ee", |_| false);
        assert_eq!(line, "ケン、ナンシー、ベティ、Ee");
        assert_eq!(used.len(), 3);
        // No Latin: nothing changes.
        assert_eq!(
            p.mask("猫です。", |_| false),
            ("猫です。".to_string(), vec![])
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
