#include "layers/init.h"

namespace aim::layers {

Tensor uniform_init(const Shape& sizes, double lo, double hi, kernels::Generator& gen) {
  Tensor t = Tensor::empty(sizes, DType::f32, kCPU);
  kernels::UniformArgs a;
  a.y = t;
  a.lo = float(lo);
  a.hi = float(hi);
  a.seed = gen.seed();
  a.offset = gen.next(t.numel());
  kernels::uniform(a);
  return t;
}

Tensor normal_init(const Shape& sizes, double mean, double std, kernels::Generator& gen) {
  Tensor t = Tensor::empty(sizes, DType::f32, kCPU);
  kernels::NormalArgs a;
  a.y = t;
  a.mean = float(mean);
  a.std = float(std);
  a.seed = gen.seed();
  a.offset = gen.next(t.numel());
  kernels::normal(a);
  return t;
}

}  // namespace aim::layers
