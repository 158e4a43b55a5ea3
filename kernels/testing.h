// Helpers for ops' test-case makers (used by the registry-driven tests and aim-bench).
// Deterministic: every value is a function of (seed, position) through Philox.
#pragma once
#include "kernels/registry.h"

namespace aim::kernels {

// Uniform values in [lo, hi) rounded to `dtype` (integers: floor; bool: x >= (lo+hi)/2).
Tensor random_tensor(const Shape& shape, DType dtype, uint64_t seed, double lo = -1.0,
                     double hi = 1.0);
// Integers uniformly in [0, n) of an index dtype (i32/i64).
Tensor random_indices(const Shape& shape, int64_t n, DType dtype, uint64_t seed);
// NaN-filled (floats) or 0x5A-filled (others) tensor: shows unwritten outputs.
Tensor poison_tensor(const Shape& shape, DType dtype);
// Value used to initialise outputs that must be fully written.
double poison_value(DType dtype);

// The case's default dtype for floating tensors in the reference run (f32, or f64 for f64).
inline DType ref_dtype(DType t) { return t == DType::f64 ? DType::f64 : DType::f32; }

}  // namespace aim::kernels
