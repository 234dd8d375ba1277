//! A typing session as an input method runs it: keys in; the kana, the n-best conversions and
//! the committed text out. Committing carries the language model's state over (the paper's
//! "state carried over"), so what is typed next is converted in the context of what came
//! before, and the lattice, the hypotheses and any vocabulary selection start afresh.
//!
//! Two ways in: the calls of a conversion engine (`key`, `candidates`, `commit`: whole-input
//! candidates, what `ime eval` measures), and [`Session::press`], the keys of an input method
//! as Mozc binds them (Space converts into segments, arrows move between them, Shift+arrows
//! resize them, F6–F10 transliterate, Enter commits), what the terminal converter and the
//! IBus engine drive.

use std::sync::Arc;

use crate::chars::{Transliteration, Width};
use crate::decode::{end_sentence_after, Candidate, Decoder, Scorer, Spelling};
use crate::history::History;
use crate::lattice::{Lattice, Lexicon, Node, NodeKind, UserWords};
use crate::romaji::Romaji;
use crate::segment::{split, Conversion, Env, Segment};
use crate::user_dict::UserDictionary;

/// How a session converts.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Hypotheses kept per kana (the paper: 10).
    pub beam: usize,
    /// Candidates offered (distinct conversions of the whole input).
    pub n_best: usize,
    /// Longest hiragana span also offered in katakana (0: none).
    pub katakana: usize,
    /// Digits and symbols typed: half-width (`12`) or full-width (`１２`, Mozc's default).
    pub width: Width,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            beam: 10,
            n_best: 9,
            katakana: 12,
            width: Width::Half,
        }
    }
}

/// Characters after which a committed conversion ends its sentence.
const SENTENCE_ENDS: [char; 6] = ['。', '！', '？', '.', '!', '?'];

/// Romaji typed, converted, picked and committed, one key at a time.
///
/// ```no_run
/// use fastsoftmax_ime::{ImeModel, LstmScorer, Session};
/// # fn main() -> fastsoftmax_infer::Result<()> {
/// let model = ImeModel::load(std::path::Path::new("assets/models/ime-ja"))?;
/// let scorer = LstmScorer::new(&model.lm)?;
/// let mut session = Session::new(scorer, &model.lexicon, model.spelling.clone(), Default::default());
/// for key in "kyouhaiitenki".chars() {
///     session.key(key);
/// }
/// println!("{}", session.candidates()[0].text); // 今日はいい天気
/// session.commit(0); // the next input is converted after it
/// # Ok(())
/// # }
/// ```
pub struct Session<'l, S: Scorer> {
    lexicon: &'l Lexicon,
    spelling: Arc<Spelling>,
    options: Options,
    scorer: S,
    decoder: Decoder<S>,
    romaji: Romaji,
    candidates: Vec<Candidate>,
    committed: String,
    /// What the user committed, learned: its words rise in later conversions.
    history: History,
    /// The last segment committed (the previous text of the next commit's first pair).
    last_word: Option<String>,
    /// The user's dictionary, as the lattice places it.
    user: Option<Arc<UserWords>>,
    /// The input being converted segment by segment (after Space), if any.
    conversion: Option<Conversion<S>>,
    /// The focused segment's candidate window: the highlighted alternative, when open.
    window: Option<usize>,
}

/// A key as an input method receives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// A printable character (romaji, digits, symbols; a capital starts direct input).
    Char(char),
    Space,
    Enter,
    Backspace,
    Escape,
    Left,
    Right,
    /// Shift+← / Shift+→: shrink / grow the focused segment.
    ShiftLeft,
    ShiftRight,
    Up,
    Down,
    PageUp,
    PageDown,
    /// F1–F12 (F6–F10 transliterate).
    Function(u8),
    /// Takes the first suggestion while composing (a completion of the kana typed, or the
    /// next word); the next alternative while converting.
    Tab,
}

