// Differentiable embedding bag (torch.nn.functional.embedding_bag, modes sum and mean): the rows
// of weight picked by each bag's indices, summed or averaged per bag, optionally weighted per
// index. Built from the embedding gather (kernels/embedding), elementwise products, and either a
// sum over the bag axis (fixed-size bags) or a segment sum by index_add with an index_select
// gradient (bags given by offsets, kernels/index).
//
// Bags, as PyTorch:
//   indices [B, L], offsets undefined: bag b is row b (every bag has L entries);
//   indices [N], offsets [B] (i32/i64): bag b is indices[offsets[b] : offsets[b+1]], the last
//     one running to N; include_last_offset: offsets has B + 1 entries and offsets[B] == N.
//     offsets[0] == 0 and offsets never decrease. Offsets stay on the CPU (the bag plan is built
//     on the host); the per-index bag ids are then copied to weight's device.
// indices are i32/i64 on the CPU or weight's device (moved to weight's device, as embedding()).
// padding_idx in [0, V): entries equal to it are left out of their bag (no contribution, not
// counted by mean, no gradient); < 0: none. An empty bag (or one of padding only) gives zeros.
// per_sample_weights: indices' shape, weight's dtype and device, mode sum only; it may require
// grad (its gradient is <row, dout[bag]> per entry, 0 for padding entries).
#pragma once
#include "autograd/variable.h"

namespace aim::autograd {

enum class BagMode { sum, mean };
const char* bag_mode_name(BagMode m);

// weight [V, C] -> [B, C].
Variable embedding_bag(const Variable& weight, const Tensor& indices, const Tensor& offsets,
                       BagMode mode, const Variable& per_sample_weights = Variable(),
                       int64_t padding_idx = -1, bool include_last_offset = false);

}  // namespace aim::autograd
