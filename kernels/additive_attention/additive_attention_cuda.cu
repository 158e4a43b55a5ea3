// additive_attention_fwd / _bwd: own CUDA variants (also compiled for the SIMT emulator).
//
// cuda.block_row (forward): one 256-thread block per batch row b. ||v|| by a block sum; one warp
// per source step t computes the score (lanes over C, a warp sum), scores in shared memory
// (dynamic, T values); masked softmax by block max / sum; then threads over D sum the context
// over t < len[b]. Traffic: keys and values read once, align and context written once. Bound:
// the tanh throughput at GNMT's sizes (B*T*C tanh per decoder step), latency with few rows.
// Limits: T <= 4096 (the scores live in shared memory).
//
// cuda.block_row (backward): kernel 1, one block per row: da[t] = dcontext . values[t] (+ dalign),
// warp per t; de = align (da - sum align da) in shared memory and in an accumulator-type scratch
// [B, T]; dvalues by threads over (t, d); u[t] = v . h[t] (warp per t, for dv and dg); then
// threads over C walk t, recompute h, write dkeys and sum dquery (coalesced over c). Kernel 2,
// one block per channel c, only when dbias / dv / dg are wanted: sums de (1 - h^2) and de h over
// (b, t) with h recomputed, in a fixed order (deterministic, no atomics); block 0 adds dg.
// Accumulation in float (double for f64). Not yet timed on a GPU.
#include "kernels/cuda_common.h"
// (cuda_common.h first, as every *_cuda.cu)
#include "kernels/additive_attention/additive_attention.h"

namespace aim::kernels::AIM_CUDA_NS {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxSteps = 4096;

template <class A>
__device__ __forceinline__ A tanh_a(A x) {
  if constexpr (std::is_same_v<A, float>) {
    return tanhf(x);
  } else {
    return tanh(x);
  }
}
template <class A>
__device__ __forceinline__ A sqrt_a(A x) {
  if constexpr (std::is_same_v<A, float>) {
    return sqrtf(x);
  } else {
    return sqrt(x);
  }
}

// ||v|| over the block (every thread gets it).
template <class T, class A>
__device__ __forceinline__ A norm_v(const T* v, int64_t C, A* scratch) {
  A vv = 0;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    const A x = to_acc<A>(v[c]);
    vv += x * x;
  }
  return sqrt_a(block_sum(vv, scratch));
}

template <class T>
__global__ void fwd_kernel(const T* keys, const T* query, const T* bias, const T* v, const T* g,
                           const T* values, const int32_t* lengths, T* align, T* ctx, int64_t Tn,
                           int64_t C, int64_t D) {
  using A = typename Acc<T>::type;
  AIM_DYNAMIC_SHARED(A, e);  // [Tn] scores, then [32] scratch
  A* scratch = e + Tn;
  const int64_t b = blockIdx.x;
  const int64_t L = lengths ? int64_t(lengths[b]) : Tn;
  const A s = to_acc<A>(g[0]) / norm_v<T, A>(v, C, scratch);
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize,
            warps = blockDim.x / kWarpSize;
  for (int64_t t = warp; t < L; t += warps) {
    const T* kr = keys + (b * Tn + t) * C;
    A u = 0;
    for (int64_t c = lane; c < C; c += kWarpSize)
      u += to_acc<A>(v[c]) *
           tanh_a(to_acc<A>(kr[c]) + to_acc<A>(query[b * C + c]) + to_acc<A>(bias[c]));
    u = warp_sum(u);
    if (lane == 0) e[t] = s * u;
  }
  __syncthreads();
  A m = neg_inf<A>();
  for (int64_t t = threadIdx.x; t < L; t += blockDim.x) m = e[t] > m ? e[t] : m;
  m = block_max(m, scratch, neg_inf<A>());
  A z = 0;
  for (int64_t t = threadIdx.x; t < L; t += blockDim.x) z += exp_a(e[t] - m);
  z = block_sum(z, scratch);
  for (int64_t t = threadIdx.x; t < Tn; t += blockDim.x) {
    const A p = t < L ? exp_a(e[t] - m) / z : A(0);
    e[t] = p;  // the same thread read e[t] above
    align[b * Tn + t] = from_acc<T>(p);
  }
  __syncthreads();
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    A acc = 0;
    for (int64_t t = 0; t < L; ++t) acc += e[t] * to_acc<A>(values[(b * Tn + t) * D + d]);
    ctx[b * D + d] = from_acc<T>(acc);
  }
}

