"""Pascal VOC average precision as py-faster-rcnn's voc_eval computes it (numpy, float64),
re-implemented from its published algorithm, as the reference for data/detection_metrics.h.

CLI: voc_reference.py IN.json OUT.json
IN: {"num_classes": C, "dets": [[image, label, score, x1, y1, x2, y2], ...],
     "gts": [[image, label, difficult, x1, y1, x2, y2], ...], "use_07": bool, "inclusive": bool}
OUT: {"ap": [AP of class 1..C (null when the class has no non-difficult object)], "map": mean}
"""
import json
import sys

import numpy as np


def curve_ap(rec, prec, use_07):
    if use_07:
        ap = 0.0
        for t in np.arange(0.0, 1.1, 0.1):
            p = 0.0 if np.sum(rec >= t) == 0 else np.max(prec[rec >= t])
            ap += p / 11.0
        return ap
    mrec = np.concatenate(([0.0], rec, [1.0]))
    mpre = np.concatenate(([0.0], prec, [0.0]))
    for i in range(mpre.size - 1, 0, -1):
        mpre[i - 1] = max(mpre[i - 1], mpre[i])
    i = np.where(mrec[1:] != mrec[:-1])[0]
    return float(np.sum((mrec[i + 1] - mrec[i]) * mpre[i + 1]))


def class_ap(c, dets, gts, use_07, one):
    recs = {}
    npos = 0
    for g in gts:
        if int(g[1]) != c:
            continue
        r = recs.setdefault(int(g[0]), {"bbox": [], "difficult": [], "det": []})
        r["bbox"].append(g[3:7])
        r["difficult"].append(bool(g[2]))
        r["det"].append(False)
        npos += 0 if g[2] else 1
    mine = [d for d in dets if int(d[1]) == c]
    conf = np.array([d[2] for d in mine], dtype=np.float64)
    order = np.argsort(-conf, kind="stable")
    tp = np.zeros(len(mine))
    fp = np.zeros(len(mine))
    for k, d in enumerate(order):
        det = mine[d]
        bb = np.array(det[3:7], dtype=np.float64)
        r = recs.get(int(det[0]))
        ovmax = -np.inf
        if r is not None and len(r["bbox"]):
            g = np.array(r["bbox"], dtype=np.float64)
            iw = np.maximum(np.minimum(g[:, 2], bb[2]) - np.maximum(g[:, 0], bb[0]) + one, 0.0)
            ih = np.maximum(np.minimum(g[:, 3], bb[3]) - np.maximum(g[:, 1], bb[1]) + one, 0.0)
            inter = iw * ih
            uni = (bb[2] - bb[0] + one) * (bb[3] - bb[1] + one) + \
                (g[:, 2] - g[:, 0] + one) * (g[:, 3] - g[:, 1] + one) - inter
            ov = inter / uni
            ovmax = np.max(ov)
            jmax = int(np.argmax(ov))
        if ovmax > 0.5:
            if not r["difficult"][jmax]:
                if not r["det"][jmax]:
                    tp[k] = 1
                    r["det"][jmax] = True
                else:
                    fp[k] = 1
        else:
            fp[k] = 1
    if npos == 0:
        return None
    fp = np.cumsum(fp)
    tp = np.cumsum(tp)
    rec = tp / float(npos)
    prec = tp / np.maximum(tp + fp, np.finfo(np.float64).eps)
    return curve_ap(rec, prec, use_07)


def main():
    inp = json.load(open(sys.argv[1]))
    one = 1.0 if inp["inclusive"] else 0.0
    aps = [class_ap(c, inp["dets"], inp["gts"], inp["use_07"], one)
           for c in range(1, inp["num_classes"] + 1)]
    valid = [a for a in aps if a is not None]
    json.dump({"ap": aps, "map": float(np.mean(valid)) if valid else 0.0}, open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()
