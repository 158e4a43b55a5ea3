#include "profiler/profiler.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "kernels/registry.h"
#include "profiler/run_info.h"
#include "tensor/allocator.h"
#include "tensor/check.h"
#include "tensor/host_memory.h"

#ifdef AIM_CUDA
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include "tensor/cuda_check.h"
#endif

namespace aim::profiler {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<bool> g_on{false};
std::atomic<bool> g_nvtx{false};
std::atomic<bool> g_cuda_op_events{false};
std::atomic<bool> g_record_args{false};
std::mutex g_mu;
std::vector<Event> g_events;
Clock::time_point g_t0;
// The profiler's own bookkeeping time, added from every thread that records (rank threads too):
// atomic nanoseconds.
std::atomic<int64_t> g_overhead_ns{0};
void add_overhead(Clock::time_point since) {
  g_overhead_ns.fetch_add(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - since).count(),
      std::memory_order_relaxed);
}
std::atomic<int> g_next_tid{0};
std::atomic<int64_t> g_next_id{0};

struct Open {
  Event ev;
  Clock::time_point t0;
#ifdef AIM_CUDA
  cudaEvent_t gpu_begin = nullptr;  // recorded before the first CUDA op inside the scope
#endif
};

struct ThreadState {
  int tid = g_next_tid++;
  std::vector<Open> stack;
  std::vector<std::string> layers;  // open layer names, innermost last
  std::vector<std::string> phases;
};
thread_local ThreadState t_state;
const std::string kNone;

double us_since_start(Clock::time_point t) {
  return std::chrono::duration<double, std::micro>(t - g_t0).count();
}

#ifdef AIM_CUDA
// ---- CUDA timing ------------------------------------------------------------------------------
// A scope's GPU time runs from an event recorded on the current stream just before the first
// CUDA op inside it (recorded then for every open scope that has none yet: the stream is at the
// same point for all of them) to an event recorded at its end. Work the stream ran before that
// first op belongs to earlier scopes, so nothing is lost. GPU times are placed on the host
// timeline through one reference event per device, recorded once per start() right after a
// device synchronisation (the stream is idle, so the GPU reaches it at the host time taken then).
// Events come from a per-device pool and are returned when resolved: at the end of every step
// scope (the trainer synchronises each step anyway) and by events()/stop(). All under g_mu.
struct Pending {
  size_t index;  // into g_events
  cudaEvent_t begin, end;
  int device;
};
struct Ref {
  cudaEvent_t ev = nullptr;
  double host_us = 0;
};
std::map<int, std::vector<cudaEvent_t>> g_pool;  // device -> free events
std::map<int, Ref> g_refs;                       // device -> reference event of this start()
std::vector<Pending> g_pending;
std::map<std::pair<int, void*>, int> g_streams;  // (device, stream) -> trace track index

