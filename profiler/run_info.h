// What a results line records about the run besides its figures (DESIGN §7): the machine (CPU,
// cores, threads, GPUs), library versions (compiler, OpenBLAS, CUDA, cuDNN, NCCL), the git commit
// and the command line, so a number can be traced to what produced it.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace aim::profiler {

// {"cpu", "cores", "omp_threads", "compiler", "build", "blas", "tf32", "env", "cuda": {...},
// "host", "time"}
nlohmann::json environment_json();
// HEAD of the working directory's git repository, else of the source tree aim was built from,
// else "unknown".
std::string git_commit();
// argv joined with shell quoting where needed.
std::string command_line(int argc, char** argv);
// Writes `text` to `path` through `path`.tmp and a rename, so readers never see half a file;
// errors name `what` (the flag) and the file.
void write_text_atomic(const std::string& path, const std::string& text, const std::string& what);
// Nearest-rank percentile (p in [0, 100]) of an unsorted sample; 0 for an empty one.
double percentile(std::vector<double> v, double p);
// The process's peak resident set in bytes (getrusage's ru_maxrss), as another framework's run
// would report it.
int64_t max_rss_bytes();

}  // namespace aim::profiler
