// DIEN's data directory (data/dien_files.h, docs/dien-data.md), the reader behind
// `aim-train dien --data DIR`: the three vocabularies, the training and test sample files,
// item-info and reviews-info (the no-click sampler), then a training batch and an evaluation batch
// (the sampler's draws). Input: uid_voc.txt, mid_voc.txt, cat_voc.txt, local_train_splitByUser,
// local_test_splitByUser, item-info, reviews-info joined by fuzz_common.h's kFileSeparator
// ("\n--8<--\n"), in that order. (Each vocabulary file alone: the dien_vocab target.)
#include "data/dien_files.h"

#include <algorithm>

#include "fuzz/targets/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace aim::data;
  const std::string dir =
      aim::fuzz::write_dir("dien",
                           {"uid_voc.txt", "mid_voc.txt", "cat_voc.txt", "local_train_splitByUser",
                            "local_test_splitByUser", "item-info", "reviews-info"},
                           aim::fuzz::split_files(data, size));
  return aim::fuzz::run([&] {
    DienFilesOptions o;
    o.max_hist_len = 8;
    o.negatives = 3;
    o.buffer_batches = 2;
    DienFileSource src(dir, 11, o);
    (void)src.describe();
    (void)src.next(std::min<int64_t>(src.epoch_size(), 4));
    (void)src.eval_batch(0, std::min<int64_t>(src.eval_size(), 4));
  });
}
