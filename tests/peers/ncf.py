"""NCF (NeuMF without pre-training, MODELS.md §4.3) in PyTorch: the parity peer of aim's models/ncf.h.

The reference feeds one-hot vectors to dense layers with ReLU; onehot(id) @ W is row id of W, so
each of the four "embeddings" is computed as a gather: ReLU(W[id] + b) (OneHotDense). Same
attribute names as aim's Ncf, so state_dict keys match one-to-one:
  user_gmf.{weight [users, E], bias [E]}, item_gmf.*, user_mlp.*, item_mlp.*,
  mlp.{0,2,4}.{weight, bias} (Linear 2E->2E, 2E->E, E->E/2, each followed by ReLU),
  predict.{weight [1, E + E/2], bias [1]}.
Sizes are inferred from the weights file.

CLI (torch 1.13, /usr/bin/python3):
  ncf.py --weights W.safetensors --batch B.safetensors --out O.safetensors [--lr 0.001]
W holds every state_dict entry; B holds user, item (i64) and label. O receives: logits [B],
loss [], grad.<param> and after.<param> (after one torch.optim.Adam step with lr, default
betas (0.9, 0.999) and eps 1e-8).
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


class OneHotDense(nn.Module):
    """tf.layers.dense(one_hot(id, V), C, activation=relu) as a gather: ReLU(weight[id] + bias)."""

    def __init__(self, vocab, channels):
        super().__init__()
        r = math.sqrt(6.0 / (vocab + channels))  # tf.glorot_uniform_initializer, bias 0
        self.weight = nn.Parameter(torch.empty(vocab, channels).uniform_(-r, r))
        self.bias = nn.Parameter(torch.zeros(channels))

    def forward(self, idx):
        return F.relu(F.embedding(idx, self.weight) + self.bias)


def glorot_linear(n_in, n_out):
    fc = nn.Linear(n_in, n_out)
    r = math.sqrt(6.0 / (n_in + n_out))
    with torch.no_grad():
        fc.weight.uniform_(-r, r)
        fc.bias.zero_()
    return fc


class Ncf(nn.Module):
    def __init__(self, n_users, n_items, emb=16, mlp_hidden=(32, 16, 8)):
        super().__init__()
        self.user_gmf = OneHotDense(n_users, emb)
        self.item_gmf = OneHotDense(n_items, emb)
        self.user_mlp = OneHotDense(n_users, emb)
        self.item_mlp = OneHotDense(n_items, emb)
        dims = [2 * emb] + list(mlp_hidden)
        layers = []
        for i in range(len(dims) - 1):
            layers += [glorot_linear(dims[i], dims[i + 1]), nn.ReLU()]
        self.mlp = nn.Sequential(*layers)
        self.predict = glorot_linear(emb + dims[-1], 1)

    def forward(self, user, item):
        gmf = self.user_gmf(user) * self.item_gmf(item)
        h = self.mlp(torch.cat([self.user_mlp(user), self.item_mlp(item)], -1))
        return self.predict(torch.cat([gmf, h], -1)).squeeze(-1)

    @staticmethod
    def loss(logits, labels):
        return F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))


def from_state_dict(sd):
    idx = sorted(int(k.split(".")[1]) for k in sd if k.startswith("mlp.") and k.endswith(".weight"))
    hidden = [sd["mlp.%d.weight" % i].shape[0] for i in idx]
    u, e = sd["user_gmf.weight"].shape
    m = Ncf(u, sd["item_gmf.weight"].shape[0], e, hidden)
    m.load_state_dict(sd, strict=True)
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weights", required=True)
    ap.add_argument("--batch", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--lr", type=float, default=0.001)
    a = ap.parse_args()
    m = from_state_dict(st.load(a.weights))
    m.train()
    b = st.load(a.batch)
    logits = m(b["user"], b["item"])
    loss = Ncf.loss(logits, b["label"])
    loss.backward()
    out = {"logits": logits.detach(), "loss": loss.detach()}
    for n, p in m.named_parameters():
        out["grad." + n] = p.grad.clone()
    torch.optim.Adam(m.parameters(), lr=a.lr).step()
    for n, p in m.named_parameters():
        out["after." + n] = p.detach().clone()
    st.save(a.out, out)


if __name__ == "__main__":
    main()
