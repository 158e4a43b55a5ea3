// interpolate on the kernels of kernels/interpolate/interpolate.h.
#include "autograd/functions/interpolate.h"

#include <cmath>

#include "autograd/amp.h"
#include "autograd/node.h"

namespace aim::autograd {
namespace {

struct InterpolateNode final : Node {
  kernels::InterpolateParams p;
  const char* name() const override { return "Interpolate"; }
  void backward(Grads& g) override {
    if (!g.needs(0)) return;
    kernels::InterpolateBwdArgs a;
    a.dy = g.dy();
    a.dx = g.out(0);
    a.p = p;
    kernels::interpolate_bwd(a);
  }
};

Variable run(const Variable& x, int64_t out_h, int64_t out_w, const kernels::InterpolateParams& p,
             const char* op) {
  AIM_CHECK(x.defined() && x.dim() == 4, op, ": x must be [N, C, H, W], got ",
            x.defined() ? to_string(x.sizes()) : std::string("undefined"));
  AIM_CHECK(out_h >= 1 && out_w >= 1, op, ": output size must be >= 1, got ", out_h, "x", out_w,
            " for x ", to_string(x.sizes()));
  const Tensor xc = x.data().contiguous();
  kernels::InterpolateFwdArgs a;
  a.x = xc;
  a.y = Tensor::empty({xc.size(0), xc.size(1), out_h, out_w}, xc.dtype(), xc.device());
  a.p = p;
  kernels::interpolate_fwd(a);
  if (!needs_grad({&x})) return Variable(a.y);
  auto n = std::make_shared<InterpolateNode>();
  n->p = p;
  return attach1(n, {x}, a.y);
}

}  // namespace

// The kernels take f32 and f64: 16-bit maps are resampled in f32.
constexpr amp::Declaration kInterpolateAmp{"interpolate", amp::OpClass::fp32,
                                           "resampled in f32 (f32/f64 kernels)"};

Variable interpolate(const Variable& x, int64_t out_h, int64_t out_w, kernels::InterpMode mode,
                     bool align_corners) {
  if (auto c = amp::autocast(kInterpolateAmp, {&x}))
    return interpolate((*c)[0], out_h, out_w, mode, align_corners);
  kernels::InterpolateParams p;
  p.mode = mode;
  p.align_corners = align_corners;
  return run(x, out_h, out_w, p, "interpolate");
}

Variable interpolate_scale(const Variable& x, double scale_h, double scale_w,
                           kernels::InterpMode mode, bool align_corners) {
  if (auto c = amp::autocast(kInterpolateAmp, {&x}))
    return interpolate_scale((*c)[0], scale_h, scale_w, mode, align_corners);
  AIM_CHECK(std::isfinite(scale_h) && std::isfinite(scale_w) && scale_h > 0 && scale_w > 0,
            "interpolate_scale: scale factors must be finite and > 0, got ", scale_h, ", ",
            scale_w);
  AIM_CHECK(x.defined() && x.dim() == 4, "interpolate_scale: x must be [N, C, H, W], got ",
            x.defined() ? to_string(x.sizes()) : std::string("undefined"));
  kernels::InterpolateParams p;
  p.mode = mode;
  p.align_corners = align_corners;
  p.scale_h = scale_h;
  p.scale_w = scale_w;
  return run(x, kernels::interpolate_out_size(x.size(2), scale_h),
             kernels::interpolate_out_size(x.size(3), scale_w), p, "interpolate_scale");
}

void amp::declarations_interpolate(std::vector<amp::Declaration>& out) {
  out.insert(out.end(), {kInterpolateAmp});
}

}  // namespace aim::autograd
