// aim-infer's low precision (infer/session.h, infer/quantize.h): fp16/bf16 autocast and int8
// post-training quantisation of trained tiny din and resnet50 against f32 on the same inputs,
// the quantized file round trip, and its errors.
#include <gtest/gtest.h>

#include <sstream>

#include "infer/session.h"
#include "models/registry.h"
#include "tensor/safetensors.h"
#include "tests/support/common.h"
#include "train/trainer.h"

namespace aim::infer {
namespace {

// Weights of a tiny model trained briefly on its synthetic data (so outputs and metrics mean
// something), saved once per model.
std::string trained(const std::string& model, int64_t steps) {
  static std::map<std::string, std::string> done;
  if (done.count(model)) return done[model];
  const models::ModelEntry& e = models::find_model(model);
  train::TrainOptions o;
  o.steps = steps;
  o.batch_size = 64;
  o.eval_every = 0;
  o.eval_samples = 100;
  o.prefetch = 0;
  o.optim = model == "din" ? train::OptimizerOptions{"adam", 0.01}
                           : train::OptimizerOptions{"sgd", 1.0, 1024, 0.9, true, 1e-4};
  if (model != "din") o.schedule = "poly";
  o.save_weights = testing::make_temp_dir("aim_lowp") + "/w.safetensors";
  std::ostringstream log;
  train::train_model(e, e.parse_config({"size=tiny"}), o, log);
  return done[model] = o.save_weights;
}

InferResult infer(const std::string& model, InferOptions o, std::string* log_out = nullptr) {
  const models::ModelEntry& e = models::find_model(model);
  o.batch_size = 64;
  o.iters = 2;
  o.warmup = 0;
  // resnet50 300 steps: at 150 the tiny net is still settling and its int8 (percentile) cosine
  // swung between 0.978 and 0.996 with the f32 rounding of the convolution kernels alone (im2col
  // vs Winograd); at 300 both give 0.996-0.998 (max and percentile).
  o.weights = trained(model, 300);
  std::ostringstream log;
  InferResult r = run_inference(e, e.parse_config({"size=tiny"}), o, log);
  if (log_out) *log_out = log.str();
  return r;
}

const char* headline(const std::string& model) { return model == "din" ? "auc" : "top1"; }

TEST(LowPrecisionInfer, SixteenBitTracksF32) {
  for (const char* model : {"din", "resnet50"})
    for (DType t : {DType::f16, DType::bf16}) {
      InferOptions o;
      o.precision = t;
      const InferResult r = infer(model, o);
      ASSERT_FALSE(r.diffs.empty());
      for (const OutputDiff& d : r.diffs) {
        if (d.agreement < 0) {
          EXPECT_GT(d.cosine, 0.999) << model << " " << dtype_name(t) << " " << d.output;
        }
      }
      const double m = r.metrics_f32.at(headline(model)), ml = r.metrics_lowp.at(headline(model));
      EXPECT_NEAR(ml, m, 0.01) << model << " " << dtype_name(t);
    }
}

// Issue 8: int8 outputs vs f32 cosine >= 0.99 on synthetic data (max calibration, the default),
// the metric delta reported. Percentile calibration clips the largest activations, and how much
// that costs depends on the trained net: the tiny ResNet's percentile cosine measured 0.987-0.998
// over trainings that differ only in the f32 rounding of the convolution kernels (max:
// 0.996-0.9993), so percentile is held to 0.98; both keep the metric within 0.03.
TEST(LowPrecisionInfer, Int8CosineAndMetricDelta) {
  for (const char* model : {"din", "resnet50"})
    for (const char* method : {"max", "percentile"}) {
      InferOptions o;
      o.int8 = true;
      o.calib.method = method;
      std::string log;
      const InferResult r = infer(model, o, &log);
      EXPECT_GT(r.int8_layers, 0);
      for (const OutputDiff& d : r.diffs) {
        if (d.agreement >= 0) continue;  // integer outputs
        EXPECT_GE(d.cosine, std::string(method) == "max" ? 0.99 : 0.98)
            << model << " " << method << " " << d.output;
        std::cout << model << " int8 (" << method << ") " << d.output << ": cosine " << d.cosine
                  << ", relative L2 " << d.rel_l2 << "\n";
      }
      const double m = r.metrics_f32.at(headline(model)), ml = r.metrics_lowp.at(headline(model));
      std::cout << model << " int8 (" << method << ") " << headline(model) << " fp32 " << m
                << " int8 " << ml << "\n";
      EXPECT_NEAR(ml, m, 0.03) << model << " " << method;
      EXPECT_NE(log.find("int8 vs fp32, output"), std::string::npos);
      EXPECT_NE(log.find("(delta "), std::string::npos);
    }
}

TEST(LowPrecisionInfer, QuantizedFileRoundTripAndErrors) {
  const std::string dir = testing::make_temp_dir("aim_q8");
  InferOptions o;
  o.int8 = true;
  o.save_quantized = dir + "/q.safetensors";
  o.compare_samples = 0;
  const InferResult a = infer("resnet50", o);
  InferOptions l;
  l.int8 = true;
  l.load_quantized = o.save_quantized;
  l.compare_samples = 0;
  const InferResult b = infer("resnet50", l);
  ASSERT_EQ(a.diffs.size(), b.diffs.size());
  for (size_t i = 0; i < a.diffs.size(); ++i) {
    EXPECT_EQ(a.diffs[i].cosine, b.diffs[i].cosine);  // same int8 model, same inputs
    EXPECT_EQ(a.diffs[i].max_abs, b.diffs[i].max_abs);
  }
  EXPECT_EQ(a.int8_layers, b.int8_layers);
  InferOptions bad = l;
  bad.load_quantized = trained("resnet50", 150);  // a plain state dict
  AIM_EXPECT_ERROR(infer("resnet50", bad), "not an aim int8 file");
  const SafetensorsFile f = load_safetensors(o.save_quantized);
  std::vector<std::pair<std::string, Tensor>> t = f.tensors;
  t.emplace_back("nonexistent.weight.int8", Tensor::zeros({1}, DType::i8));
  save_safetensors(dir + "/bad.safetensors", t, f.metadata);
  bad.load_quantized = dir + "/bad.safetensors";
  AIM_EXPECT_ERROR(infer("resnet50", bad), "'nonexistent.weight.int8' names no parameter");
  InferOptions both;
  both.int8 = true;
  both.precision = DType::f16;
  AIM_EXPECT_ERROR(infer("din", both), "--int8 and a 16-bit --precision are exclusive");
}

}  // namespace
}  // namespace aim::infer
