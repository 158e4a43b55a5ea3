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

// The roofs for a run on `device` ("cpu", "cuda:0"): the measured CPU ceilings on the CPU; on CUDA
// the H200 datasheet roofs (the GPU of the lent machines) per precision and its HBM bandwidth.
std::vector<Roof> default_roofs(const std::string& device);
// CPU roofs from measured ceilings (fp32 and, when known, fp64 FMA; the triad bandwidth).
std::vector<Roof> cpu_roofs(const Ceilings& c);

void write_roofline_svg(const std::string& path, const std::vector<Event>& ev,
                        const std::vector<Roof>& roofs, const std::string& title);

}  // namespace aim::profiler
