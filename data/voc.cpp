#include "data/voc.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "data/xml.h"
#include "tensor/check.h"

namespace aim::data {

const std::vector<std::string>& voc_classes() {
  static const std::vector<std::string> k = {
      "aeroplane", "bicycle",     "bird",  "boat",        "bottle", "bus",      "car",
      "cat",       "chair",       "cow",   "diningtable", "dog",    "horse",    "motorbike",
      "person",    "pottedplant", "sheep", "sofa",        "train",  "tvmonitor"};
  return k;
}

namespace {

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

const XmlElement& child(const XmlElement& e, const std::string& name, const std::string& file) {
  const XmlElement* c = e.find(name);
  AIM_CHECK(c != nullptr, file, ":", e.line, ": <", e.name, "> has no <", name, ">");
  return *c;
}

double number(const XmlElement& e, const std::string& file) {
  const std::string t = trim(e.text);
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  AIM_CHECK(!t.empty() && end && *end == '\0' && std::isfinite(v), file, ":", e.line, ": <", e.name,
            "> must be a number, got '", t, "'");
  return v;
}

int64_t integer(const XmlElement& e, const std::string& file) {
  const double v = number(e, file);
  // The range first: converting a double beyond int64 is undefined (fuzz finding, voc_xml).
  AIM_CHECK(std::fabs(v) < 9.2e18 && v == std::trunc(v), file, ":", e.line, ": <", e.name,
            "> must be a whole number within +-9.2e18, got ", trim(e.text));
  return int64_t(v);
}

}  // namespace

VocAnnotation parse_voc_annotation(const std::string& xml, const std::string& file,
                                   const VocReadOptions& o, int64_t* clipped) {
  const std::unique_ptr<XmlElement> root = parse_xml(xml, file);
  AIM_CHECK(root->name == "annotation", file, ":", root->line,
            ": the root element must be <annotation>, got <", root->name, ">");
  VocAnnotation a;
  a.filename = trim(child(*root, "filename", file).text);
  const XmlElement& size = child(*root, "size", file);
  a.width = integer(child(size, "width", file), file);
  a.height = integer(child(size, "height", file), file);
  a.depth = size.find("depth") ? integer(*size.find("depth"), file) : 3;
  AIM_CHECK(a.width > 0 && a.height > 0, file, ":", size.line, ": image size ", a.width, "x",
            a.height, " must be positive");
  const std::vector<std::string>& classes = voc_classes();
  for (const XmlElement* obj : root->all("object")) {
    VocObject v;
    v.line = obj->line;
    v.name = trim(child(*obj, "name", file).text);
    const auto it = std::find(classes.begin(), classes.end(), v.name);
    AIM_CHECK(it != classes.end(), file, ":", obj->line, ": <object> class '", v.name,
              "' is not one of VOC's 20 classes");
    v.label = int64_t(it - classes.begin()) + 1;
    if (const XmlElement* d = obj->find("difficult")) v.difficult = integer(*d, file) != 0;
    if (const XmlElement* t = obj->find("truncated")) v.truncated = integer(*t, file) != 0;
    const XmlElement& bb = child(*obj, "bndbox", file);
    v.xmin = number(child(bb, "xmin", file), file);
    v.ymin = number(child(bb, "ymin", file), file);
    v.xmax = number(child(bb, "xmax", file), file);
    v.ymax = number(child(bb, "ymax", file), file);
    AIM_CHECK(v.xmin <= v.xmax && v.ymin <= v.ymax, file, ":", bb.line, ": <object> '", v.name,
              "' has a degenerate box (xmin ", v.xmin, ", ymin ", v.ymin, ", xmax ", v.xmax,
              ", ymax ", v.ymax, ")");
    const bool outside =
        v.xmin < 1 || v.ymin < 1 || v.xmax > double(a.width) || v.ymax > double(a.height);
    if (outside) {
      AIM_CHECK(o.clip_boxes, file, ":", bb.line, ": <object> '", v.name, "' box (", v.xmin, ", ",
                v.ymin, ", ", v.xmax, ", ", v.ymax, ") lies outside the ", a.width, "x", a.height,
                " image ([1, width] x [1, height]; clip_boxes clips)");
      v.xmin = std::clamp(v.xmin, 1.0, double(a.width));
      v.xmax = std::clamp(v.xmax, 1.0, double(a.width));
      v.ymin = std::clamp(v.ymin, 1.0, double(a.height));
      v.ymax = std::clamp(v.ymax, 1.0, double(a.height));
      if (clipped) ++*clipped;
    }
    a.objects.push_back(v);
  }
  return a;
}

VocAnnotation read_voc_annotation(const std::string& path, const VocReadOptions& o,
                                  int64_t* clipped) {
  std::ifstream in(path, std::ios::binary);
  AIM_CHECK(in, path, ": cannot open the annotation file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_voc_annotation(ss.str(), path, o, clipped);
}

}  // namespace aim::data