cudaEvent_t acquire_event(int device) {  // the device is current
  std::vector<cudaEvent_t>& p = g_pool[device];
  if (!p.empty()) {
    cudaEvent_t e = p.back();
    p.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  AIM_CUDA_CHECK(cudaEventCreate(&e));
  return e;
}

void release_event(int device, cudaEvent_t e) {
  if (e) g_pool[device].push_back(e);
}

// Before a CUDA op (at the top of `s.stack`): begin events for every open scope without one, and
// for the op itself when per-op events are on.
void gpu_before_op(ThreadState& s, bool time_op) {
  int device = 0;
  AIM_CUDA_CHECK(cudaGetDevice(&device));
  auto stream = static_cast<cudaStream_t>(current_stream(device));
  std::lock_guard<std::mutex> lock(g_mu);
  Ref& ref = g_refs[device];
  if (!ref.ev) {
    AIM_CUDA_CHECK(cudaDeviceSynchronize());
    ref.ev = acquire_event(device);
    AIM_CUDA_CHECK(cudaEventRecord(ref.ev, stream));
    ref.host_us = us_since_start(Clock::now());
  }
  auto key = std::make_pair(device, static_cast<void*>(stream));
  auto it = g_streams.find(key);
  if (it == g_streams.end()) it = g_streams.emplace(key, int(g_streams.size())).first;
  for (size_t i = 0; i < s.stack.size(); ++i) {
    Open& o = s.stack[i];
    if (o.gpu_begin) continue;
    if (o.ev.kind == ScopeKind::Op && !(time_op && i + 1 == s.stack.size())) continue;
    o.gpu_begin = acquire_event(device);
    AIM_CUDA_CHECK(cudaEventRecord(o.gpu_begin, stream));
    o.ev.device = device;
    o.ev.stream = it->second;
  }
}

// At the end of a scope timed on the GPU: its end event on the same stream (g_mu held).
cudaEvent_t gpu_record_end(const Open& o) {
  int current = 0;
  AIM_CUDA_CHECK(cudaGetDevice(&current));
  if (current != o.ev.device) AIM_CUDA_CHECK(cudaSetDevice(o.ev.device));
  cudaEvent_t e = acquire_event(o.ev.device);
  AIM_CUDA_CHECK(cudaEventRecord(e, static_cast<cudaStream_t>(current_stream(o.ev.device))));
  if (current != o.ev.device) AIM_CUDA_CHECK(cudaSetDevice(current));
  return e;
}

// Fills in the GPU times of every pending record and returns its events to the pool (g_mu held).
void resolve_locked() {
  for (const Pending& p : g_pending) {
    AIM_CUDA_CHECK(cudaEventSynchronize(p.end));
    const Ref& ref = g_refs[p.device];
    float from_ref = 0, dur = 0;
    AIM_CUDA_CHECK(cudaEventElapsedTime(&from_ref, ref.ev, p.begin));
    AIM_CUDA_CHECK(cudaEventElapsedTime(&dur, p.begin, p.end));
    Event& e = g_events[p.index];
    e.ts_us = ref.host_us + double(from_ref) * 1e3;
    e.dur_us = double(dur) * 1e3;
    release_event(p.device, p.begin);
    release_event(p.device, p.end);
  }
  g_pending.clear();
}

void resolve() {
  const auto t_in = Clock::now();
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_pending.empty()) return;
  resolve_locked();
  add_overhead(t_in);
}

// start(): unresolved records and the reference events of the previous run go back to the pool.
void reset_gpu_locked() {
  for (const Pending& p : g_pending) {
    release_event(p.device, p.begin);
    release_event(p.device, p.end);
  }
  g_pending.clear();
  for (auto& [device, ref] : g_refs) release_event(device, ref.ev);
  g_refs.clear();
}
#else
void resolve() {}
void reset_gpu_locked() {}
#endif

void push(Event ev) {
  const auto t_in = Clock::now();
  ThreadState& s = t_state;
  ev.tid = s.tid;
  ev.depth = int(s.stack.size());
  ev.id = g_next_id++;
  ev.parent = s.stack.empty() ? -1 : s.stack.back().ev.id;
  if (ev.kind == ScopeKind::Op) {
    ev.inner = !s.stack.empty() && s.stack.back().ev.kind == ScopeKind::Op;
    ev.layer = s.layers.empty() ? "" : s.layers.back();
    ev.phase = s.phases.empty() ? "" : s.phases.back();
  } else if (ev.kind == ScopeKind::Layer) {
    ev.phase = s.phases.empty() ? "" : s.phases.back();
    s.layers.push_back(ev.name);
  } else if (ev.kind == ScopeKind::Phase) {
    s.phases.push_back(ev.name);
  }
  s.stack.push_back(Open{std::move(ev), Clock::now()});
  add_overhead(t_in);
}

void pop() {
  const auto t_end = Clock::now();
  ThreadState& s = t_state;
  if (s.stack.empty()) return;
  Open o = std::move(s.stack.back());
  s.stack.pop_back();
  if (o.ev.kind == ScopeKind::Layer && !s.layers.empty()) s.layers.pop_back();
  if (o.ev.kind == ScopeKind::Phase && !s.phases.empty()) s.phases.pop_back();
  o.ev.ts_us = us_since_start(o.t0);
  o.ev.dur_us = std::chrono::duration<double, std::micro>(t_end - o.t0).count();
  o.ev.host_ts_us = o.ev.ts_us;
  o.ev.host_dur_us = o.ev.dur_us;
  bool resolve_now = false;
  {
    std::lock_guard<std::mutex> lock(g_mu);
#ifdef AIM_CUDA
    if (o.gpu_begin) {
      o.ev.gpu_timed = true;
      o.ev.gpu_untimed = false;
      g_pending.push_back({g_events.size(), o.gpu_begin, gpu_record_end(o), o.ev.device});
      resolve_now = o.ev.kind == ScopeKind::Step;
    }
#endif
    g_events.push_back(std::move(o.ev));
    add_overhead(t_end);
  }
  if (resolve_now) resolve();
}

