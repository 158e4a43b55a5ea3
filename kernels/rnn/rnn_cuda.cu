// cuda.fused (rnn_fwd, rnn_bwd), the default CUDA variant. The cuDNN structure with the
// project's GEMMs (the matmul op: cuda.cublas on a GPU; under the SIMT emulator the tensors are
// host tensors and the CPU matmul runs) and one fused elementwise kernel per time step.
//   Forward: gx [T*B, G*H] = x W_ih^T + b_ih, one GEMM over every step; then per time step (in
//   processing order) gh [B, G*H] = h W_hh^T + b_hh and the gate kernel: one thread per (b, j)
//   (grid-stride), reading gx/gh, writing y, the workspace and the running state h, c [B, H] in
//   place. GRU with the reset before the product: gh_rz = h W_hr,z^T, a kernel writes r*h, a
//   second GEMM (r*h) W_hn^T, then the gate kernel.
//   Backward, per time step in reverse processing order: one block per sequence b (threads over
//   j; AUGRU reduces datt[t, b] over j with block_sum, fixed order) turns dh, dc and the
//   workspace into the gate gradients da_x, da_h [T*B, G*H] (kept for every step) and writes the
//   direct part of dh_prev into a second state buffer; one GEMM (beta = 1) adds da_h W_hh and
//   the two buffers swap. After the loop: dx = da_x W_ih, dW_ih += da_x^T x, dW_hh += da_h^T
//   h_prev (one GEMM each over every step), db_* += column sums (one thread per column, rows in
//   order: deterministic).
//   Lengths, sort-free: every step runs over all B rows and the kernels mask the sequences with
//   len[b] <= t (their state is kept, y and the gradient rows are zero), so padding costs GEMM
//   work; the host's lengths are copied to the device once per call (B ints).
//   Bound: per step a [B, H] x [H, G*H] GEMM plus two launches; for small B*H (DIEN: 256 x 36)
//   the step is launch-latency bound (~10 us), for large H the GEMMs dominate. Limits: f32 f64
//   f16 bf16; gate math in float (double for f64); the state and the GEMM outputs are stored in
//   the data type (16-bit: rounded every step, like the data of a 16-bit cuDNN RNN).
#include <algorithm>

#include "kernels/cuda_common.h"
#include "kernels/matmul/matmul.h"
#include "kernels/rnn/rnn.h"

