// additive_attention_fwd / _bwd: argument checks, CPU variants and the registration.
// cpu.ref: the oracle. Per batch row, double math in the order of the README's formulas; the
//   parameter gradients summed over (b, t) in order.
// cpu.omp: OpenMP over batch rows, float math (double for f64), tanh through fast_expf (float)
//   so the channel loops vectorise (omp simd). The tanh values of the forward are not kept: the
//   backward recomputes them once into a per-call scratch [B, T, C] and sums the parameter
//   gradients (dbias, dv over b and t) in a second, single-threaded pass in row order, channels
//   innermost: every sum in a fixed order, no reduction crosses threads (deterministic).
// Test cases: additive_attention_cases.cpp.
#include "kernels/additive_attention/additive_attention_cpu.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/additive_attention/additive_attention.h"
#include "kernels/fast_math.h"
#include "kernels/registry.h"

namespace aim::kernels {
namespace {

std::string desc(const Tensor& t) {
  return t.defined()
             ? to_string(t.sizes()) + " " + dtype_name(t.dtype()) + " on " + t.device().str()
             : "undefined";
}

// t must be defined (or may be undefined when optional), contiguous, of `shape`, keys' dtype and
// device.
void check_tensor(const char* op, const char* name, const Tensor& t, const Shape& shape,
                  const Tensor& keys, bool optional) {
  if (optional && !t.defined()) return;
  AIM_CHECK(t.defined() && t.sizes() == shape && t.dtype() == keys.dtype() && t.is_contiguous() &&
                t.device() == keys.device(),
            "[", op, "] ", name, " must be contiguous ", to_string(shape), " ",
            dtype_name(keys.dtype()), " on ", keys.device().str(), ", got ", desc(t));
}

struct Dims {
  int64_t B, T, C, D;
};

Dims check_common(const char* op, const Tensor& keys, const Tensor& query, const Tensor& bias,
                  const Tensor& v, const Tensor& g, const Tensor& values, const Tensor& lengths) {
  AIM_CHECK(keys.defined() && keys.dim() == 3, "[", op, "] keys must be [B, T, C], got ",
            desc(keys));
  AIM_CHECK(is_floating(keys.dtype()), "[", op, "] keys must be f32, f64, f16 or bf16, got ",
            dtype_name(keys.dtype()));
  const int64_t B = keys.size(0), T = keys.size(1), C = keys.size(2);
  check_tensor(op, "keys", keys, {B, T, C}, keys, false);
  AIM_CHECK(values.defined() && values.dim() == 3 && values.size(0) == B && values.size(1) == T,
            "[", op, "] values must be [B = ", B, ", T = ", T, ", D], got ", desc(values));
  const int64_t D = values.size(2);
  check_tensor(op, "values", values, {B, T, D}, keys, false);
  check_tensor(op, "query", query, {B, C}, keys, false);
  check_tensor(op, "bias", bias, {C}, keys, false);
  check_tensor(op, "v", v, {C}, keys, false);
  check_tensor(op, "g", g, {1}, keys, false);
  if (lengths.defined())
    AIM_CHECK(lengths.sizes() == Shape{B} && lengths.dtype() == DType::i32 &&
                  lengths.is_contiguous() && lengths.device() == keys.device(),
              "[", op, "] lengths must be contiguous [", B, "] i32 on ", keys.device().str(),
              ", got ", desc(lengths));
  if (lengths.defined() && lengths.device().is_cpu()) {
    const int32_t* L = lengths.data<int32_t>();
    for (int64_t b = 0; b < B; ++b)
      AIM_CHECK(L[b] >= 0 && L[b] <= T, "[", op, "] lengths[", b, "] = ", L[b],
                " out of [0, T = ", T, "]");
  }
  return {B, T, C, D};
}

}  // namespace

void check_additive_attention_fwd_args(const AdditiveAttentionFwdArgs& a) {
  const char* op = "additive_attention_fwd";
  const Dims d = check_common(op, a.keys, a.query, a.bias, a.v, a.g, a.values, a.lengths);
  check_tensor(op, "align", a.align, {d.B, d.T}, a.keys, false);
  check_tensor(op, "context", a.context, {d.B, d.D}, a.keys, false);
}

void check_additive_attention_bwd_args(const AdditiveAttentionBwdArgs& a) {
  const char* op = "additive_attention_bwd";
  const Dims d = check_common(op, a.keys, a.query, a.bias, a.v, a.g, a.values, a.lengths);
  check_tensor(op, "align", a.align, {d.B, d.T}, a.keys, false);
  check_tensor(op, "dcontext", a.dcontext, {d.B, d.D}, a.keys, false);
  check_tensor(op, "dalign", a.dalign, {d.B, d.T}, a.keys, true);
  check_tensor(op, "dkeys", a.dkeys, {d.B, d.T, d.C}, a.keys, true);
  check_tensor(op, "dquery", a.dquery, {d.B, d.C}, a.keys, true);
  check_tensor(op, "dvalues", a.dvalues, {d.B, d.T, d.D}, a.keys, true);
  check_tensor(op, "dbias", a.dbias, {d.C}, a.keys, true);
  check_tensor(op, "dv", a.dv, {d.C}, a.keys, true);
  check_tensor(op, "dg", a.dg, {1}, a.keys, true);
}

namespace {

template <class T>
const T* ptr(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}
template <class T>
T* mut(const Tensor& t) {
  return t.defined() ? const_cast<T*>(t.data<T>()) : nullptr;
}

int64_t length_of(const Tensor& lengths, int64_t b, int64_t T) {
  return lengths.defined() ? int64_t(lengths.data<int32_t>()[b]) : T;
}

// ---- cpu.ref ------------------------------------------------------------------------------------

template <class T>
void fwd_ref(const AdditiveAttentionFwdArgs& a) {
  const int64_t B = a.keys.size(0), Tn = a.keys.size(1), C = a.keys.size(2), D = a.values.size(2);
  const T *k = ptr<T>(a.keys), *q = ptr<T>(a.query), *bias = ptr<T>(a.bias), *v = ptr<T>(a.v),
          *val = ptr<T>(a.values);
  T *al = mut<T>(a.align), *ctx = mut<T>(a.context);
  double vv = 0;
  for (int64_t c = 0; c < C; ++c) vv += double(v[c]) * double(v[c]);
  const double s = double(ptr<T>(a.g)[0]) / std::sqrt(vv);
  std::vector<double> e(static_cast<size_t>(Tn));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t L = length_of(a.lengths, b, Tn);
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t t = 0; t < L; ++t) {
      double u = 0;
      for (int64_t c = 0; c < C; ++c)
        u += double(v[c]) *
             std::tanh(double(k[(b * Tn + t) * C + c]) + double(q[b * C + c]) + double(bias[c]));
      e[size_t(t)] = s * u;
      m = std::max(m, e[size_t(t)]);
    }
    double z = 0;
    for (int64_t t = 0; t < L; ++t) z += std::exp(e[size_t(t)] - m);
    for (int64_t t = 0; t < Tn; ++t) e[size_t(t)] = t < L ? std::exp(e[size_t(t)] - m) / z : 0.0;
    for (int64_t t = 0; t < Tn; ++t) al[b * Tn + t] = T(e[size_t(t)]);
    for (int64_t d = 0; d < D; ++d) {
      double sum = 0;
      for (int64_t t = 0; t < L; ++t) sum += e[size_t(t)] * double(val[(b * Tn + t) * D + d]);
      ctx[b * D + d] = T(sum);
    }
  }
}

