// batchnorm: cuDNN variants (CUDA builds only). API choices, refusals and what is verified:
// docs/cudnn.md.
//
// cuda.cudnn: cuDNN 9's legacy batch-normalisation API in CUDNN_BATCHNORM_SPATIAL mode. x [N, C,
// ...]
//   is described as the packed NCHW tensor [N, C, S, 1] (S = product of the trailing dims; S = 1
//   for [N, C]), so the statistics run over N*S per channel — never PER_ACTIVATION, which would
//   normalise [N, C] per (c) over N only by a different parameter layout. The [C] parameter and
//   statistics descriptor comes from cudnnDeriveBNTensorDescriptor (float for f32/f16/bf16, double
//   for f64: batchnorm_stat_dtype).
//     batchnorm_fwd, training  cudnnBatchNormalizationForwardTraining: exponentialAverageFactor =
//                              momentum, running_mean/var (NULL when not tracked) updated with the
//                              unbiased variance, resultSaveMean/resultSaveInvVariance = save_mean/
//                              save_rstd (cuDNN's "inverse variance" is 1/sqrt(var + eps)).
//     batchnorm_fwd, eval      cudnnBatchNormalizationForwardInference on the running statistics;
//                              only when save_mean/save_rstd are not wanted (filling them would
//                              take an own kernel).
//     batchnorm_bwd, training  cudnnBatchNormalizationBackward with the forward's saved statistics,
//                              alphaDataDiff = 1, betaDataDiff = 0 (dx written), alphaParamDiff =
//                              betaParamDiff = 1 (dgamma, dbeta +=). Unwanted outputs go to
//                              scratch.
//   No affine (gamma, beta undefined) in the forward: ones and zeros [C] are passed. The backward
//   needs gamma (a frozen or non-affine backward is cuda.channel's).
#include <climits>

#include "kernels/cudnn_util.h"
#include "kernels/norm/batchnorm.h"
#include "kernels/registry.h"
#include "kernels/vendor.h"

namespace aim::kernels {
namespace {

// eps of the backward call: unused while the saved statistics are given (docs/cudnn.md).
constexpr double kBackwardEps = 1e-5;

struct BnDescs {
  cudnn::TensorDesc x;      // [N, C, S, 1]
  cudnn::TensorDesc param;  // [1, C, 1, 1] in the statistics dtype
  bool empty = false;       // no element: nothing for cuDNN to do
};

// The folded sizes of x [N, C, ...].
struct Folded {
  int64_t N, C, S;
};
Folded fold(const Tensor& x) {
  Folded f{x.size(0), x.size(1), 1};
  for (int64_t d = 2; d < x.dim(); ++d) f.S *= x.size(d);
  return f;
}

std::string describe(BnDescs& d, const Tensor& x) {
  std::string why = cudnn::int_range_reason("x", x);
  if (!why.empty()) return why;
  d.empty = x.numel() == 0;
  if (d.empty) return "";
  const Folded f = fold(x);
  cudnnStatus_t st = d.x.set(x.dtype(), f.N, f.C, f.S, 1);
  if (st != CUDNN_STATUS_SUCCESS)
    return cudnn::rejects(str("x ", to_string(x.sizes()), " as [", f.N, ", ", f.C, ", ", f.S,
                              ", 1] ", dtype_name(x.dtype())),
                          st);
  if ((st = cudnnDeriveBNTensorDescriptor(d.param, d.x, CUDNN_BATCHNORM_SPATIAL)) !=
      CUDNN_STATUS_SUCCESS)
    return cudnn::rejects(str("a spatial batch norm of x ", to_string(x.sizes())), st);
  return "";
}

std::string fwd_reason(const BatchNormFwdArgs& a) {
  if (a.eps < CUDNN_BN_MIN_EPSILON)
    return str("cuDNN needs eps >= CUDNN_BN_MIN_EPSILON = ", CUDNN_BN_MIN_EPSILON, ", got ", a.eps);
  if (a.relu)
    return "cuDNN's batch-norm calls here have no fused activation; cuda.channel fuses relu";
  if (!a.training && (a.save_mean.defined() || a.save_rstd.defined()))
    return "cuDNN's inference call does not write save_mean/save_rstd; use cuda.channel when a "
           "frozen-BN backward follows";
  if (a.training) {
    if (a.running_mean.defined() != a.running_var.defined())
      return "cuDNN updates running_mean and running_var together, got only one of them";
    const Folded f = fold(a.x);
    if (f.N * f.S == 0)
      return str("cuDNN's training statistics need N*S > 0 values per channel, got x ",
                 to_string(a.x.sizes()));
    if (a.running_var.defined() && f.N * f.S == 1)
      return str("cuDNN's running variance is unbiased (divides by N*S - 1), needs N*S > 1, got x ",
                 to_string(a.x.sizes()));
  }
  return "";
}

std::string supports_fwd(const BatchNormFwdArgs& a) {
  check_batchnorm_fwd_args(a);
  std::string why = fwd_reason(a);
  if (!why.empty()) return why;
  BnDescs d;
  return describe(d, a.x);
}

std::string bwd_reason(const BatchNormBwdArgs& a) {
  if (!a.training) return "frozen-BN backward is not a cuDNN call; use cuda.channel";
  if (a.y_relu.defined()) return "a fused relu's mask is not a cuDNN call; use cuda.channel";
  if (!a.gamma.defined())
    return "cuDNN's backward needs gamma (bnScale); without affine use cuda.channel";
  return "";
}

std::string supports_bwd(const BatchNormBwdArgs& a) {
  check_batchnorm_bwd_args(a);
  std::string why = bwd_reason(a);
  if (!why.empty()) return why;
  BnDescs d;
  return describe(d, a.x);
}

void* ptr_or_null(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }

void batchnorm_fwd_cuda_cudnn(const BatchNormFwdArgs& a) {
  check_batchnorm_fwd_args(a);
  std::string why = fwd_reason(a);
  BnDescs d;
  if (why.empty()) why = describe(d, a.x);
  AIM_CHECK(why.empty(), "[batchnorm_fwd] cuda.cudnn: ", why);
  if (d.empty) return;  // eval on an empty batch
  const DType t = a.x.dtype();
  const Device dev = a.x.device();
  vendor::DeviceGuard guard(dev);
  // No affine: gamma = 1, beta = 0 (freed after enqueueing: the allocator is stream-ordered).
  Tensor gamma = a.gamma, beta = a.beta;
  if (!gamma.defined()) gamma = Tensor::ones({a.x.size(1)}, batchnorm_stat_dtype(t), dev);
  if (!beta.defined()) beta = Tensor::zeros({a.x.size(1)}, batchnorm_stat_dtype(t), dev);
  const cudnn::Scale one(t, 1.0), zero(t, 0.0);
  cudnnHandle_t h = vendor::cudnn(dev);
  if (a.training) {
    AIM_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
        h, CUDNN_BATCHNORM_SPATIAL, one.ptr(), zero.ptr(), d.x, a.x.raw_data(), d.x, a.y.raw_data(),
        d.param, gamma.raw_data(), beta.raw_data(), a.momentum, ptr_or_null(a.running_mean),
        ptr_or_null(a.running_var), a.eps, a.save_mean.raw_data(), a.save_rstd.raw_data()));
  } else {
    AIM_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(
        h, CUDNN_BATCHNORM_SPATIAL, one.ptr(), zero.ptr(), d.x, a.x.raw_data(), d.x, a.y.raw_data(),
        d.param, gamma.raw_data(), beta.raw_data(), a.running_mean.raw_data(),
        a.running_var.raw_data(), a.eps));
  }
}