/// What a key did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reply {
    /// Whether the input method used the key (false: the application should get it, as a
    /// Space or Enter with nothing typed).
    pub consumed: bool,
    /// Text committed by the key.
    pub committed: Option<String>,
}

impl Reply {
    fn used() -> Self {
        Reply {
            consumed: true,
            committed: None,
        }
    }
    fn passed() -> Self {
        Reply::default()
    }
    fn commit(text: String) -> Self {
        Reply {
            consumed: true,
            committed: Some(text),
        }
    }
}

/// What a front end draws: the preedit in segments, and the candidate window.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct View {
    /// The preedit, segment by segment (one segment while composing).
    pub segments: Vec<String>,
    /// The focused segment (underlined), while converting.
    pub focus: Option<usize>,
    /// The candidate window's page, when open: its alternatives, the highlighted one (index
    /// into `candidates`), and the page's first index in the whole list.
    pub candidates: Vec<String>,
    pub highlighted: Option<usize>,
    pub page_start: usize,
    /// While composing: what Tab takes first, then the other suggestions.
    pub suggestions: Vec<String>,
}

/// Suggestions a view offers.
pub const SUGGESTIONS: usize = 3;

/// `((start, end) in kana, text, reading, words)` of each segment of `words` (`(display,
/// reading)`).
fn segment_spans(words: &[(String, String)]) -> Vec<((usize, usize), String, String, usize)> {
    let mut at = 0;
    split(words)
        .into_iter()
        .map(|r| {
            let part = &words[r];
            let text: String = part.iter().map(|(d, _)| d.as_str()).collect();
            let reading: String = part.iter().map(|(_, r)| r.as_str()).collect();
            let start = at;
            at += reading.chars().count();
            ((start, at), text, reading, part.len())
        })
        .collect()
}

/// A word offered before the input is converted: a completion of the kana typed, or, with
/// nothing typed, a prediction of the next word.
#[derive(Debug, Clone, PartialEq)]
pub struct Suggestion {
    pub text: String,
    pub reading: String,
    /// `ln p` of the word after the text committed before (`None`: a conversion from the
    /// history, which may be several words).
    pub score: Option<f32>,
    node: Node,
}

/// Suggestions taken from the history (its heaviest completions), before the model's. Measured
/// with `ime predict --limit 300` (3 shown): none 36.1 % of kana keys saved, 1 36.0 %, 3
/// 32.1 %: on text the user has not typed before the history adds nothing, so it takes one slot,
/// for the words it knows that the model does not (names, new words).
const HISTORY_COMPLETIONS: usize = 1;

/// Vocabulary words a completion scores at most (the most frequent whose reading starts with
/// the kana typed).
const COMPLETIONS: usize = 1000;

/// Candidates a page of the window shows (selected by 1–9).
pub const PAGE: usize = 9;

impl<'l, S: Scorer> Session<'l, S> {
    pub fn new(mut scorer: S, lexicon: &'l Lexicon, spelling: Spelling, options: Options) -> Self {
        let spelling = Arc::new(spelling);
        let decoder = Self::decoder(&mut scorer, &spelling, options, None);
        Session {
            lexicon,
            spelling,
            options,
            scorer,
            decoder,
            romaji: Romaji::with_width(options.width),
            candidates: Vec::new(),
            committed: String::new(),
            history: History::default(),
            last_word: None,
            user: None,
            conversion: None,
            window: None,
        }
    }

    /// Places the words of `dictionary` in the lattice, `bonus` nats above the lexicon's words of
    /// the same reading ([`crate::user_dict::USER_BONUS`]). The input typed so far is
    /// converted again with them; the context of the text committed before stays.
    pub fn set_user_dictionary(&mut self, dictionary: &UserDictionary, bonus: f32) {
        let words = dictionary.lattice_words(self.lexicon, &self.spelling, bonus);
        self.user = Some(Arc::new(words));
        let origin = self.decoder.origin();
        self.cancel_conversion();
        self.decoder = Self::decoder(
            &mut self.scorer,
            &self.spelling,
            self.options,
            self.user.clone(),
        );
        self.decoder.restart(origin);
        self.sync();
    }