template <class T>
void bwd_ref(const AdditiveAttentionBwdArgs& a) {
  const int64_t B = a.keys.size(0), Tn = a.keys.size(1), C = a.keys.size(2), D = a.values.size(2);
  const T *k = ptr<T>(a.keys), *q = ptr<T>(a.query), *bias = ptr<T>(a.bias), *v = ptr<T>(a.v),
          *val = ptr<T>(a.values), *al = ptr<T>(a.align), *dctx = ptr<T>(a.dcontext),
          *dal = ptr<T>(a.dalign);
  T *dk = mut<T>(a.dkeys), *dq = mut<T>(a.dquery), *dval = mut<T>(a.dvalues);
  const double g = double(ptr<T>(a.g)[0]);
  double vv = 0;
  for (int64_t c = 0; c < C; ++c) vv += double(v[c]) * double(v[c]);
  const double n = std::sqrt(vv), s = g / n;
  std::vector<double> dbias(static_cast<size_t>(C), 0.0), dvh(static_cast<size_t>(C), 0.0),
      da(static_cast<size_t>(Tn));
  double dg = 0, deu = 0;  // sum de * u, u = v . h
  for (int64_t b = 0; b < B; ++b) {
    const int64_t L = length_of(a.lengths, b, Tn);
    double sum_ada = 0;
    for (int64_t t = 0; t < Tn; ++t) {
      double x = dal ? double(dal[b * Tn + t]) : 0.0;
      for (int64_t d = 0; d < D; ++d)
        x += double(dctx[b * D + d]) * double(val[(b * Tn + t) * D + d]);
      da[size_t(t)] = x;
      if (t < L) sum_ada += double(al[b * Tn + t]) * x;
    }
    if (dval)
      for (int64_t t = 0; t < Tn; ++t)
        for (int64_t d = 0; d < D; ++d)
          dval[(b * Tn + t) * D + d] =
              T(t < L ? double(al[b * Tn + t]) * double(dctx[b * D + d]) : 0.0);
    std::vector<double> dqb(static_cast<size_t>(C), 0.0);
    for (int64_t t = 0; t < Tn; ++t) {
      const double de = t < L ? double(al[b * Tn + t]) * (da[size_t(t)] - sum_ada) : 0.0;
      double u = 0;
      for (int64_t c = 0; c < C; ++c) {
        const double h =
            std::tanh(double(k[(b * Tn + t) * C + c]) + double(q[b * C + c]) + double(bias[c]));
        u += double(v[c]) * h;
        const double dh = de * s * double(v[c]) * (1 - h * h);
        if (dk) dk[(b * Tn + t) * C + c] = T(dh);
        dqb[size_t(c)] += dh;
        dbias[size_t(c)] += dh;
        dvh[size_t(c)] += de * h;
      }
      dg += de * u / n;
      deu += de * u;
    }
    if (dq)
      for (int64_t c = 0; c < C; ++c) dq[b * C + c] = T(dqb[size_t(c)]);
  }
  // e = g (v . h) / n: de/dv_c = g (h_c / n - (v . h) v_c / n^3).
  if (T* p = mut<T>(a.dbias))
    for (int64_t c = 0; c < C; ++c) p[c] = T(double(p[c]) + dbias[size_t(c)]);
  if (T* p = mut<T>(a.dv))
    for (int64_t c = 0; c < C; ++c)
      p[c] = T(double(p[c]) + s * dvh[size_t(c)] - g * deu * double(v[c]) / (n * n * n));
  if (T* p = mut<T>(a.dg)) p[0] = T(double(p[0]) + dg);
}

