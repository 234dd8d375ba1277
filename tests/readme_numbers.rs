//! Every result the README quotes agrees with the results file it came from.
//!
//! `experiments/results/readme-numbers.json` lists the README's passages that hold numbers:
//! each `{}` in a passage is a value read from a JSON row (or, where a run left only a
//! markdown table, a line of that results file), rendered as the README prints it; the
//! rendered passage must be in the README. Numbers that are not our results (a paper's, a
//! setup's) are listed as `quoted` with where they come from. Then no number with a decimal
//! point or a unit (×, %, ms, µs, MB, words/s, tok/s, tokens/s) may be left in the README's
//! prose outside the listed passages, so a new number cannot enter the README without a
//! source. Fenced code (commands, captured output) and inline code (names) are not prose, so
//! a passage is matched in the prose with its inline code blanked: keep code out of its text.

use std::path::PathBuf;

use serde_json::Value;

const CLAIMS: &str = "experiments/results/readme-numbers.json";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The rows of a results file: its JSON lines, the elements of its array, or its object.
fn rows(file: &str) -> Result<Vec<Value>, String> {
    let text = std::fs::read_to_string(root().join(file)).map_err(|e| format!("{file}: {e}"))?;
    if file.ends_with(".jsonl") {
        return text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).map_err(|e| format!("{file}: {e}")))
            .collect();
    }
    match serde_json::from_str(&text).map_err(|e| format!("{file}: {e}"))? {
        Value::Array(rows) => Ok(rows),
        row => Ok(vec![row]),
    }
}

/// `path` ("a.b.c") inside `row`.
fn get<'a>(row: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(row, |v, key| match v {
        Value::Array(items) => items.get(key.parse::<usize>().ok()?),
        _ => v.get(key),
    })
}

fn same(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// `x` with `digits` decimals, the integer part grouped by commas from 1,000 up.
fn render(x: f64, digits: usize) -> String {
    let fixed = format!("{:.*}", digits, x.abs());
    let (int, frac) = fixed.split_once('.').unwrap_or((&fixed, ""));
    let mut grouped = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 && int.len() >= 4 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    let sign = if x < 0.0 && fixed.chars().any(|c| ('1'..='9').contains(&c)) {
        "−"
    } else {
        ""
    };
    match frac {
        "" => format!("{sign}{grouped}"),
        f => format!("{sign}{grouped}.{f}"),
    }
}

/// A value spec's number: a JSON row's field (`json`, `where`, `field`, `scale`; the median
/// over a run's rounds where the rows carry `round`), or the
/// `ratio` or `difference` of two such.
fn number(spec: &Value) -> Result<f64, String> {
    if let Some(file) = spec.get("json").and_then(Value::as_str) {
        let field = spec["field"]
            .as_str()
            .ok_or(format!("{spec}: no \"field\""))?;
        let wanted = spec.get("where").and_then(Value::as_object);
        let all = rows(file)?;
        let hits: Vec<&Value> = all
            .iter()
            .filter(|row| {
                wanted.is_none_or(|w| {
                    w.iter()
                        .all(|(k, v)| get(row, k).is_some_and(|got| same(got, v)))
                })
            })
            .collect();
        // One row, or one per round of a run's interleaved rounds: their median, as the
        // results tables print it.
        let mut rounds: Vec<f64> = hits
            .iter()
            .filter_map(|r| get(r, "round")?.as_f64())
            .collect();
        rounds.sort_by(f64::total_cmp);
        rounds.dedup();
        if hits.is_empty() || (hits.len() > 1 && rounds.len() != hits.len()) {
            return Err(format!(
                "{file}: {} rows match {}, not one (or one per round)",
                hits.len(),
                spec.get("where").unwrap_or(&Value::Null)
            ));
        }
        let mut xs = hits
            .iter()
            .map(|row| {
                get(row, field)
                    .and_then(Value::as_f64)
                    .ok_or(format!("{file}: the row has no number at {field:?}"))
            })
            .collect::<Result<Vec<f64>, String>>()?;
        xs.sort_by(f64::total_cmp);
        let n = xs.len();
        let x = (xs[(n - 1) / 2] + xs[n / 2]) / 2.0;
        return Ok(x * spec.get("scale").and_then(Value::as_f64).unwrap_or(1.0));
    }
    let pair = |key: &str| spec.get(key).and_then(Value::as_array).map(|v| &v[..]);
    if let Some([a, b]) = pair("ratio") {
        return Ok(number(a)? / number(b)?);
    }
    if let Some([a, b]) = pair("difference") {
        return Ok(number(a)? - number(b)?);
    }
    Err(format!("{spec}: not a json, ratio or difference value"))
}

/// A value spec as the README prints it: a number to `digits` decimals, or the text of an
/// `md` value found on a `line` of that results file.
fn value(spec: &Value) -> Result<String, String> {
    if let Some(file) = spec.get("md").and_then(Value::as_str) {
        let (line, value) = (spec["line"].as_str(), spec["value"].as_str());
        let (Some(line), Some(value)) = (line, value) else {
            return Err(format!("{spec}: an md value needs \"line\" and \"value\""));
        };
        let text =
            std::fs::read_to_string(root().join(file)).map_err(|e| format!("{file}: {e}"))?;
        return match text.lines().any(|l| l.contains(line) && l.contains(value)) {
            true => Ok(value.to_string()),
            false => Err(format!("{file}: no line holds both {line:?} and {value:?}")),
        };
    }
    let digits = spec.get("digits").and_then(Value::as_u64).unwrap_or(0) as usize;
    Ok(render(number(spec)?, digits))
}

/// The README's prose: fenced code blocks and inline code spans blanked out.
fn prose(readme: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in readme.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            out.push('\n');
            continue;
        }
        if !fenced {
            let mut code = false;
            for c in line.chars() {
                if c == '`' {
                    code = !code;
                }
                out.push(if code || c == '`' { ' ' } else { c });
            }
        }
        out.push('\n');
    }
    out
}

