"""DeepSpeech (MODELS.md §3.3) in PyTorch: the parity peer of aim's models/deepspeech.h.

The front end written from the formulas with torch.fft (no torchaudio on this machine):
pre-emphasis p[0] = x[0], p[i] = x[i] - 0.97 x[i-1]; frames of 400 every 160 samples (unfold);
periodic Hamming window (torch.hamming_window); torch.fft.rfft(n=512); |X|^2; the HTK mel
filterbank exactly as torchaudio.functional.melscale_fbanks(257, 0, 8000, 26, 16000, None, "htk")
computes it; log(clamp(., 1e-4)); orthonormal DCT-II (torchaudio.functional.create_dct(26, 26,
"ortho")) times HTK's lifter 1 + 11 sin(pi k / 22); then per-utterance whitening over the
sample's own frames, (x - mean) / (std + 1e-5), 0 past them. As a second, independent check of framing,
window and FFT, the power spectrum is also taken with torch.stft (center=False; the 400-sample
window sits at offset 56 of each 512-point frame, so the signal is shifted by 56 zeros).
Network: 9 frames of context each side (zero padded), fc1..fc3 Linear + clamp(0, 20),
bidirectional nn.LSTM over packed sequences (the frames of each sample), fc5 + clamp, fc6.
Loss: F.ctc_loss(reduction='none', zero_infinity=True, blank = last class).mean().

CLI (torch 1.13, /usr/bin/python3):
  deepspeech.py --weights W.safetensors --batch B.safetensors --out O.safetensors
W: every state_dict entry; B: audio [B, L] (f32 or f64; the weights' dtype is used), audio_length
[B] i64, label [B, S] i64 (-1 padded), label_length [B] i64.
O: features [B, T, 26], power [B, T, 257], power_stft [B, T', 257] (T' <= T frames that fit
torch.stft), logits [T, B, 29] (all frames, no lengths), logits_len (with lengths), loss [],
grad.<param> of loss.
"""
import argparse
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
import st  # noqa: E402

SR, N, HOP, NFFT, MELS, MFCC, LIFTER, FLOOR, CTX, PRE = 16000, 400, 160, 512, 26, 26, 22, 1e-4, 9, 0.97


