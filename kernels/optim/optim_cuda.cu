// cuda.fused (sgd_update, adam_update, adagrad_update): one thread per element in a grid-stride
// loop; each thread loads param, grad and its state elements once, computes the update in the
// accumulator type (f32, f64 for f64 parameters; 16-bit parameters through f32 with f32 state)
// and stores param and state once. Step-dependent scalars (bias corrections, decayed learning
// rate) are computed on the host in double and passed by value; a capturable update (`hyper`,
// optim.h) computes them in each thread from the device's {lr, step} before its loop instead
// (a few FP64 operations per thread; the same double formulas, so the same numbers).
// Traffic per element: SGD 3P (+2S with momentum), Adam 3P + 4S, Adagrad 3P + 2S bytes ->
// bandwidth bound (a few FLOPs per element). Limits: contiguous tensors (checked).
// ftrl_update / cuda.fused: the same mapping; the element math is ftrl_element (optim.h) in
// double, shared with cpu.ref (two pow per element: FP64-bound on consumer GPUs, still one
// pass over 3P + 4S bytes; FTRL serves the small wide parts of the models).
// grad_sq_sum / cuda.block_atomic (default): grid-stride, each thread sums squares in double, a
// block sum, and one atomicAdd(double) per block into acc[0]: one pass over x; the order of the
// block additions varies (last bits of the norm are not run-to-run identical).
// grad_sq_sum / cuda.two_pass (deterministic; --deterministic selects it): the same first pass,
// each block storing its sum to partials[block] (a [blocks] f64 scratch tensor from the caching
// allocator, as every own kernel gets scratch), then one 256-thread block (sum_partials_kernel)
// adds partial b to thread b % 256's sum in increasing b and combines the 256 sums by block_sum's
// fixed tree: the same additions in the same order on every run, whatever the block scheduling.
// The grid is a function of n only (grid_for), so the bits do not depend on the GPU either.
// Tensors of <= 256 elements (one block) take the one-kernel path: a single atomicAdd into acc is
// one ordered addition. Not the default: one more launch (a few microseconds) per larger tensor;
// unmeasured on a GPU so far (no device in this session).
// grad_clip_scale / cuda.fused: grid-stride; each thread reads the device norm (one broadcast
// 8-byte load), computes coef, and scales when coef < 1. No host read of the norm.
// lamb_stage1 / cuda.fused: adam_kernel's mapping and moment math (adam_moments, adam_direction
// in the accumulator type), writing u to the scratch tensor instead of touching w; each thread
// also sums w^2 and u^2 (u as stored) in double, then a block sum and one atomicAdd(double) per
// block and norm, as grad_sq_sum (the last bits of the norms vary run to run). Traffic 2P + 5S
// bytes per element: bandwidth bound.
// lamb_stage1 / cuda.two_pass (deterministic; --deterministic selects it): the same kernel, each
// block storing its two sums to a [2, blocks] f64 scratch tensor, then sum_partials_kernel adds
// each row in a fixed order into norms[0] and norms[1] (as grad_sq_sum / cuda.two_pass). Not the
// default for the same reason (one more launch per parameter tensor).
// lamb_stage2 / cuda.fused: grid-stride; each thread reads the two device norms (broadcast
// loads), computes lr * trust ratio in double (lamb_trust_ratio), and applies w -= that * u in
// the accumulator type. Traffic 2P + S bytes per element. No host read between the stages.
#include "kernels/cuda_common.h"
#include "kernels/optim/optim.h"

