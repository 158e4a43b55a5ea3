#include "bench/op_lab.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "kernels/registry.h"
#include "kernels/variant_check.h"
#include "profiler/profiler.h"
#include "tensor/allocator.h"
#include "tensor/check.h"
#include "tensor/device.h"

namespace aim::bench {
namespace {

using Clock = std::chrono::steady_clock;

std::string join(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

// The op's TestShape for the user's --shape: matmul reads M,N,K[,Bt] (its TestShape is
// {Bt, M, N, K, trans_a, trans_b, with_beta, with_bias, shared}); other ops take their TestShape
// fields as they are, with as many fields as the registered test shapes.
kernels::TestShape to_test_shape(const kernels::OpBase& op, const std::vector<int64_t>& s) {
  if (op.name() == "matmul") {
    AIM_CHECK(s.size() == 3 || s.size() == 4 || s.size() == 6,
              "--shape for matmul: expected M,N,K[,Bt[,trans_a,trans_b]], got ", join(s));
    return {s.size() >= 4 ? s[3] : 0, s[0], s[1], s[2], s.size() == 6 ? s[4] : 0,
            s.size() == 6 ? s[5] : 0, 0,    0,    0};
  }
  AIM_CHECK(!op.test_shapes.empty(), "op ", op.name(), " has no test shapes to follow");
  const size_t n = op.test_shapes.front().size();
  AIM_CHECK(s.size() == n, "--shape for ", op.name(), ": expected ", n,
            " fields like its test shapes (e.g. ", join(op.test_shapes.back()), "), got ", join(s),
            " (aim-bench op ", op.name(), " --shape ? lists them)");
  return s;
}

// Evicts the caches between repetitions: writes a buffer larger than the last-level cache.
void flush_caches() {
  static std::vector<char> buf(size_t(64) << 20);
  static char v = 0;
  std::memset(buf.data(), ++v, buf.size());
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

std::vector<nlohmann::json> run_op_lab(const OpLabOptions& o) {
  kernels::OpBase* op = kernels::registry().find(o.op);
  if (!op) {
    std::string names;
    for (kernels::OpBase* p : kernels::registry().ops())
      names += (names.empty() ? "" : ", ") + p->name();
    AIM_FAIL("unknown op '", o.op, "' (ops: ", names, ")");
  }
  if (o.list_shapes) {
    std::cout << op->name() << ": " << op->description << "\n--shape "
              << (op->name() == "matmul" ? "M,N,K[,Bt]" : "takes the fields of its test shapes")
              << "; registered test shapes:\n";
    for (const auto& s : op->test_shapes) std::cout << "  " << join(s) << "\n";
    return {};
  }
  const DType dt = parse_dtype(o.dtype);
  const kernels::TestShape shape = to_test_shape(*op, o.shape);
  AIM_CHECK(o.reps > 0, "--reps must be > 0");
  const kernels::Backend want = o.device == "cuda" ? kernels::Backend::CUDA : kernels::Backend::CPU;

  std::vector<std::string> chosen;
  if (o.variants != "all") {
    size_t a = 0;
    while (a <= o.variants.size()) {
      const size_t c = o.variants.find(',', a);
      chosen.push_back(o.variants.substr(a, c == std::string::npos ? std::string::npos : c - a));
      if (c == std::string::npos) break;
      a = c + 1;
    }
  }
  const profiler::Ceilings ceil = profiler::default_cpu_ceilings();
  const kernels::TestCase proto = op->make_case(shape, dt, 7);
  const kernels::Cost cost = op->case_cost(proto);
  // Checking against cpu.ref at the timed shape costs a naive run of it; above ~2 GFLOP the check
  // runs on the op's largest registered test shape instead.
  const bool check_here = cost.flops <= o.check_max_flops;
  const kernels::TestShape check_shape = check_here ? shape : op->test_shapes.back();

  std::printf(
      "aim-bench op %s --shape %s --dtype %s on %s: %.4g GFLOP, %.4g MB per call; "
      "checked on %s\n",
      op->name().c_str(), join(o.shape).c_str(), dtype_name(dt), o.device.c_str(), cost.flops / 1e9,
      cost.bytes() / 1e6, check_here ? "this shape" : ("test shape " + join(check_shape)).c_str());
  std::printf("%-16s %-9s %10s %10s %10s %9s %7s  %s\n", "variant", "status", "median ms", "min ms",
              "GFLOP/s", "GB/s", "%roof", "note");

  std::vector<nlohmann::json> rows;
  for (const kernels::VariantInfo& v : op->variant_infos()) {
    if (!chosen.empty() && std::find(chosen.begin(), chosen.end(), v.name) == chosen.end())
      continue;
    nlohmann::json row = {{"bench", "op"},       {"op", op->name()},     {"variant", v.name},
                          {"shape", o.shape},    {"dtype", o.dtype},     {"device", o.device},
                          {"flops", cost.flops}, {"bytes", cost.bytes()}};
    auto report = [&](const std::string& status, const std::string& note) {
      std::printf("%-16s %-9s %10s %10s %10s %9s %7s  %s\n", v.name.c_str(), status.c_str(), "-",
                  "-", "-", "-", "-", note.c_str());
      row["status"] = status;
      row["note"] = note;
      rows.push_back(row);
    };
    if (v.backend != want) continue;  // other devices' variants
    if (o.skip_ref && chosen.empty() && v.name.size() > 4 &&
        v.name.compare(v.name.size() - 4, 4, ".ref") == 0)
      continue;
    if (std::find(v.dtypes.begin(), v.dtypes.end(), dt) == v.dtypes.end()) {
      report("skip", std::string("does not take ") + dtype_name(dt));
      continue;
    }
    if (want == kernels::Backend::CUDA && cuda_device_count() == 0) {
      report("skip", "no GPU: " + cuda_unavailable_reason());
      continue;
    }
    const kernels::CheckResult before =
        kernels::check_variant(*op, v.name, v.backend, check_shape, dt, 11);
    if (before.status == kernels::CheckStatus::Unsupported) {
      report("skip", before.message);
      continue;
    }
    if (before.status == kernels::CheckStatus::Fail) {
      report("FAIL", "before timing: " + before.message);
      continue;
    }
    const Device dev = kernels::device_for(v.backend);
    const kernels::TestCase c = kernels::transfer_case(proto, dev, false, dt, false);
    const std::string why = op->run_case(v.name, v.backend, c);  // warm-up
    if (!why.empty()) {
      report("skip", why);
      continue;
    }
    const auto t_warm = Clock::now();
    op->run_case(v.name, v.backend, c);
    synchronize(dev);
    // Slow variants (cpu.ref at large shapes) get fewer repetitions: ~2 s each, at least 3.
    const double warm_s = std::chrono::duration<double>(Clock::now() - t_warm).count();
    const int reps = warm_s > 0.2 ? std::max(3, std::min(o.reps, int(2.0 / warm_s))) : o.reps;
    std::vector<double> ms;
    for (int r = 0; r < reps; ++r) {
      flush_caches();
      synchronize(dev);
      const auto t0 = Clock::now();
      op->run_case(v.name, v.backend, c);
      synchronize(dev);
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    const kernels::CheckResult after =
        kernels::check_variant(*op, v.name, v.backend, check_shape, dt, 13);
    const double med = median(ms), mn = *std::min_element(ms.begin(), ms.end());
    const double gflops = cost.flops / (med * 1e-3) / 1e9, gbs = cost.bytes() / (med * 1e-3) / 1e9;
    double roof = 0;
    if (want == kernels::Backend::CPU) {
      const double bound =
          cost.flops > 0 ? std::min(ceil.peak_flops, cost.intensity() * ceil.bandwidth) : 0;
      roof = cost.flops > 0 ? 100 * gflops * 1e9 / bound : 100 * gbs * 1e9 / ceil.bandwidth;
    }
    const std::string status = after.status == kernels::CheckStatus::Pass ? "ok" : "FAIL";
    const std::string note =
        after.status == kernels::CheckStatus::Pass
            ? std::string(v.provider == kernels::Provider::Own ? "own" : "vendor")
            : "after timing: " + after.message;
    std::printf("%-16s %-9s %10.3f %10.3f %10.1f %9.1f %7.1f  %s\n", v.name.c_str(), status.c_str(),
                med, mn, gflops, gbs, roof, note.c_str());
    row["status"] = status;
    row["note"] = note;
    row["median_ms"] = med;
    row["min_ms"] = mn;
    row["gflops"] = gflops;
    row["gbs"] = gbs;
    row["roofline_pct"] = roof;
    row["reps"] = reps;
    rows.push_back(row);
  }
  return rows;
}

namespace {

// DeepBench's GEMM training set (baidu-research/DeepBench, code/kernels/gemm_problems.h): m, n, k,
// a transposed, b transposed.
struct GemmCase {
  int64_t m, n, k;
  int ta, tb;
};
const GemmCase kDeepBenchGemm[] = {
    {1760, 16, 1760, 0, 0},    {1760, 32, 1760, 0, 0},    {1760, 64, 1760, 0, 0},
    {1760, 128, 1760, 0, 0},   {1760, 7000, 1760, 0, 0},  {2048, 16, 2048, 0, 0},
    {2048, 32, 2048, 0, 0},    {2048, 64, 2048, 0, 0},    {2048, 128, 2048, 0, 0},
    {2048, 7000, 2048, 0, 0},  {2560, 16, 2560, 0, 0},    {2560, 32, 2560, 0, 0},
    {2560, 64, 2560, 0, 0},    {2560, 128, 2560, 0, 0},   {2560, 7000, 2560, 0, 0},
    {4096, 16, 4096, 0, 0},    {4096, 32, 4096, 0, 0},    {4096, 64, 4096, 0, 0},
    {4096, 128, 4096, 0, 0},   {4096, 7000, 4096, 0, 0},  {1760, 16, 1760, 1, 0},
    {1760, 32, 1760, 1, 0},    {1760, 64, 1760, 1, 0},    {1760, 128, 1760, 1, 0},
    {1760, 7000, 1760, 1, 0},  {2048, 16, 2048, 1, 0},    {2048, 32, 2048, 1, 0},
    {2048, 64, 2048, 1, 0},    {2048, 128, 2048, 1, 0},   {2048, 7000, 2048, 1, 0},
    {2560, 16, 2560, 1, 0},    {2560, 32, 2560, 1, 0},    {2560, 64, 2560, 1, 0},
    {2560, 128, 2560, 1, 0},   {2560, 7000, 2560, 1, 0},  {4096, 16, 4096, 1, 0},
    {4096, 32, 4096, 1, 0},    {4096, 64, 4096, 1, 0},    {4096, 128, 4096, 1, 0},
    {4096, 7000, 4096, 1, 0},  {1760, 7133, 1760, 0, 1},  {2048, 7133, 2048, 0, 1},
    {2560, 7133, 2560, 0, 1},  {4096, 7133, 4096, 0, 1},  {5124, 9124, 1760, 0, 0},
    {35, 8457, 1760, 0, 0},    {5124, 9124, 2048, 0, 0},  {35, 8457, 2048, 0, 0},
    {5124, 9124, 2560, 0, 0},  {35, 8457, 2560, 0, 0},    {5124, 9124, 4096, 0, 0},
    {35, 8457, 4096, 0, 0},    {5124, 9124, 1760, 1, 0},  {35, 8457, 1760, 1, 0},
    {5124, 9124, 2048, 1, 0},  {35, 8457, 2048, 1, 0},    {5124, 9124, 2560, 1, 0},
    {35, 8457, 2560, 1, 0},    {5124, 9124, 4096, 1, 0},  {35, 8457, 4096, 1, 0},
    {7680, 16, 2560, 0, 0},    {7680, 32, 2560, 0, 0},    {7680, 64, 2560, 0, 0},
    {7680, 128, 2560, 0, 0},   {7680, 16, 2560, 1, 0},    {7680, 32, 2560, 1, 0},
    {7680, 64, 2560, 1, 0},    {7680, 128, 2560, 1, 0},   {3072, 16, 1024, 0, 0},
    {3072, 32, 1024, 0, 0},    {3072, 64, 1024, 0, 0},    {3072, 128, 1024, 0, 0},
    {3072, 16, 1024, 1, 0},    {3072, 32, 1024, 1, 0},    {3072, 64, 1024, 1, 0},
    {3072, 128, 1024, 1, 0},   {3072, 7435, 1024, 0, 1},  {7680, 5481, 2560, 0, 1},
    {512, 8, 500000, 0, 0},    {1024, 8, 500000, 0, 0},   {512, 16, 500000, 0, 0},
    {1024, 16, 500000, 0, 0},  {512, 8, 500000, 1, 0},    {1024, 8, 500000, 1, 0},
    {512, 16, 500000, 1, 0},   {1024, 16, 500000, 1, 0},  {1024, 700, 512, 0, 0},
    {1024, 700, 512, 1, 0},    {7680, 24000, 2560, 0, 0}, {6144, 24000, 2560, 0, 0},
    {4608, 24000, 1536, 0, 0}, {8448, 24000, 2816, 0, 0}, {3072, 24000, 1024, 0, 0},
    {7680, 48000, 2560, 0, 0}, {6144, 48000, 2560, 0, 0}, {4608, 48000, 1536, 0, 0},
    {8448, 48000, 2816, 0, 0}, {3072, 48000, 1024, 0, 0}, {7680, 24000, 2560, 1, 0},
    {6144, 24000, 2560, 1, 0}, {4608, 24000, 1536, 1, 0}, {8448, 24000, 2816, 1, 0},
    {3072, 24000, 1024, 1, 0}, {7680, 48000, 2560, 1, 0}, {6144, 48000, 2560, 1, 0},
    {4608, 48000, 1536, 1, 0}, {8448, 48000, 2816, 1, 0}, {3072, 48000, 1024, 1, 0},
    {6144, 16, 2560, 0, 0},    {4608, 16, 1536, 0, 0},    {8448, 16, 2816, 0, 0},
    {6144, 32, 2560, 0, 0},    {4608, 32, 1536, 0, 0},    {8448, 32, 2816, 0, 0},
    {6144, 16, 2560, 1, 0},    {4608, 16, 1536, 1, 0},    {8448, 16, 2816, 1, 0},
    {6144, 32, 2560, 1, 0},    {4608, 32, 1536, 1, 0},    {8448, 32, 2816, 1, 0},
    {512, 24000, 2816, 0, 0},  {512, 24000, 2048, 0, 0},  {512, 24000, 2560, 0, 0},
    {512, 24000, 1536, 0, 0},  {1024, 24000, 2816, 0, 0}, {1024, 24000, 2048, 0, 0},
    {1024, 24000, 2560, 0, 0}, {1024, 24000, 1536, 0, 0}, {512, 16, 512, 0, 0},
    {1024, 16, 512, 0, 0},     {512, 24000, 2816, 1, 0},  {512, 24000, 2048, 1, 0},
    {512, 24000, 2560, 1, 0},  {512, 24000, 1536, 1, 0},  {1024, 24000, 2816, 1, 0},
    {1024, 24000, 2048, 1, 0}, {1024, 24000, 2560, 1, 0}, {1024, 24000, 1536, 1, 0},
    {512, 16, 512, 0, 1},      {1024, 16, 512, 0, 1},     {512, 48000, 2816, 0, 0},
    {512, 48000, 2048, 0, 0},  {512, 48000, 2560, 0, 0},  {512, 48000, 1536, 0, 0},
    {1024, 48000, 2816, 0, 0}, {1024, 48000, 2048, 0, 0}, {1024, 48000, 2560, 0, 0},
    {1024, 48000, 1536, 0, 0}, {512, 32, 512, 0, 0},      {1024, 32, 512, 0, 0},
    {512, 48000, 2816, 1, 0},  {512, 48000, 2048, 1, 0},  {512, 48000, 2560, 1, 0},
    {512, 48000, 1536, 1, 0},  {1024, 48000, 2816, 1, 0}, {1024, 48000, 2048, 1, 0},
    {1024, 48000, 2560, 1, 0}, {1024, 48000, 1536, 1, 0}, {512, 32, 512, 0, 1},
    {1024, 32, 512, 0, 1}};

}  // namespace

std::vector<nlohmann::json> run_suite(const std::string& suite, const OpLabOptions& base,
                                      double max_gflop) {
  AIM_CHECK(suite == "deepbench", "unknown suite '", suite,
            "' (available: deepbench; layers comes with the conv, norm and RNN ops)");
  std::vector<nlohmann::json> rows;
  int skipped = 0;
  for (const GemmCase& c : kDeepBenchGemm) {
    const double gflop = 2.0 * double(c.m) * double(c.n) * double(c.k) / 1e9;
    if (gflop > max_gflop) {
      ++skipped;
      continue;
    }
    OpLabOptions o = base;
    o.op = "matmul";
    o.shape = {c.m, c.n, c.k, 0, c.ta, c.tb};
    o.check_max_flops = 2e8;
    o.skip_ref = true;
    for (auto& r : run_op_lab(o)) {
      r["suite"] = suite;
      rows.push_back(std::move(r));
    }
  }
  std::printf("%s: %zu rows; %d cases above %g GFLOP skipped (--max-gflop)\n", suite.c_str(),
              rows.size(), skipped, max_gflop);
  return rows;
}

}  // namespace aim::bench
