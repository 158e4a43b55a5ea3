"""py-faster-rcnn's VGG16 end-to-end network in PyTorch: the parity peer of models/faster_rcnn.h.

The geometry is py-faster-rcnn's numpy code, written out here (generate_anchors.py,
bbox_transform.py, cython_bbox's bbox_overlaps, anchor_target_layer.py, proposal_layer.py,
proposal_target_layer.py); the network uses torchvision.ops.roi_pool and nms, and Caffe's
reshape / SoftmaxWithLoss / SmoothL1Loss layouts literally. Random subsampling is aim's: the peer
receives aim's sampled anchor labels and sampled RoIs and checks that they are a valid draw.

CLI (/usr/bin/python3):
  faster_rcnn.py --batch B.safetensors --weights W.safetensors --out O.safetensors
                 --scales 2,4,6 --classes C
B: images [1, 3, S, S] f32 RGB in [0, 1], gt_boxes [G, 4] f32, gt_labels [G] i64, rpn_labels
[H W A] i64 (aim's, (h, w, a) order), proposals [P, 4] f32 (aim's proposal layer output),
sampled [R] i64 (aim's RoIs: indices into proposals then gt), num_fg [] i64. W: aim's
state_dict. O:
  anchors [N, 4] f64; pre_labels [N] i64 (anchor labels before subsampling); rpn_targets [N, 4]
  rpn_cls_score, rpn_bbox_pred: the RPN outputs; own_proposals [P', 4]: the proposal layer on them
  roi_check []: 1 when aim's RoIs are foreground then background as the thresholds say
  rois [R, 5], roi_labels [R], cls_score [R, C], bbox_pred [R, 4C]
  rpn_loss_cls, rpn_loss_bbox, loss_cls, loss_bbox, loss []; grad.<name> for every trained param
"""
import argparse
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
import st  # noqa: E402

PIXEL_MEANS = [102.9801, 115.9465, 122.7717]  # BGR
CONVS = ["conv1_1", "conv1_2", "conv2_1", "conv2_2", "conv3_1", "conv3_2", "conv3_3",
         "conv4_1", "conv4_2", "conv4_3", "conv5_1", "conv5_2", "conv5_3"]
POOL_AFTER = {"conv1_2", "conv2_2", "conv3_3", "conv4_3"}
FROZEN = {"conv1_1", "conv1_2", "conv2_1", "conv2_2"}  # lr_mult 0 in train.prototxt
BBOX_STDS = np.array([0.1, 0.1, 0.2, 0.2])


# ---- lib/rpn/generate_anchors.py -------------------------------------------------------------
def _whctrs(anchor):
    w = anchor[2] - anchor[0] + 1
    h = anchor[3] - anchor[1] + 1
    return w, h, anchor[0] + 0.5 * (w - 1), anchor[1] + 0.5 * (h - 1)


def _mkanchors(ws, hs, x_ctr, y_ctr):
    ws = ws[:, np.newaxis]
    hs = hs[:, np.newaxis]
    return np.hstack((x_ctr - 0.5 * (ws - 1), y_ctr - 0.5 * (hs - 1),
                      x_ctr + 0.5 * (ws - 1), y_ctr + 0.5 * (hs - 1)))


def _ratio_enum(anchor, ratios):
    w, h, x_ctr, y_ctr = _whctrs(anchor)
    size_ratios = w * h / ratios
    ws = np.round(np.sqrt(size_ratios))
    hs = np.round(ws * ratios)
    return _mkanchors(ws, hs, x_ctr, y_ctr)


def _scale_enum(anchor, scales):
    w, h, x_ctr, y_ctr = _whctrs(anchor)
    return _mkanchors(w * scales, h * scales, x_ctr, y_ctr)


def generate_anchors(base_size=16, ratios=np.array([0.5, 1, 2]), scales=2 ** np.arange(3, 6)):
    base_anchor = np.array([1, 1, base_size, base_size], dtype=np.float64) - 1
    ratio_anchors = _ratio_enum(base_anchor, ratios)
    return np.vstack([_scale_enum(ratio_anchors[i, :], scales)
                      for i in range(ratio_anchors.shape[0])])


def shifted_anchors(base, H, W, stride=16):
    shift_x, shift_y = np.meshgrid(np.arange(0, W) * stride, np.arange(0, H) * stride)
    shifts = np.vstack((shift_x.ravel(), shift_y.ravel(), shift_x.ravel(), shift_y.ravel())).T
    A, K = base.shape[0], shifts.shape[0]
    return (base.reshape((1, A, 4)) + shifts.reshape((1, K, 4)).transpose((1, 0, 2))).reshape(
        (K * A, 4))