class Observer final : public kernels::OpObserver {
 public:
  void begin(const std::string& op, const std::string& variant, kernels::Backend b,
             const kernels::Cost& cost, const std::function<std::string()>& describe) override {
    if (!g_on) return;
    Event e;
    e.name = op;
    e.variant = variant;
    e.kind = ScopeKind::Op;
    e.cost = cost;
    if (g_record_args) e.args = describe();
    // A CUDA op is timed on the device only with per-op events; else its record keeps the host
    // launch time, marked so that the tables do not take it for the op's duration.
    const bool cuda = b == kernels::Backend::CUDA;
    e.gpu_untimed = cuda;
    push(std::move(e));
#ifdef AIM_CUDA
    if (cuda) {
      const auto t_in = Clock::now();
      gpu_before_op(t_state, g_cuda_op_events);
      add_overhead(t_in);
    }
#endif
  }
  void end() override {
    if (!g_on) return;
    pop();
  }
};
Observer g_observer;

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

struct Agg {
  int64_t calls = 0;
  double us = 0;
  kernels::Cost cost;
  bool untimed = false;  // holds CUDA ops not timed on the device: `us` is not their duration
  void add(const Event& e) {
    calls++;
    us += e.dur_us;
    cost += e.cost;
    untimed |= e.gpu_untimed;
  }
};

// One table: header, rows sorted by time, the roofline column from the ceilings.
void print_agg(std::ostream& os, const std::string& title, const std::map<std::string, Agg>& m,
               double total_us, int steps, const Ceilings& c) {
  std::vector<std::pair<std::string, Agg>> rows(m.begin(), m.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.us > b.second.us; });
  char line[400];
  std::snprintf(line, sizeof line, "%-40s %7s %9s %6s %8s %9s %7s %8s %8s %7s\n", title.c_str(),
                "calls", "ms/step", "%step", "GFLOP", "MB", "FLOP/B", "GFLOP/s", "GB/s", "%roof");
  os << line;
  for (const auto& [name, a] : rows) {
    if (a.untimed) {  // CUDA ops without per-op events: work, but no time of their own
      std::snprintf(line, sizeof line, "%-40.40s %7.1f %9s %6s %8.3f %9.1f %7.2f %8s %8s %7s\n",
                    name.c_str(), double(a.calls) / steps, "-", "-", a.cost.flops / 1e9 / steps,
                    a.cost.bytes() / 1e6 / steps, a.cost.intensity(), "-", "-", "-");
      os << line;
      continue;
    }
    const double s = a.us * 1e-6;
    const double gflops = s > 0 ? a.cost.flops / s / 1e9 : 0;
    const double gbs = s > 0 ? a.cost.bytes() / s / 1e9 : 0;
    // Roofline bound at this intensity: min(peak, intensity * bandwidth); ops without FLOPs are
    // measured against the bandwidth alone.
    double roof = 0;
    if (c.peak_flops > 0 && c.bandwidth > 0 && s > 0) {
      if (a.cost.flops > 0)
        roof =
            100.0 * (a.cost.flops / s) / std::min(c.peak_flops, a.cost.intensity() * c.bandwidth);
      else if (a.cost.bytes() > 0)
        roof = 100.0 * (a.cost.bytes() / s) / c.bandwidth;
    }
    std::snprintf(line, sizeof line,
                  "%-40.40s %7.1f %9.3f %6.1f %8.3f %9.1f %7.2f %8.1f %8.1f %7.1f\n", name.c_str(),
                  double(a.calls) / steps, a.us / 1e3 / steps,
                  total_us > 0 ? 100.0 * a.us / total_us : 0.0, a.cost.flops / 1e9 / steps,
                  a.cost.bytes() / 1e6 / steps, a.cost.intensity(), gflops, gbs, roof);
    os << line;
  }
}

}  // namespace

