// data/bleu: sacreBLEU's 13a tokenisation and default corpus BLEU on hand-checked cases, equal to
// the sacrebleu package to two decimals where it is installed, and the BPE merge.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/bleu.h"
#include "tests/support/common.h"

namespace aim::data {
namespace {

TEST(Bleu, Tokenize13a) {
  EXPECT_EQ(tokenize_13a("Hello, world!"), "Hello , world !");
  EXPECT_EQ(tokenize_13a("It costs $3.50, or 3,000 yen."), "It costs $ 3.50 , or 3,000 yen .");
  EXPECT_EQ(tokenize_13a("a-b 1-2 &quot;q&quot; x&amp;y"), "a-b 1 - 2 \" q \" x & y");
  EXPECT_EQ(tokenize_13a("  (tab)\tand<skipped> [x]/y  "), "( tab ) and [ x ] / y");
}

TEST(Bleu, PerfectAndEmpty) {
  const BleuScore p = corpus_bleu({"the cat sat on the mat"}, {"the cat sat on the mat"});
  EXPECT_NEAR(p.score, 100.0, 1e-9);
  const BleuScore e = corpus_bleu({""}, {"the cat"});
  EXPECT_EQ(e.score, 0.0);
  EXPECT_EQ(e.sys_len, 0);
}

// Hand-computed: hypothesis "the cat the mat" (4 tokens) against "the cat sat on the mat" (6).
// Matches 1..4: 4/4 (clipped: "the" x2), 2/3 ("the cat", "the mat"), 0/2, 0/1 -> exp smoothing:
// p3 = 100 / (2 * 2) = 25, p4 = 100 / (4 * 1) = 25; BP = exp(1 - 6/4).
TEST(Bleu, ExpSmoothingAndBrevityPenalty) {
  const BleuScore s = corpus_bleu({"the cat the mat"}, {"the cat sat on the mat"});
  EXPECT_EQ(s.matches[0], 4);
  EXPECT_EQ(s.matches[1], 2);
  EXPECT_EQ(s.totals[3], 1);
  const double want = std::exp(1 - 6.0 / 4) *
                      std::exp((std::log(100.0) + std::log(200.0 / 3) + 2 * std::log(25.0)) / 4);
  EXPECT_NEAR(s.score, want, 1e-9);
}

TEST(Bleu, UndoBpe) {
  EXPECT_EQ(undo_bpe("an@@ y thing@@ s are fine"), "any things are fine");
  EXPECT_EQ(undo_bpe("end@@"), "end");
  EXPECT_EQ(undo_bpe("no merges"), "no merges");
}

// The interpreter with sacrebleu: AIM_SACREBLEU_PYTHON (e.g. a venv's python), else kPython.
std::string sacrebleu_python() {
  const char* p = std::getenv("AIM_SACREBLEU_PYTHON");
  return p ? p : testing::kPython;
}

TEST(Bleu, EqualsSacrebleu) {
  const std::string py = sacrebleu_python();
  if (testing::run_command(py + " -c 'import sacrebleu' >/dev/null 2>&1") != 0) {
    GTEST_SKIP()
        << "the sacrebleu Python package is not installed for " << py
        << " (pip install sacrebleu into a venv, then AIM_SACREBLEU_PYTHON=venv/bin/python)";
  }
  const std::vector<std::string> hyp = {"The quick brown fox jumps over the lazy dog.",
                                        "It costs $3.50, or 3,000 yen -- cheap!",
                                        "\"Quoted\" text (with brackets) and a/b slashes.",
                                        "Short.",
                                        "A completely different sentence with nothing in common",
                                        "numbers 1-2-3 and 4.5.6 , commas,everywhere"};
  const std::vector<std::string> ref = {"The quick brown fox jumped over the lazy dog.",
                                        "It costs $3.50 or 3,000 yen -- very cheap!",
                                        "\"Quoted\" text (with brackets) and a / b slashes.",
                                        "Short sentence here.",
                                        "Nothing matches this reference at all, really",
                                        "numbers 1-2-3 and 4.5.6, commas, everywhere"};
  const std::string dir = testing::make_temp_dir("aim_bleu");
  {
    std::ofstream h(dir + "/hyp.txt"), r(dir + "/ref.txt");
    for (const auto& s : hyp) h << s << "\n";
    for (const auto& s : ref) r << s << "\n";
  }
  const std::string cmd =
      py +
      " -c 'import sacrebleu,sys; h=open(sys.argv[1]).read().splitlines(); "
      "r=open(sys.argv[2]).read().splitlines(); print(\"%.6f\" % sacrebleu.corpus_bleu(h, "
      "[r]).score)' " +
      dir + "/hyp.txt " + dir + "/ref.txt > " + dir + "/out.txt";
  ASSERT_EQ(testing::run_command(cmd), 0) << cmd;
  double theirs = -1;
  std::ifstream(dir + "/out.txt") >> theirs;
  const double ours = corpus_bleu(hyp, ref).score;
  std::printf("[bleu] aim %.4f, sacrebleu %.4f\n", ours, theirs);
  EXPECT_NEAR(ours, theirs, 0.005);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace aim::data
