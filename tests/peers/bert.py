"""BERT in PyTorch with Hugging Face's module layout and parameter names (BertModel and the
BertForQuestionAnswering / BertForPreTraining / BertForSequenceClassification heads): the parity
peer of aim's models/bert.h. Written here over torch 1.13 (Debian has no `transformers`); the
structure and the names follow transformers' modeling_bert.py, so a state dict moves between the
two with the same keys (BertForPreTraining's tied `cls.predictions.decoder.*` entries are the
word embeddings and `cls.predictions.bias`, not separate tensors).

CLI (/usr/bin/python3):
  bert.py --weights W.safetensors --batch B.safetensors --out O.safetensors --task T --heads NH
          [--eps 1e-12] [--gelu erf|tanh]
Sizes come from the weights. B holds input_ids, token_type_ids, attention_mask [B, T] i64 and the
task's labels. O receives the eval-mode outputs (Hugging Face's names), `loss` in training mode
with dropout 0, and grad.<param> of that loss for every parameter.
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


class Cfg:
    def __init__(self, w, heads, eps, gelu):
        self.vocab, self.hidden = w["bert.embeddings.word_embeddings.weight"].shape
        self.max_position = w["bert.embeddings.position_embeddings.weight"].shape[0]
        self.type_vocab = w["bert.embeddings.token_type_embeddings.weight"].shape[0]
        self.layers = len({k.split(".")[3] for k in w if k.startswith("bert.encoder.layer.")})
        self.intermediate = w["bert.encoder.layer.0.intermediate.dense.weight"].shape[0]
        self.heads, self.eps, self.gelu = heads, eps, gelu


def act(cfg, x):
    return F.gelu(x, approximate="tanh" if cfg.gelu == "tanh" else "none")


class BertEmbeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word_embeddings = nn.Embedding(c.vocab, c.hidden, padding_idx=0)
        self.position_embeddings = nn.Embedding(c.max_position, c.hidden)
        self.token_type_embeddings = nn.Embedding(c.type_vocab, c.hidden)
        self.LayerNorm = nn.LayerNorm(c.hidden, eps=c.eps)
        self.dropout = nn.Dropout(0.0)

    def forward(self, ids, types):
        pos = torch.arange(ids.shape[1]).unsqueeze(0)
        e = self.word_embeddings(ids) + self.token_type_embeddings(types) + self.position_embeddings(pos)
        return self.dropout(self.LayerNorm(e))


class BertSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.nh, self.hs = c.heads, c.hidden // c.heads
        self.query = nn.Linear(c.hidden, c.hidden)
        self.key = nn.Linear(c.hidden, c.hidden)
        self.value = nn.Linear(c.hidden, c.hidden)
        self.dropout = nn.Dropout(0.0)

    def split(self, x):
        return x.view(x.shape[0], x.shape[1], self.nh, self.hs).permute(0, 2, 1, 3)

    def forward(self, h, mask):
        q, k, v = self.split(self.query(h)), self.split(self.key(h)), self.split(self.value(h))
        s = q @ k.transpose(-1, -2) / math.sqrt(self.hs) + mask
        p = self.dropout(F.softmax(s, dim=-1))
        ctx = (p @ v).permute(0, 2, 1, 3).contiguous()
        return ctx.view(ctx.shape[0], ctx.shape[1], -1)


class DenseNorm(nn.Module):  # BertSelfOutput / BertOutput
    def __init__(self, c, din):
        super().__init__()
        self.dense = nn.Linear(din, c.hidden)
        self.LayerNorm = nn.LayerNorm(c.hidden, eps=c.eps)
        self.dropout = nn.Dropout(0.0)

    def forward(self, x, residual):
        return self.LayerNorm(self.dropout(self.dense(x)) + residual)


class BertAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self = BertSelfAttention(c)
        self.output = DenseNorm(c, c.hidden)

    def forward(self, h, mask):
        return self.output(self.self(h, mask), h)


class BertIntermediate(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.dense = nn.Linear(c.hidden, c.intermediate)

    def forward(self, x):
        return act(self.c, self.dense(x))


class BertLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = BertAttention(c)
        self.intermediate = BertIntermediate(c)
        self.output = DenseNorm(c, c.intermediate)

    def forward(self, h, mask):
        a = self.attention(h, mask)
        return self.output(self.intermediate(a), a)


class BertEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.layer = nn.ModuleList([BertLayer(c) for _ in range(c.layers)])

    def forward(self, h, mask):
        for l in self.layer:
            h = l(h, mask)
        return h


class BertPooler(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.hidden, c.hidden)

    def forward(self, h):
        return torch.tanh(self.dense(h[:, 0]))


class BertModel(nn.Module):
    def __init__(self, c, pooler):
        super().__init__()
        self.embeddings = BertEmbeddings(c)
        self.encoder = BertEncoder(c)
        self.pooler = BertPooler(c) if pooler else None

    def forward(self, ids, types, attention_mask, dtype):
        mask = (1.0 - attention_mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min
        return self.encoder(self.embeddings(ids, types), mask)


class BertForTask(nn.Module):
    def __init__(self, c, task, num_labels=2):
        super().__init__()
        self.c, self.task = c, task
        self.bert = BertModel(c, pooler=task != "squad")
        if task == "squad":
            self.qa_outputs = nn.Linear(c.hidden, 2)
        elif task == "pretrain":
            self.cls = nn.Module()
            self.cls.predictions = nn.Module()
            self.cls.predictions.bias = nn.Parameter(torch.zeros(c.vocab))
            self.cls.predictions.transform = nn.Module()
            self.cls.predictions.transform.dense = nn.Linear(c.hidden, c.hidden)
            self.cls.predictions.transform.LayerNorm = nn.LayerNorm(c.hidden, eps=c.eps)
            self.cls.seq_relationship = nn.Linear(c.hidden, 2)
        else:
            self.dropout = nn.Dropout(0.0)
            self.classifier = nn.Linear(c.hidden, num_labels)

    def forward(self, b):
        dtype = self.bert.embeddings.word_embeddings.weight.dtype
        h = self.bert(b["input_ids"], b["token_type_ids"], b["attention_mask"], dtype)
        if self.task == "squad":
            logits = self.qa_outputs(h)
            out = {"start_logits": logits[..., 0], "end_logits": logits[..., 1]}
            if "start_positions" in b:
                T = h.shape[1]
                s, e = b["start_positions"].clamp(0, T), b["end_positions"].clamp(0, T)
                out["loss"] = (F.cross_entropy(out["start_logits"], s, ignore_index=T) +
                               F.cross_entropy(out["end_logits"], e, ignore_index=T)) / 2
            return out
        pooled = self.bert.pooler(h)
        if self.task == "pretrain":
            p = self.cls.predictions
            t = p.transform.LayerNorm(act(self.c, p.transform.dense(h)))
            mlm = t @ self.bert.embeddings.word_embeddings.weight.t() + p.bias  # tied decoder
            nsp = self.cls.seq_relationship(pooled)
            out = {"prediction_logits": mlm, "seq_relationship_logits": nsp}
            if "labels" in b:
                out["loss"] = (F.cross_entropy(mlm.reshape(-1, mlm.shape[-1]), b["labels"].reshape(-1)) +
                               F.cross_entropy(nsp, b["next_sentence_label"]))
            return out
        logits = self.classifier(self.dropout(pooled))
        out = {"logits": logits}
        if "labels" in b:
            out["loss"] = F.cross_entropy(logits, b["labels"])
        return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weights", required=True)
    ap.add_argument("--batch", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--task", required=True, choices=["squad", "pretrain", "classify"])
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--eps", type=float, default=1e-12)
    ap.add_argument("--gelu", default="erf", choices=["erf", "tanh"])
    a = ap.parse_args()
    w, b = st.load(a.weights), st.load(a.batch)
    c = Cfg(w, a.heads, a.eps, a.gelu)
    labels = w["classifier.weight"].shape[0] if a.task == "classify" else 2
    m = BertForTask(c, a.task, labels).to(w["bert.embeddings.word_embeddings.weight"].dtype)
    m.load_state_dict(w, strict=True)
    out = {}
    m.eval()
    with torch.no_grad():
        for k, v in m({k: v for k, v in b.items() if k in ("input_ids", "token_type_ids", "attention_mask")}).items():
            out[k] = v.contiguous()
    m.train()
    r = m(b)
    r["loss"].backward()
    out["loss"] = r["loss"].detach().reshape(())
    for n, p in m.named_parameters():
        out["grad." + n] = p.grad.contiguous() if p.grad is not None else torch.zeros_like(p)
    st.save(a.out, out)


if __name__ == "__main__":
    main()
