// A small XML reader for annotation files (Pascal VOC): elements, their text and attributes, with
// the line of each element for error messages. It takes the XML declaration, comments, CDATA,
// self-closing tags and the five predefined entities plus numeric character references; DTDs and
// processing instructions other than the declaration are refused. Malformed input throws
// aim::Error "<name>:<line>: <what was expected>".
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace aim::data {

struct XmlElement {
  std::string name;
  std::map<std::string, std::string> attributes;
  std::string text;  // the element's own character data, concatenated, entities decoded
  std::vector<std::unique_ptr<XmlElement>> children;
  int64_t line = 0;
  // The first child named `child`, or nullptr.
  const XmlElement* find(const std::string& child) const;
  // All children named `child`, in order.
  std::vector<const XmlElement*> all(const std::string& child) const;
};

// Parses a whole document (one root element). `name` is the file name used in errors.
std::unique_ptr<XmlElement> parse_xml(const std::string& text, const std::string& name);
std::unique_ptr<XmlElement> read_xml_file(const std::string& path);

}  // namespace aim::data
