//! The converter an app ships, opened with one call: what `fastsoftmax ime`, `ime convert` and
//! `ime eval` run with no options.
//!
//! A converter folder ([`crate::model`]) holds the LSTM, its lexicon, the unigram adaptation,
//! the tail estimate of incremental vocabulary selection, optionally Mozc's dictionary
//! ([`crate::mozc`]), and `converter.json`: how they are combined (the weights fitted on a
//! dev set). [`Converter::open`] assembles them; [`Converter::session`] types into them.
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

/// The shipped converter: the model with its lexicon (and Mozc's dictionary), the tail
/// estimate, and how they combine.
pub struct Converter {
    pub model: ImeModel,
    pub config: ConverterConfig,
    tail: Option<TailEstimate>,
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
        Ok(Converter {
            model,
            config,
            tail,
        })
    }

    /// The language model with incremental vocabulary selection over the top `samples` words
    /// (and the tail estimate), repaired incrementally.
    pub fn scorer(&self) -> Result<IvsScorer<'_>> {
        let scorer = IvsScorer::new(
            &self.model.lm,
            Sample::Top(self.config.samples),
            Repair::Incremental,
        )?;
        match &self.tail {
            Some(t) => scorer.with_tail(t.clone()),
            None => Ok(scorer),
        }
    }

    /// Session options of the folder's settings, `n_best` candidates offered.
    pub fn options(&self, n_best: usize) -> Options {
        Options {
            beam: self.config.beam,
            n_best,
            katakana: self.config.katakana,
        }
    }

    /// A typing session offering `n_best` candidates.
    pub fn session(&self, n_best: usize) -> Result<Session<'_, IvsScorer<'_>>> {
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
