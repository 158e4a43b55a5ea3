// The process-wide record of the cuDNN convolution algorithms chosen so far (kernels/cudnn_util.h).
// Built in every configuration (no cuDNN types here): in a CPU-only build nothing records and the
// summary is empty.
#include "kernels/cudnn_util.h"

#include <map>
#include <mutex>

namespace aim::kernels {
namespace {

std::mutex& record_mutex() {
  static std::mutex mu;
  return mu;
}
std::map<std::string, std::string>& record() {
  static std::map<std::string, std::string> r;
  return r;
}

}  // namespace

void record_cudnn_conv_algorithm(const std::string& key, const std::string& algorithm) {
  std::lock_guard<std::mutex> lock(record_mutex());
  record()[key] = algorithm;
}

std::string cudnn_conv_algorithms_summary() {
  std::lock_guard<std::mutex> lock(record_mutex());
  std::string s;
  for (const auto& [key, algorithm] : record()) s += key + " -> " + algorithm + "\n";
  return s;
}

}  // namespace aim::kernels
