// aim-bench op: the kernel lab. Every variant of one registered op at one shape: checked against
// cpu.ref before timing, timed (warm-up, caches flushed between repetitions, median and min of N),
// checked again after, reported with GFLOP/s, GB/s and % of the roofline bound.
//
//   aim-bench op matmul --shape 1024,1024,1024 --variants all
//   aim-bench op unary --shape 9,0,4096,4096 --dtype f32 --variants cpu.ref,cpu.omp
//
// --shape: matmul takes M,N,K[,Bt[,trans_a,trans_b]]; every other op takes the fields of its
// registered test shapes
// (`aim-bench op NAME --shape ?` lists them with examples).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace aim::bench {

struct OpLabOptions {
  std::string op;
  std::vector<int64_t> shape;
  std::string dtype = "f32";
  std::string variants = "all";  // all | comma-separated names
  std::string device = "cpu";    // cpu | cuda
  int reps = 10;
  bool list_shapes = false;      // print the op's shape fields and examples instead
  double check_max_flops = 2e9;  // above: check on the op's largest test shape instead
  bool skip_ref = false;         // "all" without the cpu.ref oracle (suites)
};

// Prints the table and returns one JSON row per variant.
std::vector<nlohmann::json> run_op_lab(const OpLabOptions& o);

// Suites: every case for every variant that supports it. `deepbench`: DeepBench's GEMM training
// shapes (m, n, k, a_t, b_t; run as row-major C[M,N] with the same transposes), cases above
// max_gflop skipped (and listed). `layers`: the AI Matrix layer-based shapes (MODELS.md §8) of the
// ops aim has so far (activations).
std::vector<nlohmann::json> run_suite(const std::string& suite, const OpLabOptions& base,
                                      double max_gflop);

}  // namespace aim::bench
