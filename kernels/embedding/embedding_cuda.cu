// cuda.gather (forward): one warp per output row, 8 rows per 256-thread block; lanes copy
// consecutive columns (coalesced). Traffic: N*C elements read and written -> bandwidth bound.
// cuda.atomic (backward): one thread per element of dout (grid-stride), atomicAdd into
// dweight[idx[n], c]. Fast when indices rarely repeat; with many duplicates the atomics on one
// row serialise, and the summation order (hence the last bits) changes from run to run.
// f32/f64 only: 16-bit atomics would round after every add.
// cuda.sorted (backward, default): deterministic, bitwise-identical run to run, own kernels only.
//   1. count[v] of each index (integer atomics: exact), skipping padding_idx;
//   2. one block: exclusive scan of count -> offsets[V+1], and a compacted list of the indices
//      that occur (uniq), in increasing order;
//   3. bucket the positions (slot order is arbitrary), 4. order each bucket by position: each
//      position's rank = number of smaller positions in its bucket (O(sum of bucket sizes^2):
//      fine for realistic token distributions, quadratic in the size of one huge bucket);
//   5. one warp per (unique index, 128-column chunk) sums its rows in position order in f32
//      (f64 for f64) and adds once into dweight (16-bit: one rounding per element).
//   Scratch: 2 * V + 2 * N + 1 int32. Limits: N and V < 2^31.
// Out-of-range indices: the kernels never read or write out of bounds (a bad index's row is
// written as zeros in the forward, and gets no gradient in the backward); they record it in the
// device's error record (kernels/error_flag.h) and nothing is read back here: the error
// ("[embedding_fwd] index 7 at position 3 is out of range for V = 5 (flagged on cuda:0, ...)")
// is thrown by the next check_device_errors. No host synchronisation: fit for graph capture.
#include <algorithm>

#include "kernels/cuda_common.h"
#include "kernels/embedding/embedding.h"
#include "kernels/error_flag.cuh"

namespace aim::kernels::AIM_CUDA_NS {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kThreads = 256;

// Records position n (index v) as bad in the device's error record.
__device__ __forceinline__ void flag_bad(DeviceErrorRecord* err, DeviceErrorOp op, int64_t n,
                                         int64_t v, int64_t V) {
  record_device_error(err, op, n, 0, v, V, 0);
}

// ---- forward: cuda.gather -------------------------------------------------------------------

template <class T, class I>
__global__ void gather_kernel(const T* weight, const I* idx, T* out, int64_t N, int64_t V,
                              int64_t C, DeviceErrorRecord* err) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t n = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (n >= N) return;
  const int64_t v = int64_t(idx[n]);
  T* o = out + n * C;
  if (v < 0 || v >= V) {
    if (lane == 0) flag_bad(err, DeviceErrorOp::embedding_fwd, n, v, V);
    for (int64_t c = lane; c < C; c += kWarpSize) o[c] = from_acc<T>(0.0f);
    return;
  }
  const T* w = weight + v * C;
  for (int64_t c = lane; c < C; c += kWarpSize) o[c] = w[c];
}

void embedding_fwd_cuda_gather(const EmbeddingFwdArgs& a) {
  check_embedding_fwd_args(a);
  const int64_t N = a.indices.size(0), V = a.weight.size(0), C = a.weight.size(1);
  if (N == 0) return;
  const Device dev = a.weight.device();
  DeviceErrorRecord* err = device_error_record(dev);
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.weight.dtype(), T, {
    AIM_DISPATCH_INDEX_TYPES(a.indices.dtype(), I, {
      AIM_LAUNCH(unsigned(ceil_div(N, kWarpsPerBlock)), kWarpsPerBlock * kWarpSize, 0,
                 stream_for(dev), gather_kernel<T, I>)
      (static_cast<const T*>(a.weight.raw_data()), a.indices.data<I>(),
       static_cast<T*>(a.out.raw_data()), N, V, C, err);
      AIM_CHECK_LAUNCH();
    });
  });
}

// ---- shared by both backward variants -------------------------------------------------------

// Validates the indices; count (optional) gets the number of non-padding occurrences of each.
template <class I>
__global__ void count_kernel(const I* idx, int64_t N, int64_t V, int64_t padding_idx, int* count,
                             DeviceErrorRecord* err) {
  for (int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; n < N;
       n += int64_t(gridDim.x) * blockDim.x) {
    const int64_t v = int64_t(idx[n]);
    if (v < 0 || v >= V) {
      flag_bad(err, DeviceErrorOp::embedding_bwd, n, v, V);
    } else if (count && v != padding_idx) {
      atomicAdd(count + v, 1);
    }
  }
}

// ---- backward: cuda.atomic ------------------------------------------------------------------

template <class T, class I>
__global__ void scatter_atomic_kernel(const T* dout, const I* idx, T* dw, int64_t N, int64_t V,
                                      int64_t C, int64_t padding_idx) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < N * C;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = i / C, c = i - n * C;
    const int64_t v = int64_t(idx[n]);  // a bad one was flagged by count_kernel: skipped
    if (v != padding_idx && v >= 0 && v < V) atomicAdd(dw + v * C + c, dout[i]);
  }
}

