// Own CUDA variants of the CTC ops (math, layout, conventions: kernels/loss/CTC.md). All are
// "cuda.batch": one thread block per sample, so the recurrences over time need only
// __syncthreads, never a grid-wide barrier. The host's lengths are turned into a plan
// [input lengths, target lengths, target offsets] (3*B i64) and copied to the device once per
// call (a small explicit copy; under the emulator the plan stays on the host).
//
// ctc_fwd / cuda.batch: threads over the sample's extended-label positions s (grid-stride inside
//   the block: any S). The alpha row of the previous step lives in shared memory (two rows,
//   ping-pong, one barrier per step); each step reads T*L emissions gathered by label and writes
//   its row of log_alpha (the -inf padding too). Thread 0 turns the last row into the loss;
//   mean/sum: per-sample values go to a [B] buffer that one final block sums in a fixed order
//   (deterministic, no atomics). Bound: T dependent steps of ~L log-sum-exps -> latency bound
//   (CRNN: 25 steps x 21 positions); the batch fills the GPU with B blocks. Limits: shared memory
//   2*L accumulators + L ints (L = 2S+1 <= ~4K for f32), float math (double for f64).
// ctc_bwd / cuda.batch: same mapping, beta in shared memory walked from the sample's last step
//   down to 0. Per step: beta row and the occupancies exp(alpha + beta - log_probs + nll) into
//   shared memory (alpha read from log_alpha); threads over C write exp(log_probs) * scale into
//   the gradient row; after a barrier, the first position of each distinct label (every even s
//   for the blank) sums the occupancies of its label in s order (linked by a next-same-label
//   index built once per sample) and overwrites that class's gradient. Deterministic. Two
//   barriers per step; traffic: the gradient [T, B, C] written once, log_alpha read once.
// Both check the used targets on the device (0 <= v < C, v != blank; a bad one is never used as
//   an address: it is read as the blank): it is recorded in the device's error record
//   (kernels/error_flag.h), and the next check_device_errors throws the CPU's error naming the
//   sample, position and value. Nothing is read back here (no host synchronisation).
// ctc_greedy_decode / cuda.batch: one 128-thread block per sample; each warp takes time steps
//   t = warp, warp + 4, ... and reduces the argmax over C with shuffles (first maximum wins, as
//   cpu.ref); thread 0 then merges/drops blanks over the sample's steps in order. Bandwidth bound
//   on reading log_probs once.
// ctc_beam_decode / cuda.batch: one block per sample, "simple and correct" rather than fast.
//   Beams (prefix labels, length, log p_blank, log p_label) and the W*C candidates of a step live
//   in a global workspace. Per step: threads over beams find each beam's parent (the beam equal to
//   it without its last label, O(W^2 T)) and mark which extensions are already beams; threads
//   over candidates score them exactly as cpu.ref (same enumeration: beams, then extensions of
//   beam j by class c); each candidate's rank is the number of candidates that beat it (higher
//   total, ties to the lower index: cpu.ref's stable sort), and the first W ranks are written to
//   the next beam buffer. O((W*C)^2) comparisons per step: fine for CRNN (W <= 100, C = 37 at a
//   few ms), too slow for very large W*C (a block-wide sort would be the next step).
#include <algorithm>
#include <limits>

#include "kernels/cuda_common.h"
#include "kernels/error_flag.cuh"
#include "kernels/loss/ctc.h"

