// aim-bench: measured ceilings and the foundation's benchmark targets, side by side in one run.
//   aim-bench peak [--device cpu|cuda] [--ceilings FILE]
//     measured ceilings: FMA per dtype, tensor-core GEMM (GPU), copy / triad bandwidth
//   aim-bench foundation [--device cpu|cuda]  the foundation issue's targets, as ratios:
//     cpu:  default matmul at 4096x4096x1024 vs the measured AVX-512 FMA peak (>= 80%),
//           binary add on 64 Mi floats vs triad bandwidth (>= 60%),
//           allocator: a training step's allocations served from the cache after step 1;
//     cuda: cuda.tiled vs cuda.cublas fp32 4096^3 (>= 60%), add / softmax / layernorm vs the
//           device copy bandwidth (>= 80%).
//   aim-bench op NAME --shape ... [--dtype f32] [--variants all|LIST] [--reps N]
//     the kernel lab: every variant of one op at one shape (bench/op_lab.h).
// Every timed variant is checked against cpu.ref on its test shapes first.
// The flags are parsed here rather than with Boost.Program_options so that the GPU check can
// build this tool on GPU machines without Boost (docs/design-notes.md).
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "bench/foundation.h"
#include "bench/op_lab.h"
#include "cli/common.h"
#include "profiler/profiler.h"
#include "tensor/check.h"
#include "tensor/dtype.h"

