#include "data/coco.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tensor/check.h"

namespace aim::data {
namespace {

using json = nlohmann::json;

const json& field(const json& j, const char* key, const std::string& where) {
  AIM_CHECK(j.is_object() && j.contains(key), where, ": missing field '", key, "'");
  return j.at(key);
}

int64_t int_field(const json& j, const char* key, const std::string& where) {
  const json& v = field(j, key, where);
  AIM_CHECK(v.is_number_integer() ||
                (v.is_number_float() && v.get<double>() == std::floor(v.get<double>())),
            where, ".", key, ": expected an integer, got ", v.dump());
  return v.is_number_integer() ? v.get<int64_t>() : int64_t(v.get<double>());
}

double num_field(const json& j, const char* key, const std::string& where) {
  const json& v = field(j, key, where);
  AIM_CHECK(v.is_number(), where, ".", key, ": expected a number, got ", v.dump());
  return v.get<double>();
}

}  // namespace

CocoDataset parse_coco_instances(const std::string& text, const std::string& name,
                                 bool clip_boxes) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::parse_error& e) {
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
