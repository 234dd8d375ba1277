//! Romaji → hiragana as people type it: Hepburn (`shi`, `chi`, `tsu`, `ja`) and wāpuro
//! (`si`, `ti`, `tu`, `zya`) spellings, `nn`/`n'`/`xn` and `n` before a consonant for ん, a
//! doubled consonant for っ, `x`/`l` for small kana, and Mozc's symbols.
//!
//! [`Romaji`] converts key by key, as an IME does: letters that may still grow into kana wait in
//! [`Romaji::pending`] (`k` → `ky` → きゃ); letters that can never form kana are kept as typed,
//! so no input is lost and none panics. Kana and any other character pass through unchanged.
//!
//! Symbols follow Mozc's default table and symbol style:
//!
//! | keys | kana | keys | kana | keys | kana |
//! | --- | --- | --- | --- | --- | --- |
//! | `-` | ー | `z-` | 〜 | `zh` | ← |
//! | `,` | 、 | `z,` | ‥ | `zj` | ↓ |
//! | `.` | 。 | `z.` | … | `zk` | ↑ |
//! | `/` | ・ | `z/` | ・ | `zl` | → |
//! | `[` `]` | 「 」 | `z[` `z]` | 『 』 | `~` | 〜 |
//! | `!` | ！ | `?` | ？ | | |
//!
//! Digits and the other symbols are not kana and stay as typed, in the [`Width`] set (half-width
//! by default; the lattice passes them through). Letters kept as typed never change width.
//!
//! A capital letter starts **direct input** (Mozc's, for words like `USB` or `Windows` typed
//! with Shift): it and every printable ASCII key after it (letters in either case, digits,
//! symbols) are kept exactly as typed, until a space ends direct input; that space inserts
//! nothing. Lowercase letters outside direct input are romaji.
//!
//! Each character of [`Romaji::kana`] remembers the keys that produced it ([`Romaji::raw`]), so
//! F9/F10 can show a segment as typed (きょう → `kyou`; see [`crate::chars::Transliteration`]).

use std::ops::Range;

use crate::chars::Width;

