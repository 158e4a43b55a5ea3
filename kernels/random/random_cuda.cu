// random: own CUDA variants.
//
// cuda.philox4 (uniform, normal, bernoulli, dropout_fwd): one thread per Philox counter block,
// grid-stride over blocks. A thread computes the block's 4 words once (10 rounds of 32-bit
// multiplies) and writes elements 4b..4b+3, exactly the elements tensor/philox.h assigns to
// block offset + b, so the numbers equal cpu.ref's bitwise (normal: Box-Muller in double as on
// the host; the GPU's double log/sin/cos may differ in the last double bit, i.e. rarely one f32
// ulp). Traffic: y written once (dropout: x read, y and mask written) -> bandwidth bound on
// H100-class GPUs for f32 (Philox costs ~20 integer ops per element); normal is bound by the
// double-precision transcendentals.
//
// cuda.grid_stride (dropout_bwd): one thread per element, dx = mask ? dy * scale : 0.
// Bandwidth bound.
#include "kernels/cuda_common.h"
#include "kernels/random/random.h"

namespace aim::kernels::AIM_CUDA_NS {
namespace {

constexpr int kThreads = 256;

// Value v (0/1 or a float) stored as T: 16-bit floats round to nearest even, bool is v != 0.
template <class T>
__device__ __forceinline__ T store(float v) {
  if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) {
    return from_f32<T>(v);
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != 0.0f;
  } else {
    return static_cast<T>(v);
  }
}

// x * scale in the accumulation type (double for f64, float otherwise), as cpu.ref does.
template <class T>
__device__ __forceinline__ T scaled(T x, float scale) {
  if constexpr (std::is_same_v<T, double>) {
    return x * double(scale);
  } else {
    return from_f32<T>(to_f32(x) * scale);
  }
}

__device__ __forceinline__ float unit(const philox::U4& w, int lane) {
  return philox::to_unit(philox::word(w, lane));
}

#define AIM_FOR_EACH_BLOCK(n, b)                                                      \
  for (int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; b < ((n) + 3) / 4; \
       b += int64_t(gridDim.x) * blockDim.x)

template <class T>
__global__ void uniform_kernel(T* y, int64_t n, float lo, float hi, uint64_t seed,
                               uint64_t offset) {
  AIM_FOR_EACH_BLOCK(n, b) {
    const philox::U4 w = philox::block_words(seed, offset + uint64_t(b));
    for (int lane = 0; lane < 4 && 4 * b + lane < n; ++lane)
      y[4 * b + lane] = store<T>(uniform_value(lo, hi, unit(w, lane)));
  }
}

template <class T>
__global__ void normal_kernel(T* y, int64_t n, float mean, float std, uint64_t seed,
                              uint64_t offset) {
  AIM_FOR_EACH_BLOCK(n, b) {
    const philox::U4 w = philox::block_words(seed, offset + uint64_t(b));
    for (int lane = 0; lane < 4 && 4 * b + lane < n; ++lane)
      y[4 * b + lane] = store<T>(normal_value(mean, std, normal_from_words(w, lane)));
  }
}

template <class T>
__global__ void bernoulli_kernel(T* y, int64_t n, float p, uint64_t seed, uint64_t offset) {
  AIM_FOR_EACH_BLOCK(n, b) {
    const philox::U4 w = philox::block_words(seed, offset + uint64_t(b));
    for (int lane = 0; lane < 4 && 4 * b + lane < n; ++lane)
      y[4 * b + lane] = store<T>(unit(w, lane) < p ? 1.0f : 0.0f);
  }
}

template <class T>
__global__ void dropout_fwd_kernel(const T* x, T* y, uint8_t* mask, int64_t n, float p, float scale,
                                   uint64_t seed, uint64_t offset) {
  AIM_FOR_EACH_BLOCK(n, b) {
    const philox::U4 w = philox::block_words(seed, offset + uint64_t(b));
    for (int lane = 0; lane < 4 && 4 * b + lane < n; ++lane) {
      const int64_t i = 4 * b + lane;
      const bool keep = unit(w, lane) >= p;
      mask[i] = keep ? 1 : 0;
      y[i] = keep ? scaled(x[i], scale) : store<T>(0.0f);
    }
  }
}

#undef AIM_FOR_EACH_BLOCK

template <class T>
__global__ void dropout_bwd_kernel(const T* dy, const uint8_t* mask, T* dx, int64_t n,
                                   float scale) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    dx[i] = mask[i] ? scaled(dy[i], scale) : store<T>(0.0f);
}

