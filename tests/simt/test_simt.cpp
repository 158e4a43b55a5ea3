// Tests of the SIMT emulator itself (kernels/simt/). The kernels below are written in CUDA style
// and compiled as C++ with -DAIM_SIMT; the last group are deliberately broken kernels that the
// emulator must expose deterministically (result compared with a CPU reference must DIFFER).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/simt/simt.h"

// Exactly what kernels/cuda_common.h defines under AIM_SIMT (kept local: no dependency on it).
#define AIM_LAUNCH(grid, block, smem, stream, ...) \
  ::aim::simt::Launch(grid, block, smem, #__VA_ARGS__, __VA_ARGS__)
#define AIM_DYNAMIC_SHARED(T, name) T* name = reinterpret_cast<T*>(::aim::simt::dynamic_shared())

namespace {

constexpr unsigned kFull = 0xffffffffu;
const cudaStream_t kStream = nullptr;

// ---------------------------------------------------------------------------------------------
// Kernels.

// One partial sum per block: grid-stride load, shared-memory tree, barrier after each level.
template <int kBlock>
__global__ void block_sum_kernel(const float* x, float* partial, int n) {
  __shared__ float s[kBlock];
  const int tid = threadIdx.x;
  float v = 0.f;
  for (int i = blockIdx.x * kBlock + tid; i < n; i += gridDim.x * kBlock) v += x[i];
  s[tid] = v;
  __syncthreads();
  for (int k = kBlock / 2; k > 0; k >>= 1) {
    if (tid < k) s[tid] += s[tid + k];
    __syncthreads();
  }
  if (tid == 0) partial[blockIdx.x] = s[0];
}

template <class T>
__device__ T warp_sum_xor(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}
template <class T>
__device__ T warp_sum_down(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(kFull, v, o);
  return v;
}

// out[i] = xor-sum of i's warp (all lanes), down[w] = down-sum (lane 0).
template <class T>
__global__ void warp_sum_kernel(const T* x, T* all_lanes, T* lane0) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const T a = warp_sum_xor(x[i]);
  const T b = warp_sum_down(x[i]);
  all_lanes[i] = a;
  if (threadIdx.x % 32 == 0) lane0[i / 32] = b;
}

// Segmented broadcast and inclusive scan with a width argument.
__global__ void shfl_width_kernel(const int* x, int* bcast, int* scan, int width) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int lane = threadIdx.x % 32;
  bcast[i] = __shfl_sync(kFull, x[i], 3, width);
  int v = x[i];
  for (int o = 1; o < width; o *= 2) {
    const int t = __shfl_up_sync(kFull, v, o, width);
    if (lane % width >= o) v += t;
  }
  scan[i] = v;
}

__global__ void vote_kernel(unsigned* ballot, int* any31, int* all_lt32, int* all_lt31,
                            unsigned* active, unsigned* match, unsigned* radd) {
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
  const unsigned am = __activemask();  // converged here: every existing lane of the warp
  const unsigned b = __ballot_sync(kFull, lane % 3 == 0);
  const int a = __any_sync(kFull, lane == 31);
  const int l32 = __all_sync(kFull, lane < 32);
  const int l31 = __all_sync(kFull, lane < 31);
  const unsigned m = __match_any_sync(kFull, lane / 4);
  const unsigned r = __reduce_add_sync(kFull, unsigned(lane));
  if (lane == 0) {
    ballot[w] = b, any31[w] = a, all_lt32[w] = l32, all_lt31[w] = l31, active[w] = am;
    radd[w] = r;
  }
  match[threadIdx.x] = m;
}

// Reverses each block's chunk through dynamic shared memory; reports misalignment and poison.
__global__ void reverse_dyn_kernel(const float* x, float* y, int* misaligned, int* poison) {
  AIM_DYNAMIC_SHARED(float, s);
  const int t = threadIdx.x, n = blockDim.x;
  if (t == 0) {
    *misaligned |= int(reinterpret_cast<uintptr_t>(s) % 16 != 0);
    int bits;
    std::memcpy(&bits, &s[n - 1], 4);  // never written yet in this block
    *poison &= int(bits == -1);
  }
  __syncthreads();
  s[t] = x[blockIdx.x * n + t];
  __syncthreads();
  y[blockIdx.x * n + t] = s[n - 1 - t];
}

