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

}  // namespace aim::data
