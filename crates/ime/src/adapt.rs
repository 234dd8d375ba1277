//! Unigram adaptation (minimum discrimination information, Kneser et al. 1997): a language
//! model trained on one domain is moved toward another whose word frequencies alone are known,
//!
//! `p'(w | h) ∝ p(w | h) · α(w)^β`,  `α(w) = p_target(w) / p_background(w)`,
//!
//! where `p_background` is the training text's unigram distribution. For a softmax output layer
//! this is exact and free: `β ln α(w)` joins the output bias, and the softmax renormalises. For
//! words scored through `<unk>` and the spelling model it joins their score, renormalised over
//! the lexicon's unknown words.
//!
//! Words are compared by their display: frequency lists carry no readings. A display the target
//! list lacks is left as it is (`α = 1`): such lists are cut at a frequency and tokenised their
//! own way, so absence says little. A display the training text lacks is a word the LM scores
//! through `<unk>`, so its background probability is `p(<unk>) p(w | <unk>)`; the target's
//! katakana words among them join the lexicon, read as their kana ([`add_unseen_katakana`]).
//! `ln α` is clipped to `±CLIP` so that one count cannot dominate a context.

use std::collections::HashMap;
use std::path::Path;

use fastsoftmax_infer::{Error, Result};

use crate::lattice::{split_word, Lexicon};
use crate::model::{write_gz_text, GzText};

/// The converter folder's shift file (gzip, UTF-8): a first line `#beta<TAB>β`, then
/// `display<TAB>β ln α` (nats), one display a line, then a line `#unseen` and
/// `display<TAB>ln p_target − ln p_background(<unk>)` for the target's displays the training
/// text lacks.
pub const SHIFT_FILE: &str = "unigram-shift.tsv.gz";
const HEADER: &str = "#beta";
const UNSEEN: &str = "#unseen";

/// Largest `|ln α|`, in nats.
pub const CLIP: f32 = 5.0;

/// `β ln α(display)` for the displays both distributions know, and what the words only the
/// target knows need for theirs.
#[derive(Debug, Clone, Default)]
pub struct UnigramShift {
    display: HashMap<String, f32>,
    /// For target displays the background lacks: `ln p_target(d) − ln p_background(<unk>)` on
    /// the shared scale; [`UnigramShift::get_unseen`] subtracts the word's `ln p(w | <unk>)`.
    unseen: HashMap<String, f32>,
    beta: f32,
}

