// cpu.vnni (qlinear; qconv2d through an int8 im2col and the same GEMM): AVX-512 VNNI.
//   vpdpbusd multiplies unsigned by signed bytes, four per 32-bit lane, so the A operand
//   (activations for qlinear, weights for qconv2d) is shifted to u8 (a + 128 = a ^ 0x80) and the
//   shift is taken back per output column: acc = sum_k (a+128)*b - 128*sum_k b (README.md).
//   Packing: A rows as u8 with K padded to Kp = 4*ceil(K/4) (lda = Kp); B as panels of 16
//   columns, [Kp/4][16][4] bytes (the 4 k values of one lane together, zero padding in k and
//   n), with the correction 128*sum_k b per column computed while packing.
//   Microkernel: up to 6 rows x 4 panels (64 columns) of int32 accumulators in 24 zmm; per group
//   of 4 k: 4 panel loads, 6 broadcasts of 4 A bytes, 24 vpdpbusd. The epilogue (correction,
//   scales, bias, ReLU, requantisation) runs in AVX-512 on the 6x64 tile with the same fp32
//   operations as qepilogue_value()/quantize_value(), so results equal cpu.ref bit for bit.
//   qlinear: A = x (packed once), B = w (packed once per call: weights are not cached yet),
//   OpenMP over 96-row x 64-column output tiles. qconv2d: A = w per group (packed once), B =
//   im2col of 64 output pixels gathered straight into panel layout per work item (image, group,
//   pixel chunk, and row blocks when there are few items), thread-local buffers. The gather is
//   vectorised for stride_w == 1 (masked 16-byte loads per output-row segment, unpack
//   interleave, column sums by vpdpbusd with ones: gather_b_conv_s1) and scalar otherwise; with
//   few output channels (K/G = 64) it still costs about as much as the GEMM.
//   Limits: CPUs with AVX-512 F/BW/VL and VNNI (supports() says otherwise); 32-bit int32
//   accumulators safe for K <= kQMaxReduction (checked by every variant).
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/quant/quant_cpu.h"

