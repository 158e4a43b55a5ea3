"""PyTorch peer of aim's fused attention op (kernels/attention, `aim-bench op attention_fwd` /
`attention_bwd`): times one scaled-dot-product attention and measures its memory.

The problem is aim-bench's case `B, NH, Tq = Tk = T, HS, mask=1, causal=0, dropout=0`
(kernels/attention/attention_cases.cpp): q, k uniform in [-2, 2], v in [-1, 1], f32
[B, NH, T, HS]; an additive key-padding mask [B, 1, 1, T] in which batch element b's last
(1 + 7 b) % T keys hold -10000 (b % 3 == 0), -inf (b % 3 == 1) or every key -inf (b % 3 == 2;
aim gives those rows 0, PyTorch NaN: use B = 1, as run_attention.sh does); scale 1/sqrt(HS).

  --impl unfused  softmax(q k^T / sqrt(HS) + mask) v written out, as tests/peers/bert.py and Hugging
                  Face's BertSelfAttention compute it (the only form torch 1.13 has)
  --impl sdpa     F.scaled_dot_product_attention(q, k, v, attn_mask=mask) (torch >= 2; the kernel
                  PyTorch picked is recorded from torch.profiler)
  --compile       torch.compile the function (torch >= 2; compilation happens in the warm-up)
  --mode fwd      forward under torch.no_grad() (aim's attention_fwd also writes the row
                  log-sum-exp the backward needs)
  --mode fwdbwd   forward with autograd + backward of a given d_out (grads of q, k, v)
  --mode none     builds the inputs and runs the uncompiled formulas once at T = 16, and the
                  profiler once (so that lazily loaded code is resident): the baseline process
                  for the memory figure

Timing as aim-bench op: one warm-up call (more with --warmup), then reps calls, each preceded by a
memset of a 64 MiB buffer (aim's RepTimer::flush_caches, allocated at the first flush); reps
shrink to max(3, 2 s / call) for calls over 0.2 s; median and min in ms.

Memory, two figures (KiB, Linux ru_maxrss):
  maxrss_kib  the process's peak RSS (run_attention.sh subtracts the --mode none process's peak:
              the growth then includes the 64 MiB flush buffer, as aim-bench's does)
  op_growth_kib  in-process: peak RSS after the timed calls minus the RSS just before the first
              call, with the inputs and the flush buffer already resident (the op's own
              temporaries, outputs and gradients, and what the allocator keeps)
Prints one JSON line.
"""
import argparse
import json
import math
import os
import resource
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import cpu_capability  # noqa: E402


def rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def maxrss_kib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def make_inputs(B, NH, T, HS, gen):
    def u(lo, hi, *shape):
        return torch.rand(*shape, generator=gen) * (hi - lo) + lo
    q, k, v = u(-2, 2, B, NH, T, HS), u(-2, 2, B, NH, T, HS), u(-1, 1, B, NH, T, HS)
    mask = torch.zeros(B, 1, 1, T)
    for b in range(B):
        keep = 0 if b % 3 == 2 else T - (1 + 7 * b) % T
        mask[b, 0, 0, keep:] = -10000.0 if b % 3 == 0 else -math.inf
    dout = u(-1, 1, B, NH, T, HS)
    return q, k, v, mask, dout


def unfused(q, k, v, mask):
    # tests/peers/bert.py's BertSelfAttention (dropout 0): the [B, NH, T, T] scores materialised.
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + mask
    return F.softmax(s, dim=-1) @ v