bool enabled() { return g_on; }

void start() {
  std::lock_guard<std::mutex> lock(g_mu);
  reset_gpu_locked();
  g_events.clear();
  g_overhead_ns = 0;
  g_t0 = Clock::now();
  kernels::set_op_observer(&g_observer);
  g_on = true;
}

void stop() {
  g_on = false;
  kernels::set_op_observer(nullptr);
  resolve();
}

const std::vector<Event>& events() {
  resolve();  // CUDA-timed records still waiting for their events
  return g_events;
}
double overhead_seconds() { return double(g_overhead_ns.load()) * 1e-9; }

void set_cuda_op_events(bool on) { g_cuda_op_events = on; }
bool cuda_op_events() { return g_cuda_op_events; }
void set_record_args(bool on) { g_record_args = on; }
bool record_args() { return g_record_args; }

namespace {
#ifdef AIM_CUDA
nvtxDomainHandle_t nvtx_domain() {
  static nvtxDomainHandle_t d = nvtxDomainCreateA("aim");
  return d;
}
#endif
// Phases for NVTX layer names while the profiler is off (push() tracks them when it is on).
thread_local std::vector<std::string> t_nvtx_phases;
}  // namespace

// Step, phase and layer scopes of this thread, profiling on or off: the context of an allocation
// failure (tensor/host_memory.h).
thread_local std::vector<std::string> t_context;
std::string scope_context() {
  if (t_context.empty()) return {};
  std::string s = " (in ";
  for (size_t i = 0; i < t_context.size(); ++i) s += (i ? ", " : "") + t_context[i];
  return s + ")";
}
const bool g_context_installed = [] {
  set_allocation_context_source(&scope_context);
  return true;
}();

ContextScope::ContextScope(const std::string& what) { t_context.push_back(what); }
ContextScope::~ContextScope() {
  if (!t_context.empty()) t_context.pop_back();
}

void set_nvtx(bool on) { g_nvtx = on; }
bool nvtx_enabled() { return g_nvtx; }

Scope::Scope(const std::string& name, ScopeKind kind) {
  if (kind != ScopeKind::Op) {
    t_context.push_back(kind == ScopeKind::Step
                            ? name.substr(0, name.find('/')) + " " + name.substr(name.find('/') + 1)
                            : name);
    context_ = true;
  }
  if (g_nvtx) {
    nvtx_ = true;
    std::string n = name;  // layers carry their phase: "fwd/att", "bwd/att"
    const auto& phases = g_on ? t_state.phases : t_nvtx_phases;
    if (kind == ScopeKind::Layer && !phases.empty()) n = phases.back() + "/" + name;
#ifdef AIM_CUDA
    nvtxEventAttributes_t a{};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = n.c_str();
    nvtxDomainRangePushEx(nvtx_domain(), &a);
#endif
    if (!g_on && kind == ScopeKind::Phase) {
      t_nvtx_phases.push_back(name);
      nvtx_phase_ = true;
    }
  }
  if (!g_on) return;
  active_ = true;
  Event e;
  e.name = name;
  e.kind = kind;
  push(std::move(e));
}

Scope::~Scope() {
  if (context_ && !t_context.empty()) t_context.pop_back();
  if (active_) pop();
  if (nvtx_) {
#ifdef AIM_CUDA
    nvtxDomainRangePop(nvtx_domain());
#endif
    if (nvtx_phase_ && !t_nvtx_phases.empty()) t_nvtx_phases.pop_back();
  }
}

const std::string& current_layer() {
  return t_state.layers.empty() ? kNone : t_state.layers.back();
}

std::string cpu_ceilings_cache_path() {
  auto env = [](const char* k) {
    const char* v = std::getenv(k);
    return v && *v ? std::string(v) : std::string();
  };
  if (const std::string d = env("AIM_CACHE_DIR"); !d.empty()) return d + "/cpu-ceilings.json";
  if (const std::string d = env("XDG_CACHE_HOME"); !d.empty()) return d + "/aim/cpu-ceilings.json";
  if (const std::string d = env("HOME"); !d.empty()) return d + "/.cache/aim/cpu-ceilings.json";
  return "";
}

