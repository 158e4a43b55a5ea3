// NCF's flat int32 files (data/ncf_data.h, docs/ncf-data.md; format "AIMNCF01"), the reader behind
// `aim-train ncf --data DIR`: each file alone as either split (read_ncf_file), then the directory
// (NcfFileSource: both files, their agreement, a training batch and the evaluation set). Input:
// train.bin and test.bin joined by fuzz_common.h's kFileSeparator ("\n--8<--\n").
#include <algorithm>

#include "data/ncf_data.h"
#include "fuzz/targets/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace aim::data;
  const std::vector<std::string> pieces = aim::fuzz::split_files(data, size);
  const std::string dir = aim::fuzz::write_dir("ncf", {"train.bin", "test.bin"}, pieces);
  for (const char* f : {"/train.bin", "/test.bin"})
    for (NcfSplit s : {NcfSplit::Train, NcfSplit::Test})
      aim::fuzz::run([&] { (void)read_ncf_file(dir + f, s); });
  return aim::fuzz::run([&] {
    NcfFileSource src(dir, 7);
    const int64_t b = std::min<int64_t>(src.epoch_size(), 3);
    (void)src.next(b);
    (void)src.next(b);  // the epoch's second batch, or the next epoch's permutation
    (void)src.eval_batch(0, src.eval_size());
  });
}
