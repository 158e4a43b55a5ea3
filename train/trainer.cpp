#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "autograd/variable.h"
#include "data/metrics.h"
#include "tensor/check.h"
#include "tensor/device.h"
#include "tensor/safetensors.h"

namespace aim::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Nearest-rank percentile of an unsorted sample (0 for an empty one).
double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t k = size_t(std::ceil(p / 100.0 * double(v.size())));
  return v[std::min(v.size() - 1, k == 0 ? 0 : k - 1)];
}

std::string join(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "/" : "") + std::to_string(v[i]);
  return s;
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

// Held-out AUC over samples [0, n) in chunks (model in eval mode, no graph).
double heldout_auc(models::Din& m, const data::DinSynthetic& gen, int64_t n, Device dev) {
  autograd::NoGradGuard ng;
  m.eval();
  std::vector<double> scores;
  std::vector<int64_t> labels;
  scores.reserve(size_t(n));
  labels.reserve(size_t(n));
  constexpr int64_t kChunk = 2048;
  for (int64_t s = 0; s < n; s += kChunk) {
    const data::RecBatch b = gen.heldout(s, std::min(kChunk, n - s));
    const std::vector<float> lg = m.forward(b.to(dev)).data().to_vector<float>();
    const std::vector<int64_t> lb = b.label.to_vector<int64_t>();
    scores.insert(scores.end(), lg.begin(), lg.end());
    labels.insert(labels.end(), lb.begin(), lb.end());
  }
  m.train();
  return data::auc(scores, labels);
}

}  // namespace

data::DinSyntheticConfig din_data_config(const models::DinConfig& cfg, const TrainOptions& opt) {
  if (opt.data) return *opt.data;
  const models::DinConfig t = models::DinConfig::tiny();
  if (cfg.n_uid == t.n_uid && cfg.n_mid == t.n_mid && cfg.n_cat == t.n_cat)
    return data::DinSyntheticConfig::tiny(opt.seed);
  data::DinSyntheticConfig d;
  d.seed = opt.seed;
  d.n_users = cfg.n_uid;
  d.n_items = cfg.n_mid;
  d.n_cates = cfg.n_cat;
  return d;
}

std::unique_ptr<Optimizer> make_optimizer(const std::string& name, NamedParameters params,
                                          double lr) {
  if (name == "sgd") return std::make_unique<SGD>(std::move(params), lr);
  if (name == "adam") return std::make_unique<Adam>(std::move(params), lr);
  if (name == "adamw") return std::make_unique<AdamW>(std::move(params), lr);
  if (name == "adagrad") return std::make_unique<Adagrad>(std::move(params), lr);
  AIM_FAIL("unknown optimizer '", name, "' (allowed: sgd, adam, adamw, adagrad)");
}