std::string cpu_model_name() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    const size_t b = line.find_first_not_of(" \t", colon + 1);
    return b == std::string::npos ? "" : line.substr(b);
  }
  return "";
}

Ceilings cpu_ceilings_from(const std::string& cache, const std::string& cpu, int threads) {
  std::string why;  // why the cache was not used
  if (cache.empty()) {
    why = "no cache directory (AIM_CACHE_DIR, XDG_CACHE_HOME, HOME unset)";
  } else if (std::ifstream f(cache); !f.good()) {
    why = "no " + cache;
  } else {
    try {
      const nlohmann::json j = nlohmann::json::parse(f);
      const std::string its = j.value("cpu", std::string());
      const int its_threads = j.value("threads", 0);
      if (its != cpu || its_threads != threads) {
        why = str(cache, " holds ", its.empty() ? "another CPU" : its, " at ", its_threads,
                  " threads");
      } else {
        Ceilings c = load_ceilings(cache);
        c.device = "cpu";
        c.source = str("measured on this CPU by aim-bench peak",
                       j.contains("measured") ? " at " + j.value("measured", std::string()) : "",
                       ", ", cache);
        return c;
      }
    } catch (const std::exception& e) {
      why = str(cache, " unreadable: ", e.what());
    }
  }
  // ../shared/MACHINE.md: fp32 FMA with AVX-512 on 2 threads ~418 GFLOP/s measured (aim-bench
  // peak: 473-477), STREAM-like triad ~67 GB/s, on the project's development VM (Intel Xeon).
  Ceilings c;
  c.peak_flops = 475e9;
  c.bandwidth = 67e9;
  c.source =
      str("MACHINE.md's figures of the development VM (Intel Xeon, 2 threads), not measured ",
          "on this CPU (", cpu.empty() ? "unknown" : cpu, ", ", threads, " threads: ", why,
          "); `aim-bench peak` measures it once");
  c.device = "cpu";
  return c;
}

Ceilings default_cpu_ceilings() {
  return cpu_ceilings_from(cpu_ceilings_cache_path(), cpu_model_name(), omp_get_max_threads());
}

Ceilings load_ceilings(const std::string& path) {
  std::ifstream f(path);
  AIM_CHECK(f.good(), "--ceilings: cannot read ", path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(f);
  } catch (const std::exception& e) {
    AIM_FAIL("--ceilings ", path, ": not JSON (", e.what(), ")");
  }
  AIM_CHECK(j.is_object(), "--ceilings ", path, ": expected a JSON object, got ", j.type_name());
  auto positive = [&](const char* k) {
    return j.contains(k) && j[k].is_number() && double(j[k]) > 0;
  };
  AIM_CHECK(positive("fp32_gflops"), "--ceilings ", path,
            ": needs a positive number 'fp32_gflops' (write it with aim-bench peak --ceilings)");
  const char* mem = positive("mem_gbps") ? "mem_gbps" : "bandwidth_gbs";
  AIM_CHECK(positive(mem), "--ceilings ", path,
            ": needs a positive number 'mem_gbps' (or the older name 'bandwidth_gbs'; write it "
            "with aim-bench peak --ceilings)");
  // Optional figures: absent is unknown, present must be a positive number.
  auto optional = [&](const char* k) {
    if (!j.contains(k)) return 0.0;
    AIM_CHECK(positive(k), "--ceilings ", path, ": '", k, "' must be a positive number, got ",
              j[k].dump());
    return double(j[k]) * 1e9;
  };
  Ceilings c;
  c.peak_flops = double(j["fp32_gflops"]) * 1e9;
  c.bandwidth = double(j[mem]) * 1e9;
  c.peak_flops_fp64 = optional("fp64_gflops");
  c.fp16_tc_flops = optional("fp16_tc_gflops");
  c.bf16_tc_flops = optional("bf16_tc_gflops");
  c.tf32_tc_flops = optional("tf32_tc_gflops");
  if (j.contains("device") && j["device"].is_string()) c.device = j["device"];
  c.source = "measured by aim-bench peak (" + path + ")";
  return c;
}