struct AtomicOut {
  int hist[16];
  float fsum;
  double dsum;
  unsigned long long usum;
  int imax, imin;
  unsigned cas_count;
  int exch;
  unsigned or_bits, and_bits;
  int sub;
  unsigned inc;
  __half hsum;
  __nv_bfloat16 bsum;
};

__global__ void atomics_kernel(const int* x, int n, AtomicOut* o) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int v = x[i];
  atomicAdd(&o->hist[v % 16], 1);
  atomicAdd(&o->fsum, float(v));
  atomicAdd(&o->dsum, double(v));
  atomicAdd(&o->usum, 1ull);
  atomicMax(&o->imax, v);
  atomicMin(&o->imin, v);
  unsigned old = o->cas_count, assumed;  // classic CAS loop
  do {
    assumed = old;
    old = atomicCAS(&o->cas_count, assumed, assumed + 1);
  } while (old != assumed);
  atomicExch(&o->exch, 7);
  atomicOr(&o->or_bits, 1u << (i % 32));
  atomicAnd(&o->and_bits, ~(1u << (i % 31)));
  atomicSub(&o->sub, 2);
  atomicInc(&o->inc, 1000000u);
  if (i < 1000) atomicAdd(&o->hsum, __float2half(1.0f));
  if (i < 200) atomicAdd(&o->bsum, __float2bfloat16(1.0f));
}

// Every thread writes its global coordinates; checks the x-fastest linearisation.
__global__ void coords_kernel(int* out) {
  const int gx = blockIdx.x * blockDim.x + threadIdx.x;
  const int gy = blockIdx.y * blockDim.y + threadIdx.y;
  const int gz = blockIdx.z * blockDim.z + threadIdx.z;
  const int W = gridDim.x * blockDim.x, H = gridDim.y * blockDim.y;
  const int idx = (gz * H + gy) * W + gx;
  out[3 * idx + 0] = gx, out[3 * idx + 1] = gy, out[3 * idx + 2] = gz;
}

// Threads past n return before the barrier; the others must still get through it.
__global__ void early_return_kernel(const int* x, int n, int* partial, int* counts) {
  __shared__ int s[256];
  const int tid = threadIdx.x, i = blockIdx.x * blockDim.x + tid;
  if (i >= n) return;
  s[tid] = x[i];
  const int c = __syncthreads_count(x[i] % 2 == 1);
  if (tid == 0) {
    const int active = min(int(blockDim.x), n - int(blockIdx.x * blockDim.x));
    int sum = 0;
    for (int k = 0; k < active; ++k) sum += s[k];
    partial[blockIdx.x] = sum;
    counts[blockIdx.x] = c;
  }
  const int all_pos = __syncthreads_and(x[i] >= 0), any_big = __syncthreads_or(x[i] > 1000000);
  if (tid == 0) counts[gridDim.x + blockIdx.x] = all_pos * 2 + any_big;
}