namespace aim::kernels::AIM_CUDA_NS {
namespace {

constexpr int kThreads = 256;
enum Kind : int { kLstm = 0, kGruLbr = 1, kGruResetFirst = 2 };

template <class T>
T* ptr(const Tensor& t) {
  return t.defined() ? static_cast<T*>(t.raw_data()) : nullptr;
}

template <class A>
__device__ __forceinline__ A sigm(A v) {
  if constexpr (std::is_same_v<A, float>)
    return 1.0f / (1.0f + expf(-v));
  else
    return A(1) / (A(1) + exp(-v));
}
template <class A>
__device__ __forceinline__ A tanh_(A v) {
  if constexpr (std::is_same_v<A, float>)
    return tanhf(v);
  else
    return tanh(v);
}

// Geometry of one call, passed by value to every kernel.
struct Geo {
  int64_t T, B, H, G, W;  // W: workspace width in units of H
};

// ---- forward ---------------------------------------------------------------------------------

// LSTM and GRU with linear_before_reset: gx [T*B, G*H], gh [B, G*H] (b_hh included).
template <class T, int kKind>
__global__ void fwd_step_kernel(const T* gx, const T* gh, const T* att, const int32_t* len, T* h,
                                T* c, T* y, T* ws, Geo g, int64_t t) {
  using A = typename Acc<T>::type;
  const int64_t H = g.H, GH = g.G * g.H, WH = g.W * g.H;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < g.B * H;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = e / H, j = e - b * H, row = t * g.B + b;
    T* wt = ws ? ws + row * WH : nullptr;
    if (len && t >= len[b]) {  // past the length: state kept, y and the workspace zero
      y[row * H + j] = from_acc<T>(A(0));
      if (wt)
        for (int64_t k = 0; k < g.W; ++k) wt[k * H + j] = from_acc<T>(A(0));
      continue;
    }
    const T* gxr = gx + row * GH;
    const T* ghr = gh + b * GH;
    auto pre = [&](int64_t k) { return to_acc<A>(gxr[k * H + j]) + to_acc<A>(ghr[k * H + j]); };
    if constexpr (kKind == kLstm) {
      const A ig = sigm(pre(0)), fg = sigm(pre(1)), gg = tanh_(pre(2)), og = sigm(pre(3));
      const A cn = fg * to_acc<A>(c[e]) + ig * gg;
      const A hn = og * tanh_(cn);
      c[e] = from_acc<T>(cn);
      h[e] = y[row * H + j] = from_acc<T>(hn);
      if (wt) {
        wt[j] = from_acc<T>(ig);
        wt[H + j] = from_acc<T>(fg);
        wt[2 * H + j] = from_acc<T>(gg);
        wt[3 * H + j] = from_acc<T>(og);
        wt[4 * H + j] = from_acc<T>(cn);
      }
    } else {
      const A rg = sigm(pre(0)), z = sigm(pre(1));
      const A hh = to_acc<A>(ghr[2 * H + j]);
      const A n = tanh_(to_acc<A>(gxr[2 * H + j]) + rg * hh);
      const A zs = att ? (A(1) - to_acc<A>(att[row])) * z : z;
      const A hn = (A(1) - zs) * n + zs * to_acc<A>(h[e]);
      h[e] = y[row * H + j] = from_acc<T>(hn);
      if (wt) {
        wt[j] = from_acc<T>(rg);
        wt[H + j] = from_acc<T>(z);
        wt[2 * H + j] = from_acc<T>(n);
        wt[3 * H + j] = from_acc<T>(hh);
      }
    }
  }
}

// GRU with the reset before the product, part 1: rh [B, H] = r * h from gh_rz [B, 2H].
template <class T>
__global__ void fwd_reset_kernel(const T* gx, const T* gh_rz, const int32_t* len, const T* h, T* rh,
                                 Geo g, int64_t t) {
  using A = typename Acc<T>::type;
  const int64_t H = g.H, GH = g.G * g.H;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < g.B * H;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = e / H, j = e - b * H, row = t * g.B + b;
    if (len && t >= len[b]) {
      rh[e] = from_acc<T>(A(0));
      continue;
    }
    const A rg = sigm(to_acc<A>(gx[row * GH + j]) + to_acc<A>(gh_rz[b * 2 * H + j]));
    rh[e] = from_acc<T>(rg * to_acc<A>(h[e]));
  }
}

// Part 2: gn [B, H] = (r*h) W_hn^T + b_hn; the gates, y, the workspace and the state.
template <class T>
__global__ void fwd_reset_gates_kernel(const T* gx, const T* gh_rz, const T* gn, const T* rh,
                                       const T* att, const int32_t* len, T* h, T* y, T* ws, Geo g,
                                       int64_t t) {
  using A = typename Acc<T>::type;
  const int64_t H = g.H, GH = g.G * g.H, WH = g.W * g.H;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < g.B * H;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = e / H, j = e - b * H, row = t * g.B + b;
    T* wt = ws ? ws + row * WH : nullptr;
    if (len && t >= len[b]) {
      y[row * H + j] = from_acc<T>(A(0));
      if (wt)
        for (int64_t k = 0; k < g.W; ++k) wt[k * H + j] = from_acc<T>(A(0));
      continue;
    }
    const T* gxr = gx + row * GH;
    const A rg = sigm(to_acc<A>(gxr[j]) + to_acc<A>(gh_rz[b * 2 * H + j]));
    const A z = sigm(to_acc<A>(gxr[H + j]) + to_acc<A>(gh_rz[b * 2 * H + H + j]));
    const A n = tanh_(to_acc<A>(gxr[2 * H + j]) + to_acc<A>(gn[e]));
    const A zs = att ? (A(1) - to_acc<A>(att[row])) * z : z;
    const A hn = (A(1) - zs) * n + zs * to_acc<A>(h[e]);
    h[e] = y[row * H + j] = from_acc<T>(hn);
    if (wt) {
      wt[j] = from_acc<T>(rg);
      wt[H + j] = from_acc<T>(z);
      wt[2 * H + j] = from_acc<T>(n);
      wt[3 * H + j] = rh[e];
    }
  }
}

