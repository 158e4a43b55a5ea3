// The emulated CUDA runtime: the cudart calls aim makes, implemented on the CPU for the
// AIM_CUDA_EMULATOR build (kernels/simt/device/README.md). Device memory is host memory tagged
// with its device; streams run their work synchronously when it is submitted (after what they
// wait for); events carry what their stream waited for; graphs are recorded closures. What the
// hardware requires is checked, and a violation is an error naming it:
//   - a kernel's pointer arguments and its stream belong to the current device;
//   - copies name the right kinds of memory (a host pointer is not device memory and back);
//   - no synchronising call (stream/event/device synchronise, synchronous or pageable copies,
//     queries, cudaFree) touches a stream or device being captured: the capture is invalidated
//     and cudaStreamEndCapture fails naming the first such call;
//   - a block freed while a collective on its stream has not completed is reported.
// Host synchronisations and device-to-host traffic are counted per device (counters()).
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <shared_mutex>
#include <thread>

#include "kernels/simt/device/device.h"
#include "kernels/simt/device/state.h"
#include "tensor/check.h"

// Opaque runtime handles (incomplete types in the toolkit headers).
struct CUstream_st {
  int device = 0;
  unsigned flags = 0;
  std::atomic<bool> dirty{false};  // work submitted since the host last waited for the stream
  std::mutex mu;
  std::vector<aim::simt::device::PendingPtr> pending;
  std::shared_ptr<struct EmuCapture> capture;
};
struct EmuNode {
  std::string what;
  std::function<void()> run;
};
struct EmuCapture {
  int device = 0;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  std::vector<EmuNode> nodes;
  std::set<CUstream_st*> streams;
  std::string invalid;  // the first illegal call, when the capture is invalidated
};
struct CUevent_st {
  int device = 0;
  unsigned flags = 0;
  bool recorded = false;
  aim::simt::device::Clock::time_point t;
  std::vector<aim::simt::device::PendingPtr> pending;
  std::shared_ptr<EmuCapture> capture;  // recorded on a capturing stream
};
struct CUgraph_st {
  int device = 0;
  std::vector<EmuNode> nodes;
};
struct CUgraphExec_st {
  int device = 0;
  std::vector<EmuNode> nodes;
};

