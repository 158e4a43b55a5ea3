// LSTM / GRU stacks and the AUGRU: parameter bookkeeping and the per-layer, per-direction calls of
// autograd::rnn; the recurrences themselves are the kernels' (kernels/rnn).
#include "layers/rnn.h"

#include <cmath>

#include "autograd/functions/dropout.h"
#include "autograd/functions/index.h"
#include "autograd/functions/rnn.h"
#include "autograd/functions/shape.h"
#include "layers/init.h"

namespace aim::layers {
namespace {

using kernels::RnnCell;

std::string shape_of(const Variable& v) {
  return v.defined() ? to_string(v.sizes()) : std::string("undefined");
}

// lengths as the kernels take them: [B] i32 on the CPU (i64 is converted); undefined stays so.
Tensor lengths_i32(const Tensor& lengths, int64_t B, const char* layer) {
  if (!lengths.defined()) return Tensor();
  AIM_CHECK(!lengths.is_cuda() && lengths.dim() == 1 && lengths.size(0) == B &&
                (lengths.dtype() == DType::i32 || lengths.dtype() == DType::i64),
            layer, ": lengths must be a [", B, "] i32 or i64 tensor on the CPU, got ",
            to_string(lengths.sizes()), " ", to_string(lengths.dtype()), " on ",
            lengths.is_cuda() ? "cuda" : "cpu");
  return lengths.to(DType::i32).contiguous();
}

// A tensor of shape `s` with no memory behind it but one element (stride-0 view): enough for the
// kernels' cost functions, which read sizes only.
Tensor shape_only(const Shape& s) {
  return Tensor::empty(Shape(s.size(), 1), DType::f32, kCPU).expand(s);
}

// rnn_fwd_cost of one (layer, direction) call on x [T, B, I] with hidden size H.
double rnn_call_flops(RnnCell cell, int64_t T, int64_t B, int64_t I, int64_t H) {
  kernels::RnnFwdArgs a;
  a.cell = cell;
  a.x = shape_only({T, B, I});
  a.w_hh = shape_only({kernels::rnn_gates(cell) * H, H});
  return kernels::rnn_fwd_cost(a).flops;
}

}  // namespace

// ---- LSTM, GRU ----------------------------------------------------------------------------------

RnnStack::RnnStack(RnnCell cell, int64_t input_size, int64_t hidden_size, const RnnOptions& o,
                   uint64_t seed)
    : cell_(cell), input_size_(input_size), hidden_size_(hidden_size), o_(o), gen_(seed) {
  const char* name = kernels::rnn_cell_name(cell);
  AIM_CHECK(cell != RnnCell::AUGRU, "RnnStack: the AUGRU is its own layer (layers::AUGRU)");
  AIM_CHECK(input_size > 0 && hidden_size > 0, name,
            ": input_size and hidden_size must be positive, got ", input_size, " and ",
            hidden_size);
  AIM_CHECK(o.num_layers >= 1, name, ": num_layers must be >= 1, got ", o.num_layers);
  AIM_CHECK(o.dropout >= 0 && o.dropout <= 1, name, ": dropout must lie in [0, 1], got ",
            o.dropout);
  AIM_CHECK(cell == RnnCell::GRU || o.linear_before_reset, name,
            ": linear_before_reset = false is a GRU option");
  const int64_t G = kernels::rnn_gates(cell), H = hidden_size, D = num_directions();
  const double bound = 1.0 / std::sqrt(double(H));
  for (int64_t k = 0; k < o.num_layers; ++k) {
    const int64_t I = k == 0 ? input_size : D * H;
    for (int64_t d = 0; d < D; ++d) {
      const std::string sfx = "_l" + std::to_string(k) + (d == 1 ? "_reverse" : "");
      Weights w;
      w.w_ih = param("weight_ih" + sfx, uniform_init({G * H, I}, -bound, bound, gen_));
      w.w_hh = param("weight_hh" + sfx, uniform_init({G * H, H}, -bound, bound, gen_));
      if (o.bias) {
        w.b_ih = param("bias_ih" + sfx, uniform_init({G * H}, -bound, bound, gen_));
        w.b_hh = param("bias_hh" + sfx, uniform_init({G * H}, -bound, bound, gen_));
      }
      w_.push_back(w);
    }
  }
}

const RnnStack::Weights& RnnStack::at(int64_t k, bool reverse) const {
  AIM_CHECK(k >= 0 && k < o_.num_layers && (!reverse || o_.bidirectional), type_name(),
            ": no layer ", k, reverse ? " (reverse)" : "", " in a ", o_.num_layers, "-layer ",
            o_.bidirectional ? "bidirectional" : "unidirectional", " stack");
  return w_[size_t(k * num_directions() + (reverse ? 1 : 0))];
}
const Parameter& RnnStack::weight_ih(int64_t k, bool reverse) const { return at(k, reverse).w_ih; }
const Parameter& RnnStack::weight_hh(int64_t k, bool reverse) const { return at(k, reverse).w_hh; }
const Parameter& RnnStack::bias_ih(int64_t k, bool reverse) const { return at(k, reverse).b_ih; }
const Parameter& RnnStack::bias_hh(int64_t k, bool reverse) const { return at(k, reverse).b_hh; }

RnnOutput RnnStack::forward(const Variable& x, const Tensor& lengths, const Variable& h0,
                            const Variable& c0) {
  const std::string name = type_name();
  const int64_t L = o_.num_layers, D = num_directions(), H = hidden_size_;
  AIM_CHECK(x.defined() && x.dim() == 3 && x.size(2) == input_size_, name, ": expected x ",
            o_.batch_first ? "[B, T, " : "[T, B, ", input_size_, "], got ", shape_of(x));
  const Variable xt = o_.batch_first ? autograd::transpose(x, 0, 1) : x;  // [T, B, I]
  const int64_t B = xt.size(1);
  const Tensor len = lengths_i32(lengths, B, name.c_str());
  const Shape state = {L * D, B, H};
  AIM_CHECK(!h0.defined() || h0.sizes() == state, name, ": h0 must be ", to_string(state), ", got ",
            shape_of(h0));
  AIM_CHECK(cell_ == RnnCell::LSTM || !c0.defined(), name, ": c0 is for the LSTM only, got ",
            shape_of(c0));
  AIM_CHECK(!c0.defined() || c0.sizes() == state, name, ": c0 must be ", to_string(state), ", got ",
            shape_of(c0));

  Variable in = xt;
  std::vector<Variable> hs, cs;
  for (int64_t k = 0; k < L; ++k) {
    std::vector<Variable> ys;
    for (int64_t d = 0; d < D; ++d) {
      const Weights& w = w_[size_t(k * D + d)];
      autograd::RnnArgs a;
      a.cell = cell_;
      a.reverse = d == 1;
      a.linear_before_reset = o_.linear_before_reset;
      a.x = in;
      a.lengths = len;
      if (h0.defined()) a.h0 = autograd::select(h0, 0, k * D + d);
      if (c0.defined()) a.c0 = autograd::select(c0, 0, k * D + d);
      a.w_ih = w.w_ih;
      a.w_hh = w.w_hh;
      a.b_ih = w.b_ih;
      a.b_hh = w.b_hh;
      autograd::RnnResult r = autograd::rnn(a);
      ys.push_back(r.y);
      hs.push_back(autograd::unsqueeze(r.hn, 0));
      if (r.cn.defined()) cs.push_back(autograd::unsqueeze(r.cn, 0));
    }
    in = D == 1 ? ys[0] : autograd::concat(ys, 2);  // [T, B, D*H]
    if (k + 1 < L) in = autograd::dropout(in, o_.dropout, is_training(), gen_);
  }
  RnnOutput out;
  out.output = o_.batch_first ? autograd::transpose(in, 0, 1) : in;
  out.h_n = hs.size() == 1 ? hs[0] : autograd::concat(hs, 0);
  if (!cs.empty()) out.c_n = cs.size() == 1 ? cs[0] : autograd::concat(cs, 0);
  return out;
}

Shape RnnStack::count_flops(const Shape& in, double& flops) const {
  AIM_CHECK(in.size() == 3 && in[2] == input_size_, type_name(), ": expected x ",
            o_.batch_first ? "[B, T, " : "[T, B, ", input_size_, "], got ", to_string(in));
  const int64_t T = o_.batch_first ? in[1] : in[0], B = o_.batch_first ? in[0] : in[1];
  const int64_t D = num_directions(), H = hidden_size_;
  for (int64_t k = 0; k < o_.num_layers; ++k) {
    const int64_t I = k == 0 ? input_size_ : D * H;
    flops += double(D) * rnn_call_flops(cell_, T, B, I, H);
    // autograd::dropout between layers (dropout_fwd_cost: one flop per element).
    if (k + 1 < o_.num_layers && is_training() && o_.dropout > 0) flops += double(T * B * D * H);
  }
  Shape out = in;
  out[2] = D * H;
  return out;
}

// ---- AUGRU --------------------------------------------------------------------------------------

AUGRU::AUGRU(int64_t input_size, int64_t hidden_size, const AugruOptions& o, uint64_t seed)
    : input_size_(input_size), hidden_size_(hidden_size), o_(o) {
  AIM_CHECK(input_size > 0 && hidden_size > 0,
            "AUGRU: input_size and hidden_size must be positive, got ", input_size, " and ",
            hidden_size);
  const int64_t H = hidden_size;
  const double bound = 1.0 / std::sqrt(double(H));
  kernels::Generator gen(seed);
  weight_ih_l0 = param("weight_ih_l0", uniform_init({3 * H, input_size}, -bound, bound, gen));
  weight_hh_l0 = param("weight_hh_l0", uniform_init({3 * H, H}, -bound, bound, gen));
  if (o.bias) {
    // TensorFlow's GRUCell: gate (r, z) bias 1, candidate bias 0; one bias, so bias_hh is 0.
    Tensor b_ih = Tensor::zeros({3 * H});
    b_ih.narrow(0, 0, 2 * H).fill_(1.0);
    bias_ih_l0 = param("bias_ih_l0", b_ih);
    bias_hh_l0 = param("bias_hh_l0", Tensor::zeros({3 * H}));
  }
}

RnnOutput AUGRU::forward(const Variable& x, const Variable& att, const Tensor& lengths,
                         const Variable& h0) {
  AIM_CHECK(x.defined() && x.dim() == 3 && x.size(2) == input_size_, "AUGRU: expected x ",
            o_.batch_first ? "[B, T, " : "[T, B, ", input_size_, "], got ", shape_of(x));
  const Variable xt = o_.batch_first ? autograd::transpose(x, 0, 1) : x;  // [T, B, I]
  const int64_t T = xt.size(0), B = xt.size(1);
  const Shape att_shape = o_.batch_first ? Shape{B, T} : Shape{T, B};
  AIM_CHECK(att.defined() && att.sizes() == att_shape, "AUGRU: att must be ", to_string(att_shape),
            o_.batch_first ? " ([B, T])" : " ([T, B])", " for x ", to_string(x.sizes()), ", got ",
            shape_of(att));
  AIM_CHECK(!h0.defined() || h0.sizes() == Shape({B, hidden_size_}), "AUGRU: h0 must be [", B, ", ",
            hidden_size_, "], got ", shape_of(h0));
  autograd::RnnArgs a;
  a.cell = RnnCell::AUGRU;
  a.linear_before_reset = o_.linear_before_reset;
  a.x = xt;
  a.lengths = lengths_i32(lengths, B, "AUGRU");
  a.h0 = h0;
  a.w_ih = weight_ih_l0;
  a.w_hh = weight_hh_l0;
  a.b_ih = bias_ih_l0;
  a.b_hh = bias_hh_l0;
  a.att = o_.batch_first ? autograd::transpose(att, 0, 1) : att;  // [T, B]
  autograd::RnnResult r = autograd::rnn(a);
  RnnOutput out;
  out.output = o_.batch_first ? autograd::transpose(r.y, 0, 1) : r.y;
  out.h_n = r.hn;
  return out;
}

Shape AUGRU::count_flops(const Shape& in, double& flops) const {
  AIM_CHECK(in.size() == 3 && in[2] == input_size_, "AUGRU: expected x ",
            o_.batch_first ? "[B, T, " : "[T, B, ", input_size_, "], got ", to_string(in));
  const int64_t T = o_.batch_first ? in[1] : in[0], B = o_.batch_first ? in[0] : in[1];
  flops += rnn_call_flops(RnnCell::AUGRU, T, B, input_size_, hidden_size_);
  Shape out = in;
  out[2] = hidden_size_;
  return out;
}

}  // namespace aim::layers
