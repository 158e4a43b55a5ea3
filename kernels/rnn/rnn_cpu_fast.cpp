// cpu.fast (the CPU default): the PyTorch/cuDNN structure with the project's GEMMs; f16 and bf16
// run the f32 path on f32 copies and round each stored value once (fwd_16bit below).
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
#include "kernels/rnn/rnn_cpu.h"

namespace aim::kernels::rnn_cpu {
namespace {

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

}  // namespace

namespace {

// f16 / bf16: the f32 path on f32 copies, each stored value rounded once into its 16-bit tensor
// (cpu.ref's contract: the state carried between steps is never rounded to 16 bits; here it is
// f32 instead of double). The copies cost O(T B (I + H) + weights) against the GEMMs'
// O(T B G H (I + H)), and the f32 path has the threads and the AVX-512 GEMMs.
Tensor f32_of(const Tensor& t) { return t.defined() ? t.to(DType::f32) : t; }
Tensor f32_like(const Tensor& t) {
  return t.defined() ? Tensor::empty(t.sizes(), DType::f32, t.device()) : t;
}
void store(const Tensor& dst, const Tensor& f32) {
  if (dst.defined()) dst.copy_(f32);
}

void fwd_16bit(const RnnFwdArgs& a, const Dims& d) {
  RnnFwdArgs f = a;
  f.x = f32_of(a.x), f.h0 = f32_of(a.h0), f.c0 = f32_of(a.c0), f.att = f32_of(a.att);
  f.w_ih = f32_of(a.w_ih), f.w_hh = f32_of(a.w_hh), f.b_ih = f32_of(a.b_ih);
  f.b_hh = f32_of(a.b_hh);
  f.y = f32_like(a.y), f.hn = f32_like(a.hn), f.cn = f32_like(a.cn);
  f.workspace = f32_like(a.workspace);
  fwd_fast<float>(f, d);
  store(a.y, f.y), store(a.hn, f.hn), store(a.cn, f.cn), store(a.workspace, f.workspace);
}

void bwd_16bit(const RnnBwdArgs& a, const Dims& d) {
  RnnBwdArgs f = a;
  f.x = f32_of(a.x), f.h0 = f32_of(a.h0), f.c0 = f32_of(a.c0), f.att = f32_of(a.att);
  f.w_ih = f32_of(a.w_ih), f.w_hh = f32_of(a.w_hh), f.b_ih = f32_of(a.b_ih);
  f.b_hh = f32_of(a.b_hh), f.y = f32_of(a.y), f.workspace = f32_of(a.workspace);
  f.dy = f32_of(a.dy), f.dhn = f32_of(a.dhn), f.dcn = f32_of(a.dcn);
  f.dx = f32_like(a.dx), f.dh0 = f32_like(a.dh0), f.dc0 = f32_like(a.dc0);
  f.datt = f32_like(a.datt);
  // The weight gradients accumulate (+=): start from their current values.
  f.dw_ih = f32_of(a.dw_ih), f.dw_hh = f32_of(a.dw_hh), f.db_ih = f32_of(a.db_ih);
  f.db_hh = f32_of(a.db_hh);
  bwd_fast<float>(f, d);
  store(a.dx, f.dx), store(a.dh0, f.dh0), store(a.dc0, f.dc0), store(a.datt, f.datt);
  store(a.dw_ih, f.dw_ih), store(a.dw_hh, f.dw_hh), store(a.db_ih, f.db_ih);
  store(a.db_hh, f.db_hh);
}

}  // namespace

void rnn_fwd_cpu_fast(const RnnFwdArgs& a) {
  const Dims d = check_fwd(a);
  if (a.x.dtype() == DType::f32)
    fwd_fast<float>(a, d);
  else if (a.x.dtype() == DType::f64)
    fwd_fast<double>(a, d);
  else if (a.x.dtype() == DType::f16 || a.x.dtype() == DType::bf16)
    fwd_16bit(a, d);
  else
    AIM_FAIL("[rnn_fwd] cpu.fast takes f32, f64, f16 and bf16, got ", dtype_name(a.x.dtype()));
}
void rnn_bwd_cpu_fast(const RnnBwdArgs& a) {
  const Dims d = check_bwd(a);
  if (a.x.dtype() == DType::f32)
    bwd_fast<float>(a, d);
  else if (a.x.dtype() == DType::f64)
    bwd_fast<double>(a, d);
  else if (a.x.dtype() == DType::f16 || a.x.dtype() == DType::bf16)
    bwd_16bit(a, d);
  else
    AIM_FAIL("[rnn_bwd] cpu.fast takes f32, f64, f16 and bf16, got ", dtype_name(a.x.dtype()));
}

}  // namespace aim::kernels::rnn_cpu
