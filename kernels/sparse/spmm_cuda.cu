// cuda.warp_row (spmm, default): row split. A group of G lanes per row, G = the power of two
// >= N capped at 32 (GCN's N = 16 hidden or 7 classes would leave most of a warp idle), so one
// warp serves 32 / G rows. Each lane owns columns lane, lane + G, ... and walks its row's
// entries, loading x[col, c] (coalesced across the group) and keeping the sum in a register; y
// written once, no atomics, deterministic. Bound: x reads (gathered rows, L2-resident for
// Cora-sized x). Limit: a very long row serialises on its group (power-law graphs: cuda.merge).
// cuda.merge (spmm): nnz-balanced merge path (Merrill & Garland, SC'16). The M row ends and the
// nnz entries form one merged sequence of M + nnz items, cut into segments of kItems; each
// segment finds its start by a binary search along its diagonal, so every segment does the same
// work whatever the row lengths. Threads: 32 lanes per segment, one column each (grid.y tiles
// the columns by 32). A row that ends inside a segment is stored by that segment; the partial sum
// of the row a segment leaves unfinished is its "carry", added by a second kernel with an atomic
// add (after the first kernel: no race with the store). Deterministic unless one row spans three
// or more segments (several carries meet in one atomic add). Scratch: S i32 + S N values.
// cuda.warp_row (spmm_dvalues): one warp per row; per entry, the lanes split the N-long dot
// product and reduce it with shuffles; lane 0 adds into dvalues. Deterministic.
// f32 and f64. The CSR content (monotone row_ptr, columns in [0, K)) is not checked here: it is
// checked once on the host when the matrix is built (kernels/sparse/csr.h check_csr); a bad
// column is skipped (never read out of bounds).
#include <algorithm>

#include "kernels/cuda_common.h"
#include "kernels/sparse/spmm.h"

namespace aim::kernels::AIM_CUDA_NS {
namespace {

constexpr int kThreads = 256;
constexpr int kItems = 128;  // merge-path items (row ends + entries) per segment
constexpr int kSegmentsPerBlock = kThreads / kWarpSize;

// ---- spmm: cuda.warp_row --------------------------------------------------------------------

template <class T>
__global__ void spmm_row_kernel(const int32_t* row_ptr, const int32_t* col_idx, const T* values,
                                const T* x, T* y, int64_t M, int64_t K, int64_t N, int group) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t row = t / group;
  const int lane = int(t % group);
  if (row >= M) return;
  const int32_t b = row_ptr[row], e = row_ptr[row + 1];
  T* yr = y + row * N;
  for (int64_t c = lane; c < N; c += group) {
    T acc = T(0);
    for (int32_t k = b; k < e; ++k) {
      const int64_t col = col_idx[k];
      if (col >= 0 && col < K) acc += values[k] * x[col * N + c];
    }
    yr[c] = acc;
  }
}

int group_for(int64_t N) {
  int g = 1;
  while (g < N && g < kWarpSize) g *= 2;
  return g;
}

template <class T>
void launch_row(const SpmmArgs& a) {
  const int64_t M = a.row_ptr.numel() - 1, K = a.x.size(0), N = a.x.size(1);
  const int g = group_for(N);
  AIM_LAUNCH(unsigned(ceil_div(M * g, kThreads)), kThreads, 0, stream_for(a.x.device()),
             spmm_row_kernel<T>)
  (a.row_ptr.data<int32_t>(), a.col_idx.data<int32_t>(), a.values.data<T>(), a.x.data<T>(),
   a.y.data<T>(), M, K, N, g);
  AIM_CHECK_LAUNCH();
}

void spmm_cuda_warp_row(const SpmmArgs& a) {
  check_spmm_args(a);
  if (a.y.numel() == 0) return;
  if (a.x.dtype() == DType::f32)
    launch_row<float>(a);
  else
    launch_row<double>(a);
}

std::string row_supports(const SpmmArgs& a) {
  const int64_t M = a.row_ptr.numel() - 1;
  if (ceil_div(M * group_for(a.x.size(1)), kThreads) > int64_t(0x7fffffff))
    return str("needs M * group / ", kThreads, " < 2^31 blocks, got M = ", M);
  return "";
}

// ---- spmm: cuda.merge -----------------------------------------------------------------------

// The merge-path coordinate at `diag`: i row ends and j entries consumed, i + j = diag. Row end
// i (at offset row_ptr[i + 1]) comes before entry j when row_ptr[i + 1] <= j.
__device__ __forceinline__ void merge_search(int64_t diag, const int32_t* row_ptr, int64_t M,
                                             int64_t nnz, int64_t& i, int64_t& j) {
  int64_t lo = diag - nnz > 0 ? diag - nnz : 0, hi = diag < M ? diag : M;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (int64_t(row_ptr[mid + 1]) <= diag - mid - 1)
      lo = mid + 1;
    else
      hi = mid;
  }
  i = lo;
  j = diag - lo;
}

