// Devices: "cpu" and "cuda:N".
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "tensor/check.h"

namespace aim {

enum class DeviceType : uint8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;
  constexpr Device() = default;
  constexpr Device(DeviceType t, int i = 0) : type(t), index(i) {}
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
};

constexpr Device kCPU{DeviceType::CPU, 0};
inline Device cuda_device(int i = 0) { return Device(DeviceType::CUDA, i); }

inline Device parse_device(const std::string& s) {
  if (s == "cpu") return kCPU;
  if (s == "cuda") return cuda_device(0);
  if (s.rfind("cuda:", 0) == 0) {
    const std::string n = s.substr(5);
    if (!n.empty() && n.find_first_not_of("0123456789") == std::string::npos)
      return cuda_device(std::stoi(n));
  }
  AIM_FAIL("unknown device '", s, "' (expected cpu, cuda or cuda:N)");
}

// Number of CUDA devices usable now (0 when built without CUDA or no driver/GPU).
int cuda_device_count();
// Why CUDA is unavailable ("" when it is available): shown in skip reasons.
std::string cuda_unavailable_reason();
// The CUDA side of the environment for results files: "gpu0" (name, memory, SM count),
// "driver", "cuda_runtime", "cublas", "cudnn", "nccl" versions; {"cuda": "not built"} without
// CUDA, and the unavailability reason when there is no usable GPU.
std::vector<std::pair<std::string, std::string>> cuda_environment();

// Makes `d` the calling thread's current CUDA device for a scope, and restores the previous one
// (kernels launch on the current device, which must be their tensors'). A CPU device: nothing.
class DeviceGuard {
 public:
  explicit DeviceGuard(Device d);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  bool changed_ = false;
};
// Sets the calling thread's current CUDA device (a rank thread's GPU); nothing for the CPU.
void set_current_device(Device d);

}  // namespace aim
