"""PyTorch peer of aim's cpn (models/cpn.h): tf-cpn's network (ResNet-101 backbone, GlobalNet,
RefineNet), losses (global L2 against the four Gaussian targets, refine L2 with online hard
keypoint mining) and mptest.py's flip test and keypoint decoding, written in torch / numpy on
aim's weights and names.

Input (--in, safetensors): the model's state dict by aim's names (conv1.weight, bn1.*,
layer1.0.conv1.weight, ..., global_net.lateral5.conv.weight, global_net.merge4.weight, ...,
refine_net.res3.0.conv1.weight, refine_net.final_bottleneck.*, refine_net.refine_out.*), "images"
[B, 3, H, W] in [0, 1], "heatmaps" [B, 4, 17, h, w], "valid" [B, 17]; --blocks the ResNet stages'
block counts, --top-k the OHKM k.
Output (--out): "global2".."global5", "refine" (training mode: batch statistics), "loss_global",
"loss_refine", "loss", "grad.<name>" for every parameter; "eval_heatmaps" (eval mode, running
statistics, flip-averaged) and "keypoints" [B, 17, 3] decoded from them as mptest.py.
Run with --f64 to compute in double.
"""
import argparse
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
import st  # noqa: E402

FLIP_PAIRS = [(1, 2), (3, 4), (5, 6), (7, 8), (9, 10), (11, 12), (13, 14), (15, 16)]


def bn(p, n, x, train):
    return F.batch_norm(x, p[n + ".running_mean"], p[n + ".running_var"], p[n + ".weight"],
                        p[n + ".bias"], training=train, momentum=0.0, eps=1e-5)