namespace aim::kernels::AIM_CUDA_NS {
namespace {

constexpr int kThreads = 256;

// The device {lr, step} of a capturable update (nullptr: the fields). The kernels read doubles.
const double* hyper_ptr(const Tensor& h) {
  if (!h.defined()) return nullptr;
  AIM_CHECK(h.dtype() == DType::f64, "optimizer update: hyper must be f64 on ", h.device().str(),
            ", got ", dtype_name(h.dtype()));
  return static_cast<const double*>(h.raw_data());
}

template <class P>
using StateOf = std::conditional_t<std::is_same_v<P, double>, double, float>;

template <class A>
struct SgdScalars {
  A lr, mom, damp1, wd;
  bool first, nesterov, has_buf;
};

template <class P, class A>
__global__ void sgd_kernel(P* p, const P* g, StateOf<P>* buf, int64_t n, SgdScalars<A> s,
                           const double* hyper) {
  if (hyper) s.lr = A(hyper[0]);
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const A pi = to_acc<A>(p[i]);
    A gi = to_acc<A>(g[i]);
    if (s.wd != A(0)) gi += s.wd * pi;
    if (s.has_buf) {
      const A b = s.first ? gi : s.mom * A(buf[i]) + s.damp1 * gi;
      buf[i] = StateOf<P>(b);
      gi = s.nesterov ? gi + s.mom * b : b;
    }
    p[i] = from_acc<P>(pi - s.lr * gi);
  }
}

template <class A>
struct AdamKernelScalars {
  A b1c, b2, b2c, eps, wd, decay, step_size, bc2_sqrt;
  bool decoupled;
  double beta1, beta2, weight_decay;  // for a capturable update's scalars
};

template <class P, class A>
__global__ void adam_kernel(P* p, const P* g, StateOf<P>* m, StateOf<P>* v, int64_t n,
                            AdamKernelScalars<A> s, const double* hyper) {
  if (hyper) {
    const AdamScalars sc = adam_scalars(hyper[0], hyper[1], s.beta1, s.beta2, s.weight_decay);
    s.step_size = A(sc.step_size);
    s.bc2_sqrt = A(sc.bc2_sqrt);
    s.decay = A(sc.decay);
  }
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    A pi = to_acc<A>(p[i]);
    A gi = to_acc<A>(g[i]);
    if (s.decoupled)
      pi *= s.decay;
    else if (s.wd != A(0))
      gi += s.wd * pi;
    A mi = A(m[i]), vi = A(v[i]);
    adam_moments(gi, mi, vi, s.b1c, s.b2, s.b2c);
    m[i] = StateOf<P>(mi);
    v[i] = StateOf<P>(vi);
    p[i] = from_acc<P>(pi - adam_direction(mi, vi, s.step_size, s.bc2_sqrt, s.eps));
  }
}

template <class A>
struct LambScalars {
  A b1c, b2, b2c, eps, wd, inv_bc1, bc2_sqrt;
  double beta1, beta2;  // for a capturable update's bias corrections
};

template <class P, class A>
__global__ void lamb_stage1_kernel(const P* p, const P* g, StateOf<P>* m, StateOf<P>* v,
                                   StateOf<P>* u, int64_t n, LambScalars<A> s, double* norms,
                                   double* partials, const double* hyper) {
  __shared__ double scratch[kWarpSize];
  if (hyper) {
    const AdamScalars sc = adam_scalars(1.0, hyper[1], s.beta1, s.beta2, 0.0);
    s.inv_bc1 = A(sc.step_size);
    s.bc2_sqrt = A(sc.bc2_sqrt);
  }
  double w_sq = 0, u_sq = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const A wi = to_acc<A>(p[i]);
    A mi = A(m[i]), vi = A(v[i]);
    adam_moments(to_acc<A>(g[i]), mi, vi, s.b1c, s.b2, s.b2c);
    m[i] = StateOf<P>(mi);
    v[i] = StateOf<P>(vi);
    const StateOf<P> ui =
        StateOf<P>(adam_direction(mi, vi, s.inv_bc1, s.bc2_sqrt, s.eps) + s.wd * wi);
    u[i] = ui;
    w_sq += double(wi) * double(wi);
    u_sq += double(ui) * double(ui);
  }
  w_sq = block_sum(w_sq, scratch);
  u_sq = block_sum(u_sq, scratch);
  if (threadIdx.x != 0) return;
  if (partials) {  // cuda.two_pass: summed in block order by sum_partials_kernel
    partials[blockIdx.x] = w_sq;
    partials[gridDim.x + blockIdx.x] = u_sq;
  } else {
    atomicAdd(norms, w_sq);
    atomicAdd(norms + 1, u_sq);
  }
}

template <class P, class A>
__global__ void lamb_stage2_kernel(P* p, const StateOf<P>* u, int64_t n, const double* norms,
                                   double lr, const double* hyper) {
  if (hyper) lr = hyper[0];
  const A step = A(lr * lamb_trust_ratio(norms[0], norms[1]));
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    p[i] = from_acc<P>(to_acc<A>(p[i]) - step * A(u[i]));
}

template <class A>
struct AdagradScalars {
  A clr, wd, eps;
  double lr_decay;  // for a capturable update's rate
};

