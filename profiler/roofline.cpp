#include "profiler/roofline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include "profiler/run_info.h"
#include "tensor/check.h"

namespace aim::profiler {
namespace {

struct OpPoint {
  double us = 0;
  kernels::Cost cost;
};

std::string esc(const std::string& s) {
  std::string r;
  for (char c : s) {
    if (c == '<')
      r += "&lt;";
    else if (c == '>')
      r += "&gt;";
    else if (c == '&')
      r += "&amp;";
    else
      r += c;
  }
  return r;
}

}  // namespace

const std::vector<GpuDatasheet>& gpu_datasheets() {
  // NVIDIA datasheets, SXM parts, dense tensor-core rates (the sparse figures are twice these).
  static const std::vector<GpuDatasheet> t = {
      // H200 SXM: FP64 34 TF (DFMA), FP64 tensor 67, FP32 67, TF32 495, BF16/FP16 989, INT8
      // 1979 TOPS; HBM3e 4.8 TB/s.
      {"H200", "H200 SXM", 34e12, 67e12, 67e12, 495e12, 989e12, 989e12, 1979e12, 4.8e12},
      // H100 SXM: FP64 34 TF, FP64 tensor 67, FP32 67, TF32 495, BF16/FP16 989, INT8 1979;
      // HBM3 3.35 TB/s.
      {"H100", "H100 SXM", 34e12, 67e12, 67e12, 495e12, 989e12, 989e12, 1979e12, 3.35e12},
      // A100 SXM 80GB: FP64 9.7 TF, FP64 tensor 19.5, FP32 19.5, TF32 156, BF16/FP16 312, INT8
      // 624; HBM2e 2.039 TB/s.
      {"A100", "A100 SXM 80GB", 9.7e12, 19.5e12, 19.5e12, 156e12, 312e12, 312e12, 624e12, 2.039e12},
  };
  return t;
}

const GpuDatasheet* find_gpu_datasheet(const std::string& device_name) {
  for (const GpuDatasheet& d : gpu_datasheets())
    if (device_name.find(d.match) != std::string::npos) return &d;
  return nullptr;
}

std::vector<Roof> default_roofs(const std::string& device) {
  if (device.rfind("cuda", 0) == 0) {
    const GpuDatasheet& d = *find_gpu_datasheet("H200");
    const std::string g = d.match;
    return {{g + " FP32 (datasheet)", d.fp32, d.mem},
            {g + " TF32 tensor (datasheet)", d.tf32_tc, d.mem},
            {g + " BF16/FP16 tensor (datasheet)", d.bf16_tc, d.mem},
            {g + " INT8 tensor (datasheet, TOPS)", d.int8_tc, d.mem}};
  }
  // This CPU's measured roofs, or MACHINE.md's labelled as such (default_cpu_ceilings' source).
  return ceiling_roofs(default_cpu_ceilings());
}

std::vector<Roof> ceiling_roofs(const Ceilings& c) {
  const bool cpu = c.device.empty() || c.device == "cpu";
  const std::string who = cpu ? "CPU" : c.device;
  std::vector<Roof> r = {{who + " fp32 FMA (" + c.source + ")", c.peak_flops, c.bandwidth}};
  if (c.peak_flops_fp64 > 0)
    r.push_back({who + " fp64 FMA (measured)", c.peak_flops_fp64, c.bandwidth});
  if (c.tf32_tc_flops > 0)
    r.push_back({who + " TF32 tensor GEMM (measured)", c.tf32_tc_flops, c.bandwidth});
  if (c.fp16_tc_flops > 0)
    r.push_back({who + " FP16 tensor GEMM (measured)", c.fp16_tc_flops, c.bandwidth});
  if (c.bf16_tc_flops > 0)
    r.push_back({who + " BF16 tensor GEMM (measured)", c.bf16_tc_flops, c.bandwidth});
  return r;
}

void write_roofline_svg(const std::string& path, const std::vector<Event>& ev,
                        const std::vector<Roof>& roofs, const std::string& title) {
  AIM_CHECK(!roofs.empty(), "roofline: no ceilings");
  std::map<std::string, OpPoint> ops;  // op name (all variants): one point per op type
  double total_us = 0;
  for (const Event& e : ev) {
    if (e.kind != ScopeKind::Op || e.inner || e.phase == "eval") continue;
    OpPoint& p = ops[e.name];
    p.us += e.dur_us;
    p.cost += e.cost;
    total_us += e.dur_us;
  }
  // Axes: intensity 1e-2 .. 1e3 FLOP/byte; GFLOP/s from 1e-2 to 3x the highest roof.
  double top = 0;
  for (const Roof& r : roofs) top = std::max(top, r.peak_flops / 1e9);
  const double x0 = std::log10(1e-2), x1 = std::log10(1e3);
  const double y0 = std::log10(1e-2), y1 = std::ceil(std::log10(top * 3));
  const int W = 1000, H = 600, L = 80, R = 340, T = 50, B = 60;
  const int pw = W - L - R, ph = H - T - B;
  auto X = [&](double v) { return L + (std::log10(v) - x0) / (x1 - x0) * pw; };
  auto Y = [&](double v) { return T + ph - (std::log10(v) - y0) / (y1 - y0) * ph; };

  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H + 20 * 8
    << "\" font-family=\"sans-serif\" font-size=\"11\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << L << "\" y=\"25\" font-size=\"15\">" << esc(title) << "</text>\n";
  // Grid and axis labels (decades).
  for (int d = int(x0); d <= int(x1); ++d) {
    const double x = X(std::pow(10.0, d));
    s << "<line x1=\"" << x << "\" y1=\"" << T << "\" x2=\"" << x << "\" y2=\"" << T + ph
      << "\" stroke=\"#ddd\"/>\n<text x=\"" << x - 10 << "\" y=\"" << T + ph + 16 << "\">1e" << d
      << "</text>\n";
  }
  for (int d = int(y0); d <= int(y1); ++d) {
    const double y = Y(std::pow(10.0, d));
    s << "<line x1=\"" << L << "\" y1=\"" << y << "\" x2=\"" << L + pw << "\" y2=\"" << y
      << "\" stroke=\"#ddd\"/>\n<text x=\"" << L - 40 << "\" y=\"" << y + 4 << "\">1e" << d
      << "</text>\n";
  }
  s << "<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << pw << "\" height=\"" << ph
    << "\" fill=\"none\" stroke=\"black\"/>\n"
    << "<text x=\"" << L + pw / 2 - 90 << "\" y=\"" << H - 20
    << "\">arithmetic intensity (FLOP/byte)</text>\n"
    << "<text transform=\"translate(20," << T + ph / 2 + 40
    << ") rotate(-90)\">attainable GFLOP/s</text>\n";
  // Roofs.
  const char* colours[] = {"#c0392b", "#2980b9", "#27ae60", "#8e44ad", "#d35400", "#16a085"};
  for (size_t i = 0; i < roofs.size(); ++i) {
    const Roof& r = roofs[i];
    const double peak = r.peak_flops / 1e9;
    std::ostringstream pts;
    const int n = 200;
    for (int k = 0; k <= n; ++k) {
      const double xi = std::pow(10.0, x0 + (x1 - x0) * k / n);
      const double yi = r.bandwidth > 0 ? std::min(peak, xi * r.bandwidth / 1e9) : peak;
      if (yi < std::pow(10.0, y0)) continue;
      pts << X(xi) << "," << Y(yi) << " ";
    }
    const char* col = colours[i % std::size(colours)];
    s << "<polyline fill=\"none\" stroke=\"" << col << "\" stroke-width=\"2\" points=\""
      << pts.str() << "\"/>\n<text x=\"" << L + pw + 8 << "\" y=\"" << T + 14 + 16 * i
      << "\" fill=\"" << col << "\">" << esc(r.label) << "</text>\n";
  }
  // Points: area proportional to the share of time.
  std::vector<std::pair<std::string, OpPoint>> rows(ops.begin(), ops.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.us > b.second.us; });
  std::vector<std::string> unplotted;
  for (const auto& [name, p] : rows) {
    const double share = total_us > 0 ? p.us / total_us : 0;
    const double secs = p.us * 1e-6;
    if (p.cost.flops <= 0 || p.cost.bytes() <= 0 || secs <= 0) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "%s %.1f%% (%.1f GB/s)", name.c_str(), 100 * share,
                    secs > 0 ? p.cost.bytes() / secs / 1e9 : 0.0);
      unplotted.push_back(buf);
      continue;
    }
    const double xi = std::clamp(p.cost.intensity(), 1e-2, 1e3);
    const double yi = std::max(p.cost.flops / secs / 1e9, std::pow(10.0, y0));
    const double rad = 3 + 30 * std::sqrt(share);
    char buf[200];
    std::snprintf(buf, sizeof buf, "%s %.1f%%", name.c_str(), 100 * share);
    s << "<circle cx=\"" << X(xi) << "\" cy=\"" << Y(yi) << "\" r=\"" << rad
      << "\" fill=\"#34495e\" fill-opacity=\"0.35\" stroke=\"#34495e\"/>\n<text x=\""
      << X(xi) + rad + 2 << "\" y=\"" << Y(yi) + 4 << "\">" << esc(buf) << "</text>\n";
  }
  int line = 0;
  s << "<text x=\"" << L << "\" y=\"" << H + 4 << "\">ops without FLOPs (share of op time, "
    << "achieved bandwidth):</text>\n";
  for (const std::string& u : unplotted)
    if (line < 7)
      s << "<text x=\"" << L + 10 << "\" y=\"" << H + 20 + 16 * line++ << "\">" << esc(u)
        << "</text>\n";
  s << "</svg>\n";

  write_text_atomic(path, s.str(), "--roofline");
}

}  // namespace aim::profiler
