//! Stand-ins for what a translator cannot read in its source: Latin words inside Japanese,
//! symbols (emoji, `Ω`) its subwords never saw, and numbers it misreads.
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
//! Numbers are read alike: this translator writes most numbers of two or more digits that its
//! tokenizer cuts into pieces as another number or word (`17歳` → "seven years old",
//! `110円` → "ten yen"), but copies a few (500, and 1939 as a year) as they are, so those
//! stand in for the others (`1,500円` → `500円` → "500 yen" → "1,500 yen"). A number the
//! tokenizer reads as one piece (`10`, `25`, `100`, `1000`) it learnt, and is left alone. A
//! number with 万 (10⁴), 億 (10⁸) or 兆 it misreads whatever its digits (`10万円` → "ten
//! thousand yen", `1400万人` → "five thousand yen"), so it stands in as 500 too and is written
//! worked out ("100,000 yen", "14 million").
//!
//! A month (`11月`) it writes as a month in half the sentences tried ("at eight", "eight moon"
//! in the others), but a season it places as a month goes ("in winter", "by winter"): so 冬
//! stands in, and "winter" comes out as the month's name ("November"; "November 2026" from
//! `2026年11月` or `2026年の11月`, whose month it drops otherwise). A whole date
//! (`11月30日`, `2026年11月30日`) it garbles most of all (`1月8日` → "the eight days of
//! January", `12月1日` → "one day in December"), but a weekday it places as a date goes ("on
//! Monday", "by Monday", "Monday is my birthday"): so 月曜日 stands in, and "Monday" comes out
//! as the date ("November 30, 2026"). A clock time (`8時30分`, `3時半`, `午後3時`) it misreads
//! too (`7時45分` → "four minutes at seven"), but places noon as times go ("at noon", "by
//! noon", "the noon train"): so 正午 stands in, written "8:30", "3:30", "3 p.m.". A
//! duration with a half or minutes (`1時間半` → "half an hour", `2時間15分` → "fifteen
//! minutes") stands in as 500時間 or 500分, which it writes "500 hours" or "500 minutes", and
//! the number is written "1.5" or "2 hours and 15" before them. A number with a sign (`-5`,
//! `−5`, `マイナス5`), whose sign it drops, stands in whatever its length.
//!
//! A line of stand-ins alone (`123`, `iPhone`, `11月30日。`), or of a number the tokenizer
//! reads as one piece, is no sentence, and the translator makes one up around it ("123 yen is
//! 123."): it is written as it is, in English where the stand-in has an English form.
//!
//! A translation can still drop a stand-in that another comes through in (`35度まで下がった`
//! → "five degrees" through 500, "35 degrees" through 200): the engines then search the line
//! once more with each table's next stand-in ([`Placeholders::next_round`]).
//!
//! What counts as a Latin run, on the NFKC-normalised line: an ASCII letter, then letters and
//! digits, with connectors (`-.'&_@/:+#%?=~`) and single spaces inside when a letter follows,
//! or digits that no kanji or katakana counter follows (`iPhone`, `New York`, `e-mail`,
//! `Mr. Smith`, `iPhone 15`, `Python 3.12`; not the `20` of `Smith 20歳`). Left alone: runs
//! of fewer than two letters (`Tシャツ`, `X線`), runs right after a digit (units: `100m`,
//! `180g`), runs the tokenizer keeps as one known piece (`CD`), and any beyond the table's
//! length.

use crate::artifact::Languages;

/// A stand-in: its source text and the target word it translates to.
type StandIn = (&'static str, &'static str);

/// Stand-ins of Japanese → English, best first. Chosen by trying the shipped translator: each
/// must translate to exactly its target word in any sentence position and rarely come
/// unprompted (トム/`Tom` and ボブ/`Bob` do, as subjects, so they are not here).
const JA_EN: Placeholders = Placeholders {
    names: &[("ケン", "Ken"), ("ナンシー", "Nancy"), ("ベティ", "Betty")],
    // The translator writes most numbers of two or more digits that its tokenizer cuts into
    // pieces as a wrong number or word (`1,500円` → "500 yen", `110円` → "ten yen", `65歳で`
    // → "at the age of six") but copies 500 and 200 as they are.
    numbers: &[("500", "500"), ("200", "200")],
    // And nearly every year as 1939 (`1952年に建てられた` → "built in 1939").
    years: &[("1939", "1939")],
    // Months, which it writes right in 6 of 12 sentences tried (8月: "at eight", "The eight
    // moon is cold"), as the season it places as a month goes: 冬 "winter" in all 12, 夏 too.
    months: &[("冬", "winter"), ("夏", "summer")],
    // Whole dates, which it garbles, as the weekdays it places best (of 8 sentences each:
    // Monday, Friday and Sunday all 8, Wednesday 1).
    dates: &[
        ("月曜日", "Monday"),
        ("金曜日", "Friday"),
        ("日曜日", "Sunday"),
    ],
    // Clock times, which it misreads, as noon and midnight (in the right place in 7 of 8
    // sentences tried each).
    times: &[("正午", "noon"), ("真夜中", "midnight")],
    // Durations, which it misreads (`1時間半` → "half an hour", `2時間15分` → "fifteen
    // minutes") but copies 500 hours and 500 minutes through (200 in most sentences).
    hours: &[("500時間", "500"), ("200時間", "200")],
    minutes: &[("500分", "500"), ("200分", "200")],
    round: 0,
    month_names: &[
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ],
};

