"""torchvision / torch peer of aim's roi_align, roi_pool (kernels/roi/roi.h) and interpolate
(kernels/interpolate/interpolate.h): forward outputs and input gradients.

CLI (torch 1.13 + torchvision 0.14, /usr/bin/python3):
  roi.py DIR N
reads DIR/in_<k>.safetensors for k < N and writes DIR/out_<k>.safetensors. Each input holds
  x [N, C, H, W] (f32 or f64), dy (the output's gradient), cfg [8] f64 and, for the RoI ops,
  rois [K, 5] (x's dtype). cfg[0] names the op:
    0 roi_align: cfg = (0, PH, PW, spatial_scale, sampling_ratio, aligned)
        torchvision.ops.roi_align -> y, dx
    1 roi_pool: cfg = (1, PH, PW, spatial_scale)
        torch.ops.torchvision.roi_pool -> y, argmax (i32), dx
    2 interpolate: cfg = (2, P, Q, mode (0 nearest, 1 bilinear), align_corners, scale_h, scale_w)
        F.interpolate with size=(P, Q) when scale_h is 0, else with scale_factor=(scale_h,
        scale_w) and recompute_scale_factor=False -> y, dx
"""
import os
import sys

import torch
import torch.nn.functional as F
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
import st  # noqa: E402


def run_case(inp):
    cfg = [float(v) for v in inp["cfg"]]
    op = int(cfg[0])
    x = inp["x"].clone().requires_grad_(True)
    out = {}
    if op == 0:
        y = torchvision.ops.roi_align(x, inp["rois"], (int(cfg[1]), int(cfg[2])),
                                      spatial_scale=cfg[3], sampling_ratio=int(cfg[4]),
                                      aligned=bool(cfg[5]))
    elif op == 1:
        y, argmax = torch.ops.torchvision.roi_pool(x, inp["rois"], cfg[3], int(cfg[1]),
                                                   int(cfg[2]))
        out["argmax"] = argmax.to(torch.int32)
    else:
        mode = "nearest" if int(cfg[3]) == 0 else "bilinear"
        ac = None if mode == "nearest" else bool(cfg[4])
        if cfg[5] == 0:
            y = F.interpolate(x, size=(int(cfg[1]), int(cfg[2])), mode=mode, align_corners=ac)
        else:
            y = F.interpolate(x, scale_factor=(cfg[5], cfg[6]), mode=mode, align_corners=ac,
                              recompute_scale_factor=False)
    y.backward(inp["dy"])
    out["y"] = y.detach()
    out["dx"] = x.grad
    return out


def main():
    d, n = sys.argv[1], int(sys.argv[2])
    torch.set_num_threads(1)
    for k in range(n):
        inp = st.load(os.path.join(d, "in_%d.safetensors" % k))
        st.save(os.path.join(d, "out_%d.safetensors" % k), run_case(inp))


if __name__ == "__main__":
    main()
