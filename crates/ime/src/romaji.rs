//! Romaji → hiragana as people type it: Hepburn (`shi`, `chi`, `tsu`, `ja`) and wāpuro
//! (`si`, `ti`, `tu`, `zya`) spellings, `nn`/`n'` and `n` before a consonant for ん, a doubled
//! consonant for っ, `x`/`l` for small kana, `-` for ー and the usual punctuation.
//!
//! [`Romaji`] converts key by key, as an IME does: letters that may still grow into kana wait in
//! [`Romaji::pending`] (`k` → `ky` → きゃ); letters that can never form kana are kept as typed,
//! so no input is lost and none panics. Kana and any other character pass through unchanged.

/// Spellings → kana, sorted by spelling (a test checks) for binary search.
const TABLE: &[(&str, &str)] = &[
    ("!", "！"),
    (",", "、"),
    ("-", "ー"),
    (".", "。"),
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
    ("kya", "きゃ"),
    ("kye", "きぇ"),
    ("kyi", "きぃ"),
    ("kyo", "きょ"),
    ("kyu", "きゅ"),
    ("la", "ぁ"),
    ("le", "ぇ"),
    ("li", "ぃ"),
    ("lo", "ぉ"),
    ("ltsu", "っ"),
    ("ltu", "っ"),
    ("lu", "ぅ"),
    ("lwa", "ゎ"),
    ("lya", "ゃ"),
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
    ("wa", "わ"),
    ("we", "うぇ"),
    ("wi", "うぃ"),
    ("wo", "を"),
    ("wu", "う"),
    ("xa", "ぁ"),
    ("xe", "ぇ"),
    ("xi", "ぃ"),
    ("xka", "ゕ"),
    ("xke", "ゖ"),
    ("xo", "ぉ"),
    ("xtsu", "っ"),
    ("xtu", "っ"),
    ("xu", "ぅ"),
    ("xwa", "ゎ"),
    ("xya", "ゃ"),
    ("xyo", "ょ"),
    ("xyu", "ゅ"),
    ("ya", "や"),
    ("ye", "いぇ"),
    ("yi", "い"),
    ("yo", "よ"),
    ("yu", "ゆ"),
    ("za", "ざ"),
    ("ze", "ぜ"),
    ("zi", "じ"),
    ("zo", "ぞ"),
    ("zu", "ず"),
    ("zya", "じゃ"),
    ("zye", "じぇ"),
    ("zyi", "じぃ"),
    ("zyo", "じょ"),
    ("zyu", "じゅ"),
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

/// Key-by-key romaji → kana. `kana` holds what is decided; `pending` the letters that may still
/// become kana (shown as typed until they do).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Romaji {
    kana: String,
    pending: String,
}

impl Romaji {
    pub fn new() -> Self {
        Self::default()
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

    /// One key. ASCII letters are matched case-insensitively; any character that is not part of
    /// a spelling (kana, kanji, digits, spaces) ends the pending letters and passes through.
    pub fn push(&mut self, key: char) {
        let key = key.to_ascii_lowercase();
        let spells = key.is_ascii_lowercase() || lookup(&key.to_string()).is_some() || key == '\'';
        if !spells {
            self.flush();
            self.kana.push(key);
            return;
        }
        self.pending.push(key);
        self.resolve();
    }

    /// Ends the input: a pending `n` becomes ん, other pending letters stay as typed. Returns
    /// the converted text and leaves the converter empty.
    pub fn finish(&mut self) -> String {
        self.flush();
        std::mem::take(&mut self.kana)
    }

    /// Removes the last key typed (a pending letter, or else the last kana character).
    pub fn backspace(&mut self) {
        if self.pending.pop().is_none() {
            self.kana.pop();
        }
    }

    /// Moves the pending letters to the kana: `n` as ん, the rest as typed (what Enter does
    /// before a conversion is committed).
    pub fn flush(&mut self) {
        if self.pending == "n" {
            self.kana.push('ん');
        } else {
            self.kana.push_str(&self.pending);
        }
        self.pending.clear();
    }

    /// Turns the front of `pending` into kana while it can be decided.
    fn resolve(&mut self) {
        while !self.pending.is_empty() {
            if let Some(kana) = lookup(&self.pending) {
                if !extends(&self.pending) || self.pending == "nn" {
                    self.kana.push_str(kana);
                    self.pending.clear();
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
                    self.kana.push('っ');
                }
                // `n` before a consonant: ん.
                Some(_) if first == 'n' => self.kana.push('ん'),
                // A letter no spelling starts with: kept as typed.
                _ => self.kana.push(first),
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
            ("KYOU", "きょう"),
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
}
