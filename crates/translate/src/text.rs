//! Word tokens for translation: what the model reads and writes, and the way back to text.
//!
//! A token is a word (letters and digits, with `'` or `-` inside a word and `.`/`,`/`:` inside
//! a number kept in it: `God's`, `meal-offering`, `3:16`) or one punctuation character. The
//! detokenizer puts text back together with the spacing rules of English and German print:
//! no space before `.,;:!?)]}“’`, none after `([{„‚`, and ASCII `"` alternately opening and
//! closing. BLEU is computed on its output against the raw reference.

/// Splits `line` into word and punctuation tokens (see the module docs).
pub fn tokenize(line: &str) -> Vec<String> {
    let chars: Vec<char> = line.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_alphanumeric() {
            let start = i;
            i += 1;
            while i < chars.len() {
                let d = chars[i];
                let inner = |ok: fn(char) -> bool| {
                    ok(chars[i - 1]) && chars.get(i + 1).is_some_and(|&n| ok(n))
                };
                if d.is_alphanumeric()
                    || ((d == '\'' || d == '-' || d == '’') && inner(char::is_alphanumeric))
                    || ((d == '.' || d == ',' || d == ':') && inner(|c| c.is_ascii_digit()))
                {
                    i += 1;
                } else {
                    break;
                }
            }
            tokens.push(chars[start..i].iter().collect());
        } else {
            tokens.push(c.to_string());
            i += 1;
        }
    }
    tokens
}

/// Joins tokens back into text (see the module docs); the inverse of [`tokenize`] on ordinary
/// prose.
pub fn detokenize<S: AsRef<str>>(tokens: &[S]) -> String {
    let mut out = String::new();
    let mut glue_next = true; // no space before the first token
    let mut quote_open = false;
    for t in tokens {
        let t = t.as_ref();
        let (attach_left, attach_right) = match t {
            "." | "," | ";" | ":" | "!" | "?" | ")" | "]" | "}" | "“" | "’" => (true, false),
            "(" | "[" | "{" | "„" | "‚" => (false, true),
            "\"" => {
                quote_open = !quote_open;
                (!quote_open, quote_open)
            }
            _ => (false, false),
        };
        if !(glue_next || attach_left) {
            out.push(' ');
        }
        out.push_str(t);
        glue_next = attach_right;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_keep_inner_apostrophes_hyphens_and_number_marks() {
        assert_eq!(
            tokenize("God's meal-offering, (see 3:16): \"Yes!\" -fruits"),
            [
                "God's",
                "meal-offering",
                ",",
                "(",
                "see",
                "3:16",
                ")",
                ":",
                "\"",
                "Yes",
                "!",
                "\"",
                "-",
                "fruits"
            ]
        );
        assert!(tokenize("   ").is_empty());
    }

    #[test]
    fn detokenize_inverts_tokenize_on_prose() {
        for line in [
            "Und Gott sprach: Es werde Licht! und es ward Licht.",
            "Jesus sprach zu ihm: „Ich bin der Weg.“ (Das ist wahr.)",
            "God said, \"Let there be light,\" and there was light.",
            "the meal-offering of the priest's (3,000) sons?",
        ] {
            assert_eq!(detokenize(&tokenize(line)), line);
        }
        assert_eq!(detokenize::<&str>(&[]), "");
    }
}
