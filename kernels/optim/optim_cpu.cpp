// cpu.ref: one plain loop, every value widened to double, the update rule written once per op
// (templated on the compute type). Obviously right.
// cpu.omp: the same rule computed in the accumulator type (f32 for f32/f16/bf16 parameters, f64
// for f64), OpenMP over elements when the tensor is large; one read and write of each tensor.
// adam_update cpu.avx512 (f32/f16/bf16, the default on AVX-512 CPUs): cpu.omp's rule on 16 lanes.
// Test cases: optim_cases.cpp.
#include "kernels/optim/optim_cpu.h"

#include <cmath>

#include "kernels/fast_math_avx512.h"
#include "kernels/matmul/gemm_avx512.h"
#include "kernels/optim/optim.h"
#include "kernels/registry.h"

namespace aim::kernels {
namespace {

template <class A, class T>
inline A load(T v) {
  if constexpr (std::is_same_v<T, double>)
    return A(v);
  else
    return A(static_cast<float>(v));
}
template <class T, class A>
inline T store(A v) {
  if constexpr (std::is_same_v<T, double>)
    return T(v);
  else if constexpr (std::is_same_v<T, float>)
    return static_cast<float>(v);
  else
    return T(static_cast<float>(v));
}

std::string check_common(const char* op, const Tensor& param, const Tensor& grad,
                         std::initializer_list<std::pair<const char*, const Tensor*>> states) {
  if (!is_floating(param.dtype()))
    return str("[", op, "] param must be floating, got ", dtype_name(param.dtype()));
  if (!param.is_contiguous() || !grad.is_contiguous())
    return str("[", op, "] param and grad must be contiguous");
  if (grad.numel() != param.numel() || grad.dtype() != param.dtype() ||
      grad.device() != param.device())
    return str("[", op, "] grad ", to_string(grad.sizes()), " ", dtype_name(grad.dtype()), " on ",
               grad.device().str(), " does not match param ", to_string(param.sizes()), " ",
               dtype_name(param.dtype()), " on ", param.device().str());
  const DType sd = optim_state_dtype(param.dtype());
  for (const auto& [name, t] : states) {
    if (!t->defined()) return str("[", op, "] state ", name, " is undefined");
    if (t->numel() != param.numel() || t->dtype() != sd || t->device() != param.device() ||
        !t->is_contiguous())
      return str("[", op, "] state ", name, " ", to_string(t->sizes()), " ", dtype_name(t->dtype()),
                 " on ", t->device().str(), " must be contiguous with param's numel ",
                 param.numel(), ", dtype ", dtype_name(sd), ", device ", param.device().str());
  }
  return "";
}

// Capturable updates: the args with lr (and step) taken from `hyper` when it is defined (a CPU
// tensor here, f64 or f32: the reference runs on f32 copies of the case).
double hyper_at(const Tensor& h, int i) {
  return h.dtype() == DType::f64 ? static_cast<const double*>(h.raw_data())[i]
                                 : double(static_cast<const float*>(h.raw_data())[i]);
}
template <class A, class = void>
struct HasLr : std::false_type {};
template <class A>
struct HasLr<A, std::void_t<decltype(std::declval<A&>().lr)>> : std::true_type {};
template <class A, class = void>
struct HasStep : std::false_type {};  // Adam, Adagrad, LAMB stage 1
template <class A>
struct HasStep<A, std::void_t<decltype(std::declval<A&>().step)>> : std::true_type {};

template <class Args>
Args resolved(const Args& a) {
  Args r = a;
  if (!a.hyper.defined()) return r;
  if constexpr (HasLr<Args>::value) r.lr = hyper_at(a.hyper, 0);
  if constexpr (HasStep<Args>::value) r.step = int64_t(std::llround(hyper_at(a.hyper, 1)));
  r.hyper = Tensor();
  return r;
}

std::string check_hyper(const char* op, const Tensor& h, const Tensor& param) {
  if (!h.defined()) return "";
  if (h.numel() != 2 || !h.is_contiguous() || h.device() != param.device() ||
      (h.dtype() != DType::f64 && h.dtype() != DType::f32))
    return str("[", op, "] hyper must be 2 contiguous f64 values {lr, step} on ",
               param.device().str(), ", got ", to_string(h.sizes()), " ", dtype_name(h.dtype()),
               " on ", h.device().str());
  return "";
}

// ---- the update rules, per element, in compute type A ----------------------------------------

// Calls f(std::bool_constant<b>...) for runtime flags b...: each combination gets its own loop
// with the conditions resolved at compile time.
template <class F>
void with_flags(F&& f) {
  f();
}
template <class F, class... B>
void with_flags(F&& f, bool b0, B... rest) {
  if (b0)
    with_flags([&](auto... c) { f(std::true_type{}, c...); }, rest...);
  else
    with_flags([&](auto... c) { f(std::false_type{}, c...); }, rest...);
}

// The options (weight decay, momentum, first step, Nesterov) are compile-time flags of the loop:
// tested per element (the momentum buffer's loads and stores conditional) they kept g++ from
// vectorising it (momentum + weight decay on a 151 MB tensor, two threads: 29 -> 16 ms).
template <class A, class P, class S, bool kParallel>
void sgd_loop(const SgdUpdateArgs& args) {
  const SgdUpdateArgs a = resolved(args);
  P* p = static_cast<P*>(a.param.raw_data());
  const P* g = static_cast<const P*>(a.grad.raw_data());
  S* buf = a.momentum_buf.defined() ? static_cast<S*>(a.momentum_buf.raw_data()) : nullptr;
  const int64_t n = a.param.numel();
  const A lr = A(a.lr), mom = A(a.momentum), damp1 = A(1.0 - a.dampening), wd = A(a.weight_decay);
  with_flags(
      [=](auto has_wd, auto has_buf, auto first, auto nesterov) {
        P* const p_ = p;  // locals, not closure members: g++ vectorises only then
        const P* const g_ = g;
        S* const buf_ = buf;
#pragma omp parallel for simd schedule(static) if (kParallel && n > (int64_t(1) << 15))
        for (int64_t i = 0; i < n; ++i) {
          const A pi = load<A>(p_[i]);
          A gi = load<A>(g_[i]);
          if constexpr (has_wd) gi += wd * pi;
          if constexpr (has_buf) {
            A b;
            if constexpr (first)
              b = gi;
            else
              b = mom * load<A>(buf_[i]) + damp1 * gi;
            buf_[i] = store<S>(b);
            if constexpr (nesterov)
              gi = gi + mom * b;
            else
              gi = b;
          }
          p_[i] = store<P>(pi - lr * gi);
        }
      },
      wd != A(0), buf != nullptr, a.first_step, a.nesterov);
}

template <class A, class P, class S, bool kParallel>
void adam_loop(const AdamUpdateArgs& args) {
  const AdamUpdateArgs a = resolved(args);
  P* p = static_cast<P*>(a.param.raw_data());
  const P* g = static_cast<const P*>(a.grad.raw_data());
  S* m = static_cast<S*>(a.exp_avg.raw_data());
  S* v = static_cast<S*>(a.exp_avg_sq.raw_data());
  const int64_t n = a.param.numel();
  const AdamScalars sc = adam_scalars(a.lr, double(a.step), a.beta1, a.beta2, a.weight_decay);
  const A b1c = A(1.0 - a.beta1), b2 = A(a.beta2), b2c = A(1.0 - a.beta2), eps = A(a.eps),
          wd = A(a.weight_decay), decay = A(sc.decay), step_size = A(sc.step_size),
          bc2_sqrt = A(sc.bc2_sqrt);
  const bool decoupled = a.decoupled;
#pragma omp parallel for simd schedule(static) if (kParallel && n > (int64_t(1) << 14))
  for (int64_t i = 0; i < n; ++i) {
    A pi = load<A>(p[i]);
    A gi = load<A>(g[i]);
    if (decoupled)
      pi *= decay;
    else if (wd != A(0))
      gi += wd * pi;
    A mi = load<A>(m[i]), vi = load<A>(v[i]);
    adam_moments(gi, mi, vi, b1c, b2, b2c);
    m[i] = store<S>(mi);
    v[i] = store<S>(vi);
    p[i] = store<P>(pi - adam_direction(mi, vi, step_size, bc2_sqrt, eps));
  }
}

// ---- adam_update cpu.avx512 -----------------------------------------------------------------
// cpu.omp's rule on 16 lanes (f32 compute, f32 state; f16/bf16 parameters converted in registers).
// GCC does not vectorise cpu.omp's loop (the load/store conversions), which left the BERT-base
// step's Adam at ~20 GB/s; this one streams at the memory's rate.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,fma")

template <class P>
void adam_avx512_loop(const AdamUpdateArgs& args) {
  const AdamUpdateArgs a = resolved(args);
  P* p = static_cast<P*>(a.param.raw_data());
  const P* g = static_cast<const P*>(a.grad.raw_data());
  float* m = static_cast<float*>(a.exp_avg.raw_data());
  float* v = static_cast<float*>(a.exp_avg_sq.raw_data());
  const int64_t n = a.param.numel();
  const AdamScalars sc = adam_scalars(a.lr, double(a.step), a.beta1, a.beta2, a.weight_decay);
  const __m512 b1c = _mm512_set1_ps(float(1.0 - a.beta1)), b2 = _mm512_set1_ps(float(a.beta2)),
               b2c = _mm512_set1_ps(float(1.0 - a.beta2)), eps = _mm512_set1_ps(float(a.eps)),
               wd = _mm512_set1_ps(float(a.weight_decay)), decay = _mm512_set1_ps(float(sc.decay)),
               step_size = _mm512_set1_ps(float(sc.step_size)),
               bc2_sqrt = _mm512_set1_ps(float(sc.bc2_sqrt));
  const bool decoupled = a.decoupled, coupled_wd = !a.decoupled && a.weight_decay != 0;
  const int64_t blocks = (n + 15) / 16;
#pragma omp parallel for schedule(static) if (n > (int64_t(1) << 14))
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t i = 16 * blk;
    const __mmask16 k = avx512::lanes_below(i, n);
    __m512 pi = avx512::load16(p + i, k), gi = avx512::load16(g + i, k);
    if (decoupled)
      pi = _mm512_mul_ps(pi, decay);
    else if (coupled_wd)
      gi = _mm512_fmadd_ps(wd, pi, gi);
    // adam_moments: m += (1 - b1)(g - m); v = b2 v + (1 - b2) g g.
    const __m512 mi = _mm512_fmadd_ps(b1c, _mm512_sub_ps(gi, _mm512_maskz_loadu_ps(k, m + i)),
                                      _mm512_maskz_loadu_ps(k, m + i));
    const __m512 vi = _mm512_fmadd_ps(b2, _mm512_maskz_loadu_ps(k, v + i),
                                      _mm512_mul_ps(_mm512_mul_ps(b2c, gi), gi));
    _mm512_mask_storeu_ps(m + i, k, mi);
    _mm512_mask_storeu_ps(v + i, k, vi);
    // adam_direction: step_size m / (sqrt(v) / bc2_sqrt + eps).
    const __m512 den = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(vi), bc2_sqrt), eps);
    avx512::store16(p + i, k, _mm512_sub_ps(pi, _mm512_div_ps(_mm512_mul_ps(step_size, mi), den)));
  }
}