/// The stand-in tables of a language pair: for Latin runs and unreadable symbols (`names`),
/// numbers of two or more digits (`numbers`), four-digit years before 年 (`years`),
/// months (`[YYYY年]M月`, M 1–12: `months`, written "November[ 2026]" by `month_names`),
/// dates (`[YYYY年]M月D日`: `dates`, written "November 30[, 2026]") and clock times
/// (`[午前|午後]H時M分`, `H時半`, `午前|午後H時`, `H:MM`: `times`, written "8:30[ a.m.]").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placeholders {
    names: &'static [StandIn],
    numbers: &'static [StandIn],
    years: &'static [StandIn],
    months: &'static [StandIn],
    dates: &'static [StandIn],
    times: &'static [StandIn],
    hours: &'static [StandIn],
    minutes: &'static [StandIn],
    month_names: &'static [&'static str],
    /// Each table starts at its `round`-th stand-in (wrapping): a retry's second choice.
    round: usize,
}

/// What a run of the source is, so which table stands in for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Name,
    Number,
    Year,
    Month,
    Date,
    Time,
    /// `H時間半`, written "H.5" before the translator's "hours".
    Hours,
    /// `H時間M分`, written "H hours and M" before its "minutes".
    Minutes,
}

/// A run that a stand-in replaced: the target word to look for in the output, and what to
/// write in its place (the run's own text; for a month, a date or a time, its English).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placeholder {
    pub target: &'static str,
    pub output: String,
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

    /// How many stand-ins a translation leaves out: those whose target word none of its
    /// `words` is (in any case).
    pub fn dropped<'a>(&self, words: impl Iterator<Item = &'a str> + Clone) -> usize {
        let written = |p: &Placeholder| words.clone().any(|w| p.target.eq_ignore_ascii_case(w));
        self.placeholders.iter().filter(|p| !written(p)).count()
    }
}

impl Placeholders {
    /// The table of `languages`, if the pair has one (today: `ja` → `en`).
    pub fn for_languages(languages: Option<&Languages>) -> Option<Placeholders> {
        match languages {
            Some(l) if l.src == "ja" && l.tgt == "en" => Some(JA_EN),
            _ => None,
        }
    }

    /// The same tables, each starting at its next stand-in: for a line whose translation
    /// dropped one (the translator reads some stand-ins worse in some sentences:
    /// `気温は35度まで下がった。` → "five degrees" through 500, "35 degrees" through 200).
    pub fn next_round(self) -> Placeholders {
        Placeholders {
            round: self.round + 1,
            ..self
        }
    }