namespace aim::simt::device {
namespace {

constexpr int kMaxDevices = 64;

struct Alloc {
  size_t size;
  int device;  // -1: pinned host memory
};

struct Global {
  std::shared_mutex mem_mu;
  std::map<uintptr_t, Alloc> allocs;
  std::mutex mu;  // streams, captures, legacy streams
  std::set<CUstream_st*> streams;
  CUstream_st* legacy[kMaxDevices] = {};
  std::atomic<int64_t> syncs[kMaxDevices] = {}, d2h_bytes[kMaxDevices] = {},
                       d2h_copies[kMaxDevices] = {}, launches[kMaxDevices] = {};
  std::atomic<int64_t> mem_used[kMaxDevices] = {};
};
Global& g() {
  static Global* s = new Global();  // never destroyed: used until exit
  return *s;
}

thread_local int t_device = 0;
thread_local cudaError_t t_last_error = cudaSuccess;
thread_local std::string t_detail;  // what the last emulator-detected error was about
thread_local cudaError_t t_detail_code = cudaSuccess;

cudaError_t fail(cudaError_t e, std::string detail) {
  t_last_error = e;
  t_detail = std::move(detail);
  t_detail_code = e;
  return e;
}

bool valid_device(int d) { return d >= 0 && d < device_count(); }

CUstream_st* resolve(cudaStream_t s) {
  if (s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread) {
    std::lock_guard<std::mutex> lock(g().mu);
    CUstream_st*& l = g().legacy[t_device];
    if (!l) {
      l = new CUstream_st();
      l->device = t_device;
    }
    return l;
  }
  {
    std::lock_guard<std::mutex> lock(g().mu);
    AIM_CHECK(g().streams.count(s), "[emulated cuda] stream ", static_cast<void*>(s),
              " is not a live stream (destroyed, or never created)");
  }
  return s;
}

// Every stream whose capture must see `what` invalidates it; returns true when the stream (or,
// for a device-wide call, any stream of the device) is capturing.
bool invalidate_if_capturing(CUstream_st* st, int device, const std::string& what) {
  std::lock_guard<std::mutex> lock(g().mu);
  bool hit = false;
  auto mark = [&](CUstream_st* s) {
    if (!s || !s->capture) return;
    hit = true;
    if (s->capture->invalid.empty()) s->capture->invalid = what;
  };
  if (st) {
    mark(st);
  } else {
    for (CUstream_st* s : g().streams)
      if (s->device == device) mark(s);
    mark(g().legacy[device]);
  }
  return hit;
}

// Runs what the stream waits for to completion (the emulator's only blocking point).
void drain(CUstream_st* st, const std::string& for_what) {
  std::vector<PendingPtr> p;
  {
    std::lock_guard<std::mutex> lock(st->mu);
    p.swap(st->pending);
  }
  for (const PendingPtr& e : p) wait_pending(e, for_what);
}

std::vector<PendingPtr> live_pending(CUstream_st* st) {
  std::lock_guard<std::mutex> lock(st->mu);
  st->pending.erase(std::remove_if(st->pending.begin(), st->pending.end(),
                                   [](const PendingPtr& p) { return p->is_done(); }),
                    st->pending.end());
  return st->pending;
}

// AIM_EMU_SYNC_TRACE=1 prints each host synchronisation with its call stack as
// "binary+offset" (tools/emu-sync-trace.sh turns them into function names with addr2line).
void trace_stack(int device, const std::string& what);
void count_sync(int device, const std::string& what) {
  g().syncs[device].fetch_add(1, std::memory_order_relaxed);
  trace_stack(device, what);
}
// Also each call that invalidates a capture ("... during capture").
void trace_stack(int device, const std::string& what) {
  static const bool trace = [] {
    const char* e = std::getenv("AIM_EMU_SYNC_TRACE");
    return e && e[0] == '1';
  }();
  if (!trace) return;
  void* frames[24];
  const int n = backtrace(frames, 24);
  std::string line = str("[emulated cuda] host sync on cuda:", device, ": ", what, " |");
  for (int i = 1; i < n; ++i) {
    Dl_info info;
    if (dladdr(frames[i], &info) && info.dli_fname)
      line += str(
          " ", info.dli_fname, "+0x", std::hex,
          reinterpret_cast<uintptr_t>(frames[i]) - reinterpret_cast<uintptr_t>(info.dli_fbase) - 1);
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

// Runs (or records) one piece of stream work.
cudaError_t enqueue(CUstream_st* st, const std::string& what, std::function<void()> work) {
  std::shared_ptr<EmuCapture> cap;
  {
    std::lock_guard<std::mutex> lock(g().mu);
    cap = st->capture;
  }
  if (cap) {
    std::lock_guard<std::mutex> lock(g().mu);
    cap->nodes.push_back({what, std::move(work)});
    return cudaSuccess;
  }
  drain(st, what);
  st->dirty = true;
  const DeviceAccess access;
  work();
  return cudaSuccess;
}

std::string ptr_str(const void* p) {
  const Where w = where(p);
  if (!w.found) return str(p, " (pageable host memory)");
  if (w.pinned) return str(p, " (pinned host memory)");
  return str(p, " (cuda:", w.device, ", ", uintptr_t(p) - w.base, " bytes into a block of ", w.size,
             ")");
}

}  // namespace

void Pending::complete(const std::string& err) {
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
    error = err;
    finished = Clock::now();
  }
  cv.notify_all();
}
bool Pending::is_done() {
  std::lock_guard<std::mutex> lock(mu);
  return done;
}

namespace {
std::mutex g_live_mu;
std::vector<std::weak_ptr<Pending>> g_live;
}  // namespace

void register_pending(const PendingPtr& p) {
  std::lock_guard<std::mutex> lock(g_live_mu);
  g_live.erase(std::remove_if(g_live.begin(), g_live.end(),
                              [](const std::weak_ptr<Pending>& w) {
                                const PendingPtr q = w.lock();
                                return !q || q->is_done();
                              }),
               g_live.end());
  g_live.push_back(p);
}

void check_block_free(const void* p, size_t bytes) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(g_live_mu);
  for (const auto& w : g_live) {
    const PendingPtr q = w.lock();
    if (!q) continue;
    std::lock_guard<std::mutex> qlock(q->mu);
    if (q->done) continue;
    for (const auto& [b, n] : q->buffers)
      if (b < a + bytes && a < b + n) {
        std::fprintf(stderr,
                     "[emulated cuda] a block (%p, %zu bytes) went back to the caching allocator "
                     "while %s, not complete, still uses it: the next allocation would get it "
                     "while the collective reads or writes it. Keep the tensor alive until the "
                     "work is done (wait on it, or record an event and let the allocator wait).\n",
                     p, bytes, q->what.c_str());
        std::abort();
      }
  }
}

bool protect_mode() {
  static const bool on = [] {
    const char* e = std::getenv("AIM_EMU_PROTECT");
    return e && e[0] == '1';
  }();
  return on;
}

namespace {
std::mutex g_access_mu;
int g_access_depth = 0;  // threads inside a DeviceAccess scope

size_t page_round(size_t n) {
  const size_t pg = size_t(sysconf(_SC_PAGESIZE));
  return (std::max<size_t>(n, 1) + pg - 1) / pg * pg;
}
void protect_all(int prot) {  // caller holds g_access_mu
  std::shared_lock<std::shared_mutex> lock(g().mem_mu);
  for (const auto& [base, a] : g().allocs)
    if (a.device >= 0) mprotect(reinterpret_cast<void*>(base), page_round(a.size), prot);
}
void on_fault(int sig, siginfo_t* info, void*) {
  // Best effort (not async-signal-safe, but the process ends here): name the block.
  const auto a = reinterpret_cast<uintptr_t>(info->si_addr);
  const auto& m = g().allocs;
  auto it = m.upper_bound(a);
  if (it != m.begin()) {
    --it;
    if (it->second.device >= 0 && a < it->first + page_round(it->second.size)) {
      std::fprintf(stderr,
                   "[emulated cuda] host access to device memory at %p (cuda:%d, %zu bytes into a "
                   "block of %zu) outside a copy or kernel: read device memory through a copy "
                   "(Tensor::to(kCPU), copy_bytes)\n",
                   info->si_addr, it->second.device, size_t(a - it->first), it->second.size);
      std::abort();
    }
  }
  signal(sig, SIG_DFL);  // not device memory: the ordinary crash
}
void install_fault_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, nullptr);
  });
}
}  // namespace