namespace aim::kernels::AIM_CUDA_NS {
namespace {

constexpr int kMaxThreads = 256;
constexpr int kGreedyThreads = 128;
constexpr int kFinalThreads = 256;
constexpr int64_t kSharedLimit = 48 * 1024;

template <class A>
__device__ __forceinline__ A lse2(A a, A b) {
  const A m = a > b ? a : b;
  if (m == neg_inf<A>()) return m;
  return m + log_a(exp_a(a - m) + exp_a(b - m));
}
template <class A>
__device__ __forceinline__ A lse3(A a, A b, A c) {
  A m = a > b ? a : b;
  m = m > c ? m : c;
  if (m == neg_inf<A>()) return m;
  return m + log_a(exp_a(a - m) + exp_a(b - m) + exp_a(c - m));
}

// Plan on the device: il [B], tl [B], off [B].
struct Geo {
  int64_t T, B, C, L, blank;
};

// Fills lab[0, Lb) with the sample's extended labels; a bad target is recorded (op, sample b,
// position in the sample) and replaced by the blank so it is never an address.
template <class I>
__device__ void load_labels(const I* tg, int64_t off, int64_t Lb, const Geo& g, int* lab,
                            DeviceErrorRecord* err, DeviceErrorOp op, int64_t b) {
  for (int64_t s = threadIdx.x; s < Lb; s += blockDim.x) {
    int v = int(g.blank);
    if (s % 2 == 1) {
      const int64_t pos = off + s / 2;
      const int64_t x = int64_t(tg[pos]);
      if (x < 0 || x >= g.C || x == g.blank)
        record_device_error(err, op, s / 2, b, x, g.C, g.blank);
      else
        v = int(x);
    }
    lab[s] = v;
  }
}

// ---- ctc_fwd ----------------------------------------------------------------------------------

template <class T, class I>
__global__ void fwd_kernel(const T* lp, const I* tg, const int64_t* plan, Geo g,
                           typename Acc<T>::type* la, typename Acc<T>::type* loss_none,
                           typename Acc<T>::type* per_sample, int reduction, bool zero_infinity,
                           DeviceErrorRecord* err) {
  using A = typename Acc<T>::type;
  AIM_DYNAMIC_SHARED(A, rows);  // [2, L] alpha rows, then [L] labels (ints)
  int* lab = reinterpret_cast<int*>(rows + 2 * g.L);
  const int64_t b = blockIdx.x, il = plan[b], tl = plan[g.B + b], off = plan[2 * g.B + b];
  const int64_t Lb = 2 * tl + 1;
  load_labels(tg, off, Lb, g, lab, err, DeviceErrorOp::ctc_fwd, b);
  A* la_b = la + b * g.T * g.L;
  __syncthreads();
  A* prev = rows;
  A* cur = rows + g.L;
  for (int64_t t = 0; t < il; ++t) {
    const T* x = lp + (t * g.B + b) * g.C;
    for (int64_t s = threadIdx.x; s < g.L; s += blockDim.x) {
      A v = neg_inf<A>();
      if (s < Lb) {
        const A e = to_acc<A>(x[lab[s]]);
        if (t == 0) {
          v = s < 2 ? e : neg_inf<A>();
        } else {
          const A a1 = s >= 1 ? prev[s - 1] : neg_inf<A>();
          const A a2 =
              s >= 2 && lab[s] != g.blank && lab[s] != lab[s - 2] ? prev[s - 2] : neg_inf<A>();
          const A in = lse3(prev[s], a1, a2);
          v = in == neg_inf<A>() ? in : in + e;
        }
        cur[s] = v;
      }
      la_b[t * g.L + s] = v;
    }
    __syncthreads();
    A* tmp = prev;
    prev = cur;
    cur = tmp;
  }
  for (int64_t i = il * g.L + threadIdx.x; i < g.T * g.L; i += blockDim.x) la_b[i] = neg_inf<A>();
  if (threadIdx.x == 0) {
    A nll;
    if (il == 0)
      nll = Lb == 1 ? A(0) : A(INFINITY);
    else
      nll = -lse2(prev[Lb - 1], Lb > 1 ? prev[Lb - 2] : neg_inf<A>());
    if (zero_infinity && nll == A(INFINITY)) nll = 0;
    if (reduction == int(Reduction::none))
      loss_none[b] = nll;
    else
      per_sample[b] = reduction == int(Reduction::mean) ? nll / A(tl > 1 ? tl : 1) : nll;
  }
}

// out[0] = sum(vals) (sum) or sum(vals) / n (mean); one block, fixed order.
template <class A>
__global__ void finalize_kernel(const A* vals, int64_t n, bool mean, A* out) {
  __shared__ A scratch[kWarpSize];
  A s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += vals[i];
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) out[0] = mean ? s / A(n) : s;
}

// ---- ctc_bwd ----------------------------------------------------------------------------------

template <class T, class I>
__global__ void bwd_kernel(const T* lp, const I* tg, const int64_t* plan, Geo g,
                           const typename Acc<T>::type* la, const typename Acc<T>::type* dloss,
                           T* grad, int reduction, DeviceErrorRecord* err) {
  using A = typename Acc<T>::type;
  AIM_DYNAMIC_SHARED(A, rows);  // [2, L] beta rows, [L] occupancies, then 3 x [L] ints
  A* occ = rows + 2 * g.L;
  int* lab = reinterpret_cast<int*>(occ + g.L);
  int* nxt = lab + g.L;   // next position with the same label, or -1
  int* head = nxt + g.L;  // 1: the first position of its label
  const int64_t b = blockIdx.x, il = plan[b], tl = plan[g.B + b], off = plan[2 * g.B + b];
  const int64_t Lb = 2 * tl + 1;
  load_labels(tg, off, Lb, g, lab, err, DeviceErrorOp::ctc_bwd, b);
  const A* la_b = la + b * g.T * g.L;
  A nll;  // every thread computes it: the branch below is uniform
  if (il == 0) {
    nll = Lb == 1 ? A(0) : A(INFINITY);
  } else {
    const A* last = la_b + (il - 1) * g.L;
    nll = -lse2(last[Lb - 1], Lb > 1 ? last[Lb - 2] : neg_inf<A>());
  }
  A scale = reduction == int(Reduction::none) ? dloss[b] : dloss[0];
  if (reduction == int(Reduction::mean)) scale = scale / A(g.B) / A(tl > 1 ? tl : 1);
  // Infeasible (nll = inf): gradient 0 with or without zero_infinity (CTC.md).
  const int64_t t_zero = nll < A(INFINITY) ? il : 0;
  for (int64_t i = t_zero * g.C + threadIdx.x; i < g.T * g.C; i += blockDim.x) {
    const int64_t t = i / g.C, c = i - t * g.C;
    grad[(t * g.B + b) * g.C + c] = from_acc<T>(A(0));
  }
  if (t_zero == 0) return;
  __syncthreads();  // labels complete
  for (int64_t s = threadIdx.x; s < Lb; s += blockDim.x) {
    if (s % 2 == 0) {
      head[s] = s == 0;
      nxt[s] = s + 2 < Lb ? int(s + 2) : -1;
    } else {
      int h = 1, n = -1;
      for (int64_t r = 1; r < s && h; r += 2) h = lab[r] != lab[s];
      for (int64_t r = s + 2; r < Lb && n < 0; r += 2)
        if (lab[r] == lab[s]) n = int(r);
      head[s] = h;
      nxt[s] = n;
    }
  }
  A* next = rows;
  A* cur = rows + g.L;
  for (int64_t t = il - 1; t >= 0; --t) {
    const T* x = lp + (t * g.B + b) * g.C;
    T* gr = grad + (t * g.B + b) * g.C;
    const A* arow = la_b + t * g.L;
    for (int64_t s = threadIdx.x; s < Lb; s += blockDim.x) {
      const A e = to_acc<A>(x[lab[s]]);
      A v;
      if (t == il - 1) {
        v = s >= Lb - 2 ? e : neg_inf<A>();
      } else {
        const A b1 = s + 1 < Lb ? next[s + 1] : neg_inf<A>();
        const A b2 = s + 2 < Lb && lab[s + 2] != g.blank && lab[s + 2] != lab[s] ? next[s + 2]
                                                                                 : neg_inf<A>();
        const A in = lse3(next[s], b1, b2);
        v = in == neg_inf<A>() ? in : in + e;
      }
      cur[s] = v;
      const A ab = arow[s] + v;
      occ[s] = ab == neg_inf<A>() ? A(0) : exp_a(ab - e + nll);
    }
    for (int64_t c = threadIdx.x; c < g.C; c += blockDim.x)
      gr[c] = from_acc<T>(exp_a(to_acc<A>(x[c])) * scale);
    __syncthreads();
    for (int64_t s = threadIdx.x; s < Lb; s += blockDim.x) {
      if (!head[s]) continue;
      A sum = 0;
      for (int r = int(s); r >= 0; r = nxt[r]) sum += occ[r];
      const int c = lab[s];
      gr[c] = from_acc<T>((exp_a(to_acc<A>(x[c])) - sum) * scale);
    }
    __syncthreads();
    A* tmp = next;
    next = cur;
    cur = tmp;
  }
}

// ---- launchers: plan -------------------------------------------------------------------------

Tensor device_plan(const CtcPlan& p, Device d) {
  std::vector<int64_t> v;
  v.insert(v.end(), p.input_len.begin(), p.input_len.end());
  v.insert(v.end(), p.target_len.begin(), p.target_len.end());
  v.insert(v.end(), p.target_off.begin(), p.target_off.end());
  return Tensor::from_vector(v, {3 * p.B}).to(d);
}

int block_for(int64_t n) {
  const int64_t w = ceil_div(n < 1 ? 1 : n, kWarpSize) * kWarpSize;
  return int(w < kMaxThreads ? w : kMaxThreads);
}

template <class A>
int64_t fwd_smem(int64_t L) {
  return 2 * L * int64_t(sizeof(A)) + L * int64_t(sizeof(int));
}
template <class A>
int64_t bwd_smem(int64_t L) {
  return 3 * L * int64_t(sizeof(A)) + 3 * L * int64_t(sizeof(int));
}
int64_t acc_size(DType t) { return t == DType::f64 ? 8 : 4; }

std::string supports_fwd(const CtcFwdArgs& a) {
  const int64_t L = a.log_alpha.defined() && a.log_alpha.dim() == 3 ? a.log_alpha.size(2) : 1;
  const int64_t need = 2 * L * acc_size(a.dtype()) + 4 * L;
  if (need > kSharedLimit)
    return str("keeps two alpha rows in shared memory: needs ", need, " bytes for L = 2S+1 = ", L,
               ", more than ", kSharedLimit);
  return "";
}
std::string supports_bwd(const CtcBwdArgs& a) {
  const int64_t L = a.log_alpha.defined() && a.log_alpha.dim() == 3 ? a.log_alpha.size(2) : 1;
  const int64_t need = 3 * L * acc_size(a.dtype()) + 12 * L;
  if (need > kSharedLimit)
    return str("keeps beta rows and occupancies in shared memory: needs ", need,
               " bytes for L = 2S+1 = ", L, ", more than ", kSharedLimit);
  return "";
}

void ctc_fwd_cuda_batch(const CtcFwdArgs& a) {
  const CtcPlan p = check_ctc_fwd_args(a, /*check_labels=*/false);  // checked on the device
  const Device dev = a.device();
  const Tensor plan = device_plan(p, dev);
  DeviceErrorRecord* err = device_error_record(dev);
  const Geo g{p.T, p.B, p.C, p.L, a.blank};
  const cudaStream_t st = stream_for(dev);
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.log_probs.dtype(), T, {
    using A = typename Acc<T>::type;
    const Tensor per =
        a.reduction == Reduction::none ? Tensor() : Tensor::empty({p.B}, a.loss.dtype(), dev);
    AIM_DISPATCH_INDEX_TYPES(a.targets.dtype(), I, {
      AIM_LAUNCH(unsigned(p.B), block_for(p.L), size_t(fwd_smem<A>(p.L)), st, fwd_kernel<T, I>)
      (static_cast<const T*>(a.log_probs.raw_data()), a.targets.data<I>(), plan.data<int64_t>(), g,
       a.log_alpha.data<A>(), a.reduction == Reduction::none ? a.loss.data<A>() : nullptr,
       per.defined() ? per.data<A>() : nullptr, int(a.reduction), a.zero_infinity, err);
      AIM_CHECK_LAUNCH();
    });
    if (per.defined()) {
      AIM_LAUNCH(1, kFinalThreads, 0, st, finalize_kernel<A>)
      (per.data<A>(), p.B, a.reduction == Reduction::mean, a.loss.data<A>());
      AIM_CHECK_LAUNCH();
    }
  });
}

