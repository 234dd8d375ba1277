//! The user dictionary: words the user registers, in the format of Mozc's dictionary tool
//! (Google Japanese Input exports the same), so a dictionary moves between them both ways.
//!
//! File: one word per line, `reading<TAB>surface<TAB>part of speech<TAB>comment` (the comment
//! may be left out), parts of speech by Mozc's names ([`Pos`]). Lines starting with `#` and
//! blank lines are ignored; line ends `\n`, `\r\n` or `\r`. UTF-8 (a byte-order mark is
//! skipped), or UTF-16 with a byte-order mark (what Windows exports). A part of speech may
//! carry Gboard's locale suffix (`名詞:ja`), which is dropped. Written as UTF-8 with a `#`
//! header line and all four fields, as Mozc exports.
//!
//! A word follows Mozc's rules (`UserDictionaryUtil::ValidateEntry`): the reading is
//! normalised first (full-width ASCII to half-width, half-width katakana to full-width,
//! katakana to hiragana), then may hold only hiragana, ASCII `!`–`~`, ゛゜・ー、。「」『』〜;
//! reading, surface and comment are at most 300 bytes each; surface and comment hold no
//! control characters (tabs, line breaks). One rule of ours: a reading may not start with `#`,
//! which the file format reads as a comment line.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::str::FromStr;

use fastsoftmax_infer::files::write_atomic;
use fastsoftmax_infer::{Error, Result};

/// Mozc's limit on a reading, a surface and a comment, in UTF-8 bytes.
pub const MAX_FIELD_BYTES: usize = 300;

const HEADER: &str =
    "# fastsoftmax-ime user dictionary: reading<TAB>word<TAB>part of speech<TAB>comment (Mozc's dictionary tool format)\n";

/// Declares [`Pos`] from one table of variants and Mozc's names, in Mozc's order.
macro_rules! parts_of_speech {
    ($($variant:ident => $name:literal,)*) => {
        /// Mozc's user-dictionary parts of speech (`user_dictionary_storage.proto`'s `PosType`,
        /// in its order: [`Pos::mozc_id`] is the proto's number).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Pos {
            $($variant,)*
        }

        impl Pos {
            /// Every part of speech, in Mozc's order.
            pub const ALL: [Pos; [$($name),*].len()] = [$(Pos::$variant),*];
            const NAMES: [&'static str; [$($name),*].len()] = [$($name),*];
        }
    };
}

parts_of_speech! {
    Noun => "名詞",
    Abbreviation => "短縮よみ",
    SuggestionOnly => "サジェストのみ",
    ProperNoun => "固有名詞",
    PersonalName => "人名",
    FamilyName => "姓",
    FirstName => "名",
    OrganizationName => "組織",
    PlaceName => "地名",
    SaIrregularConjugationNoun => "名詞サ変",
    AdjectiveVerbalNoun => "名詞形動",
    Number => "数",
    Alphabet => "アルファベット",
    Symbol => "記号",
    Emoticon => "顔文字",
    Adverb => "副詞",
    PrenounAdjectival => "連体詞",
    Conjunction => "接続詞",
    Interjection => "感動詞",
    Prefix => "接頭語",
    CounterSuffix => "助数詞",
    GenericSuffix => "接尾一般",
    PersonNameSuffix => "接尾人名",
    PlaceNameSuffix => "接尾地名",
    WaGroup1Verb => "動詞ワ行五段",
    KaGroup1Verb => "動詞カ行五段",
    SaGroup1Verb => "動詞サ行五段",
    TaGroup1Verb => "動詞タ行五段",
    NaGroup1Verb => "動詞ナ行五段",
    MaGroup1Verb => "動詞マ行五段",
    RaGroup1Verb => "動詞ラ行五段",
    GaGroup1Verb => "動詞ガ行五段",
    BaGroup1Verb => "動詞バ行五段",
    HaGroup1Verb => "動詞ハ行四段",
    Group2Verb => "動詞一段",
    KuruGroup3Verb => "動詞カ変",
    SuruGroup3Verb => "動詞サ変",
    ZuruGroup3Verb => "動詞ザ変",
    RuGroup3Verb => "動詞ラ変",
    Adjective => "形容詞",
    SentenceEndingParticle => "終助詞",
    Punctuation => "句読点",
    FreeStandingWord => "独立語",
    SuppressionWord => "抑制単語",
}

