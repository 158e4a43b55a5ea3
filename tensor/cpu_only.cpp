// The CPU-only build (AIM_CUDA=OFF): CUDA is reported unavailable with the reason.
#include <cstring>

#include "tensor/allocator.h"

namespace aim {

int cuda_device_count() { return 0; }
std::string cuda_unavailable_reason() { return "built without CUDA (AIM_CUDA=OFF)"; }
std::vector<std::pair<std::string, std::string>> cuda_environment() {
  return {{"cuda", "not built (AIM_CUDA=OFF)"}};
}
Allocator& cuda_allocator(int device) {
  AIM_FAIL("cuda:", device, " requested but aim was built without CUDA (AIM_CUDA=OFF)");
}
Allocator& pinned_host_allocator() {
  AIM_FAIL("pinned host memory requested but aim was built without CUDA (AIM_CUDA=OFF)");
}
StreamHandle current_stream(int) { return nullptr; }
void set_current_stream(int, StreamHandle) {}
void copy_bytes(void* dst, Device dst_dev, const void* src, Device src_dev, size_t n) {
  AIM_CHECK(dst_dev.is_cpu() && src_dev.is_cpu(), "copy between ", src_dev.str(), " and ",
            dst_dev.str(), " needs CUDA, but aim was built without CUDA (AIM_CUDA=OFF)");
  if (n) std::memcpy(dst, src, n);
}
void synchronize(Device) {}
DeviceSyncCounters device_sync_counters(Device) { return {}; }
DeviceGuard::DeviceGuard(Device d) {
  AIM_CHECK(!d.is_cuda(), d.str(), " requested but aim was built without CUDA (AIM_CUDA=OFF)");
}
DeviceGuard::~DeviceGuard() = default;
void set_current_device(Device d) {
  AIM_CHECK(!d.is_cuda(), d.str(), " requested but aim was built without CUDA (AIM_CUDA=OFF)");
}

namespace {
[[noreturn]] void no_cuda(const char* what) {
  AIM_FAIL(what, ": aim was built without CUDA (AIM_CUDA=OFF)");
}
}  // namespace
StreamHandle create_stream(int) { no_cuda("create_stream"); }
void destroy_stream(int, StreamHandle) { no_cuda("destroy_stream"); }
void begin_capture(int, StreamHandle) { no_cuda("CUDA graph capture"); }
GraphHandle end_capture(int, StreamHandle) { no_cuda("CUDA graph capture"); }
void launch_graph(GraphHandle, StreamHandle) { no_cuda("CUDA graph launch"); }
void destroy_graph(GraphHandle) { no_cuda("CUDA graph"); }
void synchronize_stream(int, StreamHandle) { no_cuda("synchronize_stream"); }
void stream_wait(int, StreamHandle, StreamHandle) { no_cuda("stream_wait"); }
int64_t captured_uploads() { return 0; }

}  // namespace aim