    /// Learns from commits with `history` (loaded from the user's data folder), replacing the
    /// one the session had.
    pub fn set_history(&mut self, history: History) {
        self.history = history;
    }

    /// What the session has learned (to save it, list it, or forget entries).
    pub fn history(&self) -> &History {
        &self.history
    }

    pub fn history_mut(&mut self) -> &mut History {
        &mut self.history
    }

    /// Learns from a commit (`(display, reading)` words): each segment's reading and text,
    /// and the text after the segment before it. A later conversion shows a segment as the
    /// user committed it most (Mozc's segment learning, [`Conversion::new`]).
    ///
    /// Segments, not words: measured with `ime learn --limit 300`, a bonus on every committed
    /// word in the lattice raised the particles a user commits all the time, and their paths
    /// beat better ones (top-1 57.67 % before learning, 54.33 % on the first pass); lowering a
    /// learned word's rivals of the same reading moved it by about a point (56.67 % on the
    /// first pass, 58.67 % on the second).
    pub fn learn(&mut self, committed: &[(String, String)]) {
        for (_, text, reading, _) in segment_spans(committed) {
            self.history
                .record(&reading, &text, self.last_word.as_deref());
            self.last_word = Some(text);
        }
    }

    fn decoder(
        scorer: &mut S,
        spelling: &Arc<Spelling>,
        o: Options,
        user: Option<Arc<UserWords>>,
    ) -> Decoder<S> {
        let lattice = Lattice::with_katakana(o.katakana).with_user(user);
        Decoder::with_lattice(scorer, o.beam, spelling.clone(), lattice)
    }

    /// One typed character: romaji letters spell kana; anything else (digits, symbols, kana
    /// pasted in) joins the input as it is.
    pub fn key(&mut self, key: char) {
        self.cancel_conversion();
        self.romaji.push(key);
        self.sync();
    }

    /// Removes the last key of the input (a pending letter or the last kana); the lattice and
    /// the hypotheses roll back. Returns false when the input is empty.
    pub fn backspace(&mut self) -> bool {
        self.cancel_conversion();
        if self.romaji.kana().is_empty() && self.romaji.pending().is_empty() {
            return false;
        }
        self.romaji.backspace();
        self.sync();
        true
    }

    /// Commits candidate `k` (0 = the best) of the kana typed; letters still pending (an `n`
    /// that may yet become な) stay as the start of the next input. Returns the committed text,
    /// or `None` when there is no candidate `k`.
    pub fn commit(&mut self, k: usize) -> Option<&str> {
        self.cancel_conversion();
        let candidate = self.candidates.get(k)?;
        let (text, words) = (candidate.text.clone(), candidate.words.clone());
        let end_sentence = text.ends_with(SENTENCE_ENDS);
        // The candidate is one of the decoder's n-best, so a hypothesis spells it.
        let carried = self
            .decoder
            .commit(&text, end_sentence, self.lexicon, &mut self.scorer);
        debug_assert!(carried);
        self.learn(&words);
        let start = self.committed.len();
        self.committed.push_str(&text);
        let pending = self.romaji.pending().to_string();
        self.romaji = Romaji::with_width(self.options.width);
        self.candidates.clear();
        for c in pending.chars() {
            self.romaji.push(c);
        }
        self.sync();
        Some(&self.committed[start..])
    }

    /// Enter: pending letters become kana (`n` → ん) and the best conversion is committed.
    /// Returns the committed text, or `None` when nothing was typed.
    pub fn commit_all(&mut self) -> Option<&str> {
        self.romaji.flush();
        self.sync();
        self.commit(0)
    }

