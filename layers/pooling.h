// Pooling modules (torch.nn.MaxPool2d, AvgPool2d, AdaptiveAvgPool2d) and Flatten, NCHW. Max and
// average pooling take either explicit symmetric padding (PyTorch, ceil_mode as PyTorch/Caffe)
// or TensorFlow "SAME" padding computed from the input size (out = ceil(in / stride); padding
// is excluded from averages, as TF does).
#pragma once
#include <cstdint>

#include "kernels/pool/pool2d.h"
#include "layers/module.h"

namespace aim::layers {

struct PoolOptions {
  int64_t kernel = 1, stride = 0;  // stride 0: = kernel (PyTorch's default)
  int64_t padding = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;  // average only
  bool tf_same = false;
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(const PoolOptions& o);
  MaxPool2d(int64_t kernel, int64_t stride, int64_t padding = 0, bool ceil_mode = false);
  Variable forward(const Variable& x) override;
  Shape count_flops(const Shape& in, double& flops) const override;
  std::string type_name() const override { return "MaxPool2d"; }

 private:
  PoolOptions o_;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(const PoolOptions& o);
  AvgPool2d(int64_t kernel, int64_t stride, int64_t padding = 0, bool ceil_mode = false,
            bool count_include_pad = true);
  Variable forward(const Variable& x) override;
  Shape count_flops(const Shape& in, double& flops) const override;
  std::string type_name() const override { return "AvgPool2d"; }

 private:
  PoolOptions o_;
};

class AdaptiveAvgPool2d : public Module {
 public:
  AdaptiveAvgPool2d(int64_t out_h, int64_t out_w) : out_h_(out_h), out_w_(out_w) {}
  Variable forward(const Variable& x) override;
  Shape count_flops(const Shape& in, double& flops) const override;
  std::string type_name() const override { return "AdaptiveAvgPool2d"; }

 private:
  int64_t out_h_, out_w_;
};

// [N, d1, d2, ...] -> [N, d1*d2*...] (torch.nn.Flatten(1)).
class Flatten : public Module {
 public:
  Variable forward(const Variable& x) override;
  Shape count_flops(const Shape& in, double& flops) const override;
  std::string type_name() const override { return "Flatten"; }
};

// The kernel parameters and output shape of a pooling layer on input [N, C, H, W].
kernels::Pool2dParams pool_params(const PoolOptions& o, const Shape& in, const char* what);
Shape pooled_shape(const PoolOptions& o, const Shape& in, const char* what);

}  // namespace aim::layers