void ctc_bwd_cuda_batch(const CtcBwdArgs& a) {
  const CtcPlan p = check_ctc_bwd_args(a, /*check_labels=*/false);  // checked on the device
  const Device dev = a.device();
  const Tensor plan = device_plan(p, dev);
  DeviceErrorRecord* err = device_error_record(dev);
  const Geo g{p.T, p.B, p.C, p.L, a.blank};
  const cudaStream_t st = stream_for(dev);
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.log_probs.dtype(), T, {
    using A = typename Acc<T>::type;
    AIM_DISPATCH_INDEX_TYPES(a.targets.dtype(), I, {
      AIM_LAUNCH(unsigned(p.B), block_for(std::max(p.L, p.C)), size_t(bwd_smem<A>(p.L)), st,
                 bwd_kernel<T, I>)
      (static_cast<const T*>(a.log_probs.raw_data()), a.targets.data<I>(), plan.data<int64_t>(), g,
       a.log_alpha.data<A>(), a.dloss.data<A>(), static_cast<T*>(a.dlog_probs.raw_data()),
       int(a.reduction), err);
      AIM_CHECK_LAUNCH();
    });
  });
}

// ---- ctc_greedy_decode ------------------------------------------------------------------------

template <class T>
__global__ void greedy_kernel(const T* lp, const int64_t* il_dev, Geo g, bool merge,
                              int64_t* labels, int64_t* lengths, typename Acc<T>::type* log_prob) {
  using A = typename Acc<T>::type;
  AIM_DYNAMIC_SHARED(A, best_v);  // [T] max per step, then [T] argmax (ints)
  int* best_c = reinterpret_cast<int*>(best_v + g.T);
  const int64_t b = blockIdx.x, il = il_dev[b];
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  for (int64_t t = warp; t < il; t += warps) {  // whole warps take a step: shuffles converge
    const T* x = lp + (t * g.B + b) * g.C;
    A bv = neg_inf<A>();
    int bi = -1;
    for (int64_t c = lane; c < g.C; c += kWarpSize) {
      const A v = to_acc<A>(x[c]);
      if (bi < 0 || v > bv) bv = v, bi = int(c);
    }
    for (int o = kWarpSize / 2; o > 0; o /= 2) {
      const A ov = __shfl_xor_sync(kFullMask, bv, o);
      const int oi = __shfl_xor_sync(kFullMask, bi, o);
      if (oi >= 0 && (bi < 0 || ov > bv || (ov == bv && oi < bi))) bv = ov, bi = oi;
    }
    if (lane == 0) best_v[t] = bv, best_c[t] = bi;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  int64_t n = 0;
  int prev = -1;
  A sum = 0;
  int64_t* row = labels + b * g.T;
  for (int64_t t = 0; t < il; ++t) {
    sum += best_v[t];
    const int c = best_c[t];
    if (c != g.blank && !(merge && c == prev)) row[n++] = c;
    prev = c;
  }
  for (int64_t i = n; i < g.T; ++i) row[i] = -1;
  lengths[b] = n;
  if (log_prob) log_prob[b] = sum;
}

void ctc_greedy_cuda_batch(const CtcGreedyDecodeArgs& a) {
  const CtcPlan p = check_ctc_greedy_args(a);
  const Device dev = a.device();
  const Tensor il = Tensor::from_vector(p.input_len, {p.B}).to(dev);
  const Geo g{p.T, p.B, p.C, 1, a.blank};
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.log_probs.dtype(), T, {
    using A = typename Acc<T>::type;
    AIM_LAUNCH(unsigned(p.B), kGreedyThreads, size_t(p.T * (int64_t(sizeof(A)) + 4)),
               stream_for(dev), greedy_kernel<T>)
    (static_cast<const T*>(a.log_probs.raw_data()), il.data<int64_t>(), g, a.merge_repeated,
     a.labels.data<int64_t>(), a.lengths.data<int64_t>(),
     a.log_prob.defined() ? a.log_prob.data<A>() : nullptr);
    AIM_CHECK_LAUNCH();
  });
}