std::string ceilings_json(const Ceilings& c) {
  nlohmann::json j = {{"device", c.device.empty() ? std::string("unknown") : c.device}};
  auto put = [&](const char* k, double flops_or_bytes) {
    if (flops_or_bytes > 0) j[k] = flops_or_bytes / 1e9;
  };
  put("fp32_gflops", c.peak_flops);
  put("fp64_gflops", c.peak_flops_fp64);
  put("fp16_tc_gflops", c.fp16_tc_flops);
  put("bf16_tc_gflops", c.bf16_tc_flops);
  put("tf32_tc_gflops", c.tf32_tc_flops);
  put("mem_gbps", c.bandwidth);
  return j.dump(1) + "\n";
}

void print_tables(std::ostream& os, const std::vector<Event>& ev, int steps, const Ceilings& c) {
  AIM_CHECK(steps > 0, "profiler: no profiled steps");
  // CUDA ops without per-op events have no device time of their own: the layer table then takes
  // the layer and phase scopes' CUDA-event times (exclusive of the scopes nested in them).
  bool untimed_ops = false;
  for (const Event& e : ev) untimed_ops |= e.kind == ScopeKind::Op && e.gpu_untimed;
  std::map<std::string, Agg> by_op, by_layer;
  double step_us = 0, fwd_us = 0;
  Agg fwd, all;
  for (const Event& e : ev) {
    if (e.kind == ScopeKind::Step) step_us += e.dur_us;
    if (e.kind == ScopeKind::Phase && e.name == "fwd") fwd_us += e.dur_us;
    if (e.kind != ScopeKind::Op || e.inner || e.phase == "eval") continue;
    by_op[e.name + "/" + e.variant].add(e);
    const std::string layer =
        (e.phase.empty() ? std::string("-") : e.phase) + "/" + (e.layer.empty() ? "-" : e.layer);
    Agg& l = by_layer[layer];
    l.calls++;
    l.cost += e.cost;
    if (!untimed_ops) l.us += e.dur_us;
    all.add(e);
    if (e.phase == "fwd") fwd.add(e);
  }
  if (untimed_ops) {
    std::map<int64_t, double> nested_us;  // scope id -> time of the scopes directly inside it
    for (const Event& e : ev)
      if (e.kind != ScopeKind::Op && e.parent >= 0) nested_us[e.parent] += e.dur_us;
    for (const Event& e : ev) {
      const auto it = nested_us.find(e.id);
      const double own_us = e.dur_us - (it == nested_us.end() ? 0.0 : it->second);
      if (e.kind == ScopeKind::Layer && e.phase != "eval")
        by_layer[(e.phase.empty() ? std::string("-") : e.phase) + "/" + e.name].us += own_us;
      else if (e.kind == ScopeKind::Phase && e.name != "eval")
        by_layer[e.name + "/-"].us += own_us;
    }
  }
  os << "profile over " << steps << " steps (roofline: " << fmt("%.0f", c.peak_flops / 1e9)
     << " GFLOP/s, " << fmt("%.0f", c.bandwidth / 1e9) << " GB/s; " << c.source << ")\n";
  if (untimed_ops)
    os << "CUDA: step, phase and layer times are CUDA-event times; ops are not timed one by one "
          "(per-op CUDA events: --profile-ops)\n";
  print_agg(os, "op/variant", by_op, step_us, steps, c);
  os << "\n";
  print_agg(os, untimed_ops ? "phase/layer (exclusive scope time)" : "phase/layer", by_layer,
            step_us, steps, c);
  os << "\nmodel summary (per batch)        GFLOP        MB   FLOP/B    time ms   GFLOP/s\n";
  auto row = [&](const char* name, const Agg& a, double us) {
    char line[200];
    std::snprintf(line, sizeof line, "%-30s %9.3f %9.1f %8.2f %10.3f %9.1f\n", name,
                  a.cost.flops / 1e9 / steps, a.cost.bytes() / 1e6 / steps, a.cost.intensity(),
                  us / 1e3 / steps, us > 0 ? a.cost.flops / (us * 1e-6) / 1e9 : 0.0);
    os << line;
  };
  row("forward", fwd, fwd_us);
  row("step (all phases)", all, step_us);
  const std::string overhead =
      fmt("%.2f", step_us > 0 ? 100.0 * overhead_seconds() * 1e6 / step_us : 0.0);
  if (all.untimed) {
    os << "profiler overhead " << overhead
       << "% of the step time (bookkeeping time inside the profiler, event records included)\n";
    return;
  }
  const double kernel_share = step_us > 0 ? 100.0 * all.us / step_us : 0.0;
  os << "ops account for " << fmt("%.1f", kernel_share) << "% of the step time; profiler overhead "
     << overhead << "% of it (bookkeeping time inside the profiler)\n";
}

