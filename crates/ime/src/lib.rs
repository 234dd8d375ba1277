//! The burn-free Japanese input method of fastsoftmax (the IME paper,
//! `ime-incremental-vocabulary-selection`): kana typed one at a time become the best
//! kanji-kana text under a language model.
//!
//! - [`romaji`]: keys → hiragana, as typed (Hepburn and wāpuro).
//! - [`lattice`]: the lexicon (reading → words) and the word lattice `D_t` over the kana so far.
//! - [`decode`]: Viterbi beam search over the lattice, one kana at a time, with any
//!   [`decode::Scorer`]; n-best distinct conversions; backspace.
//! - [`kn`]: interpolated modified Kneser–Ney n-gram models, the paper's baselines.
//! - [`kn_file`]: their mixtures on disk (the trigram model a converter ships beside the LSTM).
//! - [`lstm`]: the LSTM language model (infer's step) with the full softmax.
//! - [`bucketed`]: the same LSTM with a D-softmax or adaptive softmax head (the paper's
//!   D-softmax and D-softmax* rows).
//! - [`ivs`]: the same LSTM with incremental vocabulary selection (the paper's Algorithm 1).
//! - [`tail`]: a linear estimate of the mass of the words a selection leaves out.
//! - [`adapt`]: unigram adaptation of a language model toward another domain's word frequencies.
//! - [`mix`]: linear interpolation of language models, weights by EM on held-out text.
//! - [`mozc`]: Mozc's dictionary (MeCab's binary format) and its path costs in the lattice.
//! - [`model`]: the shipped converter folder: the LM and the lexicon of the words outside it.
//! - [`converter`]: the shipped converter opened with one call ([`Converter::open`]).
//! - [`session`]: keys in, candidates and committed text out, the LM state carried over; Mozc's
//!   keys ([`Session::press`]): segments, transliteration, the candidate window.
//! - [`segment`]: a conversion in segments (bunsetsu), each with its own alternatives.
//! - [`chars`]: hiragana, katakana, half- and full-width forms (F6–F10).
//! - [`history`]: what the user chose, learned (recency- and frequency-weighted).
//! - [`user_dict`]: the user dictionary, in the text format of Mozc's dictionary tool.
//! - [`user_data`]: the folder of the user's history and dictionary.
//! - [`typing`]: the converter and a session as one value an app keeps ([`OwnedSession`]).

pub mod adapt;
pub mod bucketed;
pub mod chars;
pub mod converter;
pub mod decode;
pub mod history;
pub mod ivs;
pub mod kn;
pub mod kn_file;
pub mod lattice;
pub mod lstm;
pub mod mix;
pub mod model;
pub mod mozc;
pub mod romaji;
pub mod segment;
pub mod session;
pub mod tail;
pub mod typing;
pub mod user_data;
pub mod user_dict;

pub use bucketed::{BucketKind, BucketScorer, BucketState};
pub use chars::{Transliteration, Width};
pub use converter::{Converter, ConverterConfig};
pub use decode::{Candidate, Decoder, Scorer, Spelling, Start, Then};
pub use history::{History, HistoryConfig};
pub use ivs::{IvsScorer, IvsState, Repair, Sample};
pub use kn::{mixture_weights, KnScorer, KneserNey};
pub use kn_file::KnMixture;
pub use lattice::{Lattice, Lexicon, Node, NodeKind, UserEntry, UserWords, Word};
pub use lstm::{LstmScorer, LstmState};
pub use mix::{Interpolated, LogLinear};
pub use model::ImeModel;
pub use mozc::MozcDictionary;
pub use romaji::Romaji;
pub use session::{Key, Options, Reply, Session, View};
pub use tail::TailEstimate;
pub use typing::OwnedSession;
pub use user_data::UserData;
pub use user_dict::{Pos, UserDictionary, UserWord, USER_BONUS};
