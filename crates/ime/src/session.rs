//! A typing session as an input method runs it: keys in; the kana, the n-best conversions and
//! the committed text out. Committing carries the language model's state over (the paper's
//! "state carried over"), so what is typed next is converted in the context of what came
//! before, and the lattice, the hypotheses and any vocabulary selection start afresh.

use crate::decode::{Candidate, Decoder, Scorer, Spelling};
use crate::lattice::{Lattice, Lexicon};
use crate::romaji::Romaji;

/// How a session converts.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Hypotheses kept per kana (the paper: 10).
    pub beam: usize,
    /// Candidates offered (distinct conversions of the whole input).
    pub n_best: usize,
    /// Longest hiragana span also offered in katakana (0: none).
    pub katakana: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            beam: 10,
            n_best: 9,
            katakana: 12,
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
    spelling: Spelling,
    options: Options,
    scorer: S,
    decoder: Decoder<S>,
    romaji: Romaji,
    candidates: Vec<Candidate>,
    committed: String,
}

impl<'l, S: Scorer> Session<'l, S> {
    pub fn new(mut scorer: S, lexicon: &'l Lexicon, spelling: Spelling, options: Options) -> Self {
        let decoder = Self::decoder(&mut scorer, &spelling, options);
        Session {
            lexicon,
            spelling,
            options,
            scorer,
            decoder,
            romaji: Romaji::new(),
            candidates: Vec::new(),
            committed: String::new(),
        }
    }

    fn decoder(scorer: &mut S, spelling: &Spelling, o: Options) -> Decoder<S> {
        let lattice = Lattice::with_katakana(o.katakana);
        Decoder::with_lattice(scorer, o.beam, spelling.clone(), lattice)
    }

    /// One typed character: romaji letters spell kana; anything else (digits, symbols, kana
    /// pasted in) joins the input as it is.
    pub fn key(&mut self, key: char) {
        self.romaji.push(key);
        self.sync();
    }

    /// Removes the last key of the input (a pending letter or the last kana); the lattice and
    /// the hypotheses roll back. Returns false when the input is empty.
    pub fn backspace(&mut self) -> bool {
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
        let text = self.candidates.get(k)?.text.clone();
        let end_sentence = text.ends_with(SENTENCE_ENDS);
        // The candidate is one of the decoder's n-best, so a hypothesis spells it.
        let carried = self
            .decoder
            .commit(&text, end_sentence, self.lexicon, &mut self.scorer);
        debug_assert!(carried);
        let start = self.committed.len();
        self.committed.push_str(&text);
        let pending = self.romaji.pending().to_string();
        self.romaji = Romaji::new();
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
        self.romaji = Romaji::new();
        self.decoder.clear();
        self.candidates.clear();
    }

    /// Ends the paragraph: a line break joins the committed text and the next input starts a
    /// sentence from no context (any input typed is dropped).
    pub fn new_paragraph(&mut self) {
        self.romaji = Romaji::new();
        self.candidates.clear();
        self.decoder = Self::decoder(&mut self.scorer, &self.spelling, self.options);
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