/// Spellings → kana, sorted by spelling (a test checks) for binary search: Mozc's default
/// romaji table (`romanji-hiragana.tsv`) with its symbols, the symbol style Mozc applies by
/// default (`/` → ・, `[` `]` → 「」, `!` `?` full-width) and a few spellings of its own
/// (`yi`, `tch`, small ゕ/ゖ where Mozc has ヵ/ヶ).
const TABLE: &[(&str, &str)] = &[
    ("!", "！"),
    (",", "、"),
    ("-", "ー"),
    (".", "。"),
    ("/", "・"),
    ("?", "？"),
    ("[", "「"),
    ("]", "」"),
    ("a", "あ"),
    ("ba", "ば"),
    ("be", "べ"),
    ("bi", "び"),
    ("bo", "ぼ"),
    ("bu", "ぶ"),
    ("bya", "びゃ"),
    ("bye", "びぇ"),
    ("byi", "びぃ"),
    ("byo", "びょ"),
    ("byu", "びゅ"),
    ("ca", "か"),
    ("ce", "せ"),
    ("cha", "ちゃ"),
    ("che", "ちぇ"),
    ("chi", "ち"),
    ("cho", "ちょ"),
    ("chu", "ちゅ"),
    ("ci", "し"),
    ("co", "こ"),
    ("cu", "く"),
    ("cya", "ちゃ"),
    ("cye", "ちぇ"),
    ("cyi", "ちぃ"),
    ("cyo", "ちょ"),
    ("cyu", "ちゅ"),
    ("d'i", "でぃ"),
    ("d'u", "どぅ"),
    ("d'yu", "でゅ"),
    ("da", "だ"),
    ("de", "で"),
    ("dha", "でゃ"),
    ("dhe", "でぇ"),
    ("dhi", "でぃ"),
    ("dho", "でょ"),
    ("dhu", "でゅ"),
    ("di", "ぢ"),
    ("do", "ど"),
    ("du", "づ"),
    ("dwa", "どぁ"),
    ("dwe", "どぇ"),
    ("dwi", "どぃ"),
    ("dwo", "どぉ"),
    ("dwu", "どぅ"),
    ("dya", "ぢゃ"),
    ("dye", "ぢぇ"),
    ("dyi", "ぢぃ"),
    ("dyo", "ぢょ"),
    ("dyu", "ぢゅ"),
    ("e", "え"),
    ("fa", "ふぁ"),
    ("fe", "ふぇ"),
    ("fi", "ふぃ"),
    ("fo", "ふぉ"),
    ("fu", "ふ"),
    ("fya", "ふゃ"),
    ("fyo", "ふょ"),
    ("fyu", "ふゅ"),
    ("ga", "が"),
    ("ge", "げ"),
    ("gi", "ぎ"),
    ("go", "ご"),
    ("gu", "ぐ"),
    ("gwa", "ぐぁ"),
    ("gya", "ぎゃ"),
    ("gye", "ぎぇ"),
    ("gyi", "ぎぃ"),
    ("gyo", "ぎょ"),
    ("gyu", "ぎゅ"),
    ("ha", "は"),
    ("he", "へ"),
    ("hi", "ひ"),
    ("ho", "ほ"),
    ("hu", "ふ"),
    ("hwa", "ふぁ"),
    ("hwe", "ふぇ"),
    ("hwi", "ふぃ"),
    ("hwo", "ふぉ"),
    ("hwyu", "ふゅ"),
    ("hya", "ひゃ"),
    ("hye", "ひぇ"),
    ("hyi", "ひぃ"),
    ("hyo", "ひょ"),
    ("hyu", "ひゅ"),
    ("i", "い"),
    ("ja", "じゃ"),
    ("je", "じぇ"),
    ("ji", "じ"),
    ("jo", "じょ"),
    ("ju", "じゅ"),
    ("jya", "じゃ"),
    ("jye", "じぇ"),
    ("jyi", "じぃ"),
    ("jyo", "じょ"),
    ("jyu", "じゅ"),
    ("ka", "か"),
    ("ke", "け"),
    ("ki", "き"),
    ("ko", "こ"),
    ("ku", "く"),
    ("kwa", "くぁ"),
    ("kwe", "くぇ"),
    ("kwi", "くぃ"),
    ("kwo", "くぉ"),
    ("kya", "きゃ"),
    ("kye", "きぇ"),
    ("kyi", "きぃ"),
    ("kyo", "きょ"),
    ("kyu", "きゅ"),
    ("la", "ぁ"),
    ("le", "ぇ"),
    ("li", "ぃ"),
    ("lka", "ゕ"),
    ("lke", "ゖ"),
    ("lo", "ぉ"),
    ("ltsu", "っ"),
    ("ltu", "っ"),
    ("lu", "ぅ"),
    ("lwa", "ゎ"),
    ("lya", "ゃ"),
    ("lye", "ぇ"),
    ("lyi", "ぃ"),
    ("lyo", "ょ"),
    ("lyu", "ゅ"),
    ("ma", "ま"),
    ("me", "め"),
    ("mi", "み"),
    ("mo", "も"),
    ("mu", "む"),
    ("mya", "みゃ"),
    ("mye", "みぇ"),
    ("myi", "みぃ"),
    ("myo", "みょ"),
    ("myu", "みゅ"),
    ("n'", "ん"),
    ("na", "な"),
    ("ne", "ね"),
    ("ni", "に"),
    ("nn", "ん"),
    ("no", "の"),
    ("nu", "ぬ"),
    ("nya", "にゃ"),
    ("nye", "にぇ"),
    ("nyi", "にぃ"),
    ("nyo", "にょ"),
    ("nyu", "にゅ"),
    ("o", "お"),
    ("pa", "ぱ"),
    ("pe", "ぺ"),
    ("pi", "ぴ"),
    ("po", "ぽ"),
    ("pu", "ぷ"),
    ("pya", "ぴゃ"),
    ("pye", "ぴぇ"),
    ("pyi", "ぴぃ"),
    ("pyo", "ぴょ"),
    ("pyu", "ぴゅ"),
    ("qa", "くぁ"),
    ("qe", "くぇ"),
    ("qi", "くぃ"),
    ("qo", "くぉ"),
    ("qu", "く"),
    ("ra", "ら"),
    ("re", "れ"),
    ("ri", "り"),
    ("ro", "ろ"),
    ("ru", "る"),
    ("rya", "りゃ"),
    ("rye", "りぇ"),
    ("ryi", "りぃ"),
    ("ryo", "りょ"),
    ("ryu", "りゅ"),
    ("sa", "さ"),
    ("se", "せ"),
    ("sha", "しゃ"),
    ("she", "しぇ"),
    ("shi", "し"),
    ("sho", "しょ"),
    ("shu", "しゅ"),
    ("si", "し"),
    ("so", "そ"),
    ("su", "す"),
    ("sya", "しゃ"),
    ("sye", "しぇ"),
    ("syi", "しぃ"),
    ("syo", "しょ"),
    ("syu", "しゅ"),
    ("t'i", "てぃ"),
    ("t'u", "とぅ"),
    ("t'yu", "てゅ"),
    ("ta", "た"),
    ("te", "て"),
    ("tha", "てゃ"),
    ("the", "てぇ"),
    ("thi", "てぃ"),
    ("tho", "てょ"),
    ("thu", "てゅ"),
    ("ti", "ち"),
    ("to", "と"),
    ("tsa", "つぁ"),
    ("tse", "つぇ"),
    ("tsi", "つぃ"),
    ("tso", "つぉ"),
    ("tsu", "つ"),
    ("tu", "つ"),
    ("twa", "とぁ"),
    ("twe", "とぇ"),
    ("twi", "とぃ"),
    ("two", "とぉ"),
    ("twu", "とぅ"),
    ("tya", "ちゃ"),
    ("tye", "ちぇ"),
    ("tyi", "ちぃ"),
    ("tyo", "ちょ"),
    ("tyu", "ちゅ"),
    ("u", "う"),
    ("va", "ゔぁ"),
    ("ve", "ゔぇ"),
    ("vi", "ゔぃ"),
    ("vo", "ゔぉ"),
    ("vu", "ゔ"),
    ("vya", "ゔゃ"),
    ("vye", "ゔぇ"),
    ("vyi", "ゔぃ"),
    ("vyo", "ゔょ"),
    ("vyu", "ゔゅ"),
    ("wa", "わ"),
    ("we", "うぇ"),
    ("wha", "うぁ"),
    ("whe", "うぇ"),
    ("whi", "うぃ"),
    ("who", "うぉ"),
    ("whu", "う"),
    ("wi", "うぃ"),
    ("wo", "を"),
    ("wu", "う"),
    ("wye", "ゑ"),
    ("wyi", "ゐ"),
    ("xa", "ぁ"),
    ("xe", "ぇ"),
    ("xi", "ぃ"),
    ("xka", "ゕ"),
    ("xke", "ゖ"),
    ("xn", "ん"),
    ("xo", "ぉ"),
    ("xtsu", "っ"),
    ("xtu", "っ"),
    ("xu", "ぅ"),
    ("xwa", "ゎ"),
    ("xya", "ゃ"),
    ("xye", "ぇ"),
    ("xyi", "ぃ"),
    ("xyo", "ょ"),
    ("xyu", "ゅ"),
    ("ya", "や"),
    ("ye", "いぇ"),
    ("yi", "い"),
    ("yo", "よ"),
    ("yu", "ゆ"),
    ("z,", "‥"),
    ("z-", "〜"),
    ("z.", "…"),
    ("z/", "・"),
    ("z[", "『"),
    ("z]", "』"),
    ("za", "ざ"),
    ("ze", "ぜ"),
    ("zh", "←"),
    ("zi", "じ"),
    ("zj", "↓"),
    ("zk", "↑"),
    ("zl", "→"),
    ("zo", "ぞ"),
    ("zu", "ず"),
    ("zya", "じゃ"),
    ("zye", "じぇ"),
    ("zyi", "じぃ"),
    ("zyo", "じょ"),
    ("zyu", "じゅ"),
    ("~", "〜"),
];

