"""PyTorch eager peer of the translation engine: the same network loading *our exported weights*
(`manifest.json` + `model.safetensors` written by `fastsoftmax train-nmt`, f32 or int8 rows widened
as the engine widens them), the same beam search
(shrinking beam, `log p / len^alpha`, at most 2·S+10 target tokens, `<unk>` replaced by the most
attended source word), one sentence at a time with its beams as the batch, 1 thread.

    python experiments/peers/nmt_torch.py --model DIR --input data/bible/test.en \
        --beam 5 --output hyp.de --stats stats.json [--ids ids.jsonl]

A model whose folder has `src.subwords.json` (the Japanese → English students) has its source
cut into those subwords, as `fastsoftmax translate` does.

Tokenization and detokenization go through `fastsoftmax text` (the engine's own code), so both
sides read the same ids. `--ids` writes the output ids per line: with --beam 1 they must equal
the engine's (`fastsoftmax translate --json`), a second export-parity check.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import time

import numpy as np
import torch


def load_safetensors(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    base = 8 + n
    arrays = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        dtype = {"F32": "<f4", "I8": "i1", "I16": "<i2"}.get(meta["dtype"])
        if dtype is None:
            sys.exit(f"{path}: tensor {name} is {meta['dtype']}; this peer reads f32, int8 or int16 translators")
        a, b = meta["data_offsets"]
        arrays[name] = np.frombuffer(raw[base + a : base + b], dtype=dtype).reshape(meta["shape"])
    # A quantized translator (`fastsoftmax quantize`) stores each matrix as integers with f32
    # scales (`NAME.scale`: one per row for int8, one per matrix for int16), widened here as the
    # engine widens them, so the peer decodes the same weights.
    out = {}
    for name, x in arrays.items():
        if x.dtype.kind == "i":
            scale = arrays[f"{name}.scale"].reshape(-1, 1)
            x = x.astype(np.float32) * scale
        elif name.endswith(".scale") and arrays.get(name[: -len(".scale")], np.empty(0)).dtype.kind == "i":
            continue
        out[name] = torch.from_numpy(np.array(x, dtype=np.float32))
    return out


def run_text(binary, mode, lines, *args):
    p = subprocess.run(
        [binary, "text", mode, *args], input="\n".join(lines) + "\n", capture_output=True, text=True, check=True
    )
    return p.stdout.split("\n")[: len(lines)]


class Seq2Seq(torch.nn.Module):
    def __init__(self, spec, w):
        super().__init__()
        self.spec = spec
        cell, h, e, a = spec["cell"], spec["d_hidden"], spec["d_embed"], spec["d_attn"]
        rnn = torch.nn.GRU if cell == "gru" else torch.nn.LSTM
        rcell = torch.nn.GRUCell if cell == "gru" else torch.nn.LSTMCell
        self.lstm = cell == "lstm"
        self.src_emb = w["src_embedding"]
        self.tgt_emb = w["tgt_embedding"]
        self.enc = rnn(e, h // 2, num_layers=spec["enc_layers"], bidirectional=True, batch_first=True)
        for l in range(spec["enc_layers"]):
            for d, suffix in (("fwd", ""), ("bwd", "_reverse")):
                for k in ("w_ih", "w_hh", "b_ih", "b_hh"):
                    name = {"w_ih": "weight_ih", "w_hh": "weight_hh", "b_ih": "bias_ih", "b_hh": "bias_hh"}[k]
                    getattr(self.enc, f"{name}_l{l}{suffix}").data.copy_(w[f"encoder.{l}.{d}.{k}"])
        self.dec = torch.nn.ModuleList()
        for l in range(spec["dec_layers"]):
            c = rcell(e + a if l == 0 else h, h)
            c.weight_ih.data.copy_(w[f"decoder.{l}.w_ih"])
            c.weight_hh.data.copy_(w[f"decoder.{l}.w_hh"])
            c.bias_ih.data.copy_(w[f"decoder.{l}.b_ih"])
            c.bias_hh.data.copy_(w[f"decoder.{l}.b_hh"])
            self.dec.append(c)
        self.w_a = w["attn.score"]
        self.w_c = w["attn.out"]
        self.w_out = w["tgt_embedding"] if spec["tied"] else w["output.weight"]
        self.b_out = w["output.bias"]

    def encode(self, src):
        x = self.src_emb[src].unsqueeze(0)
        out, fin = self.enc(x)
        hn = fin[0] if self.lstm else fin
        L, skip = self.spec["enc_layers"], self.spec["enc_layers"] - self.spec["dec_layers"]
        hs = [torch.cat([hn[2 * l, 0], hn[2 * l + 1, 0]]) for l in range(L)][skip:]
        cs = [torch.cat([fin[1][2 * l, 0], fin[1][2 * l + 1, 0]]) for l in range(L)][skip:] if self.lstm else None
        enc = out[0]
        return enc, enc @ self.w_a.T, hs, cs

    def step(self, prev, feed, hs, cs, enc, keys):
        x = torch.cat([self.tgt_emb[prev], feed], 1)
        new_h, new_c = [], []
        for l, cell in enumerate(self.dec):
            if self.lstm:
                h, c = cell(x, (hs[l], cs[l]))
                new_c.append(c)
            else:
                h = cell(x, hs[l])
            new_h.append(h)
            x = h
        scores = x @ keys.T  # [n, S]
        alpha = torch.softmax(scores, 1)
        ctx = alpha @ enc
        feed = torch.tanh(torch.cat([ctx, x], 1) @ self.w_c.T)
        logp = torch.log_softmax(feed @ self.w_out.T + self.b_out, 1)
        return logp, feed, new_h, new_c, scores.argmax(1)


@torch.no_grad()
def beam_search(model, src, k, alpha, eos):
    enc, keys, hs, cs = model.encode(src)
    n_layers = len(hs)
    hs = [h.unsqueeze(0) for h in hs]
    cs = [c.unsqueeze(0) for c in cs] if cs is not None else None
    feed = torch.zeros(1, model.spec["d_attn"])
    hyps = [([], [], 0.0)]
    prev = torch.tensor([eos])
    finished = []
    max_len = 2 * len(src) + 10
    step = 0
    while hyps:
        logp, feed, hs, cs2, att = model.step(prev, feed, hs, cs, enc, keys)
        cs = cs2 if cs is not None else None
        top_v, top_i = logp.topk(k, 1)
        cands = []
        for r in range(len(hyps)):
            for v, i in zip(top_v[r].tolist(), top_i[r].tolist()):
                cands.append((hyps[r][2] + v, r, i))
        cands.sort(key=lambda c: (-c[0], c[1], c[2]))
        room = k - len(finished)
        last = step + 1 >= max_len
        parents, new_hyps, new_prev = [], [], []
        for lp, r, i in cands[:room]:
            ids, pos = hyps[r][0], hyps[r][1]
            if i == eos or last:
                if i != eos:
                    ids, pos = ids + [i], pos + [int(att[r])]
                finished.append((lp / (len(ids) + 1) ** alpha, ids, pos))
            else:
                parents.append(r)
                new_hyps.append((ids + [i], pos + [int(att[r])], lp))
                new_prev.append(i)
        if not parents:
            break
        idx = torch.tensor(parents)
        hs = [h[idx] for h in hs]
        cs = [c[idx] for c in cs] if cs is not None else None
        feed = feed[idx]
        hyps, prev = new_hyps, torch.tensor(new_prev)
        step += 1
    finished.sort(key=lambda f: -f[0])
    return finished[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--length-norm", type=float, default=1.0)
    ap.add_argument("--output", required=True)
    ap.add_argument("--stats")
    ap.add_argument("--ids")
    ap.add_argument("--limit", type=int, default=0, help="first N lines only")
    ap.add_argument("--binary", default="target/release/fastsoftmax")
    a = ap.parse_args()
    torch.set_num_threads(1)
    manifest = json.load(open(f"{a.model}/manifest.json"))
    spec = {k: manifest[k] for k in ("cell", "d_embed", "d_hidden", "d_attn", "enc_layers", "dec_layers", "tied")}
    model = Seq2Seq(spec, load_safetensors(f"{a.model}/model.safetensors")).eval()
    src_index = {w: i for i, w in enumerate(manifest["src_vocab"])}
    tgt_words = manifest["tgt_vocab"]
    s_unk, s_eos = src_index["<unk>"], src_index["<eos>"]
    t_eos = tgt_words.index("<eos>")
    t_unk = tgt_words.index("<unk>")
    lines = open(a.input, encoding="utf-8").read().splitlines()
    if a.limit:
        lines = lines[: a.limit]
    # A model with source subwords (Japanese) is cut by them, as `translate` does.
    subwords = ["--model", a.model] if os.path.exists(f"{a.model}/src.subwords.json") else []
    tokenized = [t.split() for t in run_text(a.binary, "tokenize", lines, *subwords)]
    # Warm-up (not timed): the first sentences once.
    for toks in tokenized[:3]:
        if toks:
            beam_search(model, torch.tensor([src_index.get(t, s_unk) for t in toks] + [s_eos]), a.beam, a.length_norm, t_eos)
    outs, all_ids, words = [], [], 0
    started = time.perf_counter()
    for toks in tokenized:
        if not toks:
            outs.append([])
            all_ids.append([])
            continue
        src = torch.tensor([src_index.get(t, s_unk) for t in toks] + [s_eos])
        _, ids, pos = beam_search(model, src, a.beam, a.length_norm, t_eos)
        out = [toks[p] if i == t_unk and p < len(toks) else tgt_words[i] for i, p in zip(ids, pos)]
        outs.append(out)
        all_ids.append(ids)
        words += len(ids)
    seconds = time.perf_counter() - started
    text = run_text(a.binary, "detokenize", [" ".join(o) for o in outs])
    open(a.output, "w", encoding="utf-8").write("\n".join(text) + "\n")
    if a.ids:
        with open(a.ids, "w") as f:
            for ids in all_ids:
                f.write(json.dumps(ids) + "\n")
    stats = {
        "peer": "pytorch-eager",
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "lines": len(lines),
        "target_words": words,
        "seconds": seconds,
        "words_per_s": words / seconds,
        "beam": a.beam,
        "batch": 1,
    }
    if a.stats:
        json.dump(stats, open(a.stats, "w"), indent=2)
    print(json.dumps(stats), file=sys.stderr)


if __name__ == "__main__":
    main()
