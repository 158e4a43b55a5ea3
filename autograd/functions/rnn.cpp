// rnn: forward by rnn_fwd, backward by one rnn_bwd call that produces every wanted gradient
// (dx, dh0, dc0, datt written; dW, db accumulated straight into the parameters' gradients).
#include "autograd/functions/rnn.h"

#include <string>
#include <vector>

#include "autograd/amp.h"
#include "autograd/node.h"

namespace aim::autograd {
namespace {

using kernels::RnnCell;

// Input slots of the node (the order of attach()'s inputs).
enum Slot { kX = 0, kH0, kC0, kWih, kWhh, kBih, kBhh, kAtt };

std::string shape_of(const Variable& v) {
  return v.defined() ? to_string(v.sizes()) : std::string("undefined");
}

Tensor contiguous_or_undefined(const Variable& v) {
  return v.defined() ? v.data().contiguous() : Tensor();
}

struct RnnNode final : Node {
  RnnCell cell = RnnCell::LSTM;
  bool reverse = false, linear_before_reset = true;
  // As the forward used them (contiguous), and its outputs y and workspace.
  Tensor x, lengths, h0, c0, w_ih, w_hh, b_ih, b_hh, att, y, workspace;
  bool has_bias = false;
  const char* name() const override {
    switch (cell) {
      case RnnCell::LSTM:
        return "LSTM";
      case RnnCell::GRU:
        return "GRU";
      case RnnCell::AUGRU:
        return "AUGRU";
    }
    return "Rnn";
  }
  void backward(Grads& g) override {
    kernels::RnnBwdArgs a;
    a.cell = cell;
    a.reverse = reverse;
    a.linear_before_reset = linear_before_reset;
    a.x = x;
    a.lengths = lengths;
    a.h0 = h0;
    a.c0 = c0;
    a.w_ih = w_ih;
    a.w_hh = w_hh;
    a.b_ih = b_ih;  // only cuda.cudnn reads them (its backward re-runs the forward)
    a.b_hh = b_hh;
    a.att = att;
    a.y = y;
    a.workspace = workspace;
    a.dy = g.dy(0);
    a.dhn = g.dy(1);
    if (cell == RnnCell::LSTM) a.dcn = g.dy(2);
    // Activation gradients are written, parameter gradients accumulated (node.h).
    if (g.needs(kX)) a.dx = g.out(kX);
    if (g.needs(kH0)) a.dh0 = g.out(kH0);
    if (g.needs(kC0)) a.dc0 = g.out(kC0);
    if (g.needs(kWih)) a.dw_ih = g.accum(kWih);
    if (g.needs(kWhh)) a.dw_hh = g.accum(kWhh);
    if (has_bias && g.needs(kBih)) a.db_ih = g.accum(kBih);
    if (has_bias && g.needs(kBhh)) a.db_hh = g.accum(kBhh);
    if (g.needs(kAtt)) a.datt = g.out(kAtt);
    kernels::rnn_bwd(a);
  }
  void release() override {
    x = lengths = h0 = c0 = w_ih = w_hh = b_ih = b_hh = att = y = workspace = Tensor();
  }
};

}  // namespace

constexpr amp::Declaration kRnnAmp{"rnn (lstm, gru, augru)", amp::OpClass::lowp,
                                   "gate GEMMs; cell state math in fp32 inside the kernels"};
RnnResult rnn(const RnnArgs& r) {
  if (auto c = amp::autocast(kRnnAmp,
                             {&r.x, &r.h0, &r.c0, &r.w_ih, &r.w_hh, &r.b_ih, &r.b_hh, &r.att})) {
    RnnArgs q = r;
    q.x = (*c)[0], q.h0 = (*c)[1], q.c0 = (*c)[2], q.w_ih = (*c)[3], q.w_hh = (*c)[4];
    q.b_ih = (*c)[5], q.b_hh = (*c)[6], q.att = (*c)[7];
    return rnn(q);
  }
  const char* cell = kernels::rnn_cell_name(r.cell);
  AIM_CHECK(r.x.defined() && r.x.dim() == 3, "rnn(", cell, "): x must be [T, B, I], got ",
            shape_of(r.x));
  AIM_CHECK(r.w_ih.defined() && r.w_hh.defined() && r.w_hh.dim() == 2, "rnn(", cell,
            "): w_ih and w_hh must be given, w_hh as [G*H, H]; got w_ih ", shape_of(r.w_ih),
            ", w_hh ", shape_of(r.w_hh));
  AIM_CHECK(r.b_ih.defined() == r.b_hh.defined(), "rnn(", cell,
            "): give both b_ih and b_hh or neither; got b_ih ", shape_of(r.b_ih), ", b_hh ",
            shape_of(r.b_hh));
  AIM_CHECK(r.cell == RnnCell::LSTM || !r.c0.defined(), "rnn(", cell,
            "): c0 is for the LSTM only, got c0 ", shape_of(r.c0));
  AIM_CHECK((r.cell == RnnCell::AUGRU) == r.att.defined(), "rnn(", cell, "): att [T, B] ",
            r.cell == RnnCell::AUGRU ? "is required by the AUGRU" : "is for the AUGRU only",
            ", got ", shape_of(r.att));
  AIM_CHECK(!r.lengths.defined() || !r.lengths.is_cuda(), "rnn(", cell,
            "): lengths must be an i32 tensor on the CPU (the kernels plan the steps from it)");

  const Tensor x = r.x.data().contiguous();
  const int64_t T = x.size(0), B = x.size(1), H = r.w_hh.size(1);
  kernels::RnnFwdArgs a;
  a.cell = r.cell;
  a.reverse = r.reverse;
  a.linear_before_reset = r.linear_before_reset;
  a.x = x;
  a.lengths = r.lengths.defined() ? r.lengths.contiguous() : Tensor();
  a.h0 = contiguous_or_undefined(r.h0);
  a.c0 = contiguous_or_undefined(r.c0);
  a.w_ih = contiguous_or_undefined(r.w_ih);
  a.w_hh = contiguous_or_undefined(r.w_hh);
  a.b_ih = contiguous_or_undefined(r.b_ih);
  a.b_hh = contiguous_or_undefined(r.b_hh);
  a.att = contiguous_or_undefined(r.att);
  a.y = Tensor::empty({T, B, H}, x.dtype(), x.device());
  a.hn = Tensor::empty({B, H}, x.dtype(), x.device());
  if (r.cell == RnnCell::LSTM) a.cn = Tensor::empty({B, H}, x.dtype(), x.device());
  const bool grad = needs_grad({&r.x, &r.h0, &r.c0, &r.w_ih, &r.w_hh, &r.b_ih, &r.b_hh, &r.att});
  if (grad)
    a.workspace =
        Tensor::empty({T, B, kernels::rnn_workspace_width(r.cell) * H}, x.dtype(), x.device());
  kernels::rnn_fwd(a);

  RnnResult out;
  if (!grad) {
    out.y = Variable(a.y);
    out.hn = Variable(a.hn);
    if (a.cn.defined()) out.cn = Variable(a.cn);
    return out;
  }
  auto n = std::make_shared<RnnNode>();
  n->cell = r.cell;
  n->reverse = r.reverse;
  n->linear_before_reset = r.linear_before_reset;
  n->x = a.x;
  n->lengths = a.lengths;
  n->h0 = a.h0;
  n->c0 = a.c0;
  n->w_ih = a.w_ih;
  n->w_hh = a.w_hh;
  n->b_ih = a.b_ih;
  n->b_hh = a.b_hh;
  n->att = a.att;
  n->y = a.y;
  n->workspace = a.workspace;
  n->has_bias = r.b_ih.defined();
  std::vector<Tensor> outputs = {a.y, a.hn};
  if (a.cn.defined()) outputs.push_back(a.cn);
  const std::vector<Variable> v =
      attach(n, {r.x, r.h0, r.c0, r.w_ih, r.w_hh, r.b_ih, r.b_hh, r.att}, outputs);
  out.y = v[0];
  out.hn = v[1];
  if (v.size() > 2) out.cn = v[2];
  return out;
}

void amp::declarations_rnn(std::vector<amp::Declaration>& out) { out.insert(out.end(), {kRnnAmp}); }

}  // namespace aim::autograd
