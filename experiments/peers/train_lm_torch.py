#!/usr/bin/env python3
"""The PyTorch peer of `fastsoftmax train-lm`: the same LSTM/GRU language model, the same recipe,
the same data, timed in tokens per second of training.

It reads the same experiment config (`experiments/configs/ptb-small-lstm.json`) and the same PTB
files, builds the vocabulary the same way (words by count, `<unk>`/`<eos>` kept) and trains as
our `train.rs` does: embedding -> `n_layers` recurrent layers -> linear output, uniform
±init_range initialisation, plain SGD on the mean token loss, the global gradient norm clipped
at `clip_norm`, truncated BPTT over `batch_size` parallel streams with the state carried (and
detached) between windows, the learning rate multiplied by `lr_decay` at the end of every epoch
from `decay_from_epoch` on. It runs in its fastest reasonable form (`fastest.py`; `--threads N` is the
one thread setting, the default 2 matches our two cores) and times training only: validation
is outside the clock, and the first `--warmup` windows of the first epoch are not counted.

    python3 experiments/peers/train_lm_torch.py --config experiments/configs/ptb-small-lstm.json \\
        --data data/ptb --threads 2 --max-windows 150 --epochs 1 --json
"""
import argparse
import collections
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fastest  # noqa: E402


def parser():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="experiments/configs/ptb-small-lstm.json")
    ap.add_argument("--data", default="data/ptb")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--epochs", type=int, help="override the config's epochs")
    ap.add_argument("--max-windows", type=int, help="stop each epoch after N windows (speed runs)")
    ap.add_argument("--warmup", type=int, default=5, help="first-epoch windows not timed")
    ap.add_argument("--no-valid", action="store_true", help="skip validation (speed runs)")
    ap.add_argument("--test", action="store_true", help="test perplexity at the end")
    ap.add_argument("--json", action="store_true", help="one JSON object per epoch")
    ap.add_argument("--device", default="cpu", help="cpu, or cuda (cuDNN's LSTM/GRU; losses are read once an epoch)")
    ap.add_argument("--batch-size", type=int, help="override the config's batch_size")
    return ap


ARGS = parser().parse_args()  # before torch loads: the thread count goes into its environment
UNSET = fastest.clean_process(ARGS.threads)
import torch  # noqa: E402
from torch import nn  # noqa: E402


def read_tokens(path):
    with open(path) as f:
        return [w for line in f for w in line.split() + ["<eos>"]]


def build_vocab(tokens):
    counts = collections.Counter(tokens)
    return {w: i for i, (w, _) in enumerate(sorted(counts.items(), key=lambda x: (-x[1], x[0])))}


def streams(ids, batch_size):
    """[batch_size, n] parallel streams, as crates/data/src/batch.rs cuts them."""
    n = len(ids) // batch_size
    return torch.tensor(ids[: n * batch_size], dtype=torch.long).view(batch_size, n)


class LanguageModel(nn.Module):
    def __init__(self, cell, vocab, d_embed, d_hidden, n_layers, init_range):
        super().__init__()
        self.embedding = nn.Embedding(vocab, d_embed)
        rnn = nn.LSTM if cell == "lstm" else nn.GRU
        self.rnn = rnn(d_embed, d_hidden, n_layers, batch_first=True)
        self.output = nn.Linear(d_hidden, vocab)
        for p in self.parameters():
            nn.init.uniform_(p, -init_range, init_range)

    def forward(self, x, state):
        h, state = self.rnn(self.embedding(x), state)
        return self.output(h), state


def detach(state):
    return tuple(s.detach() for s in state) if isinstance(state, tuple) else state.detach()


def perplexity(model, data, bptt):
    model.eval()
    loss_sum, tokens, state = 0.0, 0, None
    with torch.no_grad():
        for s in range(0, data.size(1) - 1, bptt):
            x, y = data[:, s:s + bptt], data[:, s + 1:s + 1 + bptt]
            x = x[:, : y.size(1)]
            logits, state = model(x, state)
            loss_sum += nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1),
                                                    reduction="sum").item()
            tokens += y.numel()
    model.train()
    return math.exp(loss_sum / tokens)


