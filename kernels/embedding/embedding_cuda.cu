// cuda.gather (forward): one warp per output row, 8 rows per 256-thread block; lanes copy
// consecutive columns (coalesced). Traffic: N*C elements read and written -> bandwidth bound.
// cuda.atomic (backward): one thread per element of dout (grid-stride), atomicAdd into
// dweight[idx[n], c]. Fast when indices rarely repeat; with many duplicates the atomics on one
// row serialise, and the summation order (hence the last bits) changes from run to run.
// f32/f64 only: 16-bit atomics would round after every add.
// cuda.sorted (backward, default): deterministic, bitwise-identical run to run, own kernels only.
//   1-4. the key buckets of kernels/key_buckets.cuh: the positions sorted by index (padding_idx
//      and bad indices skipped), position order within an index, and the list of the indices
//      that occur (uniq), in increasing order (O(sum of bucket sizes^2): fine for realistic
//      token distributions, quadratic in the size of one huge bucket);
//   5. one warp per (unique index, 128-column chunk) sums its rows in position order in f32
//      (f64 for f64) and adds once into dweight (16-bit: one rounding per element).
//   Scratch: 2 * V + 2 * N + min(N, V) + 2 int32. Limits: N and V < 2^31 - 2.
// Out-of-range indices: the kernels never read or write out of bounds (a bad index's row is
// written as zeros in the forward, and gets no gradient in the backward); they record it in the
// device's error record (kernels/error_flag.h) and nothing is read back here: the error
// ("[embedding_fwd] index 7 at position 3 is out of range for V = 5 (flagged on cuda:0, ...)")
// is thrown by the next check_device_errors. No host synchronisation: fit for graph capture.
#include <algorithm>

#include "kernels/cuda_common.h"
#include "kernels/embedding/embedding.h"
#include "kernels/error_flag.cuh"
#include "kernels/key_buckets.cuh"

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
                              int64_t C, int64_t ld, DeviceErrorRecord* err) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t n = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (n >= N) return;
  const int64_t v = int64_t(idx[n]);
  T* o = out + n * ld;
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
       static_cast<T*>(a.out.raw_data()), N, V, C, embedding_row_stride(a.out), err);
      AIM_CHECK_LAUNCH();
    });
  });
}

// ---- shared by both backward variants -------------------------------------------------------

// The key of position n for the key buckets: its index, or -1 for padding_idx and for a bad
// index (recorded once, in the count stage).
template <class I>
struct EmbeddingKey {
  const I* idx;
  int64_t V, padding_idx;
  DeviceErrorRecord* err;
  __device__ __forceinline__ int operator()(int64_t n, bool check) const {
    const int64_t v = int64_t(idx[n]);
    if (v < 0 || v >= V) {
      if (check) flag_bad(err, DeviceErrorOp::embedding_bwd, n, v, V);
      return -1;
    }
    return v == padding_idx ? -1 : int(v);
  }
};

// ---- backward: cuda.atomic ------------------------------------------------------------------

template <class T, class I>
__global__ void scatter_atomic_kernel(const T* dout, const I* idx, T* dw, int64_t N, int64_t V,
                                      int64_t C, int64_t ld, int64_t padding_idx) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < N * C;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = i / C, c = i - n * C;
    const int64_t v = int64_t(idx[n]);  // a bad one was flagged by the count pass: skipped
    if (v != padding_idx && v >= 0 && v < V) atomicAdd(dw + v * C + c, dout[n * ld + c]);
  }
}

void embedding_bwd_cuda_atomic(const EmbeddingBwdArgs& a) {
  check_embedding_bwd_args(a);
  const int64_t N = a.indices.size(0), V = a.dweight.size(0), C = a.dweight.size(1);
  if (N == 0) return;
  const Device dev = a.dweight.device();
  DeviceErrorRecord* err = device_error_record(dev);
  AIM_DISPATCH_INDEX_TYPES(a.indices.dtype(), I, {
    // Validation only (no counts).
    AIM_LAUNCH(grid_for(N, kThreads), kThreads, 0, stream_for(dev),
               key_buckets_count_kernel<EmbeddingKey<I>>)
    (EmbeddingKey<I>{a.indices.data<I>(), V, a.padding_idx, err}, N, nullptr);
    AIM_CHECK_LAUNCH();
    if (C == 0) return;
    switch (a.dweight.dtype()) {
      case DType::f32:
        AIM_LAUNCH(grid_for(N * C, kThreads), kThreads, 0, stream_for(dev),
                   scatter_atomic_kernel<float, I>)
        (a.dout.data<float>(), a.indices.data<I>(), a.dweight.data<float>(), N, V, C,
         embedding_row_stride(a.dout), a.padding_idx);
        break;
      case DType::f64:
        AIM_LAUNCH(grid_for(N * C, kThreads), kThreads, 0, stream_for(dev),
                   scatter_atomic_kernel<double, I>)
        (a.dout.data<double>(), a.indices.data<I>(), a.dweight.data<double>(), N, V, C,
         embedding_row_stride(a.dout), a.padding_idx);
        break;
      default:
        AIM_FAIL("[embedding_bwd] cuda.atomic takes f32/f64, got ", dtype_name(a.dweight.dtype()));
    }
    AIM_CHECK_LAUNCH();
  });
}

// ---- backward: cuda.sorted ------------------------------------------------------------------

constexpr int kColsPerLane = 4, kColsPerWarp = kColsPerLane * kWarpSize;

template <class T>
__global__ void accumulate_kernel(const T* dout, const int* offsets, const int* sorted,
                                  const int* uniq, const int* meta, T* dw, int64_t C, int64_t ld) {
  using A = typename Acc<T>::type;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t u = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (u >= meta[0]) return;
  const int64_t v = uniq[u];
  const int64_t c0 = int64_t(blockIdx.y) * kColsPerWarp + lane;
  A acc[kColsPerLane];
  for (int k = 0; k < kColsPerLane; ++k) acc[k] = 0;
  for (int j = offsets[v]; j < offsets[v + 1]; ++j) {  // position order: deterministic
    const T* g = dout + int64_t(sorted[j]) * ld;
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
  const KeyBuckets kb(N, V, dev, /*stored_keys=*/false);
  AIM_DISPATCH_INDEX_TYPES(a.indices.dtype(), I, {
    kb.sort(EmbeddingKey<I>{a.indices.data<I>(), V, a.padding_idx, err}, stream);
  });
  if (C == 0) return;
  const dim3 grid(unsigned(ceil_div(N, kWarpsPerBlock)), unsigned(ceil_div(C, kColsPerWarp)));
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.dweight.dtype(), T, {
    AIM_LAUNCH(grid, kWarpsPerBlock * kWarpSize, 0, stream, accumulate_kernel<T>)
    (static_cast<const T*>(a.dout.raw_data()), kb.offsets, kb.sorted, kb.uniq, kb.meta,
     static_cast<T*>(a.dweight.raw_data()), C, embedding_row_stride(a.dout));
  });
  AIM_CHECK_LAUNCH();
}

std::string sorted_supports(const EmbeddingBwdArgs& a) {
  if (a.indices.numel() >= kKeyBucketsLimit || a.dweight.size(0) >= kKeyBucketsLimit)
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