template <class P, class A>
__global__ void adagrad_kernel(P* p, const P* g, StateOf<P>* sum, int64_t n, AdagradScalars<A> s,
                               const double* hyper) {
  if (hyper) s.clr = A(adagrad_lr(hyper[0], hyper[1], s.lr_decay));
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const A pi = to_acc<A>(p[i]);
    A gi = to_acc<A>(g[i]);
    if (s.wd != A(0)) gi += s.wd * pi;
    const A si = A(sum[i]) + gi * gi;
    sum[i] = StateOf<P>(si);
    p[i] = from_acc<P>(pi - s.clr * gi / (sqrt(si) + s.eps));
  }
}

// Non-finite check and unscale: a thread that sees Inf/NaN stores 1 into the flag (a plain
// store: every writer writes the same value, no atomics needed).
template <class P, class A>
__global__ void unscale_kernel(P* g, StateOf<P>* found_inf, int64_t n, A s) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const A v = to_acc<A>(g[i]);
    if (!isfinite(v)) *found_inf = StateOf<P>(1);
    g[i] = from_acc<P>(v * s);
  }
}

template <class P>
__global__ void ftrl_kernel(P* p, const P* g, StateOf<P>* n, StateOf<P>* z, int64_t N, double lr,
                            double mp, double l1, double l2, const double* hyper) {
  if (hyper) lr = hyper[0];
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < N;
       i += int64_t(gridDim.x) * blockDim.x) {
    double w = to_acc<double>(p[i]), ni = double(n[i]), zi = double(z[i]);
    ftrl_element(w, to_acc<double>(g[i]), ni, zi, lr, mp, l1, l2);
    p[i] = from_acc<P>(w);
    n[i] = StateOf<P>(ni);
    z[i] = StateOf<P>(zi);
  }
}

void ftrl_cuda(const FtrlUpdateArgs& a) {
  if (auto why = check_ftrl_update(a); !why.empty()) AIM_FAIL(why);
  const int64_t n = a.param.numel();
  if (n == 0) return;
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.param.dtype(), P, {
    AIM_LAUNCH(grid_for(n, kThreads), kThreads, 0, stream_for(a.param.device()), ftrl_kernel<P>)
    (static_cast<P*>(a.param.raw_data()), static_cast<const P*>(a.grad.raw_data()),
     static_cast<StateOf<P>*>(a.accum.raw_data()), static_cast<StateOf<P>*>(a.linear.raw_data()), n,
     a.lr, -a.lr_power, a.l1, a.l2, hyper_ptr(a.hyper));
  });
  AIM_CHECK_LAUNCH();
}

// partials null: one atomicAdd per block into acc (cuda.block_atomic); else the block's sum goes
// to partials[block] (cuda.two_pass).
template <class P>
__global__ void sq_sum_kernel(const P* x, int64_t n, double* acc, double* partials) {
  __shared__ double scratch[kWarpSize];
  double s = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const double v = to_acc<double>(x[i]);
    s += v * v;
  }
  s = block_sum(s, scratch);
  if (threadIdx.x != 0) return;
  if (partials)
    partials[blockIdx.x] = s;
  else
    atomicAdd(acc, s);
}

constexpr int kSumThreads = 256;

// One block of kSumThreads: acc[k] += the sum of row k of partials [rows, blocks], k < rows.
// Thread t adds partials b = t, t + 256, ... in increasing b, then block_sum's fixed tree: the
// order of the additions depends on `blocks` only (deterministic, cuda.two_pass).
__global__ void sum_partials_kernel(const double* partials, int64_t blocks, int rows, double* acc) {
  __shared__ double scratch[kWarpSize];
  for (int k = 0; k < rows; ++k) {
    double s = 0;
    for (int64_t b = threadIdx.x; b < blocks; b += blockDim.x) s += partials[k * blocks + b];
    s = block_sum(s, scratch);  // starts with a barrier: scratch is free again
    if (threadIdx.x == 0) acc[k] += s;
  }
}

void launch_sum_partials(const Tensor& partials, int64_t blocks, int rows, double* acc,
                         Device dev) {
  AIM_LAUNCH(1, kSumThreads, 0, stream_for(dev), sum_partials_kernel)
  (partials.data<double>(), blocks, rows, acc);
  AIM_CHECK_LAUNCH();
}