def main():
    a = ARGS

    cfg = json.load(open(a.config))
    m, t = cfg["model"], cfg["train"]
    epochs = a.epochs or t["epochs"]
    if a.batch_size:
        t["batch_size"] = a.batch_size
    dev = torch.device(a.device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    torch.set_num_threads(a.threads)
    torch.manual_seed(t.get("seed", 1))
    # On a GPU the CPU's BLAS does not train; a machine without threadpoolctl still runs.
    kernels = fastest.kernels(a.threads) if dev.type == "cpu" else None
    train_words = read_tokens(os.path.join(a.data, "ptb.train.txt"))
    vocab = build_vocab(train_words)
    unk = vocab.get("<unk>")
    encode = lambda words: [vocab.get(w, unk) for w in words]  # noqa: E731
    train = streams(encode(train_words), t["batch_size"]).to(dev)
    valid = streams(encode(read_tokens(os.path.join(a.data, "ptb.valid.txt"))), 10).to(dev)
    model = LanguageModel(m["cell"], len(vocab), m["d_embed"], m["d_hidden"], m["n_layers"], m["init_range"]).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=t["lr"])
    lr, bptt = t["lr"], t["bptt"]
    info = {"torch": torch.__version__, "threads": torch.get_num_threads(), "unset": UNSET, "device": str(dev),
            "gpu": torch.cuda.get_device_name(dev) if dev.type == "cuda" else None,
            "kernels": kernels, "mkldnn": torch.backends.mkldnn.is_available(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability()}
    if not a.json:
        print(f"PyTorch {info['torch']}, {info['threads']} threads, CPU capability {info['cpu_capability']}, "
              f"vocab {len(vocab)}, {m['cell']} {m['n_layers']}x{m['d_hidden']}")
    for epoch in range(1, epochs + 1):
        for g in opt.param_groups:
            g["lr"] = lr
        state, loss_sum, tokens, timed_tokens = None, 0.0, 0, 0
        n_windows = (train.size(1) - 1 + bptt - 1) // bptt
        if a.max_windows:
            n_windows = min(n_windows, a.max_windows)
        started = None
        for w in range(n_windows):
            if started is None and (epoch > 1 or w >= min(a.warmup, n_windows - 1)):
                sync()
                started = time.perf_counter()
            s = w * bptt
            x, y = train[:, s:s + bptt], train[:, s + 1:s + 1 + bptt]
            x = x[:, : y.size(1)]
            state = detach(state) if state is not None else None
            logits, state = model(x, state)
            loss = nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), t["clip_norm"])
            opt.step()
            # On a GPU a read per window would wait for it: the sum stays a tensor there.
            loss_sum += (loss.detach() if dev.type == "cuda" else loss.item()) * y.numel()
            tokens += y.numel()
            if started is not None:
                timed_tokens += y.numel()
        sync()
        seconds = time.perf_counter() - started
        loss_sum = float(loss_sum)
        row = {"epoch": epoch, "lr": lr, "train_ppl": math.exp(loss_sum / tokens), "windows": n_windows,
               "tokens_timed": timed_tokens, "seconds": seconds, "tokens_per_s": timed_tokens / seconds,
               **info}
        if not a.no_valid:
            row["valid_ppl"] = perplexity(model, valid, bptt)
        if a.test and epoch == epochs:
            test = streams(encode(read_tokens(os.path.join(a.data, "ptb.test.txt"))), 10)
            row["test_ppl"] = perplexity(model, test, bptt)
        if a.json:
            print(json.dumps(row), flush=True)
        else:
            print(f"epoch {epoch:>3} | lr {lr:.4f} | train ppl {row['train_ppl']:8.2f} | "
                  f"valid ppl {row.get('valid_ppl', float('nan')):8.2f} | {seconds:.0f} s | "
                  f"{row['tokens_per_s']:.0f} tok/s", flush=True)
        if epoch >= t["decay_from_epoch"]:  # as train.rs: after the epoch
            lr *= t["lr_decay"]


if __name__ == "__main__":
    sys.exit(main())
