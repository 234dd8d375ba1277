//! Corpus BLEU exactly as sacreBLEU computes it by default: the `13a` tokenizer (mteval-v13a),
//! case-sensitive, n-grams up to 4, the `exp` smoothing of zero counts, and the brevity penalty
//! over the whole corpus — so `fastsoftmax bleu` and `sacrebleu` print the same number.

use std::collections::HashMap;

/// A corpus BLEU score with the statistics sacreBLEU prints beside it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Bleu {
    /// 0–100.
    pub score: f64,
    /// Modified n-gram precisions, n = 1…4, in percent (after smoothing).
    pub precisions: [f64; 4],
    pub brevity_penalty: f64,
    /// Hypothesis and reference lengths in 13a tokens.
    pub sys_len: usize,
    pub ref_len: usize,
}

impl Bleu {
    /// `BLEU = 34.56 60.1/40.2/28.3/20.0 (BP = 1.000 ratio = 1.012 hyp_len = … ref_len = …)`,
    /// sacreBLEU's own format.
    pub fn summary(&self) -> String {
        let p = self.precisions;
        format!(
            "BLEU = {:.2} {:.1}/{:.1}/{:.1}/{:.1} (BP = {:.3} ratio = {:.3} hyp_len = {} ref_len = {})",
            self.score,
            p[0],
            p[1],
            p[2],
            p[3],
            self.brevity_penalty,
            self.sys_len as f64 / self.ref_len.max(1) as f64,
            self.sys_len,
            self.ref_len
        )
    }
}

/// Corpus BLEU of `hyps` against one reference each (`refs[i]` for `hyps[i]`); both detokenized
/// text. The caller checks the lengths match.
pub fn corpus_bleu<S: AsRef<str>, R: AsRef<str>>(hyps: &[S], refs: &[R]) -> Bleu {
    assert_eq!(hyps.len(), refs.len(), "one reference per hypothesis");
    let (mut correct, mut total) = ([0u64; 4], [0u64; 4]);
    let (mut sys_len, mut ref_len) = (0usize, 0usize);
    for (h, r) in hyps.iter().zip(refs) {
        let h = tokenize_13a(h.as_ref());
        let r = tokenize_13a(r.as_ref());
        sys_len += h.len();
        ref_len += r.len();
        for n in 1..=4 {
            let ref_counts = ngram_counts(&r, n);
            for (gram, count) in ngram_counts(&h, n) {
                let clip = ref_counts.get(&gram).copied().unwrap_or(0);
                correct[n - 1] += count.min(clip);
                total[n - 1] += count;
            }
        }
    }
    let mut precisions = [0.0; 4];
    let mut smooth = 1.0;
    for n in 0..4 {
        if total[n] == 0 {
            break;
        }
        precisions[n] = if correct[n] == 0 {
            smooth *= 2.0;
            100.0 / (smooth * total[n] as f64)
        } else {
            100.0 * correct[n] as f64 / total[n] as f64
        };
    }
    let brevity_penalty = if sys_len >= ref_len {
        1.0
    } else if sys_len > 0 {
        (1.0 - ref_len as f64 / sys_len as f64).exp()
    } else {
        0.0
    };
    // sacreBLEU's log of 0 is −9,999,999,999: a zero precision makes the score 0.
    let log = |p: f64| if p == 0.0 { -9_999_999_999.0 } else { p.ln() };
    let score = brevity_penalty * (precisions.iter().map(|&p| log(p)).sum::<f64>() / 4.0).exp();
    Bleu {
        score,
        precisions,
        brevity_penalty,
        sys_len,
        ref_len,
    }
}

fn ngram_counts(tokens: &[String], n: usize) -> HashMap<&[String], u64> {
    let mut counts = HashMap::new();
    for gram in tokens.windows(n) {
        *counts.entry(gram).or_insert(0) += 1;
    }
    counts
}

/// The `13a` tokenizer of sacreBLEU (mteval-v13a.pl): ASCII punctuation split off, periods and
/// commas split unless next to a digit, a dash split after a digit. Each rule is a left-to-right
/// pass of non-overlapping matches, as Python's `re.sub`.
pub fn tokenize_13a(line: &str) -> Vec<String> {
    let mut line = line
        .replace("<skipped>", "")
        .replace("-\n", "")
        .replace('\n', " ");
    if line.contains('&') {
        line = line
            .replace("&quot;", "\"")
            .replace("&amp;", "&")
            .replace("&lt;", "<")
            .replace("&gt;", ">");
    }
    // Rule 1: `([\{-\~\[-\` -\&\(-\+\:-\@\/])` → ` \1 `.
    let mut s: Vec<char> = Vec::with_capacity(line.len() + 16);
    s.push(' ');
    for c in line.chars() {
        let split = matches!(c, '{'..='~' | '['..='`' | ' '..='&' | '('..='+' | ':'..='@' | '/');
        if split {
            s.extend([' ', c, ' ']);
        } else {
            s.push(c);
        }
    }
    s.push(' ');
    let digit = |c: char| c.is_ascii_digit();
    let period_or_comma = |c: char| c == '.' || c == ',';
    // Rule 2: `([^0-9])([\.,])` → `\1 \2 `.
    s = pairs(
        &s,
        |a, b| !digit(a) && period_or_comma(b),
        |a, b| vec![a, ' ', b, ' '],
    );
    // Rule 3: `([\.,])([^0-9])` → ` \1 \2`.
    s = pairs(
        &s,
        |a, b| period_or_comma(a) && !digit(b),
        |a, b| vec![' ', a, ' ', b],
    );
    // Rule 4: `([0-9])(-)` → `\1 \2 `.
    s = pairs(&s, |a, b| digit(a) && b == '-', |a, b| vec![a, ' ', b, ' ']);
    let text: String = s.into_iter().collect();
    text.split_whitespace().map(str::to_string).collect()
}

/// One `re.sub` pass of a two-character pattern: scans left to right, replacing each match and
/// resuming after it.
fn pairs(
    s: &[char],
    matches: impl Fn(char, char) -> bool,
    replace: impl Fn(char, char) -> Vec<char>,
) -> Vec<char> {
    let mut out = Vec::with_capacity(s.len() + s.len() / 4);
    let mut i = 0;
    while i < s.len() {
        if i + 1 < s.len() && matches(s[i], s[i + 1]) {
            out.extend(replace(s[i], s[i + 1]));
            i += 2;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokenizer_13a_splits_like_mteval() {
        assert_eq!(
            tokenize_13a("Hello, world! It's 3.14 and 1,000 -- (x)\"y\". 5-6"),
            [
                "Hello", ",", "world", "!", "It's", "3.14", "and", "1,000", "--", "(", "x", ")",
                "\"", "y", "\"", ".", "5", "-", "6"
            ]
        );
        assert!(tokenize_13a("").is_empty());
    }

    #[test]
    fn identical_text_scores_100_and_empty_output_scores_0() {
        let refs = ["Im Anfang war das Wort.", "Und das Wort war bei Gott."];
        assert!((corpus_bleu(&refs, &refs).score - 100.0).abs() < 1e-9);
        assert_eq!(corpus_bleu(&["", ""], &refs).score, 0.0);
    }
}