#pragma GCC pop_options
#pragma GCC diagnostic pop

template <class A, class P, class S, bool kParallel>
void adagrad_loop(const AdagradUpdateArgs& args) {
  const AdagradUpdateArgs a = resolved(args);
  P* p = static_cast<P*>(a.param.raw_data());
  const P* g = static_cast<const P*>(a.grad.raw_data());
  S* s = static_cast<S*>(a.sum.raw_data());
  const int64_t n = a.param.numel();
  const A clr = A(adagrad_lr(a.lr, double(a.step), a.lr_decay)), wd = A(a.weight_decay),
          eps = A(a.eps);
#pragma omp parallel for simd schedule(static) if (kParallel && n > (int64_t(1) << 15))
  for (int64_t i = 0; i < n; ++i) {
    const A pi = load<A>(p[i]);
    A gi = load<A>(g[i]);
    if (wd != A(0)) gi += wd * pi;
    const A si = load<A>(s[i]) + gi * gi;
    s[i] = store<S>(si);
    p[i] = store<P>(pi - clr * gi / (std::sqrt(si) + eps));
  }
}

template <class A, class P, bool kParallel>
void unscale_loop(const AmpUnscaleArgs& a) {
  P* g = static_cast<P*>(a.grad.raw_data());
  const int64_t n = a.grad.numel();
  const A s = A(a.inv_scale);
  int bad = 0;
#pragma omp parallel for simd schedule(static) \
    reduction(|                                \
              : bad) if (kParallel && n > (int64_t(1) << 15))
  for (int64_t i = 0; i < n; ++i) {
    const A v = load<A>(g[i]);
    bad |= !std::isfinite(v);
    g[i] = store<P>(v * s);
  }
  if (bad) {
    if (a.found_inf.dtype() == DType::f64)
      static_cast<double*>(a.found_inf.raw_data())[0] = 1.0;
    else
      static_cast<float*>(a.found_inf.raw_data())[0] = 1.0f;
  }
}

