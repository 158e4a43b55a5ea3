// COCO instances annotations (issue 21/22; MODELS.md §6.4): instances_{train,val}2017.json's
// images, categories and annotations, as pycocotools.coco.COCO loads them, for box detection.
// Category ids (1..90 with gaps) map to contiguous labels 1..80 in increasing id order, as the
// reference SSD-ResNet34 (MLPerf) and torchvision's references do.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace aim::data {

struct CocoAnnotation {
  int64_t id = 0, image_id = 0, category_id = 0, label = 0;  // label: 1..categories
  double x = 0, y = 0, w = 0, h = 0;                         // bbox [x, y, width, height]
  double area = 0;
  bool iscrowd = false;
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

// Reads an instances JSON file. Errors name the file and the element ("annotations[12]: ..."):
// malformed JSON, a missing or mistyped field, duplicate ids, an annotation of an unknown image or
// category. A box with zero or negative width or height is skipped and counted (the references
// drop them), a box reaching outside its image is an error unless clip_boxes (then clipped).
CocoDataset read_coco_instances(const std::string& path, bool clip_boxes = false);
CocoDataset parse_coco_instances(const std::string& json, const std::string& name,
                                 bool clip_boxes = false);

}  // namespace aim::data
