//! Character forms an input method switches between: hiragana, katakana, half-width katakana,
//! full- and half-width ASCII.
//!
//! These are what the function keys do to the focused segment, as in Mozc (and MS-IME before
//! it): F6 hiragana, F7 katakana, F8 half-width katakana, F9 full-width and F10 half-width
//! alphanumerics ([`Transliteration`]). F6–F8 rewrite the segment's reading; F9 and F10 start
//! from the keys typed for it (Mozc keeps them beside the kana: きょう typed as `kyou` becomes
//! `ｋｙｏｕ` / `kyou`), since romaji cannot be recovered from kana unambiguously (し: `si` or
//! `shi`), which is why [`crate::romaji::Romaji::raw`] exists.
//!
//! [`Width`] is the preedit setting for the digits and symbols the romaji table leaves as typed
//! (Mozc shows them full-width by default; ours keeps them half-width unless asked).
//!
//! Every function is total: characters a conversion has no form for pass through unchanged.

/// Full-width katakana (and the kana punctuation) → half-width katakana. Voiced and
/// semi-voiced kana become the base kana and a separate ﾞ or ﾟ, since half-width katakana has
/// no precomposed forms. Where two full-width kana share one half-width form (ワ and ヮ, イ and
/// ヰ), the common kana comes first: reading half-width back takes the first match.
const HALF_KATAKANA: &[(char, &str)] = &[
    ('ァ', "ｧ"),
    ('ア', "ｱ"),
    ('ィ', "ｨ"),
    ('イ', "ｲ"),
    ('ゥ', "ｩ"),
    ('ウ', "ｳ"),
    ('ェ', "ｪ"),
    ('エ', "ｴ"),
    ('ォ', "ｫ"),
    ('オ', "ｵ"),
    ('カ', "ｶ"),
    ('ガ', "ｶﾞ"),
    ('キ', "ｷ"),
    ('ギ', "ｷﾞ"),
    ('ク', "ｸ"),
    ('グ', "ｸﾞ"),
    ('ケ', "ｹ"),
    ('ゲ', "ｹﾞ"),
    ('コ', "ｺ"),
    ('ゴ', "ｺﾞ"),
    ('サ', "ｻ"),
    ('ザ', "ｻﾞ"),
    ('シ', "ｼ"),
    ('ジ', "ｼﾞ"),
    ('ス', "ｽ"),
    ('ズ', "ｽﾞ"),
    ('セ', "ｾ"),
    ('ゼ', "ｾﾞ"),
    ('ソ', "ｿ"),
    ('ゾ', "ｿﾞ"),
    ('タ', "ﾀ"),
    ('ダ', "ﾀﾞ"),
    ('チ', "ﾁ"),
    ('ヂ', "ﾁﾞ"),
    ('ッ', "ｯ"),
    ('ツ', "ﾂ"),
    ('ヅ', "ﾂﾞ"),
    ('テ', "ﾃ"),
    ('デ', "ﾃﾞ"),
    ('ト', "ﾄ"),
    ('ド', "ﾄﾞ"),
    ('ナ', "ﾅ"),
    ('ニ', "ﾆ"),
    ('ヌ', "ﾇ"),
    ('ネ', "ﾈ"),
    ('ノ', "ﾉ"),
    ('ハ', "ﾊ"),
    ('バ', "ﾊﾞ"),
    ('パ', "ﾊﾟ"),
    ('ヒ', "ﾋ"),
    ('ビ', "ﾋﾞ"),
    ('ピ', "ﾋﾟ"),
    ('フ', "ﾌ"),
    ('ブ', "ﾌﾞ"),
    ('プ', "ﾌﾟ"),
    ('ヘ', "ﾍ"),
    ('ベ', "ﾍﾞ"),
    ('ペ', "ﾍﾟ"),
    ('ホ', "ﾎ"),
    ('ボ', "ﾎﾞ"),
    ('ポ', "ﾎﾟ"),
    ('マ', "ﾏ"),
    ('ミ', "ﾐ"),
    ('ム', "ﾑ"),
    ('メ', "ﾒ"),
    ('モ', "ﾓ"),
    ('ャ', "ｬ"),
    ('ヤ', "ﾔ"),
    ('ュ', "ｭ"),
    ('ユ', "ﾕ"),
    ('ョ', "ｮ"),
    ('ヨ', "ﾖ"),
    ('ラ', "ﾗ"),
    ('リ', "ﾘ"),
    ('ル', "ﾙ"),
    ('レ', "ﾚ"),
    ('ロ', "ﾛ"),
    ('ワ', "ﾜ"),
    ('ヲ', "ｦ"),
    ('ン', "ﾝ"),
    ('ヴ', "ｳﾞ"),
    ('ヷ', "ﾜﾞ"),
    ('ヺ', "ｦﾞ"),
    ('ー', "ｰ"),
    ('。', "｡"),
    ('「', "｢"),
    ('」', "｣"),
    ('、', "､"),
    ('・', "･"),
    ('゛', "ﾞ"),
    ('゜', "ﾟ"),
    // No half-width forms of their own: the nearest kana (Mozc does the same).
    ('ヮ', "ﾜ"),
    ('ヰ', "ｲ"),
    ('ヱ', "ｴ"),
    ('ヵ', "ｶ"),
    ('ヶ', "ｹ"),
];

