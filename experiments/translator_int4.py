"""What 4-bit rows would cost a shipped translator (issue 36 item 11): copies an int8 translator
folder with every int8 matrix rounded again to 4-bit levels, `round(x · 7 / max|row|)` in
[−7, 7], stored as int8 with the new row scales (exactly what 4-bit storage widened on load
would serve), and the manifest's digest updated. The engine then decodes it unchanged:

    runs/venv-py/bin/python experiments/translator_int4.py assets/models/bible-en-de-tiny runs/int4/bible all
    ./target/release/fastsoftmax translate --model runs/int4/bible --input data/bible/test.en \\
        --output runs/int4/bible.de --beam 5 --batch 16
    ./target/release/fastsoftmax bleu --ref data/bible/test.de --hyp runs/int4/bible.de

WHICH: `all` (every int8 matrix) or `emb` (the embeddings and the output layer only).
Measured 2026-11-29 (test BLEU at beam 5, batch 16): Bible 16.27 as shipped, 16.16 all, 15.99
emb; Tanaka (ja-en-tiny) 29.46, 29.03 all, 29.31 emb. So `quantize` keeps translators at int8.
"""
import hashlib, json, os, shutil, struct, sys

import numpy as np

src, dst, which = sys.argv[1], sys.argv[2], sys.argv[3]
assert which in ("all", "emb"), "WHICH is all or emb"
shutil.rmtree(dst, ignore_errors=True)
shutil.copytree(src, dst)
raw = open(os.path.join(src, "model.safetensors"), "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8 : 8 + n])
meta = header.pop("__metadata__", None)
body = raw[8 + n :]
DTYPES = {"F32": np.float32, "I8": np.int8}


def tensor(name):
    v = header[name]
    a, b = v["data_offsets"]
    return np.frombuffer(body[a:b], dtype=DTYPES[v["dtype"]]).reshape(v["shape"])


tensors = {name: tensor(name) for name in header}
for name in list(tensors):
    t = tensors[name]
    if t.dtype != np.int8 or not (which == "all" or "embedding" in name or name == "output.weight"):
        continue
    x = t.astype(np.float32) * tensors[name + ".scale"][:, None]
    scale = np.abs(x).max(axis=1) / 7.0
    scale[scale == 0] = 1.0
    tensors[name] = np.clip(np.round(x / scale[:, None]), -7, 7).astype(np.int8)
    tensors[name + ".scale"] = scale.astype(np.float32)

out_header = {} if meta is None else {"__metadata__": meta}
blobs, offset = [], 0
for name in header:
    b = np.ascontiguousarray(tensors[name]).tobytes()
    dtype = "F32" if tensors[name].dtype == np.float32 else "I8"
    out_header[name] = {"dtype": dtype, "shape": list(tensors[name].shape), "data_offsets": [offset, offset + len(b)]}
    offset += len(b)
    blobs.append(b)
h = json.dumps(out_header).encode()
h += b" " * ((8 - len(h) % 8) % 8)
weights = struct.pack("<Q", len(h)) + h + b"".join(blobs)
open(os.path.join(dst, "model.safetensors"), "wb").write(weights)
manifest = json.load(open(os.path.join(src, "manifest.json")))
manifest["sha256"]["model.safetensors"] = hashlib.sha256(weights).hexdigest()
json.dump(manifest, open(os.path.join(dst, "manifest.json"), "w"), ensure_ascii=False, indent=2)
