// The test cases of batchnorm_fwd and batchnorm_bwd (batchnorm_cpu.h): shapes and their fields,
// case makers, tolerance, the emulator's budget.
#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/norm/batchnorm_cpu.h"
#include "kernels/testing.h"

namespace aim::kernels::batchnorm_cpu {

// Shapes {N, C, H, W, mode}: x is [N, C] when H = 0, [N, C, H] when W = 0, else [N, C, H, W].
// Forward modes: 0 training, affine, running statistics updated; 1 training, no affine, no
// running statistics; 2 eval, affine, save_mean/save_rstd written; 3 eval, no affine, no save;
// 4 eval, affine, relu fused (x in [-2, 3): about half of y below zero); 5 training, affine,
// running statistics, relu fused.
// Backward modes: 0 training, affine, dx dgamma dbeta; 1 training, no affine, dx only; 2 frozen
// (training = false), affine, dx dgamma dbeta; 3 training, affine, dgamma only; 4 frozen, no
// affine, dx only; 5 training, affine, dx dgamma dbeta after a fused relu (y_relu: about half
// zeros); 6 frozen, affine, dx only, after a fused relu.
std::vector<std::string> batchnorm_shape_fields() { return {"N", "C", "H", "W", "mode"}; }

namespace {

Shape case_x_shape(const TestShape& s) {
  if (s[2] == 0) return {s[0], s[1]};
  if (s[3] == 0) return {s[0], s[1], s[2]};
  return {s[0], s[1], s[2], s[3]};
}

// Per-channel mean and 1/sqrt(biased var + eps) of x [N, C, ...] (double), in the statistics
// dtype.
std::pair<Tensor, Tensor> channel_stats(const Tensor& x, double eps) {
  const int64_t N = x.size(0), C = x.size(1);
  int64_t S = 1;
  for (int64_t d = 2; d < x.dim(); ++d) S *= x.size(d);
  const std::vector<double> v = x.to_vector<double>();
  std::vector<double> m(static_cast<size_t>(C)), r(static_cast<size_t>(C));
  for (int64_t c = 0; c < C; ++c) {
    double sum = 0, sq = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) sum += v[size_t((n * C + c) * S + s)];
    m[size_t(c)] = sum / double(N * S);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) {
        const double d = v[size_t((n * C + c) * S + s)] - m[size_t(c)];
        sq += d * d;
      }
    r[size_t(c)] = 1.0 / std::sqrt(sq / double(N * S) + eps);
  }
  const DType st = batchnorm_stat_dtype(x.dtype());
  return {Tensor::from_vector(m, Shape{C}).to(st), Tensor::from_vector(r, Shape{C}).to(st)};
}

// keep(per_channel, mode): whether the mode suits a shape with that many values per channel.
template <class Keep>
std::vector<TestShape> test_shapes(int modes, Keep keep) {
  // {N, C, H, W}: [N, C] (S = 1), odd sizes, one value per channel, channels of more values than
  // cuda.channel's 512 threads with S = 1 and S = 7 (the walk's carry), a ResNet-like plane.
  const std::vector<TestShape> sizes = {
      {1, 3, 1, 1},   {4, 3, 0, 0},  {2, 5, 7, 0},   {3, 4, 5, 6},   {64, 33, 0, 0},
      {600, 3, 0, 0}, {80, 4, 7, 0}, {5, 17, 9, 11}, {2, 3, 33, 35}, {16, 64, 28, 28}};
  std::vector<TestShape> r;
  for (const TestShape& z : sizes)
    for (int64_t m = 0; m < modes; ++m) {
      const int64_t per_channel = z[0] * std::max<int64_t>(z[2], 1) * std::max<int64_t>(z[3], 1);
      if (!keep(per_channel, m)) continue;
      if (z[0] * z[1] * std::max<int64_t>(z[2], 1) * std::max<int64_t>(z[3], 1) > 100000 && m != 0)
        continue;  // the large shape once, in the main mode
      r.push_back({z[0], z[1], z[2], z[3], m});
    }
  return r;
}

}  // namespace

