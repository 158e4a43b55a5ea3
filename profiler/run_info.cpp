#include "profiler/run_info.h"

#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <thread>

#include "kernels/math_mode.h"
#include "tensor/check.h"
#include "tensor/device.h"

#ifdef AIM_HAVE_OPENBLAS
extern "C" char* openblas_get_config();
extern "C" char* openblas_get_corename();
#endif

namespace aim::profiler {
namespace {

std::string run_first_line(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return "";
  char buf[256] = {0};
  std::string s;
  if (fgets(buf, sizeof buf, p)) s = buf;
  const int rc = pclose(p);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return rc == 0 ? s : "";
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos)
      return line.substr(line.find(':') + 2);
  return "unknown";
}

}  // namespace

nlohmann::json environment_json() {
  nlohmann::json e;
  e["cpu"] = cpu_model();
  e["cores"] = std::thread::hardware_concurrency();
  e["omp_threads"] = omp_get_max_threads();
  e["compiler"] = __VERSION__;
#ifdef AIM_BUILD_TYPE
  e["build"] = AIM_BUILD_TYPE;  // CMAKE_BUILD_TYPE
#else
  e["build"] = "unknown";
#endif
#ifdef AIM_HAVE_OPENBLAS
  e["blas"] = std::string(openblas_get_config()) + " (core " + openblas_get_corename() + ")";
#else
  e["blas"] = "none";
#endif
  e["tf32"] = kernels::tf32_name(kernels::tf32());  // --tf32: where fp32 vendor calls may use TF32
  // --winograd: the largest Winograd tile of the CPU's fp32 3x3 convolutions (0: off)
  e["winograd"] = kernels::winograd_tile();
  for (const char* v : {"OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OMP_NUM_THREADS", "AIM_KERNELS"})
    if (const char* s = std::getenv(v)) e["env"][v] = s;
  nlohmann::json cuda = nlohmann::json::object();
  for (const auto& [k, v] : cuda_environment()) cuda[k] = v;
  e["cuda"] = cuda;
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) == 0) e["host"] = host;
  const std::time_t now = std::time(nullptr);
  char t[32];
  std::strftime(t, sizeof t, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  e["time"] = t;
  return e;
}

std::string git_commit() {
  std::string s = run_first_line("git rev-parse HEAD 2>/dev/null");
  if (s.empty()) {
    std::string src = __FILE__;  // <root>/profiler/run_info.cpp
    for (int i = 0; i < 2 && src.find('/') != std::string::npos; ++i)
      src = src.substr(0, src.find_last_of('/'));
    if (!src.empty() && src.find('\'') == std::string::npos)
      s = run_first_line("git -C '" + src + "' rev-parse HEAD 2>/dev/null");
  }
  return s.empty() ? "unknown" : s;
}

std::string command_line(int argc, char** argv) {
  std::string cmd;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    std::string q = a;
    if (a.empty() || a.find_first_of(" \t\n'\"\\$`*?;&|<>()") != std::string::npos) {
      q = "'";
      for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
      q += "'";
    }
    cmd += (i ? " " : "") + q;
  }
  return cmd;
}

void write_text_atomic(const std::string& path, const std::string& text, const std::string& what) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    AIM_CHECK(f.good(), what, ": cannot write ", tmp);
    f << text;
    AIM_CHECK(f.good(), what, ": writing ", tmp, " failed");
  }
  AIM_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, what, ": cannot rename ", tmp, " to ",
            path);
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t k = size_t(std::ceil(p / 100.0 * double(v.size())));
  return v[std::min(v.size() - 1, k == 0 ? 0 : k - 1)];
}

int64_t max_rss_bytes() {
  struct rusage u {};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  return int64_t(u.ru_maxrss) * 1024;  // KiB on Linux
}

}  // namespace aim::profiler