    /// `line` (already NFKC-normalised) made readable (see the module docs). `known_run(run)`
    /// says whether the tokenizer reads a Latin run or a number as one piece of its vocabulary
    /// (such a run is left alone: `CD`, `100`); `known_char(c)` whether it has a piece for
    /// `c`. A stand-in whose source text is already in the line is not used, so the output's
    /// word is never ambiguous.
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
        let text = &line[body.clone()];
        let mut runs: Vec<(usize, usize, Kind)> = latin_runs(text)
            .into_iter()
            .map(|(a, b)| (a, b, Kind::Name))
            .chain(number_runs(text))
            .filter(|&(a, b, _)| !known_run(&text[a..b]))
            .chain(
                symbol_runs(text, unknown)
                    .into_iter()
                    .map(|(a, b)| (a, b, Kind::Name)),
            )
            .map(|(a, b, kind)| (body.start + a, body.start + b, kind))
            .collect();
        // At one start the longer run wins (`−5`, a number, over `−`, a symbol it holds).
        runs.sort_unstable_by_key(|&(a, b, kind)| (a, std::cmp::Reverse(b), kind));
        // A stand-in already in the line would make the output's word ambiguous.
        let free = |table: &'static [StandIn]| {
            let first = self.round % table.len().max(1);
            table[first..]
                .iter()
                .chain(&table[..first])
                .filter(|(src, target)| !line.contains(src) && !line.contains(target))
        };
        let (mut names, mut numbers, mut years, mut months, mut dates, mut times) = (
            free(self.names),
            free(self.numbers),
            free(self.years),
            free(self.months),
            free(self.dates),
            free(self.times),
        );
        let (mut hours, mut minutes) = (free(self.hours), free(self.minutes));
        let mut out = String::with_capacity(line.len());
        // The line without its replaced runs.
        let mut rest = String::new();
        let mut placeholders: Vec<Placeholder> = Vec::new();
        let mut last = body.start;
        for (a, b, kind) in runs {
            if a < last {
                continue; // overlaps the run before
            }
            // What is written in the stand-in's place; a run English cannot write stays.
            let run = &line[a..b];
            let output = match kind {
                Kind::Month | Kind::Date => self.english_date(run),
                Kind::Time => english_time(run),
                Kind::Hours | Kind::Minutes => english_duration(run),
                Kind::Number => english_number(run),
                Kind::Name | Kind::Year => Some(run.to_string()),
            };
            let Some(output) = output else {
                continue;
            };
            let table = match kind {
                Kind::Name => &mut names,
                Kind::Number => &mut numbers,
                Kind::Year => &mut years,
                Kind::Month => &mut months,
                Kind::Date => &mut dates,
                Kind::Time => &mut times,
                Kind::Hours => &mut hours,
                Kind::Minutes => &mut minutes,
            };
            // Two tables share a target word (500): one line uses it once.
            let unused = |(_, target): &&StandIn| placeholders.iter().all(|p| p.target != *target);
            let Some(&(src, target)) = table.find(unused) else {
                continue;
            };
            out.push_str(&line[last..a]);
            out.push_str(src);
            rest.push_str(&line[last..a]);
            last = b;
            placeholders.push(Placeholder { target, output });
        }
        for text in [&mut out, &mut rest] {
            text.push_str(&line[last..body.end]);
            text.push_str(&line[suffix.end..]);
        }
        let (prefix, suffix) = (line[prefix].trim(), line[suffix].trim());
        // A line of stand-ins alone (`123`, `iPhone 15`, `11月30日。`) is no sentence, and the
        // translator makes one up around it ("123 yen is 123."): it is written as it is.
        // So is a number it reads as one piece (`100` → "100 hundred hundred.").
        let punctuation = |c: char| c.is_whitespace() || "。．.！!？?".contains(c);
        let number = |t: &str| {
            t.starts_with(|c: char| c.is_ascii_digit())
                && t.chars().all(|c| c.is_ascii_digit() || ",.".contains(c))
        };
        let words: Vec<&str> = match rest.trim_end_matches(punctuation).trim() {
            "" => placeholders.iter().map(|p| p.output.as_str()).collect(),
            alone if placeholders.is_empty() && number(alone) => vec![alone],
            _ => Vec::new(),
        };
        if !words.is_empty() {
            let mut text = words.join(" ");
            match rest.trim().chars().last() {
                // "3 p.m." ends in its own period.
                Some('。' | '．' | '.') if !text.ends_with('.') => text.push('.'),
                Some('！' | '!') => text.push('!'),
                Some('？' | '?') => text.push('?'),
                _ => {}
            }
            return Masked {
                line: String::new(),
                placeholders: Vec::new(),
                prefix: [prefix, text.as_str()].join(" ").trim().to_string(),
                suffix: suffix.to_string(),
            };
        }
        Masked {
            line: out,
            placeholders,
            prefix: prefix.to_string(),
            suffix: suffix.to_string(),
        }
    }

    /// A month or date run in English: `11月` → "November", `2026年[の]11月` → "November 2026",
    /// `11月30日` → "November 30", `2026年11月30日` → "November 30, 2026"; `None` for a month
    /// past 12 or a day past 31.
    fn english_date(&self, run: &str) -> Option<String> {
        let (mut year, mut month, mut day) = (None, None, None);
        let run = run.replacen("年の", "年", 1);
        let mut rest = run.as_str();
        while !rest.is_empty() {
            let digits = rest.find(|c: char| !c.is_ascii_digit())?;
            let number: usize = rest[..digits].parse().ok()?;
            let mut after = rest[digits..].chars();
            let slot = match after.next() {
                Some('年') => &mut year,
                Some('月') => &mut month,
                Some('日') => &mut day,
                _ => return None,
            };
            *slot = Some(number);
            rest = after.as_str();
        }
        let name = self.month_names.get(month?.checked_sub(1)?)?;
        Some(match (day, year) {
            (Some(day), _) if !(1..=31).contains(&day) => return None,
            (Some(day), Some(year)) => format!("{name} {day}, {year}"),
            (Some(day), None) => format!("{name} {day}"),
            (None, Some(year)) => format!("{name} {year}"),
            (None, None) => name.to_string(),
        })
    }
}