// ---- cpu.omp ------------------------------------------------------------------------------------

// tanh(v) = 2 sigmoid(2v) - 1 on the branch-free fast_expf (as kernels/rnn's cpu.fast): the
// channel loops vectorise; libm's tanhf made the attention the slowest op of a GNMT step.
template <class A>
inline A tanh_fast(A v) {
  if constexpr (std::is_same_v<A, float>)
    return 2.0f / (1.0f + fast_expf(-2.0f * v)) - 1.0f;
  else
    return std::tanh(v);
}

template <class T>
void fwd_omp(const AdditiveAttentionFwdArgs& a) {
  using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const int64_t B = a.keys.size(0), Tn = a.keys.size(1), C = a.keys.size(2), D = a.values.size(2);
  const T *k = ptr<T>(a.keys), *q = ptr<T>(a.query), *bias = ptr<T>(a.bias), *v = ptr<T>(a.v),
          *val = ptr<T>(a.values);
  T *al = mut<T>(a.align), *ctx = mut<T>(a.context);
  std::vector<A> vf(static_cast<size_t>(C)), bf(static_cast<size_t>(C));
  A vv = 0;
  for (int64_t c = 0; c < C; ++c) {
    vf[size_t(c)] = A(v[c]);
    bf[size_t(c)] = A(bias[c]);
    vv += vf[size_t(c)] * vf[size_t(c)];
  }
  const A s = A(ptr<T>(a.g)[0]) / std::sqrt(vv);
#pragma omp parallel if (B * Tn * C > 16384)
  {
    std::vector<A> e(static_cast<size_t>(Tn)), qb(static_cast<size_t>(C)),
        acc(static_cast<size_t>(D));
#pragma omp for schedule(static)
    for (int64_t b = 0; b < B; ++b) {
      const int64_t L = length_of(a.lengths, b, Tn);
      for (int64_t c = 0; c < C; ++c) qb[size_t(c)] = A(q[b * C + c]) + bf[size_t(c)];
      A m = -std::numeric_limits<A>::infinity();
      for (int64_t t = 0; t < L; ++t) {
        const T* kr = k + (b * Tn + t) * C;
        A u = 0;
        const A* vp = vf.data();
        const A* qp = qb.data();
#pragma omp simd reduction(+ : u)
        for (int64_t c = 0; c < C; ++c) u += vp[c] * tanh_fast(A(kr[c]) + qp[c]);
        e[size_t(t)] = s * u;
        m = std::max(m, e[size_t(t)]);
      }
      A z = 0;
      for (int64_t t = 0; t < L; ++t) z += (e[size_t(t)] = std::exp(e[size_t(t)] - m));
      std::fill(acc.begin(), acc.end(), A(0));
      for (int64_t t = 0; t < Tn; ++t) {
        const A p = t < L ? e[size_t(t)] / z : A(0);
        al[b * Tn + t] = T(p);
        if (t >= L) continue;
        const T* vr = val + (b * Tn + t) * D;
        for (int64_t d = 0; d < D; ++d) acc[size_t(d)] += p * A(vr[d]);
      }
      for (int64_t d = 0; d < D; ++d) ctx[b * D + d] = T(acc[size_t(d)]);
    }
  }
}

