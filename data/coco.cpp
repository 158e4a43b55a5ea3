#include "data/coco.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "data/json_fields.h"
#include "tensor/check.h"

namespace aim::data {
namespace {

using json = nlohmann::json;

using json_fields::field;
using json_fields::int_field;
using json_fields::num_field;

// "segmentation": polygons, or an RLE of the image's size (uncompressed or compressed counts).
CocoSegmentation parse_segmentation(const json& s, const CocoImage& im, const std::string& w) {
  CocoSegmentation seg;
  if (s.is_array()) {
    seg.kind = CocoSegmentation::Kind::polygons;
    AIM_CHECK(!s.empty(), w, ": an empty polygon list");
    for (size_t j = 0; j < s.size(); ++j) {
      const std::string wj = w + "[" + std::to_string(j) + "]";
      AIM_CHECK(s[j].is_array() && std::all_of(s[j].begin(), s[j].end(),
                                               [](const json& v) { return v.is_number(); }),
                wj, ": expected a list of numbers x0, y0, x1, y1, ...");
      AIM_CHECK(!s[j].empty() && s[j].size() % 2 == 0, wj, ": ", s[j].size(),
                " coordinates, expected a positive even number (x, y pairs)");
      seg.polygons.push_back(s[j].get<std::vector<double>>());
    }
    // frPyObjects decides on the first polygon's length: 4 numbers are boxes, fewer are refused.
    const size_t first = seg.polygons[0].size();
    AIM_CHECK(first >= 4, w, "[0]: ", first,
              " coordinates: pycocotools reads no object whose first polygon has fewer than 4");
    if (first == 4)
      for (size_t j = 0; j < seg.polygons.size(); ++j)
        AIM_CHECK(seg.polygons[j].size() == 4, w, "[", j, "]: ", seg.polygons[j].size(),
                  " coordinates in a list of boxes (its first polygon has 4 numbers, which "
                  "pycocotools reads as [x, y, width, height])");
    return seg;
  }
  AIM_CHECK(s.is_object() && s.contains("counts") && s.contains("size"), w,
            ": expected a list of polygons or an RLE {\"counts\", \"size\"}, got ",
            s.dump().substr(0, 80));
  seg.kind = CocoSegmentation::Kind::rle;
  const json& size = s.at("size");
  AIM_CHECK(size.is_array() && size.size() == 2 && size[0].is_number_integer() &&
                size[1].is_number_integer(),
            w, ".size: expected [height, width] integers, got ", size.dump());
  const int64_t h = size[0].get<int64_t>(), wd = size[1].get<int64_t>();
  AIM_CHECK(h == im.height && wd == im.width, w, ".size: [", h, ", ", wd, "] is not image ", im.id,
            "'s [", im.height, ", ", im.width, "]");
  const json& counts = s.at("counts");
  if (counts.is_string()) {
    seg.rle = coco_rle_from_string(counts.get<std::string>(), h, wd, w + ".counts");
  } else {
    AIM_CHECK(counts.is_array(), w, ".counts: expected a list of run lengths or a string");
    seg.rle.h = h, seg.rle.w = wd;
    for (size_t j = 0; j < counts.size(); ++j) {
      const json& c = counts[j];
      AIM_CHECK(
          c.is_number_integer() && c.get<int64_t>() >= 0 && c.get<int64_t>() <= int64_t(UINT32_MAX),
          w, ".counts[", j, "]: expected a run length (integer >= 0), got ", c.dump());
      seg.rle.counts.push_back(uint32_t(c.get<int64_t>()));
    }
  }
  coco_rle_check(seg.rle, w);
  return seg;
}

}  // namespace

CocoRle coco_annotation_rle(const CocoSegmentation& s, int64_t h, int64_t w,
                            const std::string& what) {
  using Kind = CocoSegmentation::Kind;
  AIM_CHECK(s.kind != Kind::none, what, ": no segmentation");
  if (s.kind == Kind::rle) {
    AIM_CHECK(s.rle.h == h && s.rle.w == w, what, ": RLE of size ", s.rle.h, "x", s.rle.w,
              " on an image of ", h, "x", w);
    return s.rle;
  }
  AIM_CHECK(!s.polygons.empty(), what, ": an empty polygon list");
  const bool boxes = s.polygons[0].size() == 4;
  std::vector<CocoRle> parts;
  for (size_t j = 0; j < s.polygons.size(); ++j) {
    const std::vector<double>& p = s.polygons[j];
    const std::string wj = what + "[" + std::to_string(j) + "]";
    if (boxes) {
      AIM_CHECK(p.size() == 4, wj, ": ", p.size(), " numbers in a list of boxes");
      parts.push_back(coco_rle_from_bbox({p[0], p[1], p[2], p[3]}, h, w));
    } else {
      parts.push_back(coco_rle_from_polygon(p, h, w, wj));
    }
  }
  return coco_rle_merge(parts);
}

CocoDataset parse_coco_instances(const std::string& text, const std::string& name,
                                 bool clip_boxes) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number overflow
    AIM_FAIL(name, ": malformed JSON: ", e.what());
  }
  AIM_CHECK(root.is_object(), name, ": the top level must be an object");
  CocoDataset d;
  const json& cats = field(root, "categories", name);
  AIM_CHECK(cats.is_array(), name, ": categories must be an array");
  std::map<int64_t, std::string> by_id;
  for (size_t i = 0; i < cats.size(); ++i) {
    const std::string w = name + ": categories[" + std::to_string(i) + "]";
    const int64_t id = int_field(cats[i], "id", w);
    const json& n = field(cats[i], "name", w);
    AIM_CHECK(n.is_string(), w, ".name: expected a string");
    AIM_CHECK(by_id.emplace(id, n.get<std::string>()).second, w, ": duplicate category id ", id);
  }
  std::map<int64_t, int64_t> label_of;
  for (const auto& [id, n] : by_id) {
    d.category_ids.push_back(id);
    d.category_names.push_back(n);
    label_of[id] = int64_t(d.category_ids.size());
  }
  const json& imgs = field(root, "images", name);
  AIM_CHECK(imgs.is_array(), name, ": images must be an array");
  for (size_t i = 0; i < imgs.size(); ++i) {
    const std::string w = name + ": images[" + std::to_string(i) + "]";
    CocoImage im;
    im.id = int_field(imgs[i], "id", w);
    im.width = int_field(imgs[i], "width", w);
    im.height = int_field(imgs[i], "height", w);
    const json& f = field(imgs[i], "file_name", w);
    AIM_CHECK(f.is_string(), w, ".file_name: expected a string");
    im.file_name = f.get<std::string>();
    AIM_CHECK(im.width > 0 && im.height > 0, w, ": size ", im.width, "x", im.height,
              " must be positive");
    AIM_CHECK(d.image_index.emplace(im.id, d.images.size()).second, w, ": duplicate image id ",
              im.id);
    d.images.push_back(im);
  }
  const json& anns = field(root, "annotations", name);
  AIM_CHECK(anns.is_array(), name, ": annotations must be an array");
  for (size_t i = 0; i < anns.size(); ++i) {
    const std::string w = name + ": annotations[" + std::to_string(i) + "]";
    CocoAnnotation a;
    a.id = int_field(anns[i], "id", w);
    a.image_id = int_field(anns[i], "image_id", w);
    a.category_id = int_field(anns[i], "category_id", w);
    const auto img = d.image_index.find(a.image_id);
    AIM_CHECK(img != d.image_index.end(), w, ": image_id ", a.image_id, " is not in images");
    const auto lab = label_of.find(a.category_id);
    AIM_CHECK(lab != label_of.end(), w, ": category_id ", a.category_id, " is not in categories");
    a.label = lab->second;
    const json& bb = field(anns[i], "bbox", w);
    AIM_CHECK(bb.is_array() && bb.size() == 4 &&
                  std::all_of(bb.begin(), bb.end(), [](const json& v) { return v.is_number(); }),
              w, ".bbox: expected [x, y, width, height] numbers, got ", bb.dump());
    a.x = bb[0].get<double>(), a.y = bb[1].get<double>();
    a.w = bb[2].get<double>(), a.h = bb[3].get<double>();
    if (anns[i].contains("area")) a.area = num_field(anns[i], "area", w);
    if (anns[i].contains("iscrowd")) a.iscrowd = int_field(anns[i], "iscrowd", w) != 0;
    if (anns[i].contains("segmentation"))
      a.segmentation = parse_segmentation(anns[i].at("segmentation"), d.images[img->second],
                                          w + ".segmentation");
    if (!(a.w > 0 && a.h > 0)) {
      ++d.skipped_degenerate;
      continue;
    }
    CocoImage& im = d.images[img->second];
    const bool outside = a.x < 0 || a.y < 0 || a.x + a.w > double(im.width) + 1e-6 ||
                         a.y + a.h > double(im.height) + 1e-6;
    if (outside) {
      AIM_CHECK(clip_boxes, w, ": bbox [", a.x, ", ", a.y, ", ", a.w, ", ", a.h,
                "] reaches outside image ", a.image_id, " (", im.width, "x", im.height,
                "; clip_boxes clips)");
      const double x2 = std::min(a.x + a.w, double(im.width)),
                   y2 = std::min(a.y + a.h, double(im.height));
      a.x = std::max(a.x, 0.0), a.y = std::max(a.y, 0.0);
      a.w = x2 - a.x, a.h = y2 - a.y;
      if (!(a.w > 0 && a.h > 0)) {
        ++d.skipped_degenerate;
        continue;
      }
    }
    im.annotations.push_back(d.annotations.size());
    d.annotations.push_back(a);
  }
  return d;
}

CocoDataset read_coco_instances(const std::string& path, bool clip_boxes) {
  std::ifstream in(path, std::ios::binary);
  AIM_CHECK(in, path, ": cannot open the annotation file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_coco_instances(ss.str(), path, clip_boxes);
}

}  // namespace aim::data
