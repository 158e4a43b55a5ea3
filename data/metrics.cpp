#include "data/metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include "tensor/check.h"

namespace aim::data {

double auc(const std::vector<double>& scores, const std::vector<int64_t>& labels) {
  AIM_CHECK(scores.size() == labels.size(), "auc: ", scores.size(), " scores but ", labels.size(),
            " labels");
  const size_t n = scores.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t(0));
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  double pos_rank_sum = 0.0;  // 1-based ranks, ties get the average rank of their group
  int64_t n_pos = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && scores[order[j]] == scores[order[i]]) ++j;
    const double avg_rank = 0.5 * double(i + 1 + j);  // mean of ranks i+1 .. j
    for (size_t k = i; k < j; ++k) {
      const int64_t l = labels[order[k]];
      AIM_CHECK(l == 0 || l == 1, "auc: label ", l, " is not 0/1");
      if (l == 1) {
        pos_rank_sum += avg_rank;
        ++n_pos;
      }
    }
    i = j;
  }
  const int64_t n_neg = int64_t(n) - n_pos;
  AIM_CHECK(n_pos > 0 && n_neg > 0, "auc: needs both classes (", n_pos, " positives, ", n_neg,
            " negatives)");
  const double u = pos_rank_sum - 0.5 * double(n_pos) * double(n_pos + 1);
  return u / (double(n_pos) * double(n_neg));
}

double auc(const Tensor& scores, const Tensor& labels) {
  return auc(scores.to_vector<double>(), labels.to_vector<int64_t>());
}

double gauc(const std::vector<double>& scores, const std::vector<int64_t>& labels,
            const std::vector<int64_t>& groups) {
  AIM_CHECK(scores.size() == labels.size() && scores.size() == groups.size(),
            "gauc: ", scores.size(), " scores, ", labels.size(), " labels and ", groups.size(),
            " groups (must be equal)");
  // Sample indices per group, groups in order of first appearance (deterministic summation).
  std::unordered_map<int64_t, size_t> slot;
  std::vector<std::vector<size_t>> members;
  for (size_t i = 0; i < groups.size(); ++i) {
    const int64_t l = labels[i];
    AIM_CHECK(l == 0 || l == 1, "gauc: label ", l, " at index ", i, " is not 0/1");
    const auto [it, fresh] = slot.emplace(groups[i], members.size());
    if (fresh) members.emplace_back();
    members[it->second].push_back(i);
  }
  double weighted = 0.0;
  int64_t weight = 0;
  std::vector<double> s;
  std::vector<int64_t> l;
  for (const std::vector<size_t>& m : members) {
    int64_t n_pos = 0;
    for (size_t i : m) n_pos += labels[i];
    if (n_pos == 0 || n_pos == int64_t(m.size())) continue;  // one class only: no AUC
    s.clear();
    l.clear();
    for (size_t i : m) {
      s.push_back(scores[i]);
      l.push_back(labels[i]);
    }
    weighted += double(m.size()) * auc(s, l);
    weight += int64_t(m.size());
  }
  AIM_CHECK(weight > 0, "gauc: no group has both a positive and a negative (", members.size(),
            " groups, ", groups.size(), " samples)");
  return weighted / double(weight);
}

namespace {

// 0-based rank of each group's positive (see metrics.h: ties count against the positive).
std::vector<int64_t> positive_ranks(const char* fn, const std::vector<double>& scores,
                                    const std::vector<int64_t>& labels, int64_t group, int64_t k) {
  AIM_CHECK(scores.size() == labels.size(), fn, ": ", scores.size(), " scores but ", labels.size(),
            " labels");
  AIM_CHECK(group >= 1 && k >= 1, fn, ": group size and k must be >= 1, got group ", group, ", k ",
            k);
  const int64_t n = int64_t(scores.size());
  AIM_CHECK(n > 0 && n % group == 0, fn, ": ", n, " scores is not a positive multiple of the ",
            "group size ", group);
  std::vector<int64_t> ranks(size_t(n / group));
  for (int64_t g = 0; g < n / group; ++g) {
    const int64_t lo = g * group;
    int64_t pos = -1;
    for (int64_t i = lo; i < lo + group; ++i) {
      AIM_CHECK(!std::isnan(scores[size_t(i)]), fn, ": score ", i, " (group ", g, ") is NaN");
      const int64_t l = labels[size_t(i)];
      AIM_CHECK(l == 0 || l == 1, fn, ": label ", l, " at index ", i, " is not 0/1");
      if (l == 1) {
        AIM_CHECK(pos < 0, fn, ": group ", g, " (rows ", lo, "..", lo + group - 1,
                  ") has more than one positive (rows ", pos, " and ", i, ")");
        pos = i;
      }
    }
    AIM_CHECK(pos >= 0, fn, ": group ", g, " (rows ", lo, "..", lo + group - 1,
              ") has no positive (label 1)");
    int64_t rank = 0;
    for (int64_t i = lo; i < lo + group; ++i)
      rank += i != pos && scores[size_t(i)] >= scores[size_t(pos)];
    ranks[size_t(g)] = rank;
  }
  return ranks;
}

template <class PerGroup>
double mean_over_groups(const std::vector<int64_t>& ranks, int64_t k, PerGroup f) {
  double s = 0;
  for (int64_t r : ranks) s += r < k ? f(r) : 0.0;
  return s / double(ranks.size());
}

}  // namespace

double hr_at_k(const std::vector<double>& scores, const std::vector<int64_t>& labels, int64_t group,
               int64_t k) {
  return mean_over_groups(positive_ranks("hr_at_k", scores, labels, group, k), k,
                          [](int64_t) { return 1.0; });
}

double ndcg_at_k(const std::vector<double>& scores, const std::vector<int64_t>& labels,
                 int64_t group, int64_t k) {
  return mean_over_groups(positive_ranks("ndcg_at_k", scores, labels, group, k), k,
                          [](int64_t r) { return 1.0 / std::log2(double(r) + 2.0); });
}

double mrr_at_k(const std::vector<double>& scores, const std::vector<int64_t>& labels,
                int64_t group, int64_t k) {
  return mean_over_groups(positive_ranks("mrr_at_k", scores, labels, group, k), k,
                          [](int64_t r) { return 1.0 / (double(r) + 1.0); });
}

}  // namespace aim::data
