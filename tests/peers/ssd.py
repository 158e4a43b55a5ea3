"""torchvision 0.14's ssd300_vgg16: the parity peer of aim's models/ssd.h.

CLI (/usr/bin/python3):
  ssd.py --batch B.safetensors --weights W.safetensors --out O.safetensors
         [--seed S] [--classes C] [--logit-scale F] [--background-bias F]
B holds images [B, 3, 300, 300] f32 in [0, 1], boxes [B, G, 4] f32 (pixels), labels [B, G] i64
and num_boxes [B] i64 (image b's objects: its first num_boxes[b] rows).
The model is ssd300_vgg16(weights=None, weights_backbone=None, num_classes=C) built after
torch.manual_seed(S) (torchvision's own random init). To make its outputs look trained (few
scores above 0.01, so that the detections do not hinge on near ties), the classification head's
weights and biases are multiplied by --logit-scale and --background-bias is added to each
anchor's background logit bias. W receives that state_dict (aim loads it by name). O receives
  transform_diff []: max |GeneralizedRCNNTransform(images) - (images - mean) / std| (0: its resize
                     to 300 x 300 is the identity on these images)
  pool4_indices, pool5_indices: the maxima max_pool2d picks in pool4 (on conv4_3) and pool5 (on
                 conv5_3), eval mode
  cls_logits [B, P, C], bbox_regression [B, P, 4]: the eval-mode head outputs
  loss_bbox, loss_cls []: the training-mode loss dict (compute_loss); loss [] their sum
  grad.<name>: that sum's gradient for the parameters in GRADS (--all-grads: all)
  det<b>.boxes [D, 4], det<b>.scores [D], det<b>.labels [D]: eval-mode detections of image b
  with --f64, loss64 and grad64.<name>: the same loss and gradients of the model cast to f64 on
  the images cast to f64 (the default boxes still computed in f32, then cast, so that matching
  and encoding see the same priors): the f32 gradients' reference
"""
import argparse
import copy
import os
import sys

import torch
import torch.nn.functional as F
from torchvision.models.detection import ssd300_vgg16

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
import st  # noqa: E402

GRADS = [
    "backbone.features.0.weight",
    "backbone.features.21.bias",
    "backbone.scale_weight",
    "backbone.extra.0.5.weight",
    "backbone.extra.0.7.1.weight",
    "backbone.extra.1.2.weight",
    "head.classification_head.module_list.0.weight",
    "head.classification_head.module_list.1.bias",
    "head.regression_head.module_list.0.weight",
    "head.regression_head.module_list.2.bias",
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", required=True)
    ap.add_argument("--weights", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--classes", type=int, default=21)
    ap.add_argument("--logit-scale", type=float, default=1.0)
    ap.add_argument("--background-bias", type=float, default=0.0)
    ap.add_argument("--all-grads", action="store_true", help="every parameter's, not GRADS'")
    ap.add_argument("--f64", action="store_true", help="also the f64 loss and gradients")
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    model = ssd300_vgg16(weights=None, weights_backbone=None, num_classes=a.classes)
    with torch.no_grad():
        for conv in model.head.classification_head.module_list:
            conv.weight.mul_(a.logit_scale)
            conv.bias.mul_(a.logit_scale)
            conv.bias[0 :: a.classes] += a.background_bias
    st.save(a.weights, model.state_dict())

    b = st.load(a.batch)
    images = [im for im in b["images"]]
    targets = []
    for i in range(len(images)):
        n = int(b["num_boxes"][i])
        targets.append({"boxes": b["boxes"][i, :n].clone(), "labels": b["labels"][i, :n].clone()})
    out = {}

    model.eval()
    with torch.no_grad():
        il, _ = model.transform(images)
        t = model.transform
        mean = torch.as_tensor(t.image_mean)[:, None, None]
        std = torch.as_tensor(t.image_std)[:, None, None]
        out["transform_diff"] = (il.tensors - (b["images"] - mean) / std).abs().max()
        feats = list(model.backbone(il.tensors).values())
        conv4_3 = model.backbone.features(il.tensors)
        conv5_3 = model.backbone.extra[0][:7](conv4_3)
        out["pool4_indices"] = F.max_pool2d(conv4_3, 2, 2, return_indices=True)[1]
        out["pool5_indices"] = F.max_pool2d(conv5_3, 3, 1, 1, return_indices=True)[1]
        heads = model.head(feats)
        out["cls_logits"] = heads["cls_logits"]
        out["bbox_regression"] = heads["bbox_regression"]
        dets = model(images)
    for i, d in enumerate(dets):
        for k in ("boxes", "scores", "labels"):
            out["det%d.%s" % (i, k)] = d[k]

    def train_step(m, dt, prefix):
        m.train()
        ims = [im.to(dt) for im in images]
        tgs = [{"boxes": t["boxes"].to(dt), "labels": t["labels"]} for t in targets]
        losses = m(ims, tgs)
        loss = losses["bbox_regression"] + losses["classification"]
        loss.backward()
        params = dict(m.named_parameters())
        for n in params if a.all_grads else GRADS:
            out[prefix + "." + n] = params[n].grad
        return losses, loss

    model64 = copy.deepcopy(model).double() if a.f64 else None
    losses, loss = train_step(model, torch.float32, "grad")
    out["loss_bbox"] = losses["bbox_regression"].detach()
    out["loss_cls"] = losses["classification"].detach()
    out["loss"] = loss.detach()
    if a.f64:
        gen = model64.anchor_generator.forward
        model64.anchor_generator.forward = lambda il, feats: [
            b.double() for b in gen(il, [f.float() for f in feats])
        ]
        out["loss64"] = train_step(model64, torch.float64, "grad64")[1].detach()
    st.save(a.out, out)


if __name__ == "__main__":
    main()
