//! `fastsoftmax translate`: the burn-free engine on lines of text.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use fastsoftmax_translate::artifact::Precision;
use fastsoftmax_translate::serve::Engine;
use fastsoftmax_translate::{Profile, SearchOptions, ServeOptions, Served, Vmap, VmapScope};

#[derive(Args, Debug)]
pub struct TranslateArgs {
    /// Translator directory (manifest.json + model.safetensors, written by `train-nmt`).
    #[arg(long)]
    model: PathBuf,
    /// Beam size, 1 (greedy) to 10.
    #[arg(long, default_value_t = 5)]
    beam: usize,
    /// Sentences decoded together (their beams share every matrix product). Typed input (stdin
    /// on a terminal) is translated line by line.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..))]
    batch: u32,
    /// Translations printed per line (at most the beam size); with --json all of them, else
    /// the extra ones as `i ||| text ||| score` lines after the best.
    #[arg(long, default_value_t = 1)]
    n_best: usize,
    /// α of the length normalisation `log p / len^α` that ranks finished hypotheses.
    #[arg(long, default_value_t = 1.0)]
    length_norm: f32,
    /// Source lines longer than this many tokens are cut to it (with a warning on stderr).
    #[arg(long, default_value_t = 250)]
    max_source_tokens: usize,
    /// Vocabulary map (from `build-vmap`): the output layer scores only the target words the
    /// source n-grams can bring, not the whole vocabulary. A translator that ships a map
    /// (`vocab.map.gz`, from `quantize --vmap`) decodes with it unless this names another or
    /// --no-vmap is given.
    #[arg(long)]
    vmap: Option<PathBuf>,
    /// Score the whole target vocabulary, even with a translator that ships a map.
    #[arg(long, conflicts_with = "vmap")]
    no_vmap: bool,
    /// Which sentences share a vocabulary-map shortlist: `sentence` (each its own; output
    /// independent of --batch) or `batch` (the union over the batch, as CTranslate2 does).
    #[arg(long, value_enum, default_value_t = Scope::Sentence)]
    vmap_scope: Scope,
    /// Screening head (MODEL/heads/NAME, from `train-head l2s|ds --model MODEL`): each decoder
    /// row scores only the words of the cluster (L2S) or expert (DS) its context goes to, and
    /// the beam normalises over them. Not with --vmap.
    #[arg(long, conflicts_with = "vmap")]
    head: Option<String>,
    /// Keep `<unk>` in the output instead of copying the most attended source word. (Latin
    /// names and emoji in a Japanese source are copied through regardless: a Japanese →
    /// English translator reads each as a name it knows, `Ken`, and writes the original in its
    /// place; emoji at a line's start or end are put back around the translation.)
    #[arg(long)]
    keep_unk: bool,
    /// Never write a word twice in a row. A small student loops on a word it is unsure of
    /// ("in foreign foreign words"), and real text rarely repeats one ("had had", German "die
    /// die"): on the shipped translators' test sets this moved BLEU by −0.02 to +0.17.
    #[arg(long)]
    block_repeats: bool,
    /// Input file, one sentence per line (default: stdin).
    #[arg(long)]
    input: Option<PathBuf>,
    /// Output file (default: stdout). Line i is the translation of input line i; empty lines
    /// stay empty.
    #[arg(long)]
    output: Option<PathBuf>,
    /// One JSON object per line: {"line", "source", "translations": [{"text", "score",
    /// "log_prob", "tokens", "ids"}]}.
    #[arg(long)]
    json: bool,
    /// Write the run's numbers (lines, words, seconds, words/s, time per component) as JSON here.
    #[arg(long)]
    stats: Option<PathBuf>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum Scope {
    Sentence,
    Batch,
}

#[derive(serde::Serialize)]
struct Stats {
    lines: usize,
    source_words: usize,
    target_words: usize,
    seconds: f64,
    /// Target words per second, the WNMT measure.
    words_per_s: f64,
    beam: usize,
    batch: u32,
    profile: Profile,
    /// The output product's rate, `2 · logits · d` FLOPs over the output layer's time (which
    /// includes the softmax and, with a vocabulary map, gathering the shortlists).
    output_gflops: f64,
    /// The vocabulary map, if one was used.
    vmap: Option<String>,
    vmap_scope: Option<VmapScope>,
    /// The screening head, if one was used.
    head: Option<String>,
    /// How the head's routes were trained (an L2S head: learned clusters or k-means kept).
    head_trained_as: Option<String>,
    /// Target words scored per decoder row (`V` without a map or head; a head's route
    /// vectors count as words).
    logits_per_row: f64,
    /// The kernels' code path on this CPU per precision (`avx2`, `avx512-vnni`, …), and the
    /// model's precision, whose path the timing ran on.
    kernels: fastsoftmax_infer::kernels::KernelPaths,
    precision: &'static str,
}

pub fn run(a: TranslateArgs) -> anyhow::Result<()> {
    match translate(a) {
        // `translate … | head`: the reader has gone, which is not an error.
        Err(e)
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            Ok(())
        }
        other => other,
    }
}

