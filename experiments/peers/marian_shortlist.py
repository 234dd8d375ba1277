"""Writes Marian's lexical shortlist table (`lex.s2t`, the text format Marian's `--shortlist`
reads: one `target source p(target|source)` line per linked pair, as `extract_lex` writes it) from
our aligner's links over the training split, so Marian's shortlist and our vocabulary map rest on
the same word alignment.

    fastsoftmax build-vmap --data data/bible --out map.txt --links-out train.links --eval none
    python experiments/peers/marian_shortlist.py --src runs/marian/train.en \
        --tgt runs/marian/train.de --links train.links --out runs/marian/lex.s2t

p(t|s) = links(s, t) / links(s): the maximum-likelihood lexical translation table of the
symmetrised alignment (unaligned words are left out: Marian adds its `first` most frequent target
words to every shortlist anyway).
"""
import argparse
from collections import Counter


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True, help="tokenized source side of the training split")
    ap.add_argument("--tgt", required=True, help="tokenized target side, line by line")
    ap.add_argument("--links", required=True, help="Pharaoh alignment (i-j per line)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    pairs, per_source = Counter(), Counter()
    with open(a.src, encoding="utf-8") as fs, open(a.tgt, encoding="utf-8") as ft, open(a.links) as fl:
        for n, (s, t, l) in enumerate(zip(fs, ft, fl), 1):
            s, t = s.split(), t.split()
            for link in l.split():
                i, j = map(int, link.split("-"))
                if i >= len(s) or j >= len(t):
                    raise SystemExit(f"{a.links}:{n}: link {link} is outside the sentence pair (other tokenization?)")
                pairs[(s[i], t[j])] += 1
                per_source[s[i]] += 1
    with open(a.out, "w", encoding="utf-8") as out:
        for (s, t), c in sorted(pairs.items()):
            out.write(f"{t} {s} {c / per_source[s]:.6f}\n")
    print(f"{a.out}: {len(pairs)} pairs over {len(per_source)} source words")


if __name__ == "__main__":
    main()
