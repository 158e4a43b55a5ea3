// The CUDA kernels of the elementwise family (cuda.vec variants of unary, unary_bwd, binary,
// where), generic over an element functor `Out op(I0[, I1[, I2]])` that converts and computes
// (16-bit types in f32). Compiles as CUDA and, for the SIMT emulator, as C++.
//
// ew_vec_kernel: the output and every input are contiguous over the merged layout (layout.h) or,
// for inputs, a single broadcast value. Each thread of a grid-stride loop handles VEC elements with
// one 16-byte load per input and one store of VEC outputs (VEC = 16 / the largest element size);
// the last n % VEC elements by single accesses. Used with VEC > 1 when every pointer is aligned to
// its pack, else with VEC = 1. Traffic: each input read once, y written once: bandwidth bound.
// ew_strided_kernel: anything else, up to kMaxDims merged dims: one element per thread,
// grid-stride, offsets of every operand from a size/stride table passed by value (constant
// parameter memory).
#pragma once
#include <algorithm>
#include <string>
#include <type_traits>

#include "kernels/copy/copy.h"
#include "kernels/cuda_common.h"
#include "kernels/elementwise/layout.h"

namespace aim::kernels::AIM_CUDA_NS {

constexpr int kEwThreads = 256;

struct EwTable {
  int ndim;
  int64_t sizes[kMaxDims];
  int64_t strides[4][kMaxDims];  // [operand][dim], operand 0 = output
};

template <class T, int N>
struct alignas(sizeof(T) * N) EwPack {
  T v[N];
};

template <int N, class T>
__device__ __forceinline__ EwPack<T, N> ew_load(const T* p, int64_t i, bool broadcast) {
  EwPack<T, N> r;
  if (broadcast) {
    const T v = p[0];
    AIM_UNROLL
    for (int k = 0; k < N; ++k) r.v[k] = v;
  } else {
    r = *reinterpret_cast<const EwPack<T, N>*>(p + i);
  }
  return r;
}

template <int NIN, class Op, class Out, class I0, class I1, class I2>
__device__ __forceinline__ Out ew_apply(const Op& op, I0 a, I1 b, I2 c) {
  if constexpr (NIN == 1) {
    return op(a);
  } else if constexpr (NIN == 2) {
    return op(a, b);
  } else {
    return op(a, b, c);
  }
}

// bcast: bit j set when input j is one broadcast value.
template <int NIN, int VEC, class Op, class Out, class I0, class I1, class I2>
__global__ void ew_vec_kernel(Op op, Out* y, const I0* x0, const I1* x1, const I2* x2,
                              unsigned bcast, int64_t n) {
  const int64_t nvec = n / VEC;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t v = tid; v < nvec; v += step) {
    const int64_t i = v * VEC;
    const EwPack<I0, VEC> p0 = ew_load<VEC>(x0, i, bcast & 1u);
    EwPack<I1, VEC> p1{};
    EwPack<I2, VEC> p2{};
    if constexpr (NIN >= 2) p1 = ew_load<VEC>(x1, i, bcast & 2u);
    if constexpr (NIN >= 3) p2 = ew_load<VEC>(x2, i, bcast & 4u);
    EwPack<Out, VEC> r;
    AIM_UNROLL
    for (int k = 0; k < VEC; ++k) r.v[k] = ew_apply<NIN, Op, Out>(op, p0.v[k], p1.v[k], p2.v[k]);
    *reinterpret_cast<EwPack<Out, VEC>*>(y + i) = r;
  }
  for (int64_t i = nvec * VEC + tid; i < n; i += step) {
    const I0 a = x0[(bcast & 1u) ? 0 : i];
    I1 b{};
    I2 c{};
    if constexpr (NIN >= 2) b = x1[(bcast & 2u) ? 0 : i];
    if constexpr (NIN >= 3) c = x2[(bcast & 4u) ? 0 : i];
    y[i] = ew_apply<NIN, Op, Out>(op, a, b, c);
  }
}

