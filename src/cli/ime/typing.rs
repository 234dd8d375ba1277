//! `ime segments`: what a user gains from editing a conversion segment by segment, measured on
//! the shipped converter as an app runs it (`Converter::open`, `Session::press`), and how long
//! each of those keys takes.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::Args;
use fastsoftmax_ime::session::PAGE;
use fastsoftmax_ime::{Converter, Key};
use indicatif::{ProgressBar, ProgressStyle};

use super::{percentile, read_pairs};

/// What every typing measurement reads.
#[derive(Args, Debug)]
pub struct Typed {
    /// The converter folder (`ime pack`; the shipped one by default).
    #[arg(long, default_value = "assets/models/ime-ja")]
    model: PathBuf,
    /// Evaluation sentences in document order, `reading<TAB>display` (default: the 1,850 KWDLC
    /// test sentences of `data fetch ja`).
    #[arg(long, default_value = "data/ja/eval.tsv")]
    eval: PathBuf,
    /// Only the first N sentences.
    #[arg(long)]
    limit: Option<usize>,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    json: bool,
}

impl Typed {
    /// The sentences and the converter.
    fn open(&self) -> anyhow::Result<(Vec<(String, String)>, Converter)> {
        let mut pairs = read_pairs(&self.eval).with_context(|| {
            format!(
                "reading {} (make it with `fastsoftmax data fetch ja --from DIR`)",
                self.eval.display()
            )
        })?;
        pairs.truncate(self.limit.unwrap_or(usize::MAX));
        if pairs.is_empty() {
            bail!("{} holds no sentences", self.eval.display());
        }
        let converter = Converter::open(&self.model)
            .with_context(|| format!("opening the converter in {}", self.model.display()))?;
        Ok((pairs, converter))
    }
}

