// layers/fold.h: batch norm folded into the convolution before it (aim-infer). The folded model's
// outputs equal the unfolded ones; what is not a conv -> batch-norm pair (a batch norm after an
// activation, one in training mode, a conv whose output feeds two batch norms, a subclass with its
// own forward) is left alone.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "autograd/functions/elementwise.h"
#include "autograd/functions/reduce.h"
#include "autograd/variable.h"
#include "kernels/testing.h"
#include "layers/activation.h"
#include "layers/batchnorm.h"
#include "layers/conv.h"
#include "layers/fold.h"
#include "layers/sequential.h"
#include "tests/support/op_counts.h"

namespace aim::layers {
namespace {

using autograd::Variable;

// Running statistics and affine parameters away from the identity, so folding has work to do.
void randomize(BatchNorm2d& bn, uint64_t seed) {
  const int64_t c = bn.num_features();
  for (auto& [name, t] : bn.named_buffers()) {
    if (name == "running_mean") t.copy_(kernels::random_tensor({c}, DType::f32, seed, -0.5, 0.5));
    if (name == "running_var") t.copy_(kernels::random_tensor({c}, DType::f32, seed + 1, 0.2, 2.0));
  }
  bn.weight.data().copy_(kernels::random_tensor({c}, DType::f32, seed + 2, 0.5, 1.5));
  bn.bias.data().copy_(kernels::random_tensor({c}, DType::f32, seed + 3, -0.5, 0.5));
}

double max_diff(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.contiguous().to_vector<float>(),
                           y = b.contiguous().to_vector<float>();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::fabs(double(x[i]) - y[i]));
  return m;
}

using ::aim::testing::count_ops;

// conv(no bias) -> bn -> relu -> conv(bias) -> bn -> relu -> bn (the last one follows a ReLU).
struct Net {
  std::shared_ptr<Sequential> seq = std::make_shared<Sequential>();
  std::shared_ptr<BatchNorm2d> bn_a, bn_b, bn_c;
  Net() {
    seq->push_back(std::make_shared<Conv2d>(3, 8, 3, ConvOptions().padding(1).no_bias(), 1));
    seq->push_back(bn_a = std::make_shared<BatchNorm2d>(8));
    seq->push_back(std::make_shared<ReLU>());
    seq->push_back(std::make_shared<Conv2d>(8, 6, 3, ConvOptions().stride(2), 2));
    seq->push_back(bn_b = std::make_shared<BatchNorm2d>(6, 1e-3));
    seq->push_back(std::make_shared<ReLU>());
    seq->push_back(bn_c = std::make_shared<BatchNorm2d>(6));
    randomize(*bn_a, 10);
    randomize(*bn_b, 20);
    randomize(*bn_c, 30);
  }
};

TEST(FoldBatchNorm, FoldedOutputsEqualUnfolded) {
  Net net;
  net.seq->eval();
  autograd::NoGradGuard ng;
  const Variable x(kernels::random_tensor({2, 3, 9, 11}, DType::f32, 7), false);
  const Tensor before = net.seq->forward(x).data();
  const std::vector<std::string> folded = fold_batchnorm(*net.seq, [&] { net.seq->forward(x); });
  EXPECT_EQ(folded, (std::vector<std::string>{"1", "4"}));  // not "6": it follows a ReLU
  EXPECT_TRUE(net.bn_a->folded() && net.bn_b->folded() && !net.bn_c->folded());
  const Tensor after = net.seq->forward(x).data();
  EXPECT_LT(max_diff(before, after), 2e-5);
  EXPECT_GT(max_diff(before, Tensor::zeros(before.sizes())), 0.1);  // not a trivial output
  // Training a folded model is refused.
  net.seq->train();
  EXPECT_THROW(net.seq->forward(x), Error);
}

// conv -> bn.forward_relu (ResNet's conv -> BN -> ReLU): the relu moves into the conv's epilogue
// (Conv2d::fused_relu) and the batch norm returns its input; the same outputs, and the batch norm
// called without relu afterwards is an error rather than a silently missing relu.
// One conv (3 -> 8 channels) and a batch norm after it, in eval mode under one root.
struct ConvBn {
  std::shared_ptr<Conv2d> conv;
  std::shared_ptr<BatchNorm2d> bn = std::make_shared<BatchNorm2d>(8);
  Sequential root;
  ConvBn(int64_t kernel, const ConvOptions& o, uint64_t seed)
      : conv(std::make_shared<Conv2d>(3, 8, kernel, o, seed)) {
    randomize(*bn, seed * 10);
    root.push_back(conv);
    root.push_back(bn);
    root.eval();
  }
};

TEST(FoldBatchNorm, ForwardReluMovesIntoTheConv) {
  ConvBn m(3, ConvOptions().padding(1), 4);
  auto& conv = m.conv;
  auto& bn = m.bn;
  Sequential& root = m.root;
  autograd::NoGradGuard ng;
  const Variable x(kernels::random_tensor({2, 3, 9, 11}, DType::f32, 8), false);
  auto run = [&] { return bn->forward_relu(conv->forward(x)).data(); };
  const Tensor before = run();
  const std::vector<std::string> folded = fold_batchnorm(root, [&] { run(); });
  EXPECT_EQ(folded, (std::vector<std::string>{"1"}));
  EXPECT_TRUE(conv->fused_relu());
  const Tensor after = run();
  EXPECT_LT(max_diff(before, after), 2e-5);
  const std::vector<float> v = after.to_vector<float>();
  int zeros = 0;
  for (float e : v) zeros += e == 0.0f;
  EXPECT_GT(zeros, int(v.size()) / 10);  // the relu did something
  EXPECT_THROW(bn->forward(conv->forward(x)), Error);
}

// A ResNet block's tail, conv -> BN, + shortcut, -> ReLU: once the batch norm is folded, the
// conv's epilogue adds the shortcut and applies the relu (Conv2d::forward_residual_relu).
TEST(FoldBatchNorm, ResidualAndReluInTheFoldedConv) {
  ConvBn m(1, ConvOptions(), 5);
  auto& conv = m.conv;
  auto& bn = m.bn;
  Sequential& root = m.root;
  autograd::NoGradGuard ng;
  const Variable x(kernels::random_tensor({2, 3, 9, 11}, DType::f32, 9), false);
  const Variable shortcut(kernels::random_tensor({2, 8, 9, 11}, DType::f32, 10), false);
  const Tensor before =
      autograd::relu(autograd::add(bn->forward(conv->forward(x)), shortcut)).data();
  EXPECT_EQ(fold_batchnorm(root, [&] { bn->forward(conv->forward(x)); }),
            (std::vector<std::string>{"1"}));
  ASSERT_TRUE(bn->folded());
  const Tensor after = bn->forward(conv->forward_residual_relu(x, shortcut)).data();
  EXPECT_LT(max_diff(before, after), 2e-5);
  EXPECT_GT(max_diff(before, Tensor::zeros(before.sizes())), 0.1);
}

TEST(FoldBatchNorm, TrainingModeIsNotFolded) {
  Net net;
  net.seq->train();
  autograd::NoGradGuard ng;
  const Variable x(kernels::random_tensor({2, 3, 9, 11}, DType::f32, 7), false);
  EXPECT_TRUE(fold_batchnorm(*net.seq, [&] { net.seq->forward(x); }).empty());
}

// One conv whose output two batch norms read (two branches): no pair.
class TwoHeads : public Module {
 public:
  TwoHeads() {
    conv = child("conv", std::make_shared<Conv2d>(3, 4, 1, ConvOptions(), 3));
    bn1 = child("bn1", std::make_shared<BatchNorm2d>(4));
    bn2 = child("bn2", std::make_shared<BatchNorm2d>(4));
    randomize(*bn1, 40);
    randomize(*bn2, 50);
  }
  Variable forward(const Variable& x) override {
    const Variable y = conv->forward(x);
    bn1->forward(y);
    return bn2->forward(y);
  }
  std::string type_name() const override { return "TwoHeads"; }
  std::shared_ptr<Conv2d> conv;
  std::shared_ptr<BatchNorm2d> bn1, bn2;
};

TEST(FoldBatchNorm, SharedConvOutputIsNotFolded) {
  TwoHeads m;
  m.eval();
  autograd::NoGradGuard ng;
  const Variable x(kernels::random_tensor({1, 3, 5, 5}, DType::f32, 8), false);
  EXPECT_TRUE(fold_batchnorm(m, [&] { m.forward(x); }).empty());
}

// Sequential runs a Conv2d followed by a ReLU as Conv2d::forward_relu: one conv2d_fwd with the
// relu in its epilogue (no unary op recorded), at inference the same bits as conv then relu; with
// a gradient too (relu's node recorded over the conv's, relu_recorded): the same output and
// gradients as the two ops.
TEST(FoldBatchNorm, SequentialConvReluIsOneKernel) {
  auto conv = std::make_shared<Conv2d>(3, 5, 3, ConvOptions().padding(1), 11);
  Sequential seq({conv, std::make_shared<ReLU>()});
  const Tensor xt = kernels::random_tensor({2, 3, 7, 9}, DType::f32, 12);
  {
    autograd::NoGradGuard ng;
    const Variable x(xt, false);
    const Tensor want = autograd::relu(conv->forward(x)).data();
    Tensor got;
    const std::map<std::string, int> ops = count_ops([&] { got = seq.forward(x).data(); });
    EXPECT_EQ(ops, (std::map<std::string, int>{{"conv2d_fwd", 1}}));
    EXPECT_EQ(max_diff(want, got), 0.0);
    int zeros = 0;
    for (float e : got.to_vector<float>()) zeros += e == 0.0f;
    EXPECT_GT(zeros, 0);  // the relu did something
  }
  // With a gradient: against conv then relu, as a module-by-module Sequential would run them.
  Variable x1(xt.clone(), true), x2(xt.clone(), true);
  const Variable y1 = autograd::relu(conv->forward(x1));
  autograd::sum(y1).backward();
  const Tensor dw1 = conv->weight.grad().clone(), db1 = conv->bias.grad().clone();
  conv->zero_grad();
  Variable y2;
  EXPECT_EQ(count_ops([&] { y2 = seq.forward(x2); }),
            (std::map<std::string, int>{{"conv2d_fwd", 1}}));
  autograd::sum(y2).backward();
  EXPECT_EQ(max_diff(y1.data(), y2.data()), 0.0);
  EXPECT_EQ(max_diff(x1.grad(), x2.grad()), 0.0);
  EXPECT_EQ(max_diff(dw1, conv->weight.grad()), 0.0);
  EXPECT_EQ(max_diff(db1, conv->bias.grad()), 0.0);
}

// A batch norm and relu before a pointwise conv (DenseNet's norm1 -> conv1, reading a concatenation
// no conv wrote): folded into the conv after it as its input transform, which the kernel applies
// while copying its input (x here a channel slice of a wider tensor, as DenseBlock's buffer).
// The one before a 3x3 conv stays. With a gradient the transform runs as ops of its own.
TEST(FoldBatchNorm, IntoThePointwiseConvAfter) {
  auto bn = std::make_shared<BatchNorm2d>(6);
  auto conv = std::make_shared<Conv2d>(6, 5, 1, ConvOptions(), 41);
  auto bn3 = std::make_shared<BatchNorm2d>(6);
  auto conv3 = std::make_shared<Conv2d>(6, 4, 3, ConvOptions().padding(1), 42);
  randomize(*bn, 40);
  randomize(*bn3, 43);
  Sequential root;
  root.push_back(bn);
  root.push_back(conv);
  root.push_back(bn3);
  root.push_back(conv3);
  root.eval();
  const Tensor wide = kernels::random_tensor({3, 9, 7, 5}, DType::f32, 44);
  const Variable x(wide.narrow(1, 0, 6), false);
  auto run = [&] {
    return std::make_pair(conv->forward(bn->forward_relu(x)).data(),
                          conv3->forward(bn3->forward_relu(x)).data());
  };
  std::pair<Tensor, Tensor> before, after;
  std::vector<std::string> next;
  {
    autograd::NoGradGuard ng;
    before = run();
    EXPECT_EQ(fold_batchnorm(
                  root, [&] { run(); }, &next),
              (std::vector<std::string>{"0"}));
    EXPECT_EQ(next, (std::vector<std::string>{"0"}));
    EXPECT_TRUE(bn->folded() && conv->has_input_affine());
    EXPECT_FALSE(bn3->folded() || conv3->has_input_affine());
    std::map<std::string, int> ops;
    ops = count_ops([&] { after = run(); });
    EXPECT_EQ(ops["batchnorm_fwd"], 1) << "only bn3 runs a pass of its own";
  }
  EXPECT_LT(max_diff(before.first, after.first), 2e-5);
  EXPECT_LT(max_diff(before.second, after.second), 2e-5);
  EXPECT_GT(max_diff(before.first, Tensor::zeros(before.first.sizes())), 0.1);
  // With a gradient: the same values, the transform as ops of its own.
  const Variable xg(wide.narrow(1, 0, 6).contiguous(), true);
  const Variable y = conv->forward(bn->forward_relu(xg));
  EXPECT_LT(max_diff(before.first, y.data()), 2e-5);
  autograd::sum(y).backward();
  EXPECT_GT(max_diff(xg.grad(), Tensor::zeros(xg.sizes())), 0.0);
  // Only a pointwise conv takes an input transform.
  EXPECT_THROW(
      conv3->set_input_affine(std::vector<double>(6, 1.0), std::vector<double>(6, 0.0), true),
      Error);
}

}  // namespace
}  // namespace aim::layers