template <int NIN, class Op, class Out, class I0, class I1, class I2>
__global__ void ew_strided_kernel(Op op, Out* y, const I0* x0, const I1* x1, const I2* x2,
                                  EwTable t, int64_t n) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t off[4] = {0, 0, 0, 0};
    int64_t rem = i;
    for (int d = t.ndim - 1; d >= 0; --d) {
      const int64_t idx = rem % t.sizes[d];
      rem /= t.sizes[d];
      AIM_UNROLL
      for (int o = 0; o <= NIN; ++o) off[o] += idx * t.strides[o][d];
    }
    const I0 a = x0[off[1]];
    I1 b{};
    I2 c{};
    if constexpr (NIN >= 2) b = x1[off[2]];
    if constexpr (NIN >= 3) c = x2[off[3]];
    y[off[0]] = ew_apply<NIN, Op, Out>(op, a, b, c);
  }
}

// "" when the cuda.vec kernels can take the layout.
inline std::string ew_layout_supported(const EwLayout& l) {
  return l.ndim() <= kMaxDims
             ? std::string()
             : str("needs at most ", kMaxDims, " dims after merging, got ", l.ndim());
}

template <class T>
inline bool ew_aligned(const void* p, int vec) {
  return reinterpret_cast<uintptr_t>(p) % (sizeof(T) * size_t(vec)) == 0;
}

// Launches op over layout l (NIN inputs; unused input pointers may be null).
template <int NIN, class Op, class Out, class I0, class I1 = I0, class I2 = I0>
void ew_launch(const char* op_name, const EwLayout& l, Device dev, const Op& op, Out* y,
               const I0* x0, const I1* x1 = nullptr, const I2* x2 = nullptr) {
  const int64_t n = l.numel;
  if (n == 0) return;
  const std::string why = ew_layout_supported(l);
  AIM_CHECK(why.empty(), "[", op_name, "] cuda.vec ", why);
  // Flat: one merged dim, output contiguous, inputs contiguous or one broadcast value.
  bool flat = l.ndim() == 1 && l.stride(0, 0) == 1;
  unsigned bcast = 0;
  for (int j = 0; j < NIN && flat; ++j) {
    const int64_t s = l.stride(j + 1, 0);
    flat = s == 0 || s == 1;
    if (s == 0 || n == 1) bcast |= 1u << j;
  }
  if (flat) {
    constexpr size_t kMax =
        std::max({sizeof(Out), sizeof(I0), NIN >= 2 ? sizeof(I1) : 1, NIN >= 3 ? sizeof(I2) : 1});
    constexpr int kVec = int(16 / kMax);
    bool aligned = kVec > 1 && ew_aligned<Out>(y, kVec);
    aligned = aligned && ((bcast & 1u) || ew_aligned<I0>(x0, kVec));
    if constexpr (NIN >= 2) aligned = aligned && ((bcast & 2u) || ew_aligned<I1>(x1, kVec));
    if constexpr (NIN >= 3) aligned = aligned && ((bcast & 4u) || ew_aligned<I2>(x2, kVec));
    if (aligned) {
      AIM_LAUNCH(grid_for(ceil_div(n, kVec), kEwThreads), kEwThreads, 0, stream_for(dev),
                 ew_vec_kernel<NIN, kVec, Op, Out, I0, I1, I2>)
      (op, y, x0, x1, x2, bcast, n);
    } else {
      AIM_LAUNCH(grid_for(n, kEwThreads), kEwThreads, 0, stream_for(dev),
                 ew_vec_kernel<NIN, 1, Op, Out, I0, I1, I2>)
      (op, y, x0, x1, x2, bcast, n);
    }
  } else {
    EwTable t{};
    t.ndim = l.ndim();
    for (int d = 0; d < t.ndim; ++d) {
      t.sizes[d] = l.sizes[size_t(d)];
      for (int o = 0; o <= NIN; ++o) t.strides[o][d] = l.stride(o, d);
    }
    AIM_LAUNCH(grid_for(n, kEwThreads), kEwThreads, 0, stream_for(dev),
               ew_strided_kernel<NIN, Op, Out, I0, I1, I2>)
    (op, y, x0, x1, x2, t, n);
  }
  AIM_CHECK_LAUNCH();
}

// Compute type and conversions: 16-bit floats compute in f32, others in themselves.
template <class T>
using EwComp =
    std::conditional_t<std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>, float, T>;

template <class C, class T>
__host__ __device__ __forceinline__ C ew_to(T v) {
  if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) {
    return C(to_f32(v));
  } else {
    return C(v);
  }
}
template <class T, class C>
__host__ __device__ __forceinline__ T ew_from(C v) {
  if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) {
    return from_f32<T>(float(v));
  } else {
    return T(v);
  }
}

}  // namespace aim::kernels::AIM_CUDA_NS
