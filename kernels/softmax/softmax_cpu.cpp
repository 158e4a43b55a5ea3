// cpu.ref: per row (o, i) of the [outer, C, inner] view, double math: max over kept positions,
// sum of exp(x - max), then write; the gradient from the row sum of dy * y (log: of dy).
// cpu.omp: OpenMP over rows (consecutive rows on one thread, so rows of a strided dim share
// cache lines), f32 math for f32/f16/bf16 (f64 for f64). Contiguous rows (dim = last) keep exp
// values in y and rescale in place; 16-bit outputs recompute exp instead so that the output is
// rounded once. Test cases: softmax_cases.cpp.
#include "kernels/softmax/softmax_cpu.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/registry.h"
#include "kernels/softmax/softmax.h"

namespace aim::kernels {
namespace {

SoftmaxGeometry make_geometry(const Shape& s, int64_t dim, const Tensor& mask, Device dev,
                              const char* who, Tensor* mask_view) {
  const int64_t rank = int64_t(s.size());
  AIM_CHECK(rank >= 1 && rank <= kSoftmaxMaxDims, who, " needs 1 to ", kSoftmaxMaxDims,
            " dims, got x ", to_string(s));
  AIM_CHECK(dim >= -rank && dim < rank, who, " dim ", dim, " out of range for x ", to_string(s));
  const int64_t d = dim < 0 ? dim + rank : dim;
  SoftmaxGeometry g;
  for (int64_t k = 0; k < d; ++k) g.outer *= s[size_t(k)];
  g.C = s[size_t(d)];
  for (int64_t k = d + 1; k < rank; ++k) g.inner *= s[size_t(k)];
  if (mask_view) *mask_view = Tensor();
  if (!mask.defined()) return g;
  AIM_CHECK(mask.dtype() == DType::boolean, who, " mask must be bool, got ",
            dtype_name(mask.dtype()));
  AIM_CHECK(mask.device() == dev, who, " mask on ", mask.device().str(), ", x on ", dev.str());
  bool ok = mask.dim() <= rank;
  for (int64_t k = 0; ok && k < mask.dim(); ++k) {
    const int64_t ms = mask.size(k), xs = s[size_t(rank - mask.dim() + k)];
    ok = ms == xs || ms == 1;
  }
  AIM_CHECK(ok, who, " mask ", to_string(mask.sizes()), " does not broadcast to x ", to_string(s));
  const Tensor m = mask.expand(s);
  g.has_mask = true;
  g.n_outer = int(d);
  for (int64_t k = 0; k < d; ++k) {
    g.outer_sizes[k] = s[size_t(k)];
    g.outer_strides[k] = m.stride(k);
  }
  g.n_inner = int(rank - d - 1);
  for (int64_t k = d + 1; k < rank; ++k) {
    g.inner_sizes[k - d - 1] = s[size_t(k)];
    g.inner_strides[k - d - 1] = m.stride(k);
  }
  g.c_stride = m.stride(d);
  if (mask_view) *mask_view = m;
  return g;
}

void check_same(const Tensor& a, const char* an, const Tensor& b, const char* bn, const char* who) {
  AIM_CHECK(a.defined() && b.defined(), who, " needs ", an, " and ", bn);
  AIM_CHECK(a.sizes() == b.sizes(), who, " ", an, " ", to_string(a.sizes()), " and ", bn, " ",
            to_string(b.sizes()), " differ in shape");
  AIM_CHECK(a.dtype() == b.dtype(), who, " ", an, " is ", dtype_name(a.dtype()), ", ", bn, " is ",
            dtype_name(b.dtype()));
  AIM_CHECK(a.device() == b.device(), who, " ", an, " on ", a.device().str(), ", ", bn, " on ",
            b.device().str());
  AIM_CHECK(a.is_contiguous() && b.is_contiguous(), who, " ", an, " and ", bn,
            " must be contiguous");
}

}  // namespace

SoftmaxGeometry softmax_geometry(const SoftmaxArgs& a, const char* who, Tensor* mask_view) {
  check_same(a.x, "x", a.y, "y", who);
  AIM_CHECK(is_floating(a.x.dtype()), who, " x must be a float tensor, got ",
            dtype_name(a.x.dtype()));
  return make_geometry(a.x.sizes(), a.dim, a.mask, a.x.device(), who, mask_view);
}

SoftmaxGeometry softmax_bwd_geometry(const SoftmaxBwdArgs& a, const char* who, Tensor* mask_view) {
  check_same(a.dy, "dy", a.y, "y", who);
  check_same(a.dy, "dy", a.dx, "dx", who);
  AIM_CHECK(is_floating(a.dy.dtype()), who, " dy must be a float tensor, got ",
            dtype_name(a.dy.dtype()));
  return make_geometry(a.dy.sizes(), a.dim, a.mask, a.dy.device(), who, mask_view);
}

namespace {

const bool* mask_data(const Tensor& m) { return m.defined() ? m.data<bool>() : nullptr; }

// ---- cpu.ref ------------------------------------------------------------------------------------

template <class T>
void softmax_ref_typed(const SoftmaxArgs& a, const SoftmaxGeometry& g, const bool* mask) {
  const T* x = a.x.data<T>();
  T* y = a.y.data<T>();
  const double inf = std::numeric_limits<double>::infinity();
  for (int64_t o = 0; o < g.outer; ++o)
    for (int64_t i = 0; i < g.inner; ++i) {
      const bool* mr = mask ? mask + g.row_offset(o, i) : nullptr;
      auto at = [&](int64_t c) { return (o * g.C + c) * g.inner + i; };
      auto kept = [&](int64_t c) { return !mr || mr[c * g.c_stride]; };
      bool any = false;
      double m = -inf;
      for (int64_t c = 0; c < g.C; ++c)
        if (kept(c)) {
          any = true;
          m = double(x[at(c)]) > m ? double(x[at(c)]) : m;
        }
      double s = 0;
      for (int64_t c = 0; c < g.C; ++c)
        if (kept(c)) s += std::exp(double(x[at(c)]) - m);
      for (int64_t c = 0; c < g.C; ++c) {
        double v;
        if (!any || !kept(c))
          v = a.log ? -inf : 0.0;
        else
          v = a.log ? double(x[at(c)]) - m - std::log(s) : std::exp(double(x[at(c)]) - m) / s;
        y[at(c)] = T(v);
      }
    }
}

template <class T>
void softmax_bwd_ref_typed(const SoftmaxBwdArgs& a, const SoftmaxGeometry& g, const bool* mask) {
  const T* dy = a.dy.data<T>();
  const T* y = a.y.data<T>();
  T* dx = a.dx.data<T>();
  for (int64_t o = 0; o < g.outer; ++o)
    for (int64_t i = 0; i < g.inner; ++i) {
      const bool* mr = mask ? mask + g.row_offset(o, i) : nullptr;
      auto at = [&](int64_t c) { return (o * g.C + c) * g.inner + i; };
      auto kept = [&](int64_t c) { return !mr || mr[c * g.c_stride]; };
      double s = 0;
      for (int64_t c = 0; c < g.C; ++c)
        if (kept(c)) s += a.log ? double(dy[at(c)]) : double(dy[at(c)]) * double(y[at(c)]);
      for (int64_t c = 0; c < g.C; ++c) {
        const double d = double(dy[at(c)]), v = double(y[at(c)]);
        dx[at(c)] = T(!kept(c) ? 0.0 : a.log ? d - std::exp(v) * s : v * (d - s));
      }
    }
}

void softmax_cpu_ref(const SoftmaxArgs& a) {
  Tensor m;
  const SoftmaxGeometry g = softmax_geometry(a, "[softmax] cpu.ref", &m);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, softmax_ref_typed<T>(a, g, mask_data(m)));
}

void softmax_bwd_cpu_ref(const SoftmaxBwdArgs& a) {
  Tensor m;
  const SoftmaxGeometry g = softmax_bwd_geometry(a, "[softmax_bwd] cpu.ref", &m);
  AIM_DISPATCH_FLOAT_TYPES(a.dy.dtype(), T, softmax_bwd_ref_typed<T>(a, g, mask_data(m)));
}

// ---- cpu.omp ------------------------------------------------------------------------------------

template <class T>
using AccT = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <class A, class T>
inline A ld(T v) {
  if constexpr (std::is_same_v<T, A>) {
    return v;
  } else {
    return A(static_cast<float>(v));
  }
}

// One row: elements x[c * es], mask m[c * cs] (null: all kept).
template <class T, bool kContig>
void softmax_row(const T* x, T* y, int64_t C, int64_t es, const bool* m, int64_t cs, bool log) {
  using A = AccT<T>;
  const int64_t st = kContig ? 1 : es;
  const A inf = std::numeric_limits<A>::infinity();
  A mx = -inf;
  bool any = false;
  if (!m) {
    any = C > 0;
#pragma omp simd reduction(max : mx)
    for (int64_t c = 0; c < C; ++c) mx = std::max(mx, ld<A>(x[c * st]));
  } else {
    for (int64_t c = 0; c < C; ++c)
      if (m[c * cs]) {
        any = true;
        const A v = ld<A>(x[c * st]);
        mx = v > mx ? v : mx;
      }
  }
  if (!any) {
    for (int64_t c = 0; c < C; ++c) y[c * st] = T(log ? -inf : A(0));
    return;
  }
  A s = 0;
  if (log) {
    for (int64_t c = 0; c < C; ++c)
      if (!m || m[c * cs]) s += std::exp(ld<A>(x[c * st]) - mx);
    const A shift = mx + std::log(s);
    for (int64_t c = 0; c < C; ++c)
      y[c * st] = (!m || m[c * cs]) ? T(ld<A>(x[c * st]) - shift) : T(-inf);
    return;
  }
  if constexpr (std::is_same_v<T, A>) {  // keep exp in y, rescale in place
    for (int64_t c = 0; c < C; ++c) {
      const A e = (!m || m[c * cs]) ? std::exp(x[c * st] - mx) : A(0);
      y[c * st] = e;
      s += e;
    }
    const A r = A(1) / s;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) y[c * st] *= r;
  } else {  // 16-bit: recompute exp so that the output is rounded once
    for (int64_t c = 0; c < C; ++c)
      if (!m || m[c * cs]) s += std::exp(ld<A>(x[c * st]) - mx);
    const A r = A(1) / s;
    for (int64_t c = 0; c < C; ++c)
      y[c * st] = (!m || m[c * cs]) ? T(std::exp(ld<A>(x[c * st]) - mx) * r) : T(0.0f);
  }
}

