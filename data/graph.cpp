// Node-classification graphs (graph.h): Kipf's preprocessing, the stochastic-block generator,
// the Planetoid reader and the one-batch source.
#include "data/graph.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "data/philox_draw.h"
#include "tensor/check.h"
#include "tensor/host_memory.h"

namespace aim::data {

void normalized_adjacency(int64_t nodes, const std::vector<std::pair<int64_t, int64_t>>& edges,
                          const std::string& where, Tensor& row_ptr, Tensor& col_idx,
                          Tensor& values) {
  AIM_CHECK(nodes > 0 && nodes < (int64_t(1) << 31), where, ": ", nodes,
            " nodes (expected 1 .. 2^31 - 1)");
  std::vector<std::vector<int32_t>> nb(static_cast<size_t>(nodes));
  for (size_t e = 0; e < edges.size(); ++e) {
    const auto [u, v] = edges[e];
    AIM_CHECK(u >= 0 && u < nodes && v >= 0 && v < nodes, where, ": edge ", e, " (", u, ", ", v,
              ") has a node id outside [0, ", nodes, ")");
    nb[size_t(u)].push_back(int32_t(v));
    if (u != v) nb[size_t(v)].push_back(int32_t(u));
  }
  // A + I: each neighbour once (A is 0/1), the diagonal 1 + (1 for a self-loop).
  std::vector<int32_t> rp(size_t(nodes) + 1, 0), ci;
  std::vector<float> w;
  std::vector<double> deg(size_t(nodes), 0.0);
  for (int64_t i = 0; i < nodes; ++i) {
    auto& n = nb[size_t(i)];
    n.push_back(int32_t(i));  // the identity
    std::sort(n.begin(), n.end());
    bool self_loop = false;
    for (size_t k = 0; k < n.size(); ++k) {
      if (k > 0 && n[k] == n[k - 1]) {
        if (n[k] == int32_t(i) && !self_loop) {  // a self-loop of A (0/1) on top of I
          w.back() += 1.f;
          self_loop = true;
        }
        continue;  // a repeated edge: A is 0/1
      }
      ci.push_back(n[k]);
      w.push_back(1.f);
    }
    rp[size_t(i) + 1] = int32_t(ci.size());
    for (int32_t e = rp[size_t(i)]; e < rp[size_t(i) + 1]; ++e) deg[size_t(i)] += w[size_t(e)];
  }
  for (int64_t i = 0; i < nodes; ++i)
    for (int32_t e = rp[size_t(i)]; e < rp[size_t(i) + 1]; ++e)
      w[size_t(e)] =
          float(double(w[size_t(e)]) / std::sqrt(deg[size_t(i)] * deg[size_t(ci[size_t(e)])]));
  row_ptr = Tensor::from_vector(rp, {nodes + 1});
  col_idx = Tensor::from_vector(ci, {int64_t(ci.size())});
  values = Tensor::from_vector(w, {int64_t(w.size())});
}

void row_normalize(Tensor& x) {
  const int64_t V = x.size(0), F = x.size(1);
  float* p = x.data<float>();
  for (int64_t i = 0; i < V; ++i) {
    double s = 0;
    for (int64_t f = 0; f < F; ++f) s += p[i * F + f];
    if (s == 0) continue;  // Kipf: 1/0 = inf set to 0, the row stays zero
    const float r = float(1.0 / s);
    for (int64_t f = 0; f < F; ++f) p[i * F + f] *= r;
  }
}

// ---- stochastic-block graph ------------------------------------------------------------------

SbmConfig SbmConfig::tiny(uint64_t seed) {
  SbmConfig c;
  c.nodes = 240;
  c.classes = 4;
  c.features = 64;
  c.p_in = 0.08;  // ~4.7 same-class neighbours, ~0.9 others (Cora: ~81% of edges within a class)
  c.p_out = 0.005;
  c.words = 8;
  c.signal = 0.3;
  c.train_per_class = 5;
  c.val = 40;
  c.test = 100;
  c.seed = seed;
  return c;
}

GraphData sbm_graph(const SbmConfig& c) {
  AIM_CHECK(c.nodes > 0 && c.classes > 1 && c.features >= c.classes && c.words > 0 &&
                c.words <= c.features,
            "sbm_graph: need nodes > 0, classes > 1, features >= classes, 0 < words <= features; "
            "got nodes ",
            c.nodes, ", classes ", c.classes, ", features ", c.features, ", words ", c.words);
  AIM_CHECK(
      c.p_in >= 0 && c.p_in <= 1 && c.p_out >= 0 && c.p_out <= 1 && c.signal >= 0 && c.signal <= 1,
      "sbm_graph: p_in, p_out and signal must lie in [0, 1]");
  GraphData g;
  g.name = "sbm";
  g.nodes = c.nodes;
  g.features = c.features;
  g.classes = c.classes;
  PhiloxDraw cls(philox_key(c.seed, 1), 0), edge(philox_key(c.seed, 2), 0),
      feat(philox_key(c.seed, 3), 0);
  std::vector<int64_t> label(static_cast<size_t>(c.nodes));
  for (auto& l : label) l = cls.below(c.classes);
  std::vector<std::pair<int64_t, int64_t>> edges;
  for (int64_t i = 0; i < c.nodes; ++i)
    for (int64_t j = i + 1; j < c.nodes; ++j)
      if (edge.unit() < (label[size_t(i)] == label[size_t(j)] ? c.p_in : c.p_out))
        edges.push_back({i, j});
  normalized_adjacency(c.nodes, edges, "sbm_graph", g.adj_row_ptr, g.adj_col_idx, g.adj_values);
  g.x = Tensor::zeros({c.nodes, c.features});
  float* x = g.x.data<float>();
  const int64_t block = c.features / c.classes;
  for (int64_t i = 0; i < c.nodes; ++i) {
    for (int64_t k = 0; k < c.words;) {
      const int64_t f = feat.unit() < c.signal ? label[size_t(i)] * block + feat.below(block)
                                               : feat.below(c.features);
      if (x[i * c.features + f] != 0.f) continue;  // distinct words
      x[i * c.features + f] = 1.f;
      ++k;
    }
  }
  row_normalize(g.x);
  g.labels = Tensor::from_vector(label, {c.nodes});
  std::vector<int64_t> train, rest, per_class(size_t(c.classes), 0);
  for (int64_t i = 0; i < c.nodes; ++i) {
    if (per_class[size_t(label[size_t(i)])] < c.train_per_class) {
      ++per_class[size_t(label[size_t(i)])];
      train.push_back(i);
    } else {
      rest.push_back(i);
    }
  }
  AIM_CHECK(int64_t(rest.size()) >= c.val + c.test, "sbm_graph: ", rest.size(),
            " nodes left after the training split, val + test need ", c.val + c.test);
  const std::vector<int64_t> val(rest.begin(), rest.begin() + c.val);
  const std::vector<int64_t> test(rest.begin() + c.val, rest.begin() + c.val + c.test);
  g.train_idx = Tensor::from_vector(train, {int64_t(train.size())});
  g.val_idx = Tensor::from_vector(val, {c.val});
  g.test_idx = Tensor::from_vector(test, {c.test});
  return g;
}

// ---- Planetoid (tools/planetoid_convert.py) -------------------------------------------------

namespace {

// Lines of whitespace-separated integers (and, for features, a trailing value); blank lines and
// lines starting with '#' are skipped. Errors name file:line.
class LineReader {
 public:
  explicit LineReader(const std::string& path) : path_(path), in_(path) {
    AIM_CHECK(in_.good(), "planetoid: cannot open ", path_,
              " (expected a directory written by tools/planetoid_convert.py)");
  }
  // The next non-blank line split into fields; false at the end.
  bool next(std::vector<std::string>& fields) {
    std::string line;
    while (std::getline(in_, line)) {
      ++line_no_;
      if (line.empty() || line[0] == '#') continue;
      std::istringstream is(line);
      fields.clear();
      for (std::string f; is >> f;) fields.push_back(f);
      if (!fields.empty()) return true;
    }
    return false;
  }
  std::string where() const { return path_ + ":" + std::to_string(line_no_); }
  int64_t integer(const std::string& s) const {
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    AIM_CHECK(used == s.size() && !s.empty(), where(), ": '", s, "' is not an integer");
    return v;
  }
  double real(const std::string& s) const {
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    AIM_CHECK(used == s.size() && !s.empty() && std::isfinite(v), where(), ": '", s,
              "' is not a finite number");
    return v;
  }
  void expect_fields(const std::vector<std::string>& f, size_t n, const char* what) const {
    AIM_CHECK(f.size() == n, where(), ": expected ", n, " fields (", what, "), got ", f.size());
  }
  int64_t node(const std::string& s, int64_t nodes) const {
    const int64_t v = integer(s);
    AIM_CHECK(v >= 0 && v < nodes, where(), ": node id ", v, " is out of range [0, ", nodes, ")");
    return v;
  }

