// Inference folding of BatchNorm2d into the Conv2d that feeds it (aim-infer, eval mode):
//   y = gamma * (conv(x) + b - mean) / sqrt(var + eps) + beta
//     = conv'(x) + b'   with  w'[k] = w[k] * s[k],  b'[k] = (b[k] - mean[k]) * s[k] + beta[k],
//                                  s[k] = gamma[k] / sqrt(var[k] + eps)
// so the batch-norm pass over the activations disappears (one read and one write of every
// conv output: ~20% of ResNet-50's inference time on this CPU).
// The pairs are found by running the model once with a trace on: a BatchNorm2d whose every call
// reads the output of the same Conv2d call, and a Conv2d whose every output goes to that one
// BatchNorm2d, is a pair. Only layers::BatchNorm2d itself (not subclasses with their own forward)
// in eval mode with running statistics is folded. The caller checks the outputs before and after
// (run_inference does: an error beyond 1e-4 relative), since the trace cannot see a conv output
// that a non-module op also reads.
// The other direction (DenseNet: BN -> ReLU -> 1x1 conv, the batch norm reading a concatenation
// that no conv wrote): a batch norm whose every call's output is the input of one call of the
// same pointwise Conv2d, and whose conv takes every input from it, goes into that conv as its
// input transform (Conv2d::set_input_affine; the kernel applies it while copying its input, on
// the CPU only: elsewhere it would be three passes where the batch norm is one).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "layers/module.h"

namespace aim::layers {

class Conv2d;
class BatchNorm2d;

// What Conv2d::forward and BatchNorm2d::forward report while a trace is on (thread-local).
class FoldTrace {
 public:
  static FoldTrace* active();
  void conv_output(const Conv2d* conv, const Tensor& y);
  void batchnorm_input(const BatchNorm2d* bn, const Tensor& x, bool relu);
  void batchnorm_output(const BatchNorm2d* bn, const Tensor& y);
  void conv_input(const Conv2d* conv, const Tensor& x);

 private:
  friend struct FoldTraceScope;
  friend std::vector<std::string> fold_batchnorm(Module& root, const std::function<void()>& run,
                                                 std::vector<std::string>* into_next);
  struct Call {
    const Conv2d* conv;
    const void* data;
    Shape sizes;
    uint64_t hash;
    int consumers = 0;
  };
  std::vector<Call> convs_;
  struct Use {
    const BatchNorm2d* bn;
    const Conv2d* conv;  // null: the input did not come from a traced conv output
    bool relu;           // called through forward_relu
  };
  std::vector<Use> bns_;
  struct BnOut {  // one batch-norm call's output
    const BatchNorm2d* bn;
    const void* data;
    Shape sizes;
    uint64_t hash;
    int consumers = 0;  // conv calls that read it
  };
  std::vector<BnOut> bn_outs_;
  struct Feed {  // one conv call's input
    const Conv2d* conv;
    const BatchNorm2d* bn;  // null: not a traced batch-norm output
  };
  std::vector<Feed> feeds_;
};

// Runs `run` (one eval forward) with the trace on, folds every pair found, and returns the folded
// batch-norm layers' names. The module must be in eval mode. A folded batch norm whose every call
// was forward_relu moves its relu into the conv's epilogue too (Conv2d::set_fused_relu): one
// kernel writes relu(conv(x) + b') and no relu pass follows. into_next (optional): batch norms
// may also fold into the pointwise conv after them (input transforms), and their names are
// appended there (a subset of the returned ones). Not for int8 (its convolutions would run the
// transform as three passes of their own: autograd::conv2d).
std::vector<std::string> fold_batchnorm(Module& root, const std::function<void()>& run,
                                        std::vector<std::string>* into_next = nullptr);

}  // namespace aim::layers
