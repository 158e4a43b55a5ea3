// cpu.winograd: 3x3 stride-1 convolutions by Winograd's minimal filtering F(2x2, 3x3) (Lavin &
// Gray, "Fast Algorithms for Convolutional Neural Networks", 2016); the math and the transposed
// transforms of the two gradients are written out in kernels/conv/README.md.
//
// Every 2x2 output tile (i, j) (rows 2i, 2i+1, columns 2j, 2j+1) reads the 4x4 input patch d at
// rows 2i - pt + {0..3}, columns 2j - pl + {0..3}, and
//     y_tile = A^T [ (G g G^T) (.) (B^T d B) ] A          (4x4 element-wise product, summed over c)
// i.e. 16 multiplications per tile and (c, k) instead of the direct 36: for each of the 16
// positions xi of the 4x4 transformed tile one GEMM M[xi] [K, T] = U[xi] [K, C] . V[xi] [C, T]
// over a block of T tiles. The gradients are the transposes of the same linear maps:
//     bwd_data    dM = A dY A^T,  dV[xi] = U[xi]^T . dM[xi],  dx += B dV B^T (patches overlap:
//     added) bwd_filter  dU[xi] += dM[xi] . V[xi]^T over all tiles,  dw += G^T dU G
// so all three ops are exact convolutions up to f32 rounding (the transforms have coefficients
// 1 and 1/2), tested against cpu.ref by the registry test.
//
// Blocks: as cpu.im2col, several whole images per block when an image has fewer than
// kTargetTiles tiles (CRNN's 4x25 layer: 26 tiles), else chunks of tile rows of one image; blocks
// over the OpenMP team (GEMMs single-threaded inside), or one after another with the GEMMs and
// the transforms (over channels) using the team. The transforms work on 16 tiles of a tile row
// at once in AVX-512 registers: a row of 32 input columns is split into its even and odd
// columns (one permute each), which are the patch columns 0/1 of 16 tiles (2/3 from the row
// shifted by 2). Edges (padding, odd P/Q, partial tile groups) are lane masks: nothing outside
// the tensors is read or written.
//
// The profiler counts a convolution's direct FLOPs (kernels/conv/conv2d.h cost model) for every
// variant, so cpu.winograd's GFLOP/s is the direct-equivalent rate (as cuDNN's Winograd is
// usually reported); it performs 16/36 of those multiplications plus the transforms.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "kernels/conv/conv2d_winograd.h"
#include "kernels/conv/cpu_blocks.h"
#include "kernels/matmul/gemm_avx512.h"
#include "tensor/check.h"