template <class T, bool kContig>
void softmax_bwd_row(const T* dy, const T* y, T* dx, int64_t C, int64_t es, const bool* m,
                     int64_t cs, bool log) {
  using A = AccT<T>;
  const int64_t st = kContig ? 1 : es;
  A s = 0;
  if (!m) {
    if (log) {
#pragma omp simd reduction(+ : s)
      for (int64_t c = 0; c < C; ++c) s += ld<A>(dy[c * st]);
    } else {
#pragma omp simd reduction(+ : s)
      for (int64_t c = 0; c < C; ++c) s += ld<A>(dy[c * st]) * ld<A>(y[c * st]);
    }
  } else {
    for (int64_t c = 0; c < C; ++c)
      if (m[c * cs]) s += log ? ld<A>(dy[c * st]) : ld<A>(dy[c * st]) * ld<A>(y[c * st]);
  }
  for (int64_t c = 0; c < C; ++c) {
    const A d = ld<A>(dy[c * st]), v = ld<A>(y[c * st]);
    const A r = (m && !m[c * cs]) ? A(0) : log ? d - std::exp(v) * s : v * (d - s);
    dx[c * st] = T(r);
  }
}

template <class T>
void softmax_omp_typed(const SoftmaxArgs& a, const SoftmaxGeometry& g, const bool* mask) {
  const T* x = a.x.data<T>();
  T* y = a.y.data<T>();
  const int64_t rows = g.outer * g.inner, C = g.C, inner = g.inner;
#pragma omp parallel for schedule(static) if (rows * C > 32768)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t o = r / inner, i = r % inner;
    const bool* mr = mask ? mask + g.row_offset(o, i) : nullptr;
    const int64_t base = o * C * inner + i;
    if (inner == 1)
      softmax_row<T, true>(x + base, y + base, C, 1, mr, g.c_stride, a.log);
    else
      softmax_row<T, false>(x + base, y + base, C, inner, mr, g.c_stride, a.log);
  }
}

