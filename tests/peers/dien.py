"""DIEN as benchmarked (MODELS.md §4.2) in PyTorch: the parity peer of aim's models/dien.h.

Same attribute names as aim's Dien, so state_dict keys match one-to-one; sizes are inferred from
the weights file. The TensorFlow-style GRU (GRUCell: reset gate applied to h before the recurrent
product) and the AUGRU (VecAttGRUCell: update gate scaled by 1 - attention) are written by hand
over per-sequence lengths, as tf.nn.dynamic_rnn runs them: outputs past a sequence's length are 0
and its state stops changing.

CLI (torch 1.13, /usr/bin/python3):
  dien.py --weights W.safetensors --batch B.safetensors --out O.safetensors [--lr 0.001]
W holds every state_dict entry; B holds uid, item, cate [B], hist_item, hist_cate, noclk_item,
noclk_cate [B, T] (i64), mask [B, T] (f32), label [B].
O receives: logits [B, 2], ctr [], aux [], loss [] (= ctr + aux), grad.<param> and after.<param>
(after one torch.optim.Adam step with lr, default betas and eps).
"""
import argparse
import math
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
import st  # noqa: E402

BN_EPS = 1e-3  # tf.layers.batch_normalization default
PROB_EPS = 1e-8  # softmax(...) + 0.00000001


class Dice(nn.Module):
    """The reference's utils.dice: current-batch statistics always."""

    def __init__(self, c, eps=1e-9):
        super().__init__()
        self.alpha = nn.Parameter(torch.zeros(c))
        self.eps = eps

    def forward(self, x):
        dims = list(range(x.dim() - 1))
        mean = x.mean(dims, keepdim=True)
        std = torch.sqrt(((x - mean) ** 2 + self.eps).mean(dims, keepdim=True))
        p = torch.sigmoid((x - mean) / (std + self.eps))
        return self.alpha * (1.0 - p) * x + p * x


class TfGru(nn.Module):
    """One-layer GRU with TF GRUCell math (and AUGRU when att is given); torch parameter names."""

    def __init__(self, i, h):
        super().__init__()
        self.weight_ih_l0 = nn.Parameter(torch.zeros(3 * h, i))
        self.weight_hh_l0 = nn.Parameter(torch.zeros(3 * h, h))
        self.bias_ih_l0 = nn.Parameter(torch.zeros(3 * h))
        self.bias_hh_l0 = nn.Parameter(torch.zeros(3 * h))

    def cell(self, x, h, a=None):
        i_r, i_z, i_n = (x @ self.weight_ih_l0.t() + self.bias_ih_l0).chunk(3, 1)
        w_hr, w_hz, w_hn = self.weight_hh_l0.chunk(3, 0)
        b_hr, b_hz, b_hn = self.bias_hh_l0.chunk(3)
        r = torch.sigmoid(i_r + h @ w_hr.t() + b_hr)
        z = torch.sigmoid(i_z + h @ w_hz.t() + b_hz)
        n = torch.tanh(i_n + (r * h) @ w_hn.t() + b_hn)
        if a is not None:
            z = (1.0 - a.unsqueeze(1)) * z
        return z * h + (1.0 - z) * n

    def forward(self, x, lengths, att=None):
        """x [B, T, I], lengths [B], att [B, T] or None -> outputs [B, T, H], final state [B, H]."""
        B, T = x.shape[0], x.shape[1]
        h = x.new_zeros(B, self.weight_hh_l0.shape[1])
        ys = []
        for t in range(T):
            hn = self.cell(x[:, t], h, att[:, t] if att is not None else None)
            valid = (lengths > t).unsqueeze(1)
            h = torch.where(valid, hn, h)
            ys.append(torch.where(valid, hn, torch.zeros_like(hn)))
        return torch.stack(ys, 1), h


def mlp(dims, act):
    layers = []
    for i in range(len(dims) - 1):
        layers.append(nn.Linear(dims[i], dims[i + 1]))
        if i + 2 < len(dims):
            layers.append(nn.Sigmoid() if act == "sigmoid" else act(dims[i + 1]))
    return nn.Sequential(*layers)


def bn_affine(m, x):
    # TF training=False quirk: moving stats stay (0, 1) -> a learned affine.
    return m.weight * x / math.sqrt(1 + BN_EPS) + m.bias


