//! The engines from Python (`import fastsoftmax`): `Predictor`, `Translator` and
//! `ImeSession`, each what the CLI runs (`predict`, `translate`, `ime`), with numpy arrays in
//! and out where a batch is natural, and the GIL released while the engine computes. Type
//! stubs: `fastsoftmax.pyi`.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use fastsoftmax_ime::{Key, OwnedSession, UserData};
use fastsoftmax_infer::{Error, NextWords, TopK};
use fastsoftmax_translate::{SearchOptions, ServeOptions, Served, Vmap, VmapScope};
use numpy::ndarray::{Array1, Array2, Ix1, Ix2};
use numpy::{IntoPyArray, PyArray, PyArray1, PyArray2, PyReadonlyArray2};
use pyo3::exceptions::{PyOSError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;

/// An engine's error as Python's: a file that cannot be read is an `OSError`, the rest (a
/// damaged file, a bad argument) a `ValueError`; the message names the file or the argument.
fn py_err(e: Error) -> PyErr {
    match e {
        Error::Io { .. } => PyOSError::new_err(e.to_string()),
        _ => PyValueError::new_err(e.to_string()),
    }
}

/// The value behind a mutex; a panic that poisoned it left it unusable.
fn locked<T>(m: &Mutex<T>) -> PyResult<MutexGuard<'_, T>> {
    m.lock().map_err(|_| poisoned())
}

/// The predictor to read (many threads at once) or to change (one).
fn reading<T>(l: &RwLock<T>) -> PyResult<RwLockReadGuard<'_, T>> {
    l.read().map_err(|_| poisoned())
}

fn writing<T>(l: &RwLock<T>) -> PyResult<RwLockWriteGuard<'_, T>> {
    l.write().map_err(|_| poisoned())
}

fn poisoned() -> PyErr {
    PyRuntimeError::new_err("an earlier call failed inside the engine: open a new one")
}

/// `a` as a contiguous row-major slice (copied only when it is not one already).
fn rows<'a>(a: &'a PyReadonlyArray2<'_, f32>) -> Cow<'a, [f32]> {
    match a.as_slice() {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => Cow::Owned(a.as_array().iter().copied().collect()),
    }
}

/// Top-k ids and scores, `[k]` or `[n, k]`.
type TopKArrays<'py, D> = (Bound<'py, PyArray<u32, D>>, Bound<'py, PyArray<f32, D>>);

struct PredictorState {
    next: NextWords,
    top: TopK,
}

/// Next-word prediction: a language model, one of its heads, and the text read so far.
///
/// `Predictor(model_dir, head="full")`: `full` is the exact softmax; a trained head is
/// `model_dir/heads/NAME` (`l2s`, `ds`, `candidates`, …); built-in ones are named by
/// `fastsoftmax predict --head nope`. Threads: `topk_batch` and `contexts` run in parallel;
/// the calls on the text fed (`feed`, `topk`, `reset`) one at a time.
#[pyclass(frozen, module = "fastsoftmax")]
struct Predictor {
    state: RwLock<PredictorState>,
    vocab: Vec<String>,
    width: usize,
}

#[pymethods]
impl Predictor {
    #[new]
    #[pyo3(signature = (model_dir, head = "full"))]
    fn new(py: Python<'_>, model_dir: PathBuf, head: &str) -> PyResult<Self> {
        let next = py
            .detach(|| NextWords::open(&model_dir, head))
            .map_err(py_err)?;
        let vocab = next.lm().vocab();
        let vocab = (0..vocab.len() as u32)
            .map(|id| vocab.word(id).to_string())
            .collect();
        let width = next.context().h.len();
        Ok(Predictor {
            state: RwLock::new(PredictorState {
                next,
                top: TopK::new(1),
            }),
            vocab,
            width,
        })
    }

    /// Words in the vocabulary.
    #[getter]
    fn vocab_size(&self) -> usize {
        self.vocab.len()
    }

    /// Width `d` of the context vectors.
    #[getter]
    fn context_width(&self) -> usize {
        self.width
    }

    /// The word of id `id`.
    fn word(&self, id: usize) -> PyResult<&str> {
        self.vocab.get(id).map(String::as_str).ok_or_else(|| {
            PyValueError::new_err(format!(
                "id {id} is outside the vocabulary of {} words",
                self.vocab.len()
            ))
        })
    }

