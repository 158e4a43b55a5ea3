"""PyTorch peer of aim's recurrent layers and EmbeddingBag (layers/rnn.h, layers/embedding_bag.h).

CLI (torch 1.13, /usr/bin/python3):
  rnn_layers.py --cases CASES.json --in IN.safetensors --out OUT.safetensors

CASES.json is a list of cases, each {"name": N, "kind": K, ...}; IN holds each case's tensors
under "N.<key>", OUT receives its results under "N.<key>". Every case computes
loss = sum(output * r_out) (+ sum(h_n * r_h) + sum(c_n * r_c)) and writes the forward outputs and
the gradient of every parameter ("grad.<param>") and every differentiable input ("grad.x", ...).

kind "lstm", "gru": torch.nn.LSTM / torch.nn.GRU with the case's num_layers, bidirectional,
  batch_first and bias, weights "p.<torch name>"; with "lengths" (i64 [B]) the input goes
  through pack_padded_sequence(enforce_sorted=False) and pad_packed_sequence(total_length=T).
  Optional "h0" (and "c0") [L*D, B, H].
kind "gru_tf": the same stack written by hand with TensorFlow's GRUCell
  (n = tanh(W_in x + b_in + W_hn (r*h) + b_hn)), since torch has no such cell.
kind "augru": DIEN's AUGRU as kernels/rnn/rnn.h defines it (a GRU cell, TensorFlow style unless
  "linear_before_reset" is set, with z' = (1 - a) z), one layer, one direction; "att" is [T, B]
  ([B, T] when batch_first); h_n is [B, H].
kind "embedding_bag": torch.nn.EmbeddingBag(mode, padding_idx, include_last_offset) on "input"
  with optional "offsets" and "per_sample_weights".
"""
import argparse
import json
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
import st  # noqa: E402


def gru_cell(x, h, w_ih, w_hh, b_ih, b_hh, lbr, a=None):
    gi = x @ w_ih.t()
    if b_ih is not None:
        gi = gi + b_ih
    i_r, i_z, i_n = gi.chunk(3, 1)
    w_hr, w_hz, w_hn = w_hh.chunk(3, 0)
    b_hr, b_hz, b_hn = b_hh.chunk(3) if b_hh is not None else (0.0, 0.0, 0.0)
    r = torch.sigmoid(i_r + h @ w_hr.t() + b_hr)
    z = torch.sigmoid(i_z + h @ w_hz.t() + b_hz)
    if lbr:
        n = torch.tanh(i_n + r * (h @ w_hn.t() + b_hn))
    else:
        n = torch.tanh(i_n + (r * h) @ w_hn.t() + b_hn)
    if a is not None:
        z = (1 - a.unsqueeze(1)) * z
    return (1 - z) * n + z * h


def run_direction(x, lengths, h, w, lbr, reverse, att=None):
    """One direction over x [T, B, I] with per-sequence lengths: steps s = 0..len-1 visit
    t = s (or len-1-s); outputs past the length are 0 and h stops changing."""
    T, B = x.shape[0], x.shape[1]
    bidx = torch.arange(B)
    y = x.new_zeros(T, B, h.shape[1])
    for s in range(T):
        valid = lengths > s
        t = (lengths - 1 - s) if reverse else torch.full((B,), s, dtype=torch.long)
        t = t.clamp(min=0)
        a = att[t, bidx] if att is not None else None
        hn = gru_cell(x[t, bidx], h, *w, lbr, a)
        h = torch.where(valid.unsqueeze(1), hn, h)
        y = y.index_put((t[valid], bidx[valid]), hn[valid])
    return y, h


def tf_gru_stack(case, p, x, lengths, h0):
    L, D = case["num_layers"], 2 if case["bidirectional"] else 1
    T, B = x.shape[0], x.shape[1]
    H = p["weight_hh_l0"].shape[1]
    if lengths is None:
        lengths = torch.full((B,), T, dtype=torch.long)
    inp, hs = x, []
    for k in range(L):
        ys = []
        for d in range(D):
            sfx = "_l%d%s" % (k, "_reverse" if d else "")
            w = (p["weight_ih" + sfx], p["weight_hh" + sfx], p.get("bias_ih" + sfx), p.get("bias_hh" + sfx))
            h = h0[k * D + d] if h0 is not None else x.new_zeros(B, H)
            y, hn = run_direction(inp, lengths, h, w, False, d == 1)
            ys.append(y)
            hs.append(hn)
        inp = torch.cat(ys, 2)
    return inp, torch.stack(hs, 0)