void embedding_bwd_cuda_atomic(const EmbeddingBwdArgs& a) {
  check_embedding_bwd_args(a);
  const int64_t N = a.indices.size(0), V = a.dweight.size(0), C = a.dweight.size(1);
  if (N == 0) return;
  const Device dev = a.dweight.device();
  DeviceErrorRecord* err = device_error_record(dev);
  AIM_DISPATCH_INDEX_TYPES(a.indices.dtype(), I, {
    AIM_LAUNCH(grid_for(N, kThreads), kThreads, 0, stream_for(dev), count_kernel<I>)
    (a.indices.data<I>(), N, V, a.padding_idx, nullptr, err);
    AIM_CHECK_LAUNCH();
    if (C == 0) return;
    switch (a.dweight.dtype()) {
      case DType::f32:
        AIM_LAUNCH(grid_for(N * C, kThreads), kThreads, 0, stream_for(dev),
                   scatter_atomic_kernel<float, I>)
        (a.dout.data<float>(), a.indices.data<I>(), a.dweight.data<float>(), N, V, C,
         a.padding_idx);
        break;
      case DType::f64:
        AIM_LAUNCH(grid_for(N * C, kThreads), kThreads, 0, stream_for(dev),
                   scatter_atomic_kernel<double, I>)
        (a.dout.data<double>(), a.indices.data<I>(), a.dweight.data<double>(), N, V, C,
         a.padding_idx);
        break;
      default:
        AIM_FAIL("[embedding_bwd] cuda.atomic takes f32/f64, got ", dtype_name(a.dweight.dtype()));
    }
    AIM_CHECK_LAUNCH();
  });
}

// ---- backward: cuda.sorted ------------------------------------------------------------------

constexpr int kScanThreads = 1024;

// One block. offsets[v] = sum of count[u < v], offsets[V] = total; uniq = the v with count > 0
// in increasing order, meta[0] = their number. count is reset to 0 (reused as bucket cursor).
__global__ void scan_kernel(int* count, int* offsets, int* uniq, int* meta, int64_t V) {
  __shared__ int tot_c[kScanThreads];
  __shared__ int tot_u[kScanThreads];
  const int64_t per = ceil_div(V, kScanThreads);
  const int64_t v0 = int64_t(threadIdx.x) * per;
  const int64_t v1 = v0 + per < V ? v0 + per : V;
  int sc = 0, su = 0;
  for (int64_t v = v0; v < v1; ++v) {
    sc += count[v];
    su += count[v] > 0;
  }
  tot_c[threadIdx.x] = sc;
  tot_u[threadIdx.x] = su;
  __syncthreads();
  if (threadIdx.x == 0) {  // 1024 serial steps: negligible next to the other kernels
    int ac = 0, au = 0;
    for (int t = 0; t < kScanThreads; ++t) {
      const int c = tot_c[t], u = tot_u[t];
      tot_c[t] = ac;
      tot_u[t] = au;
      ac += c;
      au += u;
    }
    offsets[V] = ac;
    meta[0] = au;
  }
  __syncthreads();
  int oc = tot_c[threadIdx.x], ou = tot_u[threadIdx.x];
  for (int64_t v = v0; v < v1; ++v) {
    const int k = count[v];
    offsets[v] = oc;
    if (k > 0) uniq[ou++] = int(v);
    oc += k;
    count[v] = 0;
  }
}

template <class I>
__global__ void place_kernel(const I* idx, int64_t N, int64_t V, int64_t padding_idx,
                             const int* offsets, int* cursor, int* bucket) {
  for (int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; n < N;
       n += int64_t(gridDim.x) * blockDim.x) {
    const int64_t v = int64_t(idx[n]);
    if (v == padding_idx || v < 0 || v >= V) continue;  // bad: flagged by count_kernel
    bucket[offsets[v] + atomicAdd(cursor + v, 1)] = int(n);
  }
}

template <class I>
__global__ void rank_kernel(const I* idx, int64_t N, int64_t V, int64_t padding_idx,
                            const int* offsets, const int* bucket, int* sorted) {
  for (int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; n < N;
       n += int64_t(gridDim.x) * blockDim.x) {
    const int64_t v = int64_t(idx[n]);
    if (v == padding_idx || v < 0 || v >= V) continue;  // bad: flagged by count_kernel
    const int b = offsets[v], e = offsets[v + 1];
    int r = 0;
    for (int j = b; j < e; ++j) r += bucket[j] < int(n);
    sorted[b + r] = int(n);
  }
}

constexpr int kColsPerLane = 4, kColsPerWarp = kColsPerLane * kWarpSize;

