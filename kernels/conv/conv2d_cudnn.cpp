// conv2d: cuDNN variants (CUDA builds only). API choices, refusals and what is verified:
// docs/cudnn.md.
//
// cuda.cudnn (conv2d_fwd, conv2d_bwd_data, conv2d_bwd_filter): cuDNN 9's legacy convolution API,
//   NCHW packed descriptors, CUDNN_CROSS_CORRELATION, groups through cudnnSetConvolutionGroupCount.
//     fwd         cudnnConvolutionForward (beta = 0), then the bias by cudnnAddTensor
//                 (y = 1 * bias[1,K,1,1] + 1 * y, broadcast over N, P, Q).
//     bwd_data    cudnnConvolutionBackwardData (beta = 0: dx is written).
//     bwd_filter  cudnnConvolutionBackwardFilter with beta = 1 (dw +=), dbias by
//                 cudnnConvolutionBackwardBias with beta = 1 (dbias +=).
//   Arithmetic: f32 with TF32 allowed by default, as PyTorch (torch.backends.cudnn.allow_tf32):
//   CUDNN_DEFAULT_MATH, tensor cores on Ampere and later; with TF32 off (--tf32 off|matmul,
//   kernels/math_mode.h) true fp32 (CUDNN_FMA_MATH). f64 in fp64, f16/bf16 with fp32 compute type
//   and CUDNN_TENSOR_OP_MATH.
//   Algorithm: chosen once per key (direction, dtype, shapes, parameters, device) with the
//   cudnnGet*Algorithm_v7 heuristics — they run nothing on the GPU and never write the output, so
//   dw's accumulated content is safe (cudnnFind*AlgorithmEx would overwrite dw while timing) —
//   taking the first result that succeeded (and, with TF32 off, keeps fp32 out of tensor cores;
//   under --deterministic, the first that cuDNN reports as CUDNN_DETERMINISTIC;
//   the TF32 setting is part of the key of an f32 call). Cached in a
//   process-wide map under a mutex, logged once per key under AIM_DEBUG >= 1 and listed by
//   cudnn_conv_algorithms_summary() (kernels/cudnn_util.h). Workspace: kernels/vendor.h.
//   Cannot take: asymmetric padding (the legacy descriptor has one pad per axis), sizes beyond int,
//   and whatever cuDNN refuses (its status string is the reason).
#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>

#include "kernels/conv/conv2d.h"
#include "kernels/conv/im2col_cuda.h"
#include "kernels/cudnn_util.h"
#include "kernels/math_mode.h"
#include "kernels/registry.h"
#include "kernels/vendor.h"

