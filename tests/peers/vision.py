"""The CNN classifiers' PyTorch peers (MODELS.md §2): torchvision's models where torchvision has
them, so aim's models (same parameter names) can be checked against them through safetensors.

CLI (/usr/bin/python3 with python3-torch and python3-torchvision):
  vision.py MODEL --out-dir DIR [--classes N] [--image S] [--batch B] [--lr LR] [--seed K] [--tiny]
MODEL: resnet50 resnet152 resnet50_v1 vgg16 alexnet squeezenet densenet121
Writes into DIR:
  weights.safetensors  every state_dict entry (random init from the seed; BN running statistics
                       and affine parameters randomised too, so evaluation mode is not trivial)
  batch.safetensors    input [B, 3, S, S] f32, label [B] i64
  out.safetensors      logits_eval (eval mode, f32); in f64 (see reference_outputs):
                       logits_train, loss (training mode: batch statistics), grad.<param>,
                       after.<param> (one plain SGD step, lr)
"""
import argparse
import copy
import os
import sys

import torch
import torch.nn.functional as F
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
import st  # noqa: E402


def reference_outputs(m, x, y, lr):
    """Eval logits in f32; the training step (logits_train, loss, grad.*, after.*) in f64.

    One training step of a deep, randomly initialised CNN with batch-statistics BN over a batch
    of two is ill-conditioned: PyTorch's own f32 gradients differ from its f64 ones by up to ~20%
    (relative to the tensor's largest entry) on resnet50 at 64 px. So the gradients are compared
    in f64, where both sides are exact to ~1e-12, and the f32 comparison is left to the logits.
    """
    out = {}
    m.eval()
    with torch.no_grad():
        out["logits_eval"] = m(x)
    md = copy.deepcopy(m).double()
    md.train()
    logits = md(x.double())
    loss = F.cross_entropy(logits, y)
    loss.backward()
    out["logits_train"] = logits.detach()
    out["loss"] = loss.detach()
    with torch.no_grad():
        for n, p in md.named_parameters():
            out["grad." + n] = p.grad.clone()
            out["after." + n] = p - lr * p.grad
    return out


def tiny_plain(name, classes):
    """The size=tiny configurations of aim's models/plain_cnn.h on torchvision's classes and
    names: the same layers with the channels divided (vgg16, alexnet by 8, squeezenet's by 4), a
    1x1 average pool before the classifier and alexnet's conv1 at stride 1 (32 px inputs)."""
    nn = torch.nn
    tv = torchvision.models
    if name == "vgg16":
        m = tv.vgg16(num_classes=classes)
        cfg = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]
        m.features = tv.vgg.make_layers([v if v == "M" else v // 8 for v in cfg])
        m.avgpool = nn.AdaptiveAvgPool2d(1)
        m.classifier = nn.Sequential(nn.Linear(64, 512), nn.ReLU(True), nn.Dropout(),
                                     nn.Linear(512, 512), nn.ReLU(True), nn.Dropout(),
                                     nn.Linear(512, classes))
        return m
    if name == "alexnet":
        m = tv.alexnet(num_classes=classes)
        for i, mod in enumerate(m.features):
            if isinstance(mod, nn.Conv2d):
                m.features[i] = nn.Conv2d(mod.in_channels // 8 if i else 3, mod.out_channels // 8,
                                          mod.kernel_size, 1 if i == 0 else mod.stride, mod.padding)
        m.avgpool = nn.AdaptiveAvgPool2d(1)
        m.classifier = nn.Sequential(nn.Dropout(), nn.Linear(32, 512), nn.ReLU(True), nn.Dropout(),
                                     nn.Linear(512, 512), nn.ReLU(True), nn.Linear(512, classes))
        return m
    if name == "squeezenet":
        m = tv.squeezenet1_1(num_classes=classes)
        Fire = tv.squeezenet.Fire
        for i, mod in enumerate(m.features):
            if isinstance(mod, nn.Conv2d):
                m.features[i] = nn.Conv2d(3, 16, 3, 2)
            elif isinstance(mod, Fire):
                m.features[i] = Fire(mod.inplanes // 4, mod.squeeze.out_channels // 4,
                                     mod.expand1x1.out_channels // 4, mod.expand3x3.out_channels // 4)
        m.classifier[1] = nn.Conv2d(128, classes, 1)
        return m
    raise SystemExit(f"vision.py: no tiny configuration of {name}")


def build(name, classes, tiny=False):
    tv = torchvision.models
    if tiny:
        return tiny_plain(name, classes)
    if name == "resnet50":
        return tv.resnet50(num_classes=classes)
    if name == "resnet152":
        return tv.resnet152(num_classes=classes)
    if name == "resnet50_v1":
        # v1: the stride on the first 1x1 conv of each bottleneck, not on the 3x3.
        m = tv.resnet50(num_classes=classes)
        for layer in (m.layer2, m.layer3, m.layer4):
            b = layer[0]
            b.conv1.stride, b.conv2.stride = b.conv2.stride, (1, 1)
        return m
    if name == "vgg16":
        return tv.vgg16(num_classes=classes)
    if name == "alexnet":
        return tv.alexnet(num_classes=classes)
    if name == "squeezenet":
        return tv.squeezenet1_1(num_classes=classes)
    if name == "densenet121":
        return tv.densenet121(num_classes=classes)
    raise SystemExit(f"vision.py: unknown model {name}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--image", type=int, default=64)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tiny", action="store_true", help="vgg16, alexnet, squeezenet: size=tiny")
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    m = build(a.model, a.classes, a.tiny)
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.2, 0.2)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)
    # Dropout would make the two sides differ: the peers compare with dropout off.
    for mod in m.modules():
        if isinstance(mod, torch.nn.Dropout):
            mod.p = 0.0
    sd = {k: v.detach().clone() for k, v in m.state_dict().items()}
    st.save(os.path.join(a.out_dir, "weights.safetensors"), sd)
    x = torch.randn(a.batch, 3, a.image, a.image)
    y = torch.randint(0, a.classes, (a.batch,))
    st.save(os.path.join(a.out_dir, "batch.safetensors"), {"input": x, "label": y})
    out = reference_outputs(m, x, y, a.lr)
    st.save(os.path.join(a.out_dir, "out.safetensors"), out)


if __name__ == "__main__":
    main()
