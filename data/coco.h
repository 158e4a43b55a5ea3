// COCO instances annotations (issue 21/22; MODELS.md §6.4): instances_{train,val}2017.json's
// images, categories and annotations, as pycocotools.coco.COCO loads them: boxes, and the instance
// masks (polygons or RLE) that COCO.annToRLE turns into masks (coco_annotation_rle).
// Category ids (1..90 with gaps) map to contiguous labels 1..80 in increasing id order, as the
// reference SSD-ResNet34 (MLPerf) and torchvision's references do.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "data/coco_mask.h"

namespace aim::data {

// An annotation's "segmentation" as the file has it: a list of polygons [x0, y0, x1, y1, ...]
// (objects), or an RLE with its own size, uncompressed {"counts": [...], "size": [h, w]} (crowds)
// or compressed {"counts": "string", ...}, its counts decoded here.
struct CocoSegmentation {
  enum class Kind { none, polygons, rle };
  Kind kind = Kind::none;  // none: the annotation has no "segmentation"
  std::vector<std::vector<double>> polygons;
  CocoRle rle;
};

struct CocoAnnotation {
  int64_t id = 0, image_id = 0, category_id = 0, label = 0;  // label: 1..categories
  double x = 0, y = 0, w = 0, h = 0;                         // bbox [x, y, width, height]
  double area = 0;
  bool iscrowd = false;
  CocoSegmentation segmentation;
};

struct CocoImage {
  int64_t id = 0, width = 0, height = 0;
  std::string file_name;
  std::vector<size_t> annotations;  // indices into CocoDataset::annotations, in file order
};

struct CocoDataset {
  std::vector<CocoImage> images;            // in file order
  std::map<int64_t, size_t> image_index;    // image id -> index into images
  std::vector<int64_t> category_ids;        // increasing; label = position + 1
  std::vector<std::string> category_names;  // by label - 1
  std::vector<CocoAnnotation> annotations;  // in file order
  int64_t skipped_degenerate = 0;           // annotations with w <= 0 or h <= 0 (kept out)
};

// COCO.annToRLE: the mask of a segmentation on an h x w image. Polygons are rasterised one by one
// and merged; as pycocotools' frPyObjects, a list whose first polygon has exactly 4 numbers is a
// list of boxes [x, y, width, height]. An RLE is returned as it is (its size checked against h, w).
// Errors start with `what`; Kind::none is an error.
CocoRle coco_annotation_rle(const CocoSegmentation& s, int64_t h, int64_t w,
                            const std::string& what);

// Reads an instances JSON file. Errors name the file and the element ("annotations[12]: ..."):
// malformed JSON, a missing or mistyped field, duplicate ids, an annotation of an unknown image or
// category, a malformed "segmentation" (annotations[i].segmentation[j]: an odd or empty coordinate
// list; RLE counts that do not decode or do not sum to its size; an RLE size other than its
// image's). A box with zero or negative width or height is skipped and counted (the references
// drop them), a box reaching outside its image is an error unless clip_boxes (then clipped).
CocoDataset read_coco_instances(const std::string& path, bool clip_boxes = false);
CocoDataset parse_coco_instances(const std::string& json, const std::string& name,
                                 bool clip_boxes = false);

}  // namespace aim::data