namespace aim::kernels {
namespace {

enum class Dir : uint8_t { Fwd, BwdData, BwdFilter };

const char* dir_name(Dir d) {
  return d == Dir::Fwd ? "fwd" : d == Dir::BwdData ? "bwd_data" : "bwd_filter";
}

const char* algo_name(Dir d, int a) {
  static const char* fwd[] = {"FWD_ALGO_IMPLICIT_GEMM", "FWD_ALGO_IMPLICIT_PRECOMP_GEMM",
                              "FWD_ALGO_GEMM",          "FWD_ALGO_DIRECT",
                              "FWD_ALGO_FFT",           "FWD_ALGO_FFT_TILING",
                              "FWD_ALGO_WINOGRAD",      "FWD_ALGO_WINOGRAD_NONFUSED"};
  static const char* data[] = {"BWD_DATA_ALGO_0",        "BWD_DATA_ALGO_1",
                               "BWD_DATA_ALGO_FFT",      "BWD_DATA_ALGO_FFT_TILING",
                               "BWD_DATA_ALGO_WINOGRAD", "BWD_DATA_ALGO_WINOGRAD_NONFUSED"};
  static const char* filter[] = {"BWD_FILTER_ALGO_0",         "BWD_FILTER_ALGO_1",
                                 "BWD_FILTER_ALGO_FFT",       "BWD_FILTER_ALGO_3",
                                 "BWD_FILTER_ALGO_WINOGRAD",  "BWD_FILTER_ALGO_WINOGRAD_NONFUSED",
                                 "BWD_FILTER_ALGO_FFT_TILING"};
  const int n = d == Dir::Fwd ? 8 : d == Dir::BwdData ? 6 : 7;
  if (a < 0 || a >= n) return "unknown algorithm";
  return d == Dir::Fwd ? fwd[a] : d == Dir::BwdData ? data[a] : filter[a];
}

const char* math_name(cudnnMathType_t m) {
  switch (m) {
    case CUDNN_DEFAULT_MATH:
      return "DEFAULT_MATH";
    case CUDNN_TENSOR_OP_MATH:
      return "TENSOR_OP_MATH";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION:
      return "TENSOR_OP_MATH_ALLOW_CONVERSION";
    case CUDNN_FMA_MATH:
      return "FMA_MATH";
  }
  return "unknown math";
}

// Whether this call may use TF32 (f32 only; kernels/math_mode.h).
bool tf32_allowed(DType t) { return t == DType::f32 && tf32().conv; }

// The math type set before asking the heuristics: fp32 with TF32 allowed (DEFAULT) or not (FMA),
// tensor cores for 16-bit.
cudnnMathType_t base_math(DType t) {
  if (t == DType::f32) return tf32_allowed(t) ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  if (t == DType::f64) return CUDNN_DEFAULT_MATH;
  return CUDNN_TENSOR_OP_MATH;
}

// A heuristic result we accept: it succeeded, and without TF32 fp32 stays off tensor cores.
bool acceptable(DType t, cudnnStatus_t st, cudnnMathType_t m) {
  if (st != CUDNN_STATUS_SUCCESS) return false;
  if (t == DType::f32 && !tf32_allowed(t))
    return m != CUDNN_TENSOR_OP_MATH && m != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
  return true;
}

// The algorithm of one key. error non-empty: cuDNN offers none (the supports() reason).
struct Plan {
  int algo = -1;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  size_t workspace = 0;
  std::string error;
};

// Descriptors of one call: xs is x or dx [N, C, H, W], w is w or dw [K, C/G, R, S], ys is y or
// dy [N, K, P, Q]. A descriptor is set only for a non-empty tensor (cuDNN takes no zero sizes).
struct Descs {
  cudnn::TensorDesc x, y;
  cudnn::FilterDesc w;
  cudnn::ConvDesc conv;
  bool empty = false;  // some operand has no elements: no cuDNN convolution call
};

std::string padding_reason(const Conv2dParams& p) {
  if (p.symmetric_padding()) return "";
  return str("cuDNN needs symmetric padding, got top/bottom ", p.pad_top, "/", p.pad_bottom,
             " left/right ", p.pad_left, "/", p.pad_right);
}

std::string describe(Descs& d, DType t, const Tensor& xs, const Tensor& w, const Tensor& ys,
                     const Conv2dParams& p) {
  std::string why = padding_reason(p);
  if (why.empty()) why = cudnn::int_range_reason("the input side", xs);
  if (why.empty()) why = cudnn::int_range_reason("the filter", w);
  if (why.empty()) why = cudnn::int_range_reason("the output side", ys);
  const int64_t biggest_param =
      std::max({p.stride_h, p.stride_w, p.pad_top, p.pad_left, p.dil_h, p.dil_w, p.groups});
  if (why.empty() && biggest_param > INT_MAX)
    why = str("cuDNN's legacy API takes int parameters, got ", biggest_param);
  if (!why.empty()) return why;
  cudnnStatus_t st;
  if (xs.numel() > 0 &&
      (st = d.x.set(t, xs.size(0), xs.size(1), xs.size(2), xs.size(3))) != CUDNN_STATUS_SUCCESS)
    return cudnn::rejects(str("the tensor ", to_string(xs.sizes())), st);
  if (w.numel() > 0 &&
      (st = d.w.set(t, w.size(0), w.size(1), w.size(2), w.size(3))) != CUDNN_STATUS_SUCCESS)
    return cudnn::rejects(str("the filter ", to_string(w.sizes())), st);
  if (ys.numel() > 0 &&
      (st = d.y.set(t, ys.size(0), ys.size(1), ys.size(2), ys.size(3))) != CUDNN_STATUS_SUCCESS)
    return cudnn::rejects(str("the tensor ", to_string(ys.sizes())), st);
  st = cudnnSetConvolution2dDescriptor(d.conv, int(p.pad_top), int(p.pad_left), int(p.stride_h),
                                       int(p.stride_w), int(p.dil_h), int(p.dil_w),
                                       CUDNN_CROSS_CORRELATION, cudnn::compute_type(t));
  if (st != CUDNN_STATUS_SUCCESS)
    return cudnn::rejects(str("stride ", p.stride_h, "x", p.stride_w, " padding ", p.pad_top, "x",
                              p.pad_left, " dilation ", p.dil_h, "x", p.dil_w),
                          st);
  if ((st = cudnnSetConvolutionGroupCount(d.conv, int(p.groups))) != CUDNN_STATUS_SUCCESS)
    return cudnn::rejects(str("groups = ", p.groups), st);
  AIM_CUDNN_CHECK(cudnnSetConvolutionMathType(d.conv, base_math(t)));
  d.empty = xs.numel() == 0 || w.numel() == 0 || ys.numel() == 0;
  if (d.empty) return "";
  int n = 0, k = 0, h = 0, wd = 0;
  st = cudnnGetConvolution2dForwardOutputDim(d.conv, d.x, d.w, &n, &k, &h, &wd);
  if (st != CUDNN_STATUS_SUCCESS)
    return cudnn::rejects(str("x ", to_string(xs.sizes()), " with w ", to_string(w.sizes())), st);
  if (Shape{n, k, h, wd} != ys.sizes())
    return str("cuDNN's output for x ", to_string(xs.sizes()), " and w ", to_string(w.sizes()),
               " is ", to_string(Shape{n, k, h, wd}), ", the call has ", to_string(ys.sizes()));
  return "";
}

std::string key_of(Dir dir, DType t, Device dev, const Tensor& xs, const Tensor& w,
                   const Tensor& ys, const Conv2dParams& p) {
  return str("conv2d_", dir_name(dir), " ", dtype_name(t), " x", to_string(xs.sizes()), " w",
             to_string(w.sizes()), " y", to_string(ys.sizes()), " stride ", p.stride_h, "x",
             p.stride_w, " pad ", p.pad_top, "x", p.pad_left, " dil ", p.dil_h, "x", p.dil_w,
             " groups ", p.groups, tf32_allowed(t) ? " tf32" : "",
             deterministic() ? " deterministic" : "", " on ", dev.str());
}

// The first acceptable heuristic result (results come sorted by expected speed).
template <class Perf>
Plan pick(DType t, const Perf* perf, int n, const std::string& key) {
  Plan plan;
  for (int i = 0; i < n; ++i) {
    if (!acceptable(t, perf[i].status, perf[i].mathType)) continue;
    // --deterministic: skip the algorithms cuDNN reports as not reproducible (atomics: e.g.
    // BWD_FILTER_ALGO_0 and _3, BWD_DATA_ALGO_0).
    if (deterministic() && perf[i].determinism != CUDNN_DETERMINISTIC) continue;
    plan.algo = int(perf[i].algo);
    // fp32 without TF32 keeps FMA math whatever the result says (DEFAULT would admit TF32).
    plan.math = t == DType::f32 && !tf32_allowed(t) ? CUDNN_FMA_MATH : perf[i].mathType;
    return plan;
  }
  plan.error = str("cuDNN offers no algorithm for ", key, " (", n, " heuristic results",
                   n > 0 ? str(", the first with ", cudnnGetErrorString(perf[0].status)) : "", ")");
  return plan;
}

// Heuristics and workspace size for a key not seen before; d.conv's math type is set to the
// chosen one on return.
Plan choose(Dir dir, DType t, cudnnHandle_t h, Descs& d, const std::string& key) {
  constexpr int kMax = 16;  // more than any direction's algorithm count
  int n = 0;
  cudnnStatus_t st;
  Plan plan;
  if (dir == Dir::Fwd) {
    cudnnConvolutionFwdAlgoPerf_t perf[kMax];
    st = cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y, kMax, &n, perf);
    if (st == CUDNN_STATUS_SUCCESS) plan = pick(t, perf, n, key);
  } else if (dir == Dir::BwdData) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[kMax];
    st = cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y, d.conv, d.x, kMax, &n, perf);
    if (st == CUDNN_STATUS_SUCCESS) plan = pick(t, perf, n, key);
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[kMax];
    st = cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.conv, d.w, kMax, &n, perf);
    if (st == CUDNN_STATUS_SUCCESS) plan = pick(t, perf, n, key);
  }
  if (st != CUDNN_STATUS_SUCCESS) {
    plan.error = cudnn::rejects(key, st);
    return plan;
  }
  if (!plan.error.empty()) return plan;
  AIM_CUDNN_CHECK(cudnnSetConvolutionMathType(d.conv, plan.math));
  if (dir == Dir::Fwd)
    st = cudnnGetConvolutionForwardWorkspaceSize(
        h, d.x, d.w, d.conv, d.y, cudnnConvolutionFwdAlgo_t(plan.algo), &plan.workspace);
  else if (dir == Dir::BwdData)
    st = cudnnGetConvolutionBackwardDataWorkspaceSize(
        h, d.w, d.y, d.conv, d.x, cudnnConvolutionBwdDataAlgo_t(plan.algo), &plan.workspace);
  else
    st = cudnnGetConvolutionBackwardFilterWorkspaceSize(
        h, d.x, d.y, d.conv, d.w, cudnnConvolutionBwdFilterAlgo_t(plan.algo), &plan.workspace);
  if (st != CUDNN_STATUS_SUCCESS)
    plan.error =
        cudnn::rejects(str("the workspace query of ", algo_name(dir, plan.algo), " for ", key), st);
  return plan;
}