template <class T>
__global__ void bwd_rows_kernel(const T* keys, const T* query, const T* bias, const T* v,
                                const T* g, const T* values, const int32_t* lengths, const T* align,
                                const T* dctx, const T* dalign, T* dkeys, T* dquery, T* dvalues,
                                typename Acc<T>::type* des, typename Acc<T>::type* us, int64_t Tn,
                                int64_t C, int64_t D) {
  using A = typename Acc<T>::type;
  AIM_DYNAMIC_SHARED(A, da);  // [Tn] da, then [Tn] de, then [32] scratch
  A* de = da + Tn;
  A* scratch = de + Tn;
  const int64_t b = blockIdx.x;
  const int64_t L = lengths ? int64_t(lengths[b]) : Tn;
  const A s = to_acc<A>(g[0]) / norm_v<T, A>(v, C, scratch);
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize,
            warps = blockDim.x / kWarpSize;
  for (int64_t t = warp; t < Tn; t += warps) {
    const T* vr = values + (b * Tn + t) * D;
    A x = 0;
    for (int64_t d = lane; d < D; d += kWarpSize)
      x += to_acc<A>(dctx[b * D + d]) * to_acc<A>(vr[d]);
    x = warp_sum(x);
    if (lane == 0) da[t] = x + (dalign ? to_acc<A>(dalign[b * Tn + t]) : A(0));
  }
  __syncthreads();
  A sum_ada = 0;
  for (int64_t t = threadIdx.x; t < L; t += blockDim.x)
    sum_ada += to_acc<A>(align[b * Tn + t]) * da[t];
  sum_ada = block_sum(sum_ada, scratch);
  for (int64_t t = threadIdx.x; t < Tn; t += blockDim.x) {
    const A x = t < L ? to_acc<A>(align[b * Tn + t]) * (da[t] - sum_ada) : A(0);
    de[t] = x;
    des[b * Tn + t] = x;
  }
  __syncthreads();
  if (dvalues)
    for (int64_t i = threadIdx.x; i < Tn * D; i += blockDim.x) {
      const int64_t t = i / D, d = i % D;
      dvalues[b * Tn * D + i] =
          from_acc<T>(t < L ? to_acc<A>(align[b * Tn + t]) * to_acc<A>(dctx[b * D + d]) : A(0));
    }
  for (int64_t t = warp; t < Tn; t += warps) {
    const T* kr = keys + (b * Tn + t) * C;
    A u = 0;
    for (int64_t c = lane; c < C; c += kWarpSize)
      u += to_acc<A>(v[c]) *
           tanh_a(to_acc<A>(kr[c]) + to_acc<A>(query[b * C + c]) + to_acc<A>(bias[c]));
    u = warp_sum(u);
    if (lane == 0) us[b * Tn + t] = u;
  }
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    const A qc = to_acc<A>(query[b * C + c]) + to_acc<A>(bias[c]), sv = s * to_acc<A>(v[c]);
    A dq = 0;
    for (int64_t t = 0; t < Tn; ++t) {
      const A h = tanh_a(to_acc<A>(keys[(b * Tn + t) * C + c]) + qc);
      const A dh = de[t] * sv * (A(1) - h * h);
      if (dkeys) dkeys[(b * Tn + t) * C + c] = from_acc<T>(dh);
      dq += dh;
    }
    if (dquery) dquery[b * C + c] = from_acc<T>(dq);
  }
}

template <class T>
__global__ void bwd_params_kernel(const T* keys, const T* query, const T* bias, const T* v,
                                  const T* g, const typename Acc<T>::type* des,
                                  const typename Acc<T>::type* us, T* dbias, T* dv, T* dg,
                                  int64_t B, int64_t Tn, int64_t C) {
  using A = typename Acc<T>::type;
  __shared__ A scratch[32];
  const int64_t c = blockIdx.x;
  const A n = norm_v<T, A>(v, C, scratch), gg = to_acc<A>(g[0]), s = gg / n;
  A deu = 0, sb = 0, sh = 0;
  const A bc = to_acc<A>(bias[c]);
  for (int64_t i = threadIdx.x; i < B * Tn; i += blockDim.x) {
    const A h = tanh_a(to_acc<A>(keys[i * C + c]) + to_acc<A>(query[(i / Tn) * C + c]) + bc);
    deu += des[i] * us[i];
    sb += des[i] * (A(1) - h * h);
    sh += des[i] * h;
  }
  deu = block_sum(deu, scratch);
  sb = block_sum(sb, scratch);
  sh = block_sum(sh, scratch);
  if (threadIdx.x != 0) return;
  const A vc = to_acc<A>(v[c]);
  if (dbias) dbias[c] = from_acc<T>(to_acc<A>(dbias[c]) + s * vc * sb);
  if (dv) dv[c] = from_acc<T>(to_acc<A>(dv[c]) + s * sh - gg * deu * vc / (n * n * n));
  if (dg && c == 0) dg[0] = from_acc<T>(to_acc<A>(dg[0]) + deu / n);
}

