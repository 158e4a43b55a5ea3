// Recurrent layers over a whole sequence, one direction of one layer per call: LSTM, GRU and
// AUGRU (DIEN's attention-scaled GRU). Multi-layer and bidirectional stacks are built from these
// calls by layers/rnn.h. Math, gate order, workspace layout: kernels/rnn/README.md.
//
// Conventions (PyTorch's, so torch.nn.LSTM / torch.nn.GRU weights load unchanged):
//   x [T, B, I] time-major; G gates stacked along the rows of the weights:
//   LSTM  G = 4, order i, f, g, o:  i,f,o = sigmoid(.), g = tanh(.),
//         c' = f*c + i*g,  h' = o*tanh(c')
//   GRU   G = 3, order r, z, n:     r,z = sigmoid(W_i x + b_i + W_h h + b_h),
//         linear_before_reset (PyTorch, cuDNN):  n = tanh(W_in x + b_in + r*(W_hn h + b_hn))
//         otherwise (TensorFlow's GRUCell, DIEN): n = tanh(W_in x + b_in + W_hn (r*h) + b_hn)
//         h' = (1 - z)*n + z*h
//   AUGRU as GRU with the keep gate scaled by the attention score a[t, b] (DIEN, MODELS.md §4.2:
//         u' = (1 - a)*u):  z' = (1 - a)*z,  h' = (1 - z')*n + z'*h
// Variable lengths: lengths[b] (i32 on the CPU: the kernels plan the steps from it; 0 <= len <= T)
// as PyTorch's packed sequences: steps t >= len[b] leave h (and c) unchanged and write
// y[t, b] = 0; a reverse pass runs t = len[b]-1 .. 0 for each b. hn/cn are the states after each
// sequence's last step.
#pragma once
#include "kernels/op.h"