std::string supports_greedy(const CtcGreedyDecodeArgs& a) {
  const int64_t T = a.log_probs.defined() && a.log_probs.dim() == 3 ? a.log_probs.size(0) : 0;
  const int64_t need = T * (acc_size(a.dtype()) + 4);
  if (need > kSharedLimit)
    return str("keeps the per-step argmax in shared memory: needs ", need, " bytes for T = ", T,
               ", more than ", kSharedLimit);
  return "";
}

// ---- ctc_beam_decode --------------------------------------------------------------------------

// Per-sample workspace views (sample b's slice of each buffer).
template <class A>
struct BeamWs {
  int* pref;     // [2, W, T] prefix labels of the two beam buffers
  int* plen;     // [2, W]
  A* score;      // [2, 2, W]: (buffer, {log p_blank, log p_label}, beam)
  A* cand;       // [3, K]: log p_blank, log p_label, total
  int* parent;   // [W]
  int* is_beam;  // [W, C]: extension (j, c) is already a beam
  int* valid;    // [K]
};

template <class T>
__global__ void beam_kernel(const T* lp, const int64_t* il_dev, Geo g, int64_t W, bool merge,
                            int* pref_all, int* plen_all, typename Acc<T>::type* score_all,
                            typename Acc<T>::type* cand_all, int* misc_all, int64_t* labels,
                            int64_t* lengths, typename Acc<T>::type* log_prob) {
  using A = typename Acc<T>::type;
  __shared__ int nb_s;
  __shared__ int scratch[kWarpSize];
  const int64_t b = blockIdx.x, il = il_dev[b], C = g.C, Tn = g.T, K = W * C;
  BeamWs<A> w;
  w.pref = pref_all + b * 2 * W * Tn;
  w.plen = plen_all + b * 2 * W;
  w.score = score_all + b * 4 * W;
  w.cand = cand_all + b * 3 * K;
  w.parent = misc_all + b * (W + W * C + K);
  w.is_beam = w.parent + W;
  w.valid = w.is_beam + W * C;
  if (threadIdx.x == 0) {
    w.plen[0] = 0;
    w.score[0] = 0;             // buffer 0, p_blank, beam 0: the empty prefix, probability 1
    w.score[W] = neg_inf<A>();  // buffer 0, p_label
    nb_s = 1;
  }
  __syncthreads();
  int cur = 0;
  for (int64_t t = 0; t < il; ++t) {
    const int64_t nb = nb_s;
    const T* x = lp + (t * g.B + b) * C;
    const int* P = w.pref + cur * W * Tn;
    const int* PL = w.plen + cur * W;
    const A* PB = w.score + cur * 2 * W;
    const A* PNB = PB + W;
    for (int64_t i = threadIdx.x; i < W * C; i += blockDim.x) w.is_beam[i] = 0;
    for (int64_t i = threadIdx.x; i < nb; i += blockDim.x) {
      int par = -1;
      const int n = PL[i];
      for (int64_t j = 0; n > 0 && j < nb && par < 0; ++j) {
        if (PL[j] != n - 1) continue;
        bool eq = true;
        for (int k = 0; k < n - 1 && eq; ++k) eq = P[j * Tn + k] == P[i * Tn + k];
        if (eq) par = int(j);
      }
      w.parent[i] = par;
    }
    __syncthreads();
    for (int64_t i = threadIdx.x; i < nb; i += blockDim.x)
      if (w.parent[i] >= 0) w.is_beam[w.parent[i] * C + P[i * Tn + PL[i] - 1]] = 1;
    __syncthreads();
    int count = 0;
    for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
      int ok = 0;
      A npb = neg_inf<A>(), npnb = neg_inf<A>();
      if (k < W) {
        const int64_t i = k;
        if (i < nb) {
          ok = 1;
          npb = lse2(PB[i], PNB[i]) + to_acc<A>(x[g.blank]);
          if (PL[i] > 0) {
            const int last = P[i * Tn + PL[i] - 1];
            const A yl = to_acc<A>(x[last]);
            npnb = PNB[i] + yl;
            const int j = w.parent[i];
            if (j >= 0) {
              const A from =
                  PL[j] > 0 && P[j * Tn + PL[j] - 1] == last ? PB[j] : lse2(PB[j], PNB[j]);
              npnb = lse2(npnb, from + yl);
            }
          }
        }
      } else {
        const int64_t e = k - W, j = e / (C - 1), ci = e - j * (C - 1);
        const int64_t c = ci < g.blank ? ci : ci + 1;
        if (j < nb && !w.is_beam[j * C + c]) {
          ok = 1;
          const A from = PL[j] > 0 && P[j * Tn + PL[j] - 1] == c ? PB[j] : lse2(PB[j], PNB[j]);
          npnb = from + to_acc<A>(x[c]);
        }
      }
      w.cand[k] = npb;
      w.cand[K + k] = npnb;
      w.cand[2 * K + k] = lse2(npb, npnb);
      w.valid[k] = ok;
      count += ok;
    }
    count = block_sum(count, scratch);  // its barriers also publish the candidates
    __syncthreads();
    const int nxt = 1 - cur;
    int* NP = w.pref + nxt * W * Tn;
    int* NPL = w.plen + nxt * W;
    A* NPB = w.score + nxt * 2 * W;
    for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
      if (!w.valid[k]) continue;
      const A tk = w.cand[2 * K + k];
      int64_t rank = 0;
      for (int64_t q = 0; q < K && rank < W; ++q) {
        const A tq = w.cand[2 * K + q];
        rank += w.valid[q] && (tq > tk || (tq == tk && q < k));
      }
      if (rank >= W) continue;
      const int64_t src = k < W ? k : (k - W) / (C - 1);
      const int n = PL[src];
      for (int i = 0; i < n; ++i) NP[rank * Tn + i] = P[src * Tn + i];
      if (k < W) {
        NPL[rank] = n;
      } else {
        const int64_t ci = (k - W) - src * (C - 1);
        NP[rank * Tn + n] = int(ci < g.blank ? ci : ci + 1);
        NPL[rank] = n + 1;
      }
      NPB[rank] = w.cand[k];
      NPB[W + rank] = w.cand[K + k];
    }
    if (threadIdx.x == 0) nb_s = int(count < W ? count : W);
    __syncthreads();
    cur = nxt;
  }
  if (threadIdx.x != 0) return;
  const int* best = w.pref + cur * W * Tn;
  const int n = w.plen[cur * W];
  int64_t* row = labels + b * Tn;
  int64_t m = 0;
  for (int i = 0; i < n; ++i)
    if (!merge || m == 0 || row[m - 1] != best[i]) row[m++] = best[i];
  for (int64_t i = m; i < Tn; ++i) row[i] = -1;
  lengths[b] = m;
  const A* sc = w.score + cur * 2 * W;
  log_prob[b] = lse2(sc[0], sc[W]);
}