fn progress(len: usize) -> ProgressBar {
    ProgressBar::new(len as u64).with_style(
        ProgressStyle::with_template("typing {bar:40} {pos}/{len}, ETA {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    )
}

#[derive(Args, Debug)]
pub struct SegmentsArgs {
    #[command(flatten)]
    typed: Typed,
}

/// Milliseconds of one kind of key: median, p99, max, count.
#[derive(serde::Serialize, Default)]
struct KeyTimes {
    keys: usize,
    median_ms: f64,
    p99_ms: f64,
    max_ms: f64,
}

impl KeyTimes {
    fn of(mut ms: Vec<f64>) -> Self {
        ms.sort_by(f64::total_cmp);
        KeyTimes {
            keys: ms.len(),
            median_ms: percentile(&ms, 0.5),
            p99_ms: percentile(&ms, 0.99),
            max_ms: ms.last().copied().unwrap_or(0.0),
        }
    }
}

#[derive(serde::Serialize)]
struct SegmentsReport {
    model: PathBuf,
    sentences: usize,
    /// Sentences whose first conversion (Space) is the gold text.
    top1: f64,
    wrong: usize,
    /// Wrong sentences that one segment's first page (9 alternatives) turns into the gold text,
    /// the other segments as converted.
    fixed: usize,
    fixed_share_of_wrong: f64,
    /// Mean keys to fix a fixed sentence, the focus starting on the first segment as in Mozc:
    /// → per segment passed, then Space (the second alternative) or Space and a digit.
    keys_per_fix: f64,
    /// Fixed sentences by the segment fixed (first, second, …; the last bucket: later).
    fixed_in_segment: Vec<usize>,
    /// Segments per conversion (mean).
    segments_per_sentence: f64,
    typing: KeyTimes,
    /// Space: the whole input converted and split into segments.
    convert: KeyTimes,
    /// → : the focus moves.
    focus: KeyTimes,
    /// Space on a segment: its window opens (its alternatives decoded, the first time).
    window: KeyTimes,
    /// Shift+→ then Shift+← on the first segment: two spans decoded again, each.
    resize: KeyTimes,
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

pub fn run(args: SegmentsArgs) -> anyhow::Result<()> {
    let args = args.typed;
    let (pairs, converter) = args.open()?;
    let mut session = converter.session(PAGE)?;
    let bar = progress(pairs.len());
    let (mut typing, mut convert, mut focus, mut window, mut resize) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut top1, mut fixed, mut keys, mut segments) = (0usize, 0usize, 0usize, 0usize);
    let mut fixed_in_segment = vec![0usize; 6];
    for (reading, gold) in &pairs {
        session.new_paragraph();
        for c in reading.chars() {
            let t = Instant::now();
            session.press(Key::Char(c));
            typing.push(ms(t));
        }
        let t = Instant::now();
        session.press(Key::Space);
        convert.push(ms(t));
        let texts: Vec<String> = session
            .segments()
            .iter()
            .map(|s| s.text().to_string())
            .collect();
        segments += texts.len();
        if texts.concat() == *gold {
            top1 += 1;
        } else {
            // The fewest keys over every segment and alternative that give the gold text.
            let mut best: Option<(usize, usize)> = None;
            for i in 0..texts.len() {
                if i > 0 {
                    let t = Instant::now();
                    session.press(Key::Right);
                    focus.push(ms(t));
                }
                let t = Instant::now();
                let alternatives = session.alternatives();
                window.push(ms(t));
                for (k, alternative) in alternatives.iter().enumerate().take(PAGE) {
                    let mut edited = texts.clone();
                    edited[i] = alternative.clone();
                    if edited.concat() == *gold {
                        let cost = i + if k == 1 { 1 } else { 2 };
                        if best.is_none_or(|(c, _)| cost < c) {
                            best = Some((cost, i));
                        }
                    }
                }
            }
            if let Some((cost, i)) = best {
                fixed += 1;
                keys += cost;
                fixed_in_segment[i.min(5)] += 1;
            }
        }
        // Resizing the first segment, as Shift+→ and Shift+← do.
        session.press(Key::Escape);
        session.press(Key::Space);
        for key in [Key::ShiftRight, Key::ShiftLeft] {
            let t = Instant::now();
            session.press(key);
            resize.push(ms(t));
        }
        session.press(Key::Escape);
        bar.inc(1);
    }
    bar.finish_and_clear();
    let n = pairs.len();
    let wrong = n - top1;
    let report = SegmentsReport {
        model: args.model.clone(),
        sentences: n,
        top1: top1 as f64 / n as f64,
        wrong,
        fixed,
        fixed_share_of_wrong: fixed as f64 / wrong.max(1) as f64,
        keys_per_fix: keys as f64 / fixed.max(1) as f64,
        fixed_in_segment,
        segments_per_sentence: segments as f64 / n as f64,
        typing: KeyTimes::of(typing),
        convert: KeyTimes::of(convert),
        focus: KeyTimes::of(focus),
        window: KeyTimes::of(window),
        resize: KeyTimes::of(resize),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let r = &report;
    println!(
        "{}: top-1 {:.2}% of {} sentences ({:.2} segments each); of the {} wrong, {} ({:.1}%) \
         fixed within one segment's first page, {:.2} keys each",
        r.model.display(),
        100.0 * r.top1,
        r.sentences,
        r.segments_per_sentence,
        r.wrong,
        r.fixed,
        100.0 * r.fixed_share_of_wrong,
        r.keys_per_fix,
    );
    println!(
        "fixed in segment 1, 2, 3, 4, 5, later: {:?}",
        r.fixed_in_segment
    );
    println!("ms per key        keys   median      p99      max");
    for (name, k) in [
        ("typing", &r.typing),
        ("Space (convert)", &r.convert),
        ("→ (focus)", &r.focus),
        ("window", &r.window),
        ("Shift+→/←", &r.resize),
    ] {
        println!(
            "{name:<16} {:>6} {:>8.3} {:>8.3} {:>8.3}",
            k.keys, k.median_ms, k.p99_ms, k.max_ms
        );
    }
    Ok(())
}

#[derive(Args, Debug)]
pub struct LearnArgs {
    #[command(flatten)]
    typed: Typed,
    /// The same sentences in words (`display/reading …` per line, a superset): what a commit
    /// of the gold conversion teaches.
    #[arg(long, default_value = "data/ja/test.txt")]
    words: PathBuf,
}

#[derive(serde::Serialize)]
struct LearnReport {
    model: PathBuf,
    sentences: usize,
    /// Top-1 with nothing learned.
    before: f64,
    /// Top-1 while learning: each sentence converted, then its gold conversion committed.
    first_pass: f64,
    /// Top-1 of a second pass over the same text, the history of the first kept.
    second_pass: f64,
    /// Entries the history holds at the end (words and pairs).
    entries: usize,
    /// Typing with the history consulted.
    typing: KeyTimes,
}

/// `display/reading` words of each line of `path`, by `(reading, display)` of the sentence.
#[allow(clippy::type_complexity)]
fn sentence_words(
    path: &std::path::Path,
) -> anyhow::Result<std::collections::HashMap<(String, String), Vec<(String, String)>>> {
    let text = std::fs::read_to_string(path).with_context(|| {
        format!(
            "reading {} (make it with `fastsoftmax data fetch ja --from DIR`)",
            path.display()
        )
    })?;
    let mut out = std::collections::HashMap::new();
    for (n, line) in text.lines().enumerate() {
        let mut words = Vec::new();
        for w in line.split_whitespace() {
            let (display, reading) = w.rsplit_once('/').with_context(|| {
                format!(
                    "{}:{}: `{w}` is not `display/reading`",
                    path.display(),
                    n + 1
                )
            })?;
            words.push((display.to_string(), reading.to_string()));
        }
        let reading: String = words.iter().map(|(_, r)| r.as_str()).collect();
        let display: String = words.iter().map(|(d, _)| d.as_str()).collect();
        out.entry((reading, display)).or_insert(words);
    }
    Ok(out)
}

pub fn run_learn(args: LearnArgs) -> anyhow::Result<()> {
    let (pairs, converter) = args.typed.open()?;
    let words = sentence_words(&args.words)?;
    let golds: Vec<&Vec<(String, String)>> = pairs
        .iter()
        .map(|p| {
            words.get(p).with_context(|| {
                format!(
                    "{} lacks the words of `{}`: --words must hold every --eval sentence",
                    args.words.display(),
                    p.1
                )
            })
        })
        .collect::<anyhow::Result<_>>()?;
    let mut session = converter.session(PAGE)?;
    let bar = progress(3 * pairs.len());
    let mut typing = Vec::new();
    // Pass 0 learns nothing; passes 1 and 2 commit each gold conversion after converting.
    let mut top1 = [0usize; 3];
    for (pass, hits) in top1.iter_mut().enumerate() {
        for ((reading, gold), gold_words) in pairs.iter().zip(&golds) {
            // What the user sees after Space: the conversion, learned segments applied.
            let key_ms = (pass > 0).then_some(&mut typing);
            let text: String = converted(&mut session, reading, key_ms)
                .iter()
                .map(|(d, _)| d.as_str())
                .collect();
            *hits += (text == *gold) as usize;
            if pass > 0 {
                session.learn(gold_words);
            }
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let n = pairs.len() as f64;
    let report = LearnReport {
        model: args.typed.model.clone(),
        sentences: pairs.len(),
        before: top1[0] as f64 / n,
        first_pass: top1[1] as f64 / n,
        second_pass: top1[2] as f64 / n,
        entries: session.history().len(),
        typing: KeyTimes::of(typing),
    };
    if args.typed.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let r = &report;
    println!(
        "{}: top-1 on {} sentences: {:.2}% with nothing learned, {:.2}% on the first pass \
         (each gold conversion committed after it is converted), {:.2}% on the second \
         ({:+.2} points); {} history entries; typing {:.3} ms per key (median), p99 {:.3}",
        r.model.display(),
        r.sentences,
        100.0 * r.before,
        100.0 * r.first_pass,
        100.0 * r.second_pass,
        100.0 * (r.second_pass - r.first_pass),
        r.entries,
        r.typing.median_ms,
        r.typing.p99_ms,
    );
    Ok(())
}

#[derive(Args, Debug)]
pub struct UserDictArgs {
    #[command(flatten)]
    typed: Typed,
    /// The same sentences in words (`display/reading …` per line, a superset).
    #[arg(long, default_value = "data/ja/test.txt")]
    words: PathBuf,
    /// Bonuses to try (nats a user word gains over the lexicon's words of its reading).
    #[arg(long, value_delimiter = ',', default_value = "0,1,2,4,8")]
    bonuses: Vec<f32>,
}

#[derive(serde::Serialize)]
struct UserDictRow {
    bonus: f32,
    top1: f64,
    /// Of the sentences converted wrong without the dictionary, those now right.
    fixed: usize,
    /// Of the sentences converted right without it, those now wrong.
    broken: usize,
}

#[derive(serde::Serialize)]
struct UserDictReport {
    model: PathBuf,
    sentences: usize,
    /// Top-1 (the conversion after Space) with no user dictionary.
    before: f64,
    wrong: usize,
    /// Words registered: the content words (not all hiragana) of each wrong sentence's gold
    /// conversion that the converter did not propose.
    registered: usize,
    rows: Vec<UserDictRow>,
}

/// The `(display, reading)` words of `reading` typed from no context (each key's milliseconds
/// onto `key_ms`, when given) and converted with Space; the input is then dropped (Escape).
fn converted(
    session: &mut fastsoftmax_ime::Session<'_, impl fastsoftmax_ime::Scorer>,
    reading: &str,
    mut key_ms: Option<&mut Vec<f64>>,
) -> Vec<(String, String)> {
    session.new_paragraph();
    for c in reading.chars() {
        let t = Instant::now();
        session.press(Key::Char(c));
        if let Some(times) = key_ms.as_deref_mut() {
            times.push(ms(t));
        }
    }
    session.press(Key::Space);
    let words = session
        .segments()
        .iter()
        .flat_map(|s| s.words().iter().cloned())
        .collect();
    session.press(Key::Escape);
    words
}

/// `(end in kana, display, reading)` of each word.
fn word_ends(words: &[(String, String)]) -> Vec<(usize, &str, &str)> {
    let mut at = 0;
    words
        .iter()
        .map(|(d, r)| {
            at += r.chars().count();
            (at, d.as_str(), r.as_str())
        })
        .collect()
}

pub fn run_user_dict(args: UserDictArgs) -> anyhow::Result<()> {
    use fastsoftmax_ime::{Pos, UserDictionary, UserWord};
    let (pairs, converter) = args.typed.open()?;
    let words = sentence_words(&args.words)?;
    let mut session = converter.session(PAGE)?;
    let bar = progress((1 + args.bonuses.len()) * pairs.len());
    let mut right = Vec::with_capacity(pairs.len());
    let mut dictionary = UserDictionary::new();
    for pair in &pairs {
        let proposed = converted(&mut session, &pair.0, None);
        let text: String = proposed.iter().map(|(d, _)| d.as_str()).collect();
        right.push(text == pair.1);
        if text != pair.1 {
            let gold = words.get(pair).with_context(|| {
                format!("{} lacks the words of `{}`", args.words.display(), pair.1)
            })?;
            let have = word_ends(&proposed);
            for (end, display, reading) in word_ends(gold) {
                let content = display.chars().any(|c| !('ぁ'..='ゖ').contains(&c));
                if content && !have.iter().any(|h| h.0 == end && h.1 == display) {
                    // Duplicates and words the dictionary refuses are skipped.
                    let _ = dictionary.add(UserWord::new(reading, display, Pos::Noun, ""));
                }
            }
        }
        bar.inc(1);
    }
    let mut rows = Vec::new();
    for &bonus in &args.bonuses {
        session.set_user_dictionary(&dictionary, bonus);
        let (mut top1, mut fixed, mut broken) = (0, 0, 0);
        for (pair, &was_right) in pairs.iter().zip(&right) {
            let text: String = converted(&mut session, &pair.0, None)
                .iter()
                .map(|(d, _)| d.as_str())
                .collect();
            let ok = text == pair.1;
            top1 += ok as usize;
            fixed += (ok && !was_right) as usize;
            broken += (!ok && was_right) as usize;
            bar.inc(1);
        }
        rows.push(UserDictRow {
            bonus,
            top1: top1 as f64 / pairs.len() as f64,
            fixed,
            broken,
        });
    }
    bar.finish_and_clear();
    let n = pairs.len();
    let report = UserDictReport {
        model: args.typed.model.clone(),
        sentences: n,
        before: right.iter().filter(|&&r| r).count() as f64 / n as f64,
        wrong: right.iter().filter(|&&r| !r).count(),
        registered: dictionary.len(),
        rows,
    };
    if args.typed.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "{}: {} sentences, top-1 {:.2}% without a user dictionary; {} words registered from the \
         {} wrong ones",
        report.model.display(),
        n,
        100.0 * report.before,
        report.registered,
        report.wrong
    );
    println!("bonus   top-1 %   fixed   broken");
    for r in &report.rows {
        println!(
            "{:>5.1} {:>9.2} {:>7} {:>8}",
            r.bonus,
            100.0 * r.top1,
            r.fixed,
            r.broken
        );
    }
    Ok(())
}

#[derive(Args, Debug)]
pub struct PredictArgs {
    #[command(flatten)]
    typed: Typed,
    /// The same sentences in words (`display/reading …` per line, a superset).
    #[arg(long, default_value = "data/ja/test.txt")]
    words: PathBuf,
    /// Suggestions shown.
    #[arg(short, long, default_value_t = 3)]
    k: usize,
}

#[derive(serde::Serialize)]
struct PredictReport {
    model: PathBuf,
    sentences: usize,
    suggestions_shown: usize,
    /// Kana keys typed word by word without suggestions: each word's kana and one key to
    /// convert and commit it.
    keys_without: usize,
    /// With suggestions: the kana typed until the word is suggested, and one key to take it.
    keys_with: usize,
    saved: f64,
    /// Words taken from a suggestion: with nothing typed (predicted), or completed.
    predicted: usize,
    completed: usize,
    words: usize,
    /// Milliseconds to make the suggestions.
    suggest: KeyTimes,
    /// A kana typed and the suggestions that follow it, as a front end shows them.
    key_and_suggest: KeyTimes,
}

pub fn run_predict(args: PredictArgs) -> anyhow::Result<()> {
    let (pairs, converter) = args.typed.open()?;
    let words = sentence_words(&args.words)?;
    let mut session = converter.session(PAGE)?;
    let bar = progress(pairs.len());
    let (mut without, mut with, mut predicted, mut completed, mut n_words) = (0, 0, 0, 0, 0);
    let (mut times, mut keyed) = (Vec::new(), Vec::new());
    for pair in &pairs {
        let gold = words
            .get(pair)
            .with_context(|| format!("{} lacks the words of `{}`", args.words.display(), pair.1))?;
        session.new_paragraph();
        for (display, reading) in gold {
            let kana: Vec<char> = reading.chars().collect();
            n_words += 1;
            without += kana.len() + 1;
            let mut taken = false;
            let mut key_ms = None;
            for i in 0..=kana.len() {
                let t = Instant::now();
                let offered = session.suggestions(args.k);
                times.push(ms(t));
                if let Some(key) = key_ms.take() {
                    keyed.push(key + ms(t));
                }
                if let Some(s) = offered.iter().find(|s| &s.text == display) {
                    with += i + 1;
                    if i == 0 {
                        predicted += 1;
                    } else {
                        completed += 1;
                    }
                    session.accept(s);
                    taken = true;
                    break;
                }
                if let Some(&c) = kana.get(i) {
                    let t = Instant::now();
                    session.key(c);
                    key_ms = Some(ms(t));
                }
            }
            if !taken {
                with += kana.len() + 1;
                session.clear();
                session.commit_words(&[(display.clone(), reading.clone())]);
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let report = PredictReport {
        model: args.typed.model.clone(),
        sentences: pairs.len(),
        suggestions_shown: args.k,
        keys_without: without,
        keys_with: with,
        saved: 1.0 - with as f64 / without.max(1) as f64,
        predicted,
        completed,
        words: n_words,
        suggest: KeyTimes::of(times),
        key_and_suggest: KeyTimes::of(keyed),
    };
    if args.typed.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let r = &report;
    println!(
        "{}: {} sentences, {} words typed word by word with {} suggestions: {} kana keys \
         against {} without ({:.1}% saved); {} words predicted before a key, {} completed; \
         suggestions in {:.3} ms (median), p99 {:.3}; a kana with its suggestions {:.3} ms, \
         p99 {:.3}",
        r.model.display(),
        r.sentences,
        r.words,
        r.suggestions_shown,
        r.keys_with,
        r.keys_without,
        100.0 * r.saved,
        r.predicted,
        r.completed,
        r.suggest.median_ms,
        r.suggest.p99_ms,
        r.key_and_suggest.median_ms,
        r.key_and_suggest.p99_ms
    );
    Ok(())
}