// The plan of a key: cached, chosen once (under the lock: concurrent first calls wait).
Plan plan_for(Dir dir, DType t, Device dev, Descs& d, const std::string& key) {
  static std::mutex mu;
  static std::map<std::string, Plan> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it == cache.end()) {
    const Plan plan = choose(dir, t, vendor::cudnn(dev), d, key);
    const std::string what = plan.error.empty()
                                 ? str("CUDNN_CONVOLUTION_", algo_name(dir, plan.algo), ", ",
                                       math_name(plan.math), ", workspace ", plan.workspace, " B")
                                 : str("none: ", plan.error);
    record_cudnn_conv_algorithm(key, what);
    if (debug_level() >= 1)
      std::fprintf(stderr, "[aim] cudnn %s -> %s\n", key.c_str(), what.c_str());
    it = cache.emplace(key, plan).first;
  }
  if (it->second.error.empty())
    AIM_CUDNN_CHECK(cudnnSetConvolutionMathType(d.conv, it->second.math));
  return it->second;
}

// Descriptors and plan of a call; "" when cuDNN takes it. The caller holds a DeviceGuard.
std::string prepare(Dir dir, DType t, Device dev, const Tensor& xs, const Tensor& w,
                    const Tensor& ys, const Conv2dParams& p, Descs& d, Plan& plan) {
  std::string why = describe(d, t, xs, w, ys, p);
  if (!why.empty() || d.empty) return why;
  plan = plan_for(dir, t, dev, d, key_of(dir, t, dev, xs, w, ys, p));
  return plan.error;
}

