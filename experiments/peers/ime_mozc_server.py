"""The Mozc server (Debian `mozc-server` 2.28, driven through `mozc_emacs_helper` from
`emacs-mozc-bin`, which speaks S-expressions on stdin/stdout) on the IME evaluation set: the whole
reading of each sentence is put into the composition at once (one key event whose key_string is
the reading) and converted with one `space`. Mozc splits the sentence into segments with a
candidate list each (`all-candidate-words` of the focused segment; `right` moves the focus) and
has no sentence-level n-best, so: top-1 = the converted preedit (all segments' first candidates)
equals the gold display string; top-10 = the gold is among up to 10 distinct sentences formed by
varying one segment at a time, rank by rank (the 1-best, then segment 1's 2nd candidate, segment
2's 2nd candidate, …, then the 3rd candidates, …), the others keeping their first candidate.
Times the `space` (the conversion) only, after a warm-up: a round trip helper → server → helper,
so it includes the IPC and the S-expression printing. Nothing is committed (two `escape`s
cancel), so nothing is learned between sentences.

mozc_server refuses to run as root: run as root, the helper is started as USER (`--user`,
mozcpeer) with a fresh profile made by the setup script (the helper starts mozc_server as that
user; it stays up afterwards, and rerunning the setup script stops it):

    sh experiments/peers/ime_mozc_server_setup.sh        # apt-get install + useradd mozcpeer
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \\
        python3 experiments/peers/ime_mozc_server.py --eval data/ja/eval.tsv [--limit N] [--json OUT]
        [--errors runs/ime/mozc-server.errors.tsv]  # the wrong 1-best conversions, as `ime eval` writes them
"""
import os
import pwd
import re
import statistics
import subprocess
import sys
import time

from ime_common import dpkg_version, emit, parse_args, vary_segments

TOKEN = re.compile(r'\(|\)|"(?:\\.|[^"\\])*"|[^\s()"]+')
ESCAPES = {"n": "\n", "t": "\t", "s": " ", "e": "\x1b", "a": "\x07", "b": "\b", "f": "\f",
           "r": "\r", "v": "\v", "d": "\x7f"}


def parse_sexpr(text):
    """The helper's S-expression: lists → Python lists, strings → str, atoms → str (``.`` kept)."""
    stack = [[]]
    for tok in TOKEN.findall(text):
        if tok == "(":
            stack.append([])
        elif tok == ")":
            done = stack.pop()
            stack[-1].append(done)
        elif tok.startswith('"'):
            stack[-1].append(re.sub(r"\\(.)", lambda m: ESCAPES.get(m.group(1), m.group(1)),
                                    tok[1:-1]))
        else:
            stack[-1].append(tok)
    return stack[0][0]


def field(msg, name, default=None):
    """Value of `(name . value)` or the list of `(name v1 v2 ...)` in an alist."""
    for f in msg if isinstance(msg, list) else []:
        if isinstance(f, list) and f and f[0] == name:
            return f[2] if len(f) == 3 and f[1] == "." else f[1:]
    return default


