"""GNMT v2 (MODELS.md §3.2: TF NMT's gnmt encoder, gnmt_v2 attention, normed Bahdanau) in
PyTorch: the parity peer of aim's models/nmt.h, and a transcription of its beam search.

Same attribute names as aim's Nmt, so state_dict keys match one-to-one; sizes are inferred from the
weights file. Every LSTM is torch.nn.LSTM run on packed sequences (pack_padded_sequence), so steps
past a length leave the state unchanged; decoder layer 0 runs one step at a time (its input holds
the previous step's attention context), a step past the target length keeps its state and gives a
zero output, as aim's kernels with lengths.

CLI (torch 1.13, /usr/bin/python3):
  nmt.py --weights W.safetensors --batch B.safetensors --out O.safetensors [--label-smoothing X]
         [--beam-width K --length-penalty A --coverage-penalty C --max-length N]
W holds every state_dict entry; B holds source [B, S], source_length [B], target_input [B, T],
target_output [B, T], target_length [B] (i64).
O receives: logits [T, B, V] and loss [] (teacher forcing, no dropout), grad.<param> of loss;
greedy [B, L] and beam [B, L] (i64, -1 padded) when --beam-width is given.
"""
import argparse
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
import st  # noqa: E402

SOS, EOS = 1, 2


class Attention(nn.Module):
    """TF BahdanauAttention(normalize=True): score = g v/||v|| . tanh(keys + W2 q + b)."""

    def __init__(self, H):
        super().__init__()
        self.memory_layer = nn.Linear(H, H, bias=False)
        self.query_layer = nn.Linear(H, H, bias=False)
        self.v = nn.Parameter(torch.zeros(H))
        self.g = nn.Parameter(torch.zeros(1))
        self.b = nn.Parameter(torch.zeros(H))

    def forward(self, keys, q, memory, mask):
        nv = self.g * self.v / self.v.norm()
        e = (nv * torch.tanh(keys + self.query_layer(q)[:, None] + self.b)).sum(-1)
        a = torch.softmax(e.masked_fill(~mask, float("-inf")), -1)
        ctx = torch.bmm(a[:, None], memory)[:, 0]
        return ctx, a


def run_lstm(lstm, x, lengths, h0=None, c0=None):
    packed = pack_padded_sequence(x, lengths, enforce_sorted=False)
    state = None if h0 is None else (h0[None].contiguous(), c0[None].contiguous())
    out, (hn, cn) = lstm(packed, state)
    out, _ = pad_packed_sequence(out, total_length=x.shape[0])
    return out, hn, cn