impl Pos {
    /// Mozc's name (`名詞`, `短縮よみ`, …), as the file holds it.
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// The part of speech Mozc names `name` (exactly), if any.
    pub fn from_name(name: &str) -> Option<Pos> {
        Self::NAMES
            .iter()
            .position(|&n| n == name)
            .map(|i| Self::ALL[i])
    }

    /// The number of `PosType` in Mozc's proto (1 to 44).
    pub fn mozc_id(self) -> u8 {
        self as u8 + 1
    }

    /// A 抑制単語 entry hides its surface for its reading instead of adding a word.
    pub fn is_suppression(self) -> bool {
        self == Pos::SuppressionWord
    }

    /// Whether the word is a conversion candidate: not for サジェストのみ (suggestions only)
    /// nor 抑制単語 (suppression).
    pub fn converts(self) -> bool {
        !matches!(self, Pos::SuggestionOnly | Pos::SuppressionWord)
    }
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Pos {
    type Err = String;

    fn from_str(name: &str) -> std::result::Result<Self, String> {
        Pos::from_name(name).ok_or_else(|| {
            format!(
                "unknown part of speech `{name}`: use one of Mozc's names ({})",
                Pos::NAMES.join(", ")
            )
        })
    }
}

/// One registered word. `reading` is normalised to hiragana when the word joins a dictionary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserWord {
    pub reading: String,
    pub surface: String,
    pub pos: Pos,
    /// Empty when there is none.
    pub comment: String,
}

impl UserWord {
    pub fn new(reading: &str, surface: &str, pos: Pos, comment: &str) -> Self {
        UserWord {
            reading: reading.to_string(),
            surface: surface.to_string(),
            pos,
            comment: comment.to_string(),
        }
    }

    /// The word with its reading normalised, or what breaks Mozc's rules (module docs) and how
    /// to fix it.
    pub fn checked(mut self) -> std::result::Result<Self, String> {
        if self.reading.is_empty() {
            return Err("the reading is empty: give the kana the word is typed as".into());
        }
        self.reading = normalize_reading(&self.reading);
        if let Some(c) = self.reading.chars().find(|&c| !reading_char(c)) {
            return Err(format!(
                "the reading `{}` holds `{c}`: a reading is hiragana or katakana (ASCII letters, digits and ー・、。「」 allowed), never kanji",
                self.reading
            ));
        }
        if self.reading.starts_with('#') {
            return Err(format!(
                "the reading `{}` starts with `#`, which the file reads as a comment line: drop the `#`",
                self.reading
            ));
        }
        if self.surface.is_empty() {
            return Err(format!(
                "the word for `{}` is empty: give the text it converts to",
                self.reading
            ));
        }
        for (what, text) in [
            ("reading", &self.reading),
            ("word", &self.surface),
            ("comment", &self.comment),
        ] {
            if text.len() > MAX_FIELD_BYTES {
                return Err(format!(
                    "the {what} `{text}` is {} bytes long; Mozc allows {MAX_FIELD_BYTES}: shorten it",
                    text.len()
                ));
            }
            if text.chars().any(char::is_control) {
                return Err(format!(
                    "the {what} `{}` holds a tab, line break or other control character: remove it",
                    text.escape_debug()
                ));
            }
        }
        Ok(self)
    }

    fn same(&self, other: &UserWord) -> bool {
        self.reading == other.reading && self.surface == other.surface && self.pos == other.pos
    }
}

impl fmt::Display for UserWord {
    /// The word's line in the file (without the line end).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}\t{}\t{}\t{}",
            self.reading, self.surface, self.pos, self.comment
        )
    }
}

