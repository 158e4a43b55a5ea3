// matmul: own CUDA variants.
//
// cuda.tiled: a classic register-blocked SGEMM, templated over the element type.
//   Mapping: one 256-thread block per 128x128 tile of C (blockIdx.x over N, blockIdx.y over M,
//   blockIdx.z over the batch). Each thread owns an 8x8 register tile made of 2x2 sub-tiles of
//   4x4, at rows {0, 64} + 4*qy and columns {0, 64} + 4*qx of the block tile. A warp covers
//   4 qy x 8 qx, so each k step reads 4 distinct float4 of A and 8 of B from shared memory:
//   one wavefront each, no bank conflicts.
//   K loop: tiles of 8. Each thread fetches 4 elements of A and 4 of B per tile from global
//   memory (one float4 when f32, aligned, and in range; else predicated scalars with zero fill
//   at the edges), holds them in registers while the block computes on the other shared buffer
//   (double buffering: one __syncthreads per tile), then stores them. Transposes happen while
//   storing: shared tiles are always As[k][m] and Bs[k][n]; rows are padded by 4 so the
//   transposed (column) stores of a warp hit 32 different banks.
//   Traffic: every element of A is read N/128 times and of B M/128 times (through L2); C is
//   read (beta != 0) and written once, float4 where aligned. Bound: FMA throughput for large
//   shapes (64 FMA per 16 shared-memory loads per k step); small shapes are latency bound.
//   Types: f32 and f64 compute in their own type; f16/bf16 are converted to fp32 when stored
//   to shared memory and accumulate in fp32 (no tensor cores: fp32 FMA speed).
//   Limits: M <= 65535*128 (gridDim.y); batches are launched in chunks of 65535 (gridDim.z).
#include <type_traits>

#include "kernels/cuda_common.h"
#include "kernels/matmul/matmul.h"

