//! The converter an app ships, opened with one call: what `fastsoftmax ime`, `ime convert` and
//! `ime eval` run with no options.
//!
//! A converter folder ([`crate::model`]) holds the LSTM, its lexicon, the unigram adaptation,
//! the tail estimate of incremental vocabulary selection, optionally Mozc's dictionary
//! ([`crate::mozc`]) and a trigram model ([`crate::kn_file`]), and `converter.json`: how they
//! are combined (the weights fitted on a dev set). [`Converter::open`] assembles them;
//! [`Converter::session`] types into them.
//!
//! ```no_run
//! use fastsoftmax_ime::Converter;
//! # fn main() -> fastsoftmax_infer::Result<()> {
//! let converter = Converter::open(std::path::Path::new("assets/models/ime-ja"))?;
//! let mut session = converter.session(9)?;
//! for key in "kyouhaiitenki".chars() {
//!     session.key(key);
//! }
//! println!("{}", session.candidates()[0].text); // 今日はいい天気
//! # Ok(())
//! # }
//! ```

use std::path::Path;

use fastsoftmax_infer::files::write_atomic;
use fastsoftmax_infer::{Error, Result};

use crate::decode::Candidate;
use crate::ivs::{IvsScorer, Repair, Sample};
use crate::kn::KnScorer;
use crate::kn_file::{KnMixture, TRIGRAM_FILE};
use crate::mix::LogLinear;
use crate::model::ImeModel;
use crate::mozc::MozcWeights;
use crate::session::{Options, Session};
use crate::tail::{tail_file, TailEstimate};
use crate::Decoder;

pub const CONFIG_FILE: &str = "converter.json";

/// How a converter folder's parts are combined (`converter.json`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConverterConfig {
    /// Hypotheses kept per kana (the paper: 10).
    pub beam: usize,
    /// Longest hiragana span also offered in katakana (0: none).
    pub katakana: usize,
    /// The fixed words of every vocabulary selection: the `samples` most frequent (the paper's
    /// Ṽ, 400).
    pub samples: usize,
    /// Whether each normaliser adds the estimated mass of the words outside the sample
    /// (`tail-{samples}.json`).
    pub tail: bool,
    /// Mozc's costs in the score, when the folder holds Mozc's dictionary.
    #[serde(default)]
    pub mozc: Option<MozcWeights>,
    /// The weight `μ` of the trigram model ([`TRIGRAM_FILE`]) beside the LSTM, when the folder
    /// ships one: a path scores `ln p_lstm + μ ln p_trigram` (exact under vocabulary selection).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigram: Option<f32>,
}

/// The paper's settings: beam 10, katakana spans to 12, the top 400 words; no tail estimate,
/// no Mozc.
impl Default for ConverterConfig {
    fn default() -> Self {
        ConverterConfig {
            beam: 10,
            katakana: 12,
            samples: 400,
            tail: false,
            mozc: None,
            trigram: None,
        }
    }
}

impl ConverterConfig {
    /// What a folder without `converter.json` runs: the paper's settings, the tail estimate
    /// when the folder has it, Mozc's default weights when it has Mozc's dictionary.
    pub fn default_for(dir: &Path) -> Self {
        let paper = Self::default();
        ConverterConfig {
            tail: tail_file(dir, paper.samples).exists(),
            mozc: crate::mozc::MozcDictionary::present(dir).then(MozcWeights::default),
            ..paper
        }
    }

    /// The folder's `converter.json`, or [`ConverterConfig::default_for`] when it has none.
    pub fn read(dir: &Path) -> Result<Self> {
        let path = dir.join(CONFIG_FILE);
        if !path.exists() {
            return Ok(Self::default_for(dir));
        }
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        let config: Self = serde_json::from_str(&text).map_err(|e| {
            Error::format(&path, format!("{e}; re-run `ime pack` to write it again"))
        })?;
        if config.beam == 0 || config.samples == 0 {
            return Err(Error::format(
                &path,
                "beam and samples must be at least 1; re-run `ime pack`",
            ));
        }
        if let Some(w) = &config.mozc {
            w.check("its \"mozc\" weights")
                .map_err(|e| Error::format(&path, format!("{e}; re-run `ime pack`")))?;
        }
        if let Some(mu) = config.trigram {
            if !(mu.is_finite() && mu >= 0.0) {
                return Err(Error::format(
                    &path,
                    format!(
                        "the trigram weight {mu} must be a finite number ≥ 0; re-run `ime pack`"
                    ),
                ));
            }
            if !dir.join(TRIGRAM_FILE).exists() {
                return Err(Error::format(
                    &path,
                    format!(
                        "names a trigram weight, but {} is missing: re-run `ime pack --trigram FILE`",
                        dir.join(TRIGRAM_FILE).display()
                    ),
                ));
            }
        }
        if config.mozc.is_some() && !crate::mozc::MozcDictionary::present(dir) {
            return Err(Error::format(
                &path,
                format!(
                    "names Mozc's weights, but {} is missing: re-run `ime pack --mozc DIR`",
                    dir.join(crate::mozc::ENTRIES_FILE).display()
                ),
            ));
        }
        Ok(config)
    }

