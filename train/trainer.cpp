#include "train/trainer.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "autograd/amp.h"
#include "autograd/functions/elementwise.h"
#include "autograd/variable.h"
#include "data/prefetch.h"
#include "kernels/error_flag.h"
#include "layers/batchnorm.h"
#include "profiler/profiler.h"
#include "profiler/report.h"
#include "profiler/roofline.h"
#include "profiler/run_info.h"
#include "tensor/check.h"
#include "tensor/device.h"
#include "tensor/safetensors.h"
#include "train/dist/communicator.h"
#include "train/dist/mpi_backend.h"
#include "train/dist/nccl_backend.h"
#include "train/dist/reducer.h"
#include "train/graph_step.h"
#include "train/readback.h"
#include "train/step.h"

namespace aim::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

int64_t parse_i64(const std::map<std::string, std::string>& md, const std::string& key,
                  const std::string& path) {
  auto it = md.find(key);
  AIM_CHECK(it != md.end(), "checkpoint ", path, " has no metadata '", key, "'");
  try {
    size_t used = 0;
    const int64_t v = std::stoll(it->second, &used);
    if (used == it->second.size()) return v;
  } catch (const std::exception&) {
  }
  AIM_FAIL("checkpoint ", path, ": metadata '", key, "' = '", it->second, "' is not an integer");
}

}  // namespace

namespace {
// One group of a model's own optimizer: the kind's constructor with the group's settings by name
// (PyTorch's / TF's defaults where a setting is absent); an unknown kind or setting is an error.
std::unique_ptr<Optimizer> make_group_optimizer(const std::string& recipe,
                                                const models::OptimizerGroup& g,
                                                NamedParameters p) {
  std::set<std::string> used;
  auto get = [&](const char* key, double dflt) {
    used.insert(key);
    auto it = g.settings.find(key);
    return it == g.settings.end() ? dflt : it->second;
  };
  std::unique_ptr<Optimizer> r;
  if (g.kind == "ftrl")
    r = std::make_unique<Ftrl>(std::move(p), get("lr", 0.05), get("lr_power", -0.5),
                               get("initial_accumulator_value", 0.1), get("l1", 0), get("l2", 0));
  else if (g.kind == "adagrad")
    r = std::make_unique<Adagrad>(std::move(p), get("lr", 0.01), get("lr_decay", 0),
                                  get("weight_decay", 0), get("eps", 1e-10),
                                  get("initial_accumulator_value", 0));
  else
    AIM_FAIL("optimizer ", recipe, ": group '", g.prefix, "' has kind '", g.kind,
             "' (allowed: ftrl, adagrad)");
  for (const auto& [k, v] : g.settings)
    AIM_CHECK(used.count(k), "optimizer ", recipe, ": group '", g.prefix, "' (", g.kind,
              ") has an unknown setting '", k, "'");
  return r;
}
}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& o, NamedParameters params,
                                          const std::vector<models::ModelOptimizer>& own) {
  AIM_CHECK(std::isfinite(o.lr) && o.lr > 0, "optimizer: lr must be > 0, got ", o.lr);
  AIM_CHECK(o.momentum >= 0 && o.momentum < 1, "optimizer: momentum must be in [0, 1), got ",
            o.momentum);
  AIM_CHECK(!o.nesterov || (o.name == "sgd" && o.momentum > 0),
            "optimizer: nesterov needs sgd with momentum > 0");
  AIM_CHECK(o.momentum == 0 || o.name == "sgd", "optimizer: momentum applies to sgd only, not ",
            o.name);
  const bool wd_set = o.weight_decay >= 0;
  const double wd = wd_set ? o.weight_decay : 0;
  if (o.name == "sgd")
    return std::make_unique<SGD>(std::move(params), o.lr, o.momentum, 0.0, wd, o.nesterov);
  if (o.name == "adam")
    return std::make_unique<Adam>(std::move(params), o.lr, 0.9, 0.999, 1e-8, wd);
  if (o.name == "adamw")
    return std::make_unique<AdamW>(std::move(params), o.lr, 0.9, 0.999, 1e-8,
                                   wd_set ? o.weight_decay : 0.01);
  if (o.name == "adagrad") return std::make_unique<Adagrad>(std::move(params), o.lr, 0.0, wd);
  for (const models::ModelOptimizer& m : own) {
    if (m.name != o.name) continue;
    AIM_CHECK(!wd_set || o.weight_decay == 0, "optimizer ", m.name,
              ": weight decay is not supported (each group has its own settings)");
    AIM_CHECK(m.ref_lr > 0, "optimizer ", m.name, ": the recipe's reference lr must be > 0");
    std::vector<GroupedOptimizer::Group> groups;
    for (const models::OptimizerGroup& g : m.groups)
      groups.push_back({g.prefix, [g, name = m.name](NamedParameters p) {
                          return make_group_optimizer(name, g, std::move(p));
                        }});
    auto r = std::make_unique<GroupedOptimizer>(std::move(params), m.ref_lr, std::move(groups));
    r->set_lr(o.lr);
    return r;
  }
  std::string allowed = "sgd, adam, adamw, adagrad";
  for (const models::ModelOptimizer& m : own) allowed += ", " + m.name;
  AIM_FAIL("unknown optimizer '", o.name, "' (allowed: ", allowed, ")");
}