def conv_bn(p, n, x, train, relu):
    w = p[n + ".conv.weight"]
    y = bn(p, n + ".bn", F.conv2d(x, w, padding=w.shape[-1] // 2), train)
    return F.relu(y) if relu else y


def bottleneck(p, n, x, train, stride=1):
    """torchvision's Bottleneck (stride on the 3x3 conv) = slim's resnet_v1 bottleneck."""
    y = F.relu(bn(p, n + ".bn1", F.conv2d(x, p[n + ".conv1.weight"]), train))
    y = F.relu(bn(p, n + ".bn2", F.conv2d(y, p[n + ".conv2.weight"], stride=stride, padding=1),
                  train))
    y = bn(p, n + ".bn3", F.conv2d(y, p[n + ".conv3.weight"]), train)
    if n + ".downsample.0.weight" in p:
        x = bn(p, n + ".downsample.1", F.conv2d(x, p[n + ".downsample.0.weight"], stride=stride),
               train)
    return F.relu(y + x)


def resize(x, h, w):
    return F.interpolate(x, size=(h, w), mode="bilinear", align_corners=False)


def network(p, images, blocks, train):
    mean = torch.tensor([122.77, 115.95, 102.98], dtype=images.dtype).view(1, 3, 1, 1)
    x = (images * 255.0 - mean)[:, [2, 1, 0]]  # BGR
    x = F.relu(bn(p, "bn1", F.conv2d(x, p["conv1.weight"], stride=2, padding=3), train))
    x = F.max_pool2d(x, 3, 2, 1)
    c = []
    for s, nb in enumerate(blocks):
        for b in range(nb):
            x = bottleneck(p, "layer%d.%d" % (s + 1, b), x, train, 2 if s > 0 and b == 0 else 1)
        c.append(x)
    oh, ow = c[0].shape[2], c[0].shape[3]
    fms, outs = [None] * 4, [None] * 4
    last = None
    for l in (3, 2, 1, 0):
        L = str(l + 2)
        lat = conv_bn(p, "global_net.lateral" + L, c[l], train, True)
        if last is None:
            last = lat
        else:
            up = resize(last, lat.shape[2], lat.shape[3])
            last = F.conv2d(up, p["global_net.merge%s.weight" % L], p["global_net.merge%s.bias" % L])
            last = last + lat
        fms[l] = last
        t = conv_bn(p, "global_net.tmp" + L, last, train, True)
        outs[l] = resize(conv_bn(p, "global_net.pyramid" + L, t, train, False), oh, ow)
    ups = []
    for l in range(4):
        m = fms[l]
        for j in range(l):
            m = bottleneck(p, "refine_net.res%d.%d" % (l + 2, j), m, train)
        ups.append(resize(m, oh, ow))
    r = bottleneck(p, "refine_net.final_bottleneck", torch.cat(ups, 1), train)
    return outs, conv_bn(p, "refine_net.refine_out", r, train, False)


def losses(outs, refine, heatmaps, valid, top_k):
    """tf-cpn network.py: global (labels masked by valid > 1.1) and OHKM refine (valid > 0.1)."""
    g = 0.0
    for l in range(4):
        label = heatmaps[:, l] * (valid > 1.1).to(heatmaps.dtype)[:, :, None, None]
        g = g + ((outs[l] - label) ** 2).mean() / 4
    g = g / 2
    per = ((refine - heatmaps[:, 3]) ** 2).mean(dim=(2, 3)) * (valid > 0.1).to(refine.dtype)
    r = 0.0
    for i in range(per.shape[0]):
        _, idx = torch.topk(per[i], top_k, sorted=False)
        r = r + per[i][idx].sum() / top_k
    r = r / per.shape[0]
    return g, r


def cv_blur(m, k):
    """cv2.GaussianBlur(m, (k, k), 0): separable, sigma from k, BORDER_REFLECT_101."""
    sigma = 0.3 * ((k - 1) * 0.5 - 1) + 0.8
    d = np.arange(k) - (k - 1) / 2
    g = np.exp(-d * d / (2 * sigma * sigma))
    g /= g.sum()
    r = k // 2
    p = np.pad(m, ((0, 0), (r, r)), mode="reflect")
    rows = sum(g[t] * p[:, t:t + m.shape[1]] for t in range(k))
    p = np.pad(rows, ((r, r), (0, 0)), mode="reflect")
    return sum(g[t] * p[t:t + m.shape[0]] for t in range(k))


def decode(heat, in_h, in_w):
    """mptest.py: per keypoint normalise, pad 10, blur 21, argmax + a quarter towards the second."""
    K, h, w = heat.shape
    border = 10
    out = np.zeros((K, 3))
    r0 = heat / 255.0 + 0.5
    sx, sy = in_w / w, in_h / h
    for k in range(K):
        res = heat[k] / np.amax(heat[k])
        dr = np.zeros((h + 2 * border, w + 2 * border))
        dr[border:-border, border:-border] = res
        dr = cv_blur(dr, 21)
        y, x = np.unravel_index(dr.argmax(), dr.shape)
        dr[y, x] = 0
        py, px = np.unravel_index(dr.argmax(), dr.shape)
        y -= border
        x -= border
        py -= border + y
        px -= border + x
        ln = (px ** 2 + py ** 2) ** 0.5
        x, y = float(x), float(y)
        if ln > 1e-3:
            x += 0.25 * px / ln
            y += 0.25 * py / ln
        x = max(0, min(x, w - 1))
        y = max(0, min(y, h - 1))
        out[k] = (x * sx + sx / 2, y * sy + sy / 2, r0[k, int(round(y) + 1e-10), int(round(x) + 1e-10)])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--in", dest="inp", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--blocks", default="1,1,1,1")
    ap.add_argument("--top-k", type=int, default=8)
    ap.add_argument("--f64", action="store_true")
    a = ap.parse_args()
    dt = torch.float64 if a.f64 else torch.float32
    t = st.load(a.inp)
    blocks = [int(v) for v in a.blocks.split(",")]
    images = t.pop("images").to(dt)
    heatmaps = t.pop("heatmaps").to(dt)
    valid = t.pop("valid").to(dt)
    p = {}
    for n, v in t.items():
        v = v.to(dt) if v.is_floating_point() else v
        if n.endswith(("running_mean", "running_var", "num_batches_tracked")):
            p[n] = v
        else:
            p[n] = v.clone().requires_grad_(True)
    res = {}
    with torch.no_grad():
        # Flip test in eval mode: the image and its mirror, flipped back with pairs swapped.
        B = images.shape[0]
        _, h = network(p, torch.cat([images, images.flip(3)]), blocks, False)
        back = h[B:].flip(3).clone()
        for q, w in FLIP_PAIRS:
            back[:, [q, w]] = back[:, [w, q]]
        heat = (h[:B] + back) / 2
        res["eval_heatmaps"] = heat
        kp = np.stack([decode(heat[b].double().numpy(), images.shape[2], images.shape[3])
                       for b in range(B)])
        res["keypoints"] = torch.from_numpy(kp)
    outs, refine = network(p, images, blocks, True)
    g, r = losses(outs, refine, heatmaps, valid, a.top_k)
    loss = g + r
    loss.backward()
    for l in range(4):
        res["global%d" % (l + 2)] = outs[l].detach()
    res["refine"] = refine.detach()
    res["loss_global"] = g.detach().reshape(1)
    res["loss_refine"] = r.detach().reshape(1)
    res["loss"] = loss.detach().reshape(1)
    for n, v in p.items():
        if v.requires_grad and v.grad is not None:
            res["grad." + n] = v.grad
    st.save(a.out, {k: v.contiguous() for k, v in res.items()})


if __name__ == "__main__":
    main()
