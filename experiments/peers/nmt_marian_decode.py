"""Decodes with a Marian model trained by nmt_marian.sh: 1 CPU thread, beam 1 or 5, batches of
16 sentences (Marian sorts 100 batches by source length, its fastest form), the same length normalisation as ours (`--normalize 1`); times the translation only
(the model is loaded and warmed up first). Input is raw text: it is tokenized and the output
detokenized with `fastsoftmax text`, like ours; a source in subwords (Japanese) is cut by the
translator whose pieces Marian was trained on (`--src-tokenizer DIR`, `text tokenize --model`).

    python experiments/peers/nmt_marian_decode.py --dir runs/marian --input data/bible/test.en \
        --beam 5 --output hyp.de --stats stats.json
    python experiments/peers/nmt_marian_decode.py --dir runs/marian-tanaka --src ja --tgt en \
        --src-tokenizer runs/nmt35/tanaka-teacher --input data/tanaka/test.ja --output hyp.en
"""
import argparse
import json
import subprocess
import sys
import time

from pymarian import Translator


def run_text(binary, mode, lines, model=None):
    args = [binary, "text", mode] + (["--model", model] if model else [])
    p = subprocess.run(args, input="\n".join(lines) + "\n", capture_output=True, text=True, check=True)
    return p.stdout.split("\n")[: len(lines)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--model", default="model.npz")
    ap.add_argument("--input", required=True)
    ap.add_argument("--src", default="en", help="source language: the name of vocab.SRC.yml")
    ap.add_argument("--tgt", default="de", help="target language: the name of vocab.TGT.yml")
    ap.add_argument("--src-tokenizer", help="a translator folder whose source tokenizer cuts the input")
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--output", required=True)
    ap.add_argument("--stats")
    ap.add_argument("--extra", default="", help="more Marian options, e.g. '--gemm-type intgemm8'")
    ap.add_argument("--binary", default="target/release/fastsoftmax")
    a = ap.parse_args()
    lines = open(a.input, encoding="utf-8").read().splitlines()
    tokenized = run_text(a.binary, "tokenize", lines, a.src_tokenizer)
    cli = (
        f"--models {a.dir}/{a.model} --vocabs {a.dir}/vocab.{a.src}.yml {a.dir}/vocab.{a.tgt}.yml "
        f"--beam-size {a.beam} --normalize 1 --mini-batch {a.batch} --maxi-batch 100 --maxi-batch-sort src --cpu-threads 1 "
        f"--max-length-factor 2 --quiet --quiet-translation {a.extra}"
    )
    t = Translator(cli)
    t.translate(tokenized[:16])  # warm-up
    started = time.perf_counter()
    out = t.translate(tokenized)
    seconds = time.perf_counter() - started
    words = sum(len(o.split()) for o in out)
    text = run_text(a.binary, "detokenize", out)
    open(a.output, "w", encoding="utf-8").write("\n".join(text) + "\n")
    stats = {"peer": "marian", "options": cli, "lines": len(lines), "target_words": words,
             "seconds": seconds, "words_per_s": words / seconds, "beam": a.beam, "batch": a.batch}
    if a.stats:
        json.dump(stats, open(a.stats, "w"), indent=2)
    print(json.dumps(stats), file=sys.stderr)


if __name__ == "__main__":
    main()