// ---- backward --------------------------------------------------------------------------------

// Pointers of the backward step kernel.
template <class T>
struct BwdPtrs {
  const T *y, *ws, *dy, *h0, *c0, *att;
  const int32_t* len;
  const T* dh;  // [B, H]: dL/dh after step t
  T* dnext;     // [B, H]: the direct part of dL/dh_prev (inactive rows: dh itself)
  T* dc;        // [B, H] LSTM, in place
  T *dax, *dah, *dan, *hp, *rhp, *datt;
};

// One block per sequence b, threads over j. dax [T*B, G*H]; dah [T*B, G*H] (LSTM: == dax) or
// [T*B, 2H] (reset-first GRU, whose n part goes to dan [T*B, H] and multiplies rhp = r*h_prev).
template <class T, int kKind>
__global__ void bwd_step_kernel(BwdPtrs<T> p, Geo g, int64_t t, bool reverse) {
  using A = typename Acc<T>::type;
  __shared__ A scratch[kWarpSize];
  const int64_t H = g.H, GH = g.G * g.H, WH = g.W * g.H;
  const int64_t DH = kKind == kGruResetFirst ? 2 * H : GH;  // dah's width
  const int64_t b = blockIdx.x, row = t * g.B + b;
  const int64_t len = p.len ? int64_t(p.len[b]) : g.T;
  const bool active = t < len;
  const bool first = reverse ? t == len - 1 : t == 0;
  const int64_t prow = (reverse ? t + 1 : t - 1) * g.B + b;  // the previous step's row
  const T* wt = p.ws + row * WH;
  A dsum = 0;
  for (int64_t j = threadIdx.x; j < H; j += blockDim.x) {
    T* dx_ = p.dax + row * GH;
    T* dh_ = p.dah + row * DH;
    if (!active) {
      for (int64_t k = 0; k < g.G; ++k) dx_[k * H + j] = from_acc<T>(A(0));
      if constexpr (kKind != kLstm)
        for (int64_t k = 0; k < DH / H; ++k) dh_[k * H + j] = from_acc<T>(A(0));
      if constexpr (kKind == kGruResetFirst) {
        p.dan[row * H + j] = from_acc<T>(A(0));
        p.rhp[row * H + j] = from_acc<T>(A(0));
      }
      p.hp[row * H + j] = from_acc<T>(A(0));
      p.dnext[b * H + j] = p.dh[b * H + j];
      continue;
    }
    const A dht = to_acc<A>(p.dh[b * H + j]) + (p.dy ? to_acc<A>(p.dy[row * H + j]) : A(0));
    const T hprev_t = first ? (p.h0 ? p.h0[b * H + j] : from_acc<T>(A(0))) : p.y[prow * H + j];
    p.hp[row * H + j] = hprev_t;
    if constexpr (kKind == kLstm) {
      const A ig = to_acc<A>(wt[j]), fg = to_acc<A>(wt[H + j]), gg = to_acc<A>(wt[2 * H + j]),
              og = to_acc<A>(wt[3 * H + j]), tc = tanh_(to_acc<A>(wt[4 * H + j]));
      const A cp = first ? (p.c0 ? to_acc<A>(p.c0[b * H + j]) : A(0))
                         : to_acc<A>(p.ws[prow * WH + 4 * H + j]);
      const A dct = to_acc<A>(p.dc[b * H + j]) + dht * og * (A(1) - tc * tc);
      dx_[j] = from_acc<T>(dct * gg * ig * (A(1) - ig));
      dx_[H + j] = from_acc<T>(dct * cp * fg * (A(1) - fg));
      dx_[2 * H + j] = from_acc<T>(dct * ig * (A(1) - gg * gg));
      dx_[3 * H + j] = from_acc<T>(dht * tc * og * (A(1) - og));
      p.dc[b * H + j] = from_acc<T>(dct * fg);
      p.dnext[b * H + j] = from_acc<T>(A(0));
    } else {
      const A rg = to_acc<A>(wt[j]), z = to_acc<A>(wt[H + j]), n = to_acc<A>(wt[2 * H + j]);
      const A at = p.att ? to_acc<A>(p.att[row]) : A(0);
      const A zs = p.att ? (A(1) - at) * z : z;
      const A dzs = dht * (to_acc<A>(hprev_t) - n);
      const A dz = p.att ? dzs * (A(1) - at) : dzs;
      dsum += dzs * z;
      const A dn = dht * (A(1) - zs) * (A(1) - n * n);
      const T daz = from_acc<T>(dz * z * (A(1) - z));
      dx_[H + j] = daz;
      dx_[2 * H + j] = from_acc<T>(dn);
      dh_[H + j] = daz;
      if constexpr (kKind == kGruResetFirst) {
        p.dan[row * H + j] = from_acc<T>(dn);
        p.rhp[row * H + j] = wt[3 * H + j];
      } else {
        const A hh = to_acc<A>(wt[3 * H + j]);
        const T dar = from_acc<T>(dn * hh * rg * (A(1) - rg));
        dx_[j] = dar;
        dh_[j] = dar;
        dh_[2 * H + j] = from_acc<T>(dn * rg);
      }
      p.dnext[b * H + j] = from_acc<T>(dht * zs);
    }
  }
  if (p.att) {  // AUGRU: datt[t, b] = -sum_j dL/dz'_j z_j (every thread reaches the reduction)
    const A s = block_sum(dsum, scratch);
    if (threadIdx.x == 0 && p.datt) p.datt[row] = from_acc<T>(active ? -s : A(0));
  }
}