__global__ void shared_per_block_kernel(int* out) {
  __shared__ int s;
  if (threadIdx.x == 0) s = int(blockIdx.x) * 10 + 1;
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

__global__ void throwing_kernel(int* out) {
  out[blockIdx.x * blockDim.x + threadIdx.x] = 1;
  if (blockIdx.x == 3 && threadIdx.x == 17) throw std::runtime_error("boom from a kernel thread");
  __syncthreads();
}

__global__ void deadlock_kernel(float* out) {
  float v = 1.f;
  if (threadIdx.x == 0)
    __syncthreads();  // lane 0 waits for the block, lanes 1..31 wait for lane 0
  else
    v = __shfl_sync(kFull, v, 0);
  out[threadIdx.x] = v;
}

__global__ void bad_mask_kernel(int* out) {
  out[threadIdx.x] = __shfl_sync(0x0000fffeu, int(threadIdx.x), 1);  // lane 0 not in its mask
}

__global__ void exited_lane_kernel(float* out) {
  if (threadIdx.x >= 16) return;
  const float v = float(threadIdx.x) + 1.f;
  const float from_exited = __shfl_down_sync(kFull, v, 16);  // lane 16+ exited: undefined
  const float from_live = __shfl_down_sync(kFull, v, 8);
  out[2 * threadIdx.x] = from_exited, out[2 * threadIdx.x + 1] = from_live;
}

__global__ void half_shfl_kernel(const __half* h, const __nv_bfloat16* b, float* out) {
  const int lane = threadIdx.x;
  __half hv = h[lane];
  __nv_bfloat16 bv = b[lane];
  for (int o = 16; o > 0; o >>= 1) {
    hv = __hadd(hv, __shfl_xor_sync(kFull, hv, o));
    bv = __hadd(bv, __shfl_xor_sync(kFull, bv, o));
  }
  out[2 * lane] = __half2float(hv), out[2 * lane + 1] = __bfloat162float(bv);
}

__global__ void params_kernel(int n, float scale, const float* x, float* y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x ? x[i] * scale : scale;
}

__global__ void empty_kernel() {}

// Tiled GEMM C[M,N] = A[M,K] B[K,N], 16x16 tiles, one output per thread. kOffByOne is the bug:
// the bounds helper used by both tile loads and the store tests `<=` instead of `<`.
constexpr int kTile = 16;
template <bool kOffByOne>
__device__ bool in_bounds(int r, int c, int rows, int cols) {
  return kOffByOne ? (r <= rows && c <= cols) : (r < rows && c < cols);
}
template <bool kOffByOne>
__global__ void matmul_tiled_kernel(const float* A, const float* B, float* C, int M, int N, int K) {
  __shared__ float As[kTile][kTile];
  __shared__ float Bs[kTile][kTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * kTile + ty, col = blockIdx.x * kTile + tx;
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += kTile) {
    const int ak = k0 + tx, bk = k0 + ty;
    As[ty][tx] = in_bounds<kOffByOne>(row, ak, M, K) ? A[row * K + ak] : 0.f;
    Bs[ty][tx] = in_bounds<kOffByOne>(bk, col, K, N) ? B[bk * N + col] : 0.f;
    __syncthreads();
    for (int k = 0; k < kTile; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  if (in_bounds<kOffByOne>(row, col, M, N)) C[row * N + col] = acc;
}

// Broken: the tree reduction without the barrier between levels.
template <int kBlock>
__global__ void block_sum_missing_sync_kernel(const float* x, float* partial, int n) {
  __shared__ float s[kBlock];
  const int tid = threadIdx.x;
  float v = 0.f;
  for (int i = blockIdx.x * kBlock + tid; i < n; i += gridDim.x * kBlock) v += x[i];
  s[tid] = v;
  __syncthreads();
  for (int k = kBlock / 2; k > 0; k >>= 1) {
    if (tid < k) s[tid] += s[tid + k];
    // missing __syncthreads();
  }
  if (tid == 0) partial[blockIdx.x] = s[0];
}

// Broken: first shuffle offset 15 instead of 16.
__global__ void warp_sum_wrong_lane_kernel(const int* x, int* lane0) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = x[i];
  v += __shfl_down_sync(kFull, v, 15);
  for (int o = 8; o > 0; o >>= 1) v += __shfl_down_sync(kFull, v, o);
  if (threadIdx.x % 32 == 0) lane0[i / 32] = v;
}

// Neighbour difference through shared memory; kMissingSync drops the barrier.
template <bool kMissingSync>
__global__ void neighbour_kernel(const int* x, int* y) {
  __shared__ int s[128];
  const int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  s[t] = x[i];
  if (!kMissingSync) __syncthreads();
  y[i] = s[t] - (t > 0 ? s[t - 1] : 0);
}

// Barrier- and shuffle-heavy kernels for the cost measurements.
__global__ void syncwarp_loop_kernel(int iters, int* out) {
  int v = int(threadIdx.x);
  for (int r = 0; r < iters; ++r) __syncwarp();
  out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}
__global__ void syncthreads_loop_kernel(int iters, int* out) {
  for (int r = 0; r < iters; ++r) __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = 1;
}
__global__ void shfl_loop_kernel(int iters, float* out) {
  float v = float(threadIdx.x);
  for (int r = 0; r < iters; ++r) v = __shfl_xor_sync(kFull, v, 1);
  out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}

// ---------------------------------------------------------------------------------------------
// Host helpers.

std::vector<float> iota_floats(int n, int mod) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = float((i * 7 + 3) % mod);
  return v;
}

double run_block_sum(bool broken, const std::vector<float>& x, int blocks) {
  constexpr int kBlock = 256;
  std::vector<float> partial(blocks, -1.f);
  if (broken)
    AIM_LAUNCH(blocks, kBlock, 0, kStream, block_sum_missing_sync_kernel<kBlock>)
    (x.data(), partial.data(), int(x.size()));
  else
    AIM_LAUNCH(blocks, kBlock, 0, kStream, block_sum_kernel<kBlock>)
    (x.data(), partial.data(), int(x.size()));
  return std::accumulate(partial.begin(), partial.end(), 0.0);
}

// Runs the tiled matmul on arrays framed by guard values; returns max |C - ref| and whether
// the guards survived.
struct MatmulResult {
  double max_err;
  bool guards_ok;
};
template <bool kOffByOne>
MatmulResult run_matmul(int M, int N, int K) {
  constexpr int kGuard = 64;
  constexpr float kGuardVal = 1.0e6f;
  std::vector<float> A(M * K + 2 * kGuard, kGuardVal), B(K * N + 2 * kGuard, kGuardVal),
      C(M * N + 2 * kGuard, kGuardVal);
  float* a = A.data() + kGuard;
  float* b = B.data() + kGuard;
  float* c = C.data() + kGuard;
  for (int i = 0; i < M * K; ++i) a[i] = float((i * 13) % 7) - 3.f;
  for (int i = 0; i < K * N; ++i) b[i] = float((i * 5) % 9) - 4.f;
  const dim3 block(kTile, kTile), grid((N + kTile - 1) / kTile, (M + kTile - 1) / kTile);
  AIM_LAUNCH(grid, block, 0, kStream, matmul_tiled_kernel<kOffByOne>)(a, b, c, M, N, K);
  double err = 0;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double r = 0;
      for (int k = 0; k < K; ++k) r += double(a[i * K + k]) * b[k * N + j];
      err = std::max(err, std::abs(r - c[i * N + j]));
    }
  bool ok = true;
  for (int g = 0; g < kGuard; ++g) ok = ok && C[g] == kGuardVal && c[M * N + g] == kGuardVal;
  return {err, ok};
}