// State element type for a parameter element type.
template <class P>
using StateT = std::conditional_t<std::is_same_v<P, double>, double, float>;
template <class P>
using AccT = std::conditional_t<std::is_same_v<P, double>, double, float>;

void sgd_cpu_ref(const SgdUpdateArgs& a) {
  if (auto why = check_sgd_update(a); !why.empty()) AIM_FAIL(why);
  AIM_DISPATCH_FLOAT_TYPES(a.param.dtype(), P, { sgd_loop<double, P, StateT<P>, false>(a); });
}
void sgd_cpu_omp(const SgdUpdateArgs& a) {
  if (auto why = check_sgd_update(a); !why.empty()) AIM_FAIL(why);
  AIM_DISPATCH_FLOAT_TYPES(a.param.dtype(), P, { sgd_loop<AccT<P>, P, StateT<P>, true>(a); });
}
void adam_cpu_ref(const AdamUpdateArgs& a) {
  if (auto why = check_adam_update(a); !why.empty()) AIM_FAIL(why);
  AIM_DISPATCH_FLOAT_TYPES(a.param.dtype(), P, { adam_loop<double, P, StateT<P>, false>(a); });
}
std::string adam_avx512_supports(const AdamUpdateArgs& a) {
  if (!cpu_has_avx512()) return "CPU lacks AVX-512";
  return check_adam_update(a);
}
void adam_cpu_avx512(const AdamUpdateArgs& a) {
  if (auto why = adam_avx512_supports(a); !why.empty()) AIM_FAIL(why);
  switch (a.param.dtype()) {
    case DType::f32:
      return adam_avx512_loop<float>(a);
    case DType::f16:
      return adam_avx512_loop<Half>(a);
    case DType::bf16:
      return adam_avx512_loop<BFloat16>(a);
    default:
      AIM_FAIL("[adam_update] cpu.avx512 takes f32, f16, bf16, got ", dtype_name(a.param.dtype()));
  }
}
void adam_cpu_omp(const AdamUpdateArgs& a) {
  if (auto why = check_adam_update(a); !why.empty()) AIM_FAIL(why);
  AIM_DISPATCH_FLOAT_TYPES(a.param.dtype(), P, { adam_loop<AccT<P>, P, StateT<P>, true>(a); });
}
void adagrad_cpu_ref(const AdagradUpdateArgs& a) {
  if (auto why = check_adagrad_update(a); !why.empty()) AIM_FAIL(why);
  AIM_DISPATCH_FLOAT_TYPES(a.param.dtype(), P, { adagrad_loop<double, P, StateT<P>, false>(a); });
}
void unscale_cpu_ref(const AmpUnscaleArgs& a) {
  if (auto why = check_amp_unscale(a); !why.empty()) AIM_FAIL(why);
  AIM_DISPATCH_FLOAT_TYPES(a.grad.dtype(), P, { unscale_loop<double, P, false>(a); });
}
void unscale_cpu_omp(const AmpUnscaleArgs& a) {
  if (auto why = check_amp_unscale(a); !why.empty()) AIM_FAIL(why);
  AIM_DISPATCH_FLOAT_TYPES(a.grad.dtype(), P, { unscale_loop<AccT<P>, P, true>(a); });
}
void adagrad_cpu_omp(const AdagradUpdateArgs& a) {
  if (auto why = check_adagrad_update(a); !why.empty()) AIM_FAIL(why);
  AIM_DISPATCH_FLOAT_TYPES(a.param.dtype(), P, { adagrad_loop<AccT<P>, P, StateT<P>, true>(a); });
}

