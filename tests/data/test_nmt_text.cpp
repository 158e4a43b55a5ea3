// data/nmt_text: the §3.2 layout read into batches, BPE merged for scoring, and the bad inputs
// (unequal line counts, unknown tokens without <unk>, empty lines, over-long sentences, a
// vocabulary out of TF NMT's order) as errors naming file:line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/nmt_text.h"
#include "tests/support/common.h"

namespace aim::data {
namespace {

void write(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream o(path);
  for (const auto& l : lines) o << l << "\n";
}

struct Dir {
  std::string path = testing::make_temp_dir("aim_nmt_text");
  Dir() {
    write(path + "/vocab.bpe.32000.de", {"<unk>", "<s>", "</s>", "ein", "Hau@@", "s", "."});
    write(path + "/vocab.bpe.32000.en", {"<unk>", "<s>", "</s>", "a", "hou@@", "se", "."});
    write(path + "/train.tok.clean.bpe.32000.de", {"ein Hau@@ s .", "ein ein ein", "Hau@@ s"});
    write(path + "/train.tok.clean.bpe.32000.en", {"a hou@@ se .", "a a", "hou@@ se zzz"});
    write(path + "/newstest2015.tok.bpe.32000.de", {"ein Hau@@ s ."});
    write(path + "/newstest2015.tok.bpe.32000.en", {"a hou@@ se ."});
  }
  ~Dir() { std::filesystem::remove_all(path); }
  NmtTextConfig config() const {
    NmtTextConfig c;
    c.dir = path;
    return c;
  }
};

TEST(NmtText, ReadsBatchesAndMergesBpe) {
  Dir d;
  NmtTextSource s(d.config());
  EXPECT_EQ(s.epoch_size(), 3);
  EXPECT_EQ(s.eval_size(), 1);
  const TensorMap b = s.next(2);
  EXPECT_EQ(b.at("source").to_vector<int64_t>(), std::vector<int64_t>({3, 4, 5, 6, 3, 3, 3, 2}));
  EXPECT_EQ(b.at("source_length").to_vector<int64_t>(), std::vector<int64_t>({4, 3}));
  EXPECT_EQ(b.at("target_input").to_vector<int64_t>(),
            std::vector<int64_t>({1, 3, 4, 5, 6, 1, 3, 3, 2, 2}));
  EXPECT_EQ(b.at("target_output").to_vector<int64_t>(),
            std::vector<int64_t>({3, 4, 5, 6, 2, 3, 3, 2, 2, 2}));
  const TensorMap w = s.next(2);  // wraps: line 3 (with "zzz" -> <unk>), then line 1
  EXPECT_EQ(w.at("target_output").to_vector<int64_t>()[2], 0);
  EXPECT_EQ(w.at("source_length").to_vector<int64_t>(), std::vector<int64_t>({2, 4}));
  EXPECT_EQ(s.target_vocab().decode({3, 4, 5, 6}), "a house .");
  NmtTextConfig c = d.config();
  c.max_len = 2;
  NmtTextSource t(c);  // training pairs truncated, evaluation pairs not
  EXPECT_EQ(t.next(1).at("source_length").to_vector<int64_t>(), std::vector<int64_t>({2}));
  EXPECT_EQ(t.eval_batch(0, 1).at("source_length").to_vector<int64_t>(), std::vector<int64_t>({4}));
}

TEST(NmtText, BadInputsNameFileAndLine) {
  {
    Dir d;
    write(d.path + "/train.tok.clean.bpe.32000.en", {"a", "a"});
    AIM_EXPECT_ERROR(NmtTextSource{d.config()}, "train.tok.clean.bpe.32000.de has 3 lines but");
  }
  {
    Dir d;
    write(d.path + "/vocab.bpe.32000.en", {"a", "<s>", "</s>", "hou@@", "se", "."});
    AIM_EXPECT_ERROR(NmtTextSource{d.config()},
                     "train.tok.clean.bpe.32000.en:3: unknown token 'zzz'");
  }
  {
    Dir d;
    write(d.path + "/newstest2015.tok.bpe.32000.de", {""});
    AIM_EXPECT_ERROR(NmtTextSource{d.config()}, "newstest2015.tok.bpe.32000.de:1: empty sentence");
  }
  {
    Dir d;
    NmtTextConfig c = d.config();
    c.hard_max_len = 3;
    AIM_EXPECT_ERROR(NmtTextSource{c}, "train.tok.clean.bpe.32000.de:1: 4 tokens, over the limit");
  }
  {
    Dir d;
    write(d.path + "/vocab.bpe.32000.de", {"<unk>", "</s>", "<s>", "ein"});
    AIM_EXPECT_ERROR(NmtTextSource{d.config()}, "vocab.bpe.32000.de:2: expected <s>");
  }
  {
    Dir d;
    write(d.path + "/vocab.bpe.32000.de", {"<unk>", "<s>", "</s>", "ein", "ein"});
    AIM_EXPECT_ERROR(NmtTextSource{d.config()},
                     "vocab.bpe.32000.de:5: token 'ein' already on line 4");
  }
  AIM_EXPECT_ERROR(NmtTextSource{NmtTextConfig{"/nonexistent"}}, "cannot open");
}

}  // namespace
}  // namespace aim::data