template <class T>
const T* cptr(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.raw_data()) : nullptr;
}
template <class T>
T* mptr(const Tensor& t) {
  return t.defined() ? static_cast<T*>(const_cast<void*>(t.raw_data())) : nullptr;
}

std::string block_row_supports(const Tensor& keys) {
  if (keys.dim() == 3 && keys.size(1) > kMaxSteps)
    return "cuda.block_row needs T <= " + std::to_string(kMaxSteps) +
           " (scores in shared memory), got " + std::to_string(keys.size(1));
  return "";
}

void fwd_cuda_block_row(const AdditiveAttentionFwdArgs& a) {
  check_additive_attention_fwd_args(a);
  const std::string why = block_row_supports(a.keys);
  AIM_CHECK(why.empty(), "[additive_attention_fwd] ", why);
  const int64_t B = a.keys.size(0), Tn = a.keys.size(1), C = a.keys.size(2), D = a.values.size(2);
  if (B == 0) return;
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.keys.dtype(), T, {
    using A = typename Acc<T>::type;
    AIM_LAUNCH(unsigned(B), kThreads, size_t(Tn + 32) * sizeof(A), stream_for(a.keys.device()),
               fwd_kernel<T>)
    (cptr<T>(a.keys), cptr<T>(a.query), cptr<T>(a.bias), cptr<T>(a.v), cptr<T>(a.g),
     cptr<T>(a.values), cptr<int32_t>(a.lengths), mptr<T>(a.align), mptr<T>(a.context), Tn, C, D);
    AIM_CHECK_LAUNCH();
  });
}

void bwd_cuda_block_row(const AdditiveAttentionBwdArgs& a) {
  check_additive_attention_bwd_args(a);
  const std::string why = block_row_supports(a.keys);
  AIM_CHECK(why.empty(), "[additive_attention_bwd] ", why);
  const int64_t B = a.keys.size(0), Tn = a.keys.size(1), C = a.keys.size(2), D = a.values.size(2);
  if (B == 0 || C == 0) return;
  const Device dev = a.keys.device();
  const bool params = a.dbias.defined() || a.dv.defined() || a.dg.defined();
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.keys.dtype(), T, {
    using A = typename Acc<T>::type;
    Tensor des = Tensor::empty({B * Tn}, dtype_of<A>(), dev);
    Tensor us = Tensor::empty({B * Tn}, dtype_of<A>(), dev);
    AIM_LAUNCH(unsigned(B), kThreads, size_t(2 * Tn + 32) * sizeof(A), stream_for(dev),
               bwd_rows_kernel<T>)
    (cptr<T>(a.keys), cptr<T>(a.query), cptr<T>(a.bias), cptr<T>(a.v), cptr<T>(a.g),
     cptr<T>(a.values), cptr<int32_t>(a.lengths), cptr<T>(a.align), cptr<T>(a.dcontext),
     cptr<T>(a.dalign), mptr<T>(a.dkeys), mptr<T>(a.dquery), mptr<T>(a.dvalues), des.data<A>(),
     us.data<A>(), Tn, C, D);
    AIM_CHECK_LAUNCH();
    if (params) {
      AIM_LAUNCH(unsigned(C), kThreads, 0, stream_for(dev), bwd_params_kernel<T>)
      (cptr<T>(a.keys), cptr<T>(a.query), cptr<T>(a.bias), cptr<T>(a.v), cptr<T>(a.g),
       des.data<A>(), us.data<A>(), mptr<T>(a.dbias), mptr<T>(a.dv), mptr<T>(a.dg), B, Tn, C);
      AIM_CHECK_LAUNCH();
    }
  });
}

const std::vector<DType> kFloatTypes = {DType::f32, DType::f64, DType::f16, DType::bf16};

}  // namespace

void register_additive_attention_cuda(Registry& r) {
  auto& f = r.op<AdditiveAttentionFwdArgs>("additive_attention_fwd");
  f.add({"cuda.block_row", AIM_CUDA_BACKEND, Provider::Own, fwd_cuda_block_row, kFloatTypes,
         [](const AdditiveAttentionFwdArgs& a) { return block_row_supports(a.keys); }});
  f.set_default(AIM_CUDA_BACKEND, "cuda.block_row");
  auto& b = r.op<AdditiveAttentionBwdArgs>("additive_attention_bwd");
  b.add({"cuda.block_row", AIM_CUDA_BACKEND, Provider::Own, bwd_cuda_block_row, kFloatTypes,
         [](const AdditiveAttentionBwdArgs& a) { return block_row_supports(a.keys); }});
  b.set_default(AIM_CUDA_BACKEND, "cuda.block_row");
}

}  // namespace aim::kernels::AIM_CUDA_NS
