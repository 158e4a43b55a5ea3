// COCO person keypoints JSON (data/coco_keypoints.h).
#include "data/coco_keypoints.h"
#include "fuzz/targets/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string json = aim::fuzz::as_string(data, size);
  return aim::fuzz::run([&] { (void)aim::data::parse_coco_keypoints(json, "fuzz.json"); });
}