std::unique_ptr<Optimizer> make_optimizer(const std::string& name, NamedParameters params,
                                          double lr) {
  OptimizerOptions o;
  o.name = name;
  o.lr = lr;
  return make_optimizer(o, std::move(params));
}

LRSchedule make_schedule(const std::string& name, double lr, int64_t warmup, int64_t total,
                         double poly_power) {
  AIM_CHECK(warmup >= 0 && (warmup < total || warmup == 0), "schedule: warmup steps (", warmup,
            ") must be in [0, total steps ", total, ")");
  if (name == "constant") return LRSchedule::constant(lr);
  if (name == "step") return LRSchedule::step(lr, std::max<int64_t>(1, total / 3), 0.1);
  if (name == "poly") return LRSchedule::poly(lr, total, poly_power);
  if (name == "warmup_linear") return LRSchedule::warmup_linear(lr, warmup, total);
  if (name == "warmup_cosine") return LRSchedule::warmup_cosine(lr, warmup, total);
  AIM_FAIL("unknown schedule '", name,
           "' (allowed: constant, step, poly, warmup_linear, warmup_cosine)");
}

std::string checkpoint_path(const std::string& dir) {
  return (std::filesystem::path(dir) / "checkpoint.safetensors").string();
}

void save_checkpoint(const std::string& dir, int64_t step, const layers::Module& model,
                     const Optimizer& opt, int64_t data_position,
                     const std::map<std::string, std::string>& extra_metadata) {
  AIM_CHECK(!dir.empty(), "save_checkpoint: empty checkpoint directory");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  AIM_CHECK(!ec, "save_checkpoint: cannot create directory ", dir, ": ", ec.message());
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [k, t] : model.state_dict()) tensors.emplace_back("model." + k, t);
  for (const auto& [k, t] : opt.state_dict()) tensors.emplace_back("optim." + k, t);
  std::map<std::string, std::string> md = extra_metadata;
  md["format"] = "aim-train-checkpoint-1";
  md["step"] = std::to_string(step);
  md["data_position"] = std::to_string(data_position);
  save_safetensors(checkpoint_path(dir), tensors, md);
}

CheckpointInfo load_checkpoint(const std::string& dir, layers::Module& model, Optimizer& opt) {
  const std::string path = checkpoint_path(dir);
  AIM_CHECK(std::filesystem::exists(path), "no checkpoint to resume from: ", path,
            " does not exist");
  const SafetensorsFile f = load_safetensors(path);
  layers::StateDict msd;
  OptimizerState osd;
  for (const auto& [k, t] : f.tensors) {
    if (k.rfind("model.", 0) == 0)
      msd.emplace_back(k.substr(6), t);
    else if (k.rfind("optim.", 0) == 0)
      osd.emplace_back(k.substr(6), t);
    else
      AIM_FAIL("checkpoint ", path, ": tensor '", k, "' has neither a model. nor an optim. prefix");
  }
  try {
    model.load_state_dict(msd, true);
    opt.load_state_dict(osd);
  } catch (const Error& e) {
    AIM_FAIL("checkpoint ", path, ": ", e.what());
  }
  CheckpointInfo info;
  info.metadata = f.metadata;
  info.step = parse_i64(f.metadata, "step", path);
  info.data_position = parse_i64(f.metadata, "data_position", path);
  return info;
}

namespace {

// The first parameter (data, then gradient) holding a NaN or Inf, for the NaN/Inf stop message.
std::string first_non_finite(const layers::Module& m) {
  auto bad = [](const Tensor& t) {
    if (!t.defined() || !is_floating(t.dtype())) return false;
    for (float v : t.to(kCPU).to(DType::f32).contiguous().template to_vector<float>())
      if (!std::isfinite(v)) return true;
    return false;
  };
  for (const auto& [name, p] : m.named_parameters()) {
    if (bad(p.data())) return "parameter " + name;
    if (bad(p.grad())) return "gradient of " + name;
  }
  return "";
}

std::string metrics_str(const models::Metrics& m) {
  std::string s;
  char buf[64];
  for (const auto& [k, v] : m) {
    std::snprintf(buf, sizeof buf, "  %s %.4f", k.c_str(), v);
    s += buf;
  }
  return s;
}

// One terminal line redrawn in place (progress bar) or plain lines every log_every steps.
class ProgressLog {
 public:
  ProgressLog(std::ostream& os, bool bar, int64_t total) : os_(os), bar_(bar), total_(total) {}
  void update(int64_t step, double loss, double samples_per_s, const std::string& extra,
              double eta_s) {
    char buf[160];
    if (bar_) {
      constexpr int kWidth = 30;
      const int done = int(double(kWidth) * double(step) / double(std::max<int64_t>(1, total_)));
      std::string b(size_t(done), '#');
      b.resize(kWidth, '.');
      std::snprintf(buf, sizeof buf, "\r[%s] %lld/%lld  loss %.4f  %.0f samples/s  eta %.0fs",
                    b.c_str(), static_cast<long long>(step), static_cast<long long>(total_), loss,
                    samples_per_s, eta_s);
      os_ << buf << extra << "\x1b[K" << std::flush;
      return;
    }
    std::snprintf(buf, sizeof buf, "step %lld/%lld  loss %.5f  samples/s %.1f",
                  static_cast<long long>(step), static_cast<long long>(total_), loss,
                  samples_per_s);
    os_ << buf << extra << "\n" << std::flush;
  }
  void finish() {
    if (bar_) os_ << "\n";
  }