def sdpa(q, k, v, mask):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def kernels_used(fn):
    """The aten attention / bmm / softmax kernels one call of fn ran (sdpa picks one), from
    torch.profiler, outside the timing. The baseline process runs it too, so that the profiler's
    libraries and buffers are in both peak RSS figures."""
    try:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU]) as p:
            fn()
        return sorted({e.key for e in p.key_averages()
                       if "attention" in e.key or e.key in ("aten::bmm", "aten::_softmax", "aten::matmul")})
    except Exception as e:  # noqa: BLE001 - a record, not a failure
        return ["profiler failed: %s" % e]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--B", type=int, default=1)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--T", type=int, default=512)
    ap.add_argument("--hs", type=int, default=64)
    ap.add_argument("--impl", default="unfused", choices=["unfused", "sdpa"])
    ap.add_argument("--mode", default="fwd", choices=["fwd", "fwdbwd", "none"])
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    for name in ("B", "heads", "T", "hs", "reps", "threads"):
        if getattr(a, name) <= 0:
            ap.error("--%s must be > 0" % name)
    if (a.impl == "sdpa" or a.compile) and not hasattr(F, "scaled_dot_product_attention"):
        ap.error("--impl sdpa / --compile need torch >= 2 (this is %s)" % torch.__version__)
    torch.set_num_threads(a.threads)
    q, k, v, mask, dout = make_inputs(a.B, a.heads, a.T, a.hs, torch.Generator().manual_seed(a.seed))
    fn = unfused if a.impl == "unfused" else sdpa
    if a.compile:
        fn = torch.compile(fn)
    r = {"framework": "pytorch", "bench": "attention", "impl": a.impl, "compile": a.compile,
         "mode": a.mode, "B": a.B, "NH": a.heads, "T": a.T, "HS": a.hs, "dtype": "f32",
         "threads": a.threads, "torch": torch.__version__,
         "cpu_capability": cpu_capability(),
         "env": {k_: os.environ[k_] for k_ in ("OMP_NUM_THREADS", "LD_PRELOAD", "ATEN_CPU_CAPABILITY",
                                              "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k_ in os.environ}}
    if a.mode == "none":
        # The baseline loads what the first attention call loads (kernels, BLAS and oneDNN
        # state): the uncompiled formulas run forward and backward once at T = 16 (KiB of data).
        sq, sk, sv, sm, sd = make_inputs(a.B, a.heads, 16, a.hs, torch.Generator().manual_seed(a.seed))
        for t in (sq, sk, sv):
            t.requires_grad_(True)
        for f in [unfused] + ([sdpa] if hasattr(F, "scaled_dot_product_attention") else []):
            f(sq, sk, sv, sm).backward(sd)
            with torch.no_grad():
                f(sq, sk, sv, sm)
        kernels_used(lambda: unfused(sq, sk, sv, sm).backward(sd))  # the profiler, as the op runs do
        r.update({"maxrss_kib": maxrss_kib(), "rss_kib": rss_kib()})
        print(json.dumps(r), flush=True)
        return

    if a.mode == "fwdbwd":
        for t in (q, k, v):
            t.requires_grad_(True)

    def call():
        if a.mode == "fwd":
            with torch.no_grad():
                return fn(q, k, v, mask)
        for t in (q, k, v):
            t.grad = None
        o = fn(q, k, v, mask)
        o.backward(dout)
        return o

    flush = []

    def flush_caches():  # aim's RepTimer::flush_caches: a 64 MiB buffer, allocated once, memset
        if not flush:
            flush.append(torch.empty(64 << 20, dtype=torch.uint8))
        flush[0].fill_(len(flush) & 0xFF)
        flush.append(None)

    flush_caches()
    rss0, max0 = rss_kib(), maxrss_kib()
    t0 = time.perf_counter()
    out = call()
    first_ms = (time.perf_counter() - t0) * 1e3
    for _ in range(a.warmup - 1):
        out = call()
    t0 = time.perf_counter()
    out = call()
    warm_s = time.perf_counter() - t0
    reps = max(3, min(a.reps, int(2.0 / warm_s))) if warm_s > 0.2 else a.reps
    ms = []
    for _ in range(reps):
        flush_caches()
        t0 = time.perf_counter()
        out = call()
        ms.append((time.perf_counter() - t0) * 1e3)
    max1 = maxrss_kib()
    if not torch.isfinite(out).all():
        raise SystemExit("attention.py: non-finite output")
    kernels = kernels_used(call)  # after max1: the profiler's own memory is not in op_growth_kib
    r.update({"median_ms": statistics.median(ms), "min_ms": min(ms), "reps": reps, "times_ms": ms,
              "first_call_ms": first_ms, "kernels": kernels,
              "rss_before_kib": rss0, "maxrss_before_kib": max0, "maxrss_kib": max1,
              # when the op never passed the earlier peak, max1 - rss0 is only an upper bound
              "op_growth_kib": max1 - rss0, "op_growth_is_upper_bound": max1 <= max0,
              "scores_matrix_kib": a.B * a.heads * a.T * a.T * 4 // 1024})
    print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
