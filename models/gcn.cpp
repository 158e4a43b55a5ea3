// GCN (gcn.h).
#include "models/gcn.h"

#include "autograd/functions/elementwise.h"
#include "autograd/functions/index.h"
#include "autograd/functions/loss.h"
#include "autograd/functions/reduce.h"

namespace aim::models {

namespace ag = autograd;

Gcn::Gcn(const GcnConfig& cfg) : cfg_(cfg) {
  AIM_CHECK(cfg.features > 0 && cfg.hidden > 0 && cfg.classes > 1, "gcn: features ", cfg.features,
            ", hidden ", cfg.hidden, ", classes ", cfg.classes,
            " (expected features > 0, hidden > 0, classes > 1)");
  gc1 = child("gc1", std::make_shared<layers::GraphConvolution>(cfg.features, cfg.hidden,
                                                                cfg.seed * 4 + 1));
  gc2 = child(
      "gc2", std::make_shared<layers::GraphConvolution>(cfg.hidden, cfg.classes, cfg.seed * 4 + 2));
  drop1 = child("drop1", std::make_shared<layers::Dropout>(cfg.dropout, cfg.seed * 4 + 3));
  drop2 = child("drop2", std::make_shared<layers::Dropout>(cfg.dropout, cfg.seed * 4 + 4));
}

kernels::Csr Gcn::adjacency(const TensorMap& batch) {
  kernels::Csr a;
  a.row_ptr = batch.at("adj_row_ptr");
  a.col_idx = batch.at("adj_col_idx");
  a.values = batch.at("adj_values");
  a.rows = a.cols = a.row_ptr.numel() - 1;
  return a;
}

Variable Gcn::forward(const Variable& x, const kernels::Csr& a, const kernels::Csr& a_t) {
  const Variable h = ag::relu(gc1->forward(drop1->forward(x), a, a_t));
  return gc2->forward(drop2->forward(h), a, a_t);
}

std::vector<TensorSpec> Gcn::input_specs() const {
  return {{"features",
           DType::f32,
           {"V", std::to_string(cfg_.features)},
           "node features, rows normalised to sum 1"},
          {"adj_row_ptr", DType::i32, {"R"}, "CSR row offsets of A_hat, R = V + 1"},
          {"adj_col_idx", DType::i32, {"E"}, "CSR columns of A_hat, in [0, V)"},
          {"adj_values", DType::f32, {"E"}, "D^-1/2 (A + I) D^-1/2, symmetric"}};
}

std::vector<TensorSpec> Gcn::label_specs() const {
  return {{"train_idx", DType::i64, {"T"}, "training node ids in [0, V)"},
          {"train_labels",
           DType::i64,
           {"T"},
           "their classes in [0, " + std::to_string(cfg_.classes) + ")"}};
}

std::vector<TensorSpec> Gcn::output_specs() const {
  return {{"logits", DType::f32, {"V", std::to_string(cfg_.classes)}, "class logits per node"}};
}

namespace {

void check_graph(const TensorMap& b) {
  const int64_t V = b.at("features").size(0), R = b.at("adj_row_ptr").numel();
  AIM_CHECK(R == V + 1, "gcn: adj_row_ptr has ", R, " entries, features has ", V,
            " nodes (expected V + 1 = ", V + 1, ")");
}

}  // namespace

TensorMap Gcn::infer(const TensorMap& batch) {
  check_batch(input_specs(), batch, "gcn inputs");
  check_graph(batch);
  const kernels::Csr a = adjacency(batch);
  return {{"logits", forward(Variable(batch.at("features")), a, a).data()}};
}

Variable Gcn::training_loss(const TensorMap& batch) {
  std::vector<TensorSpec> specs = input_specs();
  for (const TensorSpec& s : label_specs()) specs.push_back(s);
  check_batch(specs, batch, "gcn batch");
  check_graph(batch);
  const kernels::Csr a = adjacency(batch);
  const Variable logits = forward(Variable(batch.at("features")), a, a);
  Variable loss = ag::cross_entropy(ag::index_select(logits, 0, batch.at("train_idx")),
                                    batch.at("train_labels"));
  if (cfg_.weight_decay > 0)  // tf.nn.l2_loss(W1) = sum(W1^2) / 2
    loss = ag::add(loss, ag::mul(ag::sum(ag::square(gc1->weight)), cfg_.weight_decay / 2));
  return loss;
}

double Gcn::forward_flops(const TensorMap& batch) const {
  const int64_t V = batch.at("features").size(0), E = batch.at("adj_col_idx").numel();
  double f = gc1->flops(V, E) + double(V * cfg_.hidden) + gc2->flops(V, E);
  if (is_training() && cfg_.dropout > 0) f += double(V * (cfg_.features + cfg_.hidden));
  return f;
}

}  // namespace aim::models
