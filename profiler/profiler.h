// The profiler (DESIGN §7): op records with their Cost, nested in named scopes (steps, phases,
// layers), aggregated into per-op, per-layer and model summary tables, and written as a
// Chrome/Perfetto trace.
//
//   profiler::start();                       // installs the op observer
//   { profiler::Scope s("step/3", ScopeKind::Step); ... }
//   profiler::stop();
//   profiler::print_tables(std::cout, profiler::events(), ceilings);
//
// Timing: steady clock on the host. A CUDA op is timed to its completion (the device is
// synchronised at the op's end while profiling), so GPU times are exact per op but the
// pipeline is serialised; CUDA-event timing per layer is still to come (issue 5).
// Scopes are per thread and strictly nested, so the trace's events nest properly. Layer scopes
// are opened by models (forward) and, through the layer captured by each autograd node at its
// creation, by the engine (backward: the same layer name inside the "bwd" phase).
#pragma once
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/op.h"

namespace aim::profiler {

enum class ScopeKind { Step, Phase, Layer, Op };

struct Event {
  std::string name;     // "step/3", "fwd", "att", "matmul"
  std::string variant;  // ops: "cpu.avx512"
  std::string layer;    // ops: innermost layer path at the call ("att", "bwd/att"), "" if none
  std::string phase;    // ops and layers: innermost phase ("fwd", "bwd", "opt", "eval")
  ScopeKind kind = ScopeKind::Op;
  int tid = 0;         // small per-thread index
  int depth = 0;       // nesting depth on its thread
  double ts_us = 0;    // start, microseconds since start()
  double dur_us = 0;   // duration
  kernels::Cost cost;  // ops only
};

// Process-wide switch. Off: scopes cost one branch and ops are not observed.
bool enabled();
void start();  // clears the events and starts recording
void stop();
const std::vector<Event>& events();
// Seconds spent inside the profiler's own bookkeeping since start() (its overhead).
double overhead_seconds();

// NVTX3 ranges (domain "aim") around every scope: step/N, fwd, bwd, opt, fwd/<layer>,
// bwd/<layer>, for Nsight Systems. Independent of start()/stop(); a no-op without CUDA.
void set_nvtx(bool on);
bool nvtx_enabled();

// RAII scope. Nothing is recorded while the profiler is off (an NVTX range still opens when
// set_nvtx(true)).
class Scope {
 public:
  Scope(const std::string& name, ScopeKind kind);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  bool active_ = false;
  bool nvtx_ = false, nvtx_phase_ = false;
};

// The innermost layer path of this thread ("" if none): autograd nodes capture it at creation.
const std::string& current_layer();

// Ceilings for the roofline columns: peak FLOP/s and memory bandwidth (bytes/s).
struct Ceilings {
  double peak_flops = 0, bandwidth = 0;
  double peak_flops_fp64 = 0;  // 0: unknown
  std::string source;          // where they come from
};
// Ceilings written by `aim-bench peak --ceilings FILE`; errors name the file and the field.
Ceilings load_ceilings(const std::string& path);
// The measured ceilings of this CPU from MACHINE.md / aim-bench peak (fp32 FMA, triad).
Ceilings default_cpu_ceilings();

// Tables over the events of `steps` profiled steps: per op (op/variant), per layer, and the model
// summary (forward and whole training step per batch).
void print_tables(std::ostream& os, const std::vector<Event>& ev, int steps, const Ceilings& c);
// Chrome/Perfetto JSON ("X" events, one track per thread; ops carry variant/FLOPs/bytes in args).
void write_trace(const std::string& path, const std::vector<Event>& ev);

}  // namespace aim::profiler