template <class T>
void bwd_omp(const AdditiveAttentionBwdArgs& a) {
  using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const int64_t B = a.keys.size(0), Tn = a.keys.size(1), C = a.keys.size(2), D = a.values.size(2);
  const T *k = ptr<T>(a.keys), *q = ptr<T>(a.query), *bias = ptr<T>(a.bias), *v = ptr<T>(a.v),
          *val = ptr<T>(a.values), *al = ptr<T>(a.align), *dctx = ptr<T>(a.dcontext),
          *dal = ptr<T>(a.dalign);
  T *dk = mut<T>(a.dkeys), *dq = mut<T>(a.dquery), *dval = mut<T>(a.dvalues);
  const bool params = a.dbias.defined() || a.dv.defined() || a.dg.defined();
  const A g = A(ptr<T>(a.g)[0]);
  std::vector<A> vf(static_cast<size_t>(C)), bf(static_cast<size_t>(C));
  A vv = 0;
  for (int64_t c = 0; c < C; ++c) {
    vf[size_t(c)] = A(v[c]);
    bf[size_t(c)] = A(bias[c]);
    vv += vf[size_t(c)] * vf[size_t(c)];
  }
  const A n = std::sqrt(vv), s = g / n;
  // Kept for the parameter pass: h and de per (b, t), u = v . h per (b, t).
  std::vector<A> hs(params ? size_t(B * Tn * C) : 0), des(size_t(B * Tn)), us(size_t(B * Tn));
#pragma omp parallel if (B * Tn * C > 16384)
  {
    std::vector<A> da(static_cast<size_t>(Tn)), qb(static_cast<size_t>(C)),
        dqb(static_cast<size_t>(C)), h(static_cast<size_t>(C));
#pragma omp for schedule(static)
    for (int64_t b = 0; b < B; ++b) {
      const int64_t L = length_of(a.lengths, b, Tn);
      const T* dc = dctx + b * D;
      A sum_ada = 0;
      for (int64_t t = 0; t < Tn; ++t) {
        A x = 0;
        const T* vr = val + (b * Tn + t) * D;
#pragma omp simd reduction(+ : x)
        for (int64_t d = 0; d < D; ++d) x += A(dc[d]) * A(vr[d]);
        da[size_t(t)] = x + (dal ? A(dal[b * Tn + t]) : A(0));
        if (t < L) sum_ada += A(al[b * Tn + t]) * da[size_t(t)];
      }
      if (dval)
        for (int64_t t = 0; t < Tn; ++t) {
          const A p = t < L ? A(al[b * Tn + t]) : A(0);
          T* dr = dval + (b * Tn + t) * D;
          for (int64_t d = 0; d < D; ++d) dr[d] = T(p * A(dc[d]));
        }
      for (int64_t c = 0; c < C; ++c) {
        qb[size_t(c)] = A(q[b * C + c]) + bf[size_t(c)];
        dqb[size_t(c)] = 0;
      }
      for (int64_t t = 0; t < Tn; ++t) {
        const int64_t bt = b * Tn + t;
        const A de = t < L ? A(al[bt]) * (da[size_t(t)] - sum_ada) : A(0);
        const T* kr = k + bt * C;
        A u = 0;
        A* hr = params ? hs.data() + bt * C : h.data();
        const A* vp = vf.data();
        const A* qp = qb.data();
#pragma omp simd reduction(+ : u)
        for (int64_t c = 0; c < C; ++c) {
          hr[c] = tanh_fast(A(kr[c]) + qp[c]);
          u += vp[c] * hr[c];
        }
        A* dqp = dqb.data();
        const A sde = de * s;
        if (dk) {
          T* dkr = dk + bt * C;
#pragma omp simd
          for (int64_t c = 0; c < C; ++c) {
            const A dh = sde * vp[c] * (A(1) - hr[c] * hr[c]);
            dkr[c] = T(dh);
            dqp[c] += dh;
          }
        } else {
#pragma omp simd
          for (int64_t c = 0; c < C; ++c) dqp[c] += sde * vp[c] * (A(1) - hr[c] * hr[c]);
        }
        des[size_t(bt)] = de;
        us[size_t(bt)] = u;
      }
      if (dq)
        for (int64_t c = 0; c < C; ++c) dq[b * C + c] = T(dqb[size_t(c)]);
    }
  }
  if (!params) return;
  A deu = 0;
  for (int64_t i = 0; i < B * Tn; ++i) deu += des[size_t(i)] * us[size_t(i)];
  T *dbias = mut<T>(a.dbias), *dv = mut<T>(a.dv);
  // Rows of h in order, channels innermost (contiguous, vectorised): a fixed summation order.
  std::vector<A> sb(static_cast<size_t>(C), A(0)), sh(static_cast<size_t>(C), A(0));
  A* sbp = sb.data();
  A* shp = sh.data();
  for (int64_t i = 0; i < B * Tn; ++i) {
    const A de = des[size_t(i)];
    if (de == A(0)) continue;  // masked steps
    const A* h = hs.data() + i * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) {
      sbp[c] += de * (A(1) - h[c] * h[c]);
      shp[c] += de * h[c];
    }
  }
  for (int64_t c = 0; c < C; ++c) {
    if (dbias) dbias[c] = T(A(dbias[c]) + s * vf[size_t(c)] * sb[size_t(c)]);
    if (dv) dv[c] = T(A(dv[c]) + s * sh[size_t(c)] - g * deu * vf[size_t(c)] / (n * n * n));
  }
  if (T* p = mut<T>(a.dg)) p[0] = T(A(p[0]) + deu / n);
}

