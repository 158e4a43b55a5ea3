#include "cli/common.h"

#include <omp.h>

#include <fstream>
#include <iostream>

#include "kernels/cudnn_util.h"
#include "kernels/math_mode.h"
#include "kernels/registry.h"
#include "models/registry.h"
#include "profiler/run_info.h"
#include "tensor/check.h"

namespace aim::cli {

Device resolve_device(const std::string& value) {
  const std::string v = value.empty() ? (cuda_device_count() > 0 ? "cuda" : "cpu") : value;
  Device d;
  try {
    d = parse_device(v);
  } catch (const Error&) {
    throw UsageError("--device '" + v + "' is not allowed (allowed: cpu, cuda, cuda:N)");
  }
  if (d.is_cuda() && d.index >= cuda_device_count())
    throw UsageError(
        "--device " + v + ": " + std::to_string(cuda_device_count()) + " CUDA devices available" +
        (cuda_device_count() == 0 ? " (" + cuda_unavailable_reason() + ")" : std::string()));
  return d;
}

std::vector<int64_t> parse_int_list(const std::string& flag, const std::string& value,
                                    int64_t min) {
  std::vector<int64_t> r;
  size_t start = 0;
  while (start <= value.size()) {
    const size_t comma = value.find(',', start);
    const std::string item =
        value.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t used = 0;
    int64_t n = 0;
    try {
      n = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || n < min)
      throw UsageError(
          flag + " '" + value + "': '" + item + "' is not " +
          (min == 1 ? std::string("a positive integer") : "an integer >= " + std::to_string(min)) +
          " (expected N or N,N,...)");
    r.push_back(n);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return r;
}

void print_models(std::ostream& os) {
  for (const models::ModelEntry& e : models::model_registry()) {
    os << e.name << "  [" << e.task << "] " << e.description << "\n";
    for (const models::ConfigKey& k : e.config) {
      os << "    --config " << k.key << "=";
      for (size_t i = 0; i < k.allowed.size(); ++i) os << (i ? "|" : "") << k.allowed[i];
      os << "  (default " << k.default_value << ") " << k.doc << "\n";
    }
    os << "    --data synthetic (default) | " << e.data_doc << "\n    metrics:";
    for (const std::string& m : e.metrics) os << " " << m;
    os << "\n";
    if (!e.train_defaults.empty()) {
      os << "    aim-train recipe (unless given):";
      for (const std::string& f : e.train_defaults) os << " " << f;
      os << "\n";
    }
    for (const models::ModelOptimizer& o : e.optimizers)
      os << "    --optimizer " << o.name << ": " << o.doc << " (rates at --lr " << o.ref_lr
         << ")\n";
  }
}

void append_results(const std::string& path, const nlohmann::json& line) {
  std::ofstream f(path, std::ios::app);
  AIM_CHECK(f.good(), "--results: cannot open ", path, " for appending");
  f << line.dump() << "\n";
  f.flush();
  AIM_CHECK(f.good(), "--results: writing ", path, " failed");
}

std::map<std::string, int64_t> variant_counts() {
  std::map<std::string, int64_t> m;
  for (const auto& [name, calls] : kernels::registry().variants_used()) m[name] = calls;
  return m;
}

nlohmann::json variants_since(const std::map<std::string, int64_t>& before) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, calls] : variant_counts()) {
    auto it = before.find(name);
    const int64_t d = calls - (it == before.end() ? 0 : it->second);
    if (d > 0) j[name] = d;
  }
  return j;
}

nlohmann::json substitutions_json() {
  nlohmann::json subs = nlohmann::json::array();
  for (const auto& s : kernels::substitutions())
    subs.push_back({{"op", s.op}, {"wanted", s.wanted}, {"used", s.used}, {"reason", s.reason}});
  return subs;
}

void set_tf32(const std::string& value) {
  kernels::Tf32 t;
  if (!kernels::parse_tf32(value, t))
    throw UsageError("--tf32 '" + value + "' is not allowed (allowed: on, off, conv, matmul)");
  kernels::set_tf32(t);
}

void set_denormals(const std::string& value) {
  if (value != "flush" && value != "keep")
    throw UsageError("--denormals '" + value + "' is not allowed (allowed: flush, keep)");
  kernels::set_flush_denormals(value == "flush");
}

void set_threads(int threads) {
  if (threads < 0)
    throw UsageError("--threads must be >= 0 (0: default), got " + std::to_string(threads));
  if (threads > 0) omp_set_num_threads(threads);
}

void add_run_fields(nlohmann::json& j, const std::map<std::string, int64_t>& before, int argc,
                    char** argv) {
  j["variants_used"] = variants_since(before);
  if (const std::string algos = kernels::cudnn_conv_algorithms_summary(); !algos.empty())
    j["cudnn_conv_algorithms"] = algos;
  j["substitutions"] = substitutions_json();
  j["tf32"] = kernels::tf32_name(kernels::tf32());
  j["denormals"] = kernels::flush_denormals() ? "flush" : "keep";
  j["env"] = profiler::environment_json();
  j["git_commit"] = profiler::git_commit();
  j["command"] = profiler::command_line(argc, argv);
}

int run_cli(const char* prog, const std::function<int()>& body) {
  try {
    return body();
  } catch (const UsageError& u) {
    std::cerr << prog << ": " << u.what() << "\n(see " << prog << " --help)\n";
    return 2;
  } catch (const Error& e) {
    std::cerr << prog << ": error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace aim::cli