class Dien(nn.Module):
    def __init__(self, n_uid, n_mid, n_cat, E, H, att_hidden, aux_hidden, mlp_hidden):
        super().__init__()
        D = 2 * E
        self.uid_emb = nn.Embedding(n_uid, E)
        self.mid_emb = nn.Embedding(n_mid, E)
        self.cat_emb = nn.Embedding(n_cat, E)
        self.gru = TfGru(D, H)
        self.aux_bn = nn.BatchNorm1d(H + D, eps=BN_EPS)
        self.aux = mlp([H + D] + aux_hidden + [2], "sigmoid")
        self.att_q = nn.Linear(D, H)
        self.att_prelu = nn.PReLU(H, 0.1)
        self.att = mlp([4 * H] + att_hidden + [1], "sigmoid")
        self.augru = TfGru(H, H)
        n = E + 3 * D + H
        self.bn1 = nn.BatchNorm1d(n, eps=BN_EPS)
        self.f1 = nn.Linear(n, mlp_hidden[0])
        self.dice1 = Dice(mlp_hidden[0])
        self.f2 = nn.Linear(mlp_hidden[0], mlp_hidden[1])
        self.dice2 = Dice(mlp_hidden[1])
        self.f3 = nn.Linear(mlp_hidden[1], 2)

    def item(self, mid, cat):
        return torch.cat([self.mid_emb(mid), self.cat_emb(cat)], -1)

    def forward(self, b):
        mask = b["mask"]
        lengths = (mask > 0).sum(1)
        u = self.uid_emb(b["uid"])
        q = self.item(b["item"], b["cate"])
        e = self.item(b["hist_item"], b["hist_cate"])
        s = e.sum(1)  # unmasked, as the reference
        h, _ = self.gru(e, lengths)
        qa = self.att_prelu(self.att_q(q)).unsqueeze(1).expand_as(h)
        sc = self.att(torch.cat([qa, h, qa - h, qa * h], -1)).squeeze(-1)
        sc = torch.where(mask > 0, sc, torch.full_like(sc, -2.0 ** 32 + 1))
        a = torch.softmax(sc, 1)
        _, f = self.augru(h, lengths, a)
        x = bn_affine(self.bn1, torch.cat([u, q, s, q * s, f], -1))
        logits = self.f3(self.dice2(self.f2(self.dice1(self.f1(x)))))
        return logits, h, e

    def aux_loss(self, b, h, e):
        T = h.shape[1]
        if T < 2:
            return h.new_zeros(())
        neg = self.item(b["noclk_item"], b["noclk_cate"])

        def prob0(nxt):
            x = bn_affine(self.aux_bn, torch.cat([h[:, :-1], nxt[:, 1:]], -1))
            return torch.softmax(self.aux(x), -1)[:, :, 0] + PROB_EPS

        m = b["mask"][:, 1:]
        click = -torch.log(prob0(e)) * m
        noclick = -torch.log(1.0 - prob0(neg)) * m
        return (click + noclick).mean()

    @staticmethod
    def ctr_loss(logits, label):
        y = label.to(logits.dtype)
        target = torch.stack([y, 1 - y], 1)
        return -(torch.log(torch.softmax(logits, 1) + PROB_EPS) * target).mean()


def from_state_dict(sd):
    def hidden(prefix):
        idx = sorted(int(k.split(".")[1]) for k in sd if k.startswith(prefix + ".") and k.endswith(".weight"))
        return [sd["%s.%d.weight" % (prefix, i)].shape[0] for i in idx][:-1]

    E = sd["uid_emb.weight"].shape[1]
    H = sd["gru.weight_hh_l0"].shape[1]
    m = Dien(sd["uid_emb.weight"].shape[0], sd["mid_emb.weight"].shape[0], sd["cat_emb.weight"].shape[0], E, H,
             hidden("att"), hidden("aux"), [sd["f1.weight"].shape[0], sd["f2.weight"].shape[0]])
    m.load_state_dict(sd, strict=True)
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weights", required=True)
    ap.add_argument("--batch", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--lr", type=float, default=0.001)
    a = ap.parse_args()
    torch.manual_seed(0)
    m = from_state_dict(st.load(a.weights))
    m.train()
    b = st.load(a.batch)
    logits, h, e = m(b)
    ctr = Dien.ctr_loss(logits, b["label"])
    aux = m.aux_loss(b, h, e)
    loss = ctr + aux
    loss.backward()
    out = {"logits": logits.detach(), "ctr": ctr.detach(), "aux": aux.detach(), "loss": loss.detach()}
    for n, p in m.named_parameters():
        out["grad." + n] = p.grad.clone() if p.grad is not None else torch.zeros_like(p)
    opt = torch.optim.Adam(m.parameters(), lr=a.lr)
    opt.step()
    for n, p in m.named_parameters():
        out["after." + n] = p.detach().clone()
    st.save(a.out, out)


if __name__ == "__main__":
    main()