// Reset-first GRU, after drh [B, H] = dan_t W_hn: the reset gate's gradient and r * drh into
// dnext.
template <class T>
__global__ void bwd_reset_kernel(const T* ws, const T* hp, const T* drh, const int32_t* len, T* dax,
                                 T* dah, T* dnext, Geo g, int64_t t) {
  using A = typename Acc<T>::type;
  const int64_t H = g.H, GH = g.G * g.H, WH = g.W * g.H;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < g.B * H;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = e / H, j = e - b * H, row = t * g.B + b;
    if (len && t >= len[b]) continue;
    const A rg = to_acc<A>(ws[row * WH + j]), d = to_acc<A>(drh[e]);
    const T dar = from_acc<T>(d * to_acc<A>(hp[row * H + j]) * rg * (A(1) - rg));
    dax[row * GH + j] = dar;
    dah[row * 2 * H + j] = dar;
    dnext[e] = from_acc<T>(to_acc<A>(dnext[e]) + d * rg);
  }
}

// out[j] += sum over the N rows of m [N, C] (one thread per column, rows in order).
template <class T>
__global__ void column_sum_add_kernel(const T* m, T* out, int64_t N, int64_t C) {
  using A = typename Acc<T>::type;
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= C) return;
  A s = 0;
  for (int64_t r = 0; r < N; ++r) s += to_acc<A>(m[r * C + j]);
  out[j] = from_acc<T>(to_acc<A>(out[j]) + s);
}

// ---- host side -------------------------------------------------------------------------------

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

