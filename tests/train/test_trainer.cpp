// train/trainer: DIN training loop on the tiny config — AUC improves, checkpoints round-trip,
// resuming reproduces the uninterrupted run's losses exactly on CPU, NaN losses stop the run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <string>

#include "data/din_synthetic.h"
#include "models/din.h"
#include "tensor/check.h"
#include "tensor/safetensors.h"
#include "train/trainer.h"

namespace aim::train {
namespace {

std::string temp_dir(const std::string& name) {
  const auto d = std::filesystem::temp_directory_path() /
                 ("aim_trainer_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  return d.string();
}

const models::ModelEntry& din() { return models::find_model("din"); }
models::ModelConfig tiny() { return din().parse_config({"size=tiny"}); }

TrainOptions tiny_options(int64_t steps) {
  TrainOptions o;
  o.steps = steps;
  o.batch_size = 64;
  o.optim.lr = 1e-2;
  o.optim.name = "adam";
  o.seed = 3;
  o.eval_every = 0;
  o.eval_samples = 1000;
  o.device = "cpu";
  return o;
}

TEST(Trainer, TinyImprovesAuc) {
  TrainOptions o = tiny_options(150);
  o.eval_every = 50;
  std::ostringstream log;
  const TrainResult r = train_model(din(), tiny(), o, log);
  std::printf("%s", log.str().c_str());
  EXPECT_GT(r.final_auc, 0.65);
  EXPECT_EQ(r.losses.size(), 150u);
  EXPECT_EQ(r.first_step, 0);
  ASSERT_EQ(r.evals.size(), 3u);  // steps 50, 100, 150
  EXPECT_EQ(r.evals.back().first, 150);
  EXPECT_GT(r.final_metrics.at("gauc"), 0.6);  // tiny: 100 users, most with both labels
  EXPECT_GT(r.samples_per_s, 0);
  EXPECT_LE(r.step_p50_ms, r.step_p90_ms);
  EXPECT_LE(r.step_p90_ms, r.step_p99_ms);
  EXPECT_NE(log.str().find("step 100"), std::string::npos);
  EXPECT_NE(log.str().find("auc"), std::string::npos);
}

TEST(Trainer, ResumeReproducesLossesExactly) {
  for (const char* optim : {"adam", "sgd", "adagrad", "lamb"}) {
    SCOPED_TRACE(optim);
    const std::string d1 = temp_dir(std::string("full_") + optim);
    const std::string d2 = temp_dir(std::string("split_") + optim);
    std::ostringstream log;
    TrainOptions o = tiny_options(20);
    o.optim.name = optim;
    o.eval_every = 5;  // evaluations in between must not disturb training
    o.checkpoint_dir = d1;
    o.checkpoint_every = 10;
    const TrainResult full = train_model(din(), tiny(), o, log);
    ASSERT_EQ(full.losses.size(), 20u);

    o.checkpoint_dir = d2;
    o.steps = 10;
    const TrainResult first = train_model(din(), tiny(), o, log);
    ASSERT_EQ(first.losses.size(), 10u);
    for (int i = 0; i < 10; ++i) EXPECT_EQ(first.losses[i], full.losses[i]) << "step " << i + 1;

    o.steps = 20;
    o.resume = true;
    const TrainResult second = train_model(din(), tiny(), o, log);
    EXPECT_EQ(second.first_step, 10);
    ASSERT_EQ(second.losses.size(), 10u);
    for (int i = 0; i < 10; ++i)
      EXPECT_EQ(second.losses[i], full.losses[10 + i]) << "step " << 11 + i;
    EXPECT_EQ(second.final_auc, full.final_auc);
    std::filesystem::remove_all(d1);
    std::filesystem::remove_all(d2);
  }
}

TEST(Trainer, CheckpointRoundTrip) {
  const std::string d = temp_dir("roundtrip");
  models::DinConfig c = models::DinConfig::tiny();
  c.seed = 5;
  models::Din m(c);
  auto opt = make_optimizer("adam", m.named_parameters(), 1e-2);
  data::DinSynthetic gen(data::DinSyntheticConfig::tiny());
  for (int i = 0; i < 3; ++i) {
    const data::RecBatch b = gen.next(32);
    models::Din::loss(m.forward(b), b.label).backward();
    opt->step();
    opt->zero_grad();
  }
  save_checkpoint(d, 3, m, *opt, gen.position(), {{"note", "x"}});
  ASSERT_TRUE(std::filesystem::exists(checkpoint_path(d)));
  for (const auto& e : std::filesystem::directory_iterator(d))  // no temp file left behind
    EXPECT_EQ(e.path().filename().string(), "checkpoint.safetensors");

  const SafetensorsFile f = load_safetensors(checkpoint_path(d));
  EXPECT_EQ(f.metadata.at("step"), "3");
  EXPECT_EQ(f.metadata.at("data_position"), "96");
  EXPECT_EQ(f.metadata.at("note"), "x");
  EXPECT_TRUE(f.has("model.item_emb.weight"));
  EXPECT_TRUE(f.has("optim.item_emb.weight.exp_avg"));

  models::DinConfig c2 = c;
  c2.seed = 6;  // different initial weights, overwritten by the load
  models::Din m2(c2);
  auto opt2 = make_optimizer("adam", m2.named_parameters(), 1e-2);
  const CheckpointInfo ci = load_checkpoint(d, m2, *opt2);
  EXPECT_EQ(ci.step, 3);
  EXPECT_EQ(ci.data_position, 96);
  const auto a = m.state_dict(), b = m2.state_dict();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    if (a[i].second.dtype() == DType::f32) {
      EXPECT_EQ(a[i].second.to_vector<float>(), b[i].second.to_vector<float>()) << a[i].first;
    }
  }
  const auto oa = opt->state_dict(), ob = opt2->state_dict();
  ASSERT_EQ(oa.size(), ob.size());
  for (size_t i = 0; i < oa.size(); ++i) {
    EXPECT_EQ(oa[i].first, ob[i].first);
    if (oa[i].second.dtype() == DType::f32) {
      EXPECT_EQ(oa[i].second.to_vector<float>(), ob[i].second.to_vector<float>()) << oa[i].first;
    }
  }

  // A mismatched model (different config) is rejected naming the file.
  models::DinConfig c3 = c;
  c3.emb_dim = 4;
  models::Din m3(c3);
  auto opt3 = make_optimizer("adam", m3.named_parameters(), 1e-2);
  try {
    load_checkpoint(d, m3, *opt3);
    FAIL() << "expected aim::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("checkpoint.safetensors"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(d);

  // Resuming without a checkpoint names the missing file.
  TrainOptions o = tiny_options(5);
  o.checkpoint_dir = d;
  o.resume = true;
  std::ostringstream log;
  try {
    train_model(din(), tiny(), o, log);
    FAIL() << "expected aim::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
}

TEST(Trainer, NanLossStopsNamingTheStep) {
  TrainOptions o = tiny_options(50);
  o.optim.name = "sgd";
  o.optim.lr = 1e30;
  std::ostringstream log;
  try {
    train_model(din(), tiny(), o, log);
    FAIL() << "expected aim::Error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("at step "), std::string::npos) << m;
    EXPECT_NE(m.find("loss is"), std::string::npos) << m;
    std::printf("NaN detection: %s\n", m.c_str());
  }
}

TEST(Trainer, BadOptionsAreErrors) {
  std::ostringstream log;
  TrainOptions o = tiny_options(5);
  o.optim.name = "rmsprop";
  try {
    train_model(din(), tiny(), o, log);
    FAIL() << "expected aim::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("adagrad"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace aim::train

namespace aim::train {
namespace {

TEST(Trainer, LossDivergenceAgainstTheFirstStep) {
  std::vector<double> healthy(60, 0.5), away(60, 7e5), noisy(60, 0.7);
  healthy[0] = 0.69;
  away[0] = 0.69;
  for (size_t i = 0; i < noisy.size(); i += 2) noisy[i] = 3.0;  // noisy, not diverging
  EXPECT_EQ(loss_divergence(healthy), "");
  EXPECT_EQ(loss_divergence(noisy), "");
  EXPECT_NE(loss_divergence(away).find("the loss diverged: 0.69 at the first step"),
            std::string::npos)
      << loss_divergence(away);
  EXPECT_EQ(loss_divergence({0.69, 1e6}), "");  // too short to say
  // wide_deep's early spike (1.2 -> 52 by step 8) in a short run: not judged.
  EXPECT_EQ(loss_divergence({1.18, 3, 8, 8.3, 20, 30, 41, 52}), "");
}

}  // namespace
}  // namespace aim::train