    /// Starts a new sentence (forgets the words fed).
    fn reset(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| writing(&self.state)?.next.reset().map_err(py_err))
    }

    /// Reads `words` (separated by spaces, PTB style for the PTB models) after the text fed
    /// before; returns the words outside the vocabulary (read as `<unk>`).
    fn feed(&self, py: Python<'_>, words: &str) -> PyResult<Vec<String>> {
        py.detach(|| {
            let mut s = writing(&self.state)?;
            let unknown = s.next.feed(words).map_err(py_err)?;
            Ok(unknown.into_iter().map(str::to_string).collect())
        })
    }

    /// The `k` likeliest next words after the text fed: `(ids, scores)`, `uint32[k]` and
    /// `float32[k]` (the head's logits), best first.
    fn topk<'py>(&self, py: Python<'py>, k: usize) -> PyResult<TopKArrays<'py, Ix1>> {
        let (ids, scores) = py.detach(|| {
            let s = &mut *writing(&self.state)?;
            s.next.top_k_into(k, &mut s.top).map_err(py_err)?;
            let best = s.top.as_slice();
            Ok::<_, PyErr>((
                best.iter().map(|x| x.id).collect::<Vec<_>>(),
                best.iter().map(|x| x.logit).collect::<Vec<_>>(),
            ))
        })?;
        Ok((ids.into_pyarray(py), scores.into_pyarray(py)))
    }

    /// The `k` likeliest words for each row of `contexts` (`float32[n, d]`): `(ids, scores)`,
    /// `uint32[n, k]` and `float32[n, k]`, best first. For the heads that score context
    /// vectors (every softmax head), not the ones that read the previous words.
    fn topk_batch<'py>(
        &self,
        py: Python<'py>,
        contexts: &Bound<'py, PyAny>,
        k: usize,
    ) -> PyResult<TopKArrays<'py, Ix2>> {
        let contexts: PyReadonlyArray2<'py, f32> = contexts.extract().map_err(|_| {
            let what = |attr: &str| {
                contexts
                    .getattr(attr)
                    .and_then(|a| a.str().map(|s| s.to_string()))
                    .unwrap_or_else(|_| "?".into())
            };
            PyTypeError::new_err(format!(
                "contexts must be a float32 numpy array [n, {}], not {} of dtype {} and shape \
                 {}: pass np.asarray(contexts, dtype=np.float32)",
                self.width,
                contexts
                    .get_type()
                    .name()
                    .map_or("?".into(), |n| n.to_string()),
                what("dtype"),
                what("shape"),
            ))
        })?;
        let (n, d) = contexts.as_array().dim();
        if d != self.width {
            return Err(PyValueError::new_err(format!(
                "contexts are [{n}, {d}], but this model's context vectors have width {}: pass \
                 a float32 array [n, {}]",
                self.width, self.width
            )));
        }
        let hs = rows(&contexts);
        let (ids, scores) = py.detach(|| {
            let s = reading(&self.state)?;
            let mut out = vec![TopK::new(k.max(1)); n];
            s.next.top_k_batch(&hs, k, &mut out).map_err(py_err)?;
            let mut ids = Vec::with_capacity(n * k);
            let mut scores = Vec::with_capacity(n * k);
            for t in &out {
                ids.extend(t.as_slice().iter().map(|x| x.id));
                scores.extend(t.as_slice().iter().map(|x| x.logit));
            }
            Ok::<_, PyErr>((ids, scores))
        })?;
        let shape = (n, k); // k ≤ the vocabulary (checked), so every row has k
        let ids = Array2::from_shape_vec(shape, ids).expect("n rows of k");
        let scores = Array2::from_shape_vec(shape, scores).expect("n rows of k");
        Ok((ids.into_pyarray(py), scores.into_pyarray(py)))
    }

    /// The context vectors after each word of `words` read from a sentence start:
    /// `float32[n, d]` (what `topk_batch` takes). The text fed is left as it is.
    fn contexts<'py>(&self, py: Python<'py>, words: &str) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let hs = py.detach(|| reading(&self.state)?.next.contexts(words).map_err(py_err))?;
        let n = hs.len() / self.width.max(1);
        Ok(Array2::from_shape_vec((n, self.width), hs)
            .expect("n rows of d")
            .into_pyarray(py))
    }

    /// The ids of `words` (`<unk>`'s for a word outside the vocabulary).
    fn encode<'py>(&self, py: Python<'py>, words: &str) -> PyResult<Bound<'py, PyArray1<u32>>> {
        let ids = reading(&self.state)?.next.lm().encode_words(words);
        Ok(Array1::from_vec(ids).into_pyarray(py))
    }
}

/// One translation of a line.
#[pyclass(frozen, get_all, module = "fastsoftmax")]
struct Translation {
    /// The text.
    text: String,
    /// Its target tokens.
    tokens: Vec<String>,
    /// `log_prob / len^alpha`, what the beam ranks by.
    score: f64,
    /// Total log-probability, `<eos>` included.
    log_prob: f64,
}

#[pymethods]
impl Translation {
    fn __repr__(&self) -> String {
        format!("Translation({:?}, score={:.4})", self.text, self.score)
    }
}

