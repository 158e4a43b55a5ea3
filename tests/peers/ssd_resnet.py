"""The parity peer of aim's ssd_resnet34 (models/ssd_resnet.h): MLPerf training's SSD300 with the
ResNet-34 trunk (mlcommons/training single_stage_detector/ssd: ssd300.py, base_model.py and
utils.py's DefaultBoxes, Encoder and Loss), written here on torchvision 0.14's resnet34 with the
reference's module layout, parameter names, init, default boxes, matching and loss.

CLI (/usr/bin/python3):
  ssd_resnet.py --batch B.safetensors --weights W.safetensors --out O.safetensors
                [--seed S] [--classes C] [--f64]
B holds images [B, 3, 300, 300] f32 in [0, 1], boxes [B, G, 4] f32 (pixels, x1 y1 x2 y2),
labels [B, G] i64 and num_boxes [B] i64 (image b's objects: its first num_boxes[b] rows).
The model is built after torch.manual_seed(S) (torchvision's resnet34 init for the trunk, then the
reference's xavier_uniform on the weights of the additional blocks and heads); W receives its
state_dict (aim loads it by name). O receives
  dboxes [P, 4] (cx, cy, w, h) and dboxes_ltrb [P, 4]: the reference's DefaultBoxes for SSD300
  loc [B, 4, P], conf [B, C, P]: the eval-mode head outputs (the reference's bbox_view)
  loss []: the training-mode loss (Encoder.encode per image at 0.5, then Loss), positives [B]
  grad.<name>: its gradient for the parameters in GRADS
  running_mean.<name>, running_var.<name>: BN statistics after that training forward, for BNS
  with --f64: loss64, grad64.<name> of the model cast to f64 on f64 images (default boxes and
  matching as in f32): the f32 gradients' reference

  ssd_resnet.py --resnet18 --batch B.safetensors --weights W.safetensors --out O.safetensors
                [--seed S] [--classes C] [--f64]
The peer of aim's ssd_resnet18: AI Matrix's Caffe SSD_ResNet18 at 321 (ssd_pascal_resnet18_321.py,
model_libs.py's ResNet18Body) on torchvision's BasicBlock: res2a projects too, pool1 rounds up,
conv6 1x1 256 + BN + ReLU and conv7 3x3/2 512 + BN + ReLU, 3x3 heads on 40, 20, 10, 5 flattened
cell-major, BN eps 1e-3 (training mode: batch statistics). B (321 x 321 images) also holds priors
[P, 4] (pixels, x1 y1 x2 y2: aim's, tested against Caffe's PriorBox in test_caffe_priors.cpp).
Random weights and BN statistics as dssd.py's randomise; the loss is dssd.py's MatchBBox and
VALID MultiBox loss (imported). O receives cls_logits [B, P, C], bbox_regression [B, P, 4] (eval
mode), loss [] (training mode: loss_bbox + loss_cls), num_pos [] and grad.<name> for GRADS18;
with --f64 also loss64, num_pos64 and grad64.<name> of the model, batch and priors cast to f64.
"""
import argparse
import copy
import itertools
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torchvision.models import resnet34
from torchvision.models.resnet import BasicBlock

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
import st  # noqa: E402

GRADS = [
    "model.layer1.5.0.downsample.0.weight",
    "model.layer1.4.1.bn2.weight",
    "model.layer2.0.0.conv1.weight",
    "model.layer2.0.5.conv2.weight",
    "model.layer2.0.5.bn1.weight",
    "model.layer2.0.5.bn2.bias",
    "additional_blocks.0.0.weight",
    "additional_blocks.2.2.bias",
    "additional_blocks.4.2.weight",
    "loc.0.weight",
    "loc.3.bias",
    "conf.1.weight",
    "conf.5.bias",
]
BNS = ["model.layer1.1", "model.layer2.0.5.bn2"]

FEAT = [38, 19, 10, 5, 3, 1]
STEPS = [8, 16, 32, 64, 100, 300]
SCALES = [21, 45, 99, 153, 207, 261, 315]
ARS = [[2], [2, 3], [2, 3], [2, 3], [2], [2]]
NUM_DEFAULTS = [4, 6, 6, 6, 4, 4]
OUT_CHANNELS = [256, 512, 512, 256, 256, 256]


