//! The Japanese sources from their public repositories, for machines without the shared copy:
//! KWDLC's KNP files (hand-corrected segmentation and readings) and Aozora Bunko's texts,
//! converted into the four files [`crate::ja::prepare`] reads (`ja::SOURCES`).
//!
//! Both repositories are fetched with `git clone --depth 1` (Aozora's is large: ~15,000 works).
//! The conversions are plain functions, tested on small fixtures:
//! - [`knp_sentences`]: a KNP file → sentences of `(surface, reading, POS-subPOS)` morphemes;
//! - [`aozora_sentences`]: an Aozora text (Shift_JIS decoded) → its body's sentences, ruby and
//!   editor's notes stripped, or `None` for a text in pre-war kana spelling.

use std::path::{Path, PathBuf};
use std::process::Command;

use fastsoftmax_infer::files::write_atomic;

use crate::ja::io;
use crate::Error;

type Result<T> = std::result::Result<T, Error>;

pub const KWDLC_REPO: &str = "https://github.com/ku-nlp/KWDLC";
pub const AOZORA_REPO: &str = "https://github.com/aozorahack/aozorabunko_text";
/// Works taken from Aozora, in card order, among those in modern kana spelling.
pub const AOZORA_WORKS: usize = 3073;

/// One KNP sentence: its id and morphemes `(surface, reading, "POS-subPOS")`.
#[derive(Debug, Clone, PartialEq)]
pub struct KnpSentence {
    pub id: String,
    pub morphemes: Vec<(String, String, String)>,
}

impl KnpSentence {
    /// The sentence as written.
    pub fn display(&self) -> String {
        self.morphemes.iter().map(|m| m.0.as_str()).collect()
    }

    /// The sentence as typed.
    pub fn reading(&self) -> String {
        self.morphemes.iter().map(|m| m.1.as_str()).collect()
    }

    /// `display<TAB>reading<TAB>surface/reading/POS …`, the format of `kwdlc-*.tsv`.
    pub fn tsv_line(&self) -> String {
        let (display, reading) = (self.display(), self.reading());
        let tokens: Vec<String> = self
            .morphemes
            .iter()
            .map(|(s, r, p)| format!("{s}/{r}/{p}"))
            .collect();
        format!("{display}\t{reading}\t{}", tokens.join(" "))
    }

    /// The reading is what a person types on a kana keyboard: hiragana, ー and punctuation
    /// only (no digits, Latin letters or kanji), so the sentence can be an IME test case.
    pub fn typeable(&self) -> bool {
        self.morphemes.iter().all(|m| {
            m.1.chars().all(|c| {
                matches!(
                    c,
                    'ぁ'
                        ..='ゖ'
                            | 'ー'
                            | '、'
                            | '。'
                            | '「'
                            | '」'
                            | '・'
                            | '！'
                            | '？'
                            | '（'
                            | '）'
                )
            })
        })
    }
}

/// Sentences of a KNP file: `# S-ID:…` opens a sentence, `*` and `+` lines are phrase
/// structure, `EOS` closes it; a morpheme line is `surface reading lemma POS id subPOS id …`.
pub fn knp_sentences(text: &str) -> Vec<KnpSentence> {
    let mut out = Vec::new();
    let mut current: Option<KnpSentence> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# ") {
            let id = rest
                .split_whitespace()
                .find_map(|f| f.strip_prefix("S-ID:"))
                .unwrap_or_default();
            current = Some(KnpSentence {
                id: id.to_string(),
                morphemes: Vec::new(),
            });
        } else if line == "EOS" {
            out.extend(current.take().filter(|s| !s.morphemes.is_empty()));
        } else if line.starts_with("* ") || line.starts_with("+ ") || line.is_empty() {
            continue;
        } else if let Some(s) = current.as_mut() {
            let f: Vec<&str> = line.split(' ').collect();
            if f.len() >= 6 {
                s.morphemes
                    .push((f[0].into(), f[1].into(), format!("{}-{}", f[3], f[5])));
            }
        }
    }
    out
}

/// Signs of pre-war kana spelling (歴史的仮名遣い): ゐ/ゑ, and the old spellings of common
/// endings (でせう, ませう, だらう, やうに, 言ふ。).
pub fn prewar_spelling(text: &str) -> bool {
    text.contains(['ゐ', 'ゑ', 'ヰ', 'ヱ'])
        || ["でせう", "ませう", "だらう", "やうに", "ふ。", "ふ、"]
            .iter()
            .any(|p| text.contains(p))
}

