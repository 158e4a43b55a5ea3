// Differentiable recurrent sequence: one direction of one layer of an LSTM, GRU or AUGRU per call,
// on kernels/rnn (rnn_fwd / rnn_bwd; math, gate order and conventions in kernels/rnn/rnn.h).
// One graph node per call; multi-layer and bidirectional stacks are built from these calls by
// layers/rnn.h.
//
// Inputs may be strided views (they are made contiguous); all floating-point inputs share x's
// dtype and device. The node's inputs are, in this order, x, h0, c0, w_ih, w_hh, b_ih, b_hh, att
// (undefined ones take no gradient); its outputs are y, hn and, for the LSTM, cn. Weight and bias
// gradients accumulate (+=) through g.accum; x, h0, c0 and att gradients are written (node.h).
// The forward keeps its workspace (kernels/rnn/rnn.h) for the backward only when some input
// needs a gradient; under NoGradGuard or with constant inputs no workspace is allocated.
#pragma once
#include "autograd/variable.h"
#include "kernels/rnn/rnn.h"

namespace aim::autograd {

struct RnnArgs {
  kernels::RnnCell cell = kernels::RnnCell::LSTM;
  bool reverse = false;             // run t = len[b]-1 .. 0
  bool linear_before_reset = true;  // GRU / AUGRU: PyTorch (true) or TensorFlow's GRUCell
  Variable x;                       // [T, B, I], time-major
  Tensor lengths;                   // [B] i32 on the CPU, or undefined: every length is T
  Variable h0, c0;                  // [B, H] or undefined (zeros); c0: LSTM only
  Variable w_ih, w_hh;              // [G*H, I], [G*H, H]; G = 4 (LSTM) or 3 (GRU, AUGRU)
  Variable b_ih, b_hh;              // [G*H], both or neither
  Variable att;                     // AUGRU: [T, B] attention scores; otherwise undefined
};

struct RnnResult {
  Variable y;   // [T, B, H]; zero at steps t >= lengths[b]
  Variable hn;  // [B, H]: the state after each sequence's last step
  Variable cn;  // [B, H] for the LSTM; undefined otherwise
};

RnnResult rnn(const RnnArgs& a);

}  // namespace aim::autograd