class MozcHelper:
    def __init__(self, user):
        cmd = ["mozc_emacs_helper", "--suppress_stderr"]
        if os.geteuid() == 0:
            home = pwd.getpwnam(user).pw_dir
            cmd = ["runuser", "-u", user, "--", "env", "-i", f"HOME={home}", f"USER={user}",
                   "PATH=/usr/bin:/bin"] + cmd
        else:  # already the non-root user
            cmd = ["env", "-u", "OPENBLAS_CORETYPE", "-u", "OPENBLAS_L2_SIZE"] + cmd
        self.user = user
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, encoding="utf-8")
        greeting = parse_sexpr(self.p.stdout.readline())
        self.version = field(greeting, "version", "?")
        self.event = 0
        self.session = field(self.call("CreateSession"), "emacs-session-id")

    def call(self, *args):
        self.event += 1
        self.p.stdin.write(f"({self.event} {' '.join(args)})\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        resp = parse_sexpr(line) if line else None
        if resp is None or field(resp, "error") is not None:
            sys.exit(f"mozc_emacs_helper: {line!r}")
        return resp

    def key(self, *keys):
        return field(self.call("SendKey", str(self.session), *keys), "output", [])

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def quote(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def segment_values(out):
    return [field(s, "value", "") for s in field(field(out, "preedit", []), "segment", [])]


def focused_candidates(out, k):
    cands = field(field(out, "all-candidate-words", []), "candidates", [])
    return [field(c, "value", "") for c in cands][:k]


def convert(mozc, reading, k):
    """(1-best segments, [candidates of each segment], ms of the conversion key)."""
    mozc.key(quote(reading))  # the whole reading as one key event (key_string)
    t = time.perf_counter()
    out = mozc.key("space")
    ms = (time.perf_counter() - t) * 1e3
    first = segment_values(out)
    cands = [focused_candidates(out, k) or [first[0]]] if first else []
    for _ in first[1:]:
        cands.append(focused_candidates(mozc.key("right"), k))
    for c, f in zip(cands, first):
        if not c or c[0] != f:  # keep the preedit's value first
            c.insert(0, f)
    for _ in range(4):  # cancel: back to the composition, then clear it
        if not field(mozc.key("escape"), "preedit"):
            break
    return first, cands, ms


def main():
    def extra(ap):
        ap.add_argument("--user", default="mozcpeer", help="non-root user to run the helper as")
        ap.add_argument("--errors", help="write the wrong 1-best conversions here "
                        "(reading, gold, ours; as `ime eval --errors`)")

    a, pairs = parse_args(extra)
    mozc = MozcHelper(a.user)
    for reading, _ in pairs[:3]:  # warm-up (also starts the server)
        convert(mozc, reading, 10)
    top1 = top10 = top10_first = 0
    # `ime segments`' measure: a wrong 1-best fixed by one segment's first page (9
    # candidates), the others as converted; keys: → per segment passed, then Space (the 2nd
    # candidate) or Space and a digit.
    fixed = keys = 0
    ms = []
    returned = []
    wrong = []
    for reading, gold in pairs:
        first, cands, t = convert(mozc, reading, 10)
        ms.append(t)
        best = vary_segments(first, cands, 10)
        returned.append(len(best))
        top1 += best[0] == gold
        top10 += gold in best
        if best[0] != gold:
            wrong.append(f"{reading}\t{gold}\t{best[0] or reading}\n")
            costs = [i + (1 if r == 1 else 2)
                     for i, c in enumerate(cands) for r, alt in enumerate(c[:9])
                     if "".join(first[:i] + [alt] + first[i + 1:]) == gold]
            if costs:
                fixed += 1
                keys += min(costs)
        # aside: Mozc's own list, i.e. the first segment's candidates + the rest's 1-best
        top10_first += gold in ["".join([c] + first[1:]) for c in cands[0][:10]] if first else 0
    mozc.close()
    n = len(pairs)
    report = {
        "peer": "mozc_server",
        "version": f"Mozc {mozc.version} (Debian mozc-server {dpkg_version('mozc-server')})",
        "sentences": n,
        "top1": top1 / n,
        "top10": top10 / n,
        "ms_per_sentence_median": statistics.median(ms),
        "mean_candidates_returned": sum(returned) / n,
        "wrong": n - top1,
        "fixed_in_one_segment": fixed,
        "fixed_share_of_wrong": fixed / max(n - top1, 1),
        "keys_per_fix": keys / max(fixed, 1),
        "notes": ("mozc_emacs_helper, default config, empty user history, nothing committed; "
                  "Mozc has per-segment candidate lists only: top-10 = up to 10 distinct "
                  "sentences, the 1-best, then one segment replaced by its 2nd candidate "
                  "(segments left to right), then by its 3rd, ...; Mozc's segmentation is kept. "
                  "With the first segment's list alone (what Mozc shows after one space), "
                  f"top-10 would be {top10_first / n:.4f}. The time is one 'space' round trip "
                  "(helper <-> server IPC included)"),
    }
    emit(report, a.json)
    if a.errors:
        with open(a.errors, "w", encoding="utf-8") as f:
            f.writelines(wrong)


if __name__ == "__main__":
    main()
