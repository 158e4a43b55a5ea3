"""torchvision 0.14 Mask R-CNN: the parity peer of models/mask_rcnn.h.

The network is torchvision.models.detection.MaskRCNN built from torchvision's own classes
(BackboneWithFPN, RPNHead, TwoMLPHead, FastRCNNPredictor, MaskRCNNHeads, MaskRCNNPredictor) as
maskrcnn_resnet50_fpn assembles them, with FrozenBatchNorm2d; only the ResNet trunk is assembled
here at a custom base width (torchvision's ResNet fixes 64) from torchvision's Bottleneck and
ResNet._make_layer, so that the test runs at tiny widths. The samplers return aim's choices
(GivenSampler): torch.randperm's draws are not aim's.

CLI (/usr/bin/python3): mask_rcnn.py IN WEIGHTS OUT
  (IN with export [1] = 1: writes the peer's own freshly initialised state_dict to WEIGHTS, for
  aim to load strictly, and nothing else.)
IN: cfg [12] i64: num_classes, base, blocks x 4, fpn, representation, mask channels, min_size,
  max_size, trainable_layers; images [B, 3, H, W] f32 in [0, 1]; for training (train [1] i64 = 1)
  gt_<b> [G, 4], gtl_<b> [G] i64, gtm_<b> [G, H, W] u8, rpn_pos_<b>, rpn_neg_<b>, roi_pos_<b>,
  roi_neg_<b> i64.
WEIGHTS: aim's state_dict (torchvision's names; loaded strictly).
OUT (eval): props_<b> [P, 4]; class_logits [R, C]; box_regression [R, 4 C]; mask_logits
  [D, C, M, M]; boxes_<b> [D_b, 4], scores_<b>, labels_<b>, masks_<b> [D_b, H, W] (pasted
  probabilities, original size).
OUT (train): loss_classifier, loss_box_reg, loss_mask, loss_objectness, loss_rpn_box_reg [];
  grad.<name> for every parameter that requires grad.
"""
import os
import sys

import torch
import torch.nn as nn
from torchvision.models.detection.backbone_utils import BackboneWithFPN
from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead
from torchvision.models.detection.mask_rcnn import MaskRCNN, MaskRCNNHeads, MaskRCNNPredictor
from torchvision.models.detection.rpn import RPNHead
from torchvision.models.resnet import Bottleneck, ResNet
from torchvision.ops import FrozenBatchNorm2d

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
import st  # noqa: E402


class Trunk(nn.Module):
    """torchvision's ResNet layout (conv1, bn1, relu, maxpool, layer1..4) at base width `base`."""

    def __init__(self, base, blocks):
        super().__init__()
        self._norm_layer = FrozenBatchNorm2d
        self.inplanes, self.dilation, self.groups, self.base_width = base, 1, 1, 64
        self.conv1 = nn.Conv2d(3, base, 7, 2, 3, bias=False)
        self.bn1 = FrozenBatchNorm2d(base)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = ResNet._make_layer(self, Bottleneck, base, blocks[0])
        self.layer2 = ResNet._make_layer(self, Bottleneck, base * 2, blocks[1], stride=2)
        self.layer3 = ResNet._make_layer(self, Bottleneck, base * 4, blocks[2], stride=2)
        self.layer4 = ResNet._make_layer(self, Bottleneck, base * 8, blocks[3], stride=2)
        for m in self.modules():  # ResNet.__init__'s initialisation
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")


class GivenSampler:
    """BalancedPositiveNegativeSampler's interface, returning the given choices."""

    def __init__(self, pos, neg):
        self.pos, self.neg = pos, neg

    def __call__(self, labels):
        pm, nm = [], []
        for lab, p, n in zip(labels, self.pos, self.neg):
            a = torch.zeros_like(lab, dtype=torch.uint8)
            b = torch.zeros_like(lab, dtype=torch.uint8)
            a[p] = 1
            b[n] = 1
            assert bool((lab[p] >= 1).all()) and bool((lab[n] == 0).all()), "invalid draw"
            pm.append(a)
            nm.append(b)
        return pm, nm


def build(cfg):
    C, base = int(cfg[0]), int(cfg[1])
    blocks = [int(x) for x in cfg[2:6]]
    fpn, rep, mch, min_size, max_size, trainable = [int(x) for x in cfg[6:12]]
    trunk = Trunk(base, blocks)
    # _resnet_fpn_extractor's freezing: the last `trainable` of layer4 .. conv1.
    keep = ["layer4", "layer3", "layer2", "layer1", "conv1"][:trainable]
    for name, p in trunk.named_parameters():
        if all(not name.startswith(k) for k in keep):
            p.requires_grad_(False)
    backbone = BackboneWithFPN(trunk, {"layer1": "0", "layer2": "1", "layer3": "2", "layer4": "3"},
                               [base * 4, base * 8, base * 16, base * 32], fpn)
    return MaskRCNN(backbone, num_classes=None, min_size=min_size, max_size=max_size,
                    rpn_head=RPNHead(fpn, 3),
                    box_head=TwoMLPHead(fpn * 7 * 7, rep),
                    box_predictor=FastRCNNPredictor(rep, C),
                    mask_head=MaskRCNNHeads(fpn, (mch, mch, mch, mch), 1),
                    mask_predictor=MaskRCNNPredictor(mch, mch, C))


def main():
    inp = st.load(sys.argv[1])
    torch.manual_seed(0)
    model = build(inp["cfg"].tolist())
    if "export" in inp:
        st.save(sys.argv[2], model.state_dict())
        return
    w = st.load(sys.argv[2])
    model.load_state_dict({k: v for k, v in w.items()}, strict=True)
    images = [im for im in inp["images"]]
    B = len(images)
    out = {}
    if "train" not in inp:
        model.eval()
        got = {}
        model.rpn.register_forward_hook(lambda m, i, o: got.__setitem__("props", o[0]))
        model.roi_heads.box_predictor.register_forward_hook(
            lambda m, i, o: got.__setitem__("box", o))
        model.roi_heads.mask_predictor.register_forward_hook(
            lambda m, i, o: got.__setitem__("mask", o))
        with torch.no_grad():
            res = model(images)
        for b in range(B):
            out["props_%d" % b] = got["props"][b]
            out["boxes_%d" % b] = res[b]["boxes"]
            out["scores_%d" % b] = res[b]["scores"]
            out["labels_%d" % b] = res[b]["labels"]
            out["masks_%d" % b] = res[b]["masks"][:, 0]
        out["class_logits"], out["box_regression"] = got["box"]
        out["mask_logits"] = got["mask"]
    else:
        model.train()
        targets = [{"boxes": inp["gt_%d" % b], "labels": inp["gtl_%d" % b],
                    "masks": inp["gtm_%d" % b]} for b in range(B)]
        model.rpn.fg_bg_sampler = GivenSampler([inp["rpn_pos_%d" % b] for b in range(B)],
                                               [inp["rpn_neg_%d" % b] for b in range(B)])
        model.roi_heads.fg_bg_sampler = GivenSampler([inp["roi_pos_%d" % b] for b in range(B)],
                                                     [inp["roi_neg_%d" % b] for b in range(B)])
        losses = model(images, targets)
        total = sum(losses.values())
        total.backward()
        for k, v in losses.items():
            out[k] = v.detach()
        for n, p in model.named_parameters():
            if p.requires_grad and p.grad is not None:
                out["grad." + n] = p.grad
    st.save(sys.argv[3], {k: v.detach().contiguous() for k, v in out.items()})


if __name__ == "__main__":
    main()