    /// Drops the input, keeping the context of the text committed before it.
    pub fn clear(&mut self) {
        self.cancel_conversion();
        self.romaji = Romaji::with_width(self.options.width);
        self.decoder.clear();
        self.candidates.clear();
    }

    /// Ends the paragraph: a line break joins the committed text and the next input starts a
    /// sentence from no context (any input typed is dropped).
    pub fn new_paragraph(&mut self) {
        self.cancel_conversion();
        self.romaji = Romaji::with_width(self.options.width);
        self.candidates.clear();
        self.decoder = Self::decoder(
            &mut self.scorer,
            &self.spelling,
            self.options,
            self.user.clone(),
        );
        self.last_word = None;
        self.committed.push('\n');
    }

    /// The input as typed: its kana, then the letters not yet kana.
    pub fn input(&self) -> String {
        self.romaji.display()
    }

    /// The kana the candidates convert.
    pub fn kana(&self) -> &str {
        self.romaji.kana()
    }

    /// Letters typed that are not kana yet.
    pub fn pending(&self) -> &str {
        self.romaji.pending()
    }

    /// The n-best conversions of [`Session::kana`], best first (empty when no kana).
    pub fn candidates(&self) -> &[Candidate] {
        &self.candidates
    }

    /// Everything committed so far.
    pub fn committed(&self) -> &str {
        &self.committed
    }

    pub fn scorer(&self) -> &S {
        &self.scorer
    }

    /// Whether letters are typed as they are (after a capital, until a space).
    pub fn is_direct(&self) -> bool {
        self.romaji.is_direct()
    }

    /// Up to `k` suggestions, best first: what the user committed before for readings that
    /// start with the kana typed (the history, heaviest first), then the language model's words
    /// whose reading starts with them, scored after the text committed before; with nothing
    /// typed, the next
    /// word, from the words whose scores the scorer holds already (`Scorer::predict`: the
    /// fixed sample of incremental vocabulary selection, never a softmax over the vocabulary).
    pub fn suggestions(&mut self, k: usize) -> Vec<Suggestion> {
        if self.conversion.is_some() || !self.romaji.pending().is_empty() || k == 0 {
            return Vec::new();
        }
        let origin = self.decoder.origin();
        let unk = self.spelling.unk;
        let kana = self.romaji.kana();
        let ids: Vec<u32> = if kana.is_empty() {
            self.scorer
                .predict(&origin.state, 4 * k)
                .into_iter()
                .filter_map(|lm| self.lexicon.of_lm_id(lm, unk))
                .collect()
        } else {
            self.lexicon.completions(kana, unk, COMPLETIONS)
        };
        let lm_ids: Vec<u32> = ids.iter().map(|&id| self.lexicon.word(id).lm_id).collect();
        let mut scores = vec![0.0; ids.len()];
        self.scorer.log_probs(&origin.state, &lm_ids, &mut scores);
        let mut ranked: Vec<(f32, u32)> = scores.into_iter().zip(ids).collect();
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
        let mut out: Vec<Suggestion> = Vec::new();
        if !kana.is_empty() {
            for (reading, surface, _) in self.history.completions(kana, HISTORY_COMPLETIONS) {
                let kind = match self
                    .lexicon
                    .lookup(reading)
                    .find(|(_, w)| w.display == surface)
                {
                    Some((id, _)) => NodeKind::Word(id),
                    None => NodeKind::Literal(surface.to_string()),
                };
                out.push(Suggestion {
                    text: surface.to_string(),
                    reading: reading.to_string(),
                    score: None,
                    node: Node { start: 0, kind },
                });
            }
        }
        for (score, id) in ranked {
            if out.len() >= k {
                break;
            }
            let word = self.lexicon.word(id);
            if out.iter().any(|s| s.text == word.display) {
                continue;
            }
            out.push(Suggestion {
                text: word.display.clone(),
                reading: self
                    .lexicon
                    .vocabulary_reading(id, unk)
                    .unwrap_or_default()
                    .to_string(),
                score: Some(score),
                node: Node {
                    start: 0,
                    kind: NodeKind::Word(id),
                },
            });
        }
        out
    }

