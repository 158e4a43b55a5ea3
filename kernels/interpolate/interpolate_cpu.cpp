// interpolate: argument checks, CPU variants and registration.
// cpu.ref: the oracle. Every output from its source indices and weights (interpolate.h), sums in
// double; the backward scatters every dy element into a double buffer.
// cpu.omp: the per-axis indices and weights computed once per call. Nearest forward: OpenMP over
// (plane, output row), each row a gather through the column table. Bilinear forward: OpenMP over
// planes; bilinear is separable, so each input row the output needs is interpolated along W once
// (kept in a two-row cache: consecutive output rows share their source rows) and every output row
// is the blend of two such rows, a contiguous loop that vectorises. Backward, OpenMP over planes
// (a plane belongs to one thread: deterministic, no atomics): bilinear blends dy's rows into an
// H x Q buffer (vectorised), then scatters each buffer row along W; nearest scatters dy in output
// order. Sums in the data's dtype.
// Test cases: interpolate_cases.cpp.
#include "kernels/interpolate/interpolate_cpu.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/interpolate/interpolate.h"
#include "kernels/registry.h"

namespace aim::kernels {
namespace {

std::string desc(const Tensor& t) {
  return t.defined() ? to_string(t.sizes()) + " " + dtype_name(t.dtype()) : "undefined";
}

void check_args(const char* op, const char* xn, const Tensor& x, const char* yn, const Tensor& y,
                const InterpolateParams& p) {
  AIM_CHECK(x.defined() && x.dim() == 4, "[", op, "] ", xn, " must be [N, C, H, W], got ", desc(x));
  AIM_CHECK(y.defined() && y.dim() == 4, "[", op, "] ", yn, " must be [N, C, P, Q], got ", desc(y));
  AIM_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::f64, "[", op, "] ", xn,
            " must be f32 or f64, got ", dtype_name(x.dtype()));
  AIM_CHECK(y.dtype() == x.dtype(), "[", op, "] ", yn, " must have ", xn, "'s dtype ",
            dtype_name(x.dtype()), ", got ", dtype_name(y.dtype()));
  AIM_CHECK(y.size(0) == x.size(0) && y.size(1) == x.size(1), "[", op, "] ", xn, " ",
            to_string(x.sizes()), " and ", yn, " ", to_string(y.sizes()),
            " must have the same N and C");
  AIM_CHECK(x.size(2) >= 1 && x.size(3) >= 1 && y.size(2) >= 1 && y.size(3) >= 1, "[", op,
            "] planes must not be empty, got ", xn, " ", to_string(x.sizes()), " and ", yn, " ",
            to_string(y.sizes()));
  AIM_CHECK(x.is_contiguous() && y.is_contiguous(), "[", op, "] ", xn, " and ", yn,
            " must be contiguous");
  AIM_CHECK(x.device() == y.device(), "[", op, "] ", xn, " is on ", x.device().str(), ", ", yn,
            " on ", y.device().str());
  AIM_CHECK(p.mode == InterpMode::nearest || p.mode == InterpMode::bilinear, "[", op,
            "] mode must be nearest (0) or bilinear (1), got ", int64_t(p.mode));
  AIM_CHECK(p.mode == InterpMode::bilinear || !p.align_corners, "[", op,
            "] align_corners is for bilinear only (as F.interpolate)");
  AIM_CHECK(
      std::isfinite(p.scale_h) && std::isfinite(p.scale_w) && p.scale_h >= 0 && p.scale_w >= 0, "[",
      op, "] scale factors must be finite and >= 0 (0: from the sizes), got ", p.scale_h, ", ",
      p.scale_w);
}

}  // namespace

void check_interpolate_fwd_args(const InterpolateFwdArgs& a) {
  check_args("interpolate_fwd", "x", a.x, "y", a.y, a.p);
}
void check_interpolate_bwd_args(const InterpolateBwdArgs& a) {
  check_args("interpolate_bwd", "dx", a.dx, "dy", a.dy, a.p);
}

