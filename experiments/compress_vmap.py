"""Moves a translator folder's shipped vocabulary map from v3's plain `vocab.map` to v4's
`vocab.map.gz` (gzip level 9, mtime 0), the digest in its manifest, changing nothing else: what
`NmtWeights::save` now writes, for a folder that cannot be re-saved from f32 without rounding
its int8 weights again. Run once on each shipped translator (issue 36 item 11, 2026-11-29):

    python3 experiments/compress_vmap.py assets/models/bible-en-de-tiny
"""
import gzip, hashlib, json, os, sys
d = sys.argv[1]
text = open(os.path.join(d, "vocab.map"), "rb").read()
m = json.load(open(os.path.join(d, "manifest.json")))
assert m["sha256"]["vocab.map"] == hashlib.sha256(text).hexdigest()
gz = gzip.compress(text, compresslevel=9, mtime=0)
open(os.path.join(d, "vocab.map.gz"), "wb").write(gz)
del m["sha256"]["vocab.map"]
m["sha256"]["vocab.map.gz"] = hashlib.sha256(gz).hexdigest()
m["format_version"] = 4
tmp = os.path.join(d, "manifest.json.tmp")
open(tmp, "w").write(json.dumps(m, indent=2, ensure_ascii=False))
os.replace(tmp, os.path.join(d, "manifest.json"))
os.remove(os.path.join(d, "vocab.map"))
