// Recurrent sequences on the CPU (math, gradients, workspace layout: kernels/rnn/README.md).
// cpu.ref: the oracle. One sequence (b) at a time, its steps in processing order, every gate a
//   plain dot product in double; 16-bit and f32 values are rounded once where they are stored
//   (y, hn, cn, workspace, dx, ...); the hidden state carried between steps stays in double.
//   Backward reads the gates from the workspace and h_prev from y, as every variant does;
//   weight gradients are summed in double over every (t, b) and added into dw once.
//   f32 f64 f16 bf16 (the finite-difference gradient check runs it in f64).
// cpu.fast: rnn_cpu_fast.cpp. Test cases: rnn_cases.cpp.

#include "kernels/rnn/rnn_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/registry.h"
#include "kernels/rnn/rnn.h"

namespace aim::kernels {

using rnn_cpu::Dims;

const char* rnn_cell_name(RnnCell c) {
  switch (c) {
    case RnnCell::LSTM:
      return "lstm";
    case RnnCell::GRU:
      return "gru";
    case RnnCell::AUGRU:
      return "augru";
  }
  return "?";
}

namespace {

std::string desc(const Tensor& t) {
  return t.defined()
             ? to_string(t.sizes()) + " " + dtype_name(t.dtype()) + " on " + t.device().str()
             : "undefined";
}

// A float tensor of the call: `want` sizes, x's dtype and device, contiguous.
void check_float_tensor(const char* op, const char* name, const Tensor& t, const Shape& want,
                        const Tensor& x) {
  AIM_CHECK(t.defined(), "[", op, "] ", name, " must be given: ", to_string(want), " ",
            dtype_name(x.dtype()));
  AIM_CHECK(t.sizes() == want && t.dtype() == x.dtype() && t.is_contiguous(), "[", op, "] ", name,
            " must be contiguous ", to_string(want), " ", dtype_name(x.dtype()), " (like x ",
            to_string(x.sizes()), "), got ", desc(t));
  AIM_CHECK(t.device() == x.device(), "[", op, "] ", name, " is on ", t.device().str(), ", x on ",
            x.device().str());
}
void check_optional(const char* op, const char* name, const Tensor& t, const Shape& want,
                    const Tensor& x) {
  if (t.defined()) check_float_tensor(op, name, t, want, x);
}
void check_absent(const char* op, const char* name, const Tensor& t, const char* why) {
  AIM_CHECK(!t.defined(), "[", op, "] ", name, " must be undefined ", why, ", got ", desc(t));
}

// What the forward and the backward share: x, the weights, lengths, h0/c0 and att.
Dims check_common(const char* op, RnnCell cell, const Tensor& x, const Tensor& w_ih,
                  const Tensor& w_hh, const Tensor& lengths, const Tensor& h0, const Tensor& c0,
                  const Tensor& att) {
  AIM_CHECK(x.defined() && x.dim() == 3, "[", op, "] x must be [T, B, I], got ", desc(x));
  AIM_CHECK(is_floating(x.dtype()), "[", op, "] x must be f32, f64, f16 or bf16, got ",
            dtype_name(x.dtype()));
  AIM_CHECK(x.is_contiguous(), "[", op, "] x ", to_string(x.sizes()), " must be contiguous");
  Dims d;
  d.T = x.size(0);
  d.B = x.size(1);
  d.I = x.size(2);
  d.G = rnn_gates(cell);
  d.W = rnn_workspace_width(cell);
  AIM_CHECK(
      w_hh.defined() && w_hh.dim() == 2 && w_hh.size(1) >= 1 && w_hh.size(0) == d.G * w_hh.size(1),
      "[", op, "] w_hh must be [G*H, H] with G = ", d.G, " gates for ", rnn_cell_name(cell),
      ", got ", desc(w_hh));
  d.H = w_hh.size(1);
  const Shape gh_i{d.G * d.H, d.I}, gh_h{d.G * d.H, d.H};
  check_float_tensor(op, "w_hh", w_hh, gh_h, x);
  AIM_CHECK(w_ih.defined(), "[", op, "] w_ih must be given: ", to_string(gh_i));
  check_float_tensor(op, "w_ih", w_ih, gh_i, x);
  if (lengths.defined()) {
    AIM_CHECK(lengths.sizes() == Shape{d.B} && lengths.dtype() == DType::i32 &&
                  lengths.device() == kCPU && lengths.is_contiguous(),
              "[", op, "] lengths must be a contiguous [", d.B, "] i32 tensor on the CPU (the ",
              "kernels plan the steps from it), got ", desc(lengths));
    const int32_t* len = lengths.data<int32_t>();
    for (int64_t b = 0; b < d.B; ++b)
      AIM_CHECK(len[b] >= 0 && len[b] <= d.T, "[", op, "] lengths[", b, "] = ", len[b],
                " is outside [0, T = ", d.T, "]");
  }
  check_optional(op, "h0", h0, {d.B, d.H}, x);
  if (cell == RnnCell::LSTM)
    check_optional(op, "c0", c0, {d.B, d.H}, x);
  else
    check_absent(op, "c0", c0, "(only LSTM has a cell state)");
  if (cell == RnnCell::AUGRU) {
    AIM_CHECK(att.defined(), "[", op, "] AUGRU needs att: [T, B] = [", d.T, ", ", d.B,
              "] attention scores");
    check_float_tensor(op, "att", att, {d.T, d.B}, x);
  } else {
    check_absent(op, "att", att, "(attention scores are AUGRU's)");
  }
  return d;
}

}  // namespace

namespace rnn_cpu {

Dims check_fwd(const RnnFwdArgs& a) {
  constexpr const char* op = "rnn_fwd";
  const Dims d = check_common(op, a.cell, a.x, a.w_ih, a.w_hh, a.lengths, a.h0, a.c0, a.att);
  AIM_CHECK(a.b_ih.defined() == a.b_hh.defined(),
            "[rnn_fwd] b_ih and b_hh must both be given or both be undefined, got b_ih ",
            desc(a.b_ih), ", b_hh ", desc(a.b_hh));
  check_optional(op, "b_ih", a.b_ih, {d.G * d.H}, a.x);
  check_optional(op, "b_hh", a.b_hh, {d.G * d.H}, a.x);
  check_float_tensor(op, "y", a.y, {d.T, d.B, d.H}, a.x);
  check_optional(op, "hn", a.hn, {d.B, d.H}, a.x);
  if (a.cell == RnnCell::LSTM)
    check_optional(op, "cn", a.cn, {d.B, d.H}, a.x);
  else
    check_absent(op, "cn", a.cn, "(only LSTM has a cell state)");
  check_optional(op, "workspace", a.workspace, {d.T, d.B, d.W * d.H}, a.x);
  return d;
}

Dims check_bwd(const RnnBwdArgs& a) {
  constexpr const char* op = "rnn_bwd";
  const Dims d = check_common(op, a.cell, a.x, a.w_ih, a.w_hh, a.lengths, a.h0, a.c0, a.att);
  AIM_CHECK(a.b_ih.defined() == a.b_hh.defined(),
            "[rnn_bwd] b_ih and b_hh must both be given or both be undefined, got b_ih ",
            desc(a.b_ih), ", b_hh ", desc(a.b_hh));
  check_optional(op, "b_ih", a.b_ih, {d.G * d.H}, a.x);
  check_optional(op, "b_hh", a.b_hh, {d.G * d.H}, a.x);
  check_float_tensor(op, "y (the forward's output)", a.y, {d.T, d.B, d.H}, a.x);
  check_float_tensor(op, "workspace (the forward's)", a.workspace, {d.T, d.B, d.W * d.H}, a.x);
  check_optional(op, "dy", a.dy, {d.T, d.B, d.H}, a.x);
  check_optional(op, "dhn", a.dhn, {d.B, d.H}, a.x);
  check_optional(op, "dx", a.dx, {d.T, d.B, d.I}, a.x);
  check_optional(op, "dh0", a.dh0, {d.B, d.H}, a.x);
  if (a.cell == RnnCell::LSTM) {
    check_optional(op, "dcn", a.dcn, {d.B, d.H}, a.x);
    check_optional(op, "dc0", a.dc0, {d.B, d.H}, a.x);
  } else {
    check_absent(op, "dcn", a.dcn, "(only LSTM has a cell state)");
    check_absent(op, "dc0", a.dc0, "(only LSTM has a cell state)");
  }
  check_optional(op, "dw_ih", a.dw_ih, {d.G * d.H, d.I}, a.x);
  check_optional(op, "dw_hh", a.dw_hh, {d.G * d.H, d.H}, a.x);
  check_optional(op, "db_ih", a.db_ih, {d.G * d.H}, a.x);
  check_optional(op, "db_hh", a.db_hh, {d.G * d.H}, a.x);
  if (a.cell == RnnCell::AUGRU)
    check_optional(op, "datt", a.datt, {d.T, d.B}, a.x);
  else
    check_absent(op, "datt", a.datt, "(attention scores are AUGRU's)");
  return d;
}

}  // namespace rnn_cpu

void check_rnn_fwd_args(const RnnFwdArgs& a) { rnn_cpu::check_fwd(a); }
void check_rnn_bwd_args(const RnnBwdArgs& a) { rnn_cpu::check_bwd(a); }

using rnn_cpu::check_bwd;
using rnn_cpu::check_fwd;
using rnn_cpu::len_of;

namespace {

inline double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

// ---- cpu.ref --------------------------------------------------------------------------------

template <class T>
const T* ptr_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

template <class T>
void fwd_ref(const RnnFwdArgs& a, const Dims& d) {
  const int64_t Tn = d.T, B = d.B, I = d.I, H = d.H, G = d.G, W = d.W, GH = G * H;
  const T* x = a.x.data<T>();
  const T* w_ih = a.w_ih.data<T>();
  const T* w_hh = a.w_hh.data<T>();
  const T* b_ih = ptr_or_null<T>(a.b_ih);
  const T* b_hh = ptr_or_null<T>(a.b_hh);
  const T* h0 = ptr_or_null<T>(a.h0);
  const T* c0 = ptr_or_null<T>(a.c0);
  const T* att = ptr_or_null<T>(a.att);
  T* y = a.y.data<T>();
  T* ws = a.workspace.defined() ? a.workspace.data<T>() : nullptr;
  const bool lstm = a.cell == RnnCell::LSTM, lbr = a.linear_before_reset;
  std::vector<double> h(static_cast<size_t>(H)), c(static_cast<size_t>(H)),
      gx(static_cast<size_t>(GH)), gh(static_cast<size_t>(GH)), rh(static_cast<size_t>(H));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = len_of(a.lengths, b, Tn);
    for (int64_t j = 0; j < H; ++j) {
      h[size_t(j)] = h0 ? double(h0[b * H + j]) : 0.0;
      c[size_t(j)] = c0 ? double(c0[b * H + j]) : 0.0;
    }
    for (int64_t t = len; t < Tn; ++t) {  // past the length: y and the workspace are zero
      for (int64_t j = 0; j < H; ++j) y[(t * B + b) * H + j] = T(0.0);
      if (ws)
        for (int64_t j = 0; j < W * H; ++j) ws[(t * B + b) * W * H + j] = T(0.0);
    }
    for (int64_t s = 0; s < len; ++s) {
      const int64_t t = a.reverse ? len - 1 - s : s;
      const T* xt = x + (t * B + b) * I;
      for (int64_t r = 0; r < GH; ++r) {
        double acc = b_ih ? double(b_ih[r]) : 0.0;
        for (int64_t k = 0; k < I; ++k) acc += double(w_ih[r * I + k]) * double(xt[k]);
        gx[size_t(r)] = acc;
      }
      // Hidden projection; GRU without linear_before_reset computes its n rows after r.
      const int64_t hrows = (!lstm && !lbr) ? 2 * H : GH;
      for (int64_t r = 0; r < hrows; ++r) {
        double acc = b_hh ? double(b_hh[r]) : 0.0;
        for (int64_t k = 0; k < H; ++k) acc += double(w_hh[r * H + k]) * h[size_t(k)];
        gh[size_t(r)] = acc;
      }
      T* yt = y + (t * B + b) * H;
      T* wt = ws ? ws + (t * B + b) * W * H : nullptr;
      if (lstm) {
        for (int64_t j = 0; j < H; ++j) {
          const double ig = sigmoid(gx[size_t(j)] + gh[size_t(j)]);
          const double fg = sigmoid(gx[size_t(H + j)] + gh[size_t(H + j)]);
          const double gg = std::tanh(gx[size_t(2 * H + j)] + gh[size_t(2 * H + j)]);
          const double og = sigmoid(gx[size_t(3 * H + j)] + gh[size_t(3 * H + j)]);
          c[size_t(j)] = fg * c[size_t(j)] + ig * gg;
          h[size_t(j)] = og * std::tanh(c[size_t(j)]);
          if (wt) {
            wt[j] = T(ig);
            wt[H + j] = T(fg);
            wt[2 * H + j] = T(gg);
            wt[3 * H + j] = T(og);
            wt[4 * H + j] = T(c[size_t(j)]);
          }
        }
      } else {
        std::vector<double> rg(static_cast<size_t>(H)), zg(static_cast<size_t>(H));
        for (int64_t j = 0; j < H; ++j) {
          rg[size_t(j)] = sigmoid(gx[size_t(j)] + gh[size_t(j)]);
          zg[size_t(j)] = sigmoid(gx[size_t(H + j)] + gh[size_t(H + j)]);
        }
        if (!lbr) {  // n's hidden part is W_hn (r*h) + b_hn
          for (int64_t j = 0; j < H; ++j) rh[size_t(j)] = rg[size_t(j)] * h[size_t(j)];
          for (int64_t j = 0; j < H; ++j) {
            double acc = b_hh ? double(b_hh[2 * H + j]) : 0.0;
            for (int64_t k = 0; k < H; ++k)
              acc += double(w_hh[(2 * H + j) * H + k]) * rh[size_t(k)];
            gh[size_t(2 * H + j)] = acc;
          }
        }
        const double at = att ? double(att[t * B + b]) : 0.0;
        for (int64_t j = 0; j < H; ++j) {
          const double hn_part = gh[size_t(2 * H + j)];
          const double n =
              std::tanh(gx[size_t(2 * H + j)] + (lbr ? rg[size_t(j)] * hn_part : hn_part));
          const double z = zg[size_t(j)];
          const double zs = att ? (1.0 - at) * z : z;  // AUGRU: the keep gate scaled
          const double hp = h[size_t(j)];
          h[size_t(j)] = (1.0 - zs) * n + zs * hp;
          if (wt) {
            wt[j] = T(rg[size_t(j)]);
            wt[H + j] = T(z);
            wt[2 * H + j] = T(n);
            wt[3 * H + j] = T(lbr ? hn_part : rh[size_t(j)]);
          }
        }
      }
      for (int64_t j = 0; j < H; ++j) yt[j] = T(h[size_t(j)]);
    }
    if (a.hn.defined())
      for (int64_t j = 0; j < H; ++j) a.hn.data<T>()[b * H + j] = T(h[size_t(j)]);
    if (a.cn.defined())
      for (int64_t j = 0; j < H; ++j) a.cn.data<T>()[b * H + j] = T(c[size_t(j)]);
  }
}

template <class T>
void bwd_ref(const RnnBwdArgs& a, const Dims& d) {
  const int64_t Tn = d.T, B = d.B, I = d.I, H = d.H, G = d.G, W = d.W, GH = G * H;
  const T* x = a.x.data<T>();
  const T* w_ih = a.w_ih.data<T>();
  const T* w_hh = a.w_hh.data<T>();
  const T* h0 = ptr_or_null<T>(a.h0);
  const T* c0 = ptr_or_null<T>(a.c0);
  const T* att = ptr_or_null<T>(a.att);
  const T* y = a.y.data<T>();
  const T* ws = a.workspace.data<T>();
  const T* dy = ptr_or_null<T>(a.dy);
  const T* dhn = ptr_or_null<T>(a.dhn);
  const T* dcn = ptr_or_null<T>(a.dcn);
  const bool lstm = a.cell == RnnCell::LSTM, lbr = a.linear_before_reset;
  // Gradient sums over every (t, b), added into the accumulated outputs once at the end.
  std::vector<double> dw_ih(static_cast<size_t>(GH * I), 0.0),
      dw_hh(static_cast<size_t>(GH * H), 0.0), db_ih(static_cast<size_t>(GH), 0.0),
      db_hh(static_cast<size_t>(GH), 0.0);
  std::vector<double> dh(static_cast<size_t>(H)), dc(static_cast<size_t>(H)),
      dax(static_cast<size_t>(GH)), dah(static_cast<size_t>(GH)), hprev(static_cast<size_t>(H)),
      drh(static_cast<size_t>(H)), dhp(static_cast<size_t>(H));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = len_of(a.lengths, b, Tn);
    for (int64_t j = 0; j < H; ++j) {
      dh[size_t(j)] = dhn ? double(dhn[b * H + j]) : 0.0;
      dc[size_t(j)] = dcn ? double(dcn[b * H + j]) : 0.0;
    }
    for (int64_t t = len; t < Tn; ++t) {
      if (a.dx.defined())
        for (int64_t k = 0; k < I; ++k) a.dx.data<T>()[(t * B + b) * I + k] = T(0.0);
      if (a.datt.defined()) a.datt.data<T>()[t * B + b] = T(0.0);
    }
    for (int64_t s = len - 1; s >= 0; --s) {  // processing order, backwards
      const int64_t t = a.reverse ? len - 1 - s : s;
      const bool first = s == 0;  // the step that started from h0/c0
      const int64_t tp = a.reverse ? t + 1 : t - 1;
      for (int64_t j = 0; j < H; ++j)
        hprev[size_t(j)] =
            first ? (h0 ? double(h0[b * H + j]) : 0.0) : double(y[(tp * B + b) * H + j]);
      if (dy)
        for (int64_t j = 0; j < H; ++j) dh[size_t(j)] += double(dy[(t * B + b) * H + j]);
      const T* wt = ws + (t * B + b) * W * H;
      if (lstm) {
        for (int64_t j = 0; j < H; ++j) {
          const double ig = double(wt[j]), fg = double(wt[H + j]), gg = double(wt[2 * H + j]),
                       og = double(wt[3 * H + j]), cc = double(wt[4 * H + j]);
          const double cp = first ? (c0 ? double(c0[b * H + j]) : 0.0)
                                  : double(ws[(tp * B + b) * W * H + 4 * H + j]);
          const double tc = std::tanh(cc);
          const double dct = dc[size_t(j)] + dh[size_t(j)] * og * (1.0 - tc * tc);
          dax[size_t(j)] = dct * gg * ig * (1.0 - ig);
          dax[size_t(H + j)] = dct * cp * fg * (1.0 - fg);
          dax[size_t(2 * H + j)] = dct * ig * (1.0 - gg * gg);
          dax[size_t(3 * H + j)] = dh[size_t(j)] * tc * og * (1.0 - og);
          dc[size_t(j)] = dct * fg;
          dhp[size_t(j)] = 0.0;
        }
        dah = dax;
      } else {
        const double at = att ? double(att[t * B + b]) : 0.0;
        double datt = 0.0;
        for (int64_t j = 0; j < H; ++j) {
          const double rg = double(wt[j]), z = double(wt[H + j]), n = double(wt[2 * H + j]),
                       hh = double(wt[3 * H + j]);
          const double zs = att ? (1.0 - at) * z : z;
          const double dzs = dh[size_t(j)] * (hprev[size_t(j)] - n);
          const double dz = att ? dzs * (1.0 - at) : dzs;
          if (att) datt -= dzs * z;
          const double dan = dh[size_t(j)] * (1.0 - zs) * (1.0 - n * n);
          dax[size_t(H + j)] = dz * z * (1.0 - z);
          dax[size_t(2 * H + j)] = dan;
          dah[size_t(H + j)] = dax[size_t(H + j)];
          dah[size_t(2 * H + j)] = lbr ? dan * rg : dan;
          if (lbr) {
            dax[size_t(j)] = dan * hh * rg * (1.0 - rg);
            dah[size_t(j)] = dax[size_t(j)];
          }
          dhp[size_t(j)] = dh[size_t(j)] * zs;
        }
        if (!lbr) {  // d(r*h) = W_hn^T dan: r's gradient and a direct path to h_prev
          for (int64_t k = 0; k < H; ++k) drh[size_t(k)] = 0.0;
          for (int64_t j = 0; j < H; ++j)
            for (int64_t k = 0; k < H; ++k)
              drh[size_t(k)] += double(w_hh[(2 * H + j) * H + k]) * dah[size_t(2 * H + j)];
          for (int64_t j = 0; j < H; ++j) {
            const double rg = double(wt[j]);
            dax[size_t(j)] = drh[size_t(j)] * hprev[size_t(j)] * rg * (1.0 - rg);
            dah[size_t(j)] = dax[size_t(j)];
            dhp[size_t(j)] += drh[size_t(j)] * rg;
          }
        }
        if (a.datt.defined()) a.datt.data<T>()[t * B + b] = T(datt);
      }
      // dh_prev = W_hh^T da_h (+ the direct paths); non-lbr GRU: only the r, z rows here.
      const int64_t hrows = (!lstm && !lbr) ? 2 * H : GH;
      for (int64_t k = 0; k < H; ++k) {
        double acc = dhp[size_t(k)];
        for (int64_t r = 0; r < hrows; ++r) acc += double(w_hh[r * H + k]) * dah[size_t(r)];
        dh[size_t(k)] = acc;
      }
      if (a.dx.defined()) {
        T* dxt = a.dx.data<T>() + (t * B + b) * I;
        for (int64_t k = 0; k < I; ++k) {
          double acc = 0.0;
          for (int64_t r = 0; r < GH; ++r) acc += double(w_ih[r * I + k]) * dax[size_t(r)];
          dxt[k] = T(acc);
        }
      }
      const T* xt = x + (t * B + b) * I;
      for (int64_t r = 0; r < GH; ++r) {
        for (int64_t k = 0; k < I; ++k) dw_ih[size_t(r * I + k)] += dax[size_t(r)] * double(xt[k]);
        // The n rows of a non-lbr GRU multiply r*h_prev (workspace slot 3), the others h_prev.
        const bool rh_rows = !lstm && !lbr && r >= 2 * H;
        for (int64_t k = 0; k < H; ++k) {
          const double in = rh_rows ? double(wt[3 * H + k]) : hprev[size_t(k)];
          dw_hh[size_t(r * H + k)] += dah[size_t(r)] * in;
        }
        db_ih[size_t(r)] += dax[size_t(r)];
        db_hh[size_t(r)] += dah[size_t(r)];
      }
    }
    if (a.dh0.defined())
      for (int64_t j = 0; j < H; ++j) a.dh0.data<T>()[b * H + j] = T(dh[size_t(j)]);
    if (a.dc0.defined())
      for (int64_t j = 0; j < H; ++j) a.dc0.data<T>()[b * H + j] = T(dc[size_t(j)]);
  }
  auto add_into = [](const Tensor& out, const std::vector<double>& v) {
    if (!out.defined()) return;
    T* o = out.data<T>();
    for (size_t i = 0; i < v.size(); ++i) o[i] = T(double(o[i]) + v[i]);
  };
  add_into(a.dw_ih, dw_ih);
  add_into(a.dw_hh, dw_hh);
  add_into(a.db_ih, db_ih);
  add_into(a.db_hh, db_hh);
}