DeviceAccess::DeviceAccess() {
  if (!protect_mode()) return;
  std::lock_guard<std::mutex> lock(g_access_mu);
  if (g_access_depth++ == 0) protect_all(PROT_READ | PROT_WRITE);
}
DeviceAccess::~DeviceAccess() {
  if (!protect_mode()) return;
  std::lock_guard<std::mutex> lock(g_access_mu);
  if (--g_access_depth == 0) protect_all(PROT_NONE);
}

void wait_pending(const PendingPtr& p, const std::string& for_what) {
  static const int limit_s = [] {
    const char* e = std::getenv("AIM_EMU_WAIT_S");
    return e ? std::max(1, std::atoi(e)) : 600;
  }();
  std::unique_lock<std::mutex> lock(p->mu);
  if (!p->cv.wait_for(lock, std::chrono::seconds(limit_s), [&] { return p->done; }))
    AIM_FAIL("[emulated cuda] ", for_what, " waits for ", p->what,
             ", which did not complete within ", limit_s,
             " s (AIM_EMU_WAIT_S): a peer rank never issued it");
  if (!p->error.empty())
    AIM_FAIL("[emulated cuda] ", for_what, " depends on ", p->what, ", which failed: ", p->error);
}

int device_count() {
  static const int n = [] {
    const char* e = std::getenv("AIM_SIM_GPUS");
    if (!e || !*e) return 8;
    char* end = nullptr;
    const long v = std::strtol(e, &end, 10);
    AIM_CHECK(end && *end == 0 && v >= 1 && v <= kMaxDevices, "AIM_SIM_GPUS='", e,
              "': expected a number of emulated devices in [1, ", kMaxDevices, "]");
    return int(v);
  }();
  return n;
}

int current_device() { return t_device; }