class Trunk(nn.Module):
    """resnet34 up to layer3, as base_model.ResNet34: layer1 = children[:6], layer2 = [layer3] with
    the first block's conv1 and downsample conv at stride 1."""

    def __init__(self):
        super().__init__()
        rn = resnet34(weights=None)
        children = list(rn.children())
        self.layer1 = nn.Sequential(*children[:6])
        self.layer2 = nn.Sequential(*children[6:7])
        first = self.layer2[0][0]
        first.conv1.stride = (1, 1)
        first.downsample[0].stride = (1, 1)

    def forward(self, x):
        return self.layer2(self.layer1(x))


class SSD300(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.classes = classes
        self.model = Trunk()
        blocks = []
        mids = [256, 256, 128, 128, 128]
        for k, mid in enumerate(mids):
            # stride-2 pad-1 3x3 for the first three, unpadded 3x3 for the last two
            conv3 = (nn.Conv2d(mid, OUT_CHANNELS[k + 1], 3, padding=1, stride=2) if k < 3 else
                     nn.Conv2d(mid, OUT_CHANNELS[k + 1], 3))
            blocks.append(nn.Sequential(nn.Conv2d(OUT_CHANNELS[k], mid, 1), nn.ReLU(inplace=True),
                                        conv3, nn.ReLU(inplace=True)))
        self.additional_blocks = nn.ModuleList(blocks)
        self.loc = nn.ModuleList(
            [nn.Conv2d(c, nd * 4, 3, padding=1) for nd, c in zip(NUM_DEFAULTS, OUT_CHANNELS)])
        self.conf = nn.ModuleList(
            [nn.Conv2d(c, nd * classes, 3, padding=1) for nd, c in zip(NUM_DEFAULTS, OUT_CHANNELS)])
        for m in [*self.additional_blocks, *self.loc, *self.conf]:
            for p in m.parameters():
                if p.dim() > 1:
                    nn.init.xavier_uniform_(p)

    def forward(self, x):
        x = self.model(x)
        maps = [x]
        for b in self.additional_blocks:
            x = b(x)
            maps.append(x)
        n = x.size(0)
        locs = torch.cat([l(m).view(n, 4, -1) for m, l in zip(maps, self.loc)], 2)
        confs = torch.cat([c(m).view(n, self.classes, -1) for m, c in zip(maps, self.conf)], 2)
        return locs.contiguous(), confs.contiguous()


def default_boxes():
    """DefaultBoxes(300, FEAT, STEPS, SCALES, ARS): Python floats, per size every cell, f32 once,
    clamped; ltrb in f32."""
    boxes = []
    for k, n in enumerate(FEAT):
        fk = 300 / STEPS[k]
        s1, s2 = SCALES[k] / 300, SCALES[k + 1] / 300
        sizes = [(s1, s1), (math.sqrt(s1 * s2),) * 2]
        for a in ARS[k]:
            sizes += [(s1 * math.sqrt(a), s1 / math.sqrt(a)), (s1 / math.sqrt(a), s1 * math.sqrt(a))]
        for w, h in sizes:
            for i, j in itertools.product(range(n), repeat=2):
                boxes.append(((j + 0.5) / fk, (i + 0.5) / fk, w, h))
    d = torch.tensor(boxes, dtype=torch.float).clamp_(0, 1)
    ltrb = torch.stack([d[:, 0] - 0.5 * d[:, 2], d[:, 1] - 0.5 * d[:, 3],
                        d[:, 0] + 0.5 * d[:, 2], d[:, 1] + 0.5 * d[:, 3]], 1)
    return d, ltrb


def iou(a, b):
    """[N, 4] x [M, 4] ltrb -> [N, M]: intersection / (area a + area b - intersection)."""
    lt = torch.max(a[:, None, :2], b[None, :, :2])
    rb = torch.min(a[:, None, 2:], b[None, :, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[..., 0] * wh[..., 1]
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    return inter / (area_a[:, None] + area_b[None, :] - inter)


def encode(gt, labels, dboxes_ltrb, criteria=0.5):
    """The reference's Encoder.encode: per prior its best object, every object's best prior forced
    (IoU set to 2), positives where IoU > criteria; boxes (positives: their object's, else the
    prior's) as (cx, cy, w, h)."""
    ious = iou(gt, dboxes_ltrb)
    best_dbox_iou, best_dbox_idx = ious.max(dim=0)
    _, best_bbox_idx = ious.max(dim=1)
    best_dbox_iou.index_fill_(0, best_bbox_idx, 2.0)
    for g in range(best_bbox_idx.size(0)):  # in order: later objects win a shared prior
        best_dbox_idx[best_bbox_idx[g]] = g
    mask = best_dbox_iou > criteria
    out_labels = torch.zeros(dboxes_ltrb.size(0), dtype=torch.long)
    out_labels[mask] = labels[best_dbox_idx[mask]]
    b = dboxes_ltrb.clone()
    b[mask] = gt[best_dbox_idx[mask]]
    xywh = torch.stack([0.5 * (b[:, 0] + b[:, 2]), 0.5 * (b[:, 1] + b[:, 3]),
                        b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]], 1)
    return xywh, out_labels


def multibox_loss(ploc, plabel, gloc, glabel, dboxes):
    """The reference's Loss: per image (smooth L1 of the positives' codes + CE of the positives and
    of the 3 x positives hardest negatives) / positives, 0 without positives, mean over images."""
    d = dboxes.t().unsqueeze(0).to(ploc.dtype)  # [1, 4, P] (cx, cy, w, h)
    gxy = 10.0 * (gloc[:, :2] - d[:, :2]) / d[:, 2:]
    gwh = 5.0 * (gloc[:, 2:] / d[:, 2:]).log()
    vec = torch.cat((gxy, gwh), 1)
    mask = glabel > 0
    pos = mask.sum(1)
    sl1 = (F.smooth_l1_loss(ploc, vec, reduction="none").sum(1) * mask.to(ploc.dtype)).sum(1)
    con = F.cross_entropy(plabel, glabel, reduction="none")
    con_neg = con.clone()
    con_neg[mask] = 0
    _, idx = con_neg.sort(1, descending=True)
    _, rank = idx.sort(1)
    neg = rank < torch.clamp(3 * pos, max=mask.size(1)).unsqueeze(-1)
    closs = (con * (mask.to(con.dtype) + neg.to(con.dtype))).sum(1)
    has = (pos > 0).to(con.dtype)
    return ((sl1 + closs) * has / pos.to(con.dtype).clamp(min=1e-6)).mean(0), pos


GRADS18 = ["conv1.weight", "layer1.0.downsample.0.weight", "layer2.1.bn2.weight",
           "layer3.0.conv1.weight", "layer4.1.conv2.weight", "extras.0.weight", "extras.4.bias",
           "loc.0.weight", "loc.3.bias", "conf.1.weight", "conf.2.bias"]


class SsdResnet18(nn.Module):
    def __init__(self, classes):
        super().__init__()
        bn = lambda c: nn.BatchNorm2d(c, eps=1e-3, momentum=1e-3)  # noqa: E731
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = bn(64)
        self.maxpool = nn.MaxPool2d(3, 2, ceil_mode=True)  # Caffe's pooling rounds up: 161 -> 80
        inplanes = 64
        for i, planes in enumerate([64, 128, 256, 512]):
            stride = 1 if i == 0 else 2
            down = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride=stride, bias=False),
                                 bn(planes))  # every stage's first block projects (res2a too)
            setattr(self, "layer%d" % (i + 1), nn.Sequential(
                BasicBlock(inplanes, planes, stride, down, norm_layer=bn),
                BasicBlock(planes, planes, norm_layer=bn)))
            inplanes = planes
        self.extras = nn.Sequential(nn.Conv2d(512, 256, 1, bias=False), bn(256), nn.ReLU(),
                                    nn.Conv2d(256, 512, 3, stride=2, padding=1, bias=False),
                                    bn(512), nn.ReLU())
        chans = [128, 256, 512, 512]
        self.loc = nn.ModuleList([nn.Conv2d(c, 8 * 4, 3, padding=1) for c in chans])
        self.conf = nn.ModuleList([nn.Conv2d(c, 8 * classes, 3, padding=1) for c in chans])
        self.classes = classes

    def forward(self, images):
        mean = torch.tensor([123.0, 117.0, 104.0], dtype=images.dtype)[:, None, None]
        x = (images * 255.0 - mean)[:, [2, 1, 0]]  # Caffe's BGR
        x = self.maxpool(F.relu(self.bn1(self.conv1(x))))
        x = self.layer1(x)
        maps = []
        for layer in [self.layer2, self.layer3, self.layer4, self.extras]:
            x = layer(x)
            maps.append(x)
        n = images.size(0)
        # Caffe's permute (N, H, W, C) + flatten: per cell its boxes' values.
        conf = torch.cat([c(m).permute(0, 2, 3, 1).reshape(n, -1, self.classes)
                          for m, c in zip(maps, self.conf)], 1)
        loc = torch.cat([l(m).permute(0, 2, 3, 1).reshape(n, -1, 4)
                         for m, l in zip(maps, self.loc)], 1)
        return conf, loc


