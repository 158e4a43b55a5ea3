#include "data/icdar.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "tensor/check.h"

namespace aim::data {

std::vector<IcdarWord> parse_icdar_gt(const std::string& content, const std::string& name) {
  std::string s = content;
  if (s.size() >= 3 && s.compare(0, 3, "\xEF\xBB\xBF") == 0) s.erase(0, 3);  // byte order mark
  std::vector<IcdarWord> words;
  std::istringstream in(s);
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    IcdarWord w;
    w.line = n;
    size_t at = 0;
    for (int k = 0; k < 8; ++k) {
      const size_t comma = line.find(',', at);
      AIM_CHECK(comma != std::string::npos, name, ":", n, ": expected 8 coordinates and a ",
                "transcription separated by commas, found ",
                1 + std::count(line.begin(), line.end(), ','), " fields");
      const std::string f = line.substr(at, comma - at);
      char* end = nullptr;
      w.quad[size_t(k)] = std::strtod(f.c_str(), &end);
      AIM_CHECK(!f.empty() && end && *end == '\0' && std::isfinite(w.quad[size_t(k)]), name, ":", n,
                ": coordinate ", k + 1, " is '", f, "', not a number");
      at = comma + 1;
    }
    w.text = line.substr(at);
    w.dont_care = w.text == "###";
    words.push_back(std::move(w));
  }
  return words;
}

std::vector<IcdarWord> read_icdar_gt(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  AIM_CHECK(in, path, ": cannot open the ground-truth file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_icdar_gt(ss.str(), path);
}

}  // namespace aim::data
