"""torchvision 0.14 peer of aim's Mask R-CNN parts (models/detection/torchvision_rcnn.h):
AnchorGenerator, RegionProposalNetwork (filter_proposals, anchor targets, compute_loss),
RoIHeads (select_training_samples, postprocess_detections, fastrcnn_loss, maskrcnn_loss) and
MultiScaleRoIAlign. The balanced samplers draw with torch.randperm there; here they return aim's
choices (inputs pos_*/neg_*), so the rest can be compared exactly.

CLI (/usr/bin/python3): mask_rcnn_parts.py IN OUT
IN holds (B images, b < B):
  cfg [8] i64: B, pad_h, pad_w, C (classes with background), M (mask size), pre_nms, post_nms, 0
  grids [5, 2] i64, sizes [B, 2] i64 (unpadded h, w)
  logits [B, N], deltas [B, N, 4]; gt_<b> [G, 4], gtl_<b> [G] i64, gtm_<b> [G, h, w] (0/1)
  rpn_pos_<b>, rpn_neg_<b> i64 (aim's sampled anchors), props_<b> [P, 4] (aim's proposals),
  roi_pos_<b>, roi_neg_<b> i64 (aim's sampled candidates, indices into props ++ gt)
  cls_<b> [P, C], reg_<b> [P, C * 4] (box head outputs on props_<b>)
  tcls [S, C], treg [S, C * 4] (head outputs on the sampled rows), mlog [F, C, M, M]
  feat_<l> [B, 3, h_l, w_l] for l < 4
OUT holds anchors [N, 4]; per image boxes_<b>, scores_<b> (proposals), rpn_labels_<b>,
  rpn_targets_<b>, roi_labels_<b> (before sampling), rois_<b>, roi_targets_<b>, roi_matched_<b>,
  det_boxes_<b>, det_scores_<b>, det_labels_<b>; rpn_obj, rpn_box, d_logits, d_deltas (the RPN
  losses and their gradients), cls_loss, box_loss, d_tcls, d_treg, mask_loss, d_mlog, pooled7,
  pooled14.
"""
import os
import sys
from collections import OrderedDict

import torch
from torchvision.models.detection import roi_heads as rh
from torchvision.models.detection.anchor_utils import AnchorGenerator
from torchvision.models.detection.image_list import ImageList
from torchvision.models.detection.roi_heads import RoIHeads
from torchvision.models.detection.rpn import RegionProposalNetwork
from torchvision.ops import MultiScaleRoIAlign

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
import st  # noqa: E402


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
            # aim's choices must be what torchvision's sampler could have drawn.
            assert bool((lab[p] >= 1).all()) and bool((lab[n] == 0).all())
            pm.append(a)
            nm.append(b)
        return pm, nm


