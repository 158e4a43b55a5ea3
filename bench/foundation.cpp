#include "bench/foundation.h"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <functional>

#include "bench/peak_cpu.h"
#include "bench/timing.h"
#include "bench/train_step.h"
#include "kernels/elementwise/binary.h"
#include "kernels/matmul/matmul.h"
#include "kernels/norm/layernorm.h"
#include "kernels/registry.h"
#include "kernels/softmax/softmax.h"
#include "kernels/testing.h"
#include "kernels/variant_check.h"
#include "profiler/roofline.h"

// GPU measurements need a real GPU: the emulated CUDA device (AIM_CUDA_EMULATED) has no timing
// worth reporting and no cuBLAS.
#if defined(AIM_CUDA) && !defined(AIM_CUDA_EMULATED)
#define AIM_BENCH_CUDA 1
#endif
#ifdef AIM_BENCH_CUDA
#include <cuda_runtime.h>

#include <cstring>

#include "bench/peak_cuda.h"
#include "kernels/vendor.h"
#include "tensor/cuda_check.h"
#endif

namespace aim::bench {
using nlohmann::json;
using namespace aim::kernels;

namespace {

// Best-of-reps wall time of fn on `device` in seconds (CUDA: events on the current stream).
double time_best(Device device, int warmup, int reps, const std::function<void()>& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  RepTimer timer(device);
  double best = 1e30;
  for (int i = 0; i < reps; ++i) best = std::min(best, timer.time_ms(fn) / 1e3);
  return best;
}

// Checks `variant` of `op` against cpu.ref on every f32 test shape it supports; throws on a
// mismatch so no number is ever reported for a wrong kernel.
void check_or_throw(const std::string& op_name, const std::string& variant, Backend b) {
  OpBase* op = registry().find(op_name);
  AIM_CHECK(op, "no op ", op_name);
  int passed = 0;
  uint64_t seed = 99;
  for (const TestShape& s : op->test_shapes) {
    const CheckResult r = check_variant(*op, variant, b, s, DType::f32, seed++);
    AIM_CHECK(r.status != CheckStatus::Fail, "[bench] ", op_name, " ", variant,
              " fails its check: ", r.message);
    passed += r.status == CheckStatus::Pass;
  }
  AIM_CHECK(passed > 0, "[bench] ", op_name, " ", variant, " ran on none of its test shapes");
}

void print_row(const json& r) {
  std::printf("%-44s %12.2f %-8s  %s\n", r["name"].get<std::string>().c_str(),
              r["value"].get<double>(), r["unit"].get<std::string>().c_str(),
              r.value("note", std::string()).c_str());
}

json row(const std::string& name, double value, const std::string& unit,
         const std::string& note = "") {
  json r = {{"name", name}, {"value", value}, {"unit", unit}, {"threads", omp_get_max_threads()}};
  if (!note.empty()) r["note"] = note;
  print_row(r);
  return r;
}

// A peak row that is also a roofline ceiling: `key` is its field in the --ceilings JSON
// (profiler::load_ceilings); several rows of one key keep the best.
json ceiling_row(const std::string& name, double value, const std::string& unit,
                 const std::string& key, const std::string& device_name,
                 const std::string& note = "") {
  json r = row(name, value, unit, note);
  r["ceiling"] = key;
  r["device_name"] = device_name;
  return r;
}

std::string pct(double num, double den, double target) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "%.1f%% (target >= %.0f%%: %s)", 100 * num / den, target,
                100 * num / den >= target ? "met" : "NOT met");
  return buf;
}