Where where(const void* p) {
  Where w;
  const auto a = reinterpret_cast<uintptr_t>(p);
  std::shared_lock<std::shared_mutex> lock(g().mem_mu);
  auto it = g().allocs.upper_bound(a);
  if (it == g().allocs.begin()) return w;
  --it;
  // One past the end belongs to the block too (the end pointer of an empty view).
  if (a > it->first + it->second.size) return w;
  w.found = true;
  w.pinned = it->second.device < 0;
  w.device = it->second.device;
  w.base = it->first;
  w.size = it->second.size;
  return w;
}

void check_kernel_pointer(const void* p, const char* kernel, int arg) {
  if (!p) return;
  const Where w = where(p);
  if (w.found && !w.pinned && w.device == t_device) return;
  AIM_FAIL("[emulated cuda] kernel ", kernel, ": pointer argument ", arg, " = ", ptr_str(p),
           " is not memory of the current device cuda:", t_device,
           w.found && !w.pinned ? " (select the tensors' device before launching)" : "");
}

int stream_device(cudaStream_t s) { return resolve(s)->device; }

void stream_add_pending(cudaStream_t s, PendingPtr p) {
  CUstream_st* st = resolve(s);
  std::lock_guard<std::mutex> lock(st->mu);
  st->pending.push_back(std::move(p));
}

bool stream_capturing(cudaStream_t s) {
  CUstream_st* st = resolve(s);
  std::lock_guard<std::mutex> lock(g().mu);
  return bool(st->capture);
}

void submit(cudaStream_t s, const char* what, std::function<void()> work) {
  CUstream_st* st = resolve(s);
  AIM_CHECK(st->device == t_device, "[emulated cuda] kernel ", what,
            " launched on a stream of cuda:", st->device,
            " while the current device is cuda:", t_device);
  g().launches[st->device].fetch_add(1, std::memory_order_relaxed);
  enqueue(st, what, std::move(work));
}

Counters counters(int device) {
  AIM_CHECK(valid_device(device), "[emulated cuda] no device cuda:", device);
  Counters c;
  c.host_syncs = g().syncs[device].load();
  c.d2h_bytes = g().d2h_bytes[device].load();
  c.d2h_copies = g().d2h_copies[device].load();
  c.launches = g().launches[device].load();
  return c;
}

}  // namespace aim::simt::device

// ---- the runtime API --------------------------------------------------------------------------
using namespace aim::simt::device;  // NOLINT: this file implements the C API on top of it
using aim::str;

