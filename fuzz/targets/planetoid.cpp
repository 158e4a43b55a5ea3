// Planetoid graphs for GCN (data/graph.h, docs/gcn.md "Planetoid"), the reader behind
// `aim-train gcn --data DIR`: the text files tools/planetoid_convert.py writes from Kipf's
// pickles (the pickles themselves are read by that Python script only, never by aim), then the
// one-batch source. Input: meta.txt, features.txt, labels.txt, edges.txt, train.txt, val.txt,
// test.txt joined by fuzz_common.h's kFileSeparator ("\n--8<--\n"), in that order.
#include <cstdlib>

#include "data/graph.h"
#include "fuzz/targets/fuzz_common.h"

// The reader refuses a dense feature matrix over the host memory limit; under the fuzzer that
// limit is 256 MiB, below libFuzzer's 1 GiB -malloc_limit_mb (read once, at the first tensor).
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("AIM_CPU_MEMORY_LIMIT", "256M", 1);
  aim::fuzz::install_cpu_fill();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace aim::data;
  const std::string dir = aim::fuzz::write_dir(
      "planetoid",
      {"meta.txt", "features.txt", "labels.txt", "edges.txt", "train.txt", "val.txt", "test.txt"},
      aim::fuzz::split_files(data, size));
  return aim::fuzz::run([&] {
    GraphSource src(read_planetoid(dir), "fuzz");
    (void)src.next(1);
    (void)src.fingerprint();
  });
}
