#include "data/text/unicode.h"

#include <algorithm>

namespace aim::data::text {
namespace {

const unicode::Mapping* find_mapping(uint32_t cp, const unicode::Mapping* m, size_t n) {
  const auto* it = std::lower_bound(m, m + n, cp,
                                    [](const unicode::Mapping& x, uint32_t c) { return x.cp < c; });
  return it != m + n && it->cp == cp ? it : nullptr;
}

}  // namespace

bool in_ranges(uint32_t cp, const unicode::CodeRange* r, size_t n) {
  const unicode::CodeRange* end = r + n;
  const auto* it = std::upper_bound(
      r, end, cp, [](uint32_t c, const unicode::CodeRange& x) { return c < x.first; });
  return it != r && cp <= (it - 1)->last;
}

uint32_t combining_class(uint32_t cp) {
  const auto* b = unicode::kCombiningClasses;
  const auto* e = b + unicode::kCombiningClasses_size;
  const auto* it = std::lower_bound(
      b, e, cp, [](const unicode::CombiningClass& x, uint32_t c) { return x.cp < c; });
  return it != e && it->cp == cp ? it->ccc : 0;
}

bool is_python_space(uint32_t cp) {
  return in_ranges(cp, unicode::kPythonSpace, unicode::kPythonSpace_size);
}

bool is_python_word(uint32_t cp) {
  return in_ranges(cp, unicode::kPythonWord, unicode::kPythonWord_size);
}

// The table, and capital sigma (U+03A3) in the Final_Sigma
// context (a cased letter before it and none after it, case-ignorable ones skipped) to U+03C2.
std::vector<uint32_t> python_lower(const std::vector<uint32_t>& w) {
  auto ignorable = [](uint32_t c) {
    return in_ranges(c, unicode::kCaseIgnorable, unicode::kCaseIgnorable_size);
  };
  auto cased = [](uint32_t c) { return in_ranges(c, unicode::kCased, unicode::kCased_size); };
  std::vector<uint32_t> out;
  out.reserve(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    const uint32_t c = w[i];
    if (c == 0x3A3) {
      long j = long(i) - 1;
      while (j >= 0 && ignorable(w[size_t(j)])) --j;
      bool final_sigma = j >= 0 && cased(w[size_t(j)]);
      if (final_sigma) {
        size_t k = i + 1;
        while (k < w.size() && ignorable(w[k])) ++k;
        final_sigma = k == w.size() || !cased(w[k]);
      }
      out.push_back(final_sigma ? 0x3C2 : 0x3C3);
    } else if (const unicode::Mapping* m = find_mapping(c, unicode::kLower, unicode::kLower_size)) {
      out.insert(out.end(), unicode::kLowerPool + m->offset,
                 unicode::kLowerPool + m->offset + m->size);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string python_lower(const std::string& utf8) {
  return encode_utf8(python_lower(decode_utf8(utf8)));
}

std::vector<uint32_t> decode_utf8(const std::string& s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char b = p[i];
    int len = 0;
    uint32_t cp = 0, min = 0;
    if (b < 0x80) {
      out.push_back(b);
      ++i;
      continue;
    } else if ((b & 0xE0) == 0xC0) {
      len = 2, cp = b & 0x1F, min = 0x80;
    } else if ((b & 0xF0) == 0xE0) {
      len = 3, cp = b & 0x0F, min = 0x800;
    } else if ((b & 0xF8) == 0xF0) {
      len = 4, cp = b & 0x07, min = 0x10000;
    } else {
      ++i;  // a stray continuation or invalid lead byte: dropped
      continue;
    }
    int k = 1;
    for (; k < len && i + size_t(k) < n && (p[i + size_t(k)] & 0xC0) == 0x80; ++k)
      cp = (cp << 6) | (p[i + size_t(k)] & 0x3F);
    if (k < len || cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      ++i;  // truncated, overlong or a surrogate: the lead byte is dropped (Python's "ignore")
      continue;
    }
    out.push_back(cp);
    i += size_t(len);
  }
  return out;
}

std::string encode_utf8(const std::vector<uint32_t>& cps) {
  std::string s;
  s.reserve(cps.size());
  for (uint32_t c : cps) {
    if (c < 0x80) {
      s += char(c);
    } else if (c < 0x800) {
      s += char(0xC0 | (c >> 6));
      s += char(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      s += char(0xE0 | (c >> 12));
      s += char(0x80 | ((c >> 6) & 0x3F));
      s += char(0x80 | (c & 0x3F));
    } else {
      s += char(0xF0 | (c >> 18));
      s += char(0x80 | ((c >> 12) & 0x3F));
      s += char(0x80 | ((c >> 6) & 0x3F));
      s += char(0x80 | (c & 0x3F));
    }
  }
  return s;
}

std::vector<uint32_t> nfd(const std::vector<uint32_t>& cps) {
  std::vector<uint32_t> out;
  out.reserve(cps.size());
  for (uint32_t c : cps) {
    if (c >= 0xAC00 && c <= 0xD7A3) {  // Hangul syllable: L V [T] by formula
      const uint32_t s = c - 0xAC00;
      out.push_back(0x1100 + s / 588);
      out.push_back(0x1161 + (s % 588) / 28);
      if (s % 28) out.push_back(0x11A7 + s % 28);
    } else if (const unicode::Mapping* m =
                   find_mapping(c, unicode::kDecompositions, unicode::kDecompositions_size)) {
      out.insert(out.end(), unicode::kDecompositionPool + m->offset,
                 unicode::kDecompositionPool + m->offset + m->size);
    } else {
      out.push_back(c);
    }
  }
  // Canonical ordering: each run of non-starters sorted (stably) by combining class.
  for (size_t i = 0; i < out.size();) {
    if (combining_class(out[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < out.size() && combining_class(out[j]) != 0) ++j;
    std::stable_sort(out.begin() + long(i), out.begin() + long(j), [](uint32_t a, uint32_t b) {
      return combining_class(a) < combining_class(b);
    });
    i = j;
  }
  return out;
}

}  // namespace aim::data::text
