"""PyTorch peers of AI Matrix's TF CNN classifiers (MODELS.md §2.1, nvcnn.py) and of
torchvision's DenseNet-121, with the same parameter names as aim's models/googlenet.h,
models/synnet.h and models/densenet.h, so weights travel through safetensors and outputs compare.

CLI (/usr/bin/python3 with python3-torch and python3-torchvision):
  aimatrix_cnn.py MODEL --out-dir DIR [--classes N] [--image S] [--batch B] [--lr LR] [--seed K]
                  [--tiny]
  aimatrix_cnn.py --macs MODEL [--image S] [--tiny]   (prints conv + FC multiply-adds per image)
MODEL: googlenet synnet densenet121 densenet121_aimatrix_tf. --tiny builds the models' tiny
configurations (the same sizes as aim's size=tiny).
Writes into DIR (as tests/peers/vision.py):
  weights.safetensors  every state_dict entry (random init from the seed; biases, BN running
                       statistics and affine parameters randomised, so evaluation mode is not
                       trivial)
  batch.safetensors    input [B, 3, S, S] f32, label [B] i64
  out.safetensors      logits_eval (eval mode), logits_train, loss (training mode: batch
                       statistics), grad.<param>, after.<param> (one plain SGD step, lr)
TF "SAME" padding: out = ceil(in / stride), total pad max((out - 1) * stride + k - in, 0), the odd
pixel after; applied with F.pad before the conv (zeros) or the max pool (-inf).
"""
import argparse
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
import st  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vision  # noqa: E402