// ---------------------------------------------------------------------------------------------
// Correct kernels.

TEST(Simt, BlockReductionWithSharedMemoryAndBarriers) {
  const std::vector<float> x = iota_floats(100003, 17);
  const double ref = std::accumulate(x.begin(), x.end(), 0.0);
  EXPECT_EQ(run_block_sum(false, x, 37), ref);
  EXPECT_EQ(run_block_sum(false, x, 1), ref);
}

template <class T>
void check_warp_sums(T (*make)(int)) {
  const int n = 4 * 128;
  std::vector<T> x(n), all(n), lane0(n / 32);
  for (int i = 0; i < n; ++i) x[i] = make(i);
  AIM_LAUNCH(4, 128, 0, kStream, warp_sum_kernel<T>)(x.data(), all.data(), lane0.data());
  for (int w = 0; w < n / 32; ++w) {
    double ref = 0;
    for (int l = 0; l < 32; ++l) ref += double(x[w * 32 + l]);
    EXPECT_EQ(double(lane0[w]), ref) << "warp " << w;
    for (int l = 0; l < 32; ++l) EXPECT_EQ(double(all[w * 32 + l]), ref) << "warp " << w;
  }
}

TEST(Simt, WarpReductionXorAndDown) {
  check_warp_sums<int>([](int i) { return i % 11 - 5; });
  check_warp_sums<float>([](int i) { return float(i % 13); });
  check_warp_sums<double>([](int i) { return 0.5 * (i % 9); });
  check_warp_sums<long long>([](int i) { return (long long)(i) << 33; });
  check_warp_sums<unsigned>([](int i) { return unsigned(i * 3); });
}