vendor::Workspace workspace_for(Device dev, size_t bytes) {
  return bytes == 0 ? vendor::Workspace{} : vendor::workspace(dev, bytes);
}

void zero(const Tensor& t) {
  if (t.numel() > 0)
    AIM_CUDA_CHECK(
        cudaMemsetAsync(t.raw_data(), 0, size_t(t.nbytes()), vendor::stream(t.device())));
}

std::string supports_fwd(const Conv2dFwdArgs& a) {
  check_conv2d_fwd_args(a);
  if (std::string why = conv2d_fwd_plain_reason(a); !why.empty()) return why;
  vendor::DeviceGuard guard(a.x.device());
  Descs d;
  Plan plan;
  return prepare(Dir::Fwd, a.x.dtype(), a.x.device(), a.x, a.w, a.y, a.p, d, plan);
}

std::string supports_bwd_data(const Conv2dBwdDataArgs& a) {
  check_conv2d_bwd_data_args(a);
  vendor::DeviceGuard guard(a.dy.device());
  Descs d;
  Plan plan;
  return prepare(Dir::BwdData, a.dy.dtype(), a.dy.device(), a.dx, a.w, a.dy, a.p, d, plan);
}

std::string supports_bwd_filter(const Conv2dBwdFilterArgs& a) {
  check_conv2d_bwd_filter_args(a);
  vendor::DeviceGuard guard(a.x.device());
  Descs d;
  Plan plan;
  return prepare(Dir::BwdFilter, a.x.dtype(), a.x.device(), a.x, a.dw, a.dy, a.p, d, plan);
}