    /// Commits a suggestion in place of the input; what is typed next follows it.
    pub fn accept(&mut self, suggestion: &Suggestion) -> String {
        let words = [(suggestion.text.clone(), suggestion.reading.clone())];
        self.commit_nodes(std::slice::from_ref(&suggestion.node), &words);
        suggestion.text.clone()
    }

    /// Commits `words` (`(display, reading)`) in place of the input, as if typed and chosen:
    /// each the lexicon's word of that reading and display, or else text as it is.
    pub fn commit_words(&mut self, words: &[(String, String)]) {
        let nodes: Vec<Node> = words
            .iter()
            .map(|(display, reading)| Node {
                start: 0,
                kind: match self
                    .lexicon
                    .lookup(reading)
                    .find(|(_, w)| &w.display == display)
                {
                    Some((id, _)) => NodeKind::Word(id),
                    None => NodeKind::Literal(display.clone()),
                },
            })
            .collect();
        self.commit_nodes(&nodes, words);
    }

    fn commit_nodes(&mut self, nodes: &[Node], words: &[(String, String)]) {
        self.cancel_conversion();
        let origin = self.decoder.origin();
        let text: String = words.iter().map(|(d, _)| d.as_str()).collect();
        let mut end = self
            .decoder
            .advance_through(origin, nodes, self.lexicon, &mut self.scorer);
        if text.ends_with(SENTENCE_ENDS) {
            end = end_sentence_after(end, &mut self.scorer);
        }
        self.decoder.restart(end);
        self.learn(words);
        self.committed.push_str(&text);
        self.romaji = Romaji::with_width(self.options.width);
        self.candidates.clear();
    }

    /// Whether an input is being converted segment by segment.
    pub fn converting(&self) -> bool {
        self.conversion.is_some()
    }

    /// The segments of the conversion (empty while composing).
    pub fn segments(&self) -> &[Segment<S::State>] {
        self.conversion.as_ref().map_or(&[], |c| c.segments())
    }

    /// Starts converting the input segment by segment (Space): the best conversion split into
    /// segments, the focus on the first. Returns false when nothing is typed.
    pub fn convert(&mut self) -> bool {
        if self.conversion.is_some() {
            return true;
        }
        self.romaji.flush();
        self.sync();
        let Some(best) = self.candidates.first() else {
            return false;
        };
        let Some(starts) = self.decoder.starts_along(&best.text, self.lexicon) else {
            return false;
        };
        let kana = self.romaji.kana().chars().collect();
        self.conversion = Some(Conversion::new(kana, best, starts, Some(&self.history)));
        self.window = None;
        true
    }

    /// Back to composing the input (Escape, Backspace in a conversion): the kana as typed.
    pub fn cancel_conversion(&mut self) -> bool {
        self.window = None;
        self.conversion.take().is_some()
    }

    /// The focused segment's alternatives (decoded the first time), best first.
    pub fn alternatives(&mut self) -> Vec<String> {
        let (mut env, conversion) = self.env();
        match conversion {
            Some(c) => c
                .alternatives(&mut env)
                .into_iter()
                .map(String::from)
                .collect(),
            None => Vec::new(),
        }
    }

    /// Chooses alternative `k` of the focused segment.
    pub fn choose(&mut self, k: usize) -> bool {
        let (mut env, conversion) = self.env();
        conversion.is_some_and(|c| c.choose(k, &mut env))
    }

    /// Moves the focus by `delta` segments.
    pub fn move_focus(&mut self, delta: isize) -> bool {
        self.window = None;
        self.conversion
            .as_mut()
            .is_some_and(|c| c.move_focus(delta))
    }