def same_pads(size, k, s):
    out = -(-size // s)
    total = max((out - 1) * s + k - size, 0)
    return total // 2, total - total // 2


def tf_same_pad(x, k, s, value=0.0):
    t, b = same_pads(x.shape[2], k, s)
    left, r = same_pads(x.shape[3], k, s)
    return F.pad(x, (left, r, t, b), value=value)


class SameConv2d(nn.Conv2d):
    """nn.Conv2d with TF SAME padding (square kernel, stride as given)."""

    def __init__(self, cin, cout, k, stride=1, bias=True):
        super().__init__(cin, cout, k, stride=stride, padding=0, bias=bias)

    def forward(self, x):
        return super().forward(tf_same_pad(x, self.kernel_size[0], self.stride[0]))


class SameMaxPool2d(nn.Module):
    def __init__(self, k, s):
        super().__init__()
        self.k, self.s = k, s

    def forward(self, x):
        return F.max_pool2d(tf_same_pad(x, self.k, self.s, float("-inf")), self.k, self.s)


def glorot_(module):
    """nvcnn's init: conv and FC weights Glorot-uniform (fans include the receptive field)."""
    for m in module.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.xavier_uniform_(m.weight)


# ---------------------------------------------------------------------------------- googlenet
class Inception(nn.Module):
    def __init__(self, cin, k, l, m, n, p, q):
        super().__init__()
        self.branch1 = SameConv2d(cin, k, 1)
        self.branch2 = nn.Sequential(SameConv2d(cin, l, 1), SameConv2d(l, m, 3))
        self.branch3 = nn.Sequential(SameConv2d(cin, n, 1), SameConv2d(n, p, 5))
        self.branch4 = nn.Sequential(SameMaxPool2d(3, 1), SameConv2d(cin, q, 1))

    def forward(self, x):
        b1 = F.relu(self.branch1(x))
        b2 = F.relu(self.branch2[1](F.relu(self.branch2[0](x))))
        b3 = F.relu(self.branch3[1](F.relu(self.branch3[0](x))))
        b4 = F.relu(self.branch4[1](self.branch4[0](x)))
        return torch.cat([b1, b2, b3, b4], 1)


class GoogLeNet(nn.Module):
    """nvcnn.py inference_googlenet: no BN, no LRN, no aux heads, no dropout."""

    CFG = [("inception3a", (64, 96, 128, 16, 32, 32)), ("inception3b", (128, 128, 192, 32, 96, 64)),
           ("maxpool3", None),
           ("inception4a", (192, 96, 208, 16, 48, 64)), ("inception4b", (160, 112, 224, 24, 64, 64)),
           ("inception4c", (128, 128, 256, 24, 64, 64)), ("inception4d", (112, 144, 288, 32, 64, 64)),
           ("inception4e", (256, 160, 320, 32, 128, 128)), ("maxpool4", None),
           ("inception5a", (256, 160, 320, 32, 128, 128)), ("inception5b", (384, 192, 384, 48, 128, 128))]

    def __init__(self, classes, tiny):
        super().__init__()
        div = 8 if tiny else 1
        ch = lambda n: -(-n // div)  # noqa: E731
        self.conv1 = SameConv2d(3, ch(64), 7, 2)
        self.maxpool1 = SameMaxPool2d(3, 2)
        self.conv2 = SameConv2d(ch(64), ch(64), 1)
        self.conv3 = SameConv2d(ch(64), ch(192), 3)
        self.maxpool2 = SameMaxPool2d(3, 2)
        self.order = []
        cin = ch(192)
        for name, w in self.CFG:
            if w is None:
                setattr(self, name, SameMaxPool2d(3, 2))
            else:
                w = [ch(v) for v in w]
                setattr(self, name, Inception(cin, *w))
                cin = w[0] + w[2] + w[4] + w[5]
            self.order.append(name)
        self.fc = nn.Linear(cin, classes)
        glorot_(self)

    def forward(self, x):
        x = self.maxpool1(F.relu(self.conv1(x)))
        x = self.maxpool2(F.relu(self.conv3(F.relu(self.conv2(x)))))
        for name in self.order:
            x = getattr(self, name)(x)
        return self.fc(x.mean((2, 3)))


# ------------------------------------------------------------------------------------- synnet
SYNNET_GROUPS = [
    [(42, 5), (40, 3), (48, 3)],
    [(4, 5), (93, 5), (2, 5), (52, 5), (46, 5), (54, 5), (2, 5), (22, 5), (2, 3), (46, 3), (206, 3)],
    [(23, 5), (273, 3), (25, 3), (299, 3), (449, 3), (49, 3), (406, 3), (12, 3), (48, 3), (209, 3),
     (39, 3), (309, 3)],
    [(192, 5), (90, 5), (88, 5), (663, 5), (23, 3), (139, 3), (91, 3), (580, 3), (310, 3), (188, 3),
     (55, 3), (252, 3), (25, 3), (49, 3), (862, 3)],
    [(147, 5), (177, 5), (82, 5), (517, 4), (307, 3), (182, 3), (367, 3), (131, 3), (291, 3),
     (456, 2), (345, 1)],
    [(150, 5), (298, 5), (48, 4), (48, 4), (48, 3), (48, 3), (48, 2), (48, 2), (40, 1), (43, 1)],
]


class ConvBnRelu(nn.Module):
    def __init__(self, cin, cout, k):
        super().__init__()
        self.conv = SameConv2d(cin, cout, k, bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=1e-4, momentum=0.1)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


class SynNet(nn.Module):
    """nvcnn.py inference_synthetic_net; tiny: channels / 16, no pool after group1."""

    def __init__(self, classes, image, tiny):
        super().__init__()
        div = 16 if tiny else 1
        cin = 3
        for g, convs in enumerate(SYNNET_GROUPS):
            layers = []
            for out, k in convs:
                out = -(-out // div)
                layers.append(ConvBnRelu(cin, out, k))
                cin = out
            if not (tiny and g == 0):
                layers.append(nn.MaxPool2d(2, 2))
            setattr(self, f"group{g + 1}", nn.Sequential(*layers))
        pools = 5 if tiny else 6
        side = image >> pools
        self.fc = nn.Linear(cin * side * side, classes)
        glorot_(self)

    def forward(self, x):
        for g in range(len(SYNNET_GROUPS)):
            x = getattr(self, f"group{g + 1}")(x)
        return self.fc(torch.flatten(x, 1))


# ------------------------------------------------------------------------ densenet aimatrix_tf
def bn(c):
    return nn.BatchNorm2d(c, eps=1e-4, momentum=0.1)


class TfDenseLayer(nn.Module):
    def __init__(self, cin, growth):
        super().__init__()
        self.norm1 = bn(cin)
        self.conv1 = nn.Conv2d(cin, growth, 1, bias=False)
        self.conv1_norm = bn(growth)
        self.norm2 = bn(growth)
        self.conv2 = nn.Conv2d(growth, growth, 3, padding=1, bias=False)
        self.conv2_norm = bn(growth)

    def forward(self, x):
        y = F.relu(self.conv1_norm(self.conv1(F.relu(self.norm1(x)))))
        y = F.relu(self.conv2_norm(self.conv2(F.relu(self.norm2(y)))))
        return torch.cat([x, y], 1)


class TfTransition(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.norm = bn(cin)
        self.conv = nn.Conv2d(cin, cout, 1, bias=False)
        self.conv_norm = bn(cout)
        self.pool = nn.AvgPool2d(2, 2)

    def forward(self, x):
        return self.pool(F.relu(self.conv_norm(self.conv(F.relu(self.norm(x))))))


class DenseNetAimatrixTf(nn.Module):
    """nvcnn.py inference_densenet (121): three dense blocks, growth-wide bottleneck, BN + ReLU
    after every conv, transitions to the cumulative growth. Tiny: growth 8, 16 initial features,
    2 layers per block, conv0 stride 1."""

    def __init__(self, classes, tiny):
        super().__init__()
        growth, init, blocks = (8, 16, [2, 2, 2]) if tiny else (32, 64, [6, 12, 24])
        f = nn.Sequential()
        f.add_module("conv0", nn.Conv2d(3, init, 7, stride=1 if tiny else 2, bias=False))
        f.add_module("norm0", bn(init))
        f.add_module("relu0", nn.ReLU())
        f.add_module("pool0", nn.AvgPool2d(2, 2))
        c, size = init, 0
        for b, n in enumerate(blocks):
            block = nn.Sequential()
            for i in range(n):
                block.add_module(f"denselayer{i + 1}", TfDenseLayer(c, growth))
                c += growth
                size += growth
            f.add_module(f"denseblock{b + 1}", block)
            f.add_module(f"transition{b + 1}", TfTransition(c, size))
            c = size
        f.add_module(f"norm{len(blocks) + 1}", bn(c))
        self.features = f
        self.classifier = nn.Linear(c, classes)
        glorot_(self)

    def forward(self, x):
        return self.classifier(F.relu(self.features(x)).mean((2, 3)))


def build(name, classes, image, tiny):
    if name == "googlenet":
        return GoogLeNet(classes, tiny)
    if name == "synnet":
        return SynNet(classes, image, tiny)
    if name == "densenet121":
        if tiny:
            return torchvision.models.DenseNet(growth_rate=8, block_config=(2, 2, 2, 2),
                                               num_init_features=16, bn_size=4,
                                               num_classes=classes)
        return torchvision.models.densenet121(num_classes=classes)
    if name == "densenet121_aimatrix_tf":
        return DenseNetAimatrixTf(classes, tiny)
    raise SystemExit(f"aimatrix_cnn.py: unknown model {name}")


def macs(m, image):
    """Multiply-adds of every Conv2d and Linear for one image, counted by forward hooks."""
    total = [0]

    def hook(mod, inp, out):
        if isinstance(mod, nn.Conv2d):
            total[0] += out.numel() * (mod.in_channels // mod.groups) * \
                mod.kernel_size[0] * mod.kernel_size[1]
        else:
            total[0] += out.numel() * mod.in_features

    for mod in m.modules():
        if isinstance(mod, (nn.Conv2d, nn.Linear)):
            mod.register_forward_hook(hook)
    m.eval()
    with torch.no_grad():
        m(torch.zeros(1, 3, image, image))
    return total[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--out-dir")
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--macs", action="store_true")
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    m = build(a.model, a.classes, a.image, a.tiny)
    if a.macs:
        print(macs(m, a.image))
        return
    if not a.out_dir:
        raise SystemExit("aimatrix_cnn.py: --out-dir is required (or --macs)")
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.2, 0.2)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)
            elif isinstance(mod, (nn.Conv2d, nn.Linear)) and mod.bias is not None:
                mod.bias.uniform_(-0.1, 0.1)
    sd = {k: v.detach().clone() for k, v in m.state_dict().items()}
    st.save(os.path.join(a.out_dir, "weights.safetensors"), sd)
    x = torch.randn(a.batch, 3, a.image, a.image)
    y = torch.randint(0, a.classes, (a.batch,))
    st.save(os.path.join(a.out_dir, "batch.safetensors"), {"input": x, "label": y})
    out = vision.reference_outputs(m, x, y, a.lr)
    st.save(os.path.join(a.out_dir, "out.safetensors"), out)


if __name__ == "__main__":
    main()
