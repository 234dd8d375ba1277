//! Next-word prediction as an app runs it: a language model folder, one of its heads, and the
//! text read so far, in one value. `fastsoftmax predict`, the C ABI's `FsPredictor` and the
//! Python module's `Predictor` are this.

use std::path::{Path, PathBuf};

use crate::{
    check_context, heads, Context, Error, LanguageModel, LmState, Predictor, Result, TopK,
};

/// A model folder and its language model (what a head borrows).
struct Model {
    dir: PathBuf,
    lm: LanguageModel,
}

type Head<'a> = Box<dyn Predictor + 'a>;

self_cell::self_cell!(
    struct Loaded {
        owner: Model,
        #[covariant]
        dependent: Head,
    }
);

/// A language model with a head, reading text one call at a time from a sentence start.
pub struct NextWords {
    loaded: Loaded,
    state: LmState,
    /// `<eos>` and the word ids read since (what history-reading heads use; the models were
    /// trained on text where every sentence follows an `<eos>`).
    history: Vec<u32>,
}

impl NextWords {
    /// Opens the language model in `dir` with head `head`: `full` (the exact softmax), a
    /// trained head in `dir/heads/NAME` such as `l2s` or `candidates`, or a built-in one such
    /// as `full-int8-m64`; at a sentence start.
    pub fn open(dir: &Path, head: &str) -> Result<NextWords> {
        let lm = LanguageModel::load(dir)?;
        let model = Model {
            dir: dir.to_path_buf(),
            lm,
        };
        let loaded = Loaded::try_new(model, |m| heads::load(head, &m.dir, &m.lm))?;
        let mut next = NextWords {
            state: loaded.borrow_owner().lm.new_state(),
            loaded,
            history: Vec::new(),
        };
        next.reset()?;
        Ok(next)
    }

    pub fn lm(&self) -> &LanguageModel {
        &self.loaded.borrow_owner().lm
    }

    pub fn head(&self) -> &dyn Predictor {
        self.loaded.borrow_dependent().as_ref()
    }

    /// Back to a sentence start: the state after `<eos>`.
    pub fn reset(&mut self) -> Result<()> {
        let lm = &self.loaded.borrow_owner().lm;
        self.state = lm.new_state();
        let eos = lm.vocab().eos();
        lm.step(eos, &mut self.state)?;
        self.history.clear();
        self.history.push(eos);
        Ok(())
    }

    /// Reads `words` (separated by whitespace) after the text read before. Returns the words
    /// outside the vocabulary, which were read as `<unk>`.
    pub fn feed<'w>(&mut self, words: &'w str) -> Result<Vec<&'w str>> {
        let lm = &self.loaded.borrow_owner().lm;
        let mut unknown = Vec::new();
        for w in words.split_whitespace() {
            let id = match lm.vocab().get(w) {
                Some(id) => id,
                None => {
                    unknown.push(w);
                    lm.vocab().id_or_unk(w)
                }
            };
            lm.step(id, &mut self.state)?;
            self.history.push(id);
        }
        Ok(unknown)
    }

    /// The language model's context vector `[d]` after the text read.
    pub fn context(&self) -> Context<'_> {
        Context {
            h: self.state.context(),
            history: &self.history,
        }
    }

    /// The context vectors `[n, d]` (row-major) after each of the `n` words of `words`, read
    /// from a sentence start (the text read by [`Self::feed`] is left as it is).
    pub fn contexts(&self, words: &str) -> Result<Vec<f32>> {
        let lm = self.lm();
        let mut state = lm.new_state();
        lm.step(lm.vocab().eos(), &mut state)?;
        let mut out = Vec::new();
        for id in lm.encode_words(words) {
            lm.step(id, &mut state)?;
            out.extend_from_slice(state.context());
        }
        Ok(out)
    }

    /// The `k` likeliest next words into `out`, best first (the head's logits as scores).
    pub fn top_k_into(&self, k: usize, out: &mut TopK) -> Result<()> {
        let head = self.head();
        let ctx = self.context();
        check_context(head, ctx, k)?;
        head.predict_into(ctx, k, out);
        Ok(())
    }

    /// The head's `k` likeliest words for each of a batch of context vectors `hs` (`[n, d]`
    /// row-major, `d` the model's width), read without history: for the heads that score `h`
    /// (every softmax head), not for those that read the previous words.
    pub fn top_k_batch(&self, hs: &[f32], k: usize, out: &mut [TopK]) -> Result<()> {
        let head = self.head();
        if head.history_len() > 0 || head.context_width() == 0 {
            return Err(Error::Invalid(format!(
                "head {} predicts from the previous words, not from context vectors: feed the \
                 text and ask for the top-k after it",
                head.name()
            )));
        }
        let d = head.context_width();
        if hs.len() != out.len() * d {
            return Err(Error::Invalid(format!(
                "{} numbers are not {} context vectors of width {d}: pass an [n, {d}] array",
                hs.len(),
                out.len()
            )));
        }
        for h in hs.chunks(d.max(1)) {
            check_context(head, Context { h, history: &[] }, k)?;
        }
        let histories = vec![&[][..]; out.len()];
        head.predict_batch(hs, &histories, k, out);
        Ok(())
    }
}