def main_resnet18(a):
    import dssd  # noqa: E402  (its MatchBBox, MultiBox loss and weight randomisation)
    torch.manual_seed(a.seed)
    model = SsdResnet18(a.classes)
    with torch.no_grad():
        for name, m in model.named_modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.7, 1.3)
                m.bias.uniform_(-0.2, 0.2)
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.6, 1.4)
                if name == "bn1":  # conv1 sees 0..255 pixels
                    m.running_mean.mul_(58.0)
                    m.running_var.mul_(58.0 ** 2)
            elif isinstance(m, nn.Conv2d):
                m.weight.normal_(0, math.sqrt(1.0 / m.weight[0].numel()))
                if name.startswith(("loc", "conf")):
                    m.weight.mul_(0.5)
                if m.bias is not None:
                    m.bias.uniform_(-0.1, 0.1)
    st.save(a.weights, model.state_dict())
    model64 = copy.deepcopy(model).double() if a.f64 else None
    b = st.load(a.batch)
    out = {}
    model.eval()
    with torch.no_grad():
        out["cls_logits"], out["bbox_regression"] = model(b["images"])

    def train_step(m, dt, prefix):
        m.train()
        bd = {k: (v.to(dt) if v.is_floating_point() else v) for k, v in b.items()}
        conf, loc = m(bd["images"])
        lb, lc, npos = dssd.multibox_loss(conf, loc, bd["priors"], bd)
        loss = lb + lc
        loss.backward()
        params = dict(m.named_parameters())
        for n in GRADS18:
            out[prefix + "." + n] = params[n].grad
        return loss.detach(), npos

    out["loss"], npos = train_step(model, torch.float32, "grad")
    out["num_pos"] = torch.tensor(npos)
    if a.f64:
        out["loss64"], npos64 = train_step(model64, torch.float64, "grad64")
        out["num_pos64"] = torch.tensor(npos64)
    st.save(a.out, out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", required=True)
    ap.add_argument("--weights", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--classes", type=int, default=21)
    ap.add_argument("--f64", action="store_true", help="also the f64 loss and gradients")
    ap.add_argument("--resnet18", action="store_true", help="the Caffe SSD ResNet-18 at 321")
    a = ap.parse_args()
    torch.set_num_threads(1)
    if a.resnet18:
        return main_resnet18(a)
    torch.manual_seed(a.seed)
    model = SSD300(a.classes)
    st.save(a.weights, model.state_dict())
    model64 = copy.deepcopy(model).double() if a.f64 else None

    b = st.load(a.batch)
    mean = torch.tensor([0.485, 0.456, 0.406])[:, None, None]
    std = torch.tensor([0.229, 0.224, 0.225])[:, None, None]
    images = (b["images"] - mean) / std
    dboxes, ltrb = default_boxes()
    out = {"dboxes": dboxes, "dboxes_ltrb": ltrb}

    gloc, glabel = [], []
    for i in range(images.size(0)):
        n = int(b["num_boxes"][i])
        g, l = encode(b["boxes"][i, :n] / 300.0, b["labels"][i, :n], ltrb)
        gloc.append(g.t())
        glabel.append(l)
    gloc, glabel = torch.stack(gloc), torch.stack(glabel)

    model.eval()
    with torch.no_grad():
        out["loc"], out["conf"] = model(images)

    def train_step(m, dt, prefix):
        m.train()
        ploc, plabel = m(images.to(dt))
        loss, pos = multibox_loss(ploc, plabel, gloc.to(dt), glabel, dboxes)
        loss.backward()
        params = dict(m.named_parameters())
        for n in GRADS:
            out[prefix + "." + n] = params[n].grad
        return loss, pos

    loss, pos = train_step(model, torch.float32, "grad")
    out["loss"] = loss.detach()
    out["positives"] = pos
    mods = dict(model.named_modules())
    for n in BNS:
        out["running_mean." + n] = mods[n].running_mean
        out["running_var." + n] = mods[n].running_var
    if a.f64:
        out["loss64"] = train_step(model64, torch.float64, "grad64")[0].detach()
    st.save(a.out, out)


if __name__ == "__main__":
    main()
