"""GCN (Kipf & Welling 2017) in PyTorch, pygcn-style: the parity peer of aim's models/gcn.h.

pygcn's layers.GraphConvolution (support = x @ W; out = torch.sparse.mm(adj, support) + b), two
of them with ReLU between, and Kipf's loss: mean cross-entropy over the training nodes plus
weight_decay / 2 * ||gc1.weight||^2 (tf.nn.l2_loss on the first layer). Dropout is not applied
here (the parity runs with it off: the two frameworks draw different masks); note pygcn drops
only the hidden layer while Kipf (and aim) also drop the input features.

The normalised adjacency is also recomputed from the CSR's pattern (off-diagonal entries = the
graph's edges; a graph without self-loops): adj_hat = D^-1/2 (A + I) D^-1/2, dense, so the test
checks aim's preprocessing (data/graph.cpp) too.

CLI (torch 1.13, /usr/bin/python3):
  gcn.py --weights W.safetensors --graph G.safetensors --out O.safetensors [--lr 0.01] [--wd 5e-4]
W: gc1.weight [F, H], gc1.bias [H], gc2.weight [H, C], gc2.bias [C]. G: features [V, F],
adj_row_ptr [V+1] i32, adj_col_idx [E] i32, adj_values [E], train_idx, train_labels (i64).
O: logits [V, C], loss [], adj_hat [V, V], grad.<param>, after.<param> (one torch.optim.Adam
step, default betas and eps).
"""
import argparse
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
import st  # noqa: E402


class GraphConvolution(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(in_features, out_features))
        self.bias = nn.Parameter(torch.empty(out_features))

    def forward(self, x, adj):
        return torch.sparse.mm(adj, torch.mm(x, self.weight)) + self.bias


class GCN(nn.Module):
    def __init__(self, nfeat, nhid, nclass):
        super().__init__()
        self.gc1 = GraphConvolution(nfeat, nhid)
        self.gc2 = GraphConvolution(nhid, nclass)

    def forward(self, x, adj):
        return self.gc2(F.relu(self.gc1(x, adj)), adj)


def sparse_adj(row_ptr, col_idx, values):
    V = row_ptr.numel() - 1
    rows = torch.repeat_interleave(torch.arange(V), (row_ptr[1:] - row_ptr[:-1]).long())
    idx = torch.stack([rows, col_idx.long()])
    return torch.sparse_coo_tensor(idx, values, (V, V)).coalesce(), idx


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weights", required=True)
    ap.add_argument("--graph", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--wd", type=float, default=5e-4)
    a = ap.parse_args()
    sd = st.load(a.weights)
    g = st.load(a.graph)
    F_, H = sd["gc1.weight"].shape
    C = sd["gc2.weight"].shape[1]
    m = GCN(F_, H, C)
    m.load_state_dict(sd, strict=True)
    adj, idx = sparse_adj(g["adj_row_ptr"], g["adj_col_idx"], g["adj_values"])
    V = adj.shape[0]
    A = torch.zeros(V, V, dtype=torch.float64)
    A[idx[0], idx[1]] = 1.0
    A.fill_diagonal_(0.0)
    A = A + torch.eye(V, dtype=torch.float64)
    d = A.sum(1).rsqrt()
    adj_hat = d[:, None] * A * d[None, :]
    logits = m(g["features"], adj)
    loss = F.cross_entropy(logits[g["train_idx"]], g["train_labels"])
    loss = loss + a.wd / 2 * (m.gc1.weight ** 2).sum()
    loss.backward()
    out = {"logits": logits.detach(), "loss": loss.detach(), "adj_hat": adj_hat.float()}
    for n, p in m.named_parameters():
        out["grad." + n] = p.grad.clone()
    torch.optim.Adam(m.parameters(), lr=a.lr).step()
    for n, p in m.named_parameters():
        out["after." + n] = p.detach().clone()
    st.save(a.out, out)


if __name__ == "__main__":
    main()
