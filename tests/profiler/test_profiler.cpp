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
      EXPECT_TRUE(e.at("args").contains("flops"));
    }
  }
  std::filesystem::remove(path);
}

// The model FLOPs check: forward op FLOPs recorded by the profiler == the analytic count.
TEST(Profiler, ModelForwardFlopsMatchAnalyticCount) {
  for (const models::ModelEntry& e : models::model_registry()) {
    for (const char* att : {"split", "concat"}) {
      SCOPED_TRACE(e.name + " att=" + att);
      models::ModelConfig cfg = e.parse_config({"size=tiny"});
      if (cfg.count("att")) cfg["att"] = att;
      auto model = e.build(cfg, 1);
      auto src = e.source(cfg, "synthetic", 1);
      const TensorMap batch = src->next(32);
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
        if (ev.kind == ScopeKind::Op) flops += ev.cost.flops;
      const double analytic = model->forward_flops(batch);
      std::printf("[%s att=%s] forward FLOPs: profiler %.6g, analytic %.6g (%+.3f%%)\n",
                  e.name.c_str(), att, flops, analytic, 100.0 * (flops - analytic) / analytic);
      EXPECT_GT(analytic, 0);
      EXPECT_NEAR(flops, analytic, 0.01 * analytic)
          << "profiler " << flops << " analytic " << analytic;
    }
  }
}

}  // namespace
}  // namespace aim::profiler
