// The row math of the CPU layer-norm variants (layernorm cpu.omp, add_layernorm cpu.omp), once:
// one row's forward (statistics in two passes, then y) and one row's backward (the two row sums,
// then dx). A is the accumulation type: float for f32/f16/bf16, double for f64. Math:
// kernels/norm/README.md. Internal to kernels/norm.
#pragma once
#include <cmath>
#include <cstdint>

namespace aim::kernels {

// x, y: one row of C; g, b: [C] or both null (no affine). Writes y, *mean and *rstd.
template <class T, class A>
inline void layernorm_row_fwd(const T* x, const T* g, const T* b, T* y, int64_t C, float eps,
                              A* mean, A* rstd) {
  A sum = 0;
  for (int64_t c = 0; c < C; ++c) sum += A(x[c]);
  const A m = sum / A(C);
  A sq = 0;
  for (int64_t c = 0; c < C; ++c) {
    const A d = A(x[c]) - m;
    sq += d * d;
  }
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
template <class T, class A>
inline void layernorm_row_bwd(const T* x, const T* dy, const T* g, A m, A r, T* dx, int64_t C,
                              A* pg, A* pb, A* pdx) {
  A s1 = 0, s2 = 0;  // sums over the row of dy·g and dy·g·xhat
  for (int64_t c = 0; c < C; ++c) {
    const A xh = (A(x[c]) - m) * r;
    const A d = A(dy[c]) * (g ? A(g[c]) : A(1));
    s1 += d;
    s2 += d * xh;
    if (pg) {
      pg[c] += A(dy[c]) * xh;
      pb[c] += A(dy[c]);
    }
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
