#include "data/xml.h"

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "tensor/check.h"

namespace aim::data {

const XmlElement* XmlElement::find(const std::string& child) const {
  for (const auto& c : children)
    if (c->name == child) return c.get();
  return nullptr;
}

std::vector<const XmlElement*> XmlElement::all(const std::string& child) const {
  std::vector<const XmlElement*> r;
  for (const auto& c : children)
    if (c->name == child) r.push_back(c.get());
  return r;
}

namespace {

class Parser {
 public:
  Parser(const std::string& s, const std::string& name) : s_(s), name_(name) {}

  std::unique_ptr<XmlElement> document() {
    skip_misc(true);
    AIM_CHECK(peek() == '<', where(), "expected the root element ('<'), got ", shown());
    auto root = element();
    skip_misc(false);
    AIM_CHECK(at_end(), where(), "expected the end of the document after </", root->name, ">, got ",
              shown());
    return root;
  }

 private:
  const std::string& s_;
  const std::string& name_;
  size_t i_ = 0;
  int64_t line_ = 1;

  bool at_end() const { return i_ >= s_.size(); }
  char peek(size_t k = 0) const { return i_ + k < s_.size() ? s_[i_ + k] : '\0'; }
  bool starts(const char* p) const {
    return s_.compare(i_, std::char_traits<char>::length(p), p) == 0;
  }
  void advance(size_t n = 1) {
    for (size_t k = 0; k < n && i_ < s_.size(); ++k) line_ += s_[i_++] == '\n';
  }
  std::string where() const { return name_ + ":" + std::to_string(line_) + ": "; }
  std::string shown() const {
    if (at_end()) return "the end of the file";
    return "'" + s_.substr(i_, std::min<size_t>(16, s_.size() - i_)) + "'";
  }
  void skip_space() {
    while (!at_end() && std::isspace(static_cast<unsigned char>(peek()))) advance();
  }
  void skip_until(const char* end, const char* what) {
    const size_t at = s_.find(end, i_);
    AIM_CHECK(at != std::string::npos, where(), "unterminated ", what, " (no '", end, "')");
    advance(at + std::char_traits<char>::length(end) - i_);
  }
  // Whitespace, comments, and (before the root only) the XML declaration.
  void skip_misc(bool prolog) {
    for (;;) {
      skip_space();
      if (starts("<!--")) {
        skip_until("-->", "comment");
      } else if (prolog && starts("<?xml")) {
        skip_until("?>", "XML declaration");
      } else if (starts("<!DOCTYPE") || starts("<?")) {
        AIM_FAIL(where(), "DTDs and processing instructions are not supported, got ", shown());
      } else {
        return;
      }
    }
  }
  static bool name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' ||
           c == ':';
  }
  std::string name() {
    const size_t b = i_;
    while (!at_end() && name_char(peek())) advance();
    AIM_CHECK(i_ > b, where(), "expected a name, got ", shown());
    return s_.substr(b, i_ - b);
  }
  // Decodes entities of [b, e) into out.
  void decode(size_t b, size_t e, std::string& out) {
    for (size_t k = b; k < e; ++k) {
      if (s_[k] != '&') {
        out += s_[k];
        continue;
      }
      const size_t semi = s_.find(';', k);
      AIM_CHECK(semi != std::string::npos && semi < e && semi - k <= 10, where(),
                "unterminated entity reference '", s_.substr(k, std::min<size_t>(10, e - k)), "'");
      const std::string ent = s_.substr(k + 1, semi - k - 1);
      if (ent == "amp")
        out += '&';
      else if (ent == "lt")
        out += '<';
      else if (ent == "gt")
        out += '>';
      else if (ent == "quot")
        out += '"';
      else if (ent == "apos")
        out += '\'';
      else if (ent.size() > 1 && ent[0] == '#') {
        char* endp = nullptr;
        const long cp = ent[1] == 'x' ? std::strtol(ent.c_str() + 2, &endp, 16)
                                      : std::strtol(ent.c_str() + 1, &endp, 10);
        AIM_CHECK(endp && *endp == '\0' && cp > 0 && cp <= 0x10FFFF, where(),
                  "bad character reference '&", ent, ";'");
        // UTF-8.
        if (cp < 0x80) {
          out += char(cp);
        } else if (cp < 0x800) {
          out += char(0xC0 | (cp >> 6)), out += char(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
          out += char(0xE0 | (cp >> 12)), out += char(0x80 | ((cp >> 6) & 0x3F));
          out += char(0x80 | (cp & 0x3F));
        } else {
          out += char(0xF0 | (cp >> 18)), out += char(0x80 | ((cp >> 12) & 0x3F));
          out += char(0x80 | ((cp >> 6) & 0x3F)), out += char(0x80 | (cp & 0x3F));
        }
      } else {
        AIM_FAIL(where(), "unknown entity '&", ent, ";'");
      }
      k = semi;
    }
  }
  std::unique_ptr<XmlElement> element() {
    auto e = std::make_unique<XmlElement>();
    e->line = line_;
    advance();  // '<'
    e->name = name();
    for (;;) {
      skip_space();
      if (starts("/>")) {
        advance(2);
        return e;
      }
      if (peek() == '>') {
        advance();
        break;
      }
      const std::string key = name();
      skip_space();
      AIM_CHECK(peek() == '=', where(), "expected '=' after attribute ", key, " of <", e->name,
                ">, got ", shown());
      advance();
      skip_space();
      const char q = peek();
      AIM_CHECK(q == '"' || q == '\'', where(), "expected a quoted value for attribute ", key,
                ", got ", shown());
      advance();
      const size_t b = i_, end = s_.find(q, i_);
      AIM_CHECK(end != std::string::npos, where(), "unterminated value of attribute ", key);
      std::string v;
      decode(b, end, v);
      advance(end + 1 - i_);
      AIM_CHECK(e->attributes.emplace(key, v).second, where(), "attribute ", key, " repeated in <",
                e->name, ">");
    }
    // Content until the matching end tag.
    for (;;) {
      AIM_CHECK(!at_end(), name_, ":", e->line, ": element <", e->name, "> is not closed (no </",
                e->name, ">)");
      if (starts("</")) {
        advance(2);
        const int64_t at = line_;
        const std::string end = name();
        AIM_CHECK(end == e->name, name_, ":", at, ": </", end, "> closes <", e->name,
                  "> (opened on line ", e->line, ")");
        skip_space();
        AIM_CHECK(peek() == '>', where(), "expected '>' to end </", end, ">, got ", shown());
        advance();
        return e;
      }
      if (starts("<!--")) {
        skip_until("-->", "comment");
      } else if (starts("<![CDATA[")) {
        advance(9);
        const size_t end = s_.find("]]>", i_);
        AIM_CHECK(end != std::string::npos, where(), "unterminated CDATA section");
        e->text += s_.substr(i_, end - i_);
        advance(end + 3 - i_);
      } else if (peek() == '<') {
        AIM_CHECK(name_char(peek(1)), where(), "expected an element name after '<', got ", shown());
        e->children.push_back(element());
      } else {
        const size_t b = i_;
        while (!at_end() && peek() != '<') advance();
        decode(b, i_, e->text);
      }
    }
  }
};

}  // namespace

std::unique_ptr<XmlElement> parse_xml(const std::string& text, const std::string& name) {
  return Parser(text, name).document();
}

std::unique_ptr<XmlElement> read_xml_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  AIM_CHECK(in, path, ": cannot open the file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_xml(ss.str(), path);
}

}  // namespace aim::data