namespace aim::kernels::AIM_CUDA_NS {
namespace {

constexpr int kBM = 128;  // block tile rows (M)
constexpr int kBN = 128;  // block tile columns (N)
constexpr int kBK = 8;    // K slice per shared-memory tile
constexpr int kThreads = 256;
constexpr int kLd = kBM + 4;  // padded shared row: conflict-free column stores, 16-byte rows
static_assert(kBM == kBN, "the loaders below assume a square block tile");
static_assert(kThreads == 2 * kBM && kThreads == 32 * kBK, "one 4-element group per thread");

template <class T>
using AccT = typename Acc<T>::type;

template <class T>
__device__ __forceinline__ AccT<T> to_acc(T v) {
  if constexpr (std::is_same_v<T, double>) {
    return v;
  } else {
    return to_f32(v);
  }
}
template <class T>
__device__ __forceinline__ T from_acc(AccT<T> v) {
  if constexpr (std::is_same_v<T, double>) {
    return v;
  } else {
    return from_f32<T>(v);
  }
}

// Four consecutive shared-memory values (16-byte aligned) into registers.
template <class S>
__device__ __forceinline__ void lds4(const S* p, S* out) {
  if constexpr (std::is_same_v<S, float>) {
    const float4 q = *reinterpret_cast<const float4*>(p);
    out[0] = q.x, out[1] = q.y, out[2] = q.z, out[3] = q.w;
  } else {
    const double2 q0 = reinterpret_cast<const double2*>(p)[0];
    const double2 q1 = reinterpret_cast<const double2*>(p)[1];
    out[0] = q0.x, out[1] = q0.y, out[2] = q1.x, out[3] = q1.y;
  }
}
template <class S>
__device__ __forceinline__ void sts4(S* p, const S* v) {
  if constexpr (std::is_same_v<S, float>) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
    reinterpret_cast<double2*>(p)[0] = make_double2(v[0], v[1]);
    reinterpret_cast<double2*>(p)[1] = make_double2(v[2], v[3]);
  }
}

// Four consecutive elements p[0..3] of a row whose valid part ends at p[limit - 1]
// (limit may be <= 0 or > 4); out-of-range elements read as zero. vec: 16-byte aligned f32.
template <class T>
__device__ __forceinline__ void ldg4(const T* p, int64_t limit, bool vec, AccT<T>* out) {
  if constexpr (std::is_same_v<T, float>) {
    if (vec && limit >= 4) {
      const float4 q = *reinterpret_cast<const float4*>(p);
      out[0] = q.x, out[1] = q.y, out[2] = q.z, out[3] = q.w;
      return;
    }
  }
  AIM_UNROLL
  for (int i = 0; i < 4; ++i) out[i] = i < limit ? to_acc(p[i]) : AccT<T>(0);
}

// One thread's 4-element share of a 128x8 tile of an operand stored with K contiguous
// (A as [M,K], B^T as [N,K]): row o0 + tid/2, columns k0 + 4*(tid%2) + [0,4).
template <class T>
__device__ __forceinline__ void load_k_contiguous(const T* X, int64_t rows, int64_t K, int64_t o0,
                                                  int64_t k0, bool vec, AccT<T>* r) {
  const int64_t o = o0 + threadIdx.x / 2, k = k0 + (threadIdx.x % 2) * 4;
  if (o < rows) {
    ldg4(X + o * K + k, K - k, vec, r);
  } else {
    AIM_UNROLL
    for (int i = 0; i < 4; ++i) r[i] = AccT<T>(0);
  }
}
template <class S>
__device__ __forceinline__ void store_k_contiguous(S (*Xs)[kLd], const S* r) {
  const int o = threadIdx.x / 2, k = (threadIdx.x % 2) * 4;
  AIM_UNROLL
  for (int i = 0; i < 4; ++i) Xs[k + i][o] = r[i];  // the transpose: K becomes the row
}

// One thread's share of an 8x128 tile of an operand stored with M (or N) contiguous
// (A^T as [K,M], B as [K,N]): row k0 + tid/32, columns o0 + 4*(tid%32) + [0,4).
template <class T>
__device__ __forceinline__ void load_outer_contiguous(const T* X, int64_t cols, int64_t K,
                                                      int64_t o0, int64_t k0, bool vec,
                                                      AccT<T>* r) {
  const int64_t k = k0 + threadIdx.x / 32, o = o0 + (threadIdx.x % 32) * 4;
  if (k < K) {
    ldg4(X + k * cols + o, cols - o, vec, r);
  } else {
    AIM_UNROLL
    for (int i = 0; i < 4; ++i) r[i] = AccT<T>(0);
  }
}
template <class S>
__device__ __forceinline__ void store_outer_contiguous(S (*Xs)[kLd], const S* r) {
  sts4(&Xs[threadIdx.x / 32][(threadIdx.x % 32) * 4], r);
}

// A: [M,K] (or [K,M] when kTransA), B: [K,N] (or [N,K] when kTransB), C: [M,N], bias: [N] or
// null; all advanced by blockIdx.z times their batch stride (0 for a shared operand).
template <class T, bool kTransA, bool kTransB>
__global__ void __launch_bounds__(kThreads)
    matmul_tiled_kernel(const T* A, const T* B, T* C, const T* bias, int64_t M, int64_t N,
                        int64_t K, int64_t a_batch_stride, int64_t b_batch_stride, AccT<T> alpha,
                        AccT<T> beta, bool vec_a, bool vec_b, bool vec_c) {
  using S = AccT<T>;
  __shared__ __align__(16) S As[2][kBK][kLd];
  __shared__ __align__(16) S Bs[2][kBK][kLd];

  A += int64_t(blockIdx.z) * a_batch_stride;
  B += int64_t(blockIdx.z) * b_batch_stride;
  C += int64_t(blockIdx.z) * M * N;
  const int64_t m0 = int64_t(blockIdx.y) * kBM, n0 = int64_t(blockIdx.x) * kBN;

  S ra[4], rb[4];  // the next tile, in flight from global memory
  auto load = [&](int64_t k0) {
    if (kTransA) {
      load_outer_contiguous(A, M, K, m0, k0, vec_a, ra);
    } else {
      load_k_contiguous(A, M, K, m0, k0, vec_a, ra);
    }
    if (kTransB) {
      load_k_contiguous(B, N, K, n0, k0, vec_b, rb);
    } else {
      load_outer_contiguous(B, N, K, n0, k0, vec_b, rb);
    }
  };
  auto store = [&](int buf) {
    if (kTransA) {
      store_outer_contiguous(As[buf], ra);
    } else {
      store_k_contiguous(As[buf], ra);
    }
    if (kTransB) {
      store_k_contiguous(Bs[buf], rb);
    } else {
      store_outer_contiguous(Bs[buf], rb);
    }
  };

  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int qy = (warp / 2) * 4 + lane / 8;  // 0..15: rows 4*qy + [0,4) and 64 + 4*qy + [0,4)
  const int qx = (warp % 2) * 8 + lane % 8;  // 0..15: the same for columns
  S acc[8][8] = {};

  const int64_t tiles = (K + kBK - 1) / kBK;
  if (tiles > 0) {
    load(0);
    store(0);
  }
  __syncthreads();
  for (int64_t t = 0; t < tiles; ++t) {
    const int buf = int(t & 1);
    if (t + 1 < tiles) load((t + 1) * kBK);  // overlaps with the FMAs below
    AIM_UNROLL
    for (int k = 0; k < kBK; ++k) {
      S af[8], bf[8];
      lds4(&As[buf][k][4 * qy], af);
      lds4(&As[buf][k][64 + 4 * qy], af + 4);
      lds4(&Bs[buf][k][4 * qx], bf);
      lds4(&Bs[buf][k][64 + 4 * qx], bf + 4);
      AIM_UNROLL
      for (int i = 0; i < 8; ++i) {
        AIM_UNROLL
        for (int j = 0; j < 8; ++j) acc[i][j] += af[i] * bf[j];
      }
    }
    // The other buffer was last read in iteration t-1, which every thread has left.
    if (t + 1 < tiles) store(buf ^ 1);
    __syncthreads();
  }

  // Epilogue: C = alpha*acc + beta*C + bias; beta == 0 never reads C.
  AIM_UNROLL
  for (int i = 0; i < 8; ++i) {
    const int64_t row = m0 + (i / 4) * 64 + 4 * qy + i % 4;
    if (row >= M) continue;
    T* c_row = C + row * N;
    AIM_UNROLL
    for (int h = 0; h < 2; ++h) {
      const int64_t col = n0 + h * 64 + 4 * qx;
      S v[4];
      AIM_UNROLL
      for (int j = 0; j < 4; ++j) v[j] = alpha * acc[i][4 * h + j];
      if constexpr (std::is_same_v<T, float>) {
        if (vec_c && col + 4 <= N) {
          if (beta != 0.0f) {
            const float4 c4 = *reinterpret_cast<const float4*>(c_row + col);
            v[0] += beta * c4.x, v[1] += beta * c4.y, v[2] += beta * c4.z, v[3] += beta * c4.w;
          }
          if (bias) {
            const float4 b4 = *reinterpret_cast<const float4*>(bias + col);
            v[0] += b4.x, v[1] += b4.y, v[2] += b4.z, v[3] += b4.w;
          }
          *reinterpret_cast<float4*>(c_row + col) = make_float4(v[0], v[1], v[2], v[3]);
          continue;
        }
      }
      AIM_UNROLL
      for (int j = 0; j < 4; ++j) {
        if (col + j >= N) break;
        S x = v[j];
        if (beta != S(0)) x += beta * to_acc(c_row[col + j]);
        if (bias) x += to_acc(bias[col + j]);
        c_row[col + j] = from_acc<T>(x);
      }
    }
  }
}

constexpr int64_t kMaxGridYZ = 65535;

std::string tiled_supports(const MatmulArgs& a) {
  const MatmulDims d = matmul_check(a);
  const int64_t row_tiles = ceil_div(d.M, kBM);
  if (row_tiles > kMaxGridYZ)
    return str("needs M <= ", kMaxGridYZ * kBM, " (gridDim.y), got ", d.M);
  return "";
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <class T>
void launch_tiled(const MatmulArgs& a, const MatmulDims& d) {
  const T* A = static_cast<const T*>(a.a.raw_data());
  const T* B = static_cast<const T*>(a.b.raw_data());
  T* C = static_cast<T*>(a.c.raw_data());
  const T* bias = a.bias.defined() ? static_cast<const T*>(a.bias.raw_data()) : nullptr;
  const int64_t a_stride = d.a_batched ? d.M * d.K : 0, b_stride = d.b_batched ? d.K * d.N : 0;
  // float4 paths: every row start (and batch start) of the operand must be 16-byte aligned.
  constexpr bool kF32 = std::is_same_v<T, float>;
  const bool vec_a = kF32 && (a.trans_a ? d.M : d.K) % 4 == 0 && aligned16(A);
  const bool vec_b = kF32 && (a.trans_b ? d.K : d.N) % 4 == 0 && aligned16(B);
  const bool vec_c = kF32 && d.N % 4 == 0 && aligned16(C) && (!bias || aligned16(bias));
  const AccT<T> alpha = AccT<T>(a.alpha), beta = AccT<T>(a.beta);
  const cudaStream_t stream = stream_for(a.c.device());
  for (int64_t z0 = 0; z0 < d.batch; z0 += kMaxGridYZ) {
    const dim3 grid(unsigned(ceil_div(d.N, kBN)), unsigned(ceil_div(d.M, kBM)),
                    unsigned(std::min(kMaxGridYZ, d.batch - z0)));
    const T* Az = A + z0 * a_stride;
    const T* Bz = B + z0 * b_stride;
    T* Cz = C + z0 * d.M * d.N;
#define AIM_MATMUL_TILED_LAUNCH_(TA, TB)                                \
  AIM_LAUNCH(grid, kThreads, 0, stream, matmul_tiled_kernel<T, TA, TB>) \
  (Az, Bz, Cz, bias, d.M, d.N, d.K, a_stride, b_stride, alpha, beta, vec_a, vec_b, vec_c)
    if (a.trans_a && a.trans_b) {
      AIM_MATMUL_TILED_LAUNCH_(true, true);
    } else if (a.trans_a) {
      AIM_MATMUL_TILED_LAUNCH_(true, false);
    } else if (a.trans_b) {
      AIM_MATMUL_TILED_LAUNCH_(false, true);
    } else {
      AIM_MATMUL_TILED_LAUNCH_(false, false);
    }
#undef AIM_MATMUL_TILED_LAUNCH_
    AIM_CHECK_LAUNCH();
  }
}

void matmul_cuda_tiled(const MatmulArgs& a) {
  const MatmulDims d = matmul_check(a);
  if (d.M == 0 || d.N == 0 || d.batch == 0) return;
  AIM_CHECK(ceil_div(d.M, kBM) <= kMaxGridYZ, "[matmul] cuda.tiled needs M <= ", kMaxGridYZ * kBM,
            ", got ", d.M);
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.c.dtype(), T, { launch_tiled<T>(a, d); });
}

}  // namespace

void register_matmul_cuda(Registry& r) {
  auto& op = r.op<MatmulArgs>("matmul");
  op.add({"cuda.tiled",
          AIM_CUDA_BACKEND,
          Provider::Own,
          matmul_cuda_tiled,
          {DType::f32, DType::f64, DType::f16, DType::bf16},
          tiled_supports});
  // The default without cuBLAS (the emulated device); register_matmul_cublas, which runs after
  // the own families, makes cuda.cublas the default where cuBLAS is built.
  op.set_default(AIM_CUDA_BACKEND, "cuda.tiled");
}

}  // namespace aim::kernels::AIM_CUDA_NS