template <class T>
void column_sum_add(const Tensor& m, const Tensor& out, Device dev) {
  if (!out.defined()) return;
  const int64_t N = m.size(0), C = m.size(1);
  AIM_LAUNCH(unsigned(ceil_div(C, kThreads)), kThreads, 0, stream_for(dev),
             column_sum_add_kernel<T>)
  (ptr<const T>(m), ptr<T>(out), N, C);
  AIM_CHECK_LAUNCH();
}

int kind_of(const RnnCell cell, bool lbr) {
  return cell == RnnCell::LSTM ? kLstm : lbr ? kGruLbr : kGruResetFirst;
}

// The host's lengths as a device array (or null: every length is T).
Tensor device_lengths(const Tensor& lengths, Device dev) {
  return lengths.defined() ? lengths.to(dev) : Tensor();
}

template <class T>
void fwd_fused(const RnnFwdArgs& a) {
  const Device dev = a.x.device();
  const DType dt = a.x.dtype();
  const Geo g{a.x.size(0), a.x.size(1), a.w_hh.size(1), rnn_gates(a.cell),
              rnn_workspace_width(a.cell)};
  const int64_t Tn = g.T, B = g.B, I = a.x.size(2), H = g.H, GH = g.G * H;
  const int kind = kind_of(a.cell, a.linear_before_reset);
  Tensor hcur = a.h0.defined() ? a.h0.clone() : Tensor::zeros({B, H}, dt, dev);
  Tensor ccur = a.cell != RnnCell::LSTM ? Tensor()
                : a.c0.defined()        ? a.c0.clone()
                                        : Tensor::zeros({B, H}, dt, dev);
  if (Tn > 0 && B > 0) {
    const Tensor lens = device_lengths(a.lengths, dev);
    const int32_t* len = ptr<const int32_t>(lens);
    Tensor gx = Tensor::empty({Tn * B, GH}, dt, dev);
    gemm(a.x.view({Tn * B, I}), false, a.w_ih, true, gx, 0.0f, a.b_ih);
    Tensor gh = Tensor::empty({B, kind == kGruResetFirst ? 2 * H : GH}, dt, dev);
    Tensor rh, gn;
    Tensor w_rz, w_n, b_rz, b_n;
    if (kind == kGruResetFirst) {
      rh = Tensor::empty({B, H}, dt, dev);
      gn = Tensor::empty({B, H}, dt, dev);
      w_rz = a.w_hh.slice(0, 0, 2 * H);
      w_n = a.w_hh.slice(0, 2 * H, 3 * H);
      if (a.b_hh.defined()) {
        b_rz = a.b_hh.slice(0, 0, 2 * H);
        b_n = a.b_hh.slice(0, 2 * H, 3 * H);
      }
    }
    const unsigned grid = grid_for(B * H, kThreads);
    const cudaStream_t st = stream_for(dev);
    T* h = ptr<T>(hcur);
    for (int64_t s = 0; s < Tn; ++s) {
      const int64_t t = a.reverse ? Tn - 1 - s : s;
      if (kind == kGruResetFirst) {
        gemm(hcur, false, w_rz, true, gh, 0.0f, b_rz);
        AIM_LAUNCH(grid, kThreads, 0, st, fwd_reset_kernel<T>)
        (ptr<const T>(gx), ptr<const T>(gh), len, h, ptr<T>(rh), g, t);
        AIM_CHECK_LAUNCH();
        gemm(rh, false, w_n, true, gn, 0.0f, b_n);
        AIM_LAUNCH(grid, kThreads, 0, st, fwd_reset_gates_kernel<T>)
        (ptr<const T>(gx), ptr<const T>(gh), ptr<const T>(gn), ptr<const T>(rh),
         ptr<const T>(a.att), len, h, ptr<T>(a.y), ptr<T>(a.workspace), g, t);
        AIM_CHECK_LAUNCH();
      } else {
        gemm(hcur, false, a.w_hh, true, gh, 0.0f, a.b_hh);
        if (kind == kLstm) {
          AIM_LAUNCH(grid, kThreads, 0, st, fwd_step_kernel<T, kLstm>)
          (ptr<const T>(gx), ptr<const T>(gh), nullptr, len, h, ptr<T>(ccur), ptr<T>(a.y),
           ptr<T>(a.workspace), g, t);
        } else {
          AIM_LAUNCH(grid, kThreads, 0, st, fwd_step_kernel<T, kGruLbr>)
          (ptr<const T>(gx), ptr<const T>(gh), ptr<const T>(a.att), len, h, nullptr, ptr<T>(a.y),
           ptr<T>(a.workspace), g, t);
        }
        AIM_CHECK_LAUNCH();
      }
    }
  }
  if (a.hn.defined()) a.hn.copy_(hcur);
  if (a.cn.defined()) a.cn.copy_(ccur);
}