std::vector<json> cpu_foundation(bool quick) {
  std::vector<json> rows;
  const char* isa = "";
  const double peak = peak_fma_gflops(&isa);
  rows.push_back(row(std::string("cpu peak fp32 FMA (") + isa + ")", peak, "GFLOP/s"));
  const int64_t n = quick ? (int64_t(1) << 22) : (int64_t(64) << 20);
  const double triad = triad_gbps(n, quick ? 3 : 5);
  rows.push_back(row("cpu triad bandwidth", triad, "GB/s", "12 bytes per element"));

  // Matmul at 4096x4096x1024 (M x N x K), every CPU variant and the default, side by side.
  const int64_t M = quick ? 512 : 4096, N = quick ? 512 : 4096, K = quick ? 256 : 1024;
  MatmulArgs mm;
  mm.a = random_tensor({M, K}, DType::f32, 1);
  mm.b = random_tensor({K, N}, DType::f32, 2);
  mm.c = Tensor::empty({M, N});
  const double flops = 2.0 * double(M) * double(N) * double(K);
  auto& op = registry().op<MatmulArgs>("matmul");
  const std::string def = op.default_variant(Backend::CPU, DType::f32);
  for (const auto& v : op.variants()) {
    if (v.backend != Backend::CPU || v.name == "cpu.ref") continue;
    if (std::find(v.dtypes.begin(), v.dtypes.end(), DType::f32) == v.dtypes.end())
      continue;  // 16-bit only (cpu.widen)
    if (v.supports && !v.supports(mm).empty()) {
      std::printf("%-44s %12s %-8s  %s\n", ("matmul " + v.name).c_str(), "-", "",
                  v.supports(mm).c_str());
      continue;
    }
    check_or_throw("matmul", v.name, Backend::CPU);
    ScopedVariant use("matmul", v.name);
    const double t = time_best(kCPU, 1, quick ? 2 : 4, [&] { matmul(mm); });
    const double gf = flops / t / 1e9;
    const std::string label = "matmul " + std::to_string(M) + "x" + std::to_string(N) + "x" +
                              std::to_string(K) + " " + v.name +
                              (v.name == def ? " (default)" : "");
    rows.push_back(row(
        label, gf, "GFLOP/s",
        v.name == def ? pct(gf, peak, 80) + " of FMA peak" : pct(gf, peak, 0) + " of FMA peak"));
  }

  // Elementwise add on 64 Mi floats (default variant) vs the triad.
  BinaryArgs add;
  add.a = Tensor::full({n}, 1.0);
  add.b = Tensor::full({n}, 2.0);
  add.y = Tensor::full({n}, 0.0);
  add.kind = BinaryKind::add;
  check_or_throw("binary", registry().find("binary")->default_variant(Backend::CPU), Backend::CPU);
  const double t = time_best(kCPU, 1, quick ? 3 : 5, [&] { binary(add); });
  const double gbps = 12.0 * double(n) / t / 1e9;
  rows.push_back(
      row("add 64 Mi f32 (" + registry().find("binary")->default_variant(Backend::CPU) + ")", gbps,
          "GB/s", pct(gbps, triad, 60) + " of triad"));

  // Allocator: a training step's allocations come from the cache after the first step.
  const TrainStepAllocStats st = train_step_allocations(kCPU, 4);
  for (size_t i = 0; i < st.system_allocs_per_step.size(); ++i)
    rows.push_back(row("train step " + std::to_string(i + 1) + ": system allocations",
                       double(st.system_allocs_per_step[i]), "allocs",
                       "cache hits " + std::to_string(st.cache_hits_per_step[i]) + " of " +
                           std::to_string(st.allocs_per_step[i]) + " allocations"));
  return rows;
}