impl UnigramShift {
    /// `target`: `(display, frequency)` of the domain to move to (any scale); `background`:
    /// `(display/reading or display, count)` of the training text. Both are renormalised over
    /// the displays they share, so that only their ratio matters. With `unknown_share` (the
    /// share of background tokens the LM reads as `<unk>`), target displays the background
    /// lacks are kept too, for words scored through `<unk>`.
    pub fn new<'a>(
        target: impl IntoIterator<Item = (&'a str, f64)>,
        background: impl IntoIterator<Item = (&'a str, u64)>,
        unknown_share: Option<f64>,
        beta: f32,
    ) -> Self {
        let mut bg: HashMap<&str, u64> = HashMap::new();
        for (w, c) in background {
            let display = split_word(w).map_or(w, |(d, _)| d);
            *bg.entry(display).or_default() += c;
        }
        let n: f64 = bg.values().map(|&c| c as f64).sum();
        let target: Vec<(&str, f64)> = target
            .into_iter()
            .filter(|(_, f)| f.is_finite() && *f > 0.0)
            .collect();
        let shared: Vec<(&str, f64, f64)> = target
            .iter()
            .filter_map(|&(d, f)| bg.get(d).map(|&c| (d, f, c as f64 + 0.5)))
            .collect();
        let (t_sum, b_sum) = shared
            .iter()
            .fold((0.0, 0.0), |(t, b), (_, f, c)| (t + f, b + c));
        let display = shared
            .into_iter()
            .map(|(d, f, c)| {
                let ln_alpha = ((f / t_sum).ln() - (c / b_sum).ln()) as f32;
                (d.to_string(), beta * ln_alpha.clamp(-CLIP, CLIP))
            })
            .collect();
        // A background display's share is c / b_sum; an unseen word's is
        // p(<unk>) p(w | <unk>) n / b_sum.
        let unseen = match unknown_share.filter(|u| *u > 0.0 && n > 0.0 && b_sum > 0.0) {
            None => HashMap::new(),
            Some(u) => target
                .iter()
                .filter(|(d, _)| !bg.contains_key(d))
                .map(|&(d, f)| {
                    let v = (f / t_sum).ln() - u.ln() - (n / b_sum).ln();
                    (d.to_string(), v as f32)
                })
                .collect(),
        };
        UnigramShift {
            display,
            unseen,
            beta,
        }
    }

    /// The target's katakana words the background lacks, with their readings (hiragana): loan
    /// words and names a lexicon may lack. Sorted, so that lexicons built from them are the
    /// same on every load.
    pub fn unseen_katakana(&self) -> Vec<(String, &str)> {
        let mut words: Vec<(String, &str)> = self
            .unseen
            .keys()
            .filter_map(|d| Some((katakana_reading(d)?, d.as_str())))
            .collect();
        words.sort_unstable();
        words
    }

    /// `β ln α` of a word scored through `<unk>` whose display the background lacks, from its
    /// `ln p(w | <unk>)`; 0 when the target lacks it too.
    pub fn get_unseen(&self, display: &str, ln_p_given_unk: f32) -> f32 {
        self.unseen
            .get(display)
            .map_or(0.0, |v| self.beta * (v - ln_p_given_unk).clamp(-CLIP, CLIP))
    }

    /// `β ln α(display)`, 0 for a display either side lacks.
    pub fn get(&self, display: &str) -> f32 {
        self.display.get(display).copied().unwrap_or(0.0)
    }

    pub fn beta(&self) -> f32 {
        self.beta
    }

    /// Displays with a shift.
    pub fn len(&self) -> usize {
        self.display.len()
    }

    pub fn is_empty(&self) -> bool {
        self.display.is_empty()
    }

    /// Writes the shifts to `path` ([`SHIFT_FILE`]'s format), atomically.
    pub fn write(&self, path: &Path) -> Result<()> {
        let mut text = format!("{HEADER}\t{}\n", self.beta);
        for (section, map) in [(None, &self.display), (Some(UNSEEN), &self.unseen)] {
            if let Some(line) = section {
                text.push_str(line);
                text.push('\n');
            }
            let mut rows: Vec<(&String, &f32)> = map.iter().collect();
            rows.sort_by(|a, b| a.0.cmp(b.0));
            for (d, v) in rows {
                if d.is_empty() || d.starts_with('#') || d.contains(['\t', '\n']) {
                    return Err(Error::Invalid(format!(
                        "unigram shift of {d:?}: a display must be non-empty, not start with # \
                         and hold no tab or newline"
                    )));
                }
                text.push_str(&format!("{d}\t{v}\n"));
            }
        }
        write_gz_text(path, &text)
    }

    /// Reads what [`UnigramShift::write`] wrote.
    pub fn read(path: &Path) -> Result<Self> {
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let file = GzText::read(path, file, HEADER, "β", "re-run `ime pack --adapt`")?;
        let beta = file
            .value
            .parse::<f32>()
            .ok()
            .filter(|b| b.is_finite())
            .ok_or_else(|| file.error(format!("the first line is not `{HEADER}<TAB>β`")))?;
        let (mut display, mut unseen) = (HashMap::new(), HashMap::new());
        let mut in_unseen = false;
        for (n, line) in file.lines() {
            if line == UNSEEN && !in_unseen {
                in_unseen = true;
                continue;
            }
            let bound = if in_unseen {
                f32::MAX
            } else {
                CLIP * beta.abs()
            };
            let parsed = line
                .split_once('\t')
                .and_then(|(d, v)| Some((d, v.parse::<f32>().ok()?)))
                .filter(|(d, v)| !d.is_empty() && v.is_finite() && v.abs() <= bound);
            let Some((d, v)) = parsed else {
                return Err(file.error(format!(
                    "line {n}: not `display<TAB>value` (a shift within ±{CLIP}·β before \
                     `{UNSEEN}`): {line:?}"
                )));
            };
            let map = if in_unseen { &mut unseen } else { &mut display };
            map.insert(d.to_string(), v);
        }
        Ok(UnigramShift {
            display,
            unseen,
            beta,
        })
    }

    /// `β ln α` of each `display/reading` word of `vocab` (0 for others, such as `<unk>`).
    pub fn ln_alpha(&self, vocab: &[String]) -> Vec<f32> {
        vocab
            .iter()
            .map(|w| split_word(w).map_or(0.0, |(display, _)| self.get(display)))
            .collect()
    }

    /// Adds each `display/reading` word's shift to its output bias (`bias[id]` for
    /// `vocab[id]`; other words are left alone).
    pub fn shift_bias(&self, vocab: &[String], bias: &mut [f32]) {
        for (b, s) in bias.iter_mut().zip(self.ln_alpha(vocab)) {
            *b += s;
        }
    }
}

/// The hiragana reading of a katakana word of two or more characters (ー allowed, not first).
fn katakana_reading(word: &str) -> Option<String> {
    let mut out = String::with_capacity(word.len());
    for (i, c) in word.chars().enumerate() {
        match c {
            'ァ'..='ヶ' => out.push(char::from_u32(c as u32 - 0x60)?),
            'ー' if i > 0 => out.push(c),
            _ => return None,
        }
    }
    (out.chars().count() >= 2).then_some(out)
}

/// Adds the target's katakana words the training text lacks to `lexicon` (reading: their kana),
/// scored through `unk` and `spelling` before [`shift_unknown`] moves them.
pub fn add_unseen_katakana(
    lexicon: &mut Lexicon,
    spelling: &crate::decode::Spelling,
    shift: &UnigramShift,
) {
    for (reading, display) in shift.unseen_katakana() {
        let word = crate::lattice::Word {
            display: display.to_string(),
            lm_id: spelling.unk,
            extra: spelling.log_prob_word(display, 0),
        };
        lexicon.insert(&reading, word);
    }
}

/// Moves a lexicon by `shift` as a converter does at load time: the target's katakana words
/// join it ([`add_unseen_katakana`]), then every word scored through `<unk>` moves
/// ([`shift_unknown`]).
pub fn adapt_lexicon(
    lexicon: &mut Lexicon,
    spelling: &crate::decode::Spelling,
    shift: &UnigramShift,
) {
    add_unseen_katakana(lexicon, spelling, shift);
    shift_unknown(lexicon, spelling.unk, shift);
}

/// Moves the lexicon's words scored through `unk` (`ln p(w | <unk>)` in their `extra`) by
/// `shift`, renormalised over them: the rest of `p(· | <unk>)` (strings no entry spells) keeps
/// its mass.
pub fn shift_unknown(lexicon: &mut Lexicon, unk: u32, shift: &UnigramShift) {
    let mut z = 1.0f64;
    for w in lexicon.words_mut().filter(|w| w.lm_id == unk) {
        let s = match shift.display.get(&w.display) {
            Some(&s) => s,
            None => shift.get_unseen(&w.display, w.extra),
        };
        z += (w.extra as f64).exp() * ((s as f64).exp() - 1.0);
        w.extra += s;
    }
    let ln_z = z.max(f64::MIN_POSITIVE).ln() as f32;
    for w in lexicon.words_mut().filter(|w| w.lm_id == unk) {
        w.extra -= ln_z;
    }
}

/// Reads a frequency list `word<TAB>centibels` (wordfreq's scale: frequency = 10^(−cB/100)),
/// one word a line.
pub fn parse_centibels(text: &str) -> Result<Vec<(String, f64)>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.is_empty())
        .map(|(n, l)| {
            l.split_once('\t')
                .and_then(|(w, c)| {
                    Some((
                        w.to_string(),
                        10f64.powf(-c.trim().parse::<f64>().ok()? / 100.0),
                    ))
                })
                .ok_or_else(|| format!("line {}: not `word<TAB>centibels`", n + 1))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn shifts_follow_the_ratio_of_the_two_distributions() {
        // Background: 公約 rare, 膏薬 common; the target the other way round.
        let bg = [("公約/こうやく", 1), ("膏薬/こうやく", 99), ("の/の", 900)];
        let target = [("公約", 50.0), ("膏薬", 1.0), ("の", 900.0), ("新語", 5.0)];
        let s = UnigramShift::new(target.iter().map(|(d, f)| (*d, *f)), bg, None, 1.0);
        let get = |s: &UnigramShift, d| s.get(d);
        assert!(get(&s, "公約") > 2.0 && get(&s, "膏薬") < -2.0, "{s:?}");
        assert_eq!(
            s.get("新語"),
            0.0,
            "a display the background lacks is left alone"
        );
        assert_eq!(s.len(), 3);
        let half = UnigramShift::new(target.iter().map(|(d, f)| (*d, *f)), bg, None, 0.5);
        assert!((get(&half, "公約") - get(&s, "公約") / 2.0).abs() < 1e-5);
        let vocab = ["<unk>", "公約/こうやく", "膏薬/こうやく"].map(String::from);
        let mut bias = [0.0; 3];
        s.shift_bias(&vocab, &mut bias);
        assert_eq!(bias, [0.0, get(&s, "公約"), get(&s, "膏薬")]);
    }

    #[test]
    fn clipped_and_parsed() {
        let bg = [("a", 1), ("b", 1_000_000)];
        let s = UnigramShift::new([("a", 1.0), ("b", 1e-12)], bg, None, 1.0);
        assert!(s.get("a") <= CLIP && s.get("b") >= -CLIP);
        assert_eq!(parse_centibels("の\t128\nx\t200\n").unwrap()[1].1, 0.01);
        assert!(parse_centibels("の 128").unwrap_err().contains("line 1"));
    }

    #[test]
    fn written_shifts_read_back_and_corrupt_files_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(SHIFT_FILE);
        let bg = [("公約/こうやく", 1), ("膏薬/こうやく", 99)];
        let s = UnigramShift::new([("公約", 50.0), ("膏薬", 1.0)], bg, None, 0.8);
        s.write(&path).unwrap();
        let back = UnigramShift::read(&path).unwrap();
        assert_eq!((back.beta(), back.len()), (0.8, 2));
        assert_eq!(back.get("公約"), s.get("公約"));
        std::fs::write(&path, b"not gzip").unwrap();
        assert!(UnigramShift::read(&path)
            .unwrap_err()
            .to_string()
            .contains("gzip"));
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all("#beta\t1\n公約\tNaN\n".as_bytes()).unwrap();
        std::fs::write(&path, gz.finish().unwrap()).unwrap();
        assert!(UnigramShift::read(&path)
            .unwrap_err()
            .to_string()
            .contains("line 2"));
    }

    #[test]
    fn words_the_training_text_lacks_are_moved_against_the_unknown_class() {
        // Half the background's tokens are read as <unk>; ラズナー only the target knows.
        let bg = [("の/の", 50), ("猫/ねこ", 50)];
        let target = [("の", 50.0), ("猫", 50.0), ("ラズナー", 1.0), ("新語", 1.0)];
        let s = UnigramShift::new(target, bg, Some(0.5), 1.0);
        // p_target = 1/100 of the shared mass, p_background = 0.5 · p(w | <unk>) on the scale
        // where the shared displays' counts (+0.5 each) sum to 1: × 100 / 101.
        let v = (0.01f32).ln() - (0.5f32 * 100.0 / 101.0).ln();
        assert!((s.get_unseen("ラズナー", -4.0) - (v + 4.0)).abs() < 1e-5);
        assert_eq!(s.get_unseen("ラズナー", -40.0), CLIP, "clipped");
        assert_eq!(
            s.get_unseen("猫", -4.0),
            0.0,
            "a background word is not unseen"
        );
        let kana = s.unseen_katakana();
        assert_eq!(
            kana,
            [("らずなー".to_string(), "ラズナー")],
            "katakana only"
        );
        assert!(UnigramShift::new(target, bg, None, 1.0)
            .unseen_katakana()
            .is_empty());

        let spelling = crate::decode::Spelling::estimate(1, [("猫", 3u64)]);
        let mut lex = Lexicon::new();
        add_unseen_katakana(&mut lex, &spelling, &s);
        let before = lex.lookup("らずなー").next().unwrap().1.extra;
        assert_eq!(before, spelling.log_prob_word("ラズナー", 0));
        shift_unknown(&mut lex, 1, &s);
        assert!(lex.lookup("らずなー").next().unwrap().1.extra > before);

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(SHIFT_FILE);
        s.write(&path).unwrap();
        let back = UnigramShift::read(&path).unwrap();
        assert_eq!(
            back.get_unseen("ラズナー", -4.0),
            s.get_unseen("ラズナー", -4.0)
        );
        assert_eq!(back.get("猫"), s.get("猫"));
    }

    #[test]
    fn unknown_words_stay_a_distribution() {
        use crate::lattice::Word;
        let mut lex = Lexicon::new();
        for (r, d, p) in [("こうやく", "公約", 0.01f32), ("こうやく", "膏薬", 0.02)] {
            let extra = p.ln();
            lex.insert(
                r,
                Word {
                    display: d.into(),
                    lm_id: 1,
                    extra,
                },
            );
        }
        lex.insert(
            "の",
            Word {
                display: "の".into(),
                lm_id: 5,
                extra: 0.0,
            },
        );
        let bg = [("公約", 1), ("膏薬", 99), ("の", 10)];
        let s = UnigramShift::new([("公約", 50.0), ("膏薬", 1.0), ("の", 1.0)], bg, None, 1.0);
        shift_unknown(&mut lex, 1, &s);
        let words: Vec<_> = lex.lookup("こうやく").map(|(_, w)| w.extra.exp()).collect();
        assert!(words[0] > words[1], "公約 now above 膏薬: {words:?}");
        // p(· | <unk>) still sums to 1: the listed words' new mass plus the rest (0.97), both
        // divided by the same normaliser.
        let moved = 0.01 * s.get("公約").exp() + 0.02 * s.get("膏薬").exp();
        let z = 0.97 + moved;
        assert!((words.iter().sum::<f32>() - moved / z).abs() < 1e-5);
        assert_eq!(
            lex.lookup("の").next().unwrap().1.extra,
            0.0,
            "vocabulary words untouched"
        );
    }
}
