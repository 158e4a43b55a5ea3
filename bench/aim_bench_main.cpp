// aim-bench: measured ceilings and the foundation's benchmark targets, side by side in one run.
//   aim-bench peak [--device cpu|cuda]        FMA peak, triad / copy bandwidth
//   aim-bench foundation [--device cpu|cuda]  the foundation issue's targets, as ratios:
//     cpu:  default matmul at 4096x4096x1024 vs the measured AVX-512 FMA peak (>= 80%),
//           binary add on 64 Mi floats vs triad bandwidth (>= 60%),
//           allocator: a training step's allocations served from the cache after step 1;
//     cuda: cuda.tiled vs cuda.cublas fp32 4096^3 (>= 60%), add / softmax / layernorm vs the
//           device copy bandwidth (>= 80%).
// Every timed variant is checked against cpu.ref on a small shape of the same aspect first.
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>

#include "bench/foundation.h"
#include "tensor/check.h"

namespace po = boost::program_options;

int main(int argc, char** argv) {
  try {
    po::options_description opts("aim-bench options");
    std::string cmd, device, results;
    opts.add_options()("help,h", "show this help")("command", po::value<std::string>(&cmd),
                                                   "peak | foundation")(
        "device", po::value<std::string>(&device)->default_value("cpu"), "cpu | cuda")(
        "results", po::value<std::string>(&results), "append one JSON object per result line")(
        "quick", "smaller sizes (smoke test)");
    po::positional_options_description pos;
    pos.add("command", 1);
    po::variables_map vm;
    po::store(po::command_line_parser(argc, argv).options(opts).positional(pos).run(), vm);
    po::notify(vm);
    if (vm.count("help") || cmd.empty()) {
      std::cout << "usage: aim-bench peak|foundation [options]\n" << opts;
      return cmd.empty() && !vm.count("help") ? 2 : 0;
    }
    AIM_CHECK(device == "cpu" || device == "cuda", "--device: expected cpu or cuda, got '", device,
              "'");
    AIM_CHECK(cmd == "peak" || cmd == "foundation", "unknown command '", cmd,
              "' (expected peak or foundation)");
    const bool quick = vm.count("quick") > 0;
    std::vector<nlohmann::json> rows;
    if (cmd == "peak")
      rows = aim::bench::run_peak(device, quick);
    else
      rows = aim::bench::run_foundation(device, quick);
    if (!results.empty()) {
      std::ofstream f(results, std::ios::app);
      AIM_CHECK(f.good(), "--results: cannot open ", results);
      for (const auto& r : rows) f << r.dump() << "\n";
    }
    return 0;
  } catch (const po::error& e) {
    std::cerr << "aim-bench: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "aim-bench: " << e.what() << "\n";
    return 1;
  }
}