/// What [`UserDictionary::import`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ImportReport {
    /// Words added.
    pub added: usize,
    /// Lines skipped: the dictionary (or an earlier line) already held the same reading, word
    /// and part of speech.
    pub duplicates: usize,
}

/// Nats a user word gains over the lexicon's words of the same reading: it outranks them unless
/// the language model prefers one by more. Measured with `ime user-dict` (the content words of
/// the 881 wrongly converted KWDLC test sentences registered): top-1 52.38 % without, 54.92 /
/// 55.14 / 55.46 / 54.81 % at 1 / 1.5 / 2 / 3 nats (`experiments/results/ime-typing.md`).
pub const USER_BONUS: f32 = 2.0;

/// The user's words, in the order added, with a hashed index by reading.
#[derive(Debug, Clone, Default)]
pub struct UserDictionary {
    words: Vec<UserWord>,
    by_reading: HashMap<String, Vec<usize>>,
}

impl UserDictionary {
    /// The words the lattice places: each word that converts (not 抑制単語, not サジェストのみ)
    /// scored as the lexicon's word of the same reading and display when there is one, else
    /// through `<unk>` and the spelling model, plus `bonus` nats ([`USER_BONUS`]); 抑制単語
    /// leaves the lexicon's word of that reading and display out.
    pub fn lattice_words(
        &self,
        lexicon: &crate::lattice::Lexicon,
        spelling: &crate::decode::Spelling,
        bonus: f32,
    ) -> crate::lattice::UserWords {
        let mut words = crate::lattice::UserWords::default();
        for w in &self.words {
            if w.pos.is_suppression() {
                words.suppress(&w.reading, &w.surface);
                continue;
            }
            if !w.pos.converts() {
                continue;
            }
            let known = lexicon
                .lookup(&w.reading)
                .find(|(_, word)| word.display == w.surface);
            let (lm_id, extra, classes) = match known {
                Some((id, word)) => (word.lm_id, word.extra, lexicon.classes(id).to_vec()),
                None => (
                    spelling.unk,
                    spelling.log_prob_word(&w.surface, 0),
                    Vec::new(),
                ),
            };
            let entry = crate::lattice::UserEntry {
                display: w.surface.clone(),
                lm_id,
                extra: extra + bonus,
                classes,
            };
            words.insert(&w.reading, entry);
        }
        words
    }

    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.words.len()
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// Adds `word` (its reading normalised to hiragana), refusing one that breaks Mozc's rules
    /// or that the dictionary holds already (same reading, word and part of speech).
    pub fn add(&mut self, word: UserWord) -> Result<()> {
        let word = word.checked().map_err(Error::Invalid)?;
        if self.contains(&word) {
            return Err(Error::Invalid(format!(
                "`{}` → `{}` ({}) is in the user dictionary already; remove it first to change its comment",
                word.reading, word.surface, word.pos
            )));
        }
        self.push(word);
        Ok(())
    }

    /// Removes every word `(reading, surface)`, whatever its part of speech; whether there was
    /// one. The reading is normalised as [`UserDictionary::add`] does.
    pub fn remove(&mut self, reading: &str, surface: &str) -> bool {
        let reading = normalize_reading(reading);
        let before = self.words.len();
        self.words
            .retain(|w| !(w.reading == reading && w.surface == surface));
        if self.words.len() == before {
            return false;
        }
        self.reindex();
        true
    }

    /// Every word, in the order added.
    pub fn list(&self) -> &[UserWord] {
        &self.words
    }