void check_p(const char* op, float p) {
  AIM_CHECK(p >= 0.0f && p <= 1.0f, "[", op, "] p must be in [0, 1], got ", p);
}

unsigned grid_for_blocks(int64_t n) { return grid_for(ceil_div(n, 4), kThreads); }

void uniform_cuda(const UniformArgs& a) {
  check_random_output("uniform", a.y);
  const int64_t n = a.y.numel();
  if (n == 0) return;
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.y.dtype(), T, {
    AIM_LAUNCH(grid_for_blocks(n), kThreads, 0, stream_for(a.y.device()), uniform_kernel<T>)
    (a.y.data<T>(), n, a.lo, a.hi, a.seed, a.offset);
  });
  AIM_CHECK_LAUNCH();
}

void normal_cuda(const NormalArgs& a) {
  check_random_output("normal", a.y);
  const int64_t n = a.y.numel();
  if (n == 0) return;
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.y.dtype(), T, {
    AIM_LAUNCH(grid_for_blocks(n), kThreads, 0, stream_for(a.y.device()), normal_kernel<T>)
    (a.y.data<T>(), n, a.mean, a.std, a.seed, a.offset);
  });
  AIM_CHECK_LAUNCH();
}

void bernoulli_cuda(const BernoulliArgs& a) {
  check_random_output("bernoulli", a.y);
  check_p("bernoulli", a.p);
  const int64_t n = a.y.numel();
  if (n == 0) return;
  AIM_DISPATCH_CUDA_ALL_TYPES(a.y.dtype(), T, {
    AIM_LAUNCH(grid_for_blocks(n), kThreads, 0, stream_for(a.y.device()), bernoulli_kernel<T>)
    (a.y.data<T>(), n, a.p, a.seed, a.offset);
  });
  AIM_CHECK_LAUNCH();
}

void dropout_fwd_cuda(const DropoutFwdArgs& a) {
  check_dropout_fwd(a);
  const int64_t n = a.x.numel();
  if (n == 0) return;
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.x.dtype(), T, {
    AIM_LAUNCH(grid_for_blocks(n), kThreads, 0, stream_for(a.y.device()), dropout_fwd_kernel<T>)
    (a.x.data<T>(), a.y.data<T>(), a.mask.data<uint8_t>(), n, a.p, dropout_scale(a.p), a.seed,
     a.offset);
  });
  AIM_CHECK_LAUNCH();
}

void dropout_bwd_cuda(const DropoutBwdArgs& a) {
  check_dropout_bwd(a);
  const int64_t n = a.dy.numel();
  if (n == 0) return;
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.dy.dtype(), T, {
    AIM_LAUNCH(grid_for(n, kThreads), kThreads, 0, stream_for(a.dx.device()), dropout_bwd_kernel<T>)
    (a.dy.data<T>(), a.mask.data<uint8_t>(), a.dx.data<T>(), n, dropout_scale(a.p));
  });
  AIM_CHECK_LAUNCH();
}

std::vector<DType> float_dtypes() { return {DType::f32, DType::f64, DType::f16, DType::bf16}; }
std::vector<DType> all_dtypes() { return {std::begin(kAllDTypes), std::end(kAllDTypes)}; }

}  // namespace

void register_random_cuda(Registry& r) {
  const auto B = AIM_CUDA_BACKEND;
  const auto P = Provider::Own;
  r.op<UniformArgs>("uniform").add({"cuda.philox4", B, P, uniform_cuda, float_dtypes()});
  r.op<UniformArgs>("uniform").set_default(B, "cuda.philox4");
  r.op<NormalArgs>("normal").add({"cuda.philox4", B, P, normal_cuda, float_dtypes()});
  r.op<NormalArgs>("normal").set_default(B, "cuda.philox4");
  r.op<BernoulliArgs>("bernoulli").add({"cuda.philox4", B, P, bernoulli_cuda, all_dtypes()});
  r.op<BernoulliArgs>("bernoulli").set_default(B, "cuda.philox4");
  r.op<DropoutFwdArgs>("dropout_fwd").add({"cuda.philox4", B, P, dropout_fwd_cuda, float_dtypes()});
  r.op<DropoutFwdArgs>("dropout_fwd").set_default(B, "cuda.philox4");
  r.op<DropoutBwdArgs>("dropout_bwd")
      .add({"cuda.grid_stride", B, P, dropout_bwd_cuda, float_dtypes()});
  r.op<DropoutBwdArgs>("dropout_bwd").set_default(B, "cuda.grid_stride");
}

}  // namespace aim::kernels::AIM_CUDA_NS
