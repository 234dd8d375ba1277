"""Anthy (Debian `libanthy1` + `anthy-common`, called through ctypes) on the IME evaluation set:
the whole reading of each sentence converted at once (`anthy_set_string`, UTF-8). Anthy splits
the sentence into segments (文節) with a candidate list each and no sentence-level n-best, so:
top-1 = the first candidate of every segment joined equals the gold display string; top-10 = the
gold is among up to 10 distinct sentences formed by varying one segment at a time, rank by rank
(the 1-best, then segment 1's 2nd candidate, segment 2's 2nd candidate, …, then the 3rd
candidates, …), the others keeping their first candidate. Times the conversion plus the reading of
those candidates only, after a warm-up, one thread. Runs with a fresh empty HOME (no learned
history) and commits nothing, so nothing is learned between sentences.

    apt-get install -y libanthy1 anthy-common
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \\
        python3 experiments/peers/ime_anthy.py --eval data/ja/eval.tsv [--limit N] [--json OUT]
"""
import ctypes
import os
import statistics
import sys
import tempfile
import time

from ime_common import dpkg_version, emit, parse_args, vary_segments

UTF8 = 2  # ANTHY_UTF8_ENCODING
PUNCT = set("、。・「」『』，．“”〔〕［］【】（）〜…！？：＝＆／＜＞−")


class ConvStat(ctypes.Structure):
    _fields_ = [("nr_segment", ctypes.c_int)]


class SegStat(ctypes.Structure):
    _fields_ = [("nr_candidate", ctypes.c_int), ("seg_len", ctypes.c_int)]


class Anthy:
    def __init__(self):
        os.environ["HOME"] = tempfile.mkdtemp(prefix="anthy-home-")  # no learned history
        self.lib = lib = ctypes.CDLL("libanthy.so.1")
        lib.anthy_create_context.restype = ctypes.c_void_p
        lib.anthy_get_version_string.restype = ctypes.c_char_p
        for f in ("anthy_context_set_encoding", "anthy_set_string", "anthy_get_stat",
                  "anthy_get_segment_stat", "anthy_get_segment", "anthy_release_context"):
            getattr(lib, f).argtypes = [ctypes.c_void_p] + {
                "anthy_context_set_encoding": [ctypes.c_int],
                "anthy_set_string": [ctypes.c_char_p],
                "anthy_get_stat": [ctypes.POINTER(ConvStat)],
                "anthy_get_segment_stat": [ctypes.c_int, ctypes.POINTER(SegStat)],
                "anthy_get_segment": [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int],
                "anthy_release_context": [],
            }[f]
        if lib.anthy_init() != 0:
            sys.exit("anthy_init failed")
        self.version = lib.anthy_get_version_string().decode()
        self.ctx = lib.anthy_create_context()
        lib.anthy_context_set_encoding(self.ctx, UTF8)
        self.buf = ctypes.create_string_buffer(1 << 14)

    def segments(self, reading, k):
        """[(reading, [up to k candidates, best first]) for each segment]."""
        lib, ctx, buf = self.lib, self.ctx, self.buf
        if lib.anthy_set_string(ctx, reading.encode("utf-8")) != 0:
            return []
        cs = ConvStat()
        lib.anthy_get_stat(ctx, ctypes.byref(cs))
        out = []
        for i in range(cs.nr_segment):
            ss = SegStat()
            lib.anthy_get_segment_stat(ctx, i, ctypes.byref(ss))
            cands = []
            for j in range(-1, min(ss.nr_candidate, k)):  # -1 = the unconverted reading
                lib.anthy_get_segment(ctx, i, j, buf, len(buf))
                cands.append(buf.value.decode("utf-8"))
            out.append((cands[0], cands[1:]))
        return out


def sentences(segs):
    """anthy's `(reading, candidates)` segments as up to 10 sentences (a segment without
    candidates stays as typed)."""
    first = [c[0] if c else r for r, c in segs]
    return vary_segments(first, [c for _, c in segs], 10)


def main():
    a, pairs = parse_args()
    anthy = Anthy()
    sentences(anthy.segments(pairs[0][0], 10))  # warm-up
    top1 = top10 = top1_punct = 0
    ms = []
    returned = []
    for reading, gold in pairs:
        t = time.perf_counter()
        segs = anthy.segments(reading, 10)
        best = sentences(segs)
        ms.append((time.perf_counter() - t) * 1e3)
        returned.append(len(best))
        top1 += best[0] == gold
        top10 += gold in best
        # aside: the 1-best with punctuation-only segments left as typed (anthy turns 「 into 『)
        top1_punct += "".join(r if set(r) <= PUNCT else (c[0] if c else r) for r, c in segs) == gold
    n = len(pairs)
    report = {
        "peer": "anthy",
        "version": f"anthy {anthy.version} (Debian libanthy1 {dpkg_version('libanthy1')})",
        "sentences": n,
        "top1": top1 / n,
        "top10": top10 / n,
        "ms_per_sentence_median": statistics.median(ms),
        "mean_candidates_returned": sum(returned) / n,
        "notes": ("anthy has per-segment candidates only; top-10 = up to 10 distinct sentences: "
                  "the 1-best, then one segment replaced by its 2nd candidate (segments left to "
                  "right), then by its 3rd, ...; anthy's own segmentation is kept (no resizing). "
                  "Anthy's first candidate for 「」 is 『』; with punctuation-only segments left "
                  f"as typed top-1 would be {top1_punct / n:.4f}"),
    }
    emit(report, a.json)


if __name__ == "__main__":
    main()
