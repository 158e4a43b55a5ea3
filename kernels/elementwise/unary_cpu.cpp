// unary, unary_bwd on the CPU.
// cpu.ref: one generic N-d index loop, every element computed in double and rounded once.
// cpu.omp: the elementwise loop engine (loops_cpu.h): dims merged, OpenMP over chunks of the
// flat index, the kind a template parameter so that the contiguous inner loop is a plain loop g++
// vectorises (AVX2) where the function allows; compute in f32 for f32/f16/bf16, f64 for f64.
// Test cases: unary_cases.cpp.
#include "kernels/elementwise/unary_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/elementwise/loops_cpu.h"
#include "kernels/elementwise/unary.h"
#include "kernels/fast_math.h"
#include "kernels/registry.h"

namespace aim::kernels {

// clang-format off
#define AIM_UNARY_KINDS(X)                                                                      \
  X(neg) X(exp) X(log) X(sqrt) X(rsqrt) X(abs) X(relu) X(gelu_erf) X(gelu_tanh) X(sigmoid)     \
  X(tanh) X(leaky_relu) X(clamp) X(square) X(reciprocal) X(sign) X(log1p) X(expm1) X(sin)      \
  X(cos)
// clang-format on

const char* unary_kind_name(UnaryKind k) {
  switch (k) {
#define AIM_NAME_CASE(n) \
  case UnaryKind::n:     \
    return #n;
    AIM_UNARY_KINDS(AIM_NAME_CASE)
#undef AIM_NAME_CASE
  }
  return "?";
}

namespace {

std::string strides_str(const Tensor& t) { return to_string(t.strides()); }

void check_output(const char* op, const char* name, const Tensor& t) {
  for (int64_t d = 0; d < t.dim(); ++d)
    AIM_CHECK(t.size(d) == 1 || t.stride(d) != 0, "[", op, "] ", name,
              " must not be a broadcast view (stride 0), got sizes ", to_string(t.sizes()),
              " strides ", strides_str(t));
}

void check_same(const char* op, UnaryKind k, const char* an, const Tensor& a, const char* bn,
                const Tensor& b) {
  AIM_CHECK(b.defined(), "[", op, "] ", unary_kind_name(k), " needs ", bn, ", got undefined");
  AIM_CHECK(a.sizes() == b.sizes(), "[", op, "] ", unary_kind_name(k), ": ", an, " ",
            to_string(a.sizes()), " and ", bn, " ", to_string(b.sizes()), " differ in shape");
  AIM_CHECK(a.dtype() == b.dtype(), "[", op, "] ", unary_kind_name(k), ": ", an, " is ",
            dtype_name(a.dtype()), ", ", bn, " is ", dtype_name(b.dtype()),
            ": the same dtype expected");
  AIM_CHECK(a.device() == b.device(), "[", op, "] ", an, " on ", a.device().str(), ", ", bn, " on ",
            b.device().str(), ": same device expected");
}

void check_kind(const char* op, UnaryKind k) {
  AIM_CHECK(int(k) < kNumUnaryKinds, "[", op, "] unknown UnaryKind ", int(k));
}

}  // namespace

void check_unary_args(const UnaryArgs& a) {
  check_kind("unary", a.kind);
  AIM_CHECK(a.x.defined() && a.y.defined(), "[unary] x and y must be defined");
  check_same("unary", a.kind, "x", a.x, "y", a.y);
  check_output("unary", "y", a.y);
}

void check_unary_bwd_args(const UnaryBwdArgs& a) {
  check_kind("unary_bwd", a.kind);
  AIM_CHECK(a.dy.defined() && a.dx.defined(), "[unary_bwd] dy and dx must be defined");
  check_same("unary_bwd", a.kind, "dy", a.dy, "dx", a.dx);
  if (unary_bwd_reads_x(a.kind)) check_same("unary_bwd", a.kind, "dy", a.dy, "x", a.x);
  if (unary_bwd_reads_y(a.kind)) check_same("unary_bwd", a.kind, "dy", a.dy, "y", a.y);
  check_output("unary_bwd", "dx", a.dx);
}

namespace {

// ---- cpu.ref -------------------------------------------------------------------------------

template <class T>
void unary_ref_typed(const UnaryArgs& a) {
  const T* x = a.x.data<T>();
  T* y = a.y.data<T>();
  const int64_t n = a.y.numel();
  for (int64_t i = 0; i < n; ++i) {
    const double v = double(x[strided_offset(i, a.x.sizes(), a.x.strides())]);
    y[strided_offset(i, a.y.sizes(), a.y.strides())] =
        T(unary_value<double>(a.kind, v, a.alpha, a.beta));
  }
}

void unary_cpu_ref(const UnaryArgs& a) {
  check_unary_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, { unary_ref_typed<T>(a); });
}

// x or y that a kind does not read may be undefined: read dy in its place (same shape).
const Tensor& or_dy(const Tensor& t, const UnaryBwdArgs& a, bool reads) { return reads ? t : a.dy; }

template <class T>
void unary_bwd_ref_typed(const UnaryBwdArgs& a) {
  const Tensor& xt = or_dy(a.x, a, unary_bwd_reads_x(a.kind));
  const Tensor& yt = or_dy(a.y, a, unary_bwd_reads_y(a.kind));
  const T* dy = a.dy.data<T>();
  const T* x = xt.data<T>();
  const T* y = yt.data<T>();
  T* dx = a.dx.data<T>();
  const int64_t n = a.dx.numel();
  for (int64_t i = 0; i < n; ++i) {
    const double g = double(dy[strided_offset(i, a.dy.sizes(), a.dy.strides())]);
    const double xv = double(x[strided_offset(i, xt.sizes(), xt.strides())]);
    const double yv = double(y[strided_offset(i, yt.sizes(), yt.strides())]);
    dx[strided_offset(i, a.dx.sizes(), a.dx.strides())] =
        T(unary_bwd_value<double>(a.kind, g, xv, yv, a.alpha, a.beta));
  }
}

void unary_bwd_cpu_ref(const UnaryBwdArgs& a) {
  check_unary_bwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.dy.dtype(), T, { unary_bwd_ref_typed<T>(a); });
}

