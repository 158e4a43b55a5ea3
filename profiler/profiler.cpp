#include "profiler/profiler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "kernels/registry.h"
#include "profiler/run_info.h"
#include "tensor/allocator.h"
#include "tensor/check.h"

#ifdef AIM_CUDA
#include <nvtx3/nvToolsExt.h>
#endif

namespace aim::profiler {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<bool> g_on{false};
std::atomic<bool> g_nvtx{false};
std::mutex g_mu;
std::vector<Event> g_events;
Clock::time_point g_t0;
double g_overhead_s = 0;
std::atomic<int> g_next_tid{0};

struct Open {
  Event ev;
  Clock::time_point t0;
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

void push(Event ev) {
  const auto t_in = Clock::now();
  ThreadState& s = t_state;
  ev.tid = s.tid;
  ev.depth = int(s.stack.size());
  if (ev.kind == ScopeKind::Op) {
    ev.layer = s.layers.empty() ? "" : s.layers.back();
    ev.phase = s.phases.empty() ? "" : s.phases.back();
  } else if (ev.kind == ScopeKind::Layer) {
    ev.phase = s.phases.empty() ? "" : s.phases.back();
    s.layers.push_back(ev.name);
  } else if (ev.kind == ScopeKind::Phase) {
    s.phases.push_back(ev.name);
  }
  s.stack.push_back(Open{std::move(ev), Clock::now()});
  g_overhead_s += std::chrono::duration<double>(Clock::now() - t_in).count();
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
  std::lock_guard<std::mutex> lock(g_mu);
  g_events.push_back(std::move(o.ev));
  g_overhead_s += std::chrono::duration<double>(Clock::now() - t_end).count();
}

class Observer final : public kernels::OpObserver {
 public:
  void begin(const std::string& op, const std::string& variant, kernels::Backend b,
             const kernels::Cost& cost) override {
    if (!g_on) return;
    Event e;
    e.name = op;
    e.variant = variant;
    e.kind = ScopeKind::Op;
    e.cost = cost;
    backends_.push_back(b);
    push(std::move(e));
  }
  void end() override {
    if (!g_on) return;
    // A CUDA op is timed to its completion.
    if (!backends_.empty() && backends_.back() == kernels::Backend::CUDA)
      synchronize(cuda_device(0));
    if (!backends_.empty()) backends_.pop_back();
    pop();
  }

 private:
  static thread_local std::vector<kernels::Backend> backends_;
};
thread_local std::vector<kernels::Backend> Observer::backends_;
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
  g_events.clear();
  g_overhead_s = 0;
  g_t0 = Clock::now();
  kernels::set_op_observer(&g_observer);
  g_on = true;
}

void stop() {
  g_on = false;
  kernels::set_op_observer(nullptr);
}

const std::vector<Event>& events() { return g_events; }
double overhead_seconds() { return g_overhead_s; }

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

void set_nvtx(bool on) { g_nvtx = on; }
bool nvtx_enabled() { return g_nvtx; }

Scope::Scope(const std::string& name, ScopeKind kind) {
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

Ceilings default_cpu_ceilings() {
  // ../shared/MACHINE.md: fp32 FMA with AVX-512 on 2 threads ~418 GFLOP/s measured (aim-bench
  // peak: 473-477), STREAM-like triad ~67 GB/s.
  return Ceilings{475e9, 67e9, 0,
                  "this CPU's measured ceilings (aim-bench peak; MACHINE.md triad)"};
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
  for (const char* k : {"fp32_gflops", "bandwidth_gbs"})
    AIM_CHECK(j.contains(k) && j[k].is_number() && double(j[k]) > 0, "--ceilings ", path,
              ": needs a positive number '", k, "' (write it with aim-bench peak --ceilings)");
  Ceilings c;
  c.peak_flops = double(j["fp32_gflops"]) * 1e9;
  c.bandwidth = double(j["bandwidth_gbs"]) * 1e9;
  if (j.contains("fp64_gflops") && j["fp64_gflops"].is_number())
    c.peak_flops_fp64 = double(j["fp64_gflops"]) * 1e9;
  c.source = "measured by aim-bench peak (" + path + ")";
  return c;
}

void print_tables(std::ostream& os, const std::vector<Event>& ev, int steps, const Ceilings& c) {
  AIM_CHECK(steps > 0, "profiler: no profiled steps");
  std::map<std::string, Agg> by_op, by_layer;
  double step_us = 0, fwd_us = 0;
  Agg fwd, all;
  for (const Event& e : ev) {
    if (e.kind == ScopeKind::Step) step_us += e.dur_us;
    if (e.kind == ScopeKind::Phase && e.name == "fwd") fwd_us += e.dur_us;
    if (e.kind != ScopeKind::Op || e.phase == "eval") continue;
    Agg& o = by_op[e.name + "/" + e.variant];
    o.calls++;
    o.us += e.dur_us;
    o.cost += e.cost;
    const std::string layer =
        (e.phase.empty() ? std::string("-") : e.phase) + "/" + (e.layer.empty() ? "-" : e.layer);
    Agg& l = by_layer[layer];
    l.calls++;
    l.us += e.dur_us;
    l.cost += e.cost;
    all.calls++;
    all.us += e.dur_us;
    all.cost += e.cost;
    if (e.phase == "fwd") {
      fwd.calls++;
      fwd.us += e.dur_us;
      fwd.cost += e.cost;
    }
  }
  os << "profile over " << steps << " steps (roofline: " << fmt("%.0f", c.peak_flops / 1e9)
     << " GFLOP/s, " << fmt("%.0f", c.bandwidth / 1e9) << " GB/s; " << c.source << ")\n";
  print_agg(os, "op/variant", by_op, step_us, steps, c);
  os << "\n";
  print_agg(os, "phase/layer", by_layer, step_us, steps, c);
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
  const double kernel_share = step_us > 0 ? 100.0 * all.us / step_us : 0.0;
  os << "ops account for " << fmt("%.1f", kernel_share) << "% of the step time; profiler overhead "
     << fmt("%.2f", step_us > 0 ? 100.0 * overhead_seconds() * 1e6 / step_us : 0.0)
     << "% of it (bookkeeping time inside the profiler)\n";
}

void write_trace(const std::string& path, const std::vector<Event>& ev) {
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
  for (const Event& e : ev) {
    nlohmann::json j = {{"name", e.kind == ScopeKind::Op ? e.name + "/" + e.variant : e.name},
                        {"cat", cat(e.kind)},
                        {"ph", "X"},
                        {"ts", e.ts_us},
                        {"dur", e.dur_us},
                        {"pid", 1},
                        {"tid", e.tid}};
    if (e.kind == ScopeKind::Op)
      j["args"] = {{"variant", e.variant},
                   {"layer", e.layer},
                   {"phase", e.phase},
                   {"flops", e.cost.flops},
                   {"bytes_read", e.cost.bytes_read},
                   {"bytes_written", e.cost.bytes_written}};
    events.push_back(std::move(j));
  }
  // Parents before children at equal start times, so viewers nest them.
  std::stable_sort(events.begin(), events.end(),
                   [](const nlohmann::json& a, const nlohmann::json& b) {
                     const double ta = a["ts"], tb = b["ts"];
                     if (ta != tb) return ta < tb;
                     return double(a["dur"]) > double(b["dur"]);
                   });
  nlohmann::json doc = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  write_text_atomic(path, doc.dump(), "--trace");
}

}  // namespace aim::profiler
