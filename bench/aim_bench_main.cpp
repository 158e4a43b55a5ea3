// aim-bench: measured ceilings and the foundation's benchmark targets, side by side in one run.
//   aim-bench peak [--device cpu|cuda]        FMA peak, triad / copy bandwidth
//   aim-bench foundation [--device cpu|cuda]  the foundation issue's targets, as ratios:
//     cpu:  default matmul at 4096x4096x1024 vs the measured AVX-512 FMA peak (>= 80%),
//           binary add on 64 Mi floats vs triad bandwidth (>= 60%),
//           allocator: a training step's allocations served from the cache after step 1;
//     cuda: cuda.tiled vs cuda.cublas fp32 4096^3 (>= 60%), add / softmax / layernorm vs the
//           device copy bandwidth (>= 80%).
// Every timed variant is checked against cpu.ref on its test shapes first.
// The flags are parsed here rather than with Boost.Program_options so that the GPU check can
// build this tool on GPU machines without Boost (docs/design-notes.md).
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "bench/foundation.h"
#include "tensor/check.h"

namespace {
const char* kUsage =
    "usage: aim-bench peak|foundation [--device cpu|cuda] [--results FILE] [--quick]\n"
    "  --device   where to measure (default cpu)\n"
    "  --results  append one JSON object per result line to FILE\n"
    "  --quick    smaller sizes (smoke test)\n";
}

int main(int argc, char** argv) {
  std::string cmd, device = "cpu", results;
  bool quick = false;
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
      } else if (!a.empty() && a[0] != '-' && cmd.empty()) {
        cmd = a;
      } else {
        AIM_FAIL("unknown argument '", a, "'");
      }
    }
    AIM_CHECK(!cmd.empty(), "no command given (expected peak or foundation)");
    AIM_CHECK(cmd == "peak" || cmd == "foundation", "unknown command '", cmd,
              "' (expected peak or foundation)");
    AIM_CHECK(device == "cpu" || device == "cuda", "--device: expected cpu or cuda, got '", device,
              "'");
  } catch (const std::exception& e) {
    std::cerr << "aim-bench: " << e.what() << "\n" << kUsage;
    return 2;
  }
  try {
    const std::vector<nlohmann::json> rows = cmd == "peak"
                                                 ? aim::bench::run_peak(device, quick)
                                                 : aim::bench::run_foundation(device, quick);
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
