// Pascal VOC annotations (issue 21; MODELS.md §6.1): the XML files of Annotations/ as the devkit
// and the reference SSD/Faster R-CNN readers take them. Coordinates are kept as written (VOC's
// 1-based inclusive pixels); sources convert them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace aim::data {

// The 20 classes in the devkit's order; label = index + 1 (0 is background).
const std::vector<std::string>& voc_classes();

struct VocObject {
  std::string name;
  int64_t label = 0;  // 1..20
  bool difficult = false, truncated = false;
  double xmin = 0, ymin = 0, xmax = 0, ymax = 0;
  int64_t line = 0;  // of the <object> element
};

struct VocAnnotation {
  std::string filename;
  int64_t width = 0, height = 0, depth = 0;
  std::vector<VocObject> objects;
};

struct VocReadOptions {
  // Boxes outside [1, width] x [1, height]: an error (default) or clipped to the image (counted in
  // *clipped).
  bool clip_boxes = false;
};

// Reads one annotation file. Errors name the file, the line and the element: malformed XML, a
// missing or non-numeric <size>/<bndbox> field, an unknown class name, a box outside the image
// (unless clip_boxes), a degenerate box (xmax < xmin or ymax < ymin: always an error).
VocAnnotation read_voc_annotation(const std::string& path, const VocReadOptions& options = {},
                                  int64_t* clipped = nullptr);
VocAnnotation parse_voc_annotation(const std::string& xml, const std::string& name,
                                   const VocReadOptions& options = {}, int64_t* clipped = nullptr);

}  // namespace aim::data