 private:
  std::string path_;
  std::ifstream in_;
  int64_t line_no_ = 0;
};

Tensor read_ids(const std::string& path, int64_t nodes, const Tensor& labels) {
  LineReader r(path);
  std::vector<std::string> f;
  std::vector<int64_t> ids;
  const int64_t* lab = labels.data<int64_t>();
  while (r.next(f)) {
    r.expect_fields(f, 1, "a node id");
    const int64_t v = r.node(f[0], nodes);
    AIM_CHECK(lab[v] >= 0, r.where(), ": node ", v, " has no label (-1 in labels.txt)");
    ids.push_back(v);
  }
  AIM_CHECK(!ids.empty(), path, ": no node ids");
  return Tensor::from_vector(ids, {int64_t(ids.size())});
}

}  // namespace

GraphData read_planetoid(const std::string& dir) {
  GraphData g;
  std::vector<std::string> f;
  {
    LineReader r(dir + "/meta.txt");
    AIM_CHECK(r.next(f), dir, "/meta.txt: empty (expected 'name nodes features classes')");
    r.expect_fields(f, 4, "name nodes features classes");
    g.name = f[0];
    g.nodes = r.integer(f[1]);
    g.features = r.integer(f[2]);
    g.classes = r.integer(f[3]);
    AIM_CHECK(g.nodes > 0 && g.features > 0 && g.classes > 1, r.where(),
              ": need nodes > 0, features > 0, classes > 1, got ", g.nodes, " ", g.features, " ",
              g.classes);
    // CSR row pointers and column indices are i32 (normalized_adjacency).
    AIM_CHECK(g.nodes < (int64_t(1) << 31), r.where(), ": ", g.nodes,
              " nodes, at most 2^31 - 1 supported");
  }
  // features.txt's entries are kept sparse until labels.txt has backed meta.txt's node count:
  // the dense [nodes, features] matrix is allocated only then, and only if it fits.
  struct Entry {
    int64_t node, feature;
    float value;
  };
  std::vector<Entry> entries;
  {
    LineReader r(dir + "/features.txt");
    while (r.next(f)) {
      r.expect_fields(f, 3, "node feature value");
      const int64_t i = r.node(f[0], g.nodes), k = r.integer(f[1]);
      AIM_CHECK(k >= 0 && k < g.features, r.where(), ": feature ", k, " is out of range [0, ",
                g.features, ")");
      const double v = r.real(f[2]);
      // Stored as f32: a larger value would become inf, and the row normalisation NaN.
      AIM_CHECK(std::fabs(v) <= double(std::numeric_limits<float>::max()), r.where(), ": value ",
                f[2], " is outside the f32 range (features are f32)");
      entries.push_back({i, k, float(v)});
    }
  }
  {
    LineReader r(dir + "/labels.txt");
    std::vector<int64_t> lab;
    while (r.next(f)) {
      r.expect_fields(f, 1, "a label");
      const int64_t l = r.integer(f[0]);
      AIM_CHECK(l >= -1 && l < g.classes, r.where(), ": label ", l, " is out of range [-1, ",
                g.classes, ")");
      AIM_CHECK(int64_t(lab.size()) < g.nodes, r.where(), ": more labels than the ", g.nodes,
                " nodes of meta.txt");
      lab.push_back(l);
    }
    AIM_CHECK(int64_t(lab.size()) == g.nodes, dir, "/labels.txt: ", lab.size(),
              " labels, meta.txt says ", g.nodes, " nodes");
    g.labels = Tensor::from_vector(lab, {g.nodes});
  }
  {
    const uint64_t limit = host_memory_limit();
    AIM_CHECK(uint64_t(g.features) <= limit / 4 / uint64_t(g.nodes), dir, "/meta.txt: ", g.nodes,
              " nodes x ", g.features, " features need a dense f32 matrix of ",
              format_bytes(4.0 * double(g.nodes) * double(g.features)),
              ", over the host memory limit of ", format_bytes(double(limit)),
              " (AIM_CPU_MEMORY_LIMIT sets it)");
    g.x = Tensor::zeros({g.nodes, g.features});
    float* x = g.x.data<float>();
    for (const Entry& e : entries) x[e.node * g.features + e.feature] = e.value;  // last one wins
    row_normalize(g.x);
  }
  {
    LineReader r(dir + "/edges.txt");
    std::vector<std::pair<int64_t, int64_t>> edges;
    while (r.next(f)) {
      r.expect_fields(f, 2, "u v");
      const int64_t u = r.node(f[0], g.nodes), v = r.node(f[1], g.nodes);
      edges.push_back({u, v});
    }
    normalized_adjacency(g.nodes, edges, dir + "/edges.txt", g.adj_row_ptr, g.adj_col_idx,
                         g.adj_values);
  }
  g.train_idx = read_ids(dir + "/train.txt", g.nodes, g.labels);
  g.val_idx = read_ids(dir + "/val.txt", g.nodes, g.labels);
  g.test_idx = read_ids(dir + "/test.txt", g.nodes, g.labels);
  return g;
}

// ---- source ---------------------------------------------------------------------------------

GraphSource::GraphSource(GraphData g, std::string describe)
    : g_(std::move(g)), describe_(std::move(describe)) {
  const int64_t* lab = g_.labels.data<int64_t>();
  std::vector<int64_t> t;
  for (int64_t i : g_.train_idx.to_vector<int64_t>()) t.push_back(lab[i]);
  train_labels_ = Tensor::from_vector(t, {int64_t(t.size())});
}

std::string GraphSource::fingerprint() const {
  std::ostringstream os;
  os << "graph:" << describe_ << ",nodes=" << g_.nodes << ",nnz=" << g_.adj_col_idx.numel()
     << ",train=" << g_.train_idx.numel();
  return os.str();
}

TensorMap GraphSource::batch() const {
  return {{"features", g_.x},
          {"adj_row_ptr", g_.adj_row_ptr},
          {"adj_col_idx", g_.adj_col_idx},
          {"adj_values", g_.adj_values},
          {"labels", g_.labels},
          {"train_idx", g_.train_idx},
          {"train_labels", train_labels_},
          {"val_idx", g_.val_idx},
          {"test_idx", g_.test_idx}};
}

TensorMap GraphSource::next(int64_t batch_size) {
  AIM_CHECK(batch_size == 1, describe_, ": --batch-size must be 1 (a GCN step is one full-batch ",
            "epoch over the whole graph), got ", batch_size);
  ++position_;
  return batch();
}

TensorMap GraphSource::eval_batch(int64_t start, int64_t count) const {
  AIM_CHECK(start == 0 && count == 1, describe_, ": the evaluation set is the one graph (start 0, ",
            "count 1), asked for [", start, ", ", start + count, ")");
  return batch();
}

}  // namespace aim::data
