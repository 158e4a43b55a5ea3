// Recurrent sequences on the CPU (math, gradients, workspace layout: kernels/rnn/README.md).
// cpu.ref: the oracle. One sequence (b) at a time, its steps in processing order, every gate a
//   plain dot product in double; 16-bit and f32 values are rounded once where they are stored
//   (y, hn, cn, workspace, dx, ...); the hidden state carried between steps stays in double.
//   Backward reads the gates from the workspace and h_prev from y, as every variant does;
//   weight gradients are summed in double over every (t, b) and added into dw once.
//   f32 f64 f16 bf16 (the finite-difference gradient check runs it in f64).
// cpu.fast (default for f32 and f64): the PyTorch/cuDNN structure with the project's GEMMs.
//   Valid (t, b) positions are packed time-major (rows of time t: the sequences with len > t, in
//   b order, no sorting), so the packed matrices have sum(len) rows and padding costs nothing.
//   Forward: one GEMM for the input projection of every valid step, gx = x_p W_ih^T + b_ih
//   [N, G*H]; then per time step one GEMM for the active rows, gh = h W_hh^T + b_hh (GRU without
//   linear_before_reset: h W_hr,z^T, then (r*h) W_hn^T), and one fused gate loop (OpenMP over
//   rows; over H one `omp simd` loop with a polynomial exp for f32, libm made the
//   transcendentals most of a DIEN-sized step) that writes y, the workspace and the running
//   state. Inactive rows of a step are gathered into a compact GEMM operand only when some
//   sequence has ended (or not yet started, reverse).
//   Backward: per time step (reverse processing order) a fused loop turns dh/dc and the
//   workspace into the gate gradients of the active rows (kept packed for every step), and one
//   GEMM carries them to dh_prev; after the loop, three GEMMs over all steps at once:
//   dx_p = da_x W_ih, dW_ih += da_x^T x_p, dW_hh += da_h^T h_prev_p; bias gradients are
//   column sums in row order (deterministic). GEMMs: the matmul op (cpu.avx512 / OpenBLAS), one
//   call each, outside the OpenMP loops. Buffers come from the caching allocator; the per-thread
//   rows (zeros for absent h0/c0/dy, a gate row for inference) are thread_local and only grow.
//   Traffic per step: the active rows of gx, the state and one workspace row written; the
//   recurrence (a [rows, H] x [H, G*H] GEMM per step) bounds small-batch sequences.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/fast_math.h"
#include "kernels/matmul/matmul.h"
#include "kernels/registry.h"
#include "kernels/rnn/rnn.h"
#include "kernels/testing.h"

namespace aim::kernels {

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

// Sizes of one call: T steps, B sequences, I inputs, H hidden, G gates, W workspace width / H.
struct Dims {
  int64_t T = 0, B = 0, I = 0, H = 0, G = 0, W = 0;
};

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

}  // namespace

void check_rnn_fwd_args(const RnnFwdArgs& a) { check_fwd(a); }
void check_rnn_bwd_args(const RnnBwdArgs& a) { check_bwd(a); }

namespace {

inline double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

int64_t len_of(const Tensor& lengths, int64_t b, int64_t T) {
  return lengths.defined() ? int64_t(lengths.data<int32_t>()[b]) : T;
}

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

void rnn_fwd_cpu_ref(const RnnFwdArgs& a) {
  const Dims d = check_fwd(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, { fwd_ref<T>(a, d); });
}
void rnn_bwd_cpu_ref(const RnnBwdArgs& a) {
  const Dims d = check_bwd(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, { bwd_ref<T>(a, d); });
}

// ---- cpu.fast -------------------------------------------------------------------------------

// Valid positions packed time-major: the rows of time t are rows[off[t] .. off[t+1]), the
// sequences with len > t in b order. full: every length is T (packed row = t * B + b).
struct Plan {
  std::vector<int64_t> off, rows;
  int64_t N = 0;
  bool full = true;
};
Plan make_plan(const Tensor& lengths, int64_t T, int64_t B) {
  Plan p;
  p.off.assign(size_t(T + 1), 0);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t b = 0; b < B; ++b)
      if (len_of(lengths, b, T) > t) p.rows.push_back(b);
    p.off[size_t(t + 1)] = int64_t(p.rows.size());
  }
  p.N = int64_t(p.rows.size());
  p.full = p.N == T * B;
  return p;
}

// C = op(A) op(B) (+ bias) + beta C through the matmul op (cpu.avx512 / OpenBLAS by default).
void gemm(const Tensor& A, bool ta, const Tensor& Bm, bool tb, const Tensor& C, float beta,
          const Tensor& bias = Tensor()) {
  MatmulArgs m;
  m.a = A;
  m.b = Bm;
  m.c = C;
  m.trans_a = ta;
  m.trans_b = tb;
  m.beta = beta;
  m.bias = bias;
  matmul(m);
}

// Parallel gate loops only above this many elements (thread start-up costs more below).
constexpr int64_t kParallelMin = 4096;

