// ICDAR 2015 incidental scene text (Challenge 4) ground truth for SegLink (issue 21; MODELS.md
// §5.2): one gt_img_<n>.txt per image, a line per word "x1,y1,x2,y2,x3,y3,x4,y4,transcription"
// (the quadrilateral's corners clockwise from the top left, pixels; the transcription may hold
// commas; "###" marks a word not to care about). Files may start with a UTF-8 byte order mark and
// use CRLF line ends, as the official ones do.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace aim::data {

struct IcdarWord {
  std::array<double, 8> quad{};  // x1, y1, ..., x4, y4
  std::string text;
  bool dont_care = false;  // text == "###"
  int64_t line = 0;
};

// Errors name the file and line: fewer than nine fields, a coordinate that is not a number.
std::vector<IcdarWord> parse_icdar_gt(const std::string& content, const std::string& name);
std::vector<IcdarWord> read_icdar_gt(const std::string& path);

}  // namespace aim::data
