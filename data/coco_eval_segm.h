// COCO mask evaluation (issue 22): pycocotools' COCOeval with iouType 'segm', through the one
// COCOeval core (data/coco_eval.h) with the mask IoU of data/coco_mask.h. As COCOeval: a crowd
// object's IoU is the intersection over the detection's mask area; an object's area is its
// annotation's "area" field, a detection's the pixel count of its mask (loadRes's
// maskUtils.area); crowd objects are ignored; twelve numbers as for boxes.
#pragma once
#include <cstdint>
#include <vector>

#include "data/coco.h"
#include "data/coco_eval.h"
#include "data/coco_mask.h"

namespace aim::data {

struct CocoSegmGt {
  int64_t id = 0;  // > 0 (COCO's annotation ids)
  int64_t image_id = 0, category_id = 0;
  double area = 0;  // the annotation's "area" field
  bool iscrowd = false;
  CocoRle mask;  // at the image's size (COCO.annToRLE: coco_annotation_rle)
};

struct CocoSegmDet {
  int64_t image_id = 0, category_id = 0;
  double score = 0;
  CocoRle mask;  // at the image's size
};

// image_ids / category_ids as coco_evaluate_bbox's (every image and category of the ground-truth
// set). Errors name the first object or detection whose mask is malformed (counts that do not sum
// to its size) or of another size than the image's other masks.
CocoStats coco_evaluate_segm(const std::vector<CocoSegmGt>& ground_truth,
                             const std::vector<CocoSegmDet>& detections,
                             std::vector<int64_t> image_ids, std::vector<int64_t> category_ids);

// The ground truth of a dataset read by read_coco_instances, masks as COCO.annToRLE makes them
// (annotations without a segmentation are an error naming them). Annotations the reader skipped
// (degenerate boxes) are not there.
std::vector<CocoSegmGt> coco_segm_ground_truth(const CocoDataset& d);

}  // namespace aim::data
