// VOC annotation XML (data/xml.h's parser and data/voc.h's fields), clipped and strict.
#include "data/voc.h"
#include "fuzz/targets/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string xml = aim::fuzz::as_string(data, size);
  aim::fuzz::run([&] { (void)aim::data::parse_voc_annotation(xml, "fuzz.xml"); });
  aim::data::VocReadOptions o;
  o.clip_boxes = true;
  return aim::fuzz::run([&] { (void)aim::data::parse_voc_annotation(xml, "fuzz.xml", o); });
}
