// safetensors files (weights, checkpoints, --inputs): header length, JSON header, dtypes, shapes,
// data offsets, aim's checksums and metadata; then the NaN scan every load of weights runs.
#include "fuzz/targets/fuzz_common.h"
#include "tensor/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = aim::fuzz::write_input(data, size, ".safetensors");
  return aim::fuzz::run([&] {
    const aim::SafetensorsFile f = aim::load_safetensors(path);
    (void)aim::first_nan_tensor(f);
  });
}
