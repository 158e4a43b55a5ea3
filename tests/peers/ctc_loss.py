"""PyTorch peer of aim's ctc_fwd / ctc_bwd (kernels/loss/ctc.h): torch.nn.functional.ctc_loss.

CLI (torch 1.13, /usr/bin/python3):
  ctc_loss.py DIR N
reads DIR/in_<k>.safetensors for k < N and writes DIR/out_<k>.safetensors. Each input holds
  cfg [3] i64: blank, reduction (0 none, 1 mean, 2 sum), zero_infinity
  log_probs [T, B, C] f64 (log-softmaxed), targets [B, S] or 1-D i64, input_lengths [B] i64,
  target_lengths [B] i64, dloss: the loss's shape ([B] for none, [] otherwise) f64
The output holds
  loss: F.ctc_loss(...) as aim shapes it, f64
  grad: d sum(loss * dloss) / d log_probs [T, B, C] f64 (PyTorch's CTC gradient, in which
        infeasible samples without zero_infinity are NaN)
  loss_none: the per-sample losses (reduction none, same zero_infinity), for diagnostics
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
import st  # noqa: E402

REDUCTIONS = ("none", "mean", "sum")


def run_case(inp):
    blank, red, zi = (int(v) for v in inp["cfg"].tolist())
    lp = inp["log_probs"].clone().requires_grad_(True)
    args = (inp["targets"].long(), inp["input_lengths"].long(), inp["target_lengths"].long())
    loss = F.ctc_loss(lp, *args, blank=blank, reduction=REDUCTIONS[red], zero_infinity=bool(zi))
    (grad,) = torch.autograd.grad((loss * inp["dloss"]).sum(), lp)
    with torch.no_grad():
        none = F.ctc_loss(lp, *args, blank=blank, reduction="none", zero_infinity=bool(zi))
    return {"loss": loss.detach().reshape(inp["dloss"].shape), "grad": grad, "loss_none": none}


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: ctc_loss.py DIR N")
    d, n = sys.argv[1], int(sys.argv[2])
    for k in range(n):
        inp = st.load(os.path.join(d, "in_%d.safetensors" % k))
        st.save(os.path.join(d, "out_%d.safetensors" % k), run_case(inp))


if __name__ == "__main__":
    main()
