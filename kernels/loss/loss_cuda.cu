// cuda.rows (cross entropy): one 256-thread block per row. Forward: block max, block sums of
// exp(x - max) and of x (for label smoothing) -> lse and the row's loss; a row reads its V
// logits once from DRAM (the second and third passes hit L1/L2) -> bandwidth bound.
// Backward: a one-block kernel counts the non-ignored targets (mean's denominator), then one
// block per row writes g * (exp(x - lse) - smoothed one-hot). Good for V from ~1K to ~100K;
// small V leaves threads idle (a warp-per-row variant would suit V < 512).
// cuda.elementwise (bce_with_logits, mse, smooth_l1): grid-stride over elements, grid size a
// function of n only (grid_for); for mean/sum each block reduces its elements into partial[block]
// and one final block sums the partials in a fixed order: deterministic, no atomics.
// Reductions (both): the final value comes from one block summing per-row / per-block values
// in a fixed order (float; double for f64), so results are bitwise identical run to run.
// Targets out of [0, V) (and not ignore_index) are never used as an address: their row's loss
// (forward) counts as 0 and is left out of mean's denominator; they are recorded in the device's
// error record (kernels/error_flag.h), and the next check_device_errors throws the CPU's message
// naming the position and value. Nothing is read back here (no host synchronisation).
#include <limits>

#include "kernels/cuda_common.h"
#include "kernels/error_flag.cuh"
#include "kernels/loss/loss.h"

namespace aim::kernels::AIM_CUDA_NS {
namespace {

constexpr int kRowThreads = 256;
constexpr int kThreads = 256;
constexpr int kFinalThreads = 256;

// ---- shared: final deterministic reduction --------------------------------------------------

// out[0] = sum(vals) (sum), or sum(vals) / (counts ? sum(counts) : divisor) (mean). One block.
template <class A>
__global__ void finalize_kernel(const A* vals, const A* counts, int64_t n, A divisor, bool mean,
                                A* out) {
  __shared__ A scratch[kWarpSize];
  A s = 0, c = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    s += vals[i];
    if (counts) c += counts[i];
  }
  s = block_sum(s, scratch);
  if (counts) c = block_sum(c, scratch);  // uniform condition: every thread takes part
  if (threadIdx.x == 0) out[0] = mean ? s / (counts ? c : divisor) : s;  // 0/0: NaN as PyTorch
}

template <class A>
void launch_finalize(const A* vals, const A* counts, int64_t n, A divisor, Reduction r, A* out,
                     Device dev) {
  AIM_LAUNCH(1, kFinalThreads, 0, stream_for(dev), finalize_kernel<A>)
  (vals, counts, n, divisor, r == Reduction::mean, out);
  AIM_CHECK_LAUNCH();
}

// ---- cross entropy: bad targets ---------------------------------------------------------------

__device__ __forceinline__ void flag_bad(DeviceErrorRecord* err, DeviceErrorOp op, int64_t n,
                                         int64_t t, int64_t V, int64_t ignore_index) {
  record_device_error(err, op, n, 0, t, V, ignore_index);
}

// ---- cross entropy forward: cuda.rows -------------------------------------------------------

template <class T, class I>
__global__ void ce_fwd_rows_kernel(const T* x, const I* target, typename Acc<T>::type* lse,
                                   typename Acc<T>::type* row_loss,
                                   typename Acc<T>::type* row_count, int64_t V,
                                   int64_t ignore_index, float smoothing, DeviceErrorRecord* err) {
  using A = typename Acc<T>::type;
  __shared__ A scratch[kWarpSize];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * V;
  A mx = -std::numeric_limits<A>::infinity();
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x) mx = max(mx, to_acc<A>(xr[v]));
  mx = block_max(mx, scratch, -std::numeric_limits<A>::infinity());
  A se = 0, sx = 0;
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x) {
    const A xv = to_acc<A>(xr[v]);
    se += exp(xv - mx);
    sx += xv;
  }
  se = block_sum(se, scratch);
  if (smoothing > 0) sx = block_sum(sx, scratch);  // uniform condition
  if (threadIdx.x != 0) return;
  const A l = mx + log(se);
  lse[row] = l;
  const int64_t t = int64_t(target[row]);
  A loss = 0, count = 0;
  if (t != ignore_index) {
    if (t < 0 || t >= V) {
      flag_bad(err, DeviceErrorOp::cross_entropy_fwd, row, t, V, ignore_index);
    } else {
      const A eps = A(smoothing);
      loss = (A(1) - eps) * (l - to_acc<A>(xr[t])) + eps * (l - sx / A(V));
      count = 1;
    }
  }
  row_loss[row] = loss;
  if (row_count) row_count[row] = count;
}