void bwd_cpu_ref(const AdditiveAttentionBwdArgs& a) {
  check_additive_attention_bwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.keys.dtype(), T, { bwd_ref<T>(a); });
}
void fwd_cpu_omp(const AdditiveAttentionFwdArgs& a) {
  check_additive_attention_fwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.keys.dtype(), T, { fwd_omp<T>(a); });
}
void bwd_cpu_omp(const AdditiveAttentionBwdArgs& a) {
  check_additive_attention_bwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.keys.dtype(), T, { bwd_omp<T>(a); });
}

std::vector<DType> float_dtypes() { return {DType::f32, DType::f64, DType::f16, DType::bf16}; }

}  // namespace

void additive_attention_cpu::fwd_cpu_ref(const AdditiveAttentionFwdArgs& a) {
  check_additive_attention_fwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.keys.dtype(), T, { fwd_ref<T>(a); });
}

void additive_attention_fwd(const AdditiveAttentionFwdArgs& a) {
  AIM_DISPATCH_OP(AdditiveAttentionFwdArgs, "additive_attention_fwd", a);
}
void additive_attention_bwd(const AdditiveAttentionBwdArgs& a) {
  AIM_DISPATCH_OP(AdditiveAttentionBwdArgs, "additive_attention_bwd", a);
}

void register_additive_attention_cpu(Registry& r) {
  namespace ac = additive_attention_cpu;
  auto& f = r.op<AdditiveAttentionFwdArgs>("additive_attention_fwd");
  f.description =
      "normalised Bahdanau attention of one query over a memory: align [B, T], context [B, D]";
  f.add({"cpu.ref", Backend::CPU, Provider::Own, ac::fwd_cpu_ref, float_dtypes()});
  f.add({"cpu.omp", Backend::CPU, Provider::Own, fwd_cpu_omp, float_dtypes()});
  f.set_default(Backend::CPU, "cpu.omp");
  f.set_cost(additive_attention_fwd_cost);
  f.make_case = ac::make_fwd_case;
  f.set_shape_fields(ac::shape_fields());
  f.add_test_shapes(ac::test_shapes());
  f.tolerance = ac::tolerance;
  f.small_enough_for_simt = ac::simt_small;

  auto& b = r.op<AdditiveAttentionBwdArgs>("additive_attention_bwd");
  b.description = "gradient of additive_attention: dkeys, dquery, dvalues (=); dbias, dv, dg (+=)";
  b.add({"cpu.ref", Backend::CPU, Provider::Own, bwd_cpu_ref, float_dtypes()});
  b.add({"cpu.omp", Backend::CPU, Provider::Own, bwd_cpu_omp, float_dtypes()});
  b.set_default(Backend::CPU, "cpu.omp");
  b.set_cost(additive_attention_bwd_cost);
  b.make_case = ac::make_bwd_case;
  b.set_shape_fields(ac::shape_fields());
  b.add_test_shapes(ac::test_shapes());
  b.tolerance = ac::tolerance;
  b.small_enough_for_simt = ac::simt_small;
}

}  // namespace aim::kernels