// ---- cpu.omp -------------------------------------------------------------------------------

template <class T>
using Comp = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <UnaryKind K, class T>
struct UnaryLoop {
  using C = Comp<T>;
  const T* x;
  C alpha, beta;
  T f(T v) const {
    if constexpr (std::is_same_v<C, float> && K == UnaryKind::sigmoid)
      return T(1.0f / (1.0f + fast_expf(-float(v))));
    else if constexpr (std::is_same_v<C, float> && K == UnaryKind::exp)
      return T(fast_expf(float(v)));
    else
      return T(unary_value<C>(K, C(v), alpha, beta));
  }
  void operator()(T* dst, const int64_t* off, const int64_t* st, int64_t m) const {
    const T* p = x + off[0];
    const int64_t s = st[0];
    if (s == 1) {
#pragma omp simd  // element k reads inputs at k only; forces vectorising (GCC may not, see README)
      for (int64_t k = 0; k < m; ++k) dst[k] = f(p[k]);
    } else if (s == 0) {
      const T v = f(p[0]);
      for (int64_t k = 0; k < m; ++k) dst[k] = v;
    } else {
      for (int64_t k = 0; k < m; ++k) dst[k] = f(p[k * s]);
    }
  }
};

template <UnaryKind K, class T>
struct UnaryBwdLoop {
  using C = Comp<T>;
  const T *dy, *x, *y;
  C alpha, beta;
  T f(T g, T xv, T yv) const { return T(unary_bwd_value<C>(K, C(g), C(xv), C(yv), alpha, beta)); }
  void operator()(T* dst, const int64_t* off, const int64_t* st, int64_t m) const {
    const T* g = dy + off[0];
    const T* xp = x + off[1];
    const T* yp = y + off[2];
    if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
#pragma omp simd  // element k reads inputs at k only; forces vectorising (GCC may not, see README)
      for (int64_t k = 0; k < m; ++k) dst[k] = f(g[k], xp[k], yp[k]);
    } else {
      for (int64_t k = 0; k < m; ++k) dst[k] = f(g[k * st[0]], xp[k * st[1]], yp[k * st[2]]);
    }
  }
};

