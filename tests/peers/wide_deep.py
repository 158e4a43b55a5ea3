"""Census Wide&Deep (MODELS.md §4.4) in PyTorch: the parity peer of aim's models/wide_deep.h.

Same parameter names as aim's WideDeep, so state_dict keys match one-to-one:
  wide.bag.weight [3050, 1] (sparse linear model: sum of the rows of the 8 wide ids; row 3049 is
  the zero padding row of out-of-vocabulary values), wide.bias [1],
  deep.embedding.weight [1000, 8] (occupation hash bucket), deep.mlp.{0,2,4,6}.{weight, bias}
  (Linear 51-100-75-50-25, each followed by ReLU), deep.logits.{weight [1, 25], bias [1]}.
logit = wide + deep; loss = mean sigmoid cross-entropy.

CLI (torch 1.13, /usr/bin/python3):
  wide_deep.py --weights W.safetensors --batch B.safetensors --out O.safetensors
B holds wide [B, 8] i64, dense [B, 43] f32, occupation [B] i64 and label [B] i64. O receives:
logits [B], loss [], grad.<param>, and after.<param> after one step of the "wide_deep" optimizer
(train/trainer.cpp): parameters under "wide." by TF's FTRL (lr 0.2, learning_rate_power -0.5,
initial accumulator 0.1, l1 = l2 = 0, written out below), the others by
torch.optim.Adagrad(lr 0.05, initial_accumulator_value 0.1, eps 1e-10).
"""
import argparse
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
import st  # noqa: E402

WIDE_ROWS = 3050
WIDE_PAD = 3049


def glorot_linear(n_in, n_out):
    fc = nn.Linear(n_in, n_out)
    r = math.sqrt(6.0 / (n_in + n_out))
    with torch.no_grad():
        fc.weight.uniform_(-r, r)
        fc.bias.zero_()
    return fc


class Bag(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(WIDE_ROWS, 1))


class Wide(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = Bag()
        self.bias = nn.Parameter(torch.zeros(1))

    def forward(self, ids):
        return F.embedding_bag(ids, self.bag.weight, mode="sum", padding_idx=WIDE_PAD) + self.bias


class Deep(nn.Module):
    def __init__(self, hidden=(100, 75, 50, 25), emb=8, dense=43):
        super().__init__()
        self.embedding = nn.Embedding(1000, emb)
        dims = [dense + emb] + list(hidden)
        layers = []
        for i in range(len(dims) - 1):
            layers += [glorot_linear(dims[i], dims[i + 1]), nn.ReLU()]
        self.mlp = nn.Sequential(*layers)
        self.logits = glorot_linear(dims[-1], 1)

    def forward(self, dense, occupation):
        return self.logits(self.mlp(torch.cat([dense, self.embedding(occupation)], -1)))


class WideDeep(nn.Module):
    def __init__(self):
        super().__init__()
        self.wide = Wide()
        self.deep = Deep()

    def forward(self, wide, dense, occupation):
        return (self.wide(wide) + self.deep(dense, occupation)).squeeze(-1)

    @staticmethod
    def loss(logits, labels):
        return F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))


def ftrl_step(p, lr=0.2, power=-0.5, init_acc=0.1, l1=0.0, l2=0.0):
    """One step of tf.compat.v1.train.FtrlOptimizer from fresh state (accum init_acc, linear 0)."""
    g = p.grad.double()
    w = p.detach().double()
    n = torch.full_like(w, init_acc)
    z = torch.zeros_like(w)
    n1 = n + g * g
    z = z + g - (n1.pow(-power) - n.pow(-power)) / lr * w
    quad = n1.pow(-power) / lr + 2 * l2
    new = torch.where(z.abs() > l1, (torch.sign(z) * l1 - z) / quad, torch.zeros_like(z))
    with torch.no_grad():
        p.copy_(new.to(p.dtype))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weights", required=True)
    ap.add_argument("--batch", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    m = WideDeep()
    m.load_state_dict(st.load(a.weights), strict=True)
    m.train()
    b = st.load(a.batch)
    logits = m(b["wide"], b["dense"], b["occupation"])
    loss = WideDeep.loss(logits, b["label"])
    loss.backward()
    out = {"logits": logits.detach(), "loss": loss.detach()}
    for n, p in m.named_parameters():
        out["grad." + n] = p.grad.clone()
    deep = [p for n, p in m.named_parameters() if not n.startswith("wide.")]
    torch.optim.Adagrad(deep, lr=0.05, initial_accumulator_value=0.1, eps=1e-10).step()
    for n, p in m.named_parameters():
        if n.startswith("wide."):
            ftrl_step(p)
    for n, p in m.named_parameters():
        out["after." + n] = p.detach().clone()
    st.save(a.out, out)


if __name__ == "__main__":
    main()