/// Offset from a hiragana to its katakana (ぁ U+3041 → ァ U+30A1).
const KANA_OFFSET: u32 = 0x60;

/// Offset from an ASCII character to its full-width form (`!` U+0021 → `！` U+FF01).
const WIDE_OFFSET: u32 = 0xFEE0;

/// Hiragana → katakana; everything else unchanged.
fn katakana_char(c: char) -> char {
    match c {
        // ぁ..ゖ and ゝゞ: the katakana block has the same layout.
        '\u{3041}'..='\u{3096}' | 'ゝ' | 'ゞ' => {
            char::from_u32(c as u32 + KANA_OFFSET).unwrap_or(c)
        }
        _ => c,
    }
}

/// Katakana → hiragana where hiragana has the kana (ヷ..ヺ have none); everything else
/// unchanged.
fn hiragana_char(c: char) -> char {
    match c {
        '\u{30A1}'..='\u{30F6}' | 'ヽ' | 'ヾ' => {
            char::from_u32(c as u32 - KANA_OFFSET).unwrap_or(c)
        }
        _ => c,
    }
}

/// ASCII `!`..`~` → U+FF01..U+FF5E, space → ideographic space U+3000.
fn fullwidth_char(c: char) -> char {
    match c {
        '!'..='~' => char::from_u32(c as u32 + WIDE_OFFSET).unwrap_or(c),
        ' ' => '\u{3000}',
        _ => c,
    }
}

/// U+FF01..U+FF5E → ASCII `!`..`~`, ideographic space → space.
fn halfwidth_char(c: char) -> char {
    match c {
        '\u{FF01}'..='\u{FF5E}' => char::from_u32(c as u32 - WIDE_OFFSET).unwrap_or(c),
        '\u{3000}' => ' ',
        _ => c,
    }
}

fn is_halfwidth_katakana(c: char) -> bool {
    // ｡ U+FF61 .. ﾟ U+FF9F: the half-width katakana block with its punctuation.
    ('\u{FF61}'..='\u{FF9F}').contains(&c)
}

/// Half-width katakana → full-width, a base kana and its ﾞ/ﾟ composed into one (ｶﾞ → ガ; a
/// mark no kana takes stays a separate ゛/゜). Everything else unchanged.
fn compose_halfwidth_katakana(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if !is_halfwidth_katakana(c) {
            out.push(c);
            i += 1;
            continue;
        }
        let find = |half: &str| HALF_KATAKANA.iter().find(|(_, h)| *h == half);
        let pair: Option<String> = chars.get(i + 1).map(|&m| [c, m].iter().collect());
        if let Some(&(full, _)) = pair.as_deref().and_then(find) {
            out.push(full);
            i += 2;
            continue;
        }
        match find(&c.to_string()) {
            Some(&(full, _)) => out.push(full),
            None => out.push(c),
        }
        i += 1;
    }
    out
}

/// Hiragana (and half-width katakana) → full-width katakana: `きょう` → `キョウ`. Kanji,
/// ASCII and the rest pass through.
pub fn to_katakana(s: &str) -> String {
    compose_halfwidth_katakana(s)
        .chars()
        .map(katakana_char)
        .collect()
}

/// Katakana (full- or half-width) → hiragana: `キョウ` → `きょう`, `ｶﾞｽ` → `がす`. ヷ..ヺ, which
/// hiragana lacks, stay katakana.
pub fn to_hiragana(s: &str) -> String {
    compose_halfwidth_katakana(s)
        .chars()
        .map(hiragana_char)
        .collect()
}

/// Kana → half-width katakana: `がっこう` → `ｶﾞｯｺｳ`, `ー。「」、・` → `ｰ｡｢｣､･`. The rest
/// becomes half-width too where it has such a form (`１２` → `12`, as Mozc's F8 makes the whole
/// segment half-width); kanji pass through.
pub fn to_halfwidth_katakana(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        let k = katakana_char(c);
        match HALF_KATAKANA.iter().find(|(full, _)| *full == k) {
            Some((_, half)) => out.push_str(half),
            None => out.push(halfwidth_char(c)),
        }
    }
    out
}

