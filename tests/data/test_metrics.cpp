// auc() and gauc() against hand-computed values and a brute-force pairwise oracle.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "data/metrics.h"
#include "tensor/check.h"

namespace aim::data {
namespace {

// P(pos > neg) over all (pos, neg) pairs, ties 1/2: the definition, O(n^2).
double pairwise_auc(const std::vector<double>& s, const std::vector<int64_t>& l) {
  double wins = 0.0;
  int64_t pairs = 0;
  for (size_t i = 0; i < s.size(); ++i)
    for (size_t j = 0; j < s.size(); ++j)
      if (l[i] == 1 && l[j] == 0) {
        wins += s[i] > s[j] ? 1.0 : s[i] == s[j] ? 0.5 : 0.0;
        ++pairs;
      }
  return wins / double(pairs);
}

TEST(Auc, MatchesPairwiseDefinitionWithManyTies) {
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<int> score(0, 9), label(0, 1);  // 10 distinct scores: many ties
  std::vector<double> s(300);
  std::vector<int64_t> l(300);
  for (size_t i = 0; i < s.size(); ++i) {
    s[i] = 0.1 * score(rng);
    l[i] = label(rng);
  }
  EXPECT_NEAR(auc(s, l), pairwise_auc(s, l), 1e-12);
}

TEST(Gauc, HandComputed) {
  // user 7: scores pos {0.9, 0.2}, neg {0.5}: pairs (0.9>0.5)=1, (0.2<0.5)=0 -> 1/2, weight 3
  // user 3: pos {0.4}, neg {0.1, 0.6, 0.3}: 2 of 3 pairs won -> 2/3, weight 4
  // GAUC = (3 * 1/2 + 4 * 2/3) / 7 = (1.5 + 8/3) / 7
  const std::vector<double> s = {0.9, 0.4, 0.5, 0.1, 0.2, 0.6, 0.3};
  const std::vector<int64_t> l = {1, 1, 0, 0, 1, 0, 0};
  const std::vector<int64_t> g = {7, 3, 7, 3, 7, 3, 3};
  EXPECT_DOUBLE_EQ(gauc(s, l, g), (1.5 + 8.0 / 3.0) / 7.0);
}

TEST(Gauc, TiesCountHalf) {
  // user 1: pos 0.5 vs neg 0.5 -> 1/2; user 2: pos 0.7 vs neg 0.2 -> 1. Equal weights (2 each).
  EXPECT_DOUBLE_EQ(gauc({0.5, 0.5, 0.7, 0.2}, {1, 0, 1, 0}, {1, 1, 2, 2}), 0.75);
  // All scores equal in one group: 1/2 whatever the labels.
  EXPECT_DOUBLE_EQ(gauc({3, 3, 3, 3, 3}, {1, 0, 0, 1, 0}, {4, 4, 4, 4, 4}), 0.5);
}

TEST(Gauc, SkipsSingleClassGroups) {
  // Users 5 (all positive) and 6 (all negative) are skipped; only user 8 counts (AUC 0).
  const std::vector<double> s = {0.1, 0.9, 0.3, 0.8, 0.2, 0.6};
  const std::vector<int64_t> l = {1, 1, 0, 0, 1, 0};
  const std::vector<int64_t> g = {5, 5, 6, 6, 8, 8};
  EXPECT_DOUBLE_EQ(gauc(s, l, g), 0.0);
  // Adding a perfectly ranked user 9 of weight 2: (2 * 0 + 2 * 1) / 4.
  std::vector<double> s2 = s;
  std::vector<int64_t> l2 = l, g2 = g;
  s2.insert(s2.end(), {0.7, 0.1});
  l2.insert(l2.end(), {1, 0});
  g2.insert(g2.end(), {9, 9});
  EXPECT_DOUBLE_EQ(gauc(s2, l2, g2), 0.5);
}

TEST(Gauc, OneGroupEqualsAuc) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> s(257);
  std::vector<int64_t> l(257);
  for (size_t i = 0; i < s.size(); ++i) {
    s[i] = u(rng);
    l[i] = u(rng) < 0.3 ? 1 : 0;
  }
  EXPECT_DOUBLE_EQ(gauc(s, l, std::vector<int64_t>(s.size(), 42)), auc(s, l));
}

TEST(Gauc, DinTestSetIsMeanOfPairwiseWins) {
  // DIN test layout: per user one positive and one negative; GAUC = mean of [pos > neg] (tie 1/2).
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int> q(0, 20);  // coarse scores: some exact ties
  const int users = 500;
  std::vector<double> s;
  std::vector<int64_t> l, g;
  double wins = 0.0;
  for (int u = 0; u < users; ++u) {
    const double pos = q(rng), neg = q(rng);
    wins += pos > neg ? 1.0 : pos == neg ? 0.5 : 0.0;
    s.insert(s.end(), {pos, neg});
    l.insert(l.end(), {1, 0});
    g.insert(g.end(), {u, u});
  }
  EXPECT_NEAR(gauc(s, l, g), wins / users, 1e-12);
}

TEST(Gauc, MatchesPerGroupPairwiseOracle) {
  std::mt19937_64 rng(8);
  std::uniform_int_distribution<int> grp(0, 29), score(0, 15), label(0, 1);
  std::vector<double> s(600);
  std::vector<int64_t> l(600), g(600);
  for (size_t i = 0; i < s.size(); ++i) {
    s[i] = score(rng);
    l[i] = label(rng);
    g[i] = 1000 + 7 * grp(rng);
  }
  std::map<int64_t, std::pair<std::vector<double>, std::vector<int64_t>>> by;
  for (size_t i = 0; i < s.size(); ++i) {
    by[g[i]].first.push_back(s[i]);
    by[g[i]].second.push_back(l[i]);
  }
  double num = 0.0, den = 0.0;
  for (const auto& [k, v] : by) {
    int64_t pos = 0;
    for (int64_t x : v.second) pos += x;
    if (pos == 0 || pos == int64_t(v.second.size())) continue;
    num += double(v.first.size()) * pairwise_auc(v.first, v.second);
    den += double(v.first.size());
  }
  EXPECT_NEAR(gauc(s, l, g), num / den, 1e-12);
}

TEST(Gauc, Errors) {
  EXPECT_THROW(gauc({0.1, 0.2}, {0, 1}, {1}), Error);        // sizes differ
  EXPECT_THROW(gauc({0.1, 0.2}, {0, 1, 1}, {1, 1}), Error);  // sizes differ
  EXPECT_THROW(gauc({0.1, 0.2}, {0, 2}, {1, 1}), Error);     // label not 0/1
  EXPECT_THROW(gauc({}, {}, {}), Error);                     // no group at all
  try {
    gauc({0.1, 0.2, 0.3}, {1, 0, 1}, {1, 2, 3});  // every group has one class only
    FAIL() << "expected aim::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no group has both"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace aim::data