void cross_entropy_fwd_cuda_rows(const CrossEntropyFwdArgs& a) {
  check_cross_entropy_fwd_args(a);
  const int64_t N = a.logits.size(0), V = a.logits.size(1);
  const Device dev = a.logits.device();
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.logits.dtype(), T, {
    using A = typename Acc<T>::type;
    if (N == 0) {  // empty batch: sum 0, mean NaN (as PyTorch)
      if (a.reduction != Reduction::none) {
        Tensor z = Tensor::empty({1}, dtype_of<A>(), dev);
        memset_zero(z.raw_data(), sizeof(A), dev);
        launch_finalize<A>(z.data<A>(), z.data<A>(), 1, A(0), a.reduction, a.loss.data<A>(), dev);
      }
      return;
    }
    DeviceErrorRecord* err = device_error_record(dev);
    const bool none = a.reduction == Reduction::none;
    Tensor scratch = none ? Tensor() : Tensor::empty({2, N}, dtype_of<A>(), dev);
    A* row_loss = none ? a.loss.data<A>() : scratch.data<A>();
    A* row_count = none ? nullptr : scratch.data<A>() + N;
    AIM_DISPATCH_INDEX_TYPES(a.target.dtype(), I, {
      AIM_LAUNCH(unsigned(N), kRowThreads, 0, stream_for(dev), ce_fwd_rows_kernel<T, I>)
      (static_cast<const T*>(a.logits.raw_data()), a.target.data<I>(), a.lse.data<A>(), row_loss,
       row_count, V, a.ignore_index, a.label_smoothing, err);
      AIM_CHECK_LAUNCH();
    });
    if (!none) launch_finalize<A>(row_loss, row_count, N, A(0), a.reduction, a.loss.data<A>(), dev);
  });
}

// ---- cross entropy backward: cuda.rows ------------------------------------------------------

// One block: validates the targets and counts the non-ignored ones into *count.
template <class I, class A>
__global__ void ce_count_kernel(const I* target, int64_t N, int64_t V, int64_t ignore_index,
                                A* count, DeviceErrorRecord* err) {
  __shared__ A scratch[kWarpSize];
  A c = 0;
  for (int64_t n = threadIdx.x; n < N; n += blockDim.x) {
    const int64_t t = int64_t(target[n]);
    if (t == ignore_index) continue;
    if (t < 0 || t >= V)
      flag_bad(err, DeviceErrorOp::cross_entropy_bwd, n, t, V, ignore_index);
    else
      c += 1;
  }
  c = block_sum(c, scratch);
  if (threadIdx.x == 0) *count = c;
}

template <class T, class I>
__global__ void ce_bwd_rows_kernel(const typename Acc<T>::type* dloss, const T* x, const I* target,
                                   const typename Acc<T>::type* lse,
                                   const typename Acc<T>::type* count, T* dx, int64_t V,
                                   int64_t ignore_index, float smoothing, int reduction) {
  using A = typename Acc<T>::type;
  const int64_t row = blockIdx.x;
  const int64_t t = int64_t(target[row]);
  T* dr = dx + row * V;
  if (t == ignore_index) {
    for (int64_t v = threadIdx.x; v < V; v += blockDim.x) dr[v] = from_acc<T>(A(0));
    return;
  }
  const A g = reduction == int(Reduction::none)   ? dloss[row]
              : reduction == int(Reduction::mean) ? dloss[0] / count[0]
                                                  : dloss[0];
  const A eps = A(smoothing), off = eps / A(V), l = lse[row];
  const T* xr = x + row * V;
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x) {
    const A tgt = v == t ? A(1) - eps + off : off;
    dr[v] = from_acc<T>(g * (exp(to_acc<A>(xr[v]) - l) - tgt));
  }
}