void ctc_beam_cuda_batch(const CtcBeamDecodeArgs& a) {
  const CtcPlan p = check_ctc_beam_args(a);
  const Device dev = a.device();
  const int64_t W = a.beam_width, K = W * p.C, B = p.B;
  const Tensor il = Tensor::from_vector(p.input_len, {B}).to(dev);
  const Geo g{p.T, p.B, p.C, 1, a.blank};
  const DType ad = loss_dtype(a.dtype());
  const Tensor pref = Tensor::empty({B, 2, W, p.T}, DType::i32, dev);
  const Tensor plen = Tensor::empty({B, 2, W}, DType::i32, dev);
  const Tensor score = Tensor::empty({B, 2, 2, W}, ad, dev);
  const Tensor cand = Tensor::empty({B, 3, K}, ad, dev);
  const Tensor misc = Tensor::empty({B, W + W * p.C + K}, DType::i32, dev);
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.log_probs.dtype(), T, {
    using A = typename Acc<T>::type;
    AIM_LAUNCH(unsigned(B), block_for(K), 0, stream_for(dev), beam_kernel<T>)
    (static_cast<const T*>(a.log_probs.raw_data()), il.data<int64_t>(), g, W, a.merge_repeated,
     pref.data<int>(), plen.data<int>(), score.data<A>(), cand.data<A>(), misc.data<int>(),
     a.labels.data<int64_t>(), a.lengths.data<int64_t>(), a.log_prob.data<A>());
    AIM_CHECK_LAUNCH();
  });
}

