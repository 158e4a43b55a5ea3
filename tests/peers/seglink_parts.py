"""numpy peer of aim's SegLink parts (models/detection/rbox.h, seglink.h) and of the ICDAR 2015
Challenge 4 evaluation (data/icdar_eval.h, data/polygon.h), written from the definitions of
bgshih/seglink's C++ ops (utilities.h polygon_to_rbox / point_inside_rbox / ray_length_in_bbox,
clip_rboxes, encode_groundtruth, decode_segments_links, combine_segments; utils.rboxes_to_polygons)
and of the Robust Reading Competition's script.py, in their own formulation (the reference's
atan2 mean, rotations, the m / b line form, DFS labelling), not aim's.

CLI (/usr/bin/python3):  seglink_parts.py MODE IN.json OUT.json
MODE encode: IN is a list of cases {"image": [H, W], "layers": [[h, w, anchor], ...], "pos", "neg",
  "variances": [6], "clip": bool, "ignore_dont_care": bool, "quads": [[8], ...],
  "dont_care": [0/1, ...]}; OUT per case {"rboxes": [[5]], "clipped": [[5]], "labels": [P],
  "match": [P], "offsets": [P * 6] (divided by the variances), "links": [L]}.
MODE decode: IN a list of {"image", "layers", "variances", "node_scores": [P], "link_scores": [L],
  "offsets": [P * 6], "node_threshold", "link_threshold"}; OUT per case {"nodes": [kept node
  indices], "segments": [[cx, cy, w, h, cos, sin]], "groups": [group per segment, renumbered by
  first appearance], "combined": [[cx, cy, w, h, theta]], "quads": [[8]]}.
MODE polygons: IN {"pairs": [[poly_a, poly_b], ...]} (polygons as [[x, y], ...]); OUT {"area_a",
  "area_b", "inter": [...] exact by vertical slabs, "inter_shapely": [... or null]}.
MODE icdar: IN {"images": [{"gt": [[8]], "dont_care": [0/1], "dets": [[8]]}]}; OUT {"images":
  [{"iou": [[G x D]], "dont_care_dets", "pairs", "gt_care", "det_care", "matched", "precision",
  "recall", "hmean"}], "gt_care", "det_care", "matched", "precision", "recall", "hmean"}.

Polygon areas here are exact even-odd areas by vertical slabs: between consecutive x's of all
vertices and edge crossings the cross-section of a region is a fixed set of intervals whose ends
move linearly, so its length at the slab's middle times the slab's width is the slab's area.
"""
import json
import math
import sys

import numpy as np

EPS = 1e-6


# ----------------------------------------------------------------------------- geometry (rbox)
def polygon_to_rbox(q):
    xtl, ytl, xtr, ytr, xbr, ybr, xbl, ybl = q
    cx = (xtl + xtr + xbr + xbl) / 4.0
    cy = (ytl + ytr + ybr + ybl) / 4.0
    width = (math.hypot(xtr - xtl, ytr - ytl) + math.hypot(xbr - xbl, ybr - ybl)) / 2.0

    def line_dist(px, py, x1, y1, x2, y2):
        dx, dy = x2 - x1, y2 - y1
        return abs(px * dy - py * dx + x2 * y1 - y2 * x1) / math.sqrt(dx * dx + dy * dy)

    height = line_dist(cx, cy, xtl, ytl, xtr, ytr) + line_dist(cx, cy, xbl, ybl, xbr, ybr)
    theta = (math.atan2(ytr - ytl, xtr - xtl) + math.atan2(ybr - ybl, xbr - xbl)) / 2.0
    return [cx, cy, width, height, theta]


def ray_length_in_bbox(x, y, theta, bbox):
    xmin, ymin, xmax, ymax = bbox
    if not (xmin <= x <= xmax and ymin <= y <= ymax):
        return math.inf
    with np.errstate(divide="ignore", invalid="ignore"):
        s, c = np.float64(math.sin(theta)), np.float64(math.cos(theta))
        ds = [(ymin - y) / s, (ymax - y) / s, (xmin - x) / c, (xmax - x) / c]
    out = math.inf
    for d in ds:
        if d >= 0:
            out = min(out, float(d))
    return out