namespace aim::kernels {

std::string conv2d_winograd_supports(const Tensor& w, const Conv2dParams& p) {
  if (w.size(2) != 3 || w.size(3) != 3)
    return str("F(2x2, 3x3) takes 3x3 kernels, got ", w.size(2), "x", w.size(3));
  if (p.stride_h != 1 || p.stride_w != 1)
    return str("F(2x2, 3x3) takes stride 1, got ", p.stride_h, ",", p.stride_w);
  if (p.dil_h != 1 || p.dil_w != 1)
    return str("F(2x2, 3x3) takes dilation 1, got ", p.dil_h, ",", p.dil_w);
  if (p.groups != 1) return str("F(2x2, 3x3) takes one group, got ", p.groups);
  if (!cpu_has_avx512()) return "needs an AVX-512 CPU (avx512f/bw/dq/vl)";
  return "";
}

// Checked on every default dispatch of a convolution: plain comparisons, no message built.
bool conv2d_winograd_preferred(const Tensor& w, const Conv2dParams& p, int64_t P, int64_t Q) {
  return w.dtype() == DType::f32 && w.size(2) == 3 && w.size(3) == 3 && p.stride_h == 1 &&
         p.stride_w == 1 && p.dil_h == 1 && p.dil_w == 1 && p.groups == 1 && cpu_has_avx512() &&
         w.size(0) >= 16 && w.size(1) >= 16 && P >= 2 && Q >= 2;
}

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,fma")

namespace {

using conv_cpu::blocks_parallel;
using conv_cpu::for_blocks;
using conv_cpu::thread_buffer;

constexpr int64_t kTargetTiles = 512;  // tiles per GEMM (its column or reduction extent)

struct Geo {
  int64_t N, C, H, W, K, P, Q, pt, pl;
  int64_t TH, TW;  // tile rows and columns: ceil(P / 2), ceil(Q / 2)
};

Geo make_geo(const Tensor& x, const Tensor& y, const Conv2dParams& p) {
  Geo g;
  g.N = x.size(0);
  g.C = x.size(1);
  g.H = x.size(2);
  g.W = x.size(3);
  g.K = y.size(1);
  g.P = y.size(2);
  g.Q = y.size(3);
  g.pt = p.pad_top;
  g.pl = p.pad_left;
  g.TH = (g.P + 1) / 2;
  g.TW = (g.Q + 1) / 2;
  return g;
}

struct Plan {
  int64_t images = 1;  // images per block
  int64_t trows = 1;   // tile rows per chunk (TH when images > 1)
  int64_t blocks = 1;
};

// `ordered`: the blocks as for one thread, whatever the team (cpu.winograd_ordered).
// Images of at most 4 tiles are grouped as for one thread too: a chunk of them can make a GEMM
// of N <= 4 tiles, which sgemm_avx512 computes by its dot-product path (other rounding).
Plan plan_of(const Geo& g, bool ordered = false) {
  Plan pl;
  const int64_t per_image = g.TH * g.TW;
  const int nt = ordered || per_image <= 4 || omp_in_parallel() ? 1 : omp_get_max_threads();
  if (per_image < kTargetTiles) {
    const int64_t want = (kTargetTiles + per_image - 1) / per_image;
    pl.images = conv_cpu::balanced_images(g.N, want, nt);
  }
  pl.trows =
      pl.images > 1 ? g.TH : std::max<int64_t>(1, std::min<int64_t>(g.TH, kTargetTiles / g.TW));
  pl.blocks = (g.N + pl.images - 1) / pl.images;
  return pl;
}

// Lanes l in [0, 16) with 0 <= start + l < n.
inline __mmask16 lanes(int64_t start, int64_t n) {
  const int64_t lo = std::max<int64_t>(0, -start), hi = std::min<int64_t>(16, n - start);
  if (hi <= lo) return 0;
  return __mmask16(((1u << hi) - 1u) & ~((1u << lo) - 1u));
}

// Columns c0 + 2l (even) and c0 + 2l + 1 (odd), l < 16, of a row of n floats; 0 outside [0, n).
inline void load_pairs(const float* row, int64_t n, int64_t c0, __m512& even, __m512& odd) {
  const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i io = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const __m512 lo = _mm512_maskz_loadu_ps(lanes(c0, n), row + c0);
  const __m512 hi = _mm512_maskz_loadu_ps(lanes(c0 + 16, n), row + c0 + 16);
  even = _mm512_permutex2var_ps(lo, ie, hi);
  odd = _mm512_permutex2var_ps(lo, io, hi);
}

// The inverse of load_pairs: the 32 columns c0 .. c0 + 31 interleaved from even and odd, written
// (add = false) or added to (add = true) where inside [0, n).
inline void put_pairs(float* row, int64_t n, int64_t c0, __m512 even, __m512 odd, bool add) {
  const __m512i il = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i ih =
      _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  __m512 lo = _mm512_permutex2var_ps(even, il, odd);
  __m512 hi = _mm512_permutex2var_ps(even, ih, odd);
  const __mmask16 ml = lanes(c0, n), mh = lanes(c0 + 16, n);
  if (add) {
    lo = _mm512_add_ps(lo, _mm512_maskz_loadu_ps(ml, row + c0));
    hi = _mm512_add_ps(hi, _mm512_maskz_loadu_ps(mh, row + c0 + 16));
  }
  _mm512_mask_storeu_ps(row + c0, ml, lo);
  _mm512_mask_storeu_ps(row + c0 + 16, mh, hi);
}

// Tile t of a block: image n of the block, tile row i of the chunk [i0, i1), column j:
// t = (n * (i1 - i0) + i - i0) * TW + j. Transformed tensors are [16][rows][T] (xi-major).
struct Chunk {
  int64_t n0, nb, i0, i1;
  int64_t tiles(const Geo& g) const { return nb * (i1 - i0) * g.TW; }
  int64_t first_tile(const Geo& g, int64_t n, int64_t i) const {
    return (n * (i1 - i0) + i - i0) * g.TW;
  }
};

// V[xi][c][t] = (B^T d B)[xi] of every tile's input patch d (x [N, C, H, W]).
void input_transform(const float* x, const Geo& g, const Chunk& ch, float* V, bool team) {
  const int64_t T = ch.tiles(g), plane = g.H * g.W, xi_stride = g.C * T;
#pragma omp parallel for schedule(static) if (team)
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t n = 0; n < ch.nb; ++n) {
      const float* xp = x + ((ch.n0 + n) * g.C + c) * plane;
      for (int64_t i = ch.i0; i < ch.i1; ++i) {
        float* dst = V + c * T + ch.first_tile(g, n, i);
        for (int64_t j0 = 0; j0 < g.TW; j0 += 16) {
          __m512 d[4][4];  // d[row][column] of 16 tiles' patches
          for (int r = 0; r < 4; ++r) {
            const int64_t ih = 2 * i - g.pt + r;
            if (ih < 0 || ih >= g.H) {
              d[r][0] = d[r][1] = d[r][2] = d[r][3] = _mm512_setzero_ps();
              continue;
            }
            const float* row = xp + ih * g.W;
            load_pairs(row, g.W, 2 * j0 - g.pl, d[r][0], d[r][1]);
            load_pairs(row, g.W, 2 * j0 - g.pl + 2, d[r][2], d[r][3]);
          }
          const __mmask16 m = lanes(0, g.TW - j0);
          for (int a = 0; a < 4; ++a) {
            __m512 t[4];  // row a of B^T d
            for (int s = 0; s < 4; ++s) {
              switch (a) {
                case 0:
                  t[s] = _mm512_sub_ps(d[0][s], d[2][s]);
                  break;
                case 1:
                  t[s] = _mm512_add_ps(d[1][s], d[2][s]);
                  break;
                case 2:
                  t[s] = _mm512_sub_ps(d[2][s], d[1][s]);
                  break;
                default:
                  t[s] = _mm512_sub_ps(d[1][s], d[3][s]);
                  break;
              }
            }
            float* o = dst + 4 * a * xi_stride + j0;  // (B^T d) B, row a
            _mm512_mask_storeu_ps(o, m, _mm512_sub_ps(t[0], t[2]));
            _mm512_mask_storeu_ps(o + xi_stride, m, _mm512_add_ps(t[1], t[2]));
            _mm512_mask_storeu_ps(o + 2 * xi_stride, m, _mm512_sub_ps(t[2], t[1]));
            _mm512_mask_storeu_ps(o + 3 * xi_stride, m, _mm512_sub_ps(t[1], t[3]));
          }
        }
      }
    }
}

// x < 0 ? 0 : x per lane (NaN stays NaN: the ordered compare is false for it), as relu.
inline __m512 relu_ps(__m512 v) {
  const __m512 z = _mm512_setzero_ps();
  return _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, z, _CMP_LT_OQ), z);
}

