// Mixed-precision training (train/amp.h, autograd/amp.h): gradients under autocast against f32,
// the loss scaler (overflow skip, backoff, growth, checkpoint state), and tiny models trained in
// fp16 and bf16 against the same run in fp32.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "autograd/amp.h"
#include "models/registry.h"
#include "tensor/safetensors.h"
#include "tests/support/common.h"
#include "train/amp.h"
#include "train/trainer.h"

namespace aim::train {
namespace {

// One training run of a registry model on its synthetic data, quietly.
TrainResult run(const std::string& model, DType precision, int64_t steps, int64_t batch,
                TrainOptions o = {}) {
  const models::ModelEntry& e = models::find_model(model);
  o.steps = steps;
  o.batch_size = batch;
  o.eval_every = 0;
  o.eval_samples = 1000;
  o.prefetch = 0;
  o.precision = precision;
  if (model == "din") o.optim = {"adam", 0.01};  // aim-train din's default
  if (model == "resnet50") {  // the CNN recipe (MODELS.md §2.1), as aim-train applies it
    o.optim = {"sgd", 1.0, 1024, 0.9, true, 1e-4};
    o.schedule = "poly";
    o.poly_power = 2;
  }
  std::ostringstream log;
  return train_model(e, e.parse_config({"size=tiny"}), o, log);
}

// The metric of fp16 and bf16 runs no more than 1% below the fp32 run over the same steps and
// within 2% of it (issue 8).
void expect_mixed_precision_matches_f32(const char* model, int64_t steps, const char* metric) {
  const double m32 = run(model, DType::f32, steps, 64).final_metrics.at(metric);
  for (DType t : {DType::f16, DType::bf16}) {
    const TrainResult r = run(model, t, steps, 64);
    const double m = r.final_metrics.at(metric);
    std::cout << model << " " << metric << " fp32 " << m32 << ", " << dtype_name(t) << " " << m
              << " (skipped steps " << r.skipped_steps << ")\n";
    // No worse than fp32 by more than 1%; better by up to 2% (bf16 din has been 1.0-1.2%
    // above fp32: the 16-bit rounding moves the trajectory, which a change of summation order
    // in an f32 kernel moves too).
    EXPECT_GE(m, 0.99 * m32) << model << " " << dtype_name(t);
    EXPECT_LE(std::abs(m - m32), 0.02 * m32) << model << " " << dtype_name(t);
    if (t == DType::bf16) {
      EXPECT_EQ(r.loss_scale, 0.0);  // no scaler for bf16
    }
  }
}

// din 300 steps of 64. Measured 2026-12-03: din AUC fp32 0.7784, fp16 0.7761, bf16 0.7860;
// 2026-12-05 (skinny-M GEMM paths): 0.7775 / 0.7761 / 0.7870; 2026-12-06 (BN + ReLU fused in
// training): 0.7743 / 0.7760 / 0.7860; with att=fold (the default since): 0.7789 / 0.7801 / 0.7817.
TEST(AmpTraining, MixedPrecisionMatchesF32Metric) {
  expect_mixed_precision_matches_f32("din", 300, "auc");
}

// resnet50 (tiny) 800 steps of 64 (at 400 steps the three runs still differ by up to 2.5%: 16-bit
// rounding before batch-statistics BN slows the start, as in PyTorch's autocast; at 600, 1.3%
// after the convolutions' f32 algorithm changed to Winograd, which moves every trajectory).
// Measured: top-1 fp32 0.981, fp16 0.975, bf16 0.984 (2026-12-03); 0.981 / 0.976 / 0.981
// (2026-12-06), 0.981 / 0.976 / 0.981 (2026-12-07). Two and a half minutes here: a long test
// (ctest -L long; CI's budget), not run by tools/test.sh.
TEST(AmpTraining, LongResnet50MixedPrecisionMatchesF32Metric) {
  expect_mixed_precision_matches_f32("resnet50", 800, "top1");
}

TEST(AmpTraining, LossScalerSkipsBacksOffAndGrows) {
  LossScalerOptions o;
  o.growth_interval = 3;
  LossScaler s(o);
  EXPECT_EQ(s.scale(), 65536);
  autograd::Variable p(Tensor::zeros({4}), true);
  p.mutable_grad() = Tensor::from_vector(std::vector<float>{65536, -131072, 0, 32768}, {4});
  EXPECT_FALSE(s.unscale_flag({{"p", p}}).item() != 0);
  EXPECT_EQ(p.grad().to_vector<float>(), (std::vector<float>{1, -2, 0, 0.5f}));
  s.update(false);
  p.mutable_grad() = Tensor::from_vector(std::vector<float>{1, NAN, 0, 0}, {4});
  EXPECT_TRUE(s.unscale_flag({{"p", p}}).item() != 0);
  s.update(true);
  EXPECT_EQ(s.scale(), 32768);
  EXPECT_EQ(s.skipped_steps(), 1);
  for (int i = 0; i < 3; ++i) s.update(false);  // growth_interval clean steps: x2
  EXPECT_EQ(s.scale(), 65536);
  LossScaler t(o);
  t.load_state(s.state(), "ckpt");
  EXPECT_EQ(t.scale(), 65536);
  EXPECT_EQ(t.skipped_steps(), 1);
  AIM_EXPECT_ERROR(t.load_state({}, "ckpt.safetensors"),
                   "ckpt.safetensors: metadata lacks amp_scale");
}

// An injected overflow (an Inf in a gradient, as an fp16 overflow leaves it) skips the step and
// halves the scale; a run whose every step overflows ends with the initial weights.
TEST(AmpTraining, InjectedOverflowSkipsTheStep) {
  TrainOptions o;
  o.testing.inject_overflow_at = {2, 3};
  const TrainResult r = run("din", DType::f16, 4, 32, o);
  EXPECT_EQ(r.skipped_steps, 2);
  EXPECT_EQ(r.loss_scale, 16384);
  const models::ModelEntry& e = models::find_model("din");
  auto model = e.build(e.parse_config({"size=tiny"}), 1);  // the initial weights (seed 1)
  std::ostringstream log;
  TrainOptions o2;
  o2.steps = 3;
  o2.batch_size = 32;
  o2.eval_every = 0;
  o2.eval_samples = 100;
  o2.prefetch = 0;
  o2.precision = DType::f16;
  o2.testing.inject_overflow_at = {1, 2, 3};
  o2.optim = {"adam", 0.001};
  o2.save_weights = testing::make_temp_dir("aim_amp") + "/w.safetensors";
  const TrainResult r2 = train_model(e, e.parse_config({"size=tiny"}), o2, log);
  EXPECT_EQ(r2.skipped_steps, 3);
  EXPECT_NE(log.str().find("step 1: gradient overflow (Inf/NaN), step skipped; loss scale -> "
                           "32768"),
            std::string::npos)
      << log.str();
  // Every step skipped: the saved weights are the initial ones.
  const SafetensorsFile f = load_safetensors(o2.save_weights);
  std::map<std::string, Tensor> saved(f.tensors.begin(), f.tensors.end());
  for (const auto& [n, t] : model->state_dict())
    EXPECT_EQ(saved.at(n).to(DType::f32).to_vector<float>(), t.to(DType::f32).to_vector<float>())
        << n;
}

}  // namespace
}  // namespace aim::train
