// LibriSpeech's layout for DeepSpeech (data/speech.h, docs/deepspeech.md), the reader behind
// `aim-train deepspeech --data DIR`: the transcripts found under the root (read_librispeech),
// then the source (LibriSpeechSource) and a training and an evaluation batch, which read the
// utterances' WAV files at 16 kHz. Input: 19/198/19-198.trans.txt, 19/198/19-198-0000.wav,
// 19/198/19-198-0001.wav, 19/198/19-198-0002.wav joined by fuzz_common.h's kFileSeparator
// ("\n--8<--\n"), in that order (WAV itself is the wav target's).
#include <algorithm>

#include "data/speech.h"
#include "fuzz/targets/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace aim::data;
  const std::string root =
      aim::fuzz::write_dir("librispeech",
                           {"19/198/19-198.trans.txt", "19/198/19-198-0000.wav",
                            "19/198/19-198-0001.wav", "19/198/19-198-0002.wav"},
                           aim::fuzz::split_files(data, size));
  return aim::fuzz::run([&] {
    LibriSpeechSource src(root, 16000);
    (void)src.next(std::min<int64_t>(src.epoch_size(), 3));
    (void)src.eval_batch(0, 1);
  });
}
