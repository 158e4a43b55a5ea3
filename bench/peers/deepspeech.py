"""PyTorch speed peer of aim's DeepSpeech (models/deepspeech.h): times a training step.

The network and front end are tests/peers/deepspeech.py's (the parity peer: same parameter names,
the MFCC front end written with torch.fft, per-utterance whitening, context window, clipped ReLU,
bidirectional nn.LSTM over packed sequences, CTC mean over the batch), Adam. Batches follow aim's
synthetic speech distribution (data/speech.h, the tiny configuration: 1..5 characters, each a dual
tone of 60-100 ms per utterance plus 25% silence, 0-50 ms lead-in and tail, noise up to 0.03),
drawn with numpy before timing (aim draws its own on the prefetch thread): the same workload in
distribution, not the same samples.

Run with /usr/bin/python3 (Debian torch):
  deepspeech.py --size tiny --batch-size 16 --steps 50 --warmup 5 --threads 1 [--flush-denormal]
Prints one JSON line (step_time_ms p50/p90 nearest-rank, samples/s at p50).
"""
import argparse
import importlib.util
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
from common import percentile  # noqa: E402


def _load_parity_peer():
    path = os.path.normpath(os.path.join(here, "..", "..", "tests", "peers", "deepspeech.py"))
    spec = importlib.util.spec_from_file_location("deepspeech_parity_peer", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


peer = _load_parity_peer()
LOW = [300, 380, 480, 600, 760, 960, 1200]
HIGH = [1500, 2000, 2700, 3600]


def utterance(rng, max_len, sr=16000):
    n = int(rng.integers(1, max_len + 1))
    label = rng.integers(0, 28, n)
    char_s = 0.08 * (0.75 + 0.5 * rng.random())
    tone, gap = int(char_s * sr), int(0.25 * char_s * sr)
    lead, tail = int(0.05 * rng.random() * sr), int(0.05 * rng.random() * sr)
    x = np.zeros(lead + n * (tone + gap) + tail)
    t = np.arange(tone) / sr
    for i, c in enumerate(label):
        s = lead + i * (tone + gap)
        x[s:s + tone] = 0.4 * 0.5 * (np.sin(2 * np.pi * LOW[c % 7] * t) + np.sin(2 * np.pi * HIGH[c // 7] * t))
    x += 0.015 * rng.standard_normal(len(x))
    return x.astype(np.float32), label


def make_batch(rng, B, max_len):
    us = [utterance(rng, max_len) for _ in range(B)]
    L, S = max(len(u[0]) for u in us), max(len(u[1]) for u in us)
    audio = torch.zeros(B, L)
    label = torch.full((B, S), -1, dtype=torch.long)
    for b, (x, l) in enumerate(us):
        audio[b, :len(x)] = torch.from_numpy(x)
        label[b, :len(l)] = torch.from_numpy(l)
    return {"audio": audio, "audio_length": torch.tensor([len(u[0]) for u in us]),
            "label": label, "label_length": torch.tensor([len(u[1]) for u in us])}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", choices=["tiny", "full"], default="tiny")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--flush-denormal", action="store_true",
                    help="torch.set_flush_denormal(True): aim's default --denormals flush")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    if a.flush_denormal:
        torch.set_flush_denormal(True)
    torch.manual_seed(a.seed)
    width = 64 if a.size == "tiny" else 2048
    model = peer.DeepSpeech(width, width, 29)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(a.seed)
    batches = [make_batch(rng, a.batch_size, 5 if a.size == "tiny" else 12) for _ in range(8)]

    def step(b):
        frames = torch.clamp((b["audio_length"] - peer.N) // peer.HOP + 1, min=0)
        with torch.no_grad():
            feats = peer.features(b["audio"], frames)
        logits = model(feats, frames)
        loss = F.ctc_loss(F.log_softmax(logits, 2), b["label"].clamp(min=0), frames,
                          b["label_length"], blank=28, reduction="none", zero_infinity=True).mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()

    for i in range(a.warmup):
        step(batches[i % len(batches)])
    times = []
    for i in range(a.steps):
        t0 = time.perf_counter()
        step(batches[i % len(batches)])
        times.append(1000 * (time.perf_counter() - t0))
    p50 = percentile(times, 50)
    print(json.dumps({"model": "deepspeech", "framework": "pytorch", "size": a.size,
                      "batch": a.batch_size, "threads": a.threads,
                      "flush_denormal": a.flush_denormal, "torch": torch.__version__,
                      "step_time_ms": {"p50": p50, "p90": percentile(times, 90)},
                      "samples_per_s": 1000 * a.batch_size / p50}))


if __name__ == "__main__":
    main()