// y (=) A^T M A + bias for every tile, M [16][K][T], then relu when asked (the conv2d_fwd
// epilogue); outputs beyond P, Q are not written.
void output_transform(const float* M, const Geo& g, const Chunk& ch, const float* bias, bool relu,
                      float* y, bool team) {
  const int64_t T = ch.tiles(g), xi_stride = g.K * T;
#pragma omp parallel for schedule(static) if (team)
  for (int64_t k = 0; k < g.K; ++k) {
    const __m512 vb = _mm512_set1_ps(bias ? bias[k] : 0.0f);
    for (int64_t n = 0; n < ch.nb; ++n) {
      float* yp = y + ((ch.n0 + n) * g.K + k) * g.P * g.Q;
      for (int64_t i = ch.i0; i < ch.i1; ++i) {
        const float* src = M + k * T + ch.first_tile(g, n, i);
        for (int64_t j0 = 0; j0 < g.TW; j0 += 16) {
          const __mmask16 m = lanes(0, g.TW - j0);
          __m512 t[2][4];  // A^T M: rows 0 (m0 + m1 + m2) and 1 (m1 - m2 - m3)
          for (int b = 0; b < 4; ++b) {
            const __m512 m0 = _mm512_maskz_loadu_ps(m, src + b * xi_stride + j0);
            const __m512 m1 = _mm512_maskz_loadu_ps(m, src + (4 + b) * xi_stride + j0);
            const __m512 m2 = _mm512_maskz_loadu_ps(m, src + (8 + b) * xi_stride + j0);
            const __m512 m3 = _mm512_maskz_loadu_ps(m, src + (12 + b) * xi_stride + j0);
            t[0][b] = _mm512_add_ps(_mm512_add_ps(m0, m1), m2);
            t[1][b] = _mm512_sub_ps(_mm512_sub_ps(m1, m2), m3);
          }
          for (int r = 0; r < 2 && 2 * i + r < g.P; ++r) {
            __m512 y0 = _mm512_add_ps(_mm512_add_ps(t[r][0], t[r][1]), t[r][2]);
            __m512 y1 = _mm512_sub_ps(_mm512_sub_ps(t[r][1], t[r][2]), t[r][3]);
            y0 = _mm512_add_ps(y0, vb);
            y1 = _mm512_add_ps(y1, vb);
            if (relu) {
              y0 = relu_ps(y0);
              y1 = relu_ps(y1);
            }
            put_pairs(yp + (2 * i + r) * g.Q, g.Q, 2 * j0, y0, y1, false);
          }
        }
      }
    }
  }
}