/// A translator, served as `fastsoftmax translate` serves it.
///
/// `Translator(model_dir, vmap=None, no_vmap=False, batch_scope=False, head=None)`: the
/// vocabulary map it ships unless `vmap` names another or `no_vmap`; a screening head in
/// `model_dir/heads/NAME` instead of a map. Many threads may translate with one at once.
#[pyclass(frozen, module = "fastsoftmax")]
struct Translator {
    served: Served,
}

#[pymethods]
impl Translator {
    #[new]
    #[pyo3(signature = (model_dir, vmap = None, no_vmap = false, batch_scope = false, head = None))]
    fn new(
        py: Python<'_>,
        model_dir: PathBuf,
        vmap: Option<PathBuf>,
        no_vmap: bool,
        batch_scope: bool,
        head: Option<String>,
    ) -> PyResult<Self> {
        let options = ServeOptions {
            vmap: match (vmap, no_vmap) {
                (Some(path), _) => Vmap::File(path),
                (None, true) => Vmap::Off,
                (None, false) => Vmap::Shipped,
            },
            scope: match batch_scope {
                true => VmapScope::Batch,
                false => VmapScope::Sentence,
            },
            head,
        };
        let served = py
            .detach(|| Served::open(&model_dir, &options))
            .map_err(py_err)?;
        Ok(Translator { served })
    }

    /// The best translation of each line (one sentence each), decoded as one batch.
    #[pyo3(signature = (lines, beam = 5, length_norm = 1.0, max_source_tokens = 250, replace_unk = true, block_repeats = false))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments
    fn translate(
        &self,
        py: Python<'_>,
        lines: Vec<String>,
        beam: usize,
        length_norm: f32,
        max_source_tokens: usize,
        replace_unk: bool,
        block_repeats: bool,
    ) -> PyResult<Vec<String>> {
        let opts = SearchOptions {
            beam,
            n_best: 1,
            length_norm,
            max_source_tokens,
            replace_unk,
            block_repeats,
        };
        let all = self.search(py, &lines, &opts)?;
        Ok(all
            .into_iter()
            .map(|mut nbest| nbest.swap_remove(0).text)
            .collect())
    }

    /// The `n_best` best translations of each line, best first.
    #[pyo3(signature = (lines, n_best, beam = 5, length_norm = 1.0, max_source_tokens = 250, replace_unk = true, block_repeats = false))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments
    fn translate_n_best(
        &self,
        py: Python<'_>,
        lines: Vec<String>,
        n_best: usize,
        beam: usize,
        length_norm: f32,
        max_source_tokens: usize,
        replace_unk: bool,
        block_repeats: bool,
    ) -> PyResult<Vec<Vec<Translation>>> {
        let opts = SearchOptions {
            beam,
            n_best,
            length_norm,
            max_source_tokens,
            replace_unk,
            block_repeats,
        };
        Ok(self
            .search(py, &lines, &opts)?
            .into_iter()
            .map(|nbest| {
                nbest
                    .into_iter()
                    .map(|t| Translation {
                        text: t.text,
                        tokens: t.tokens,
                        score: t.score,
                        log_prob: t.log_prob,
                    })
                    .collect()
            })
            .collect())
    }
}

impl Translator {
    fn search(
        &self,
        py: Python<'_>,
        lines: &[String],
        opts: &SearchOptions,
    ) -> PyResult<Vec<Vec<fastsoftmax_translate::Translation>>> {
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        py.detach(|| self.served.translate(&lines, opts))
            .map_err(py_err)
    }
}

/// The key `name` names: one character, or `space`, `enter`, `backspace`, `escape`, `tab`,
/// `left`, `right`, `up`, `down`, `shift+left`, `shift+right`, `pageup`, `pagedown`, `f1`–`f12`.
fn key_named(name: &str) -> PyResult<Key> {
    let mut chars = name.chars();
    if let (Some(c), None) = (chars.next(), chars.next()) {
        if !c.is_control() {
            return Ok(Key::Char(c));
        }
    }
    let lower = name.to_ascii_lowercase();
    Ok(match lower.as_str() {
        "space" => Key::Space,
        "enter" | "return" => Key::Enter,
        "backspace" => Key::Backspace,
        "escape" | "esc" => Key::Escape,
        "tab" => Key::Tab,
        "left" => Key::Left,
        "right" => Key::Right,
        "up" => Key::Up,
        "down" => Key::Down,
        "shift+left" => Key::ShiftLeft,
        "shift+right" => Key::ShiftRight,
        "pageup" | "page_up" => Key::PageUp,
        "pagedown" | "page_down" => Key::PageDown,
        f if f.starts_with('f') && matches!(f[1..].parse::<u8>(), Ok(1..=12)) => {
            Key::Function(f[1..].parse().expect("checked"))
        }
        _ => {
            return Err(PyValueError::new_err(format!(
                "unknown key {name:?}: pass one character, or space, enter, backspace, escape, \
                 tab, left, right, up, down, shift+left, shift+right, pageup, pagedown, f1–f12"
            )))
        }
    })
}