# ---- lib/fast_rcnn/bbox_transform.py, lib/utils/cython_bbox.pyx -------------------------------
def bbox_transform(ex_rois, gt_rois):
    ex_widths = ex_rois[:, 2] - ex_rois[:, 0] + 1.0
    ex_heights = ex_rois[:, 3] - ex_rois[:, 1] + 1.0
    ex_ctr_x = ex_rois[:, 0] + 0.5 * ex_widths
    ex_ctr_y = ex_rois[:, 1] + 0.5 * ex_heights
    gt_widths = gt_rois[:, 2] - gt_rois[:, 0] + 1.0
    gt_heights = gt_rois[:, 3] - gt_rois[:, 1] + 1.0
    gt_ctr_x = gt_rois[:, 0] + 0.5 * gt_widths
    gt_ctr_y = gt_rois[:, 1] + 0.5 * gt_heights
    return np.vstack(((gt_ctr_x - ex_ctr_x) / ex_widths, (gt_ctr_y - ex_ctr_y) / ex_heights,
                      np.log(gt_widths / ex_widths), np.log(gt_heights / ex_heights))).T


def bbox_transform_inv(boxes, deltas):
    widths = boxes[:, 2] - boxes[:, 0] + 1.0
    heights = boxes[:, 3] - boxes[:, 1] + 1.0
    ctr_x = boxes[:, 0] + 0.5 * widths
    ctr_y = boxes[:, 1] + 0.5 * heights
    dx, dy, dw, dh = deltas[:, 0::4], deltas[:, 1::4], deltas[:, 2::4], deltas[:, 3::4]
    pred_ctr_x = dx * widths[:, np.newaxis] + ctr_x[:, np.newaxis]
    pred_ctr_y = dy * heights[:, np.newaxis] + ctr_y[:, np.newaxis]
    pred_w = np.exp(dw) * widths[:, np.newaxis]
    pred_h = np.exp(dh) * heights[:, np.newaxis]
    pred = np.zeros(deltas.shape, dtype=np.float64)
    pred[:, 0::4] = pred_ctr_x - 0.5 * pred_w
    pred[:, 1::4] = pred_ctr_y - 0.5 * pred_h
    pred[:, 2::4] = pred_ctr_x + 0.5 * pred_w
    pred[:, 3::4] = pred_ctr_y + 0.5 * pred_h
    return pred


def clip_boxes(boxes, im_shape):
    boxes[:, 0::4] = np.maximum(np.minimum(boxes[:, 0::4], im_shape[1] - 1), 0)
    boxes[:, 1::4] = np.maximum(np.minimum(boxes[:, 1::4], im_shape[0] - 1), 0)
    boxes[:, 2::4] = np.maximum(np.minimum(boxes[:, 2::4], im_shape[1] - 1), 0)
    boxes[:, 3::4] = np.maximum(np.minimum(boxes[:, 3::4], im_shape[0] - 1), 0)
    return boxes


def bbox_overlaps(boxes, query_boxes):
    N, K = boxes.shape[0], query_boxes.shape[0]
    overlaps = np.zeros((N, K), dtype=np.float64)
    for k in range(K):
        box_area = ((query_boxes[k, 2] - query_boxes[k, 0] + 1) *
                    (query_boxes[k, 3] - query_boxes[k, 1] + 1))
        iw = np.minimum(boxes[:, 2], query_boxes[k, 2]) - np.maximum(boxes[:, 0],
                                                                     query_boxes[k, 0]) + 1
        ih = np.minimum(boxes[:, 3], query_boxes[k, 3]) - np.maximum(boxes[:, 1],
                                                                     query_boxes[k, 1]) + 1
        ua = ((boxes[:, 2] - boxes[:, 0] + 1) * (boxes[:, 3] - boxes[:, 1] + 1) + box_area -
              iw * ih)
        overlaps[:, k] = np.where((iw > 0) & (ih > 0), iw * ih / ua, 0.0)
    return overlaps


def nms_legacy(boxes, scores, thresh):
    """py-faster-rcnn's nms (IoU with +1 widths) as torchvision's on boxes extended by 1 px."""
    b = torch.from_numpy(boxes).float().clone()  # from_numpy shares the array
    b[:, 2:] += 1.0
    return torchvision.ops.nms(b, torch.from_numpy(scores).float(), thresh).numpy()


