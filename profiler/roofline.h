// Roofline plot (SVG, log-log) of profiled ops: attainable GFLOP/s = min(peak, intensity x
// bandwidth) for each ceiling, and one point per op type at (its FLOP/byte, its achieved
// GFLOP/s), sized by its share of the profiled time and labelled. Ops without FLOPs (copies,
// concat, embedding lookups) cannot sit on a log intensity axis; they are listed under the plot
// with their share of time and achieved GB/s.
#pragma once
#include <string>
#include <vector>

#include "profiler/profiler.h"

namespace aim::profiler {

struct Roof {
  std::string label;  // "CPU fp32 FMA (measured)", "H200 BF16 dense (datasheet)"
  double peak_flops = 0;
  double bandwidth = 0;  // 0: compute roof only (drawn flat)
};

// Datasheet figures of the GPUs aim knows (dense rates, no sparsity; FLOP/s and bytes/s; 0:
// not given). The one table of them: the default CUDA roofs and aim-bench peak --device cuda
// read it.
struct GpuDatasheet {
  const char* match;  // substring of the CUDA device name ("H200")
  const char* label;  // "H200 SXM"
  double fp64, fp64_tc, fp32, tf32_tc, fp16_tc, bf16_tc, int8_tc, mem;  // fp64: DFMA (vector)
};
const std::vector<GpuDatasheet>& gpu_datasheets();
// The entry whose `match` occurs in `device_name`, or nullptr.
const GpuDatasheet* find_gpu_datasheet(const std::string& device_name);

// The roofs for a run on `device` ("cpu", "cuda:0"): the measured CPU ceilings on the CPU; on CUDA
// the H200 datasheet roofs (the GPU of the lent machines) per precision and its HBM bandwidth.
std::vector<Roof> default_roofs(const std::string& device);
// One roof per precision present in measured ceilings (fp32 and fp64 FMA, TF32/FP16/BF16 tensor
// cores), each with the measured memory bandwidth.
std::vector<Roof> ceiling_roofs(const Ceilings& c);

void write_roofline_svg(const std::string& path, const std::vector<Event>& ev,
                        const std::vector<Roof>& roofs, const std::string& title);

}  // namespace aim::profiler