namespace {

template <class F>
void dispatch_interp(DType t, F f) {
  if (t == DType::f32)
    f(float{});
  else
    f(double{});  // the checks admit f32 and f64 only
}

// Per-axis source tables of one call.
struct NearestTables {
  std::vector<int64_t> h, w;
};
NearestTables nearest_tables(int64_t H, int64_t W, int64_t P, int64_t Q,
                             const InterpolateParams& p) {
  NearestTables t{std::vector<int64_t>(size_t(P)), std::vector<int64_t>(size_t(Q))};
  const float sh = nearest_scale(H, P, p.scale_h), sw = nearest_scale(W, Q, p.scale_w);
  for (int64_t o = 0; o < P; ++o) t.h[size_t(o)] = nearest_source(o, H, P, sh);
  for (int64_t o = 0; o < Q; ++o) t.w[size_t(o)] = nearest_source(o, W, Q, sw);
  return t;
}
template <class T>
struct LinearTables {
  std::vector<Lerp<T>> h, w;
};
template <class T>
LinearTables<T> linear_tables(int64_t H, int64_t W, int64_t P, int64_t Q,
                              const InterpolateParams& p) {
  LinearTables<T> t{std::vector<Lerp<T>>(size_t(P)), std::vector<Lerp<T>>(size_t(Q))};
  const T sh = linear_scale<T>(H, P, p.align_corners, p.scale_h);
  const T sw = linear_scale<T>(W, Q, p.align_corners, p.scale_w);
  for (int64_t o = 0; o < P; ++o) t.h[size_t(o)] = linear_source(o, H, P, sh, p.align_corners);
  for (int64_t o = 0; o < Q; ++o) t.w[size_t(o)] = linear_source(o, W, Q, sw, p.align_corners);
  return t;
}

// ---- cpu.ref ---------------------------------------------------------------------------------

template <class T>
void interpolate_fwd_ref(const InterpolateFwdArgs& a) {
  const int64_t NC = a.x.size(0) * a.x.size(1), H = a.x.size(2), W = a.x.size(3);
  const int64_t P = a.y.size(2), Q = a.y.size(3);
  const T* x = a.x.data<T>();
  T* y = a.y.data<T>();
  const bool lin = a.p.mode == InterpMode::bilinear;
  const float nh = nearest_scale(H, P, a.p.scale_h), nw = nearest_scale(W, Q, a.p.scale_w);
  const T lh = linear_scale<T>(H, P, a.p.align_corners, a.p.scale_h);
  const T lw = linear_scale<T>(W, Q, a.p.align_corners, a.p.scale_w);
  for (int64_t nc = 0; nc < NC; ++nc) {
    const T* xp = x + nc * H * W;
    for (int64_t oh = 0; oh < P; ++oh)
      for (int64_t ow = 0; ow < Q; ++ow) {
        double v;
        if (!lin) {
          v = double(xp[nearest_source(oh, H, P, nh) * W + nearest_source(ow, W, Q, nw)]);
        } else {
          const Lerp<T> r = linear_source(oh, H, P, lh, a.p.align_corners);
          const Lerp<T> c = linear_source(ow, W, Q, lw, a.p.align_corners);
          const T* r0 = xp + r.i0 * W;
          const T* r1 = xp + r.i1 * W;
          v = double(r.l0) * (double(c.l0) * double(r0[c.i0]) + double(c.l1) * double(r0[c.i1])) +
              double(r.l1) * (double(c.l0) * double(r1[c.i0]) + double(c.l1) * double(r1[c.i1]));
        }
        y[(nc * P + oh) * Q + ow] = T(v);
      }
  }
}

template <class T>
void interpolate_bwd_ref(const InterpolateBwdArgs& a) {
  const int64_t NC = a.dx.size(0) * a.dx.size(1), H = a.dx.size(2), W = a.dx.size(3);
  const int64_t P = a.dy.size(2), Q = a.dy.size(3);
  const T* dy = a.dy.data<T>();
  const bool lin = a.p.mode == InterpMode::bilinear;
  const float nh = nearest_scale(H, P, a.p.scale_h), nw = nearest_scale(W, Q, a.p.scale_w);
  const T lh = linear_scale<T>(H, P, a.p.align_corners, a.p.scale_h);
  const T lw = linear_scale<T>(W, Q, a.p.align_corners, a.p.scale_w);
  std::vector<double> acc(size_t(NC * H * W), 0.0);
  for (int64_t nc = 0; nc < NC; ++nc) {
    double* g = acc.data() + nc * H * W;
    for (int64_t oh = 0; oh < P; ++oh)
      for (int64_t ow = 0; ow < Q; ++ow) {
        const double d = double(dy[(nc * P + oh) * Q + ow]);
        if (!lin) {
          g[nearest_source(oh, H, P, nh) * W + nearest_source(ow, W, Q, nw)] += d;
          continue;
        }
        const Lerp<T> r = linear_source(oh, H, P, lh, a.p.align_corners);
        const Lerp<T> c = linear_source(ow, W, Q, lw, a.p.align_corners);
        g[r.i0 * W + c.i0] += double(r.l0) * double(c.l0) * d;
        g[r.i0 * W + c.i1] += double(r.l0) * double(c.l1) * d;
        g[r.i1 * W + c.i0] += double(r.l1) * double(c.l0) * d;
        g[r.i1 * W + c.i1] += double(r.l1) * double(c.l1) * d;
      }
  }
  T* dx = a.dx.data<T>();
  for (size_t i = 0; i < acc.size(); ++i) dx[i] = T(acc[i]);
}

// ---- cpu.omp ---------------------------------------------------------------------------------

template <class T>
void nearest_fwd_omp(const InterpolateFwdArgs& a) {
  const int64_t NC = a.x.size(0) * a.x.size(1), H = a.x.size(2), W = a.x.size(3);
  const int64_t P = a.y.size(2), Q = a.y.size(3);
  const NearestTables t = nearest_tables(H, W, P, Q, a.p);
  const T* x = a.x.data<T>();
  T* y = a.y.data<T>();
  const int64_t* sw = t.w.data();
#pragma omp parallel for collapse(2) schedule(static) if (NC * P * Q > 16384)
  for (int64_t nc = 0; nc < NC; ++nc)
    for (int64_t oh = 0; oh < P; ++oh) {
      const T* src = x + (nc * H + t.h[size_t(oh)]) * W;
      T* dst = y + (nc * P + oh) * Q;
      for (int64_t ow = 0; ow < Q; ++ow) dst[ow] = src[sw[ow]];
    }
}

template <class T>
void bilinear_fwd_omp(const InterpolateFwdArgs& a) {
  const int64_t NC = a.x.size(0) * a.x.size(1), H = a.x.size(2), W = a.x.size(3);
  const int64_t P = a.y.size(2), Q = a.y.size(3);
  const LinearTables<T> t = linear_tables<T>(H, W, P, Q, a.p);
  const T* x = a.x.data<T>();
  T* y = a.y.data<T>();
#pragma omp parallel if (NC * P * Q > 16384)
  {
    std::vector<T> rows(size_t(2 * Q));
    std::vector<int64_t> i0(static_cast<size_t>(Q)), i1(static_cast<size_t>(Q));
    std::vector<T> l0(static_cast<size_t>(Q)), l1(static_cast<size_t>(Q));
    for (int64_t ow = 0; ow < Q; ++ow) {
      const Lerp<T>& c = t.w[size_t(ow)];
      i0[size_t(ow)] = c.i0, i1[size_t(ow)] = c.i1, l0[size_t(ow)] = c.l0, l1[size_t(ow)] = c.l1;
    }
#pragma omp for schedule(static)
    for (int64_t nc = 0; nc < NC; ++nc) {
      const T* xp = x + nc * H * W;
      int64_t id[2] = {-1, -1};
      // Input row h interpolated along W, from the cache or into the slot not holding `keep`.
      auto row = [&](int64_t h, int64_t keep) -> const T* {
        for (int s = 0; s < 2; ++s)
          if (id[s] == h) return rows.data() + s * Q;
        const int s = id[0] == keep ? 1 : 0;
        T* out = rows.data() + s * Q;
        const T* src = xp + h * W;
        for (int64_t ow = 0; ow < Q; ++ow)
          out[ow] = l0[size_t(ow)] * src[i0[size_t(ow)]] + l1[size_t(ow)] * src[i1[size_t(ow)]];
        id[s] = h;
        return out;
      };
      for (int64_t oh = 0; oh < P; ++oh) {
        const Lerp<T>& r = t.h[size_t(oh)];
        const T* __restrict__ r0 = row(r.i0, r.i1);
        const T* __restrict__ r1 = row(r.i1, r.i0);
        T* __restrict__ dst = y + (nc * P + oh) * Q;
        const T w0 = r.l0, w1 = r.l1;
        for (int64_t ow = 0; ow < Q; ++ow) dst[ow] = w0 * r0[ow] + w1 * r1[ow];
      }
    }
  }
}

template <class T>
void nearest_bwd_omp(const InterpolateBwdArgs& a) {
  const int64_t NC = a.dx.size(0) * a.dx.size(1), H = a.dx.size(2), W = a.dx.size(3);
  const int64_t P = a.dy.size(2), Q = a.dy.size(3);
  const NearestTables t = nearest_tables(H, W, P, Q, a.p);
  const T* dy = a.dy.data<T>();
  T* dx = a.dx.data<T>();
#pragma omp parallel for schedule(static) if (NC * P * Q > 16384)
  for (int64_t nc = 0; nc < NC; ++nc) {
    T* g = dx + nc * H * W;
    for (int64_t i = 0; i < H * W; ++i) g[i] = T(0);
    for (int64_t oh = 0; oh < P; ++oh) {
      T* dst = g + t.h[size_t(oh)] * W;
      const T* src = dy + (nc * P + oh) * Q;
      for (int64_t ow = 0; ow < Q; ++ow) dst[t.w[size_t(ow)]] += src[ow];
    }
  }
}

template <class T>
void bilinear_bwd_omp(const InterpolateBwdArgs& a) {
  const int64_t NC = a.dx.size(0) * a.dx.size(1), H = a.dx.size(2), W = a.dx.size(3);
  const int64_t P = a.dy.size(2), Q = a.dy.size(3);
  const LinearTables<T> t = linear_tables<T>(H, W, P, Q, a.p);
  const T* dy = a.dy.data<T>();
  T* dx = a.dx.data<T>();
#pragma omp parallel if (NC * P * Q > 16384)
  {
    std::vector<T> buf(size_t(H * Q));  // dy blended along H: [H, Q]
#pragma omp for schedule(static)
    for (int64_t nc = 0; nc < NC; ++nc) {
      std::fill(buf.begin(), buf.end(), T(0));
      for (int64_t oh = 0; oh < P; ++oh) {
        const Lerp<T>& r = t.h[size_t(oh)];
        const T* __restrict__ src = dy + (nc * P + oh) * Q;
        T* __restrict__ b0 = buf.data() + r.i0 * Q;
        for (int64_t ow = 0; ow < Q; ++ow) b0[ow] += r.l0 * src[ow];
        T* __restrict__ b1 = buf.data() + r.i1 * Q;
        for (int64_t ow = 0; ow < Q; ++ow) b1[ow] += r.l1 * src[ow];
      }
      T* g = dx + nc * H * W;
      for (int64_t i = 0; i < H * W; ++i) g[i] = T(0);
      for (int64_t h = 0; h < H; ++h) {
        const T* b = buf.data() + h * Q;
        T* gr = g + h * W;
        for (int64_t ow = 0; ow < Q; ++ow) {
          const Lerp<T>& c = t.w[size_t(ow)];
          gr[c.i0] += c.l0 * b[ow];
          gr[c.i1] += c.l1 * b[ow];
        }
      }
    }
  }
}

void interpolate_fwd_cpu_ref(const InterpolateFwdArgs& a) {
  check_interpolate_fwd_args(a);
  dispatch_interp(a.x.dtype(), [&](auto t) { interpolate_fwd_ref<decltype(t)>(a); });
}
void interpolate_bwd_cpu_ref(const InterpolateBwdArgs& a) {
  check_interpolate_bwd_args(a);
  dispatch_interp(a.dy.dtype(), [&](auto t) { interpolate_bwd_ref<decltype(t)>(a); });
}
void interpolate_fwd_cpu_omp(const InterpolateFwdArgs& a) {
  check_interpolate_fwd_args(a);
  dispatch_interp(a.x.dtype(), [&](auto t) {
    using T = decltype(t);
    if (a.p.mode == InterpMode::nearest)
      nearest_fwd_omp<T>(a);
    else
      bilinear_fwd_omp<T>(a);
  });
}
void interpolate_bwd_cpu_omp(const InterpolateBwdArgs& a) {
  check_interpolate_bwd_args(a);
  dispatch_interp(a.dy.dtype(), [&](auto t) {
    using T = decltype(t);
    if (a.p.mode == InterpMode::nearest)
      nearest_bwd_omp<T>(a);
    else
      bilinear_bwd_omp<T>(a);
  });
}

}  // namespace