template <class T>
void bwd_fused(const RnnBwdArgs& a) {
  const Device dev = a.x.device();
  const DType dt = a.x.dtype();
  const Geo g{a.x.size(0), a.x.size(1), a.w_hh.size(1), rnn_gates(a.cell),
              rnn_workspace_width(a.cell)};
  const int64_t Tn = g.T, B = g.B, I = a.x.size(2), H = g.H, GH = g.G * H;
  const int kind = kind_of(a.cell, a.linear_before_reset);
  const bool lstm = kind == kLstm, rfirst = kind == kGruResetFirst;
  Tensor dh = a.dhn.defined() ? a.dhn.clone() : Tensor::zeros({B, H}, dt, dev);
  Tensor dc = !lstm ? Tensor() : a.dcn.defined() ? a.dcn.clone() : Tensor::zeros({B, H}, dt, dev);
  if (Tn == 0 || B == 0) {
    if (a.dh0.defined()) a.dh0.copy_(dh);
    if (a.dc0.defined()) a.dc0.copy_(dc);
    return;
  }
  const Tensor lens = device_lengths(a.lengths, dev);
  const int64_t N = Tn * B;
  Tensor dax = Tensor::empty({N, GH}, dt, dev);
  Tensor dah = lstm ? dax : Tensor::empty({N, rfirst ? 2 * H : GH}, dt, dev);
  Tensor dan = rfirst ? Tensor::empty({N, H}, dt, dev) : Tensor();
  Tensor rhp = rfirst ? Tensor::empty({N, H}, dt, dev) : Tensor();
  Tensor hp = Tensor::empty({N, H}, dt, dev);
  Tensor dnext = Tensor::empty({B, H}, dt, dev);
  Tensor drh = rfirst ? Tensor::empty({B, H}, dt, dev) : Tensor();
  Tensor w_rz, w_n;
  if (rfirst) {
    w_rz = a.w_hh.slice(0, 0, 2 * H);
    w_n = a.w_hh.slice(0, 2 * H, 3 * H);
  }
  BwdPtrs<T> p;
  p.y = ptr<const T>(a.y);
  p.ws = ptr<const T>(a.workspace);
  p.dy = ptr<const T>(a.dy);
  p.h0 = ptr<const T>(a.h0);
  p.c0 = ptr<const T>(a.c0);
  p.att = ptr<const T>(a.att);
  p.len = ptr<const int32_t>(lens);
  p.dc = ptr<T>(dc);
  p.dax = ptr<T>(dax);
  p.dah = ptr<T>(dah);
  p.dan = ptr<T>(dan);
  p.hp = ptr<T>(hp);
  p.rhp = ptr<T>(rhp);
  p.datt = ptr<T>(a.datt);
  const cudaStream_t st = stream_for(dev);
  // Enough threads for H (a multiple of the warp size, for block_sum), at most kThreads.
  const int block = int(std::min<int64_t>(kThreads, ceil_div(H, kWarpSize) * kWarpSize));
  for (int64_t s = Tn - 1; s >= 0; --s) {
    const int64_t t = a.reverse ? Tn - 1 - s : s;
    p.dh = ptr<const T>(dh);
    p.dnext = ptr<T>(dnext);
    if (lstm) {
      AIM_LAUNCH(unsigned(B), block, 0, st, bwd_step_kernel<T, kLstm>)(p, g, t, a.reverse);
    } else if (rfirst) {
      AIM_LAUNCH(unsigned(B), block, 0, st, bwd_step_kernel<T, kGruResetFirst>)
      (p, g, t, a.reverse);
    } else {
      AIM_LAUNCH(unsigned(B), block, 0, st, bwd_step_kernel<T, kGruLbr>)(p, g, t, a.reverse);
    }
    AIM_CHECK_LAUNCH();
    if (rfirst) {
      gemm(dan.slice(0, t * B, (t + 1) * B), false, w_n, false, drh, 0.0f);
      AIM_LAUNCH(grid_for(B * H, kThreads), kThreads, 0, st, bwd_reset_kernel<T>)
      (p.ws, ptr<const T>(hp), ptr<const T>(drh), p.len, p.dax, p.dah, p.dnext, g, t);
      AIM_CHECK_LAUNCH();
    }
    gemm(dah.slice(0, t * B, (t + 1) * B), false, rfirst ? w_rz : a.w_hh, false, dnext, 1.0f);
    std::swap(dh, dnext);
  }
  if (a.dx.defined()) gemm(dax, false, a.w_ih, false, a.dx.view({N, I}), 0.0f);
  if (a.dw_ih.defined()) gemm(dax, true, a.x.view({N, I}), false, a.dw_ih, 1.0f);
  if (a.dw_hh.defined()) {
    if (rfirst) {
      gemm(dah, true, hp, false, a.dw_hh.slice(0, 0, 2 * H), 1.0f);
      gemm(dan, true, rhp, false, a.dw_hh.slice(0, 2 * H, 3 * H), 1.0f);
    } else {
      gemm(dah, true, hp, false, a.dw_hh, 1.0f);
    }
  }
  column_sum_add<T>(dax, a.db_ih, dev);
  if (rfirst) {
    if (a.db_hh.defined()) {
      column_sum_add<T>(dah, a.db_hh.slice(0, 0, 2 * H), dev);
      column_sum_add<T>(dan, a.db_hh.slice(0, 2 * H, 3 * H), dev);
    }
  } else {
    column_sum_add<T>(dah, a.db_hh, dev);
  }
  if (a.dh0.defined()) a.dh0.copy_(dh);
  if (a.dc0.defined()) a.dc0.copy_(dc);
}

void rnn_fwd_cuda_fused(const RnnFwdArgs& a) {
  check_rnn_fwd_args(a);
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.x.dtype(), T, { fwd_fused<T>(a); });
}
void rnn_bwd_cuda_fused(const RnnBwdArgs& a) {
  check_rnn_bwd_args(a);
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.x.dtype(), T, { bwd_fused<T>(a); });
}

const std::vector<DType> kFloatTypes = {DType::f32, DType::f64, DType::f16, DType::bf16};

}  // namespace

void register_rnn_cuda(Registry& r) {
  auto& f = r.op<RnnFwdArgs>("rnn_fwd");
  f.add({"cuda.fused", AIM_CUDA_BACKEND, Provider::Own, rnn_fwd_cuda_fused, kFloatTypes});
  f.set_default(AIM_CUDA_BACKEND, "cuda.fused");
  auto& b = r.op<RnnBwdArgs>("rnn_bwd");
  b.add({"cuda.fused", AIM_CUDA_BACKEND, Provider::Own, rnn_bwd_cuda_fused, kFloatTypes});
  b.set_default(AIM_CUDA_BACKEND, "cuda.fused");
}

}  // namespace aim::kernels::AIM_CUDA_NS