 private:
  std::ostream& os_;
  bool bar_;
  int64_t total_;
};

struct Fetched {
  TensorMap batch;
  int64_t position = 0;  // stream position after this batch (the global one under ranks)
};

// One rank of a data-parallel run (null: a single process).
struct RankCtx {
  dist::Communicator* comm = nullptr;
  int rank = 0, size = 1;
};

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

namespace {

// --freeze-bn: every layer that can normalises with its running statistics in training too;
// returns the frozen layers' types (one entry per layer).
void freeze_batch_statistics(layers::Module& m, std::map<std::string, int>& frozen) {
  if (m.freeze_batch_statistics()) ++frozen[m.type_name()];
  for (const auto& [name, c] : m.children()) freeze_batch_statistics(*c, frozen);
}

// The reducer's per-step figures summed over the steps after the first (it sets up).
struct DistTimes {
  double comm_s = 0, backward_s = 0, overlapped_s = 0, wait_s = 0, sparse_s = 0;
  int64_t steps = 0;
  void add(const dist::ReducerStats& rs) {
    comm_s += rs.comm_s;
    backward_s += rs.backward_s;
    overlapped_s += rs.overlapped_s;
    wait_s += rs.finish_wait_s;
    sparse_s += rs.sparse_s;
    ++steps;
  }
};

// The data-parallel figures of a run (every rank gets them through one all_gather; rank 0 logs
// the returned lines).
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

// The data-parallel parts of a rank: the gradient reducer over the parameters the optimizer
// reads (its buckets, the sparse embedding tables), and SyncBatchNorm's collectives; logs the plan.
struct DataParallel {
  std::unique_ptr<dist::Reducer> reducer;
  std::set<std::string> sparse_tables;
  std::optional<autograd::BatchStatsSync> bn_sync;  // --sync-bn
};

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

// One rank's training (ctx null: a single process). See train_model.
TrainResult train_rank(const models::ModelEntry& entry, const models::ModelConfig& cfg,
                       const TrainOptions& opt, std::ostream& log, const RankCtx* ctx) {
  const auto t_call = Clock::now();
  dist::Communicator* comm = ctx ? ctx->comm : nullptr;
  const int rank = ctx ? ctx->rank : 0, ranks = ctx ? ctx->size : 1;
  const bool lead = rank == 0;  // evaluates, logs, writes checkpoints and weights
  AIM_CHECK(opt.batch_size > 0, "train: batch size must be > 0, got ", opt.batch_size);
  AIM_CHECK(opt.epochs > 0 || opt.steps > 0, "train: steps must be > 0, got ", opt.steps);
  AIM_CHECK(!opt.resume || !opt.checkpoint_dir.empty(), "train: resume needs a checkpoint dir");
  AIM_CHECK(opt.eval_every >= 0 && opt.eval_samples > 0 && opt.checkpoint_every >= 0 &&
                opt.prefetch >= 0 && opt.clip_norm >= 0,
            "train: eval_every, checkpoint_every, prefetch, clip_norm must be >= 0 and "
            "eval_samples > 0");
  const Device dev = comm ? comm->device() : parse_device(opt.device);
  // This thread launches on the rank's GPU (a rank thread of --gpus N, a launcher rank with
  // LOCAL_RANK > 0): every kernel, allocation and stream of the rank is on `dev`.
  set_current_device(dev);

  std::unique_ptr<models::Model> model = entry.build(cfg, opt.seed);
  if (!opt.weights.empty()) {
    const SafetensorsFile f = load_safetensors(opt.weights);
    try {
      model->load_state_dict(f.tensors, true);
    } catch (const Error& e) {
      AIM_FAIL("--weights ", opt.weights, ": ", e.what());
    }
  }
  model->to(dev);
  if (opt.freeze_batchnorm) {
    std::map<std::string, int> frozen;
    freeze_batch_statistics(*model, frozen);
    AIM_CHECK(!frozen.empty(), "--freeze-bn: ", entry.name,
              " has no batch-normalisation layer with running statistics to freeze");
    for (const auto& [type, n] : frozen)
      log << "frozen " << type << ": " << n << " layers normalise with their running statistics\n";
  }
  model->train();
  // Data parallel: rank 0's initial parameters and buffers on every rank (they were built from
  // the same seed; this also covers --weights read differently or nondeterministic inits).
  if (comm) dist::broadcast_parameters(*comm, *model, 0);
  const int64_t global_batch = opt.batch_size * ranks;
  OptimizerOptions oo = opt.optim;
  if (oo.lr_batch > 0) oo.lr *= double(global_batch) / oo.lr_batch;
  auto optim = make_optimizer(oo, model->named_parameters(), entry.optimizers);
  std::unique_ptr<data::BatchSource> source = entry.source(cfg, opt.data, opt.seed);
  const int64_t n_eval = std::min(opt.eval_samples, source->eval_size());
  AIM_CHECK(n_eval > 0, "train: the data has no evaluation samples");

  TrainResult r;
  r.data_description = source->describe();
  r.total_steps = opt.steps;
  if (opt.epochs > 0) {
    const int64_t per_epoch = source->epoch_size() / global_batch;
    AIM_CHECK(per_epoch > 0, "train: an epoch of ", source->epoch_size(),
              " samples holds no batch of ", global_batch);
    r.total_steps = std::max<int64_t>(1, std::llround(opt.epochs * double(per_epoch)));
  }
  log << "data: " << r.data_description << "; " << r.total_steps << " steps of " << opt.batch_size
      << (ranks > 1 ? str(" per rank x ", ranks, " ranks = ", global_batch) : std::string())
      << " (epoch = " << source->epoch_size() << " samples)\n";
  const LRSchedule sched =
      make_schedule(opt.schedule, oo.lr, opt.warmup_steps, r.total_steps, opt.poly_power);

  // Mixed precision: the model's f32 parameters and their low-precision copies (one cast per step).
  const bool amp_on = opt.precision != DType::f32;
  std::vector<std::string> fp32_patterns;
  for (const models::Model::Fp32Params& f : model->amp_fp32_params())
    fp32_patterns.push_back(f.pattern);
  autograd::amp::ParamCache amp_cache;
  if (amp_on) amp_cache = autograd::amp::ParamCache(model->named_parameters(), fp32_patterns);
  std::optional<LossScaler> scaler;
  if (opt.precision == DType::f16) scaler.emplace(opt.loss_scaler);
  if (amp_on) {
    log << "precision " << autograd::amp::precision_name(opt.precision)
        << " (mixed): 16-bit GEMM/conv/rnn, f32 master weights, optimizer state, softmax, losses, "
           "reductions and normalisation statistics";
    for (const models::Model::Fp32Params& f : model->amp_fp32_params())
      log << "; f32 parameters " << f.pattern << " (" << f.why << ")";
    if (scaler) log << "; dynamic loss scale " << scaler->scale();
    log << "\n";
  }
  auto evaluate = [&]() {
    std::optional<autograd::amp::Autocast> ac;
    if (amp_on) ac.emplace(opt.precision, &amp_cache);
    amp_cache.clear();
    models::Metrics m = entry.evaluate(*model, *source, n_eval, dev);
    amp_cache.clear();
    return m;
  };

  std::map<std::string, std::string> meta = {
      {"precision", autograd::amp::precision_name(opt.precision)},
      {"model", entry.name},
      {"config", models::ModelEntry::config_string(cfg)},
      {"optimizer", opt.optim.name},
      {"data", source->fingerprint()},
      {"batch_size", std::to_string(opt.batch_size)}};
  if (ranks > 1) meta["ranks"] = std::to_string(ranks);

  int64_t step = 0;  // steps completed
  if (opt.resume) {
    const CheckpointInfo ci = load_checkpoint(opt.checkpoint_dir, *model, *optim);
    const std::string path = checkpoint_path(opt.checkpoint_dir);
    if (scaler) scaler->load_state(ci.metadata, path);
    {
      const auto it = ci.metadata.find("ranks");
      const std::string theirs = it == ci.metadata.end() ? "1" : it->second;
      AIM_CHECK(theirs == std::to_string(ranks), "checkpoint ", path, " was written by a run of ",
                theirs, " rank(s), this run has ", ranks,
                ": resume with the same rank count (the global batch would change)");
    }
    for (const auto& [k, v] : meta) {
      if (k.compare(0, 4, "amp_") == 0 || k == "ranks") continue;
      auto it = ci.metadata.find(k);
      AIM_CHECK(it != ci.metadata.end() && it->second == v, "checkpoint ", path, ": ", k, " '",
                it == ci.metadata.end() ? std::string("(missing)") : it->second,
                "' differs from this run's '", v, "'");
    }
    step = ci.step;
    source->seek(ci.data_position);  // the global position (RankShard below places the rank)
    log << "resumed from " << path << " at step " << step << " (data position " << ci.data_position
        << ")\n";
  }
  r.first_step = step;

  // Data parallel: the gradient reducer, the sparse tables and SyncBatchNorm (DataParallel).
  DataParallel dp;
  if (comm) dp = setup_data_parallel(*comm, entry, cfg, opt, *model, *optim, global_batch, log);
  std::unique_ptr<dist::Reducer>& reducer = dp.reducer;
  const std::set<std::string>& sparse_tables = dp.sparse_tables;
  std::optional<autograd::BatchStatsSync>& bn_sync = dp.bn_sync;
  AIM_CHECK(!opt.sync_batchnorm || comm,
            "--sync-bn synchronises batch statistics over data-parallel ranks: it needs --ranks, "
            "--gpus or a launcher");
  DistTimes dist_times;  // the reducer's per-step figures, summed over the steps after the first

  // The loader thread produces batches in stream order; each carries the position after it so a
  // checkpoint records where the *consumed* stream stands, not the prefetched one.
  data::BatchSource* src = source.get();
  const int64_t to_produce = std::max<int64_t>(0, r.total_steps - step);
  int64_t produced = 0;
  const int64_t start_position = src->position();  // global (before the loader thread starts)
  std::optional<RankShard> shard;
  if (ranks > 1) shard.emplace(*src, rank, ranks, opt.batch_size, src->position());
  auto produce = [src, &shard, &produced, to_produce, b = opt.batch_size,
                  pin = dev.is_cuda()]() -> std::optional<Fetched> {
    if (produced == to_produce) return std::nullopt;
    ++produced;
    Fetched f;
    if (shard) {
      f.batch = shard->next();
      f.position = shard->global_position();
    } else {
      f.batch = src->next(b);
      f.position = src->position();
    }
    // Page-locked on the loader thread, so the step's host-to-device copies are asynchronous.
    if (pin)
      for (auto& [k, t] : f.batch) t = t.pin_memory();
    return f;
  };
  std::unique_ptr<data::Prefetcher<Fetched>> prefetcher;
  if (opt.prefetch > 0)
    prefetcher = std::make_unique<data::Prefetcher<Fetched>>(produce, opt.prefetch);
  auto fetch = [&]() { return prefetcher ? prefetcher->next() : produce(); };

  const int64_t log_every =
      opt.log_every > 0
          ? opt.log_every
          : (opt.eval_every > 0 ? opt.eval_every : std::max<int64_t>(1, r.total_steps / 10));
  ProgressLog progress(log, opt.progress_bar, r.total_steps);
  std::vector<double> step_ms;
  double device_s = 0, loop_s = 0, flops = 0, interval_loss = 0, interval_s = 0;
  int64_t interval_n = 0, data_position = start_position;
  std::string last_metrics;
  // The losses, the fp16 overflow flag and the device error record, read in one copy
  // (train/readback.h): once per log interval on a GPU, every step with fp16 or on the CPU.
  const bool defer_loss = dev.is_cuda() && !opt.progress_bar && !scaler;
  StepReadBack readback(dev, defer_loss ? log_every : 1);
  // Host synchronisations and device-to-host bytes inside the steps (evaluations and
  // checkpoints between steps excluded), over the steps after the first (it sets up).
  int64_t syncs_in_steps = 0, d2h_in_steps = 0, counted_steps = 0;
  // Reads what the steps filed; a non-finite loss stops the run naming its step. Returns the
  // flag (fp16: > 0 when a gradient overflowed on some rank; 0 without a scaler).
  auto read_back = [&]() {
    if (readback.empty()) return 0.0;
    const StepReadBack::Values v = readback.read();  // syncs
    const bool overflowed = v.flag > 0;
    for (const auto& [at, l] : v.losses) {
      if (!std::isfinite(l) && !overflowed) {  // fp16: an overflowed loss is a skipped step
        const std::string where = first_non_finite(*model);
        AIM_FAIL("train: loss is ", l, " at step ", at, " (", entry.name, ", lr ", optim->lr(),
                 ", optimizer ", opt.optim.name, ")",
                 at == step + 1 ? std::string()
                                : str(" (read at step ", step + 1,
                                      ": losses are read once per log interval on a GPU)"),
                 where.empty() ? std::string("; every parameter and gradient is finite")
                               : "; first non-finite tensor: " + where,
                 "; stopping");
      }
      r.losses.push_back(l);
      interval_loss += l;
    }
    return v.flag;
  };
  auto file_loss = [&](const Tensor& loss, int64_t at_step) { readback.file_loss(loss, at_step); };

  // What every step touches (train/step.h).
  StepContext step_ctx;
  step_ctx.model = model.get();
  step_ctx.optim = optim.get();
  step_ctx.comm = comm;
  step_ctx.reducer = reducer.get();
  step_ctx.bn_sync = bn_sync ? &*bn_sync : nullptr;
  step_ctx.scaler = scaler ? &*scaler : nullptr;
  step_ctx.precision = opt.precision;
  step_ctx.amp_cache = amp_on ? &amp_cache : nullptr;
  step_ctx.clip_norm = opt.clip_norm;
  step_ctx.inject_overflow_at = opt.testing.inject_overflow_at;

  // Profiled steps: [prof_a, prof_b] (1-based); the first step is skipped by default (warm-up:
  // allocations, first touches).
  const bool profiling = opt.profile || !opt.trace.empty() || !opt.roofline.empty();
  const int64_t prof_a =
      opt.profile_from > 0 ? opt.profile_from : std::min<int64_t>(2, r.total_steps);
  const int64_t prof_b =
      opt.profile_to > 0 ? std::min(opt.profile_to, r.total_steps) : r.total_steps;
  AIM_CHECK(!profiling || (prof_a >= 1 && prof_a <= prof_b), "profile steps ", prof_a, ":", prof_b,
            " are not within 1..", r.total_steps);
  int64_t profiled_steps = 0;

  // --cuda-graph: the step after the first (eager: it creates the gradients and the optimizer
  // state) is captured and replayed from then on (train/graph_step.h).
  AIM_CHECK(!opt.cuda_graph || !profiling,
            "--cuda-graph: a graph replays as one unit, its ops are not timed one by one: "
            "profile without --cuda-graph");
  std::unique_ptr<GraphStep> graph;
  if (opt.cuda_graph) graph = std::make_unique<GraphStep>(step_ctx, dev, entry.name, log);

  while (step < r.total_steps) {
    const bool profile_step = profiling && step + 1 >= prof_a && step + 1 <= prof_b;
    if (comm && profiling && step + 1 == prof_a) {
      // The profiler is process-wide: rank 0 starts it, and no rank enters the first profiled
      // step before it is on.
      if (lead) {
        profiler::set_record_args(!opt.trace.empty());
        profiler::start();
      }
      comm->barrier();
    } else if (!comm && profile_step && !profiler::enabled()) {
      profiler::set_record_args(!opt.trace.empty());
      profiler::start();
    }
    if (comm && step + 1 == opt.testing.fail_step && rank == opt.testing.fail_rank &&
        opt.testing.fail_hang)
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // never answers again
    if (comm && step + 1 == opt.testing.fail_step && rank == opt.testing.fail_rank)
      AIM_FAIL("injected failure at step ", step + 1, " (--inject-failure ", rank, ":", step + 1,
               ", a testing flag)");
    std::optional<profiler::Scope> step_scope;
    if (profile_step || profiler::nvtx_enabled())
      step_scope.emplace("step/" + std::to_string(step + 1), profiler::ScopeKind::Step);
    if (profile_step) ++profiled_steps;
    const auto t_fetch = Clock::now();
    std::optional<Fetched> f = fetch();
    AIM_CHECK(f.has_value(), "train: the loader ended early at step ", step);
    const auto t0 = Clock::now();
    const DeviceSyncCounters sync0 = device_sync_counters(dev);
    optim->set_lr(sched.lr(step));
    TensorMap batch;
    bool read_this_step = false;
    std::optional<profiler::Scope> phase;
    if (graph && step > r.first_step) {
      batch = graph->run(f->batch, step + 1);
      file_loss(graph->loss(), step + 1);
    } else {
      batch = models::batch_to_device(*model, f->batch, dev);
      StepHooks hooks;
      hooks.record_loss = [&](const Tensor& loss) { file_loss(loss, step + 1); };
      hooks.overflowed = [&](const Tensor& flag) {
        readback.file_flag(flag);
        read_this_step = true;
        return read_back() > 0;  // the fp16 step's one host read
      };
      const bool skipped = train_step(step_ctx, batch, step + 1, hooks);
      if (reducer && (step > r.first_step || r.total_steps - r.first_step == 1)) {
        const dist::ReducerStats& rs = reducer->last_stats();  // the first step sets up
        dist_times.add(rs);
      }
      if (skipped)
        log << "step " << step + 1 << ": gradient overflow (Inf/NaN), step skipped; loss scale -> "
            << scaler->scale() << "\n";
      phase.emplace("opt", profiler::ScopeKind::Phase);  // the read-back below, as before
    }
    const bool log_point = (step + 1) % log_every == 0 || step + 1 == r.total_steps;
    if (!read_this_step && (!defer_loss || log_point)) read_back();  // syncs
    phase.reset();
    const double dt = seconds_since(t0);
    loop_s += seconds_since(t_fetch);
    ++step;
    if (step > r.first_step + 1 || r.total_steps - r.first_step == 1) {
      const DeviceSyncCounters sync1 = device_sync_counters(dev);
      syncs_in_steps += sync1.host_syncs - sync0.host_syncs;
      d2h_in_steps += sync1.d2h_bytes - sync0.d2h_bytes;
      ++counted_steps;
    }
    if (!graph || step == r.first_step + 1) {  // a captured step zeroes the gradients itself
      profiler::Scope zero("opt", profiler::ScopeKind::Phase);
      optim->zero_grad();
    }
    step_scope.reset();
    if (profile_step && step == prof_b) {
      if (comm) comm->barrier();  // every rank's step closed before the profiler stops
      if (lead) profiler::stop();
      if (comm) comm->barrier();  // and no rank opens a scope of the next step before
    }
    data_position = f->position;
    flops += model->train_flops(batch);
    step_ms.push_back(dt * 1e3);
    device_s += dt;
    interval_s += dt;
    ++interval_n;

    if (lead && ((opt.eval_every > 0 && step % opt.eval_every == 0) || step == r.total_steps)) {
      profiler::Scope eval_scope("eval", profiler::ScopeKind::Phase);
      const models::Metrics m = evaluate();
      r.evals.emplace_back(step, m);
      last_metrics = metrics_str(m);
    }
    if (step % log_every == 0 || step == r.total_steps || opt.progress_bar) {
      const double eta = device_s / double(step - r.first_step) * double(r.total_steps - step);
      std::string extra = last_metrics;
      if (scaler) {
        char sb[96];
        std::snprintf(sb, sizeof sb, "  loss_scale %g  skipped %lld", scaler->scale(),
                      static_cast<long long>(scaler->skipped_steps()));
        extra += sb;
      }
      progress.update(step, interval_loss / double(interval_n),
                      double(interval_n * global_batch) / std::max(interval_s, 1e-12), extra, eta);
      if (step % log_every == 0 || step == r.total_steps) {
        interval_loss = interval_s = 0;
        interval_n = 0;
      }
    }
    if (!opt.checkpoint_dir.empty() && opt.checkpoint_every > 0 &&
        step % opt.checkpoint_every == 0 && step < r.total_steps) {
      if (scaler)
        for (const auto& [k, v] : scaler->state()) meta[k] = v;
      if (lead) save_checkpoint(opt.checkpoint_dir, step, *model, *optim, data_position, meta);
      if (comm) comm->barrier();  // the checkpoint is complete when any rank goes on
    }
  }
  read_back();
  progress.finish();
  if (graph) {
    r.graph_capture_ms = graph->capture_ms();
    r.graph_captures = graph->captures();
  }
  if (counted_steps > 0) {
    r.host_syncs_per_step = double(syncs_in_steps) / double(counted_steps);
    r.d2h_bytes_per_step = double(d2h_in_steps) / double(counted_steps);
  }
  // Every rank is done with its steps (and its collectives' scopes are closed) before rank 0
  // reads the process-wide profiler events, evaluates and writes the final checkpoint.
  if (comm) comm->barrier();
  if (lead && profiler::enabled()) profiler::stop();
  if (lead && profiling && profiled_steps > 0) {
    // Under ranks the events hold every rank's steps: the tables are per rank-step.
    profiler::write_report(log, {opt.profile, opt.roofline, opt.trace, opt.ceilings}, dev,
                           int(profiled_steps) * ranks,
                           str(entry.name, " training step, batch ", opt.batch_size, ", ",
                               dev.str(), " (steps ", prof_a, "..", prof_b, ")"),
                           str(" of steps ", prof_a, "..", prof_b));
  }
  if (prefetcher) r.data_wait_s = prefetcher->wait_seconds();
  prefetcher.reset();

  if (lead && r.evals.empty()) r.evals.emplace_back(step, evaluate());
  // A bad index or target flagged by a kernel after the last read (the final evaluation's).
  if (dev.is_cuda()) kernels::check_device_errors(dev);
  if (scaler) {
    r.loss_scale = scaler->scale();
    r.skipped_steps = scaler->skipped_steps();
    for (const auto& [k, v] : scaler->state()) meta[k] = v;
  }
  if (!r.evals.empty()) r.final_metrics = r.evals.back().second;
  if (r.final_metrics.count("auc")) r.final_auc = r.final_metrics.at("auc");
  if (lead && !opt.checkpoint_dir.empty() && step > r.first_step)
    save_checkpoint(opt.checkpoint_dir, step, *model, *optim, data_position, meta);
  if (lead && !opt.save_weights.empty()) {
    model->to(kCPU);
    save_safetensors(opt.save_weights, model->state_dict(),
                     {{"model", entry.name}, {"config", meta.at("config")}});
  }

  r.steps_run = int64_t(r.losses.size());
  const double samples = double(r.steps_run * opt.batch_size);
  r.samples_per_s = loop_s > 0 ? samples / loop_s : 0;
  r.device_samples_per_s = device_s > 0 ? samples / device_s : 0;
  r.train_flops_per_step = r.steps_run > 0 ? flops / double(r.steps_run) : 0;
  r.step_p50_ms = profiler::percentile(step_ms, 50);
  r.step_p90_ms = profiler::percentile(step_ms, 90);
  r.step_p99_ms = profiler::percentile(step_ms, 99);
  std::string dist_line;
  if (comm) {
    dist_line = summarise_data_parallel(*comm, *reducer, sparse_tables, dist_times, r.samples_per_s,
                                        r.dist);
    // Rank 0's checkpoint and weights are written when any rank returns.
    comm->barrier();
  }
  r.wall_s = seconds_since(t_call);
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "done: %lld steps, %.1f samples/s (device %.1f), step p50 %.2f ms p90 %.2f ms "
                "p99 %.2f ms, %.1f GFLOP/s, data wait %.2f s, %.1f s\n",
                static_cast<long long>(step), r.samples_per_s, r.device_samples_per_s,
                r.step_p50_ms, r.step_p90_ms, r.step_p99_ms,
                r.step_p50_ms > 0 ? r.train_flops_per_step / (r.step_p50_ms * 1e6) : 0.0,
                r.data_wait_s, r.wall_s);
  log << "final" << metrics_str(r.final_metrics) << " (" << n_eval << " evaluation samples"
      << (comm ? ", rank 0" : "") << ")\n";
  if (scaler)
    log << "loss scale " << r.loss_scale << " at the end, " << r.skipped_steps
        << " steps skipped on overflow\n";
  log << dist_line << (comm ? "rank 0 " : "") << buf << std::flush;
  return r;
}

}  // namespace

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