// dM[xi][k][t] = (A dY A^T)[xi] of every tile's 2x2 output gradient (0 beyond P, Q).
void grad_output_transform(const float* dy, const Geo& g, const Chunk& ch, float* dM, bool team) {
  const int64_t T = ch.tiles(g), xi_stride = g.K * T;
#pragma omp parallel for schedule(static) if (team)
  for (int64_t k = 0; k < g.K; ++k)
    for (int64_t n = 0; n < ch.nb; ++n) {
      const float* dp = dy + ((ch.n0 + n) * g.K + k) * g.P * g.Q;
      for (int64_t i = ch.i0; i < ch.i1; ++i) {
        float* dst = dM + k * T + ch.first_tile(g, n, i);
        for (int64_t j0 = 0; j0 < g.TW; j0 += 16) {
          __m512 e[2], o[2];  // dY rows 0 and 1, columns 0 (e) and 1 (o)
          for (int r = 0; r < 2; ++r) {
            if (2 * i + r < g.P) {
              load_pairs(dp + (2 * i + r) * g.Q, g.Q, 2 * j0, e[r], o[r]);
            } else {
              e[r] = o[r] = _mm512_setzero_ps();
            }
          }
          // A dY: rows g0, g0 + g1, g0 - g1, -g1; then each row (a, b) times A^T: a, a+b, a-b, -b.
          const __m512 zero = _mm512_setzero_ps();
          const __m512 te[4] = {e[0], _mm512_add_ps(e[0], e[1]), _mm512_sub_ps(e[0], e[1]),
                                _mm512_sub_ps(zero, e[1])};
          const __m512 to[4] = {o[0], _mm512_add_ps(o[0], o[1]), _mm512_sub_ps(o[0], o[1]),
                                _mm512_sub_ps(zero, o[1])};
          const __mmask16 m = lanes(0, g.TW - j0);
          for (int a = 0; a < 4; ++a) {
            float* out = dst + 4 * a * xi_stride + j0;
            _mm512_mask_storeu_ps(out, m, te[a]);
            _mm512_mask_storeu_ps(out + xi_stride, m, _mm512_add_ps(te[a], to[a]));
            _mm512_mask_storeu_ps(out + 2 * xi_stride, m, _mm512_sub_ps(te[a], to[a]));
            _mm512_mask_storeu_ps(out + 3 * xi_stride, m, _mm512_sub_ps(zero, to[a]));
          }
        }
      }
    }
}