std::vector<TestShape> batchnorm_fwd_test_shapes() {
  // Training with running statistics needs N*S > 1 (unbiased variance).
  return test_shapes(
      6, [](int64_t per_channel, int64_t m) { return per_channel > 1 || (m != 0 && m != 5); });
}

std::vector<TestShape> batchnorm_bwd_test_shapes() {
  return test_shapes(7, [](int64_t, int64_t) { return true; });
}

TestCase make_batchnorm_fwd_case(const TestShape& s, DType t, uint64_t seed) {
  const Shape xs = case_x_shape(s);
  const int64_t C = s[1], mode = s[4];
  const DType st = batchnorm_stat_dtype(t);
  const bool affine = mode == 0 || mode == 2 || mode >= 4;
  BatchNormFwdArgs a;
  a.x = random_tensor(xs, t, seed, -2.0, 3.0);
  if (affine) {
    a.gamma = random_tensor({C}, st, seed + 1, 0.5, 1.5);
    a.beta = random_tensor({C}, st, seed + 2, -0.5, 0.5);
  }
  if (mode != 1) {  // updated in place (training) or read (eval): outputs with their content
    a.running_mean = random_tensor({C}, st, seed + 3, -0.5, 0.5);
    a.running_var = random_tensor({C}, st, seed + 4, 0.5, 2.0);
  }
  a.y = poison_tensor(xs, t);
  if (mode < 3 || mode == 5) {
    a.save_mean = poison_tensor({C}, st);
    a.save_rstd = poison_tensor({C}, st);
  }
  a.training = mode < 2 || mode == 5;
  a.relu = mode >= 4;
  a.momentum = 0.1;
  a.eps = 1e-5;
  return to_case(a);
}

TestCase make_batchnorm_bwd_case(const TestShape& s, DType t, uint64_t seed) {
  const Shape xs = case_x_shape(s);
  const int64_t C = s[1], mode = s[4];
  const DType st = batchnorm_stat_dtype(t);
  const bool training = mode != 2 && mode != 4 && mode != 6;
  const bool affine = mode == 0 || mode == 2 || mode == 3 || mode >= 5;
  BatchNormBwdArgs a;
  a.x = random_tensor(xs, t, seed, -2.0, 3.0);
  a.dy = random_tensor(xs, t, seed + 5, -1.0, 1.0);
  if (affine) a.gamma = random_tensor({C}, st, seed + 1, 0.5, 1.5);
  if (training) {
    std::tie(a.save_mean, a.save_rstd) = channel_stats(a.x, 1e-5);
  } else {  // frozen: running statistics, unrelated to this batch
    a.save_mean = random_tensor({C}, st, seed + 3, -0.5, 0.5);
    a.save_rstd = random_tensor({C}, st, seed + 4, 0.5, 2.0);
  }
  if (mode >= 5) {  // a fused relu's output: relu of a random tensor, about half zeros
    std::vector<double> v = random_tensor(xs, DType::f64, seed + 8, -1.0, 1.0).to_vector<double>();
    for (double& e : v) e = std::max(e, 0.0);
    a.y_relu = Tensor::from_vector(v, xs).to(t);
  }
  const bool want_dx = mode != 3, want_db = mode == 0 || mode == 2 || mode == 5;
  if (want_dx) a.dx = poison_tensor(xs, t);
  if (affine) a.dgamma = random_tensor({C}, st, seed + 6, -1.0, 1.0);
  if (want_db) a.dbeta = random_tensor({C}, st, seed + 7, -1.0, 1.0);
  a.training = training;
  return to_case(a);
}

// Per-channel sums over up to ~10^6 values: float accumulation against cpu.ref's double.
Tolerance batchnorm_tolerance(DType t, const TestShape&) {
  if (t == DType::f16) return {4e-3, 4e-3};
  if (t == DType::bf16) return {3e-2, 2e-2};
  if (t == DType::f32) return {1e-4, 1e-4};
  return default_tolerance(t);
}

bool batchnorm_simt_small(const TestShape& s) {
  const Shape xs = case_x_shape(s);
  return shape_numel(xs) <= 16384;
}

}  // namespace aim::kernels::batchnorm_cpu
