// DIEN's vocabulary files (data/dien_tsv.h Vocab::load): one token per line.
#include "data/dien_tsv.h"
#include "fuzz/targets/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = aim::fuzz::write_input(data, size, ".voc");
  return aim::fuzz::run([&] { (void)aim::data::Vocab::load(path); });
}
