//! A translator folder opened as `fastsoftmax translate` serves it: either kind (the recurrent
//! engine, or the Transformer a distillation teacher is), the recurrent one with its vocabulary
//! map or a screening head. The CLI, the C ABI and the Python bindings all open translators
//! here, so an app gets exactly what the command line gets.

use std::path::{Path, PathBuf};

use fastsoftmax_infer::{Error, Result};

use crate::artifact::{VMAP_FILE, VMAP_TEXT_FILE};
use crate::distill::{is_transformer, TranslateLines};
use crate::transformer::TransformerTranslator;
use crate::{Profile, Screen, SearchOptions, Source, Translation, Translator, VmapScope, VocabMap};

/// Which vocabulary map the recurrent engine decodes with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Vmap {
    /// The one the translator ships (`vocab.map.gz`, from `quantize --vmap`), if it ships one.
    #[default]
    Shipped,
    /// None: every target word is scored.
    Off,
    /// A map from `build-vmap`.
    File(PathBuf),
}

/// How a translator is served.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServeOptions {
    pub vmap: Vmap,
    /// Which sentences share a map's shortlist.
    pub scope: VmapScope,
    /// A screening head (`MODEL/heads/NAME`) replacing the map: each decoder row scores only
    /// its route's words.
    pub head: Option<String>,
}

/// The recurrent engine (maps, heads, int8, the time per component) or the Transformer (a
/// distillation teacher: full softmax, f32).
pub enum Engine {
    Rnn(Box<Translator>),
    Transformer(Box<TransformerTranslator>),
}

/// A translator ready to serve.
pub struct Served {
    pub engine: Engine,
    /// The vocabulary map decoded with, if any.
    pub vmap: Option<PathBuf>,
    /// Things the caller should tell the user (a map naming words the translator lacks).
    pub warnings: Vec<String>,
}

impl Served {
    /// Opens the translator in `dir` as `options` say.
    pub fn open(dir: &Path, options: &ServeOptions) -> Result<Served> {
        let context = |e: Error| match e {
            Error::Invalid(m) => Error::Invalid(format!("{}: {m}", dir.display())),
            other => other,
        };
        if is_transformer(dir) {
            if options.head.is_some() || matches!(options.vmap, Vmap::File(_)) {
                return Err(Error::Invalid(format!(
                    "{} is a Transformer (a distillation teacher): it decodes over its whole \
                     vocabulary; vocabulary maps and screening heads serve the recurrent translators",
                    dir.display()
                )));
            }
            let engine = TransformerTranslator::load(dir).map_err(context)?;
            return Ok(Served {
                engine: Engine::Transformer(Box::new(engine)),
                vmap: None,
                warnings: Vec::new(),
            });
        }
        if options.head.is_some() && matches!(options.vmap, Vmap::File(_)) {
            return Err(Error::Invalid(
                "a screening head replaces the vocabulary map: give one or the other".into(),
            ));
        }
        let mut engine = Translator::load(dir).map_err(context)?;
        let mut warnings = Vec::new();
        // The file the engine read its map from: whichever of the two names the folder holds.
        let mut vmap = engine.vocab_map().and_then(|_| {
            [VMAP_FILE, VMAP_TEXT_FILE]
                .map(|f| dir.join(f))
                .into_iter()
                .find(|p| p.exists())
        });
        match (&options.vmap, &options.head) {
            (Vmap::File(path), _) => {
                let map = VocabMap::load(path)?
                    .for_vocab(engine.tgt_vocab())
                    .map_err(|e| {
                        Error::Invalid(format!("using the vocabulary map {}: {e}", path.display()))
                    })?;
                if map.unknown > 0 {
                    warnings.push(format!(
                        "{} of the {} target words in {} are not in the translator's \
                         vocabulary; they read as <unk>",
                        map.unknown,
                        map.words,
                        path.display()
                    ));
                }
                engine.set_vocab_map(Some((map, options.scope)));
                vmap = Some(path.clone());
            }
            // A shipped map gives way to Off and to a screening head (which replaces it).
            (Vmap::Off, _) | (_, Some(_)) => {
                engine.set_vocab_map(None);
                vmap = None;
            }
            (Vmap::Shipped, None) => {}
        }
        engine.set_vocab_map_scope(options.scope);
        if let Some(name) = &options.head {
            let screen = Screen::load(&engine, dir, name)
                .map_err(|e| Error::Invalid(format!("loading the screening head {name:?}: {e}")))?;
            engine.set_screen(Some(screen));
        }
        Ok(Served {
            engine: Engine::Rnn(Box::new(engine)),
            vmap,
            warnings,
        })
    }

    /// `line` made ready for the encoder (cut to `max_tokens`).
    pub fn source(&self, line: &str, max_tokens: usize) -> Source {
        match &self.engine {
            Engine::Rnn(e) => e.source(line, max_tokens),
            Engine::Transformer(e) => e.source(line, max_tokens),
        }
    }

    /// Per source, its `opts.n_best` translations, best first. The Transformer adds nothing
    /// to `profile`.
    pub fn search(
        &self,
        sources: &[Source],
        opts: &SearchOptions,
        profile: &mut Profile,
    ) -> Result<Vec<Vec<Translation>>> {
        match &self.engine {
            Engine::Rnn(e) => e.search(sources, opts, profile),
            Engine::Transformer(e) => e.search(sources, opts),
        }
    }

    /// Translates lines of text as one batch: line `i` of the result holds line `i`'s
    /// translations.
    pub fn translate(&self, lines: &[&str], opts: &SearchOptions) -> Result<Vec<Vec<Translation>>> {
        self.lines().translate_lines(lines, opts)
    }

    /// The engine behind [`TranslateLines`]'s one call.
    pub(crate) fn lines(&self) -> &dyn TranslateLines {
        match &self.engine {
            Engine::Rnn(e) => e.as_ref(),
            Engine::Transformer(e) => e.as_ref(),
        }
    }

    /// The width of the vectors the output layer scores (the FLOPs of a logit are twice it).
    pub fn output_width(&self) -> usize {
        match &self.engine {
            Engine::Rnn(e) => e.spec().d_attn,
            Engine::Transformer(e) => e.spec().d_model,
        }
    }

    /// The recurrent engine, if this is one.
    pub fn rnn(&self) -> Option<&Translator> {
        match &self.engine {
            Engine::Rnn(e) => Some(e),
            Engine::Transformer(_) => None,
        }
    }
}
