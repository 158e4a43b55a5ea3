// JPEG decoding (data/image_decode.h): headers with huge or zero dimensions, truncated scans.
#include "data/image_decode.h"
#include "fuzz/targets/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return aim::fuzz::run([&] { (void)aim::data::decode_jpeg(data, size, "fuzz.jpg"); });
}