template <class T>
void softmax_bwd_omp_typed(const SoftmaxBwdArgs& a, const SoftmaxGeometry& g, const bool* mask) {
  const T* dy = a.dy.data<T>();
  const T* y = a.y.data<T>();
  T* dx = a.dx.data<T>();
  const int64_t rows = g.outer * g.inner, C = g.C, inner = g.inner;
#pragma omp parallel for schedule(static) if (rows * C > 32768)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t o = r / inner, i = r % inner;
    const bool* mr = mask ? mask + g.row_offset(o, i) : nullptr;
    const int64_t base = o * C * inner + i;
    if (inner == 1)
      softmax_bwd_row<T, true>(dy + base, y + base, dx + base, C, 1, mr, g.c_stride, a.log);
    else
      softmax_bwd_row<T, false>(dy + base, y + base, dx + base, C, inner, mr, g.c_stride, a.log);
  }
}

void softmax_cpu_omp(const SoftmaxArgs& a) {
  Tensor m;
  const SoftmaxGeometry g = softmax_geometry(a, "[softmax] cpu.omp", &m);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, softmax_omp_typed<T>(a, g, mask_data(m)));
}

void softmax_bwd_cpu_omp(const SoftmaxBwdArgs& a) {
  Tensor m;
  const SoftmaxGeometry g = softmax_bwd_geometry(a, "[softmax_bwd] cpu.omp", &m);
  AIM_DISPATCH_FLOAT_TYPES(a.dy.dtype(), T, softmax_bwd_omp_typed<T>(a, g, mask_data(m)));
}

}  // namespace