/// The kana of a complete spelling.
fn lookup(spelling: &str) -> Option<&'static str> {
    TABLE
        .binary_search_by(|(k, _)| (*k).cmp(spelling))
        .ok()
        .map(|i| TABLE[i].1)
}

/// Whether some longer spelling starts with `prefix`.
fn extends(prefix: &str) -> bool {
    let i = TABLE.partition_point(|(k, _)| *k <= prefix);
    TABLE.get(i).is_some_and(|(k, _)| k.starts_with(prefix))
}

fn is_vowel(c: char) -> bool {
    matches!(c, 'a' | 'i' | 'u' | 'e' | 'o')
}

/// Whether `s` is a spelling or the start of one.
fn spells(s: &str) -> bool {
    lookup(s).is_some() || extends(s)
}

/// Length in bytes of the common prefix of two ASCII spellings.
fn common_prefix(a: &str, b: &str) -> usize {
    a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
}

/// Key-by-key romaji → kana. `kana` holds what is decided; `pending` the letters that may still
/// become kana (shown as typed until they do).
///
/// Every character of `kana` has the keys that produced it (`keys[i]` for the `i`-th char):
/// a whole spelling goes to the first character it produced (`kya` → き `kya`, ゃ nothing),
/// the doubled letter to a っ (`kk` → っ `k`), and a character kept or passed through as typed
/// to itself (a digit typed `1` and shown `１` still has the key `1`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Romaji {
    kana: String,
    /// One entry per char of `kana`.
    keys: Vec<String>,
    pending: String,
    width: Width,
    /// While direct input is on: the char index in `kana` of the capital that started it.
    direct: Option<usize>,
}