void cross_entropy_bwd_cuda_rows(const CrossEntropyBwdArgs& a) {
  check_cross_entropy_bwd_args(a);
  const int64_t N = a.logits.size(0), V = a.logits.size(1);
  if (N == 0) return;
  const Device dev = a.logits.device();
  DeviceErrorRecord* err = device_error_record(dev);
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.logits.dtype(), T, {
    using A = typename Acc<T>::type;
    Tensor count = Tensor::empty({1}, dtype_of<A>(), dev);
    AIM_DISPATCH_INDEX_TYPES(a.target.dtype(), I, {
      AIM_LAUNCH(1, kFinalThreads, 0, stream_for(dev), ce_count_kernel<I, A>)
      (a.target.data<I>(), N, V, a.ignore_index, count.data<A>(), err);
      AIM_CHECK_LAUNCH();
      AIM_LAUNCH(unsigned(N), kRowThreads, 0, stream_for(dev), ce_bwd_rows_kernel<T, I>)
      (a.dloss.data<A>(), static_cast<const T*>(a.logits.raw_data()), a.target.data<I>(),
       a.lse.data<A>(), count.data<A>(), static_cast<T*>(a.dlogits.raw_data()), V, a.ignore_index,
       a.label_smoothing, int(a.reduction));
      AIM_CHECK_LAUNCH();
    });
  });
}

// ---- pointwise losses: cuda.elementwise -----------------------------------------------------

template <class T>
__global__ void pointwise_fwd_kernel(PointwiseKind kind, const T* x, const T* y, const T* pw,
                                     int64_t C, int64_t n, typename Acc<T>::type beta,
                                     typename Acc<T>::type* out, typename Acc<T>::type* partial) {
  using A = typename Acc<T>::type;
  __shared__ A scratch[kWarpSize];
  A s = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const A l = pointwise_value<A>(kind, to_acc<A>(x[i]), to_acc<A>(y[i]),
                                   pw ? to_acc<A>(pw[i % C]) : A(1), beta);
    if (out) out[i] = l;
    s += l;
  }
  if (!partial) return;  // uniform: the whole grid takes the same branch
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

template <class T>
__global__ void pointwise_bwd_kernel(PointwiseKind kind, const typename Acc<T>::type* dloss,
                                     const T* x, const T* y, const T* pw, int64_t C, int64_t n,
                                     typename Acc<T>::type beta, int reduction, T* dx) {
  using A = typename Acc<T>::type;
  const bool none = reduction == int(Reduction::none);
  const A g0 = none ? A(0) : reduction == int(Reduction::mean) ? dloss[0] / A(n) : dloss[0];
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const A g = none ? dloss[i] : g0;
    dx[i] = from_acc<T>(g * pointwise_grad<A>(kind, to_acc<A>(x[i]), to_acc<A>(y[i]),
                                              pw ? to_acc<A>(pw[i % C]) : A(1), beta));
  }
}

template <class T>
const T* opt_ptr(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.raw_data()) : nullptr;
}