TrainResult train_model(const models::ModelEntry& entry, const models::ModelConfig& cfg,
                        const TrainOptions& opt, std::ostream& log) {
  const DistOptions& d = opt.dist;
  if (d.backend.empty()) {
    AIM_CHECK(d.ranks == 1, "train: ", d.ranks, " ranks need a backend (local, nccl, launcher)");
    return train_rank(entry, cfg, opt, log, nullptr);
  }
  AIM_CHECK(std::isfinite(d.timeout_s) && d.timeout_s > 0,
            "--dist-timeout must be > 0 seconds, got ", d.timeout_s);
  AIM_CHECK(std::isfinite(d.bucket_mb) && d.bucket_mb > 0, "--bucket-mb must be > 0, got ",
            d.bucket_mb);
  AIM_CHECK(d.embedding_comm == "dense" || d.embedding_comm == "sparse", "--embedding-comm '",
            d.embedding_comm, "' is not allowed (allowed: dense, sparse)");
  dist::Options co;
  co.timeout = std::chrono::milliseconds(std::llround(d.timeout_s * 1e3));
  const std::chrono::milliseconds abandon_after =
      d.abandon_stuck_ranks ? co.timeout : std::chrono::milliseconds(0);
  std::ostream quiet(nullptr);  // ranks other than 0 log nothing (rank 0 prints per-rank lines)
  auto run = [&](int rank, dist::Communicator& c, TrainResult& out) {
    RankCtx ctx{&c, rank, c.size()};
    out = train_rank(entry, cfg, opt, rank == 0 ? log : quiet, &ctx);
  };
  if (d.backend == "local") {
    AIM_CHECK(d.ranks >= 1, "--ranks must be >= 1, got ", d.ranks);
    AIM_CHECK(parse_device(opt.device).is_cpu(), "--ranks runs CPU ranks (--device cpu), not ",
              opt.device, ": use --gpus N for GPUs");
    // The ranks share this process's OpenMP threads (--threads): each its share (OpenMP's
    // thread count is per host thread, so a rank thread would otherwise take them all).
    const int per_rank = std::max(1, omp_get_max_threads() / d.ranks);
    log << "local ranks: " << d.ranks << " threads x " << per_rank << " OpenMP threads each\n";
    std::vector<TrainResult> rs(size_t(d.ranks));
    dist::run_local_ranks(
        d.ranks,
        [&](int rank, dist::Communicator& c) {
          omp_set_num_threads(per_rank);
          run(rank, c, rs[size_t(rank)]);
        },
        co, abandon_after);
    return rs[0];
  }
  const auto dense_only = [&] {
    AIM_CHECK(d.embedding_comm == "dense",
              "--embedding-comm sparse exchanges CPU tensors only; "
              "NCCL ranks use --embedding-comm dense");
  };
  if (d.backend == "nccl") {
    dense_only();
    AIM_CHECK(d.ranks >= 1, "--gpus must be >= 1, got ", d.ranks);
    std::vector<int> devices;
    for (int k = 0; k < d.ranks; ++k) devices.push_back(k);
    std::vector<std::unique_ptr<dist::Communicator>> owned =
        dist::make_nccl_communicators(devices, co);
    std::vector<dist::Communicator*> comms;
    for (auto& c : owned) comms.push_back(c.get());
    std::vector<TrainResult> rs(size_t(d.ranks));
    bool abandoned = false;
    try {
      dist::run_ranks(
          comms, [&](int rank, dist::Communicator& c) { run(rank, c, rs[size_t(rank)]); },
          abandon_after, &abandoned);
    } catch (...) {
      if (abandoned)  // a stuck rank thread may still use its communicator: keep them
        for (auto& c : owned) c.release();
      throw;
    }
    return rs[0];
  }
  AIM_CHECK(d.backend == "launcher" || d.backend == "mpi", "train: unknown data-parallel backend '",
            d.backend, "' (allowed: local, nccl, launcher, mpi)");
  // One rank per process: NCCL ranks from the launcher's environment, or MPI ranks (mpirun).
  const dist::LaunchEnv env = dist::detect_launch_env();
  std::unique_ptr<dist::Communicator> c;
  if (d.backend == "mpi") {
    AIM_CHECK(parse_device(opt.device).is_cpu(), "the mpi backend runs CPU ranks (--device cpu), ",
              "not ", opt.device, ": GPU ranks under mpirun use NCCL");
    c = dist::make_mpi_communicator(co, &env);
  } else {
    dense_only();
    AIM_CHECK(env.launched(),
              "train: no launcher environment (RANK/WORLD_SIZE, OMPI_COMM_WORLD_*, "
              "SLURM_*) for the launcher backend");
    c = dist::make_nccl_communicator(env, co);
  }
  const int rank = c->rank();
  TrainResult out;
  try {
    run(rank, *c, out);
  } catch (const std::exception& e) {
    // Tell the peers (their collectives fail at once instead of at the deadline where the
    // backend can; the mpi backend prints the reason and ends the job here: MPI_Abort), then
    // report.
    c->abort(e.what());
    const std::string what = e.what();
    if (what.rfind("dist: ", 0) == 0) throw;
    AIM_FAIL("dist: rank ", rank, " failed: ", what);
  }
  return out;
}

}  // namespace aim::train