# ---- lib/rpn/anchor_target_layer.py (before its random subsampling) ---------------------------
def anchor_labels(all_anchors, gt_boxes, im_info):
    inds_inside = np.where((all_anchors[:, 0] >= 0) & (all_anchors[:, 1] >= 0) &
                           (all_anchors[:, 2] < im_info[1]) & (all_anchors[:, 3] < im_info[0]))[0]
    anchors = all_anchors[inds_inside, :]
    labels = np.empty((len(inds_inside),), dtype=np.float32)
    labels.fill(-1)
    overlaps = bbox_overlaps(anchors, gt_boxes)
    argmax_overlaps = overlaps.argmax(axis=1)
    max_overlaps = overlaps[np.arange(len(inds_inside)), argmax_overlaps]
    gt_argmax_overlaps = overlaps.argmax(axis=0)
    gt_max_overlaps = overlaps[gt_argmax_overlaps, np.arange(overlaps.shape[1])]
    gt_argmax_overlaps = np.where(overlaps == gt_max_overlaps)[0]
    labels[max_overlaps < 0.3] = 0
    labels[gt_argmax_overlaps] = 1
    labels[max_overlaps >= 0.7] = 1
    targets = bbox_transform(anchors, gt_boxes[argmax_overlaps, :])
    N = all_anchors.shape[0]
    all_labels = np.full((N,), -1, dtype=np.int64)
    all_labels[inds_inside] = labels
    all_targets = np.zeros((N, 4), dtype=np.float64)
    all_targets[inds_inside] = targets
    return all_labels, all_targets


# ---- lib/rpn/proposal_layer.py -----------------------------------------------------------------
def proposal_layer(prob, deltas, anchors, im_info, pre_nms, post_nms, nms_thresh, min_size):
    A = deltas.shape[1] // 4
    scores = prob[:, A:, :, :].transpose((0, 2, 3, 1)).reshape((-1, 1))
    bbox_deltas = deltas.transpose((0, 2, 3, 1)).reshape((-1, 4))
    proposals = bbox_transform_inv(anchors, bbox_deltas.astype(np.float64))
    proposals = clip_boxes(proposals, im_info[:2])
    ws = proposals[:, 2] - proposals[:, 0] + 1
    hs = proposals[:, 3] - proposals[:, 1] + 1
    keep = np.where((ws >= min_size * im_info[2]) & (hs >= min_size * im_info[2]))[0]
    proposals, scores = proposals[keep, :], scores[keep]
    # argsort()[::-1] in the reference; stable descending here (ties: lower anchor first).
    order = np.argsort(-scores.ravel(), kind="stable")[:pre_nms]
    proposals, scores = proposals[order, :].astype(np.float32), scores[order].ravel()
    keep = nms_legacy(proposals, scores, nms_thresh)[:post_nms]
    return proposals[keep, :]


