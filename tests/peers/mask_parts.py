"""torchvision peer of aim's Mask R-CNN mask parts (models/detection/masks.h): torchvision 0.14's
roi_heads.project_masks_on_boxes and roi_heads.paste_masks_in_image, and the > 0.5 threshold of
its COCO evaluation.

CLI (/usr/bin/python3): mask_parts.py DIR N
reads DIR/in_<k>.safetensors for k < N and writes DIR/out_<k>.safetensors. Each input holds
  cfg [3] i64: M, image height, image width
  gt_masks [G, H, W] f32 (0/1), proposals [P, 4] f32 (x1, y1, x2, y2), matched [P] i64
  masks [N, M, M] f32 probabilities, boxes [N, 4] f32 (inside the image, as after clipping)
The output holds
  targets [P, M, M]: project_masks_on_boxes(gt_masks, proposals, matched, M)
  pasted [N, H, W]: paste_masks_in_image(masks[:, None], boxes, (H, W))[:, 0]
  binary [N, H, W] u8: pasted > 0.5
"""
import os
import sys

import torch
from torchvision.models.detection import roi_heads

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
import st  # noqa: E402


def run_case(inp):
    M, H, W = [int(v) for v in inp["cfg"].tolist()]
    targets = roi_heads.project_masks_on_boxes(inp["gt_masks"], inp["proposals"], inp["matched"], M)
    pasted = roi_heads.paste_masks_in_image(inp["masks"][:, None], inp["boxes"], (H, W))[:, 0]
    return {"targets": targets, "pasted": pasted, "binary": (pasted > 0.5).to(torch.uint8)}


def main():
    d, n = sys.argv[1], int(sys.argv[2])
    torch.set_num_threads(1)
    for k in range(n):
        inp = st.load(os.path.join(d, "in_%d.safetensors" % k))
        st.save(os.path.join(d, "out_%d.safetensors" % k), run_case(inp))


if __name__ == "__main__":
    main()