TEST(Simt, HalfAndBfloat16Shuffles) {
  std::vector<__half> h(32);
  std::vector<__nv_bfloat16> b(32);
  std::vector<float> out(64);
  for (int i = 0; i < 32; ++i)
    h[i] = __float2half(float(i % 5)), b[i] = __float2bfloat16(float(i % 3));
  AIM_LAUNCH(1, 32, 0, kStream, half_shfl_kernel)(h.data(), b.data(), out.data());
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(out[2 * i], 61.f);      // sum of i % 5 over 0..31
    EXPECT_EQ(out[2 * i + 1], 31.f);  // sum of i % 3
  }
}

TEST(Simt, ShuffleWidthBroadcastAndScan) {
  for (int width : {32, 16, 8, 4}) {
    const int n = 64;
    std::vector<int> x(n), bc(n), sc(n);
    for (int i = 0; i < n; ++i) x[i] = (i * 5) % 7 + 1;
    AIM_LAUNCH(1, n, 0, kStream, shfl_width_kernel)(x.data(), bc.data(), sc.data(), width);
    for (int i = 0; i < n; ++i) {
      const int seg = i / width * width;
      EXPECT_EQ(bc[i], x[seg + 3 % width]) << "width " << width << " i " << i;
      int s = 0;
      for (int k = seg; k <= i; ++k) s += x[k];
      EXPECT_EQ(sc[i], s) << "width " << width << " i " << i;
    }
  }
}

TEST(Simt, BallotAnyAllMatchReduce) {
  // 72 threads: warps 0 and 1 full, warp 2 has 8 lanes (the missing lanes count as exited).
  std::vector<unsigned> ballot(3), active(3), match(72), radd(3);
  std::vector<int> any31(3), lt32(3), lt31(3);
  AIM_LAUNCH(1, 72, 0, kStream, vote_kernel)
  (ballot.data(), any31.data(), lt32.data(), lt31.data(), active.data(), match.data(), radd.data());
  unsigned every3 = 0;
  for (int l = 0; l < 32; ++l) every3 |= (l % 3 == 0 ? 1u : 0u) << l;
  for (int w = 0; w < 2; ++w) {
    EXPECT_EQ(ballot[w], every3);
    EXPECT_EQ(any31[w], 1);
    EXPECT_EQ(lt32[w], 1);
    EXPECT_EQ(lt31[w], 0);
    EXPECT_EQ(active[w], kFull);
    EXPECT_EQ(radd[w], 496u);
  }
  EXPECT_EQ(ballot[2], every3 & 0xffu);
  EXPECT_EQ(any31[2], 0);
  EXPECT_EQ(lt31[2], 1);  // all *participating* lanes are < 31
  EXPECT_EQ(active[2], 0xffu);
  EXPECT_EQ(radd[2], 28u);
  for (int t = 0; t < 72; ++t) {
    const unsigned group = 0xfu << ((t % 32) / 4 * 4);
    EXPECT_EQ(match[t], t < 64 ? group : group & 0xffu) << t;
  }
}

TEST(Simt, DynamicSharedMemory) {
  const int blocks = 9, n = 96;
  std::vector<float> x(blocks * n), y(blocks * n, 0.f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i);
  int misaligned = 0, poison = 1;
  AIM_LAUNCH(blocks, n, n * sizeof(float), kStream, reverse_dyn_kernel)
  (x.data(), y.data(), &misaligned, &poison);
  EXPECT_EQ(misaligned, 0);
  EXPECT_EQ(poison, 1) << "dynamic shared memory is filled with 0xFF at block start";
  for (int b = 0; b < blocks; ++b)
    for (int t = 0; t < n; ++t) EXPECT_EQ(y[b * n + t], x[b * n + n - 1 - t]);
}