namespace {
size_t emulated_memory_bytes() { return size_t(80) << 30; }  // what cudaMemGetInfo reports

cudaError_t host_sync(CUstream_st* st, int device, const std::string& what) {
  if (invalidate_if_capturing(st, device, what)) {
    trace_stack(device, what + " during capture");
    return fail(cudaErrorStreamCaptureUnsupported,
                str(what, " during stream capture (a synchronising call is illegal there)"));
  }
  // A wait counts when there is work to wait for: work submitted since the host last waited, or
  // a collective still pending (a second synchronise of an idle stream waits for nothing).
  std::vector<CUstream_st*> all;
  if (st) {
    all.push_back(st);
  } else {
    std::lock_guard<std::mutex> lock(g().mu);
    for (CUstream_st* s : g().streams)
      if (s->device == device) all.push_back(s);
    if (g().legacy[device]) all.push_back(g().legacy[device]);
  }
  bool waits = false;
  for (CUstream_st* s : all) {
    waits |= s->dirty.exchange(false) || !live_pending(s).empty();
    drain(s, what);
  }
  if (waits) count_sync(device, what);
  return cudaSuccess;
}

// Checks the pointers of a copy against its kind; returns "" or what is wrong.
std::string copy_problem(void* dst, const void* src, size_t n, cudaMemcpyKind& kind) {
  const Where d = where(dst), s = where(src);
  const bool d_dev = d.found && !d.pinned, s_dev = s.found && !s.pinned;
  if (kind == cudaMemcpyDefault)
    kind = d_dev ? (s_dev ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                 : (s_dev ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  const bool want_d = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool want_s = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (want_d != d_dev)
    return str("destination ", ptr_str(dst),
               want_d ? " is not device memory" : " is device memory");
  if (want_s != s_dev)
    return str("source ", ptr_str(src), want_s ? " is not device memory" : " is device memory");
  if (d_dev && uintptr_t(dst) + n > d.base + d.size)
    return str("destination ", ptr_str(dst), ": ", n, " bytes run past the end of its block");
  if (s_dev && uintptr_t(src) + n > s.base + s.size)
    return str("source ", ptr_str(src), ": ", n, " bytes run past the end of its block");
  return "";
}

const char* kind_name(cudaMemcpyKind k) {
  switch (k) {
    case cudaMemcpyHostToHost:
      return "host-to-host";
    case cudaMemcpyHostToDevice:
      return "host-to-device";
    case cudaMemcpyDeviceToHost:
      return "device-to-host";
    case cudaMemcpyDeviceToDevice:
      return "device-to-device";
    default:
      return "default";
  }
}

cudaError_t memcpy_on(CUstream_st* st, void* dst, const void* src, size_t n, cudaMemcpyKind kind,
                      bool synchronous) {
  if (n == 0) return cudaSuccess;
  const cudaMemcpyKind asked = kind;
  const std::string why = copy_problem(dst, src, n, kind);
  if (!why.empty())
    return fail(cudaErrorInvalidValue, str("cudaMemcpy", synchronous ? "" : "Async", " (",
                                           kind_name(asked), ", ", n, " bytes): ", why));
  const int dev = st->device;
  const bool pageable_host = (kind == cudaMemcpyDeviceToHost && !where(dst).found) ||
                             (kind == cudaMemcpyHostToDevice && !where(src).found);
  if (kind == cudaMemcpyDeviceToHost) {
    aim::simt::device::g().d2h_bytes[dev].fetch_add(int64_t(n));
    aim::simt::device::g().d2h_copies[dev].fetch_add(1);
  }
  // Synchronous for the host: cudaMemcpy, and device-to-host copies into pageable memory.
  const bool host_waits = synchronous || (kind == cudaMemcpyDeviceToHost && pageable_host);
  if (host_waits || (pageable_host && st->capture)) {
    const std::string what =
        str(synchronous ? "cudaMemcpy" : "cudaMemcpyAsync", " ", kind_name(kind),
            pageable_host ? " with pageable host memory" : "");
    const cudaError_t e = host_sync(kind == cudaMemcpyHostToHost ? nullptr : st, dev, what);
    if (e != cudaSuccess) return e;
    const DeviceAccess access;
    std::memcpy(dst, src, n);
    return cudaSuccess;
  }
  return enqueue(st, "cudaMemcpyAsync", [dst, src, n] { std::memcpy(dst, src, n); });
}
}  // namespace

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  *count = device_count();
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  if (!valid_device(device))
    return fail(cudaErrorInvalidDevice, str("cudaSetDevice(", device, "): ", device_count(),
                                            " emulated devices (AIM_SIM_GPUS)"));
  t_device = device;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = t_device;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
  if (!valid_device(device)) return fail(cudaErrorInvalidDevice, "cudaGetDeviceProperties");
  std::memset(p, 0, sizeof *p);
  std::snprintf(p->name, sizeof p->name, "aim emulated CUDA device (SIMT on the CPU)");
  p->totalGlobalMem = emulated_memory_bytes();
  p->sharedMemPerBlock = 48 << 10;
  p->sharedMemPerBlockOptin = 227 << 10;
  p->sharedMemPerMultiprocessor = 228 << 10;
  p->regsPerBlock = 65536;
  p->regsPerMultiprocessor = 65536;
  p->warpSize = 32;
  p->maxThreadsPerBlock = 1024;
  p->maxThreadsPerMultiProcessor = 2048;
  p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
  p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 0x7fffffff;
  p->maxGridSize[1] = p->maxGridSize[2] = 65535;
  p->multiProcessorCount = 132;
  p->l2CacheSize = 50 << 20;
  p->major = 9;
  p->minor = 0;
  p->memoryBusWidth = 5120;
  p->unifiedAddressing = 1;
  p->concurrentKernels = 1;
  p->asyncEngineCount = 2;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  cudaDeviceProp p;
  const cudaError_t e = cudaGetDeviceProperties(&p, device);
  if (e != cudaSuccess) return e;
  switch (attr) {
    case cudaDevAttrMultiProcessorCount:
      *value = p.multiProcessorCount;
      return cudaSuccess;
    case cudaDevAttrL2CacheSize:
      *value = p.l2CacheSize;
      return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor:
      *value = p.major;
      return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor:
      *value = p.minor;
      return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = int(p.sharedMemPerBlockOptin);
      return cudaSuccess;
    case cudaDevAttrMaxThreadsPerBlock:
      *value = p.maxThreadsPerBlock;
      return cudaSuccess;
    case cudaDevAttrWarpSize:
      *value = 32;
      return cudaSuccess;
    default:
      return fail(cudaErrorInvalidValue,
                  str("cudaDeviceGetAttribute(", int(attr), "): attribute not emulated"));
  }
}
cudaError_t cudaRuntimeGetVersion(int* v) {
  *v = CUDART_VERSION;
  return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* v) {
  *v = CUDART_VERSION;
  return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t* free_b, size_t* total) {
  *total = emulated_memory_bytes();
  const int64_t used = aim::simt::device::g().mem_used[t_device].load();
  *free_b = *total > size_t(used) ? *total - size_t(used) : 0;
  return cudaSuccess;
}

cudaError_t cudaGetLastError(void) {
  const cudaError_t e = t_last_error;
  t_last_error = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError(void) { return t_last_error; }
const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorStreamCaptureUnsupported:
      return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated:
      return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorIllegalState:
      return "cudaErrorIllegalState";
    default:
      return "cudaError (emulated)";
  }
}
const char* cudaGetErrorString(cudaError_t e) {
  // The emulator's detail of this thread's last error of this code, after the generic name.
  static thread_local std::string s;
  s = cudaGetErrorName(e);
  if (e != cudaSuccess && e == t_detail_code && !t_detail.empty()) s += ": " + t_detail;
  return s.c_str();
}