    /// The words read `reading` (hiragana, as the lattice holds it; not normalised here, so
    /// the lookup allocates nothing), in the order added.
    pub fn lookup<'a>(&'a self, reading: &str) -> impl Iterator<Item = &'a UserWord> + 'a {
        self.by_reading
            .get(reading)
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .filter_map(|&i| self.words.get(i))
    }

    /// Adds the words of a dictionary file (module docs). The whole file is read and checked
    /// first: a bad line is an error naming the file, the line and the fix, and leaves the
    /// dictionary as it was. Words the dictionary holds already are skipped and counted.
    pub fn import(&mut self, path: &Path) -> Result<ImportReport> {
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        let words = parse(path, &bytes)?;
        let mut report = ImportReport::default();
        for word in words {
            if self.contains(&word) {
                report.duplicates += 1;
            } else {
                self.push(word);
                report.added += 1;
            }
        }
        Ok(report)
    }

    /// Writes the dictionary to `path` in Mozc's format (atomically), for Mozc or Google
    /// Japanese Input to import.
    pub fn export(&self, path: &Path) -> Result<()> {
        let mut text = String::from(HEADER);
        for word in &self.words {
            text.push_str(&word.to_string());
            text.push('\n');
        }
        write_atomic(path, text.as_bytes())
    }

    /// Saves the dictionary: the same file as [`UserDictionary::export`].
    pub fn save(&self, path: &Path) -> Result<()> {
        self.export(path)
    }

    /// The dictionary saved at `path`; a missing file is an empty dictionary.
    pub fn load(path: &Path) -> Result<Self> {
        let mut dictionary = UserDictionary::new();
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(dictionary),
            Err(e) => return Err(Error::io(path, e)),
        };
        for word in parse(path, &bytes)? {
            if !dictionary.contains(&word) {
                dictionary.push(word);
            }
        }
        Ok(dictionary)
    }

    fn contains(&self, word: &UserWord) -> bool {
        self.lookup(&word.reading).any(|w| w.same(word))
    }

    fn push(&mut self, word: UserWord) {
        self.by_reading
            .entry(word.reading.clone())
            .or_default()
            .push(self.words.len());
        self.words.push(word);
    }

    fn reindex(&mut self) {
        self.by_reading.clear();
        for (i, word) in self.words.iter().enumerate() {
            self.by_reading
                .entry(word.reading.clone())
                .or_default()
                .push(i);
        }
    }
}

/// The words of a dictionary file's bytes, each checked (an error names `path` and the line).
fn parse(path: &Path, bytes: &[u8]) -> Result<Vec<UserWord>> {
    let text = decode(path, bytes)?;
    let mut words = Vec::new();
    for (i, line) in lines(&text).enumerate() {
        let number = i + 1;
        let bad = |problem: String| Error::format(path, format!("line {number}: {problem}"));
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        if line.starts_with('!') {
            return Err(bad(
                "a `!` header, as MS-IME and ATOK write: this reads Mozc's format only; import the file into Google Japanese Input or Mozc and export it from there".into(),
            ));
        }
        let fields: Vec<&str> = line.split('\t').collect();
        let (reading, surface, pos, comment) = match fields[..] {
            [r, s, p] => (r, s, p, ""),
            [r, s, p, c] => (r, s, p, c),
            _ => {
                return Err(bad(format!(
                    "{} tab-separated fields; a line is reading<TAB>word<TAB>part of speech, then optionally <TAB>comment",
                    fields.len()
                )))
            }
        };
        let pos_name = normalize_width(pos);
        let pos_name = pos_name.split_once(':').map_or(&pos_name[..], |(p, _)| p);
        let pos: Pos = pos_name.parse().map_err(bad)?;
        let word = UserWord::new(reading, surface, pos, comment)
            .checked()
            .map_err(bad)?;
        words.push(word);
    }
    Ok(words)
}