// dx += B dV B^T of every tile at its patch (neighbouring patches overlap by 2 rows/columns: each
// adds in turn, tiles in order, one thread per channel plane).
void grad_input_transform(const float* dV, const Geo& g, const Chunk& ch, float* dx, bool team) {
  const int64_t T = ch.tiles(g), plane = g.H * g.W, xi_stride = g.C * T;
#pragma omp parallel for schedule(static) if (team)
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t n = 0; n < ch.nb; ++n) {
      float* xp = dx + ((ch.n0 + n) * g.C + c) * plane;
      for (int64_t i = ch.i0; i < ch.i1; ++i) {
        const float* src = dV + c * T + ch.first_tile(g, n, i);
        for (int64_t j0 = 0; j0 < g.TW; j0 += 16) {
          const __mmask16 m = lanes(0, g.TW - j0);
          __m512 v[4][4];
          for (int a = 0; a < 4; ++a)
            for (int b = 0; b < 4; ++b)
              v[a][b] = _mm512_maskz_loadu_ps(m, src + (4 * a + b) * xi_stride + j0);
          // u = B v (rows): v0, v1 - v2 + v3, v1 + v2 - v0, -v3; then each row times B^T alike.
          const __m512 zero = _mm512_setzero_ps();
          __m512 u[4][4];
          for (int b = 0; b < 4; ++b) {
            u[0][b] = v[0][b];
            u[1][b] = _mm512_add_ps(_mm512_sub_ps(v[1][b], v[2][b]), v[3][b]);
            u[2][b] = _mm512_sub_ps(_mm512_add_ps(v[1][b], v[2][b]), v[0][b]);
            u[3][b] = _mm512_sub_ps(zero, v[3][b]);
          }
          for (int r = 0; r < 4; ++r) {
            const int64_t ih = 2 * i - g.pt + r;
            if (ih < 0 || ih >= g.H) continue;
            const __m512 d0 = u[r][0];
            const __m512 d1 = _mm512_add_ps(_mm512_sub_ps(u[r][1], u[r][2]), u[r][3]);
            const __m512 d2 = _mm512_sub_ps(_mm512_add_ps(u[r][1], u[r][2]), u[r][0]);
            const __m512 d3 = _mm512_sub_ps(zero, u[r][3]);
            float* row = xp + ih * g.W;
            put_pairs(row, g.W, 2 * j0 - g.pl, d0, d1, true);
            put_pairs(row, g.W, 2 * j0 - g.pl + 2, d2, d3, true);
          }
        }
      }
    }
}

// U[xi][k][c] = (G g G^T)[xi] of w [K, C, 3, 3].
void weight_transform(const float* w, int64_t K, int64_t C, float* U, bool team) {
#pragma omp parallel for schedule(static) if (team)
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < C; ++c) {
      const float* f = w + (k * C + c) * 9;
      float gg[4][3];  // G g: rows g0, (g0 + g1 + g2) / 2, (g0 - g1 + g2) / 2, g2
      for (int s = 0; s < 3; ++s) {
        gg[0][s] = f[s];
        gg[1][s] = 0.5f * (f[s] + f[3 + s] + f[6 + s]);
        gg[2][s] = 0.5f * (f[s] - f[3 + s] + f[6 + s]);
        gg[3][s] = f[6 + s];
      }
      for (int a = 0; a < 4; ++a) {
        const float r0 = gg[a][0], r1 = gg[a][1], r2 = gg[a][2];
        const float u[4] = {r0, 0.5f * (r0 + r1 + r2), 0.5f * (r0 - r1 + r2), r2};
        for (int b = 0; b < 4; ++b) U[((4 * a + b) * K + k) * C + c] = u[b];
      }
    }
}

