"""PyTorch speed peer of aim's BERT (models/bert.h): times a training step.

The network is tests/peers/bert.py's BertForTask (the parity peer: Hugging Face's BertModel layout
and names, post-LN, exact GELU, eps 1e-12, additive mask (1 - m) * finfo.min) at aim's sizes
(base: 12 x 768, 12 heads, FFN 3072; large: 24 x 1024, 16 heads, FFN 4096; tiny: 2 x 128, 2 heads,
FFN 512, vocabulary 1024; vocabulary 30522, 512 positions, 2 token types), in training mode with
**dropout 0.1** on the embeddings, the attention probabilities and both residual branches, as
aim-train bert runs (the parity peer builds its nn.Dropout modules with p = 0; their p is set to
0.1 here, the parity file is not changed). Initialisation as Hugging Face's _init_weights.
Optimizer as aim-train bert's recipe: AdamW lr 3e-5, weight decay 0.01 on every parameter (aim has
no no-decay group either), betas (0.9, 0.999), eps 1e-8 (torch's defaults = aim's), linear
warm-up over 10% of the steps then linear decay (LambdaLR, stepped every step).

Tasks: squad (qa_outputs span head, loss (CE(start) + CE(end)) / 2) or pretrain (masked LM with
the decoder tied to the word embeddings + next sentence). The parity peer's pretrain head projects
**every** position onto the vocabulary, as Hugging Face's BertForPreTraining does; aim's training
loss projects only the predicted (15%) rows (the same loss and gradients). `--mlm-rows predicted`
gives the peer aim's formulation (gather the predicted rows, then the tied projection).

Batches: random ids in [1, vocab), token types 0 on a first segment and 1 after it, the last few
positions padding (attention_mask 0, id 0), span positions / masked-LM labels (15%, -100
elsewhere) / next-sentence labels random; 4 batches made before timing and cycled (aim's step
time excludes its synthetic text generation, which runs on the prefetch thread).

Step = forward + loss + backward + opt.step() + scheduler.step() + zero_grad(set_to_none=True) +
reading the loss (float(loss)), as aim's. Percentiles nearest-rank, as aim's trainer.

Run with /usr/bin/python3 (Debian torch 1.13) or /work/venv-torch/bin/python (PyPI torch):
  bert.py --size base --task squad --seq 128 --batch-size 8 --steps 10 --warmup 2 --threads 2
          [--compile] [--mlm-rows all|predicted] [--profile N]
Prints one JSON line. The tuned environment is set by bench/peers/run_bert.sh (bench/peers/lib.sh).
"""
import argparse
import importlib.util
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
from common import environment, memory, percentile, profile  # noqa: E402


def _load_parity_peer():
    """tests/peers/bert.py, loaded by path: this file is also named bert.py."""
    path = os.path.normpath(os.path.join(here, "..", "..", "tests", "peers", "bert.py"))
    spec = importlib.util.spec_from_file_location("bert_parity_peer", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


peer = _load_parity_peer()
N_BATCHES = 4
# aim's BertConfig::base() / large() / tiny() (models/bert.h; tiny's vocabulary from bert_registry.cpp).
SIZES = {
    "base": dict(hidden=768, layers=12, heads=12, intermediate=3072, vocab=30522),
    "large": dict(hidden=1024, layers=24, heads=16, intermediate=4096, vocab=30522),
    "tiny": dict(hidden=128, layers=2, heads=2, intermediate=512, vocab=1024),
}


class Cfg:
    """tests/peers/bert.py's Cfg without weights to read the sizes from."""

    def __init__(self, size):
        s = SIZES[size]
        self.vocab, self.hidden, self.layers = s["vocab"], s["hidden"], s["layers"]
        self.heads, self.intermediate = s["heads"], s["intermediate"]
        self.max_position, self.type_vocab = 512, 2
        self.eps, self.gelu = 1e-12, "erf"


def set_dropout(model, p):
    n = 0
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = p
            n += 1
    return n


def hf_init(model, std=0.02):
    """Hugging Face's BertPreTrainedModel._init_weights (aim's initialisation too)."""
    for m in model.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0.0, std)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, 0.0, std)
            if m.padding_idx is not None:
                with torch.no_grad():
                    m.weight[m.padding_idx].zero_()
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


def pretrain_predicted_rows_loss(model, b):
    """BertForPreTraining's loss with the vocabulary projection on the predicted rows only (aim's
    formulation: the same loss and gradients as projecting every position)."""
    c = model.c
    dtype = model.bert.embeddings.word_embeddings.weight.dtype
    h = model.bert(b["input_ids"], b["token_type_ids"], b["attention_mask"], dtype)
    p = model.cls.predictions
    rows = b["mlm_rows"]
    hs = h.reshape(-1, h.shape[-1]).index_select(0, rows)
    t = p.transform.LayerNorm(peer.act(c, p.transform.dense(hs)))
    mlm = t @ model.bert.embeddings.word_embeddings.weight.t() + p.bias
    nsp = model.cls.seq_relationship(model.bert.pooler(h))
    return F.cross_entropy(mlm, b["mlm_targets"]) + F.cross_entropy(nsp, b["next_sentence_label"])


