// SQuAD v1.1 JSON (data/squad.h), as training data (answers placed in their contexts) and as
// evaluation data.
#include "data/squad.h"
#include "fuzz/targets/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = aim::fuzz::write_input(data, size, ".json");
  aim::fuzz::run([&] { (void)aim::data::read_squad(path, true); });
  return aim::fuzz::run([&] { (void)aim::data::read_squad(path, false); });
}
