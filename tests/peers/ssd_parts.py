"""torchvision peer of aim's SSD parts (models/detection/): DefaultBoxGenerator, BoxCoder and
SSDMatcher as torchvision 0.14's ssd300_vgg16 uses them.

CLI (/usr/bin/python3):
  ssd_parts.py DIR N
reads DIR/in_<k>.safetensors for k < N and writes DIR/out_<k>.safetensors. Each input holds
  cfg [2 + 2 M] i64: image H, W, then the M feature maps' (h, w)
  gt [G, 4] f32 (x1, y1, x2, y2 in pixels), codes [P, 4] f32 (box regression outputs)
The output holds
  cxcywh [P, 4]: DefaultBoxGenerator._grid_default_boxes (ssd300's aspect ratios, scales, steps)
  xyxy [P, 4]: DefaultBoxGenerator.forward for one image of H x W
  match [P] i64: SSDMatcher(0.5)(box_iou(gt, xyxy))
  encoded [P, 4]: BoxCoder((10, 10, 5, 5)).encode_single(gt[match] where matched, xyxy) (rows of
                  unmatched priors encode gt[0])
  decoded [P, 4]: BoxCoder((10, 10, 5, 5)).decode_single(codes, xyxy)
"""
import os
import sys

import torch
from torchvision.models.detection import _utils as det_utils
from torchvision.models.detection.anchor_utils import DefaultBoxGenerator
from torchvision.models.detection.image_list import ImageList
from torchvision.ops import box_iou

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
import st  # noqa: E402


def run_case(inp):
    cfg = [int(v) for v in inp["cfg"].tolist()]
    H, W = cfg[0], cfg[1]
    maps = [(cfg[2 + 2 * i], cfg[3 + 2 * i]) for i in range((len(cfg) - 2) // 2)]
    gen = DefaultBoxGenerator(
        [[2], [2, 3], [2, 3], [2, 3], [2], [2]],
        scales=[0.07, 0.15, 0.33, 0.51, 0.69, 0.87, 1.05],
        steps=[8, 16, 32, 64, 100, 300],
    )
    cxcywh = gen._grid_default_boxes(maps, [H, W], dtype=torch.float32)
    images = ImageList(torch.zeros(1, 3, H, W), [(H, W)])
    feats = [torch.zeros(1, 1, h, w) for h, w in maps]
    xyxy = gen(images, feats)[0]
    gt = inp["gt"]
    match = det_utils.SSDMatcher(0.5)(box_iou(gt, xyxy))
    coder = det_utils.BoxCoder(weights=(10.0, 10.0, 5.0, 5.0))
    encoded = coder.encode_single(gt[match.clamp(min=0)], xyxy)
    decoded = coder.decode_single(inp["codes"], xyxy)
    return {"cxcywh": cxcywh, "xyxy": xyxy, "match": match, "encoded": encoded, "decoded": decoded}


def main():
    d, n = sys.argv[1], int(sys.argv[2])
    for k in range(n):
        inp = st.load(os.path.join(d, "in_%d.safetensors" % k))
        st.save(os.path.join(d, "out_%d.safetensors" % k), run_case(inp))


if __name__ == "__main__":
    main()