// FTRL: one loop in double for every dtype (cpu.ref is also the CPU default: the host loop it
// replaced read every value as double too).
template <class P, class S>
void ftrl_loop(const FtrlUpdateArgs& args) {
  const FtrlUpdateArgs a = resolved(args);
  P* p = static_cast<P*>(a.param.raw_data());
  const P* g = static_cast<const P*>(a.grad.raw_data());
  S* n = static_cast<S*>(a.accum.raw_data());
  S* z = static_cast<S*>(a.linear.raw_data());
  const int64_t N = a.param.numel();
  const double mp = -a.lr_power;
  for (int64_t i = 0; i < N; ++i) {
    double w = load<double>(p[i]), ni = load<double>(n[i]), zi = load<double>(z[i]);
    ftrl_element(w, load<double>(g[i]), ni, zi, a.lr, mp, a.l1, a.l2);
    p[i] = store<P>(w);
    n[i] = store<S>(ni);
    z[i] = store<S>(zi);
  }
}

void ftrl_cpu_ref(const FtrlUpdateArgs& a) {
  if (auto why = check_ftrl_update(a); !why.empty()) AIM_FAIL(why);
  AIM_DISPATCH_FLOAT_TYPES(a.param.dtype(), P, { ftrl_loop<P, StateT<P>>(a); });
}

// cpu.omp: ftrl_step (optim.h) as cpu.ref, without the two pow() calls per element for the usual
// powers (they were 15% of Wide&Deep's training step at batch 128): -0.5 (the default, every
// reference's) is sqrt, 0 (a constant rate) is 1; others call pow. Threads over elements for
// large tensors. sqrt is correctly rounded and glibc's pow within 0.52 ulp, so a result may
// differ from cpu.ref in the last bit of a double (the registry test's tolerance).
template <class P, class S, class Power>
void ftrl_fast_loop(const FtrlUpdateArgs& a, Power power) {
  P* p = static_cast<P*>(a.param.raw_data());
  const P* g = static_cast<const P*>(a.grad.raw_data());
  S* n = static_cast<S*>(a.accum.raw_data());
  S* z = static_cast<S*>(a.linear.raw_data());
  const int64_t N = a.param.numel();
#pragma omp parallel for schedule(static) if (N > (int64_t(1) << 15))
  for (int64_t i = 0; i < N; ++i) {
    const double gi = load<double>(g[i]), ni = load<double>(n[i]);
    const double n1 = ni + gi * gi;
    double w = load<double>(p[i]), zi = load<double>(z[i]);
    ftrl_step(w, gi, zi, power(n1), power(ni), a.lr, a.l1, a.l2);
    p[i] = store<P>(w);
    n[i] = store<S>(n1);
    z[i] = store<S>(zi);
  }
}
void ftrl_cpu_omp(const FtrlUpdateArgs& args) {
  if (auto why = check_ftrl_update(args); !why.empty()) AIM_FAIL(why);
  const FtrlUpdateArgs a = resolved(args);
  const double mp = -a.lr_power;
  AIM_DISPATCH_FLOAT_TYPES(a.param.dtype(), P, {
    using S = StateT<P>;
    if (mp == 0.5)
      ftrl_fast_loop<P, S>(a, [](double x) { return std::sqrt(x); });
    else if (mp == 0.0)
      ftrl_fast_loop<P, S>(a, [](double) { return 1.0; });
    else
      ftrl_fast_loop<P, S>(a, [mp](double x) { return std::pow(x, mp); });
  });
}

