// pool2d: cuDNN variants (CUDA builds only). API choices, refusals and what is verified:
// docs/cudnn.md.
//
// cuda.cudnn: cuDNN 9's legacy pooling API (cudnnPoolingForward / cudnnPoolingBackward) on packed
//   NCHW descriptors; alpha = 1, beta = 0 (outputs are written).
//     maxpool2d_fwd           CUDNN_POOLING_MAX with CUDNN_PROPAGATE_NAN, only without indices:
//                             cuDNN's max backward wants x and y, and maxpool2d_bwd gets indices,
//                             so there is no cuDNN max backward here.
//     avgpool2d_fwd / _bwd    CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING (count_include_pad) or
//                             _EXCLUDE_PADDING. The backward's x and y operands are not used by an
//                             average (its gradient is dy / divisor spread over the window): y is
//                             given dy's pointer (same shape) and x an uninitialised scratch
//                             tensor.
//     adaptive_avgpool2d_*    only when H % P == 0 and W % Q == 0 (global pooling included): then
//                             it is the average pool with kernel = stride = (H/P, W/Q), no padding.
//   Cannot take: asymmetric padding (one pad per axis), outputs other than cuDNN's floor formula
//   P = (H + 2*pad - kernel) / stride + 1 (PyTorch's ceil_mode extras), sizes beyond int, and what
//   cuDNN's status refuses.
#include <algorithm>
#include <climits>

#include "kernels/cudnn_util.h"
#include "kernels/pool/pool2d.h"
#include "kernels/registry.h"
#include "kernels/vendor.h"