TEST(Simt, AtomicsAcrossManyBlocks) {
  const int n = 50000;
  std::vector<int> x(n);
  for (int i = 0; i < n; ++i) x[i] = (i * 37) % 257;
  AtomicOut o{};
  o.imax = -1, o.imin = 1 << 30, o.and_bits = kFull;
  o.hsum = __float2half(0.f), o.bsum = __float2bfloat16(0.f);
  AIM_LAUNCH((n + 127) / 128, 128, 0, kStream, atomics_kernel)(x.data(), n, &o);
  int hist[16] = {};
  double sum = 0;
  for (int v : x) hist[v % 16]++, sum += v;
  for (int k = 0; k < 16; ++k) EXPECT_EQ(o.hist[k], hist[k]);
  EXPECT_EQ(double(o.fsum), sum);  // < 2^24: exact in any order
  EXPECT_EQ(o.dsum, sum);
  EXPECT_EQ(o.usum, static_cast<unsigned long long>(n));
  EXPECT_EQ(o.imax, 256);
  EXPECT_EQ(o.imin, 0);
  EXPECT_EQ(o.cas_count, unsigned(n));
  EXPECT_EQ(o.exch, 7);
  EXPECT_EQ(o.or_bits, kFull);
  EXPECT_EQ(o.and_bits, 0x80000000u);
  EXPECT_EQ(o.sub, -2 * n);
  EXPECT_EQ(o.inc, unsigned(n));
  EXPECT_EQ(__half2float(o.hsum), 1000.f);
  EXPECT_EQ(__bfloat162float(o.bsum), 200.f);
}

TEST(Simt, Grids2DAnd3D) {
  const dim3 grid(3, 4, 2), block(4, 2, 3);
  const int W = 12, H = 8, D = 6;
  std::vector<int> out(3 * W * H * D, -1);
  AIM_LAUNCH(grid, block, 0, kStream, coords_kernel)(out.data());
  for (int z = 0; z < D; ++z)
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x) {
        const int idx = (z * H + y) * W + x;
        ASSERT_EQ(out[3 * idx + 0], x);
        ASSERT_EQ(out[3 * idx + 1], y);
        ASSERT_EQ(out[3 * idx + 2], z);
      }
}

TEST(Simt, EarlyReturnedThreadsDoNotBlockLaterBarriers) {
  const int n = 3 * 256 + 77, blocks = 4;
  std::vector<int> x(n), partial(blocks, -1), counts(2 * blocks, -1);
  for (int i = 0; i < n; ++i) x[i] = i % 10;
  AIM_LAUNCH(blocks, 256, 0, kStream, early_return_kernel)
  (x.data(), n, partial.data(), counts.data());
  for (int b = 0; b < blocks; ++b) {
    int sum = 0, odd = 0;
    for (int i = b * 256; i < std::min(n, (b + 1) * 256); ++i) sum += x[i], odd += x[i] % 2;
    EXPECT_EQ(partial[b], sum);
    EXPECT_EQ(counts[b], odd);
    EXPECT_EQ(counts[blocks + b], 2);  // and: all >= 0, or: none > 1e6
  }
}

TEST(Simt, SharedMemoryIsPerBlock) {
  const int blocks = 64, t = 64;
  std::vector<int> out(blocks * t);
  AIM_LAUNCH(blocks, t, 0, kStream, shared_per_block_kernel)(out.data());
  for (int b = 0; b < blocks; ++b)
    for (int i = 0; i < t; ++i) ASSERT_EQ(out[b * t + i], b * 10 + 1);
}

TEST(Simt, ParametersConvertLikeACudaLaunch) {
  std::vector<float> x = {1, 2, 3}, y(3);
  const int64_t n = 3;  // int64_t -> int, double -> float, as a <<<>>> launch converts
  AIM_LAUNCH(dim3(1), 32, 0, kStream, params_kernel)(n, 2.0, x.data(), y.data());
  EXPECT_EQ(y, (std::vector<float>{2, 4, 6}));
  AIM_LAUNCH(1, 32, 0, kStream, params_kernel)(n, 5.0f, nullptr, y.data());
  EXPECT_EQ(y, (std::vector<float>{5, 5, 5}));
  AIM_LAUNCH(100, 1, 0, kStream, empty_kernel)();
}

