// SyncBatchNorm (autograd/functions/sync_batch_norm.h, layers::SyncBatchNormScope): 2 and 3
// ranks (local backend threads) each normalising their slice of a batch give the forward output,
// the input gradient, the parameter gradients (summed over the ranks) and the running statistics
// of one BatchNorm over the whole batch: 1e-6 in f32, 1e-12 in f64 (relative to the largest
// value where that is above 1: the parameter gradients sum many terms), for BatchNorm1d ([N, C] and
// [N, C, L]), BatchNorm2d and Dice; eval mode is untouched; and the trainer's --sync-bn makes
// the tiny ResNet-50 with batch statistics and DIN with bn=train batch-split invariant.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/functions/elementwise.h"
#include "autograd/functions/reduce.h"
#include "autograd/tensor_ops.h"
#include "layers/activation.h"
#include "layers/batchnorm.h"
#include "tensor/philox.h"
#include "tests/support/common.h"
#include "tests/support/train_compare.h"
#include "train/dist/communicator.h"
#include "train/trainer.h"

namespace aim {
namespace {

using autograd::Variable;

// The rank group's collectives for sync_batch_norm, over a dist::Communicator.
autograd::BatchStatsSync stats_sync(dist::Communicator& c) {
  autograd::BatchStatsSync s;
  s.ranks = c.size();
  s.all_gather = [&c](const Tensor& in, const Tensor& out) { c.all_gather(in, out); };
  s.all_reduce_sum = [&c](const Tensor& t) { c.all_reduce(t, dist::ReduceOp::Sum); };
  return s;
}

// Deterministic values in [-2, 3) with a per-channel offset (so the means are not ~0).
Tensor values(const Shape& shape, uint64_t seed, DType t) {
  std::vector<double> v(size_t(shape_numel(shape)));
  uint64_t h = seed * 0x9E3779B97F4A7C15ull;
  for (size_t i = 0; i < v.size(); ++i) {
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    v[i] = 5.0 * double(h >> 11) / double(1ull << 53) - 2.0 + 0.5 * double(i % 3);
  }
  return Tensor::from_vector<double>(v, shape).to(t);
}

struct Result {
  Tensor y, dx;
  std::map<std::string, Tensor> grads, buffers;
};

// One module's forward and backward (loss = sum(y * w)) on x in training mode.
Result run_module(layers::Module& m, const Tensor& x, const Tensor& w) {
  m.train();
  Variable xv(x.clone(), /*requires_grad=*/true);
  Variable y = m.forward(xv);
  autograd::sum(autograd::mul(y, Variable(w))).backward();
  Result r;
  r.y = y.data();
  r.dx = xv.grad();
  for (const auto& [n, p] : m.named_parameters()) r.grads[n] = p.grad().clone();
  for (const auto& [n, b] : m.named_buffers()) r.buffers[n] = b.clone();
  return r;
}

// max |a - b| / max(1, max |b|): absolute for values of order 1, relative for sums of many.
double max_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.sizes(), b.sizes());
  const std::vector<double> x = a.to(DType::f64).contiguous().to_vector<double>();
  const std::vector<double> y = b.to(DType::f64).contiguous().to_vector<double>();
  double d = 0, scale = 1;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    d = std::max(d, std::fabs(x[i] - y[i]));
    scale = std::max(scale, std::fabs(y[i]));
  }
  return d / scale;
}

// The module built by `make`, over x [N, ...] split into `ranks` slices along dim 0: the ranks'
// outputs and input gradients concatenated, and their parameter gradients summed, equal one
// module's on the whole x; every rank's running statistics equal the single module's.
void expect_sync_equals_whole(const std::function<std::shared_ptr<layers::Module>()>& make,
                              const Shape& shape, DType t, int ranks, double tol) {
  SCOPED_TRACE(std::string(dtype_name(t)) + " " + to_string(shape) + " on " +
               std::to_string(ranks) + " ranks");
  const Tensor x = values(shape, 7, t), w = values(shape, 11, t);
  auto whole = make();
  whole->to(t);
  // A second step too: the running statistics then blend twice.
  run_module(*whole, x, w);
  for (const auto& [n, p] : whole->named_parameters()) p.grad().zero_();
  const Result want = run_module(*whole, x, w);

  const int64_t N = shape[0], per = N / ranks;
  std::vector<Result> got(static_cast<size_t>(ranks));
  dist::run_local_ranks(ranks, [&](int r, dist::Communicator& c) {
    auto m = make();
    m->to(t);
    const autograd::BatchStatsSync sync = stats_sync(c);
    layers::SyncBatchNormScope scope(&sync);
    const int64_t a = r * per, b = r + 1 == ranks ? N : a + per;  // the last rank takes the rest
    const Tensor xr = x.slice(0, a, b).contiguous(), wr = w.slice(0, a, b).contiguous();
    run_module(*m, xr, wr);
    for (const auto& [n, p] : m->named_parameters()) p.grad().zero_();
    got[size_t(r)] = run_module(*m, xr, wr);
  });
  int64_t a = 0;
  for (int r = 0; r < ranks; ++r) {
    const Result& g = got[size_t(r)];
    const int64_t b = a + g.y.size(0);
    EXPECT_LE(max_diff(g.y, want.y.slice(0, a, b)), tol) << "y, rank " << r;
    EXPECT_LE(max_diff(g.dx, want.dx.slice(0, a, b)), tol) << "dx, rank " << r;
    for (const auto& [n, v] : want.buffers) {
      if (is_floating(v.dtype())) {
        EXPECT_LE(max_diff(g.buffers.at(n), v), tol) << n << ", rank " << r;
      }
    }
    a = b;
  }
  EXPECT_EQ(a, N);
  for (const auto& [n, v] : want.grads) {
    Tensor sum = got[0].grads.at(n).clone();
    for (int r = 1; r < ranks; ++r) sum = autograd::add(sum, got[size_t(r)].grads.at(n));
    EXPECT_LE(max_diff(sum, v), tol) << "grad " << n;
  }
}

