"""PyTorch speed peer of aim's NMT (models/nmt.h): times a GNMT v2 training step.

The network is tests/peers/nmt.py's Gnmt (the parity peer: same parameter names, torch.nn.LSTM on
packed sequences, decoder layer 0 stepped with the attention fed back), at --units (the reduced
benchmark: 256) and the vocabulary of the data directory; SGD lr 1.0 with the global gradient norm
clipped at 5 (the recipe). Batches: consecutive lines of a WMT16-layout directory
(data/nmt_text.h), read here exactly as aim's NmtTextSource reads them, so aim-train --data DIR
runs on the same batches.

Run with /usr/bin/python3 (Debian torch):
  nmt.py --data DIR --units 256 --batch-size 32 --steps 6 --warmup 2 --threads 2
Prints one JSON line (step_time_ms p50 and mean, sentences/s at p50).
"""
import argparse
import importlib.util
import json
import os
import time

import torch

here = os.path.dirname(os.path.abspath(__file__))


def _load_parity_peer():
    path = os.path.normpath(os.path.join(here, "..", "..", "tests", "peers", "nmt.py"))
    spec = importlib.util.spec_from_file_location("nmt_parity_peer", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def read(path, vocab):
    ids = {t: i for i, t in enumerate(open(vocab).read().splitlines())}
    return [[ids.get(w, 0) for w in l.split()][:50] for l in open(path).read().splitlines()]


def batch(src, tgt, start, B):
    n = len(src)
    s = [src[(start + j) % n] for j in range(B)]
    t = [tgt[(start + j) % n] for j in range(B)]
    S, T = max(len(x) for x in s), max(len(x) for x in t) + 1
    so = torch.full((B, S), 2, dtype=torch.long)
    ti = torch.full((B, T), 2, dtype=torch.long)
    to = torch.full((B, T), 2, dtype=torch.long)
    for i in range(B):
        so[i, :len(s[i])] = torch.tensor(s[i])
        ti[i, 0] = 1
        ti[i, 1:len(t[i]) + 1] = torch.tensor(t[i])
        to[i, :len(t[i])] = torch.tensor(t[i])
    return (so, torch.tensor([len(x) for x in s]), ti, to, torch.tensor([len(x) + 1 for x in t]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--units", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    peer = _load_parity_peer()
    d = a.data
    src = read(d + "/train.tok.clean.bpe.32000.de", d + "/vocab.bpe.32000.de")
    tgt = read(d + "/train.tok.clean.bpe.32000.en", d + "/vocab.bpe.32000.en")
    V = max(len(open(d + "/vocab.bpe.32000.%s" % x).read().splitlines()) for x in ("de", "en"))
    torch.manual_seed(1)
    m = peer.Gnmt(a.units, V, V, 4, False)
    for p in m.parameters():
        torch.nn.init.uniform_(p, -0.1, 0.1)
    opt = torch.optim.SGD(m.parameters(), lr=1.0)
    times = []
    for step in range(a.warmup + a.steps):
        so, sl, ti, to, tl = batch(src, tgt, step * a.batch_size, a.batch_size)
        t0 = time.perf_counter()
        opt.zero_grad()
        enc = m.encode(so, sl)
        loss = peer.loss_of(m.decode_train(enc, ti, tl), to, tl, 0.0)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 5.0)
        opt.step()
        if step >= a.warmup:
            times.append(time.perf_counter() - t0)
    times.sort()
    p50 = times[(len(times) - 1) // 2]
    print(json.dumps({"model": "nmt", "framework": "pytorch " + torch.__version__,
                      "units": a.units, "batch": a.batch_size, "vocab": V,
                      "threads": a.threads, "step_time_ms_p50": 1e3 * p50,
                      "step_time_ms_mean": 1e3 * sum(times) / len(times),
                      "sentences_per_s_p50": a.batch_size / p50}))


if __name__ == "__main__":
    main()
