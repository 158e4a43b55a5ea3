"""What the PyTorch speed peers (din.py, cnn.py) share: percentiles as aim computes them, the
optimizers, the environment record (libraries actually mapped, ATen's CPU capability, the knobs
of MACHINE.md) and the optional torch.profiler summary."""
import math
import os
import sys

import torch


def percentile(v, p):
    """Nearest-rank percentile, the definition aim's trainer uses."""
    s = sorted(v)
    k = int(math.ceil(p / 100.0 * len(s)))
    return s[min(len(s) - 1, max(k, 1) - 1)]


def make_optimizer(name, params, lr, foreach):
    kw = {"foreach": True} if foreach else {}
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, **kw)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, **kw)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, **kw)
    if name == "adagrad":
        return torch.optim.Adagrad(params, lr=lr, **kw)
    raise ValueError("unknown optimizer " + name)


def loaded_libs():
    """Paths of the BLAS, OpenMP and malloc libraries this process actually mapped."""
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            base = os.path.basename(path)
            if any(s in base for s in ("blas", "gomp", "libomp", "jemalloc", "tcmalloc", "dnnl", "lapack")):
                libs.add(os.path.realpath(path))
    return sorted(libs)


def cpu_capability():
    """ATen's vectorised-kernel level in use (AVX2 / AVX512), from torch 1.13's build summary."""
    for line in torch.__config__.show().splitlines():
        if "CPU capability usage:" in line:
            return line.split(":", 1)[1].strip()
    return None


def memory():
    """The process's peak resident set (getrusage), the figure aim's results line reports beside
    its allocator's high-water mark."""
    import resource
    return {"max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def environment(args):
    keys = ["OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "OMP_PROC_BIND",
            "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME", "ATEN_CPU_CAPABILITY", "LD_PRELOAD", "MALLOC_CONF",
            "TCMALLOC_RELEASE_RATE", "DNNL_MAX_CPU_ISA", "DNNL_DEFAULT_FPMATH_MODE"]
    env = {"torch": torch.__version__, "num_threads": torch.get_num_threads(),
           "interop_threads": torch.get_num_interop_threads(),
           "cpu_capability": cpu_capability(),
           "mkldnn": torch.backends.mkldnn.is_available(), "libs": loaded_libs()}
    env.update({k: os.environ[k] for k in keys if k in os.environ})
    env["knobs"] = {"set_to_none": not args.no_set_to_none, "foreach": args.foreach, "jit": args.jit}
    return env


def profile(args, fn):
    """Top ops by self CPU time over args.profile extra iterations (none when 0)."""
    if args.profile <= 0:
        return None
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as tprofile
    with tprofile(activities=[ProfilerActivity.CPU]) as p:
        for i in range(args.profile):
            fn(i)
    print(p.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.profile_top), file=sys.stderr)
    ev = sorted(p.key_averages(), key=lambda e: -e.self_cpu_time_total)[:args.profile_top]
    total = sum(e.self_cpu_time_total for e in p.key_averages())
    return {"iterations": args.profile, "total_self_ms_per_iter": total / 1e3 / args.profile,
            "top": [{"op": e.key, "calls_per_iter": e.count / args.profile,
                     "self_ms_per_iter": e.self_cpu_time_total / 1e3 / args.profile,
                     "pct": 100.0 * e.self_cpu_time_total / max(total, 1)} for e in ev]}