/// An Aozora text's body as sentences: the title block, the notation legend between the
/// `-----` lines and the colophon (from `底本：`) dropped; ruby `《…》`, its `｜` marks and
/// editor's notes `［＃…］` stripped; sentences end at 。, ！ or ？ (a closing 」 stays with its
/// sentence). `None` when the text is in pre-war kana spelling.
pub fn aozora_sentences(text: &str) -> Option<Vec<String>> {
    if prewar_spelling(text) {
        return None;
    }
    let lines: Vec<&str> = text.lines().collect();
    // Body: after the second dashed line when there is a legend, else after the title block
    // (the first blank line).
    let dashed: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].starts_with("-----"))
        .take(2)
        .collect();
    let start = match dashed.as_slice() {
        [_, second] => second + 1,
        _ => lines
            .iter()
            .position(|l| l.trim().is_empty())
            .map_or(0, |i| i + 1),
    };
    let end = lines
        .iter()
        .position(|l| l.starts_with("底本："))
        .unwrap_or(lines.len());
    let mut out = Vec::new();
    for line in lines.get(start..end.max(start)).unwrap_or_default() {
        let clean = strip_notation(line);
        let mut sentence = String::new();
        let mut chars = clean.chars().peekable();
        while let Some(c) = chars.next() {
            sentence.push(c);
            if matches!(c, '。' | '！' | '？') {
                while let Some(&q) = chars.peek() {
                    if matches!(q, '」' | '』' | '）') {
                        sentence.push(q);
                        chars.next();
                    } else {
                        break;
                    }
                }
                push_sentence(&mut out, &mut sentence);
            }
        }
        push_sentence(&mut out, &mut sentence);
    }
    Some(out)
}

fn push_sentence(out: &mut Vec<String>, s: &mut String) {
    let t = s.trim_matches(|c: char| c.is_whitespace() || c == '　');
    if !t.is_empty() {
        out.push(t.to_string());
    }
    s.clear();
}

/// Removes ruby (`《…》`), ruby start marks (`｜`) and editor's notes (`［＃…］`).
fn strip_notation(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '《' => {
                for d in chars.by_ref() {
                    if d == '》' {
                        break;
                    }
                }
            }
            '［' if chars.peek() == Some(&'＃') => {
                for d in chars.by_ref() {
                    if d == '］' {
                        break;
                    }
                }
            }
            '｜' => {}
            _ => out.push(c),
        }
    }
    out
}

fn git_clone(url: &str, into: &Path) -> Result<()> {
    if into.join(".git").is_dir() {
        return Ok(());
    }
    let status = Command::new("git")
        .args(["clone", "--depth", "1", url])
        .arg(into)
        .status()
        .map_err(|e| Error::Invalid(format!("git clone {url}: {e} (is git installed?)")))?;
    if !status.success() {
        return Err(Error::Invalid(format!(
            "git clone {url} failed ({status}); on a machine without access, pass --from DIR \
             with kwdlc-{{train,test,test-eval}}.tsv and aozora-modern.txt.xz"
        )));
    }
    Ok(())
}

fn files_with(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) -> Result<()> {
    for e in std::fs::read_dir(dir).map_err(io(dir))? {
        let p = e.map_err(io(dir))?.path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n != ".git") {
                files_with(&p, ext, out)?;
            }
        } else if p.extension().is_some_and(|x| x == ext) {
            out.push(p);
        }
    }
    Ok(())
}