/// The file's text: UTF-16 (little- or big-endian) after its byte-order mark, else UTF-8
/// (its byte-order mark skipped).
fn decode(path: &Path, bytes: &[u8]) -> Result<String> {
    let utf16 = |big: bool| -> Result<String> {
        let body = &bytes[2..];
        if !body.len().is_multiple_of(2) {
            return Err(Error::format(
                path,
                "a UTF-16 file with an odd number of bytes (cut short?): export it again",
            ));
        }
        let units = body.chunks_exact(2).map(|b| {
            if big {
                u16::from_be_bytes([b[0], b[1]])
            } else {
                u16::from_le_bytes([b[0], b[1]])
            }
        });
        let mut text = String::with_capacity(body.len());
        let mut line = 1;
        for c in char::decode_utf16(units) {
            let c = c.map_err(|_| {
                Error::format(
                    path,
                    format!(
                        "line {line}: not valid UTF-16 (a lone surrogate): export the file again"
                    ),
                )
            })?;
            line += usize::from(c == '\n');
            text.push(c);
        }
        Ok(text)
    };
    match bytes {
        [0xff, 0xfe, ..] => utf16(false),
        [0xfe, 0xff, ..] => utf16(true),
        _ => {
            let body = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
            match std::str::from_utf8(body) {
                Ok(text) => Ok(text.to_string()),
                Err(e) => {
                    let good = &body[..e.valid_up_to()];
                    let line = 1 + good.iter().filter(|&&b| b == b'\n').count();
                    Err(Error::format(
                        path,
                        format!(
                            "line {line}: not UTF-8 (Shift_JIS?): save the file as UTF-8, or UTF-16 with a byte-order mark, and import it again"
                        ),
                    ))
                }
            }
        }
    }
}

/// The lines of `text`, ended by `\r\n`, `\n` or `\r` (a final empty line is not one).
fn lines(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = rest.find(['\n', '\r']).unwrap_or(rest.len());
        let line = &rest[..end];
        let skip = if rest[end..].starts_with("\r\n") {
            2
        } else {
            usize::from(end < rest.len())
        };
        rest = &rest[end + skip..];
        Some(line)
    })
}

/// Whether Mozc allows `c` in a normalised reading.
fn reading_char(c: char) -> bool {
    matches!(c,
        '\u{21}'..='\u{7e}'          // ASCII but space
        | '\u{3041}'..='\u{3096}'    // hiragana
        | '\u{309b}'..='\u{309c}'    // ゛゜
        | '\u{30fb}'..='\u{30fc}'    // ・ー
        | '\u{3001}'..='\u{3002}'    // 、。
        | '\u{300c}'..='\u{300f}'    // 「」『』
        | '\u{301c}') // 〜
}

/// Mozc's `NormalizeReading`: `normalize_width`, then katakana to hiragana.
pub fn normalize_reading(reading: &str) -> String {
    normalize_width(reading)
        .chars()
        .map(|c| match c {
            'ァ'..='ヶ' => char::from_u32(c as u32 - 0x60).unwrap_or(c),
            _ => c,
        })
        .collect()
}

