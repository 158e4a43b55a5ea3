// WAV files (deepspeech's --data, data/audio.h): RIFF chunks, format fields, truncated data; then
// the mono conversion at the model's rate.
#include "data/audio.h"
#include "fuzz/targets/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = aim::fuzz::write_input(data, size, ".wav");
  aim::fuzz::run([&] { (void)aim::data::read_wav(path); });
  return aim::fuzz::run([&] { (void)aim::data::read_wav_mono(path, 16000); });
}
