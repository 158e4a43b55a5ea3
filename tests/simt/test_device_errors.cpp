// The device error record (kernels/error_flag.h) under the SIMT emulator: the own CUDA variants
// of embedding, cross entropy, CTC and the index ops, run on CPU tensors, must not throw (nor
// trap, nor read back) on a bad index or target; they record it, and check_device_errors(cpu)
// throws the CPU's message naming the op, the value and its position, then resets the record.
// Suite Simt_*: also run under AIM_SIMT_SCHEDULE=reverse.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/embedding/embedding.h"
#include "kernels/error_flag.h"
#include "kernels/index/index.h"
#include "kernels/loss/ctc.h"
#include "kernels/loss/loss.h"
#include "kernels/registry.h"

namespace aim::kernels {
namespace {

// Clears anything an earlier test left.
void clear_record() {
  try {
    check_device_errors(kCPU);
  } catch (const Error&) {
  }
}

// check_device_errors must throw a message containing `want`; a second check must not throw.
void expect_flagged(const std::string& want) {
  try {
    check_device_errors(kCPU);
    ADD_FAILURE() << "check_device_errors did not throw; expected: " << want;
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(want), std::string::npos) << m;
    EXPECT_NE(m.find("(flagged on cpu; "), std::string::npos) << m;
  }
  EXPECT_NO_THROW(check_device_errors(kCPU)) << "the record is reset after a check";
}

Tensor i64(std::vector<int64_t> v) {
  const int64_t n = int64_t(v.size());
  return Tensor::from_vector(v, {n});
}

TEST(Simt_DeviceErrors, NoErrorNoThrow) {
  clear_record();
  ScopedVariant sv("embedding_fwd", "cuda.gather");
  EmbeddingFwdArgs a;
  a.weight = Tensor::ones({5, 3});
  a.indices = i64({0, 4, 2});
  a.out = Tensor::empty({3, 3});
  embedding_fwd(a);
  EXPECT_NO_THROW(check_device_errors(kCPU));
}

TEST(Simt_DeviceErrors, EmbeddingForwardFlagsInsteadOfThrowing) {
  clear_record();
  ScopedVariant sv("embedding_fwd", "cuda.gather");
  EmbeddingFwdArgs a;
  a.weight = Tensor::ones({5, 3});
  a.indices = i64({0, 4, 7, 1});
  a.out = Tensor::full({4, 3}, 9.0);
  EXPECT_NO_THROW(embedding_fwd(a));  // the old code read a flag back and threw here
  const std::vector<float> out = a.out.to_vector<float>();
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(out[size_t(2 * 3 + c)], 0.0f) << "a bad index's row is zeros";
    EXPECT_EQ(out[size_t(1 * 3 + c)], 1.0f);
  }
  expect_flagged("[embedding_fwd] index 7 at position 2 is out of range for V = 5");
}

TEST(Simt_DeviceErrors, EmbeddingBackwardBothVariants) {
  for (const char* v : {"cuda.sorted", "cuda.atomic"}) {
    SCOPED_TRACE(v);
    clear_record();
    ScopedVariant sv("embedding_bwd", v);
    EmbeddingBwdArgs a;
    a.dout = Tensor::ones({3, 2});
    a.indices = i64({1, -3, 1});
    a.dweight = Tensor::zeros({4, 2});
    EXPECT_NO_THROW(embedding_bwd(a));
    EXPECT_EQ(a.dweight.to_vector<float>(), (std::vector<float>{0, 0, 2, 2, 0, 0, 0, 0}))
        << "the good rows still get their gradient, the bad one none";
    // Once: only the first stage of the key buckets records (kernels/key_buckets.cuh).
    expect_flagged(
        "[embedding_bwd] index -3 at position 1 is out of range for V = 4 (flagged on cpu; 1 "
        "flag");
  }
}

