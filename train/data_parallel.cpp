#include "train/data_parallel.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>

#include "tensor/check.h"
#include "train/trainer.h"

namespace aim::train {
namespace {

// Visits every module of the tree with its dotted path ("" for the root).
void for_each_module(const layers::Module& m, const std::string& prefix,
                     const std::function<void(const std::string&, const layers::Module&)>& fn) {
  fn(prefix, m);
  for (const auto& [name, c] : m.children())
    for_each_module(*c, prefix.empty() ? name : prefix + "." + name, fn);
}

// The 2-D embedding tables of a model (the weights of layers that say they are lookup tables),
// for --embedding-comm sparse.
std::set<std::string> embedding_tables(const layers::Module& model) {
  std::set<std::string> names;
  std::set<std::string> params;
  for (const auto& [n, p] : model.named_parameters())
    if (p.dim() == 2) params.insert(n);
  for_each_module(model, "", [&](const std::string& path, const layers::Module& m) {
    if (!m.is_embedding_table()) return;
    const std::string w = path.empty() ? "weight" : path + ".weight";
    if (params.count(w)) names.insert(w);
  });
  return names;
}

// Layers that normalise with statistics of the current batch in training mode (not batch-split
// invariant under data parallelism): "hist_bn (BatchNorm1d)", ...
std::vector<std::string> batch_statistics_layers(const layers::Module& model) {
  std::vector<std::string> out;
  for_each_module(model, "", [&](const std::string& path, const layers::Module& m) {
    if (m.uses_batch_statistics())
      out.push_back((path.empty() ? std::string("(root)") : path) + " (" + m.type_name() + ")");
  });
  return out;
}

std::string mb_list(const std::vector<int64_t>& bytes) {
  std::string s;
  char b[32];
  for (const int64_t v : bytes) {
    std::snprintf(b, sizeof b, "%.2f", double(v) / (1024.0 * 1024.0));
    s += (s.empty() ? "" : ", ") + std::string(b);
  }
  return s + " MB";
}

// Mean over the ranks of one f64 value per rank (every rank gets the same), and each rank's.
std::vector<double> gather_doubles(dist::Communicator& comm, const std::vector<double>& mine) {
  const int64_t k = int64_t(mine.size());
  Tensor in = Tensor::from_vector<double>(mine, {k}).to(comm.device());
  Tensor out = Tensor::empty({comm.size() * k}, DType::f64, comm.device());
  comm.all_gather(in, out);
  return out.to(kCPU).to_vector<double>();
}

}  // namespace

RankShard::RankShard(data::BatchSource& source, int rank, int ranks, int64_t batch,
                     int64_t global_position)
    : src_(source), rank_(rank), ranks_(ranks), batch_(batch) {
  AIM_CHECK(ranks >= 1 && rank >= 0 && rank < ranks && batch > 0, "RankShard: rank ", rank, " of ",
            ranks, " with batch ", batch, " is not valid");
  AIM_CHECK(global_position % (int64_t(ranks) * batch) == 0, "RankShard: global stream position ",
            global_position, " is not a multiple of ranks * batch = ", int64_t(ranks) * batch,
            " (resume with the checkpoint's rank count and batch size)");
  src_.seek(global_position + int64_t(rank) * batch);
}

TensorMap RankShard::next() {
  TensorMap b = src_.next(batch_);
  // Skip the other ranks' blocks: the stream now stands at this rank's block of the next step.
  src_.seek(src_.position() + int64_t(ranks_ - 1) * batch_);
  return b;
}

int64_t RankShard::global_position() const { return src_.position() - int64_t(rank_) * batch_; }

std::string summarise_data_parallel(dist::Communicator& comm, const dist::Reducer& reducer,
                                    const std::set<std::string>& sparse_tables, const DistTimes& t,
                                    double samples_per_s, DistStats& d) {
  const int ranks = comm.size();
  const double n = double(std::max<int64_t>(t.steps, 1));
  const std::vector<double> all =
      gather_doubles(comm, {samples_per_s, t.comm_s / n, t.backward_s / n, t.overlapped_s / n,
                            t.wait_s / n, t.sparse_s / n});
  constexpr size_t kF = 6;
  std::string dist_line;
  {
    d.backend = comm.backend();
    d.ranks = ranks;
    d.rank = comm.rank();
    double comm_sum = 0, overlap_sum = 0;
    for (int k = 0; k < ranks; ++k) {
      const double* v = all.data() + size_t(k) * kF;
      d.rank_samples_per_s.push_back(v[0]);
      d.total_samples_per_s += v[0];
      comm_sum += v[1];
      d.backward_ms += v[2] * 1e3 / ranks;
      overlap_sum += v[3];
      d.exposed_ms += v[4] * 1e3 / ranks;
      d.sparse_ms += v[5] * 1e3 / ranks;
    }
    d.allreduce_ms = comm_sum * 1e3 / ranks;
    d.hidden_fraction = comm_sum > 0 ? overlap_sum / comm_sum : 0;
    for (const dist::BucketInfo& b : reducer.buckets()) {
      d.bucket_bytes.push_back(b.bytes());
      d.grad_bytes += b.bytes();
    }
    d.sparse_tables.assign(sparse_tables.begin(), sparse_tables.end());
    d.plan = reducer.plan();
    char line[400];
    std::snprintf(line, sizeof line,
                  "data parallel: %d ranks (%s), %.1f samples/s in all; per step: all-reduce "
                  "%.2f ms, backward %.2f ms, %.0f%% of the all-reduce hidden behind backward, "
                  "%.2f ms exposed",
                  ranks, d.backend.c_str(), d.total_samples_per_s, d.allreduce_ms, d.backward_ms,
                  100.0 * d.hidden_fraction, d.exposed_ms);
    dist_line = line;
    dist_line += str("; ", d.bucket_bytes.size(), " buckets (", mb_list(d.bucket_bytes), ")");
    if (!sparse_tables.empty()) {
      std::snprintf(line, sizeof line, "; sparse exchange %.2f ms", d.sparse_ms);
      dist_line += line;
    }
    dist_line += "\n";
    for (int k = 0; k < ranks; ++k) {
      std::snprintf(line, sizeof line, "  rank %d: %.1f samples/s\n", k,
                    d.rank_samples_per_s[size_t(k)]);
      dist_line += line;
    }
  }
  return dist_line;
}

DataParallel setup_data_parallel(dist::Communicator& c, const models::ModelEntry& entry,
                                 const models::ModelConfig& cfg, const TrainOptions& opt,
                                 layers::Module& model, Optimizer& optim, int64_t global_batch,
                                 std::ostream& log) {
  DataParallel dp;
  dist::Communicator* comm = &c;
  const int ranks = c.size();
  std::unique_ptr<dist::Reducer>& reducer = dp.reducer;
  std::set<std::string>& sparse_tables = dp.sparse_tables;
  {
    if (opt.dist.embedding_comm == "sparse") {
      sparse_tables = embedding_tables(model);
      AIM_CHECK(!sparse_tables.empty(), "--embedding-comm sparse: ", entry.name,
                " has no embedding table (a lookup layer's weight) to exchange sparsely");
    }
    dist::ReducerOptions ro;
    ro.bucket_mb = opt.dist.bucket_mb;
    ro.first_bucket_mb = std::min(1.0, opt.dist.bucket_mb);  // never larger than the others
    ro.sparse = sparse_tables;
    reducer = std::make_unique<dist::Reducer>(*comm, optim.parameters(), ro);
    log << "data parallel: " << ranks << " ranks (" << comm->backend() << ", "
        << (comm->backend() == "mpi"  ? std::string("processes on the CPU")
            : comm->device().is_cpu() ? std::string("threads on the CPU")
                                      : str("one GPU each from ", comm->device().str()))
        << "), batch " << opt.batch_size << " per rank, global batch " << global_batch
        << ", collective timeout " << opt.dist.timeout_s << " s; " << reducer->buckets().size()
        << " buckets (" << mb_list([&] {
             std::vector<int64_t> b;
             for (const auto& bi : reducer->buckets()) b.push_back(bi.bytes());
             return b;
           }())
        << ")";
    for (const std::string& t : sparse_tables) log << "; sparse exchange of " << t;
    log << "\n";
    const std::vector<std::string> stats_layers = batch_statistics_layers(model);
    AIM_CHECK(!opt.sync_batchnorm || !stats_layers.empty(), "--sync-bn: ", entry.name, " (",
              models::ModelEntry::config_string(cfg),
              ") has no layer that normalises with batch statistics in training");
    if (!stats_layers.empty()) {
      if (opt.sync_batchnorm)
        log << "SyncBatchNorm: batch statistics synchronised over the " << ranks
            << " ranks (the global batch of " << global_batch << ") in";
      else
        log << "note: batch statistics are per rank (" << opt.batch_size << " samples, not "
            << global_batch << "; --sync-bn synchronises them) in";
      for (size_t i = 0; i < stats_layers.size() && i < 4; ++i) log << " " << stats_layers[i];
      if (stats_layers.size() > 4) log << " and " << stats_layers.size() - 4 << " more";
      log << "\n";
    }
  }
  // SyncBatchNorm: the rank's communicator behind the layers' statistics collectives (f64 CPU
  // tensors in and out; moved to the communicator's device and back).
  std::optional<autograd::BatchStatsSync>& bn_sync = dp.bn_sync;
  if (opt.sync_batchnorm) {
    bn_sync.emplace();
    bn_sync->ranks = ranks;
    bn_sync->all_gather = [comm](const Tensor& in, const Tensor& out) {
      const Tensor o = out.to(comm->device());
      comm->all_gather(in.to(comm->device()), o);
      if (o.storage() != out.storage()) out.copy_(o);
    };
    bn_sync->all_reduce_sum = [comm](const Tensor& t) {
      const Tensor d = t.to(comm->device());
      comm->all_reduce(d, dist::ReduceOp::Sum);
      if (d.storage() != t.storage()) t.copy_(d);
    };
  }
  return dp;
}

std::string data_parallel_plan(const models::ModelEntry& entry, const models::ModelConfig& cfg,
                               int64_t batch, double bucket_mb, uint64_t seed) {
  AIM_CHECK(batch > 0 && bucket_mb > 0, "data_parallel_plan: batch (", batch, ") and bucket_mb (",
            bucket_mb, ") must be > 0");
  std::unique_ptr<models::Model> model = entry.build(cfg, seed);
  model->train();
  std::unique_ptr<data::BatchSource> source = entry.source(cfg, "synthetic", seed);
  const TensorMap b = source->next(batch);
  nlohmann::json j;
  j["model"] = entry.name;
  j["config"] = models::ModelEntry::config_string(cfg);
  j["batch"] = batch;
  j["train_flops_per_step"] = model->train_flops(b);
  int64_t n_params = 0;
  for (const auto& [n, p] : model->named_parameters()) n_params += p.numel();
  j["parameters"] = n_params;
  const std::set<std::string> tables = embedding_tables(*model);
  if (!tables.empty()) {
    // One real step's gradients: the rows it touched are what the sparse exchange sends.
    model->training_loss(b).backward();
    nlohmann::json tj = nlohmann::json::array();
    for (const auto& [n, p] : model->named_parameters()) {
      if (!tables.count(n)) continue;
      int64_t touched = 0;
      if (p.grad().defined()) {
        const Tensor g = p.grad().to(DType::f32).contiguous();
        const float* d = g.data<float>();
        const int64_t V = g.size(0), C = g.size(1);
        for (int64_t v = 0; v < V; ++v)
          for (int64_t c = 0; c < C; ++c)
            if (d[v * C + c] != 0.0f) {
              ++touched;
              break;
            }
      }
      tj.push_back({{"name", n},
                    {"rows", p.size(0)},
                    {"cols", p.size(1)},
                    {"bytes", p.numel() * int64_t(dtype_size(p.dtype()))},
                    {"rows_touched", touched}});
    }
    j["embedding_tables"] = tj;
  } else {
    j["embedding_tables"] = nlohmann::json::array();
  }
  int64_t grad_bytes = 0;
  std::vector<int64_t> buckets;
  std::vector<int64_t> bucket_params;
  dist::run_local_ranks(1, [&](int, dist::Communicator& comm) {
    dist::ReducerOptions ro;
    ro.bucket_mb = bucket_mb;
    ro.first_bucket_mb = std::min(1.0, bucket_mb);
    dist::Reducer red(comm, model->named_parameters(), ro);
    for (const dist::BucketInfo& bi : red.buckets()) {
      buckets.push_back(bi.bytes());
      bucket_params.push_back(int64_t(bi.params.size()));
      grad_bytes += bi.bytes();
    }
  });
  j["grad_bytes"] = grad_bytes;
  j["bucket_mb"] = bucket_mb;
  j["bucket_bytes"] = buckets;
  j["bucket_params"] = bucket_params;
  return j.dump();
}

}  // namespace aim::train