void write_trace(const std::string& path, const std::vector<Event>& ev) {
  constexpr int kStreamTid = 1000;  // trace tid of "stream N": 1000 + N
  nlohmann::json events = nlohmann::json::array();
  auto cat = [](ScopeKind k) {
    switch (k) {
      case ScopeKind::Step:
        return "step";
      case ScopeKind::Phase:
        return "phase";
      case ScopeKind::Layer:
        return "layer";
      default:
        return "op";
    }
  };
  std::map<int, int> stream_device;  // stream track -> its device
  for (const Event& e : ev) {
    // Host track: host times (for CUDA work, when it was enqueued).
    nlohmann::json j = {{"name", e.kind == ScopeKind::Op ? e.name + "/" + e.variant : e.name},
                        {"cat", cat(e.kind)},
                        {"ph", "X"},
                        {"ts", e.gpu_timed ? e.host_ts_us : e.ts_us},
                        {"dur", e.gpu_timed ? e.host_dur_us : e.dur_us},
                        {"pid", 1},
                        {"tid", e.tid}};
    if (e.kind == ScopeKind::Op) {
      j["args"] = {{"variant", e.variant},
                   {"layer", e.layer},
                   {"phase", e.phase},
                   {"flops", e.cost.flops},
                   {"bytes", e.cost.bytes()},
                   {"bytes_read", e.cost.bytes_read},
                   {"bytes_written", e.cost.bytes_written}};
      if (!e.args.empty()) j["args"]["shapes"] = e.args;
      if (e.gpu_untimed) j["args"]["clock"] = "host: CUDA launch only (--profile-ops times it)";
    }
    if (e.gpu_timed) {
      // Stream track: the GPU's times from the CUDA events.
      nlohmann::json g = j;
      g["ts"] = e.ts_us;
      g["dur"] = e.dur_us;
      g["tid"] = kStreamTid + e.stream;
      g["cat"] = std::string(cat(e.kind)) + ",gpu";
      if (!g.contains("args")) g["args"] = nlohmann::json::object();
      g["args"]["clock"] = "cuda events";
      stream_device[e.stream] = e.device;
      if (j.contains("args")) j["args"]["clock"] = "host: enqueue";
      events.push_back(std::move(g));
    }
    events.push_back(std::move(j));
  }
  // Parents before children at equal start times, so viewers nest them.
  std::stable_sort(events.begin(), events.end(),
                   [](const nlohmann::json& a, const nlohmann::json& b) {
                     const double ta = a["ts"], tb = b["ts"];
                     if (ta != tb) return ta < tb;
                     return double(a["dur"]) > double(b["dur"]);
                   });
  // Track names of the CUDA streams (metadata events lead).
  nlohmann::json meta = nlohmann::json::array();
  for (const auto& [stream, device] : stream_device)
    meta.push_back({{"name", "thread_name"},
                    {"ph", "M"},
                    {"pid", 1},
                    {"tid", kStreamTid + stream},
                    {"args",
                     {{"name", "stream " + std::to_string(stream) +
                                   " (cuda:" + std::to_string(device) + ")"}}}});
  for (auto& e : events) meta.push_back(std::move(e));
  events = std::move(meta);
  nlohmann::json doc = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  write_text_atomic(path, doc.dump(), "--trace");
}

}  // namespace aim::profiler