class Gnmt(nn.Module):
    def __init__(self, H, Vs, Vt, L, share):
        super().__init__()
        self.L, self.share = L, share
        self.encoder_embedding = nn.Embedding(Vs, H)
        if not share:
            self.decoder_embedding = nn.Embedding(Vt, H)
        self.encoder_bi = nn.LSTM(H, H, bidirectional=True)
        for l in range(1, L):
            setattr(self, "encoder_rnn%d" % l, nn.LSTM(2 * H if l == 1 else H, H))
        self.attention = Attention(H)
        for l in range(L):
            setattr(self, "decoder_rnn%d" % l, nn.LSTM(2 * H, H))
        self.output_projection = nn.Linear(H, Vt, bias=False)

    def residual(self, l):
        return l >= self.L - max(self.L - 2, 0)

    def tgt_emb(self, x):
        return (self.encoder_embedding if self.share else self.decoder_embedding)(x)

    def encode(self, src, slen):
        emb = self.encoder_embedding(src.t())
        o, hn, cn = run_lstm(self.encoder_bi, emb, slen)
        hs, cs = [hn[1]], [cn[1]]
        x = o
        for l in range(1, self.L):
            u, hn, cn = run_lstm(getattr(self, "encoder_rnn%d" % l), x, slen)
            x = u + x if self.residual(l) else u
            hs.append(hn[0])
            cs.append(cn[0])
        memory = x.transpose(0, 1)
        keys = self.attention.memory_layer(memory)
        mask = torch.arange(src.shape[1])[None] < slen[:, None]
        ctx = torch.zeros(src.shape[0], memory.shape[2], dtype=memory.dtype)
        return dict(memory=memory, keys=keys, mask=mask, h=hs, c=cs, ctx=ctx)

    def decode_train(self, enc, tin, tlen):
        emb = self.tgt_emb(tin.t())
        T = tin.shape[1]
        h, c, ctx = enc["h"][0], enc["c"][0], enc["ctx"]
        ys, ctxs = [], []
        lstm0 = self.decoder_rnn0
        for t in range(T):
            x = torch.cat([emb[t], ctx], 1)
            y, (h2, c2) = lstm0(x[None], (h[None], c[None]))
            m = (t < tlen)[:, None]
            h, c = torch.where(m, h2[0], h), torch.where(m, c2[0], c)
            y = y[0] * m
            ctx, _ = self.attention(enc["keys"], y, enc["memory"], enc["mask"])
            ys.append(y)
            ctxs.append(ctx)
        x, context = torch.stack(ys), torch.stack(ctxs)
        for l in range(1, self.L):
            o, _, _ = run_lstm(getattr(self, "decoder_rnn%d" % l), torch.cat([x, context], 2),
                               tlen, enc["h"][l], enc["c"][l])
            x = o + x if self.residual(l) else o
        return self.output_projection(x)

    def decode_step(self, enc, tokens, st):
        emb = self.tgt_emb(tokens)
        y, (h, c) = self.decoder_rnn0(torch.cat([emb, st["ctx"]], 1)[None],
                                      (st["h"][0][None], st["c"][0][None]))
        y = y[0]
        st["h"][0], st["c"][0] = h[0], c[0]
        st["ctx"], st["align"] = self.attention(enc["keys"], y, enc["memory"], enc["mask"])
        for l in range(1, self.L):
            o, (h, c) = getattr(self, "decoder_rnn%d" % l)(
                torch.cat([y, st["ctx"]], 1)[None], (st["h"][l][None], st["c"][l][None]))
            st["h"][l], st["c"][l] = h[0], c[0]
            y = o[0] + y if self.residual(l) else o[0]
        return self.output_projection(y)


def loss_of(logits, tout, tlen, label_smoothing):
    T, B, V = logits.shape
    tgt = tout.t().clone()
    tgt[torch.arange(T)[:, None] >= tlen[None]] = -100
    ce = F.cross_entropy(logits.reshape(T * B, V), tgt.reshape(-1), reduction="sum",
                         ignore_index=-100, label_smoothing=label_smoothing)
    return ce / B


def take_rows(enc, rows):
    st = {"h": [h[rows] for h in enc["h"]], "c": [c[rows] for c in enc["c"]],
          "ctx": enc["ctx"][rows]}
    e = {"memory": enc["memory"][rows], "keys": enc["keys"][rows], "mask": enc["mask"][rows]}
    return e, st


def greedy(m, src, slen, limit):
    enc = m.encode(src, slen)
    B = src.shape[0]
    e, st = take_rows(enc, torch.arange(B))
    tokens = torch.full((B,), SOS, dtype=torch.long)
    out, done = [[] for _ in range(B)], [False] * B
    for _ in range(limit):
        logits = m.decode_step(e, tokens, st)
        tokens = logits.argmax(1)  # first maximum
        for b in range(B):
            if not done[b]:
                if tokens[b].item() == EOS:
                    done[b] = True
                else:
                    out[b].append(tokens[b].item())
        if all(done):
            break
    return out