void rnn_bwd_cpu_ref(const RnnBwdArgs& a) {
  const Dims d = check_bwd(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, { bwd_ref<T>(a, d); });
}

std::vector<DType> float_dtypes() { return {DType::f32, DType::f64, DType::f16, DType::bf16}; }

}  // namespace

namespace rnn_cpu {

void rnn_fwd_cpu_ref(const RnnFwdArgs& a) {
  const Dims d = check_fwd(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, { fwd_ref<T>(a, d); });
}

}  // namespace rnn_cpu

void rnn_fwd(const RnnFwdArgs& a) { AIM_DISPATCH_OP(RnnFwdArgs, "rnn_fwd", a); }
void rnn_bwd(const RnnBwdArgs& a) { AIM_DISPATCH_OP(RnnBwdArgs, "rnn_bwd", a); }

void register_rnn_cpu(Registry& r) {
  const std::vector<TestShape> shapes = rnn_cpu::test_shapes();

  auto& f = r.op<RnnFwdArgs>("rnn_fwd");
  f.description = "LSTM/GRU/AUGRU over a sequence, one direction of one layer (torch.nn.LSTM/GRU)";
  f.add({"cpu.ref", Backend::CPU, Provider::Own, rnn_cpu::rnn_fwd_cpu_ref, float_dtypes()});
  f.add({"cpu.fast", Backend::CPU, Provider::Own, rnn_cpu::rnn_fwd_cpu_fast, float_dtypes()});
  f.set_default(Backend::CPU, "cpu.fast");
  f.set_cost(rnn_fwd_cost);
  f.make_case = rnn_cpu::make_fwd_case;
  f.set_shape_fields(rnn_cpu::shape_fields());
  f.add_test_shapes(shapes);
  f.tolerance = rnn_cpu::rnn_tolerance;
  f.small_enough_for_simt = rnn_cpu::rnn_simt_small;

  auto& b = r.op<RnnBwdArgs>("rnn_bwd");
  b.description = "gradients of rnn_fwd: dx, dh0, dc0, datt (=); dW, db (+=)";
  b.add({"cpu.ref", Backend::CPU, Provider::Own, rnn_bwd_cpu_ref, float_dtypes()});
  b.add({"cpu.fast", Backend::CPU, Provider::Own, rnn_cpu::rnn_bwd_cpu_fast, float_dtypes()});
  b.set_default(Backend::CPU, "cpu.fast");
  b.set_cost(rnn_bwd_cost);
  b.make_case = rnn_cpu::make_bwd_case;
  b.set_shape_fields(rnn_cpu::shape_fields());
  b.add_test_shapes(shapes);
  b.tolerance = rnn_cpu::rnn_tolerance;
  b.small_enough_for_simt = rnn_cpu::rnn_simt_small;
}

}  // namespace aim::kernels
