// Ranking metrics for click-through-rate models.
#pragma once
#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace aim::data {

// Exact ROC AUC = P(score of a random positive > score of a random negative), ties counting 1/2
// (Mann-Whitney U with average ranks). labels are 0/1. Throws aim::Error when the sizes differ,
// a label is not 0/1, or there is no positive or no negative.
double auc(const std::vector<double>& scores, const std::vector<int64_t>& labels);
// Same on tensors of any dtype/device (flattened; labels cast to i64).
double auc(const Tensor& scores, const Tensor& labels);

// Group AUC (DIN paper eq. 3; xDeepFM/DeepCTR style): the mean over groups (users) of the
// per-group auc() above, each weighted by the group's number of samples. Groups whose labels are
// all 0 or all 1 have no AUC and are skipped (neither summed nor counted in the weights).
// groups[i] is any id (e.g. uid); groups need not be contiguous. Throws aim::Error when the sizes
// differ, a label is not 0/1, or no group has both classes.
//
// With DIN's test set (MODELS.md §4.1: one positive and one negative per user, both weight 2) this
// equals the reference's "GAUC" = mean over users of [score(pos) > score(neg)], except for exact
// ties: here a tie counts 1/2, the reference (tf `x > 0` on the logit difference) counts it 0.
double gauc(const std::vector<double>& scores, const std::vector<int64_t>& labels,
            const std::vector<int64_t>& groups);

// Top-k ranking metrics over consecutive groups of `group` candidates (NCF evaluation,
// MODELS.md §4.3: 100 rows per user, one held-out positive among 99 negatives). Every group must
// hold exactly one label 1 (the positive) and group - 1 labels 0, anywhere in the group.
// rank = the number of other candidates of the group whose score is >= the positive's: ties
// count against the positive, so the result does not depend on row order and a constant scorer
// ranks the positive last. Per group: HR = [rank < k]; NDCG = 1 / log2(rank + 2) if rank < k,
// else 0 (one relevant item, so the ideal DCG is 1); MRR = 1 / (rank + 1) if rank < k, else 0.
// Each function returns the mean over groups. Throws aim::Error when the sizes differ, the size
// is not a positive multiple of group, k < 1, a score is NaN, or a group does not have exactly
// one positive (naming the group).
//
// The reference (tf.nn.top_k, which orders equal scores by index, with the positive as the
// first row of each group) counts ties in the positive's favour instead; the two agree whenever
// the positive's score is not exactly equal to a negative's.
double hr_at_k(const std::vector<double>& scores, const std::vector<int64_t>& labels, int64_t group,
               int64_t k);
double ndcg_at_k(const std::vector<double>& scores, const std::vector<int64_t>& labels,
                 int64_t group, int64_t k);
double mrr_at_k(const std::vector<double>& scores, const std::vector<int64_t>& labels,
                int64_t group, int64_t k);

}  // namespace aim::data
