#include "cli/common.h"

#include <fcntl.h>
#include <omp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <new>
#include <regex>
#include <thread>

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
    if (!e.infer_defaults.empty()) {
      os << "    aim-infer defaults (unless given):";
      for (const std::string& f : e.infer_defaults) os << " " << f;
      os << "\n";
    }
    for (const models::ModelOptimizer& o : e.optimizers)
      os << "    --optimizer " << o.name << ": " << o.doc << " (rates at --lr " << o.ref_lr
         << ")\n";
  }
}

void append_results(const std::string& path, const nlohmann::json& line) {
  const std::string text = line.dump() + "\n";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  AIM_CHECK(fd >= 0, "--results: cannot open ", path, " for appending: ", std::strerror(errno));
  struct stat st {};
  const off_t before = ::fstat(fd, &st) == 0 ? st.st_size : -1;
  const ssize_t n = ::write(fd, text.data(), text.size());
  const int err = errno;
  if (n != ssize_t(text.size())) {
    // A partial line would make every later line of the file unreadable: cut it off again.
    const bool restored = before >= 0 && ::ftruncate(fd, before) == 0;
    ::close(fd);
    AIM_FAIL("--results: writing ", path, " failed (", n < 0 ? std::strerror(err) : "short write",
             ")", restored ? "; the file is as it was before this run" : "");
  }
  const bool synced = ::fsync(fd) == 0 || errno == EINVAL;
  const int close_rc = ::close(fd);
  AIM_CHECK(synced && close_rc == 0, "--results: writing ", path,
            " failed: ", std::strerror(errno));
}

uint64_t parse_u64(const std::string& flag, const std::string& value) {
  const bool digits = !value.empty() && value.size() <= 20 &&
                      value.find_first_not_of("0123456789") == std::string::npos;
  errno = 0;
  const unsigned long long v = digits ? std::strtoull(value.c_str(), nullptr, 10) : 0;
  if (!digits || errno == ERANGE)
    throw UsageError(flag + " '" + value + "' is not an integer in [0, 2^64 - 1]");
  return uint64_t(v);
}

void set_kernels(const std::string& spec, bool given, bool fallback) {
  const char* env = std::getenv("AIM_KERNELS");
  const char* env_fb = std::getenv("AIM_KERNELS_FALLBACK");
  if (!given && !fallback) return;    // AIM_KERNELS alone is read by the registry itself
  (void)kernels::kernel_selection();  // reads AIM_KERNELS once now, so it cannot override later
  try {
    kernels::set_kernel_selection(given ? spec : (env ? env : ""),
                                  fallback || (env_fb && env_fb[0] == '1'));
  } catch (const Error& e) {
    std::string what = e.what();
    const size_t cut = what.find(" [check:");
    throw UsageError((given ? "" : "AIM_KERNELS: ") + what.substr(0, cut) +
                     " (allowed: own, vendor, default, or op=variant,...)");
  }
}

void check_output_file(const std::string& flag, const std::string& path) {
  if (path.empty()) return;
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw UsageError(flag + " " + path + ": is a directory, expected a file name");
  const fs::path parent =
      fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path();
  if (!fs::is_directory(parent, ec))
    throw UsageError(flag + " " + path + ": the directory " + parent.string() +
                     " does not exist (checked before the run starts)");
  if (::access(parent.c_str(), W_OK) != 0)
    throw UsageError(flag + " " + path + ": the directory " + parent.string() +
                     " is not writable (" + std::strerror(errno) + ")");
  if (fs::exists(path, ec) && ::access(path.c_str(), W_OK) != 0)
    throw UsageError(flag + " " + path + ": not writable (" + std::strerror(errno) + ")");
}