impl Romaji {
    /// An empty converter with half-width digits and symbols.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty converter putting digits and unmapped symbols in `width`.
    pub fn with_width(width: Width) -> Self {
        Romaji {
            width,
            ..Self::default()
        }
    }

    /// Converts a whole input: every key, then [`Romaji::finish`].
    pub fn convert(input: &str) -> String {
        let mut r = Romaji::new();
        for c in input.chars() {
            r.push(c);
        }
        r.finish()
    }

    /// The kana decided so far.
    pub fn kana(&self) -> &str {
        &self.kana
    }

    /// Typed letters not yet kana.
    pub fn pending(&self) -> &str {
        &self.pending
    }

    /// What the user sees: the kana, then the pending letters.
    pub fn display(&self) -> String {
        format!("{}{}", self.kana, self.pending)
    }

    /// The width of digits and unmapped symbols.
    pub fn width(&self) -> Width {
        self.width
    }

    /// Sets the width of digits and unmapped symbols typed from now on (what is already in
    /// [`Romaji::kana`] keeps its width).
    pub fn set_width(&mut self, width: Width) {
        self.width = width;
    }

    /// Whether direct input is on: a capital letter was typed and no space since, so keys are
    /// kept as typed.
    pub fn is_direct(&self) -> bool {
        self.direct.is_some()
    }

    /// The keys typed for the chars `range` of [`Romaji::kana`] (char indices, clamped to the
    /// kana; an empty or reversed range gives ""). A spelling's keys belong to the first char it
    /// produced: for きゃ typed `kya`, `raw(0..1)` is `kya` and `raw(1..2)` is empty, so a range
    /// that splits a spelling takes its keys only if it holds the spelling's first char. The
    /// whole input as typed is `raw(0..n)` followed by [`Romaji::pending`].
    pub fn raw(&self, range: Range<usize>) -> String {
        let end = range.end.min(self.keys.len());
        let start = range.start.min(end);
        self.keys[start..end].concat()
    }

    /// One key.
    ///
    /// - Outside direct input: a lowercase letter or a key that continues a spelling (`z` then
    ///   `.` for …) is romaji; a capital letter flushes the pending letters and starts direct
    ///   input; any other character (digits, symbols no spelling has, kana, kanji, space,
    ///   control characters) flushes the pending letters and passes through, ASCII ones in
    ///   [`Romaji::width`].
    /// - In direct input: a space ends it and inserts nothing; anything else is kept exactly as
    ///   typed.
    pub fn push(&mut self, key: char) {
        if self.direct.is_some() {
            if key == ' ' {
                self.direct = None;
            } else {
                self.append(&key.to_string(), &key.to_string());
            }
            return;
        }
        if key.is_ascii_uppercase() {
            self.flush();
            self.direct = Some(self.keys.len());
            self.append(&key.to_string(), &key.to_string());
            return;
        }
        let mut grown = self.pending.clone();
        grown.push(key);
        let romaji = key.is_ascii_lowercase() || spells(&grown) || spells(&key.to_string());
        if !romaji {
            self.flush();
            self.as_typed(key);
            return;
        }
        self.pending = grown;
        self.resolve();
    }

    /// Ends the input: a pending `n` becomes ん, other pending letters stay as typed, direct
    /// input ends. Returns the converted text and leaves the converter empty (its width kept).
    pub fn finish(&mut self) -> String {
        self.flush();
        self.keys.clear();
        self.direct = None;
        std::mem::take(&mut self.kana)
    }

    /// Removes the last key typed (a pending letter, or else the last kana character with its
    /// keys). Removing the capital that started direct input ends it. Removing the second char
    /// of a spelling (ゃ of きゃ) leaves the first with the table's spelling of what remains,
    /// closest to the keys typed (き: `ki`), so F9/F10 still show romaji for it.
    pub fn backspace(&mut self) {
        if self.pending.pop().is_some() {
            return;
        }
        if self.kana.pop().is_none() {
            return;
        }
        let removed = self.keys.pop().unwrap_or_default();
        if self.direct.is_some_and(|start| self.keys.len() <= start) {
            self.direct = None;
        }
        if removed.is_empty() {
            self.respell_last();
        }
    }