/// ASCII → full-width (`kyou` → `ｋｙｏｕ`; space → U+3000); the rest unchanged.
pub fn to_fullwidth_ascii(s: &str) -> String {
    s.chars().map(fullwidth_char).collect()
}

/// Full-width ASCII → ASCII (`ｋｙｏｕ` → `kyou`; U+3000 → space); the rest unchanged.
pub fn to_halfwidth_ascii(s: &str) -> String {
    s.chars().map(halfwidth_char).collect()
}

/// The width digits and unmapped symbols take in the preedit (Mozc's "全角/半角" of the input
/// mode). Half-width is the default here: it is what the decoder has always seen, and the
/// lattice passes digits through as they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Width {
    /// `1` → `１`, `@` → `＠`, space → U+3000.
    Full,
    /// As typed (and full-width ASCII back to ASCII).
    #[default]
    Half,
}

impl Width {
    /// `c` in this width when it has a form there (ASCII `!`..`~` and space ↔ U+FF01..U+FF5E and
    /// U+3000); any other character unchanged.
    pub fn apply(self, c: char) -> char {
        match self {
            Width::Full => fullwidth_char(c),
            Width::Half => halfwidth_char(c),
        }
    }

    /// [`Width::apply`] over a string.
    pub fn convert(self, s: &str) -> String {
        s.chars().map(|c| self.apply(c)).collect()
    }
}

/// What the function keys F6–F10 turn the focused segment into (Mozc's transliterations).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transliteration {
    /// F6: ひらがな.
    Hiragana,
    /// F7: カタカナ.
    Katakana,
    /// F8: ﾊﾝｶｸｶﾀｶﾅ.
    HalfKatakana,
    /// F9: ｆｕｌｌ－ｗｉｄｔｈ the keys typed.
    FullAscii,
    /// F10: the keys typed, half-width.
    HalfAscii,
}

impl Transliteration {
    /// All of them in function-key order (F6..F10).
    pub const ALL: [Transliteration; 5] = [
        Transliteration::Hiragana,
        Transliteration::Katakana,
        Transliteration::HalfKatakana,
        Transliteration::FullAscii,
        Transliteration::HalfAscii,
    ];

    /// F`n` → its transliteration; `None` for keys other than F6..F10.
    pub fn from_function_key(n: u8) -> Option<Self> {
        match n {
            6..=10 => Some(Self::ALL[usize::from(n - 6)]),
            _ => None,
        }
    }

    /// The function key (6..=10) that asks for it.
    pub fn function_key(self) -> u8 {
        match self {
            Transliteration::Hiragana => 6,
            Transliteration::Katakana => 7,
            Transliteration::HalfKatakana => 8,
            Transliteration::FullAscii => 9,
            Transliteration::HalfAscii => 10,
        }
    }