/// The numbers in `text` that read as results: with a decimal point or a unit after them.
fn quoted_numbers(text: &str) -> Vec<String> {
    // " tok" covers tok/s and tokens/s.
    const UNITS: [&str; 8] = ["×", "%", " %", " ms", " µs", " MB", " words/s", " tok"];
    let chars: Vec<char> = text.chars().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts = chars[i].is_ascii_digit()
            && (i == 0 || !(chars[i - 1].is_alphanumeric() || "@._-/".contains(chars[i - 1])));
        if !starts {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < chars.len()
            && (chars[j].is_ascii_digit()
                || (",.".contains(chars[j]) && chars.get(j + 1).is_some_and(char::is_ascii_digit)))
        {
            j += 1;
        }
        let num: String = chars[i..j].iter().collect();
        let rest: String = chars[j..chars.len().min(j + 9)].iter().collect();
        let unit = UNITS.iter().any(|u| rest.starts_with(u));
        let word_follows = chars.get(j).is_some_and(|c| c.is_alphanumeric());
        if (num.contains('.') || unit) && !word_follows {
            let line = text[..text.char_indices().nth(i).map_or(0, |(b, _)| b)]
                .lines()
                .count();
            found.push(format!(
                "line {line}: {num}{}",
                rest.lines().next().unwrap_or("")
            ));
        }
        i = j.max(i + 1);
    }
    found
}

#[test]
fn every_number_in_the_readme_comes_from_its_results_file() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let claims: Value =
        serde_json::from_str(&std::fs::read_to_string(root().join(CLAIMS)).unwrap())
            .unwrap_or_else(|e| panic!("{CLAIMS}: {e}"));
    let mut problems = Vec::new();
    let text = prose(&readme);
    let mut passages = Vec::new();
    for claim in claims["claims"].as_array().expect("a \"claims\" array") {
        let template = claim["text"].as_str().expect("every claim has a \"text\"");
        let values = claim.get("values").and_then(Value::as_array);
        let rendered = match (values, claim.get("quoted")) {
            (Some(values), None) => {
                let mut parts = template.split("{}");
                let mut out = parts.next().unwrap_or_default().to_string();
                let mut ok = true;
                for (part, spec) in parts.zip(values.iter().chain(std::iter::repeat(&Value::Null)))
                {
                    match value(spec) {
                        Ok(v) => out.push_str(&v),
                        Err(e) => {
                            problems.push(format!("{template:?}: {e}"));
                            ok = false;
                        }
                    }
                    out.push_str(part);
                }
                if template.matches("{}").count() != values.len() {
                    problems.push(format!(
                        "{template:?}: {} placeholders, {} values",
                        template.matches("{}").count(),
                        values.len()
                    ));
                    ok = false;
                }
                if !ok {
                    continue;
                }
                out
            }
            (None, Some(_)) => template.to_string(),
            _ => {
                problems.push(format!("{template:?}: needs either values or quoted"));
                continue;
            }
        };
        if !readme.contains(&rendered) {
            problems.push(format!("not in the README: {rendered:?}"));
        }
        passages.push(rendered);
    }
    // Blank every passage (keeping line breaks) so its numbers count as covered; passages
    // may overlap, so each is found in the prose before any is blanked.
    let mut covered = vec![false; text.len()];
    for passage in &passages {
        for (at, _) in text.match_indices(passage.as_str()) {
            covered[at..at + passage.len()].fill(true);
        }
    }
    let text: String = text
        .char_indices()
        .map(|(at, c)| if covered[at] && c != '\n' { ' ' } else { c })
        .collect();
    for left in quoted_numbers(&text) {
        problems.push(format!("no source for the README's {left}"));
    }
    assert!(
        problems.is_empty(),
        "{} problems between README.md and {CLAIMS} (fix the README to its results, or the \
         claim to its row):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn values_render_as_the_readme_prints_them() {
    assert_eq!(render(1113.4, 0), "1,113");
    assert_eq!(render(82429.0, 0), "82,429");
    assert_eq!(render(19.64, 1), "19.6");
    assert_eq!(render(-0.184, 2), "−0.18");
    assert_eq!(render(-0.001, 2), "0.00");
    assert_eq!(render(0.998, 3), "0.998");
    let found = quoted_numbers("at 19.6× and 52.38 % top-1, P@1 0.998, 10 candidates, 2 ms");
    assert_eq!(found.len(), 4, "{found:?}");
    assert!(quoted_numbers("`svd-r20-n200` L2S int8 b64 v0.22 x1.5").is_empty());
}