    /// Moves the pending letters to the kana: `n` as ん, the rest as typed (what Enter does
    /// before a conversion is committed).
    pub fn flush(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        if pending == "n" {
            self.append("ん", "n");
        } else {
            for c in pending.chars() {
                self.as_typed(c);
            }
        }
    }

    /// Appends `text` to the kana, `keys` going to its first char.
    fn append(&mut self, text: &str, keys: &str) {
        for (i, c) in text.chars().enumerate() {
            self.kana.push(c);
            self.keys.push(if i == 0 {
                keys.to_string()
            } else {
                String::new()
            });
        }
    }

    /// A key that is not kana: kept, ASCII digits and symbols in the width set.
    fn as_typed(&mut self, key: char) {
        // The width applies to the keyboard's digits and symbols; text already written
        // (kana, full-width symbols pasted or typed by another method) stays as it is.
        let shown = if key.is_ascii_alphabetic() || !key.is_ascii() {
            key
        } else {
            self.width.apply(key)
        };
        self.append(&shown.to_string(), &key.to_string());
    }

    /// After the tail of a spelling was removed: gives the chars left of it the spelling whose
    /// kana they are, the one sharing most of the keys typed (`sha` less ゃ → `shi`, not `si`).
    /// Without such a spelling the keys stay.
    fn respell_last(&mut self) {
        let Some(head) = self.keys.iter().rposition(|k| !k.is_empty()) else {
            return;
        };
        let Some((byte, _)) = self.kana.char_indices().nth(head) else {
            return;
        };
        let left = &self.kana[byte..];
        let typed = &self.keys[head];
        let best = TABLE
            .iter()
            .filter(|(_, kana)| *kana == left)
            .max_by_key(|(k, _)| (common_prefix(k, typed), std::cmp::Reverse(k.len())));
        if let Some((spelling, _)) = best {
            self.keys[head] = (*spelling).to_string();
        }
    }

