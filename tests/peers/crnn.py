"""CRNN (MODELS.md §5.1, ShadowNet + 2x BiLSTM + CTC) in PyTorch: the parity peer of aim's
models/crnn.h.

Same attribute names as aim's Crnn, so state_dict keys match one-to-one; sizes are inferred from
the weights file. TF SAME padding: 3x3 stride 1 convs pad 1 on every side; conv7 (2x2, stride
(2, 1)) pads one column on the right only. BN as tf.layers.batch_normalization (eps 1e-3). The LSTM
is torch.nn.LSTM (bidirectional, time-major); the loss TF's mean over the batch of per-sample CTC
losses with the last class as blank (F.ctc_loss reduction='none', zero_infinity=True, then mean).

CLI (torch 1.13, /usr/bin/python3):
  crnn.py --weights W.safetensors --batch B.safetensors --out O.safetensors
W holds every state_dict entry; B holds input [B, 3, 32, 100] f32 (BGR 0..255), label [B, S] i64
(-1 padded), label_length [B] i64.
O receives: logits_eval [25, B, 37] (eval mode), logits_train (training mode, dropout off: batch
statistics), loss [] (training mode), grad.<param> of loss.
"""
import argparse
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
import st  # noqa: E402


class Crnn(nn.Module):
    def __init__(self, channels, hidden, layers, classes, dropout=0.5):
        super().__init__()
        cin = 3
        for i, c in enumerate(channels):
            k = 2 if i == 6 else 3
            conv = nn.Conv2d(cin, c, k, stride=(2, 1) if i == 6 else 1,
                             padding=0 if i == 6 else 1, bias=i < 2)
            setattr(self, "conv%d" % (i + 1), conv)
            setattr(self, "bn%d" % (i + 1), nn.BatchNorm2d(c, eps=1e-3, momentum=0.01))
            cin = c
        self.rnn = nn.LSTM(cin, hidden, num_layers=layers, bidirectional=True)
        self.drop = nn.Dropout(dropout)
        self.fc = nn.Linear(2 * hidden, classes, bias=False)

    def forward(self, x):
        y = x / 255.0
        for i in range(7):
            if i == 6:
                y = F.pad(y, (0, 1, 0, 0))  # TF SAME: W 25, k 2, stride 1 -> one column right
            y = getattr(self, "conv%d" % (i + 1))(y)
            y = F.relu(getattr(self, "bn%d" % (i + 1))(y))
            if i in (0, 1):
                y = F.max_pool2d(y, 2, 2)
            elif i in (3, 5):
                y = F.max_pool2d(y, (2, 1), (2, 1))
        seq = y.squeeze(2).permute(2, 0, 1)  # [T, B, C]
        h, _ = self.rnn(seq)
        return self.fc(self.drop(h))

    def loss(self, logits, label, label_length):
        T, B = logits.shape[0], logits.shape[1]
        lp = F.log_softmax(logits, 2)
        il = torch.full((B,), T, dtype=torch.long)
        return F.ctc_loss(lp, label.clamp(min=0), il, label_length, blank=logits.shape[2] - 1,
                          reduction="none", zero_infinity=True).mean()


def build(w):
    channels = [w["conv%d.weight" % (i + 1)].shape[0] for i in range(7)]
    hidden = w["rnn.weight_hh_l0"].shape[1]
    layers = len([k for k in w if k.startswith("rnn.weight_hh_l") and "reverse" not in k])
    classes = w["fc.weight"].shape[0]
    m = Crnn(channels, hidden, layers, classes)
    m.load_state_dict(w, strict=True)
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weights", required=True)
    ap.add_argument("--batch", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)
    w = st.load(a.weights)
    m = build(w)
    b = st.load(a.batch)
    if w["fc.weight"].dtype == torch.float64:  # the gradient comparison runs in f64
        m.double()
    out = {}
    m.eval()
    with torch.no_grad():
        out["logits_eval"] = m(b["input"])
    m.train()
    m.drop.p = 0.0
    logits = m(b["input"])
    loss = m.loss(logits, b["label"], b["label_length"])
    loss.backward()
    out["logits_train"] = logits.detach()
    out["loss"] = loss.detach()
    for n, p in m.named_parameters():
        out["grad." + n] = p.grad
    st.save(a.out, out)


if __name__ == "__main__":
    main()
