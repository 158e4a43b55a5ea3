// data/text/wordpiece (BERT's tokenizer): token ids and basic tokens equal to the reference's
// (tests/data/wordpiece/reference.py wrote expected.tsv from vocab.txt and corpus.txt: accents,
// punctuation, CJK, Hangul, final sigma, controls, Unicode spaces, long and unknown words, invalid
// UTF-8), NFD and UTF-8 details, and the vocabulary file's errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "data/text/unicode.h"
#include "data/text/wordpiece.h"
#include "tensor/check.h"
#include "tests/support/common.h"

namespace aim::data {
namespace {

namespace fs = std::filesystem;

std::string dir() { return testing::source_root() + "/tests/data/wordpiece"; }

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  if (!s.empty() && s.back() == sep) out.push_back("");
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string r;
  for (size_t i = 0; i < v.size(); ++i) r += (i ? " " : "") + v[i];
  return r;
}

std::string join_ids(const std::vector<int64_t>& v) {
  std::string r;
  for (size_t i = 0; i < v.size(); ++i) r += (i ? " " : "") + std::to_string(v[i]);
  return r;
}

TEST(WordPiece, MatchesTheReferenceOnTheTestCorpus) {
  const WordPieceTokenizer uncased = WordPieceTokenizer::from_vocab_file(dir() + "/vocab.txt");
  const WordPieceTokenizer cased =
      WordPieceTokenizer::from_vocab_file(dir() + "/vocab.txt", /*lower_case=*/false);
  std::ifstream cf(dir() + "/corpus.txt", std::ios::binary);
  ASSERT_TRUE(cf);
  std::string corpus((std::istreambuf_iterator<char>(cf)), std::istreambuf_iterator<char>());
  std::vector<std::string> lines = split(corpus, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  std::ifstream ef(dir() + "/expected.tsv", std::ios::binary);
  ASSERT_TRUE(ef);
  std::string row;
  int rows = 0;
  while (std::getline(ef, row)) {
    const std::vector<std::string> f = split(row, '\t');
    ASSERT_EQ(f.size(), 4u) << row;
    const size_t n = size_t(std::stoul(f[0]));
    ASSERT_GE(n, 1u);
    ASSERT_LE(n, lines.size());
    const WordPieceTokenizer& t = f[1] == "uncased" ? uncased : cased;
    const std::string& text = lines[n - 1];
    EXPECT_EQ(join(t.basic_tokenize(text)), f[2]) << "corpus line " << n << " (" << f[1] << ")";
    EXPECT_EQ(join_ids(t.encode(text)), f[3]) << "corpus line " << n << " (" << f[1] << ")";
    ++rows;
  }
  EXPECT_EQ(rows, int(2 * lines.size()));
}

TEST(WordPiece, GreedyLongestMatchFirst) {
  const WordPieceTokenizer t({"[UNK]", "un", "##aff", "##able", "unaff", "##a", "##ble"});
  EXPECT_EQ(join(t.tokenize("unaffable")), "unaff ##able");  // the longest first piece
  EXPECT_EQ(join(t.tokenize("unable")), "un ##able");
  EXPECT_EQ(join(t.tokenize("unaffa unablea")), "unaff ##a un ##able ##a");
  EXPECT_EQ(join(t.tokenize("unx")), "[UNK]");  // no piece fits: the whole word
  EXPECT_EQ(t.id("##able"), 3);
  EXPECT_EQ(t.id("nope"), -1);
  EXPECT_EQ(t.token(1), "un");
  EXPECT_THROW(t.token(7), Error);
}

TEST(WordPiece, NfdDecomposesAndOrdersMarks) {
  using text::decode_utf8;
  using text::encode_utf8;
  using text::nfd;
  // U+1EC7 (e with circumflex and dot below) -> e, U+0323 (class 220), U+0302 (class 230).
  EXPECT_EQ(nfd({0x1EC7}), (std::vector<uint32_t>{0x65, 0x323, 0x302}));
  // Marks in either order come out ordered by combining class.
  EXPECT_EQ(nfd({0x61, 0x301, 0x323}), (std::vector<uint32_t>{0x61, 0x323, 0x301}));
  // Hangul syllables by formula: U+D55C -> U+1112 U+1161 U+11AB.
  EXPECT_EQ(nfd({0xD55C}), (std::vector<uint32_t>{0x1112, 0x1161, 0x11AB}));
  // UTF-8 round trip, and invalid bytes dropped.
  const std::string s = "a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80";
  EXPECT_EQ(decode_utf8(s), (std::vector<uint32_t>{0x61, 0xE9, 0x4E2D, 0x1F600}));
  EXPECT_EQ(encode_utf8(decode_utf8(s)), s);
  EXPECT_EQ(decode_utf8("x\xC0\xAFy\xE4z"), (std::vector<uint32_t>{'x', 'y', 'z'}));
}

TEST(WordPiece, VocabularyErrorsNameTheFile) {
  const fs::path d = fs::temp_directory_path() / "aim_wordpiece_test";
  fs::create_directories(d);
  const std::string no_unk = (d / "no_unk.txt").string();
  std::ofstream(no_unk) << "[PAD]\nhello\n";
  try {
    WordPieceTokenizer::from_vocab_file(no_unk);
    FAIL() << "no error for a vocabulary without [UNK]";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(no_unk), std::string::npos) << m;
    EXPECT_NE(m.find("[UNK]"), std::string::npos) << m;
  }
  const std::string missing = (d / "missing.txt").string();
  try {
    WordPieceTokenizer::from_vocab_file(missing);
    FAIL() << "no error for a missing vocabulary";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  fs::remove_all(d);
}

}  // namespace
}  // namespace aim::data