    /// Turns the front of `pending` into kana while it can be decided.
    fn resolve(&mut self) {
        while !self.pending.is_empty() {
            if let Some(kana) = lookup(&self.pending) {
                if !extends(&self.pending) || self.pending == "nn" {
                    let keys = std::mem::take(&mut self.pending);
                    self.append(kana, &keys);
                }
                return;
            }
            if extends(&self.pending) {
                return;
            }
            let mut chars = self.pending.chars();
            let (first, second) = (chars.next().unwrap_or(' '), chars.next());
            match second {
                // `kk` → っ + `k`; `tch` (Hepburn) → っ + `ch`.
                Some(s)
                    if first.is_ascii_lowercase()
                        && !is_vowel(first)
                        && first != 'n'
                        && (s == first || (first == 't' && s == 'c')) =>
                {
                    self.append("っ", &first.to_string());
                }
                // `n` before a consonant: ん.
                Some(_) if first == 'n' => self.append("ん", "n"),
                // A key no spelling starts with: kept as typed.
                _ => self.as_typed(first),
            }
            self.pending.remove(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_and_unique() {
        for w in TABLE.windows(2) {
            assert!(w[0].0 < w[1].0, "{} before {}", w[0].0, w[1].0);
        }
    }

    /// Inputs as people type them, against the kana an IME shows.
    #[test]
    fn converts_typed_words() {
        for (romaji, kana) in [
            ("kyou", "きょう"),
            ("kyouhaiitenkidesune", "きょうはいいてんきですね"),
            ("toukyou", "とうきょう"),
            ("shinbun", "しんぶん"),
            ("sinbun", "しんぶん"),
            ("konnnichiha", "こんにちは"),
            ("konnichiha", "こんいちは"),
            ("kon'nichiha", "こんにちは"),
            ("nihon", "にほん"),
            ("nn", "ん"),
            ("kitte", "きって"),
            ("matcha", "まっちゃ"),
            ("maccha", "まっちゃ"),
            ("zasshi", "ざっし"),
            ("tsukue", "つくえ"),
            ("tukue", "つくえ"),
            ("chiisai", "ちいさい"),
            ("tiisai", "ちいさい"),
            ("jisho", "じしょ"),
            ("zisyo", "じしょ"),
            ("fujisan", "ふじさん"),
            ("huzisan", "ふじさん"),
            ("ra-men", "らーめん"),
            ("ko-hi-", "こーひー"),
            ("wo", "を"),
            ("xtu", "っ"),
            ("ltsu", "っ"),
            ("kanji,kana.", "かんじ、かな。"),
            ("pi-man", "ぴーまん"),
            ("vaiorin", "ゔぁいおりん"),
            ("di", "ぢ"),
            ("dhi", "でぃ"),
            ("shin'you", "しんよう"),
            ("shinyou", "しにょう"),
            // `nn` is ん (Mozc's table), so な after ん takes three n.
            ("annnai", "あんない"),
            ("onna", "おんあ"),
        ] {
            assert_eq!(Romaji::convert(romaji), kana, "{romaji}");
        }
    }

    #[test]
    fn keeps_what_is_not_romaji() {
        // Letters no spelling starts with stay as typed; kana and other text pass through.
        assert_eq!(Romaji::convert("qqq"), "っっq");
        assert_eq!(Romaji::convert("k"), "k");
        assert_eq!(Romaji::convert("ky"), "ky");
        assert_eq!(Romaji::convert("x"), "x");
        assert_eq!(Romaji::convert("kaxz"), "かxz");
        assert_eq!(Romaji::convert("きょうha"), "きょうは");
        assert_eq!(Romaji::convert("12ji"), "12じ");
        assert_eq!(Romaji::convert("ka ki"), "か き");
        assert_eq!(Romaji::convert(""), "");
        assert_eq!(Romaji::convert("n"), "ん");
        assert_eq!(Romaji::convert("@#$"), "@#$");
    }

    #[test]
    fn shows_pending_letters_key_by_key() {
        let mut r = Romaji::new();
        let shown: Vec<String> = "kyon"
            .chars()
            .map(|c| {
                r.push(c);
                r.display()
            })
            .collect();
        assert_eq!(shown, ["k", "ky", "きょ", "きょn"]);
        assert_eq!((r.kana(), r.pending()), ("きょ", "n"));
        r.push('o');
        assert_eq!(r.display(), "きょの");
        r.backspace();
        assert_eq!(r.display(), "きょ");
        r.push('k');
        r.backspace();
        assert_eq!(r.display(), "きょ");
        assert_eq!(r.finish(), "きょ");
        assert_eq!(r.display(), "");
    }

    #[test]
    fn converts_mozc_symbols() {
        for (keys, kana) in [
            ("/", "・"),
            ("~", "〜"),
            ("[", "「"),
            ("]", "」"),
            (",", "、"),
            (".", "。"),
            ("-", "ー"),
            ("!", "！"),
            ("?", "？"),
            ("z.", "…"),
            ("z,", "‥"),
            ("z/", "・"),
            ("z-", "〜"),
            ("zh", "←"),
            ("zj", "↓"),
            ("zk", "↑"),
            ("zl", "→"),
            ("z[", "『"),
            ("z]", "』"),
            ("xn", "ん"),
            ("ltu", "っ"),
            ("xtu", "っ"),
            ("xya", "ゃ"),
            ("lyi", "ぃ"),
            ("xye", "ぇ"),
            ("t'i", "てぃ"),
            ("d'yu", "でゅ"),
            ("wha", "うぁ"),
            ("wwa", "っわ"),
            ("[kagi]", "「かぎ」"),
            ("sorekaraz.", "それから…"),
            ("honnz[", "ほん『"),
            ("kaxnki", "かんき"),
            ("nz.", "ん…"),
            ("ez1", "えz1"),
            ("e?!", "え？！"),
            ("k.", "k。"),
            ("t'a", "t'あ"),
        ] {
            assert_eq!(Romaji::convert(keys), kana, "{keys}");
        }
    }

    #[test]
    fn digits_and_symbols_take_the_width_set() {
        assert_eq!(Romaji::new().width(), Width::Half);
        assert_eq!(Romaji::convert("12ji@#$%"), "12じ@#$%");
        let mut r = Romaji::with_width(Width::Full);
        for c in "12ji@ka'n (x)".chars() {
            r.push(c);
        }
        // Letters kept as typed (`x`) stay ASCII; digits, symbols and space go full-width.
        assert_eq!(r.display(), "１２じ＠か＇ん\u{3000}（x）");
        assert_eq!(r.raw(0..2), "12");
        assert_eq!(r.raw(0..20), "12ji@ka'n (x)");
        r.set_width(Width::Half);
        r.push('3');
        assert_eq!(r.finish(), "１２じ＠か＇ん\u{3000}（x）3");
        assert_eq!(r.width(), Width::Half);
        // Text already written keeps its width: full-width symbols stay full-width at Half,
        // half-width katakana stays as it is at Full.
        assert_eq!(Romaji::convert("（かっこ）！"), "（かっこ）！");
        let mut r = Romaji::with_width(Width::Full);
        r.push('ｶ');
        assert_eq!(r.finish(), "ｶ");
    }

    #[test]
    fn capitals_start_direct_input_until_a_space() {
        for (keys, text) in [
            ("KYOU", "KYOU"),
            ("USB ke-buru", "USBけーぶる"),
            ("iPhone", "いPhone"),
            ("Windows10 desu", "Windows10です"),
            ("U.S.A. kara", "U.S.A.から"),
            ("nU", "んU"),
            ("kU", "kU"),
            ("ka ki", "か き"),
            ("A  a", "A あ"),
        ] {
            assert_eq!(Romaji::convert(keys), text, "{keys}");
        }
        let mut r = Romaji::new();
        r.push('k');
        assert!(!r.is_direct());
        r.push('U');
        assert!(r.is_direct());
        assert_eq!((r.kana(), r.pending()), ("kU", ""));
        r.push('s');
        r.push('b');
        assert_eq!(r.raw(0..4), "kUsb");
        r.push(' ');
        assert!(!r.is_direct());
        assert_eq!(r.kana(), "kUsb");
        r.push('a');
        assert_eq!(r.kana(), "kUsbあ");

        // Backspace over the capital ends direct input; over a later key it does not.
        let mut r = Romaji::new();
        for c in "kaAb".chars() {
            r.push(c);
        }
        r.backspace();
        assert!(r.is_direct());
        r.push('c');
        assert_eq!(r.kana(), "かAc");
        r.backspace();
        r.backspace();
        assert!(!r.is_direct());
        r.push('s');
        r.push('u');
        assert_eq!(r.kana(), "かす");
        r.push('X');
        assert_eq!(r.finish(), "かすX");
        assert!(!r.is_direct());
    }

    /// The raw keys of each char of `r.kana()`.
    fn raws(r: &Romaji) -> Vec<String> {
        (0..r.kana().chars().count())
            .map(|i| r.raw(i..i + 1))
            .collect()
    }

    fn typed(keys: &str) -> Romaji {
        let mut r = Romaji::new();
        for c in keys.chars() {
            r.push(c);
        }
        r
    }

    #[test]
    fn remembers_the_keys_of_each_kana() {
        let r = typed("kyouha");
        assert_eq!(r.kana(), "きょうは");
        assert_eq!(raws(&r), ["kyo", "", "u", "ha"]);
        assert_eq!(r.raw(0..3), "kyou");
        assert_eq!(r.raw(1..2), "");
        assert_eq!(r.raw(1..3), "u");
        assert_eq!(r.raw(0..100), "kyouha");
        assert_eq!(r.raw(Range { start: 3, end: 1 }), "");
        assert_eq!(r.raw(50..60), "");
        assert_eq!(raws(&typed("kitte")), ["ki", "t", "te"]);
        assert_eq!(raws(&typed("matcha")), ["ma", "t", "cha", ""]);
        assert_eq!(raws(&typed("konnnichiha")), ["ko", "nn", "ni", "chi", "ha"]);
        assert_eq!(raws(&typed("kon'nichiha")), ["ko", "n'", "ni", "chi", "ha"]);
        assert_eq!(raws(&typed("shinbun")), ["shi", "n", "bu"]);
        assert_eq!(raws(&typed("z.Ab12")), ["z.", "A", "b", "1", "2"]);
        assert_eq!(raws(&typed("qqa")), ["q", "qa", ""]);
        assert_eq!(raws(&typed("きx")), ["き"]);
        let r = typed("sensei");
        assert_eq!((r.kana(), r.raw(0..4)), ("せんせい", "sensei".to_string()));
        // A pending letter is not in the kana yet: its key is in `pending`.
        let r = typed("kan");
        assert_eq!((r.raw(0..1), r.pending()), ("ka".to_string(), "n"));
    }

    #[test]
    fn backspace_keeps_the_keys_in_step() {
        let mut r = typed("kyouha");
        r.backspace();
        assert_eq!((r.kana(), r.raw(0..9)), ("きょう", "kyou".to_string()));
        // The tail of a spelling: what is left takes the spelling closest to the keys typed.
        for (keys, left, raw) in [
            ("kya", "き", "ki"),
            ("sha", "し", "shi"),
            ("sya", "し", "si"),
            ("qa", "く", "qu"),
            ("ye", "い", "yi"),
            ("va", "ゔ", "vu"),
            ("twu", "と", "to"),
            ("fa", "ふ", "fu"),
        ] {
            let mut r = typed(keys);
            r.backspace();
            assert_eq!((r.kana(), r.raw(0..1)), (left, raw.to_string()), "{keys}");
        }
        let mut r = typed("ky");
        r.backspace();
        assert_eq!(
            (r.kana(), r.pending(), r.raw(0..1)),
            ("", "k", String::new())
        );
        r.backspace();
        r.backspace();
        assert_eq!(r.display(), "");
    }

    /// splitmix64: the seeded source of the random keys.
    fn next(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Random keys (letters of both cases, digits, every ASCII symbol, space, kana, control
    /// characters, backspace): nothing panics, and the keys stay accounted for. After a key,
    /// `raw(0..n)` + `pending` is what it was plus that key, except a space that ends direct
    /// input (it inserts nothing). A backspace removes the last pending key, or the last char
    /// with its keys; removing a spelling's tail may respell its head with a spelling of the
    /// kana left.
    #[test]
    fn random_keys_keep_their_keys() {
        let mut pool: Vec<Option<char>> = Vec::new();
        for c in ('a'..='z').chain("aiueonnkstyhx".chars()) {
            pool.extend([Some(c), Some(c)]);
        }
        pool.extend("AKNUZ0159 \n\u{3000}きカ漢é".chars().map(Some));
        pool.extend(
            (b'!'..=b'~')
                .filter(u8::is_ascii_punctuation)
                .map(|b| Some(b as char)),
        );
        pool.extend([None, None, None, None]);
        let mut state = 37u64;
        for round in 0..3000 {
            let width = if round % 2 == 0 {
                Width::Half
            } else {
                Width::Full
            };
            let mut r = Romaji::with_width(width);
            let len = (next(&mut state) % 40) as usize;
            let mut keys = String::new();
            for _ in 0..len {
                let key = pool[(next(&mut state) % pool.len() as u64) as usize];
                let before = raws(&r);
                let (kana, pending, direct) =
                    (r.kana().to_string(), r.pending().to_string(), r.is_direct());
                match key {
                    Some(c) => {
                        keys.push(c);
                        r.push(c);
                        let mut expected = before.concat() + &pending;
                        if !(direct && c == ' ') {
                            expected.push(c);
                        }
                        assert_eq!(r.raw(0..usize::MAX) + r.pending(), expected, "{keys:?}");
                    }
                    None => {
                        keys.push('⌫');
                        r.backspace();
                        let after = raws(&r);
                        if !pending.is_empty() {
                            assert_eq!((r.kana(), &after), (kana.as_str(), &before), "{keys:?}");
                            assert_eq!(r.pending(), &pending[..pending.len() - 1], "{keys:?}");
                        } else if !before.is_empty() {
                            let n = after.len();
                            assert_eq!(n, before.len() - 1, "{keys:?}");
                            assert!(kana.starts_with(r.kana()), "{keys:?}");
                            for i in 0..n {
                                if after[i] != before[i] {
                                    // A respelled head: the tail removed had no keys, and the
                                    // new spelling spells the kana from here on.
                                    assert!(before[n].is_empty(), "{keys:?}");
                                    let rest: String = r.kana().chars().skip(i).collect();
                                    assert_eq!(lookup(&after[i]), Some(rest.as_str()), "{keys:?}");
                                }
                            }
                        }
                    }
                }
                let n = r.kana().chars().count();
                let each: String = (0..n).map(|i| r.raw(i..i + 1)).collect();
                assert_eq!(r.raw(0..n), each, "{keys:?}");
                assert_eq!(r.display(), format!("{}{}", r.kana(), r.pending()));
                assert!(r.pending().is_ascii(), "{keys:?}");
                assert!(!r.is_direct() || r.pending().is_empty(), "{keys:?}");
                // A char without keys is the tail of a spelling, after its head.
                assert!(raws(&r).first().is_none_or(|k| !k.is_empty()), "{keys:?}");
            }
            // Finishing shows what was shown, a pending `n` as ん (with width, a pending `'`
            // kept as typed may widen).
            let shown = r.display();
            let pending_n = r.pending() == "n";
            let flushed = r.finish();
            if width == Width::Half {
                let want = if pending_n {
                    format!("{}ん", &shown[..shown.len() - 1])
                } else {
                    shown
                };
                assert_eq!(flushed, want, "{keys:?}");
            }
            assert_eq!(
                (r.display(), r.is_direct(), r.raw(0..9)),
                (String::new(), false, String::new())
            );
        }
    }
}