def clip_rbox(r, bbox):
    cx, cy, w, h, theta = r
    half = w / 2.0
    lr = ray_length_in_bbox(cx, cy, theta, bbox)
    ll = ray_length_in_bbox(cx, cy, math.pi + theta, bbox)
    cw = min(half, lr) + min(half, ll)
    if cw < w - EPS:
        move = ((lr - half) / 2.0 if lr < half else 0.0) + ((half - ll) / 2.0 if ll < half else 0.0)
        cx, cy = cx + math.cos(theta) * move, cy + math.sin(theta) * move
    return [cx, cy, cw, h, theta]


def rbox_to_polygon(r):
    cx, cy, w, h, t = r
    v1 = np.array([math.cos(t) * w / 2, math.sin(t) * w / 2])
    v2 = np.array([-math.sin(t) * h / 2, math.cos(t) * h / 2])
    c = np.array([cx, cy])
    return np.concatenate([c - v1 - v2, c + v1 - v2, c + v1 + v2, c - v1 + v2]).tolist()


def rotate_around(x, y, px, py, t):
    return (math.cos(t) * (x - px) - math.sin(t) * (y - py) + px,
            math.sin(t) * (x - px) + math.cos(t) * (y - py) + py)


# ----------------------------------------------------------------------------- encode
def encode(case):
    H, W = case["image"]
    layers = case["layers"]
    var = np.array(case["variances"], dtype=np.float64)
    rboxes = [polygon_to_rbox(q) for q in case["quads"]]
    clipped = [clip_rbox(r, [0.0, 0.0, float(W), float(H)]) if case["clip"] else list(r) for r in rboxes]
    dc = case["dont_care"]
    labels, match, offsets, links = [], [], [], []
    below = None  # (status, match, h, w) of the previous layer
    for (mh, mw, a) in layers:
        sx, sy = W / mw, H / mh
        ys, xs = np.meshgrid(np.arange(mh), np.arange(mw), indexing="ij")
        ax = (sx * (xs + 0.5)).ravel()
        ay = (sy * (ys + 0.5)).ravel()
        best = np.full(ax.shape, np.inf)
        idx = np.full(ax.shape, -1, dtype=np.int64)
        for g, (cx, cy, w, h, t) in enumerate(clipped):
            diff = max(a / h, h / a)
            if not diff < case["neg"]:
                continue
            du = np.abs((cx - ax) * math.cos(t) + (cy - ay) * math.sin(t))
            dv = np.abs((cx - ax) * -math.sin(t) + (cy - ay) * math.cos(t))
            take = (du < w / 2.0) & (dv < h / 2.0) & (diff < best)
            best[take] = diff
            idx[take] = g
        status = np.where(idx < 0, -1, np.where(best < case["pos"], 1, 0))
        if case["ignore_dont_care"]:
            status = np.where((idx >= 0) & np.array([bool(dc[i]) if i >= 0 else False for i in idx]), np.minimum(status, 0), status)
        off = np.zeros((mh * mw, 6))
        for p in np.nonzero(status == 1)[0]:
            cx, cy, w, h, t = clipped[idx[p]]
            hx, hy = rotate_around(cx, cy, ax[p], ay[p], -t)
            x1, x2 = max(hx - w / 2, ax[p] - a / 2), min(hx + w / 2, ax[p] + a / 2)
            scx, scy = rotate_around((x1 + x2) / 2, hy, ax[p], ay[p], t)
            off[p] = [(scx - ax[p]) / a, (scy - ay[p]) / a, math.log(EPS + (x2 - x1) / a),
                      math.log(EPS + h / a), math.cos(t), math.sin(t)]
        off = off / var
        st = status.reshape(mh, mw)
        mi = idx.reshape(mh, mw)
        lk = []
        for py in range(mh):
            for px in range(mw):
                for ny in (py - 1, py, py + 1):
                    for nx in (px - 1, px, px + 1):
                        if (ny, nx) == (py, px):
                            continue
                        if ny < 0 or nx < 0 or ny >= mh or nx >= mw:
                            v = -1
                        elif mi[py, px] >= 0 and mi[ny, nx] >= 0 and mi[py, px] != mi[ny, nx]:
                            v = -1
                        elif st[py, px] == -1 or st[ny, nx] == -1:
                            v = -1
                        elif st[py, px] == 1 and st[ny, nx] == 1 and mi[py, px] == mi[ny, nx]:
                            v = 1
                        else:
                            v = 0
                        lk.append(v)
                if below is not None:
                    bst, bmi, bh, bw = below
                    y0 = min(2 * py, bh - 2)
                    x0 = min(2 * px, bw - 2)
                    for by in range(y0, min(2 * (py + 1), bh)):
                        for bx in range(x0, min(2 * (px + 1), bw)):
                            if st[py, px] == -1 or bst[by, bx] == -1:
                                v = -1
                            elif st[py, px] == 1 and bst[by, bx] == 1 and mi[py, px] == bmi[by, bx]:
                                v = 1
                            else:
                                v = 0
                            lk.append(v)
        labels += status.tolist()
        match += idx.tolist()
        offsets += off.ravel().tolist()
        links += lk
        below = (st, mi, mh, mw)
    return {"rboxes": rboxes, "clipped": clipped, "labels": labels, "match": match,
            "offsets": offsets, "links": links}


