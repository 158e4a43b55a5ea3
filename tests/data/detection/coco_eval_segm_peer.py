"""pycocotools peer of aim's data/coco_eval_segm.h: COCOeval(iouType='segm') stats.

CLI (a Python with pycocotools): coco_eval_segm_peer.py GT.json DT.json OUT.json
GT.json: a COCO instances file with segmentations; DT.json: a results list [{image_id,
category_id, segmentation: {"size": [h, w], "counts": string}, score}].
OUT.json: {"stats": the 12 numbers of COCOeval.summarize()}.
"""
import contextlib
import io
import json
import sys

from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval


def main():
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(sys.argv[1])
        dt = gt.loadRes(sys.argv[2])
        e = COCOeval(gt, dt, "segm")
        e.evaluate()
        e.accumulate()
        e.summarize()
    json.dump({"stats": [float(v) for v in e.stats]}, open(sys.argv[3], "w"))


if __name__ == "__main__":
    main()
