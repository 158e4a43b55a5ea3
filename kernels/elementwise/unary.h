// Elementwise unary functions y = f(x) and their gradient dx = dy * f'(x).
// Shapes: x, y, dy, dx: the same sizes; inputs (x, dy, and y in unary_bwd) may be any strided
// views (broadcast views included); outputs any non-overlapping strides (contiguous is fastest).
// Dtypes: f32, f64, f16, bf16 (16-bit types compute in f32, f64 in f64).
// Math, gradients and the PyTorch function of each kind: kernels/elementwise/README.md
#pragma once
#include <math.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/op.h"

// The scalar math is shared by the CPU variants and the own CUDA kernels (host and device).
#if defined(__CUDACC__)
#define AIM_EW_HD __host__ __device__ __forceinline__
#else
#define AIM_EW_HD inline
#endif

namespace aim::kernels {

enum class UnaryKind : uint8_t {
  neg,
  exp,
  log,
  sqrt,
  rsqrt,
  abs,
  relu,
  gelu_erf,   // x * 0.5 * (1 + erf(x / sqrt(2)))
  gelu_tanh,  // 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))
  sigmoid,
  tanh,
  leaky_relu,  // x > 0 ? x : alpha * x
  clamp,       // min(max(x, alpha), beta)
  square,
  reciprocal,
  sign,
  log1p,
  expm1,
  sin,
  cos,
};
constexpr int kNumUnaryKinds = 20;
const char* unary_kind_name(UnaryKind k);

struct UnaryArgs {
  Tensor x;  // input, any strides: [...]
  Tensor y;  // output, same sizes and dtype as x: [...]
  UnaryKind kind = UnaryKind::neg;
  float alpha = 0, beta = 0;  // leaky_relu: slope alpha; clamp: [alpha, beta]
  Device device() const { return y.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("x", s.x), f.out("y", s.y);
    f.param("kind", s.kind), f.param("alpha", s.alpha), f.param("beta", s.beta);
  }
};

// dx = dy * f'(x). Which of x and y a kind reads is given by unary_bwd_reads_x/_y below; the
// other may be left undefined (where both are cheap, the one PyTorch uses is read).
struct UnaryBwdArgs {
  Tensor dy;  // gradient of y: [...]
  Tensor x;   // forward input: [...]
  Tensor y;   // forward output: [...]
  Tensor dx;  // output, written (not accumulated): [...]
  UnaryKind kind = UnaryKind::neg;
  float alpha = 0, beta = 0;
  Device device() const { return dx.device(); }
  DType dtype() const { return dy.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("dy", s.dy), f.in_opt("x", s.x), f.in_opt("y", s.y), f.out("dx", s.dx);
    f.param("kind", s.kind), f.param("alpha", s.alpha), f.param("beta", s.beta);
  }
};

// The gradient of these kinds is computed from y (cheaper, or what PyTorch does).
// relu reads y (> 0 exactly where x > 0, also for -0 and NaN), as PyTorch's threshold_backward:
// then conv -> bn -> relu keeps two activations for backward, not three (the relu output is the
// next conv's saved input; the bn output, relu's input, is freed after the forward).
constexpr bool unary_bwd_reads_y(UnaryKind k) {
  return k == UnaryKind::relu || k == UnaryKind::exp || k == UnaryKind::sqrt ||
         k == UnaryKind::rsqrt || k == UnaryKind::sigmoid || k == UnaryKind::tanh ||
         k == UnaryKind::reciprocal || k == UnaryKind::expm1;
}
// neg and sign need neither x nor y.
constexpr bool unary_bwd_reads_x(UnaryKind k) {
  return !unary_bwd_reads_y(k) && k != UnaryKind::neg && k != UnaryKind::sign;
}

// FLOPs per element counted by the cost model (one per arithmetic operation of the formula; a
// transcendental function counts as one).
constexpr int unary_flops_per_element(UnaryKind k) {
  switch (k) {
    case UnaryKind::gelu_erf:
      return 5;
    case UnaryKind::gelu_tanh:
      return 8;
    case UnaryKind::sigmoid:
      return 4;
    case UnaryKind::rsqrt:
      return 2;
    case UnaryKind::clamp:
      return 2;
    default:
      return 1;
  }
}
constexpr int unary_bwd_flops_per_element(UnaryKind k) { return unary_flops_per_element(k) + 3; }

inline Cost unary_cost(const UnaryArgs& a) {
  const double n = double(a.y.numel());
  return Cost{n * unary_flops_per_element(a.kind), n * dtype_size(a.x.dtype()),
              n * dtype_size(a.y.dtype())};
}
inline Cost unary_bwd_cost(const UnaryBwdArgs& a) {
  const double n = double(a.dx.numel());
  const double e = double(dtype_size(a.dy.dtype()));
  const int reads = 1 + int(unary_bwd_reads_x(a.kind)) + int(unary_bwd_reads_y(a.kind));
  return Cost{n * unary_bwd_flops_per_element(a.kind), n * e * reads, n * e};
}

void unary(const UnaryArgs& a);         // runs the selected variant
void unary_bwd(const UnaryBwdArgs& a);  // runs the selected variant

// Argument checks shared by every variant (throw naming the op, shapes and dtypes).
void check_unary_args(const UnaryArgs& a);
void check_unary_bwd_args(const UnaryBwdArgs& a);

// ---- scalar math, in the compute type C (float or double) ----------------------------------

template <class C>
AIM_EW_HD C unary_value(UnaryKind k, C x, C alpha, C beta) {
  switch (k) {
    case UnaryKind::neg:
      return -x;
    case UnaryKind::exp:
      return ::exp(x);
    case UnaryKind::log:
      return ::log(x);
    case UnaryKind::sqrt:
      return ::sqrt(x);
    case UnaryKind::rsqrt:
      return C(1) / ::sqrt(x);
    case UnaryKind::abs:
      return ::fabs(x);
    case UnaryKind::relu:
      return x < C(0) ? C(0) : x;  // NaN stays NaN, as in PyTorch
    case UnaryKind::gelu_erf:
      return x * C(0.5) * (C(1) + ::erf(x * C(0.70710678118654752440)));
    case UnaryKind::gelu_tanh: {
      const C inner = C(0.79788456080286535588) * (x + C(0.044715) * x * x * x);
      return C(0.5) * x * (C(1) + ::tanh(inner));
    }
    case UnaryKind::sigmoid:
      return C(1) / (C(1) + ::exp(-x));
    case UnaryKind::tanh:
      return ::tanh(x);
    case UnaryKind::leaky_relu:
      return x > C(0) ? x : alpha * x;
    case UnaryKind::clamp: {  // lo > hi gives hi, NaN stays NaN: as torch.clamp
      const C r = x < alpha ? alpha : x;
      return r > beta ? beta : r;
    }
    case UnaryKind::square:
      return x * x;
    case UnaryKind::reciprocal:
      return C(1) / x;
    case UnaryKind::sign:
      return C(int(C(0) < x) - int(x < C(0)));  // sign(NaN) = 0
    case UnaryKind::log1p:
      return ::log1p(x);
    case UnaryKind::expm1:
      return ::expm1(x);
    case UnaryKind::sin:
      return ::sin(x);
    case UnaryKind::cos:
      return ::cos(x);
  }
  return x;  // not reached: every kind is handled above
}

// dx for one element; x or y is read only where unary_bwd_reads_x/_y says so.
template <class C>
AIM_EW_HD C unary_bwd_value(UnaryKind k, C dy, C x, C y, C alpha, C beta) {
  switch (k) {
    case UnaryKind::neg:
      return -dy;
    case UnaryKind::exp:
      return dy * y;
    case UnaryKind::log:
      return dy / x;
    case UnaryKind::sqrt:
      return dy / (C(2) * y);
    case UnaryKind::rsqrt:
      return C(-0.5) * dy * y * y * y;
    case UnaryKind::abs:
      return x > C(0) ? dy : (x < C(0) ? -dy : C(0));  // abs'(0) = 0
    case UnaryKind::relu:
      return y > C(0) ? dy : C(0);  // relu'(0) = 0; y > 0 exactly where x > 0
    case UnaryKind::gelu_erf: {
      const C cdf = C(0.5) * (C(1) + ::erf(x * C(0.70710678118654752440)));
      const C pdf = C(0.39894228040143267794) * ::exp(C(-0.5) * x * x);
      return dy * (cdf + x * pdf);
    }
    case UnaryKind::gelu_tanh: {
      const C kb = C(0.79788456080286535588), kk = C(0.044715);
      const C x2 = x * x;
      const C t = ::tanh(kb * (x + kk * x2 * x));
      const C dinner = kb * (C(1) + C(3) * kk * x2);
      return dy * (C(0.5) * (C(1) + t) + C(0.5) * x * (C(1) - t * t) * dinner);
    }
    case UnaryKind::sigmoid:
      return dy * y * (C(1) - y);
    case UnaryKind::tanh:
      return dy * (C(1) - y * y);
    case UnaryKind::leaky_relu:
      return x > C(0) ? dy : dy * alpha;  // slope alpha at 0
    case UnaryKind::clamp:
      return (x >= alpha && x <= beta) ? dy : C(0);  // bounds pass
    case UnaryKind::square:
      return C(2) * x * dy;
    case UnaryKind::reciprocal:
      return -dy * y * y;
    case UnaryKind::sign:
      return C(0);
    case UnaryKind::log1p:
      return dy / (C(1) + x);
    case UnaryKind::expm1:
      return dy * (y + C(1));
    case UnaryKind::sin:
      return dy * ::cos(x);
    case UnaryKind::cos:
      return -dy * ::sin(x);
  }
  return dy;  // not reached
}

}  // namespace aim::kernels
