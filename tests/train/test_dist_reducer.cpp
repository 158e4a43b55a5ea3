// train/dist/reducer: 3 ranks, each on its part of a batch of a small MLP, end with the gradients
// of one process on the whole batch (1e-6), with bucket sizes forcing several buckets; buckets
// launch in bucket order on every rank even when a later one is ready first; parameters without a
// gradient; the sparse embedding exchange equals the dense all-reduce; broadcast_parameters.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <mutex>

#include "autograd/functions/elementwise.h"
#include "autograd/functions/loss.h"
#include "autograd/functions/reduce.h"
#include "layers/embedding.h"
#include "layers/linear.h"
#include "train/dist/reducer.h"

namespace aim::dist {
namespace {

using autograd::Variable;

class Mlp : public layers::Module {
 public:
  explicit Mlp(uint64_t seed = 11)
      : fc1(child("fc1", std::make_shared<layers::Linear>(5, 7, seed))),
        fc2(child("fc2", std::make_shared<layers::Linear>(7, 6, seed + 1))),
        fc3(child("fc3", std::make_shared<layers::Linear>(6, 3, seed + 2))) {}
  Variable forward(const Variable& x) override {
    return fc3->forward(autograd::relu(fc2->forward(autograd::relu(fc1->forward(x)))));
  }
  std::shared_ptr<layers::Linear> fc1, fc2, fc3;
};

constexpr int64_t kBatch = 12;

Tensor batch_x() {
  std::vector<float> v;
  for (int64_t i = 0; i < kBatch * 5; ++i) v.push_back(float((i * 37) % 23) / 11.0f - 1.0f);
  return Tensor::from_vector<float>(v, {kBatch, 5});
}
Tensor batch_y() {
  std::vector<float> v;
  for (int64_t i = 0; i < kBatch * 3; ++i) v.push_back(float((i * 13) % 7) / 3.0f - 1.0f);
  return Tensor::from_vector<float>(v, {kBatch, 3});
}

// Mean squared error over rows [lo, hi) of the batch; step s scales the targets so the two steps
// differ.
void backward_on(Mlp& m, int64_t lo, int64_t hi, int step) {
  Variable x(batch_x().narrow(0, lo, hi - lo).contiguous());
  Tensor y = batch_y().narrow(0, lo, hi - lo).contiguous();
  if (step > 0) {
    std::vector<float> v = y.to_vector<float>();
    for (float& f : v) f *= 1.5f;
    y = Tensor::from_vector<float>(v, y.sizes());
  }
  autograd::mse_loss(m.forward(x), y).backward();
}

using Grads = std::map<std::string, std::vector<float>>;
Grads grads_of(const layers::Module& m) {
  Grads g;
  for (const auto& [name, p] : m.named_parameters()) g[name] = p.grad().to_vector<float>();
  return g;
}

ReducerOptions tiny_buckets() {
  ReducerOptions o;
  o.first_bucket_mb = 100.0 / (1024 * 1024);  // ~100 bytes: several buckets for this MLP
  o.bucket_mb = 100.0 / (1024 * 1024);
  return o;
}

TEST(DistReducer, ThreeRanksEqualOneRankOnTheWholeBatch) {
  // One process, whole batch.
  std::vector<Grads> want;
  {
    Mlp m;
    for (int step = 0; step < 2; ++step) {
      m.zero_grad();
      backward_on(m, 0, kBatch, step);
      want.push_back(grads_of(m));
    }
  }
  const int n = 3;
  std::vector<std::vector<Grads>> got(n);
  std::vector<std::vector<int>> orders(n);
  std::vector<size_t> nbuckets(n);
  std::vector<ReducerStats> stats(n);
  std::string plan;
  run_local_ranks(n, [&](int r, Communicator& c) {
    Mlp m;
    Reducer red(c, m.named_parameters(), tiny_buckets());
    for (int step = 0; step < 2; ++step) {
      m.zero_grad();
      red.begin();
      backward_on(m, r * kBatch / n, (r + 1) * kBatch / n, step);
      red.finish();
      got[size_t(r)].push_back(grads_of(m));
      // The gradients are views into the buckets from the first step on.
      EXPECT_EQ(m.fc2->weight.grad().storage().use_count() > 1, true);
    }
    orders[size_t(r)] = red.last_launch_order();
    nbuckets[size_t(r)] = red.buckets().size();
    stats[size_t(r)] = red.last_stats();
    if (r == 0) plan = red.plan();
  });
  // fc3.bias..fc2.bias (108 bytes), fc2.weight (168 bytes: its own), fc1.bias, then fc1.weight
  // (140 bytes, larger than a bucket: its own, not appended to fc1.bias's).
  EXPECT_EQ(nbuckets[0], 4u) << plan;
  EXPECT_NE(plan.find("bucket 3: f32 0.00 MB on cpu, 1 params (fc1.weight .. fc1.weight)"),
            std::string::npos)
      << plan;
  EXPECT_NE(plan.find("bucket 0: f32 0.00 MB on cpu, 3 params (fc3.bias .. fc2.bias)"),
            std::string::npos)
      << plan;
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(orders[size_t(r)], (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(stats[size_t(r)].step, 2);
    EXPECT_EQ(stats[size_t(r)].dense_bytes, int64_t(4 * (35 + 7 + 42 + 6 + 18 + 3)));
    EXPECT_GE(stats[size_t(r)].hidden_fraction, 0.0);
    EXPECT_LE(stats[size_t(r)].hidden_fraction, 1.0);
    EXPECT_GT(stats[size_t(r)].comm_s, 0.0);
    for (int step = 0; step < 2; ++step)
      for (const auto& [name, w] : want[size_t(step)]) {
        const std::vector<float>& g = got[size_t(r)][size_t(step)].at(name);
        ASSERT_EQ(g.size(), w.size());
        for (size_t i = 0; i < w.size(); ++i)
          ASSERT_NEAR(g[i], w[i], 1e-6)
              << "rank " << r << " step " << step << " " << name << "[" << i << "]";
        // bitwise identical on every rank
        EXPECT_EQ(g, got[0][size_t(step)].at(name)) << "rank " << r << " " << name;
      }
  }
}

// A communicator that records the labels of the collectives issued through it.
class Recording final : public Communicator {
 public:
  explicit Recording(Communicator& c) : Communicator(Options{c.timeout()}), c_(c) {}
  int rank() const override { return c_.rank(); }
  int size() const override { return c_.size(); }
  std::string backend() const override { return c_.backend(); }
  Device device() const override { return c_.device(); }
  WorkPtr all_reduce_async(const Tensor& t, ReduceOp op, const std::string& l) override {
    issued.push_back(l);
    return c_.all_reduce_async(t, op, l);
  }
  WorkPtr broadcast_async(const Tensor& t, int root, const std::string& l) override {
    return c_.broadcast_async(t, root, l);
  }
  WorkPtr all_gather_async(const Tensor& in, const Tensor& out, const std::string& l) override {
    return c_.all_gather_async(in, out, l);
  }
  WorkPtr reduce_scatter_async(const Tensor& in, const Tensor& out, ReduceOp op,
                               const std::string& l) override {
    return c_.reduce_scatter_async(in, out, op, l);
  }
  WorkPtr all_to_all_async(const Tensor& in, const Tensor& out, const std::string& l) override {
    return c_.all_to_all_async(in, out, l);
  }
  WorkPtr barrier_async() override { return c_.barrier_async(); }
  void abort(const std::string& reason) override { c_.abort(reason); }
  std::vector<std::string> issued;

 private:
  Communicator& c_;
};

TEST(DistReducer, BucketsLaunchInOrderWhateverOrderGradientsArrive) {
  // Four independent parameters of different sizes, one bucket each: bucket k holds p(3-k).
  // Rank 0 finishes them in bucket order, rank 1 in the reverse order (bucket 3 first, which must
  // wait), rank 2 never touches p1 (its bucket 2 is launched by finish()). A launch out of order
  // would also be a collective mismatch (the sizes differ).
  const int n = 3;
  std::vector<std::vector<std::string>> issued_after_each(n);
  std::vector<std::vector<int>> orders(n);
  std::vector<std::vector<std::vector<float>>> grads(n);
  run_local_ranks(n, [&](int r, Communicator& base) {
    Recording c(base);
    std::vector<std::pair<std::string, Variable>> params;
    for (int i = 0; i < 4; ++i)
      params.emplace_back("p" + std::to_string(i),
                          Variable(Tensor::zeros({40 + i}), true, "p" + std::to_string(i)));
    ReducerOptions o;
    o.first_bucket_mb = o.bucket_mb = 1e-6;  // every parameter closes its bucket
    Reducer red(c, params, o);
    EXPECT_EQ(red.buckets().size(), 4u);
    std::vector<int> order = {3, 2, 1, 0};
    if (r == 1) order = {0, 1, 2, 3};
    if (r == 2) order = {3, 2, 0};
    red.begin();
    for (int i : order) {
      autograd::sum(autograd::mul(params[size_t(i)].second, double((r + 1) * (i + 1)))).backward();
      issued_after_each[size_t(r)].push_back(std::to_string(c.issued.size()));
    }
    red.finish();
    orders[size_t(r)] = red.last_launch_order();
    for (auto& [name, p] : params) grads[size_t(r)].push_back(p.grad().to_vector<float>());
    EXPECT_EQ(c.issued, (std::vector<std::string>{"allreduce bucket 0", "allreduce bucket 1",
                                                  "allreduce bucket 2", "allreduce bucket 3"}));
  });
  // rank 0: each hook launches its own bucket; rank 1: nothing until p3 (bucket 0), then all;
  // rank 2: buckets 0, 1 launch, bucket 2 (p1) waits for finish(), so bucket 3 (p0) waits too.
  EXPECT_EQ(issued_after_each[0], (std::vector<std::string>{"1", "2", "3", "4"}));
  EXPECT_EQ(issued_after_each[1], (std::vector<std::string>{"0", "0", "0", "4"}));
  EXPECT_EQ(issued_after_each[2], (std::vector<std::string>{"1", "2", "2"}));
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(orders[size_t(r)], (std::vector<int>{0, 1, 2, 3}));
    for (int i = 0; i < 4; ++i) {
      // mean over ranks of (r+1)(i+1), rank 2 adding 0 for p1
      const double want = (i == 1 ? (1 + 2) * 2.0 : (1 + 2 + 3) * (i + 1.0)) / 3.0;
      for (float g : grads[size_t(r)][size_t(i)])
        ASSERT_NEAR(g, want, 1e-6) << "rank " << r << " p" << i;
    }
  }
}

TEST(DistReducer, TwoBackwardsWithoutFinishIsAnError) {
  run_local_ranks(1, [&](int, Communicator& c) {
    Mlp m;
    Reducer red(c, m.named_parameters());
    backward_on(m, 0, 4, 0);
    try {
      backward_on(m, 0, 4, 0);
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("became ready twice in one step"), std::string::npos)
          << e.what();
    }
  });
}

class EmbNet : public layers::Module {
 public:
  EmbNet()
      : emb(child("emb", std::make_shared<layers::Embedding>(10, 4, std::nullopt, 5))),
        fc(child("fc", std::make_shared<layers::Linear>(4, 2, 6))) {}
  std::shared_ptr<layers::Embedding> emb;
  std::shared_ptr<layers::Linear> fc;
};

TEST(DistReducer, SparseEmbeddingExchangeEqualsDense) {
  const int n = 3;
  // Rank r looks up rows {r, r+1, 7, r+1}: overlaps between ranks, a repeated row, rows 6, 8, 9
  // untouched.
  auto run = [&](bool sparse) {
    std::vector<Grads> out(n);
    std::vector<int64_t> rows(n);
    run_local_ranks(n, [&](int r, Communicator& c) {
      EmbNet m;
      ReducerOptions o;
      if (sparse) o.sparse = {"emb.weight"};
      Reducer red(c, m.named_parameters(), o);
      Tensor idx = Tensor::from_vector<int64_t>({r, r + 1, 7, r + 1}, {4});
      Variable h = m.emb->forward(idx);
      autograd::sum(autograd::square(m.fc->forward(h))).backward();
      red.finish();
      out[size_t(r)] = grads_of(m);
      rows[size_t(r)] = red.last_stats().sparse_rows;
    });
    return std::make_pair(out, rows);
  };
  const auto [dense, dense_rows] = run(false);
  const auto [sparse, sparse_rows] = run(true);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(dense_rows[size_t(r)], 0);
    EXPECT_EQ(sparse_rows[size_t(r)], 3);  // rows r, r+1, 7
    for (const auto& [name, g] : dense[size_t(r)])
      EXPECT_EQ(sparse[size_t(r)].at(name), g) << "rank " << r << " " << name;
    const std::vector<float>& e = sparse[size_t(r)].at("emb.weight");
    for (int64_t row : {6, 8, 9})
      for (int64_t k = 0; k < 4; ++k) EXPECT_EQ(e[size_t(row * 4 + k)], 0.0f);
  }
}

TEST(DistReducer, BroadcastParametersFromRankZero) {
  const int n = 3;
  std::vector<Grads> weights(n);
  run_local_ranks(n, [&](int r, Communicator& c) {
    Mlp m(100 + uint64_t(r));  // different initialisation on every rank
    broadcast_parameters(c, m, 0);
    Grads w;
    for (const auto& [name, p] : m.named_parameters()) w[name] = p.data().to_vector<float>();
    weights[size_t(r)] = w;
  });
  Mlp m0(100);
  for (const auto& [name, p] : m0.named_parameters())
    for (int r = 0; r < n; ++r) EXPECT_EQ(weights[size_t(r)].at(name), p.data().to_vector<float>());
}

TEST(DistReducer, DifferentModelsOnRanksAreAnError) {
  std::string e;
  try {
    run_local_ranks(2, [&](int r, Communicator& c) {
      layers::Linear l(3, r == 0 ? 4 : 5);
      Reducer red(c, l.named_parameters());
    });
  } catch (const Error& err) {
    e = err.what();
  }
  EXPECT_NE(e.find("rank 1's parameters (names, sizes, dtypes, sparse set) differ from rank 0's"),
            std::string::npos)
      << e;
}

}  // namespace
}  // namespace aim::dist
