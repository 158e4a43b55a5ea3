"""DSSD321 in PyTorch: the parity peer of aim's models/dssd.h, written from the reference
(chengyangfu/caffe `dssd`: examples/ssd/ssd_pascal_resnet_deconv_ft_321.py, python/caffe/
model_libs.py, src/caffe/layers/{prior_box,multibox_loss}_layer.cpp, src/caffe/util/bbox_util.cpp),
not from aim's code.

CLI (/usr/bin/python3):
  dssd.py --batch B.safetensors --weights W.safetensors --out O.safetensors
          [--seed S] [--classes C] [--tiny]
  dssd.py --count O.safetensors [--classes C] [--tiny]
B holds images [B, 3, 321, 321] f32 RGB in [0, 1], boxes [B, G, 4] f32 (pixels), labels [B, G]
i64 and num_boxes [B] i64 (image b's objects: its first num_boxes[b] rows). --tiny: every width / 8
and one block per ResNet stage (aim's size=tiny). The network gets random weights after
torch.manual_seed(S), every BN with random statistics and affine (variance-preserving scales, so
that every branch matters); W receives its state_dict (aim loads it by name). O receives
  priors [P, 4]: the PriorBox boxes in pixels (x1, y1, x2, y2), the heads' order
  cls_logits [B, P, C], bbox_regression [B, P, 4]: the head outputs (the network is the same in
                     training and evaluation: frozen BN, no dropout)
  loss_bbox, loss_cls []: Caffe's MultiBoxLoss terms (MatchBBox bipartite + per prediction at 0.5,
                     MAX_NEGATIVE 3:1, smooth L1 and softmax, / max(1, matches) = VALID);
  num_pos []: the matches; grad.<name>: the gradient of loss_bbox + loss_cls for GRADS
--count writes params [] (every parameter, frozen BN affines included) and flops [] (one 321 x 321
image, forward, counted as aim counts: 2 per multiply-add, + 1 per bias, BN 2, ReLU / add / product
1 per element, max pool k^2 per output, the mean subtraction 2 per pixel value).
"""
import argparse
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
import st  # noqa: E402

S = 321
MAPS = [40, 20, 10, 5, 3, 1]
HEAD_K = [5, 5, 3, 3, 3, 3]
STEPS = [8, 16, 32, 64, 64, 321]
STARTS = [2.5, 2.5, 10.5, 26.5, 90.5, 160.5]
PRED = ["pred3", "pred5", "pred6", "pred7", "pred8", "pred9"]


def prior_sizes():
    """The script's min / max sizes (min_ratio 20, max_ratio 95, 6 sources)."""
    step = int(math.floor((95 - 20) / (len(MAPS) - 2)))
    mins, maxs = [], []
    for r in range(20, 96, step):
        mins.append(S * r / 100.0)
        maxs.append(S * (r + step) / 100.0)
    return [S * 10 / 100.0] + mins, [S * 20 / 100.0] + maxs


def priors():
    """PriorBox per source, concatenated: per cell min square, sqrt(min max) square, then the
    ratios 1.6, 1/1.6, 2, 1/2, 3, 1/3 (flip); sizes truncated to int as the layer reads them;
    centres (w + start / step) * step (the start read as pixels, as aim's caffe_priors.h)."""
    mins, maxs = prior_sizes()
    f32 = torch.float32
    out = []
    for k, m in enumerate(MAPS):
        lo, hi = int(mins[k]), int(maxs[k])
        step = torch.tensor(float(STEPS[k]), dtype=f32)
        offset = torch.tensor(STARTS[k] / STEPS[k], dtype=f32)
        sides = [(float(lo), float(lo)), (float(torch.tensor(math.sqrt(lo * hi), dtype=f32)),) * 2]
        for ar in [1.6, 2.0, 3.0]:
            for a in (torch.tensor(ar, dtype=f32), 1 / torch.tensor(ar, dtype=f32)):
                q = torch.sqrt(a)
                sides.append((float(lo * q), float(lo / q)))
        idx = torch.arange(m, dtype=f32)
        c = (idx + offset) * step  # f32 centres
        cy, cx = torch.meshgrid(c, c, indexing="ij")
        cx, cy = cx.reshape(-1, 1).double(), cy.reshape(-1, 1).double()
        w = torch.tensor([s[0] for s in sides], dtype=torch.float64)
        h = torch.tensor([s[1] for s in sides], dtype=torch.float64)
        box = torch.stack([(cx - w / 2) / S, (cy - h / 2) / S, (cx + w / 2) / S, (cy + h / 2) / S], -1)
        out.append(box.float().reshape(-1, 4))
    return torch.cat(out) * torch.tensor(float(S))  # relative (f32) -> pixels (f32)