void pointwise_cuda(const PointwiseLoss& p, bool backward) {
  check_pointwise_args(p, backward);
  const int64_t n = p.x.numel(), C = p.x.size(-1);
  const Device dev = p.x.device();
  const auto stream = stream_for(dev);
  AIM_DISPATCH_CUDA_FLOAT_TYPES(p.x.dtype(), T, {
    using A = typename Acc<T>::type;
    const T* x = static_cast<const T*>(p.x.raw_data());
    const T* y = static_cast<const T*>(p.target.raw_data());
    if (backward) {
      if (n > 0) {
        AIM_LAUNCH(grid_for(n, kThreads), kThreads, 0, stream, pointwise_bwd_kernel<T>)
        (p.kind, p.dloss.data<A>(), x, y, opt_ptr<T>(p.pos_weight), C, n, A(p.beta),
         int(p.reduction), static_cast<T*>(p.out.raw_data()));
        AIM_CHECK_LAUNCH();
      }
    } else if (p.reduction == Reduction::none) {
      if (n > 0) {
        AIM_LAUNCH(grid_for(n, kThreads), kThreads, 0, stream, pointwise_fwd_kernel<T>)
        (p.kind, x, y, opt_ptr<T>(p.pos_weight), C, n, A(p.beta), p.out.data<A>(), nullptr);
        AIM_CHECK_LAUNCH();
      }
    } else {
      const unsigned blocks = grid_for(n, kThreads);
      Tensor partial = Tensor::empty({int64_t(blocks)}, dtype_of<A>(), dev);
      if (n > 0) {
        AIM_LAUNCH(blocks, kThreads, 0, stream, pointwise_fwd_kernel<T>)
        (p.kind, x, y, opt_ptr<T>(p.pos_weight), C, n, A(p.beta), nullptr, partial.data<A>());
        AIM_CHECK_LAUNCH();
      } else {
        memset_zero(partial.raw_data(), sizeof(A), dev);
      }
      launch_finalize<A>(partial.data<A>(), nullptr, int64_t(blocks), A(n), p.reduction,
                         p.out.data<A>(), dev);
    }
  });
}

template <class Args>
void pointwise_fwd_cuda(const Args& a) {
  pointwise_cuda(to_pointwise(a), false);
}
template <class Args>
void pointwise_bwd_cuda(const Args& a) {
  pointwise_cuda(to_pointwise(a), true);
}

std::string rows_fit(int64_t N) {
  return N <= int64_t(0x7fffffff) ? "" : str("needs N <= 2^31-1 rows, got ", N);
}

const std::vector<DType> kFloatTypes = {DType::f32, DType::f64, DType::f16, DType::bf16};

template <class Args>
void add_elementwise(Registry& r, const char* name, void (*fn)(const Args&)) {
  auto& op = r.op<Args>(name);
  op.add({"cuda.elementwise", AIM_CUDA_BACKEND, Provider::Own, fn, kFloatTypes});
  op.set_default(AIM_CUDA_BACKEND, "cuda.elementwise");
}

}  // namespace

void register_loss_cuda(Registry& r) {
  auto& cf = r.op<CrossEntropyFwdArgs>("cross_entropy_fwd");
  cf.add({"cuda.rows", AIM_CUDA_BACKEND, Provider::Own, cross_entropy_fwd_cuda_rows, kFloatTypes,
          [](const CrossEntropyFwdArgs& a) { return rows_fit(a.logits.size(0)); }});
  cf.set_default(AIM_CUDA_BACKEND, "cuda.rows");
  auto& cb = r.op<CrossEntropyBwdArgs>("cross_entropy_bwd");
  cb.add({"cuda.rows", AIM_CUDA_BACKEND, Provider::Own, cross_entropy_bwd_cuda_rows, kFloatTypes,
          [](const CrossEntropyBwdArgs& a) { return rows_fit(a.logits.size(0)); }});
  cb.set_default(AIM_CUDA_BACKEND, "cuda.rows");
  add_elementwise<BceWithLogitsFwdArgs>(r, "bce_with_logits_fwd",
                                        pointwise_fwd_cuda<BceWithLogitsFwdArgs>);
  add_elementwise<BceWithLogitsBwdArgs>(r, "bce_with_logits_bwd",
                                        pointwise_bwd_cuda<BceWithLogitsBwdArgs>);
  add_elementwise<MseFwdArgs>(r, "mse_fwd", pointwise_fwd_cuda<MseFwdArgs>);
  add_elementwise<MseBwdArgs>(r, "mse_bwd", pointwise_bwd_cuda<MseBwdArgs>);
  add_elementwise<SmoothL1FwdArgs>(r, "smooth_l1_fwd", pointwise_fwd_cuda<SmoothL1FwdArgs>);
  add_elementwise<SmoothL1BwdArgs>(r, "smooth_l1_bwd", pointwise_bwd_cuda<SmoothL1BwdArgs>);
}

}  // namespace aim::kernels::AIM_CUDA_NS