namespace aim::kernels {
namespace {

// Descriptors of one call: x-side [N, C, H, W] and y-side [N, C, P, Q].
struct PoolDescs {
  cudnn::TensorDesc x, y;
  cudnn::PoolDesc pool;
  bool empty = false;  // N*C == 0: nothing to do
};

// Sets the descriptors; "" when cuDNN takes the pooling and its output extent is y's.
std::string describe(PoolDescs& d, cudnnPoolingMode_t mode, const Tensor& x, const Tensor& y,
                     const Pool2dParams& p) {
  if (p.pad_top != p.pad_bottom || p.pad_left != p.pad_right)
    return str("cuDNN needs symmetric padding, got top/bottom ", p.pad_top, "/", p.pad_bottom,
               " left/right ", p.pad_left, "/", p.pad_right);
  std::string why = cudnn::int_range_reason("x", x);
  if (why.empty()) why = cudnn::int_range_reason("y", y);
  const int64_t biggest =
      std::max({p.kernel_h, p.kernel_w, p.stride_h, p.stride_w, p.pad_top, p.pad_left});
  if (why.empty() && biggest > INT_MAX)
    why = str("cuDNN's legacy API takes int parameters, got ", biggest);
  if (!why.empty()) return why;
  d.empty = x.numel() == 0;  // check_planes: H, W, P, Q >= 1, so only N or C can be 0
  if (d.empty) return "";
  const DType t = x.dtype();
  cudnnStatus_t st;
  if ((st = d.x.set(t, x.size(0), x.size(1), x.size(2), x.size(3))) != CUDNN_STATUS_SUCCESS)
    return cudnn::rejects(str("the tensor ", to_string(x.sizes())), st);
  if ((st = d.y.set(t, y.size(0), y.size(1), y.size(2), y.size(3))) != CUDNN_STATUS_SUCCESS)
    return cudnn::rejects(str("the tensor ", to_string(y.sizes())), st);
  st = cudnnSetPooling2dDescriptor(d.pool, mode, CUDNN_PROPAGATE_NAN, int(p.kernel_h),
                                   int(p.kernel_w), int(p.pad_top), int(p.pad_left),
                                   int(p.stride_h), int(p.stride_w));
  const std::string params = str("kernel ", p.kernel_h, "x", p.kernel_w, " stride ", p.stride_h,
                                 "x", p.stride_w, " padding ", p.pad_top, "x", p.pad_left);
  if (st != CUDNN_STATUS_SUCCESS) return cudnn::rejects(params, st);
  int n = 0, c = 0, h = 0, w = 0;
  if ((st = cudnnGetPooling2dForwardOutputDim(d.pool, d.x, &n, &c, &h, &w)) != CUDNN_STATUS_SUCCESS)
    return cudnn::rejects(str(params, " on ", to_string(x.sizes())), st);
  if (Shape{n, c, h, w} != y.sizes())
    return str("cuDNN's pooling output for x ", to_string(x.sizes()), " with ", params, " is ",
               to_string(Shape{n, c, h, w}), " (floor mode), y is ", to_string(y.sizes()),
               " (ceil_mode outputs are not a cuDNN pooling)");
  return "";
}

cudnnPoolingMode_t avg_mode(const Pool2dParams& p) {
  return p.count_include_pad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                             : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
}

// Adaptive average pooling as an ordinary one; "" when H % P == 0 and W % Q == 0.
std::string adaptive_params(const Tensor& x, const Tensor& y, Pool2dParams* p) {
  const int64_t H = x.size(2), W = x.size(3), P = y.size(2), Q = y.size(3);
  if (H % P != 0 || W % Q != 0)
    return str("cuDNN pooling takes adaptive average pooling only as a global pool or with H % P ",
               "== 0 and W % Q == 0 (then kernel = stride = H/P x W/Q), got ", to_string(x.sizes()),
               " -> ", to_string(y.sizes()));
  p->kernel_h = p->stride_h = H / P;
  p->kernel_w = p->stride_w = W / Q;
  p->pad_top = p->pad_bottom = p->pad_left = p->pad_right = 0;
  p->count_include_pad = true;  // no padding: both counts are kernel_h * kernel_w
  return "";
}

// Forward: y = pool(x). The caller checked the arguments.
void pool_fwd(const char* op, cudnnPoolingMode_t mode, const Tensor& x, const Tensor& y,
              const Pool2dParams& p) {
  vendor::DeviceGuard guard(x.device());
  PoolDescs d;
  const std::string why = describe(d, mode, x, y, p);
  AIM_CHECK(why.empty(), "[", op, "] cuda.cudnn: ", why);
  if (d.empty) return;
  const cudnn::Scale one(x.dtype(), 1.0), zero(x.dtype(), 0.0);
  AIM_CUDNN_CHECK(cudnnPoolingForward(vendor::cudnn(x.device()), d.pool, one.ptr(), d.x,
                                      x.raw_data(), zero.ptr(), d.y, y.raw_data()));
}

// Average backward: dx = pool_backward(dy). x and y are not read by an average; see the top.
void avg_bwd(const char* op, cudnnPoolingMode_t mode, const Tensor& dy, const Tensor& dx,
             const Pool2dParams& p) {
  vendor::DeviceGuard guard(dx.device());
  PoolDescs d;
  const std::string why = describe(d, mode, dx, dy, p);
  AIM_CHECK(why.empty(), "[", op, "] cuda.cudnn: ", why);
  if (d.empty) return;
  const Tensor x_unused = Tensor::empty(dx.sizes(), dx.dtype(), dx.device());
  const cudnn::Scale one(dx.dtype(), 1.0), zero(dx.dtype(), 0.0);
  AIM_CUDNN_CHECK(cudnnPoolingBackward(vendor::cudnn(dx.device()), d.pool, one.ptr(), d.y,
                                       dy.raw_data(), d.y, dy.raw_data(), d.x, x_unused.raw_data(),
                                       zero.ptr(), d.x, dx.raw_data()));
}

// supports(): the shared checks, then the same descriptors as the run.
std::string pool_supports(cudnnPoolingMode_t mode, const Tensor& x, const Tensor& y,
                          const Pool2dParams& p) {
  vendor::DeviceGuard guard(x.device());
  PoolDescs d;
  return describe(d, mode, x, y, p);
}

std::string supports_max_fwd(const MaxPool2dFwdArgs& a) {
  check_maxpool2d_fwd_args(a);
  if (a.indices.defined())
    return "cuDNN max pooling does not produce indices; use cuda.direct when a backward follows";
  return pool_supports(CUDNN_POOLING_MAX, a.x, a.y, a.p);
}
std::string supports_avg_fwd(const AvgPool2dFwdArgs& a) {
  check_avgpool2d_fwd_args(a);
  return pool_supports(avg_mode(a.p), a.x, a.y, a.p);
}
std::string supports_avg_bwd(const AvgPool2dBwdArgs& a) {
  check_avgpool2d_bwd_args(a);
  return pool_supports(avg_mode(a.p), a.dx, a.dy, a.p);
}
std::string supports_adaptive_fwd(const AdaptiveAvgPool2dFwdArgs& a) {
  check_adaptive_avgpool2d_fwd_args(a);
  Pool2dParams p;
  const std::string why = adaptive_params(a.x, a.y, &p);
  return why.empty() ? pool_supports(avg_mode(p), a.x, a.y, p) : why;
}
std::string supports_adaptive_bwd(const AdaptiveAvgPool2dBwdArgs& a) {
  check_adaptive_avgpool2d_bwd_args(a);
  Pool2dParams p;
  const std::string why = adaptive_params(a.dx, a.dy, &p);
  return why.empty() ? pool_supports(avg_mode(p), a.dx, a.dy, p) : why;
}

void maxpool2d_fwd_cuda_cudnn(const MaxPool2dFwdArgs& a) {
  check_maxpool2d_fwd_args(a);
  AIM_CHECK(!a.indices.defined(), "[maxpool2d_fwd] cuda.cudnn: cuDNN max pooling does not ",
            "produce indices; use cuda.direct when a backward follows");
  pool_fwd("maxpool2d_fwd", CUDNN_POOLING_MAX, a.x, a.y, a.p);
}
void avgpool2d_fwd_cuda_cudnn(const AvgPool2dFwdArgs& a) {
  check_avgpool2d_fwd_args(a);
  pool_fwd("avgpool2d_fwd", avg_mode(a.p), a.x, a.y, a.p);
}
void avgpool2d_bwd_cuda_cudnn(const AvgPool2dBwdArgs& a) {
  check_avgpool2d_bwd_args(a);
  avg_bwd("avgpool2d_bwd", avg_mode(a.p), a.dy, a.dx, a.p);
}
void adaptive_avgpool2d_fwd_cuda_cudnn(const AdaptiveAvgPool2dFwdArgs& a) {
  check_adaptive_avgpool2d_fwd_args(a);
  Pool2dParams p;
  const std::string why = adaptive_params(a.x, a.y, &p);
  AIM_CHECK(why.empty(), "[adaptive_avgpool2d_fwd] cuda.cudnn: ", why);
  pool_fwd("adaptive_avgpool2d_fwd", avg_mode(p), a.x, a.y, p);
}
void adaptive_avgpool2d_bwd_cuda_cudnn(const AdaptiveAvgPool2dBwdArgs& a) {
  check_adaptive_avgpool2d_bwd_args(a);
  Pool2dParams p;
  const std::string why = adaptive_params(a.dx, a.dy, &p);
  AIM_CHECK(why.empty(), "[adaptive_avgpool2d_bwd] cuda.cudnn: ", why);
  avg_bwd("adaptive_avgpool2d_bwd", avg_mode(p), a.dy, a.dx, p);
}

}  // namespace

void register_pool2d_cudnn(Registry& r) {
  const std::vector<DType> types = {DType::f32, DType::f64, DType::f16, DType::bf16};
  r.op<MaxPool2dFwdArgs>("maxpool2d_fwd")
      .add({"cuda.cudnn", Backend::CUDA, Provider::Vendor, maxpool2d_fwd_cuda_cudnn, types,
            supports_max_fwd});
  r.op<AvgPool2dFwdArgs>("avgpool2d_fwd")
      .add({"cuda.cudnn", Backend::CUDA, Provider::Vendor, avgpool2d_fwd_cuda_cudnn, types,
            supports_avg_fwd});
  r.op<AvgPool2dBwdArgs>("avgpool2d_bwd")
      .add({"cuda.cudnn", Backend::CUDA, Provider::Vendor, avgpool2d_bwd_cuda_cudnn, types,
            supports_avg_bwd});
  r.op<AdaptiveAvgPool2dFwdArgs>("adaptive_avgpool2d_fwd")
      .add({"cuda.cudnn", Backend::CUDA, Provider::Vendor, adaptive_avgpool2d_fwd_cuda_cudnn, types,
            supports_adaptive_fwd});
  r.op<AdaptiveAvgPool2dBwdArgs>("adaptive_avgpool2d_bwd")
      .add({"cuda.cudnn", Backend::CUDA, Provider::Vendor, adaptive_avgpool2d_bwd_cuda_cudnn, types,
            supports_adaptive_bwd});
}

}  // namespace aim::kernels
