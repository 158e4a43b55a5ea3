// Device error records (error_flag.h): one lazily allocated i64 [8] tensor per device, kept for
// the process's lifetime (never freed: kernels and CUDA graphs may hold its address).
#include "kernels/error_flag.h"

#include <map>
#include <mutex>
#include <utility>

#include "tensor/allocator.h"
#include "tensor/check.h"

namespace aim::kernels {
namespace {

std::mutex g_mu;
// Leaked on purpose: the records outlive every static destructor that might still run kernels.
std::map<std::pair<int, int>, Tensor>& records() {
  static auto* m = new std::map<std::pair<int, int>, Tensor>();
  return *m;
}

std::pair<int, int> key(Device d) { return {int(d.type), d.index}; }

Tensor record_tensor(Device d, bool create) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto& m = records();
  auto it = m.find(key(d));
  if (it != m.end()) return it->second;
  if (!create) return Tensor();
  Tensor t = Tensor::zeros({kDeviceErrorWords}, DType::i64, d);  // a fill on the current stream
  m[key(d)] = t;
  return t;
}

}  // namespace

const char* device_error_op_name(DeviceErrorOp op) {
  switch (op) {
    case DeviceErrorOp::none:
      return "none";
    case DeviceErrorOp::embedding_fwd:
      return "embedding_fwd";
    case DeviceErrorOp::embedding_bwd:
      return "embedding_bwd";
    case DeviceErrorOp::cross_entropy_fwd:
      return "cross_entropy_fwd";
    case DeviceErrorOp::cross_entropy_bwd:
      return "cross_entropy_bwd";
    case DeviceErrorOp::ctc_fwd:
      return "ctc_fwd";
    case DeviceErrorOp::ctc_bwd:
      return "ctc_bwd";
    case DeviceErrorOp::index_select:
      return "index_select";
    case DeviceErrorOp::index_add:
      return "index_add";
    case DeviceErrorOp::gather:
      return "gather";
    case DeviceErrorOp::scatter_add:
      return "scatter_add";
    case DeviceErrorOp::one_hot:
      return "one_hot";
    case DeviceErrorOp::embedding_bag_offsets:
      return "embedding_bag";
  }
  return "unknown op";
}

DeviceErrorRecord* device_error_record(Device d) {
  return static_cast<DeviceErrorRecord*>(record_tensor(d, true).raw_data());
}

Tensor device_error_words(Device d) { return record_tensor(d, true); }

std::string device_error_message(const int64_t* w, Device d) {
  if (w[0] == 0) return "";
  const auto op = DeviceErrorOp(w[0]);
  const char* name = device_error_op_name(op);
  const int64_t pos = w[1], sample = w[2], value = w[3], bound = w[4], extra = w[5];
  std::string m;
  switch (op) {
    case DeviceErrorOp::embedding_fwd:
    case DeviceErrorOp::embedding_bwd:
      m = str("[", name, "] index ", value, " at position ", pos,
              " is out of range for V = ", bound);
      break;
    case DeviceErrorOp::cross_entropy_fwd:
    case DeviceErrorOp::cross_entropy_bwd:
      m = str("[", name, "] target ", value, " at position ", pos,
              " is out of range for V = ", bound, " (expected 0 <= target < ", bound,
              " or ignore_index = ", extra, ")");
      break;
    case DeviceErrorOp::ctc_fwd:
    case DeviceErrorOp::ctc_bwd:
      m = str("[", name, "] target ", value, " of sample ", sample, " at position ", pos,
              " is not a label: expected 0 <= target < C = ", bound,
              " and target != blank = ", extra);
      break;
    case DeviceErrorOp::embedding_bag_offsets:
      m = str("[", name, "] offsets must start at 0, never decrease and stay <= N = ", bound,
              ", got offsets[", pos, "] = ", value, " after ", extra);
      break;
    default:
      m = str("[", name, "] index ", value, " at position ", pos, " out of range [0, ", bound, ")");
  }
  return str(m, " (flagged on ", d.str(), "; ", w[6], w[6] == 1 ? " flag" : " flags",
             " since the last check)");
}

void throw_device_error(const int64_t* words, Device d) {
  if (words[0] == 0) return;
  const std::string m = device_error_message(words, d);
  Tensor t = record_tensor(d, false);
  if (t.defined()) t.fill_(0);  // reset: the next check reports only new errors
  throw Error(m);
}

void check_device_errors(Device d) {
  Tensor t = record_tensor(d, false);
  if (!t.defined()) return;
  int64_t w[kDeviceErrorWords] = {};
  copy_bytes(w, kCPU, t.raw_data(), d, sizeof(w));
  throw_device_error(w, d);
}

}  // namespace aim::kernels