namespace {
const char* kUsage =
    "usage: aim-bench peak|foundation [--device cpu|cuda] [--results FILE] [--quick]\n"
    "       aim-bench op NAME --shape N,N,... [--dtype f32] [--variants all|V1,V2] [--reps 10]\n"
    "                 [--device cpu|cuda] [--out FILE --format json|csv] [--results FILE]\n"
    "       aim-bench suite deepbench|layers [--max-gflop 20] [--device cpu|cuda] [--dtype f32]\n"
    "                 [--variants ...] [--reps 3] [--out FILE --format json|csv]\n"
    "  --device   where to measure (default cpu)\n"
    "  --results  append one JSON object per result line to FILE\n"
    "  --quick    smaller sizes (smoke test)\n"
    "  --shape    op: matmul M,N,K[,Bt[,trans_a,trans_b]]; other ops their test-shape fields,\n"
    "             positionally or as name=value,...\n"
    "             (--shape ? lists them)\n"
    "  --out      op: write the rows to FILE as --format json (one array) or csv\n"
    "  --ceilings peak: write the measured ceilings to FILE (aim-train --ceilings reads it):\n"
    "             device, fp32_gflops, fp64_gflops, [fp16|bf16|tf32]_tc_gflops, mem_gbps\n"
    "  --max-gflop suite: skip the cases above this many GFLOP per call (listed)\n";

void write_rows(const std::string& path, const std::string& format,
                const std::vector<nlohmann::json>& rows) {
  std::ofstream f(path);
  AIM_CHECK(f.good(), "--out: cannot open ", path);
  if (format == "json") {
    f << nlohmann::json(rows).dump(1) << "\n";
    return;
  }
  const char* cols[] = {"op",           "variant",   "shape",  "dtype",  "device",
                        "status",       "median_ms", "min_ms", "gflops", "gbs",
                        "roofline_pct", "note",      "suite",  "group"};
  for (size_t i = 0; i < std::size(cols); ++i) f << (i ? "," : "") << cols[i];
  f << "\n";
  for (const auto& r : rows) {
    for (size_t i = 0; i < std::size(cols); ++i) {
      f << (i ? "," : "");
      if (!r.contains(cols[i])) continue;
      const auto& v = r[cols[i]];
      if (v.is_array()) {  // shape: "1024x32x512"
        std::string t;
        for (size_t k = 0; k < v.size(); ++k) t += (k ? "x" : "") + v[k].dump();
        f << '"' << t << '"';
      } else if (v.is_string()) {
        std::string t = v.get<std::string>();
        for (char& ch : t)
          if (ch == '"') ch = '\'';
        f << '"' << t << '"';
      } else {
        f << v.dump();
      }
    }
    f << "\n";
  }
}
// The CPU's ceilings cached for this CPU model and thread count, where the profiler's default
// roofline reads them (profiler::default_cpu_ceilings); a cache that cannot be written is a
// warning.
void cache_cpu_ceilings(nlohmann::json c) {
  const std::string path = aim::profiler::cpu_ceilings_cache_path();
  if (path.empty()) return;
  c["cpu"] = aim::profiler::cpu_model_name();
  c["threads"] = omp_get_max_threads();
  const std::time_t now = std::time(nullptr);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  c["measured"] = when;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  std::ofstream f(path);
  if (ec || !(f << c.dump(1) << "\n")) {
    std::cerr << "aim-bench: warning: cannot cache the ceilings in " << path
              << " (the profiler keeps MACHINE.md's figures)\n";
    return;
  }
  std::cout << "cached this CPU's ceilings in " << path << " (aim-train/aim-infer --profile and "
            << "aim-bench op read them at " << int(c["threads"]) << " threads)\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::string cmd, device = "cpu", results, out, format = "json", ceilings, suite;
  double max_gflop = 20;
  bool quick = false;
  aim::bench::OpLabOptions lab;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto value = [&](const char* flag) {
        AIM_CHECK(i + 1 < argc, flag, ": missing value");
        return std::string(argv[++i]);
      };
      if (a == "-h" || a == "--help") {
        std::cout << kUsage;
        return 0;
      } else if (a == "--device") {
        device = value("--device");
      } else if (a == "--results") {
        results = value("--results");
      } else if (a == "--quick") {
        quick = true;
      } else if (a == "--shape") {
        const std::string v = value("--shape");
        if (v == "?")
          lab.list_shapes = true;
        else if (v.find('=') != std::string::npos)
          lab.shape_named = v;  // name=value,... : the op's declared shape fields
        else
          lab.shape = aim::cli::parse_int_list("--shape", v, 0);
      } else if (a == "--dtype") {
        lab.dtype = value("--dtype");
        aim::parse_dtype(lab.dtype);
      } else if (a == "--variants") {
        lab.variants = value("--variants");
      } else if (a == "--reps") {
        const std::string v = value("--reps");
        AIM_CHECK(v.find_first_not_of("0123456789") == std::string::npos && !v.empty() &&
                      std::stoi(v) > 0,
                  "--reps: expected a positive integer, got '", v, "'");
        lab.reps = std::stoi(v);
      } else if (a == "--max-gflop") {
        const std::string v = value("--max-gflop");
        try {
          max_gflop = std::stod(v);
        } catch (const std::exception&) {
          max_gflop = -1;
        }
        AIM_CHECK(max_gflop > 0, "--max-gflop: expected a positive number, got '", v, "'");
      } else if (a == "--ceilings") {
        ceilings = value("--ceilings");
      } else if (a == "--out") {
        out = value("--out");
      } else if (a == "--format") {
        format = value("--format");
        AIM_CHECK(format == "json" || format == "csv", "--format: expected json or csv, got '",
                  format, "'");
      } else if (!a.empty() && a[0] != '-' && cmd.empty()) {
        cmd = a;
      } else if (!a.empty() && a[0] != '-' && cmd == "op" && lab.op.empty()) {
        lab.op = a;
      } else if (!a.empty() && a[0] != '-' && cmd == "suite" && suite.empty()) {
        suite = a;
      } else {
        AIM_FAIL("unknown argument '", a, "'");
      }
    }
    AIM_CHECK(!cmd.empty(), "no command given (expected peak or foundation)");
    AIM_CHECK(cmd == "peak" || cmd == "foundation" || cmd == "op" || cmd == "suite",
              "unknown command '", cmd, "' (expected peak, foundation, op or suite)");
    AIM_CHECK(cmd != "suite" || !suite.empty(),
              "suite: missing the suite name (deepbench or layers)");
    if (cmd == "op") {
      AIM_CHECK(!lab.op.empty(), "op: missing the op name (aim-bench op NAME --shape ...)");
      AIM_CHECK(lab.list_shapes || !lab.shape.empty() || !lab.shape_named.empty(),
                "op: --shape is required (--shape ? lists "
                "the op's shape fields)");
    }
    AIM_CHECK(device == "cpu" || device == "cuda", "--device: expected cpu or cuda, got '", device,
              "'");
  } catch (const std::exception& e) {
    std::cerr << "aim-bench: " << e.what() << "\n" << kUsage;
    return 2;
  }
  try {
    lab.device = device;
    std::vector<nlohmann::json> rows;
    if (cmd == "peak")
      rows = aim::bench::run_peak(device, quick);
    else if (cmd == "op")
      rows = aim::bench::run_op_lab(lab);
    else if (cmd == "suite")
      rows = aim::bench::run_suite(suite, lab, max_gflop);
    else
      rows = aim::bench::run_foundation(device, quick);
    if (!out.empty()) write_rows(out, format, rows);
    AIM_CHECK(ceilings.empty() || cmd == "peak", "--ceilings: only with aim-bench peak");
    if (cmd == "peak") {  // the measured ceilings, for the profiler's roofline columns
      // Rows tagged with a ceiling key (bench/foundation.cpp); several rows of one key (normal
      // and streaming triad, copy and triad on the GPU) keep the best.
      nlohmann::json c = {{"device", device}};
      for (const auto& r : rows) {
        if (!r.contains("ceiling") || !r.contains("value")) continue;
        const std::string key = r["ceiling"];
        c[key] = std::max(c.value(key, 0.0), double(r["value"]));
        if (r.contains("device_name")) c["device"] = r["device_name"];
      }
      const bool whole = c.contains("fp32_gflops") && c.contains("mem_gbps");
      if (!ceilings.empty()) {  // for aim-train --ceilings
        AIM_CHECK(whole, "--ceilings: the peak run measured no fp32 FMA or memory figure (",
                  c.dump(), ")");
        std::ofstream f(ceilings);
        AIM_CHECK(f.good(), "--ceilings: cannot write ", ceilings);
        f << c.dump(1) << "\n";
        std::cout << "wrote ceilings to " << ceilings << "\n";
      }
      if (device == "cpu" && whole && !quick) cache_cpu_ceilings(c);
    }
    if (!results.empty()) {
      std::ofstream f(results, std::ios::app);
      AIM_CHECK(f.good(), "--results: cannot open ", results);
      for (const auto& r : rows) f << r.dump() << "\n";
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "aim-bench: " << e.what() << "\n";
    return 1;
  }
}
