//! Translation: a translator folder served as `fastsoftmax translate` serves it
//! ([`fastsoftmax_translate::Served`]), a batch of lines in, their n-best out.

use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use fastsoftmax_translate::{SearchOptions, ServeOptions, Served, Vmap, VmapScope};

use crate::{failure, guard, guard_handle, null, text, Failure, FsStatus};

/// How a translator is served; NULL fields and zeros are the defaults.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct FsServeOptions {
    /// A vocabulary map from `build-vmap` (NULL: the one the translator ships, if any).
    pub vmap: *const c_char,
    /// Score every target word, even with a translator that ships a map.
    pub no_vmap: bool,
    /// One map shortlist per batch (CTranslate2's way) instead of one per sentence (output
    /// independent of the batch).
    pub batch_scope: bool,
    /// A screening head in `dir/heads/NAME` (NULL: none); not with `vmap`.
    pub head: *const c_char,
}

/// How to search; [`fs_translate_options_default`] gives the CLI's defaults.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct FsTranslateOptions {
    /// Hypotheses kept per sentence, 1 (greedy) to 10.
    pub beam: usize,
    /// Translations returned per line, 1 to `beam`.
    pub n_best: usize,
    /// α of the length normalisation `log p / len^α`.
    pub length_norm: f32,
    /// Longer source lines are cut to this many tokens.
    pub max_source_tokens: usize,
    /// Replace each `<unk>` by the source word the decoder attended to most.
    pub replace_unk: bool,
    /// Never the same word twice in a row (a small student loops on a word it is unsure of).
    pub block_repeats: bool,
}

impl From<FsTranslateOptions> for SearchOptions {
    fn from(o: FsTranslateOptions) -> Self {
        SearchOptions {
            beam: o.beam,
            n_best: o.n_best,
            length_norm: o.length_norm,
            max_source_tokens: o.max_source_tokens,
            replace_unk: o.replace_unk,
            block_repeats: o.block_repeats,
        }
    }
}

/// The defaults of `fastsoftmax translate`: beam 5, one best, α 1, 250 tokens, `<unk>`
/// replaced, repeats allowed.
#[no_mangle]
pub extern "C" fn fs_translate_options_default() -> FsTranslateOptions {
    let d = SearchOptions::default();
    FsTranslateOptions {
        beam: d.beam,
        n_best: d.n_best,
        length_norm: d.length_norm,
        max_source_tokens: d.max_source_tokens,
        replace_unk: d.replace_unk,
        block_repeats: d.block_repeats,
    }
}

/// A translator.
///
/// Threads: any number at once (a translation only reads the model); [`fs_translate`]'s
/// results are the caller's.
pub struct FsTranslator {
    served: Served,
}

/// One translation of one line of a batch.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct FsTranslation {
    /// The line of the batch (0-based).
    pub line: usize,
    /// Its rank among the line's translations, 0 the best.
    pub rank: usize,
    /// The text, UTF-8, NUL-terminated; owned by the [`FsTranslations`] it came from.
    pub text: *const c_char,
    /// `log_prob / len^α`, what the beam ranks by.
    pub score: f64,
    /// Total log-probability, `<eos>` included.
    pub log_prob: f64,
}

/// A batch's translations, line by line and best first within a line. Free with
/// [`fs_translations_free`].
pub struct FsTranslations {
    items: Vec<FsTranslation>,
    /// What the items' `text` points into.
    _texts: Vec<CString>,
}

/// Opens the translator in folder `dir` (either kind: the recurrent engine or a Transformer),
/// served as `options` say (NULL: as it ships). NULL on failure (see `fs_last_error()`).
/// Free with [`fs_translator_free`].
///
/// # Safety
/// `dir` is NULL or a NUL-terminated string; `options` NULL or a valid struct whose strings
/// are NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn fs_translator_open(
    dir: *const c_char,
    options: *const FsServeOptions,
) -> *mut FsTranslator {
    guard_handle(|| {
        let dir = PathBuf::from(text(dir, "dir")?);
        let mut serve = ServeOptions::default();
        if let Some(o) = options.as_ref() {
            serve.vmap = match (o.vmap.is_null(), o.no_vmap) {
                (false, _) => Vmap::File(text(o.vmap, "options.vmap")?.into()),
                (true, true) => Vmap::Off,
                (true, false) => Vmap::Shipped,
            };
            if o.batch_scope {
                serve.scope = VmapScope::Batch;
            }
            if !o.head.is_null() {
                serve.head = Some(text(o.head, "options.head")?.to_string());
            }
        }
        let served = Served::open(&dir, &serve).map_err(failure)?;
        Ok(Box::new(FsTranslator { served }))
    })
}