/// A number run as English writes it: as it is (`1,500`), or with 万 (10⁴), 億 (10⁸) and 兆
/// (10¹²) worked out: `3万` → "30,000", `1.5万` → "15,000", `1,400万` → "14 million",
/// `1億2000万` → "120 million", `1234万` → "12.34 million", `2兆` → "2 trillion"; `None` if a
/// part is no number (`090-1234万`). A sign (`-`, `−`, マイナス) is written `-`: `-5`, `-30,000`.
fn english_number(run: &str) -> Option<String> {
    const UNITS: [char; 3] = ['万', '億', '兆'];
    for sign in ["-", "−", "マイナス"] {
        if let Some(unsigned) = run.strip_prefix(sign) {
            return english_number(unsigned).map(|n| format!("-{n}"));
        }
    }
    if !run.contains(UNITS) {
        return Some(run.to_string());
    }
    let mut total: u128 = 0;
    let mut rest = run;
    while !rest.is_empty() {
        let (part, tail) = rest.split_at(rest.find(UNITS).unwrap_or(rest.len()));
        let mut tail = tail.chars();
        let unit: u128 = match tail.next() {
            Some('万') => 10_000,
            Some('億') => 100_000_000,
            Some('兆') => 1_000_000_000_000,
            _ => 1,
        };
        // `1.5` × 10⁴ = 15,000: the whole part and the decimals scaled apart.
        let part = part.replace(',', "");
        let (whole, decimals) = part.split_once('.').unwrap_or((&part, ""));
        let scale = 10u128.checked_pow(decimals.len() as u32)?;
        let whole: u128 = whole.parse().ok()?;
        let decimals: u128 = if decimals.is_empty() {
            0
        } else {
            decimals.parse().ok()?
        };
        let fraction = decimals.checked_mul(unit)?;
        if !fraction.is_multiple_of(scale) {
            return None; // less than one: `1.23456万`
        }
        total = total
            .checked_add(whole.checked_mul(unit)?)?
            .checked_add(fraction / scale)?;
        rest = tail.as_str();
    }
    for (unit, name) in [(12, "trillion"), (9, "billion"), (6, "million")] {
        let size = 10u128.pow(unit);
        if total >= size {
            let decimals = format!("{:0width$}", total % size, width = unit as usize);
            let decimals = decimals.trim_end_matches('0');
            if decimals.len() <= 2 {
                let point = if decimals.is_empty() { "" } else { "." };
                return Some(format!("{}{point}{decimals} {name}", total / size));
            }
            break;
        }
    }
    // Digits in groups of three: "120,456,789".
    let digits = total.to_string();
    let mut grouped = String::new();
    for (k, d) in digits.chars().enumerate() {
        if k > 0 && (digits.len() - k).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(d);
    }
    Some(grouped)
}

/// A duration run in English, before the translator's own "hours" or "minutes": `2時間半` →
/// "2.5", `1時間30分` → "1 hour and 30"; `None` for a minute past 59.
fn english_duration(run: &str) -> Option<String> {
    let (hours, rest) = run.split_once("時間")?;
    if rest == "半" {
        return Some(format!("{hours}.5"));
    }
    let minutes: u32 = rest.strip_suffix('分')?.parse().ok()?;
    let unit = if hours == "1" { "hour" } else { "hours" };
    (minutes <= 59).then(|| format!("{hours} {unit} and {minutes}"))
}

