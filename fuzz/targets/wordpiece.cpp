// BERT's basic + WordPiece tokenization (data/text/wordpiece.h) of arbitrary bytes (invalid
// UTF-8 included) on a small vocabulary.
#include "data/text/wordpiece.h"
#include "fuzz/targets/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const aim::data::WordPieceTokenizer tok(
      {"[PAD]", "[UNK]", "the", "un", "##aff", "##able", "a", "##b", "##c", ",", "."});
  const std::string text = aim::fuzz::as_string(data, size);
  return aim::fuzz::run([&] { (void)tok.encode(text); });
}