template <class T>
inline T fexp(T v) {
  if constexpr (std::is_same_v<T, float>)
    return fast_expf(v);
  else
    return std::exp(v);
}
template <class T>
inline T sig(T v) {
  return T(1) / (T(1) + fexp(-v));
}
// tanh(v) = 2 sigmoid(2v) - 1: absolute error ~1 ulp of 1 near 0, exact limits at +-inf.
template <class T>
inline T tanh_(T v) {
  if constexpr (std::is_same_v<T, float>)
    return 2.0f / (1.0f + fast_expf(-2.0f * v)) - 1.0f;
  else
    return std::tanh(v);
}

// A thread's scratch row of n values (only grows): where an inference forward puts the gate
// values a training forward keeps in the workspace, so one branch-free loop serves both.
template <class T>
T* scratch_row(int64_t n) {
  thread_local std::vector<T> row;
  if (int64_t(row.size()) < n) row.resize(size_t(n));
  return row.data();
}

// A thread's row of n zeros (only grows, never written after): stands for an absent tensor.
template <class T>
const T* zero_row(int64_t n) {
  thread_local std::vector<T> row;
  if (int64_t(row.size()) < n) row.assign(size_t(n), T(0));
  return row.data();
}

// rows [N, C] of `src` (a [.., C] matrix) gathered by packed position: dst[p] = src[t * B + b].
template <class T>
void gather_rows(const T* src, T* dst, const Plan& p, int64_t B, int64_t C) {
  const int64_t T_ = int64_t(p.off.size()) - 1;
  for (int64_t t = 0; t < T_; ++t)
    for (int64_t q = p.off[size_t(t)]; q < p.off[size_t(t + 1)]; ++q)
      std::memcpy(dst + q * C, src + (t * B + p.rows[size_t(q)]) * C, size_t(C) * sizeof(T));
}

