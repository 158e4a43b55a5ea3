// DIN's export directory (data/din_export.h, docs/din-data.md "DIN export"), the reader behind
// `aim-train din --data DIR`. Input: meta.txt, cate_list.txt, train.tsv, test.tsv joined by
// fuzz_common.h's kFileSeparator ("\n--8<--\n"), in that order. A directory that loads is then
// collated (every sample of each split) and read again with a history limit.
#include "data/din_export.h"

#include "fuzz/targets/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string dir =
      aim::fuzz::write_dir("din", {"meta.txt", "cate_list.txt", "train.tsv", "test.tsv"},
                           aim::fuzz::split_files(data, size));
  return aim::fuzz::run([&] {
    const aim::data::DinExport d = aim::data::DinExport::load(dir);
    for (aim::data::DinSplit s : {aim::data::DinSplit::Train, aim::data::DinSplit::Test})
      if (d.size(s) > 0) (void)d.batch(s, 0, d.size(s));
    (void)d.test_uids();
    aim::data::DinExportOptions o;
    o.max_hist_len = 2;
    (void)aim::data::DinExport::load(dir, o);
  });
}