TEST(SyncBatchNorm, BatchNorm2dRanksEqualTheWholeBatch) {
  auto make = [] { return std::make_shared<layers::BatchNorm2d>(5, 1e-5, 0.1); };
  for (const int ranks : {2, 3}) {
    expect_sync_equals_whole(make, {6, 5, 3, 4}, DType::f32, ranks, 1e-6);
    expect_sync_equals_whole(make, {6, 5, 3, 4}, DType::f64, ranks, 1e-12);
  }
  // Uneven slices (7 samples on 2 ranks: 3 and 4) and the cumulative average (momentum unset).
  expect_sync_equals_whole(
      [] { return std::make_shared<layers::BatchNorm2d>(3, 1e-3, std::nullopt); }, {7, 3, 2, 2},
      DType::f64, 2, 1e-12);
}

TEST(SyncBatchNorm, BatchNorm1dRanksEqualTheWholeBatch) {
  auto make = [] { return std::make_shared<layers::BatchNorm1d>(4, 1e-3, 0.1); };
  for (const int ranks : {2, 3}) {
    expect_sync_equals_whole(make, {6, 4}, DType::f32, ranks, 1e-6);
    expect_sync_equals_whole(make, {6, 4}, DType::f64, ranks, 1e-12);
    expect_sync_equals_whole(make, {6, 4, 5}, DType::f64, ranks, 1e-12);
  }
}

TEST(SyncBatchNorm, DiceRanksEqualTheWholeBatch) {
  // Dice normalises channels-last through batch_normalize: [N, C] and [N, T, C].
  auto make = [] { return std::make_shared<layers::Dice>(4); };
  expect_sync_equals_whole(make, {6, 4}, DType::f64, 2, 1e-12);
  expect_sync_equals_whole(make, {6, 3, 4}, DType::f64, 3, 1e-12);
  expect_sync_equals_whole(make, {6, 3, 4}, DType::f32, 2, 1e-6);
}

TEST(SyncBatchNorm, EvalModeAndNoScopeAreUntouched) {
  // Outside a scope nothing communicates; in eval mode a scope changes nothing either (a group
  // whose collectives throw proves neither is called).
  autograd::BatchStatsSync never;
  never.ranks = 2;
  never.all_gather = [](const Tensor&, const Tensor&) { FAIL() << "all_gather in eval mode"; };
  never.all_reduce_sum = [](const Tensor&) { FAIL() << "all_reduce in eval mode"; };
  layers::BatchNorm2d bn(3);
  const Tensor x = values({4, 3, 2, 2}, 3, DType::f32);
  const Tensor plain = bn.forward(Variable(x)).data();  // training, no scope
  layers::SyncBatchNormScope scope(&never);
  bn.eval();
  const Tensor y = bn.forward(Variable(x)).data();
  EXPECT_GT(max_diff(plain, y), 1e-3);  // eval normalises with the running statistics
  {
    layers::SyncBatchNormScope off(nullptr);  // nested: turned off again
    bn.train();
    EXPECT_LE(max_diff(bn.forward(Variable(x)).data(), plain), 1e-6);
  }
  EXPECT_EQ(layers::sync_batch_stats(), &never);
}

TEST(SyncBatchNorm, OneValuePerChannelOverAllRanksIsAnError) {
  const std::string e = testing::error_of([] {
    dist::run_local_ranks(1, [](int, dist::Communicator& c) {
      const autograd::BatchStatsSync sync = stats_sync(c);
      layers::SyncBatchNormScope scope(&sync);
      layers::BatchNorm1d bn(3);
      bn.forward(Variable(Tensor::ones({1, 3})));
    });
  });
  EXPECT_NE(e.find("expected more than 1 value per channel over all ranks"), std::string::npos)
      << e;
}

}  // namespace
}  // namespace aim