// LAMB (optim.h): every value in double. Stage 1 sums the squares of w and of u as stored (the
// update stage 2 applies) in element order, continuing from norms.
template <class P, class S>
void lamb_stage1_loop(const LambStage1Args& args) {
  const LambStage1Args a = resolved(args);
  const P* p = static_cast<const P*>(a.param.raw_data());
  const P* g = static_cast<const P*>(a.grad.raw_data());
  S* m = static_cast<S*>(a.exp_avg.raw_data());
  S* v = static_cast<S*>(a.exp_avg_sq.raw_data());
  S* u = static_cast<S*>(a.update.raw_data());
  double* norms = static_cast<double*>(a.norms.raw_data());
  const AdamScalars sc = adam_scalars(1.0, double(a.step), a.beta1, a.beta2, 0.0);
  double w_sq = norms[0], u_sq = norms[1];
  for (int64_t i = 0; i < a.param.numel(); ++i) {
    const double wi = load<double>(p[i]);
    double mi = load<double>(m[i]), vi = load<double>(v[i]);
    adam_moments(load<double>(g[i]), mi, vi, 1.0 - a.beta1, a.beta2, 1.0 - a.beta2);
    m[i] = store<S>(mi);
    v[i] = store<S>(vi);
    u[i] = store<S>(adam_direction(mi, vi, sc.step_size, sc.bc2_sqrt, a.eps) + a.weight_decay * wi);
    const double ui = load<double>(u[i]);
    w_sq += wi * wi;
    u_sq += ui * ui;
  }
  norms[0] = w_sq;
  norms[1] = u_sq;
}

template <class P, class S>
void lamb_stage2_loop(const LambStage2Args& args) {
  const LambStage2Args a = resolved(args);
  P* p = static_cast<P*>(a.param.raw_data());
  const S* u = static_cast<const S*>(a.update.raw_data());
  const double* norms = static_cast<const double*>(a.norms.raw_data());
  const double step = a.lr * lamb_trust_ratio(norms[0], norms[1]);
  for (int64_t i = 0; i < a.param.numel(); ++i)
    p[i] = store<P>(load<double>(p[i]) - step * load<double>(u[i]));
}

void lamb_stage1_cpu_ref(const LambStage1Args& a) {
  if (auto why = check_lamb_stage1(a); !why.empty()) AIM_FAIL(why);
  AIM_DISPATCH_FLOAT_TYPES(a.param.dtype(), P, { lamb_stage1_loop<P, StateT<P>>(a); });
}
void lamb_stage2_cpu_ref(const LambStage2Args& a) {
  if (auto why = check_lamb_stage2(a); !why.empty()) AIM_FAIL(why);
  AIM_DISPATCH_FLOAT_TYPES(a.param.dtype(), P, { lamb_stage2_loop<P, StateT<P>>(a); });
}

// Sum of squares in one double, element after element (the order of the host loop it replaced,
// continuing from acc[0], so consecutive tensors sum exactly as one long loop).
void grad_sq_sum_cpu_ref(const GradSqSumArgs& a) {
  if (auto why = check_grad_sq_sum(a); !why.empty()) AIM_FAIL(why);
  double* acc = static_cast<double*>(a.acc.raw_data());
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), P, {
    const P* x = static_cast<const P*>(a.x.raw_data());
    double s = acc[0];
    for (int64_t i = 0; i < a.x.numel(); ++i) {
      const double v = load<double>(x[i]);
      s += v * v;
    }
    acc[0] = s;
  });
}

// x * full({}, coef, dtype): coef rounded to x's dtype, the product in the compute type.
void grad_clip_scale_cpu_ref(const GradClipScaleArgs& a) {
  if (auto why = check_grad_clip_scale(a); !why.empty()) AIM_FAIL(why);
  const double coef = a.max_norm / (static_cast<const double*>(a.norm.raw_data())[0] + 1e-6);
  if (!(coef < 1.0)) return;
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), P, {
    using A = AccT<P>;
    P* x = static_cast<P*>(a.x.raw_data());
    const A c = load<A>(store<P>(coef));
    for (int64_t i = 0; i < a.x.numel(); ++i) x[i] = store<P>(load<A>(x[i]) * c);
  });
}