// dw [K, C, 3, 3] += G^T dU G.
void weight_grad_transform(const float* dU, int64_t K, int64_t C, float* dw) {
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < C; ++c) {
      float u[4][4];
      for (int xi = 0; xi < 16; ++xi) u[xi / 4][xi % 4] = dU[(xi * K + k) * C + c];
      float e[3][4];  // G^T u: rows u0 + (u1 + u2) / 2, (u1 - u2) / 2, (u1 + u2) / 2 + u3
      for (int b = 0; b < 4; ++b) {
        e[0][b] = u[0][b] + 0.5f * (u[1][b] + u[2][b]);
        e[1][b] = 0.5f * (u[1][b] - u[2][b]);
        e[2][b] = 0.5f * (u[1][b] + u[2][b]) + u[3][b];
      }
      float* o = dw + (k * C + c) * 9;
      for (int r = 0; r < 3; ++r) {
        o[3 * r] += e[r][0] + 0.5f * (e[r][1] + e[r][2]);
        o[3 * r + 1] += 0.5f * (e[r][1] - e[r][2]);
        o[3 * r + 2] += 0.5f * (e[r][1] + e[r][2]) + e[r][3];
      }
    }
}

// Runs body(chunk, team) for the chunks of every block (blocks over the team when there are
// enough; `team`: the transforms may use the team themselves).
template <class F>
void for_chunks(const Geo& g, const Plan& pl, bool ordered, F&& body) {
  const bool team = !blocks_parallel(pl.blocks, ordered) && !omp_in_parallel();
  for_blocks(pl.blocks, ordered, [&](int64_t b, int tid) {
    Chunk ch;
    ch.n0 = b * pl.images;
    ch.nb = std::min(pl.images, g.N - ch.n0);
    for (ch.i0 = 0; ch.i0 < g.TH; ch.i0 += pl.trows) {
      ch.i1 = std::min(g.TH, ch.i0 + pl.trows);
      body(ch, tid, team);
    }
  });
}
template <class F>
void for_chunks(const Geo& g, const Plan& pl, F&& body) {
  for_chunks(g, pl, false, std::forward<F>(body));
}

// The largest chunk's tile count (buffer sizes).
int64_t max_tiles(const Geo& g, const Plan& pl) { return pl.images * pl.trows * g.TW; }

}  // namespace

void conv2d_fwd_cpu_winograd(const Conv2dFwdArgs& a) {
  check_conv2d_fwd_args(a);
  const Geo g = make_geo(a.x, a.y, a.p);
  const Plan pl = plan_of(g);
  const int64_t Tm = max_tiles(g, pl);
  const float* x = a.x.data<float>();
  const float* bias = a.bias.defined() ? a.bias.data<float>() : nullptr;
  float* y = a.y.data<float>();
  // U in the calling thread's slot 2; the blocks use slots 0 and 1 of their threads.
  float* U = thread_buffer(2, size_t(16 * g.K * g.C));
  weight_transform(a.w.data<float>(), g.K, g.C, U, !omp_in_parallel());
  for_chunks(g, pl, [&](const Chunk& ch, int, bool team) {
    float* V = thread_buffer(0, size_t(16 * g.C * Tm));
    float* M = thread_buffer(1, size_t(16 * g.K * Tm));
    const int64_t T = ch.tiles(g);
    input_transform(x, g, ch, V, team);
    for (int64_t xi = 0; xi < 16; ++xi)  // M[xi] [K, T] = U[xi] [K, C] . V[xi] [C, T]
      sgemm_avx512(false, false, g.K, T, g.C, 1.0f, U + xi * g.K * g.C, g.C, V + xi * g.C * T, T,
                   0.0f, M + xi * g.K * T, T);
    output_transform(M, g, ch, bias, a.relu && !a.residual.defined(), y, team);
  });
  // A residual (ResNet's shortcut; its last conv is 1x1, not this variant's): added, then the
  // relu, in a pass of its own.
  if (a.residual.defined()) {
    const float* r = a.residual.data<float>();
    const int64_t n = a.y.numel();
#pragma omp parallel for schedule(static) if (n > (int64_t(1) << 15) && !omp_in_parallel())
    for (int64_t i = 0; i < n; ++i) {
      const float v = y[i] + r[i];
      y[i] = a.relu && v < 0.0f ? 0.0f : v;
    }
  }
}

