// What a profiled run writes after it (aim-train and aim-infer alike): the op tables, the
// roofline SVG and the Chrome trace of the recorded events, each when asked for.
#pragma once
#include <ostream>
#include <string>

#include "tensor/device.h"

namespace aim::profiler {

struct ReportOptions {
  bool tables = false;   // --profile
  std::string roofline;  // --roofline FILE ("" = none)
  std::string trace;     // --trace FILE ("" = none)
  std::string ceilings;  // --ceilings FILE ("" = the device's defaults)
};

// `steps`: how many steps (or batches) the events cover, for per-step tables; `title`: the
// roofline's; `span`: what the trace covers, for the log line (" of steps 2..10", or "").
void write_report(std::ostream& log, const ReportOptions& o, Device dev, int steps,
                  const std::string& title, const std::string& span);

}  // namespace aim::profiler
