// Corpus BLEU as sacreBLEU's default corpus_bleu (sacrebleu 2.x BLEU(): 13a tokenisation, case
// sensitive, 4-gram, smooth_method='exp', no effective order, one reference per sentence):
//   13a: drop "<skipped>", join "-\n", newlines to spaces, unescape &quot; &amp; &lt; &gt;, then
//        the mteval-v13a regexes (punctuation split, period/comma unless beside digits, dash
//        after a digit), whitespace collapsed
//   counts: clipped n-gram matches and hypothesis n-grams summed over the corpus, n = 1..4;
//        sys_len, ref_len: token counts
//   precision p_n = 100 m_n / t_n; when m_n = 0 ('exp' smoothing): 100 / (2^k t_n), k counting
//        the zero orders so far; an order with t_n = 0 stops the loop (its p_n stays 0)
//   BP = 1 if sys_len >= ref_len else exp(1 - ref_len / sys_len) (0 when sys_len = 0)
//   BLEU = BP exp(mean_n log p_n), log 0 taken as -9999999999 (sacrebleu's my_log)
// Also the BPE merge ("@@ " removed, subword-nmt's sed -r 's/(@@ )|(@@ ?$)//g') for scoring.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace aim::data {

struct BleuScore {
  double score = 0;                    // 0..100
  std::array<double, 4> precisions{};  // percent
  double bp = 0;
  int64_t sys_len = 0, ref_len = 0;
  std::array<int64_t, 4> matches{}, totals{};
};

// sacreBLEU's 13a tokenisation of one line.
std::string tokenize_13a(const std::string& line);
// Corpus BLEU of detokenised hypotheses against one reference each (equal counts).
BleuScore corpus_bleu(const std::vector<std::string>& hypotheses,
                      const std::vector<std::string>& references);
// "an@@ y thing@@" -> "any thing".
std::string undo_bpe(const std::string& line);

}  // namespace aim::data
