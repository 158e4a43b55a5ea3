// x seen as [outer, C, inner] around `dim` (softmax.h). Row = the C elements of one (o, i).
//
// cuda.warp_row (dim = last, C <= 1024): one warp per row, 8 rows per 256-thread block. Lane l
// holds elements l, l + 32, ... in registers (kPer = 1..32 per lane, compile-time), so x is read
// once and y written once; max and sum by warp shuffles. Bandwidth bound; the best choice for
// many short rows (attention scores, classifier heads). Refuses dim != last and C > 1024.
//
// cuda.block_row (default; any dim, any C):
//  - dim = last, C <= 8192: one block per row (the smallest of 32, 64, 128, 256 threads that
//    covers C), each thread holds kPer = 1..32 elements in registers: one read, one write, block
//    reductions through shared memory. [4096, 4096] f32: 16 values per thread, bandwidth bound.
//    The block size is a template parameter so the per-thread elements sit at immediate offsets;
//    no instantiation spills on sm_90 (tools/ptxas-check.sh; 32 per thread: ~100-170 registers).
//  - dim = last, C > 8192: one 256-thread block per row, the row streamed three times (max, sum,
//    write); the re-reads come from L2 for rows up to a few MB.
//  - dim != last: one thread per (o, i) row, consecutive threads on consecutive i (coalesced);
//    online max/sum in one pass, then the write pass. Slow only when inner is tiny and C huge.
// Gradient (softmax_bwd), same mapping: row sum of dy * y (log: of dy) then the write.
// Math in f32 for f32/f16/bf16 (f64 for f64); expf/exp (not the fast intrinsics).
#include <cmath>

#include "kernels/cuda_common.h"
#include "kernels/softmax/softmax.h"

