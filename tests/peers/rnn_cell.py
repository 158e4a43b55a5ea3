"""PyTorch peer of aim's rnn_fwd / rnn_bwd (kernels/rnn/rnn.h): one direction of one layer.

CLI (torch 1.13, /usr/bin/python3):
  rnn_cell.py DIR N
reads DIR/in_<k>.safetensors for k < N and writes DIR/out_<k>.safetensors. Each input holds
  cfg [3] i64: cell (0 LSTM, 1 GRU, 2 AUGRU), reverse, linear_before_reset
  x [T, B, I], w_ih [G*H, I], w_hh [G*H, H], b_ih, b_hh [G*H], h0 [B, H], c0 [B, H] (LSTM),
  att [T, B] (AUGRU), lengths [B] i32 (optional), dy [T, B, H], dhn [B, H], dcn [B, H] (LSTM)
all f64. The output holds y [T, B, H] (zero past each length), hn, cn, and the gradients of
  L = sum(y * dy) + sum(hn * dhn) + sum(cn * dcn)
for every input: dx, dh0, dc0, dw_ih, dw_hh, db_ih, db_hh, datt.

LSTM and GRU (linear_before_reset) run through torch.nn.LSTM / torch.nn.GRU with
pack_padded_sequence(enforce_sorted=False); the reverse direction is the reverse half of a
bidirectional module. GRU without linear_before_reset (TensorFlow's GRUCell) and AUGRU (DIEN)
have no torch module: they are written step by step below (autograd for the gradients), with
masks for the lengths; the hand-written GRU with linear_before_reset is checked against
torch.nn.GRU on every GRU case, so the hand-written cell is itself tested.
"""
import os
import sys

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
import st  # noqa: E402

LSTM, GRU, AUGRU = 0, 1, 2


def torch_module(cell, reverse, inp, lengths, x, h0, c0):
    """torch.nn.LSTM / GRU: (y, hn, cn, params by aim's names)."""
    T, B, I = x.shape
    H = inp["w_hh"].shape[1]
    cls = nn.LSTM if cell == LSTM else nn.GRU
    m = cls(I, H, bidirectional=bool(reverse)).double()
    sfx = "_l0_reverse" if reverse else "_l0"
    params = {}
    with torch.no_grad():
        for n in ("w_ih", "w_hh", "b_ih", "b_hh"):
            p = getattr(m, n.replace("w_", "weight_").replace("b_", "bias_") + sfx)
            p.copy_(inp[n])
            params[n] = p
    d = 2 if reverse else 1
    k = 1 if reverse else 0

    def state(s):  # the direction's initial state in slot k, zeros in the other
        full = torch.zeros(d, B, H, dtype=torch.float64)
        full = full.index_copy(0, torch.tensor([k]), s.unsqueeze(0))
        return full

    hx = (state(h0), state(c0)) if cell == LSTM else state(h0)
    if lengths is not None:
        packed = pack_padded_sequence(x, lengths.long(), enforce_sorted=False)
        out, st_ = m(packed, hx)
        out, _ = pad_packed_sequence(out, total_length=T)
    else:
        out, st_ = m(x, hx)
    y = out[:, :, k * H:(k + 1) * H]
    if cell == LSTM:
        return y, st_[0][k], st_[1][k], params
    return y, st_[k], None, params


def handwritten_gru(inp, reverse, lbr, lengths, x, h0, att):
    """GRU / AUGRU step by step: r, z, n in PyTorch's gate order."""
    T, B, _ = x.shape
    H = inp["w_hh"].shape[1]
    params = {n: inp[n].clone().requires_grad_(True) for n in ("w_ih", "w_hh", "b_ih", "b_hh")}
    w_ih, w_hh, b_ih, b_hh = (params[n] for n in ("w_ih", "w_hh", "b_ih", "b_hh"))
    lens = lengths.long() if lengths is not None else torch.full((B,), T, dtype=torch.long)
    h = h0
    ys = [None] * T
    for t in (range(T - 1, -1, -1) if reverse else range(T)):
        gx = x[t] @ w_ih.t() + b_ih
        xr, xz, xn = gx[:, :H], gx[:, H:2 * H], gx[:, 2 * H:]
        hr = h @ w_hh[:H].t() + b_hh[:H]
        hz = h @ w_hh[H:2 * H].t() + b_hh[H:2 * H]
        r = torch.sigmoid(xr + hr)
        z = torch.sigmoid(xz + hz)
        if lbr:
            n = torch.tanh(xn + r * (h @ w_hh[2 * H:].t() + b_hh[2 * H:]))
        else:
            n = torch.tanh(xn + (r * h) @ w_hh[2 * H:].t() + b_hh[2 * H:])
        if att is not None:
            z = (1 - att[t]).unsqueeze(1) * z
        hnew = (1 - z) * n + z * h
        active = (t < lens).unsqueeze(1)
        h = torch.where(active, hnew, h)
        ys[t] = torch.where(active, hnew, torch.zeros_like(hnew))
    return torch.stack(ys), h, None, params


def run_case(inp):
    cell, reverse, lbr = (int(v) for v in inp["cfg"])
    lengths = inp.get("lengths")
    x = inp["x"].clone().requires_grad_(True)
    h0 = inp["h0"].clone().requires_grad_(True)
    c0 = inp["c0"].clone().requires_grad_(True) if cell == LSTM else None
    att = inp["att"].clone().requires_grad_(True) if cell == AUGRU else None
    if cell == AUGRU or (cell == GRU and not lbr):
        y, hn, cn, params = handwritten_gru(inp, reverse, lbr, lengths, x, h0, att)
    else:
        y, hn, cn, params = torch_module(cell, reverse, inp, lengths, x, h0, c0)
        if cell == GRU:  # the hand-written cell must agree with torch.nn.GRU
            y2, hn2, _, _ = handwritten_gru(inp, reverse, True, lengths, x, h0, None)
            err = max((y - y2).abs().max().item(), (hn - hn2).abs().max().item())
            if err > 1e-12:
                sys.exit("rnn_cell.py: hand-written GRU differs from torch.nn.GRU by %g" % err)
    loss = (y * inp["dy"]).sum() + (hn * inp["dhn"]).sum()
    if cell == LSTM:
        loss = loss + (cn * inp["dcn"]).sum()
    wrt = {"dx": x, "dh0": h0}
    wrt.update({"d" + n: p for n, p in params.items()})
    if cell == LSTM:
        wrt["dc0"] = c0
    if cell == AUGRU:
        wrt["datt"] = att
    grads = torch.autograd.grad(loss, list(wrt.values()))
    out = {"y": y, "hn": hn}
    if cell == LSTM:
        out["cn"] = cn
    out.update({n: g for n, g in zip(wrt.keys(), grads)})
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: rnn_cell.py DIR N")
    d, n = sys.argv[1], int(sys.argv[2])
    for k in range(n):
        inp = st.load(os.path.join(d, "in_%d.safetensors" % k))
        st.save(os.path.join(d, "out_%d.safetensors" % k), run_case(inp))


if __name__ == "__main__":
    main()