void grad_sq_sum_launch(const GradSqSumArgs& a, bool two_pass) {
  if (auto why = check_grad_sq_sum(a); !why.empty()) AIM_FAIL(why);
  const int64_t n = a.x.numel();
  if (n == 0) return;
  const Device dev = a.x.device();
  const unsigned blocks = grid_for(n, kThreads);
  double* acc = static_cast<double*>(a.acc.raw_data());
  two_pass = two_pass && blocks > 1;  // one block: its one atomicAdd is the only addition
  const Tensor partials = two_pass ? Tensor::empty({int64_t(blocks)}, DType::f64, dev) : Tensor();
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.x.dtype(), P, {
    AIM_LAUNCH(blocks, kThreads, 0, stream_for(dev), sq_sum_kernel<P>)
    (static_cast<const P*>(a.x.raw_data()), n, acc, two_pass ? partials.data<double>() : nullptr);
  });
  AIM_CHECK_LAUNCH();
  if (two_pass) launch_sum_partials(partials, blocks, 1, acc, dev);
}

void grad_sq_sum_cuda(const GradSqSumArgs& a) { grad_sq_sum_launch(a, false); }
void grad_sq_sum_cuda_two_pass(const GradSqSumArgs& a) { grad_sq_sum_launch(a, true); }

template <class P, class A>
__global__ void clip_scale_kernel(P* x, int64_t n, const double* norm, double max_norm) {
  const double coef = max_norm / (norm[0] + 1e-6);
  if (!(coef < 1.0)) return;
  const A c = to_acc<A>(from_acc<P>(coef));  // as x * full({}, coef, dtype)
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    x[i] = from_acc<P>(to_acc<A>(x[i]) * c);
}

void grad_clip_scale_cuda(const GradClipScaleArgs& a) {
  if (auto why = check_grad_clip_scale(a); !why.empty()) AIM_FAIL(why);
  const int64_t n = a.x.numel();
  if (n == 0) return;
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.x.dtype(), P, {
    using A = typename Acc<P>::type;
    AIM_LAUNCH(grid_for(n, kThreads), kThreads, 0, stream_for(a.x.device()),
               clip_scale_kernel<P, A>)
    (static_cast<P*>(a.x.raw_data()), n, static_cast<const double*>(a.norm.raw_data()), a.max_norm);
  });
  AIM_CHECK_LAUNCH();
}

void unscale_cuda(const AmpUnscaleArgs& a) {
  if (auto why = check_amp_unscale(a); !why.empty()) AIM_FAIL(why);
  const int64_t n = a.grad.numel();
  if (n == 0) return;
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.grad.dtype(), P, {
    using A = typename Acc<P>::type;
    AIM_LAUNCH(grid_for(n, kThreads), kThreads, 0, stream_for(a.grad.device()),
               unscale_kernel<P, A>)
    (static_cast<P*>(a.grad.raw_data()), static_cast<StateOf<P>*>(a.found_inf.raw_data()), n,
     A(a.inv_scale));
  });
  AIM_CHECK_LAUNCH();
}

void sgd_cuda(const SgdUpdateArgs& a) {
  if (auto why = check_sgd_update(a); !why.empty()) AIM_FAIL(why);
  const int64_t n = a.param.numel();
  if (n == 0) return;
  const bool has_buf = a.momentum != 0.0;
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.param.dtype(), P, {
    using A = typename Acc<P>::type;
    const SgdScalars<A> s{
        A(a.lr),    A(a.momentum), A(1.0 - a.dampening), A(a.weight_decay), a.first_step,
        a.nesterov, has_buf};
    StateOf<P>* buf = has_buf ? static_cast<StateOf<P>*>(a.momentum_buf.raw_data()) : nullptr;
    AIM_LAUNCH(grid_for(n, kThreads), kThreads, 0, stream_for(a.param.device()), sgd_kernel<P, A>)
    (static_cast<P*>(a.param.raw_data()), static_cast<const P*>(a.grad.raw_data()), buf, n, s,
     hyper_ptr(a.hyper));
  });
  AIM_CHECK_LAUNCH();
}

