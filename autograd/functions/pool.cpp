// Pooling on the pool kernels (kernels/pool/pool2d.h). Max pooling saves the argmax indices
// (i32, per plane) for its backward; average pooling needs only the shapes.
#include "autograd/functions/pool.h"

#include "autograd/amp.h"
#include "autograd/node.h"

namespace aim::autograd {
namespace {

using kernels::Pool2dParams;

struct MaxPool2dNode final : Node {
  Tensor indices;
  Pool2dParams p;
  const char* name() const override { return "MaxPool2d"; }
  void backward(Grads& g) override {
    if (!g.needs(0)) return;
    kernels::MaxPool2dBwdArgs a;
    a.dy = g.dy();
    a.indices = indices;
    a.dx = g.out(0);
    a.p = p;
    kernels::maxpool2d_bwd(a);
  }
  void release() override { indices = Tensor(); }
};

struct AvgPool2dNode final : Node {
  Pool2dParams p;
  const char* name() const override { return "AvgPool2d"; }
  void backward(Grads& g) override {
    if (!g.needs(0)) return;
    kernels::AvgPool2dBwdArgs a;
    a.dy = g.dy();
    a.dx = g.out(0);
    a.p = p;
    kernels::avgpool2d_bwd(a);
  }
};

struct AdaptiveAvgPool2dNode final : Node {
  const char* name() const override { return "AdaptiveAvgPool2d"; }
  void backward(Grads& g) override {
    if (!g.needs(0)) return;
    kernels::AdaptiveAvgPool2dBwdArgs a;
    a.dy = g.dy();
    a.dx = g.out(0);
    kernels::adaptive_avgpool2d_bwd(a);
  }
};

Tensor check_x(const char* op, const Variable& x) {
  AIM_CHECK(x.defined() && x.dim() == 4, op, ": x must be [N, C, H, W], got ",
            x.defined() ? to_string(x.sizes()) : std::string("undefined"));
  return x.data().contiguous();
}

Shape pooled_shape(const char* op, const Tensor& x, const Pool2dParams& p, bool ceil_mode) {
  return {x.size(0), x.size(1),
          pooled_size(x.size(2), p.kernel_h, p.stride_h, p.pad_top, p.pad_bottom, ceil_mode, op),
          pooled_size(x.size(3), p.kernel_w, p.stride_w, p.pad_left, p.pad_right, ceil_mode, op)};
}

}  // namespace

int64_t pooled_size(int64_t in, int64_t k, int64_t stride, int64_t pad_before, int64_t pad_after,
                    bool ceil_mode, const char* what) {
  AIM_CHECK(k >= 1 && stride >= 1 && pad_before >= 0 && pad_after >= 0, what,
            ": kernel and stride must be >= 1 and padding >= 0, got kernel ", k, " stride ", stride,
            " padding ", pad_before, ",", pad_after);
  AIM_CHECK(pad_before <= k / 2 && pad_after <= k / 2, what,
            ": padding should be at most half the kernel (PyTorch's rule), got kernel ", k,
            " padding ", pad_before, ",", pad_after);
  const int64_t out = kernels::pool2d_out_size(in, k, stride, pad_before, pad_after, ceil_mode);
  AIM_CHECK(out >= 1, what, ": kernel ", k, " is larger than the padded input ", in, " + ",
            pad_before, " + ", pad_after);
  return out;
}

// Every pooling of this file.
constexpr amp::Declaration kPoolingAmp{"pooling", amp::OpClass::native, amp::kWhyDataMovement};
Variable max_pool2d(const Variable& x, const Pool2dParams& p, bool ceil_mode) {
  const Tensor xc = check_x("max_pool2d", x);
  const Shape ys = pooled_shape("max_pool2d", xc, p, ceil_mode);
  kernels::MaxPool2dFwdArgs a;
  a.x = xc;
  a.y = Tensor::empty(ys, xc.dtype(), xc.device());
  const bool grad = needs_grad({&x});
  if (grad) a.indices = Tensor::empty(ys, DType::i32, xc.device());
  a.p = p;
  kernels::maxpool2d_fwd(a);
  if (!grad) return Variable(a.y);
  auto n = std::make_shared<MaxPool2dNode>();
  n->indices = a.indices;
  n->p = p;
  return attach1(n, {x}, a.y);
}

Variable avg_pool2d(const Variable& x, const Pool2dParams& p, bool ceil_mode) {
  const Tensor xc = check_x("avg_pool2d", x);
  kernels::AvgPool2dFwdArgs a;
  a.x = xc;
  a.y = Tensor::empty(pooled_shape("avg_pool2d", xc, p, ceil_mode), xc.dtype(), xc.device());
  a.p = p;
  kernels::avgpool2d_fwd(a);
  if (!needs_grad({&x})) return Variable(a.y);
  auto n = std::make_shared<AvgPool2dNode>();
  n->p = p;
  return attach1(n, {x}, a.y);
}

Variable adaptive_avg_pool2d(const Variable& x, int64_t out_h, int64_t out_w) {
  const Tensor xc = check_x("adaptive_avg_pool2d", x);
  AIM_CHECK(out_h >= 1 && out_w >= 1, "adaptive_avg_pool2d: output size must be >= 1, got ", out_h,
            "x", out_w);
  kernels::AdaptiveAvgPool2dFwdArgs a;
  a.x = xc;
  a.y = Tensor::empty({xc.size(0), xc.size(1), out_h, out_w}, xc.dtype(), xc.device());
  kernels::adaptive_avgpool2d_fwd(a);
  if (!needs_grad({&x})) return Variable(a.y);
  return attach1(std::make_shared<AdaptiveAvgPool2dNode>(), {x}, a.y);
}

void amp::declarations_pool(std::vector<amp::Declaration>& out) {
  out.insert(out.end(), {kPoolingAmp});
}

}  // namespace aim::autograd
