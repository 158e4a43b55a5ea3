// Conv2d and ConvTranspose2d (torch.nn.Conv2d / ConvTranspose2d), NCHW, with groups, stride,
// dilation and either explicit symmetric padding or TensorFlow "SAME" padding (computed from the
// input size at each call: out = ceil(in / stride), the odd pixel padded after).
// Init as PyTorch: kaiming_uniform(a = sqrt(5)) for weight and U(-1/sqrt(fan_in), 1/sqrt(fan_in))
// for bias, i.e. both U(+-1/sqrt(fan_in)), from Philox(seed): weight first, then bias. Models
// re-initialise with their reference's scheme (layers/init.h).
#pragma once
#include <cstdint>
#include <vector>

#include "autograd/functions/conv.h"
#include "kernels/conv/conv2d.h"
#include "layers/module.h"

namespace aim::layers {

struct ConvOptions {
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;  // symmetric, ignored when tf_same
  bool tf_same = false;
  int64_t dil_h = 1, dil_w = 1;
  int64_t groups = 1;
  bool bias = true;
  int64_t out_pad_h = 0, out_pad_w = 0;  // ConvTranspose2d only

  ConvOptions& stride(int64_t s) { return stride_h = stride_w = s, *this; }
  ConvOptions& padding(int64_t p) { return pad_h = pad_w = p, *this; }
  ConvOptions& same() { return tf_same = true, *this; }
  ConvOptions& dilation(int64_t d) { return dil_h = dil_w = d, *this; }
  ConvOptions& with_groups(int64_t g) { return groups = g, *this; }
  ConvOptions& no_bias() { return bias = false, *this; }
  ConvOptions& output_padding(int64_t p) { return out_pad_h = out_pad_w = p, *this; }
};

class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_h, int64_t kernel_w,
         const ConvOptions& o = {}, uint64_t seed = 0);
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, const ConvOptions& o = {},
         uint64_t seed = 0)
      : Conv2d(in_channels, out_channels, kernel, kernel, o, seed) {}
  Variable forward(const Variable& x) override;
  // relu(conv(x) + residual) (residual like the output): at inference one kernel, the sum and the
  // relu in its epilogue (a ResNet block's last conv after its batch norm was folded in).
  Variable forward_residual_relu(const Variable& x, const Variable& residual);
  // relu(conv(x)): at inference the relu in the kernel's epilogue (no pass of its own); with a
  // gradient, conv then relu as two ops (autograd::conv2d). Sequential calls it for a Conv2d
  // followed by a ReLU.
  Variable forward_relu(const Variable& x);
  Shape count_flops(const Shape& in, double& flops) const override;
  std::string type_name() const override { return "Conv2d"; }
  // The kernel parameters for an input of H x W (TF SAME pads depend on it).
  kernels::Conv2dParams params_for(int64_t H, int64_t W) const;
  Shape output_shape(const Shape& in) const;
  const ConvOptions& options() const { return o_; }
  int64_t in_channels() const { return in_; }
  int64_t out_channels() const { return out_; }
  // w[k] *= scale[k], bias[k] = bias[k] * scale[k] + shift[k] (a bias is created when absent): a
  // following batch norm folded in (layers/fold.h; inference only).
  void fold_scale_shift(const std::vector<double>& scale, const std::vector<double>& shift);
  // forward returns relu(conv(x)), the relu in the kernel's epilogue at inference: the folded
  // batch norm after it was called through forward_relu (layers/fold.h; inference only).
  void set_fused_relu(bool on) { fused_relu_ = on; }
  bool fused_relu() const { return fused_relu_; }
  // The batch norm (and relu) before it folded in as its input transform (pointwise convs only;
  // layers/fold.h; inference only): x' = relu(scale[c] * x + shift[c]), in the kernel's copy of
  // its input on the CPU (autograd::ConvInputAffine).
  void set_input_affine(const std::vector<double>& scale, const std::vector<double>& shift,
                        bool relu);
  bool has_input_affine() const { return input_affine_.defined(); }
  bool pointwise() const;

  Parameter weight;  // [out, in/groups, kh, kw]
  Parameter bias;    // [out], undefined when !bias

 private:
  int64_t in_, out_, kh_, kw_;
  ConvOptions o_;
  bool fused_relu_ = false;
  autograd::ConvInputAffine input_affine_;
};

class ConvTranspose2d : public Module {
 public:
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, int64_t kernel,
                  const ConvOptions& o = {}, uint64_t seed = 0);
  Variable forward(const Variable& x) override;
  Shape count_flops(const Shape& in, double& flops) const override;
  std::string type_name() const override { return "ConvTranspose2d"; }
  kernels::Conv2dParams params() const;

  Parameter weight;  // [in, out/groups, k, k]
  Parameter bias;    // [out], undefined when !bias

 private:
  int64_t in_, out_, k_;
  ConvOptions o_;
};

}  // namespace aim::layers