    /// Shrinks (`delta` < 0) or grows the focused segment by one kana.
    pub fn resize(&mut self, delta: isize) -> bool {
        self.window = None;
        let (mut env, conversion) = self.env();
        conversion.is_some_and(|c| c.resize(delta, &mut env))
    }

    /// Writes the focused segment (or the whole input, when composing) as `how` says: F6–F10.
    pub fn transliterate(&mut self, how: Transliteration) -> bool {
        if !self.convert() {
            return false;
        }
        let Some(c) = self.conversion.as_mut() else {
            return false;
        };
        let s = &c.segments()[c.focus()];
        let (start, end) = (s.start, s.end);
        let reading = c.reading(c.focus());
        let text = how.apply(&reading, &self.romaji.raw(start..end));
        c.set_literal(text);
        self.window = None;
        true
    }

    /// Commits the conversion as its segments are chosen (Enter); what is typed next is
    /// converted after it. Returns the text, or `None` when not converting.
    pub fn commit_conversion(&mut self) -> Option<String> {
        self.conversion.as_ref()?;
        let (mut env, conversion) = self.env();
        let conversion = conversion?;
        let text = conversion.text();
        let words: Vec<(String, String)> = conversion
            .segments()
            .iter()
            .flat_map(|s| s.words().iter().cloned())
            .collect();
        let mut end = conversion.end(&mut env);
        if text.ends_with(SENTENCE_ENDS) {
            end = end_sentence_after(end, &mut self.scorer);
        }
        self.conversion = None;
        self.window = None;
        self.decoder.restart(end);
        self.learn(&words);
        self.committed.push_str(&text);
        self.romaji = Romaji::with_width(self.options.width);
        self.candidates.clear();
        Some(text)
    }

    /// One key of an input method (Mozc's bindings; see the module doc).
    pub fn press(&mut self, key: Key) -> Reply {
        if self.conversion.is_some() {
            return self.press_converting(key);
        }
        let typing = !self.romaji.kana().is_empty() || !self.romaji.pending().is_empty();
        match key {
            Key::Char(c) => {
                self.key(c);
                Reply::used()
            }
            // A space ends direct (Latin) input; else it converts what is typed.
            Key::Space if self.romaji.is_direct() => {
                self.key(' ');
                Reply::used()
            }
            Key::Space if typing => {
                self.convert();
                Reply::used()
            }
            Key::Enter if typing => match self.commit_all() {
                Some(text) => Reply::commit(text.to_string()),
                None => Reply::used(),
            },
            Key::Backspace if typing => {
                self.backspace();
                Reply::used()
            }
            Key::Escape if typing => {
                self.clear();
                Reply::used()
            }
            Key::Function(n) if typing => {
                if let Some(how) = Transliteration::from_function_key(n) {
                    self.transliterate(how);
                }
                Reply::used()
            }
            Key::Tab => match self.suggestions(1).first() {
                Some(first) => Reply::commit(self.accept(first)),
                None if typing => Reply::used(),
                None => Reply::passed(),
            },
            _ if typing => Reply::used(),
            _ => Reply::passed(),
        }
    }

    fn press_converting(&mut self, key: Key) -> Reply {
        match key {
            Key::Space | Key::Down | Key::Tab => self.step_candidate(1),
            Key::Up => self.step_candidate(-1),
            Key::PageDown => self.step_candidate(PAGE as isize),
            Key::PageUp => self.step_candidate(-(PAGE as isize)),
            Key::Char(c @ '1'..='9') if self.window.is_some() => {
                let page = self.window.unwrap_or(0) / PAGE * PAGE;
                if self.choose(page + (c as usize - '1' as usize)) {
                    self.window = None;
                }
            }
            Key::Left => {
                self.move_focus(-1);
            }
            Key::Right => {
                self.move_focus(1);
            }
            Key::ShiftLeft => {
                self.resize(-1);
            }
            Key::ShiftRight => {
                self.resize(1);
            }
            Key::Function(n) => {
                if let Some(how) = Transliteration::from_function_key(n) {
                    self.transliterate(how);
                }
            }
            Key::Enter => {
                let text = self.commit_conversion().unwrap_or_default();
                return Reply::commit(text);
            }
            Key::Escape | Key::Backspace => {
                self.cancel_conversion();
            }
            // Typing goes on: the conversion is committed and the key starts the next input.
            Key::Char(c) => {
                let text = self.commit_conversion().unwrap_or_default();
                self.key(c);
                return Reply::commit(text);
            }
        }
        Reply::used()
    }