cudaError_t cudaMalloc(void** p, size_t size) {
  *p = nullptr;
  {
    std::lock_guard<std::mutex> lock(g().mu);
    for (CUstream_st* s : g().streams)
      if (s->device == t_device && s->capture && s->capture->mode != cudaStreamCaptureModeRelaxed &&
          s->capture->invalid.empty())
        s->capture->invalid = "cudaMalloc during a capture that is not in relaxed mode";
  }
  const size_t bytes = (std::max<size_t>(size, 1) + 255) / 256 * 256;
  void* m = nullptr;
  if (protect_mode()) {  // whole pages, so that they can be protected
    install_fault_handler();
    m = mmap(nullptr, page_round(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
             0);
    if (m == MAP_FAILED) m = nullptr;
  } else {
    m = std::aligned_alloc(256, bytes);
  }
  if (!m) return fail(cudaErrorMemoryAllocation, str("cudaMalloc(", size, ")"));
  // Fresh device memory is undefined: 0xFF bytes (NaN, -1) make a read before a write visible.
  std::memset(m, 0xFF, bytes);
  {
    std::lock_guard<std::mutex> access(g_access_mu);  // protected now unless work is running
    if (protect_mode() && g_access_depth == 0) mprotect(m, page_round(bytes), PROT_NONE);
    std::unique_lock<std::shared_mutex> lock(g().mem_mu);
    g().allocs[reinterpret_cast<uintptr_t>(m)] = {size, t_device};
  }
  g().mem_used[t_device].fetch_add(int64_t(size));
  *p = m;
  return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
  if (!p) return cudaSuccess;
  const Where w = where(p);
  if (!w.found || w.pinned || w.base != reinterpret_cast<uintptr_t>(p))
    return fail(cudaErrorInvalidValue,
                str("cudaFree(", ptr_str(p), "): not a cudaMalloc'ed block"));
  const cudaError_t e = host_sync(nullptr, w.device, "cudaFree");  // cudaFree synchronises
  if (e != cudaSuccess) return e;
  {
    std::unique_lock<std::shared_mutex> lock(g().mem_mu);
    g().allocs.erase(w.base);
  }
  g().mem_used[w.device].fetch_sub(int64_t(w.size));
  if (protect_mode())
    munmap(p, page_round(w.size));
  else
    std::free(p);
  return cudaSuccess;
}
cudaError_t cudaHostAlloc(void** p, size_t size, unsigned int) {
  const size_t bytes = (std::max<size_t>(size, 1) + 255) / 256 * 256;
  *p = std::aligned_alloc(256, bytes);
  if (!*p) return fail(cudaErrorMemoryAllocation, str("cudaHostAlloc(", size, ")"));
  std::unique_lock<std::shared_mutex> lock(g().mem_mu);
  g().allocs[reinterpret_cast<uintptr_t>(*p)] = {size, -1};
  return cudaSuccess;
}
cudaError_t cudaMallocHost(void** p, size_t size) { return cudaHostAlloc(p, size, 0); }
cudaError_t cudaFreeHost(void* p) {
  if (!p) return cudaSuccess;
  const Where w = where(p);
  if (!w.found || !w.pinned || w.base != reinterpret_cast<uintptr_t>(p))
    return fail(cudaErrorInvalidValue, str("cudaFreeHost(", ptr_str(p), "): not pinned memory"));
  {
    std::unique_lock<std::shared_mutex> lock(g().mem_mu);
    g().allocs.erase(w.base);
  }
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* a, const void* p) {
  std::memset(a, 0, sizeof *a);
  const Where w = where(p);
  a->type = !w.found   ? cudaMemoryTypeUnregistered
            : w.pinned ? cudaMemoryTypeHost
                       : cudaMemoryTypeDevice;
  a->device = w.found && !w.pinned ? w.device : -1;
  a->devicePointer = w.found ? const_cast<void*>(p) : nullptr;
  a->hostPointer = !w.found || w.pinned ? const_cast<void*>(p) : nullptr;
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind,
                            cudaStream_t s) {
  return memcpy_on(resolve(s), dst, src, n, kind, false);
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  return memcpy_on(resolve(nullptr), dst, src, n, kind, true);
}
cudaError_t cudaMemsetAsync(void* p, int value, size_t n, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  const Where w = where(p);
  if (!w.found || w.pinned || uintptr_t(p) + n > w.base + w.size)
    return fail(cudaErrorInvalidValue,
                str("cudaMemsetAsync(", ptr_str(p), ", ", n, " bytes): not device memory"));
  return enqueue(resolve(s), "cudaMemsetAsync", [p, value, n] { std::memset(p, value, n); });
}
cudaError_t cudaMemset(void* p, int value, size_t n) {
  const cudaError_t e = cudaMemsetAsync(p, value, n, nullptr);
  if (e != cudaSuccess) return e;
  return host_sync(resolve(nullptr), t_device, "cudaMemset");
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int flags) {
  auto* st = new CUstream_st();
  st->device = t_device;
  st->flags = flags;
  std::lock_guard<std::mutex> lock(g().mu);
  g().streams.insert(st);
  *s = st;
  return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, 0); }
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  {
    std::lock_guard<std::mutex> lock(g().mu);
    if (!g().streams.erase(s))
      return fail(cudaErrorInvalidResourceHandle, "cudaStreamDestroy of an unknown stream");
  }
  // Work still pending completes first (as the hardware does before releasing the stream).
  drain(s, "cudaStreamDestroy");
  delete s;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  CUstream_st* st = resolve(s);
  return host_sync(st, st->device, "cudaStreamSynchronize");
}
cudaError_t cudaStreamQuery(cudaStream_t s) {
  CUstream_st* st = resolve(s);
  if (invalidate_if_capturing(st, st->device, "cudaStreamQuery"))
    return fail(cudaErrorStreamCaptureUnsupported, "cudaStreamQuery during stream capture");
  return live_pending(st).empty() ? cudaSuccess : cudaErrorNotReady;
}
cudaError_t cudaDeviceSynchronize(void) {
  return host_sync(nullptr, t_device, "cudaDeviceSynchronize");
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int flags) {
  auto* ev = new CUevent_st();
  ev->device = t_device;
  ev->flags = flags;
  *e = ev;
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, 0); }
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete e;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  CUstream_st* st = resolve(s);
  std::lock_guard<std::mutex> lock(g().mu);
  e->recorded = true;
  e->capture = st->capture;
  e->pending.clear();
  if (!st->capture) {
    std::lock_guard<std::mutex> slock(st->mu);
    e->pending = st->pending;
  }
  e->t = Clock::now();
  return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
  if (e->capture) {
    std::lock_guard<std::mutex> lock(g().mu);
    if (e->capture->invalid.empty()) e->capture->invalid = "cudaEventQuery of a captured event";
    return fail(cudaErrorStreamCaptureUnsupported,
                "cudaEventQuery of an event recorded in a capture");
  }
  for (const PendingPtr& p : e->pending)
    if (!p->is_done()) return cudaErrorNotReady;
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  if (e->capture) {
    std::lock_guard<std::mutex> lock(g().mu);
    if (e->capture->invalid.empty())
      e->capture->invalid = "cudaEventSynchronize of a captured event";
    return fail(cudaErrorStreamCaptureUnsupported,
                "cudaEventSynchronize of an event recorded in a capture");
  }
  count_sync(e->device, "cudaEventSynchronize");
  for (const PendingPtr& p : e->pending) wait_pending(p, "cudaEventSynchronize");
  return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  if (!a->recorded || !b->recorded || (a->flags & cudaEventDisableTiming) ||
      (b->flags & cudaEventDisableTiming))
    return fail(cudaErrorInvalidResourceHandle,
                "cudaEventElapsedTime: event not recorded or "
                "created with cudaEventDisableTiming");
  if (cudaEventQuery(a) != cudaSuccess || cudaEventQuery(b) != cudaSuccess)
    return cudaErrorNotReady;
  // The time an event completes: its record, or the end of the work it waited for.
  auto done_at = [](cudaEvent_t e) {
    Clock::time_point t = e->t;
    for (const PendingPtr& p : e->pending) t = std::max(t, p->finished);
    return t;
  };
  *ms = std::chrono::duration<float, std::milli>(done_at(b) - done_at(a)).count();
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int) {
  CUstream_st* st = resolve(s);
  std::lock_guard<std::mutex> lock(g().mu);
  if (e->capture && st->capture != e->capture) {  // the stream joins the capture (fork)
    st->capture = e->capture;
    e->capture->streams.insert(st);
    return cudaSuccess;
  }
  std::lock_guard<std::mutex> slock(st->mu);
  for (const PendingPtr& p : e->pending)
    if (!p->is_done()) st->pending.push_back(p);
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode) {
  CUstream_st* st = resolve(s);
  if (s == nullptr || s == cudaStreamLegacy)
    return fail(cudaErrorStreamCaptureUnsupported, "capture of the legacy default stream");
  drain(st, "cudaStreamBeginCapture");
  std::lock_guard<std::mutex> lock(g().mu);
  if (st->capture) return fail(cudaErrorIllegalState, "cudaStreamBeginCapture: already capturing");
  st->capture = std::make_shared<EmuCapture>();
  st->capture->device = st->device;
  st->capture->mode = mode;
  st->capture->streams.insert(st);
  return cudaSuccess;
}
cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus* status) {
  CUstream_st* st = resolve(s);
  std::lock_guard<std::mutex> lock(g().mu);
  *status = !st->capture                   ? cudaStreamCaptureStatusNone
            : st->capture->invalid.empty() ? cudaStreamCaptureStatusActive
                                           : cudaStreamCaptureStatusInvalidated;
  return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* graph) {
  CUstream_st* st = resolve(s);
  std::shared_ptr<EmuCapture> cap;
  {
    std::lock_guard<std::mutex> lock(g().mu);
    cap = st->capture;
    if (!cap)
      return fail(cudaErrorIllegalState, "cudaStreamEndCapture: the stream is not capturing");
    for (CUstream_st* x : cap->streams) x->capture.reset();
  }
  *graph = nullptr;
  if (!cap->invalid.empty())
    return fail(cudaErrorStreamCaptureInvalidated,
                str("the capture was invalidated by ", cap->invalid));
  *graph = new CUgraph_st{cap->device, std::move(cap->nodes)};
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  *exec = new CUgraphExec_st{graph->device, graph->nodes};
  return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
  CUstream_st* st = resolve(s);
  if (st->device != exec->device)
    return fail(cudaErrorInvalidValue, str("cudaGraphLaunch: a graph of cuda:", exec->device,
                                           " on a stream of cuda:", st->device));
  for (const EmuNode& n : exec->nodes) {
    aim::simt::device::g().launches[st->device].fetch_add(1, std::memory_order_relaxed);
    enqueue(st, n.what, n.run);
  }
  return cudaSuccess;
}

}  // extern "C"