template <class T>
void fwd_fast(const RnnFwdArgs& a, const Dims& d) {
  const int64_t Tn = d.T, B = d.B, I = d.I, H = d.H, G = d.G, W = d.W, GH = G * H;
  const DType dt = a.x.dtype();
  const Plan pl = make_plan(a.lengths, Tn, B);
  const bool lstm = a.cell == RnnCell::LSTM, lbr = a.linear_before_reset;
  T* y = a.y.data<T>();
  T* ws = a.workspace.defined() ? a.workspace.data<T>() : nullptr;
  if (!pl.full) {  // positions past a length stay zero
    std::memset(y, 0, size_t(Tn * B * H) * sizeof(T));
    if (ws) std::memset(ws, 0, size_t(Tn * B * W * H) * sizeof(T));
  }
  // Running state [B, H].
  Tensor hcur = a.h0.defined() ? a.h0.clone() : Tensor::zeros({B, H}, dt);
  Tensor ccur = !lstm ? Tensor() : a.c0.defined() ? a.c0.clone() : Tensor::zeros({B, H}, dt);
  T* h = hcur.data<T>();
  T* c = lstm ? ccur.data<T>() : nullptr;
  if (pl.N > 0) {
    // Input projection of every valid step at once.
    Tensor xp = a.x.view({Tn * B, I});
    if (!pl.full) {
      xp = Tensor::empty({pl.N, I}, dt);
      gather_rows(a.x.data<T>(), xp.data<T>(), pl, B, I);
    }
    Tensor gx = Tensor::empty({pl.N, GH}, dt);
    gemm(xp, false, a.w_ih, true, gx, 0.0f, a.b_ih);
    const T* gxp = gx.data<T>();
    const T* att = a.att.defined() ? a.att.data<T>() : nullptr;
    // Per-step scratch, sized for all B rows.
    Tensor hin = Tensor::empty({B, H}, dt);
    Tensor gh = Tensor::empty({B, lbr || lstm ? GH : 2 * H}, dt);
    Tensor rh = lstm || lbr ? Tensor() : Tensor::empty({B, H}, dt);
    Tensor gn = lstm || lbr ? Tensor() : Tensor::empty({B, H}, dt);
    const Tensor w_rz = a.w_hh.slice(0, 0, 2 * H), w_n = a.w_hh.slice(0, 2 * H, 3 * H);
    const Tensor b_rz = a.b_hh.defined() ? a.b_hh.slice(0, 0, 2 * H) : Tensor();
    const Tensor b_n = a.b_hh.defined() ? a.b_hh.slice(0, 2 * H, 3 * H) : Tensor();
    for (int64_t s = 0; s < Tn; ++s) {
      const int64_t t = a.reverse ? Tn - 1 - s : s;
      const int64_t o = pl.off[size_t(t)], na = pl.off[size_t(t + 1)] - o;
      if (na == 0) continue;
      const int64_t* rows = pl.rows.data() + o;
      const bool all = na == B;  // rows are 0 .. B-1: the state is the GEMM operand as it is
      Tensor hv = all ? hcur : hin.slice(0, 0, na);
      if (!all)
        for (int64_t i = 0; i < na; ++i)
          std::memcpy(hv.data<T>() + i * H, h + rows[i] * H, size_t(H) * sizeof(T));
      const Tensor ghv = gh.slice(0, 0, na);
      const bool par = na * H >= kParallelMin;
      if (lstm || lbr) {
        gemm(hv, false, a.w_hh, true, ghv, 0.0f, a.b_hh);
        const T* ghp = ghv.data<T>();
#pragma omp parallel for schedule(static) if (par)
        for (int64_t i = 0; i < na; ++i) {
          const int64_t b = rows[i];
          const T* gxr = gxp + (o + i) * GH;
          const T* ghr = ghp + i * GH;
          T* hb = h + b * H;
          T* yt = y + (t * B + b) * H;
          // Inference writes the gates into a per-thread scratch row instead of the workspace.
          T* wt = ws ? ws + (t * B + b) * W * H : scratch_row<T>(W * H);
          if (lstm) {
            T* cb = c + b * H;
#pragma omp simd
            for (int64_t j = 0; j < H; ++j) {
              const T ig = sig(gxr[j] + ghr[j]);
              const T fg = sig(gxr[H + j] + ghr[H + j]);
              const T gg = tanh_(gxr[2 * H + j] + ghr[2 * H + j]);
              const T og = sig(gxr[3 * H + j] + ghr[3 * H + j]);
              const T cn = fg * cb[j] + ig * gg;
              cb[j] = cn;
              hb[j] = yt[j] = og * tanh_(cn);
              wt[j] = ig;
              wt[H + j] = fg;
              wt[2 * H + j] = gg;
              wt[3 * H + j] = og;
              wt[4 * H + j] = cn;
            }
          } else {
            const T keep = att ? T(1) - att[t * B + b] : T(1);  // AUGRU's scale of z
#pragma omp simd
            for (int64_t j = 0; j < H; ++j) {
              const T rg = sig(gxr[j] + ghr[j]);
              const T z = sig(gxr[H + j] + ghr[H + j]);
              const T hh = ghr[2 * H + j];
              const T n = tanh_(gxr[2 * H + j] + rg * hh);
              const T zs = keep * z;
              hb[j] = yt[j] = (T(1) - zs) * n + zs * hb[j];
              wt[j] = rg;
              wt[H + j] = z;
              wt[2 * H + j] = n;
              wt[3 * H + j] = hh;
            }
          }
        }
      } else {
        // GRU with the reset before the product: r first, then (r*h) W_hn^T.
        gemm(hv, false, w_rz, true, ghv, 0.0f, b_rz);
        const T* ghp = ghv.data<T>();
        const T* hvp = hv.data<T>();
        T* rhp = rh.data<T>();
#pragma omp parallel for schedule(static) if (par)
        for (int64_t i = 0; i < na; ++i) {
#pragma omp simd
          for (int64_t j = 0; j < H; ++j) {
            const T rg = sig(gxp[(o + i) * GH + j] + ghp[i * 2 * H + j]);
            rhp[i * H + j] = rg * hvp[i * H + j];
          }
        }
        const Tensor gnv = gn.slice(0, 0, na);
        gemm(rh.slice(0, 0, na), false, w_n, true, gnv, 0.0f, b_n);
        const T* gnp = gnv.data<T>();
#pragma omp parallel for schedule(static) if (par)
        for (int64_t i = 0; i < na; ++i) {
          const int64_t b = rows[i];
          const T* gxr = gxp + (o + i) * GH;
          const T* ghr = ghp + i * 2 * H;
          T* hb = h + b * H;
          T* yt = y + (t * B + b) * H;
          T* wt = ws ? ws + (t * B + b) * W * H : scratch_row<T>(W * H);
          const T keep = att ? T(1) - att[t * B + b] : T(1);
#pragma omp simd
          for (int64_t j = 0; j < H; ++j) {
            const T rg = sig(gxr[j] + ghr[j]);
            const T z = sig(gxr[H + j] + ghr[H + j]);
            const T n = tanh_(gxr[2 * H + j] + gnp[i * H + j]);
            const T zs = keep * z;
            hb[j] = yt[j] = (T(1) - zs) * n + zs * hb[j];
            wt[j] = rg;
            wt[H + j] = z;
            wt[2 * H + j] = n;
            wt[3 * H + j] = rhp[i * H + j];
          }
        }
      }
    }
  }
  if (a.hn.defined()) a.hn.copy_(hcur);
  if (a.cn.defined()) a.cn.copy_(ccur);
}

// out[c] += sum over the rows of m [N, C] (row order, double: deterministic).
template <class T>
void add_column_sums(const Tensor& out, const T* m, int64_t N, int64_t C) {
  if (!out.defined()) return;
  std::vector<double> s(size_t(C), 0.0);
  for (int64_t p = 0; p < N; ++p)
    for (int64_t j = 0; j < C; ++j) s[size_t(j)] += double(m[p * C + j]);
  T* o = out.data<T>();
  for (int64_t j = 0; j < C; ++j) o[j] = T(double(o[j]) + s[size_t(j)]);
}

