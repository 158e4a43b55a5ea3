"""pycocotools peer of aim's data/coco_keypoints.h: COCOeval(iouType='keypoints') stats and OKS.

CLI (a Python with pycocotools, e.g. a venv made by .ci/run):
  coco_keypoints_peer.py GT.json DT.json OUT.json
GT.json: a COCO person_keypoints file; DT.json: a results list [{image_id, category_id, keypoints,
score}]. OUT.json: {"stats": the 10 numbers of COCOeval.summarize(), "ious": {"IMG,CAT": the
computeOks matrix [detections by score][objects]}}.
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
        e = COCOeval(gt, dt, "keypoints")
        e.evaluate()
        e.accumulate()
        e.summarize()
    ious = {"%d,%d" % k: [[float(x) for x in row] for row in v]
            for k, v in e.ious.items() if len(v)}
    json.dump({"stats": [float(v) for v in e.stats], "ious": ious}, open(sys.argv[3], "w"))


if __name__ == "__main__":
    main()