/// Clones both repositories under `cache` and writes the four source files into `out`.
pub fn fetch(cache: &Path, out: &Path) -> Result<()> {
    std::fs::create_dir_all(out).map_err(io(out))?;
    let kwdlc = cache.join("KWDLC");
    git_clone(KWDLC_REPO, &kwdlc)?;
    // Documents by id, then the official split.
    let mut knp = Vec::new();
    files_with(&kwdlc.join("knp"), "knp", &mut knp)?;
    let doc = |p: &PathBuf| {
        p.file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_string()
    };
    for (split, file) in [("train", "kwdlc-train.tsv"), ("test", "kwdlc-test.tsv")] {
        let ids_path = kwdlc.join("id").join(format!("{split}.id"));
        let ids = std::fs::read_to_string(&ids_path).map_err(io(&ids_path))?;
        let mut lines = Vec::new();
        let mut eval = Vec::new();
        for id in ids.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let Some(path) = knp.iter().find(|p| doc(p) == id) else {
                continue;
            };
            let text = std::fs::read_to_string(path).map_err(io(path))?;
            for s in knp_sentences(&text) {
                lines.push(s.tsv_line());
                if split == "test" && s.typeable() {
                    eval.push(format!("{}\t{}", s.reading(), s.display()));
                }
            }
        }
        write_atomic(&out.join(file), (lines.join("\n") + "\n").as_bytes())?;
        if split == "test" {
            write_atomic(
                &out.join("kwdlc-test-eval.tsv"),
                (eval.join("\n") + "\n").as_bytes(),
            )?;
        }
    }
    // Aozora: works in card order, modern spelling only, Shift_JIS text files.
    let aozora = cache.join("aozorabunko_text");
    git_clone(AOZORA_REPO, &aozora)?;
    let mut texts = Vec::new();
    files_with(&aozora.join("cards"), "txt", &mut texts)?;
    texts.sort();
    let (mut works, mut seen, mut body) = (0usize, std::collections::HashSet::new(), String::new());
    for path in texts {
        if works == AOZORA_WORKS {
            break;
        }
        let bytes = std::fs::read(&path).map_err(io(&path))?;
        let (text, _, bad) = encoding_rs::SHIFT_JIS.decode(&bytes);
        if bad {
            continue;
        }
        if let Some(sentences) = aozora_sentences(&text) {
            works += 1;
            for s in sentences {
                if seen.insert(s.clone()) {
                    body.push_str(&s);
                    body.push('\n');
                }
            }
        }
    }
    let mut xz = Vec::new();
    lzma_rs::xz_compress(&mut body.as_bytes(), &mut xz)
        .map_err(|e| Error::Invalid(format!("compressing the Aozora text: {e}")))?;
    Ok(write_atomic(&out.join("aozora-modern.txt.xz"), &xz)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KNP: &str = "# S-ID:w201106-0000060050-1 KNP:5.0
* 1D <文頭>
+ 1D <文頭>
コイン こいん コイン 名詞 6 普通名詞 1 * 0 * 0 \"代表表記:コイン/こいん\" <文頭>
トス とす トス 名詞 6 サ変名詞 2 * 0 * 0 NIL
を を を 助詞 9 格助詞 1 * 0 * 0 NIL
３ さん ３ 名詞 6 数詞 7 * 0 * 0 NIL
回 かい 回 接尾辞 14 名詞性名詞助数辞 3 * 0 * 0 NIL
行う おこなう 行う 動詞 2 * 0 子音動詞ワ行 12 基本形 2 NIL
。 。 。 特殊 1 句点 1 * 0 * 0 NIL
EOS
# S-ID:w201106-0000060050-2 KNP:5.0
* -1D
はい はい はい 感動詞 12 * 0 * 0 * 0 NIL
。 。 。 特殊 1 句点 1 * 0 * 0 NIL
EOS
";

    #[test]
    fn knp_files_become_kwdlc_lines() {
        let s = knp_sentences(KNP);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].id, "w201106-0000060050-1");
        assert_eq!(
            s[0].tsv_line(),
            "コイントスを３回行う。\tこいんとすをさんかいおこなう。\tコイン/こいん/名詞-普通名詞 \
             トス/とす/名詞-サ変名詞 を/を/助詞-格助詞 ３/さん/名詞-数詞 \
             回/かい/接尾辞-名詞性名詞助数辞 行う/おこなう/動詞-* 。/。/特殊-句点"
        );
        // Both readings are typeable kana (the digit's reading is さん).
        assert!(s[0].typeable() && s[1].typeable());
        assert_eq!(
            s[1].tsv_line(),
            "はい。\tはい。\tはい/はい/感動詞-* 。/。/特殊-句点"
        );
    }

    #[test]
    fn aozora_texts_lose_their_notation() {
        let text = "坊っちゃん\n夏目漱石\n\n-------------------------------------------------------\n\
            【テキスト中に現れる記号について】\n《》：ルビ\n\
            -------------------------------------------------------\n\
            \u{3000}親譲《おやゆず》りの無鉄砲で小供の時から損ばかりしている。｜小学校《しょうがっこう》に居る時分［＃「時分」に傍点］。\n\
            「なぜそんな無闇をしたと聞く人があるかも知れぬ。」別段深い理由でもない！\n\
            \n底本：「坊っちゃん」新潮文庫\n";
        let s = aozora_sentences(text).unwrap();
        assert_eq!(
            s,
            [
                "親譲りの無鉄砲で小供の時から損ばかりしている。",
                "小学校に居る時分。",
                "「なぜそんな無闇をしたと聞く人があるかも知れぬ。」",
                "別段深い理由でもない！",
            ]
        );
        assert!(
            aozora_sentences("題\n\nさうでせう。\n").is_none(),
            "pre-war spelling"
        );
        assert!(prewar_spelling("ゐる") && !prewar_spelling("いる。ふと思う。"));
    }
}
