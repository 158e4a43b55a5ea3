// The test cases of the optimizer ops (optim_cpu.h): shapes and their field names, case makers.
#include <cmath>
#include <vector>

#include "kernels/optim/optim_cpu.h"

namespace aim::kernels::optim_cpu {

// Shapes: {n, mode}. Param and grad random in [-1, 1); state random with the initial content the
// in-place update reads (second moments and sums non-negative).
std::vector<TestShape> test_shapes(int modes) {
  std::vector<TestShape> r;
  for (int64_t n : {1, 31, 32, 33, 97, 100003})
    for (int m = 0; m < modes; ++m) r.push_back({n, m});
  return r;
}

std::vector<std::string> shape_fields() { return {"n", "mode"}; }

namespace {

// hyper: {lr, step} as the capturable update reads it (f64); undefined for the plain modes.
template <class Args>
Args base_args(int64_t n, DType t, uint64_t seed, std::vector<double> hyper = {}) {
  Args a;
  a.grad = random_tensor({n}, t, seed + 1);
  a.param = random_tensor({n}, t, seed);
  if (!hyper.empty()) a.hyper = Tensor::from_vector(hyper, {2});
  return a;
}

}  // namespace

// mode 0: plain SGD; 1: momentum, first step, wd; 2: momentum + dampening + wd; 3: Nesterov;
// 4: mode 2 capturable (lr 0.07 from hyper; the lr field is a wrong 0.5).
TestCase make_sgd_case(const TestShape& s, DType t, uint64_t seed) {
  const int64_t n = s[0];
  const int mode = int(s[1]);
  auto a = base_args<SgdUpdateArgs>(
      n, t, seed, mode == 4 ? std::vector<double>{0.07, 3} : std::vector<double>{});
  if (mode != 0) a.momentum_buf = random_tensor({n}, optim_state_dtype(t), seed + 2);
  a.lr = mode == 4 ? 0.5 : 0.1;
  a.momentum = mode == 0 ? 0.0 : 0.9;
  a.dampening = mode == 2 || mode == 4 ? 0.1 : 0.0;
  a.weight_decay = mode == 0 ? 0.0 : mode == 3 ? 0.05 : 0.01;
  a.nesterov = mode == 3;
  a.first_step = mode == 1;
  return to_case(a);
}

// mode 0: Adam step 1, no weight decay; 1: Adam step 3, wd; 2: AdamW step 10, wd; 3: AdamW
// capturable (lr 0.02 and step 7 from hyper; the fields are a wrong 1.0 and 1).
TestCase make_adam_case(const TestShape& s, DType t, uint64_t seed) {
  const int64_t n = s[0];
  const int mode = int(s[1]);
  auto a = base_args<AdamUpdateArgs>(
      n, t, seed, mode == 3 ? std::vector<double>{0.02, 7} : std::vector<double>{});
  a.exp_avg = random_tensor({n}, optim_state_dtype(t), seed + 2, -0.5, 0.5);
  a.exp_avg_sq = random_tensor({n}, optim_state_dtype(t), seed + 3, 0.01, 1.0);
  a.lr = mode == 3 ? 1.0 : 0.01;
  a.beta1 = 0.9;
  a.beta2 = 0.999;
  a.eps = 1e-8;
  a.weight_decay = mode == 0 ? 0.0 : 0.01;
  a.decoupled = mode >= 2;
  a.step = mode == 0 || mode == 3 ? 1 : mode == 1 ? 3 : 10;
  return to_case(a);
}

// mode 0: step 1, no decay; 1: step 4, lr_decay and wd; 2: mode 1 capturable (lr 0.03 and step
// 5 from hyper; the fields are a wrong 1.0 and 1).
TestCase make_adagrad_case(const TestShape& s, DType t, uint64_t seed) {
  const int64_t n = s[0];
  const int mode = int(s[1]);
  auto a = base_args<AdagradUpdateArgs>(
      n, t, seed, mode == 2 ? std::vector<double>{0.03, 5} : std::vector<double>{});
  a.sum = random_tensor({n}, optim_state_dtype(t), seed + 2, 0.0, 1.0);
  a.lr = mode == 2 ? 1.0 : 0.05;
  a.lr_decay = mode == 0 ? 0.0 : 0.01;
  a.weight_decay = mode == 0 ? 0.0 : 0.01;
  a.eps = 1e-10;
  a.step = mode == 1 ? 4 : 1;
  return to_case(a);
}

// mode 0: all finite; 1: an Inf in the middle; 2: a NaN at the end. found_inf starts at 0.
TestCase make_unscale_case(const TestShape& s, DType t, uint64_t seed) {
  const int64_t n = s[0];
  const int mode = int(s[1]);
  AmpUnscaleArgs a;
  a.grad = random_tensor({n}, t, seed, -1000.0, 1000.0);
  if (mode > 0) {
    Tensor bad = Tensor::from_vector(std::vector<float>{mode == 1 ? INFINITY : NAN}, {1}).to(t);
    a.grad.slice(0, mode == 1 ? n / 2 : n - 1, (mode == 1 ? n / 2 : n - 1) + 1).copy_(bad);
  }
  a.found_inf = Tensor::zeros({1}, optim_state_dtype(t));
  a.inv_scale = 1.0 / 1024;
  return to_case(a);
}

// mode 0: power -0.5, no regularisation; 1: power -0.3, l1 0.01, l2 0.001; 2: power 0 (constant
// rate), l1 0.5 (most weights land in the dead zone: exact zeros); 3: mode 1 capturable (lr
// 0.07 from hyper; the field is a wrong 1.0).
TestCase make_ftrl_case(const TestShape& s, DType t, uint64_t seed) {
  const int64_t n = s[0];
  const int mode = int(s[1]);
  auto a = base_args<FtrlUpdateArgs>(
      n, t, seed, mode == 3 ? std::vector<double>{0.07, 2} : std::vector<double>{});
  a.accum = random_tensor({n}, optim_state_dtype(t), seed + 2, 0.1, 1.0);
  a.linear = random_tensor({n}, optim_state_dtype(t), seed + 3, -1.0, 1.0);
  a.lr = mode == 3 ? 1.0 : 0.05;
  a.lr_power = mode == 0 ? -0.5 : mode == 1 || mode == 3 ? -0.3 : 0.0;
  a.l1 = mode == 0 ? 0.0 : mode == 1 || mode == 3 ? 0.01 : 0.5;
  a.l2 = mode == 1 || mode == 3 ? 0.001 : 0.0;
  return to_case(a);
}

// mode 0: acc starts at 0; 1: acc starts at 2.5 (accumulates).
TestCase make_sq_sum_case(const TestShape& s, DType t, uint64_t seed) {
  GradSqSumArgs a;
  a.x = random_tensor({s[0]}, t, seed);
  a.acc = Tensor::full({1}, s[1] == 0 ? 0.0 : 2.5, DType::f64);
  return to_case(a);
}

// mode 0: norm 10, max_norm 1 (scaled by ~0.1); 1: norm 0.5, max_norm 1 (untouched).
TestCase make_clip_case(const TestShape& s, DType t, uint64_t seed) {
  GradClipScaleArgs a;
  a.x = random_tensor({s[0]}, t, seed);
  a.norm = Tensor::full({1}, s[1] == 0 ? 10.0 : 0.5, DType::f64);
  a.max_norm = 1.0;
  return to_case(a);
}

// LAMB stage 1. mode 0: step 1, no weight decay, norms start at 0; 1: step 3, wd 0.01, norms
// start at {1.5, 2.5} (accumulates); 2: capturable (step 7 from hyper; the field is a wrong 1),
// wd 0.1. update is poisoned (fully written).
TestCase make_lamb_stage1_case(const TestShape& s, DType t, uint64_t seed) {
  const int64_t n = s[0];
  const int mode = int(s[1]);
  auto a = base_args<LambStage1Args>(
      n, t, seed, mode == 2 ? std::vector<double>{0.5, 7} : std::vector<double>{});
  const DType st = optim_state_dtype(t);
  a.exp_avg = random_tensor({n}, st, seed + 2, -0.5, 0.5);
  a.exp_avg_sq = random_tensor({n}, st, seed + 3, 0.01, 1.0);
  a.update = poison_tensor({n}, st);
  a.norms = Tensor::from_vector(
      mode == 1 ? std::vector<double>{1.5, 2.5} : std::vector<double>{0.0, 0.0}, {2});
  a.beta1 = 0.9;
  a.beta2 = 0.999;
  a.eps = 1e-6;
  a.weight_decay = mode == 0 ? 0.0 : mode == 1 ? 0.01 : 0.1;
  a.step = mode == 1 ? 3 : 1;
  return to_case(a);
}

// LAMB stage 2, from norms {w^2, u^2}. mode 0: {4, 9} (ratio 2/3); 1: ||w|| = 0 (ratio 1);
// 2: ||u|| = 0 (ratio 1); 3: capturable (lr 0.02 from hyper; the field is a wrong 1.0), norms
// {2.25, 0.36} (ratio 2.5).
TestCase make_lamb_stage2_case(const TestShape& s, DType t, uint64_t seed) {
  const int64_t n = s[0];
  const int mode = int(s[1]);
  LambStage2Args a;
  a.param = random_tensor({n}, t, seed);
  a.update = random_tensor({n}, optim_state_dtype(t), seed + 1, -2.0, 2.0);
  const std::vector<std::vector<double>> norms = {{4, 9}, {0, 9}, {4, 0}, {2.25, 0.36}};
  a.norms = Tensor::from_vector(norms[size_t(mode)], {2});
  a.lr = mode == 3 ? 1.0 : 0.01;
  if (mode == 3) a.hyper = Tensor::from_vector(std::vector<double>{0.02, 4}, {2});
  return to_case(a);
}

// The LAMB cases run their reference in the case's dtypes (norms stay f64), and the variants
// compute u and the sums of squares from f32 values for f32 and 16-bit parameters: f64 outputs
// (the norms, and every output of f64 parameters) are compared at f32's tolerance.
Tolerance lamb_tolerance(DType t, const TestShape&) {
  return default_tolerance(t == DType::f64 ? DType::f32 : t);
}

bool simt_size(const TestShape& s) { return s[0] < 10000; }

}  // namespace aim::kernels::optim_cpu
