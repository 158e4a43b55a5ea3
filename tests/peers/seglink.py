"""PyTorch peer of aim's seglink (models/seglink.h): bgshih/seglink's network (model.py,
model_cnn.py) and loss (build_loss with _cls_mining) written in torch, on aim's weights.

Input (--in, safetensors): the model's state dict by aim's names (vgg16.conv1_1.weight, ...,
conv4_3_scale, conv8_1.weight, ..., det_1.conv_cls.weight, ...), "images" [B, 3, S, S] in [0, 1],
and the targets aim encoded (models/detection/seglink.h, checked against the reference's ops by
tests/peers/seglink_parts.py): "seg_labels" [B, P] (1 / 0 / -1), "seg_offsets" [B, P, 6] (divided
by the variances), "link_labels" [B, L].
Output (--out): "seg_logits" [B, P, 2], "link_logits" [B, L, 2], "offsets" [B, P, 6] in aim's
dense order (per image: layers in turn, cells row-major, per cell its links), "loss_seg",
"loss_link", "loss_offset", and "grad.<name>" for every parameter that gets a gradient.
Run with --f64 to compute in double.
"""
import argparse
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
import st  # noqa: E402


def same_pads(size, k, stride, dilation):
    """TensorFlow's SAME padding of one side: (before, after)."""
    out = math.ceil(size / stride)
    total = max((out - 1) * stride + (k - 1) * dilation + 1 - size, 0)
    return total // 2, total - total // 2


def conv_same(x, w, b, stride=1, dilation=1, relu=True):
    k = w.shape[-1]
    ph = same_pads(x.shape[2], k, stride, dilation)
    pw = same_pads(x.shape[3], k, stride, dilation)
    y = F.conv2d(F.pad(x, (pw[0], pw[1], ph[0], ph[1])), w, b, stride=stride, dilation=dilation)
    return F.relu(y) if relu else y


def pool_same(x, k, stride):
    ph = same_pads(x.shape[2], k, stride, 1)
    pw = same_pads(x.shape[3], k, stride, 1)
    x = F.pad(x, (pw[0], pw[1], ph[0], ph[1]), value=-math.inf)
    return F.max_pool2d(x, k, stride)


def network(p, images):
    c = lambda x, n, **kw: conv_same(x, p[n + ".weight"], p[n + ".bias"], **kw)
    mean = torch.tensor([123.0, 117.0, 104.0], dtype=images.dtype).view(1, 3, 1, 1)
    x = images * 255.0 - mean
    for n in ["conv1_1", "conv1_2"]:
        x = c(x, "vgg16." + n)
    x = pool_same(x, 2, 2)
    for n in ["conv2_1", "conv2_2"]:
        x = c(x, "vgg16." + n)
    x = pool_same(x, 2, 2).detach()  # the reference's tf.stop_gradient after pool2
    for n in ["conv3_1", "conv3_2", "conv3_3"]:
        x = c(x, "vgg16." + n)
    x = pool_same(x, 2, 2)
    for n in ["conv4_1", "conv4_2", "conv4_3"]:
        x = c(x, "vgg16." + n)
    conv4_3 = F.normalize(x, dim=1, eps=1e-12) * p["conv4_3_scale"].view(1, -1, 1, 1)
    x = pool_same(x, 2, 2)
    for n in ["conv5_1", "conv5_2", "conv5_3"]:
        x = c(x, "vgg16." + n)
    x = pool_same(x, 3, 1)
    x = c(x, "vgg16.fc6", dilation=6)
    fc7 = c(x, "vgg16.fc7")
    maps = [conv4_3, fc7]
    x = fc7
    for i in (8, 9, 10):
        x = c(x, f"conv{i}_1")
        x = c(x, f"conv{i}_2", stride=2)
        maps.append(x)
    maps.append(c(x, "conv11", stride=2))
    seg, lnk, reg = [], [], []
    B = images.shape[0]
    flat = lambda y, k: y.permute(0, 2, 3, 1).reshape(B, -1, k)
    for l, m in enumerate(maps):
        d = f"det_{l + 1}."
        seg.append(flat(c(m, d + "conv_cls", relu=False), 2))
        lnk.append(flat(c(m, d + "conv_lnk", relu=False), 2))
        reg.append(flat(c(m, d + "conv_reg", relu=False), 6))
    return torch.cat(seg, 1), torch.cat(lnk, 1), torch.cat(reg, 1)


def cls_mining(scores, status, ratio=3.0):
    """model.py's _cls_mining: positives' CE plus the hardest negatives' (least negative
    probability), k = int(min(ratio * positives, negatives)), over everything given."""
    pos = status == 1
    n_pos = int(pos.sum())
    pos_loss = F.cross_entropy(scores[pos], torch.ones(n_pos, dtype=torch.long), reduction="sum")
    neg_scores = scores[status == -1]
    k = int(min(n_pos * ratio, neg_scores.shape[0]))
    neg_prob = torch.softmax(neg_scores, 1)[:, 0]
    _, idx = torch.topk(-neg_prob, k)
    neg_loss = F.cross_entropy(neg_scores[idx], torch.zeros(k, dtype=torch.long), reduction="sum")
    return (pos_loss + neg_loss) / max(1.0, n_pos), n_pos


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--in", dest="inp", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--f64", action="store_true")
    a = ap.parse_args()
    t = st.load(a.inp)
    dt = torch.float64 if a.f64 else torch.float32
    targets = {k: t.pop(k) for k in ["seg_labels", "seg_offsets", "link_labels"]}
    images = t.pop("images").to(dt)
    params = {k: v.to(dt).requires_grad_(True) for k, v in t.items()}
    seg, lnk, reg = network(params, images)
    seg_status = targets["seg_labels"].reshape(-1)
    loss_seg, n_pos = cls_mining(seg.reshape(-1, 2), seg_status)
    loss_link, _ = cls_mining(lnk.reshape(-1, 2), targets["link_labels"].reshape(-1))
    pos = seg_status == 1
    gt = targets["seg_offsets"].reshape(-1, 6).to(dt)[pos]
    diff = (reg.reshape(-1, 6)[pos] - gt).abs()
    l1 = torch.where(diff < 1.0, 0.5 * diff * diff, diff - 0.5).sum()
    loss_offset = l1 / max(1.0, n_pos)
    (loss_seg + loss_link + loss_offset).backward()
    out = {"seg_logits": seg, "link_logits": lnk, "offsets": reg,
           "loss_seg": loss_seg.reshape(1), "loss_link": loss_link.reshape(1),
           "loss_offset": loss_offset.reshape(1)}
    out = {k: v.detach().float().contiguous() for k, v in out.items()}
    for k, v in params.items():
        if v.grad is not None:
            out["grad." + k] = v.grad.float().contiguous()
    st.save(a.out, out)


if __name__ == "__main__":
    main()