#ifdef AIM_BENCH_CUDA
std::vector<json> cuda_foundation(bool quick) {
  std::vector<json> rows;
  AIM_CHECK(cuda_device_count() > 0, "--device cuda: ", cuda_unavailable_reason());
  const Device d = cuda_device(0);
  cudaDeviceProp prop{};
  AIM_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("GPU: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  // Device copy bandwidth (read + write counted).
  const int64_t n = quick ? (int64_t(1) << 24) : (int64_t(256) << 20);
  Tensor src = Tensor::full({n}, 1.0, DType::f32, d), dst = Tensor::empty({n}, DType::f32, d);
  auto s = static_cast<cudaStream_t>(current_stream(0));
  const double tc = time_best(d, 2, 10, [&] {
    AIM_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), size_t(n) * 4,
                                   cudaMemcpyDeviceToDevice, s));
  });
  const double copy_bw = 8.0 * double(n) / tc / 1e9;
  rows.push_back(row("cuda copy bandwidth", copy_bw, "GB/s", "read + write"));

  // Matmul fp32 4096^3: own tiled vs cuBLAS.
  const int64_t S = quick ? 1024 : 4096;
  MatmulArgs mm;
  mm.a = random_tensor({S, S}, DType::f32, 1).to(d);
  mm.b = random_tensor({S, S}, DType::f32, 2).to(d);
  mm.c = Tensor::empty({S, S}, DType::f32, d);
  double gf[2] = {0, 0};
  const char* names[2] = {"cuda.tiled", "cuda.cublas"};
  for (int i = 0; i < 2; ++i) {
    check_or_throw("matmul", names[i], Backend::CUDA);
    ScopedVariant use("matmul", names[i]);
    const double t = time_best(d, 2, 5, [&] { matmul(mm); });
    gf[i] = 2.0 * double(S) * S * S / t / 1e9;
    rows.push_back(row(std::string("matmul fp32 ") + std::to_string(S) + "^3 " + names[i], gf[i],
                       "GFLOP/s", i == 0 ? "" : "tiled/cublas " + pct(gf[0], gf[1], 60)));
  }

  // Bandwidth-bound ops vs the copy bandwidth: bytes from each op's Cost.
  {
    BinaryArgs add;
    add.a = Tensor::full({n}, 1.0, DType::f32, d);
    add.b = Tensor::full({n}, 2.0, DType::f32, d);
    add.y = Tensor::empty({n}, DType::f32, d);
    const std::string v = registry().find("binary")->default_variant(Backend::CUDA);
    check_or_throw("binary", v, Backend::CUDA);
    const double t = time_best(d, 2, 10, [&] { binary(add); });
    const double bw = 12.0 * double(n) / t / 1e9;
    rows.push_back(row("cuda add f32 (" + v + ")", bw, "GB/s", pct(bw, copy_bw, 80) + " of copy"));
  }
  {
    const int64_t R = quick ? 1024 : 16384, C = 4096;
    SoftmaxArgs sm;
    sm.x = random_tensor({R, C}, DType::f32, 3).to(d);
    sm.y = Tensor::empty({R, C}, DType::f32, d);
    sm.dim = 1;
    const std::string v = registry().find("softmax")->default_variant(Backend::CUDA);
    check_or_throw("softmax", v, Backend::CUDA);
    const double t = time_best(d, 2, 10, [&] { softmax(sm); });
    const double bw = 8.0 * double(R * C) / t / 1e9;
    rows.push_back(row("cuda softmax [" + std::to_string(R) + ",4096] (" + v + ")", bw, "GB/s",
                       pct(bw, copy_bw, 80) + " of copy"));
    LayerNormFwdArgs ln;
    ln.x = sm.x;
    ln.gamma = Tensor::ones({C}, DType::f32, d);
    ln.beta = Tensor::zeros({C}, DType::f32, d);
    ln.y = sm.y;
    ln.mean = Tensor::empty({R}, DType::f32, d);
    ln.rstd = Tensor::empty({R}, DType::f32, d);
    const std::string lv = registry().find("layernorm_fwd")->default_variant(Backend::CUDA);
    check_or_throw("layernorm_fwd", lv, Backend::CUDA);
    const double tl = time_best(d, 2, 10, [&] { layernorm_fwd(ln); });
    const double lbw = layernorm_fwd_cost(ln).bytes() / tl / 1e9;
    rows.push_back(row("cuda layernorm [" + std::to_string(R) + ",4096] (" + lv + ")", lbw, "GB/s",
                       pct(lbw, copy_bw, 80) + " of copy"));
  }
  const TrainStepAllocStats st = train_step_allocations(d, 4);
  for (size_t i = 0; i < st.system_allocs_per_step.size(); ++i)
    rows.push_back(row("cuda train step " + std::to_string(i + 1) + ": cudaMalloc calls",
                       double(st.system_allocs_per_step[i]), "allocs",
                       "cache hits " + std::to_string(st.cache_hits_per_step[i]) + " of " +
                           std::to_string(st.allocs_per_step[i])));
  return rows;
}

// The measured figure against the device's datasheet figure (profiler/roofline.h's table).
std::string vs_datasheet(double measured, double datasheet_flops_or_bytes,
                         const profiler::GpuDatasheet* d, const char* what) {
  if (!d || datasheet_flops_or_bytes <= 0) return "no datasheet figure for this device";
  char buf[160];
  std::snprintf(buf, sizeof buf, "%.1f%% of the %s datasheet %s (%.0f)",
                100 * measured / (datasheet_flops_or_bytes / 1e9), d->label, what,
                datasheet_flops_or_bytes / 1e9);
  return buf;
}

