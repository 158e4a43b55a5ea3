// Recurrent layers over whole sequences on autograd::rnn (one graph node per layer and direction;
// cell math in kernels/rnn/rnn.h):
//   LSTM, GRU   torch.nn.LSTM / torch.nn.GRU: same options, same parameter names and shapes
//               (weight_ih_l{k}[_reverse] [G*H, I_k], weight_hh_l{k}[_reverse] [G*H, H],
//               bias_ih_l{k}[_reverse], bias_hh_l{k}[_reverse] [G*H], in PyTorch's order), so a
//               PyTorch state_dict loads unchanged. GRU adds linear_before_reset: true (default)
//               is PyTorch's cell, false TensorFlow's GRUCell (reset gate applied to h before the
//               recurrent product, as DIEN uses it).
//   AUGRU       DIEN's attention-update GRU (VecAttGRUCell, MODELS.md §4.2): one layer, one
//               direction, the update gate scaled by an attention score per step. Parameters
//               weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0 (a GRU's, so the weights of
//               GRU(linear_before_reset = false) load into it and vice versa).
//
// Init as PyTorch: every parameter U(-1/sqrt(H), 1/sqrt(H)), drawn from Philox(seed) in parameter
// order; the dropout between layers then continues that stream. AUGRU then sets
// the biases as TensorFlow's GRUCell initialises them (MODELS.md §4.2: "gate bias init 1.0"):
// bias_ih_l0 = 1 on the r and z rows, 0 on the n rows; bias_hh_l0 = 0.
//
// Variable lengths (lengths: [B] i32 or i64 on the CPU, 0 <= len <= T; undefined = all T) follow
// PyTorch's packed sequences: outputs at t >= len[b] are 0, h_n / c_n are the states after each
// sequence's last step, the reverse direction starts at t = len[b] - 1. That is, with lengths,
// output equals pad_packed_sequence(rnn(pack_padded_sequence(x, lengths, enforce_sorted=False)),
// total_length=T) and h_n, c_n equal PyTorch's.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/random/random.h"
#include "kernels/rnn/rnn.h"
#include "layers/module.h"

namespace aim::layers {

struct RnnOptions {
  int64_t num_layers = 1;
  bool bias = true;
  bool batch_first = false;  // x, output as [B, T, ...] instead of [T, B, ...]
  double dropout = 0;        // on each layer's output but the last's, training only
  bool bidirectional = false;
  bool linear_before_reset = true;  // GRU only (LSTM rejects false)
};

struct RnnOutput {
  Variable output;  // [T, B, D*H] ([B, T, D*H] when batch_first: a transposed view)
  Variable h_n;     // [L*D, B, H] (AUGRU: [B, H])
  Variable c_n;     // [L*D, B, H] for the LSTM; undefined otherwise
};

// The shared body of LSTM and GRU (a multi-layer, optionally bidirectional stack).
class RnnStack : public Module {
 public:
  // x [T, B, I] (or [B, T, I]); lengths as above or undefined; h0, c0 [L*D, B, H] or undefined
  // (zeros); c0 is for the LSTM only.
  RnnOutput forward(const Variable& x, const Tensor& lengths, const Variable& h0 = Variable(),
                    const Variable& c0 = Variable());
  // Sequential's entry: no lengths, zero initial state; returns the output only.
  Variable forward(const Variable& x) override { return forward(x, Tensor()).output; }
  // The kernels' cost (rnn_fwd_cost) of every layer and direction, plus the dropout between
  // layers in training; `in` is x's shape. Returns the output's shape.
  Shape count_flops(const Shape& in, double& flops) const override;
  std::string type_name() const override {
    return cell_ == kernels::RnnCell::LSTM ? "LSTM" : "GRU";
  }

  // The parameters of layer k (0-based), direction reverse; b_* undefined when !bias.
  const Parameter& weight_ih(int64_t k, bool reverse = false) const;
  const Parameter& weight_hh(int64_t k, bool reverse = false) const;
  const Parameter& bias_ih(int64_t k, bool reverse = false) const;
  const Parameter& bias_hh(int64_t k, bool reverse = false) const;
  int64_t input_size() const { return input_size_; }
  int64_t hidden_size() const { return hidden_size_; }
  const RnnOptions& options() const { return o_; }
  int64_t num_directions() const { return o_.bidirectional ? 2 : 1; }
  kernels::Generator& dropout_generator() { return gen_; }

 protected:
  RnnStack(kernels::RnnCell cell, int64_t input_size, int64_t hidden_size, const RnnOptions& o,
           uint64_t seed);

 private:
  struct Weights {
    Parameter w_ih, w_hh, b_ih, b_hh;
  };
  const Weights& at(int64_t k, bool reverse) const;

  kernels::RnnCell cell_;
  int64_t input_size_, hidden_size_;
  RnnOptions o_;
  std::vector<Weights> w_;  // index k * D + direction
  kernels::Generator gen_;  // dropout between layers
};

class LSTM : public RnnStack {
 public:
  LSTM(int64_t input_size, int64_t hidden_size, const RnnOptions& o = {}, uint64_t seed = 0)
      : RnnStack(kernels::RnnCell::LSTM, input_size, hidden_size, o, seed) {}
};

class GRU : public RnnStack {
 public:
  GRU(int64_t input_size, int64_t hidden_size, const RnnOptions& o = {}, uint64_t seed = 0)
      : RnnStack(kernels::RnnCell::GRU, input_size, hidden_size, o, seed) {}
};

struct AugruOptions {
  bool bias = true;
  bool batch_first = false;          // x [B, T, I] and att [B, T] instead of [T, B, ...]
  bool linear_before_reset = false;  // TensorFlow's GRUCell (DIEN's VecAttGRUCell)
};

class AUGRU : public Module {
 public:
  AUGRU(int64_t input_size, int64_t hidden_size, const AugruOptions& o = {}, uint64_t seed = 0);
  // x [T, B, I] (or [B, T, I]); att [T, B] (or [B, T]) scores in [0, 1]; lengths as above; h0
  // [B, H] or undefined. Returns output [T, B, H] (or [B, T, H]) and h_n [B, H].
  RnnOutput forward(const Variable& x, const Variable& att, const Tensor& lengths = Tensor(),
                    const Variable& h0 = Variable());
  Shape count_flops(const Shape& in, double& flops) const override;
  std::string type_name() const override { return "AUGRU"; }
  int64_t input_size() const { return input_size_; }
  int64_t hidden_size() const { return hidden_size_; }
  const AugruOptions& options() const { return o_; }

  Parameter weight_ih_l0;  // [3H, I]
  Parameter weight_hh_l0;  // [3H, H]
  Parameter bias_ih_l0;    // [3H], undefined when !bias
  Parameter bias_hh_l0;    // [3H], undefined when !bias

 private:
  int64_t input_size_, hidden_size_;
  AugruOptions o_;
};

}  // namespace aim::layers
