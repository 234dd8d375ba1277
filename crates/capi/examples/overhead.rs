//! The work `experiments/bindings_overhead.py` times through each path, here through the Rust
//! API (`c/overhead.c` does it through the C ABI, the script through Python): top-5 of PTB
//! contexts one at a time and 64 at a time, and John (the Bible's test split) at beam 5 in
//! batches of 16. Prints one JSON line of medians over the rounds.
//!
//!   cargo run --release -p fastsoftmax-capi --example overhead -- \
//!       PTB_MODEL PTB_TEXT WORDS BIBLE_MODEL JOHN ROUNDS

use std::time::Instant;

use fastsoftmax_infer::{NextWords, TopK};
use fastsoftmax_translate::{SearchOptions, ServeOptions, Served};

const K: usize = 5;
const BATCH: usize = 64;
const LINES: usize = 16;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [ptb, text, words, bible, john, rounds] = &args[..] else {
        return Err("usage: overhead PTB_MODEL PTB_TEXT WORDS BIBLE_MODEL JOHN ROUNDS".into());
    };
    let (words, rounds): (usize, usize) = (words.parse()?, rounds.parse()?);
    // The contexts after each word of the first WORDS words, each line from a sentence start.
    let mut next = NextWords::open(ptb.as_ref(), "full")?;
    let mut hs = Vec::new();
    let mut read = 0;
    'text: for line in std::fs::read_to_string(text)?.lines() {
        next.reset()?;
        for w in line.split_whitespace() {
            next.feed(w)?;
            hs.extend_from_slice(next.context().h);
            read += 1;
            if read == words {
                break 'text;
            }
        }
    }
    let d = next.context().h.len();
    let n = hs.len() / d;
    let mut out = vec![TopK::new(K); BATCH];
    let mut checksum = 0u64;
    let (mut one, mut many) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t = Instant::now();
        for h in hs.chunks(d) {
            next.top_k_batch(h, K, &mut out[..1])?;
            checksum += out[0].as_slice().iter().map(|s| s.id as u64).sum::<u64>();
        }
        one.push(t.elapsed().as_secs_f64() * 1e6 / n as f64);
        let t = Instant::now();
        for chunk in hs.chunks(BATCH * d) {
            let m = chunk.len() / d;
            next.top_k_batch(chunk, K, &mut out[..m])?;
            checksum += out[..m]
                .iter()
                .flat_map(|o| o.as_slice())
                .map(|s| s.id as u64)
                .sum::<u64>();
        }
        many.push(t.elapsed().as_secs_f64() * 1e6 / n as f64);
    }
    let served = Served::open(bible.as_ref(), &ServeOptions::default())?;
    let john = std::fs::read_to_string(john)?;
    let lines: Vec<&str> = john.lines().collect();
    let opts = SearchOptions::default();
    let mut seconds = Vec::new();
    let mut chars = 0usize;
    for _ in 0..rounds {
        let t = Instant::now();
        for chunk in lines.chunks(LINES) {
            for nbest in served.translate(chunk, &opts)? {
                chars += nbest[0].text.len();
            }
        }
        seconds.push(t.elapsed().as_secs_f64());
    }
    println!(
        "{{\"path\": \"rust\", \"contexts\": {n}, \"batch1_us\": {:.3}, \"batch64_us\": {:.3}, \"john_s\": {:.4}, \"checksum\": {}, \"john_chars\": {}}}",
        median(one),
        median(many),
        median(seconds),
        checksum / rounds as u64,
        chars / rounds
    );
    Ok(())
}