def main():
    inp = st.load(sys.argv[1])
    B, ph, pw, C, M, pre, post, _ = [int(v) for v in inp["cfg"].tolist()]
    grids = [tuple(int(v) for v in g) for g in inp["grids"].tolist()]
    sizes = [tuple(int(v) for v in s) for s in inp["sizes"].tolist()]
    out = {}
    torch.set_num_threads(1)

    gen = AnchorGenerator(((32,), (64,), (128,), (256,), (512,)), ((0.5, 1.0, 2.0),) * 5)
    il = ImageList(torch.zeros(B, 3, ph, pw), sizes)
    fmaps = [torch.zeros(B, 1, h, w) for h, w in grids]
    anchors = gen(il, fmaps)
    out["anchors"] = anchors[0]
    counts = [3 * h * w for h, w in grids]

    rpn = RegionProposalNetwork(gen, None, 0.7, 0.3, 256, 0.5, dict(training=pre, testing=pre),
                                dict(training=post, testing=post), 0.7)
    rpn.eval()
    logits = inp["logits"].clone().requires_grad_(True)
    deltas = inp["deltas"].clone().requires_grad_(True)
    N = logits.shape[1]
    props = rpn.box_coder.decode(deltas.detach().reshape(-1, 4), anchors).view(B, -1, 4)
    boxes, scores = rpn.filter_proposals(props, logits.detach(), sizes, counts)
    targets = [{"boxes": inp["gt_%d" % b], "labels": inp["gtl_%d" % b],
                "masks": inp["gtm_%d" % b]} for b in range(B)]
    labels, matched = rpn.assign_targets_to_anchors(anchors, targets)
    reg = rpn.box_coder.encode(matched, anchors)
    for b in range(B):
        out["boxes_%d" % b], out["scores_%d" % b] = boxes[b], scores[b]
        out["rpn_labels_%d" % b] = labels[b].to(torch.int64)
        out["rpn_targets_%d" % b] = reg[b]
    rpn.fg_bg_sampler = GivenSampler([inp["rpn_pos_%d" % b] for b in range(B)],
                                     [inp["rpn_neg_%d" % b] for b in range(B)])
    lo, lb = rpn.compute_loss(logits.reshape(-1, 1), deltas.reshape(-1, 4), labels, reg)
    (lo + lb).backward()
    out["rpn_obj"], out["rpn_box"] = lo.detach(), lb.detach()
    out["d_logits"], out["d_deltas"] = logits.grad, deltas.grad

    heads = RoIHeads(None, None, None, 0.5, 0.5, 512, 0.25, None, 0.05, 0.5, 100)
    aim_props = [inp["props_%d" % b] for b in range(B)]
    cand = heads.add_gt_proposals(aim_props, [t["boxes"] for t in targets])
    _, all_labels = heads.assign_targets_to_proposals(cand, [t["boxes"] for t in targets],
                                                      [t["labels"] for t in targets])
    heads.fg_bg_sampler = GivenSampler([inp["roi_pos_%d" % b] for b in range(B)],
                                       [inp["roi_neg_%d" % b] for b in range(B)])
    rois, matched_idxs, roi_labels, roi_targets = heads.select_training_samples(aim_props, targets)
    for b in range(B):
        out["roi_labels_%d" % b] = all_labels[b]
        out["rois_%d" % b], out["roi_targets_%d" % b] = rois[b], roi_targets[b]
        out["roi_matched_%d" % b] = matched_idxs[b]

    tcls = inp["tcls"].clone().requires_grad_(True)
    treg = inp["treg"].clone().requires_grad_(True)
    cl, bl = rh.fastrcnn_loss(tcls, treg, roi_labels, roi_targets)
    (cl + bl).backward()
    out["cls_loss"], out["box_loss"], out["d_tcls"], out["d_treg"] = cl.detach(), bl.detach(), \
        tcls.grad, treg.grad

    pos_props, pos_matched = [], []
    for b in range(B):
        p = torch.where(roi_labels[b] > 0)[0]
        pos_props.append(rois[b][p])
        pos_matched.append(matched_idxs[b][p])
    mlog = inp["mlog"].clone().requires_grad_(True)
    ml = rh.maskrcnn_loss(mlog, pos_props, [t["masks"] for t in targets],
                          [t["labels"] for t in targets], pos_matched)
    ml.backward()
    out["mask_loss"], out["d_mlog"] = ml.detach(), mlog.grad

    cls = torch.cat([inp["cls_%d" % b] for b in range(B)])
    regp = torch.cat([inp["reg_%d" % b] for b in range(B)])
    db, ds, dl = heads.postprocess_detections(cls, regp, aim_props, sizes)
    for b in range(B):
        out["det_boxes_%d" % b], out["det_scores_%d" % b], out["det_labels_%d" % b] = \
            db[b], ds[b], dl[b]

    feats = OrderedDict((str(l), inp["feat_%d" % l]) for l in range(4))
    feats["pool"] = torch.zeros(1)
    for size in (7, 14):
        pool = MultiScaleRoIAlign(["0", "1", "2", "3"], size, 2)
        out["pooled%d" % size] = pool(feats, aim_props, sizes)
    st.save(sys.argv[2], out)


if __name__ == "__main__":
    main()
