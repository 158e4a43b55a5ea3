// cpu.flash: blocked attention with an online softmax; the [Tq, Tk] scores are never stored
// (README.md, "cpu.flash", has the derivation and the measured numbers).
//
// Forward: K^T of every head packed once per call (f32 or f64, the head dimension padded to 16).
// Work items (b, h, block of kBq = 64 queries) over OpenMP (dynamic: causal blocks differ in
// length). An item packs its queries once (times scale), then walks the key blocks of kBk = 64
// keys it can see: S = Q K^T (a 64 x 64 tile GEMM), adds the mask, updates the running row max m
// and sum l, rescales its output accumulator by exp(m_old - m_new), applies the dropout factors
// and adds P V (V in place when it has the packed layout, else packed). The end divides by l and
// writes o and lse = m + log l. Memory per thread: a few tiles of 64 x HS (~80 KiB at HS = 64 in
// f32), independent of T; the packed K^T is the size of k.
//
// Backward: work items are heads (b, h), or (head, range of key blocks) when there are fewer
// heads than 16 (a fixed split, whatever the team size: results do not depend on --threads). Per
// key block: K, K^T and V^T packed once; dK and dV accumulate in tiles; per query block: S = Q K^T
// and dP = dO V^T recomputed, p = exp(scale S + mask - lse), ds = p (z dP - D) with the dropout
// factor z and D = rowsum(dO o) precomputed per head; then dV += (z p)^T dO, dK += ds^T Q, dQ += ds
// K into a per-head accumulator (O(Tq HS) per thread; per (head, split) when the key blocks are
// split, summed afterwards in a fixed order).
//
// The tile GEMMs use an AVX-512 register-blocked micro-kernel (6 rows x up to 64 columns of f32,
// 32 of f64, 24 accumulators) when the CPU has AVX-512 (cpu_has_avx512()); otherwise plain loops
// the compiler vectorises; so do the f32 forward's softmax step (exp16: fast_expf's polynomial)
// and the f32 dropout factors (Philox on 16 counter blocks at once: the same numbers).
// exp: fast_expf (kernels/fast_math.h, ~2 ulp) in f32, std::exp in f64.
// 16-bit inputs are converted to f32 when packed; every output is rounded once.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/attention/attention_cpu.h"
#include "kernels/fast_math.h"
#include "kernels/fast_math_avx512.h"
#include "kernels/matmul/gemm_avx512.h"