std::string supports_beam(const CtcBeamDecodeArgs& a) {
  const int64_t C = a.log_probs.defined() && a.log_probs.dim() == 3 ? a.log_probs.size(2) : 0;
  if (a.beam_width * C > (int64_t(1) << 24))
    return str("ranks beam_width * C candidates by counting (O((W*C)^2) per step): ", a.beam_width,
               " x ", C, " is too many");
  return "";
}

const std::vector<DType> kFloatTypes = {DType::f32, DType::f64, DType::f16, DType::bf16};

}  // namespace

void register_ctc_cuda(Registry& r) {
  auto& f = r.op<CtcFwdArgs>("ctc_fwd");
  f.add({"cuda.batch", AIM_CUDA_BACKEND, Provider::Own, ctc_fwd_cuda_batch, kFloatTypes,
         supports_fwd});
  f.set_default(AIM_CUDA_BACKEND, "cuda.batch");
  auto& b = r.op<CtcBwdArgs>("ctc_bwd");
  b.add({"cuda.batch", AIM_CUDA_BACKEND, Provider::Own, ctc_bwd_cuda_batch, kFloatTypes,
         supports_bwd});
  b.set_default(AIM_CUDA_BACKEND, "cuda.batch");
  auto& g = r.op<CtcGreedyDecodeArgs>("ctc_greedy_decode");
  g.add({"cuda.batch", AIM_CUDA_BACKEND, Provider::Own, ctc_greedy_cuda_batch, kFloatTypes,
         supports_greedy});
  g.set_default(AIM_CUDA_BACKEND, "cuda.batch");
  auto& m = r.op<CtcBeamDecodeArgs>("ctc_beam_decode");
  m.add({"cuda.batch", AIM_CUDA_BACKEND, Provider::Own, ctc_beam_cuda_batch, kFloatTypes,
         supports_beam});
  m.set_default(AIM_CUDA_BACKEND, "cuda.batch");
}

}  // namespace aim::kernels::AIM_CUDA_NS