# ----------------------------------------------------------------------------- decode + combine
def decode(case):
    H, W = case["image"]
    layers = case["layers"]
    var = case["variances"]
    ns = case["node_scores"]
    ls = case["link_scores"]
    off = case["offsets"]
    node_begin, link_begin, nlinks = [], [], []
    nn = nl = 0
    for i, (mh, mw, a) in enumerate(layers):
        node_begin.append(nn)
        link_begin.append(nl)
        nlinks.append(8 if i == 0 else 12)
        nn += mh * mw
        nl += mh * mw * nlinks[-1]
    graph = {}  # node id -> [adjacent ids]
    segs = {}
    for i, (mh, mw, a) in enumerate(layers):
        for p in range(mh * mw):
            v = node_begin[i] + p
            if ns[v] >= case["node_threshold"]:
                gx, gy = (W / mw) * (p % mw + 0.5), (H / mh) * (p // mw + 0.5)
                o = [off[6 * v + k] * var[k] for k in range(6)]
                segs[v] = [o[0] * a + gx, o[1] * a + gy, math.exp(o[2]) * a - EPS,
                           math.exp(o[3]) * a - EPS, o[4], o[5]]
                graph[v] = []
    for i, (mh, mw, a) in enumerate(layers):
        for p in range(mh * mw):
            v = node_begin[i] + p
            if v not in graph:
                continue
            py, px = p // mw, p % mw
            base = link_begin[i] + p * nlinks[i]
            k = 0
            for ny in (py - 1, py, py + 1):
                for nx in (px - 1, px, px + 1):
                    if (ny, nx) == (py, px):
                        continue
                    if 0 <= ny < mh and 0 <= nx < mw and ls[base + k] >= case["link_threshold"]:
                        u = node_begin[i] + ny * mw + nx
                        if u in graph:
                            graph[v].append(u)
                            graph[u].append(v)
                    k += 1
            if i > 0:
                bh, bw, _ = layers[i - 1]
                for by in range(min(2 * py, bh - 2), min(2 * (py + 1), bh)):
                    for bx in range(min(2 * px, bw - 2), min(2 * (px + 1), bw)):
                        if ls[base + k] >= case["link_threshold"]:
                            u = node_begin[i - 1] + by * bw + bx
                            if u in graph:
                                graph[v].append(u)
                                graph[u].append(v)
                        k += 1
    # DFS labelling in node order (the reference's group indices, then renumbered 0, 1, ...).
    label = {}
    counter = 0
    for v in sorted(graph):
        if v not in label:
            stack = [v]
            while stack:
                x = stack.pop()
                if x in label:
                    continue
                label[x] = counter
                stack.extend(graph[x])
        counter += 1
    order = sorted(graph)
    renum = {}
    for v in order:
        renum.setdefault(label[v], len(renum))
    groups = [renum[label[v]] for v in order]
    combined, quads = [], []
    for gi in range(len(renum)):
        ss = [segs[v] for v, g in zip(order, groups) if g == gi]
        n = float(len(ss))
        mc = sum(s[4] for s in ss) / n
        ms = sum(s[5] for s in ss) / n
        m = ms / mc
        theta = math.atan(m)
        b = sum(s[1] - m * s[0] for s in ss) / n
        proj = [((m * s[1] + s[0] - m * b) / (m * m + 1), (m * m * s[1] + m * s[0] + b) / (m * m + 1)) for s in ss]
        ip = [s[0] + m * s[1] for s in ss]
        i1, i2 = int(np.argmin(ip)), int(np.argmax(ip))
        e1, e2 = proj[i1], proj[i2]
        cx, cy = 0.5 * (e1[0] + e2[0]), 0.5 * (e1[1] + e2[1])
        w = math.hypot(e2[0] - e1[0], e2[1] - e1[1]) + 0.5 * ss[i1][2] + 0.5 * ss[i2][2]
        h = sum(s[3] for s in ss) / n
        combined.append([cx, cy, w, h, theta])
        quads.append(rbox_to_polygon(combined[-1]))
    return {"nodes": order, "segments": [segs[v] for v in order], "groups": groups,
            "combined": combined, "quads": quads}


# ----------------------------------------------------------------------------- polygons
def edges(poly):
    return [(poly[i], poly[(i + 1) % len(poly)]) for i in range(len(poly))]


def crossings_x(es):
    xs = []
    for i in range(len(es)):
        (x1, y1), (x2, y2) = es[i]
        for j in range(i + 1, len(es)):
            (x3, y3), (x4, y4) = es[j]
            den = (x2 - x1) * (y4 - y3) - (y2 - y1) * (x4 - x3)
            if den == 0:
                continue
            t = ((x3 - x1) * (y4 - y3) - (y3 - y1) * (x4 - x3)) / den
            u = ((x3 - x1) * (y2 - y1) - (y3 - y1) * (x2 - x1)) / den
            if 0 <= t <= 1 and 0 <= u <= 1:
                xs.append(x1 + t * (x2 - x1))
    return xs


def intervals(poly, x):
    ys = []
    for (x1, y1), (x2, y2) in edges(poly):
        if min(x1, x2) < x < max(x1, x2):
            ys.append(y1 + (x - x1) * (y2 - y1) / (x2 - x1))
    ys.sort()
    return [(ys[k], ys[k + 1]) for k in range(0, len(ys) - 1, 2)]


def cut_length(ia, ib):
    total = 0.0
    for a0, a1 in ia:
        for b0, b1 in ib:
            total += max(0.0, min(a1, b1) - max(a0, b0))
    return total


def slab_area(polys):
    """Area of the intersection of the even-odd regions of all the given polygons."""
    es = [e for p in polys for e in edges(p)]
    xs = sorted(set([v[0] for p in polys for v in p] + crossings_x(es)))
    area = 0.0
    for x0, x1 in zip(xs[:-1], xs[1:]):
        if x1 <= x0:
            continue
        xm = 0.5 * (x0 + x1)
        cut = intervals(polys[0], xm)
        for p in polys[1:]:
            other = intervals(p, xm)
            cut = [(max(a0, b0), min(a1, b1)) for a0, a1 in cut for b0, b1 in other if min(a1, b1) > max(a0, b0)]
        area += sum(b - a for a, b in cut) * (x1 - x0)
    return area


def shapely_intersection(a, b):
    try:
        from shapely.geometry import Polygon
    except ImportError:
        return None
    pa, pb = Polygon(a), Polygon(b)
    if not (pa.is_valid and pb.is_valid):
        return None
    return pa.intersection(pb).area


def polygons(inp):
    out = {"area_a": [], "area_b": [], "inter": [], "inter_shapely": []}
    for a, b in inp["pairs"]:
        out["area_a"].append(slab_area([a]))
        out["area_b"].append(slab_area([b]))
        out["inter"].append(slab_area([a, b]))
        out["inter_shapely"].append(shapely_intersection(a, b))
    return out


# ----------------------------------------------------------------------------- ICDAR 2015
def to_poly(q):
    return [[q[2 * k], q[2 * k + 1]] for k in range(4)]


def icdar(inp):
    res = {"images": []}
    sum_match = sum_gt = sum_det = 0
    for im in inp["images"]:
        gts = [to_poly(q) for q in im["gt"]]
        dets = [to_poly(q) for q in im["dets"]]
        gt_dc = [k for k, d in enumerate(im["dont_care"]) if d]
        det_dc = []
        for d, pd in enumerate(dets):
            area = slab_area([pd])
            for g in gt_dc:
                prec = 0 if area == 0 else slab_area([gts[g], pd]) / area
                if prec > 0.5:
                    det_dc.append(d)
                    break
        iou = np.zeros((len(gts), len(dets)))
        for g, pg in enumerate(gts):
            for d, pd in enumerate(dets):
                inter = slab_area([pd, pg])
                union = slab_area([pd]) + slab_area([pg]) - inter
                iou[g, d] = inter / union if union > 0 else 0.0
        gt_m = [0] * len(gts)
        det_m = [0] * len(dets)
        pairs = []
        for g in range(len(gts)):
            for d in range(len(dets)):
                if gt_m[g] == 0 and det_m[d] == 0 and g not in gt_dc and d not in det_dc:
                    if iou[g, d] > 0.5:
                        gt_m[g] = det_m[d] = 1
                        pairs.append([g, d])
        n_gt = len(gts) - len(gt_dc)
        n_det = len(dets) - len(det_dc)
        matched = len(pairs)
        if n_gt == 0:
            recall = 1.0
            precision = 0.0 if n_det > 0 else 1.0
        else:
            recall = matched / n_gt
            precision = 0 if n_det == 0 else matched / n_det
        hmean = 0 if precision + recall == 0 else 2.0 * precision * recall / (precision + recall)
        res["images"].append({"iou": iou.tolist(), "dont_care_dets": det_dc, "pairs": pairs,
                              "gt_care": n_gt, "det_care": n_det, "matched": matched,
                              "precision": precision, "recall": recall, "hmean": hmean})
        sum_match += matched
        sum_gt += n_gt
        sum_det += n_det
    r = 0 if sum_gt == 0 else sum_match / sum_gt
    p = 0 if sum_det == 0 else sum_match / sum_det
    res.update({"gt_care": sum_gt, "det_care": sum_det, "matched": sum_match, "recall": r,
                "precision": p, "hmean": 0 if r + p == 0 else 2 * r * p / (r + p)})
    return res


def main():
    mode, src, dst = sys.argv[1], sys.argv[2], sys.argv[3]
    with open(src) as f:
        inp = json.load(f)
    if mode == "encode":
        out = [encode(c) for c in inp]
    elif mode == "decode":
        out = [decode(c) for c in inp]
    elif mode == "polygons":
        out = polygons(inp)
    elif mode == "icdar":
        out = icdar(inp)
    else:
        raise SystemExit("unknown mode " + mode)
    with open(dst, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