std::vector<DType> float_dtypes() { return {DType::f32, DType::f64, DType::f16, DType::bf16}; }

}  // namespace

std::string check_amp_unscale(const AmpUnscaleArgs& a) {
  if (!a.grad.defined() || !is_floating(a.grad.dtype()) || !a.grad.is_contiguous())
    return "[amp_unscale] grad must be a contiguous float tensor";
  const DType ft = optim_state_dtype(a.grad.dtype());
  if (!a.found_inf.defined() || a.found_inf.numel() != 1 || a.found_inf.dtype() != ft ||
      a.found_inf.device() != a.grad.device())
    return str("[amp_unscale] found_inf must be one ", dtype_name(ft), " element on ",
               a.grad.device().str());
  if (!(a.inv_scale > 0)) return str("[amp_unscale] inv_scale must be > 0, got ", a.inv_scale);
  return "";
}

std::string check_ftrl_update(const FtrlUpdateArgs& a) {
  if (auto why = check_hyper("ftrl_update", a.hyper, a.param); !why.empty()) return why;
  if (!((a.hyper.defined() || a.lr > 0) && a.lr_power <= 0 && a.l1 >= 0 && a.l2 >= 0))
    return str("[ftrl_update] needs lr > 0, lr_power <= 0, l1 >= 0, l2 >= 0, got lr ", a.lr,
               ", lr_power ", a.lr_power, ", l1 ", a.l1, ", l2 ", a.l2);
  return check_common("ftrl_update", a.param, a.grad, {{"accum", &a.accum}, {"linear", &a.linear}});
}
std::string check_grad_sq_sum(const GradSqSumArgs& a) {
  if (!a.x.defined() || !is_floating(a.x.dtype()) || !a.x.is_contiguous())
    return "[grad_sq_sum] x must be a contiguous float tensor";
  if (!a.acc.defined() || a.acc.numel() != 1 || a.acc.dtype() != DType::f64 ||
      a.acc.device() != a.x.device())
    return str("[grad_sq_sum] acc must be one f64 element on ", a.x.device().str());
  return "";
}
std::string check_grad_clip_scale(const GradClipScaleArgs& a) {
  if (!a.x.defined() || !is_floating(a.x.dtype()) || !a.x.is_contiguous())
    return "[grad_clip_scale] x must be a contiguous float tensor";
  if (!a.norm.defined() || a.norm.numel() != 1 || a.norm.dtype() != DType::f64 ||
      a.norm.device() != a.x.device())
    return str("[grad_clip_scale] norm must be one f64 element on ", a.x.device().str());
  return "";
}

namespace {
std::string check_norms(const char* op, const Tensor& norms, const Tensor& param) {
  if (!norms.defined() || norms.numel() != 2 || !norms.is_contiguous() ||
      norms.dtype() != DType::f64 || norms.device() != param.device())
    return str("[", op, "] norms must be 2 contiguous f64 values on ", param.device().str());
  return "";
}
}  // namespace
std::string check_lamb_stage1(const LambStage1Args& a) {
  if (auto why = check_hyper("lamb_stage1", a.hyper, a.param); !why.empty()) return why;
  if (!a.hyper.defined() && a.step < 1)
    return str("[lamb_stage1] step counts from 1, got ", a.step);
  if (auto why = check_norms("lamb_stage1", a.norms, a.param); !why.empty()) return why;
  return check_common(
      "lamb_stage1", a.param, a.grad,
      {{"exp_avg", &a.exp_avg}, {"exp_avg_sq", &a.exp_avg_sq}, {"update", &a.update}});
}
std::string check_lamb_stage2(const LambStage2Args& a) {
  if (!a.param.defined()) return "[lamb_stage2] param is undefined";
  if (auto why = check_hyper("lamb_stage2", a.hyper, a.param); !why.empty()) return why;
  if (auto why = check_norms("lamb_stage2", a.norms, a.param); !why.empty()) return why;
  // No gradient in this stage: param stands in for it in the shared check.
  return check_common("lamb_stage2", a.param, a.param, {{"update", &a.update}});
}

std::string check_sgd_update(const SgdUpdateArgs& a) {
  if (auto why = check_hyper("sgd_update", a.hyper, a.param); !why.empty()) return why;
  if (a.momentum != 0.0) {
    if (!a.momentum_buf.defined())
      return "[sgd_update] momentum " + std::to_string(a.momentum) + " needs a momentum_buf";
    return check_common("sgd_update", a.param, a.grad, {{"momentum_buf", &a.momentum_buf}});
  }
  if (a.nesterov) return "[sgd_update] nesterov needs momentum > 0";
  return check_common("sgd_update", a.param, a.grad, {});
}
std::string check_adam_update(const AdamUpdateArgs& a) {
  if (auto why = check_hyper("adam_update", a.hyper, a.param); !why.empty()) return why;
  if (!a.hyper.defined() && a.step < 1)
    return str("[adam_update] step counts from 1, got ", a.step);
  return check_common("adam_update", a.param, a.grad,
                      {{"exp_avg", &a.exp_avg}, {"exp_avg_sq", &a.exp_avg_sq}});
}
std::string check_adagrad_update(const AdagradUpdateArgs& a) {
  if (auto why = check_hyper("adagrad_update", a.hyper, a.param); !why.empty()) return why;
  if (!a.hyper.defined() && a.step < 1)
    return str("[adagrad_update] step counts from 1, got ", a.step);
  return check_common("adagrad_update", a.param, a.grad, {{"sum", &a.sum}});
}

