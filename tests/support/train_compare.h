// What the data-parallel equivalence tests share (tests/train/test_data_parallel.cpp on the local
// backend, tests/mpi/ under mpirun): the training options of the comparisons, training to final
// weights, and the largest difference between two state dicts.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "tensor/safetensors.h"
#include "train/trainer.h"

namespace aim::testing {

// SGD with momentum (lr 0.1), seed 5, no evaluations until the end, CPU.
inline train::TrainOptions dp_options(int64_t steps, int64_t batch) {
  train::TrainOptions o;
  o.steps = steps;
  o.batch_size = batch;
  o.optim.name = "sgd";
  o.optim.lr = 0.1;
  o.optim.momentum = 0.9;
  o.seed = 5;
  o.eval_every = 0;
  o.eval_samples = 64;
  o.prefetch = 1;
  o.device = "cpu";
  return o;
}

// Trains through train_model, writing the final weights to <dir>/<name>.safetensors (rank 0's
// under ranks), and returns that path.
inline std::string train_to_file(const models::ModelEntry& e, const models::ModelConfig& cfg,
                                 train::TrainOptions o, const std::string& dir,
                                 const std::string& name, train::TrainResult* result = nullptr,
                                 std::ostream* log_out = nullptr) {
  o.save_weights = dir + "/" + name + ".safetensors";
  std::ostringstream local;
  std::ostream& log = log_out ? *log_out : local;
  const train::TrainResult r = train::train_model(e, cfg, o, log);
  if (result) *result = r;
  return o.save_weights;
}

inline std::map<std::string, Tensor> load_weights(const std::string& path) {
  std::map<std::string, Tensor> w;
  for (const auto& [k, t] : load_safetensors(path).tensors) w.emplace(k, t);
  return w;
}

// The largest |a - b| over the floating tensors of two state dicts (same keys and sizes
// expected); *where names the tensor.
inline double max_abs_diff(const std::map<std::string, Tensor>& a,
                           const std::map<std::string, Tensor>& b, std::string* where) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (const auto& [k, t] : a) {
    auto it = b.find(k);
    if (it == b.end()) {
      ADD_FAILURE() << "missing " << k;
      continue;
    }
    if (!is_floating(t.dtype())) continue;
    const std::vector<float> x = t.to(DType::f32).contiguous().to_vector<float>();
    const std::vector<float> y = it->second.to(DType::f32).contiguous().to_vector<float>();
    EXPECT_EQ(x.size(), y.size()) << k;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      const double d = std::fabs(double(x[i]) - double(y[i]));
      if (d > worst) {
        worst = d;
        *where = k;
      }
    }
  }
  return worst;
}

}  // namespace aim::testing
