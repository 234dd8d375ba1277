#!/usr/bin/env python3
"""How many of the source's numbers a translation keeps in digits.

A number of the (NFKC-normalised) source counts when the reference writes it in digits (commas
aside); it is kept when the hypothesis does too. Prints the counts for all such numbers and for
those of three or more digits, per hypothesis file.

    python3 experiments/nmt_numbers_kept.py data/tanaka/test.ja data/tanaka/test.en HYP.en...
"""
import re
import sys
import unicodedata


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    src, ref, *hyps = sys.argv[1:]
    ja = [unicodedata.normalize("NFKC", l.strip()) for l in open(src, encoding="utf-8")]
    en = [l.strip().replace(",", "") for l in open(ref, encoding="utf-8")]
    for path in hyps:
        hy = [l.strip().replace(",", "") for l in open(path, encoding="utf-8")]
        if len(hy) != len(ja) or len(en) != len(ja):
            sys.exit(f"{path}: {len(hy)} lines, {src}: {len(ja)}, {ref}: {len(en)}; they must match")
        total = kept = total3 = kept3 = 0
        for j, e, h in zip(ja, en, hy):
            for m in re.finditer(r"\d[\d,.\-]*\d|\d", j):
                n = m.group().replace(",", "")
                if n not in e:
                    continue
                hit = n in h
                total, kept = total + 1, kept + hit
                if sum(c.isdigit() for c in n) >= 3:
                    total3, kept3 = total3 + 1, kept3 + hit
        print(f"{path}: {kept} of {total} numbers kept; of 3+ digits: {kept3} of {total3}")


if __name__ == "__main__":
    main()
