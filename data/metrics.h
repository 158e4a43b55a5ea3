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

}  // namespace aim::data
