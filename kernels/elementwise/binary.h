// Elementwise binary functions y = f(a, b) with NumPy broadcasting, and where(cond, a, b).
// Shapes: a, b (and cond) broadcast to y's sizes, which must be their broadcast shape; inputs may
// be any strided views; y any non-overlapping strides (contiguous is fastest).
// Dtypes: a and b share one dtype: f32, f64, f16, bf16 (16-bit types compute in f32), i32, i64.
// Comparisons write a bool y; the other kinds write the inputs' dtype.
// Math, gradients and the PyTorch function of each kind: kernels/elementwise/README.md
#pragma once
#include "kernels/elementwise/unary.h"

namespace aim::kernels {

enum class BinaryKind : uint8_t {
  add,  // a + alpha * b
  sub,  // a - alpha * b
  mul,
  div,  // integers: truncation toward zero (torch.div(rounding_mode='trunc'))
  pow,  // integers: PyTorch's integer power (negative exponents give 0 unless |a| == 1)
  maximum,
  minimum,
  eq,
  ne,
  lt,
  le,
  gt,
  ge,
  prelu,  // a > 0 ? a : b * a, b broadcast (the per-channel weight, shaped to broadcast)
};
constexpr int kNumBinaryKinds = 14;
const char* binary_kind_name(BinaryKind k);
constexpr bool is_comparison(BinaryKind k) {
  return k == BinaryKind::eq || k == BinaryKind::ne || k == BinaryKind::lt || k == BinaryKind::le ||
         k == BinaryKind::gt || k == BinaryKind::ge;
}

struct BinaryArgs {
  Tensor a, b;  // inputs, same dtype, broadcastable: [...]
  Tensor y;     // output: broadcast shape of a and b; bool for comparisons, else a's dtype
  BinaryKind kind = BinaryKind::add;
  float alpha = 1;  // add / sub only; must be integral for integer dtypes
  Device device() const { return y.device(); }
  DType dtype() const { return a.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("a", s.a), f.in("b", s.b), f.out("y", s.y);
    f.param("kind", s.kind), f.param("alpha", s.alpha);
  }
};

// y = cond ? a : b, broadcasting all three to y's sizes.
struct WhereArgs {
  Tensor cond;  // bool: [...]
  Tensor a, b;  // same dtype (any): [...]
  Tensor y;     // a's dtype, the broadcast shape of cond, a and b
  Device device() const { return y.device(); }
  DType dtype() const { return a.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("cond", s.cond), f.in("a", s.a), f.in("b", s.b), f.out("y", s.y);
  }
};

inline Cost binary_cost(const BinaryArgs& a) {
  const double e = double(dtype_size(a.a.dtype()));
  const double n = double(a.y.numel());
  const bool scaled = (a.kind == BinaryKind::add || a.kind == BinaryKind::sub) && a.alpha != 1;
  return Cost{n * (scaled ? 2 : 1), (double(a.a.numel()) + double(a.b.numel())) * e,
              double(a.y.nbytes())};
}
inline Cost where_cost(const WhereArgs& a) {
  const double e = double(dtype_size(a.a.dtype()));
  return Cost{0, double(a.cond.numel()) + (double(a.a.numel()) + double(a.b.numel())) * e,
              double(a.y.nbytes())};
}

void binary(const BinaryArgs& a);  // runs the selected variant
void where(const WhereArgs& a);    // runs the selected variant

// Argument checks shared by every variant (throw naming the op, shapes and dtypes). The CPU
// variants also throw on an integer division by zero.
void check_binary_args(const BinaryArgs& a);
void check_where_args(const WhereArgs& a);

// ---- scalar math, in the compute type C (float, double, or the integer type) ---------------

template <class C>
AIM_EW_HD bool is_nan_value(C v) {
  if constexpr (std::is_integral_v<C>) {
    return false;
  } else {
    return v != v;
  }
}

template <class C>
AIM_EW_HD C integer_pow(C a, C b) {
  if (b < 0) return a == 1 ? C(1) : (a == -1 ? ((-b) % 2 ? C(-1) : C(1)) : C(0));
  C r = 1;
  while (b) {
    if (b & 1) r *= a;
    b /= 2;
    a *= a;
  }
  return r;
}

template <class C>
AIM_EW_HD C binary_value(BinaryKind k, C a, C b, C alpha) {
  switch (k) {
    case BinaryKind::add:
      return a + alpha * b;
    case BinaryKind::sub:
      return a - alpha * b;
    case BinaryKind::mul:
      return a * b;
    case BinaryKind::div:
      return a / b;
    case BinaryKind::pow:
      if constexpr (std::is_integral_v<C>) {
        return integer_pow(a, b);
      } else {
        return ::pow(a, b);
      }
    case BinaryKind::maximum:
      return (a > b || is_nan_value(a)) ? a : b;  // NaN propagates
    case BinaryKind::minimum:
      return (a < b || is_nan_value(a)) ? a : b;
    case BinaryKind::prelu:
      return a > C(0) ? a : b * a;
    default:
      return a;  // comparisons: compare_value
  }
}

template <class C>
AIM_EW_HD bool compare_value(BinaryKind k, C a, C b) {
  switch (k) {
    case BinaryKind::eq:
      return a == b;
    case BinaryKind::ne:
      return a != b;
    case BinaryKind::lt:
      return a < b;
    case BinaryKind::le:
      return a <= b;
    case BinaryKind::gt:
      return a > b;
    case BinaryKind::ge:
      return a >= b;
    default:
      return false;  // arithmetic kinds: binary_value
  }
}

}  // namespace aim::kernels