# ---- the network ------------------------------------------------------------------------------
class FasterRCNN(nn.Module):
    def __init__(self, sd, A, C):
        super().__init__()
        for n in CONVS + ["rpn_conv/3x3", "rpn_cls_score", "rpn_bbox_pred"]:
            w = sd[n + ".weight"]
            self.add_module(n, nn.Conv2d(w.shape[1], w.shape[0], w.shape[2],
                                         padding=w.shape[2] // 2))
        for n in ["fc6", "fc7", "cls_score", "bbox_pred"]:
            w = sd[n + ".weight"]
            self.add_module(n, nn.Linear(w.shape[1], w.shape[0]))
        self.load_state_dict(sd, strict=True)
        for n in FROZEN:
            for p in getattr(self, n).parameters():
                p.requires_grad_(False)
        self.A, self.C = A, C

    def m(self, n):
        return self._modules[n]

    def trunk(self, images):
        x = images[:, [2, 1, 0]] * 255.0 - torch.tensor(PIXEL_MEANS).view(1, 3, 1, 1)
        for n in CONVS:
            x = F.relu(self.m(n)(x))
            if n in POOL_AFTER:
                x = F.max_pool2d(x, 2, 2, ceil_mode=True)
        return x

    def rpn(self, f):
        h = F.relu(self.m("rpn_conv/3x3")(f))
        return self.m("rpn_cls_score")(h), self.m("rpn_bbox_pred")(h)

    def head(self, f, rois):
        x = torchvision.ops.roi_pool(f, rois, (7, 7), 1.0 / 16).flatten(1)
        x = F.relu(self.m("fc6")(x))  # dropout: p = 0 in the parity configuration
        x = F.relu(self.m("fc7")(x))
        return self.m("cls_score")(x), self.m("bbox_pred")(x)


def caffe_smooth_l1(pred, target, inside, outside, sigma):
    s2 = sigma * sigma
    d = inside * (pred - target)
    a = d.abs()
    l = torch.where(a < 1.0 / s2, 0.5 * s2 * d * d, a - 0.5 / s2)
    return (outside * l).sum() / pred.shape[0]  # / num


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", required=True)
    ap.add_argument("--weights", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--scales", default="8,16,32")
    ap.add_argument("--classes", type=int, default=21)
    a = ap.parse_args()
    torch.set_num_threads(1)
    b = st.load(a.batch)
    sd = st.load(a.weights)
    scales = np.array([float(s) for s in a.scales.split(",")])
    base = generate_anchors(scales=scales)
    A, C = base.shape[0], a.classes
    net = FasterRCNN(sd, A, C)
    images = b["images"]
    S_h, S_w = images.shape[2], images.shape[3]
    im_info = np.array([S_h, S_w, 1.0])
    gt = b["gt_boxes"].double().numpy()
    gt_labels = b["gt_labels"].numpy()
    out = {}

    f = net.trunk(images)
    score, deltas = net.rpn(f)
    H, W = f.shape[2], f.shape[3]
    out["rpn_cls_score"], out["rpn_bbox_pred"] = score.detach(), deltas.detach()
    anchors = shifted_anchors(base, H, W)
    out["anchors"] = torch.from_numpy(anchors)
    pre_labels, rpn_targets = anchor_labels(anchors, gt, im_info)
    out["pre_labels"] = torch.from_numpy(pre_labels)
    out["rpn_targets"] = torch.from_numpy(rpn_targets)

    # Caffe's rpn_cls_score_reshape [1, 2, A H, W], its softmax and the proposal layer.
    score_r = score.view(1, 2, A * H, W)
    prob = F.softmax(score_r, 1).view(1, 2 * A, H, W).detach().numpy()
    own = proposal_layer(prob, deltas.detach().numpy(), anchors, im_info, 12000, 2000, 0.7, 16)
    out["own_proposals"] = torch.from_numpy(own)

    # RPN losses with aim's sampled labels, in Caffe's layouts.
    labels = b["rpn_labels"].numpy()
    lab = labels.reshape((1, H, W, A)).transpose(0, 3, 1, 2).reshape((1, A * H, W))
    rpn_loss_cls = F.cross_entropy(score_r, torch.from_numpy(lab.copy()), ignore_index=-1)
    inside = (labels == 1)[:, None].repeat(4, 1).astype(np.float64)
    outside = np.repeat(((labels >= 0) / float((labels >= 0).sum()))[:, None], 4, 1)

    def to_map(x):  # [H W A, 4] -> [1, 4 A, H, W]
        return torch.from_numpy(x.reshape((1, H, W, A * 4)).transpose(0, 3, 1, 2).copy()).float()

    rpn_loss_bbox = caffe_smooth_l1(deltas, to_map(rpn_targets), to_map(inside),
                                    to_map(outside), 3.0)

    # Proposal targets for aim's RoIs: py-faster-rcnn's _sample_rois after npr.choice.
    all_rois = np.vstack((b["proposals"].double().numpy(), gt))
    overlaps = bbox_overlaps(all_rois, gt)
    assign = overlaps.argmax(axis=1)
    max_ov = overlaps.max(axis=1)
    keep = b["sampled"].numpy()
    num_fg = int(b["num_fg"])
    ok = (max_ov[keep[:num_fg]] >= 0.5).all() and (max_ov[keep[num_fg:]] < 0.5).all()
    n_fg_avail = int((max_ov >= 0.5).sum())
    ok = ok and num_fg == min(32, n_fg_avail)
    ok = ok and len(keep) - num_fg == min(128 - num_fg, int((max_ov < 0.5).sum()))
    out["roi_check"] = torch.tensor(1 if ok else 0)
    roi_labels = gt_labels[assign[keep]].copy()
    roi_labels[num_fg:] = 0
    rois = all_rois[keep]
    t = (bbox_transform(rois, gt[assign[keep]]) - 0.0) / BBOX_STDS
    R = len(keep)
    targets = np.zeros((R, 4 * C))
    inside_w = np.zeros((R, 4 * C))
    for i in range(num_fg):
        c = roi_labels[i]
        targets[i, 4 * c:4 * c + 4] = t[i]
        inside_w[i, 4 * c:4 * c + 4] = 1.0
    rois_t = torch.from_numpy(np.hstack((np.zeros((R, 1)), rois))).float()
    out["rois"] = rois_t
    out["roi_labels"] = torch.from_numpy(roi_labels)
    cls_score, bbox_pred = net.head(f, rois_t)
    out["cls_score"], out["bbox_pred"] = cls_score.detach(), bbox_pred.detach()
    loss_cls = F.cross_entropy(cls_score, torch.from_numpy(roi_labels))
    iw = torch.from_numpy(inside_w).float()
    loss_bbox = caffe_smooth_l1(bbox_pred, torch.from_numpy(targets).float(), iw, iw, 1.0)
    loss = rpn_loss_cls + rpn_loss_bbox + loss_cls + loss_bbox
    loss.backward()
    for k, v in (("rpn_loss_cls", rpn_loss_cls), ("rpn_loss_bbox", rpn_loss_bbox),
                 ("loss_cls", loss_cls), ("loss_bbox", loss_bbox), ("loss", loss)):
        out[k] = v.detach()
    for n, p in net.named_parameters():
        if p.requires_grad:
            out["grad." + n] = p.grad
    st.save(a.out, out)


if __name__ == "__main__":
    main()