def beam_search(m, src, slen, K, alpha, beta, limit):
    """TF BeamSearchDecoder's step (aim's models/nmt_search.cpp states the rules)."""
    enc = m.encode(src, slen)
    B, S = src.shape
    N = B * K
    e, st = take_rows(enc, torch.arange(N) // K)
    inf = float("inf")
    tokens = [SOS] * N
    lengths = [0] * N
    logp = [0.0 if i % K == 0 else -inf for i in range(N)]
    finished = [False] * N
    hist = [[] for _ in range(N)]
    acc = torch.zeros(N, S, dtype=torch.float64)
    pen = lambda n: ((5.0 + n) / 6.0) ** alpha  # noqa: E731
    for _ in range(limit):
        lp = F.log_softmax(m.decode_step(e, torch.tensor(tokens), st).double(), 1).tolist()
        cov = [0.0] * N
        if beta != 0:
            acc = acc + st["align"].double()
            for i in range(N):
                c = sum(math.log(min(x, 1.0)) for x in acc[i].tolist() if x != 0)
                cov[i] = beta * c if finished[i] else 0.0
        rows, nt, nl, nlp, nf, nh = [], [], [], [], [], []
        V = len(lp[0])
        for b in range(B):
            cands = []
            for k in range(K):
                i = b * K + k
                for v in range(V):
                    step = (0.0 if v == EOS else -inf) if finished[i] else lp[i][v]
                    tot = logp[i] + step
                    ln = lengths[i] + (1 if (not finished[i] and v != EOS) else 0)
                    cands.append((-(tot / pen(ln) + cov[i]), k * V + v, tot))
            cands.sort(key=lambda x: (x[0], x[1]))
            for k in range(K):
                _, w, tot = cands[k]
                parent, tok = b * K + w // V, w % V
                rows.append(parent)
                nt.append(tok)
                nlp.append(tot)
                nl.append(lengths[parent] + (0 if finished[parent] else 1))
                nf.append(finished[parent] or tok == EOS)
                nh.append(hist[parent] + [tok])
        r = torch.tensor(rows)
        acc = acc[r]
        st["h"] = [h[r] for h in st["h"]]
        st["c"] = [c[r] for c in st["c"]]
        st["ctx"] = st["ctx"][r]
        tokens, lengths, logp, finished, hist = nt, nl, nlp, nf, nh
        if all(finished):
            break
    out = []
    for b in range(B):
        s = []
        for t in hist[b * K]:
            if t == EOS:
                break
            s.append(t)
        out.append(s)
    return out


def padded(seqs):
    L = max(1, max(len(s) for s in seqs))
    t = torch.full((len(seqs), L), -1, dtype=torch.long)
    for i, s in enumerate(seqs):
        t[i, :len(s)] = torch.tensor(s, dtype=torch.long)
    return t


def build(w):
    H = w["encoder_bi.weight_hh_l0"].shape[1]
    share = "decoder_embedding.weight" not in w
    Vs = w["encoder_embedding.weight"].shape[0]
    Vt = w["output_projection.weight"].shape[0]
    L = len([k for k in w if k.startswith("decoder_rnn") and k.endswith("weight_hh_l0")])
    m = Gnmt(H, Vs, Vt, L, share)
    m.load_state_dict(w, strict=True)
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weights", required=True)
    ap.add_argument("--batch", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--label-smoothing", type=float, default=0.0)
    ap.add_argument("--beam-width", type=int, default=0)
    ap.add_argument("--length-penalty", type=float, default=1.0)
    ap.add_argument("--coverage-penalty", type=float, default=0.0)
    ap.add_argument("--max-length", type=int, default=0)
    a = ap.parse_args()
    torch.set_num_threads(1)
    w = st.load(a.weights)
    m = build(w)
    if w["output_projection.weight"].dtype == torch.float64:
        m.double()
    b = st.load(a.batch)
    out = {}
    enc = m.encode(b["source"], b["source_length"])
    logits = m.decode_train(enc, b["target_input"], b["target_length"])
    loss = loss_of(logits, b["target_output"], b["target_length"], a.label_smoothing)
    loss.backward()
    out["logits"] = logits.detach()
    out["loss"] = loss.detach()
    for n, p in m.named_parameters():
        out["grad." + n] = p.grad
    if a.beam_width > 0:
        limit = a.max_length or 2 * int(b["source_length"].max())
        with torch.no_grad():
            out["greedy"] = padded(greedy(m, b["source"], b["source_length"], limit))
            out["beam"] = padded(beam_search(m, b["source"], b["source_length"], a.beam_width,
                                             a.length_penalty, a.coverage_penalty, limit))
    st.save(a.out, out)


if __name__ == "__main__":
    main()