    /// The segment in this form. F6–F8 convert `reading` (the kana, as
    /// [`crate::romaji::Romaji::kana`] holds it); F9/F10 convert `raw`, the keys typed for it
    /// ([`crate::romaji::Romaji::raw`]). As in Mozc, F6 and F7 also widen ASCII (digits typed
    /// half-width become `１２`) and F8 narrows it, so each form is wholly full- or half-width.
    pub fn apply(self, reading: &str, raw: &str) -> String {
        match self {
            Transliteration::Hiragana => to_hiragana(&to_fullwidth_ascii(reading)),
            Transliteration::Katakana => to_katakana(&to_fullwidth_ascii(reading)),
            Transliteration::HalfKatakana => to_halfwidth_katakana(reading),
            Transliteration::FullAscii => to_fullwidth_ascii(raw),
            Transliteration::HalfAscii => to_halfwidth_ascii(raw),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hiragana_and_katakana() {
        assert_eq!(to_katakana("きょうはいいてんき"), "キョウハイイテンキ");
        assert_eq!(to_katakana("ゔぁいおりん"), "ヴァイオリン");
        assert_eq!(to_katakana("こーひー、ください。"), "コーヒー、クダサイ。");
        assert_eq!(to_katakana("ゕゖゝゞ"), "ヵヶヽヾ");
        assert_eq!(to_katakana("漢字とabc12"), "漢字トabc12");
        assert_eq!(to_katakana("ｶﾞｯｺｳ"), "ガッコウ");
        assert_eq!(to_hiragana("コンピューター"), "こんぴゅーたー");
        assert_eq!(to_hiragana("ヴァヵヶヽヾ"), "ゔぁゕゖゝゞ");
        // Hiragana has no ヷ..ヺ.
        assert_eq!(to_hiragana("ヷヸヹヺ"), "ヷヸヹヺ");
        assert_eq!(to_hiragana("ｶﾞｽﾊﾟｲﾌﾟ｡"), "がすぱいぷ。");
        assert_eq!(to_hiragana(""), "");
        // Every hiragana round-trips.
        for c in '\u{3041}'..='\u{3096}' {
            let s = c.to_string();
            assert_eq!(to_hiragana(&to_katakana(&s)), s);
        }
    }

    #[test]
    fn halfwidth_katakana() {
        assert_eq!(to_halfwidth_katakana("がっこう"), "ｶﾞｯｺｳ");
        assert_eq!(to_halfwidth_katakana("パーティー"), "ﾊﾟｰﾃｨｰ");
        assert_eq!(to_halfwidth_katakana("ゔぁいおりん"), "ｳﾞｧｲｵﾘﾝ");
        assert_eq!(to_halfwidth_katakana("「きょう」、はれ。・"), "｢ｷｮｳ｣､ﾊﾚ｡･");
        assert_eq!(to_halfwidth_katakana("ぽんず"), "ﾎﾟﾝｽﾞ");
        assert_eq!(to_halfwidth_katakana("１２じＡ　"), "12ｼﾞA ");
        assert_eq!(to_halfwidth_katakana("東京たわー"), "東京ﾀﾜｰ");
        // Already half-width: unchanged.
        assert_eq!(to_halfwidth_katakana("ｶﾞｯｺｳ"), "ｶﾞｯｺｳ");
        // And back: every katakana with a form of its own round-trips, voiced ones included.
        for (full, half) in HALF_KATAKANA {
            if !matches!(full, 'ヮ' | 'ヰ' | 'ヱ' | 'ヵ' | 'ヶ') {
                assert_eq!(to_katakana(half), full.to_string(), "{half}");
            }
        }
        // A mark no kana takes stays a mark.
        assert_eq!(to_katakana("ﾏﾟｱﾞ"), "マ゜ア゛");
    }

    #[test]
    fn ascii_widths() {
        assert_eq!(to_fullwidth_ascii("kyou"), "ｋｙｏｕ");
        assert_eq!(to_fullwidth_ascii("USB 3.0!"), "ＵＳＢ　３．０！");
        assert_eq!(to_fullwidth_ascii("~{}"), "～｛｝");
        assert_eq!(to_fullwidth_ascii("きょう\n"), "きょう\n");
        assert_eq!(to_halfwidth_ascii("ＵＳＢ　３．０！"), "USB 3.0!");
        assert_eq!(to_halfwidth_ascii("ｋｙｏｕ。"), "kyou。");
        for c in '!'..='~' {
            let s = c.to_string();
            assert_eq!(to_halfwidth_ascii(&to_fullwidth_ascii(&s)), s);
        }
        assert_eq!(Width::Full.apply('7'), '７');
        assert_eq!(Width::Full.apply('@'), '＠');
        assert_eq!(Width::Full.apply(' '), '\u{3000}');
        assert_eq!(Width::Full.apply('あ'), 'あ');
        assert_eq!(Width::Half.apply('７'), '7');
        assert_eq!(Width::Half.apply('7'), '7');
        assert_eq!(Width::Half.apply('\u{3000}'), ' ');
        assert_eq!(Width::default(), Width::Half);
        assert_eq!(Width::Full.convert("12時"), "１２時");
    }

    #[test]
    fn function_keys() {
        assert_eq!(Transliteration::from_function_key(5), None);
        assert_eq!(Transliteration::from_function_key(11), None);
        assert_eq!(Transliteration::from_function_key(0), None);
        assert_eq!(Transliteration::from_function_key(255), None);
        for t in Transliteration::ALL {
            assert_eq!(
                Transliteration::from_function_key(t.function_key()),
                Some(t)
            );
        }
        let got: Vec<String> = (6..=10)
            .filter_map(Transliteration::from_function_key)
            .map(|t| t.apply("きょう", "kyou"))
            .collect();
        assert_eq!(got, ["きょう", "キョウ", "ｷｮｳ", "ｋｙｏｕ", "kyou"]);
        let got: Vec<String> = Transliteration::ALL
            .iter()
            .map(|t| t.apply("12じ", "12ji"))
            .collect();
        assert_eq!(got, ["１２じ", "１２ジ", "12ｼﾞ", "１２ｊｉ", "12ji"]);
        assert_eq!(Transliteration::Hiragana.apply("カタカナ", ""), "かたかな");
        assert_eq!(Transliteration::HalfAscii.apply("", "ｋｙｏｕ"), "kyou");
    }
}