namespace aim::kernels {
namespace {

constexpr int64_t kBq = 64;  // queries per block
constexpr int64_t kBk = 64;  // keys per block (a multiple of both vector widths)

template <class T>
using AccT = std::conditional_t<std::is_same_v<T, double>, double, float>;

// ---- tile GEMM ----------------------------------------------------------------------------------
// C[M, N] (row stride ldc) = (or +=) sum_{k < K} A(r, k) B[k, :], A(r, k) = a[r ars + k aks],
// B row-major with row stride ldb. N is a multiple of the vector width (16 f32, 8 f64).

template <class A>
void tile_gemm_loops(int64_t M, int64_t N, int64_t K, const A* a, int64_t ars, int64_t aks,
                     const A* b, int64_t ldb, A* c, int64_t ldc, bool accumulate) {
  for (int64_t r = 0; r < M; ++r) {
    A* cr = c + r * ldc;
    if (!accumulate) std::fill(cr, cr + N, A(0));
    for (int64_t k = 0; k < K; ++k) {
      const A av = a[r * ars + k * aks];
      const A* br = b + k * ldb;
#pragma omp simd
      for (int64_t n = 0; n < N; ++n) cr[n] += av * br[n];
    }
  }
}

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps() (`__m512 __Y = __Y;`), which
// -W(maybe-)uninitialized reports at every use (masked loads, reductions): a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,fma")

template <class A>
struct Vec;
template <>
struct Vec<float> {
  using V = __m512;
  static constexpr int kW = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
};
template <>
struct Vec<double> {
  using V = __m512d;
  static constexpr int kW = 8;
  static V zero() { return _mm512_setzero_pd(); }
  static V load(const double* p) { return _mm512_loadu_pd(p); }
  static void store(double* p, V v) { _mm512_storeu_pd(p, v); }
  static V set1(double x) { return _mm512_set1_pd(x); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_pd(a, b, c); }
};

constexpr int kMR = 6;  // micro-tile rows: 6 x 4 accumulators + 4 B vectors + 1 broadcast

// R rows x NV vectors of C in registers, one pass over k.
template <class A, int R, int NV>
void micro_tile(int64_t K, const A* a, int64_t ars, int64_t aks, const A* b, int64_t ldb, A* c,
                int64_t ldc, bool accumulate) {
  using X = Vec<A>;
  typename X::V acc[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      acc[r][v] = accumulate ? X::load(c + r * ldc + v * X::kW) : X::zero();
  }
  for (int64_t k = 0; k < K; ++k) {
    typename X::V bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = X::load(b + k * ldb + v * X::kW);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const typename X::V av = X::set1(a[r * ars + k * aks]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = X::fma(av, bv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) X::store(c + r * ldc + v * X::kW, acc[r][v]);
  }
}

// R rows, all N columns: groups of 4 vectors, then the 1-3 left.
template <class A, int R>
void micro_rows(int64_t N, int64_t K, const A* a, int64_t ars, int64_t aks, const A* b, int64_t ldb,
                A* c, int64_t ldc, bool accumulate) {
  constexpr int W = Vec<A>::kW;
  int64_t n0 = 0;
  for (; n0 + 4 * W <= N; n0 += 4 * W)
    micro_tile<A, R, 4>(K, a, ars, aks, b + n0, ldb, c + n0, ldc, accumulate);
  switch ((N - n0) / W) {
    case 1:
      micro_tile<A, R, 1>(K, a, ars, aks, b + n0, ldb, c + n0, ldc, accumulate);
      break;
    case 2:
      micro_tile<A, R, 2>(K, a, ars, aks, b + n0, ldb, c + n0, ldc, accumulate);
      break;
    case 3:
      micro_tile<A, R, 3>(K, a, ars, aks, b + n0, ldb, c + n0, ldc, accumulate);
      break;
    default:
      break;
  }
}

template <class A>
void tile_gemm_avx512_t(int64_t M, int64_t N, int64_t K, const A* a, int64_t ars, int64_t aks,
                        const A* b, int64_t ldb, A* c, int64_t ldc, bool accumulate) {
  int64_t r0 = 0;
  for (; r0 + kMR <= M; r0 += kMR)
    micro_rows<A, kMR>(N, K, a + r0 * ars, ars, aks, b, ldb, c + r0 * ldc, ldc, accumulate);
  const A* ar = a + r0 * ars;
  A* cr = c + r0 * ldc;
  switch (M - r0) {
    case 1:
      micro_rows<A, 1>(N, K, ar, ars, aks, b, ldb, cr, ldc, accumulate);
      break;
    case 2:
      micro_rows<A, 2>(N, K, ar, ars, aks, b, ldb, cr, ldc, accumulate);
      break;
    case 3:
      micro_rows<A, 3>(N, K, ar, ars, aks, b, ldb, cr, ldc, accumulate);
      break;
    case 4:
      micro_rows<A, 4>(N, K, ar, ars, aks, b, ldb, cr, ldc, accumulate);
      break;
    case 5:
      micro_rows<A, 5>(N, K, ar, ars, aks, b, ldb, cr, ldc, accumulate);
      break;
    default:
      break;
  }
}

void tile_gemm_avx512(int64_t M, int64_t N, int64_t K, const float* a, int64_t ars, int64_t aks,
                      const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  tile_gemm_avx512_t<float>(M, N, K, a, ars, aks, b, ldb, c, ldc, accumulate);
}
void tile_gemm_avx512(int64_t M, int64_t N, int64_t K, const double* a, int64_t ars, int64_t aks,
                      const double* b, int64_t ldb, double* c, int64_t ldc, bool accumulate) {
  tile_gemm_avx512_t<double>(M, N, K, a, ars, aks, b, ldb, c, ldc, accumulate);
}

using avx512::exp16;  // kernels/fast_math_avx512.h
using avx512::lanes_below;

// softmax_row (below) for f32 with AVX-512.
bool softmax_row_avx512(float* s, int64_t lim, float* m, float* l, float* alpha) {
  const __m512 ninf = _mm512_set1_ps(-INFINITY);
  __m512 vmx = ninf;
  for (int64_t c = 0; c < lim; c += 16)
    vmx = _mm512_max_ps(vmx, _mm512_mask_loadu_ps(ninf, lanes_below(c, lim), s + c));
  const float mx = _mm512_reduce_max_ps(vmx);
  const float mnew = *m > mx ? *m : mx;
  if (mnew == -INFINITY) {
    for (int64_t c = 0; c < kBk; c += 16) _mm512_storeu_ps(s + c, _mm512_setzero_ps());
    *alpha = 1.0f;
    return false;
  }
  *alpha = *m == -INFINITY ? 0.0f : _mm512_cvtss_f32(exp16(_mm512_set1_ps(*m - mnew)));
  const __m512 vm = _mm512_set1_ps(mnew);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t c = 0; c < kBk; c += 16) {
    const __mmask16 k = lanes_below(c, lim);
    const __m512 x = _mm512_mask_loadu_ps(ninf, k, s + c);
    const __mmask16 finite = _mm512_mask_cmp_ps_mask(k, x, ninf, _CMP_NEQ_OQ);
    const __m512 p = _mm512_maskz_mov_ps(finite, exp16(_mm512_sub_ps(x, vm)));
    _mm512_storeu_ps(s + c, p);
    sum = _mm512_add_ps(sum, p);
  }
  *l = *l * *alpha + _mm512_reduce_add_ps(sum);
  *m = mnew;
  return true;
}

// Philox-4x32-10 (tensor/philox.h's philox4x32) for 16 counter blocks at once: block t has the
// counter (lo[t], hi[t], 0, 0); w[0..3] receive the words x, y, z, w of every block.
__m512i mulhi_epu32(__m512i a, __m512i m) {
  const __m512i even = _mm512_mul_epu32(a, m);  // lanes 0, 2, ...: 64-bit products
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
  return _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
}
void philox16(__m512i lo, __m512i hi, uint64_t seed, __m512i w[4]) {
  const __m512i m0 = _mm512_set1_epi32(int(0xD2511F53u)), m1 = _mm512_set1_epi32(int(0xCD9E8D57u));
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  __m512i x = lo, y = hi, z = _mm512_setzero_si512(), v = _mm512_setzero_si512();
  for (int round = 0; round < 10; ++round) {
    const __m512i lo0 = _mm512_mullo_epi32(x, m0), hi0 = mulhi_epu32(x, m0);
    const __m512i lo1 = _mm512_mullo_epi32(z, m1), hi1 = mulhi_epu32(z, m1);
    x = _mm512_xor_si512(_mm512_xor_si512(hi1, y), _mm512_set1_epi32(int(k0)));
    y = lo1;
    z = _mm512_xor_si512(_mm512_xor_si512(hi0, v), _mm512_set1_epi32(int(k1)));
    v = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  w[0] = x, w[1] = y, w[2] = z, w[3] = v;
}

// dropout_factors (below) in f32 with AVX-512: the same numbers, 16 Philox blocks at a time. The
// test u >= p with u = (word >> 8) 2^-24 is done as float(word >> 8) >= p 2^24: both sides exact.
void dropout_factors_avx512(float* z, int64_t n, uint64_t first, uint64_t seed, uint64_t offset,
                            float p, float kept) {
  const int64_t skip = int64_t(first % 4);  // elements of the first block before `first`
  const int64_t nb = (skip + n + 3) / 4;
  const __m512 thr = _mm512_set1_ps(p * 16777216.0f);
  alignas(64) uint32_t lo[16], hi[16];
  alignas(64) float f[4][16];
  for (int64_t g0 = 0; g0 < nb; g0 += 16) {
    for (int t = 0; t < 16; ++t) {
      const uint64_t block = offset + first / 4 + uint64_t(g0 + t);
      lo[t] = uint32_t(block);
      hi[t] = uint32_t(block >> 32);
    }
    __m512i w[4];
    philox16(_mm512_load_si512(lo), _mm512_load_si512(hi), seed, w);
    for (int l = 0; l < 4; ++l) {
      const __m512 u = _mm512_cvtepi32_ps(_mm512_srli_epi32(w[l], 8));
      const __mmask16 keep = _mm512_cmp_ps_mask(u, thr, _CMP_GE_OQ);
      _mm512_store_ps(f[l], _mm512_maskz_mov_ps(keep, _mm512_set1_ps(kept)));
    }
    for (int64_t t = 0; t < 16 && g0 + t < nb; ++t)
      for (int l = 0; l < 4; ++l) {
        const int64_t c = (g0 + t) * 4 + l - skip;
        if (c >= 0 && c < n) z[c] = f[l][t];
      }
  }
}

#pragma GCC pop_options

bool use_avx512() {
  static const bool yes = cpu_has_avx512();
  return yes;
}

template <class A>
void tile_gemm(int64_t M, int64_t N, int64_t K, const A* a, int64_t ars, int64_t aks, const A* b,
               int64_t ldb, A* c, int64_t ldc, bool accumulate) {
  if (use_avx512())
    tile_gemm_avx512(M, N, K, a, ars, aks, b, ldb, c, ldc, accumulate);
  else
    tile_gemm_loops(M, N, K, a, ars, aks, b, ldb, c, ldc, accumulate);
}

// ---- helpers ------------------------------------------------------------------------------------

// The head dimension padded to a multiple of 16 (f32 vectors; two f64 vectors).
int64_t padded(int64_t hs) { return (hs + 15) / 16 * 16; }

// Per-thread buffers that only grow: first touch paid once per thread (MACHINE.md lesson 1).
template <class A>
A* buffer(int slot, int64_t n) {
  thread_local std::vector<A> buf[16];
  if (int64_t(buf[slot].size()) < n) buf[slot].resize(size_t(n));
  return buf[slot].data();
}

template <class A, class T>
inline A to_a(T x) {
  return static_cast<A>(static_cast<AccT<T>>(x));
}

template <class A>
inline A exp_a(A x) {
  if constexpr (std::is_same_v<A, float>) {
    return fast_expf(x);
  } else {
    return std::exp(x);
  }
}

// rows x HSp tile from `n` rows of HS elements (times `mul`), zero padded columns.
template <class A, class T>
void pack_rows(A* dst, int64_t HSp, const T* src, int64_t n, int64_t HS, A mul) {
  for (int64_t r = 0; r < n; ++r) {
    A* d = dst + r * HSp;
    const T* s = src + r * HS;
    for (int64_t e = 0; e < HS; ++e) d[e] = mul * to_a<A>(s[e]);
    for (int64_t e = HS; e < HSp; ++e) d[e] = A(0);
  }
}

// HSp x kBk tile holding the transpose of `n` rows of HS elements; zero elsewhere.
template <class A, class T>
void pack_transposed(A* dst, int64_t HSp, const T* src, int64_t n, int64_t HS) {
  std::fill(dst, dst + HSp * kBk, A(0));
  for (int64_t c = 0; c < n; ++c) {
    const T* s = src + c * HS;
    for (int64_t e = 0; e < HS; ++e) dst[e * kBk + c] = to_a<A>(s[e]);
  }
}

// x[c] += mask[c] for c < n; the mask row is f32 or T.
template <class A, class T>
void add_mask(A* x, int64_t n, const AttentionGeometry& g, const void* mask, int64_t off) {
  if (g.mask_f32) {
    const float* m = static_cast<const float*>(mask) + off;
    for (int64_t c = 0; c < n; ++c) x[c] += A(m[c]);
  } else {
    const T* m = static_cast<const T*>(mask) + off;
    for (int64_t c = 0; c < n; ++c) x[c] += to_a<A>(m[c]);
  }
}

// z[c] = dropout factor of stream element first + c (c < n): one Philox block per 4 elements.
template <class A>
void dropout_factors(A* z, int64_t n, uint64_t first, const AttentionGeometry& g, A kept) {
  if constexpr (std::is_same_v<A, float>) {
    if (use_avx512())
      return dropout_factors_avx512(z, n, first, g.seed, g.offset, g.dropout_p, kept);
  }
  int64_t c = 0;
  while (c < n) {
    const uint64_t e = first + uint64_t(c);
    const philox::U4 w = philox::block_words(g.seed, g.offset + e / 4);
    for (int lane = int(e % 4); lane < 4 && c < n; ++lane, ++c)
      z[c] = philox::to_unit(philox::word(w, lane)) >= g.dropout_p ? kept : A(0);
  }
}

template <class A>
A lse_at(const void* lse, bool f64, int64_t i) {
  return f64 ? A(static_cast<const double*>(lse)[i]) : A(static_cast<const float*>(lse)[i]);
}

// ---- forward ------------------------------------------------------------------------------------

// The online-softmax step of one row of a key block: s[0, lim) are the row's visible scores
// (-inf allowed). Updates the running max *m and sum *l, writes p = exp(s - m_new) over s[0, kBk)
// (0 past lim) and *alpha = exp(m_old - m_new), the factor of the row's output so far. Returns
// false (p = 0, alpha = 1) while the row has seen no visible key.
template <class A>
bool softmax_row(A* s, int64_t lim, A* m, A* l, A* alpha) {
  if constexpr (std::is_same_v<A, float>) {
    if (use_avx512()) return softmax_row_avx512(s, lim, m, l, alpha);
  }
  const A inf = std::numeric_limits<A>::infinity();
  A mx = -inf;
#pragma omp simd reduction(max : mx)
  for (int64_t e = 0; e < lim; ++e) mx = s[e] > mx ? s[e] : mx;
  const A mnew = *m > mx ? *m : mx;
  if (mnew == -inf) {
    std::fill(s, s + kBk, A(0));
    *alpha = A(1);
    return false;
  }
  *alpha = *m == -inf ? A(0) : exp_a(*m - mnew);
  A sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t e = 0; e < lim; ++e) {
    const A p = s[e] == -inf ? A(0) : exp_a(s[e] - mnew);
    s[e] = p;
    sum += p;
  }
  std::fill(s + lim, s + kBk, A(0));
  *l = *l * *alpha + sum;
  *m = mnew;
  return true;
}

// K^T of every head, [B NH, HSp, Tkp], zero outside [HS, Tk]: packed once per call rather than
// once per query block. Blocks of kBk keys: contiguous writes, the block's rows stay in L1.
template <class T>
void pack_heads_transposed(AccT<T>* dst, const T* k, int64_t nbh, int64_t Tk, int64_t HS,
                           int64_t HSp, int64_t Tkp, bool parallel) {
  using A = AccT<T>;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t bh = 0; bh < nbh; ++bh) {
    A* dh = dst + bh * HSp * Tkp;
    const T* kh = k + bh * Tk * HS;
    for (int64_t j0 = 0; j0 < Tkp; j0 += kBk) {
      const int64_t nk = std::max<int64_t>(0, std::min(kBk, Tk - j0));
      for (int64_t e = 0; e < HSp; ++e) {
        A* d = dh + e * Tkp + j0;
        for (int64_t c = 0; c < nk && e < HS; ++c) d[c] = to_a<A>(kh[(j0 + c) * HS + e]);
        std::fill(d + (e < HS ? nk : 0), d + kBk, A(0));
      }
    }
  }
}

template <class T>
struct FwdCtx {
  AttentionGeometry g;
  const T *q, *k, *v;
  const void* mask;
  T* o;
  void* lse;
  const AccT<T>* kt;  // [B NH, HSp, Tkp]: every head's K^T (pack_heads_transposed)
  int64_t Tkp;        // Tk rounded up to kBk
};

template <class T>
void fwd_block(const FwdCtx<T>& c, int64_t bh, int64_t i0, int64_t n) {
  using A = AccT<T>;
  const AttentionGeometry& g = c.g;
  const int64_t HS = g.HS, HSp = padded(HS), Tq = g.Tq, Tk = g.Tk;
  const int64_t b = bh / g.NH, h = bh % g.NH;
  const A inf = std::numeric_limits<A>::infinity();
  // V is used in place when it already has the packed layout (f32/f64, HS a multiple of 16).
  const bool v_direct = std::is_same_v<T, A> && HS == HSp;
  A* Qp = buffer<A>(0, kBq * HSp);
  A* Vp = buffer<A>(1, kBk * HSp);
  A* S = buffer<A>(2, kBq * kBk);
  A* O = buffer<A>(3, kBq * HSp);
  A* st = buffer<A>(4, 2 * kBq);
  A* z = buffer<A>(5, kBk);
  A* m = st;
  A* l = st + kBq;
  const A kept = attention_dropout_scale<A>(g.dropout_p);
  pack_rows(Qp, HSp, c.q + (bh * Tq + i0) * HS, n, HS, A(g.scale));
  std::fill(O, O + n * HSp, A(0));
  std::fill(m, m + n, -inf);
  std::fill(l, l + n, A(0));
  const int64_t kend = g.visible_keys(i0 + n - 1);  // the keys the block's last query sees
  for (int64_t j0 = 0; j0 < kend; j0 += kBk) {
    const int64_t nk = std::min(kBk, kend - j0);
    const A* V = Vp;
    if (v_direct)
      V = reinterpret_cast<const A*>(c.v + (bh * Tk + j0) * HS);
    else
      pack_rows(Vp, HSp, c.v + (bh * Tk + j0) * HS, nk, HS, A(1));
    tile_gemm(n, kBk, HSp, Qp, HSp, 1, c.kt + bh * HSp * c.Tkp + j0, c.Tkp, S, kBk, false);
    for (int64_t r = 0; r < n; ++r) {
      const int64_t i = i0 + r;
      A* sr = S + r * kBk;
      const int64_t lim = std::max<int64_t>(0, std::min(nk, g.visible_keys(i) - j0));
      if (g.has_mask && lim > 0) add_mask<A, T>(sr, lim, g, c.mask, g.mask_row(b, h, i) + j0);
      A alpha;
      if (!softmax_row(sr, lim, m + r, l + r, &alpha)) continue;
      if (g.dropout()) {
        dropout_factors(z, lim, g.dropout_index(bh, i, j0), g, kept);
        for (int64_t e = 0; e < lim; ++e) sr[e] *= z[e];
      }
      if (alpha != A(1)) {
        A* orow = O + r * HSp;
#pragma omp simd
        for (int64_t e = 0; e < HSp; ++e) orow[e] *= alpha;
      }
    }
    tile_gemm(n, HSp, nk, S, kBk, 1, V, HSp, O, HSp, true);
  }
  for (int64_t r = 0; r < n; ++r) {
    const int64_t row = bh * Tq + i0 + r;
    T* orow = c.o + row * HS;
    const bool any = l[r] > A(0);
    const A inv = any ? A(1) / l[r] : A(0);
    for (int64_t e = 0; e < HS; ++e) orow[e] = T(O[r * HSp + e] * inv);
    const double lse = any ? double(m[r]) + std::log(double(l[r])) : -double(inf);
    if (g.lse_f64)
      static_cast<double*>(c.lse)[row] = lse;
    else
      static_cast<float*>(c.lse)[row] = float(lse);
  }
}

template <class T>
void fwd_flash_typed(const AttentionFwdArgs& a, const AttentionGeometry& g) {
  using A = AccT<T>;
  const int64_t nbh = g.B * g.NH, HSp = padded(g.HS), Tkp = (g.Tk + kBk - 1) / kBk * kBk;
  const int64_t nqb = (g.Tq + kBq - 1) / kBq, items = nbh * nqb;
  const double work = double(nbh) * double(g.Tq) * double(g.Tk) * double(g.HS + 1);
  const bool parallel = work > 2e5;
  const Tensor kt = Tensor::empty({nbh, HSp, Tkp}, dtype_of<A>());
  pack_heads_transposed(kt.data<A>(), a.k.data<T>(), nbh, g.Tk, g.HS, HSp, Tkp, parallel);
  const FwdCtx<T> c{g,
                    a.q.data<T>(),
                    a.k.data<T>(),
                    a.v.data<T>(),
                    g.has_mask ? a.mask.raw_data() : nullptr,
                    a.o.data<T>(),
                    a.lse.raw_data(),
                    kt.data<A>(),
                    Tkp};
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
  for (int64_t it = 0; it < items; ++it) {
    const int64_t bh = it / nqb, i0 = (it % nqb) * kBq;
    fwd_block(c, bh, i0, std::min(kBq, g.Tq - i0));
  }
}

// ---- backward -----------------------------------------------------------------------------------

template <class T>
struct BwdCtx {
  AttentionGeometry g;
  const T *dout, *q, *k, *v, *o;
  const void *lse, *mask;
  T *dk, *dv;
};

// Key blocks [kb0, kb1) of head bh: writes their dk, dv and adds (unscaled) dq into dqa
// [Tq, HSp].
template <class T>
void bwd_keys(const BwdCtx<T>& c, int64_t bh, int64_t kb0, int64_t kb1, AccT<T>* dqa) {
  using A = AccT<T>;
  const AttentionGeometry& g = c.g;
  const int64_t HS = g.HS, HSp = padded(HS), Tq = g.Tq, Tk = g.Tk;
  const int64_t b = bh / g.NH, h = bh % g.NH;
  const A inf = std::numeric_limits<A>::infinity();
  const A scale = A(g.scale), kept = attention_dropout_scale<A>(g.dropout_p);
  // Per query of the head: D = rowsum(do o) and lse.
  A* D = buffer<A>(0, Tq);
  A* L = buffer<A>(1, Tq);
  for (int64_t i = 0; i < Tq; ++i) {
    const T* dr = c.dout + (bh * Tq + i) * HS;
    const T* orow = c.o + (bh * Tq + i) * HS;
    A s = 0;
    for (int64_t e = 0; e < HS; ++e) s += to_a<A>(dr[e]) * to_a<A>(orow[e]);
    D[i] = s;
    L[i] = lse_at<A>(c.lse, g.lse_f64, bh * Tq + i);
  }
  A* Kp = buffer<A>(2, kBk * HSp);
  A* Kt = buffer<A>(3, HSp * kBk);
  A* Vt = buffer<A>(4, HSp * kBk);
  A* Qp = buffer<A>(5, kBq * HSp);
  A* dOp = buffer<A>(6, kBq * HSp);
  A* S = buffer<A>(7, kBq * kBk);
  A* dP = buffer<A>(8, kBq * kBk);
  A* dK = buffer<A>(9, kBk * HSp);
  A* dV = buffer<A>(10, kBk * HSp);
  A* z = buffer<A>(11, kBk);
  for (int64_t kb = kb0; kb < kb1; ++kb) {
    const int64_t j0 = kb * kBk, nk = std::min(kBk, Tk - j0);
    pack_rows(Kp, HSp, c.k + (bh * Tk + j0) * HS, nk, HS, A(1));
    pack_transposed(Kt, HSp, c.k + (bh * Tk + j0) * HS, nk, HS);
    pack_transposed(Vt, HSp, c.v + (bh * Tk + j0) * HS, nk, HS);
    std::fill(dK, dK + nk * HSp, A(0));
    std::fill(dV, dV + nk * HSp, A(0));
    // The first query that sees key j0.
    const int64_t ifirst = g.causal ? std::max<int64_t>(0, j0 - (Tk - Tq)) : 0;
    for (int64_t i0 = ifirst; i0 < Tq; i0 += kBq) {
      const int64_t n = std::min(kBq, Tq - i0);
      pack_rows(Qp, HSp, c.q + (bh * Tq + i0) * HS, n, HS, A(1));
      pack_rows(dOp, HSp, c.dout + (bh * Tq + i0) * HS, n, HS, A(1));
      tile_gemm(n, kBk, HSp, Qp, HSp, 1, Kt, kBk, S, kBk, false);
      tile_gemm(n, kBk, HSp, dOp, HSp, 1, Vt, kBk, dP, kBk, false);
      for (int64_t r = 0; r < n; ++r) {
        const int64_t i = i0 + r;
        A* sr = S + r * kBk;   // scores, then z p (dropped probabilities)
        A* pr = dP + r * kBk;  // do.v, then ds
        const int64_t lim = std::max<int64_t>(0, std::min(nk, g.visible_keys(i) - j0));
        const A Li = L[i], Di = D[i];
        if (Li == -inf || lim == 0) {
          std::fill(sr, sr + kBk, A(0));
          std::fill(pr, pr + kBk, A(0));
          continue;
        }
#pragma omp simd
        for (int64_t e = 0; e < lim; ++e) sr[e] *= scale;
        if (g.has_mask) add_mask<A, T>(sr, lim, g, c.mask, g.mask_row(b, h, i) + j0);
        if (g.dropout()) {
          dropout_factors(z, lim, g.dropout_index(bh, i, j0), g, kept);
        } else {
          std::fill(z, z + lim, A(1));
        }
#pragma omp simd
        for (int64_t e = 0; e < lim; ++e) {
          const A p = sr[e] == -inf ? A(0) : exp_a(sr[e] - Li);
          sr[e] = p * z[e];
          pr[e] = p * (pr[e] * z[e] - Di);
        }
        std::fill(sr + lim, sr + kBk, A(0));
        std::fill(pr + lim, pr + kBk, A(0));
      }
      tile_gemm(nk, HSp, n, S, 1, kBk, dOp, HSp, dV, HSp, true);              // dV += (z p)^T dO
      tile_gemm(nk, HSp, n, dP, 1, kBk, Qp, HSp, dK, HSp, true);              // dK += ds^T Q
      tile_gemm(n, HSp, nk, dP, kBk, 1, Kp, HSp, dqa + i0 * HSp, HSp, true);  // dQ += ds K
    }
    for (int64_t r = 0; r < nk; ++r) {
      T* dkr = c.dk + (bh * Tk + j0 + r) * HS;
      T* dvr = c.dv + (bh * Tk + j0 + r) * HS;
      for (int64_t e = 0; e < HS; ++e) {
        dkr[e] = T(scale * dK[r * HSp + e]);
        dvr[e] = T(dV[r * HSp + e]);
      }
    }
  }
}

template <class T>
void bwd_flash_typed(const AttentionBwdArgs& a, const AttentionGeometry& g) {
  using A = AccT<T>;
  const BwdCtx<T> c{g,
                    a.dout.data<T>(),
                    a.q.data<T>(),
                    a.k.data<T>(),
                    a.v.data<T>(),
                    a.o.data<T>(),
                    a.lse.raw_data(),
                    g.has_mask ? a.mask.raw_data() : nullptr,
                    a.dk.data<T>(),
                    a.dv.data<T>()};
  T* dq = a.dq.data<T>();
  const int64_t HS = g.HS, HSp = padded(HS), Tq = g.Tq, nbh = g.B * g.NH;
  const int64_t nkb = (g.Tk + kBk - 1) / kBk;
  const A scale = A(g.scale);
  const double work = double(nbh) * double(g.Tq) * double(g.Tk) * double(HS + 1);
  const bool parallel = work > 1e5;
  // Split each head's key blocks when there are fewer heads than a team of kSplitTeam threads,
  // at least kMinSplitBlocks key blocks (256 keys) per split. The split follows the shape only,
  // never the real team size: dq's sums, and so the results, are the same at every thread count
  // (docs/determinism.md). Each split costs a dq partial (written, then summed): with >= 256 keys
  // per split that is ~1% of its work at one thread (64-key splits measured 8-10%).
  constexpr int64_t kSplitTeam = 16, kMinSplitBlocks = 4;
  const int64_t nsplit =
      !parallel || nbh >= kSplitTeam
          ? 1
          : std::max<int64_t>(1, std::min(nkb / kMinSplitBlocks, (kSplitTeam + nbh - 1) / nbh));
  if (nsplit == 1) {
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
    for (int64_t bh = 0; bh < nbh; ++bh) {
      A* dqa = buffer<A>(15, Tq * HSp);
      std::fill(dqa, dqa + Tq * HSp, A(0));
      bwd_keys(c, bh, 0, nkb, dqa);
      for (int64_t i = 0; i < Tq; ++i)
        for (int64_t e = 0; e < HS; ++e) dq[(bh * Tq + i) * HS + e] = T(scale * dqa[i * HSp + e]);
    }
    return;
  }
  // The calling thread's grow-only buffer: no first touch of fresh pages per call.
  A* pp = buffer<A>(14, nbh * nsplit * Tq * HSp);
  const int64_t items = nbh * nsplit;
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
  for (int64_t it = 0; it < items; ++it) {
    const int64_t bh = it / nsplit, sp = it % nsplit;
    A* dqa = pp + it * Tq * HSp;
    std::fill(dqa, dqa + Tq * HSp, A(0));
    bwd_keys(c, bh, sp * nkb / nsplit, (sp + 1) * nkb / nsplit, dqa);
  }
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t row = 0; row < nbh * Tq; ++row) {
    const int64_t bh = row / Tq, i = row % Tq;
    A* s = buffer<A>(13, HSp);  // the row's sums, split after split (vectorised along e)
    std::fill(s, s + HSp, A(0));
    for (int64_t sp = 0; sp < nsplit; ++sp) {
      const A* p = pp + ((bh * nsplit + sp) * Tq + i) * HSp;
#pragma omp simd
      for (int64_t e = 0; e < HSp; ++e) s[e] += p[e];
    }
    for (int64_t e = 0; e < HS; ++e) dq[row * HS + e] = T(scale * s[e]);
  }
}

}  // namespace

namespace attention_cpu {

void fwd_flash(const AttentionFwdArgs& a) {
  const AttentionGeometry g = attention_geometry(a, "[attention_fwd] cpu.flash");
  AIM_DISPATCH_FLOAT_TYPES(a.q.dtype(), T, fwd_flash_typed<T>(a, g));
}

void bwd_flash(const AttentionBwdArgs& a) {
  const AttentionGeometry g = attention_bwd_geometry(a, "[attention_bwd] cpu.flash");
  AIM_DISPATCH_FLOAT_TYPES(a.q.dtype(), T, bwd_flash_typed<T>(a, g));
}

}  // namespace attention_cpu
}  // namespace aim::kernels
