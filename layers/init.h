// Parameter initialisers drawn from a seeded Philox stream (kernels/random), so a layer built
// with the same seed has the same weights on every machine and device.
#pragma once
#include <cstdint>

#include "kernels/random/random.h"
#include "tensor/tensor.h"

namespace aim::layers {

// U(lo, hi) in f32 on the CPU; advances `gen` past the numbers it draws.
Tensor uniform_init(const Shape& sizes, double lo, double hi, kernels::Generator& gen);
// N(mean, std^2) in f32 on the CPU; advances `gen`.
Tensor normal_init(const Shape& sizes, double mean, double std, kernels::Generator& gen);

}  // namespace aim::layers