def run_rnn(case, t, out):
    name, kind = case["name"], case["kind"]
    p = {k[2:]: v.requires_grad_() for k, v in t.items() if k.startswith("p.")}
    x = t["x"].requires_grad_()
    lengths = t.get("lengths")
    h0 = t["h0"].requires_grad_() if "h0" in t else None
    c0 = t["c0"].requires_grad_() if "c0" in t else None
    bf = case["batch_first"]
    inputs = {"x": x, "h0": h0, "c0": c0}
    c_n = None
    if kind in ("lstm", "gru"):
        I, H = x.shape[2], case["hidden_size"]
        cls = nn.LSTM if kind == "lstm" else nn.GRU
        m = cls(I, H, num_layers=case["num_layers"], bias=case["bias"], batch_first=bf,
                bidirectional=case["bidirectional"])
        m.load_state_dict({n: v.detach() for n, v in p.items()})
        p = dict(m.named_parameters())
        state = None
        if h0 is not None:
            state = (h0, c0) if kind == "lstm" else h0
        if lengths is not None:
            T = x.shape[1] if bf else x.shape[0]
            packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=bf, enforce_sorted=False)
            y, st_n = m(packed, state)
            y, _ = nn.utils.rnn.pad_packed_sequence(y, batch_first=bf, total_length=T)
        else:
            y, st_n = m(x, state)
        h_n, c_n = st_n if kind == "lstm" else (st_n, None)
    elif kind == "gru_tf":
        xt = x.transpose(0, 1) if bf else x
        y, h_n = tf_gru_stack(case, p, xt, lengths, h0)
        if bf:
            y = y.transpose(0, 1)
    elif kind == "augru":
        att = t["att"].requires_grad_()
        inputs["att"] = att
        xt, at = (x.transpose(0, 1), att.t()) if bf else (x, att)
        T, B = xt.shape[0], xt.shape[1]
        H = p["weight_hh_l0"].shape[1]
        lens = lengths if lengths is not None else torch.full((B,), T, dtype=torch.long)
        w = (p["weight_ih_l0"], p["weight_hh_l0"], p.get("bias_ih_l0"), p.get("bias_hh_l0"))
        h = h0 if h0 is not None else xt.new_zeros(B, H)
        y, h_n = run_direction(xt, lens, h, w, case["linear_before_reset"], False, at)
        if bf:
            y = y.transpose(0, 1)
    else:
        raise SystemExit("rnn_layers.py: unknown rnn kind %r in case %s" % (kind, name))
    loss = (y * t["r_out"]).sum() + (h_n * t["r_h"]).sum()
    if c_n is not None:
        loss = loss + (c_n * t["r_c"]).sum()
    loss.backward()
    out[name + ".output"] = y
    out[name + ".h_n"] = h_n
    if c_n is not None:
        out[name + ".c_n"] = c_n
    for n, q in p.items():
        out[name + ".grad." + n] = q.grad
    for n, v in inputs.items():
        if v is not None:
            out[name + ".grad." + n] = v.grad


def run_bag(case, t, out):
    name = case["name"]
    w = t["weight"]
    m = nn.EmbeddingBag(w.shape[0], w.shape[1], mode=case["mode"], padding_idx=case.get("padding_idx"),
                        include_last_offset=case.get("include_last_offset", False))
    with torch.no_grad():
        m.weight.copy_(w)
    psw = t["per_sample_weights"].requires_grad_() if "per_sample_weights" in t else None
    y = m(t["input"], t.get("offsets"), per_sample_weights=psw)
    (y * t["r_out"]).sum().backward()
    out[name + ".output"] = y
    out[name + ".grad.weight"] = m.weight.grad
    if psw is not None:
        out[name + ".grad.per_sample_weights"] = psw.grad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", required=True)
    ap.add_argument("--in", dest="inp", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.manual_seed(0)
    with open(args.cases) as f:
        cases = json.load(f)
    tensors = st.load(args.inp)
    out = {}
    for case in cases:
        prefix = case["name"] + "."
        t = {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}
        if case["kind"] == "embedding_bag":
            run_bag(case, t, out)
        else:
            run_rnn(case, t, out)
    st.save(args.out, out)


if __name__ == "__main__":
    main()