/// Frees a translator; NULL is ignored.
///
/// # Safety
/// `t` is NULL or a handle from [`fs_translator_open`] not freed before.
#[no_mangle]
pub unsafe extern "C" fn fs_translator_free(t: *mut FsTranslator) {
    if !t.is_null() {
        let _ = catch_unwind(AssertUnwindSafe(|| drop(Box::from_raw(t))));
    }
}

/// Translates `n` lines (UTF-8, one sentence each) as one batch, searching as `options` say
/// (NULL: [`fs_translate_options_default`]). On success `*out` holds the translations (free
/// them with [`fs_translations_free`]) and the number of them is returned; on failure `*out`
/// is NULL and a negative status is returned.
///
/// # Safety
/// `t` is NULL or a live handle; `lines` NULL or `n` pointers, each NULL or a NUL-terminated
/// string; `options` NULL or a valid struct; `out` NULL or a place for a pointer.
#[no_mangle]
pub unsafe extern "C" fn fs_translate(
    t: *const FsTranslator,
    lines: *const *const c_char,
    n: usize,
    options: *const FsTranslateOptions,
    out: *mut *mut FsTranslations,
) -> i32 {
    if !out.is_null() {
        *out = std::ptr::null_mut();
    }
    guard(|| {
        let t = t.as_ref().ok_or_else(|| null("t"))?;
        if out.is_null() {
            return Err(null("out"));
        }
        if lines.is_null() && n > 0 {
            return Err(null("lines"));
        }
        let opts: SearchOptions = match options.as_ref() {
            Some(o) => (*o).into(),
            None => SearchOptions::default(),
        };
        opts.check().map_err(failure)?;
        let mut texts = Vec::with_capacity(n);
        for i in 0..n {
            texts.push(text(*lines.add(i), &format!("lines[{i}]"))?);
        }
        let result = t.served.translate(&texts, &opts).map_err(failure)?;
        let mut items = Vec::new();
        let mut owned = Vec::new();
        for (line, nbest) in result.iter().enumerate() {
            for (rank, tr) in nbest.iter().enumerate() {
                // A NUL cannot be in a C string (the text was read from C strings, so none is).
                let c = CString::new(tr.text.replace('\0', "")).unwrap_or_default();
                items.push(FsTranslation {
                    line,
                    rank,
                    text: c.as_ptr(),
                    score: tr.score,
                    log_prob: tr.log_prob,
                });
                owned.push(c);
            }
        }
        let count = i32::try_from(items.len()).map_err(|_| {
            Failure(
                FsStatus::FsErrorArgument,
                "more than 2^31 translations: translate fewer lines at a time".into(),
            )
        })?;
        *out = Box::into_raw(Box::new(FsTranslations {
            items,
            _texts: owned,
        }));
        Ok(count)
    })
}

/// How many translations `r` holds (0 for NULL).
///
/// # Safety
/// `r` is NULL or live results.
#[no_mangle]
pub unsafe extern "C" fn fs_translations_count(r: *const FsTranslations) -> usize {
    r.as_ref().map_or(0, |r| r.items.len())
}

/// Translation `i` of `r`, or NULL when `r` is NULL or `i` is out of range. Owned by `r`:
/// valid until [`fs_translations_free`].
///
/// # Safety
/// `r` is NULL or live results.
#[no_mangle]
pub unsafe extern "C" fn fs_translations_get(
    r: *const FsTranslations,
    i: usize,
) -> *const FsTranslation {
    r.as_ref()
        .and_then(|r| r.items.get(i))
        .map_or(std::ptr::null(), |t| t as *const FsTranslation)
}

/// Frees the results of [`fs_translate`]; NULL is ignored.
///
/// # Safety
/// `r` is NULL or results not freed before.
#[no_mangle]
pub unsafe extern "C" fn fs_translations_free(r: *mut FsTranslations) {
    if !r.is_null() {
        let _ = catch_unwind(AssertUnwindSafe(|| drop(Box::from_raw(r))));
    }
}

/// The claim [`FsTranslator`]'s documentation makes: the engine is shared across threads.
const _: fn() = || {
    fn shared<T: Sync + Send>() {}
    shared::<Served>();
};