// Tensor-core GEMM rate of cublasGemmEx at S^3 (C = A B, column-major, no transposes): A, B and C
// in `type`, `compute` accumulation. A and B hold 1/8, so every element of C is S/64, checked.
double cublas_gemm_gflops(Device d, int64_t S, DType dt, cudaDataType_t type,
                          cublasComputeType_t compute) {
  Tensor a = Tensor::full({S, S}, 0.125, dt, d), b = Tensor::full({S, S}, 0.125, dt, d);
  Tensor c = Tensor::empty({S, S}, dt, d);
  cublasHandle_t h = vendor::cublas(d);
  const float alpha = 1, beta = 0;
  const int n = int(S);
  auto gemm = [&] {
    AIM_CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a.raw_data(), type,
                                  n, b.raw_data(), type, n, &beta, c.raw_data(), type, n, compute,
                                  CUBLAS_GEMM_DEFAULT));
  };
  const double t = time_best(d, 2, 5, gemm);
  const Tensor want = Tensor::full({1}, double(S) / 64.0, dt);
  const size_t e = dtype_size(dt);
  for (int64_t i : {int64_t(0), S * S / 2 + 7, S * S - 1}) {
    std::vector<unsigned char> got(e);
    AIM_CUDA_CHECK(cudaMemcpy(got.data(), static_cast<const char*>(c.raw_data()) + i * e, e,
                              cudaMemcpyDeviceToHost));
    AIM_CHECK(std::memcmp(got.data(), want.raw_data(), e) == 0, "[peak cuda] cublasGemmEx ",
              dtype_name(dt), " ", S, "^3: element ", i, " is not ", double(S) / 64.0,
              " (no rate is reported for a wrong result)");
  }
  return 2.0 * double(S) * double(S) * double(S) / t / 1e9;
}

// aim-bench peak --device cuda: FMA per dtype (own kernels), tensor-core GEMM (cuBLAS), copy and
// triad bandwidth, each with the datasheet figure of the device when aim knows it.
std::vector<json> cuda_peak(bool quick) {
  std::vector<json> rows;
  AIM_CHECK(cuda_device_count() > 0, "--device cuda: ", cuda_unavailable_reason());
  const Device d = cuda_device(0);
  cudaDeviceProp prop{};
  AIM_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const std::string gpu = prop.name;
  const profiler::GpuDatasheet* ds = profiler::find_gpu_datasheet(gpu);
  std::printf("GPU: %s, %d SMs; datasheet: %s\n", prop.name, prop.multiProcessorCount,
              ds ? ds->label : "none in profiler/roofline.cpp's table");
#ifdef AIM_BENCH_PEAK_CUDA
  struct Fma {
    const char *kind, *instr, *key;
    double datasheet;
  };
  const Fma fmas[] = {{"fp32", "FFMA", "fp32_gflops", ds ? ds->fp32 : 0},
                      {"fp64", "DFMA", "fp64_gflops", ds ? ds->fp64 : 0},
                      {"fp16", "HFMA2", "", 0},
                      {"bf16", "HFMA2.BF16", "", 0}};
  for (const Fma& f : fmas) {
    const double g = cuda_fma_gflops(f.kind);
    const std::string name = std::string("cuda peak ") + f.kind + " FMA (" + f.instr + ")";
    const std::string note = vs_datasheet(g, f.datasheet, ds, "vector rate");
    rows.push_back(*f.key ? ceiling_row(name, g, "GFLOP/s", f.key, gpu, note)
                          : row(name, g, "GFLOP/s", "CUDA cores; " + note));
  }
#else
  for (const char* k :
       {"fp32 FMA (FFMA)", "fp64 FMA (DFMA)", "fp16 FMA (HFMA2)", "bf16 FMA (HFMA2.BF16)",
        "copy bandwidth, own kernel", "triad bandwidth, own kernel"}) {
    const std::string name = std::string("cuda peak ") + k;
    const char* why =
        "not built: bench/peak_cuda.cu is not compiled into aim-bench "
        "(CMakeLists.txt: AIM_BENCH_PEAK_CUDA)";
    std::printf("%-44s %12s %-8s  %s\n", name.c_str(), "-", "", why);
    rows.push_back({{"name", name}, {"status", "not built"}, {"note", why}});
  }
#endif
  // Tensor-core GEMM, 8192^3, fp32 accumulation.
  const int64_t S = quick ? 2048 : 8192;
  struct Gemm {
    const char* name;
    DType dt;
    cudaDataType_t type;
    cublasComputeType_t compute;
    const char* key;
    double datasheet;
  };
  const Gemm gemms[] = {
      {"fp16", DType::f16, CUDA_R_16F, CUBLAS_COMPUTE_32F, "fp16_tc_gflops", ds ? ds->fp16_tc : 0},
      {"bf16", DType::bf16, CUDA_R_16BF, CUBLAS_COMPUTE_32F, "bf16_tc_gflops",
       ds ? ds->bf16_tc : 0},
      {"tf32", DType::f32, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, "tf32_tc_gflops",
       ds ? ds->tf32_tc : 0}};
  for (const Gemm& g : gemms) {
    const double gf = cublas_gemm_gflops(d, S, g.dt, g.type, g.compute);
    rows.push_back(ceiling_row(
        "cuda GEMM " + std::string(g.name) + " tensor " + std::to_string(S) + "^3 (cublasGemmEx)",
        gf, "GFLOP/s", g.key, gpu,
        "fp32 accumulation; " + vs_datasheet(gf, g.datasheet, ds, "dense")));
  }
  // Bandwidth over 1 GiB arrays (256 MiB with --quick).
  const int64_t n = quick ? (int64_t(1) << 26) : (int64_t(1) << 28);
  const double mem = ds ? ds->mem : 0;
  {
    Tensor src = Tensor::full({n}, 1.0, DType::f32, d), dst = Tensor::empty({n}, DType::f32, d);
    auto st = static_cast<cudaStream_t>(current_stream(0));
    const double t = time_best(d, 2, 10, [&] {
      AIM_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), size_t(n) * 4,
                                     cudaMemcpyDeviceToDevice, st));
    });
    const double bw = 8.0 * double(n) / t / 1e9;
    rows.push_back(ceiling_row("cuda copy bandwidth (cudaMemcpy)", bw, "GB/s", "mem_gbps", gpu,
                               "read + write; " + vs_datasheet(bw, mem, ds, "HBM")));
  }