template <class T>
__global__ void spmm_merge_kernel(const int32_t* row_ptr, const int32_t* col_idx, const T* values,
                                  const T* x, T* y, int64_t M, int64_t K, int64_t N, int64_t nnz,
                                  int64_t segments, int32_t* carry_row, T* carry_val) {
  const int64_t s = int64_t(blockIdx.x) * kSegmentsPerBlock + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t c = int64_t(blockIdx.y) * kWarpSize + lane;
  if (s >= segments) return;
  const int64_t total = M + nnz;
  const int64_t d0 = s * kItems, d1 = d0 + kItems < total ? d0 + kItems : total;
  int64_t i, j, i1, j1;
  merge_search(d0, row_ptr, M, nnz, i, j);
  merge_search(d1, row_ptr, M, nnz, i1, j1);
  T acc = T(0);
  for (; i < i1; ++i) {  // rows that end in this segment: stored here
    const int64_t end = row_ptr[i + 1];
    for (; j < end; ++j) {
      const int64_t col = col_idx[j];
      if (c < N && col >= 0 && col < K) acc += values[j] * x[col * N + c];
    }
    if (c < N) y[i * N + c] = acc;
    acc = T(0);
  }
  const int64_t tail = j;
  for (; j < j1; ++j) {  // the start of row i1, finished by a later segment: carried
    const int64_t col = col_idx[j];
    if (c < N && col >= 0 && col < K) acc += values[j] * x[col * N + c];
  }
  if (blockIdx.y == 0 && lane == 0) carry_row[s] = (i1 < M && j1 > tail) ? int32_t(i1) : -1;
  if (c < N) carry_val[s * N + c] = acc;
}

template <class T>
__global__ void spmm_carry_kernel(const int32_t* carry_row, const T* carry_val, T* y, int64_t N,
                                  int64_t segments) {
  const int64_t s = int64_t(blockIdx.x) * kSegmentsPerBlock + threadIdx.x / kWarpSize;
  const int64_t c = int64_t(blockIdx.y) * kWarpSize + threadIdx.x % kWarpSize;
  if (s >= segments || c >= N) return;
  const int32_t row = carry_row[s];
  if (row >= 0) atomicAdd(y + int64_t(row) * N + c, carry_val[s * N + c]);
}

template <class T>
void launch_merge(const SpmmArgs& a) {
  const int64_t M = a.row_ptr.numel() - 1, K = a.x.size(0), N = a.x.size(1);
  const int64_t nnz = a.col_idx.numel();
  const int64_t segments = ceil_div(M + nnz, int64_t(kItems));
  const Device dev = a.x.device();
  Tensor carry_row = Tensor::empty({segments}, DType::i32, dev);
  Tensor carry_val = Tensor::empty({segments, N}, a.x.dtype(), dev);
  const dim3 grid(unsigned(ceil_div(segments, int64_t(kSegmentsPerBlock))),
                  unsigned(ceil_div(N, int64_t(kWarpSize))));
  AIM_LAUNCH(grid, kThreads, 0, stream_for(dev), spmm_merge_kernel<T>)
  (a.row_ptr.data<int32_t>(), a.col_idx.data<int32_t>(), a.values.data<T>(), a.x.data<T>(),
   a.y.data<T>(), M, K, N, nnz, segments, carry_row.data<int32_t>(), carry_val.data<T>());
  AIM_CHECK_LAUNCH();
  AIM_LAUNCH(grid, kThreads, 0, stream_for(dev), spmm_carry_kernel<T>)
  (carry_row.data<int32_t>(), carry_val.data<T>(), a.y.data<T>(), N, segments);
  AIM_CHECK_LAUNCH();
}

