// conv2d and conv_transpose2d on the three conv kernels (kernels/conv/conv2d.h):
//   conv2d:            fwd = conv2d_fwd,       dx = conv2d_bwd_data, dw = conv2d_bwd_filter(dy, x)
//   conv_transpose2d:  fwd = conv2d_bwd_data,  dx = conv2d_fwd,      dw = conv2d_bwd_filter(x, dy)
// The weight and bias gradients come from one bwd_filter call (it accumulates both); when only
// one of them is wanted, the other goes to a scratch tensor.
#include "autograd/functions/conv.h"

#include "autograd/amp.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/shape.h"
#include "autograd/int8.h"
#include "autograd/node.h"

namespace aim::autograd {
namespace {

using kernels::Conv2dParams;

void check_conv_inputs(const char* op, const Variable& x, const Variable& w, const Variable& b) {
  AIM_CHECK(x.defined() && x.dim() == 4, op, ": x must be [N, C, H, W], got ",
            x.defined() ? to_string(x.sizes()) : std::string("undefined"));
  AIM_CHECK(w.defined() && w.dim() == 4, op, ": weight must be 4-D, got ",
            w.defined() ? to_string(w.sizes()) : std::string("undefined"));
  AIM_CHECK(!b.defined() || b.dim() == 1, op, ": bias must be 1-D, got ",
            b.defined() ? to_string(b.sizes()) : std::string());
}

// Weight (and bias) gradient of a convolution whose "input" is `in` and whose "output gradient"
// is `dout`, accumulated into slots wj / bj of g.
void filter_grads(Grads& g, int wj, int bj, bool has_bias, const Tensor& dout, const Tensor& in,
                  const Tensor& w, const Conv2dParams& p) {
  const bool want_w = g.needs(wj), want_b = has_bias && g.needs(bj);
  if (!want_w && !want_b) return;
  kernels::Conv2dBwdFilterArgs a;
  a.dy = dout;
  a.x = in;
  a.dw = want_w ? g.accum(wj) : Tensor::zeros(w.sizes(), w.dtype(), w.device());
  if (want_b) a.dbias = g.accum(bj);
  a.p = p;
  kernels::conv2d_bwd_filter(a);
}

struct Conv2dNode final : Node {
  Tensor x, w;  // contiguous, as the forward used them
  Conv2dParams p;
  bool has_bias = false;
  const char* name() const override { return "Conv2d"; }
  void backward(Grads& g) override {
    const Tensor dy = g.dy();
    if (g.needs(0)) {
      kernels::Conv2dBwdDataArgs a;
      a.dy = dy;
      a.w = w;
      a.dx = g.out(0);
      a.p = p;
      kernels::conv2d_bwd_data(a);
    }
    filter_grads(g, 1, 2, has_bias, dy, x, w, p);
  }
  void release() override { x = w = Tensor(); }
};

struct ConvTranspose2dNode final : Node {
  Tensor x, w;  // x: the transposed conv's input (the plain conv's "dy"); w: [Cin, Cout/G, R, S]
  Conv2dParams p;
  const char* name() const override { return "ConvTranspose2d"; }
  void backward(Grads& g) override {
    const Tensor dy = g.dy();  // [N, Cout, Ho, Wo]: the plain conv's "x"
    if (g.needs(0)) {
      kernels::Conv2dFwdArgs a;
      a.x = dy;
      a.w = w;
      a.y = g.out(0);
      a.p = p;
      kernels::conv2d_fwd(a);
    }
    filter_grads(g, 1, -1, false, x, dy, w, p);
  }
  void release() override { x = w = Tensor(); }
};

// relu(scale[c] * x + shift[c]) as ops of their own (ConvInputAffine's unfused form).
Variable input_affine(const Variable& x, const ConvInputAffine& in) {
  const Shape s{1, x.size(1), 1, 1};
  const Variable scale(in.scale.to(x.dtype()).view(s)), shift(in.shift.to(x.dtype()).view(s));
  const Variable y = autograd::add(autograd::mul(x, scale), shift);
  return in.relu ? autograd::relu(y) : y;
}

}  // namespace

// The reason both of this file's declarations share.
constexpr char kWhyGemm[] = "implicit GEMM, fp32 accumulation";

constexpr amp::Declaration kConv2dAmp{"conv2d", amp::OpClass::lowp, kWhyGemm};

Variable conv2d(const Variable& x, const Variable& weight, const Variable& bias,
                const Conv2dParams& p, bool relu, const Variable& residual,
                const ConvInputAffine& in) {
  if (in.defined()) {
    AIM_CHECK(x.defined() && x.dim() == 4 && in.shift.defined() &&
                  in.scale.sizes() == Shape{x.size(1)} && in.shift.sizes() == Shape{x.size(1)},
              "conv2d: the input transform needs scale and shift of [C] for x ",
              x.defined() ? to_string(x.sizes()) : std::string("undefined"));
    const bool fused = x.data().device().is_cpu() && !int8::active() && weight.defined() &&
                       weight.dim() == 4 &&
                       kernels::conv2d_pointwise(weight.size(2), weight.size(3), p) &&
                       !needs_grad({&x, &weight, &bias, &residual});
    if (!fused) return conv2d(input_affine(x, in), weight, bias, p, relu, residual);
  }
  // The epilogue in separate ops: int8 convolutions, and a residual in training. A relu alone is
  // fused in training too: the conv's node gets a stand-in output (relu's tensor, never read:
  // the conv's backward reads x and w) and relu's node is recorded over it (relu_recorded), so
  // the backward is the unfused one's.
  auto unfused = [&](Variable y) {
    if (residual.defined()) y = autograd::add(y, residual);
    return relu ? autograd::relu(y) : y;
  };
  if (auto y = int8::conv2d(x, weight, bias, p)) return unfused(*y);
  if (auto c = amp::autocast(kConv2dAmp, {&x, &weight, &bias, &residual}))
    return conv2d((*c)[0], (*c)[1], (*c)[2], p, relu, (*c)[3], in);
  if (residual.defined() && needs_grad({&x, &weight, &bias, &residual}))
    return unfused(conv2d(x, weight, bias, p));
  check_conv_inputs("conv2d", x, weight, bias);
  const Tensor xc = in.defined() && kernels::conv2d_images_contiguous(x.data())
                        ? x.data()
                        : x.data().contiguous();
  const Tensor wc = weight.data().contiguous();
  const int64_t N = xc.size(0), H = xc.size(2), W = xc.size(3);
  const int64_t K = wc.size(0), R = wc.size(2), S = wc.size(3);
  const int64_t P = kernels::conv2d_out_size(H, R, p.stride_h, p.pad_top, p.pad_bottom, p.dil_h);
  const int64_t Q = kernels::conv2d_out_size(W, S, p.stride_w, p.pad_left, p.pad_right, p.dil_w);
  AIM_CHECK(P > 0 && Q > 0, "conv2d: kernel ", R, "x", S, " (dilation ", p.dil_h, ",", p.dil_w,
            ") does not fit the padded input ", to_string(xc.sizes()));
  kernels::Conv2dFwdArgs a;
  a.x = xc;
  a.w = wc;
  if (bias.defined()) a.bias = bias.data().contiguous();
  a.y = Tensor::empty({N, K, P, Q}, xc.dtype(), xc.device());
  a.p = p;
  a.relu = relu;
  if (in.defined()) {
    a.in_scale = in.scale;
    a.in_shift = in.shift;
    a.in_relu = in.relu;
  }
  if (residual.defined()) {
    a.residual = residual.data().contiguous();
    AIM_CHECK(a.residual.sizes() == a.y.sizes() && a.residual.dtype() == a.y.dtype(),
              "conv2d: the residual must be ", to_string(a.y.sizes()), " ", dtype_name(a.y.dtype()),
              " like the output, got ", to_string(a.residual.sizes()), " ",
              dtype_name(a.residual.dtype()));
  }
  kernels::conv2d_fwd(a);
  if (!needs_grad({&x, &weight, &bias})) return Variable(a.y);
  auto n = std::make_shared<Conv2dNode>();
  n->x = xc;
  n->w = wc;
  n->p = p;
  n->has_bias = bias.defined();
  const Variable z = attach1(n, {x, weight, bias}, a.y);
  return relu ? relu_recorded(z, a.y) : z;
}

constexpr amp::Declaration kConvTranspose2dAmp{"conv_transpose2d", amp::OpClass::lowp, kWhyGemm};
Variable conv_transpose2d(const Variable& x, const Variable& weight, const Variable& bias,
                          const Conv2dParams& p, int64_t out_pad_h, int64_t out_pad_w) {
  if (auto c = amp::autocast(kConvTranspose2dAmp, {&x, &weight, &bias}))
    return conv_transpose2d((*c)[0], (*c)[1], (*c)[2], p, out_pad_h, out_pad_w);
  check_conv_inputs("conv_transpose2d", x, weight, bias);
  const Tensor xc = x.data().contiguous(), wc = weight.data().contiguous();
  AIM_CHECK(xc.size(1) == wc.size(0), "conv_transpose2d: x has ", xc.size(1), " channels, weight ",
            to_string(wc.sizes()), " expects ", wc.size(0));
  AIM_CHECK(out_pad_h >= 0 && out_pad_w >= 0 && (out_pad_h < p.stride_h || out_pad_h < p.dil_h) &&
                (out_pad_w < p.stride_w || out_pad_w < p.dil_w),
            "conv_transpose2d: output padding must be smaller than stride or dilation, got ",
            out_pad_h, ",", out_pad_w);
  const int64_t N = xc.size(0), Cout = wc.size(1) * p.groups;
  const int64_t Ho = (xc.size(2) - 1) * p.stride_h - p.pad_top - p.pad_bottom +
                     p.dil_h * (wc.size(2) - 1) + out_pad_h + 1;
  const int64_t Wo = (xc.size(3) - 1) * p.stride_w - p.pad_left - p.pad_right +
                     p.dil_w * (wc.size(3) - 1) + out_pad_w + 1;
  AIM_CHECK(Ho > 0 && Wo > 0, "conv_transpose2d: output would be empty for x ",
            to_string(xc.sizes()), " and weight ", to_string(wc.sizes()));
  kernels::Conv2dBwdDataArgs a;
  a.dy = xc;
  a.w = wc;
  a.dx = Tensor::empty({N, Cout, Ho, Wo}, xc.dtype(), xc.device());
  a.p = p;
  kernels::conv2d_bwd_data(a);
  Variable y(a.dx);
  if (needs_grad({&x, &weight})) {
    auto n = std::make_shared<ConvTranspose2dNode>();
    n->x = xc;
    n->w = wc;
    n->p = p;
    y = attach1(n, {x, weight}, a.dx);
  }
  if (!bias.defined()) return y;
  AIM_CHECK(bias.size(0) == Cout, "conv_transpose2d: bias must be [", Cout, "], got ",
            to_string(bias.sizes()));
  return add(y, reshape(bias, {1, Cout, 1, 1}));
}

void amp::declarations_conv(std::vector<amp::Declaration>& out) {
  out.insert(out.end(), {kConv2dAmp, kConvTranspose2dAmp});
}

}  // namespace aim::autograd