def melscale_fbanks(n_freqs, f_min, f_max, n_mels, sr):
    # torchaudio 0.13 melscale_fbanks, mel_scale="htk", norm=None
    all_freqs = np.linspace(0, sr // 2, n_freqs)
    m_min = 2595.0 * np.log10(1.0 + f_min / 700.0)
    m_max = 2595.0 * np.log10(1.0 + f_max / 700.0)
    m_pts = np.linspace(m_min, m_max, n_mels + 2)
    f_pts = 700.0 * (10 ** (m_pts / 2595.0) - 1.0)
    f_diff = f_pts[1:] - f_pts[:-1]
    slopes = f_pts[None, :] - all_freqs[:, None]
    down = -slopes[:, :-2] / f_diff[:-1]
    up = slopes[:, 2:] / f_diff[1:]
    return np.maximum(0.0, np.minimum(down, up))  # [n_freqs, n_mels]


def dct_matrix(n_mfcc, n_mels):
    # torchaudio create_dct(norm="ortho"): [n_mels, n_mfcc]
    n = np.arange(n_mels)
    k = np.arange(n_mfcc)[:, None]
    d = np.cos(math.pi / n_mels * (n + 0.5) * k)
    d[0] *= 1.0 / math.sqrt(2.0)
    d *= math.sqrt(2.0 / n_mels)
    lift = 1 + (LIFTER / 2.0) * np.sin(math.pi * np.arange(n_mfcc) / LIFTER)
    return (d * lift[:, None]).T


def preemphasis(x):
    return torch.cat([x[:, :1], x[:, 1:] - PRE * x[:, :-1]], 1)


def power_frames(x):
    p = preemphasis(x)
    frames = p.unfold(1, N, HOP) * torch.hamming_window(N, periodic=True, dtype=x.dtype)
    X = torch.fft.rfft(frames, n=NFFT)
    return X.real ** 2 + X.imag ** 2  # [B, T, 257]


def power_stft(x):
    p = torch.cat([torch.zeros(x.shape[0], (NFFT - N) // 2, dtype=x.dtype), preemphasis(x)], 1)
    X = torch.stft(p, NFFT, HOP, N, torch.hamming_window(N, periodic=True, dtype=x.dtype),
                   center=False, return_complex=True)  # [B, 257, T']
    return (X.abs() ** 2).transpose(1, 2)


def features(x, frames=None):
    fb = torch.tensor(melscale_fbanks(NFFT // 2 + 1, 0.0, SR / 2, MELS, SR), dtype=x.dtype)
    mel = torch.log(torch.clamp(power_frames(x) @ fb, min=FLOOR))
    f = mel @ torch.tensor(dct_matrix(MFCC, MELS), dtype=x.dtype)  # [B, T, 26]
    # per-utterance whitening over the sample's own frames; 0 past them
    B, T, K = f.shape
    if frames is None:
        frames = torch.full((B,), T, dtype=torch.long)
    mask = (torch.arange(T)[None, :] < frames[:, None]).to(x.dtype)[:, :, None]
    n = (torch.clamp(frames, min=1) * K).to(x.dtype)[:, None, None]
    mean = (f * mask).sum((1, 2), keepdim=True) / n
    c = (f - mean) * mask
    sd = torch.sqrt((c * c).sum((1, 2), keepdim=True) / n)
    return c / (sd + 1e-5)


class DeepSpeech(nn.Module):
    def __init__(self, hidden, rnn_hidden, classes):
        super().__init__()
        self.fc1 = nn.Linear(MFCC * (2 * CTX + 1), hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, hidden)
        self.lstm = nn.LSTM(hidden, rnn_hidden, bidirectional=True)
        self.fc5 = nn.Linear(2 * rnn_hidden, hidden)
        self.fc6 = nn.Linear(hidden, classes)

    def forward(self, feats, lengths=None):
        B, T, C = feats.shape
        padded = F.pad(feats, (0, 0, CTX, CTX))                      # [B, T + 2c, 26]
        ctx = padded.unfold(1, 2 * CTX + 1, 1).permute(0, 1, 3, 2)  # [B, T, 19, 26]
        h = ctx.reshape(B, T, -1).transpose(0, 1)                   # [T, B, 494]
        h = torch.clamp(self.fc1(h), 0, 20)
        h = torch.clamp(self.fc2(h), 0, 20)
        h = torch.clamp(self.fc3(h), 0, 20)
        if lengths is None:
            h, _ = self.lstm(h)
        else:
            packed = nn.utils.rnn.pack_padded_sequence(h, lengths, enforce_sorted=False)
            h, _ = self.lstm(packed)
            h, _ = nn.utils.rnn.pad_packed_sequence(h, total_length=T)
        h = torch.clamp(self.fc5(h), 0, 20)
        return self.fc6(h)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weights", required=True)
    ap.add_argument("--batch", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)
    w = st.load(a.weights)
    b = st.load(a.batch)
    m = DeepSpeech(w["fc1.weight"].shape[0], w["lstm.weight_hh_l0"].shape[1],
                   w["fc6.weight"].shape[0])
    m.load_state_dict(w, strict=True)
    dt = w["fc1.weight"].dtype
    m.to(dt)
    x = b["audio"].to(dt)
    out = {}
    frames = torch.clamp((b["audio_length"] - N) // HOP + 1, min=0)
    feats = features(x, frames)
    out["features"] = feats
    out["power"] = power_frames(x)
    out["power_stft"] = power_stft(x)
    with torch.no_grad():
        out["logits"] = m(features(x))
    logits = m(feats, frames)
    lp = F.log_softmax(logits, 2)
    loss = F.ctc_loss(lp, b["label"].clamp(min=0), frames, b["label_length"],
                      blank=logits.shape[2] - 1, reduction="none", zero_infinity=True).mean()
    loss.backward()
    out["logits_len"] = logits.detach()
    out["loss"] = loss.detach()
    for n, p in m.named_parameters():
        out["grad." + n] = p.grad
    st.save(a.out, out)


if __name__ == "__main__":
    main()
