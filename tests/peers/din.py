"""DIN as benchmarked (MODELS.md §4.1) in PyTorch: the parity peer of aim's models/din.h.

Same attribute names as aim's Din, so state_dict keys match one-to-one. Sizes (embedding dim,
MLP widths, act = sigmoid | dice) are inferred from the weights file.

CLI (torch 1.13, /usr/bin/python3):
  din.py --weights W.safetensors --batch B.safetensors --out O.safetensors [--lr 0.1] [--bn-train]
W holds every state_dict entry; B holds item, cate, hist_item, hist_cate (i64), mask (f32), label.
O receives: logits [B], loss [], grad.<param> and after.<param> (after one plain SGD step, lr).
The module runs in training mode (Dice uses batch statistics).
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

BN_EPS = 1e-3  # tf.layers.batch_normalization default


class Dice(nn.Module):
    """Channels-last Dice as aim's layers::Dice: p = sigmoid(BN(x)), y = p x + (1 - p) alpha x."""

    def __init__(self, c, eps=1e-8, momentum=0.1):
        super().__init__()
        self.alpha = nn.Parameter(torch.zeros(c))
        self.register_buffer("running_mean", torch.zeros(c))
        self.register_buffer("running_var", torch.ones(c))
        self.eps, self.momentum = eps, momentum

    def forward(self, x):
        flat = x.reshape(-1, x.shape[-1])
        if self.training:
            mean = flat.mean(0)
            var = flat.var(0, unbiased=False)
            with torch.no_grad():
                n = flat.shape[0]
                self.running_mean.mul_(1 - self.momentum).add_(self.momentum * mean)
                self.running_var.mul_(1 - self.momentum).add_(self.momentum * var * n / max(n - 1, 1))
        else:
            mean, var = self.running_mean, self.running_var
        p = torch.sigmoid((x - mean) / torch.sqrt(var + self.eps))
        return p * x + (1 - p) * self.alpha * x


def make_mlp(dims, act):
    layers = []
    for i in range(len(dims) - 1):
        layers.append(nn.Linear(dims[i], dims[i + 1]))
        if i + 2 < len(dims):
            layers.append(nn.Sigmoid() if act == "sigmoid" else Dice(dims[i + 1]))
    return nn.Sequential(*layers)


class Din(nn.Module):
    def __init__(self, n_mid, n_cat, emb_dim, att_hidden, mlp_hidden, act="sigmoid", bn_train=False):
        super().__init__()
        H = 2 * emb_dim
        self.H, self.bn_train = H, bn_train
        self.item_b = nn.Parameter(torch.zeros(n_mid))
        self.item_emb = nn.Embedding(n_mid, emb_dim)
        self.cate_emb = nn.Embedding(n_cat, emb_dim)
        self.att = make_mlp([4 * H] + list(att_hidden) + [1], act)
        self.hist_bn = nn.BatchNorm1d(H, eps=BN_EPS)
        self.hist_fcn = nn.Linear(H, H)
        self.b1 = nn.BatchNorm1d(2 * H, eps=BN_EPS)
        self.mlp = make_mlp([2 * H] + list(mlp_hidden) + [1], act)

    def bn(self, m, x):
        if self.bn_train:
            return m(x)
        # TF training=False quirk: moving stats stay (0, 1) -> a learned affine.
        return m.weight * x / math.sqrt(1 + BN_EPS) + m.bias

    def forward(self, item, cate, hist_item, hist_cate, mask):
        q = torch.cat([self.item_emb(item), self.cate_emb(cate)], -1)  # [B, H]
        k = torch.cat([self.item_emb(hist_item), self.cate_emb(hist_cate)], -1)  # [B, T, H]
        qe = q.unsqueeze(1).expand_as(k)
        din_all = torch.cat([qe, k, qe - k, qe * k], -1)
        s = self.att(din_all).squeeze(-1)  # [B, T]
        s = torch.where(mask > 0, s, torch.full_like(s, -2.0 ** 32 + 1))
        s = s / math.sqrt(self.H)
        w = torch.softmax(s, 1)
        h = torch.bmm(w.unsqueeze(1), k).squeeze(1)  # [B, H]
        u = self.hist_fcn(self.bn(self.hist_bn, h))
        out = self.mlp(self.bn(self.b1, torch.cat([u, q], -1))).squeeze(-1)
        return out + self.item_b[item]

    @staticmethod
    def loss(logits, labels):
        return F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))


def from_state_dict(sd, bn_train=False):
    def hidden(prefix):
        idx = sorted(int(k.split(".")[1]) for k in sd if k.startswith(prefix + ".") and k.endswith(".weight"))
        return [sd["%s.%d.weight" % (prefix, i)].shape[0] for i in idx][:-1]

    act = "dice" if "att.1.alpha" in sd else "sigmoid"
    m = Din(sd["item_emb.weight"].shape[0], sd["cate_emb.weight"].shape[0], sd["item_emb.weight"].shape[1],
            hidden("att"), hidden("mlp"), act, bn_train)
    m.load_state_dict(sd, strict=True)
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weights", required=True)
    ap.add_argument("--batch", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--bn-train", action="store_true")
    a = ap.parse_args()
    torch.manual_seed(0)
    m = from_state_dict(st.load(a.weights), a.bn_train)
    m.train()
    b = st.load(a.batch)
    logits = m(b["item"], b["cate"], b["hist_item"], b["hist_cate"], b["mask"])
    loss = Din.loss(logits, b["label"])
    loss.backward()
    out = {"logits": logits.detach(), "loss": loss.detach()}
    with torch.no_grad():
        for n, p in m.named_parameters():
            if p.grad is not None:
                out["grad." + n] = p.grad.clone()
                p -= a.lr * p.grad
            out["after." + n] = p.detach().clone()
    st.save(a.out, out)


if __name__ == "__main__":
    main()