template <class T>
void bwd_fast(const RnnBwdArgs& a, const Dims& d) {
  const int64_t Tn = d.T, B = d.B, I = d.I, H = d.H, G = d.G, W = d.W, GH = G * H;
  const DType dt = a.x.dtype();
  const Plan pl = make_plan(a.lengths, Tn, B);
  const bool lstm = a.cell == RnnCell::LSTM, lbr = a.linear_before_reset;
  const bool rfirst = !lstm && !lbr;  // GRU with the reset before the product
  const T* y = a.y.data<T>();
  const T* ws = a.workspace.data<T>();
  const T* dy = a.dy.defined() ? a.dy.data<T>() : nullptr;
  const T* h0 = a.h0.defined() ? a.h0.data<T>() : nullptr;
  const T* c0 = a.c0.defined() ? a.c0.data<T>() : nullptr;
  const T* att = a.att.defined() ? a.att.data<T>() : nullptr;
  T* datt = a.datt.defined() ? a.datt.data<T>() : nullptr;
  if (datt) std::memset(datt, 0, size_t(Tn * B) * sizeof(T));
  // Running gradients of the state [B, H].
  Tensor dhs = a.dhn.defined() ? a.dhn.clone() : Tensor::zeros({B, H}, dt);
  Tensor dcs = !lstm ? Tensor() : a.dcn.defined() ? a.dcn.clone() : Tensor::zeros({B, H}, dt);
  T* dh = dhs.data<T>();
  T* dc = lstm ? dcs.data<T>() : nullptr;
  if (pl.N > 0) {
    const int64_t N = pl.N;
    // Packed gate gradients: input side dax [N, G*H]; hidden side dah (LSTM: dax itself; GRU
    // with linear_before_reset: [N, 3H]; reset-first GRU: dah [N, 2H] for r, z and the n part
    // dan [N, H], which multiplies r*h_prev). The GEMM operands h_prev [N, H] (and r*h_prev).
    Tensor dax = Tensor::empty({N, GH}, dt);
    Tensor dah = lstm ? dax : Tensor::empty({N, rfirst ? 2 * H : GH}, dt);
    Tensor dan = rfirst ? Tensor::empty({N, H}, dt) : Tensor();
    Tensor hp = Tensor::empty({N, H}, dt);
    Tensor rhp = rfirst ? Tensor::empty({N, H}, dt) : Tensor();
    Tensor dtmp = Tensor::empty({B, H}, dt), drh = rfirst ? Tensor::empty({B, H}, dt) : Tensor();
    T* daxp = dax.data<T>();
    T* dahp = dah.data<T>();
    T* danp = rfirst ? dan.data<T>() : nullptr;
    T* hpp = hp.data<T>();
    T* rhpp = rfirst ? rhp.data<T>() : nullptr;
    const int64_t DH = rfirst ? 2 * H : GH;  // dah's width
    const Tensor w_rz = a.w_hh.slice(0, 0, 2 * H), w_n = a.w_hh.slice(0, 2 * H, 3 * H);
    for (int64_t s = Tn - 1; s >= 0; --s) {  // processing order, backwards
      const int64_t t = a.reverse ? Tn - 1 - s : s;
      const int64_t o = pl.off[size_t(t)], na = pl.off[size_t(t + 1)] - o;
      if (na == 0) continue;
      const int64_t* rows = pl.rows.data() + o;
      const bool all = na == B;
      const bool par = na * H >= kParallelMin;
      // dv [na, H]: the direct part of dh_prev, then += dah W_hh; the state itself when all rows
      // are active (each element read, then written, by one thread).
      const Tensor dv = all ? dhs : dtmp.slice(0, 0, na);
      T* dvp = dv.data<T>();
#pragma omp parallel for schedule(static) if (par)
      for (int64_t i = 0; i < na; ++i) {
        const int64_t b = rows[i], q = o + i;
        const int64_t len = len_of(a.lengths, b, Tn);
        const bool first = a.reverse ? t == len - 1 : t == 0;
        const int64_t tp = a.reverse ? t + 1 : t - 1;
        // Absent tensors (h0, c0, dy) read as a row of zeros: branch-free simd loops.
        const T* zero = zero_row<T>(H);
        const T* hprev = first ? (h0 ? h0 + b * H : zero) : y + (tp * B + b) * H;
        T* hq = hpp + q * H;
        std::memcpy(hq, hprev, size_t(H) * sizeof(T));
        const T* wt = ws + (t * B + b) * W * H;
        T* dx_ = daxp + q * GH;
        T* dhq = dahp + q * DH;
        T* dvi = dvp + i * H;
        const T* dyt = dy ? dy + (t * B + b) * H : zero;
        const T* dhb = dh + b * H;
        if (lstm) {
          T* dcb = dc + b * H;
          const T* cprev = first ? (c0 ? c0 + b * H : zero) : ws + (tp * B + b) * W * H + 4 * H;
#pragma omp simd
          for (int64_t j = 0; j < H; ++j) {
            const T dht = dhb[j] + dyt[j];
            const T ig = wt[j], fg = wt[H + j], gg = wt[2 * H + j], og = wt[3 * H + j],
                    tc = tanh_(wt[4 * H + j]);
            const T dct = dcb[j] + dht * og * (T(1) - tc * tc);
            dx_[j] = dct * gg * ig * (T(1) - ig);
            dx_[H + j] = dct * cprev[j] * fg * (T(1) - fg);
            dx_[2 * H + j] = dct * ig * (T(1) - gg * gg);
            dx_[3 * H + j] = dht * tc * og * (T(1) - og);
            dcb[j] = dct * fg;
            dvi[j] = T(0);
          }
        } else {
          const T keep = att ? T(1) - att[t * B + b] : T(1);  // z' = keep * z
          T dsum = 0;
#pragma omp simd reduction(+ : dsum)
          for (int64_t j = 0; j < H; ++j) {
            const T dht = dhb[j] + dyt[j];
            const T rg = wt[j], z = wt[H + j], n = wt[2 * H + j], hh = wt[3 * H + j];
            const T zs = keep * z;
            const T dzs = dht * (hq[j] - n);
            dsum += dzs * z;
            const T dn = dht * (T(1) - zs) * (T(1) - n * n);
            const T daz = dzs * keep * z * (T(1) - z);
            dx_[H + j] = daz;
            dx_[2 * H + j] = dn;
            dhq[H + j] = daz;
            dvi[j] = dht * zs;
            if (rfirst) {
              danp[q * H + j] = dn;
              rhpp[q * H + j] = hh;
            } else {
              const T dar = dn * hh * rg * (T(1) - rg);
              dx_[j] = dar;
              dhq[j] = dar;
              dhq[2 * H + j] = dn * rg;
            }
          }
          if (datt) datt[t * B + b] = -dsum;
        }
      }
      if (rfirst) {
        // d(r*h) = dan W_hn: the reset gate's gradient and a direct path to h_prev.
        const Tensor drv = drh.slice(0, 0, na);
        gemm(dan.slice(0, o, o + na), false, w_n, false, drv, 0.0f);
        const T* drp = drv.data<T>();
#pragma omp parallel for schedule(static) if (par)
        for (int64_t i = 0; i < na; ++i) {
          const int64_t b = rows[i], q = o + i;
          const T* wt = ws + (t * B + b) * W * H;
#pragma omp simd
          for (int64_t j = 0; j < H; ++j) {
            const T rg = wt[j];
            const T dar = drp[i * H + j] * hpp[q * H + j] * rg * (T(1) - rg);
            daxp[q * GH + j] = dar;
            dahp[q * DH + j] = dar;
            dvp[i * H + j] += drp[i * H + j] * rg;
          }
        }
      }
      gemm(dah.slice(0, o, o + na), false, rfirst ? w_rz : a.w_hh, false, dv, 1.0f);
      if (!all)
        for (int64_t i = 0; i < na; ++i)
          std::memcpy(dh + rows[i] * H, dvp + i * H, size_t(H) * sizeof(T));
    }
    // Everything that does not feed the recurrence: one GEMM each over every step.
    if (a.dx.defined()) {
      if (pl.full) {
        gemm(dax, false, a.w_ih, false, a.dx.view({Tn * B, I}), 0.0f);
      } else {
        Tensor dxp = Tensor::empty({N, I}, dt);
        gemm(dax, false, a.w_ih, false, dxp, 0.0f);
        T* dx = a.dx.data<T>();
        std::memset(dx, 0, size_t(Tn * B * I) * sizeof(T));
        const T* src = dxp.data<T>();
        for (int64_t t = 0; t < Tn; ++t)
          for (int64_t q = pl.off[size_t(t)]; q < pl.off[size_t(t + 1)]; ++q)
            std::memcpy(dx + (t * B + pl.rows[size_t(q)]) * I, src + q * I, size_t(I) * sizeof(T));
      }
    }
    if (a.dw_ih.defined()) {
      Tensor xp = a.x.view({Tn * B, I});
      if (!pl.full) {
        xp = Tensor::empty({N, I}, dt);
        gather_rows(a.x.data<T>(), xp.data<T>(), pl, B, I);
      }
      gemm(dax, true, xp, false, a.dw_ih, 1.0f);
    }
    if (a.dw_hh.defined()) {
      if (rfirst) {
        gemm(dah, true, hp, false, a.dw_hh.slice(0, 0, 2 * H), 1.0f);
        gemm(dan, true, rhp, false, a.dw_hh.slice(0, 2 * H, 3 * H), 1.0f);
      } else {
        gemm(dah, true, hp, false, a.dw_hh, 1.0f);
      }
    }
    add_column_sums<T>(a.db_ih, daxp, N, GH);
    if (rfirst) {
      if (a.db_hh.defined()) {
        add_column_sums<T>(a.db_hh.slice(0, 0, 2 * H), dahp, N, 2 * H);
        add_column_sums<T>(a.db_hh.slice(0, 2 * H, 3 * H), danp, N, H);
      }
    } else {
      add_column_sums<T>(a.db_hh, dahp, N, GH);
    }
  }
  if (a.dx.defined() && pl.N == 0) a.dx.zero_();
  if (a.dh0.defined()) a.dh0.copy_(dhs);
  if (a.dc0.defined()) a.dc0.copy_(dcs);
}

