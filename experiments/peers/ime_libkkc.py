"""libkkc (`kkc decoder`, Debian `libkkc-utils` + `libkkc-data`, its default trigram model) on
the IME evaluation set: the whole reading of each sentence converted at once; top-1 = the
decoder's 1-best conversion equals the gold display string, top-10 = the gold is among the (up to)
10 distinct conversions of `kkc decoder`'s n-best mode (input line `READING 10`).

One persistent `kkc decoder` process (under `stdbuf -oL`, so its answers are not block-buffered
in the pipe) reads one sentence at a time; the script reads up to its next `>> ` prompt. libkkc's
n-best is an unpruned A* search that blows up on some sentences (minutes, ~100 MB/s of memory),
so each n-best request has a timeout (`--timeout`, 5 s): on expiry the process is killed and
restarted and that sentence's candidates are its 1-best alone (counted in "notes"). Times the
n-best conversions only, after a warm-up (a timed-out sentence counts as the timeout); the
1-best conversion's median is in "notes". Run without OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE.

    apt-get install -y libkkc-utils libkkc-data
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \\
        python3 experiments/peers/ime_libkkc.py --eval data/ja/eval.tsv [--limit N] [--json OUT]
"""
import os
import re
import select
import statistics
import subprocess
import sys
import time

from ime_common import dpkg_version, emit, parse_args

PROMPT = b">> "


class Kkc:
    def __init__(self):
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
        self.start()

    def start(self):
        self.p = subprocess.Popen(["stdbuf", "-oL", "kkc", "decoder"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=self.env)
        if self.read(60) is None:
            sys.exit("kkc decoder did not start")

    def stop(self):
        self.p.kill()
        self.p.wait()

    def read(self, timeout):
        """Output up to the next prompt, or None on timeout / EOF."""
        fd, buf, end = self.p.stdout.fileno(), b"", time.monotonic() + timeout
        while not buf.endswith(PROMPT):
            left = end - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            buf += chunk
        return buf[: -len(PROMPT)].decode("utf-8")

    def convert(self, reading, nbest, timeout):
        """Distinct conversion strings, best first; None on timeout (the process is restarted)."""
        self.p.stdin.write(f"{reading} {nbest}\n".encode("utf-8"))
        self.p.stdin.flush()
        out = self.read(timeout)
        if out is None:
            self.stop()
            self.start()
            return None
        best = []
        for line in out.splitlines():
            m = re.match(r"\d+: (.*)", line)
            if m:  # "<output/input><output/input>..."
                s = "".join(seg.rsplit("/", 1)[0] for seg in re.findall(r"<(.*?/[^/>]*)>", m.group(1)))
                if s not in best:
                    best.append(s)
        return best


def main():
    def options(ap):
        ap.add_argument("--nbest", type=int, default=10)
        ap.add_argument("--timeout", type=float, default=5.0, help="seconds per n-best request")

    a, pairs = parse_args(options)
    kkc = Kkc()
    kkc.convert(pairs[0][0], 1, 60)  # warm-up
    kkc.convert(pairs[0][0], a.nbest, 60)
    top1 = top10 = timeouts = 0
    ms, ms1 = [], []
    returned = []
    try:
        for reading, gold in pairs:
            t = time.perf_counter()
            one = kkc.convert(reading, 1, 60)
            ms1.append((time.perf_counter() - t) * 1e3)
            t = time.perf_counter()
            best = kkc.convert(reading, a.nbest, a.timeout)
            ms.append((time.perf_counter() - t) * 1e3)
            if best is None:
                timeouts += 1
                best = one
            best = best[: a.nbest]
            returned.append(len(best))
            top1 += bool(one) and one[0] == gold
            top10 += gold in best
    finally:
        kkc.stop()
    n = len(pairs)
    report = {
        "peer": "libkkc",
        "version": f"libkkc {dpkg_version('libkkc2')}, libkkc-data {dpkg_version('libkkc-data')}",
        "sentences": n,
        "top1": top1 / n,
        "top10": top10 / n,
        "ms_per_sentence_median": statistics.median(ms),
        "mean_candidates_returned": sum(returned) / n,
        "notes": (f"kkc decoder, default model (sorted3 trigram); top-1 = 1-best decode "
                  f"(median {statistics.median(ms1):.2f} ms/sentence); top-10 = n-best mode "
                  f"'READING {a.nbest}' (libkkc already returns distinct strings), whose time is "
                  f"ms_per_sentence_median; its unpruned A* search exceeded the {a.timeout:g} s "
                  f"timeout on {timeouts} of {n} sentences, where the 1-best alone was used"),
    }
    emit(report, a.json)


if __name__ == "__main__":
    main()