/// Full-width ASCII to half-width, half-width katakana to full-width (a following ﾞ or ﾟ
/// joins its kana: ｶﾞ → ガ).
fn normalize_width(text: &str) -> String {
    const HALF: &str = "。「」、・ヲァィゥェォャュョッーアイウエオカキクケコサシスセソタチツテトナニヌネノハヒフヘホマミムメモヤユヨラリルレロワン゛゜";
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let c = match c {
            '\u{ff01}'..='\u{ff5e}' => char::from_u32(c as u32 - 0xfee0).unwrap_or(c),
            '\u{ff61}'..='\u{ff9f}' => HALF.chars().nth(c as usize - 0xff61).unwrap_or(c),
            _ => {
                out.push(c);
                continue;
            }
        };
        let voiced = match chars.peek() {
            Some('ﾞ') if "カキクケコサシスセソタチツテトハヒフヘホ".contains(c) => {
                Some(1)
            }
            Some('ﾞ') if c == 'ウ' => Some('ヴ' as u32 - 'ウ' as u32),
            Some('ﾟ') if "ハヒフヘホ".contains(c) => Some(2),
            _ => None,
        };
        match voiced.and_then(|d| char::from_u32(c as u32 + d)) {
            Some(joined) => {
                chars.next();
                out.push(joined);
            }
            None => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(reading: &str, surface: &str, pos: Pos) -> UserWord {
        UserWord::new(reading, surface, pos, "")
    }

    #[test]
    fn parts_of_speech_are_mozcs() {
        assert_eq!(Pos::ALL.len(), 44);
        for (i, pos) in Pos::ALL.iter().enumerate() {
            assert_eq!(pos.mozc_id() as usize, i + 1);
            assert_eq!(Pos::from_name(pos.name()), Some(*pos));
            assert_eq!(pos.to_string().parse::<Pos>(), Ok(*pos));
        }
        assert_eq!(Pos::Noun.name(), "名詞");
        assert_eq!(Pos::Abbreviation.name(), "短縮よみ");
        assert_eq!(Pos::SuppressionWord.mozc_id(), 44);
        assert_eq!(
            Pos::from_name("名詞サ変"),
            Some(Pos::SaIrregularConjugationNoun)
        );
        assert_eq!(Pos::from_name("動詞"), None);
        assert!(!Pos::SuggestionOnly.converts() && Pos::SuppressionWord.is_suppression());
        assert!("名刺"
            .parse::<Pos>()
            .unwrap_err()
            .contains("名詞, 短縮よみ"));
    }

    #[test]
    fn readings_are_normalised_as_mozc_does() {
        assert_eq!(normalize_reading("アイウヴ"), "あいうゔ");
        assert_eq!(normalize_reading("ｶﾞｯｺｳﾊﾟｰﾃｨｰ"), "がっこうぱーてぃー");
        assert_eq!(normalize_reading("ＡＢｃ１"), "ABc1");
        assert_eq!(normalize_reading("ｳﾞｧｲｵﾘﾝ"), "ゔぁいおりん");
        assert_eq!(normalize_reading("ﾜﾞ"), "わ゛");
    }

    #[test]
    fn adds_checks_and_looks_up_words() {
        let mut d = UserDictionary::new();
        d.add(word("トウキョウ", "東京", Pos::PlaceName)).unwrap();
        d.add(word("とうきょう", "東京", Pos::ProperNoun)).unwrap();
        d.add(word("とうきょう", "TOKYO", Pos::Alphabet)).unwrap();
        d.add(word("めあど", "me@example.com", Pos::Abbreviation))
            .unwrap();
        let err = d
            .add(word("とうきょう", "東京", Pos::PlaceName))
            .unwrap_err()
            .to_string();
        assert!(err.contains("already"), "{err}");
        for (bad, wanted) in [
            (word("", "空", Pos::Noun), "reading is empty"),
            (word("水雲", "もずく", Pos::Noun), "holds `水`"),
            (word("あ い", "愛", Pos::Noun), "holds ` `"),
            (word("#あ", "愛", Pos::Noun), "starts with `#`"),
            (word("あい", "", Pos::Noun), "empty"),
            (word("あい", "愛\t", Pos::Noun), "control character"),
            (UserWord::new("あい", "愛", Pos::Noun, "a\nb"), "comment"),
            (word(&"あ".repeat(101), "長", Pos::Noun), "303 bytes"),
        ] {
            let err = d.add(bad).unwrap_err().to_string();
            assert!(err.contains(wanted), "{err}");
        }
        assert_eq!(d.len(), 4);
        let found: Vec<(&str, Pos)> = d
            .lookup("とうきょう")
            .map(|w| (w.surface.as_str(), w.pos))
            .collect();
        assert_eq!(
            found,
            [
                ("東京", Pos::PlaceName),
                ("東京", Pos::ProperNoun),
                ("TOKYO", Pos::Alphabet)
            ]
        );
        assert_eq!(d.lookup("トウキョウ").count(), 0);
        assert!(d.remove("トウキョウ", "東京"));
        assert!(!d.remove("とうきょう", "東京"));
        assert_eq!(d.lookup("とうきょう").count(), 1);
        assert_eq!(d.lookup("めあど").next().unwrap().surface, "me@example.com");
        assert_eq!(d.len(), 2);
    }

    #[test]
    fn imports_mozc_files_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mozc.txt");
        let mut d = UserDictionary::new();
        d.add(word("もずく", "水雲", Pos::Noun)).unwrap();
        // A UTF-8 byte-order mark, CRLF, comments, blank lines, three or four fields, a
        // katakana reading, a duplicate of the dictionary and one of an earlier line.
        let text = "\u{feff}# exported\r\n\
                    もずく\t水雲\t名詞\t\r\n\
                    \r\n\
                    ふぁすと\tFastSoftmax\t固有名詞\tproject\r\n\
                    ヤマダ\t山田\t姓\r\n\
                    やまだ\t山田\t姓:ja\tagain\r\n\
                    かおもじ\t(^_^)\t顔文字\r\n";
        std::fs::write(&path, text).unwrap();
        let report = d.import(&path).unwrap();
        assert_eq!(
            report,
            ImportReport {
                added: 3,
                duplicates: 2
            }
        );
        assert_eq!(d.len(), 4);
        assert_eq!(d.lookup("やまだ").next().unwrap().surface, "山田");
        assert_eq!(d.lookup("ふぁすと").next().unwrap().comment, "project");

        // UTF-16LE with a byte-order mark, as Windows exports, holds the same words.
        let utf16: Vec<u8> = [0xff, 0xfe]
            .into_iter()
            .chain(
                text.trim_start_matches('\u{feff}')
                    .encode_utf16()
                    .flat_map(u16::to_le_bytes),
            )
            .collect();
        std::fs::write(&path, utf16).unwrap();
        let mut other = UserDictionary::new();
        assert_eq!(
            other.import(&path).unwrap(),
            ImportReport {
                added: 4,
                duplicates: 1
            }
        );
        assert_eq!(other.list(), d.list());

        let before = d.list().to_vec();
        for (text, line, wanted) in [
            (
                "あ\t亜\t名詞\nい\t胃\t名刺\n",
                2,
                "unknown part of speech `名刺`",
            ),
            (
                "# c\n\nかんじ\t漢字\t名詞\n漢字\tかんじ\t名詞\n",
                4,
                "holds `漢`",
            ),
            ("あ\t亜\t名詞\nい\t胃\n", 2, "2 tab-separated fields"),
            ("あ\t亜\t名詞\t\textra\n", 1, "5 tab-separated fields"),
            ("!Microsoft IME Dictionary Tool\n", 1, "MS-IME"),
            ("あ\t亜\t名詞\rい\t\t名詞\r", 2, "empty"),
        ] {
            std::fs::write(&path, text).unwrap();
            let err = d.import(&path).unwrap_err().to_string();
            let prefix = format!("{}: line {line}: ", path.display());
            assert!(err.starts_with(&prefix) && err.contains(wanted), "{err}");
            assert_eq!(d.list(), before);
        }
        // Shift_JIS "あ" on line 2.
        std::fs::write(
            &path,
            b"a\ta\t\xe5\x90\x8d\xe8\xa9\x9e\n\x82\xa0\t\x88\x9f\t\n",
        )
        .unwrap();
        let err = d.import(&path).unwrap_err().to_string();
        assert!(err.contains("line 2: not UTF-8"), "{err}");
        assert_eq!(d.list(), before);
    }

    #[test]
    fn saves_mozcs_format_and_loads_it_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("user_dictionary.txt");
        assert!(UserDictionary::load(&path).unwrap().is_empty());
        let mut d = UserDictionary::new();
        d.add(word("もずく", "水雲", Pos::Noun)).unwrap();
        d.add(UserWord::new(
            "ぐーぐる",
            "Google",
            Pos::OrganizationName,
            "社名",
        ))
        .unwrap();
        d.add(word("ねむい", "眠い", Pos::Adjective)).unwrap();
        d.save(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            format!(
                "{HEADER}もずく\t水雲\t名詞\t\nぐーぐる\tGoogle\t組織\t社名\nねむい\t眠い\t形容詞\t\n"
            )
        );
        let back = UserDictionary::load(&path).unwrap();
        assert_eq!(back.list(), d.list());
        let exported = dir.path().join("export.txt");
        d.export(&exported).unwrap();
        assert_eq!(std::fs::read_to_string(&exported).unwrap(), text);
    }
}
