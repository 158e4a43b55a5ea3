// The row math of the CPU layer-norm variants (layernorm cpu.omp, add_layernorm cpu.omp), once:
// one row's forward (statistics in two passes, then y) and one row's backward (the two row sums,
// then dx). A is the accumulation type: float for f32/f16/bf16, double for f64. kSimdSums: the
// row sums as OpenMP SIMD reductions (vector partial sums combined at the end: ~1.8x faster at
// C = 768, rounded differently from the sequential sum); layernorm keeps its sequential sums,
// add_layernorm takes the vector ones. Math: kernels/norm/README.md. Internal to kernels/norm.
#pragma once
#include <cmath>
#include <cstdint>

namespace aim::kernels {

// Σ_{c < C} f(c) in A: sequential, or an OpenMP SIMD reduction.
template <bool kSimd, class A, class F>
inline A layernorm_row_sum(int64_t C, const F& f) {
  A s = 0;
  if constexpr (kSimd) {
#pragma omp simd reduction(+ : s)
    for (int64_t c = 0; c < C; ++c) s += f(c);
  } else {
    for (int64_t c = 0; c < C; ++c) s += f(c);
  }
  return s;
}

// x, y: one row of C; g, b: [C] or both null (no affine). Writes y, *mean and *rstd.
template <bool kSimdSums, class T, class A>
inline void layernorm_row_fwd(const T* x, const T* g, const T* b, T* y, int64_t C, float eps,
                              A* mean, A* rstd) {
  const A m = layernorm_row_sum<kSimdSums, A>(C, [&](int64_t c) { return A(x[c]); }) / A(C);
  const A sq = layernorm_row_sum<kSimdSums, A>(C, [&](int64_t c) {
    const A d = A(x[c]) - m;
    return d * d;
  });
  const A r = A(1) / std::sqrt(sq / A(C) + A(eps));  // biased variance
  if (g) {
    for (int64_t c = 0; c < C; ++c) y[c] = T((A(x[c]) - m) * r * A(g[c]) + A(b[c]));
  } else {
    for (int64_t c = 0; c < C; ++c) y[c] = T((A(x[c]) - m) * r);
  }
  *mean = m;
  *rstd = r;
}

// x, dy, dx: one row of C; g: [C] or null; m, r: the row's mean and rstd. Writes dx; adds
// dy·xhat into pg and dy into pb (both given or both null), and dx (before its rounding to T)
// into pdx (may be null).
template <bool kSimdSums, class T, class A>
inline void layernorm_row_bwd(const T* x, const T* dy, const T* g, A m, A r, T* dx, int64_t C,
                              A* pg, A* pb, A* pdx) {
  // Adds column c's dy·g and dy·g·xhat to the two row sums, and its dgamma/dbeta partials.
  const auto step = [&](int64_t c, A& s1, A& s2) {
    const A xh = (A(x[c]) - m) * r;
    const A d = A(dy[c]) * (g ? A(g[c]) : A(1));
    s1 += d;
    s2 += d * xh;
    if (pg) {
      pg[c] += A(dy[c]) * xh;
      pb[c] += A(dy[c]);
    }
  };
  A s1 = 0, s2 = 0;
  if constexpr (kSimdSums) {
#pragma omp simd reduction(+ : s1, s2)
    for (int64_t c = 0; c < C; ++c) step(c, s1, s2);
  } else {
    for (int64_t c = 0; c < C; ++c) step(c, s1, s2);
  }
  s1 /= A(C);
  s2 /= A(C);
  for (int64_t c = 0; c < C; ++c) {
    const A xh = (A(x[c]) - m) * r;
    const A d = A(dy[c]) * (g ? A(g[c]) : A(1));
    const A v = r * (d - s1 - xh * s2);
    dx[c] = T(v);
    if (pdx) pdx[c] += v;
  }
}

}  // namespace aim::kernels
