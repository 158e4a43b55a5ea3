// The emulated CUDA device (AIM_CUDA_EMULATOR build, kernels/simt/device): what it checks and
// counts, and the defects it was built to catch. Each check would have failed on the code before
// issue 18 (noted per test).
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <thread>

#include "autograd/functions/embedding.h"
#include "kernels/copy/copy.h"
#include "kernels/error_flag.h"
#include "kernels/registry.h"
#include "kernels/simt/device/device.h"
#include "tensor/allocator.h"
#include "tensor/asan.h"
#include "tensor/tensor.h"
#include "tests/support/common.h"
#include "train/dist/nccl_backend.h"

namespace aim {
namespace {

using testing::error_of;

TEST(EmulatedDevice, HasDevices) {
  ASSERT_GE(cuda_device_count(), 2) << "AIM_SIM_GPUS must be >= 2 for these tests";
  cudaDeviceProp p{};
  ASSERT_EQ(cudaGetDeviceProperties(&p, 0), cudaSuccess);
  EXPECT_EQ(p.major, 9);
}

// A kernel launched with tensors of cuda:1 while the thread's current device is cuda:0 (what
// every --gpus rank thread did): the emulator refuses it, naming the kernel and the argument.
TEST(EmulatedDevice, KernelPointerOfAnotherDeviceIsAnError) {
  set_current_device(cuda_device(0));
  Tensor t = Tensor::empty({64}, DType::f32, cuda_device(1));
  auto& op = kernels::registry().op<kernels::FillArgs>("fill");
  const kernels::Variant<kernels::FillArgs>* v = nullptr;
  for (const auto& e : op.variants())
    if (e.backend == kernels::Backend::CUDA) v = &e;
  ASSERT_NE(v, nullptr);
  const std::string msg = error_of([&] { v->run({t, 1.0}); });
  EXPECT_NE(msg.find("is not memory of the current device cuda:0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(cuda:1"), std::string::npos) << msg;
}

// Through the dispatcher the device of the tensors is made current (the fix).
TEST(EmulatedDevice, DispatchSelectsTheTensorsDevice) {
  set_current_device(cuda_device(0));
  Tensor t = Tensor::zeros({33}, DType::f32, cuda_device(3));
  t.fill_(2.5);
  const std::vector<float> v = t.to(kCPU).to_vector<float>();
  for (float x : v) EXPECT_EQ(x, 2.5f);
  int cur = -1;
  cudaGetDevice(&cur);
  EXPECT_EQ(cur, 0) << "the guard restores the caller's device";
}

TEST(EmulatedDevice, HostPointerInAKernelIsAnError) {
  set_current_device(cuda_device(0));
  std::vector<float> host(16);
  const std::string msg =
      error_of([&] { simt::device::check_kernel_pointer(host.data(), "some_kernel", 2); });
  EXPECT_NE(msg.find("pageable host memory"), std::string::npos) << msg;
}

TEST(EmulatedDevice, CopyKindsAreChecked) {
  set_current_device(cuda_device(0));
  void* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 64), cudaSuccess);
  std::vector<char> h(64);
  // A host pointer named as device memory, and a copy past the end of a block.
  EXPECT_EQ(cudaMemcpy(h.data(), h.data(), 8, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_NE(std::string(cudaGetErrorString(cudaErrorInvalidValue)).find("is not device memory"),
            std::string::npos);
  EXPECT_EQ(cudaMemcpy(d, h.data(), 128, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(d, h.data(), 64, cudaMemcpyHostToDevice), cudaSuccess);
  cudaGetLastError();
  cudaFree(d);
}

// Copies to the device and on the device no longer wait; a read back to the host does, once.
TEST(EmulatedDevice, OnlyDeviceToHostCopiesSynchronise) {
  set_current_device(cuda_device(0));
  const Device d = cuda_device(0);
  Tensor a = Tensor::from_vector<float>({1, 2, 3, 4}, {4}, d);  // host to device
  Tensor b = a.clone();                                         // device to device
  const DeviceSyncCounters c0 = device_sync_counters(d);
  Tensor c = Tensor::from_vector<float>({5, 6}, {2}, d);
  Tensor e = b.clone();
  const DeviceSyncCounters c1 = device_sync_counters(d);
  EXPECT_EQ(c1.host_syncs - c0.host_syncs, 0);
  EXPECT_EQ(e.to(kCPU).to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  const DeviceSyncCounters c2 = device_sync_counters(d);
  EXPECT_EQ(c2.host_syncs - c1.host_syncs, 1);
  EXPECT_EQ(c2.d2h_bytes - c1.d2h_bytes, 16);
}

// A synchronising read-back inside a capture invalidates it (what DIN's --cuda-graph did), and
// end_capture names the call.
TEST(EmulatedDevice, SynchronisingInsideACaptureFailsTheCapture) {
  set_current_device(cuda_device(0));
  const Device d = cuda_device(0);
  Tensor a = Tensor::from_vector<float>({1, 2, 3}, {3}, d);
  StreamHandle s = create_stream(0);
  const StreamHandle prev = current_stream(0);
  set_current_stream(0, s);
  begin_capture(0, s);
  Tensor b = a.clone();
  const std::string in_capture = error_of([&] { (void)b.to(kCPU); });
  EXPECT_NE(in_capture.find("capture"), std::string::npos) << in_capture;
  const std::string end = error_of([&] { (void)end_capture(0, s); });
  EXPECT_NE(end.find("invalidated by cudaMemcpyAsync device-to-host"), std::string::npos) << end;
  set_current_stream(0, prev);
  destroy_stream(0, s);
}

// A legal capture records the kernels and replays them on the same buffers.
TEST(EmulatedDevice, CapturedWorkReplays) {
  set_current_device(cuda_device(0));
  const Device d = cuda_device(0);
  Tensor a = Tensor::from_vector<float>({1, 2, 3}, {3}, d);
  Tensor b = Tensor::zeros({3}, DType::f32, d);
  StreamHandle s = create_stream(0);
  const StreamHandle prev = current_stream(0);
  set_current_stream(0, s);
  begin_capture(0, s);
  b.copy_(a);
  GraphHandle g = end_capture(0, s);
  EXPECT_EQ(b.to(kCPU).to_vector<float>(), (std::vector<float>{0, 0, 0})) << "captured, not run";
  a.copy_(Tensor::from_vector<float>({7, 8, 9}, {3}));
  launch_graph(g, s);
  synchronize_stream(0, s);
  EXPECT_EQ(b.to(kCPU).to_vector<float>(), (std::vector<float>{7, 8, 9}));
  destroy_graph(g);
  set_current_stream(0, prev);
  destroy_stream(0, s);
}

// Loader batches in pinned memory (Tensor::pin_memory, the pinned caching allocator): the
// emulated runtime sees page-locked memory, an upload from it does not synchronise, and a freed
// block is served again from the cache once its copy has run. (The emulator runs a copy when it
// is queued, so the allocator's wait for a copy still queued is exercised on a GPU only.)
TEST(EmulatedDevice, PinnedBatchesUploadWithoutSyncAndAreCached) {
  set_current_device(cuda_device(0));
  const Device d = cuda_device(0);
  Tensor dst = Tensor::zeros({1024}, DType::f32, d);
  const void* first = nullptr;
  {
    Tensor src = Tensor::full({1024}, 1.0, DType::f32).pin_memory();
    ASSERT_TRUE(src.is_pinned());
    EXPECT_EQ(src.pin_memory().raw_data(), src.raw_data()) << "pinned already: no copy";
    first = src.raw_data();
    cudaPointerAttributes attr{};
    ASSERT_EQ(cudaPointerGetAttributes(&attr, first), cudaSuccess);
    EXPECT_EQ(attr.type, cudaMemoryTypeHost) << "page-locked, not pageable";
    const DeviceSyncCounters c0 = device_sync_counters(d);
    dst.copy_(src);
    EXPECT_EQ(device_sync_counters(d).host_syncs, c0.host_syncs);
  }
  EXPECT_EQ(dst.to(kCPU).to_vector<float>(), std::vector<float>(1024, 1.0f));
  const AllocatorStats s0 = pinned_host_allocator().stats();
  Tensor again = Tensor::full({1024}, 4.0, DType::f32).pin_memory();
  EXPECT_EQ(again.raw_data(), first);
  EXPECT_EQ(pinned_host_allocator().stats().cache_hits, s0.cache_hits + 1);
}

// NCCL over emulated devices: one rank thread per device, each on its own stream.
TEST(EmulatedDevice, NcclAllReduceOverRankThreads) {
  const int n = 4;
  std::vector<int> devs = {0, 1, 2, 3};
  auto comms = dist::make_nccl_communicators(devs, dist::Options{});
  std::vector<std::thread> threads;
  std::vector<std::vector<float>> got(n);
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      set_current_device(cuda_device(r));
      Tensor t = Tensor::from_vector<float>({float(r), 1.0f}, {2}, cuda_device(r));
      comms[size_t(r)]->all_reduce(t, dist::ReduceOp::Sum);
      got[size_t(r)] = t.to(kCPU).to_vector<float>();
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(got[size_t(r)], (std::vector<float>{6.0f, 4.0f}));
}

}  // namespace
}  // namespace aim

namespace aim {
namespace {

// A block returned to the caching allocator while a collective still uses it (the stream-order
// error of a freed block reused on another stream) ends the process naming the collective.
void free_under_incomplete_collective() {
  ncclComm_t comms[2];
  const int devs[2] = {0, 1};
  if (ncclCommInitAll(comms, 2, devs) != ncclSuccess) std::abort();
  set_current_device(cuda_device(0));
  Tensor t = Tensor::zeros({256}, DType::f32, cuda_device(0));
  // Rank 0 issues it; rank 1 never does, so it stays incomplete.
  ncclAllReduce(t.raw_data(), t.raw_data(), 256, ncclFloat32, ncclSum, comms[0],
                static_cast<cudaStream_t>(current_stream(0)));
  t = Tensor();  // the block goes back to the cache
}

TEST(EmulatedDeviceDeathTest, BlockFreedUnderAnIncompleteCollective) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_DEATH(free_under_incomplete_collective(),
               "went back to the caching allocator while ncclAllReduce #1");
}

}  // namespace
}  // namespace aim

namespace aim {
namespace {

// AIM_EMU_PROTECT=1: host code reading device memory directly (not through a copy) faults, and
// the fault names the block.
void read_device_memory_on_the_host() {
  setenv("AIM_EMU_PROTECT", "1", 1);
  set_current_device(cuda_device(0));
  Tensor t = Tensor::zeros({1024}, DType::f32, cuda_device(0));
  volatile float v = static_cast<const float*>(t.raw_data())[3];
  (void)v;
}

TEST(EmulatedDeviceDeathTest, HostReadOfDeviceMemoryFaults) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_DEATH(read_device_memory_on_the_host(), "host access to device memory at .* \\(cuda:0");
}

}  // namespace
}  // namespace aim