/// The Japanese input method on the shipped converter, one key at a time with Mozc's
/// bindings, as the IBus engine and `fastsoftmax ime` run it.
///
/// `ImeSession(model_dir, user_dir=None)`: with `user_dir`, the user's history and dictionary
/// there are used, and `save()` writes what was learned back.
#[pyclass(frozen, module = "fastsoftmax")]
struct ImeSession {
    typing: Mutex<OwnedSession>,
}

#[pymethods]
impl ImeSession {
    #[new]
    #[pyo3(signature = (model_dir, user_dir = None))]
    fn new(py: Python<'_>, model_dir: PathBuf, user_dir: Option<PathBuf>) -> PyResult<Self> {
        let user = user_dir.map(UserData::new);
        let (session, _warnings) = py
            .detach(|| OwnedSession::open(&model_dir, user))
            .map_err(py_err)?;
        Ok(ImeSession {
            typing: Mutex::new(session),
        })
    }

    /// Presses one key (see the class doc for the names); whether the input method used it
    /// (False: the application should have it, as a Space with nothing typed).
    fn press(&self, py: Python<'_>, key: &str) -> PyResult<bool> {
        let key = key_named(key)?;
        py.detach(|| Ok(locked(&self.typing)?.press(key)))
    }

    /// Presses each character of `text` (romaji, digits, symbols); returns what they committed.
    fn keys(&self, py: Python<'_>, text: &str) -> PyResult<String> {
        py.detach(|| {
            let mut t = locked(&self.typing)?;
            let mut committed = String::new();
            for c in text.chars() {
                t.press(Key::Char(c));
                committed += t.committed();
            }
            Ok(committed)
        })
    }

    /// Commits what is shown (converted or not), as a field losing focus should; returns it.
    fn commit(&self, py: Python<'_>) -> PyResult<String> {
        py.detach(|| Ok(locked(&self.typing)?.commit().to_string()))
    }

    /// Drops what is typed, committing nothing.
    fn clear(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| {
            locked(&self.typing)?.clear();
            Ok(())
        })
    }

    /// Writes what was learned to the user folder, atomically.
    fn save(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| locked(&self.typing)?.save().map_err(py_err))
    }

    /// The `n` best conversions of a whole reading (hiragana), as `fastsoftmax ime convert`
    /// gives them; the session is left as it is.
    #[pyo3(signature = (kana, n = 5))]
    fn convert(&self, py: Python<'_>, kana: &str, n: usize) -> PyResult<Vec<String>> {
        py.detach(|| {
            let t = locked(&self.typing)?;
            let found = t.converter().convert(kana, n).map_err(py_err)?;
            Ok(found.into_iter().map(|c| c.text).collect())
        })
    }

    /// What the last key (or commit) committed ("" when nothing).
    #[getter]
    fn committed(&self) -> PyResult<String> {
        Ok(locked(&self.typing)?.committed().to_string())
    }

    /// The preedit (the segments joined).
    #[getter]
    fn preedit(&self) -> PyResult<String> {
        Ok(locked(&self.typing)?.view().segments.concat())
    }

    /// The preedit's segments (one while composing).
    #[getter]
    fn segments(&self) -> PyResult<Vec<String>> {
        Ok(locked(&self.typing)?.view().segments.clone())
    }

    /// The focused segment while converting.
    #[getter]
    fn focus(&self) -> PyResult<Option<usize>> {
        Ok(locked(&self.typing)?.view().focus)
    }

    /// The candidate window's page (empty: closed).
    #[getter]
    fn candidates(&self) -> PyResult<Vec<String>> {
        Ok(locked(&self.typing)?.view().candidates.clone())
    }

    /// The highlighted candidate of the page.
    #[getter]
    fn highlighted(&self) -> PyResult<Option<usize>> {
        Ok(locked(&self.typing)?.view().highlighted)
    }

    /// The suggestions while composing (Tab takes the first).
    #[getter]
    fn suggestions(&self) -> PyResult<Vec<String>> {
        Ok(locked(&self.typing)?.view().suggestions.clone())
    }
}

#[pymodule]
#[pyo3(name = "fastsoftmax")]
fn fastsoftmax_py(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Predictor>()?;
    m.add_class::<Translator>()?;
    m.add_class::<Translation>()?;
    m.add_class::<ImeSession>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
