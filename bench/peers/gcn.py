"""PyTorch speed peer of aim's GCN (models/gcn.h): times one training step (= one full-batch epoch).

The network is tests/peers/gcn.py's GCN (pygcn's GraphConvolution: x @ W, torch.sparse.mm(adj, .)
+ b; same parameter names) plus Kipf's dropout 0.5 on both layers' inputs and loss (masked mean
cross-entropy + 5e-4 / 2 ||gc1.weight||^2), Adam lr 0.01. The graph has aim's default synthetic
graph's sizes (Cora's: 2708 nodes, 1433 features, 7 classes, 140 training nodes; data/graph.h):
a random graph with aim's mean degree (~3.8 + the self-loop), normalised as D^-1/2 (A+I) D^-1/2,
dense row-normalised features with 18 active words per node (aim's are dense too). Timing depends
only on these sizes, not on the values.

  /usr/bin/python3 bench/peers/gcn.py --steps 200 --warmup 20 --threads 2
Prints one JSON line: step_time_ms p50/p90/p99 (nearest rank, like aim's trainer) and the mean.
"""
import argparse
import importlib.util
import json
import os
import time

import torch
import torch.nn.functional as F

# The parity peer's module under its own name (this file is also called gcn.py).
_spec = importlib.util.spec_from_file_location(
    "gcn_parity_peer",
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "peers", "gcn.py"))
_peer = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_peer)
GCN = _peer.GCN


def percentile(v, p):
    s = sorted(v)
    return s[max(0, min(len(s) - 1, int(round(p / 100.0 * len(s) + 0.5)) - 1))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--nodes", type=int, default=2708)
    ap.add_argument("--features", type=int, default=1433)
    ap.add_argument("--classes", type=int, default=7)
    ap.add_argument("--degree", type=float, default=3.8)
    ap.add_argument("--input-dropout", choices=["dense", "none"], default="dense",
                    help="none: skip the dropout of the input features (pygcn's model), for context")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    V, Fe, C = a.nodes, a.features, a.classes
    E = int(V * a.degree / 2)
    u, v = torch.randint(0, V, (E,)), torch.randint(0, V, (E,))
    A = torch.zeros(V, V)
    A[u, v] = 1
    A[v, u] = 1
    A.fill_diagonal_(0)
    A += torch.eye(V)
    d = A.sum(1).rsqrt()
    adj = (d[:, None] * A * d[None, :]).to_sparse().coalesce()
    x = torch.zeros(V, Fe)
    x[torch.arange(V).repeat_interleave(18), torch.randint(0, Fe, (V * 18,))] = 1
    x = x / x.sum(1, keepdim=True)
    labels = torch.randint(0, C, (V,))
    train = torch.arange(140)
    m = GCN(Fe, 16, C)
    for p in m.parameters():
        torch.nn.init.uniform_(p, -0.1, 0.1)
    opt = torch.optim.Adam(m.parameters(), lr=0.01)
    m.train()
    times = []
    for i in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        xd = F.dropout(x, 0.5, True) if a.input_dropout == "dense" else x
        h = F.relu(m.gc1(xd, adj))
        logits = m.gc2(F.dropout(h, 0.5, True), adj)
        loss = F.cross_entropy(logits[train], labels[train]) + 5e-4 / 2 * (m.gc1.weight ** 2).sum()
        loss.backward()
        opt.step()
        loss.item()
        if i >= a.warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    print(json.dumps({"model": "gcn", "mode": "train", "nodes": V, "features": Fe, "nnz": adj._nnz(),
                      "threads": a.threads, "torch": torch.__version__, "input_dropout": a.input_dropout,
                      "step_time_ms": {"p50": percentile(times, 50), "p90": percentile(times, 90),
                                       "p99": percentile(times, 99),
                                       "mean": sum(times) / len(times)}}))


if __name__ == "__main__":
    main()
