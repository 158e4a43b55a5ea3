// profiler/: op records with their Cost inside nested scopes, the tables, the trace (valid JSON,
// properly nested per thread), and the model FLOPs check: for every registered model the
// profiler's sum of forward op FLOPs equals the model's analytic count within 1%.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "autograd/functions/matmul.h"
#include "autograd/variable.h"
#include "kernels/testing.h"
#include "models/registry.h"
#include "profiler/profiler.h"
#include "profiler/roofline.h"

namespace aim::profiler {
namespace {

TEST(Profiler, RecordsOpsInScopesWithCost) {
  autograd::Variable a(kernels::random_tensor({64, 32}, DType::f32, 1), true);
  autograd::Variable b(kernels::random_tensor({32, 16}, DType::f32, 2), true);
  start();
  {
    Scope step("step/1", ScopeKind::Step);
    Scope phase("fwd", ScopeKind::Phase);
    Scope layer("fc", ScopeKind::Layer);
    autograd::matmul(a, b);
  }
  stop();
  autograd::matmul(a, b);  // not recorded: the profiler is off
  const std::vector<Event>& ev = events();
  int ops = 0;
  for (const Event& e : ev) {
    if (e.kind != ScopeKind::Op) continue;
    ++ops;
    EXPECT_EQ(e.name, "matmul");
    EXPECT_EQ(e.layer, "fc");
    EXPECT_EQ(e.phase, "fwd");
    EXPECT_EQ(e.depth, 3);
    EXPECT_DOUBLE_EQ(e.cost.flops, 2.0 * 64 * 16 * 32);
    EXPECT_GE(e.dur_us, 0);
  }
  EXPECT_EQ(ops, 1);
  ASSERT_EQ(ev.size(), 4u);  // op, layer, phase, step (in closing order)
  EXPECT_EQ(ev.back().name, "step/1");
  std::ostringstream os;
  print_tables(os, ev, 1, default_cpu_ceilings());
  EXPECT_NE(os.str().find("matmul/"), std::string::npos) << os.str();
  EXPECT_NE(os.str().find("fwd/fc"), std::string::npos) << os.str();
  EXPECT_NE(os.str().find("model summary"), std::string::npos) << os.str();
}

// Trace: valid JSON; on each thread every event lies inside the enclosing open one.
// An op dispatched inside another op (an rnn variant's GEMMs) is marked inner: the tables and
// FLOP totals count only the enclosing op.
TEST(Profiler, OpInsideAnOpIsInner) {
  start();
  kernels::OpObserver* obs = kernels::op_observer();  // installed by start()
  ASSERT_NE(obs, nullptr);
  obs->begin("rnn_fwd", "cpu.fast", kernels::Backend::CPU, kernels::Cost{100, 10, 10},
             [] { return std::string(); });
  obs->begin("matmul", "cpu.avx512", kernels::Backend::CPU, kernels::Cost{60, 5, 5},
             [] { return std::string(); });
  obs->end();
  obs->end();
  stop();
  ASSERT_EQ(events().size(), 2u);
  int inner = 0;
  for (const Event& e : events()) inner += e.inner && e.name == "matmul";
  EXPECT_EQ(inner, 1);
  for (const Event& e : events()) {
    if (e.name == "rnn_fwd") {
      EXPECT_FALSE(e.inner);
    }
  }
  std::ostringstream os;
  print_tables(os, events(), 1, default_cpu_ceilings());
  EXPECT_EQ(os.str().find("matmul/cpu.avx512"), std::string::npos) << os.str();
}

TEST(Profiler, TraceIsNestedJson) {
  autograd::Variable a(kernels::random_tensor({16, 8}, DType::f32, 1), true);
  start();
  for (int s = 1; s <= 2; ++s) {
    Scope step("step/" + std::to_string(s), ScopeKind::Step);
    Scope phase("fwd", ScopeKind::Phase);
    {
      Scope l("x", ScopeKind::Layer);
      autograd::matmul(a, a, false, true);
    }
    autograd::matmul(a, a, true, false);
  }
  stop();
  const std::string path =
      (std::filesystem::temp_directory_path() / "aim_trace_test.json").string();
  write_trace(path, events());
  std::ifstream f(path);
  const nlohmann::json j = nlohmann::json::parse(f);
  const auto& tev = j.at("traceEvents");
  ASSERT_EQ(tev.size(), events().size());
  std::vector<std::pair<double, double>> open;  // (start, end) of enclosing events
  for (const auto& e : tev) {
    EXPECT_EQ(e.at("ph"), "X");
    const double t0 = e.at("ts"), t1 = t0 + double(e.at("dur"));
    while (!open.empty() && open.back().second <= t0 + 1e-6) open.pop_back();
    if (!open.empty()) {
      EXPECT_GE(t0 + 1e-6, open.back().first) << e.dump();
      EXPECT_LE(t1, open.back().second + 1e-6) << e.dump();
    }
    open.push_back({t0, t1});
    if (e.at("cat") == "op") {
      for (const char* k : {"variant", "flops", "bytes", "bytes_read", "bytes_written"})
        EXPECT_TRUE(e.at("args").contains(k)) << k << " in " << e.dump();
    }
  }
  std::filesystem::remove(path);
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / name).string();
}

// The CPU roofline's default ceilings: the cache `aim-bench peak` writes, for its CPU model and
// thread count only; otherwise MACHINE.md's figures with a source saying they were not measured
// here and why (no file, another CPU or thread count, unreadable).
TEST(Profiler, CpuCeilingsFromTheCacheForThisCpuOnly) {
  const std::string path = temp_path("aim_cpu_ceilings_test.json");
  {
    std::ofstream f(path);
    f << R"({"device": "cpu", "cpu": "Test CPU 9000", "threads": 3, "fp32_gflops": 123.5,
             "fp64_gflops": 61, "mem_gbps": 21.5, "measured": "2026-12-07 03:44 UTC"})";
  }
  const Ceilings c = cpu_ceilings_from(path, "Test CPU 9000", 3);
  EXPECT_DOUBLE_EQ(c.peak_flops, 123.5e9);
  EXPECT_DOUBLE_EQ(c.bandwidth, 21.5e9);
  EXPECT_DOUBLE_EQ(c.peak_flops_fp64, 61e9);
  EXPECT_EQ(c.device, "cpu");
  EXPECT_NE(c.source.find("measured on this CPU by aim-bench peak at 2026-12-07 03:44 UTC"),
            std::string::npos)
      << c.source;
  auto fallback = [&](const std::string& file, const std::string& cpu, int threads,
                      const std::string& why) {
    const Ceilings f = cpu_ceilings_from(file, cpu, threads);
    EXPECT_DOUBLE_EQ(f.peak_flops, 475e9);
    EXPECT_DOUBLE_EQ(f.bandwidth, 67e9);
    EXPECT_NE(f.source.find("not measured on this CPU"), std::string::npos) << f.source;
    EXPECT_NE(f.source.find(why), std::string::npos) << f.source;
    EXPECT_NE(f.source.find("aim-bench peak"), std::string::npos) << f.source;
  };
  fallback(path, "Test CPU 9000", 2, "holds Test CPU 9000 at 3 threads");
  fallback(path, "Other CPU", 3, "holds Test CPU 9000 at 3 threads");
  fallback(path + ".missing", "Test CPU 9000", 3, "no " + path + ".missing");
  fallback("", "Test CPU 9000", 3, "no cache directory");
  {
    std::ofstream f(path);
    f << R"({"cpu": "Test CPU 9000", "threads": 3, "fp32_gflops": 1})";  // no mem_gbps
  }
  fallback(path, "Test CPU 9000", 3, "unreadable");
  std::remove(path.c_str());
}

