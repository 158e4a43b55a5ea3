#include "autograd/int8.h"

#include "tensor/check.h"

namespace aim::autograd::int8 {

namespace detail {
thread_local State* current = nullptr;

namespace {

QuantLayer* layer_for(const Variable& w, const Tensor& x) {
  State& s = *current;
  if (s.observer) {
    s.observer->observe(w.impl().get(), x);
    return nullptr;
  }
  auto it = s.layers->find(w.impl().get());
  if (it == s.layers->end()) return nullptr;
  AIM_CHECK(!grad_enabled(), "int8: quantized layers are for inference (grad mode is on)");
  return &it->second;
}

Tensor quantize_input(const Tensor& x, float scale) {
  return kernels::quantize_tensor(x.contiguous(), scale);
}

Tensor f32_bias(const Variable& b) {
  return b.defined() ? b.data().to(DType::f32).contiguous() : Tensor();
}

}  // namespace

std::optional<Variable> linear(const Variable& x, const Variable& w, const Variable& b) {
  QuantLayer* q = layer_for(w, x.data());
  if (!q) return std::nullopt;
  const int64_t in = w.size(1), out = w.size(0);
  AIM_CHECK(x.dim() >= 1 && x.size(-1) == in, "int8 linear: x ", to_string(x.sizes()),
            " does not match weight ", to_string(w.sizes()));
  const int64_t M = x.numel() / in;
  kernels::QLinearArgs a;
  a.x = quantize_input(x.data(), q->x_scale).view({M, in});
  a.w = q->w.q;
  a.x_scale = q->x_scale;
  a.w_scales = q->w.scales;
  a.bias = f32_bias(b);
  a.y = Tensor::empty({M, out}, DType::f32, x.device());
  kernels::qlinear(a);
  ++q->calls;
  Shape ys = x.sizes();
  ys.back() = out;
  return Variable(a.y.view(ys));
}

std::optional<Variable> conv2d(const Variable& x, const Variable& w, const Variable& b,
                               const kernels::Conv2dParams& p) {
  QuantLayer* q = layer_for(w, x.data());
  if (!q) return std::nullopt;
  const Tensor xc = x.data().contiguous();
  const int64_t N = xc.size(0), H = xc.size(2), W = xc.size(3);
  const int64_t K = w.size(0), R = w.size(2), S = w.size(3);
  const int64_t P = kernels::conv2d_out_size(H, R, p.stride_h, p.pad_top, p.pad_bottom, p.dil_h);
  const int64_t Q = kernels::conv2d_out_size(W, S, p.stride_w, p.pad_left, p.pad_right, p.dil_w);
  kernels::QConv2dArgs a;
  a.x = quantize_input(xc, q->x_scale);
  a.w = q->w.q;
  a.x_scale = q->x_scale;
  a.w_scales = q->w.scales;
  a.bias = f32_bias(b);
  a.y = Tensor::empty({N, K, P, Q}, DType::f32, xc.device());
  a.p = p;
  kernels::qconv2d(a);
  ++q->calls;
  return Variable(a.y);
}

}  // namespace detail

Mode::Mode(Observer* observer) : state_{observer, nullptr} {
  previous_ = detail::current;
  detail::current = &state_;
}

Mode::Mode(std::unordered_map<const VariableImpl*, QuantLayer>* layers) : state_{nullptr, layers} {
  previous_ = detail::current;
  detail::current = &state_;
}

Mode::~Mode() { detail::current = previous_; }

}  // namespace aim::autograd::int8