void prepare_output_dir(const std::string& flag, const std::string& dir) {
  if (dir.empty()) return;
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw UsageError(flag + " " + dir + ": exists and is not a directory");
  fs::create_directories(dir, ec);
  if (ec)
    throw UsageError(flag + " " + dir + ": cannot create the directory (" + ec.message() + ")");
  if (::access(dir.c_str(), W_OK) != 0)
    throw UsageError(flag + " " + dir + ": not writable (" + std::strerror(errno) + ")");
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

void set_winograd(const std::string& value) {
  if (value != "4" && value != "2" && value != "off")
    throw UsageError("--winograd '" + value + "' is not allowed (allowed: 4, 2, off)");
  kernels::set_winograd_tile(value == "off" ? 0 : std::stoi(value));
}

void set_denormals(const std::string& value) {
  if (value != "flush" && value != "keep")
    throw UsageError("--denormals '" + value + "' is not allowed (allowed: flush, keep)");
  kernels::set_flush_denormals(value == "flush");
}

void set_deterministic(bool on) {
  kernels::set_deterministic(on);
  if (!on) return;
  std::string swaps;
  for (const auto& n : kernels::nondeterministic_variants())
    if (!n.alternative.empty())
      swaps += (swaps.empty() ? "" : ", ") + n.op + " " + n.variant + " -> " + n.alternative;
  std::cout << "deterministic: on (" << (swaps.empty() ? "no variant to replace" : swaps)
            << "; cuDNN: deterministic algorithms only)\n";
}

void set_threads(int threads) {
  if (threads < 0)
    throw UsageError("--threads must be >= 0 (0: default), got " + std::to_string(threads));
  if (threads > 0) omp_set_num_threads(threads);
  const unsigned cores = std::thread::hardware_concurrency();
  if (cores > 0 && threads > int(cores))
    std::cerr << "warning: --threads " << threads << " is more than this machine's " << cores
              << " hardware threads: the extra threads share cores and usually slow the run\n";
}

void add_run_fields(nlohmann::json& j, const std::map<std::string, int64_t>& before, int argc,
                    char** argv) {
  j["variants_used"] = variants_since(before);
  if (const std::string algos = kernels::cudnn_conv_algorithms_summary(); !algos.empty())
    j["cudnn_conv_algorithms"] = algos;
  j["substitutions"] = substitutions_json();
  j["tf32"] = kernels::tf32_name(kernels::tf32());
  j["winograd"] =
      kernels::winograd_tile() == 0 ? std::string("off") : std::to_string(kernels::winograd_tile());
  j["denormals"] = kernels::flush_denormals() ? "flush" : "keep";
  j["deterministic"] = kernels::deterministic();
  if (kernels::deterministic()) {
    nlohmann::json ran = nlohmann::json::array();
    for (const auto& n : kernels::nondeterministic_ran())
      ran.push_back({{"op", n.op}, {"variant", n.variant}, {"why", n.why}});
    j["nondeterministic_ran"] = ran;
  }
  j["env"] = profiler::environment_json();
  j["git_commit"] = profiler::git_commit();
  j["command"] = profiler::command_line(argc, argv);
}

namespace {

// An aim::Error's text for a user: the checked expression and the source position are for
// developers (AIM_DEBUG=1 keeps them).
std::string user_message(const std::string& what) {
  const char* debug = std::getenv("AIM_DEBUG");
  if (debug && debug[0] && debug[0] != '0') return what;
  static const std::regex internal(
      R"( \[check: .*?\](?= \(|$)| \([A-Za-z0-9_./+-]+\.(cpp|cu|h|cuh):[0-9]+\))");
  return std::regex_replace(what, internal, "");
}

}  // namespace

int run_cli(const char* prog, const std::function<int()>& body) {
  try {
    return body();
  } catch (const UsageError& u) {
    std::cerr << prog << ": " << u.what() << "\n(see " << prog << " --help)\n";
    return 2;
  } catch (const Error& e) {
    std::cerr << prog << ": error: " << user_message(e.what()) << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << prog << ": error: out of host memory (an allocation failed); a smaller "
              << "--batch-size, --eval-samples or --config size= shrinks the run\n";
    return 1;
  }
}

}  // namespace aim::cli