/// A clock time run in English: `8時30分` and `8:30` → "8:30", `8時5分` → "8:05", `3時半` →
/// "3:30", `午後3時` → "3 p.m.", `午前8時30分` → "8:30 a.m.", `午前0時` → "12 a.m."; `None`
/// for an hour past 24 (past 12 after 午前 or 午後) or a minute past 59.
fn english_time(run: &str) -> Option<String> {
    let (half_day, rest) = match run.strip_prefix("午前") {
        Some(rest) => (Some("a.m."), rest),
        None => match run.strip_prefix("午後") {
            Some(rest) => (Some("p.m."), rest),
            None => (None, run),
        },
    };
    let (hour, minute) = match rest.split_once(':') {
        Some((hour, minute)) => (hour, Some(minute)),
        None => {
            let (hour, rest) = rest.split_once('時')?;
            (hour, (!rest.is_empty()).then_some(rest))
        }
    };
    let hour: u32 = hour.parse().ok()?;
    let minute: Option<u32> = match minute {
        None => None,
        Some("半") => Some(30),
        Some(m) => Some(m.strip_suffix('分').unwrap_or(m).parse().ok()?),
    };
    if hour > if half_day.is_some() { 12 } else { 24 } || minute.is_some_and(|m| m > 59) {
        return None;
    }
    // On a 12-hour clock 午前0時 is 12 a.m. (midnight), 午後0時 12 p.m. (noon).
    let hour = if half_day.is_some() && hour == 0 {
        12
    } else {
        hour
    };
    let clock = match minute {
        Some(minute) => format!("{hour}:{minute:02}"),
        None => hour.to_string(),
    };
    Some(match half_day {
        Some(half) => format!("{clock} {half}"),
        None => clock,
    })
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
    matches!(
        c as u32,
        0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0x20000..=0x3FFFF
    )
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

/// Byte ranges of the numbers of `line` worth a stand-in: two or more digits, with single
/// `,` `.` `-` between them (`17`, `1,500`, `3.14`, `090-1234-5678`), not after a Latin letter
/// or digit (`Windows10`); one or two digits before 時 with minutes (`8時30分`, `3時半`) or
/// after 午前 or 午後 (`午後3時`, with it), or before `:` and two digits (`8:30`), a clock
/// time; four digits before 年 are a year; one or two before 月, with the 月
/// and a year right before it (or before の) if any, a month (`11月`, `2026年11月`,
/// `2026年の11月`); a month with one or two digits and 日 after it, a date (`11月30日`,
/// `2026年11月30日`).
fn number_runs(line: &str) -> Vec<(usize, usize, Kind)> {
    let chars: Vec<(usize, char)> = line.char_indices().collect();
    let at = |j: usize| chars.get(j).map(|&(_, c)| c);
    let digit = |j: usize| at(j).is_some_and(|c| c.is_ascii_digit());
    // The end of one or two digits from `j`.
    let short = |j: usize| {
        let end = (j..).find(|&e| !digit(e)).unwrap_or(j);
        (1..=2).contains(&(end - j)).then_some(end)
    };
    // The end and kind of a month or date whose first number (`digits` long) ends at `end`:
    // `M月`, `YYYY年[の]M月` (months), `M月D日`, `YYYY年[の]M月D日` (dates).
    let month_end = |end: usize, digits: usize| -> Option<(usize, Kind)> {
        let month = match (digits, at(end)) {
            (4, Some('年')) => short(end + 1 + usize::from(at(end + 1) == Some('の')))?,
            (1 | 2, _) => end,
            _ => return None,
        };
        (at(month) == Some('月')).then_some(())?;
        Some(
            match short(month + 1).filter(|&day| at(day) == Some('日')) {
                Some(day) => (day + 1, Kind::Date),
                None => (month + 1, Kind::Month),
            },
        )
    };
    // The end of a clock time whose hour (`digits` long) ends at `end`: `H:MM`, `H時M分`,
    // `H時半`, and after 午前 or 午後 `H時` too (not `H時間`, hours).
    let time_end = |end: usize, digits: usize, half_day: bool| -> Option<usize> {
        if digits <= 2 && at(end) == Some(':') {
            return short(end + 1).filter(|&m| m == end + 3);
        }
        (digits <= 2 && at(end) == Some('時')).then_some(())?;
        if let Some(minute) = short(end + 1).filter(|&m| at(m) == Some('分')) {
            return Some(minute + 1);
        }
        match at(end + 1) {
            Some('半') => Some(end + 2),
            Some('間') => None,
            _ => half_day.then_some(end + 1),
        }
    };
    // The end of a number with 万, 億 or 兆 whose first part ends at `end` (`2万`, `1,400万`,
    // `1億2000万`, `3万5000`); `None` without one, or before a kanji numeral (`1万5千`).
    let big_end = |mut end: usize| -> Option<usize> {
        let rank = |j: usize| match at(j) {
            Some('万') => Some(1),
            Some('億') => Some(2),
            Some('兆') => Some(3),
            _ => None,
        };
        let mut last = rank(end)?;
        loop {
            end += 1;
            let mut next = end;
            while digit(next) || (at(next).is_some_and(|c| ",.".contains(c)) && digit(next + 1)) {
                next += 1;
            }
            match rank(next) {
                _ if next == end => break,
                Some(r) if r < last => (last, end) = (r, next),
                Some(_) => break,
                None => {
                    end = next;
                    break;
                }
            }
        }
        (!at(end).is_some_and(|c| "千百十".contains(c))).then_some(end)
    };
    let byte = |j: usize| chars.get(j).map_or(line.len(), |&(b, _)| b);
    // Where the sign of a negative number starting at `i` starts: `-5`, `−5` or `マイナス5`,
    // not after a letter or digit (`A-5`, `5-3`, `090-1234`); `i` if it has none.
    let sign_start = |i: usize| -> usize {
        let word_at = |j: usize| at(j).is_some_and(|c| c.is_ascii_alphanumeric());
        if i >= 1 && matches!(at(i - 1), Some('-' | '−')) && !(i >= 2 && word_at(i - 2)) {
            return i - 1;
        }
        if line[..chars[i].0].ends_with("マイナス") {
            i - "マイナス".chars().count()
        } else {
            i
        }
    };
    let mut runs = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !digit(i) || (i > 0 && at(i - 1).is_some_and(|c| c.is_ascii_alphanumeric())) {
            i += 1;
            continue;
        }
        // The translator drops a sign, so a signed number of any length takes a stand-in.
        let signed = sign_start(i);
        let (mut end, mut digits, mut plain) = (i, 0, true);
        loop {
            while digit(end) {
                end += 1;
                digits += 1;
            }
            if at(end).is_some_and(|c| ",.-".contains(c)) && digit(end + 1) {
                end += 1;
                plain = false;
                continue;
            }
            break;
        }
        let stop = byte(end);
        if let Some(after) = big_end(end) {
            runs.push((chars[signed].0, byte(after), Kind::Number));
            i = after;
            continue;
        }
        if signed < i {
            runs.push((chars[signed].0, stop, Kind::Number));
            i = end;
            continue;
        }
        // A duration: `H時間半`, `H時間M分` (an hour count alone, `8時間`, it reads).
        if plain && at(end) == Some('時') && at(end + 1) == Some('間') {
            if at(end + 2) == Some('半') {
                runs.push((chars[i].0, byte(end + 3), Kind::Hours));
                i = end + 3;
                continue;
            }
            if let Some(m) = short(end + 2).filter(|&m| at(m) == Some('分')) {
                runs.push((chars[i].0, byte(m + 1), Kind::Minutes));
                i = m + 1;
                continue;
            }
        }
        let half_day = i >= 2 && matches!((at(i - 2), at(i - 1)), (Some('午'), Some('前' | '後')));
        if let Some(after) = time_end(end, digits, half_day).filter(|_| plain) {
            let start = if half_day { i - 2 } else { i };
            runs.push((chars[start].0, byte(after), Kind::Time));
            i = after;
            continue;
        }
        if let Some((after, kind)) = month_end(end, digits).filter(|_| plain) {
            runs.push((chars[i].0, byte(after), kind));
            i = after;
            continue;
        }
        if plain && digits == 4 && at(end) == Some('年') {
            runs.push((chars[i].0, stop, Kind::Year));
        } else if digits >= 2 {
            runs.push((chars[i].0, stop, Kind::Number));
        }
        i = end;
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
                // A version after a name (`iPhone 15`, `Python 3.12`) is part of it, a count
                // before a counter (`Smith 20歳`, `ABC 3ページ`) is not.
                let digit_at = |j: usize| chars.get(j).is_some_and(|x| x.1.is_ascii_digit());
                let mut d = k;
                let dot_at = |j: usize| chars.get(j).is_some_and(|x| x.1 == '.');
                while digit_at(d) || (d > k && dot_at(d) && digit_at(d + 1)) {
                    d += 1;
                }
                let counter = chars
                    .get(d)
                    .is_some_and(|x| is_cjk(x.1) && !('\u{3040}'..='\u{309F}').contains(&x.1));
                if d > k && !counter {
                    end = d;
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
        // A version after a space belongs to the name; a count before its counter does not.
        assert_eq!(runs("iPhone 15を買った。"), ["iPhone 15"]);
        assert_eq!(runs("Python 3.12で書いた。"), ["Python 3.12"]);
        assert_eq!(runs("iPhone 15 Proだ。"), ["iPhone 15 Pro"]);
        assert_eq!(runs("Smith 20歳です。"), ["Smith"]);
        assert_eq!(runs("ABC 3ページ。"), ["ABC"]);
        assert_eq!(runs("Windows 11"), ["Windows 11"]);
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

    /// `line` reads as it is: no stand-ins, nothing set aside.
    fn assert_unchanged(p: &Placeholders, line: &str) {
        let want = Masked {
            line: line.into(),
            ..Masked::default()
        };
        assert_eq!(p.mask(line, |_| false, known_char), want);
    }

    #[test]
    fn mask_uses_each_name_once_skips_known_and_present_ones() {
        let p = ja_en();
        let m = p.mask("JohnはiPhoneを買った。", |_| false, known_char);
        assert_eq!(m.line, "ケンはナンシーを買った。");
        assert_eq!(m.placeholders[0].target, "Ken");
        assert_eq!(m.placeholders[0].output, "John");
        assert_eq!(m.placeholders[1].target, "Nancy");
        assert_eq!(m.placeholders[1].output, "iPhone");
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
        assert_unchanged(&p, "猫です。");
    }

    /// The number runs of `line`: their text and kind.
    fn kinds(line: &str) -> Vec<(String, Kind)> {
        number_runs(line)
            .into_iter()
            .map(|(a, b, k)| (line[a..b].to_string(), k))
            .collect()
    }

    #[test]
    fn numbers_and_years_take_their_own_stand_ins() {
        assert_eq!(
            kinds("1955年10月25日、1955年の10月、1955年10月、1,500円と3.14と090-1234-5678。"),
            [
                ("1955年10月25日".to_string(), Kind::Date),
                ("1955年の10月".to_string(), Kind::Month),
                ("1955年10月".to_string(), Kind::Month),
                ("1,500".to_string(), Kind::Number),
                ("3.14".to_string(), Kind::Number),
                ("090-1234-5678".to_string(), Kind::Number),
            ]
        );
        // One digit, digits inside a Latin word, and a trailing separator stay out; two
        // digits are a number, and so is a four-digit number without 年.
        assert!(kinds("3冊、Windows10、5,").is_empty());
        assert_eq!(kinds("12冊"), [("12".to_string(), Kind::Number)]);
        assert_eq!(kinds("11月30日"), [("11月30日".to_string(), Kind::Date)]);
        assert_eq!(kinds("11月に"), [("11月".to_string(), Kind::Month)]);
        // A day of three digits is no date: the month stays a month, the day a number.
        assert_eq!(
            kinds("11月300日"),
            [
                ("11月".to_string(), Kind::Month),
                ("300".to_string(), Kind::Number)
            ]
        );
        assert_eq!(kinds("2026人"), [("2026".to_string(), Kind::Number)]);
        // Durations with minutes or a half; an hour count alone is a number, or left alone.
        assert_eq!(
            kinds("2時間半、1時間30分、8時間、24時間"),
            [
                ("2時間半".to_string(), Kind::Hours),
                ("1時間30分".to_string(), Kind::Minutes),
                ("24".to_string(), Kind::Number),
            ]
        );
        for (run, english) in [
            ("2時間半", Some("2.5")),
            ("1時間30分", Some("1 hour and 30")),
            ("2時間15分", Some("2 hours and 15")),
            ("2時間75分", None),
        ] {
            assert_eq!(english_duration(run).as_deref(), english, "{run}");
        }
        // A target word is used once a line, and not where the line holds it already.
        let m = ja_en().mask("2時間半と1,700円。", |_| false, known_char);
        assert_eq!(m.line, "500時間と200円。");
        assert_eq!(put_back(&m), [("500", "2.5"), ("200", "1,700")]);
        let m = ja_en().mask("1時間30分と500円。", |r| r == "500", known_char);
        assert_eq!(m.line, "200分と500円。");
        // A line of stand-ins alone is written as it is, with its final punctuation.
        let p = ja_en();
        for (line, written) in [
            ("123", "123"),
            ("iPhone 15！", "iPhone 15!"),
            ("11月30日。", "November 30."),
            ("😀123", "😀 123"),
            ("John Mary", "John Mary"),
            ("午後3時。", "3 p.m."),
            ("100", "100"),
            ("1,000.", "1,000."),
        ] {
            let m = p.mask(line, |_| false, known_char);
            assert_eq!(
                (m.line.as_str(), m.wrap("").as_str()),
                ("", written),
                "{line}"
            );
        }
        assert_eq!(p.mask("123です。", |_| false, known_char).line, "500です。");
        assert_eq!(
            p.mask("123 100", |r| r == "100", known_char).line,
            "500 100"
        );
        assert_eq!(p.mask("。", |_| false, known_char).line, "。");
        let known = p.mask("100！", |r| r == "100", known_char);
        assert_eq!((known.line.as_str(), known.wrap("").as_str()), ("", "100!"));
        // A sign makes a number of any length: the translator drops it. A hyphen after a
        // letter is no sign.
        assert_eq!(
            kinds("気温は-5度、−10度、マイナス3度、-3万円、A-5。"),
            [
                ("-5".to_string(), Kind::Number),
                ("−10".to_string(), Kind::Number),
                ("マイナス3".to_string(), Kind::Number),
                ("-3万".to_string(), Kind::Number),
            ]
        );
        let m = ja_en().mask("気温は−5度だ。", |_| false, |c| c != '−');
        assert_eq!(m.line, "気温は500度だ。");
        assert_eq!(put_back(&m), [("500", "-5")]);
        // A translation without a stand-in's word dropped it; the next round takes the
        // table's next stand-in, and wraps around.
        let words = |text: &'static str| text.split(' ');
        assert_eq!(m.dropped(words("It was five degrees .")), 1);
        assert_eq!(m.dropped(words("It was 500 degrees .")), 0);
        let m = ja_en()
            .next_round()
            .mask("Johnは35度だ。", |_| false, known_char);
        assert_eq!(m.line, "ナンシーは200度だ。");
        assert_eq!(m.dropped(words("nancy is 200 .")), 0);
        let again = ja_en().next_round().next_round();
        assert_eq!(again.mask("35度", |_| false, known_char).line, "500度");
        // With 万, 億 or 兆 a number runs on to its last part; before a kanji numeral it is
        // left to the model.
        assert_eq!(
            kinds("2万ドル、1億2000万人、3万5000円、1万5千円、1万2万"),
            [
                ("2万".to_string(), Kind::Number),
                ("1億2000万".to_string(), Kind::Number),
                ("3万5000".to_string(), Kind::Number),
                ("1万".to_string(), Kind::Number),
                ("2万".to_string(), Kind::Number),
            ]
        );
        for (run, english) in [
            ("1,500", "1,500"),
            ("3万", "30,000"),
            ("1.5万", "15,000"),
            ("3万5000", "35,000"),
            ("1,400万", "14 million"),
            ("1234万", "12.34 million"),
            ("1億2000万", "120 million"),
            ("10億", "1 billion"),
            ("2兆", "2 trillion"),
            ("1億2345万6789", "123,456,789"),
            ("-5", "-5"),
            ("−3.5", "-3.5"),
            ("マイナス3万", "-30,000"),
        ] {
            assert_eq!(english_number(run).as_deref(), Some(english), "{run}");
        }
        assert_eq!(english_number("1.23456万"), None);
        let p = ja_en();
        let m = p.mask(
            "1952年に110円と29,002円と7円と300円。",
            |_| false,
            known_char,
        );
        assert_eq!(m.line, "1939年に500円と200円と7円と300円。");
        assert_eq!(
            put_back(&m),
            [("1939", "1952"), ("500", "110"), ("200", "29,002")]
        );
        // A number that is one known piece stays; one cut into pieces stands in from two
        // digits on.
        let m = p.mask("100円と110円。", |r| r == "100", known_char);
        assert_eq!(m.line, "100円と500円。");
        let m = p.mask("10人の中で彼は65歳で引退した。", |r| r == "10", known_char);
        assert_eq!(m.line, "10人の中で彼は500歳で引退した。");
        assert_eq!(put_back(&m), [("500", "65")]);
        let m = p.mask("東京の人口は約1400万人です。", |_| false, known_char);
        assert_eq!(m.line, "東京の人口は約500人です。");
        assert_eq!(put_back(&m), [("500", "14 million")]);
        // A stand-in the line already holds is not used (its own 500 takes the next one).
        let m = p.mask("500円と110円。", |_| false, known_char);
        assert_eq!(m.line, "200円と110円。");
    }

    /// Each stand-in's target word and what is written in its place.
    fn put_back(m: &Masked) -> Vec<(&str, &str)> {
        m.placeholders
            .iter()
            .map(|p| (p.target, p.output.as_str()))
            .collect()
    }

    #[test]
    fn months_and_dates_are_written_in_english() {
        let p = ja_en();
        // A month is written by its name, through 冬 (夏 when the line holds 冬), with its
        // year whether or not の stands between them (apart, the translator drops the month
        // in half the sentences tried: `2010年の8月は暑かった` → "It was hot in 2010").
        for line in ["2026年11月に。", "2026年の11月に。"] {
            let m = p.mask(line, |_| false, known_char);
            assert_eq!(m.line, "冬に。");
            assert_eq!(put_back(&m), [("winter", "November 2026")]);
        }
        let m = p.mask("2026年のの11月。", |_| false, known_char);
        assert_eq!(m.line, "1939年のの冬。");
        assert_eq!(
            p.mask("冬の11月と2月。", |_| false, known_char).line,
            "冬の夏と2月。"
        );
        assert_eq!(
            p.mask("13月と11月。", |_| false, known_char).line,
            "13月と冬。"
        );
        // A whole date stands in as a weekday the line does not hold, and is written in
        // English; one past the calendar is left as it is.
        let m = p.mask("2026年11月30日は月曜日、1月8日も。", |_| false, known_char);
        assert_eq!(m.line, "金曜日は月曜日、日曜日も。");
        assert_eq!(
            put_back(&m),
            [("Friday", "November 30, 2026"), ("Sunday", "January 8")]
        );
        assert_unchanged(&p, "13月5日と4月32日。");
    }

    #[test]
    fn clock_times_are_written_in_english() {
        let time = |run: &str| (run.to_string(), Kind::Time);
        // Hours alone (`5時`, which the translator reads) and durations (`時間`) are no time.
        assert_eq!(
            kinds("8時30分、3時半、午後3時、2時間、5時、12時間、8:30、午前10時5分、10:5。"),
            [
                time("8時30分"),
                time("3時半"),
                time("午後3時"),
                ("12".to_string(), Kind::Number),
                time("8:30"),
                time("午前10時5分"),
                ("10".to_string(), Kind::Number),
            ]
        );
        let p = ja_en();
        let m = p.mask("会議は8時30分に始まります。", |_| false, known_char);
        assert_eq!(m.line, "会議は正午に始まります。");
        assert_eq!(put_back(&m), [("noon", "8:30")]);
        let m = p.mask("午後3時から午前8時5分まで。", |_| false, known_char);
        assert_eq!(m.line, "正午から真夜中まで。");
        assert_eq!(
            put_back(&m),
            [("noon", "3 p.m."), ("midnight", "8:05 a.m.")]
        );
        let m = p.mask("正午と7:45と11時半。", |_| false, known_char);
        assert_eq!(m.line, "正午と真夜中と11時半。");
        assert_eq!(put_back(&m), [("midnight", "7:45")]);
        let m = p.mask("午前0時30分と午後0時。", |_| false, known_char);
        assert_eq!(
            put_back(&m),
            [("noon", "12:30 a.m."), ("midnight", "12 p.m.")]
        );
        // A time past the clock is left as it is.
        assert_unchanged(&p, "25時30分と8時60分と午後13時。");
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
        assert_eq!(m.placeholders[0].output, "Ω");
        // A run of symbols is one stand-in, across the spaces and joiners between them.
        let m = p.mask("猫👍\u{200d}👍 👍が好き。Tomも", |_| false, known_char);
        assert_eq!(m.line, "猫ケンが好き。ナンシーも");
        assert_eq!(m.placeholders[0].output, "👍\u{200d}👍 👍");
        // A line of symbols only is all prefix; nothing is left to translate.
        let m = p.mask(" 😀 ", |_| false, known_char);
        assert_eq!((m.line.as_str(), m.prefix.as_str()), ("", "😀"));
        assert_eq!(m.wrap(""), "😀");
        // Known characters at the edges stay in the line, and so do unknown kanji (a word's).
        let m = p.mask("猫。", |_| false, known_char);
        assert_eq!((m.line.as_str(), m.suffix.as_str()), ("猫。", ""));
        assert_unchanged(&p, "陛下万歳陛");
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