void adam_cuda(const AdamUpdateArgs& a) {
  if (auto why = check_adam_update(a); !why.empty()) AIM_FAIL(why);
  const int64_t n = a.param.numel();
  if (n == 0) return;
  const AdamScalars sc = adam_scalars(a.lr, double(a.step), a.beta1, a.beta2, a.weight_decay);
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.param.dtype(), P, {
    using A = typename Acc<P>::type;
    const AdamKernelScalars<A> s{A(1.0 - a.beta1),  A(a.beta2),  A(1.0 - a.beta2), A(a.eps),
                                 A(a.weight_decay), A(sc.decay), A(sc.step_size),  A(sc.bc2_sqrt),
                                 a.decoupled,       a.beta1,     a.beta2,          a.weight_decay};
    AIM_LAUNCH(grid_for(n, kThreads), kThreads, 0, stream_for(a.param.device()), adam_kernel<P, A>)
    (static_cast<P*>(a.param.raw_data()), static_cast<const P*>(a.grad.raw_data()),
     static_cast<StateOf<P>*>(a.exp_avg.raw_data()),
     static_cast<StateOf<P>*>(a.exp_avg_sq.raw_data()), n, s, hyper_ptr(a.hyper));
  });
  AIM_CHECK_LAUNCH();
}

void adagrad_cuda(const AdagradUpdateArgs& a) {
  if (auto why = check_adagrad_update(a); !why.empty()) AIM_FAIL(why);
  const int64_t n = a.param.numel();
  if (n == 0) return;
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.param.dtype(), P, {
    using A = typename Acc<P>::type;
    const AdagradScalars<A> s{A(adagrad_lr(a.lr, double(a.step), a.lr_decay)), A(a.weight_decay),
                              A(a.eps), a.lr_decay};
    AIM_LAUNCH(grid_for(n, kThreads), kThreads, 0, stream_for(a.param.device()),
               adagrad_kernel<P, A>)
    (static_cast<P*>(a.param.raw_data()), static_cast<const P*>(a.grad.raw_data()),
     static_cast<StateOf<P>*>(a.sum.raw_data()), n, s, hyper_ptr(a.hyper));
  });
  AIM_CHECK_LAUNCH();
}

void lamb_stage1_launch(const LambStage1Args& a, bool two_pass) {
  if (auto why = check_lamb_stage1(a); !why.empty()) AIM_FAIL(why);
  const int64_t n = a.param.numel();
  if (n == 0) return;
  const Device dev = a.param.device();
  const unsigned blocks = grid_for(n, kThreads);
  double* norms = static_cast<double*>(a.norms.raw_data());
  two_pass = two_pass && blocks > 1;  // one block: its atomicAdds are the only additions
  const Tensor partials =
      two_pass ? Tensor::empty({2, int64_t(blocks)}, DType::f64, dev) : Tensor();
  const AdamScalars sc = adam_scalars(1.0, double(a.step), a.beta1, a.beta2, 0.0);
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.param.dtype(), P, {
    using A = typename Acc<P>::type;
    const LambScalars<A> s{A(1.0 - a.beta1), A(a.beta2),        A(1.0 - a.beta2),
                           A(a.eps),         A(a.weight_decay), A(sc.step_size),
                           A(sc.bc2_sqrt),   a.beta1,           a.beta2};
    AIM_LAUNCH(blocks, kThreads, 0, stream_for(dev), lamb_stage1_kernel<P, A>)
    (static_cast<const P*>(a.param.raw_data()), static_cast<const P*>(a.grad.raw_data()),
     static_cast<StateOf<P>*>(a.exp_avg.raw_data()),
     static_cast<StateOf<P>*>(a.exp_avg_sq.raw_data()),
     static_cast<StateOf<P>*>(a.update.raw_data()), n, s, norms,
     two_pass ? partials.data<double>() : nullptr, hyper_ptr(a.hyper));
  });
  AIM_CHECK_LAUNCH();
  if (two_pass) launch_sum_partials(partials, blocks, 2, norms, dev);
}

void lamb_stage1_cuda(const LambStage1Args& a) { lamb_stage1_launch(a, false); }
void lamb_stage1_cuda_two_pass(const LambStage1Args& a) { lamb_stage1_launch(a, true); }

