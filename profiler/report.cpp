#include "profiler/report.h"

#include "profiler/profiler.h"
#include "profiler/roofline.h"

namespace aim::profiler {

void write_report(std::ostream& log, const ReportOptions& o, Device dev, int steps,
                  const std::string& title, const std::string& span) {
  const Ceilings ceil = !o.ceilings.empty() ? load_ceilings(o.ceilings)
                        : dev.is_cpu()      ? default_cpu_ceilings()
                                            : Ceilings{};
  if (o.tables) print_tables(log, events(), steps, ceil);
  if (!o.roofline.empty()) {
    write_roofline_svg(o.roofline, events(),
                       !o.ceilings.empty() ? ceiling_roofs(ceil) : default_roofs(dev.str()), title);
    log << "wrote roofline to " << o.roofline << "\n";
  }
  if (!o.trace.empty()) {
    write_trace(o.trace, events());
    log << "wrote trace" << span << " to " << o.trace << "\n";
  }
}

}  // namespace aim::profiler
