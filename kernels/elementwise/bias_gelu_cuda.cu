// bias_gelu_fwd, bias_gelu_bwd: own CUDA variants.
// cuda.col (forward and backward): a 2-D grid; blockIdx.x covers 256 columns, one thread per
// column with its bias in a register; blockIdx.y is a chunk of rows that the thread walks, so a
// warp reads 32 consecutive elements of a row (coalesced) and the bias is read once per (column,
// chunk). gelu / gelu' through unary.h's scalar math, the kind a template parameter; 16-bit types
// compute in f32, f64 in f64. Traffic: x (and dy) read once, y (dx) written once: bandwidth bound
// except for the erf/exp math on f64. Backward: each thread also sums its dx down its rows into a
// [chunks, C] scratch (f32; f64 for f64), and a second kernel, one thread per column, adds the
// chunks in order into dbias: deterministic, no atomics. Limits: C < 256 leaves threads of each
// block idle (C = 1 runs 1 of 256); 4-byte loads of f32 (no 16-byte vectors yet); not yet timed
// on a GPU.
#include <algorithm>

#include "kernels/cuda_common.h"
#include "kernels/elementwise/bias_gelu.h"

namespace aim::kernels::AIM_CUDA_NS {
namespace {

constexpr int kThreads = 256;

// This thread's column c and its chunk's rows [n0, n1) (chunk blockIdx.y of rows_per_chunk rows).
struct ColRows {
  int64_t c, n0, n1;
  __device__ ColRows(int64_t N, int64_t rows_per_chunk)
      : c(int64_t(blockIdx.x) * kThreads + threadIdx.x),
        n0(int64_t(blockIdx.y) * rows_per_chunk),
        n1(n0 + rows_per_chunk < N ? n0 + rows_per_chunk : N) {}
};

template <class T, UnaryKind K>
__global__ void fwd_col_kernel(const T* x, const T* bias, T* y, int64_t N, int64_t C,
                               int64_t rows_per_chunk) {
  using A = typename Acc<T>::type;
  const ColRows j(N, rows_per_chunk);
  const int64_t c = j.c;
  if (c >= C) return;
  const A b = to_acc<A>(bias[c]);
  for (int64_t n = j.n0; n < j.n1; ++n)
    y[n * C + c] = from_acc<T>(unary_value<A>(K, to_acc<A>(x[n * C + c]) + b, A(0), A(0)));
}

// part: [chunks, C] (null: dbias not wanted); chunk blockIdx.y covers rows
// [blockIdx.y * rows_per_chunk, (blockIdx.y + 1) * rows_per_chunk).
template <class T, UnaryKind K>
__global__ void bwd_col_kernel(const T* dy, const T* x, const T* bias, T* dx,
                               typename Acc<T>::type* part, int64_t N, int64_t C,
                               int64_t rows_per_chunk) {
  using A = typename Acc<T>::type;
  const ColRows j(N, rows_per_chunk);
  const int64_t c = j.c;
  if (c >= C) return;
  const A b = to_acc<A>(bias[c]);
  A s = 0;
  for (int64_t n = j.n0; n < j.n1; ++n) {
    const int64_t i = n * C + c;
    const A d = unary_bwd_value<A>(K, to_acc<A>(dy[i]), to_acc<A>(x[i]) + b, A(0), A(0), A(0));
    dx[i] = from_acc<T>(d);
    s += d;
  }
  if (part) part[int64_t(blockIdx.y) * C + c] = s;
}

template <class T>
__global__ void dbias_kernel(const typename Acc<T>::type* part, T* dbias, int64_t chunks,
                             int64_t C) {
  using A = typename Acc<T>::type;
  const int64_t c = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (c >= C) return;
  A s = 0;
  for (int64_t k = 0; k < chunks; ++k) s += part[k * C + c];  // chunk order: deterministic
  dbias[c] = from_acc<T>(to_acc<A>(dbias[c]) + s);
}

template <class T, UnaryKind K>
void launch_fwd(const BiasGeluFwdArgs& a) {
  const int64_t N = a.x.size(0), C = a.x.size(1);
  const int64_t chunks = std::min<int64_t>(ceil_div(N, 4), 65535);
  const int64_t rows_per_chunk = ceil_div(N, chunks);
  AIM_LAUNCH(dim3(unsigned(ceil_div(C, kThreads)), unsigned(chunks)), kThreads, 0,
             stream_for(a.x.device()), fwd_col_kernel<T, K>)
  (static_cast<const T*>(a.x.raw_data()), static_cast<const T*>(a.bias.raw_data()),
   static_cast<T*>(a.y.raw_data()), N, C, rows_per_chunk);
  AIM_CHECK_LAUNCH();
}

template <class T, UnaryKind K>
void launch_bwd(const BiasGeluBwdArgs& a) {
  using A = typename Acc<T>::type;
  const int64_t N = a.x.size(0), C = a.x.size(1);
  const Device dev = a.x.device();
  // At most 256 chunks: the scratch stays small beside dx (BERT-base: 16 rows per chunk).
  const int64_t chunks = std::min<int64_t>(ceil_div(N, 16), 256);
  const int64_t rows_per_chunk = ceil_div(N, chunks);
  const bool sums = a.dbias.defined();
  Tensor part = sums ? Tensor::empty({chunks, C}, dtype_of<A>(), dev) : Tensor();
  const unsigned col_blocks = unsigned(ceil_div(C, kThreads));
  AIM_LAUNCH(dim3(col_blocks, unsigned(chunks)), kThreads, 0, stream_for(dev), bwd_col_kernel<T, K>)
  (static_cast<const T*>(a.dy.raw_data()), static_cast<const T*>(a.x.raw_data()),
   static_cast<const T*>(a.bias.raw_data()), static_cast<T*>(a.dx.raw_data()),
   sums ? part.data<A>() : nullptr, N, C, rows_per_chunk);
  AIM_CHECK_LAUNCH();
  if (!sums) return;
  AIM_LAUNCH(col_blocks, kThreads, 0, stream_for(dev), dbias_kernel<T>)
  (part.data<A>(), static_cast<T*>(a.dbias.raw_data()), chunks, C);
  AIM_CHECK_LAUNCH();
}

void bias_gelu_fwd_cuda_col(const BiasGeluFwdArgs& a) {
  check_bias_gelu_fwd_args(a);
  if (a.x.size(0) == 0 || a.x.size(1) == 0) return;
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.x.dtype(), T, {
    if (a.tanh)
      launch_fwd<T, UnaryKind::gelu_tanh>(a);
    else
      launch_fwd<T, UnaryKind::gelu_erf>(a);
  });
}

void bias_gelu_bwd_cuda_col(const BiasGeluBwdArgs& a) {
  check_bias_gelu_bwd_args(a);
  if (a.x.size(0) == 0 || a.x.size(1) == 0) return;  // dbias += 0
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.x.dtype(), T, {
    if (a.tanh)
      launch_bwd<T, UnaryKind::gelu_tanh>(a);
    else
      launch_bwd<T, UnaryKind::gelu_erf>(a);
  });
}

const std::vector<DType> kFloatTypes = {DType::f32, DType::f64, DType::f16, DType::bf16};

}  // namespace

void register_bias_gelu_cuda(Registry& r) {
  auto& f = r.op<BiasGeluFwdArgs>("bias_gelu_fwd");
  f.add({"cuda.col", AIM_CUDA_BACKEND, Provider::Own, bias_gelu_fwd_cuda_col, kFloatTypes});
  f.set_default(AIM_CUDA_BACKEND, "cuda.col");
  auto& b = r.op<BiasGeluBwdArgs>("bias_gelu_bwd");
  b.add({"cuda.col", AIM_CUDA_BACKEND, Provider::Own, bias_gelu_bwd_cuda_col, kFloatTypes});
  b.set_default(AIM_CUDA_BACKEND, "cuda.col");
}

}  // namespace aim::kernels::AIM_CUDA_NS
