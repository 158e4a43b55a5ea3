#!/usr/bin/env python3
"""Parity with PyTorch (Debian's python3-torch): pins conventions of gelu, layernorm,
cross-entropy with label smoothing, masked softmax and embedding backward.
Usage: run_parity.py PATH/TO/aim_parity_dump
For each case: inputs made here -> safetensors -> aim_parity_dump CASE in out -> compared with
torch on the same inputs. Prints one line per check and 'N passed, M failed'."""
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402

torch.manual_seed(0)
DUMP = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="aim_parity_")
results = []


def run(case, inputs):
    i, o = os.path.join(TMP, case + "_in.safetensors"), os.path.join(TMP, case + "_out.safetensors")
    st.save(i, inputs)
    p = subprocess.run([DUMP, case, i, o], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{case}: aim_parity_dump failed: {p.stderr.strip()}")
    return st.load(o)


def check(case, name, got, want, atol=1e-5, rtol=1e-5):
    want = want.detach().to(got.dtype)
    ok = got.shape == want.shape and torch.allclose(got, want, atol=atol, rtol=rtol, equal_nan=True)
    err = (got - want).abs().max().item() if got.shape == want.shape and got.numel() else float("nan")
    results.append(ok)
    print(f"{'PASS' if ok else 'FAIL'} {case}.{name}: max abs err {err:.3g}" + ("" if ok else f" shapes {tuple(got.shape)} vs {tuple(want.shape)}"))


def gelu():
    x = torch.randn(7, 33, dtype=torch.float64) * 3
    dy = torch.randn(7, 33, dtype=torch.float64)
    out = run("gelu", {"x": x, "dy": dy})
    for approx, key in (("none", "erf"), ("tanh", "tanh")):
        xv = x.clone().requires_grad_()
        y = F.gelu(xv, approximate=approx)
        y.backward(dy)
        check("gelu", "y_" + key, out["y_" + key], y, 1e-10, 1e-10)
        check("gelu", "dx_" + key, out["dx_" + key], xv.grad, 1e-10, 1e-10)


def layernorm():
    x = torch.randn(5, 37, dtype=torch.float32) * 2 + 0.5
    w, b = torch.randn(37), torch.randn(37)
    dy = torch.randn(5, 37)
    out = run("layernorm", {"x": x, "weight": w, "bias": b, "dy": dy})
    xv, wv, bv = (t.clone().requires_grad_() for t in (x, w, b))
    y = F.layer_norm(xv, (37,), wv, bv, eps=1e-5)
    y.backward(dy)
    check("layernorm", "y", out["y"], y, 1e-5, 1e-5)
    check("layernorm", "dx", out["dx"], xv.grad, 1e-4, 1e-4)
    check("layernorm", "dweight", out["dweight"], wv.grad, 1e-4, 1e-4)
    check("layernorm", "dbias", out["dbias"], bv.grad, 1e-4, 1e-4)


def cross_entropy():
    logits = torch.randn(9, 11) * 2
    target = torch.randint(0, 11, (9,))
    target[[1, 5]] = -100
    out = run("cross_entropy", {"logits": logits, "target": target})
    lv = logits.clone().requires_grad_()
    loss = F.cross_entropy(lv, target, ignore_index=-100, label_smoothing=0.1)
    loss.backward()
    check("cross_entropy", "loss", out["loss"], loss.reshape(out["loss"].shape), 1e-6, 1e-5)
    check("cross_entropy", "dlogits", out["dlogits"], lv.grad, 1e-6, 1e-5)


def masked_softmax():
    x = torch.randn(4, 6, 10)
    mask = torch.rand(4, 1, 10) > 0.4
    mask[2, 0, :] = False  # a fully masked row: aim gives zeros (PyTorch NaN): documented convention
    dy = torch.randn(4, 6, 10)
    out = run("masked_softmax", {"x": x, "mask": mask, "dy": dy})
    xv = x.clone().requires_grad_()
    y = torch.softmax(xv.masked_fill(~mask, float("-inf")), dim=-1)
    y.backward(dy)
    check("masked_softmax", "y", out["y"], torch.nan_to_num(y, nan=0.0), 1e-6, 1e-5)
    check("masked_softmax", "dx", out["dx"], torch.nan_to_num(xv.grad, nan=0.0), 1e-6, 1e-5)


def embedding_backward():
    weight = torch.randn(13, 8)
    idx = torch.tensor([0, 2, 5, 5, 12, 2, 7, 5, 0, 3, 2, 11, 5, 9, 1, 2, 6, 5, 4, 10])
    dout = torch.randn(20, 8)
    out = run("embedding", {"weight": weight, "indices": idx, "dout": dout})
    wv = weight.clone().requires_grad_()
    y = F.embedding(idx, wv, padding_idx=2)
    y.backward(dout)
    check("embedding", "out", out["out"], y, 0, 0)
    check("embedding", "dweight", out["dweight"], wv.grad, 1e-6, 1e-6)


for case in (gelu, layernorm, cross_entropy, masked_softmax, embedding_backward):
    try:
        case()
    except Exception as e:  # a crash is a failure, reported with its message
        results.append(False)
        print(f"FAIL {case.__name__}: {e}")

passed = sum(results)
failed = len(results) - passed
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed or not results else 0)
