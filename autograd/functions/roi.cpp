// roi_align and roi_pool on the kernels of kernels/roi/roi.h.
#include "autograd/functions/roi.h"

#include "autograd/amp.h"
#include "autograd/node.h"
#include "kernels/roi/roi.h"

namespace aim::autograd {
namespace {

struct RoiAlignNode final : Node {
  Tensor rois;
  kernels::RoiAlignParams p;
  const char* name() const override { return "RoiAlign"; }
  void backward(Grads& g) override {
    if (!g.needs(0)) return;
    kernels::RoiAlignBwdArgs a;
    a.dy = g.dy();
    a.rois = rois;
    a.dx = g.out(0);
    a.p = p;
    kernels::roi_align_bwd(a);
  }
  void release() override { rois = Tensor(); }
};

struct RoiPoolNode final : Node {
  Tensor rois, argmax;
  const char* name() const override { return "RoiPool"; }
  void backward(Grads& g) override {
    if (!g.needs(0)) return;
    kernels::RoiPoolBwdArgs a;
    a.dy = g.dy();
    a.argmax = argmax;
    a.rois = rois;
    a.dx = g.out(0);
    kernels::roi_pool_bwd(a);
  }
  void release() override { rois = argmax = Tensor(); }
};

// x and rois, contiguous, checked for what the message can name before the kernel does.
std::pair<Tensor, Tensor> inputs(const char* op, const Variable& x, const Tensor& rois,
                                 int64_t out_h, int64_t out_w) {
  AIM_CHECK(x.defined() && x.dim() == 4, op, ": x must be [N, C, H, W], got ",
            x.defined() ? to_string(x.sizes()) : std::string("undefined"));
  AIM_CHECK(rois.defined() && rois.dim() == 2 && rois.size(1) == 5, op,
            ": rois must be [K, 5] (batch index, x1, y1, x2, y2), got ",
            rois.defined() ? to_string(rois.sizes()) : std::string("undefined"));
  AIM_CHECK(out_h >= 1 && out_w >= 1, op, ": output size must be >= 1, got ", out_h, "x", out_w);
  return {x.data().contiguous(), rois.contiguous()};
}

}  // namespace

// torchvision's autocast runs both in f32; the kernels take f32 and f64.
constexpr amp::Declaration kRoiAmp{"roi_align, roi_pool", amp::OpClass::fp32,
                                   "sampled and pooled in f32 (torchvision's autocast)"};

Variable roi_align(const Variable& x, const Tensor& rois, int64_t out_h, int64_t out_w,
                   double spatial_scale, int64_t sampling_ratio, bool aligned) {
  const Variable r(rois);
  if (auto c = amp::autocast(kRoiAmp, {&x, &r}))
    return roi_align((*c)[0], (*c)[1].data(), out_h, out_w, spatial_scale, sampling_ratio, aligned);
  const auto [xc, rc] = inputs("roi_align", x, rois, out_h, out_w);
  kernels::RoiAlignFwdArgs a;
  a.x = xc;
  a.rois = rc;
  a.y = Tensor::empty({rc.size(0), xc.size(1), out_h, out_w}, xc.dtype(), xc.device());
  a.p.spatial_scale = spatial_scale;
  a.p.sampling_ratio = sampling_ratio;
  a.p.aligned = aligned;
  kernels::roi_align_fwd(a);
  if (!needs_grad({&x})) return Variable(a.y);
  auto n = std::make_shared<RoiAlignNode>();
  n->rois = rc;
  n->p = a.p;
  return attach1(n, {x}, a.y);
}

Variable roi_pool(const Variable& x, const Tensor& rois, int64_t out_h, int64_t out_w,
                  double spatial_scale) {
  const Variable r(rois);
  if (auto c = amp::autocast(kRoiAmp, {&x, &r}))
    return roi_pool((*c)[0], (*c)[1].data(), out_h, out_w, spatial_scale);
  const auto [xc, rc] = inputs("roi_pool", x, rois, out_h, out_w);
  kernels::RoiPoolFwdArgs a;
  a.x = xc;
  a.rois = rc;
  const Shape ys = {rc.size(0), xc.size(1), out_h, out_w};
  a.y = Tensor::empty(ys, xc.dtype(), xc.device());
  const bool grad = needs_grad({&x});
  if (grad) a.argmax = Tensor::empty(ys, DType::i32, xc.device());
  a.spatial_scale = spatial_scale;
  kernels::roi_pool_fwd(a);
  if (!grad) return Variable(a.y);
  auto n = std::make_shared<RoiPoolNode>();
  n->rois = rc;
  n->argmax = a.argmax;
  return attach1(n, {x}, a.y);
}

void amp::declarations_roi(std::vector<amp::Declaration>& out) { out.insert(out.end(), {kRoiAmp}); }

}  // namespace aim::autograd