void sgd_update(const SgdUpdateArgs& a) { AIM_DISPATCH_OP(SgdUpdateArgs, "sgd_update", a); }
void adam_update(const AdamUpdateArgs& a) { AIM_DISPATCH_OP(AdamUpdateArgs, "adam_update", a); }
void amp_unscale(const AmpUnscaleArgs& a) { AIM_DISPATCH_OP(AmpUnscaleArgs, "amp_unscale", a); }
void adagrad_update(const AdagradUpdateArgs& a) {
  AIM_DISPATCH_OP(AdagradUpdateArgs, "adagrad_update", a);
}
void ftrl_update(const FtrlUpdateArgs& a) { AIM_DISPATCH_OP(FtrlUpdateArgs, "ftrl_update", a); }
void grad_sq_sum(const GradSqSumArgs& a) { AIM_DISPATCH_OP(GradSqSumArgs, "grad_sq_sum", a); }
void grad_clip_scale(const GradClipScaleArgs& a) {
  AIM_DISPATCH_OP(GradClipScaleArgs, "grad_clip_scale", a);
}
void lamb_stage1(const LambStage1Args& a) { AIM_DISPATCH_OP(LambStage1Args, "lamb_stage1", a); }
void lamb_stage2(const LambStage2Args& a) { AIM_DISPATCH_OP(LambStage2Args, "lamb_stage2", a); }