// Ceilings with several precisions load, round-trip, and the roofline draws one roof each.
TEST(Profiler, CeilingsWithSeveralPrecisionsGiveOneRoofEach) {
  const std::string path = temp_path("aim_ceilings_test.json");
  {
    std::ofstream f(path);
    f << R"({"device": "NVIDIA H200", "fp32_gflops": 60000, "fp64_gflops": 33000,
             "tf32_tc_gflops": 400000, "fp16_tc_gflops": 700000, "bf16_tc_gflops": 710000,
             "mem_gbps": 4000})";
  }
  const Ceilings c = load_ceilings(path);
  EXPECT_DOUBLE_EQ(c.peak_flops, 60000e9);
  EXPECT_DOUBLE_EQ(c.peak_flops_fp64, 33000e9);
  EXPECT_DOUBLE_EQ(c.tf32_tc_flops, 400000e9);
  EXPECT_DOUBLE_EQ(c.fp16_tc_flops, 700000e9);
  EXPECT_DOUBLE_EQ(c.bf16_tc_flops, 710000e9);
  EXPECT_DOUBLE_EQ(c.bandwidth, 4000e9);
  EXPECT_EQ(c.device, "NVIDIA H200");
  const std::vector<Roof> roofs = ceiling_roofs(c);
  ASSERT_EQ(roofs.size(), 5u);
  for (const Roof& r : roofs) EXPECT_DOUBLE_EQ(r.bandwidth, 4000e9) << r.label;

  // The JSON written for them reads back the same.
  {
    std::ofstream f(path);
    f << ceilings_json(c);
  }
  const Ceilings back = load_ceilings(path);
  EXPECT_DOUBLE_EQ(back.bf16_tc_flops, c.bf16_tc_flops);
  EXPECT_DOUBLE_EQ(back.bandwidth, c.bandwidth);
  EXPECT_EQ(back.device, c.device);

  // The SVG: one polyline per roof.
  autograd::Variable a(kernels::random_tensor({32, 32}, DType::f32, 1), true);
  start();
  {
    Scope phase("fwd", ScopeKind::Phase);
    autograd::matmul(a, a);
  }
  stop();
  const std::string svg = temp_path("aim_roofline_test.svg");
  write_roofline_svg(svg, events(), roofs, "test");
  std::ifstream f(svg);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t polylines = 0;
  for (size_t at = text.find("<polyline"); at != std::string::npos;
       at = text.find("<polyline", at + 1))
    ++polylines;
  EXPECT_EQ(polylines, 5u);
  EXPECT_NE(text.find("BF16 tensor GEMM"), std::string::npos);
  std::filesystem::remove(svg);

  // The older memory key is read; a missing one is an error naming both.
  {
    std::ofstream o(path);
    o << R"({"fp32_gflops": 400, "bandwidth_gbs": 50})";
  }
  EXPECT_DOUBLE_EQ(load_ceilings(path).bandwidth, 50e9);
  {
    std::ofstream o(path);
    o << R"({"fp32_gflops": 400, "fp16_tc_gflops": 800})";
  }
  try {
    load_ceilings(path);
    ADD_FAILURE() << "no error without a memory figure";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("mem_gbps"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bandwidth_gbs"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

// The known-GPU table feeds the default CUDA roofs.
TEST(Profiler, GpuDatasheetTable) {
  const GpuDatasheet* h200 = find_gpu_datasheet("NVIDIA H200");
  ASSERT_NE(h200, nullptr);
  EXPECT_DOUBLE_EQ(h200->fp16_tc, 989e12);
  EXPECT_DOUBLE_EQ(h200->mem, 4.8e12);
  EXPECT_EQ(find_gpu_datasheet("GeForce 8800"), nullptr);
  const std::vector<Roof> r = default_roofs("cuda:0");
  ASSERT_FALSE(r.empty());
  EXPECT_DOUBLE_EQ(r.front().bandwidth, h200->mem);
}

// CUDA-timed records (what a GPU run produces, built here by hand): the layer table takes the
// scopes' exclusive CUDA-event times, untimed CUDA ops show their work without a time, and the
// trace puts the GPU times on a named "stream N" track.
TEST(Profiler, CudaEventRecordsInTablesAndTrace) {
  auto scope = [](const char* name, ScopeKind k, int64_t id, int64_t parent, double ts,
                  double dur) {
    Event e;
    e.name = name;
    e.kind = k;
    e.id = id;
    e.parent = parent;
    e.ts_us = ts;
    e.dur_us = dur;
    e.host_ts_us = ts - 5;  // enqueued before the GPU ran it
    e.host_dur_us = dur / 10;
    e.gpu_timed = true;
    e.stream = 0;
    e.device = 0;
    e.phase = k == ScopeKind::Layer ? "fwd" : "";
    return e;
  };
  std::vector<Event> ev;
  ev.push_back(scope("step/2", ScopeKind::Step, 1, -1, 100, 1000));
  ev.push_back(scope("fwd", ScopeKind::Phase, 2, 1, 100, 600));
  ev.push_back(scope("enc", ScopeKind::Layer, 3, 2, 100, 400));
  ev.push_back(scope("att", ScopeKind::Layer, 4, 3, 150, 100));  // nested in enc
  Event op;
  op.name = "matmul";
  op.variant = "cuda.cublas";
  op.kind = ScopeKind::Op;
  op.layer = "att";
  op.phase = "fwd";
  op.gpu_untimed = true;
  op.ts_us = op.host_ts_us = 96;
  op.dur_us = op.host_dur_us = 3;  // launch time
  op.cost = {2e9, 1e6, 1e6};
  op.id = 5;
  op.parent = 4;
  ev.push_back(op);

  std::ostringstream os;
  print_tables(os, ev, 1, Ceilings{});
  const std::string t = os.str();
  EXPECT_NE(t.find("CUDA-event times"), std::string::npos) << t;
  EXPECT_NE(t.find("--profile-ops"), std::string::npos) << t;
  // enc's own time: 400 - 100 (att) = 0.300 ms; att 0.100 ms; fwd outside layers 0.200 ms.
  auto line_of = [&](const std::string& key) {
    const size_t at = t.find("\n" + key + " ");
    return at == std::string::npos ? std::string()
                                   : t.substr(at + 1, t.find('\n', at + 1) - at - 1);
  };
  EXPECT_NE(line_of("fwd/enc").find(" 0.300 "), std::string::npos) << t;
  EXPECT_NE(line_of("fwd/att").find(" 0.100 "), std::string::npos) << t;
  EXPECT_NE(line_of("fwd/-").find(" 0.200 "), std::string::npos) << t;
  // The op row: its work, no time.
  const std::string op_line = line_of("matmul/cuda.cublas");
  ASSERT_FALSE(op_line.empty()) << t;
  EXPECT_NE(op_line.find(" 2.000 "), std::string::npos) << op_line;  // GFLOP per step
  EXPECT_NE(op_line.find(" - "), std::string::npos) << op_line;

  const std::string path = temp_path("aim_trace_cuda_test.json");
  write_trace(path, ev);
  std::ifstream f(path);
  const nlohmann::json j = nlohmann::json::parse(f);
  int named = 0, on_stream = 0, on_host = 0;
  for (const auto& e : j.at("traceEvents")) {
    if (e.at("ph") == "M") {
      EXPECT_EQ(e.at("name"), "thread_name");
      EXPECT_EQ(e.at("tid"), 1000);
      EXPECT_EQ(e.at("args").at("name"), "stream 0 (cuda:0)");
      ++named;
      continue;
    }
    if (e.at("tid") == 1000) {
      ++on_stream;
      if (e.at("name") == "enc") {
        EXPECT_DOUBLE_EQ(double(e.at("ts")), 100);
        EXPECT_DOUBLE_EQ(double(e.at("dur")), 400);
      }
    } else {
      ++on_host;
      if (e.at("name") == "enc") {
        EXPECT_DOUBLE_EQ(double(e.at("ts")), 95);
      }
      if (e.at("cat") == "op") {
        EXPECT_EQ(e.at("args").at("variant"), "cuda.cublas");
        EXPECT_DOUBLE_EQ(double(e.at("args").at("flops")), 2e9);
        EXPECT_DOUBLE_EQ(double(e.at("args").at("bytes")), 2e6);
      }
    }
  }
  EXPECT_EQ(named, 1);
  EXPECT_EQ(on_stream, 4);  // the four scopes; the untimed op stays on the host track
  EXPECT_EQ(on_host, 5);
  std::filesystem::remove(path);
}

// The model FLOPs check: forward op FLOPs recorded by the profiler == the analytic count, for
// every registered model, tiny, in its default configuration and with each other allowed value
// of each of its keys (din att=concat, act=dice, ...; resnet variant=v1; ...).
TEST(Profiler, ModelForwardFlopsMatchAnalyticCount) {
  for (const models::ModelEntry& e : models::model_registry()) {
    std::vector<std::vector<std::string>> configs = {{"size=tiny"}};
    for (const models::ConfigKey& k : e.config)
      for (const std::string& v : k.allowed)
        if (k.key != "size" && v != k.default_value)
          configs.push_back({"size=tiny", k.key + "=" + v});
    for (const std::vector<std::string>& kv : configs) {
      const models::ModelConfig cfg = e.parse_config(kv);
      const std::string label = e.name + " " + models::ModelEntry::config_string(cfg);
      SCOPED_TRACE(label);
      auto model = e.build(cfg, 1);
      auto src = e.source(cfg, "synthetic", 1);
      const TensorMap batch = src->next(e.name == "gcn" ? 1 : 8);  // gcn: one batch = the graph
      model->eval();
      autograd::NoGradGuard ng;
      start();
      {
        Scope phase("fwd", ScopeKind::Phase);
        model->infer(batch);
      }
      stop();
      double flops = 0;
      for (const Event& ev : events())
        if (ev.kind == ScopeKind::Op && !ev.inner) flops += ev.cost.flops;
      const double analytic = model->forward_flops(batch);
      std::printf("[%s] forward FLOPs: profiler %.6g, analytic %.6g (%+.3f%%)\n", label.c_str(),
                  flops, analytic, 100.0 * (flops - analytic) / analytic);
      EXPECT_GT(analytic, 0);
      EXPECT_NEAR(flops, analytic, 0.01 * analytic)
          << "profiler " << flops << " analytic " << analytic;
    }
  }
}

}  // namespace
}  // namespace aim::profiler