void spmm_cuda_merge(const SpmmArgs& a) {
  check_spmm_args(a);
  if (a.y.numel() == 0) return;
  if (a.x.dtype() == DType::f32)
    launch_merge<float>(a);
  else
    launch_merge<double>(a);
}

std::string merge_supports(const SpmmArgs& a) {
  const int64_t M = a.row_ptr.numel() - 1, nnz = a.col_idx.numel();
  if (M >= int64_t(0x7fffffff)) return str("needs M < 2^31 (i32 carry rows), got ", M);
  if (ceil_div(a.x.size(1), int64_t(kWarpSize)) > 65535)
    return str("needs N <= ", 65535 * kWarpSize, ", got ", a.x.size(1));
  if (ceil_div(ceil_div(M + nnz, int64_t(kItems)), int64_t(kSegmentsPerBlock)) > 0x7fffffff)
    return str("needs (M + nnz) / ", kItems * kSegmentsPerBlock, " < 2^31 blocks");
  return "";
}

// ---- spmm_dvalues: cuda.warp_row ------------------------------------------------------------

template <class T>
__global__ void dvalues_row_kernel(const int32_t* row_ptr, const int32_t* col_idx, const T* dy,
                                   const T* x, T* dvalues, int64_t M, int64_t K, int64_t N) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row = int64_t(blockIdx.x) * kSegmentsPerBlock + threadIdx.x / kWarpSize;
  if (row >= M) return;  // the whole warp leaves together: no divergence at the shuffles
  const T* g = dy + row * N;
  for (int32_t e = row_ptr[row]; e < row_ptr[row + 1]; ++e) {
    const int64_t col = col_idx[e];
    T s = T(0);
    if (col >= 0 && col < K)
      for (int64_t c = lane; c < N; c += kWarpSize) s += g[c] * x[col * N + c];
    s = warp_sum(s);
    if (lane == 0) dvalues[e] += s;
  }
}

void dvalues_cuda_warp_row(const SpmmDvaluesArgs& a) {
  check_spmm_dvalues_args(a);
  const int64_t M = a.row_ptr.numel() - 1, K = a.x.size(0), N = a.x.size(1);
  if (M == 0 || a.col_idx.numel() == 0) return;
  const unsigned blocks = unsigned(ceil_div(M, int64_t(kSegmentsPerBlock)));
  const auto stream = stream_for(a.x.device());
  if (a.x.dtype() == DType::f32) {
    AIM_LAUNCH(blocks, kThreads, 0, stream, dvalues_row_kernel<float>)
    (a.row_ptr.data<int32_t>(), a.col_idx.data<int32_t>(), a.dy.data<float>(), a.x.data<float>(),
     a.dvalues.data<float>(), M, K, N);
  } else {
    AIM_LAUNCH(blocks, kThreads, 0, stream, dvalues_row_kernel<double>)
    (a.row_ptr.data<int32_t>(), a.col_idx.data<int32_t>(), a.dy.data<double>(), a.x.data<double>(),
     a.dvalues.data<double>(), M, K, N);
  }
  AIM_CHECK_LAUNCH();
}

const std::vector<DType> kTypes = {DType::f32, DType::f64};

}  // namespace

void register_spmm_cuda(Registry& r) {
  auto& f = r.op<SpmmArgs>("spmm");
  f.add(
      {"cuda.warp_row", AIM_CUDA_BACKEND, Provider::Own, spmm_cuda_warp_row, kTypes, row_supports});
  f.add({"cuda.merge", AIM_CUDA_BACKEND, Provider::Own, spmm_cuda_merge, kTypes, merge_supports});
  f.set_default(AIM_CUDA_BACKEND, "cuda.warp_row");  // deterministic; GCN rows are short
  f.set_nondeterministic("cuda.merge", "cuda.warp_row",
                         "float atomicAdd of the rows split across merge-path segments");
  auto& d = r.op<SpmmDvaluesArgs>("spmm_dvalues");
  d.add({"cuda.warp_row", AIM_CUDA_BACKEND, Provider::Own, dvalues_cuda_warp_row, kTypes});
  d.set_default(AIM_CUDA_BACKEND, "cuda.warp_row");
}

}  // namespace aim::kernels::AIM_CUDA_NS