void conv2d_fwd_cuda_cudnn(const Conv2dFwdArgs& a) {
  check_conv2d_fwd_args(a);
  AIM_CHECK(conv2d_fwd_plain_reason(a).empty(), "[conv2d_fwd] cuda.cudnn ",
            conv2d_fwd_plain_reason(a));
  const DType t = a.x.dtype();
  const Device dev = a.x.device();
  vendor::DeviceGuard guard(dev);
  Descs d;
  Plan plan;
  const std::string why = prepare(Dir::Fwd, t, dev, a.x, a.w, a.y, a.p, d, plan);
  AIM_CHECK(why.empty(), "[conv2d_fwd] cuda.cudnn: ", why);
  if (a.y.numel() == 0) return;
  cudnnHandle_t h = vendor::cudnn(dev);
  const cudnn::Scale one(t, 1.0), zero_scale(t, 0.0);
  if (d.empty) {
    zero(a.y);  // C/groups == 0: every sum is empty
  } else {
    const vendor::Workspace ws = workspace_for(dev, plan.workspace);
    AIM_CUDNN_CHECK(cudnnConvolutionForward(h, one.ptr(), d.x, a.x.raw_data(), d.w, a.w.raw_data(),
                                            d.conv, cudnnConvolutionFwdAlgo_t(plan.algo), ws.data,
                                            ws.bytes, zero_scale.ptr(), d.y, a.y.raw_data()));
  }
  if (a.bias.defined()) {
    cudnn::TensorDesc b;
    AIM_CUDNN_CHECK(b.set(t, 1, a.y.size(1), 1, 1));
    AIM_CUDNN_CHECK(
        cudnnAddTensor(h, one.ptr(), b, a.bias.raw_data(), one.ptr(), d.y, a.y.raw_data()));
  }
  // The residual and relu epilogue: the own in-place kernel on the handle's stream (cuDNN's fused
  // bias-activation call takes other algorithms than the ones planned here).
  if (a.relu || a.residual.defined()) cuda::conv2d_add_bias(a.y, Tensor(), a.relu, a.residual);
}

void conv2d_bwd_data_cuda_cudnn(const Conv2dBwdDataArgs& a) {
  check_conv2d_bwd_data_args(a);
  const DType t = a.dy.dtype();
  const Device dev = a.dy.device();
  vendor::DeviceGuard guard(dev);
  Descs d;
  Plan plan;
  const std::string why = prepare(Dir::BwdData, t, dev, a.dx, a.w, a.dy, a.p, d, plan);
  AIM_CHECK(why.empty(), "[conv2d_bwd_data] cuda.cudnn: ", why);
  if (a.dx.numel() == 0) return;
  if (d.empty) return zero(a.dx);  // no output channel or no filter tap reaches dx
  const cudnn::Scale one(t, 1.0), zero_scale(t, 0.0);
  const vendor::Workspace ws = workspace_for(dev, plan.workspace);
  AIM_CUDNN_CHECK(cudnnConvolutionBackwardData(vendor::cudnn(dev), one.ptr(), d.w, a.w.raw_data(),
                                               d.y, a.dy.raw_data(), d.conv,
                                               cudnnConvolutionBwdDataAlgo_t(plan.algo), ws.data,
                                               ws.bytes, zero_scale.ptr(), d.x, a.dx.raw_data()));
}