def make_batches(cfg, task, batch_size, seq, n, gen):
    out = []
    for _ in range(n):
        B, T = batch_size, seq
        ids = torch.randint(1, cfg.vocab, (B, T), generator=gen)
        types = torch.zeros(B, T, dtype=torch.long)
        mask = torch.ones(B, T, dtype=torch.long)
        for i in range(B):
            first = int(torch.randint(T // 4, T // 2, (1,), generator=gen))
            pad = int(torch.randint(0, max(1, T // 16), (1,), generator=gen))
            types[i, first:] = 1
            if pad:
                mask[i, T - pad:] = 0
                ids[i, T - pad:] = 0
                types[i, T - pad:] = 0
        b = {"input_ids": ids, "token_type_ids": types, "attention_mask": mask}
        if task == "squad":
            s = torch.randint(T // 2, T - T // 8, (B,), generator=gen)
            b["start_positions"] = s
            b["end_positions"] = s + torch.randint(0, 4, (B,), generator=gen)
        else:
            pred = (torch.rand(B, T, generator=gen) < 0.15) & (mask == 1)
            pred[:, 1] = True  # at least one predicted token per sample
            labels = torch.full((B, T), -100, dtype=torch.long)
            labels[pred] = torch.randint(1, cfg.vocab, (int(pred.sum()),), generator=gen)
            b["labels"] = labels
            b["next_sentence_label"] = torch.randint(0, 2, (B,), generator=gen)
            flat = labels.reshape(-1)
            b["mlm_rows"] = (flat != -100).nonzero().squeeze(1)
            b["mlm_targets"] = flat[b["mlm_rows"]]
        out.append(b)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", default="base", choices=sorted(SIZES))
    ap.add_argument("--task", default="squad", choices=["squad", "pretrain"])
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--lr", type=float, default=3e-5)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--mlm-rows", default="all", choices=["all", "predicted"],
                    help="pretrain: project every position (Hugging Face) or the predicted ones (aim)")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (torch >= 2)")
    ap.add_argument("--profile", type=int, default=0, help="torch.profiler over N extra steps")
    ap.add_argument("--profile-top", type=int, default=15)
    a = ap.parse_args()
    for name in ("batch_size", "steps", "threads", "seq"):
        if getattr(a, name) <= 0:
            ap.error("--%s must be > 0" % name.replace("_", "-"))
    if a.warmup < 0 or not a.lr > 0 or not 0 <= a.dropout < 1:
        ap.error("--warmup must be >= 0, --lr > 0, --dropout in [0, 1)")
    if a.seq > 512:
        ap.error("--seq: BERT has 512 positions")
    if a.compile and not hasattr(torch, "compile"):
        ap.error("--compile needs torch >= 2 (this is %s)" % torch.__version__)
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    cfg = Cfg(a.size)
    model = peer.BertForTask(cfg, a.task)
    hf_init(model)
    n_dropout = set_dropout(model, a.dropout)
    model.train()
    batches = make_batches(cfg, a.task, a.batch_size, a.seq, N_BATCHES,
                           torch.Generator().manual_seed(a.seed))
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=a.weight_decay)
    total = a.warmup + a.steps
    warm = max(1, int(math.ceil(0.1 * total)))  # aim's --warmup 10% (of the run's steps)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warm if s < warm else max(0.0, (total - s) / max(1, total - warm)))

    if a.task == "pretrain" and a.mlm_rows == "predicted":
        def loss_of(b):
            return pretrain_predicted_rows_loss(model, b)
    else:
        def loss_of(b):
            return model(b)["loss"]
    if a.compile:
        loss_of = torch.compile(loss_of)

    def step(i):
        b = batches[i % len(batches)]
        loss = loss_of(b)
        loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        return float(loss)  # as aim, which reads the loss back every step

    times, losses, warm_times = [], [], []
    for i in range(total):
        t0 = time.perf_counter()
        lv = step(i)
        dt = (time.perf_counter() - t0) * 1e3
        if not math.isfinite(lv):
            raise SystemExit("bert.py: loss is %r at step %d" % (lv, i))
        if i >= a.warmup:
            times.append(dt)
            losses.append(lv)
        else:
            warm_times.append(dt)
    prof = profile(a, step)
    p50 = percentile(times, 50)
    a.no_set_to_none, a.foreach, a.jit = False, False, False  # the knobs environment() records
    r = {"framework": "pytorch", "model": "bert", "mode": "train", "size": a.size, "task": a.task,
         "seq_len": a.seq, "batch": a.batch_size, "threads": a.threads,
         "step_time_ms": {"p50": p50, "p90": percentile(times, 90), "p99": percentile(times, 99),
                          "mean": sum(times) / len(times)},
         "step_times_ms": times, "warmup_times_ms": warm_times,
         "throughput": a.batch_size / p50 * 1e3, "throughput_unit": "samples/s",
         "iterations": len(times), "warmup": a.warmup, "optimizer": "adamw", "lr": a.lr,
         "weight_decay": a.weight_decay, "schedule": "warmup_linear 10%", "dropout": a.dropout,
         "dropout_modules": n_dropout, "mlm_rows": a.mlm_rows if a.task == "pretrain" else None,
         "compile": a.compile, "parameters": sum(p.numel() for p in model.parameters()),
         "first_loss": losses[0], "last_loss": losses[-1], "env": environment(a)}
    if prof:
        r["profile"] = prof
    r["memory"] = memory()
    print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