template <class T>
__global__ void accumulate_kernel(const T* dout, const int* offsets, const int* sorted,
                                  const int* uniq, const int* meta, T* dw, int64_t C) {
  using A = typename Acc<T>::type;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t u = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (u >= meta[0]) return;
  const int64_t v = uniq[u];
  const int64_t c0 = int64_t(blockIdx.y) * kColsPerWarp + lane;
  A acc[kColsPerLane];
  for (int k = 0; k < kColsPerLane; ++k) acc[k] = 0;
  for (int j = offsets[v]; j < offsets[v + 1]; ++j) {  // position order: deterministic
    const T* g = dout + int64_t(sorted[j]) * C;
    for (int k = 0; k < kColsPerLane; ++k) {
      const int64_t c = c0 + k * kWarpSize;
      if (c < C) acc[k] += to_acc<A>(g[c]);
    }
  }
  for (int k = 0; k < kColsPerLane; ++k) {
    const int64_t c = c0 + k * kWarpSize;
    if (c < C) dw[v * C + c] = from_acc<T>(to_acc<A>(dw[v * C + c]) + acc[k]);
  }
}

void embedding_bwd_cuda_sorted(const EmbeddingBwdArgs& a) {
  check_embedding_bwd_args(a);
  const int64_t N = a.indices.size(0), V = a.dweight.size(0), C = a.dweight.size(1);
  if (N == 0) return;
  const Device dev = a.dweight.device();
  const auto stream = stream_for(dev);
  DeviceErrorRecord* err = device_error_record(dev);
  // count/cursor [V], offsets [V+1], bucket [N], sorted [N], uniq [N], meta [1]
  Tensor scratch = Tensor::empty({2 * V + 3 * N + 2}, DType::i32, dev);
  int* count = scratch.data<int32_t>();
  int* offsets = count + V;
  int* bucket = offsets + V + 1;
  int* sorted = bucket + N;
  int* uniq = sorted + N;
  int* meta = uniq + N;
  memset_zero(count, size_t(V) * 4, dev);
  AIM_DISPATCH_INDEX_TYPES(a.indices.dtype(), I, {
    const I* idx = a.indices.data<I>();
    AIM_LAUNCH(grid_for(N, kThreads), kThreads, 0, stream, count_kernel<I>)
    (idx, N, V, a.padding_idx, count, err);
    AIM_CHECK_LAUNCH();
    AIM_LAUNCH(1, kScanThreads, 0, stream, scan_kernel)(count, offsets, uniq, meta, V);
    AIM_CHECK_LAUNCH();
    AIM_LAUNCH(grid_for(N, kThreads), kThreads, 0, stream, place_kernel<I>)
    (idx, N, V, a.padding_idx, offsets, count, bucket);
    AIM_CHECK_LAUNCH();
    AIM_LAUNCH(grid_for(N, kThreads), kThreads, 0, stream, rank_kernel<I>)
    (idx, N, V, a.padding_idx, offsets, bucket, sorted);
    AIM_CHECK_LAUNCH();
  });
  if (C == 0) return;
  const dim3 grid(unsigned(ceil_div(N, kWarpsPerBlock)), unsigned(ceil_div(C, kColsPerWarp)));
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.dweight.dtype(), T, {
    AIM_LAUNCH(grid, kWarpsPerBlock * kWarpSize, 0, stream, accumulate_kernel<T>)
    (static_cast<const T*>(a.dout.raw_data()), offsets, sorted, uniq, meta,
     static_cast<T*>(a.dweight.raw_data()), C);
  });
  AIM_CHECK_LAUNCH();
}

std::string sorted_supports(const EmbeddingBwdArgs& a) {
  const int64_t lim = int64_t(0x7fffffff) - 2;
  if (a.indices.numel() >= lim || a.dweight.size(0) >= lim)
    return str("needs N and V < 2^31 - 2 (int32 scratch), got N = ", a.indices.numel(),
               ", V = ", a.dweight.size(0));
  if (ceil_div(a.dweight.size(1), kColsPerWarp) > 65535)
    return str("needs C <= ", int64_t(65535) * kColsPerWarp, ", got ", a.dweight.size(1));
  return "";
}

const std::vector<DType> kFloatTypes = {DType::f32, DType::f64, DType::f16, DType::bf16};

}  // namespace

void register_embedding_cuda(Registry& r) {
  auto& f = r.op<EmbeddingFwdArgs>("embedding_fwd");
  f.add({"cuda.gather", AIM_CUDA_BACKEND, Provider::Own, embedding_fwd_cuda_gather, kFloatTypes});
  f.set_default(AIM_CUDA_BACKEND, "cuda.gather");
  auto& b = r.op<EmbeddingBwdArgs>("embedding_bwd");
  b.add({"cuda.atomic",
         AIM_CUDA_BACKEND,
         Provider::Own,
         embedding_bwd_cuda_atomic,
         {DType::f32, DType::f64}});
  b.add({"cuda.sorted", AIM_CUDA_BACKEND, Provider::Own, embedding_bwd_cuda_sorted, kFloatTypes,
         sorted_supports});
  b.set_default(AIM_CUDA_BACKEND, "cuda.sorted");  // deterministic
  b.set_nondeterministic("cuda.atomic", "cuda.sorted",
                         "float atomicAdd per element: the order of repeated rows' adds varies");
}

}  // namespace aim::kernels::AIM_CUDA_NS