void rnn_fwd_cpu_fast(const RnnFwdArgs& a) {
  const Dims d = check_fwd(a);
  if (a.x.dtype() == DType::f32)
    fwd_fast<float>(a, d);
  else if (a.x.dtype() == DType::f64)
    fwd_fast<double>(a, d);
  else
    AIM_FAIL("[rnn_fwd] cpu.fast takes f32 and f64, got ", dtype_name(a.x.dtype()));
}
void rnn_bwd_cpu_fast(const RnnBwdArgs& a) {
  const Dims d = check_bwd(a);
  if (a.x.dtype() == DType::f32)
    bwd_fast<float>(a, d);
  else if (a.x.dtype() == DType::f64)
    bwd_fast<double>(a, d);
  else
    AIM_FAIL("[rnn_bwd] cpu.fast takes f32 and f64, got ", dtype_name(a.x.dtype()));
}

// ---- test cases -----------------------------------------------------------------------------

// Test shape: {cell (0 LSTM, 1 GRU, 2 AUGRU), T, B, I, H, reverse, linear_before_reset,
// lengths (0: none, 1: varied, unsorted, a 0 where B > T), bias, h0/c0, full}.
// full: forward with workspace (training) / backward with dy, dhn and every gradient wanted;
// else an inference forward (no workspace) / a backward with dy undefined, dx and db_* not wanted.
struct CaseSpec {
  RnnCell cell;
  int64_t T, B, I, H;
  bool reverse, lbr, lengths, bias, h0, full;
};
CaseSpec spec_of(const TestShape& s) {
  AIM_CHECK(s.size() == 11,
            "[rnn] test shape needs 11 fields {cell, T, B, I, H, reverse, linear_before_reset, "
            "lengths, bias, h0, full}, got ",
            shape_str(s));
  AIM_CHECK(s[0] >= 0 && s[0] <= 2, "[rnn] test shape cell must be 0 (LSTM), 1 (GRU) or 2 (AUGRU)");
  return {RnnCell(s[0]), s[1],      s[2],      s[3],      s[4],      s[5] != 0,
          s[6] != 0,     s[7] != 0, s[8] != 0, s[9] != 0, s[10] != 0};
}