namespace aim {
namespace {

// A bad index on the device is not read back by the op (no synchronisation); the check at the
// caller's read point (the trainer's log point, the end of an aim-infer run) names it.
TEST(EmulatedDevice, BadIndexIsReportedAtTheCheck) {
  set_current_device(cuda_device(0));
  const Device d = cuda_device(0);
  autograd::Variable w(Tensor::zeros({5, 3}, DType::f32, d));
  const Tensor idx = Tensor::from_vector<int64_t>({1, 7, 2}, {3}, d);
  const DeviceSyncCounters c0 = device_sync_counters(d);
  (void)autograd::embedding(w, idx, -1);
  EXPECT_EQ(device_sync_counters(d).host_syncs, c0.host_syncs) << "the op read nothing back";
  const std::string msg = error_of([&] { kernels::check_device_errors(d); });
  EXPECT_NE(msg.find("index 7"), std::string::npos) << msg;
  EXPECT_NE(msg.find("flagged on cuda:0"), std::string::npos) << msg;
  EXPECT_EQ(error_of([&] { kernels::check_device_errors(d); }), "") << "reset after the check";
}

}  // namespace
}  // namespace aim

#if defined(AIM_UNDER_ASAN)
namespace aim {
namespace {

// The ASan build of the emulated device (tools/sanitize.sh address emu): the CUDA caching
// allocator poisons the slack past a tensor's bytes and a block back in its cache, so a copy (or
// a kernel) on a freed tensor is reported instead of reading memory ASan believes live.
void copy_past_the_bytes() {
  set_current_device(cuda_device(0));
  void* p = cuda_allocator(0).allocate(100);
  char h[4];
  cudaMemcpy(h, static_cast<char*>(p) + 100, 1, cudaMemcpyDeviceToHost);
}
void copy_from_a_freed_block() {
  set_current_device(cuda_device(0));
  Allocator& a = cuda_allocator(0);
  void* p = a.allocate(100);
  a.deallocate(p, 100);
  char h[4];
  cudaMemcpy(h, p, 4, cudaMemcpyDeviceToHost);
}

TEST(EmulatedDeviceDeathTest, AsanSeesTheSlackAndCachedBlocks) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_DEATH(copy_past_the_bytes(), "use-after-poison");
  EXPECT_DEATH(copy_from_a_freed_block(), "use-after-poison");
  // The same block handed out again is usable to its last byte.
  set_current_device(cuda_device(0));
  Allocator& a = cuda_allocator(0);
  void* p = a.allocate(100);
  a.deallocate(p, 100);
  void* q = a.allocate(100);
  ASSERT_EQ(q, p);
  char h[100] = {};
  EXPECT_EQ(cudaMemcpy(h, q, 100, cudaMemcpyDeviceToHost), cudaSuccess);
  a.deallocate(q, 100);
}

}  // namespace
}  // namespace aim
#endif
