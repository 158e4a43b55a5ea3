"""PyTorch peer of aim's mask_rcnn speed (docs/detection.md, "mask_rcnn"): torchvision 0.14's
MaskRCNN with maskrcnn_resnet50_fpn's parts (ResNet-50 with FrozenBatchNorm2d,
trainable_backbone_layers 3, FPN, 21 classes) on random 800 x 800 images in [0, 1], as
aim-infer mask_rcnn (size=full: 800 x 800 synthetic images) and aim-train mask_rcnn measure.

usage: /usr/bin/python3 bench/peers/mask_rcnn.py infer|train BATCH ITERS [THREADS]
infer: eval forward (transform, RPN, heads, post-processing with mask pasting) under no_grad;
train: the loss dict summed, backward, SGD (lr 0.0025, momentum 0.9, weight decay 1e-4) with two
boxes and masks per image. Prints the median time of ITERS after one warm-up.
"""
import sys
import time

import torch
from torchvision.models import resnet50
from torchvision.models.detection.backbone_utils import _resnet_fpn_extractor
from torchvision.models.detection.mask_rcnn import MaskRCNN
from torchvision.ops import FrozenBatchNorm2d


def main():
    mode, B, iters = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    if len(sys.argv) > 4:
        torch.set_num_threads(int(sys.argv[4]))
    torch.manual_seed(0)
    m = MaskRCNN(_resnet_fpn_extractor(resnet50(norm_layer=FrozenBatchNorm2d), 3), num_classes=21)
    imgs = [torch.rand(3, 800, 800) for _ in range(B)]
    tg = []
    for _ in range(B):
        masks = torch.zeros(2, 800, 800, dtype=torch.uint8)
        masks[0, 120:500, 100:400] = 1
        masks[1, 50:300, 300:700] = 1
        tg.append({"boxes": torch.tensor([[100., 120., 400., 500.], [300., 50., 700., 300.]]),
                   "labels": torch.tensor([1, 2]), "masks": masks})
    opt = torch.optim.SGD([p for p in m.parameters() if p.requires_grad], lr=0.0025,
                          momentum=0.9, weight_decay=1e-4)
    ts = []
    for _ in range(iters + 1):
        t0 = time.perf_counter()
        if mode == "infer":
            m.eval()
            with torch.no_grad():
                m(imgs)
        else:
            m.train()
            opt.zero_grad()
            sum(m(imgs, tg).values()).backward()
            opt.step()
        ts.append(time.perf_counter() - t0)
    ts = sorted(ts[1:])
    print("torchvision mask_rcnn %s batch %d: median %.3f s over %d (threads %d)"
          % (mode, B, ts[len(ts) // 2], iters, torch.get_num_threads()))


if __name__ == "__main__":
    main()