std::string din_config_string(const models::DinConfig& c) {
  std::ostringstream os;
  os << "n_uid=" << c.n_uid << ",n_mid=" << c.n_mid << ",n_cat=" << c.n_cat
     << ",emb_dim=" << c.emb_dim << ",att_hidden=" << join(c.att_hidden)
     << ",mlp_hidden=" << join(c.mlp_hidden) << ",act=" << c.act
     << ",bn_train=" << (c.bn_train ? 1 : 0);
  return os.str();
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

TrainResult train_din(const models::DinConfig& cfg_in, const TrainOptions& opt, std::ostream& log) {
  const auto t_call = Clock::now();
  AIM_CHECK(opt.steps >= 0, "train_din: steps must be >= 0, got ", opt.steps);
  AIM_CHECK(opt.batch_size > 0, "train_din: batch_size must be > 0, got ", opt.batch_size);
  AIM_CHECK(std::isfinite(opt.lr) && opt.lr > 0, "train_din: lr must be > 0, got ", opt.lr);
  AIM_CHECK(!opt.resume || !opt.checkpoint_dir.empty(),
            "train_din: resume needs a checkpoint directory");
  const Device dev = parse_device(opt.device);

  models::DinConfig cfg = cfg_in;
  cfg.seed = opt.seed;
  models::Din model(cfg);
  model.to(dev);
  model.train();
  auto optim = make_optimizer(opt.optimizer, model.named_parameters(), opt.lr);
  const data::DinSyntheticConfig dcfg = din_data_config(cfg, opt);
  AIM_CHECK(dcfg.n_users <= cfg.n_uid && dcfg.n_items <= cfg.n_mid && dcfg.n_cates <= cfg.n_cat,
            "train_din: data vocabularies (", dcfg.n_users, " users, ", dcfg.n_items, " items, ",
            dcfg.n_cates, " categories) exceed the model's (", cfg.n_uid, ", ", cfg.n_mid, ", ",
            cfg.n_cat, ")");
  data::DinSynthetic gen(dcfg);
  const int64_t n_eval = std::min(opt.eval_samples, dcfg.heldout_size);
  AIM_CHECK(n_eval > 0, "train_din: eval_samples must be > 0");

  const std::string cfg_str = din_config_string(cfg);
  const std::map<std::string, std::string> meta = {{"model", "din"},
                                                   {"config", cfg_str},
                                                   {"optimizer", opt.optimizer},
                                                   {"data_seed", std::to_string(dcfg.seed)}};

  TrainResult r;
  int64_t step = 0;  // steps completed
  if (opt.resume) {
    const CheckpointInfo ci = load_checkpoint(opt.checkpoint_dir, model, *optim);
    const std::string path = checkpoint_path(opt.checkpoint_dir);
    for (const char* k : {"config", "optimizer", "data_seed"}) {
      auto it = ci.metadata.find(k);
      AIM_CHECK(it != ci.metadata.end() && it->second == meta.at(k), "checkpoint ", path, ": ", k,
                " '", it == ci.metadata.end() ? std::string("(missing)") : it->second,
                "' differs from this run's '", meta.at(k), "'");
    }
    step = ci.step;
    gen.seek(ci.data_position);
    log << "resumed from " << path << " at step " << step << " (data position " << ci.data_position
        << ")\n";
  }
  r.first_step = step;

  const int64_t log_every =
      opt.log_every > 0
          ? opt.log_every
          : (opt.eval_every > 0 ? opt.eval_every : std::max<int64_t>(1, opt.steps / 10));
  std::vector<double> step_ms;
  double train_s = 0, interval_loss = 0;
  int64_t interval_n = 0, interval_samples = 0;
  double interval_s = 0;

  while (step < opt.steps) {
    const auto t0 = Clock::now();
    const data::RecBatch b = gen.next(opt.batch_size).to(dev);
    autograd::Variable loss = models::Din::loss(model.forward(b), b.label);
    loss.backward();
    if (opt.clip_norm > 0) clip_grad_norm(optim->parameters(), opt.clip_norm);
    optim->step();
    optim->zero_grad();
    const double l = double(loss.data().to_vector<float>()[0]);  // synchronises the device
    const double dt = seconds_since(t0);
    ++step;
    AIM_CHECK(std::isfinite(l), "train_din: loss is ", l, " at step ", step, " (lr ", opt.lr,
              ", optimizer ", opt.optimizer, "); stopping");
    r.losses.push_back(l);
    step_ms.push_back(dt * 1e3);
    train_s += dt;
    interval_s += dt;
    interval_loss += l;
    ++interval_n;
    interval_samples += opt.batch_size;

    const bool eval_now = (opt.eval_every > 0 && step % opt.eval_every == 0) || step == opt.steps;
    double a = -1;
    if (eval_now) {
      a = heldout_auc(model, gen, n_eval, dev);
      r.aucs.emplace_back(step, a);
    }
    if (step % log_every == 0 || step == opt.steps) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "step %lld  loss %.5f  samples/s %.1f",
                    static_cast<long long>(step), interval_loss / double(interval_n),
                    double(interval_samples) / std::max(interval_s, 1e-12));
      log << buf;
      if (a >= 0) {
        std::snprintf(buf, sizeof buf, "  auc %.4f", a);
        log << buf;
      }
      log << "\n" << std::flush;
      interval_loss = 0;
      interval_n = 0;
      interval_samples = 0;
      interval_s = 0;
    }
    if (!opt.checkpoint_dir.empty() && opt.checkpoint_every > 0 &&
        step % opt.checkpoint_every == 0 && step < opt.steps)
      save_checkpoint(opt.checkpoint_dir, step, model, *optim, gen.position(), meta);
  }

  if (r.aucs.empty()) r.aucs.emplace_back(step, heldout_auc(model, gen, n_eval, dev));
  r.final_auc = r.aucs.back().second;
  if (!opt.checkpoint_dir.empty() && step > r.first_step)
    save_checkpoint(opt.checkpoint_dir, step, model, *optim, gen.position(), meta);

  r.steps_run = int64_t(r.losses.size());
  r.samples_per_s = train_s > 0 ? double(r.steps_run * opt.batch_size) / train_s : 0;
  r.step_p50_ms = percentile(step_ms, 50);
  r.step_p90_ms = percentile(step_ms, 90);
  r.step_p99_ms = percentile(step_ms, 99);
  r.wall_s = seconds_since(t_call);
  char buf[240];
  std::snprintf(buf, sizeof buf,
                "done: %lld steps, final auc %.4f (%lld held-out samples), %.1f samples/s, step "
                "p50 %.2f ms p90 %.2f ms p99 %.2f ms, %.1f s\n",
                static_cast<long long>(step), r.final_auc, static_cast<long long>(n_eval),
                r.samples_per_s, r.step_p50_ms, r.step_p90_ms, r.step_p99_ms, r.wall_s);
  log << buf << std::flush;
  return r;
}

}  // namespace aim::train
