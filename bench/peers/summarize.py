#!/usr/bin/env python3
"""Writes docs/performance.md from run_all.sh's raw JSON lines (one FILE per model, aim's lines
and the peer's, appended by the side-by-side scripts), the measured peak and the failures."""
import argparse
import json
import os
import statistics


def lines(path):
    out = []
    if os.path.exists(path):
        with open(path) as f:
            for ln in f:
                ln = ln.strip()
                if ln.startswith("{"):
                    out.append(json.loads(ln))
    return out


def p50(r):
    key = "step_time_ms" if r.get("mode") == "train" else "latency_ms"
    return r[key]["p50"]


def mib(b):
    return "%.0f" % (b / 2**20) if b else "-"


def roof(pct):
    # Two digits below 10%, whole percents above (a Winograd step's direct-equivalent rate can
    # pass 100%).
    return "%.0f%%" % pct if pct >= 10 else "%.2g%%" % pct


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--doc", required=True)
    ap.add_argument("--command", required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--rounds", type=int, required=True)
    ap.add_argument("--peer-python", required=True)
    a = ap.parse_args()
    peak = [r for r in lines(os.path.join(a.dir, "peak.jsonl")) if r.get("ceiling") == "fp32_gflops"]
    if not peak:
        raise SystemExit("summarize.py: no fp32 FMA peak in %s/peak.jsonl" % a.dir)
    peak_gflops = max(r["value"] for r in peak)
    failed = set()
    fp = os.path.join(a.dir, "failed.txt")
    if os.path.exists(fp):
        failed = set(open(fp).read().split())
    rows, commit, cpu, torch_version = [], "unknown", "unknown", "unknown"
    for m in a.models.split(","):
        runs = lines(os.path.join(a.dir, m + ".jsonl"))
        for mode in ("train", "infer"):
            aim = [r for r in runs if "framework" not in r and r.get("mode") == mode]
            peer = [r for r in runs if r.get("framework") == "pytorch" and r.get("mode") == mode]
            if not aim and not peer:
                continue
            if aim:
                commit = aim[-1].get("git_commit", commit)
                cpu = aim[-1].get("env", {}).get("cpu", cpu)
            if peer:
                torch_version = peer[-1].get("env", {}).get("torch", torch_version)
            ta = statistics.median(p50(r) for r in aim) if aim else None
            tp = statistics.median(p50(r) for r in peer) if peer else None
            gf = statistics.median(r.get("achieved_gflops", 0) for r in aim) if aim else None
            batch = (aim or peer)[-1].get("batch", "?")
            step_peak = max((r.get("memory", {}).get("peak_step_bytes", 0) for r in aim), default=0)
            rss_a = max((r.get("memory", {}).get("max_rss_bytes", 0) for r in aim), default=0)
            rss_p = max((r.get("memory", {}).get("max_rss_bytes", 0) for r in peer), default=0)
            rows.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s |" % (
                m, mode, batch, "%.2f" % ta if ta else "-", "%.2f" % tp if tp else "-",
                "**%.2fx**" % (tp / ta) if ta and tp else "-", "%.3g" % gf if gf else "-",
                roof(100 * gf / peak_gflops) if gf else "-", mib(step_peak), mib(rss_a),
                mib(rss_p)))
        if m in failed:
            rows.append("| %s | failed | | | | | | | | see the run's log |" % m)
    doc = ["# Performance: aim beside PyTorch on this machine (issue 25)", "",
           "Written by `%s` (bench/peers/run_all.sh; do not edit by hand)." % a.command, "",
           "- commit `%s`, CPU %s, %d threads on each side, %d alternating rounds per mode" % (
               commit, cpu, a.threads, a.rounds),
           "- peer: PyTorch %s (%s) in the tuned environment of MACHINE.md lesson 4" % (
               torch_version, a.peer_python),
           "- measured fp32 FMA peak (aim-bench peak): %.1f GFLOP/s; %%roof = aim's analytic "
           "GFLOP/s at its p50 over it (a convolution counts its direct FLOPs, so steps of "
           "Winograd convolutions can pass 100%%)" % peak_gflops,
           "- p50 = the median over rounds of each run's median step (train) or batch latency "
           "(infer); torch/aim > 1 means aim is faster",
           "- memory: aim's caching allocator's high-water mark inside a training step, and each "
           "process's peak RSS (getrusage), MiB", "",
           "| model | mode | batch | aim p50 ms | PyTorch p50 ms | torch/aim | aim GFLOP/s | %roof "
           "| aim step peak MiB | RSS MiB aim / PyTorch |",
           "|---|---|---|---|---|---|---|---|---|---|"] + rows + [""]
    with open(a.doc, "w") as f:
        f.write("\n".join(doc))


if __name__ == "__main__":
    main()
