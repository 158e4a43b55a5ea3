// GNMT's text layout (data/nmt_text.h, docs/nmt.md), the reader behind `aim-train gnmt --data
// DIR`: both vocabularies (NmtVocab::load), the training and evaluation pairs (read_parallel,
// truncated and not), a training and an evaluation batch, and the first pair decoded back (BPE
// merge). Input: vocab.s, vocab.t, train.s, train.t, eval.s, eval.t joined by fuzz_common.h's
// kFileSeparator ("\n--8<--\n"), in that order.
#include "data/nmt_text.h"

#include <algorithm>

#include "fuzz/targets/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace aim::data;
  const std::vector<std::string> names = {"vocab.s", "vocab.t", "train.s",
                                          "train.t", "eval.s",  "eval.t"};
  const std::string dir = aim::fuzz::write_dir("nmt", names, aim::fuzz::split_files(data, size));
  aim::fuzz::run([&] { (void)NmtVocab::load(dir + "/vocab.s"); });
  return aim::fuzz::run([&] {
    NmtTextConfig c;
    c.dir = dir;
    c.src = "s";
    c.tgt = "t";
    c.train_prefix = "train";
    c.eval_prefix = "eval";
    c.vocab_prefix = "vocab";
    c.max_len = 4;
    c.hard_max_len = 64;
    NmtTextSource src(c);
    (void)src.next(2);
    (void)src.eval_batch(0, std::min<int64_t>(src.eval_size(), 3));
    const NmtParallel p = read_parallel(dir + "/eval.s", dir + "/eval.t", src.source_vocab(),
                                        src.target_vocab(), 0, c.hard_max_len);
    (void)src.source_vocab().decode(p.src[0]);
    (void)src.target_vocab().decode(p.tgt[0]);
  });
}
