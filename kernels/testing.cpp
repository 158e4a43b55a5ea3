#include "kernels/testing.h"

#include <cmath>
#include <limits>

#include "tensor/philox.h"

namespace aim::kernels {

Tensor random_tensor(const Shape& shape, DType dtype, uint64_t seed, double lo, double hi) {
  Tensor t = Tensor::empty(shape, DType::f64, kCPU);
  double* p = t.data<double>();
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) {
    const double u = philox::uniform(seed, 0, uint64_t(i));
    double v = lo + (hi - lo) * u;
    if (is_integral(dtype)) v = std::floor(v);
    if (dtype == DType::boolean) v = v >= 0.5 * (lo + hi) ? 1.0 : 0.0;
    p[i] = v;
  }
  return t.to(dtype);
}

Tensor random_indices(const Shape& shape, int64_t n, DType dtype, uint64_t seed) {
  Tensor t = Tensor::empty(shape, DType::i64, kCPU);
  int64_t* p = t.data<int64_t>();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = std::min<int64_t>(int64_t(philox::uniform(seed, 0, uint64_t(i)) * double(n)), n - 1);
  return t.to(dtype);
}

double poison_value(DType dtype) {
  return is_floating(dtype) ? std::numeric_limits<double>::quiet_NaN()
                            : (dtype == DType::boolean ? 1.0 : 90.0);
}

Tensor poison_tensor(const Shape& shape, DType dtype) {
  return Tensor::full(shape, poison_value(dtype), dtype, kCPU);
}

}  // namespace aim::kernels