// Lengths T, T-1, ... wrapping to 0, T, ...: unsorted, the full length first.
std::vector<int32_t> case_lengths(int64_t T, int64_t B) {
  std::vector<int32_t> l(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) l[size_t(b)] = int32_t((T - b % (T + 1) + (T + 1)) % (T + 1));
  return l;
}

// Inputs of the forward, in a case (dtype t): shared by the forward and backward makers.
void add_fwd_inputs(TestCase& c, const CaseSpec& p, DType t, uint64_t seed) {
  const int64_t GH = rnn_gates(p.cell) * p.H;
  const double k = 1.0 / std::sqrt(double(p.H));  // PyTorch's init range
  c.add_in("x", random_tensor({p.T, p.B, p.I}, t, seed, -1.0, 1.0));
  c.add_in("lengths", p.lengths ? Tensor::from_vector(case_lengths(p.T, p.B), {p.B}) : Tensor());
  c.add_in("h0", p.h0 ? random_tensor({p.B, p.H}, t, seed + 1, -1.0, 1.0) : Tensor());
  c.add_in("c0", p.h0 && p.cell == RnnCell::LSTM ? random_tensor({p.B, p.H}, t, seed + 2, -1, 1)
                                                 : Tensor());
  c.add_in("w_ih", random_tensor({GH, p.I}, t, seed + 3, -k, k));
  c.add_in("w_hh", random_tensor({GH, p.H}, t, seed + 4, -k, k));
  c.add_in("b_ih", p.bias ? random_tensor({GH}, t, seed + 5, -k, k) : Tensor());
  c.add_in("b_hh", p.bias ? random_tensor({GH}, t, seed + 6, -k, k) : Tensor());
  c.add_in("att",
           p.cell == RnnCell::AUGRU ? random_tensor({p.T, p.B}, t, seed + 7, 0.0, 1.0) : Tensor());
  c.params["cell"] = double(int(p.cell));
  c.params["reverse"] = p.reverse;
  c.params["linear_before_reset"] = p.lbr;
}

Tensor maybe(bool want, const Tensor& t) { return want ? t : Tensor(); }

TestCase make_fwd_case(const TestShape& s, DType t, uint64_t seed) {
  const CaseSpec p = spec_of(s);
  TestCase c;
  add_fwd_inputs(c, p, t, seed);
  const bool lstm = p.cell == RnnCell::LSTM;
  c.add_out("y", poison_tensor({p.T, p.B, p.H}, t));
  c.add_out("hn", poison_tensor({p.B, p.H}, t));
  c.add_out("cn", maybe(lstm, poison_tensor({p.B, p.H}, t)));
  c.add_out("workspace",
            maybe(p.full, poison_tensor({p.T, p.B, rnn_workspace_width(p.cell) * p.H}, t)));
  return c;
}