void softmax(const SoftmaxArgs& a) { AIM_DISPATCH_OP(SoftmaxArgs, "softmax", a); }
void softmax_bwd(const SoftmaxBwdArgs& a) { AIM_DISPATCH_OP(SoftmaxBwdArgs, "softmax_bwd", a); }

void register_softmax_cpu(Registry& r) {
  const std::vector<DType> floats{DType::f32, DType::f64, DType::f16, DType::bf16};
  auto simt_ok = [](const TestShape& s) { return s[3] * s[4] * s[5] <= 40000; };

  auto& f = r.op<SoftmaxArgs>("softmax");
  f.description = "softmax / log-softmax along a dim, optional keep-mask";
  f.add({"cpu.ref", Backend::CPU, Provider::Own, softmax_cpu_ref, floats});
  f.add({"cpu.omp", Backend::CPU, Provider::Own, softmax_cpu_omp, floats});
  f.set_default(Backend::CPU, "cpu.omp");
  f.set_cost(softmax_cost);
  f.make_case = softmax_cpu::make_softmax_case;
  f.set_shape_fields(softmax_cpu::softmax_shape_fields());
  f.add_test_shapes(softmax_cpu::softmax_test_shapes());
  f.small_enough_for_simt = simt_ok;

  auto& b = r.op<SoftmaxBwdArgs>("softmax_bwd");
  b.description = "gradient of softmax / log-softmax";
  b.add({"cpu.ref", Backend::CPU, Provider::Own, softmax_bwd_cpu_ref, floats});
  b.add({"cpu.omp", Backend::CPU, Provider::Own, softmax_bwd_cpu_omp, floats});
  b.set_default(Backend::CPU, "cpu.omp");
  b.set_cost(softmax_bwd_cost);
  b.make_case = softmax_cpu::make_softmax_bwd_case;
  b.set_shape_fields(softmax_cpu::softmax_shape_fields());
  // Row sums of C terms: rounding grows like sqrt(C).
  b.tolerance = [](DType t, const TestShape& s) {
    const int64_t C = s[size_t(3 + (s[2] < 0 ? s[2] + 3 : s[2]))];
    const double g = std::sqrt(std::max(1.0, double(C) / 64.0));
    const Tolerance d = default_tolerance(t);
    return Tolerance{d.atol * g, d.rtol * g};
  };
  b.add_test_shapes(softmax_cpu::softmax_test_shapes());
  b.small_enough_for_simt = simt_ok;
}

}  // namespace aim::kernels