namespace aim::kernels::AIM_CUDA_NS {
namespace {

// Where the row starts in x and in the mask (null: no mask).
struct RowPtrs {
  int64_t base;
  const bool* mask;
};
__device__ __forceinline__ RowPtrs row_ptrs(int64_t row, const bool* mask,
                                            const SoftmaxGeometry& g) {
  const int64_t o = row / g.inner, i = row % g.inner;
  return {o * g.C * g.inner + i, mask ? mask + g.row_offset(o, i) : nullptr};
}

constexpr int kRowWarpsPerBlock = 8;  // cuda.warp_row: rows (warps) per 256-thread block

// ---- forward ------------------------------------------------------------------------------------

// Register-resident row: a warp (kBlock false) or a block of kThreads (kBlock true) per row,
// contiguous rows. The stride between a thread's elements (kThreads) is a compile-time constant so
// that element j's address is one immediate offset from the thread's first: with a run-time
// stride every element kept its own 64-bit address and the 32-per-thread kernels spilled.
template <bool kBlock, int kThreads, int kPer, class T>
__global__ void __launch_bounds__(kBlock ? kThreads : kRowWarpsPerBlock* kWarpSize)
    softmax_reg_row_kernel(const T* x, T* y, const bool* mask, SoftmaxGeometry g, bool log) {
  using A = typename Acc<T>::type;
  __shared__ A scratch[kWarpSize];
  constexpr int nt = kBlock ? kThreads : kWarpSize;
  const int t = kBlock ? int(threadIdx.x) : int(threadIdx.x % kWarpSize);
  const int64_t row =
      kBlock ? int64_t(blockIdx.x)
             : int64_t(blockIdx.x) * (blockDim.x / kWarpSize) + threadIdx.x / kWarpSize;
  if (row >= g.outer) return;  // a whole warp leaves together (blocks: never)
  const T* xr = x + row * g.C;
  T* yr = y + row * g.C;
  const bool* mr = mask ? mask + g.row_offset(row, 0) : nullptr;
  A v[kPer];
  static_assert(kPer <= 32, "keep holds one bit per element");
  uint32_t keep = 0;  // bit j: element j is in the row and not masked (one register, not kPer)
  A mx = neg_inf<A>();
  int any = 0;
  AIM_UNROLL
  for (int j = 0; j < kPer; ++j) {
    const int64_t c = t + int64_t(j) * nt;
    const bool k = c < g.C && (!mr || mr[c * g.c_stride]);
    keep |= uint32_t(k) << j;
    v[j] = k ? to_acc<A>(xr[c]) : neg_inf<A>();
    mx = v[j] > mx ? v[j] : mx;
    any |= k;
  }
  if constexpr (kBlock) {
    any = __syncthreads_or(any);
    mx = block_max(mx, scratch, neg_inf<A>());
  } else {
    any = __any_sync(kFullMask, any);
    mx = warp_max(mx);
  }
  A s = A(0);
  AIM_UNROLL
  for (int j = 0; j < kPer; ++j) {
    if (!(keep >> j & 1u)) continue;
    v[j] -= mx;
    const A e = exp_a(v[j]);
    if (!log) v[j] = e;
    s += e;
  }
  s = kBlock ? block_sum(s, scratch) : warp_sum(s);
  const A shift = log_a(s), r = A(1) / s;
  const A masked = log ? neg_inf<A>() : A(0);
  AIM_UNROLL
  for (int j = 0; j < kPer; ++j) {
    const int64_t c = t + int64_t(j) * nt;
    if (c >= g.C) continue;
    yr[c] = from_acc<T>(!any || !(keep >> j & 1u) ? masked : log ? v[j] - shift : v[j] * r);
  }
}

// Streamed row (C > 8192): one block per contiguous row, three passes.
template <class T>
__global__ void softmax_stream_row_kernel(const T* x, T* y, const bool* mask, SoftmaxGeometry g,
                                          bool log) {
  using A = typename Acc<T>::type;
  __shared__ A scratch[kWarpSize];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * g.C;
  T* yr = y + row * g.C;
  const bool* mr = mask ? mask + g.row_offset(row, 0) : nullptr;
  A mx = neg_inf<A>();
  int any = 0;
  for (int64_t c = threadIdx.x; c < g.C; c += blockDim.x)
    if (!mr || mr[c * g.c_stride]) {
      const A v = to_acc<A>(xr[c]);
      mx = v > mx ? v : mx;
      any = 1;
    }
  any = __syncthreads_or(any);
  mx = block_max(mx, scratch, neg_inf<A>());
  A s = A(0);
  for (int64_t c = threadIdx.x; c < g.C; c += blockDim.x)
    if (!mr || mr[c * g.c_stride]) s += exp_a(to_acc<A>(xr[c]) - mx);
  s = block_sum(s, scratch);
  const A shift = mx + log_a(s), r = A(1) / s;
  const A masked = log ? neg_inf<A>() : A(0);
  for (int64_t c = threadIdx.x; c < g.C; c += blockDim.x) {
    const bool k = any && (!mr || mr[c * g.c_stride]);
    const A v = to_acc<A>(xr[c]);
    yr[c] = from_acc<T>(!k ? masked : log ? v - shift : exp_a(v - mx) * r);
  }
}

// Strided rows (dim != last): one thread per row, online max/sum.
template <class T>
__global__ void softmax_strided_kernel(const T* x, T* y, const bool* mask, SoftmaxGeometry g,
                                       bool log) {
  using A = typename Acc<T>::type;
  const int64_t rows = g.outer * g.inner;
  for (int64_t row = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; row < rows;
       row += int64_t(gridDim.x) * blockDim.x) {
    const RowPtrs p = row_ptrs(row, mask, g);
    A mx = neg_inf<A>(), s = A(0);
    bool any = false;
    for (int64_t c = 0; c < g.C; ++c) {
      if (p.mask && !p.mask[c * g.c_stride]) continue;
      const A v = to_acc<A>(x[p.base + c * g.inner]);
      any = true;
      if (v > mx) {
        s = s * exp_a(mx - v) + A(1);
        mx = v;
      } else {
        s += exp_a(v - mx);
      }
    }
    const A shift = mx + log_a(s), r = A(1) / s;
    const A masked = log ? neg_inf<A>() : A(0);
    for (int64_t c = 0; c < g.C; ++c) {
      const bool k = any && (!p.mask || p.mask[c * g.c_stride]);
      const A v = to_acc<A>(x[p.base + c * g.inner]);
      y[p.base + c * g.inner] = from_acc<T>(!k ? masked : log ? v - shift : exp_a(v - mx) * r);
    }
  }
}

// ---- backward -----------------------------------------------------------------------------------

template <class A>
__device__ __forceinline__ A bwd_term(A dy, A y, bool log) {
  return log ? dy : dy * y;
}
template <class A>
__device__ __forceinline__ A bwd_out(A dy, A y, A s, bool log) {
  return log ? dy - exp_a(y) * s : y * (dy - s);
}

template <bool kBlock, int kThreads, int kPer, class T>
__global__ void __launch_bounds__(kBlock ? kThreads : kRowWarpsPerBlock* kWarpSize)
    softmax_bwd_reg_row_kernel(const T* dy, const T* y, T* dx, const bool* mask, SoftmaxGeometry g,
                               bool log) {
  using A = typename Acc<T>::type;
  __shared__ A scratch[kWarpSize];
  constexpr int nt = kBlock ? kThreads : kWarpSize;
  const int t = kBlock ? int(threadIdx.x) : int(threadIdx.x % kWarpSize);
  const int64_t row =
      kBlock ? int64_t(blockIdx.x)
             : int64_t(blockIdx.x) * (blockDim.x / kWarpSize) + threadIdx.x / kWarpSize;
  if (row >= g.outer) return;
  const int64_t off = row * g.C;
  const bool* mr = mask ? mask + g.row_offset(row, 0) : nullptr;
  A vd[kPer], vy[kPer];
  static_assert(kPer <= 32, "keep holds one bit per element");
  uint32_t keep = 0;  // bit j: element j is in the row and not masked
  A s = A(0);
  AIM_UNROLL
  for (int j = 0; j < kPer; ++j) {
    const int64_t c = t + int64_t(j) * nt;
    const bool k = c < g.C && (!mr || mr[c * g.c_stride]);
    keep |= uint32_t(k) << j;
    vd[j] = c < g.C ? to_acc<A>(dy[off + c]) : A(0);
    vy[j] = c < g.C ? to_acc<A>(y[off + c]) : A(0);
    if (k) s += bwd_term(vd[j], vy[j], log);
  }
  s = kBlock ? block_sum(s, scratch) : warp_sum(s);
  AIM_UNROLL
  for (int j = 0; j < kPer; ++j) {
    const int64_t c = t + int64_t(j) * nt;
    if (c < g.C) dx[off + c] = from_acc<T>(keep >> j & 1u ? bwd_out(vd[j], vy[j], s, log) : A(0));
  }
}

template <class T>
__global__ void softmax_bwd_stream_row_kernel(const T* dy, const T* y, T* dx, const bool* mask,
                                              SoftmaxGeometry g, bool log) {
  using A = typename Acc<T>::type;
  __shared__ A scratch[kWarpSize];
  const int64_t off = int64_t(blockIdx.x) * g.C;
  const bool* mr = mask ? mask + g.row_offset(blockIdx.x, 0) : nullptr;
  A s = A(0);
  for (int64_t c = threadIdx.x; c < g.C; c += blockDim.x)
    if (!mr || mr[c * g.c_stride])
      s += bwd_term(to_acc<A>(dy[off + c]), to_acc<A>(y[off + c]), log);
  s = block_sum(s, scratch);
  for (int64_t c = threadIdx.x; c < g.C; c += blockDim.x) {
    const bool k = !mr || mr[c * g.c_stride];
    dx[off + c] =
        from_acc<T>(k ? bwd_out(to_acc<A>(dy[off + c]), to_acc<A>(y[off + c]), s, log) : A(0));
  }
}

template <class T>
__global__ void softmax_bwd_strided_kernel(const T* dy, const T* y, T* dx, const bool* mask,
                                           SoftmaxGeometry g, bool log) {
  using A = typename Acc<T>::type;
  const int64_t rows = g.outer * g.inner;
  for (int64_t row = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; row < rows;
       row += int64_t(gridDim.x) * blockDim.x) {
    const RowPtrs p = row_ptrs(row, mask, g);
    A s = A(0);
    for (int64_t c = 0; c < g.C; ++c)
      if (!p.mask || p.mask[c * g.c_stride]) {
        const int64_t e = p.base + c * g.inner;
        s += bwd_term(to_acc<A>(dy[e]), to_acc<A>(y[e]), log);
      }
    for (int64_t c = 0; c < g.C; ++c) {
      const int64_t e = p.base + c * g.inner;
      const bool k = !p.mask || p.mask[c * g.c_stride];
      dx[e] = from_acc<T>(k ? bwd_out(to_acc<A>(dy[e]), to_acc<A>(y[e]), s, log) : A(0));
    }
  }
}

// ---- launchers ----------------------------------------------------------------------------------

constexpr int kWarpRowMaxC = 1024;   // 32 per lane
constexpr int kBlockRowMaxPer = 32;  // 256 threads x 32 = 8192 in registers
constexpr int kBlockThreads = 256;

int per_bucket(int64_t n) {  // next power of two >= n, at least 1
  int p = 1;
  while (p < n) p *= 2;
  return p;
}

// Calls f(std::integral_constant<int, kPer>) for kPer in {1, 2, 4, ..., 32}.
template <class F>
void with_per(int per, F&& f) {
  switch (per) {
    case 1:
      f(std::integral_constant<int, 1>());
      break;
    case 2:
      f(std::integral_constant<int, 2>());
      break;
    case 4:
      f(std::integral_constant<int, 4>());
      break;
    case 8:
      f(std::integral_constant<int, 8>());
      break;
    case 16:
      f(std::integral_constant<int, 16>());
      break;
    case 32:
      f(std::integral_constant<int, 32>());
      break;
    default:
      AIM_FAIL("[softmax] internal: no kernel for ", per, " elements per thread");
  }
}

// Calls f(threads, per) as integral constants for a contiguous row of C <= 8192: rows up to 256
// take one element per thread and the smallest block of 32, 64, 128 or 256 threads that covers
// them; longer rows take 256 threads and 2..32 elements each.
template <class F>
void with_block_shape(int64_t C, F&& f) {
  using One = std::integral_constant<int, 1>;
  if (C <= 32) {
    f(std::integral_constant<int, 32>(), One());
  } else if (C <= 64) {
    f(std::integral_constant<int, 64>(), One());
  } else if (C <= 128) {
    f(std::integral_constant<int, 128>(), One());
  } else {
    with_per(per_bucket(ceil_div(C, kBlockThreads)),
             [&](auto per) { f(std::integral_constant<int, kBlockThreads>(), per); });
  }
}

// C and inner of x around dim, or false when dim is out of range (run() then reports it).
bool row_shape(const Tensor& x, int64_t dim, int64_t* C, int64_t* inner) {
  const int64_t rank = x.dim();
  if (rank < 1 || dim < -rank || dim >= rank) return false;
  const int64_t d = dim < 0 ? dim + rank : dim;
  *C = x.size(d);
  *inner = 1;
  for (int64_t k = d + 1; k < rank; ++k) *inner *= x.size(k);
  return true;
}

std::string warp_row_supports(const Tensor& x, int64_t dim) {
  int64_t C = 0, inner = 0;
  if (!row_shape(x, dim, &C, &inner)) return "";
  if (inner != 1)
    return str("needs dim = last (contiguous rows), got dim ", dim, " of x ", to_string(x.sizes()),
               " (cuda.block_row takes any dim)");
  if (C > kWarpRowMaxC)
    return str("needs C <= ", kWarpRowMaxC, " (a row in one warp's registers), got C = ", C,
               " (cuda.block_row takes any C)");
  return "";
}

void check_grid(const SoftmaxGeometry& g, const char* who) {
  AIM_CHECK(g.outer * g.inner < (int64_t(1) << 31), who, " ", g.outer * g.inner,
            " rows exceed the grid");
}

template <class T>
void softmax_fwd_launch(const SoftmaxArgs& a, const SoftmaxGeometry& g, const bool* m,
                        bool warp_row) {
  const T* x = static_cast<const T*>(a.x.raw_data());
  T* y = static_cast<T*>(a.y.raw_data());
  const auto stream = stream_for(a.x.device());
  if (warp_row) {
    with_per(per_bucket(ceil_div(g.C, kWarpSize)), [&](auto per) {
      AIM_LAUNCH(unsigned(ceil_div(g.outer, kRowWarpsPerBlock)), kRowWarpsPerBlock * kWarpSize, 0,
                 stream, softmax_reg_row_kernel<false, kWarpSize, decltype(per)::value, T>)
      (x, y, m, g, a.log);
    });
  } else if (g.inner != 1) {
    const int64_t rows = g.outer * g.inner;
    AIM_LAUNCH(grid_for(rows, kBlockThreads), kBlockThreads, 0, stream, softmax_strided_kernel<T>)
    (x, y, m, g, a.log);
  } else if (g.C > int64_t(kBlockThreads) * kBlockRowMaxPer) {
    AIM_LAUNCH(unsigned(g.outer), kBlockThreads, 0, stream, softmax_stream_row_kernel<T>)
    (x, y, m, g, a.log);
  } else {
    with_block_shape(g.C, [&](auto threads, auto per) {
      AIM_LAUNCH(unsigned(g.outer), decltype(threads)::value, 0, stream,
                 softmax_reg_row_kernel<true, decltype(threads)::value, decltype(per)::value, T>)
      (x, y, m, g, a.log);
    });
  }
  AIM_CHECK_LAUNCH();
}

template <class T>
void softmax_bwd_launch(const SoftmaxBwdArgs& a, const SoftmaxGeometry& g, const bool* m,
                        bool warp_row) {
  const T* dy = static_cast<const T*>(a.dy.raw_data());
  const T* y = static_cast<const T*>(a.y.raw_data());
  T* dx = static_cast<T*>(a.dx.raw_data());
  const auto stream = stream_for(a.dy.device());
  if (warp_row) {
    with_per(per_bucket(ceil_div(g.C, kWarpSize)), [&](auto per) {
      AIM_LAUNCH(unsigned(ceil_div(g.outer, kRowWarpsPerBlock)), kRowWarpsPerBlock * kWarpSize, 0,
                 stream, softmax_bwd_reg_row_kernel<false, kWarpSize, decltype(per)::value, T>)
      (dy, y, dx, m, g, a.log);
    });
  } else if (g.inner != 1) {
    const int64_t rows = g.outer * g.inner;
    AIM_LAUNCH(grid_for(rows, kBlockThreads), kBlockThreads, 0, stream,
               softmax_bwd_strided_kernel<T>)
    (dy, y, dx, m, g, a.log);
  } else if (g.C > int64_t(kBlockThreads) * kBlockRowMaxPer) {
    AIM_LAUNCH(unsigned(g.outer), kBlockThreads, 0, stream, softmax_bwd_stream_row_kernel<T>)
    (dy, y, dx, m, g, a.log);
  } else {
    with_block_shape(g.C, [&](auto threads, auto per) {
      AIM_LAUNCH(
          unsigned(g.outer), decltype(threads)::value, 0, stream,
          softmax_bwd_reg_row_kernel<true, decltype(threads)::value, decltype(per)::value, T>)
      (dy, y, dx, m, g, a.log);
    });
  }
  AIM_CHECK_LAUNCH();
}

void softmax_run(const SoftmaxArgs& a, bool warp_row, const char* who) {
  Tensor mv;
  const SoftmaxGeometry g = softmax_geometry(a, who, &mv);
  if (warp_row) {
    const std::string why = warp_row_supports(a.x, a.dim);
    AIM_CHECK(why.empty(), who, " ", why);
  }
  check_grid(g, who);
  if (a.x.numel() == 0) return;
  const bool* m = mv.defined() ? mv.data<bool>() : nullptr;
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.x.dtype(), T, softmax_fwd_launch<T>(a, g, m, warp_row));
}

void softmax_bwd_run(const SoftmaxBwdArgs& a, bool warp_row, const char* who) {
  Tensor mv;
  const SoftmaxGeometry g = softmax_bwd_geometry(a, who, &mv);
  if (warp_row) {
    const std::string why = warp_row_supports(a.dy, a.dim);
    AIM_CHECK(why.empty(), who, " ", why);
  }
  check_grid(g, who);
  if (a.dy.numel() == 0) return;
  const bool* m = mv.defined() ? mv.data<bool>() : nullptr;
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.dy.dtype(), T, softmax_bwd_launch<T>(a, g, m, warp_row));
}

}  // namespace

