// Corpus BLEU as sacreBLEU (data/bleu.h).
#include "data/bleu.h"

#include <cmath>
#include <map>
#include <regex>
#include <sstream>

#include "tensor/check.h"

namespace aim::data {

namespace {

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += to.size())
    s.replace(p, from.size(), to);
}

// The class [\{-\~\[-\` -\&\(-\+\:-\@\/] of the first 13a regex.
bool split_char(unsigned char c) {
  return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') ||
         (c >= '(' && c <= '+') || (c >= ':' && c <= '@') || c == '/';
}

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> w;
  for (std::string x; in >> x;) w.push_back(x);
  return w;
}

}  // namespace

std::string tokenize_13a(const std::string& input) {
  std::string line = input;
  replace_all(line, "<skipped>", "");
  replace_all(line, "-\n", "");
  replace_all(line, "\n", " ");
  if (line.find('&') != std::string::npos) {
    replace_all(line, "&quot;", "\"");
    replace_all(line, "&amp;", "&");
    replace_all(line, "&lt;", "<");
    replace_all(line, "&gt;", ">");
  }
  line = " " + line + " ";
  std::string a;
  a.reserve(line.size() * 2);
  for (unsigned char c : line) {
    if (split_char(c)) {
      a += ' ';
      a += char(c);
      a += ' ';
    } else {
      a += char(c);
    }
  }
  static const std::regex r1("([^0-9])([\\.,])"), r2("([\\.,])([^0-9])"), r3("([0-9])(-)");
  a = std::regex_replace(a, r1, "$1 $2 ");
  a = std::regex_replace(a, r2, " $1 $2");
  a = std::regex_replace(a, r3, "$1 $2 ");
  std::string out;
  for (const std::string& w : words(a)) {
    if (!out.empty()) out += ' ';
    out += w;
  }
  return out;
}

BleuScore corpus_bleu(const std::vector<std::string>& hypotheses,
                      const std::vector<std::string>& references) {
  AIM_CHECK(hypotheses.size() == references.size(), "corpus_bleu: ", hypotheses.size(),
            " hypotheses but ", references.size(), " references");
  BleuScore s;
  for (size_t i = 0; i < hypotheses.size(); ++i) {
    const std::vector<std::string> h = words(tokenize_13a(hypotheses[i])),
                                   r = words(tokenize_13a(references[i]));
    s.sys_len += int64_t(h.size());
    s.ref_len += int64_t(r.size());
    for (size_t n = 1; n <= 4; ++n) {
      std::map<std::vector<std::string>, int64_t> hc, rc;
      for (size_t k = 0; k + n <= h.size(); ++k)
        ++hc[std::vector<std::string>(h.begin() + k, h.begin() + k + n)];
      for (size_t k = 0; k + n <= r.size(); ++k)
        ++rc[std::vector<std::string>(r.begin() + k, r.begin() + k + n)];
      for (const auto& [g, c] : hc) {
        auto it = rc.find(g);
        if (it != rc.end()) s.matches[n - 1] += std::min(c, it->second);
      }
      s.totals[n - 1] += h.size() >= n ? int64_t(h.size() - n + 1) : 0;
    }
  }
  double smooth = 1;
  for (size_t n = 0; n < 4; ++n) {
    if (s.totals[n] == 0) break;
    if (s.matches[n] == 0) {
      smooth *= 2;
      s.precisions[n] = 100.0 / (smooth * double(s.totals[n]));
    } else {
      s.precisions[n] = 100.0 * double(s.matches[n]) / double(s.totals[n]);
    }
  }
  s.bp = s.sys_len >= s.ref_len
             ? 1.0
             : (s.sys_len > 0 ? std::exp(1.0 - double(s.ref_len) / double(s.sys_len)) : 0.0);
  double logsum = 0;
  for (double p : s.precisions) logsum += p == 0 ? -9999999999.0 : std::log(p);
  s.score = s.bp * std::exp(logsum / 4);
  return s;
}

std::string undo_bpe(const std::string& line) {
  std::string s = line;
  replace_all(s, "@@ ", "");
  // A trailing "@@" (or "@@ ") at the end of the line.
  while (s.size() >= 2 && s.compare(s.size() - 2, 2, "@@") == 0) s.erase(s.size() - 2);
  return s;
}

}  // namespace aim::data