void conv2d_bwd_filter_cuda_cudnn(const Conv2dBwdFilterArgs& a) {
  check_conv2d_bwd_filter_args(a);
  const DType t = a.x.dtype();
  const Device dev = a.x.device();
  vendor::DeviceGuard guard(dev);
  Descs d;
  Plan plan;
  const std::string why = prepare(Dir::BwdFilter, t, dev, a.x, a.dw, a.dy, a.p, d, plan);
  AIM_CHECK(why.empty(), "[conv2d_bwd_filter] cuda.cudnn: ", why);
  cudnnHandle_t h = vendor::cudnn(dev);
  const cudnn::Scale one(t, 1.0);
  if (!d.empty) {  // else dw += nothing
    const vendor::Workspace ws = workspace_for(dev, plan.workspace);
    AIM_CUDNN_CHECK(
        cudnnConvolutionBackwardFilter(h, one.ptr(), d.x, a.x.raw_data(), d.y, a.dy.raw_data(),
                                       d.conv, cudnnConvolutionBwdFilterAlgo_t(plan.algo), ws.data,
                                       ws.bytes, /*beta=*/one.ptr(), d.w, a.dw.raw_data()));
  }
  if (a.dbias.defined() && a.dy.numel() > 0) {
    cudnn::TensorDesc b;
    AIM_CUDNN_CHECK(b.set(t, 1, a.dy.size(1), 1, 1));
    AIM_CUDNN_CHECK(cudnnConvolutionBackwardBias(h, one.ptr(), d.y, a.dy.raw_data(),
                                                 /*beta=*/one.ptr(), b, a.dbias.raw_data()));
  }
}

// The CUDA default per call (a registry default rule): cuda.cudnn, as in PyTorch, except where
// the legacy cuDNN API cannot take the call at all: asymmetric padding (TF SAME with an odd
// total), or a tensor over int range (cuDNN convolutions index with 32 bits; PyTorch splits the
// batch there). Those calls run cuda.implicit_gemm, which splits the batch into chunks of images
// itself. The rule names the variant, so the one that ran is the one recorded (DESIGN §2).
std::string default_rule(const Tensor& xs, const Tensor& w, const Tensor& ys,
                         const Conv2dParams& p) {
  if (xs.dim() != 4 || w.dim() != 4 || ys.dim() != 4) return "";  // the variant names the error
  const bool cudnn_takes = padding_reason(p).empty() && cudnn::int_range_reason("", xs).empty() &&
                           cudnn::int_range_reason("", w).empty() &&
                           cudnn::int_range_reason("", ys).empty();
  return cudnn_takes ? "" : "cuda.implicit_gemm";
}

}  // namespace

// Runs after the own CUDA families (kernels/registry.cpp): cuda.cudnn becomes the CUDA default of
// the three directions for every dtype (16-bit on tensor cores; f32 with TF32 unless --tf32 says
// otherwise, kernels/math_mode.h), with the per-call rule above for what cuDNN cannot take.
void register_conv2d_cudnn(Registry& r) {
  const std::vector<DType> types = {DType::f32, DType::f64, DType::f16, DType::bf16};
  auto& f = r.op<Conv2dFwdArgs>("conv2d_fwd");
  f.add(
      {"cuda.cudnn", Backend::CUDA, Provider::Vendor, conv2d_fwd_cuda_cudnn, types, supports_fwd});
  f.set_default(Backend::CUDA, "cuda.cudnn");
  f.set_default_rule(Backend::CUDA,
                     [](const Conv2dFwdArgs& a) { return default_rule(a.x, a.w, a.y, a.p); });
  auto& bd = r.op<Conv2dBwdDataArgs>("conv2d_bwd_data");
  bd.add({"cuda.cudnn", Backend::CUDA, Provider::Vendor, conv2d_bwd_data_cuda_cudnn, types,
          supports_bwd_data});
  bd.set_default(Backend::CUDA, "cuda.cudnn");
  bd.set_default_rule(
      Backend::CUDA, [](const Conv2dBwdDataArgs& a) { return default_rule(a.dx, a.w, a.dy, a.p); });
  auto& bf = r.op<Conv2dBwdFilterArgs>("conv2d_bwd_filter");
  bf.add({"cuda.cudnn", Backend::CUDA, Provider::Vendor, conv2d_bwd_filter_cuda_cudnn, types,
          supports_bwd_filter});
  bf.set_default(Backend::CUDA, "cuda.cudnn");
  bf.set_default_rule(Backend::CUDA, [](const Conv2dBwdFilterArgs& a) {
    return default_rule(a.x, a.dw, a.dy, a.p);
  });
}

}  // namespace aim::kernels
