// The profiler (DESIGN §7): op records with their Cost, nested in named scopes (steps, phases,
// layers), aggregated into per-op, per-layer and model summary tables, and written as a
// Chrome/Perfetto trace.
//
//   profiler::start();                       // installs the op observer
//   { profiler::Scope s("step/3", ScopeKind::Step); ... }
//   profiler::stop();
//   profiler::print_tables(std::cout, profiler::events(), ceilings);
//
// Timing: steady clock on the host for CPU work. On CUDA (profiler.cpp, "CUDA timing"), scopes
// (steps, phases, layers) are timed with CUDA events recorded on the current stream before the
// first CUDA op inside them and at their end, taken from a pool and resolved lazily (at the end of
// each step scope and by events()), without synchronising per op; CUDA ops themselves are only
// timed on the device when set_cuda_op_events(true) (aim-train --profile-ops): otherwise their
// records carry their host launch time and are marked gpu_untimed.
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
  std::string args;    // ops, with set_record_args(true): "x=[2,3] f32 y=[2,3] f32"
  // An op dispatched inside another op (cpu.fast rnn's GEMMs): in the trace, but not counted in
  // the tables, the roofline or FLOP totals, which its enclosing op already covers.
  bool inner = false;
  // CUDA timing. gpu_timed: ts_us/dur_us are the GPU's times (CUDA events on `stream`, placed on
  // the host timeline through a reference event) and host_ts_us/host_dur_us the host's (enqueue)
  // times. gpu_untimed: a CUDA op that was not timed on the device (per-op events off): its times
  // are host launch times and the tables do not use them. CPU records: neither; host_* = ts/dur.
  bool gpu_timed = false;
  bool gpu_untimed = false;
  int stream = -1;  // trace track "stream N" of gpu_timed records; -1: none
  int device = -1;  // CUDA device of gpu_timed records
  double host_ts_us = 0, host_dur_us = 0;
  // Scope identity (unique per start()) and the enclosing scope's id (-1: none): exclusive times.
  int64_t id = -1, parent = -1;
};

// Process-wide switch. Off: scopes cost one branch and ops are not observed.
bool enabled();
void start();  // clears the events and starts recording
void stop();
const std::vector<Event>& events();
// Seconds spent inside the profiler's own bookkeeping since start() (its overhead).
double overhead_seconds();

// Per-op CUDA events (aim-train --profile-ops): every CUDA op is timed on the device with its own
// pair of events; off (the default), only scopes are, so the pipeline is never serialised.
// Irrelevant to CPU runs.
void set_cuda_op_events(bool on);
bool cuda_op_events();

// Record each op's argument shapes and dtypes (Event::args, the trace's args.shapes): a string
// per op, so on only when a trace will be written (aim-train/aim-infer --trace).
void set_record_args(bool on);
bool record_args();

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
  bool context_ = false;  // pushed on the allocation-failure context
};

// A named context for allocation failures only (no profiler event): "building nmt (size=full)".
class ContextScope {
 public:
  explicit ContextScope(const std::string& what);
  ~ContextScope();
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;
};

// The innermost layer path of this thread ("" if none): autograd nodes capture it at creation.
const std::string& current_layer();

// Ceilings for the roofline columns: peak FLOP/s and memory bandwidth (bytes/s). The tables use
// peak_flops (fp32 FMA); the roofline plot draws one roof per precision present.
struct Ceilings {
  double peak_flops = 0, bandwidth = 0;
  double peak_flops_fp64 = 0;  // 0: unknown
  std::string source;          // where they come from
  // Tensor-core dense GEMM rates (GPU), FLOP/s; 0: unknown or not applicable.
  double fp16_tc_flops = 0, bf16_tc_flops = 0, tf32_tc_flops = 0;
  std::string device;  // "cpu", "NVIDIA H200", ...
};
// Ceilings written by `aim-bench peak --ceilings FILE`: JSON with "device", "fp32_gflops" and
// "mem_gbps" (required; "bandwidth_gbs" is read as the older name of mem_gbps), "fp64_gflops",
// "fp16_tc_gflops", "bf16_tc_gflops", "tf32_tc_gflops" (optional). Errors name the file and field.
Ceilings load_ceilings(const std::string& path);
// The JSON load_ceilings reads, from ceilings (unknown figures are left out).
std::string ceilings_json(const Ceilings& c);
// The CPU roofline's ceilings (fp32 FMA, memory): this CPU's, as `aim-bench peak` measured them
// and cached them (cpu_ceilings_cache_path) for this CPU model and OpenMP thread count; else
// MACHINE.md's figures of the project's development VM, with a source that says they were not
// measured here and how to measure them.
Ceilings default_cpu_ceilings();
// Where `aim-bench peak` caches this CPU's ceilings: $AIM_CACHE_DIR/cpu-ceilings.json, else
// $XDG_CACHE_HOME/aim/..., else $HOME/.cache/aim/...; "" when none of them is set.
std::string cpu_ceilings_cache_path();
// This CPU's model name (/proc/cpuinfo), "" if unknown.
std::string cpu_model_name();
// default_cpu_ceilings for a given cache file, CPU model and thread count (the cache holds "cpu"
// and "threads" beside load_ceilings' figures; a mismatch, a missing or unreadable file gives the
// labelled MACHINE.md figures).
Ceilings cpu_ceilings_from(const std::string& cache, const std::string& cpu, int threads);

// Tables over the events of `steps` profiled steps: per op (op/variant), per layer, and the model
// summary (forward and whole training step per batch).
void print_tables(std::ostream& os, const std::vector<Event>& ev, int steps, const Ceilings& c);
// Chrome/Perfetto JSON: "X" events, one track per host thread and one per CUDA stream ("stream
// N", named by thread_name metadata events) for gpu_timed records; ops carry variant, FLOPs and
// bytes in args. (Tensor shapes are not in the args: the op observer does not receive the
// op's arguments, kernels/registry.h.)
void write_trace(const std::string& path, const std::vector<Event>& ev);

}  // namespace aim::profiler
