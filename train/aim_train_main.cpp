// aim-train: trains a model on its synthetic data and reports held-out quality and speed.
//
//   aim-train din --device cpu --config size=tiny --steps 200 --batch-size 128
//   aim-train --list
//
// Exit status: 0 success, 1 runtime error (aim::Error, e.g. NaN loss), 2 bad usage.
#include <omp.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/registry.h"
#include "models/din.h"
#include "tensor/check.h"
#include "tensor/device.h"
#include "train/trainer.h"

namespace po = boost::program_options;

namespace {

struct Usage {
  std::string msg;
};

[[noreturn]] void usage_error(const std::string& m) { throw Usage{m}; }

std::string run_git(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return "";
  char buf[128] = {0};
  std::string s;
  if (fgets(buf, sizeof buf, p)) s = buf;
  const int rc = pclose(p);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return rc == 0 ? s : "";
}

// HEAD of the working directory's repository, else of the source tree this was built from.
std::string git_commit() {
  std::string s = run_git("git rev-parse HEAD 2>/dev/null");
  if (s.empty()) {
    std::string src = __FILE__;  // <root>/train/aim_train_main.cpp
    for (int i = 0; i < 2 && src.find('/') != std::string::npos; ++i)
      src = src.substr(0, src.find_last_of('/'));
    if (!src.empty() && src.find('\'') == std::string::npos)
      s = run_git("git -C '" + src + "' rev-parse HEAD 2>/dev/null");
  }
  return s.empty() ? "unknown" : s;
}

std::string shell_quote(const std::string& a) {
  if (!a.empty() && a.find_first_of(" \t\n'\"\\$`*?;&|<>()") == std::string::npos) return a;
  std::string q = "'";
  for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_name, device, optimizer, checkpoint_dir, results;
  std::vector<std::string> config;
  int64_t steps = 0, batch = 0, eval_every = 0, eval_samples = 0, checkpoint_every = 0;
  uint64_t seed = 1;
  double lr = 0, clip = 0;
  int threads = 0;

  po::options_description opts("aim-train MODEL [options]");
  // clang-format off
  opts.add_options()
    ("help,h", "show this help")
    ("list", "list the trainable models")
    ("device", po::value<std::string>(&device),
     "cpu | cuda | cuda:N (default: cuda when a GPU is present, else cpu)")
    ("steps", po::value<int64_t>(&steps)->default_value(1000), "training steps (> 0)")
    ("batch-size", po::value<int64_t>(&batch)->default_value(128), "samples per step (> 0)")
    ("lr", po::value<double>(&lr)->default_value(0.01), "learning rate (> 0)")
    ("optimizer", po::value<std::string>(&optimizer)->default_value("adam"),
     "sgd | adam | adamw | adagrad")
    ("seed", po::value<uint64_t>(&seed)->default_value(1), "model initialisation and data seed")
    ("eval-every", po::value<int64_t>(&eval_every)->default_value(100),
     "held-out AUC every N steps (0: only at the end)")
    ("eval-samples", po::value<int64_t>(&eval_samples)->default_value(10000),
     "held-out samples per evaluation (> 0)")
    ("config", po::value<std::vector<std::string>>(&config)->composing(),
     "key=value, repeatable: size=tiny|full, act=sigmoid|dice")
    ("checkpoint-dir", po::value<std::string>(&checkpoint_dir),
     "write <dir>/checkpoint.safetensors at the end (and every --checkpoint-every steps)")
    ("checkpoint-every", po::value<int64_t>(&checkpoint_every)->default_value(0),
     "also checkpoint every N steps (0: only at the end)")
    ("resume", "continue from <checkpoint-dir>/checkpoint.safetensors")
    ("clip-norm", po::value<double>(&clip)->default_value(0), "clip the gradient L2 norm (0: off)")
    ("threads", po::value<int>(&threads)->default_value(0), "OpenMP threads (0: default)")
    ("results", po::value<std::string>(&results), "append one JSON line of results to FILE");
  // clang-format on
  po::options_description hidden;
  hidden.add_options()("model", po::value<std::string>(&model_name));
  po::options_description all;
  all.add(opts).add(hidden);
  po::positional_options_description pos;
  pos.add("model", 1);

  try {
    po::variables_map vm;
    try {
      po::store(po::command_line_parser(argc, argv).options(all).positional(pos).run(), vm);
      po::notify(vm);
    } catch (const po::error& e) {
      usage_error(e.what());
    }
    if (vm.count("help")) {
      std::cout << opts << "\n";
      return 0;
    }
    if (vm.count("list")) {
      std::cout << "din  Deep Interest Network (MODELS.md \xC2\xA7"
                   "4.1), synthetic data\n";
      return 0;
    }
    if (model_name.empty()) usage_error("missing MODEL (allowed: din; see --list)");
    if (model_name != "din") usage_error("unknown model '" + model_name + "' (allowed: din)");
    if (steps <= 0) usage_error("--steps must be > 0, got " + std::to_string(steps));
    if (batch <= 0) usage_error("--batch-size must be > 0, got " + std::to_string(batch));
    if (!(lr > 0)) usage_error("--lr must be > 0, got " + std::to_string(lr));
    if (eval_every < 0) usage_error("--eval-every must be >= 0");
    if (eval_samples <= 0) usage_error("--eval-samples must be > 0");
    if (checkpoint_every < 0) usage_error("--checkpoint-every must be >= 0");
    if (clip < 0) usage_error("--clip-norm must be >= 0");
    if (threads < 0) usage_error("--threads must be >= 0");
    if (optimizer != "sgd" && optimizer != "adam" && optimizer != "adamw" && optimizer != "adagrad")
      usage_error("--optimizer '" + optimizer +
                  "' is not allowed (allowed: sgd, adam, adamw, adagrad)");
    if (device.empty()) device = aim::cuda_device_count() > 0 ? "cuda" : "cpu";
    aim::Device dev;
    try {
      dev = aim::parse_device(device);
    } catch (const aim::Error&) {
      usage_error("--device '" + device + "' is not allowed (allowed: cpu, cuda, cuda:N)");
    }
    if (dev.is_cuda() && dev.index >= aim::cuda_device_count())
      usage_error("--device " + device + ": " + std::to_string(aim::cuda_device_count()) +
                  " CUDA devices available" +
                  (aim::cuda_device_count() == 0 ? " (" + aim::cuda_unavailable_reason() + ")"
                                                 : std::string()));
    if (vm.count("resume") && checkpoint_dir.empty())
      usage_error("--resume needs --checkpoint-dir");

    aim::models::DinConfig cfg;
    std::string size = "full", act = "sigmoid";
    for (const std::string& kv : config) {
      const size_t eq = kv.find('=');
      if (eq == std::string::npos)
        usage_error("--config '" + kv + "': expected key=value (keys: size, act)");
      const std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
      if (k == "size") {
        if (v != "tiny" && v != "full")
          usage_error("--config size='" + v + "' is not allowed (allowed: tiny, full)");
        size = v;
      } else if (k == "act") {
        if (v != "sigmoid" && v != "dice")
          usage_error("--config act='" + v + "' is not allowed (allowed: sigmoid, dice)");
        act = v;
      } else {
        usage_error("--config key '" + k + "' is not known (allowed: size, act)");
      }
    }
    if (size == "tiny") cfg = aim::models::DinConfig::tiny();
    cfg.act = act;
    if (threads > 0) omp_set_num_threads(threads);

    aim::train::TrainOptions to;
    to.steps = steps;
    to.batch_size = batch;
    to.lr = lr;
    to.optimizer = optimizer;
    to.seed = seed;
    to.eval_every = eval_every;
    to.eval_samples = eval_samples;
    to.checkpoint_dir = checkpoint_dir;
    to.checkpoint_every = checkpoint_every;
    to.resume = vm.count("resume") > 0;
    to.device = dev.str();
    to.clip_norm = clip;

    std::cout << "aim-train din (" << size << ", act " << act << ") on " << dev.str() << ": steps "
              << steps << ", batch " << batch << ", " << optimizer << " lr " << lr << ", seed "
              << seed << "\n";
    const aim::train::TrainResult r = aim::train::train_din(cfg, to, std::cout);

    if (!results.empty()) {
      nlohmann::json j;
      j["model"] = "din";
      j["mode"] = "train";
      j["device"] = dev.str();
      j["config"] = {{"size", size}, {"act", act},     {"optimizer", optimizer},
                     {"lr", lr},     {"steps", steps}, {"seed", seed}};
      j["batch"] = batch;
      j["throughput"] = r.samples_per_s;
      j["throughput_unit"] = "samples/s";
      j["step_time_ms"] = {{"p50", r.step_p50_ms}, {"p90", r.step_p90_ms}, {"p99", r.step_p99_ms}};
      j["metrics"] = {{"auc", r.final_auc},
                      {"final_loss", r.losses.empty() ? 0.0 : r.losses.back()}};
      nlohmann::json used = nlohmann::json::object();
      for (const auto& [name, calls] : aim::kernels::registry().variants_used()) used[name] = calls;
      j["variants_used"] = used;
      nlohmann::json subs = nlohmann::json::array();
      for (const auto& s : aim::kernels::substitutions())
        subs.push_back(
            {{"op", s.op}, {"wanted", s.wanted}, {"used", s.used}, {"reason", s.reason}});
      j["substitutions"] = subs;
      j["git_commit"] = git_commit();
      std::string cmd;
      for (int i = 0; i < argc; ++i) cmd += (i ? " " : "") + shell_quote(argv[i]);
      j["command"] = cmd;
      std::ofstream f(results, std::ios::app);
      if (!f) {
        std::cerr << "aim-train: cannot open --results file " << results << "\n";
        return 1;
      }
      f << j.dump() << "\n";
    }
    return 0;
  } catch (const Usage& u) {
    std::cerr << "aim-train: " << u.msg << "\n(see aim-train --help)\n";
    return 2;
  } catch (const aim::Error& e) {
    std::cerr << "aim-train: error: " << e.what() << "\n";
    return 1;
  }
}