void register_optim_cpu(Registry& r) {
  auto& s = r.op<SgdUpdateArgs>("sgd_update");
  s.description = "fused in-place SGD step (momentum, dampening, Nesterov, weight decay)";
  s.add({"cpu.ref", Backend::CPU, Provider::Own, sgd_cpu_ref, float_dtypes()});
  s.add({"cpu.omp", Backend::CPU, Provider::Own, sgd_cpu_omp, float_dtypes(), check_sgd_update});
  s.set_default(Backend::CPU, "cpu.omp");
  s.set_cost(sgd_update_cost);
  s.make_case = optim_cpu::make_sgd_case;
  s.set_shape_fields(optim_cpu::shape_fields());
  s.add_test_shapes(optim_cpu::test_shapes(5));
  s.small_enough_for_simt = optim_cpu::simt_size;

  auto& ad = r.op<AdamUpdateArgs>("adam_update");
  ad.description = "fused in-place Adam / AdamW step";
  ad.add({"cpu.ref", Backend::CPU, Provider::Own, adam_cpu_ref, float_dtypes()});
  ad.add({"cpu.omp", Backend::CPU, Provider::Own, adam_cpu_omp, float_dtypes(), check_adam_update});
  ad.add({"cpu.avx512",
          Backend::CPU,
          Provider::Own,
          adam_cpu_avx512,
          {DType::f32, DType::f16, DType::bf16},
          adam_avx512_supports});
  ad.set_default(Backend::CPU, "cpu.omp");
  if (cpu_has_avx512())
    ad.set_default(Backend::CPU, "cpu.avx512", {DType::f32, DType::f16, DType::bf16});
  ad.set_cost(adam_update_cost);
  ad.make_case = optim_cpu::make_adam_case;
  ad.set_shape_fields(optim_cpu::shape_fields());
  ad.add_test_shapes(optim_cpu::test_shapes(4));
  ad.small_enough_for_simt = optim_cpu::simt_size;

  auto& un = r.op<AmpUnscaleArgs>("amp_unscale");
  un.description = "loss-scaler unscale: grad *= inv_scale, flag non-finite elements";
  un.add({"cpu.ref", Backend::CPU, Provider::Own, unscale_cpu_ref, float_dtypes()});
  un.add(
      {"cpu.omp", Backend::CPU, Provider::Own, unscale_cpu_omp, float_dtypes(), check_amp_unscale});
  un.set_default(Backend::CPU, "cpu.omp");
  un.set_cost(amp_unscale_cost);
  un.make_case = optim_cpu::make_unscale_case;
  un.set_shape_fields(optim_cpu::shape_fields());
  un.add_test_shapes(optim_cpu::test_shapes(3));
  un.small_enough_for_simt = optim_cpu::simt_size;

  auto& ag = r.op<AdagradUpdateArgs>("adagrad_update");
  ag.description = "fused in-place Adagrad step";
  ag.add({"cpu.ref", Backend::CPU, Provider::Own, adagrad_cpu_ref, float_dtypes()});
  ag.add({"cpu.omp", Backend::CPU, Provider::Own, adagrad_cpu_omp, float_dtypes(),
          check_adagrad_update});
  ag.set_default(Backend::CPU, "cpu.omp");
  ag.set_cost(adagrad_update_cost);
  ag.make_case = optim_cpu::make_adagrad_case;
  ag.set_shape_fields(optim_cpu::shape_fields());
  ag.add_test_shapes(optim_cpu::test_shapes(3));
  ag.small_enough_for_simt = optim_cpu::simt_size;

  auto& ft = r.op<FtrlUpdateArgs>("ftrl_update");
  ft.description = "fused in-place FTRL-proximal step (l1, l2, learning_rate_power)";
  ft.add({"cpu.ref", Backend::CPU, Provider::Own, ftrl_cpu_ref, float_dtypes()});
  ft.add({"cpu.omp", Backend::CPU, Provider::Own, ftrl_cpu_omp, float_dtypes(), check_ftrl_update});
  ft.set_default(Backend::CPU, "cpu.omp");
  ft.set_cost(ftrl_update_cost);
  ft.make_case = optim_cpu::make_ftrl_case;
  ft.set_shape_fields(optim_cpu::shape_fields());
  ft.add_test_shapes(optim_cpu::test_shapes(4));
  ft.small_enough_for_simt = optim_cpu::simt_size;

  auto& sq = r.op<GradSqSumArgs>("grad_sq_sum");
  sq.description = "acc += sum(x^2) in double (global gradient norm, on the device)";
  sq.add({"cpu.ref", Backend::CPU, Provider::Own, grad_sq_sum_cpu_ref, float_dtypes()});
  sq.set_default(Backend::CPU, "cpu.ref");
  sq.set_cost(grad_sq_sum_cost);
  sq.make_case = optim_cpu::make_sq_sum_case;
  sq.set_shape_fields(optim_cpu::shape_fields());
  sq.ref_uses_case_dtype = true;  // acc stays f64
  sq.add_test_shapes(optim_cpu::test_shapes(2));
  sq.small_enough_for_simt = optim_cpu::simt_size;

  auto& cl = r.op<GradClipScaleArgs>("grad_clip_scale");
  cl.description = "x *= max_norm / (norm + 1e-6) when that is < 1 (norm a device scalar)";
  cl.add({"cpu.ref", Backend::CPU, Provider::Own, grad_clip_scale_cpu_ref, float_dtypes()});
  cl.set_default(Backend::CPU, "cpu.ref");
  cl.set_cost(grad_clip_scale_cost);
  cl.make_case = optim_cpu::make_clip_case;
  cl.set_shape_fields(optim_cpu::shape_fields());
  cl.ref_uses_case_dtype = true;  // norm stays f64
  cl.add_test_shapes(optim_cpu::test_shapes(2));
  cl.small_enough_for_simt = optim_cpu::simt_size;

  // LAMB: cpu.ref (in double) is the CPU default. The cases keep their dtypes in the reference
  // (norms stay f64); its tolerance is f32's for f64 outputs too (optim_cases.cpp).
  auto& l1 = r.op<LambStage1Args>("lamb_stage1");
  l1.description = "LAMB stage 1: Adam moments, update u, sum w^2 and u^2 into a device f64 [2]";
  l1.add({"cpu.ref", Backend::CPU, Provider::Own, lamb_stage1_cpu_ref, float_dtypes()});
  l1.set_default(Backend::CPU, "cpu.ref");
  l1.set_cost(lamb_stage1_cost);
  l1.make_case = optim_cpu::make_lamb_stage1_case;
  l1.set_shape_fields(optim_cpu::shape_fields());
  l1.ref_uses_case_dtype = true;
  l1.tolerance = optim_cpu::lamb_tolerance;
  l1.add_test_shapes(optim_cpu::test_shapes(3));
  l1.small_enough_for_simt = optim_cpu::simt_size;

  auto& l2 = r.op<LambStage2Args>("lamb_stage2");
  l2.description = "LAMB stage 2: w -= lr * trust ratio * u, the ratio from the device norms";
  l2.add({"cpu.ref", Backend::CPU, Provider::Own, lamb_stage2_cpu_ref, float_dtypes()});
  l2.set_default(Backend::CPU, "cpu.ref");
  l2.set_cost(lamb_stage2_cost);
  l2.make_case = optim_cpu::make_lamb_stage2_case;
  l2.set_shape_fields(optim_cpu::shape_fields());
  l2.ref_uses_case_dtype = true;
  l2.tolerance = optim_cpu::lamb_tolerance;
  l2.add_test_shapes(optim_cpu::test_shapes(4));
  l2.small_enough_for_simt = optim_cpu::simt_size;
}

}  // namespace aim::kernels