TEST(Simt_DeviceErrors, CrossEntropyTargets) {
  clear_record();
  ScopedVariant f("cross_entropy_fwd", "cuda.rows");
  CrossEntropyFwdArgs a;
  a.logits = Tensor::zeros({3, 4});
  a.target = i64({1, -100, 9});  // -100: ignore_index, not an error
  a.loss = Tensor::empty({});
  a.lse = Tensor::empty({3});
  EXPECT_NO_THROW(cross_entropy_fwd(a));
  expect_flagged(
      "[cross_entropy_fwd] target 9 at position 2 is out of range for V = 4 (expected 0 <= "
      "target < 4 or ignore_index = -100)");

  ScopedVariant b("cross_entropy_bwd", "cuda.rows");
  CrossEntropyBwdArgs g;
  g.dloss = Tensor::ones({});
  g.logits = a.logits;
  g.target = i64({-1, 2, 0});
  g.lse = a.lse;
  g.dlogits = Tensor::empty({3, 4});
  EXPECT_NO_THROW(cross_entropy_bwd(g));
  expect_flagged("[cross_entropy_bwd] target -1 at position 0 is out of range for V = 4");
}

TEST(Simt_DeviceErrors, CtcTargets) {
  clear_record();
  ScopedVariant f("ctc_fwd", "cuda.batch");
  const int64_t T = 4, B = 2, C = 3;
  CtcFwdArgs a;
  a.log_probs = Tensor::full({T, B, C}, -1.0986122886681098);  // log(1/3)
  a.targets = i64({1, 2, 2, 5});                               // sample 1: {2, 5}: 5 >= C
  a.input_lengths = i64({4, 4});
  a.target_lengths = i64({2, 2});
  a.loss = Tensor::empty({});
  a.log_alpha = Tensor::empty(ctc_log_alpha_shape(a.log_probs, a.targets, a.target_lengths));
  EXPECT_NO_THROW(ctc_fwd(a));
  expect_flagged(
      "[ctc_fwd] target 5 of sample 1 at position 1 is not a label: expected 0 <= target < C = "
      "3 and target != blank = 0");
}

TEST(Simt_DeviceErrors, IndexOpsNoLongerTrap) {
  clear_record();
  {
    ScopedVariant sv("index_select", "cuda.grid_stride");
    IndexSelectArgs a;
    a.x = Tensor::ones({2, 3});
    a.index = i64({1, 2});
    a.y = Tensor::full({2, 3}, 7.0);
    EXPECT_NO_THROW(index_select(a));  // the old kernel called __trap()
    EXPECT_EQ(a.y.to_vector<float>(), (std::vector<float>{1, 1, 1, 0, 0, 0}));
    expect_flagged("[index_select] index 2 at position 1 out of range [0, 2)");
  }
  {
    ScopedVariant sv("one_hot", "cuda.grid_stride");
    OneHotArgs a;
    a.indices = i64({0, 3});
    a.y = Tensor::empty({2, 3}, DType::i64);
    EXPECT_NO_THROW(one_hot(a));
    EXPECT_EQ(a.y.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0, 0, 0, 0}));
    expect_flagged("[one_hot] index 3 at position 1 out of range [0, 3) (flagged on cpu; 1 flag");
  }
}

TEST(Simt_DeviceErrors, FirstFlagIsKeptUntilTheCheck) {
  clear_record();
  ScopedVariant sv("embedding_fwd", "cuda.gather");
  EmbeddingFwdArgs a;
  a.weight = Tensor::ones({5, 3});
  a.indices = i64({6});
  a.out = Tensor::empty({1, 3});
  embedding_fwd(a);
  a.indices = i64({8});
  embedding_fwd(a);  // a later error does not overwrite the first
  expect_flagged(
      "[embedding_fwd] index 6 at position 0 is out of range for V = 5 (flagged on "
      "cpu; 2 flags since the last check)");
}

}  // namespace
}  // namespace aim::kernels