    /// Moves the highlight in the focused segment's window by `delta` (opening it), choosing
    /// the highlighted alternative as Mozc does.
    fn step_candidate(&mut self, delta: isize) {
        let n = self.alternatives().len();
        if n == 0 {
            return;
        }
        let at = match self.window {
            None => self.segments()[self.focus()].chosen() as isize + delta.signum(),
            // A page key: the same line of the next (or previous) page, round the pages, the
            // last page's last line where it is shorter.
            Some(at) if delta.unsigned_abs() >= PAGE => {
                let pages = n.div_ceil(PAGE) as isize;
                let page = (at / PAGE) as isize + delta.signum();
                let line = (at % PAGE) as isize;
                (page.rem_euclid(pages) * PAGE as isize + line).min(n as isize - 1)
            }
            Some(at) => at as isize + delta,
        };
        let at = at.rem_euclid(n as isize) as usize;
        self.window = Some(at);
        self.choose(at);
    }

    /// The focused segment (0 while composing).
    pub fn focus(&self) -> usize {
        self.conversion.as_ref().map_or(0, |c| c.focus())
    }

    /// What a front end draws now.
    pub fn view(&mut self) -> View {
        let all = match self.window {
            Some(_) => self.alternatives(),
            None => Vec::new(),
        };
        let Some(c) = self.conversion.as_ref() else {
            let input = self.input();
            let suggestions = self.suggestions(SUGGESTIONS);
            return View {
                segments: if input.is_empty() {
                    vec![]
                } else {
                    vec![input]
                },
                suggestions: suggestions.into_iter().map(|s| s.text).collect(),
                ..View::default()
            };
        };
        let segments = c.segments().iter().map(|s| s.text().to_string()).collect();
        let focus = c.focus();
        let mut view = View {
            segments,
            focus: Some(focus),
            ..View::default()
        };
        if let Some(at) = self.window {
            view.page_start = at / PAGE * PAGE;
            view.candidates = all.into_iter().skip(view.page_start).take(PAGE).collect();
            view.highlighted = Some(at - view.page_start);
        }
        view
    }

    /// The conversion and what it decodes with, borrowed apart.
    fn env(&mut self) -> (Env<'_, S>, Option<&mut Conversion<S>>) {
        let env = Env {
            lexicon: self.lexicon,
            spelling: &self.spelling,
            beam: self.options.beam,
            katakana: self.options.katakana,
            scorer: &mut self.scorer,
            user: self.user.clone(),
        };
        (env, self.conversion.as_mut())
    }

    /// Brings the decoder to the romaji's kana: back to the longest common prefix, then forward
    /// one kana at a time; the candidates follow when the kana changed.
    fn sync(&mut self) {
        let target: Vec<char> = self.romaji.kana().chars().collect();
        let have = self.decoder.lattice().kana();
        let common = have.iter().zip(&target).take_while(|(a, b)| a == b).count();
        if common == have.len() && common == target.len() {
            return;
        }
        while self.decoder.lattice().len() > common {
            self.decoder.pop(self.lexicon, &mut self.scorer);
        }
        for &c in &target[common..] {
            self.decoder.push(c, self.lexicon, &mut self.scorer);
        }
        self.candidates = self
            .decoder
            .n_best(self.options.n_best, self.lexicon, &mut self.scorer);
    }
}