    /// Writes `dir/converter.json` (atomically).
    pub fn write(&self, dir: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(|e| Error::Invalid(e.to_string()))?;
        write_atomic(&dir.join(CONFIG_FILE), format!("{text}\n").as_bytes())
    }
}

/// The converter's scorer: the LSTM with incremental vocabulary selection, and the trigram
/// model log-linearly beside it when the folder ships one.
pub type ConverterScorer<'a> = LogLinear<IvsScorer<'a>, Option<KnScorer<'a>>>;

/// The shipped converter: the model with its lexicon (and Mozc's dictionary), the tail
/// estimate, the trigram model, and how they combine.
pub struct Converter {
    pub model: ImeModel,
    pub config: ConverterConfig,
    tail: Option<TailEstimate>,
    pub trigram: Option<KnMixture>,
}

impl Converter {
    /// Opens a converter folder (see the module docs).
    pub fn open(dir: &Path) -> Result<Self> {
        let config = ConverterConfig::read(dir)?;
        let model = ImeModel::load_with(dir, config.mozc)?;
        let tail = match config.tail {
            true => Some(TailEstimate::load(dir, config.samples, &model.lm)?),
            false => None,
        };
        let trigram = match config.trigram {
            Some(_) => Some(read_trigram(dir, model.lm.vocab().len())?),
            None => None,
        };
        // Suggestions look words up by reading prefix: the index is built here, once.
        model.lexicon.index_vocabulary(model.spelling.unk);
        Ok(Converter {
            model,
            config,
            tail,
            trigram,
        })
    }

    /// The language model with incremental vocabulary selection over the top `samples` words
    /// (and the tail estimate), repaired incrementally; beside it the trigram model when the
    /// folder ships one.
    pub fn scorer(&self) -> Result<ConverterScorer<'_>> {
        let mut scorer = IvsScorer::new(
            &self.model.lm,
            Sample::Top(self.config.samples),
            Repair::Incremental,
        )?;
        if let Some(t) = &self.tail {
            scorer = scorer.with_tail(t.clone())?;
        }
        let trigram = self.trigram.as_ref().map(KnMixture::scorer);
        Ok(LogLinear::new(
            scorer,
            trigram,
            self.config.trigram.unwrap_or(0.0),
        ))
    }

    /// Session options of the folder's settings, `n_best` candidates offered.
    pub fn options(&self, n_best: usize) -> Options {
        Options {
            beam: self.config.beam,
            n_best,
            katakana: self.config.katakana,
            ..Options::default()
        }
    }

    /// A typing session offering `n_best` candidates.
    pub fn session(&self, n_best: usize) -> Result<Session<'_, ConverterScorer<'_>>> {
        Ok(Session::new(
            self.scorer()?,
            &self.model.lexicon,
            self.model.spelling.clone(),
            self.options(n_best),
        ))
    }

    /// The `n` best conversions of a whole reading (hiragana), typed one kana at a time.
    pub fn convert(&self, kana: &str, n: usize) -> Result<Vec<Candidate>> {
        let mut scorer = self.scorer()?;
        let lattice = crate::Lattice::with_katakana(self.config.katakana);
        let mut dec = Decoder::with_lattice(
            &mut scorer,
            self.config.beam,
            self.model.spelling.clone(),
            lattice,
        );
        for c in kana.chars() {
            dec.push(c, &self.model.lexicon, &mut scorer);
        }
        Ok(dec.n_best(n, &self.model.lexicon, &mut scorer))
    }
}

/// The folder's trigram model, checked against the LSTM's vocabulary of `vocab` words.
pub fn read_trigram(dir: &Path, vocab: usize) -> Result<KnMixture> {
    let path = dir.join(TRIGRAM_FILE);
    let trigram = KnMixture::read(&path)?;
    if trigram.vocab_size() != vocab {
        return Err(Error::format(
            &path,
            format!(
                "a trigram model over {} words beside an LSTM of {vocab}: re-run `ime pack \
                 --trigram FILE` with this model",
                trigram.vocab_size()
            ),
        ));
    }
    Ok(trigram)
}