class Counter:
    def __init__(self):
        self.flops = 0.0


class FrozenBN(nn.BatchNorm2d):
    """Caffe BatchNorm(use_global_stats) + Scale: running statistics, eps 1e-3, in every mode."""

    def __init__(self, c):
        super().__init__(c, eps=1e-3)

    def forward(self, x):
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, False,
                            0.0, self.eps)


class Dssd(nn.Module):
    def __init__(self, classes, tiny):
        super().__init__()
        dv = 8 if tiny else 1
        blocks = [1, 1, 1, 1] if tiny else [3, 4, 23, 3]
        self.classes = classes
        self.counter = Counter()
        self.convbn = {}  # conv name -> bn name

        def conv_bn(conv, bn, cin, cout, k, stride=1, pad=0, dil=1):
            self.add_module(conv, nn.Conv2d(cin, cout, k, stride, pad, dil, bias=False))
            self.add_module(bn, FrozenBN(cout))
            self.convbn[conv] = bn

        def res_body(block, conv_pre, bn_name, cin, mid, cout, k, stride, pad, dil, proj):
            if proj:
                conv_bn(conv_pre + "branch1", bn_name("branch1"), cin, cout, k, stride, pad)
            conv_bn(conv_pre + "branch2a", bn_name("branch2a"), cin, mid, k, stride, pad)
            conv_bn(conv_pre + "branch2b", bn_name("branch2b"), mid, mid, 3, 1, dil, dil)
            conv_bn(conv_pre + "branch2c", bn_name("branch2c"), mid, cout, 1)
            return (conv_pre, proj)

        conv_bn("conv1", "bn_conv1", 3, 64 // dv, 7, 2, 3)
        self.trunk = []
        cin = 64 // dv
        for si, stage in enumerate([2, 3, 4, 5]):
            planes = (64 << si) // dv
            for b in range(blocks[si]):
                if stage in (2, 5):
                    name = "%d%s" % (stage, chr(ord("a") + b))
                else:
                    name = "%da" % stage if b == 0 else "%db%d" % (stage, b)
                stride = 2 if stage in (3, 4) and b == 0 else 1
                self.trunk.append(res_body(name, "res%s_" % name, lambda br, n=name: "bn%s_%s" % (n, br),
                                           cin, planes, 4 * planes, 1, stride, 0, 2 if stage == 5 else 1,
                                           b == 0))
                cin = 4 * planes
                last = name
            if stage == 3:
                self.src3 = len(self.trunk) - 1
                self.src3_name = "res" + last
            if stage == 5:
                self.src5_name = "res" + last
        self.extra = []
        for i in (6, 7, 8, 9):
            k = 2 if i <= 7 else 3
            self.extra.append(res_body(str(i), "res%d_" % i, lambda br, n=i: "bn%d_%s" % (n, br), cin,
                                       256 // dv, 1024 // dv, k, 2 if i <= 7 else 1, 0, 1, True))
            cin = 1024 // dv
        D = 512 // dv
        self.levels = []
        for lvl, k, s, top, fwd_c, fwd in [("8", 3, 1, 1024 // dv, 1024 // dv, "res8"),
                                           ("7", 3, 1, D, 1024 // dv, "res7"),
                                           ("6", 2, 2, D, 1024 // dv, "res6"),
                                           ("5", 2, 2, D, 2048 // dv, self.src5_name),
                                           ("3", 2, 2, D, 512 // dv, self.src3_name)]:
            dname = "deconv_" + lvl
            self.add_module(dname, nn.ConvTranspose2d(top, D, k, s))
            f = fwd + "_relu"
            conv_bn(f + "_pre1", f + "_pre1_bn", fwd_c, D, 3, 1, 1)
            conv_bn(f + "_pre2", f + "_pre2_bn", D, D, 3, 1, 1)
            conv_bn(dname + "_pre", dname + "_pre_bn", D, D, 3, 1, 1)
            self.levels.append((dname, f))
        self.pred = []
        for k, p in enumerate(PRED):
            c = D if k < 5 else 1024 // dv
            self.pred.append(res_body(p, p + "_", lambda br, p=p: "%s_%s_bn" % (p, br), c, 256 // dv,
                                      1024 // dv, 1, 1, 0, 1, True))
        for k, p in enumerate(PRED):
            self.add_module(p + "_mbox_loc", nn.Conv2d(1024 // dv, 8 * 4, HEAD_K[k], 1, HEAD_K[k] // 2))
            self.add_module(p + "_mbox_conf",
                            nn.Conv2d(1024 // dv, 8 * classes, HEAD_K[k], 1, HEAD_K[k] // 2))

    # ---- forward, counting FLOPs as aim does ---------------------------------------------
    def cb(self, name, x, relu):
        conv, bn = getattr(self, name), getattr(self, self.convbn[name])
        y = bn(conv(x))
        k = conv.kernel_size[0] * conv.kernel_size[1]
        self.counter.flops += 2.0 * y.numel() * conv.in_channels * k + 2.0 * y.numel()
        if relu:
            y = F.relu(y)
            self.counter.flops += y.numel()
        return y

    def res(self, block, x):
        pre, proj = block
        y = self.cb(pre + "branch2c", self.cb(pre + "branch2b", self.cb(pre + "branch2a", x, True), True),
                    False)
        s = self.cb(pre + "branch1", x, False) if proj else x
        self.counter.flops += 2.0 * y.numel()
        return F.relu(s + y)

    def features(self, images):
        mean = torch.tensor([123.0, 117.0, 104.0]).view(1, 3, 1, 1)
        x = (images * 255.0 - mean).flip(1)  # Caffe: BGR pixels minus the mean
        self.counter.flops += 2.0 * images.numel()
        x = self.cb("conv1", x, True)
        x = F.max_pool2d(x, 3, 2, 0, ceil_mode=True)
        self.counter.flops += 9.0 * x.numel()
        for i, b in enumerate(self.trunk):
            x = self.res(b, x)
            if i == self.src3:
                res3 = x
        res5 = x
        extra = []
        for b in self.extra:
            x = self.res(b, x)
            extra.append(x)
        maps = [None] * 6
        maps[5] = extra[3]
        top = extra[3]
        for k, (dname, f) in enumerate(self.levels):
            fwd = [extra[2], extra[1], extra[0], res5, res3][k]
            dc = getattr(self, dname)
            d = dc(top)
            self.counter.flops += 2.0 * top.numel() * dc.out_channels * dc.kernel_size[0] ** 2 + d.numel()
            fb = self.cb(f + "_pre2", self.cb(f + "_pre1", fwd, True), False)
            db = self.cb(dname + "_pre", d, False)
            top = F.relu(db * fb)
            self.counter.flops += 2.0 * top.numel()
            maps[4 - k] = top
        return [self.res(self.pred[k], maps[k]) for k in range(6)]

    def forward(self, images):
        feats = self.features(images)
        locs, confs = [], []
        for k, p in enumerate(PRED):
            for name, K, out in (("_mbox_loc", 4, locs), ("_mbox_conf", self.classes, confs)):
                conv = getattr(self, p + name)
                y = conv(feats[k])
                self.counter.flops += 2.0 * y.numel() * conv.in_channels * HEAD_K[k] ** 2 + y.numel()
                # Caffe: Permute(0, 2, 3, 1) + Flatten, then [N, P, K].
                out.append(y.permute(0, 2, 3, 1).reshape(y.shape[0], -1, K))
        return torch.cat(confs, 1), torch.cat(locs, 1)


def jaccard(p, g):
    """bbox_util's JaccardOverlap for every (prior, object): [P, G]."""
    ix1 = torch.max(p[:, None, 0], g[None, :, 0])
    iy1 = torch.max(p[:, None, 1], g[None, :, 1])
    ix2 = torch.min(p[:, None, 2], g[None, :, 2])
    iy2 = torch.min(p[:, None, 3], g[None, :, 3])
    inter = (ix2 - ix1).clamp(min=0) * (iy2 - iy1).clamp(min=0)
    ap = ((p[:, 2] - p[:, 0]) * (p[:, 3] - p[:, 1]))[:, None]
    ag = ((g[:, 2] - g[:, 0]) * (g[:, 3] - g[:, 1]))[None, :]
    return inter / (ap + ag - inter)


def match_bbox(ov, thr=0.5):
    """MatchBBox: bipartite (largest overlap among unmatched priors and the pool of objects,
    repeatedly), then PER_PREDICTION (each remaining prior its best object at >= thr); only
    overlaps > 1e-6 count."""
    P, G = ov.shape
    ov = ov.clone()
    ov[ov <= 1e-6] = -1
    match = torch.full((P,), -1, dtype=torch.long)
    work = ov.clone()
    for _ in range(G):
        v, flat = work.reshape(-1).max(0)  # first maximum: lowest prior, then lowest object
        if v <= 0:
            break
        p, g = divmod(int(flat), G)
        match[p] = g
        work[p, :] = -1
        work[:, g] = -1
    rest = match < 0
    best, arg = ov.max(1)
    take = rest & (best >= thr)
    match[take] = arg[take]
    return match


def multibox_loss(conf, loc, pri, b):
    """Caffe's MultiBoxLoss (SMOOTH_L1, SOFTMAX, MAX_NEGATIVE 3:1, neg_overlap 0.5, VALID)."""
    B, P, C = conf.shape
    lb, lc, npos = conf.new_zeros(()), conf.new_zeros(()), 0
    pw, ph = pri[:, 2] - pri[:, 0], pri[:, 3] - pri[:, 1]
    pcx, pcy = (pri[:, 0] + pri[:, 2]) / 2, (pri[:, 1] + pri[:, 3]) / 2
    for i in range(B):
        n = int(b["num_boxes"][i])
        if n == 0:
            continue  # no ground truth: the image adds no positives and no negatives
        gt, lab = b["boxes"][i, :n], b["labels"][i, :n]
        m = match_bbox(jaccard(pri, gt))
        pos = m >= 0
        target = torch.zeros(P, dtype=torch.long)
        target[pos] = lab[m[pos]]
        ce = torch.logsumexp(conf[i], 1) - conf[i].gather(1, target[:, None])[:, 0]
        # Unmatched priors overlap every object below 0.5 (= neg_overlap): all are candidates.
        neg = ~pos
        k = min(int(3 * int(pos.sum())), int(neg.sum()))
        order = torch.sort(ce.detach().masked_fill(pos, -1.0), descending=True, stable=True)[1]
        chosen = order[:k]
        lc = lc + ce[pos].sum() + ce[chosen].sum()
        g = gt[m[pos]]
        gw, gh = g[:, 2] - g[:, 0], g[:, 3] - g[:, 1]
        gcx, gcy = (g[:, 0] + g[:, 2]) / 2, (g[:, 1] + g[:, 3]) / 2
        t = torch.stack([(gcx - pcx[pos]) / pw[pos] / 0.1, (gcy - pcy[pos]) / ph[pos] / 0.1,
                         torch.log(gw / pw[pos]) / 0.2, torch.log(gh / ph[pos]) / 0.2], 1)
        lb = lb + F.smooth_l1_loss(loc[i][pos], t, reduction="sum", beta=1.0)
        npos += int(pos.sum())
    norm = max(1, npos)
    return lb / norm, lc / norm, npos


GRADS = ["pred3_mbox_conf.weight", "pred5_mbox_loc.bias", "deconv_6.weight", "deconv_8.bias",
         "res5a_relu_pre1.weight", "deconv_3_pre.weight", "res3a_branch2b.weight",
         "res7_branch1.weight", "pred5_branch2a.weight"]


def randomise(model):
    """Weights with variance-preserving scales and random BN statistics / affines."""
    with torch.no_grad():
        for name, m in model.named_modules():
            if isinstance(m, FrozenBN):
                c = m.num_features
                m.weight.uniform_(0.7, 1.3)
                m.bias.uniform_(-0.2, 0.2)
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.6, 1.4)
                if name == "bn_conv1":  # conv1 sees 0..255 pixels
                    m.running_mean.mul_(58.0)
                    m.running_var.mul_(58.0 ** 2)
            elif isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
                w = m.weight
                fan_in = w[0].numel() if isinstance(m, nn.Conv2d) else w.shape[0] * w[0, 0].numel()
                w.normal_(0, math.sqrt(1.0 / fan_in))
                if "_mbox_" in name:
                    w.mul_(0.5)
                if m.bias is not None:
                    m.bias.uniform_(-0.1, 0.1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch")
    ap.add_argument("--weights")
    ap.add_argument("--out")
    ap.add_argument("--count")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--classes", type=int, default=21)
    ap.add_argument("--tiny", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(2)
    torch.manual_seed(a.seed)
    model = Dssd(a.classes, a.tiny)
    if a.count:
        with torch.no_grad():
            model(torch.rand(1, 3, S, S))
        params = sum(p.numel() for p in model.parameters())
        st.save(a.count, {"params": torch.tensor(params, dtype=torch.float64),
                          "flops": torch.tensor(model.counter.flops, dtype=torch.float64)})
        return
    randomise(model)
    st.save(a.weights, model.state_dict())
    b = st.load(a.batch)
    out = {"priors": priors()}
    conf, loc = model(b["images"])
    out["cls_logits"], out["bbox_regression"] = conf.detach(), loc.detach()
    lb, lc, npos = multibox_loss(conf, loc, out["priors"], b)
    (lb + lc).backward()
    out["loss_bbox"], out["loss_cls"] = lb.detach(), lc.detach()
    out["num_pos"] = torch.tensor(npos)
    params = dict(model.named_parameters())
    for n in GRADS:
        out["grad." + n] = params[n].grad
    st.save(a.out, out)


if __name__ == "__main__":
    main()