#ifdef AIM_BENCH_PEAK_CUDA
  for (const char* kind : {"copy", "triad"}) {
    const double bw = cuda_stream_gbps(kind, n);
    rows.push_back(ceiling_row(std::string("cuda ") + kind + " bandwidth (own kernel)", bw, "GB/s",
                               "mem_gbps", gpu,
                               std::string(kind == std::string("copy") ? "8" : "12") +
                                   " bytes per element; " + vs_datasheet(bw, mem, ds, "HBM")));
  }
#endif
  return rows;
}
#endif

}  // namespace

std::vector<json> run_peak(const std::string& device, bool quick) {
  std::vector<json> rows;
  if (device == "cpu") {
    const char* isa = "";
    const double fp32 = peak_fma_gflops(&isa);
    rows.push_back(ceiling_row(std::string("cpu peak fp32 FMA (") + isa + ")", fp32, "GFLOP/s",
                               "fp32_gflops", "cpu", isa));
    if (!quick)
      rows.push_back(ceiling_row("cpu peak fp64 FMA", peak_fma_gflops_f64(), "GFLOP/s",
                                 "fp64_gflops", "cpu", isa));
    // The triad arrays (3 x 256 MB) are far larger than the caches: DRAM bandwidth. The memory
    // ceiling is the better of normal and streaming stores.
    rows.push_back(ceiling_row("cpu triad bandwidth", triad_gbps(quick ? (1 << 22) : (64 << 20), 5),
                               "GB/s", "mem_gbps", "cpu"));
    if (!quick)
      rows.push_back(ceiling_row("cpu triad bandwidth, streaming stores",
                                 triad_gbps(64 << 20, 5, true), "GB/s", "mem_gbps", "cpu"));
    return rows;
  }
#ifdef AIM_BENCH_CUDA
  return cuda_peak(quick);
#else
  AIM_FAIL("--device cuda: aim was built without CUDA (AIM_CUDA=OFF) or for the emulated device");
#endif
}

std::vector<json> run_foundation(const std::string& device, bool quick) {
  std::printf("%-44s %12s %-8s  %s\n", "benchmark", "value", "unit", "note");
  if (device == "cpu") return cpu_foundation(quick);
#ifdef AIM_BENCH_CUDA
  return cuda_foundation(quick);
#else
  AIM_FAIL("--device cuda: aim was built without CUDA (AIM_CUDA=OFF) or for the emulated device");
#endif
}

}  // namespace aim::bench