void interpolate_fwd(const InterpolateFwdArgs& a) {
  AIM_DISPATCH_OP(InterpolateFwdArgs, "interpolate_fwd", a);
}
void interpolate_bwd(const InterpolateBwdArgs& a) {
  AIM_DISPATCH_OP(InterpolateBwdArgs, "interpolate_bwd", a);
}

void register_interpolate_cpu(Registry& r) {
  const std::vector<DType> dt = {DType::f32, DType::f64};
  {
    auto& op = r.op<InterpolateFwdArgs>("interpolate_fwd");
    op.description =
        "2-D nearest (legacy index rule) and bilinear (align_corners) resampling "
        "(F.interpolate)";
    op.add({"cpu.ref", Backend::CPU, Provider::Own, interpolate_fwd_cpu_ref, dt});
    op.add({"cpu.omp", Backend::CPU, Provider::Own, interpolate_fwd_cpu_omp, dt});
    op.set_default(Backend::CPU, "cpu.omp");
    op.set_cost(interpolate_fwd_cost);
    op.make_case = interpolate_cpu::make_interpolate_fwd_case;
    op.set_shape_fields(interpolate_cpu::interpolate_shape_fields());
    op.add_test_shapes(interpolate_cpu::interpolate_shapes());
    op.small_enough_for_simt = interpolate_cpu::interpolate_simt_small;
  }
  {
    auto& op = r.op<InterpolateBwdArgs>("interpolate_bwd");
    op.description = "interpolate gradient: dy distributed back with the forward's weights";
    op.add({"cpu.ref", Backend::CPU, Provider::Own, interpolate_bwd_cpu_ref, dt});
    op.add({"cpu.omp", Backend::CPU, Provider::Own, interpolate_bwd_cpu_omp, dt});
    op.set_default(Backend::CPU, "cpu.omp");
    op.set_cost(interpolate_bwd_cost);
    op.make_case = interpolate_cpu::make_interpolate_bwd_case;
    op.set_shape_fields(interpolate_cpu::interpolate_shape_fields());
    op.add_test_shapes(interpolate_cpu::interpolate_shapes());
    op.small_enough_for_simt = interpolate_cpu::interpolate_simt_small;
  }
}

}  // namespace aim::kernels