void lamb_stage2_cuda(const LambStage2Args& a) {
  if (auto why = check_lamb_stage2(a); !why.empty()) AIM_FAIL(why);
  const int64_t n = a.param.numel();
  if (n == 0) return;
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.param.dtype(), P, {
    using A = typename Acc<P>::type;
    AIM_LAUNCH(grid_for(n, kThreads), kThreads, 0, stream_for(a.param.device()),
               lamb_stage2_kernel<P, A>)
    (static_cast<P*>(a.param.raw_data()), static_cast<const StateOf<P>*>(a.update.raw_data()), n,
     static_cast<const double*>(a.norms.raw_data()), a.lr, hyper_ptr(a.hyper));
  });
  AIM_CHECK_LAUNCH();
}

std::vector<DType> float_dtypes() { return {DType::f32, DType::f64, DType::f16, DType::bf16}; }

}  // namespace

void register_optim_cuda(Registry& r) {
  auto& s = r.op<SgdUpdateArgs>("sgd_update");
  s.add(
      {"cuda.fused", AIM_CUDA_BACKEND, Provider::Own, sgd_cuda, float_dtypes(), check_sgd_update});
  s.set_default(AIM_CUDA_BACKEND, "cuda.fused");
  auto& ad = r.op<AdamUpdateArgs>("adam_update");
  ad.add({"cuda.fused", AIM_CUDA_BACKEND, Provider::Own, adam_cuda, float_dtypes(),
          check_adam_update});
  ad.set_default(AIM_CUDA_BACKEND, "cuda.fused");
  auto& ag = r.op<AdagradUpdateArgs>("adagrad_update");
  ag.add({"cuda.fused", AIM_CUDA_BACKEND, Provider::Own, adagrad_cuda, float_dtypes(),
          check_adagrad_update});
  ag.set_default(AIM_CUDA_BACKEND, "cuda.fused");
  auto& un = r.op<AmpUnscaleArgs>("amp_unscale");
  un.add({"cuda.fused", AIM_CUDA_BACKEND, Provider::Own, unscale_cuda, float_dtypes(),
          check_amp_unscale});
  un.set_default(AIM_CUDA_BACKEND, "cuda.fused");
  auto& ft = r.op<FtrlUpdateArgs>("ftrl_update");
  ft.add({"cuda.fused", AIM_CUDA_BACKEND, Provider::Own, ftrl_cuda, float_dtypes(),
          check_ftrl_update});
  ft.set_default(AIM_CUDA_BACKEND, "cuda.fused");
  auto& sq = r.op<GradSqSumArgs>("grad_sq_sum");
  sq.add({"cuda.block_atomic", AIM_CUDA_BACKEND, Provider::Own, grad_sq_sum_cuda, float_dtypes(),
          check_grad_sq_sum});
  sq.add({"cuda.two_pass", AIM_CUDA_BACKEND, Provider::Own, grad_sq_sum_cuda_two_pass,
          float_dtypes(), check_grad_sq_sum});
  sq.set_default(AIM_CUDA_BACKEND, "cuda.block_atomic");
  sq.set_nondeterministic("cuda.block_atomic", "cuda.two_pass",
                          "one double atomicAdd per block: the order of the block sums varies");
  auto& cl = r.op<GradClipScaleArgs>("grad_clip_scale");
  cl.add({"cuda.fused", AIM_CUDA_BACKEND, Provider::Own, grad_clip_scale_cuda, float_dtypes(),
          check_grad_clip_scale});
  cl.set_default(AIM_CUDA_BACKEND, "cuda.fused");
  auto& l1 = r.op<LambStage1Args>("lamb_stage1");
  l1.add({"cuda.fused", AIM_CUDA_BACKEND, Provider::Own, lamb_stage1_cuda, float_dtypes(),
          check_lamb_stage1});
  l1.add({"cuda.two_pass", AIM_CUDA_BACKEND, Provider::Own, lamb_stage1_cuda_two_pass,
          float_dtypes(), check_lamb_stage1});
  l1.set_default(AIM_CUDA_BACKEND, "cuda.fused");
  l1.set_nondeterministic(
      "cuda.fused", "cuda.two_pass",
      "per-tensor norms by double atomicAdd: the order of the block sums varies");
  auto& l2 = r.op<LambStage2Args>("lamb_stage2");
  l2.add({"cuda.fused", AIM_CUDA_BACKEND, Provider::Own, lamb_stage2_cuda, float_dtypes(),
          check_lamb_stage2});
  l2.set_default(AIM_CUDA_BACKEND, "cuda.fused");
}

}  // namespace aim::kernels::AIM_CUDA_NS
