"""torchvision peer of aim's box_iou / nms (kernels/boxes/boxes.h): torchvision.ops.box_iou and
torchvision.ops.batched_nms / nms.

CLI (torch 1.13 + torchvision 0.14, /usr/bin/python3):
  boxes.py DIR N
reads DIR/in_<k>.safetensors for k < N and writes DIR/out_<k>.safetensors. Each input holds
  a [N, 4], b [M, 4] (f32 or f64): box_iou(a, b) -> iou [N, M]
  boxes [K, 4], scores [K] (same dtype), groups [K] i64 or absent, cfg [1] f64 (IoU threshold):
  batched_nms(boxes, scores, groups, thr) (nms when groups is absent) -> keep [k] i64
  hn_loss [B, P], hn_labels [B, P] i64 (>= 0): torchvision SSD.compute_loss's hard negative
  selection with neg_to_pos_ratio 3 -> hn_neg [B, P] u8
"""
import os
import sys

import torch
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
import st  # noqa: E402


def run_case(inp):
    out = {"iou": torchvision.ops.box_iou(inp["a"], inp["b"])}
    thr = float(inp["cfg"][0])
    if "groups" in inp:
        keep = torchvision.ops.batched_nms(inp["boxes"], inp["scores"], inp["groups"], thr)
    else:
        keep = torchvision.ops.nms(inp["boxes"], inp["scores"], thr)
    out["keep"] = keep.to(torch.int64)
    # torchvision/models/detection/ssd.py, SSD.compute_loss (torchvision 0.14), the mining lines.
    cls_loss, labels = inp["hn_loss"], inp["hn_labels"]
    foreground_idxs = labels > 0
    num_negative = 3.0 * foreground_idxs.sum(1, keepdim=True)
    negative_loss = cls_loss.clone()
    negative_loss[foreground_idxs] = -float("inf")
    values, idx = negative_loss.sort(1, descending=True)
    background_idxs = idx.sort(1)[1] < num_negative
    out["hn_neg"] = (background_idxs & ~foreground_idxs).to(torch.uint8)
    return out


def main():
    d, n = sys.argv[1], int(sys.argv[2])
    for k in range(n):
        inp = st.load(os.path.join(d, "in_%d.safetensors" % k))
        st.save(os.path.join(d, "out_%d.safetensors" % k), run_case(inp))


if __name__ == "__main__":
    main()
