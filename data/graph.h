// Node-classification graphs for GCN (MODELS.md §7): a synthetic stochastic-block graph and the
// Planetoid citation sets (Cora, Citeseer, Pubmed) converted by tools/planetoid_convert.py, both
// preprocessed as Kipf's gcn/utils.py does:
//   features: row-normalised (each row divided by its sum; all-zero rows stay zero);
//   adjacency: the undirected simple graph of the edge list (an edge in either direction, once;
//   a self-loop counts 1), then A_hat = D^-1/2 (A + I) D^-1/2 with D the row sums of A + I —
//   symmetric, so it is its own transpose (the spmm backward uses it as A^T).
// The one "batch" is the whole graph: one training step is one full-batch epoch.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "data/source.h"
#include "tensor/tensor.h"

namespace aim::data {

struct GraphData {
  std::string name;
  int64_t nodes = 0, features = 0, classes = 0;
  Tensor x;                                     // [V, F] f32, row-normalised
  Tensor adj_row_ptr, adj_col_idx, adj_values;  // A_hat, CSR: [V+1] i32, [E] i32, [E] f32
  Tensor labels;                                // [V] i64, -1 for a node without a label
  Tensor train_idx, val_idx, test_idx;          // node ids, i64
};

// A_hat of an undirected graph on `nodes` nodes from its edge list (either direction; duplicates
// and both directions collapse to one edge), as CSR tensors. Node ids outside [0, nodes) are an
// error naming `where` and the edge.
void normalized_adjacency(int64_t nodes, const std::vector<std::pair<int64_t, int64_t>>& edges,
                          const std::string& where, Tensor& row_ptr, Tensor& col_idx,
                          Tensor& values);
// Divides each row of a dense [V, F] f32 matrix by its sum (Kipf's preprocess_features).
void row_normalize(Tensor& x);

// Stochastic-block graph: `nodes` nodes with classes drawn uniformly; an edge between two nodes
// of one class with probability p_in, of different classes with p_out. Features: each node has
// `words` distinct active binary features; each is drawn from its class's block of F / C
// features with probability `signal`, else uniformly from all F. Splits as Planetoid: the first
// `train_per_class` nodes of each class (in id order) train, then `val` and `test` nodes of the
// rest in id order. Deterministic in `seed` (Philox).
struct SbmConfig {
  int64_t nodes = 2708, classes = 7, features = 1433;  // Cora's sizes
  double p_in = 0.008, p_out = 0.0003;  // degree ~ 3.1 in-class + 0.7 (Cora: 3.9, 81% in-class)
  int64_t words = 18;                   // Cora: ~18 words per paper
  double signal = 0.25;
  int64_t train_per_class = 20, val = 500, test = 1000;
  uint64_t seed = 1;
  static SbmConfig tiny(uint64_t seed = 1);  // 240 nodes, 4 classes, 64 features
};
GraphData sbm_graph(const SbmConfig& c);

// A directory written by tools/planetoid_convert.py (docs/gcn.md, "Planetoid"): meta.txt
// ("name nodes features classes"), features.txt ("node feature value" per nonzero), labels.txt
// (one label per node, -1 for none), edges.txt ("u v" per line), train.txt / val.txt /
// test.txt (one node id per line). Malformed lines and out-of-range ids are errors naming
// file:line.
GraphData read_planetoid(const std::string& dir);

// The whole graph as one batch: features, adj_row_ptr, adj_col_idx, adj_values, labels,
// train_idx, train_labels (labels at train_idx), val_idx, test_idx. Training stream and evaluation
// set are both that one sample: next(1) returns it (a batch size other than 1 is an error),
// eval_size() is 1.
class GraphSource : public BatchSource {
 public:
  GraphSource(GraphData g, std::string describe);
  std::string describe() const override { return describe_; }
  std::string fingerprint() const override;
  TensorMap next(int64_t batch_size) override;
  int64_t position() const override { return position_; }
  void seek(int64_t position) override { position_ = position; }
  int64_t epoch_size() const override { return 1; }
  int64_t eval_size() const override { return 1; }
  TensorMap eval_batch(int64_t start, int64_t count) const override;
  const GraphData& graph() const { return g_; }

 private:
  TensorMap batch() const;
  GraphData g_;
  Tensor train_labels_;
  std::string describe_;
  int64_t position_ = 0;
};

}  // namespace aim::data