void conv2d_bwd_data_cpu_winograd(const Conv2dBwdDataArgs& a) {
  check_conv2d_bwd_data_args(a);
  const Geo g = make_geo(a.dx, a.dy, a.p);
  const Plan pl = plan_of(g);
  const int64_t Tm = max_tiles(g, pl);
  const float* dy = a.dy.data<float>();
  float* dx = a.dx.data<float>();
  float* U = thread_buffer(2, size_t(16 * g.K * g.C));
  weight_transform(a.w.data<float>(), g.K, g.C, U, !omp_in_parallel());
  for_chunks(g, pl, [&](const Chunk& ch, int, bool team) {
    float* dM = thread_buffer(0, size_t(16 * g.K * Tm));
    float* dV = thread_buffer(1, size_t(16 * g.C * Tm));
    const int64_t T = ch.tiles(g);
    if (ch.i0 == 0)  // the block's first chunk: its images' dx start from 0
      std::memset(dx + ch.n0 * g.C * g.H * g.W, 0, size_t(ch.nb * g.C * g.H * g.W) * sizeof(float));
    grad_output_transform(dy, g, ch, dM, team);
    for (int64_t xi = 0; xi < 16; ++xi)  // dV[xi] [C, T] = U[xi]^T [C, K] . dM[xi] [K, T]
      sgemm_avx512(true, false, g.C, T, g.K, 1.0f, U + xi * g.K * g.C, g.C, dM + xi * g.K * T, T,
                   0.0f, dV + xi * g.C * T, T);
    grad_input_transform(dV, g, ch, dx, team);
  });
}

namespace {

// ordered: see conv2d_winograd.h (cpu.winograd_ordered).
void bwd_filter_winograd(const Conv2dBwdFilterArgs& a, bool ordered) {
  check_conv2d_bwd_filter_args(a);
  const Geo g = make_geo(a.x, a.dy, a.p);
  const Plan pl = plan_of(g, ordered);
  const int64_t Tm = max_tiles(g, pl), usize = 16 * g.K * g.C;
  const float* x = a.x.data<float>();
  const float* dy = a.dy.data<float>();
  // One dU per thread when the blocks run over the team, summed in thread order at the end.
  const int nt = blocks_parallel(pl.blocks, ordered) ? omp_get_max_threads() : 1;
  float* dU = thread_buffer(2, size_t(nt * usize));
  std::fill(dU, dU + nt * usize, 0.0f);
  for_chunks(g, pl, ordered, [&](const Chunk& ch, int tid, bool team) {
    float* V = thread_buffer(0, size_t(16 * g.C * Tm));
    float* dM = thread_buffer(1, size_t(16 * g.K * Tm));
    const int64_t T = ch.tiles(g);
    input_transform(x, g, ch, V, team);
    grad_output_transform(dy, g, ch, dM, team);
    float* acc = dU + tid * usize;
    for (int64_t xi = 0; xi < 16; ++xi)  // dU[xi] [K, C] += dM[xi] [K, T] . V[xi]^T [T, C]
      sgemm_avx512(false, true, g.K, g.C, T, 1.0f, dM + xi * g.K * T, T, V + xi * g.C * T, T, 1.0f,
                   acc + xi * g.K * g.C, g.C);
  });
  for (int t = 1; t < nt; ++t)
    for (int64_t i = 0; i < usize; ++i) dU[i] += dU[t * usize + i];
  weight_grad_transform(dU, g.K, g.C, a.dw.data<float>());
  if (a.dbias.defined()) conv2d_bias_grad_cpu(a.dy, a.dbias);
}

}  // namespace

void conv2d_bwd_filter_cpu_winograd(const Conv2dBwdFilterArgs& a) { bwd_filter_winograd(a, false); }
void conv2d_bwd_filter_cpu_winograd_ordered(const Conv2dBwdFilterArgs& a) {
  bwd_filter_winograd(a, true);
}

#pragma GCC pop_options

}  // namespace aim::kernels
