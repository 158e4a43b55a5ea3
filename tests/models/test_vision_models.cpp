// The CNN classifiers (models/resnet.h, ...): torchvision parity (tests/peers/vision.py: same
// weights through safetensors, eval logits, training-mode loss, every gradient), analytic FLOPs
// against the published counts, and a tiny ResNet that learns the synthetic classes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>

#include "kernels/testing.h"
#include "layers/dropout.h"
#include "layers/fold.h"
#include "models/registry.h"
#include "tensor/safetensors.h"
#include "tests/support/common.h"
#include "train/trainer.h"

namespace aim::models {
namespace {

using ::aim::testing::source_root;

bool have_torchvision() {
  if (std::system("/usr/bin/python3 -c 'import torchvision' >/dev/null 2>&1") == 0) return true;
  // CI installs python3-torchvision (tools/deps.sh): there the parity check must run, not skip.
  if (std::getenv("CI"))
    ADD_FAILURE() << "CI is set but /usr/bin/python3 cannot import torchvision";
  return false;
}

// max |a - b| / max |b|: one relative figure per tensor, in f64.
double rel_diff(const Tensor& a, const Tensor& b) {
  const auto x = a.to(kCPU).to(DType::f64).contiguous().to_vector<double>();
  const auto y = b.to(DType::f64).contiguous().to_vector<double>();
  EXPECT_EQ(x.size(), y.size());
  double d = 0, m = 1e-300;
  for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
    d = std::max(d, std::abs(x[i] - y[i]));
    m = std::max(m, std::abs(y[i]));
  }
  return d / m;
}

// The peers run with dropout off (p = 0): so does the model here.
void disable_dropout(layers::Module& m) {
  for (const auto& [name, c] : m.children()) {
    (void)name;
    if (auto* d = dynamic_cast<layers::Dropout*>(c.get())) d->set_p(0);
    disable_dropout(*c);
  }
}

struct Peer {
  std::string script;  // tests/peers/<script>
  std::string model;   // the script's MODEL argument
  bool tiny = false;
};

// Builds `model` with `config`, loads the peer's weights, and compares the eval logits in f32
// (1e-3 relative), then, in f64 (tests/peers/vision.py reference_outputs says why), the
// training-mode loss and every parameter gradient.
void peer_parity(const std::string& model, const Peer& peer, const std::vector<std::string>& config,
                 int64_t image, int64_t classes) {
  if (!have_torchvision()) GTEST_SKIP() << "/usr/bin/python3 cannot import torchvision";
  const std::string dir = ::aim::testing::make_temp_dir("aim_vision_parity");
  const std::string cmd = "/usr/bin/python3 " + source_root() + "/tests/peers/" + peer.script +
                          " " + peer.model + " --out-dir " + dir + " --image " +
                          std::to_string(image) + " --classes " + std::to_string(classes) +
                          (peer.tiny ? " --tiny" : "");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const ModelEntry& e = find_model(model);
  std::vector<std::string> kv = config;
  kv.push_back("image=" + std::to_string(image));
  kv.push_back("classes=" + std::to_string(classes));
  if (peer.tiny) kv.push_back("size=tiny");
  std::unique_ptr<Model> m = e.build(e.parse_config(kv), 1);
  disable_dropout(*m);
  const SafetensorsFile w = load_safetensors(dir + "/weights.safetensors");
  m->load_state_dict(w.tensors, /*strict=*/true);
  const SafetensorsFile b = load_safetensors(dir + "/batch.safetensors");
  const SafetensorsFile o = load_safetensors(dir + "/out.safetensors");
  TensorMap batch = {{"input", b.at("input")}, {"label", b.at("label")}};

  m->eval();
  {
    autograd::NoGradGuard ng;
    const double d = rel_diff(m->infer(batch).at("logits"), o.at("logits_eval"));
    EXPECT_LT(d, 1e-3) << model << " eval logits";
    std::printf("[%s parity] f32 eval logits rel %.3g\n", model.c_str(), d);
  }
  m->to(DType::f64);
  batch["input"] = batch["input"].to(DType::f64);
  m->train();
  const Variable loss = m->training_loss(batch);
  const double dloss = rel_diff(loss.data(), o.at("loss"));
  EXPECT_LT(dloss, 1e-9) << model << " loss";
  loss.backward();
  double worst = 0;
  std::string worst_name;
  for (const auto& [n, p] : m->named_parameters()) {
    ASSERT_TRUE(o.has("grad." + n)) << n;
    const double d = rel_diff(p.grad(), o.at("grad." + n));
    if (d > worst) worst = d, worst_name = n;
  }
  EXPECT_LT(worst, 1e-7) << model << ": worst gradient " << worst_name;
  std::printf("[%s parity] f64 loss rel %.3g, worst gradient rel %.3g (%s)\n", model.c_str(), dloss,
              worst, worst_name.c_str());
  std::system(("rm -rf " + dir).c_str());
}

// torchvision's models (tests/peers/vision.py). resnet at 64 px, full width; the plain CNNs in
// their tiny configuration (torchvision's classes with the widths divided, as size=tiny).
TEST(VisionParity, ResNet50) { peer_parity("resnet50", {"vision.py", "resnet50"}, {}, 64, 1000); }
TEST(VisionParity, ResNet50V1) {
  peer_parity("resnet50", {"vision.py", "resnet50_v1"}, {"variant=v1"}, 64, 1000);
}
TEST(VisionParity, Vgg16Tiny) { peer_parity("vgg16", {"vision.py", "vgg16", true}, {}, 32, 10); }
TEST(VisionParity, AlexNetTiny) {
  peer_parity("alexnet", {"vision.py", "alexnet", true}, {}, 32, 10);
}
TEST(VisionParity, SqueezeNetTiny) {
  peer_parity("squeezenet", {"vision.py", "squeezenet", true}, {}, 32, 10);
}
// DenseNet (torchvision's, and AI Matrix's TF graph), GoogLeNet and synNet against our own
// PyTorch scripts (tests/peers/aimatrix_cnn.py), tiny.
TEST(VisionParity, DenseNet121Tiny) {
  peer_parity("densenet121", {"aimatrix_cnn.py", "densenet121", true}, {}, 32, 10);
}
TEST(VisionParity, DenseNet121AimatrixTfTiny) {
  peer_parity("densenet121", {"aimatrix_cnn.py", "densenet121_aimatrix_tf", true},
              {"variant=aimatrix_tf"}, 32, 10);
}
TEST(VisionParity, GoogLeNetTiny) {
  peer_parity("googlenet", {"aimatrix_cnn.py", "googlenet", true}, {}, 32, 10);
}
TEST(VisionParity, SynNetTiny) {
  peer_parity("synnet", {"aimatrix_cnn.py", "synnet", true}, {}, 32, 10);
}

// aim-infer's batch-norm folding on DenseNet-121 (tiny, torchvision's layout): each dense layer's
// norm1 and each transition's norm go into the pointwise conv after them as its input transform
// (reading DenseBlock's buffer in place), norm0 and each norm2 into the conv before them; norm5
// stays (global pooling follows). The logits do not move; nor does the eval output of the block
// buffer against the concatenations of a gradient-recording forward.
TEST(VisionFold, DenseNetNormsFoldIntoTheirConvs) {
  const ModelEntry& e = find_model("densenet121");
  std::unique_ptr<Model> m = e.build(e.parse_config({"size=tiny", "image=32", "classes=10"}), 1);
  uint64_t seed = 50;
  for (auto& [name, t] : m->named_buffers()) {
    const int64_t c = t.numel();
    if (name.size() > 12 && name.substr(name.size() - 12) == "running_mean")
      t.copy_(kernels::random_tensor({c}, DType::f32, seed++, -0.5, 0.5));
    if (name.size() > 11 && name.substr(name.size() - 11) == "running_var")
      t.copy_(kernels::random_tensor({c}, DType::f32, seed++, 0.2, 2.0));
  }
  m->eval();
  const TensorMap batch = {{"input", kernels::random_tensor({3, 3, 32, 32}, DType::f32, 60)},
                           {"label", Tensor::zeros({3}, DType::i64)}};
  const Tensor with_grad = m->infer(batch).at("logits");  // grad mode on: the concatenations
  autograd::NoGradGuard ng;
  const Tensor before = m->infer(batch).at("logits");  // DenseBlock's buffer
  EXPECT_LT(rel_diff(before, with_grad), 1e-6);
  std::vector<std::string> next;
  const std::vector<std::string> folded = layers::fold_batchnorm(
      *m, [&] { m->infer(batch); }, &next);
  EXPECT_EQ(folded.size(), 20u);  // 8 norm1 + 3 transition norms after; 8 norm2 + norm0 before
  EXPECT_EQ(next.size(), 11u);
  for (const std::string& n : next)
    EXPECT_TRUE(n.find(".norm1") != std::string::npos || n.find("transition") != std::string::npos)
        << n;
  const Tensor after = m->infer(batch).at("logits");
  EXPECT_LT(rel_diff(after, before), 1e-5);
  EXPECT_GT(rel_diff(before, Tensor::zeros(before.sizes())), 0.5);
}

// A tiny ResNet learns the synthetic classes (docs/image-data.md: attainable accuracy 1.0) with
// its recipe (Nesterov momentum SGD, lr 1.0 per 1024 samples, poly decay of power 2, L2 1e-4).
TEST(VisionTrain, TinyResNetLearnsSyntheticClasses) {
  const ModelEntry& e = find_model("resnet50");
  train::TrainOptions o;
  // 400 steps: at 250 the top-1 over seeds 1-4 spread 0.59-0.91, and f32 rounding alone (the
  // Winograd against the im2col convolution) moved seed 1 from 0.902 to 0.886; at 400 seeds 1-4
  // reach 0.949 / 0.940 / 0.877 / 0.912 (seed 1 asserted here).
  o.steps = 400;
  o.batch_size = 32;
  o.optim.name = "sgd";
  o.optim.lr = 1.0;
  o.optim.lr_batch = 1024;
  o.optim.momentum = 0.9;
  o.optim.nesterov = true;
  o.optim.weight_decay = 1e-4;
  o.schedule = "poly";
  o.poly_power = 2;
  o.seed = 1;
  o.eval_every = 0;
  o.eval_samples = 1000;
  o.device = "cpu";
  std::ostringstream log;
  const train::TrainResult r = train::train_model(e, e.parse_config({"size=tiny"}), o, log);
  std::printf("%s", log.str().c_str());
  EXPECT_GE(r.final_metrics.at("top1"), 0.9);
}

// Published counts (multiply-adds x 2 of the convolutions and FC at 224x224): torchvision's
// resnet50 4.09 GMACs, resnet152 11.5 GMACs. Ours adds BN, ReLU, pooling and residual adds.
TEST(VisionFlops, ResNetMatchesPublished) {
  for (const auto& [name, gmacs] :
       std::map<std::string, double>{{"resnet50", 4.089}, {"resnet152", 11.514}}) {
    const ModelEntry& e = find_model(name);
    std::unique_ptr<Model> m = e.build(e.parse_config({}), 1);
    m->eval();
    const TensorMap batch = {{"input", Tensor::zeros({1, 3, 224, 224})}};
    const double f = m->forward_flops(batch);
    EXPECT_GT(f, 2 * gmacs * 1e9) << name;
    EXPECT_LT(f, 2 * gmacs * 1e9 * 1.02) << name;  // the extras are ~1% of the convolutions
    std::printf("[%s] analytic forward %.4g GFLOP per 224x224 image\n", name.c_str(), f / 1e9);
  }
}

}  // namespace
}  // namespace aim::models