fn translate(a: TranslateArgs) -> anyhow::Result<()> {
    let opts = SearchOptions {
        beam: a.beam,
        n_best: a.n_best,
        length_norm: a.length_norm,
        max_source_tokens: a.max_source_tokens,
        replace_unk: !a.keep_unk,
        block_repeats: a.block_repeats,
    };
    opts.check()?;
    let scope = match a.vmap_scope {
        Scope::Sentence => VmapScope::Sentence,
        Scope::Batch => VmapScope::Batch,
    };
    let serve = ServeOptions {
        vmap: match (&a.vmap, a.no_vmap) {
            (Some(path), _) => Vmap::File(path.clone()),
            (None, true) => Vmap::Off,
            (None, false) => Vmap::Shipped,
        },
        scope,
        head: a.head.clone(),
    };
    let engine = Served::open(&a.model, &serve)
        .with_context(|| format!("loading the translator in {}", a.model.display()))?;
    for w in &engine.warnings {
        eprintln!("warning: {w}");
    }
    let vmap_used = engine.vmap.as_ref().map(|p| p.display().to_string());
    let mut head_trained_as = None;
    if let (Some(name), Some(screen)) = (&a.head, engine.rnn().and_then(|e| e.screen())) {
        head_trained_as = screen.trained_as().map(str::to_string);
        eprintln!(
            "screening with {} head {name}: {} routes, {:.0} words per route on average{}",
            screen.kind(),
            screen.n_routes(),
            screen.mean_set_len(),
            head_trained_as
                .as_deref()
                .map(|how| format!("; {how}"))
                .unwrap_or_default()
        );
    }
    let input: Box<dyn BufRead> = match &a.input {
        Some(p) => Box::new(std::io::BufReader::new(
            std::fs::File::open(p).with_context(|| format!("opening {}", p.display()))?,
        )),
        None => Box::new(std::io::stdin().lock()),
    };
    let input_name = a
        .input
        .as_ref()
        .map_or("stdin".to_string(), |p| p.display().to_string());
    // A file is written beside its name and renamed when complete; a device, pipe or link
    // (`--output /dev/null`) is written in place.
    let tmp = a
        .output
        .as_ref()
        .filter(|p| !fastsoftmax_infer::files::is_special(p))
        .map(|p| p.with_extension("partial"));
    let mut out: Box<dyn Write> = match tmp.as_ref().or(a.output.as_ref()) {
        Some(p) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let mut profile = Profile::default();
    let (mut lines, mut source_words, mut target_words) = (0usize, 0usize, 0usize);
    let mut seconds = 0.0f64;
    // A person typing at a terminal wants each line back as soon as it is entered.
    let batch = if a.input.is_none() && std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        1
    } else {
        a.batch as usize
    };
    let mut pending: Vec<String> = Vec::with_capacity(batch);
    let mut reader = input.split(b'\n');
    // A line that cannot be read ends the input: the lines before it are still translated.
    let mut failure: Option<anyhow::Error> = None;
    loop {
        let mut next = reader.next();
        if let Some(bytes) = &next {
            let line = match bytes {
                Err(e) => Err(anyhow::anyhow!("reading {input_name}: {e}")),
                Ok(b) => std::str::from_utf8(b).map_err(|e| anyhow::anyhow!(
                    "line {} of {input_name} is not UTF-8 text ({e}); the lines before it were translated — convert the file to UTF-8 (e.g. iconv -t UTF-8)",
                    lines + pending.len() + 1
                )),
            };
            match line {
                Ok(l) => pending.push(l.trim_end_matches('\r').to_string()),
                Err(e) => {
                    failure = Some(e);
                    next = None;
                }
            }
        }
        if pending.len() == batch || (next.is_none() && !pending.is_empty()) {
            let sources: Vec<_> = pending
                .iter()
                .map(|l| engine.source(l, opts.max_source_tokens))
                .collect();
            for (i, s) in sources.iter().enumerate() {
                if s.truncated > 0 {
                    eprintln!(
                        "warning: line {} has {} tokens; translating its first {} (raise --max-source-tokens to keep more)",
                        lines + i + 1,
                        s.tokens.len() + s.truncated,
                        opts.max_source_tokens
                    );
                }
                source_words += s.tokens.len();
            }
            let started = Instant::now();
            let result = engine.search(&sources, &opts, &mut profile)?;
            seconds += started.elapsed().as_secs_f64();
            for (i, nbest) in result.iter().enumerate() {
                target_words += nbest[0].tokens.len();
                if a.json {
                    let obj = serde_json::json!({
                        "line": lines + i + 1,
                        "source": pending[i],
                        "translations": nbest.iter().map(|t| serde_json::json!({
                            "text": t.text, "score": t.score, "log_prob": t.log_prob, "tokens": t.tokens, "ids": t.ids,
                        })).collect::<Vec<_>>(),
                    });
                    writeln!(out, "{obj}")?;
                } else {
                    writeln!(out, "{}", nbest[0].text)?;
                    for (j, t) in nbest.iter().enumerate().skip(1) {
                        writeln!(out, "{j} ||| {} ||| {:.4}", t.text, t.score)?;
                    }
                }
            }
            out.flush()?;
            lines += pending.len();
            pending.clear();
        }
        if next.is_none() {
            break;
        }
    }
    drop(out);
    if let Some(e) = failure {
        return Err(e);
    }
    if let (Some(tmp), Some(dest)) = (&tmp, &a.output) {
        std::fs::rename(tmp, dest).with_context(|| format!("writing {}", dest.display()))?;
    }
    let flops = 2.0 * profile.output_logits as f64 * engine.output_width() as f64;
    let kernels = fastsoftmax_infer::kernels::kernel_paths();
    let (precision_name, path) = match engine.rnn().map(|e| e.precision()) {
        Some(Precision::Int8) => ("int8", kernels.int8),
        Some(Precision::Int16) => ("int16", kernels.int16),
        _ => ("f32", kernels.f32),
    };
    let stats = Stats {
        lines,
        source_words,
        target_words,
        seconds,
        words_per_s: target_words as f64 / seconds.max(1e-9),
        beam: a.beam,
        batch: a.batch,
        output_gflops: flops / profile.output.max(1e-12) / 1e9,
        vmap_scope: vmap_used.as_ref().map(|_| scope),
        vmap: vmap_used,
        head: a.head.clone(),
        head_trained_as,
        logits_per_row: profile.output_logits as f64 / profile.output_rows.max(1) as f64,
        profile,
        kernels,
        precision: precision_name,
    };
    // The record first: a summary to a closed stderr must not lose it.
    if let Some(path) = &a.stats {
        fastsoftmax_infer::files::write_atomic(path, &serde_json::to_vec_pretty(&stats)?)?;
    }
    let p = &stats.profile;
    let pct = |x: f64| 100.0 * x / p.total().max(1e-12);
    if let Engine::Transformer(_) = engine.engine {
        eprintln!(
            "translated {lines} lines ({target_words} words) in {seconds:.2} s: {:.0} words/s · beam {} · batch {} · 1 thread · Transformer · {path} kernels",
            stats.words_per_s, a.beam, a.batch
        );
    } else {
        eprintln!(
        "translated {lines} lines ({target_words} words) in {seconds:.2} s: {:.0} words/s · beam {} · batch {} · 1 thread · {precision_name} on {path} kernels{}\n\
         time: encoder {:.0}% · decoder RNN {:.0}% · attention {:.0}% · output layer + softmax {:.0}% · beam search {:.0}%\n\
         output layer: {} rows × {:.0} words at {:.0} GFLOP/s, softmax included",
        stats.words_per_s,
        a.beam,
        a.batch,
        stats.vmap.as_ref().map_or(String::new(), |m| format!(" · vocabulary map {m}")),
        pct(p.encoder),
        pct(p.decoder_rnn),
        pct(p.attention),
        pct(p.output),
        pct(p.beam),
        p.output_rows,
        stats.logits_per_row,
        stats.output_gflops
    );
    }
    Ok(())
}