void batchnorm_bwd_cuda_cudnn(const BatchNormBwdArgs& a) {
  check_batchnorm_bwd_args(a);
  std::string why = bwd_reason(a);
  BnDescs d;
  if (why.empty()) why = describe(d, a.x);
  AIM_CHECK(why.empty(), "[batchnorm_bwd] cuda.cudnn: ", why);
  if (d.empty) return;  // dx has no element; dgamma, dbeta += an empty sum
  if (!a.dx.defined() && !a.dgamma.defined() && !a.dbeta.defined()) return;
  const DType t = a.x.dtype();
  const Device dev = a.x.device();
  vendor::DeviceGuard guard(dev);
  // cuDNN always writes dx, dScale and dBias: unwanted ones go to scratch.
  const Tensor dx = a.dx.defined() ? a.dx : Tensor::empty(a.x.sizes(), t, dev);
  const DType st = batchnorm_stat_dtype(t);
  const Tensor dgamma = a.dgamma.defined() ? a.dgamma : Tensor::zeros({a.x.size(1)}, st, dev);
  const Tensor dbeta = a.dbeta.defined() ? a.dbeta : Tensor::zeros({a.x.size(1)}, st, dev);
  const cudnn::Scale one(t, 1.0), zero(t, 0.0);
  AIM_CUDNN_CHECK(cudnnBatchNormalizationBackward(
      vendor::cudnn(dev), CUDNN_BATCHNORM_SPATIAL, /*alphaDataDiff=*/one.ptr(),
      /*betaDataDiff=*/zero.ptr(), /*alphaParamDiff=*/one.ptr(), /*betaParamDiff=*/one.ptr(), d.x,
      a.x.raw_data(), d.x, a.dy.raw_data(), d.x, dx.raw_data(), d.param, a.gamma.raw_data(),
      dgamma.raw_data(), dbeta.raw_data(), kBackwardEps, a.save_mean.raw_data(),
      a.save_rstd.raw_data()));
}

}  // namespace

void register_batchnorm_cudnn(Registry& r) {
  const std::vector<DType> types = {DType::f32, DType::f64, DType::f16, DType::bf16};
  r.op<BatchNormFwdArgs>("batchnorm_fwd")
      .add({"cuda.cudnn", Backend::CUDA, Provider::Vendor, batchnorm_fwd_cuda_cudnn, types,
            supports_fwd});
  r.op<BatchNormBwdArgs>("batchnorm_bwd")
      .add({"cuda.cudnn", Backend::CUDA, Provider::Vendor, batchnorm_bwd_cuda_cudnn, types,
            supports_bwd});
}

}  // namespace aim::kernels