TEST(Simt, ExceptionInAKernelThreadPropagates) {
  std::vector<int> out(8 * 64);
  try {
    AIM_LAUNCH(8, 64, 0, kStream, throwing_kernel)(out.data());
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "boom from a kernel thread");
  }
  // The emulator is usable afterwards.
  std::vector<int> out2(64 * 64);
  AIM_LAUNCH(64, 64, 0, kStream, shared_per_block_kernel)(out2.data());
  EXPECT_EQ(out2[64 * 5 + 3], 51);
}

TEST(Simt, InvalidConfigurationsThrowNamingTheKernel) {
  std::vector<int> out(4096);
  auto msg = [&](dim3 g, dim3 b, size_t smem) -> std::string {
    try {
      AIM_LAUNCH(g, b, smem, kStream, shared_per_block_kernel)(out.data());
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(msg(1, 1025, 0).find("shared_per_block_kernel"), std::string::npos);
  EXPECT_NE(msg(1, dim3(32, 32, 2), 0).find("1024"), std::string::npos);
  EXPECT_NE(msg(0, 32, 0).find("zero"), std::string::npos);
  EXPECT_NE(msg(dim3(1, 0), 32, 0).find("zero"), std::string::npos);
  EXPECT_NE(msg(1, 32, 1 << 20).find("shared memory"), std::string::npos);
}

TEST(Simt, DeadlockAndMaskMisuseAreReported) {
  std::vector<float> f(32);
  std::vector<int> i(32);
  try {
    AIM_LAUNCH(1, 32, 0, kStream, deadlock_kernel)(f.data());
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("deadlock"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("deadlock_kernel"), std::string::npos) << e.what();
  }
  try {
    AIM_LAUNCH(1, 32, 0, kStream, bad_mask_kernel)(i.data());
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("not in the mask"), std::string::npos) << e.what();
  }
}

TEST(Simt, ReadingAnExitedLaneGivesPoison) {
  std::vector<float> out(32, 0.f);
  AIM_LAUNCH(1, 32, 0, kStream, exited_lane_kernel)(out.data());
  for (int l = 0; l < 16; ++l) {
    EXPECT_TRUE(std::isnan(out[2 * l])) << l;  // 0xFFFFFFFF
    if (l < 8)
      EXPECT_EQ(out[2 * l + 1], float(l + 9)) << l;
    else  // lanes 8..15 read lanes 16..23, which exited
      EXPECT_TRUE(std::isnan(out[2 * l + 1])) << l;
  }
}

TEST(Simt, CorrectTiledMatmulAtNonMultipleSizes) {
  for (auto [M, N, K] : {std::tuple{37, 29, 23}, std::tuple{16, 16, 16}, std::tuple{1, 50, 3}}) {
    const MatmulResult r = run_matmul<false>(M, N, K);
    EXPECT_LT(r.max_err, 1e-3) << M << "x" << N << "x" << K;
    EXPECT_TRUE(r.guards_ok);
  }
}

// ---------------------------------------------------------------------------------------------
// Deliberately broken kernels: the emulator must expose each bug, deterministically.

TEST(SimtBroken, MissingSyncthreadsInTreeReductionIsCaught) {
  // Forward schedule: thread 0 runs its whole loop before thread 64 has done its first level,
  // so s[0] += s[64] reads a not-yet-updated partial.
  using aim::simt::Schedule;
  const std::vector<float> x = iota_floats(100003, 17);
  const double ref = std::accumulate(x.begin(), x.end(), 0.0);
  aim::simt::set_schedule(Schedule::Forward);
  const double got = run_block_sum(true, x, 37);
  EXPECT_NE(got, ref);
  EXPECT_EQ(run_block_sum(true, x, 37), got) << "must be deterministic";
  // The reverse order happens to compute the right sum here (each s[t + k] is finished before
  // thread t reads it): one order alone cannot expose every missing barrier; run both in CI.
  aim::simt::set_schedule(Schedule::Reverse);
  EXPECT_EQ(run_block_sum(true, x, 37), ref);
  aim::simt::set_schedule(Schedule::Forward);
}

TEST(SimtBroken, OffByOneTileEdgeInMatmulIsCaught) {
  // Not multiples of 16: the edge tiles read one row/column past A and B (into the guard
  // values) and the edge threads write one past C. At multiples of 16 the bug would be silent.
  for (int rep = 0; rep < 2; ++rep) {  // exposed on every run, not by chance
    const MatmulResult r = run_matmul<true>(37, 29, 23);
    EXPECT_GT(r.max_err, 1.0);
    EXPECT_FALSE(r.guards_ok);
  }
}

TEST(SimtBroken, WrongShuffleLaneInWarpReductionIsCaught) {
  const int n = 256;
  std::vector<int> x(n), got(n / 32);
  for (int i = 0; i < n; ++i) x[i] = i + 1;
  AIM_LAUNCH(2, 128, 0, kStream, warp_sum_wrong_lane_kernel)(x.data(), got.data());
  for (int w = 0; w < n / 32; ++w) {
    int ref = 0;
    for (int l = 0; l < 32; ++l) ref += x[w * 32 + l];
    EXPECT_NE(got[w], ref) << "warp " << w;
  }
}

TEST(SimtBroken, MissingBarrierBeforeNeighbourReadNeedsReverseSchedule) {
  const int n = 4 * 128;
  std::vector<int> x(n), y(n), ref(n);
  for (int i = 0; i < n; ++i) x[i] = (i * 31) % 97;
  for (int i = 0; i < n; ++i) ref[i] = x[i] - (i % 128 > 0 ? x[i - 1] : 0);
  auto run = [&](auto kernel, aim::simt::Schedule s) {
    aim::simt::set_schedule(s);
    std::fill(y.begin(), y.end(), 0);
    AIM_LAUNCH(4, 128, 0, kStream, kernel)(x.data(), y.data());
    aim::simt::set_schedule(aim::simt::Schedule::Forward);
    return y;
  };
  using aim::simt::Schedule;
  EXPECT_EQ(run(neighbour_kernel<false>, Schedule::Forward), ref);
  EXPECT_EQ(run(neighbour_kernel<false>, Schedule::Reverse), ref);
  // Thread t reads what thread t-1 writes: hidden when t-1 runs first, exposed in reverse.
  EXPECT_EQ(run(neighbour_kernel<true>, Schedule::Forward), ref);
  EXPECT_NE(run(neighbour_kernel<true>, Schedule::Reverse), ref);
  // And the tree reduction is still right under Reverse when the barrier is there.
  aim::simt::set_schedule(Schedule::Reverse);
  const std::vector<float> xs = iota_floats(5000, 17);
  EXPECT_EQ(run_block_sum(false, xs, 3), std::accumulate(xs.begin(), xs.end(), 0.0));
  aim::simt::set_schedule(Schedule::Forward);
}

// ---------------------------------------------------------------------------------------------
// Costs (printed; see README). Loose bounds only, to catch a pathological regression.

template <class F>
double seconds(F f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(SimtPerf, SwitchAndBarrierCosts) {
  const int blocks = 8, threads = 256, iters = 200;
  std::vector<int> out(blocks * threads);
  std::vector<float> fout(blocks * threads);
  const double n_waits = double(blocks) * threads * iters;
  // One __syncwarp = each lane arrives and switches to the next runnable fiber: ~1 switch.
  const double t_warp = seconds([&] {
    AIM_LAUNCH(blocks, threads, 0, kStream, syncwarp_loop_kernel)(iters, out.data());
  });
  const double t_bar = seconds([&] {
    AIM_LAUNCH(blocks, threads, 0, kStream, syncthreads_loop_kernel)(iters, out.data());
  });
  const double t_shfl = seconds([&] {
    AIM_LAUNCH(blocks, threads, 0, kStream, shfl_loop_kernel)(iters, fout.data());
  });
  const int M = 256;
  const double t_mm = seconds([&] { run_matmul<false>(M, M, M); });  // includes the CPU check
  std::printf(
      "[simt] wall time per thread and op: __syncwarp %.1f ns, __syncthreads %.1f ns,"
      " __shfl_xor_sync %.1f ns; matmul %d^3 incl. reference %.3f s\n",
      1e9 * t_warp / n_waits, 1e9 * t_bar / n_waits, 1e9 * t_shfl / n_waits, M, t_mm);
  EXPECT_LT(1e9 * t_shfl / n_waits, 2000.0);
}

}  // namespace
