// ICDAR 2015 ground-truth lines (data/icdar.h): eight coordinates and a transcription.
#include "data/icdar.h"
#include "fuzz/targets/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = aim::fuzz::as_string(data, size);
  return aim::fuzz::run([&] { (void)aim::data::parse_icdar_gt(text, "gt_fuzz.txt"); });
}