void register_softmax_cuda(Registry& r) {
  const std::vector<DType> floats{DType::f32, DType::f64, DType::f16, DType::bf16};
  auto& f = r.op<SoftmaxArgs>("softmax");
  f.add({"cuda.warp_row", AIM_CUDA_BACKEND, Provider::Own,
         [](const SoftmaxArgs& a) { softmax_run(a, true, "[softmax] cuda.warp_row"); }, floats,
         [](const SoftmaxArgs& a) { return warp_row_supports(a.x, a.dim); }});
  f.add({"cuda.block_row", AIM_CUDA_BACKEND, Provider::Own,
         [](const SoftmaxArgs& a) { softmax_run(a, false, "[softmax] cuda.block_row"); }, floats});
  f.set_default(AIM_CUDA_BACKEND, "cuda.block_row");

  auto& b = r.op<SoftmaxBwdArgs>("softmax_bwd");
  b.add({"cuda.warp_row", AIM_CUDA_BACKEND, Provider::Own,
         [](const SoftmaxBwdArgs& a) { softmax_bwd_run(a, true, "[softmax_bwd] cuda.warp_row"); },
         floats, [](const SoftmaxBwdArgs& a) { return warp_row_supports(a.dy, a.dim); }});
  b.add({"cuda.block_row", AIM_CUDA_BACKEND, Provider::Own,
         [](const SoftmaxBwdArgs& a) { softmax_bwd_run(a, false, "[softmax_bwd] cuda.block_row"); },
         floats});
  b.set_default(AIM_CUDA_BACKEND, "cuda.block_row");
}

}  // namespace aim::kernels::AIM_CUDA_NS