// Lengths, h0, c0 of a case: CUDA variants get the case moved to the GPU, but lengths stay a
// host tensor by the op's contract.
Tensor host_lengths(const TestCase& c) {
  const Tensor& l = c.in("lengths");
  return l.defined() ? l.to(kCPU) : l;
}

RnnFwdArgs bind_fwd(const TestCase& c) {
  RnnFwdArgs a;
  a.cell = RnnCell(int(c.param("cell")));
  a.reverse = c.param("reverse") != 0;
  a.linear_before_reset = c.param("linear_before_reset") != 0;
  a.x = c.in("x");
  a.lengths = host_lengths(c);
  a.h0 = c.in("h0");
  a.c0 = c.in("c0");
  a.w_ih = c.in("w_ih");
  a.w_hh = c.in("w_hh");
  a.b_ih = c.in("b_ih");
  a.b_hh = c.in("b_hh");
  a.att = c.in("att");
  a.y = c.out("y");
  a.hn = c.out("hn");
  a.cn = c.out("cn");
  a.workspace = c.out("workspace");
  return a;
}

// The backward's case: the forward's outputs come from cpu.ref in the case dtype.
TestCase make_bwd_case(const TestShape& s, DType t, uint64_t seed) {
  const CaseSpec p = spec_of(s);
  const bool lstm = p.cell == RnnCell::LSTM;
  const int64_t GH = rnn_gates(p.cell) * p.H;
  TestCase f;
  add_fwd_inputs(f, p, t, seed);
  f.add_out("y", Tensor::empty({p.T, p.B, p.H}, t));
  f.add_out("hn", Tensor());
  f.add_out("cn", Tensor());
  f.add_out("workspace", Tensor::empty({p.T, p.B, rnn_workspace_width(p.cell) * p.H}, t));
  rnn_fwd_cpu_ref(bind_fwd(f));

  TestCase c;
  for (const char* n : {"x", "lengths", "h0", "c0", "w_ih", "w_hh", "b_ih", "b_hh", "att"})
    c.add_in(n, f.in(n));
  c.add_in("y", f.out("y"));
  c.add_in("workspace", f.out("workspace"));
  c.add_in("dy", maybe(p.full, random_tensor({p.T, p.B, p.H}, t, seed + 10, -1.0, 1.0)));
  // Partial cases without h0 leave dhn/dcn undefined too (zeros).
  const bool dstate = p.full || p.h0;
  c.add_in("dhn", maybe(dstate, random_tensor({p.B, p.H}, t, seed + 11, -1.0, 1.0)));
  c.add_in("dcn", maybe(dstate && lstm, random_tensor({p.B, p.H}, t, seed + 12, -1.0, 1.0)));
  c.params = f.params;
  c.add_out("dx", maybe(p.full, poison_tensor({p.T, p.B, p.I}, t)));
  c.add_out("dh0", poison_tensor({p.B, p.H}, t));
  c.add_out("dc0", maybe(lstm, poison_tensor({p.B, p.H}, t)));
  // Accumulated outputs start from random values: a variant that writes instead of adding fails.
  c.add_out("dw_ih", random_tensor({GH, p.I}, t, seed + 13, -1.0, 1.0));
  c.add_out("dw_hh", random_tensor({GH, p.H}, t, seed + 14, -1.0, 1.0));
  c.add_out("db_ih", maybe(p.full, random_tensor({GH}, t, seed + 15, -1.0, 1.0)));
  c.add_out("db_hh", maybe(p.full, random_tensor({GH}, t, seed + 16, -1.0, 1.0)));
  c.add_out("datt", maybe(p.cell == RnnCell::AUGRU, poison_tensor({p.T, p.B}, t)));
  return c;
}

RnnBwdArgs bind_bwd(const TestCase& c) {
  RnnBwdArgs a;
  a.cell = RnnCell(int(c.param("cell")));
  a.reverse = c.param("reverse") != 0;
  a.linear_before_reset = c.param("linear_before_reset") != 0;
  a.x = c.in("x");
  a.lengths = host_lengths(c);
  a.h0 = c.in("h0");
  a.c0 = c.in("c0");
  a.w_ih = c.in("w_ih");
  a.w_hh = c.in("w_hh");
  a.b_ih = c.in("b_ih");
  a.b_hh = c.in("b_hh");
  a.att = c.in("att");
  a.y = c.in("y");
  a.workspace = c.in("workspace");
  a.dy = c.in("dy");
  a.dhn = c.in("dhn");
  a.dcn = c.in("dcn");
  a.dx = c.out("dx");
  a.dh0 = c.out("dh0");
  a.dc0 = c.out("dc0");
  a.dw_ih = c.out("dw_ih");
  a.dw_hh = c.out("dw_hh");
  a.db_ih = c.out("db_ih");
  a.db_hh = c.out("db_hh");
  a.datt = c.out("datt");
  return a;
}

// Recurrences carry rounding through T steps and the weight gradients sum T*B products.
Tolerance rnn_tolerance(DType t, const TestShape&) {
  if (t == DType::f16) return {1e-2, 1e-2};
  if (t == DType::bf16) return {8e-2, 4e-2};
  if (t == DType::f32) return {1e-4, 1e-4};
  return default_tolerance(t);
}

