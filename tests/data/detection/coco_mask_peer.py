"""pycocotools peer of aim's data/coco_mask.h: RLEs from polygons, boxes, masks and count lists.

CLI (a Python with pycocotools): coco_mask_peer.py IN.json OUT.json
IN.json: {"h", "w": the size of every case,
          "polygons": [[x0, y0, x1, y1, ...], ...]   one object each: frPyObjects of [poly], merge
          "objects": [[poly, poly, ...], ...]         multi-polygon objects: annToRLE's merge
          "boxes": [[x, y, w, h], ...]                frBbox
          "masks": [[row-major 0/1 of h * w], ...]    encode (Fortran order)
          "counts": [{"h", "w", "counts": [...]}]     uncompressed RLEs -> compressed strings
          "iscrowd": [0/1 per mask]}                  iou(masks, masks, iscrowd)
OUT.json: for polygons, objects, boxes and masks: {"counts": string, "area", "bbox",
          "mask": the decoded row-major 0/1 list}; "counts": the strings; "iou": [dt][gt].
"""
import json
import sys

import numpy as np
from pycocotools import mask as mask_utils


def describe(rle, h, w):
    m = mask_utils.decode(rle)  # [h, w], Fortran order
    return {
        "counts": rle["counts"].decode("ascii"),
        "area": int(mask_utils.area(rle)),
        "bbox": [float(v) for v in mask_utils.toBbox(rle)],
        "mask": [int(v) for v in m.reshape(-1)],
    }


def main():
    inp = json.load(open(sys.argv[1]))
    h, w = inp["h"], inp["w"]
    out = {"polygons": [], "objects": [], "boxes": [], "masks": [], "counts": []}
    for p in inp["polygons"]:
        out["polygons"].append(describe(mask_utils.frPyObjects([p], h, w)[0], h, w))
    for obj in inp["objects"]:
        rle = mask_utils.merge(mask_utils.frPyObjects(obj, h, w))
        out["objects"].append(describe(rle, h, w))
    for b in inp["boxes"]:
        rle = mask_utils.frPyObjects(np.array([b], dtype=np.double), h, w)[0]
        out["boxes"].append(describe(rle, h, w))
    rles = []
    for m in inp["masks"]:
        arr = np.asfortranarray(np.array(m, dtype=np.uint8).reshape(h, w))
        rle = mask_utils.encode(arr)
        rles.append(rle)
        out["masks"].append(describe(rle, h, w))
    for c in inp["counts"]:
        rle = mask_utils.frPyObjects({"counts": c["counts"], "size": [c["h"], c["w"]]}, c["h"], c["w"])
        out["counts"].append(rle["counts"].decode("ascii"))
    out["iou"] = mask_utils.iou(rles, rles, inp["iscrowd"]).tolist()
    json.dump(out, open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()