namespace aim::kernels::quant_cpu {

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps() (`__m512 __Y = __Y;`), which
// -Wmaybe-uninitialized reports at every use in a target("avx512f") function: a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define AIM_VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma")))

bool cpu_has_vnni() {
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                         __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("fma");
  return ok;
}

namespace {

constexpr int kMR = 6;         // microkernel rows
constexpr int kNV = 4;         // microkernel panels of 16 columns
constexpr int kNC = 16 * kNV;  // microkernel columns

int64_t round4(int64_t k) { return (k + 3) / 4 * 4; }

// C tile [MR][kNC] (int32, row stride kNC) = A rows (u8, lda) . B panels (s8, panel_stride
// bytes apart) over Kq groups of 4 k.
template <int MR, int NV>
AIM_VNNI_TARGET void vnni_micro(const uint8_t* A, int64_t lda, const int8_t* B,
                                int64_t panel_stride, int64_t Kq, int32_t* C) {
  __m512i acc[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) acc[i][j] = _mm512_setzero_si512();
  for (int64_t kq = 0; kq < Kq; ++kq) {
    __m512i b[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j)
      b[j] = _mm512_loadu_si512(static_cast<const void*>(B + j * panel_stride + kq * 64));
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      int32_t av;
      std::memcpy(&av, A + i * lda + kq * 4, 4);
      const __m512i a = _mm512_set1_epi32(av);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[i][j] = _mm512_dpbusd_epi32(acc[i][j], a, b[j]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j)
      _mm512_storeu_si512(static_cast<void*>(C + i * kNC + j * 16), acc[i][j]);
}

using MicroFn = void (*)(const uint8_t*, int64_t, const int8_t*, int64_t, int64_t, int32_t*);

template <int MR>
MicroFn micro_for_nv(int nv) {
  switch (nv) {
    case 1:
      return vnni_micro<MR, 1>;
    case 2:
      return vnni_micro<MR, 2>;
    case 3:
      return vnni_micro<MR, 3>;
    default:
      return vnni_micro<MR, 4>;
  }
}
MicroFn micro_for(int mr, int nv) {
  switch (mr) {
    case 1:
      return micro_for_nv<1>(nv);
    case 2:
      return micro_for_nv<2>(nv);
    case 3:
      return micro_for_nv<3>(nv);
    case 4:
      return micro_for_nv<4>(nv);
    case 5:
      return micro_for_nv<5>(nv);
    default:
      return micro_for_nv<6>(nv);
  }
}

// What the epilogue needs: per-column correction, scale and bias per row (qconv2d: output
// channel) or per column (qlinear: n), and the output.
struct Epi {
  const int32_t* corr = nullptr;  // corr[col - corr0]: the correction of output column col
  int64_t corr0 = 0;
  const float* scale = nullptr;  // combined x_scale * w_scale
  const float* bias = nullptr;   // or null
  bool per_row = false, relu = false;
  float* yf = nullptr;   // f32 output, or
  int8_t* yq = nullptr;  // i8 output
  float out_scale = 0;
  int64_t ldy = 0;
};

// Rows row0.. row0+mr-1, columns col0 .. col0+ncols-1 of the output from the tile t [mr][kNC].
AIM_VNNI_TARGET void vnni_epilogue(const int32_t* t, int mr, int ncols, int64_t row0, int64_t col0,
                                   const Epi& e) {
  const __m512 zero = _mm512_setzero_ps();
  const __m512 lo = _mm512_set1_ps(-float(kQMax)), hi = _mm512_set1_ps(float(kQMax));
  const __m512 os = _mm512_set1_ps(e.out_scale);
  for (int i = 0; i < mr; ++i) {
    const int64_t row = row0 + i;
    for (int j0 = 0; j0 < ncols; j0 += 16) {
      const int rem = ncols - j0;
      const __mmask16 m = rem >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << rem) - 1);
      const int64_t col = col0 + j0;
      __m512i acc = _mm512_loadu_si512(static_cast<const void*>(t + i * kNC + j0));
      acc = _mm512_sub_epi32(acc, _mm512_maskz_loadu_epi32(m, e.corr + (col - e.corr0)));
      const __m512 f = _mm512_cvtepi32_ps(acc);
      const __m512 s =
          e.per_row ? _mm512_set1_ps(e.scale[row]) : _mm512_maskz_loadu_ps(m, e.scale + col);
      const __m512 b = !e.bias     ? zero
                       : e.per_row ? _mm512_set1_ps(e.bias[row])
                                   : _mm512_maskz_loadu_ps(m, e.bias + col);
      __m512 y = _mm512_fmadd_ps(f, s, b);
      if (e.relu) y = _mm512_max_ps(y, zero);  // NaN and -0 give +0, as qepilogue_value
      if (e.yf) {
        _mm512_mask_storeu_ps(e.yf + row * e.ldy + col, m, y);
      } else {
        __m512 r = _mm512_roundscale_ps(_mm512_div_ps(y, os),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const __mmask16 nan = _mm512_cmp_ps_mask(r, r, _CMP_UNORD_Q);
        r = _mm512_min_ps(_mm512_max_ps(r, lo), hi);
        r = _mm512_mask_mov_ps(r, nan, zero);  // NaN -> 0, as quantize_value
        _mm512_mask_cvtepi32_storeu_epi8(e.yq + row * e.ldy + col, m, _mm512_cvtps_epi32(r));
      }
    }
  }
}

// Rows [r0, r1) of packed A against the packed panels [first_panel, first_panel + panels) of B
// (panel j at Bp + j * panel_bytes), columns col0 .. col0 + ncols - 1 of the output.
void vnni_block(const uint8_t* Ap, int64_t lda, int64_t r0, int64_t r1, const int8_t* Bp,
                int64_t panel_bytes, int64_t Kq, int64_t col0, int64_t ncols, const Epi& e) {
  alignas(64) int32_t tile[kMR * kNC];
  for (int64_t c = 0; c < ncols; c += kNC) {
    const int nc = int(std::min<int64_t>(kNC, ncols - c));
    const int nv = (nc + 15) / 16;
    const int8_t* B = Bp + (c / 16) * panel_bytes;
    for (int64_t r = r0; r < r1; r += kMR) {
      const int mr = int(std::min<int64_t>(kMR, r1 - r));
      micro_for(mr, nv)(Ap + r * lda, lda, B, panel_bytes, Kq, tile);
      vnni_epilogue(tile, mr, nc, r, col0 + c, e);
    }
  }
}

// A rows (s8, row stride K) -> u8 (x + 128) with row stride Kp; zero in the k padding.
void pack_a_u8(const int8_t* src, int64_t rows, int64_t K, int64_t Kp, uint8_t* dst) {
#pragma omp parallel for schedule(static) if (rows * K > (int64_t(1) << 16))
  for (int64_t m = 0; m < rows; ++m) {
    const int8_t* s = src + m * K;
    uint8_t* d = dst + m * Kp;
    for (int64_t k = 0; k < K; ++k) d[k] = uint8_t(s[k]) ^ 0x80u;
    for (int64_t k = K; k < Kp; ++k) d[k] = 0;
  }
}

// B rows n (s8, row stride K: w [N, K]) -> panels [N16/16][Kp/4][16][4], zero padded, and
// corr[n] = 128 * sum_k B[n, k] (0 for padding columns).
void pack_b_panels(const int8_t* src, int64_t N, int64_t K, int64_t Kp, int8_t* dst,
                   int32_t* corr) {
  const int64_t panels = (N + 15) / 16, Kq = Kp / 4;
#pragma omp parallel for schedule(static) if (N * K > (int64_t(1) << 16))
  for (int64_t j = 0; j < panels; ++j) {
    int8_t* P = dst + j * Kq * 64;
    std::memset(P, 0, size_t(Kq * 64));
    for (int l = 0; l < 16; ++l) {
      const int64_t n = j * 16 + l;
      int32_t sum = 0;
      if (n < N) {
        const int8_t* s = src + n * K;
        const int64_t full = K / 4;
        for (int64_t kq = 0; kq < full; ++kq) std::memcpy(P + kq * 64 + l * 4, s + 4 * kq, 4);
        for (int64_t k = 4 * full; k < K; ++k) P[full * 64 + l * 4 + (k - 4 * full)] = s[k];
        for (int64_t k = 0; k < K; ++k) sum += s[k];
      }
      corr[n] = 128 * sum;
    }
  }
}

template <class T>
T* grow(std::vector<T>& v, int64_t n) {
  if (int64_t(v.size()) < n) v.resize(size_t(n));
  return v.data();
}

}  // namespace

std::string vnni_supports_cpu() { return cpu_has_vnni() ? "" : "CPU lacks AVX-512 VNNI"; }

void qlinear_cpu_vnni(const QLinearArgs& a) {
  const QLinearDims d = qlinear_check(a);
  AIM_CHECK(cpu_has_vnni(), "[qlinear] cpu.vnni: CPU lacks AVX-512 VNNI");
  if (d.M == 0 || d.N == 0) return;
  const int64_t Kp = round4(d.K), Kq = Kp / 4, N16 = (d.N + 15) / 16 * 16;
  static thread_local std::vector<uint8_t> abuf;
  static thread_local std::vector<int8_t> bbuf;
  static thread_local std::vector<int32_t> cbuf;
  static thread_local std::vector<float> sbuf;
  uint8_t* Ap = grow(abuf, d.M * Kp);
  int8_t* Bp = grow(bbuf, N16 * Kp);
  int32_t* corr = grow(cbuf, N16);
  float* sc = grow(sbuf, d.N);
  pack_a_u8(a.x.data<int8_t>(), d.M, d.K, Kp, Ap);
  pack_b_panels(a.w.data<int8_t>(), d.N, d.K, Kp, Bp, corr);
  const float* ws = a.w_scales.data<float>();
  for (int64_t n = 0; n < d.N; ++n) sc[n] = a.x_scale * ws[n];
  Epi e;
  e.corr = corr;
  e.scale = sc;
  e.bias = a.bias.defined() ? a.bias.data<float>() : nullptr;
  e.per_row = false;
  e.relu = a.relu;
  if (a.y.dtype() == DType::f32)
    e.yf = a.y.data<float>();
  else
    e.yq = a.y.data<int8_t>();
  e.out_scale = a.out_scale;
  e.ldy = d.N;
  constexpr int64_t kMB = 16 * kMR;  // rows per work item
  const int64_t mt = (d.M + kMB - 1) / kMB, nt = (d.N + kNC - 1) / kNC;
  const bool par = 2.0 * double(d.M) * double(d.N) * double(d.K) > 2e6 && !omp_in_parallel();
#pragma omp parallel for schedule(dynamic, 1) if (par)
  for (int64_t t = 0; t < mt * nt; ++t) {
    const int64_t ni = t % nt, mi = t / nt;
    const int64_t c0 = ni * kNC;
    vnni_block(Ap, Kp, mi * kMB, std::min(d.M, (mi + 1) * kMB), Bp + (c0 / 16) * Kq * 64, Kq * 64,
               Kq, c0, std::min<int64_t>(kNC, d.N - c0), e);
  }
}

namespace {

// im2col of output pixels [pix0, pix0 + np) of image n, group g, straight into B panels
// [ceil(np/16)][Kp/4][16][4] with corr[pp] = 128 * sum_k col[pp, k].
void gather_b_conv(const int8_t* x, const QDims& d, const Conv2dParams& p, int64_t n, int64_t g,
                   int64_t pix0, int64_t np, int64_t Kp, int8_t* Bp, int32_t* corr) {
  const int64_t Kq = Kp / 4, panels = (np + 15) / 16, CRS = d.Cg * d.R * d.S;
  std::memset(Bp, 0, size_t(panels * Kq * 64));
  int64_t hb[kNC], wb[kNC];
  int32_t sum[kNC] = {0};
  for (int64_t i = 0; i < np; ++i) {
    const int64_t pix = pix0 + i;
    hb[i] = (pix / d.Q) * p.stride_h - p.pad_top;
    wb[i] = (pix % d.Q) * p.stride_w - p.pad_left;
  }
  const int8_t* xg = x + (n * d.C + g * d.Cg) * d.H * d.W;
  for (int64_t k = 0; k < CRS; ++k) {
    const int64_t c = k / (d.R * d.S), r = (k / d.S) % d.R, s = k % d.S;
    const int8_t* xc = xg + c * d.H * d.W;
    int8_t* dst = Bp + (k / 4) * 64 + (k % 4);
    for (int64_t i = 0; i < np; ++i) {
      const int64_t h = hb[i] + r * p.dil_h, w = wb[i] + s * p.dil_w;
      const int8_t v = (h >= 0 && h < d.H && w >= 0 && w < d.W) ? xc[h * d.W + w] : int8_t(0);
      dst[(i / 16) * Kq * 64 + (i % 16) * 4] = v;
      sum[i] += v;
    }
  }
  for (int64_t i = 0; i < panels * 16; ++i) corr[i] = i < np ? 128 * sum[i] : 0;
}

// gather_b_conv for stride_w == 1, vectorised: for each group of 4 k values (c, r, s) and each
// panel of 16 output pixels, the pixels of one output row read 16 consecutive bytes of an input
// row, so each k value's 16 bytes are one masked load per row segment (lanes whose tap falls in
// the padding are masked off: AVX-512 masked loads do not fault on masked bytes); the four
// 16-byte vectors are interleaved into the panel's [16][4] layout with two rounds of unpacks,
// and the per-pixel column sums come from one vpdpbusd with a ones vector.
AIM_VNNI_TARGET void gather_b_conv_s1(const int8_t* x, const QDims& d, const Conv2dParams& p,
                                      int64_t n, int64_t g, int64_t pix0, int64_t np, int64_t Kp,
                                      int8_t* Bp, int32_t* corr) {
  const int64_t Kq = Kp / 4, panels = (np + 15) / 16, CRS = d.Cg * d.R * d.S;
  // Row segments of each panel: lanes [l0, l1) on output row `row`, lane l0 at column q0.
  struct Seg {
    int l0, l1;
    int64_t row, q0;
  };
  Seg segs[kNV][16];
  int nseg[kNV];
  for (int64_t j = 0; j < panels; ++j) {
    nseg[j] = 0;
    const int lanes = int(std::min<int64_t>(16, np - 16 * j));
    for (int l = 0; l < lanes;) {
      const int64_t pix = pix0 + 16 * j + l, row = pix / d.Q, q0 = pix % d.Q;
      const int l1 = int(std::min<int64_t>(lanes, l + (d.Q - q0)));
      segs[j][nseg[j]++] = {l, l1, row, q0};
      l = l1;
    }
  }
  const int8_t* xg = x + (n * d.C + g * d.Cg) * d.H * d.W;
  __m512i csum[kNV];
  for (int j = 0; j < kNV; ++j) csum[j] = _mm512_setzero_si512();
  const __m512i ones = _mm512_set1_epi8(1);
  alignas(64) int8_t line[64];
  for (int64_t kq = 0; kq < Kq; ++kq) {
    int64_t kc[4], kr[4], ks[4];
    for (int t = 0; t < 4; ++t) {
      const int64_t k = 4 * kq + t;
      kc[t] = k < CRS ? k / (d.R * d.S) : -1;
      kr[t] = (k / d.S) % d.R;
      ks[t] = k % d.S;
    }
    for (int64_t j = 0; j < panels; ++j) {
      __m128i v[4];
      for (int t = 0; t < 4; ++t) {
        v[t] = _mm_setzero_si128();
        if (kc[t] < 0) continue;
        const int8_t* xc = xg + kc[t] * d.H * d.W;
        for (int e = 0; e < nseg[j]; ++e) {
          const Seg& sg = segs[j][e];
          const int64_t h = sg.row * p.stride_h - p.pad_top + kr[t] * p.dil_h;
          if (h < 0 || h >= d.H) continue;
          const int64_t w0 = sg.q0 - p.pad_left + ks[t] * p.dil_w;  // input column of lane l0
          const int64_t la = std::max<int64_t>(sg.l0, sg.l0 - w0);
          const int64_t lb = std::min<int64_t>(sg.l1, sg.l0 + d.W - w0);
          if (la >= lb) continue;
          const __mmask16 m = __mmask16(((1u << lb) - 1) & ~((1u << la) - 1));
          // Address of lane 0 (may lie outside x: only the masked-in lanes are read).
          const uintptr_t base = reinterpret_cast<uintptr_t>(xc + h * d.W) + uintptr_t(w0 - sg.l0);
          v[t] = _mm_mask_loadu_epi8(v[t], m, reinterpret_cast<const void*>(base));
        }
      }
      const __m128i a0 = _mm_unpacklo_epi8(v[0], v[1]), a1 = _mm_unpackhi_epi8(v[0], v[1]);
      const __m128i b0 = _mm_unpacklo_epi8(v[2], v[3]), b1 = _mm_unpackhi_epi8(v[2], v[3]);
      _mm_store_si128(reinterpret_cast<__m128i*>(line), _mm_unpacklo_epi16(a0, b0));
      _mm_store_si128(reinterpret_cast<__m128i*>(line + 16), _mm_unpackhi_epi16(a0, b0));
      _mm_store_si128(reinterpret_cast<__m128i*>(line + 32), _mm_unpacklo_epi16(a1, b1));
      _mm_store_si128(reinterpret_cast<__m128i*>(line + 48), _mm_unpackhi_epi16(a1, b1));
      const __m512i l512 = _mm512_load_si512(static_cast<const void*>(line));
      _mm512_storeu_si512(static_cast<void*>(Bp + j * Kq * 64 + kq * 64), l512);
      csum[j] = _mm512_dpbusd_epi32(csum[j], ones, l512);
    }
  }
  for (int64_t j = 0; j < panels; ++j)
    _mm512_storeu_si512(static_cast<void*>(corr + 16 * j),
                        _mm512_mullo_epi32(csum[j], _mm512_set1_epi32(128)));
}

}  // namespace

void qconv2d_cpu_vnni(const QConv2dArgs& a) {
  const QDims d = qconv_dims(a);
  AIM_CHECK(cpu_has_vnni(), "[qconv2d] cpu.vnni: CPU lacks AVX-512 VNNI");
  const int64_t PQ = d.P * d.Q;
  if (d.N == 0 || d.K == 0 || PQ == 0) return;
  const int64_t CRS = d.Cg * d.R * d.S, Kp = round4(CRS), Kq = Kp / 4;
  // A = w [K, C/G*R*S] (each group's rows consecutive) as u8.
  std::vector<uint8_t> Ap(size_t(d.K * Kp));
  pack_a_u8(a.w.data<int8_t>(), d.K, CRS, Kp, Ap.data());
  std::vector<float> sc(size_t(d.K));
  const float* ws = a.w_scales.data<float>();
  for (int64_t k = 0; k < d.K; ++k) sc[size_t(k)] = a.x_scale * ws[k];
  const float* bias = a.bias.defined() ? a.bias.data<float>() : nullptr;
  float* yf = a.y.dtype() == DType::f32 ? a.y.data<float>() : nullptr;
  int8_t* yq = a.y.dtype() == DType::i8 ? a.y.data<int8_t>() : nullptr;
  const int8_t* x = a.x.data<int8_t>();

  const int64_t chunks = (PQ + kNC - 1) / kNC;
  const int64_t base = d.N * d.G * chunks;
  const bool par = 2.0 * double(d.N * d.K * PQ) * double(CRS) > 2e6 && !omp_in_parallel();
  const int threads = par ? omp_get_max_threads() : 1;
  // Few items (one small image): split the output channels of a group too.
  int64_t rows = d.Kg;
  if (base < 4 * threads) {
    const int64_t splits = (4 * threads + base - 1) / base;
    rows = std::max<int64_t>(kMR, ((d.Kg + splits - 1) / splits + kMR - 1) / kMR * kMR);
  }
  const int64_t mblocks = (d.Kg + rows - 1) / rows;
#pragma omp parallel for schedule(dynamic, 1) if (par)
  for (int64_t t = 0; t < base * mblocks; ++t) {
    const int64_t mb = t % mblocks, ch = (t / mblocks) % chunks, g = (t / mblocks / chunks) % d.G;
    const int64_t n = t / mblocks / chunks / d.G;
    static thread_local std::vector<int8_t> bbuf;
    static thread_local std::vector<int32_t> cbuf;
    const int64_t pix0 = ch * kNC, np = std::min<int64_t>(kNC, PQ - pix0);
    int8_t* Bp = grow(bbuf, kNC * Kp);
    int32_t* corr = grow(cbuf, kNC);
    if (a.p.stride_w == 1)
      gather_b_conv_s1(x, d, a.p, n, g, pix0, np, Kp, Bp, corr);
    else
      gather_b_conv(x, d, a.p, n, g, pix0, np, Kp, Bp, corr);
    Epi e;
    e.corr = corr;  // the chunk's pixels
    e.corr0 = pix0;
    e.scale = sc.data();
    e.bias = bias;
    e.per_row = true;
    e.relu = a.relu;
    e.out_scale = a.out_scale;
    e.ldy = PQ;
    // Rows are global output channels: y viewed as [N*K, P*Q], image n starts at row n*K.
    const int64_t r0 = g * d.Kg + mb * rows, r1 = std::min(g * d.Kg + d.Kg, r0 + rows);
    if (yf) e.yf = yf + n * d.K * PQ;
    if (yq) e.yq = yq + n * d.K * PQ;
    vnni_block(Ap.data(), Kp, r0, r1, Bp, Kq * 64, Kq, pix0, np, e);
  }
}

}  // namespace aim::kernels::quant_cpu