// The emulator runs every thread of every step: keep its cases tiny.
bool rnn_simt_small(const TestShape& s) {
  const CaseSpec p = spec_of(s);
  return p.T <= 4 && p.B <= 5 && p.H <= 8 && p.I <= 8;
}

std::vector<DType> float_dtypes() { return {DType::f32, DType::f64, DType::f16, DType::bf16}; }

}  // namespace

void rnn_fwd(const RnnFwdArgs& a) { AIM_DISPATCH_OP(RnnFwdArgs, "rnn_fwd", a); }
void rnn_bwd(const RnnBwdArgs& a) { AIM_DISPATCH_OP(RnnBwdArgs, "rnn_bwd", a); }

void register_rnn_cpu(Registry& r) {
  // {cell, T, B, I, H, reverse, linear_before_reset, lengths, bias, h0, full}: the tiny ones
  // first (the emulator runs those), then odd sizes, a DIEN-like AUGRU and a wider LSTM.
  const std::vector<TestShape> shapes = {
      {0, 4, 3, 5, 8, 0, 1, 0, 1, 1, 1},     // LSTM
      {0, 4, 3, 5, 8, 1, 1, 1, 1, 1, 1},     // LSTM reverse, lengths
      {0, 3, 2, 4, 6, 0, 1, 1, 0, 0, 0},     // LSTM, no bias, no h0, inference / partial grads
      {0, 2, 5, 3, 4, 1, 1, 1, 1, 0, 1},     // LSTM reverse, a zero length (B > T)
      {1, 4, 3, 5, 8, 0, 1, 1, 1, 1, 1},     // GRU (PyTorch), lengths
      {1, 4, 3, 5, 8, 1, 1, 0, 1, 0, 1},     // GRU reverse
      {1, 4, 3, 5, 8, 0, 1, 1, 1, 1, 0},     // GRU inference / partial grads
      {1, 4, 3, 5, 8, 0, 0, 1, 1, 1, 1},     // GRU reset before the product (TF), lengths
      {1, 3, 3, 5, 7, 1, 0, 1, 0, 1, 0},     // ... reverse, no bias, partial
      {2, 4, 3, 5, 8, 0, 0, 1, 1, 1, 1},     // AUGRU (DIEN's cell), lengths
      {2, 4, 3, 5, 8, 1, 1, 1, 1, 1, 1},     // AUGRU reverse, linear_before_reset
      {2, 2, 5, 3, 4, 0, 0, 1, 1, 0, 0},     // AUGRU, a zero length, partial
      {0, 7, 9, 13, 17, 0, 1, 1, 1, 1, 1},   // odd sizes
      {1, 6, 10, 11, 19, 1, 1, 1, 1, 1, 1},  // odd sizes, reverse
      {1, 5, 7, 9, 12, 0, 0, 1, 1, 1, 1},    // TF GRU, odd sizes
      {2, 9, 17, 18, 18, 0, 0, 1, 1, 1, 1},  // DIEN-like AUGRU
      {0, 5, 6, 40, 33, 1, 1, 0, 1, 1, 1}};  // wider LSTM, reverse

  auto& f = r.op<RnnFwdArgs>("rnn_fwd");
  f.description = "LSTM/GRU/AUGRU over a sequence, one direction of one layer (torch.nn.LSTM/GRU)";
  f.add({"cpu.ref", Backend::CPU, Provider::Own, rnn_fwd_cpu_ref, float_dtypes()});
  f.add({"cpu.fast", Backend::CPU, Provider::Own, rnn_fwd_cpu_fast, {DType::f32, DType::f64}});
  f.set_default(Backend::CPU, "cpu.ref");
  f.set_default(Backend::CPU, "cpu.fast", {DType::f32, DType::f64});
  f.set_cost(rnn_fwd_cost);
  f.set_bind(bind_fwd);
  f.make_case = make_fwd_case;
  f.add_test_shapes(shapes);
  f.tolerance = rnn_tolerance;
  f.small_enough_for_simt = rnn_simt_small;

  auto& b = r.op<RnnBwdArgs>("rnn_bwd");
  b.description = "gradients of rnn_fwd: dx, dh0, dc0, datt (=); dW, db (+=)";
  b.add({"cpu.ref", Backend::CPU, Provider::Own, rnn_bwd_cpu_ref, float_dtypes()});
  b.add({"cpu.fast", Backend::CPU, Provider::Own, rnn_bwd_cpu_fast, {DType::f32, DType::f64}});
  b.set_default(Backend::CPU, "cpu.ref");
  b.set_default(Backend::CPU, "cpu.fast", {DType::f32, DType::f64});
  b.set_cost(rnn_bwd_cost);
  b.set_bind(bind_bwd);
  b.make_case = make_bwd_case;
  b.add_test_shapes(shapes);
  b.tolerance = rnn_tolerance;
  b.small_enough_for_simt = rnn_simt_small;
}

}  // namespace aim::kernels
