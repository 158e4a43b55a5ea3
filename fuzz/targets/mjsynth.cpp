// MJSynth's layout (data/mjsynth.h, docs/crnn.md), the reader behind `aim-train crnn --data DIR`:
// the lexicon and an annotation file alone (read_mjsynth_lexicon, read_mjsynth_split), then the
// directory (MjsynthSource: both annotation files, the held-out images' existence) and one
// held-out batch (decoded and resized). Input: lexicon.txt, annotation_train.txt,
// annotation_val.txt, a.jpg, b.png joined by fuzz_common.h's kFileSeparator ("\n--8<--\n"), in
// that order; the annotations name the images relative to the directory.
#include "data/mjsynth.h"

#include "fuzz/targets/fuzz_common.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  aim::fuzz::install_cpu_fill();  // the batch's -1-padded labels
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace aim::data;
  const std::string dir = aim::fuzz::write_dir(
      "mjsynth", {"lexicon.txt", "annotation_train.txt", "annotation_val.txt", "a.jpg", "b.png"},
      aim::fuzz::split_files(data, size));
  const std::string lex = dir + "/lexicon.txt";
  aim::fuzz::run([&] {
    const std::vector<std::string> words = read_mjsynth_lexicon(lex);
    (void)read_mjsynth_split(dir, dir + "/annotation_train.txt", words, lex);
  });
  return aim::fuzz::run([&] {
    MjsynthSource src(dir, 3);
    (void)src.eval_batch(0, 1);
  });
}