namespace aim::kernels {

enum class RnnCell { LSTM, GRU, AUGRU };
const char* rnn_cell_name(RnnCell c);
inline int64_t rnn_gates(RnnCell c) { return c == RnnCell::LSTM ? 4 : 3; }
// Values per (t, b) kept in the workspace for backward (README: layout), in units of H.
inline int64_t rnn_workspace_width(RnnCell c) { return c == RnnCell::LSTM ? 5 : 4; }

struct RnnFwdArgs {
  RnnCell cell = RnnCell::LSTM;
  bool reverse = false;
  bool linear_before_reset = true;  // GRU / AUGRU only (see above)
  Tensor x;                         // [T, B, I]
  Tensor lengths;                   // [B] i32 on the CPU, or undefined: every length is T
  Tensor h0, c0;                    // [B, H] or undefined (zeros); c0: LSTM only
  Tensor w_ih, w_hh;                // [G*H, I], [G*H, H]
  Tensor b_ih, b_hh;                // [G*H], both or neither
  Tensor att;                       // AUGRU: [T, B] scores; otherwise undefined
  Tensor y;                         // [T, B, H]: written
  Tensor hn, cn;                    // [B, H]: written, or undefined (not wanted); cn: LSTM only
  Tensor workspace;                 // [T, B, rnn_workspace_width * H]: written for backward, or
                                    // undefined (inference)
  Device device() const { return x.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("x", s.x), f.host_in_opt("lengths", s.lengths), f.in_opt("h0", s.h0), f.in_opt("c0", s.c0);
    f.in("w_ih", s.w_ih), f.in("w_hh", s.w_hh), f.in_opt("b_ih", s.b_ih), f.in_opt("b_hh", s.b_hh);
    f.in_opt("att", s.att);
    f.out("y", s.y), f.out_opt("hn", s.hn), f.out_opt("cn", s.cn);
    f.out_opt("workspace", s.workspace);
    f.param("cell", s.cell), f.param("reverse", s.reverse);
    f.param("linear_before_reset", s.linear_before_reset);
  }
};

struct RnnBwdArgs {
  RnnCell cell = RnnCell::LSTM;
  bool reverse = false;
  bool linear_before_reset = true;
  Tensor x, lengths, h0, c0, w_ih, w_hh, att;  // as the forward
  Tensor b_ih, b_hh;  // the forward's biases, or undefined when it had none. Only cuda.cudnn reads
                      // them (it recomputes its own forward: cuDNN's reserve space is not the
                      // workspace); every other variant needs no biases.
  Tensor y, workspace;                // the forward's outputs
  Tensor dy;                          // [T, B, H] or undefined (zeros)
  Tensor dhn, dcn;                    // [B, H] or undefined (zeros)
  Tensor dx;                          // [T, B, I]: written, or undefined
  Tensor dh0, dc0;                    // [B, H]: written, or undefined
  Tensor dw_ih, dw_hh, db_ih, db_hh;  // accumulated (+=), each may be undefined
  Tensor datt;                        // AUGRU [T, B]: written, or undefined
  Device device() const { return x.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("x", s.x), f.host_in_opt("lengths", s.lengths), f.in_opt("h0", s.h0), f.in_opt("c0", s.c0);
    f.in("w_ih", s.w_ih), f.in("w_hh", s.w_hh), f.in_opt("b_ih", s.b_ih), f.in_opt("b_hh", s.b_hh);
    f.in_opt("att", s.att), f.in("y", s.y), f.in("workspace", s.workspace);
    f.in_opt("dy", s.dy), f.in_opt("dhn", s.dhn), f.in_opt("dcn", s.dcn);
    f.out_opt("dx", s.dx), f.out_opt("dh0", s.dh0), f.out_opt("dc0", s.dc0);
    f.out_opt("dw_ih", s.dw_ih), f.out_opt("dw_hh", s.dw_hh), f.out_opt("db_ih", s.db_ih);
    f.out_opt("db_hh", s.db_hh), f.out_opt("datt", s.datt);
    f.param("cell", s.cell), f.param("reverse", s.reverse);
    f.param("linear_before_reset", s.linear_before_reset);
  }
};

// GEMMs (2 flops per multiply-add) over all T*B steps plus the gate arithmetic.
inline Cost rnn_fwd_cost(const RnnFwdArgs& a) {
  const double T = double(a.x.size(0)), B = double(a.x.size(1)), I = double(a.x.size(2)),
               H = double(a.w_hh.size(1)), G = double(rnn_gates(a.cell)),
               e = double(dtype_size(a.x.dtype()));
  const double gemm = 2 * T * B * G * H * (I + H),
               gates = T * B * H * (a.cell == RnnCell::LSTM ? 30 : 25);
  const double read = T * B * I * e + G * H * (I + H + 2) * e;
  const double written =
      T * B * H * e * (1 + (a.workspace.defined() ? double(rnn_workspace_width(a.cell)) : 0));
  return Cost{gemm + gates, read, written};
}
inline Cost rnn_bwd_cost(const RnnBwdArgs& a) {
  const double T = double(a.x.size(0)), B = double(a.x.size(1)), I = double(a.x.size(2)),
               H = double(a.w_hh.size(1)), G = double(rnn_gates(a.cell)),
               e = double(dtype_size(a.x.dtype()));
  // dgates -> dx (W_ih^T), dh (W_hh^T), dW_ih (x^T), dW_hh (h^T): four GEMMs of the forward's size.
  const double gemm = 4 * T * B * G * H * (I + H), gates = T * B * H * 40;
  const double read =
      T * B * (I + H * (2 + double(rnn_workspace_width(a.cell)))) * e + G * H * (I + H) * e;
  const double written = T * B * I * e + G * H * (I + H + 2) * e;
  return Cost{gemm + gates, read, written};
}

// Host-side validation shared by every variant: "[rnn_fwd] ..." naming the tensor, its shape and
// what was expected.
void check_rnn_fwd_args(const RnnFwdArgs& a);
void check_rnn_bwd_args(const RnnBwdArgs& a);

void rnn_fwd(const RnnFwdArgs& a);
void rnn_bwd(const RnnBwdArgs& a);

}  // namespace aim::kernels