template <UnaryKind K, class T>
void unary_omp_kind(const UnaryArgs& a) {
  const EwLayout l = make_ew_layout(a.y, {&a.x});
  ew_cpu_run(l, a.y.data<T>(), 1, UnaryLoop<K, T>{a.x.data<T>(), a.alpha, a.beta});
}

template <UnaryKind K, class T>
void unary_bwd_omp_kind(const UnaryBwdArgs& a) {
  const Tensor& xt = or_dy(a.x, a, unary_bwd_reads_x(K));
  const Tensor& yt = or_dy(a.y, a, unary_bwd_reads_y(K));
  const EwLayout l = make_ew_layout(a.dx, {&a.dy, &xt, &yt});
  ew_cpu_run(l, a.dx.data<T>(), 3,
             UnaryBwdLoop<K, T>{a.dy.data<T>(), xt.data<T>(), yt.data<T>(), a.alpha, a.beta});
}

template <class T>
void unary_omp_typed(const UnaryArgs& a) {
  switch (a.kind) {
#define AIM_RUN_CASE(n)                 \
  case UnaryKind::n:                    \
    unary_omp_kind<UnaryKind::n, T>(a); \
    break;
    AIM_UNARY_KINDS(AIM_RUN_CASE)
#undef AIM_RUN_CASE
  }
}

template <class T>
void unary_bwd_omp_typed(const UnaryBwdArgs& a) {
  switch (a.kind) {
#define AIM_RUN_CASE(n)                     \
  case UnaryKind::n:                        \
    unary_bwd_omp_kind<UnaryKind::n, T>(a); \
    break;
    AIM_UNARY_KINDS(AIM_RUN_CASE)
#undef AIM_RUN_CASE
  }
}

void unary_cpu_omp(const UnaryArgs& a) {
  check_unary_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, { unary_omp_typed<T>(a); });
}

void unary_bwd_cpu_omp(const UnaryBwdArgs& a) {
  check_unary_bwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.dy.dtype(), T, { unary_bwd_omp_typed<T>(a); });
}

std::vector<DType> float_dtypes() { return {DType::f32, DType::f64, DType::f16, DType::bf16}; }

}  // namespace

void unary_cpu::unary_ref(const UnaryArgs& a) { unary_cpu_ref(a); }

void unary(const UnaryArgs& a) { AIM_DISPATCH_OP(UnaryArgs, "unary", a); }
void unary_bwd(const UnaryBwdArgs& a) { AIM_DISPATCH_OP(UnaryBwdArgs, "unary_bwd", a); }

void register_unary_cpu(Registry& r) {
  auto& u = r.op<UnaryArgs>("unary");
  u.description = "elementwise y = f(x): neg exp log sqrt rsqrt abs relu gelu sigmoid tanh ...";
  u.add({"cpu.ref", Backend::CPU, Provider::Own, unary_cpu_ref, float_dtypes()});
  u.add({"cpu.omp", Backend::CPU, Provider::Own, unary_cpu_omp, float_dtypes()});
  u.set_default(Backend::CPU, "cpu.omp");
  u.set_cost(unary_cost);
  u.make_case = unary_cpu::make_unary_case;
  u.set_shape_fields(unary_cpu::unary_shape_fields());
  u.add_test_shapes(unary_cpu::unary_test_shapes());
  u.small_enough_for_simt = unary_cpu::unary_small_enough_for_simt;
  u.tolerance = unary_cpu::unary_tolerance;

  auto& b = r.op<UnaryBwdArgs>("unary_bwd");
  b.description = "gradient of unary: dx = dy * f'(x)";
  b.add({"cpu.ref", Backend::CPU, Provider::Own, unary_bwd_cpu_ref, float_dtypes()});
  b.add({"cpu.omp", Backend::CPU, Provider::Own, unary_bwd_cpu_omp, float_dtypes()});
  b.set_default(Backend::CPU, "cpu.omp");
  b.set_cost(unary_bwd_cost);
  b.make_case = unary_cpu::make_unary_bwd_case;
  b.set_shape_fields(unary_cpu::unary_shape_fields());
  b.add_test_shapes(unary_cpu::unary_test_shapes());
  b.small_enough_for_simt = unary_cpu::unary_small_enough_for_simt;
  b.tolerance = unary_cpu::unary_tolerance;
}

}  // namespace aim::kernels
