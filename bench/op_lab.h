// aim-bench op: the kernel lab. Every variant of one registered op at one shape: checked against
// cpu.ref before timing, timed (warm-up, caches flushed between repetitions, median and min of N),
// checked again after, reported with GFLOP/s, GB/s and % of the roofline bound.
//
//   aim-bench op matmul --shape 1024,1024,1024 --variants all
//   aim-bench op unary --shape 9,0,4096,4096 --dtype f32 --variants cpu.ref,cpu.omp
//
// --shape: matmul takes M,N,K[,Bt[,trans_a,trans_b]]; every other op takes the fields of its
// registered test shapes, positionally or by the names the op declares (name=value,...)
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
  std::string shape_named;  // "log=0,mask=1,...": the op's shape fields by name (replaces shape)
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

// Suites: every case for every variant that supports it, each checked against cpu.ref before and
// after timing (cpu.ref itself is not timed unless named in --variants); cases above max_gflop
// are skipped and counted.
// `deepbench`: DeepBench's GEMM training shapes (m, n, k, a_t, b_t; run as row-major C[M,N] with
//   the same transposes) and a representative subset of its convolution training shapes (30 of
//   94), each as conv2d_fwd, conv2d_bwd_data and conv2d_bwd_filter.
// `layers`: the AI Matrix layer-based benchmark (MODELS.md §8, the param files of
//   layer-based_benchmark/cnn/params): fc (matmul), conv (conv2d_fwd, VALID), pool (maxpool2d_fwd
//   and avgpool2d_fwd, VALID), batch norm (batchnorm_fwd, inference form as tf.nn.
//   batch_normalization), activations (unary relu/sigmoid/tanh, softmax over the channels), and
//   the RNN cell shapes, listed as "not available" while aim has no recurrent ops. NHWC shapes
//   are run as the same problems in NCHW.
// Ops that are not registered give one "not available" row per case.
std::vector<nlohmann::json> run_suite(const std::string& suite, const OpLabOptions& base,
                                      double max_gflop);

}  // namespace aim::bench
