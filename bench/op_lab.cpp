#include "bench/op_lab.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <memory>

#include "bench/timing.h"
#include "kernels/conv/conv2d.h"
#include "kernels/elementwise/unary.h"
#include "kernels/norm/batchnorm.h"
#include "kernels/pool/pool2d.h"
#include "kernels/registry.h"
#include "kernels/rnn/rnn.h"
#include "kernels/softmax/softmax.h"
#include "kernels/testing.h"
#include "kernels/variant_check.h"
#include "profiler/profiler.h"
#include "tensor/allocator.h"
#include "tensor/check.h"
#include "tensor/device.h"

namespace aim::bench {
namespace {

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
  if (!op.shape_fields.empty())
    AIM_CHECK(s.size() == n, "--shape for ", op.name(), ": expected ", n, " fields (",
              op.describe_shape(op.test_shapes.back()), "), got ", join(s));
  AIM_CHECK(s.size() == n, "--shape for ", op.name(), ": expected ", n,
            " fields like its test shapes (e.g. ", join(op.test_shapes.back()), "), got ", join(s),
            " (aim-bench op ", op.name(), " --shape ? lists them)");
  return s;
}

// --shape name=value,...: every declared shape field once, in any order.
std::vector<int64_t> named_shape(const kernels::OpBase& op, const std::string& spec) {
  AIM_CHECK(!op.shape_fields.empty(), "--shape for ", op.name(),
            ": the op declares no shape field names; give the numbers positionally");
  std::vector<int64_t> r(op.shape_fields.size());
  std::vector<bool> given(r.size(), false);
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t end = std::min(spec.find(',', start), spec.size());
    const std::string item = spec.substr(start, end - start);
    const size_t eq = item.find('=');
    AIM_CHECK(eq != std::string::npos, "--shape for ", op.name(), ": '", item,
              "' is not name=value");
    const std::string name = item.substr(0, eq);
    size_t k = 0;
    while (k < r.size() && op.shape_fields[k] != name) ++k;
    AIM_CHECK(k < r.size(), "--shape for ", op.name(), ": no field '", name,
              "' (fields: ", op.describe_shape(op.test_shapes.back()), ")");
    AIM_CHECK(!given[k], "--shape for ", op.name(), ": '", name, "' given twice");
    const std::string v = item.substr(eq + 1);
    char* end_ptr = nullptr;
    r[k] = std::strtoll(v.c_str(), &end_ptr, 10);
    AIM_CHECK(!v.empty() && *end_ptr == 0, "--shape for ", op.name(), ": ", name, "='", v,
              "' is not an integer");
    given[k] = true;
    start = end + 1;
  }
  for (size_t k = 0; k < r.size(); ++k)
    AIM_CHECK(given[k], "--shape for ", op.name(), ": field '", op.shape_fields[k],
              "' missing (e.g. ", op.describe_shape(op.test_shapes.back()), ")");
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// One timed case of an op: its cost, how to run a variant on it, and the registered test shapes
// that check the variant against cpu.ref before and after timing (the first one the variant takes).
struct TimedCase {
  kernels::OpBase* op = nullptr;
  nlohmann::json shape;  // for the rows: the --shape fields or a description
  kernels::Cost cost;
  std::vector<kernels::TestShape> check_shapes;
  // Runs the variant once on the case's tensors on `dev`: "" when it ran, else why it cannot.
  std::function<std::string(const kernels::VariantInfo&, Device dev)> run;
};

std::vector<std::string> split_names(const std::string& list) {
  std::vector<std::string> chosen;
  if (list == "all") return chosen;
  size_t a = 0;
  while (a <= list.size()) {
    const size_t c = list.find(',', a);
    chosen.push_back(list.substr(a, c == std::string::npos ? std::string::npos : c - a));
    if (c == std::string::npos) break;
    a = c + 1;
  }
  return chosen;
}

void print_header() {
  std::printf("%-16s %-9s %10s %10s %10s %9s %7s  %s\n", "variant", "status", "median ms", "min ms",
              "GFLOP/s", "GB/s", "%roof", "note");
}

// Every chosen variant of the case's op on `o.device`: checked, timed, checked again; one row each.
std::vector<nlohmann::json> time_variants(const TimedCase& tc, const OpLabOptions& o) {
  kernels::OpBase* op = tc.op;
  const DType dt = parse_dtype(o.dtype);
  const kernels::Backend want = o.device == "cuda" ? kernels::Backend::CUDA : kernels::Backend::CPU;
  const std::vector<std::string> chosen = split_names(o.variants);
  const profiler::Ceilings ceil = profiler::default_cpu_ceilings();
  const kernels::Cost& cost = tc.cost;
  std::vector<nlohmann::json> rows;
  for (const kernels::VariantInfo& v : op->variant_infos()) {
    if (!chosen.empty() && std::find(chosen.begin(), chosen.end(), v.name) == chosen.end())
      continue;
    nlohmann::json row = {{"bench", "op"},       {"op", op->name()},     {"variant", v.name},
                          {"shape", tc.shape},   {"dtype", o.dtype},     {"device", o.device},
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
    // Check on the first of the case's check shapes the variant takes.
    kernels::CheckResult before;
    before.status = kernels::CheckStatus::Unsupported;
    before.message = "no test shape to check on";
    kernels::TestShape check_shape;
    for (const kernels::TestShape& s : tc.check_shapes) {
      before = kernels::check_variant(*op, v.name, v.backend, s, dt, 11);
      check_shape = s;
      if (before.status != kernels::CheckStatus::Unsupported) break;
    }
    if (before.status == kernels::CheckStatus::Unsupported) {
      report("skip", before.message);
      continue;
    }
    if (before.status == kernels::CheckStatus::Fail) {
      report("FAIL", "before timing: " + before.message);
      continue;
    }
    const Device dev = kernels::device_for(v.backend);
    const std::string why = tc.run(v, dev);  // warm-up
    if (!why.empty()) {
      report("skip", why);
      continue;
    }
    // CPU: steady clock; CUDA: events on the current stream, and the L2 flushed on the device
    // (a memset of twice its size on the stream) before every repetition, outside the events.
    RepTimer timer(dev);
    const auto run_once = [&] { tc.run(v, dev); };
    // Slow variants (cpu.ref at large shapes) get fewer repetitions: ~2 s each, at least 3.
    const double warm_s = timer.time_ms(run_once) / 1e3;
    const int reps = warm_s > 0.2 ? std::max(3, std::min(o.reps, int(2.0 / warm_s))) : o.reps;
    std::vector<double> ms;
    for (int r = 0; r < reps; ++r) {
      timer.flush_caches();
      ms.push_back(timer.time_ms(run_once));
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

kernels::OpBase* find_op(const std::string& name) {
  kernels::OpBase* op = kernels::registry().find(name);
  if (!op) {
    std::string names;
    for (kernels::OpBase* p : kernels::registry().ops())
      names += (names.empty() ? "" : ", ") + p->name();
    AIM_FAIL("unknown op '", name, "' (ops: ", names, ")");
  }
  return op;
}

}  // namespace

std::vector<nlohmann::json> run_op_lab(const OpLabOptions& o) {
  kernels::OpBase* op = find_op(o.op);
  if (o.list_shapes) {
    std::cout << op->name() << ": " << op->description << "\n--shape "
              << (op->name() == "matmul" ? "M,N,K[,Bt]" : "takes the fields of its test shapes")
              << "; registered test shapes:\n";
    if (!op->shape_fields.empty()) {
      std::cout << "fields:";
      for (const auto& f : op->shape_fields) std::cout << " " << f;
      std::cout << "\n";
    }
    for (const auto& s : op->test_shapes)
      std::cout << "  " << join(s) << "    " << op->describe_shape(s) << "\n";
    return {};
  }
  const DType dt = parse_dtype(o.dtype);
  const kernels::TestShape shape =
      o.shape_named.empty() ? to_test_shape(*op, o.shape) : named_shape(*op, o.shape_named);
  AIM_CHECK(o.reps > 0, "--reps must be > 0");
  const kernels::TestCase proto = op->make_case(shape, dt, 7);
  TimedCase tc;
  tc.op = op;
  tc.shape = shape;
  tc.cost = op->case_cost(proto);
  // Checking against cpu.ref at the timed shape costs a naive run of it; above ~2 GFLOP the check
  // runs on the op's largest registered test shape (the last) instead, or for a variant that
  // does not take it (a 5x5-only convolution) on the last one before it that the variant takes.
  const bool check_here = tc.cost.flops <= o.check_max_flops;
  if (check_here)
    tc.check_shapes = {shape};
  else
    tc.check_shapes.assign(op->test_shapes.rbegin(), op->test_shapes.rend());
  // The case on each device it is run on, moved there once.
  auto on_device = std::make_shared<std::map<std::string, kernels::TestCase>>();
  tc.run = [op, proto, dt, on_device](const kernels::VariantInfo& v, Device dev) {
    auto it = on_device->find(dev.str());
    if (it == on_device->end())
      it =
          on_device->emplace(dev.str(), kernels::transfer_case(proto, dev, false, dt, false)).first;
    return op->run_case(v.name, v.backend, it->second);
  };
  std::printf(
      "aim-bench op %s --shape %s --dtype %s on %s: %.4g GFLOP, %.4g MB per call; "
      "checked on %s\n",
      op->name().c_str(), join(shape).c_str(), dtype_name(dt), o.device.c_str(),
      tc.cost.flops / 1e9, tc.cost.bytes() / 1e6,
      check_here ? "this shape"
                 : ("test shape " + join(tc.check_shapes[0]) + " (or the last before it that a " +
                    "variant takes)")
                       .c_str());
  print_header();
  return time_variants(tc, o);
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

// ---- cases built from an op's Args (ops whose TestShape encoding is their own)
// -------------------

// A case of op `name` whose Args come from build(device, dtype, fill): fill = false may leave the
// tensors unfilled (the cost needs the shapes only). The Args are built once on the device the
// variants run on, at the first run.
template <class Args>
TimedCase args_case(kernels::OpBase* op, nlohmann::json shape, DType dt,
                    std::function<Args(Device, DType, bool)> build,
                    std::function<kernels::Cost(const Args&)> cost) {
  TimedCase tc;
  tc.op = op;
  tc.shape = std::move(shape);
  tc.cost = cost(build(kCPU, dt, false));
  tc.check_shapes = op->test_shapes;
  auto built = std::make_shared<std::map<std::string, Args>>();
  const std::string name = op->name();
  tc.run = [name, dt, build, built](const kernels::VariantInfo& info, Device dev) -> std::string {
    auto it = built->find(dev.str());
    if (it == built->end()) it = built->emplace(dev.str(), build(dev, dt, true)).first;
    const Args& a = it->second;
    for (const auto& v : kernels::registry().op<Args>(name).variants()) {
      if (v.name != info.name || v.backend != info.backend) continue;
      if (v.supports) {
        const std::string why = v.supports(a);
        if (!why.empty()) return why;
      }
      v.run(a);
      return "";
    }
    return "no variant " + info.name + " of " + name;
  };
  return tc;
}

Tensor filled(const Shape& shape, DType dt, Device dev, bool fill, uint64_t seed) {
  if (!fill) return Tensor::empty(shape, dt, kCPU);
  return kernels::random_tensor(shape, dt, seed).to(dev);
}

std::string dims(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

// A 2-D convolution case in aim's layout: x [N,C,H,W], w [K,C,R,S], symmetric padding.
struct ConvCase {
  int64_t n, c, h, w, k, r, s, pad_h, pad_w, stride_h, stride_w;
  kernels::Conv2dParams params() const {
    kernels::Conv2dParams p;
    p.stride_h = stride_h;
    p.stride_w = stride_w;
    p.pad_top = p.pad_bottom = pad_h;
    p.pad_left = p.pad_right = pad_w;
    return p;
  }
  int64_t p() const { return kernels::conv2d_out_size(h, r, stride_h, pad_h, pad_h, 1); }
  int64_t q() const { return kernels::conv2d_out_size(w, s, stride_w, pad_w, pad_w, 1); }
  double gflop() const {
    return 2.0 * double(n) * double(k) * double(p()) * double(q()) * double(c) * double(r) *
           double(s) / 1e9;
  }
  std::string str() const {
    return "x=" + dims({n, c, h, w}) + " w=" + dims({k, c, r, s}) + " pad " +
           std::to_string(pad_h) + "," + std::to_string(pad_w) + " stride " +
           std::to_string(stride_h) + "," + std::to_string(stride_w);
  }
};

TimedCase conv_timed_case(kernels::OpBase* op, const ConvCase& cc, DType dt) {
  using namespace kernels;
  const Shape xs{cc.n, cc.c, cc.h, cc.w}, ws{cc.k, cc.c, cc.r, cc.s},
      ys{cc.n, cc.k, cc.p(), cc.q()};
  const std::string shape = cc.str();
  if (op->name() == "conv2d_fwd")
    return args_case<Conv2dFwdArgs>(
        op, shape, dt,
        [=](Device d, DType t, bool fill) {
          Conv2dFwdArgs a;
          a.x = filled(xs, t, d, fill, 1);
          a.w = filled(ws, t, d, fill, 2);
          a.y = fill ? Tensor::empty(ys, t, d) : Tensor::empty(ys, t, kCPU);
          a.p = cc.params();
          return a;
        },
        conv2d_fwd_cost);
  if (op->name() == "conv2d_bwd_data")
    return args_case<Conv2dBwdDataArgs>(
        op, shape, dt,
        [=](Device d, DType t, bool fill) {
          Conv2dBwdDataArgs a;
          a.dy = filled(ys, t, d, fill, 3);
          a.w = filled(ws, t, d, fill, 2);
          a.dx = fill ? Tensor::empty(xs, t, d) : Tensor::empty(xs, t, kCPU);
          a.p = cc.params();
          return a;
        },
        conv2d_bwd_data_cost);
  AIM_CHECK(op->name() == "conv2d_bwd_filter", "[bench] no conv case builder for ", op->name());
  return args_case<Conv2dBwdFilterArgs>(
      op, shape, dt,
      [=](Device d, DType t, bool fill) {
        Conv2dBwdFilterArgs a;
        a.dy = filled(ys, t, d, fill, 3);
        a.x = filled(xs, t, d, fill, 1);
        a.dw = fill ? Tensor::zeros(ws, t, d) : Tensor::empty(ws, t, kCPU);
        a.p = cc.params();
        return a;
      },
      conv2d_bwd_filter_cost);
}

// Runs suite cases: each case prints its header and one row per variant; cases above max_gflop are
// counted and skipped; ops that are not registered give one "not available" row per case.
class SuiteRunner {
 public:
  SuiteRunner(std::string suite, const OpLabOptions& base, double max_gflop)
      : suite_(std::move(suite)), base_(base), max_gflop_(max_gflop) {}

  // make() is only called when the op exists and the case is within --max-gflop.
  void run(const std::string& group, const std::string& op_name, const std::string& shape,
           double gflop, const std::function<TimedCase(kernels::OpBase*)>& make) {
    kernels::OpBase* op = kernels::registry().find(op_name);
    if (!op) {
      unavailable(group, op_name, shape);
      return;
    }
    if (gflop > max_gflop_) {
      ++skipped_;
      return;
    }
    const TimedCase tc = make(op);
    std::printf("\n[%s %s] %s %s on %s: %.4g GFLOP, %.4g MB per call\n", suite_.c_str(),
                group.c_str(), op_name.c_str(), shape.c_str(), base_.device.c_str(),
                tc.cost.flops / 1e9, tc.cost.bytes() / 1e6);
    print_header();
    OpLabOptions o = base_;
    o.skip_ref = true;
    add(group, time_variants(tc, o));
  }
  // A case of an op aim does not have yet: one row saying so (never dropped silently).
  void unavailable(const std::string& group, const std::string& op_name, const std::string& shape) {
    const std::string note = "not available: no op " + op_name + " registered yet";
    std::printf("[%s %s] %s %s: %s\n", suite_.c_str(), group.c_str(), op_name.c_str(),
                shape.c_str(), note.c_str());
    rows_.push_back({{"bench", "op"},
                     {"suite", suite_},
                     {"group", group},
                     {"op", op_name},
                     {"shape", shape},
                     {"dtype", base_.dtype},
                     {"device", base_.device},
                     {"status", "n/a"},
                     {"note", note}});
    ++unavailable_;
  }
  void add(const std::string& group, std::vector<nlohmann::json> rows) {
    for (auto& r : rows) {
      r["suite"] = suite_;
      r["group"] = group;
      rows_.push_back(std::move(r));
    }
  }
  void skip() { ++skipped_; }
  std::vector<nlohmann::json> finish() {
    std::printf(
        "%s: %zu rows; %d cases above %g GFLOP skipped (--max-gflop); %d cases not "
        "available\n",
        suite_.c_str(), rows_.size() - size_t(unavailable_), skipped_, max_gflop_, unavailable_);
    return std::move(rows_);
  }
  const OpLabOptions& base() const { return base_; }
  double max_gflop() const { return max_gflop_; }

 private:
  std::string suite_;
  OpLabOptions base_;
  double max_gflop_;
  std::vector<nlohmann::json> rows_;
  int skipped_ = 0, unavailable_ = 0;
};

// The FC / GEMM case through the matmul lab: C[M,N] = A[M,K] B[K,N].
void gemm_case(SuiteRunner& r, const std::string& group, int64_t m, int64_t n, int64_t k, int ta,
               int tb) {
  if (2.0 * double(m) * double(n) * double(k) / 1e9 > r.max_gflop()) {
    r.skip();
    return;
  }
  OpLabOptions o = r.base();
  o.op = "matmul";
  o.shape = {m, n, k, 0, ta, tb};
  o.check_max_flops = 2e8;
  o.skip_ref = true;
  std::printf("\n");
  r.add(group, run_op_lab(o));
}

// ---- DeepBench convolutions (code/kernels/conv_problems.h, training set: a representative
// subset of its 94 cases). Fields: w, h, c, n, k, filter_w (s), filter_h (r), pad_w, pad_h,
// stride_w, stride_h.
struct DeepBenchConv {
  int64_t w, h, c, n, k, s, r, pad_w, pad_h, stride_w, stride_h;
};
const DeepBenchConv kDeepBenchConv[] = {
    {700, 161, 1, 16, 32, 20, 5, 0, 0, 2, 2},  {341, 79, 32, 16, 32, 10, 5, 0, 0, 2, 2},
    {480, 48, 1, 16, 16, 3, 3, 1, 1, 1, 1},    {240, 24, 16, 16, 32, 3, 3, 1, 1, 1, 1},
    {120, 12, 32, 16, 64, 3, 3, 1, 1, 1, 1},   {60, 6, 64, 16, 128, 3, 3, 1, 1, 1, 1},
    {108, 108, 3, 8, 64, 3, 3, 1, 1, 2, 2},    {54, 54, 64, 8, 64, 3, 3, 1, 1, 1, 1},
    {27, 27, 128, 8, 128, 3, 3, 1, 1, 1, 1},   {14, 14, 128, 8, 256, 3, 3, 1, 1, 1, 1},
    {7, 7, 256, 8, 512, 3, 3, 1, 1, 1, 1},     {224, 224, 3, 16, 64, 3, 3, 1, 1, 1, 1},
    {112, 112, 64, 16, 128, 3, 3, 1, 1, 1, 1}, {56, 56, 128, 16, 256, 3, 3, 1, 1, 1, 1},
    {28, 28, 256, 16, 512, 3, 3, 1, 1, 1, 1},  {14, 14, 512, 16, 512, 3, 3, 1, 1, 1, 1},
    {7, 7, 512, 16, 512, 3, 3, 1, 1, 1, 1},    {224, 224, 3, 16, 64, 7, 7, 3, 3, 2, 2},
    {28, 28, 192, 16, 32, 5, 5, 2, 2, 1, 1},   {28, 28, 192, 16, 64, 1, 1, 0, 0, 1, 1},
    {14, 14, 512, 16, 48, 5, 5, 2, 2, 1, 1},   {7, 7, 832, 16, 256, 1, 1, 0, 0, 1, 1},
    {56, 56, 64, 16, 256, 1, 1, 0, 0, 2, 2},   {28, 28, 128, 16, 512, 1, 1, 0, 0, 2, 2},
    {14, 14, 256, 16, 1024, 1, 1, 0, 0, 2, 2}, {7, 7, 2048, 16, 512, 1, 1, 3, 3, 2, 2},
    {700, 161, 1, 16, 64, 5, 5, 1, 1, 2, 2},   {350, 80, 64, 16, 128, 5, 5, 1, 1, 2, 2},
    {112, 112, 64, 16, 64, 1, 1, 0, 0, 1, 1},  {56, 56, 256, 16, 64, 1, 1, 0, 0, 1, 1}};

// ---- AI Matrix layer-based benchmark (alibaba/ai-matrix layer-based_benchmark/cnn/params/*;
// MODELS.md §8). Shapes there are NHWC inputs and HWIO filters with VALID padding: aim runs the
// same problems in NCHW.
struct AimConv {  // conv.params and conv2.params: [N,H,W,C] [KH,KW,Cin,Cout] stride
  int64_t n, h, w, c, kh, kw, cout, stride;
};
const AimConv kAimConv[] = {{64, 227, 227, 3, 11, 11, 96, 4},
                            {64, 27, 27, 96, 5, 5, 256, 1},
                            {64, 13, 13, 256, 3, 3, 384, 1},
                            {64, 13, 13, 384, 3, 3, 384, 1},
                            {64, 13, 13, 384, 3, 3, 256, 1},
                            {10, 224, 224, 3, 7, 7, 64, 2},
                            {10, 56, 56, 64, 1, 1, 64, 1},
                            {10, 56, 56, 64, 3, 3, 192, 1},
                            {10, 28, 28, 192, 1, 1, 64, 1},
                            {10, 28, 28, 192, 1, 1, 96, 1},
                            {10, 28, 28, 192, 1, 1, 16, 1},
                            {10, 28, 28, 196, 3, 3, 128, 1},
                            {10, 28, 28, 16, 5, 5, 32, 1},
                            {10, 28, 28, 192, 1, 1, 32, 1},
                            {10, 224, 224, 3, 3, 3, 64, 1},
                            {10, 224, 224, 64, 3, 3, 64, 1},
                            {10, 112, 112, 64, 3, 3, 128, 1},
                            {10, 112, 112, 128, 3, 3, 128, 1},
                            {10, 56, 56, 128, 3, 3, 256, 1},
                            {10, 56, 56, 256, 3, 3, 256, 1},
                            {10, 224, 224, 3, 7, 7, 64, 2},
                            {10, 56, 56, 64, 1, 1, 64, 1},
                            {10, 56, 56, 64, 3, 3, 64, 1},
                            {10, 56, 56, 64, 1, 1, 256, 1},
                            {10, 56, 56, 256, 1, 1, 64, 1},
                            {10, 56, 56, 256, 1, 1, 128, 2},
                            {10, 28, 28, 128, 3, 3, 128, 1},
                            {10, 28, 28, 128, 1, 1, 512, 1},
                            {10, 28, 28, 512, 1, 1, 128, 1},
                            {10, 28, 28, 512, 1, 1, 256, 2},
                            {10, 14, 14, 256, 1, 1, 1024, 1},
                            {10, 14, 14, 1024, 1, 1, 256, 1},
                            {10, 14, 14, 1024, 1, 1, 256, 1},
                            {10, 14, 14, 256, 3, 3, 256, 1},
                            {10, 14, 14, 1024, 1, 1, 512, 2},
                            {10, 7, 7, 512, 3, 3, 512, 1},
                            {10, 7, 7, 512, 1, 1, 2048, 1},
                            {10, 7, 7, 2048, 1, 1, 512, 1},
                            {1, 224, 224, 3, 7, 7, 64, 2},
                            {1, 56, 56, 64, 1, 1, 64, 1},
                            {1, 56, 56, 64, 3, 3, 64, 1},
                            {1, 56, 56, 64, 1, 1, 256, 1},
                            {1, 56, 56, 256, 1, 1, 64, 1},
                            {1, 56, 56, 256, 1, 1, 128, 2},
                            {1, 28, 28, 128, 3, 3, 128, 1},
                            {1, 28, 28, 128, 1, 1, 512, 1},
                            {1, 56, 56, 256, 1, 1, 512, 2},
                            {1, 28, 28, 512, 1, 1, 128, 1},
                            {1, 28, 28, 128, 1, 1, 512, 1},
                            {1, 28, 28, 512, 1, 1, 256, 2},
                            {1, 14, 14, 256, 3, 3, 256, 1},
                            {1, 28, 28, 512, 1, 1, 1024, 2},
                            {1, 14, 14, 256, 1, 1, 1024, 1},
                            {1, 14, 14, 1024, 1, 1, 256, 1},
                            {1, 14, 14, 1024, 1, 1, 512, 2},
                            {1, 7, 7, 512, 3, 3, 512, 1},
                            {1, 7, 7, 512, 1, 1, 2048, 1},
                            {1, 14, 14, 1024, 1, 1, 2048, 2},
                            {1, 7, 7, 512, 3, 3, 512, 1},
                            {1, 224, 224, 3, 7, 7, 64, 2},
                            {1, 57, 57, 64, 1, 1, 128, 1},
                            {1, 57, 57, 128, 3, 3, 32, 1},
                            {1, 57, 57, 96, 1, 1, 128, 1},
                            {1, 57, 57, 128, 3, 3, 32, 1},
                            {1, 57, 57, 128, 1, 1, 128, 1},
                            {1, 57, 57, 160, 1, 1, 128, 1},
                            {1, 57, 57, 192, 1, 1, 128, 1},
                            {1, 57, 57, 224, 1, 1, 128, 1},
                            {1, 57, 57, 256, 1, 1, 128, 1},
                            {1, 29, 29, 128, 1, 1, 128, 1},
                            {1, 29, 29, 128, 3, 3, 32, 1},
                            {1, 29, 29, 160, 1, 1, 128, 1},
                            {1, 29, 29, 128, 3, 3, 32, 1},
                            {1, 29, 29, 192, 1, 1, 128, 1},
                            {1, 29, 29, 256, 1, 1, 128, 1},
                            {1, 29, 29, 288, 1, 1, 128, 1},
                            {1, 29, 29, 320, 1, 1, 128, 1},
                            {1, 29, 29, 352, 1, 1, 128, 1},
                            {1, 29, 29, 384, 1, 1, 128, 1},
                            {1, 29, 29, 416, 1, 1, 128, 1},
                            {1, 29, 29, 448, 1, 1, 128, 1},
                            {1, 29, 29, 480, 1, 1, 128, 1},
                            {1, 29, 29, 512, 1, 1, 256, 1},
                            {1, 15, 15, 256, 1, 1, 128, 1},
                            {1, 15, 15, 128, 3, 3, 32, 1},
                            {1, 15, 15, 288, 1, 1, 128, 1},
                            {1, 15, 15, 320, 1, 1, 128, 1},
                            {1, 15, 15, 352, 1, 1, 128, 1},
                            {1, 15, 15, 384, 1, 1, 128, 1},
                            {1, 15, 15, 416, 1, 1, 128, 1},
                            {1, 15, 15, 448, 1, 1, 128, 1},
                            {1, 15, 15, 480, 1, 1, 128, 1},
                            {1, 15, 15, 512, 1, 1, 128, 1},
                            {1, 15, 15, 544, 1, 1, 128, 1},
                            {1, 15, 15, 576, 1, 1, 128, 1},
                            {1, 15, 15, 608, 1, 1, 128, 1},
                            {1, 15, 15, 640, 1, 1, 128, 1},
                            {1, 15, 15, 672, 1, 1, 128, 1},
                            {1, 15, 15, 704, 1, 1, 128, 1},
                            {1, 15, 15, 736, 1, 1, 128, 1},
                            {1, 15, 15, 768, 1, 1, 128, 1},
                            {1, 15, 15, 800, 1, 1, 128, 1},
                            {1, 15, 15, 832, 1, 1, 128, 1},
                            {1, 15, 15, 864, 1, 1, 128, 1},
                            {1, 15, 15, 896, 1, 1, 128, 1},
                            {1, 15, 15, 928, 1, 1, 128, 1},
                            {1, 15, 15, 960, 1, 1, 128, 1},
                            {1, 15, 15, 992, 1, 1, 128, 1},
                            {1, 15, 15, 1024, 1, 1, 512, 1},
                            // conv2.params: AlexNet's first layer at N=1 with few output channels.
                            {1, 227, 227, 3, 11, 11, 1, 4},
                            {1, 227, 227, 3, 11, 11, 11, 4},
                            {1, 227, 227, 3, 11, 11, 21, 4},
                            {1, 227, 227, 3, 11, 11, 31, 4},
                            {1, 227, 227, 3, 11, 11, 41, 4},
                            {1, 227, 227, 3, 11, 11, 51, 4}};

struct AimFc {  // fc.params: input [N,...] flattened to [N,D], outputs
  int64_t n, d, out;
};
const AimFc kAimFc[] = {{64, 6 * 6 * 256, 4096}, {64, 4096, 4096}, {64, 4096, 1000},
                        {10, 7 * 7 * 512, 4096}, {10, 4096, 4096}, {10, 4096, 1000},
                        {10, 2048, 1000},        {1, 2048, 1000},  {1, 1024, 1000}};

struct AimPool {  // pool.params: [N,H,W,C] kernel stride_h stride_w (VALID)
  int64_t n, h, w, c, k, sh, sw;
};
const AimPool kAimPool[] = {
    {64, 55, 55, 96, 3, 2, 2},    {64, 27, 27, 256, 3, 2, 2}, {64, 13, 13, 256, 3, 2, 2},
    {10, 112, 112, 64, 3, 2, 2},  {10, 56, 56, 192, 3, 2, 2}, {10, 28, 28, 192, 3, 1, 1},
    {10, 28, 28, 256, 3, 1, 1},   {10, 28, 28, 480, 3, 2, 2}, {10, 14, 14, 480, 3, 1, 1},
    {10, 14, 14, 512, 3, 1, 1},   {10, 14, 14, 528, 3, 1, 1}, {10, 14, 14, 832, 3, 2, 2},
    {10, 7, 7, 832, 3, 1, 1},     {10, 7, 7, 1024, 7, 1, 1},  {10, 224, 224, 64, 2, 2, 2},
    {10, 112, 112, 228, 2, 2, 2}, {10, 56, 56, 256, 2, 2, 2}, {10, 28, 28, 512, 2, 2, 2},
    {10, 14, 14, 512, 2, 2, 2},   {1, 112, 112, 64, 3, 2, 2}, {1, 57, 57, 128, 2, 2, 2},
    {1, 29, 29, 256, 2, 2, 2},    {1, 15, 15, 512, 2, 2, 1},  {1, 8, 8, 1024, 1, 1, 1}};

// normal.params (batch normalisation) and active.params (relu, sigmoid, tanh, softmax): [N,H,W,C]
// or [N,D] tensors.
const std::vector<std::vector<int64_t>> kAimNormal = {
    {10, 112, 112, 64}, {10, 56, 56, 64},  {10, 56, 56, 256}, {10, 28, 28, 128}, {10, 28, 28, 512},
    {1, 64, 64, 112},   {1, 56, 56, 64},   {1, 56, 56, 256},  {1, 28, 28, 128},  {1, 28, 28, 512},
    {1, 14, 14, 256},   {1, 14, 14, 1024}, {1, 7, 7, 512},    {1, 7, 7, 2048},   {1, 112, 112, 64},
    {1, 57, 57, 64},    {1, 57, 57, 96},   {1, 57, 57, 128},  {1, 57, 57, 160},  {1, 57, 57, 192},
    {1, 57, 57, 224},   {1, 57, 57, 256},  {1, 29, 29, 128},  {1, 29, 29, 160},  {1, 29, 29, 192},
    {1, 29, 29, 224},   {1, 29, 29, 256},  {1, 29, 29, 288},  {1, 29, 29, 320},  {1, 29, 29, 352},
    {1, 29, 29, 384},   {1, 29, 29, 416},  {1, 29, 29, 448},  {1, 29, 29, 480},  {1, 29, 29, 512},
    {1, 15, 15, 128},   {1, 15, 15, 216},  {1, 15, 15, 320},  {1, 15, 15, 352},  {1, 15, 15, 384},
    {1, 15, 15, 416},   {1, 15, 15, 448},  {1, 15, 15, 480},  {1, 15, 15, 512},  {1, 15, 15, 544},
    {1, 15, 15, 576},   {1, 15, 15, 608},  {1, 15, 15, 640},  {1, 15, 15, 672},  {1, 15, 15, 704},
    {1, 15, 15, 736},   {1, 15, 15, 768},  {1, 15, 15, 800},  {1, 15, 15, 832},  {1, 15, 15, 864},
    {1, 15, 15, 892},   {1, 15, 15, 928},  {1, 15, 15, 960},  {1, 15, 15, 992},  {1, 15, 15, 1024},
    {1, 8, 8, 512},     {1, 8, 8, 544},    {1, 8, 8, 576},    {1, 8, 8, 608},    {1, 8, 8, 640},
    {1, 8, 8, 672},     {1, 8, 8, 704},    {1, 8, 8, 736},    {1, 8, 8, 768},    {1, 8, 8, 800},
    {1, 8, 8, 832},     {1, 8, 8, 864},    {1, 8, 8, 896},    {1, 8, 8, 928},    {1, 8, 8, 960},
    {1, 8, 8, 992},     {1, 8, 8, 1024}};
const std::vector<std::vector<int64_t>> kAimActive = {
    {64, 55, 55, 96},  {64, 27, 27, 256},  {64, 13, 13, 384},   {64, 13, 13, 256},
    {64, 4096},        {64, 4096},         {10, 112, 112, 64},  {10, 56, 56, 64},
    {10, 28, 28, 96},  {10, 28, 28, 128},  {10, 28, 28, 192},   {10, 14, 14, 112},
    {10, 14, 14, 224}, {10, 14, 14, 256},  {10, 14, 14, 288},   {10, 14, 14, 320},
    {10, 7, 7, 384},   {10, 224, 224, 64}, {10, 112, 112, 128}, {10, 56, 56, 256},
    {10, 28, 28, 512}, {19, 14, 14, 512},  {10, 4096},          {1, 112, 112, 64},
    {1, 56, 56, 64},   {1, 56, 56, 256},   {1, 28, 28, 128},    {1, 28, 28, 512},
    {1, 14, 14, 256},  {1, 14, 14, 1024},  {1, 14, 14, 256},    {1, 7, 7, 512},
    {1, 7, 7, 2048},   {1, 112, 112, 64},  {1, 57, 57, 64},     {1, 57, 57, 96},
    {1, 57, 57, 128},  {1, 57, 57, 160},   {1, 57, 57, 192},    {1, 57, 57, 224},
    {1, 57, 57, 256},  {1, 29, 29, 128},   {1, 29, 29, 160},    {1, 29, 29, 192},
    {1, 29, 29, 224},  {1, 29, 29, 256},   {1, 29, 29, 288},    {1, 29, 29, 320},
    {1, 29, 29, 352},  {1, 29, 29, 384},   {1, 29, 29, 416},    {1, 29, 29, 448},
    {1, 29, 29, 480},  {1, 29, 29, 512},   {1, 15, 15, 128},    {1, 15, 15, 216},
    {1, 15, 15, 320},  {1, 15, 15, 352},   {1, 15, 15, 384},    {1, 15, 15, 416},
    {1, 15, 15, 448},  {1, 15, 15, 480},   {1, 15, 15, 512},    {1, 15, 15, 544},
    {1, 15, 15, 576},  {1, 15, 15, 608},   {1, 15, 15, 640},    {1, 15, 15, 672},
    {1, 15, 15, 704},  {1, 15, 15, 736},   {1, 15, 15, 768},    {1, 15, 15, 800},
    {1, 15, 15, 832},  {1, 15, 15, 864},   {1, 15, 15, 892},    {1, 15, 15, 928},
    {1, 15, 15, 960},  {1, 15, 15, 992},   {1, 15, 15, 1024},   {1, 8, 8, 512},
    {1, 8, 8, 544},    {1, 8, 8, 576},     {1, 8, 8, 608},      {1, 8, 8, 640},
    {1, 8, 8, 672},    {1, 8, 8, 704},     {1, 8, 8, 736},      {1, 8, 8, 768},
    {1, 8, 8, 800},    {1, 8, 8, 832},     {1, 8, 8, 864},      {1, 8, 8, 896},
    {1, 8, 8, 928},    {1, 8, 8, 960},     {1, 8, 8, 992},      {1, 8, 8, 1024}};

// NHWC [N,H,W,C] -> aim's NCHW [N,C,H,W]; 2-D shapes stay.
Shape nchw(const std::vector<int64_t>& nhwc) {
  if (nhwc.size() != 4) return nhwc;
  return {nhwc[0], nhwc[3], nhwc[1], nhwc[2]};
}

void layers_suite(SuiteRunner& r, DType dt) {
  using namespace kernels;
  for (const AimFc& f : kAimFc) gemm_case(r, "fc", f.n, f.out, f.d, 0, 0);
  for (const AimConv& c : kAimConv) {
    const ConvCase cc{c.n, c.c, c.h, c.w, c.cout, c.kh, c.kw, 0, 0, c.stride, c.stride};
    r.run("conv", "conv2d_fwd", cc.str(), cc.gflop(),
          [&](OpBase* op) { return conv_timed_case(op, cc, dt); });
  }
  for (const AimPool& p : kAimPool) {
    const Shape xs{p.n, p.c, p.h, p.w};
    Pool2dParams pp;
    pp.kernel_h = pp.kernel_w = p.k;
    pp.stride_h = p.sh;
    pp.stride_w = p.sw;
    const Shape ys{p.n, p.c, (p.h - p.k) / p.sh + 1, (p.w - p.k) / p.sw + 1};
    const std::string shape = "x=" + dims(xs) + " kernel " + std::to_string(p.k) + " stride " +
                              std::to_string(p.sh) + "," + std::to_string(p.sw);
    const double gflop = double(ys[0] * ys[1] * ys[2] * ys[3]) * double(p.k * p.k) / 1e9;
    r.run("pool", "maxpool2d_fwd", shape, gflop, [&](OpBase* op) {
      return args_case<MaxPool2dFwdArgs>(
          op, shape, dt,
          [=](Device d, DType t, bool fill) {
            MaxPool2dFwdArgs a;
            a.x = filled(xs, t, d, fill, 1);
            a.y = fill ? Tensor::empty(ys, t, d) : Tensor::empty(ys, t, kCPU);
            a.p = pp;
            return a;
          },
          maxpool2d_fwd_cost);
    });
    r.run("pool", "avgpool2d_fwd", shape, gflop, [&](OpBase* op) {
      return args_case<AvgPool2dFwdArgs>(
          op, shape, dt,
          [=](Device d, DType t, bool fill) {
            AvgPool2dFwdArgs a;
            a.x = filled(xs, t, d, fill, 1);
            a.y = fill ? Tensor::empty(ys, t, d) : Tensor::empty(ys, t, kCPU);
            a.p = pp;
            return a;
          },
          avgpool2d_fwd_cost);
    });
  }
  // tf.nn.batch_normalization with constant statistics: the inference form.
  for (const auto& s : kAimNormal) {
    const Shape xs = nchw(s);
    const int64_t C = xs[1];
    const std::string shape = "x=" + dims(xs) + " inference";
    r.run("batchnorm", "batchnorm_fwd", shape, 2.0 * double(shape_numel(xs)) / 1e9,
          [&](OpBase* op) {
            return args_case<BatchNormFwdArgs>(
                op, shape, dt,
                [=](Device d, DType t, bool fill) {
                  const DType st = batchnorm_stat_dtype(t);
                  const Device pd = fill ? d : kCPU;
                  BatchNormFwdArgs a;
                  a.x = filled(xs, t, d, fill, 1);
                  a.gamma = Tensor::full({C}, 8.6, st, pd);
                  a.beta = Tensor::full({C}, 2.3, st, pd);
                  a.running_mean = Tensor::full({C}, 0.35, st, pd);
                  a.running_var = Tensor::full({C}, 0.55, st, pd);
                  a.y = Tensor::empty(xs, t, pd);
                  a.training = false;
                  a.eps = 0.03;
                  return a;
                },
                batchnorm_fwd_cost);
          });
  }
  const std::pair<const char*, UnaryKind> kinds[] = {
      {"relu", UnaryKind::relu}, {"sigmoid", UnaryKind::sigmoid}, {"tanh", UnaryKind::tanh}};
  for (const auto& s : kAimActive) {
    const Shape xs = nchw(s);
    for (const auto& [kname, kind] : kinds) {
      const std::string shape = std::string(kname) + " x=" + dims(xs);
      const UnaryKind k = kind;
      r.run("activation", "unary", shape, double(shape_numel(xs)) / 1e9, [&](OpBase* op) {
        return args_case<UnaryArgs>(
            op, shape, dt,
            [=](Device d, DType t, bool fill) {
              UnaryArgs a;
              a.x = filled(xs, t, d, fill, 1);
              a.y = Tensor::empty(xs, t, fill ? d : kCPU);
              a.kind = k;
              return a;
            },
            unary_cost);
      });
    }
    // Softmax over the channels (TF's last NHWC axis): rows of C.
    const int64_t C = s.back();
    const Shape rows{shape_numel(s) / C, C};
    const std::string shape = "softmax x=" + dims(rows);
    r.run("activation", "softmax", shape, 3.0 * double(shape_numel(rows)) / 1e9, [&](OpBase* op) {
      return args_case<SoftmaxArgs>(
          op, shape, dt,
          [=](Device d, DType t, bool fill) {
            SoftmaxArgs a;
            a.x = filled(rows, t, d, fill, 1);
            a.y = Tensor::empty(rows, t, fill ? d : kCPU);
            a.dim = 1;
            return a;
          },
          softmax_cost);
    });
  }
  // RNN cells (rnn_ops.py, cudnn_rnn_ops.py): batch {16,32} x seq {32,64} x input 64 x hidden
  // 256..2560 step 256, per cell type: one direction of one layer, forward, all lengths = seq.
  // The plain tanh RNN cell is not an aim op.
  const std::pair<const char*, RnnCell> cells[] = {{"lstm", RnnCell::LSTM}, {"gru", RnnCell::GRU}};
  for (const auto& [cname, cell_kind] : cells)
    for (int64_t batch : {16, 32})
      for (int64_t seq : {32, 64})
        for (int64_t hidden = 256; hidden <= 2560; hidden += 256) {
          const RnnCell cell = cell_kind;
          const int64_t G = rnn_gates(cell), B = batch, T = seq, H = hidden, I = 64;
          const std::string shape = std::string(cname) + " T=" + std::to_string(T) +
                                    " B=" + std::to_string(B) + " I=64 H=" + std::to_string(H);
          const double gflop = 2.0 * double(T * B * G * H * (I + H)) / 1e9;
          r.run("rnn", "rnn_fwd", shape, gflop, [&](OpBase* op) {
            return args_case<RnnFwdArgs>(
                op, shape, dt,
                [=](Device d, DType t, bool fill) {
                  RnnFwdArgs a;
                  a.cell = cell;
                  a.x = filled({T, B, I}, t, d, fill, 1);
                  a.w_ih = filled({G * H, I}, t, d, fill, 2);
                  a.w_hh = filled({G * H, H}, t, d, fill, 3);
                  a.b_ih = filled({G * H}, t, d, fill, 4);
                  a.b_hh = filled({G * H}, t, d, fill, 5);
                  a.y = Tensor::empty({T, B, H}, t, fill ? d : kCPU);
                  return a;
                },
                rnn_fwd_cost);
          });
        }
  for (int64_t batch : {16, 32})
    for (int64_t seq : {32, 64})
      for (int64_t hidden = 256; hidden <= 2560; hidden += 256)
        r.unavailable("rnn", "rnn_tanh_fwd",
                      "batch " + std::to_string(batch) + " seq " + std::to_string(seq) +
                          " input 64 hidden " + std::to_string(hidden));
}

}  // namespace

std::vector<nlohmann::json> run_suite(const std::string& suite, const OpLabOptions& base,
                                      double max_gflop) {
  AIM_CHECK(suite == "deepbench" || suite == "layers", "unknown suite '", suite,
            "' (available: deepbench, layers)");
  AIM_CHECK(base.reps > 0, "--reps must be > 0");
  const DType dt = parse_dtype(base.dtype);
  SuiteRunner r(suite, base, max_gflop);
  if (suite == "layers") {
    layers_suite(r, dt);
    return r.finish();
  }
  for (const GemmCase& c : kDeepBenchGemm) gemm_case(r, "gemm", c.m, c.n, c.k, c.ta, c.tb);
  // Convolutions: forward, backward data and backward filter of each case (training).
  for (const DeepBenchConv& d : kDeepBenchConv) {
    const ConvCase cc{d.n, d.c, d.h, d.w, d.k, d.r, d.s, d.pad_h, d.pad_w, d.stride_h, d.stride_w};
    for (const char* op : {"conv2d_fwd", "conv2d_bwd_data", "conv2d_bwd_filter"})
      r.run("conv", op, cc.str(), cc.gflop(),
            [&](kernels::OpBase* o) { return conv_timed_case(o, cc, dt); });
  }
  return r.finish();
}

}  // namespace aim::bench
