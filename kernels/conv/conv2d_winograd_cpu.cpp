// cpu.winograd, cpu.winograd4 and cpu.winograd_5x5: 3x3 stride-1 convolutions by Winograd's
// minimal filtering F(2x2, 3x3) and F(4x4, 3x3), 5x5 ones by F(2x2, 5x5) (Lavin & Gray, "Fast
// Algorithms for Convolutional Neural Networks", 2016); the math and the transposed transforms of
// the two gradients are written out in kernels/conv/README.md.
//
// Every m x m output tile (i, j) (m = 2 or 4; rows m*i .. m*i + m-1, columns likewise) reads the
// a x a input patch d (a = m + r - 1 for r x r filters) at rows m*i - pt + {0..a-1}, columns
// m*j - pl + {0..a-1}, and
//     y_tile = A^T [ (G g G^T) (.) (B^T d B) ] A          (a x a element-wise product, summed over
//     c)
// i.e. a^2 multiplications per tile and (c, k) instead of the direct r^2 m^2 (F(2x2, 3x3): 16 for
// 36, F(4x4, 3x3): 36 for 144, F(2x2, 5x5): 36 for 100): for each of the a^2 positions xi of the
// transformed tile one GEMM M[xi] [K, T] = U[xi] [K, C] . V[xi] [C, T] over a block of T tiles. The
// gradients are the transposes of the same linear maps:
//     bwd_data    dM = A dY A^T,  dV[xi] = U[xi]^T . dM[xi],  dx += B dV B^T (patches overlap:
//                 added)
//     bwd_filter  dU[xi] += dM[xi] . V[xi]^T over all tiles,  dw += G^T dU G
// so all three ops are exact convolutions up to f32 rounding (F(2x2): coefficients 1 and 1/2;
// F(4x4) and F(2x2, 5x5): up to 8 and 1/24, ~10x F(2x2)'s rounding error), tested against
// cpu.ref by the registry test. F(4x4, 3x3) and F(2x2, 5x5) share the six points 0, ±1, ±2, inf
// and so the input transform B (B6) and the transforms' loops (SixPoint).
//
// Blocks: as cpu.im2col, several whole images per block when an image has fewer than the target
// tile count (CRNN's 4x25 layer: 26 tiles), else chunks of tile rows of one image; blocks over the
// OpenMP team (GEMMs single-threaded inside), or one after another with the GEMMs and the
// transforms (over channels) using the team. The transforms work on 16 tiles of a tile row at
// once in AVX-512 registers (lane = tile): F(2x2) splits a row of 32 input columns into its even
// and odd columns (one permute each), the patch columns 0/1 of 16 tiles (2/3 from the row shifted
// by 2); F(4x4) splits 64 columns into their four residues mod 4 (two permutes and a blend each),
// the patch columns 0..3, and takes columns 4/5 as residues 0/1 moved one lane down; F(2x2, 5x5)
// takes its six patch columns as three even/odd pairs of the row shifted by 0, 2 and 4. Edges
// (padding, P or Q not a multiple of m, partial tile groups) are lane masks: nothing outside the
// tensors is read or written.
//
// The profiler counts a convolution's direct FLOPs (kernels/conv/conv2d.h cost model) for every
// variant, so the Winograd variants' GFLOP/s is the direct-equivalent rate (as cuDNN's Winograd is
// usually reported).
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/conv/conv2d_winograd.h"
#include "kernels/conv/cpu_blocks.h"
#include "kernels/math_mode.h"
#include "kernels/matmul/gemm_avx512.h"
#include "tensor/check.h"

namespace aim::kernels {

namespace {

std::string supports(const Tensor& w, const Conv2dParams& p, const char* name, int64_t r) {
  if (w.size(2) != r || w.size(3) != r)
    return str(name, " takes ", r, "x", r, " kernels, got ", w.size(2), "x", w.size(3));
  if (p.stride_h != 1 || p.stride_w != 1)
    return str(name, " takes stride 1, got ", p.stride_h, ",", p.stride_w);
  if (p.dil_h != 1 || p.dil_w != 1)
    return str(name, " takes dilation 1, got ", p.dil_h, ",", p.dil_w);
  if (p.groups != 1) return str(name, " takes one group, got ", p.groups);
  if (!cpu_has_avx512()) return "needs an AVX-512 CPU (avx512f/bw/dq/vl)";
  return "";
}

}  // namespace

std::string conv2d_winograd_supports(const Tensor& w, const Conv2dParams& p) {
  return supports(w, p, "F(2x2, 3x3)", 3);
}
std::string conv2d_winograd4_supports(const Tensor& w, const Conv2dParams& p) {
  return supports(w, p, "F(4x4, 3x3)", 3);
}
std::string conv2d_winograd5x5_supports(const Tensor& w, const Conv2dParams& p) {
  return supports(w, p, "F(2x2, 5x5)", 5);
}

// Checked on every default dispatch of a convolution: plain comparisons, no message built.
int conv2d_winograd_tile(const Tensor& w, const Conv2dParams& p, int64_t N, int64_t P, int64_t Q) {
  const int64_t r = w.size(2);
  const bool ok = w.dtype() == DType::f32 && (r == 3 || r == 5) && w.size(3) == r &&
                  p.stride_h == 1 && p.stride_w == 1 && p.dil_h == 1 && p.dil_w == 1 &&
                  p.groups == 1 && cpu_has_avx512() && w.size(0) >= 16 && w.size(1) >= 16 &&
                  P >= 2 && Q >= 2;
  const int most = winograd_tile();  // --winograd (kernels/math_mode.h)
  if (!ok || most == 0) return 0;
  // F(2x2, 5x5): 36 products per 2x2 tile for the direct 100; its coefficients (4, 5, 16/24) round
  // as F(4x4, 3x3)'s, so --winograd 2 (the ~1e-4 mode) leaves 5x5 to im2col. From 16x16 outputs:
  // GoogLeNet's 14x14 maps measured even with im2col, its 7x7 ones 1.2x slower, 28x28 1.6x faster.
  if (r == 5) return most < 4 || P * Q < 256 ? 0 : kWinograd5x5;
  if (most < 4) return 2;
  // F(4x4) computes 36 products per 4x4 tile, F(2x2) 16 per 2x2 tile: the padded tiles' ratio,
  // and F(4x4)'s tiles in the batch (its fixed costs per block: the transformed filters packed per
  // GEMM, the filter gradient's accumulator, are paid again for every block of tiles). A fixed
  // count (96 per thread on this 2-core machine), not one per thread: the choice, and so the
  // bits, must not depend on --threads (docs/determinism.md).
  const int64_t t4 = ((P + 3) / 4) * ((Q + 3) / 4), t2 = ((P + 1) / 2) * ((Q + 1) / 2);
  const bool fewer_products = 36 * t4 <= 0.7 * 16 * t2;
  const bool enough_tiles = N * t4 >= 192;
  return fewer_products && enough_tiles ? 4 : 2;
}

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,fma")

namespace {

using conv_cpu::blocks_parallel;
using conv_cpu::for_blocks;
using conv_cpu::thread_buffer;

struct Geo {
  int64_t N, C, H, W, K, P, Q, pt, pl;
  int64_t TH, TW;  // tile rows and columns: ceil(P / m), ceil(Q / m)
};

Geo make_geo(const Tensor& x, const Tensor& y, const Conv2dParams& p, int m) {
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
  g.TH = (g.P + m - 1) / m;
  g.TW = (g.Q + m - 1) / m;
  return g;
}

struct Plan {
  int64_t images = 1;  // images per block
  int64_t trows = 1;   // tile rows per chunk (TH when images > 1)
  int64_t blocks = 1;
};

// `target`: tiles per GEMM (its column or reduction extent). `ordered`: the blocks as for one
// thread, whatever the team (the *_ordered variants). Images of at most 4 tiles are grouped as for
// one thread too: a chunk of them can make a GEMM of N <= 4 tiles, which sgemm_avx512 computes by
// its dot-product path (other rounding).
Plan plan_of(const Geo& g, int64_t target, bool ordered = false) {
  Plan pl;
  const int64_t per_image = g.TH * g.TW;
  const int nt = ordered || per_image <= 4 || omp_in_parallel() ? 1 : omp_get_max_threads();
  if (per_image < target) {
    const int64_t want = (target + per_image - 1) / per_image;
    pl.images = conv_cpu::balanced_images(g.N, want, nt);
  }
  pl.trows = pl.images > 1 ? g.TH : std::max<int64_t>(1, std::min<int64_t>(g.TH, target / g.TW));
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
// t = (n * (i1 - i0) + i - i0) * TW + j. Transformed tensors are [xis][rows][T] (xi-major).
struct Chunk {
  int64_t n0, nb, i0, i1;
  int64_t tiles(const Geo& g) const { return nb * (i1 - i0) * g.TW; }
  int64_t first_tile(const Geo& g, int64_t n, int64_t i) const {
    return (n * (i1 - i0) + i - i0) * g.TW;
  }
};

// Runs body(p, n, i, j0) for every channel plane p < planes (over the team when `team`), image n
// of the chunk, its tile row i and each group of 16 tiles from column j0: the loop nest of every
// transform of the input, output and their gradients.
template <class F>
void for_tile_groups(const Geo& g, const Chunk& ch, int64_t planes, bool team, F&& body) {
#pragma omp parallel for schedule(static) if (team)
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t n = 0; n < ch.nb; ++n)
      for (int64_t i = ch.i0; i < ch.i1; ++i)
        for (int64_t j0 = 0; j0 < g.TW; j0 += 16) body(p, n, i, j0);
}

// x < 0 ? 0 : x per lane (NaN stays NaN: the ordered compare is false for it), as relu.
inline __m512 relu_ps(__m512 v) {
  const __m512 z = _mm512_setzero_ps();
  return _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, z, _CMP_LT_OQ), z);
}

// F(2x2, 3x3): the transforms, the tile and the tiles per block (the drivers below take F23 or
// F43).
struct F23 {
  static constexpr int m = 2, xis = 16;         // output tile m x m, (m + 2)^2 GEMMs
  static constexpr int taps = 9;                // 3x3 filters
  static constexpr int64_t target_tiles = 512;  // tiles per GEMM

  // V[xi][c][t] = (B^T d B)[xi] of every tile's input patch d (x [N, C, H, W]).
  static void input_transform(const float* x, const Geo& g, const Chunk& ch, float* V, bool team) {
    const int64_t T = ch.tiles(g), plane = g.H * g.W, xi_stride = g.C * T;
    for_tile_groups(g, ch, g.C, team, [&](int64_t c, int64_t n, int64_t i, int64_t j0) {
      const float* xp = x + ((ch.n0 + n) * g.C + c) * plane;
      float* dst = V + c * T + ch.first_tile(g, n, i);
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
    });
  }

  // y (=) A^T M A + bias for every tile, M [16][K][T], then relu when asked (the conv2d_fwd
  // epilogue); outputs beyond P, Q are not written.
  static void output_transform(const float* M, const Geo& g, const Chunk& ch, const float* bias,
                               bool relu, float* y, bool team) {
    const int64_t T = ch.tiles(g), xi_stride = g.K * T;
    for_tile_groups(g, ch, g.K, team, [&](int64_t k, int64_t n, int64_t i, int64_t j0) {
      const __m512 vb = _mm512_set1_ps(bias ? bias[k] : 0.0f);
      float* yp = y + ((ch.n0 + n) * g.K + k) * g.P * g.Q;
      const float* src = M + k * T + ch.first_tile(g, n, i);
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
    });
  }

  // dM[xi][k][t] = (A dY A^T)[xi] of every tile's 2x2 output gradient (0 beyond P, Q).
  static void grad_output_transform(const float* dy, const Geo& g, const Chunk& ch, float* dM,
                                    bool team) {
    const int64_t T = ch.tiles(g), xi_stride = g.K * T;
    for_tile_groups(g, ch, g.K, team, [&](int64_t k, int64_t n, int64_t i, int64_t j0) {
      const float* dp = dy + ((ch.n0 + n) * g.K + k) * g.P * g.Q;
      float* dst = dM + k * T + ch.first_tile(g, n, i);
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
    });
  }

  // dx += B dV B^T of every tile at its patch (neighbouring patches overlap by 2 rows/columns: each
  // adds in turn, tiles in order, one thread per channel plane).
  static void grad_input_transform(const float* dV, const Geo& g, const Chunk& ch, float* dx,
                                   bool team) {
    const int64_t T = ch.tiles(g), plane = g.H * g.W, xi_stride = g.C * T;
    for_tile_groups(g, ch, g.C, team, [&](int64_t c, int64_t n, int64_t i, int64_t j0) {
      float* xp = dx + ((ch.n0 + n) * g.C + c) * plane;
      const float* src = dV + c * T + ch.first_tile(g, n, i);
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
    });
  }

  // u[xi] = (G g G^T)[xi] of the 3x3 filter g (f[3 r + s]), 16 filters at once (lane = c).
  static void filter_tile(const __m512* f, __m512* u) {
    __m512 gg[4][3];  // G g: rows g0, (g0 + g1 + g2) / 2, (g0 - g1 + g2) / 2, g2
    for (int s = 0; s < 3; ++s) {
      gg[0][s] = f[s];
      gg[1][s] = 0.5f * (f[s] + f[3 + s] + f[6 + s]);
      gg[2][s] = 0.5f * (f[s] - f[3 + s] + f[6 + s]);
      gg[3][s] = f[6 + s];
    }
    for (int a = 0; a < 4; ++a) {
      const __m512 r0 = gg[a][0], r1 = gg[a][1], r2 = gg[a][2];
      u[4 * a] = r0;
      u[4 * a + 1] = 0.5f * (r0 + r1 + r2);
      u[4 * a + 2] = 0.5f * (r0 - r1 + r2);
      u[4 * a + 3] = r2;
    }
  }

  // o[3 r + s] = (G^T u G)[r][s] of the transformed gradient u[xi].
  static void filter_grad_tile(const __m512* u, __m512* o) {
    __m512 e[3][4];  // G^T u: rows u0 + (u1 + u2) / 2, (u1 - u2) / 2, (u1 + u2) / 2 + u3
    for (int b = 0; b < 4; ++b) {
      e[0][b] = u[b] + 0.5f * (u[4 + b] + u[8 + b]);
      e[1][b] = 0.5f * (u[4 + b] - u[8 + b]);
      e[2][b] = 0.5f * (u[4 + b] + u[8 + b]) + u[12 + b];
    }
    for (int r = 0; r < 3; ++r) {
      o[3 * r] = e[r][0] + 0.5f * (e[r][1] + e[r][2]);
      o[3 * r + 1] = 0.5f * (e[r][1] - e[r][2]);
      o[3 * r + 2] = 0.5f * (e[r][1] + e[r][2]) + e[r][3];
    }
  }

};  // F23

inline __m512 splat(float v) { return _mm512_set1_ps(v); }

// B^T d B over the six points 0, 1, -1, 2, -2 and infinity, shared by F(4x4, 3x3) and F(2x2, 5x5):
// in Toom-Cook's construction B depends on the points alone (G and A^T on the filter and tile
// sizes), so both 6x6 input patches transform alike.
struct B6 {
  // o = B^T d (6 values): 4d0 - 5d2 + d4, -4d1 - 4d2 + d3 + d4, 4d1 - 4d2 - d3 + d4,
  // -2d1 - d2 + 2d3 + d4, 2d1 - d2 - 2d3 + d4, 4d1 - 5d3 + d5.
  static void bt_mul(const __m512* d, __m512* o) {
    const __m512 a = _mm512_fnmadd_ps(splat(4), d[2], d[4]);  // d4 - 4d2
    const __m512 b = _mm512_fnmadd_ps(splat(4), d[1], d[3]);  // d3 - 4d1
    const __m512 c = _mm512_sub_ps(d[4], d[2]);
    const __m512 e = _mm512_mul_ps(splat(2), _mm512_sub_ps(d[3], d[1]));
    o[0] = _mm512_fmadd_ps(splat(4), d[0], _mm512_fnmadd_ps(splat(5), d[2], d[4]));
    o[1] = _mm512_add_ps(a, b);
    o[2] = _mm512_sub_ps(a, b);
    o[3] = _mm512_add_ps(c, e);
    o[4] = _mm512_sub_ps(c, e);
    o[5] = _mm512_fmadd_ps(splat(4), d[1], _mm512_fnmadd_ps(splat(5), d[3], d[5]));
  }

  // o = B v (the transpose of bt): 4v0, 4(v5 - v1 + v2) - 2(v3 - v4), -5v0 - 4(v1 + v2) - (v3 +
  // v4), (v1 - v2) + 2(v3 - v4) - 5v5, v0 + v1 + v2 + v3 + v4, v5.
  static void b_mul(const __m512* v, __m512* o) {
    const __m512 p = _mm512_sub_ps(v[1], v[2]), s = _mm512_add_ps(v[1], v[2]);
    const __m512 q = _mm512_sub_ps(v[3], v[4]), t = _mm512_add_ps(v[3], v[4]);
    o[0] = _mm512_mul_ps(splat(4), v[0]);
    o[1] = _mm512_fnmadd_ps(splat(2), q, _mm512_mul_ps(splat(4), _mm512_sub_ps(v[5], p)));
    o[2] = _mm512_sub_ps(_mm512_fnmadd_ps(splat(4), s, _mm512_mul_ps(splat(-5), v[0])), t);
    o[3] = _mm512_fnmadd_ps(splat(5), v[5], _mm512_fmadd_ps(splat(2), q, p));
    o[4] = _mm512_add_ps(_mm512_add_ps(v[0], s), t);
    o[5] = v[5];
  }

  // The first half of the input gradient's transform: u = B dV of 16 tiles' transformed gradients
  // (dV[6 r + col] at src + (6 r + col) xi_stride + j0, lanes m); then B u[r] is patch row r.
  static void load_b(const float* src, int64_t xi_stride, int64_t j0, __mmask16 m,
                     __m512 (&u)[6][6]) {
    for (int col = 0; col < 6; ++col) {
      __m512 v[6], o[6];
      for (int r = 0; r < 6; ++r)
        v[r] = _mm512_maskz_loadu_ps(m, src + (6 * r + col) * xi_stride + j0);
      b_mul(v, o);
      for (int r = 0; r < 6; ++r) u[r][col] = o[r];
    }
  }

  // V[xi][c][t] = (B^T d B)[xi] of every tile's 6x6 input patch d (x [N, C, H, W]); F: the tile
  // (F43, F25) with its m and row loaders.
  template <class F>
  static void input_transform(const float* x, const Geo& g, const Chunk& ch, float* V, bool team) {
    const int64_t T = ch.tiles(g), plane = g.H * g.W, xi_stride = g.C * T;
    for_tile_groups(g, ch, g.C, team, [&](int64_t c, int64_t n, int64_t i, int64_t j0) {
      const float* xp = x + ((ch.n0 + n) * g.C + c) * plane;
      float* dst = V + c * T + ch.first_tile(g, n, i);
      __m512 h[6][6];  // h[r] = B^T applied to row r of 16 tiles' patches (d B)
      for (int r = 0; r < 6; ++r) {
        const int64_t ih = F::m * i - g.pt + r;
        if (ih < 0 || ih >= g.H) {
          for (int s = 0; s < 6; ++s) h[r][s] = _mm512_setzero_ps();
          continue;
        }
        __m512 d[6];
        F::load_patch_row(xp + ih * g.W, g.W, F::m * j0 - g.pl, d);
        bt_mul(d, h[r]);
      }
      const __mmask16 m = lanes(0, g.TW - j0);
      for (int col = 0; col < 6; ++col) {  // (B^T h) per column: V[6 r + col]
        const __m512 v[6] = {h[0][col], h[1][col], h[2][col], h[3][col], h[4][col], h[5][col]};
        __m512 o[6];
        bt_mul(v, o);
        for (int r = 0; r < 6; ++r)
          _mm512_mask_storeu_ps(dst + (6 * r + col) * xi_stride + j0, m, o[r]);
      }
    });
  }

  // y (=) A^T M A + bias for every tile, M [36][K][T], then relu when asked (the conv2d_fwd
  // epilogue); outputs beyond P, Q are not written.
  template <class F>
  static void output_transform(const float* M, const Geo& g, const Chunk& ch, const float* bias,
                               bool relu, float* y, bool team) {
    const int64_t T = ch.tiles(g), xi_stride = g.K * T;
    for_tile_groups(g, ch, g.K, team, [&](int64_t k, int64_t n, int64_t i, int64_t j0) {
      const __m512 vb = _mm512_set1_ps(bias ? bias[k] : 0.0f);
      float* yp = y + ((ch.n0 + n) * g.K + k) * g.P * g.Q;
      const float* src = M + k * T + ch.first_tile(g, n, i);
      const __mmask16 m = lanes(0, g.TW - j0);
      __m512 t[F::m][6];  // A^T M: its m rows
      for (int col = 0; col < 6; ++col) {
        __m512 v[6], o[F::m];
        for (int r = 0; r < 6; ++r)
          v[r] = _mm512_maskz_loadu_ps(m, src + (6 * r + col) * xi_stride + j0);
        F::at_mul(v, o);
        for (int r = 0; r < F::m; ++r) t[r][col] = o[r];
      }
      for (int r = 0; r < F::m && F::m * i + r < g.P; ++r) {
        __m512 o[F::m];
        F::at_mul(t[r], o);
        for (int s = 0; s < F::m; ++s) {
          o[s] = _mm512_add_ps(o[s], vb);
          if (relu) o[s] = relu_ps(o[s]);
        }
        F::put_tile_row(yp + (F::m * i + r) * g.Q, g.Q, F::m * j0, o);
      }
    });
  }

  // dM[xi][k][t] = (A dY A^T)[xi] of every tile's m x m output gradient (0 beyond P, Q).
  template <class F>
  static void grad_output_transform(const float* dy, const Geo& g, const Chunk& ch, float* dM,
                                    bool team) {
    const int64_t T = ch.tiles(g), xi_stride = g.K * T;
    for_tile_groups(g, ch, g.K, team, [&](int64_t k, int64_t n, int64_t i, int64_t j0) {
      const float* dp = dy + ((ch.n0 + n) * g.K + k) * g.P * g.Q;
      float* dst = dM + k * T + ch.first_tile(g, n, i);
      __m512 h[F::m][6];  // h[r] = A applied to row r of 16 tiles' dY (dY A^T)
      for (int r = 0; r < F::m; ++r) {
        __m512 d[F::m];
        if (F::m * i + r < g.P) {
          F::load_tile_row(dp + (F::m * i + r) * g.Q, g.Q, F::m * j0, d);
        } else {
          for (int s = 0; s < F::m; ++s) d[s] = _mm512_setzero_ps();
        }
        F::a_mul(d, h[r]);
      }
      const __mmask16 m = lanes(0, g.TW - j0);
      for (int col = 0; col < 6; ++col) {
        __m512 v[F::m], o[6];
        for (int r = 0; r < F::m; ++r) v[r] = h[r][col];
        F::a_mul(v, o);
        for (int r = 0; r < 6; ++r)
          _mm512_mask_storeu_ps(dst + (6 * r + col) * xi_stride + j0, m, o[r]);
      }
    });
  }

  // u[6 a + b] = (G g G^T)[a][b] of the r x r filter g (f[r a + b]), 16 filters at once (F::gmul:
  // G times r values at a stride).
  template <class F>
  static void filter_tile(const __m512* f, __m512* u) {
    constexpr int r = F::r;
    __m512 gg[6][r];  // G g
    for (int s = 0; s < r; ++s) {
      __m512 o[6];
      F::gmul(f + s, r, o);
      for (int a = 0; a < 6; ++a) gg[a][s] = o[a];
    }
    for (int a = 0; a < 6; ++a) F::gmul(gg[a], 1, u + 6 * a);
  }

  // o[r a + b] = (G^T u G)[a][b] of the transformed gradient u[6 a + b] (F::gtmul: G^T times 6
  // values at a stride).
  template <class F>
  static void filter_grad_tile(const __m512* u, __m512* o) {
    constexpr int r = F::r;
    __m512 e[r][6];  // G^T u
    for (int s = 0; s < 6; ++s) {
      __m512 v[r];
      F::gtmul(u + s, 6, v);
      for (int a = 0; a < r; ++a) e[a][s] = v[a];
    }
    for (int a = 0; a < r; ++a) F::gtmul(e[a], 1, o + r * a);
  }
};

// The tiles on B6 (F43, F25) take their shared transforms from here (F: the tile, with its m, r,
// row loaders, A, G and their transposes).
template <class F>
struct SixPoint {
  static void input_transform(const float* x, const Geo& g, const Chunk& ch, float* V, bool team) {
    B6::input_transform<F>(x, g, ch, V, team);
  }
  static void output_transform(const float* M, const Geo& g, const Chunk& ch, const float* bias,
                               bool relu, float* y, bool team) {
    B6::output_transform<F>(M, g, ch, bias, relu, y, team);
  }
  static void grad_output_transform(const float* dy, const Geo& g, const Chunk& ch, float* dM,
                                    bool team) {
    B6::grad_output_transform<F>(dy, g, ch, dM, team);
  }
  static void filter_tile(const __m512* f, __m512* u) { B6::filter_tile<F>(f, u); }
  static void filter_grad_tile(const __m512* u, __m512* o) { B6::filter_grad_tile<F>(u, o); }
};

// F(4x4, 3x3).
struct F43 : SixPoint<F43> {
  static constexpr int m = 4, r = 3, xis = 36, taps = r * r;
  // Tiles hold 4x F(2x2)'s outputs: half as many per GEMM keep the buffers near F(2x2)'s.
  static constexpr int64_t target_tiles = 256;

  // Lane l of idx(s): (4l + s) mod 32, the column of tile l's residue s within a pair of vectors.
  static __m512i quad_index(int s) {
    return _mm512_add_epi32(
        _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28),
        _mm512_set1_epi32(s));
  }

  // The vector whose lane l is v[l + 1] (lane 15: next[0]).
  static __m512 next_lane(__m512 v, __m512 next) {
    const __m512i idx = _mm512_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
    return _mm512_permutex2var_ps(v, idx, next);
  }

  // The vector whose lane l is v[l - 1] (lane 0: 0).
  static __m512 prev_lane(__m512 v) {
    const __m512i idx = _mm512_setr_epi32(0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14);
    return _mm512_maskz_permutexvar_ps(0xFFFE, idx, v);
  }

  // d[s] lane l = row[c0 + 4l + s] for s < cols (4 or 6), l < 16; 0 outside [0, n).
  static void load_quads(const float* row, int64_t n, int64_t c0, __m512* d, int cols) {
    __m512 v[4];
    for (int q = 0; q < 4; ++q)
      v[q] = _mm512_maskz_loadu_ps(lanes(c0 + 16 * q, n), row + c0 + 16 * q);
    for (int s = 0; s < 4; ++s) {
      const __m512i idx = quad_index(s);
      d[s] = _mm512_mask_mov_ps(_mm512_permutex2var_ps(v[0], idx, v[1]), 0xFF00,
                                _mm512_permutex2var_ps(v[2], idx, v[3]));
    }
    if (cols > 4) {  // columns 4, 5 of tile l are columns 0, 1 of tile l + 1 (lane 15: c0 + 64, 65)
      const __m512 t = _mm512_maskz_loadu_ps(lanes(c0 + 64, n) & 0x3, row + c0 + 64);
      d[4] = next_lane(d[0], t);
      d[5] = next_lane(d[1], next_lane(t, t));
    }
  }

  // The inverse of load_quads (cols 4): the 64 columns c0 .. c0 + 63 from y[0..3], written (add =
  // false) or added to (add = true) where inside [0, n).
  static void put_quads(float* row, int64_t n, int64_t c0, const __m512* y, bool add) {
    const __m512i il = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i ih =
        _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    const __m512i ql = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11);
    const __m512i qh = _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15);
    // Pairs (y0, y1) and (y2, y3) of tiles 0..7 (lo) and 8..15 (hi), then the pairs of pairs.
    const __m512d lo01 = _mm512_castps_pd(_mm512_permutex2var_ps(y[0], il, y[1]));
    const __m512d hi01 = _mm512_castps_pd(_mm512_permutex2var_ps(y[0], ih, y[1]));
    const __m512d lo23 = _mm512_castps_pd(_mm512_permutex2var_ps(y[2], il, y[3]));
    const __m512d hi23 = _mm512_castps_pd(_mm512_permutex2var_ps(y[2], ih, y[3]));
    __m512 o[4] = {_mm512_castpd_ps(_mm512_permutex2var_pd(lo01, ql, lo23)),
                   _mm512_castpd_ps(_mm512_permutex2var_pd(lo01, qh, lo23)),
                   _mm512_castpd_ps(_mm512_permutex2var_pd(hi01, ql, hi23)),
                   _mm512_castpd_ps(_mm512_permutex2var_pd(hi01, qh, hi23))};
    for (int q = 0; q < 4; ++q) {
      const __mmask16 m = lanes(c0 + 16 * q, n);
      if (add) o[q] = _mm512_add_ps(o[q], _mm512_maskz_loadu_ps(m, row + c0 + 16 * q));
      _mm512_mask_storeu_ps(row + c0 + 16 * q, m, o[q]);
    }
  }

  // o = A^T m (4 values): m0 + m1 + m2 + m3 + m4, m1 - m2 + 2(m3 - m4), m1 + m2 + 4(m3 + m4),
  // m1 - m2 + 8(m3 - m4) + m5.
  static void at_mul(const __m512* m, __m512* o) {
    const __m512 p = _mm512_add_ps(m[1], m[2]), q = _mm512_sub_ps(m[1], m[2]);
    const __m512 r = _mm512_add_ps(m[3], m[4]), s = _mm512_sub_ps(m[3], m[4]);
    o[0] = _mm512_add_ps(_mm512_add_ps(m[0], p), r);
    o[1] = _mm512_fmadd_ps(splat(2), s, q);
    o[2] = _mm512_fmadd_ps(splat(4), r, p);
    o[3] = _mm512_add_ps(_mm512_fmadd_ps(splat(8), s, q), m[5]);
  }

  // o = A g (the transpose of at, 6 values): g0, g0 + g1 + g2 + g3, g0 - g1 + g2 - g3,
  // g0 + 2g1 + 4g2 + 8g3, g0 - 2g1 + 4g2 - 8g3, g3.
  static void a_mul(const __m512* g, __m512* o) {
    const __m512 e = _mm512_add_ps(g[0], g[2]), od = _mm512_add_ps(g[1], g[3]);
    const __m512 e4 = _mm512_fmadd_ps(splat(4), g[2], g[0]);
    const __m512 o8 = _mm512_fmadd_ps(splat(8), g[3], _mm512_mul_ps(splat(2), g[1]));
    o[0] = g[0];
    o[1] = _mm512_add_ps(e, od);
    o[2] = _mm512_sub_ps(e, od);
    o[3] = _mm512_add_ps(e4, o8);
    o[4] = _mm512_sub_ps(e4, o8);
    o[5] = g[3];
  }

  // The rows of the 6x6 family's transforms (B6::input_transform and the others): patch row d[0..5]
  // of 16 tiles from 64 columns split by residue; output row o[0..3] stored to 64 columns.
  static void load_patch_row(const float* row, int64_t n, int64_t c0, __m512* d) {
    load_quads(row, n, c0, d, 6);
  }
  static void load_tile_row(const float* row, int64_t n, int64_t c0, __m512* d) {
    load_quads(row, n, c0, d, 4);
  }
  static void put_tile_row(float* row, int64_t n, int64_t c0, const __m512* o) {
    put_quads(row, n, c0, o, false);
  }

  // dx += B dV B^T of every tile at its patch (neighbouring patches overlap by 2 rows/columns: each
  // adds in turn, tiles in order, one thread per channel plane).
  static void grad_input_transform(const float* dV, const Geo& g, const Chunk& ch, float* dx,
                                   bool team) {
    const int64_t T = ch.tiles(g), plane = g.H * g.W, xi_stride = g.C * T;
    const __m512i last = _mm512_setr_epi32(15, 31, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    for_tile_groups(g, ch, g.C, team, [&](int64_t c, int64_t n, int64_t i, int64_t j0) {
      float* xp = dx + ((ch.n0 + n) * g.C + c) * plane;
      const float* src = dV + c * T + ch.first_tile(g, n, i);
      __m512 u[6][6];  // B dV: its 6 rows
      B6::load_b(src, xi_stride, j0, lanes(0, g.TW - j0), u);
      const int64_t c0 = 4 * j0 - g.pl;
      for (int r = 0; r < 6; ++r) {
        const int64_t ih = 4 * i - g.pt + r;
        if (ih < 0 || ih >= g.H) continue;
        __m512 d[6];
        B6::b_mul(u[r], d);
        // Patch columns 4, 5 of tile l are columns 0, 1 of tile l + 1: added there (lane 0
        // gets 0), tile 15's at c0 + 64, 65.
        const __m512 q[4] = {_mm512_add_ps(d[0], prev_lane(d[4])),
                             _mm512_add_ps(d[1], prev_lane(d[5])), d[2], d[3]};
        float* row = xp + ih * g.W;
        put_quads(row, g.W, c0, q, true);
        const __mmask16 mt = lanes(c0 + 64, g.W) & 0x3;
        if (mt) {
          const __m512 tail = _mm512_permutex2var_ps(d[4], last, d[5]);
          _mm512_mask_storeu_ps(row + c0 + 64, mt,
                                _mm512_add_ps(tail, _mm512_maskz_loadu_ps(mt, row + c0 + 64)));
        }
      }
    });
  }

  // G's rows: 1/4 g0, -(g0 + g1 + g2) / 6, -(g0 - g1 + g2) / 6, g0 / 24 + g1 / 12 + g2 / 6,
  // g0 / 24 - g1 / 12 + g2 / 6, g2 (f[0], f[stride], f[2 stride] -> o[0..5]).
  static void gmul(const __m512* f, int stride, __m512* o) {
    const __m512 f0 = f[0], f1 = f[stride], f2 = f[2 * stride];
    o[0] = 0.25f * f0;
    o[1] = -(f0 + f1 + f2) / 6.0f;
    o[2] = -(f0 - f1 + f2) / 6.0f;
    o[3] = f0 / 24.0f + f1 / 12.0f + f2 / 6.0f;
    o[4] = f0 / 24.0f - f1 / 12.0f + f2 / 6.0f;
    o[5] = f2;
  }

  // G^T u (3 values from 6: u[0], u[stride], ..): u0 / 4 - (u1 + u2) / 6 + (u3 + u4) / 24,
  // (u2 - u1) / 6 + (u3 - u4) / 12, -(u1 + u2) / 6 + (u3 + u4) / 6 + u5.
  static void gtmul(const __m512* v, int stride, __m512* o) {
    __m512 u[6];
    for (int i = 0; i < 6; ++i) u[i] = v[i * stride];
    o[0] = 0.25f * u[0] - (u[1] + u[2]) / 6.0f + (u[3] + u[4]) / 24.0f;
    o[1] = (u[2] - u[1]) / 6.0f + (u[3] - u[4]) / 12.0f;
    o[2] = (u[3] + u[4] - u[1] - u[2]) / 6.0f + u[5];
  }
};  // F43

// F(2x2, 5x5): 2x2 output tiles from 6x6 input patches (rows 2i - pt + {0..5}) at a stride of 2,
// the input transform of F(4x4, 3x3) (B6) with this size's G and A^T (kernels/conv/README.md).
// Patch columns 2s, 2s + 1 of 16 tiles are load_pairs of the row shifted by 2s.
struct F25 : SixPoint<F25> {
  static constexpr int m = 2, r = 5, xis = 36, taps = r * r;
  // 36 transformed values per tile as F(4x4) but a quarter of its outputs: fewer tiles per block
  // keep M (36·K·T floats) nearer the caches (AlexNet's conv2, 64 -> 192 at 27x27, batch 16: 256
  // tiles 26.6 / 32.1 / 27.3 ms fwd / bwd_data / bwd_filter, 128 tiles 20.2 / 20.7 / 19.5 ms).
  static constexpr int64_t target_tiles = 128;

  // o = A^T v (2 values): v0 + v1 + v2 + v3 + v4, v1 - v2 + 2(v3 - v4) + v5.
  static void at_mul(const __m512* v, __m512* o) {
    const __m512 p = _mm512_add_ps(v[1], v[2]), q = _mm512_sub_ps(v[1], v[2]);
    const __m512 r = _mm512_add_ps(v[3], v[4]), s = _mm512_sub_ps(v[3], v[4]);
    o[0] = _mm512_add_ps(_mm512_add_ps(v[0], p), r);
    o[1] = _mm512_add_ps(_mm512_fmadd_ps(splat(2), s, q), v[5]);
  }

  // o = A g (the transpose of at, 6 values): g0, g0 + g1, g0 - g1, g0 + 2g1, g0 - 2g1, g1.
  static void a_mul(const __m512* g, __m512* o) {
    o[0] = g[0];
    o[1] = _mm512_add_ps(g[0], g[1]);
    o[2] = _mm512_sub_ps(g[0], g[1]);
    o[3] = _mm512_fmadd_ps(splat(2), g[1], g[0]);
    o[4] = _mm512_fnmadd_ps(splat(2), g[1], g[0]);
    o[5] = g[1];
  }

  static void load_patch_row(const float* row, int64_t n, int64_t c0, __m512* d) {
    for (int s = 0; s < 6; s += 2) load_pairs(row, n, c0 + s, d[s], d[s + 1]);
  }
  static void load_tile_row(const float* row, int64_t n, int64_t c0, __m512* d) {
    load_pairs(row, n, c0, d[0], d[1]);
  }
  static void put_tile_row(float* row, int64_t n, int64_t c0, const __m512* o) {
    put_pairs(row, n, c0, o[0], o[1], false);
  }

  // dx += B dV B^T of every tile at its patch (neighbouring patches overlap by 4 rows/columns: each
  // adds in turn, tiles in order, one thread per channel plane).
  static void grad_input_transform(const float* dV, const Geo& g, const Chunk& ch, float* dx,
                                   bool team) {
    const int64_t T = ch.tiles(g), plane = g.H * g.W, xi_stride = g.C * T;
    for_tile_groups(g, ch, g.C, team, [&](int64_t c, int64_t n, int64_t i, int64_t j0) {
      float* xp = dx + ((ch.n0 + n) * g.C + c) * plane;
      const float* src = dV + c * T + ch.first_tile(g, n, i);
      __m512 u[6][6];  // B dV: its 6 rows
      B6::load_b(src, xi_stride, j0, lanes(0, g.TW - j0), u);
      for (int r = 0; r < 6; ++r) {
        const int64_t ih = 2 * i - g.pt + r;
        if (ih < 0 || ih >= g.H) continue;
        __m512 d[6];
        B6::b_mul(u[r], d);
        float* row = xp + ih * g.W;
        for (int s = 0; s < 6; s += 2) put_pairs(row, g.W, 2 * j0 - g.pl + s, d[s], d[s + 1], true);
      }
    });
  }

  // G's rows (f[0], f[stride], .. f[4 stride] -> o[0..5]): g0 / 4, -(g0 + g1 + g2 + g3 + g4) / 6,
  // -(g0 - g1 + g2 - g3 + g4) / 6, (g0 + 2g1 + 4g2 + 8g3 + 16g4) / 24, (g0 - 2g1 + 4g2 - 8g3 +
  // 16g4) / 24, g4: the points' powers 0..4 scaled as F(4x4, 3x3)'s G.
  static void gmul(const __m512* f, int stride, __m512* o) {
    const __m512 f0 = f[0], f1 = f[stride], f2 = f[2 * stride], f3 = f[3 * stride],
                 f4 = f[4 * stride];
    const __m512 even = f0 + f2 + f4, odd = f1 + f3;
    const __m512 even2 = f0 + 4.0f * f2 + 16.0f * f4, odd2 = 2.0f * f1 + 8.0f * f3;
    o[0] = 0.25f * f0;
    o[1] = -(even + odd) / 6.0f;
    o[2] = -(even - odd) / 6.0f;
    o[3] = (even2 + odd2) / 24.0f;
    o[4] = (even2 - odd2) / 24.0f;
    o[5] = f4;
  }

  // G^T u (5 values from u[0], u[stride], .. u[5 stride]): with p = u1 + u2, q = u2 - u1,
  // s = u3 + u4, t = u3 - u4: u0 / 4 - p / 6 + s / 24, q / 6 + t / 12, (s - p) / 6,
  // q / 6 + t / 3, -p / 6 + 2s / 3 + u5.
  static void gtmul(const __m512* v, int stride, __m512* o) {
    const __m512 u0 = v[0], u5 = v[5 * stride];
    const __m512 p = v[stride] + v[2 * stride], q = v[2 * stride] - v[stride];
    const __m512 s = v[3 * stride] + v[4 * stride], t = v[3 * stride] - v[4 * stride];
    o[0] = 0.25f * u0 - p / 6.0f + s / 24.0f;
    o[1] = q / 6.0f + t / 12.0f;
    o[2] = (s - p) / 6.0f;
    o[3] = q / 6.0f + t / 3.0f;
    o[4] = 2.0f * s / 3.0f - p / 6.0f + u5;
  }
};  // F25

// U[xi][k][c] = (G g G^T)[xi] of w [K, C, r, r], 16 input channels at a time (lane = c): the
// r^2 taps of 16 filters gathered (stride r^2), 16 contiguous values stored per xi. (Per filter and
// scalar, this took a quarter of F(4x4)'s forward time at 512 channels.)
template <class F>
void weight_transform(const float* w, int64_t K, int64_t C, float* U, bool team) {
  const __m512i idx =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(F::taps));
#pragma omp parallel for schedule(static) if (team)
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c0 = 0; c0 < C; c0 += 16) {
      const __mmask16 m = lanes(c0, C);
      const float* f = w + (k * C + c0) * F::taps;
      __m512 g[F::taps], u[F::xis];
      for (int t = 0; t < F::taps; ++t)
        g[t] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m,
                                        _mm512_add_epi32(idx, _mm512_set1_epi32(t)), f, 4);
      F::filter_tile(g, u);
      for (int xi = 0; xi < F::xis; ++xi)
        _mm512_mask_storeu_ps(U + (xi * K + k) * C + c0, m, u[xi]);
    }
}

// dw [K, C, r, r] += G^T dU G, 16 input channels at a time as weight_transform, where dU is the
// sum of the per-thread partials dU + t * usize for t in `parts`, added in that order (the
// threads' order: the same bits as summing them first, without the pass that did).
template <class F>
void weight_grad_transform(const float* dU, int64_t usize, const std::vector<int>& parts, int64_t K,
                           int64_t C, float* dw) {
#pragma omp parallel for schedule(static) if (!omp_in_parallel())
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c0 = 0; c0 < C; c0 += 16) {
      const __mmask16 m = lanes(c0, C);
      __m512 u[F::xis], o[F::taps];
      for (int xi = 0; xi < F::xis; ++xi) {
        u[xi] = _mm512_setzero_ps();
        for (size_t i = 0; i < parts.size(); ++i) {
          const __m512 v = _mm512_maskz_loadu_ps(m, dU + parts[i] * usize + (xi * K + k) * C + c0);
          u[xi] = i == 0 ? v : _mm512_add_ps(u[xi], v);
        }
      }
      F::filter_grad_tile(u, o);
      alignas(64) float t[F::taps][16];
      for (int i = 0; i < F::taps; ++i) _mm512_store_ps(t[i], o[i]);
      float* d = dw + (k * C + c0) * F::taps;
      const int64_t n = std::min<int64_t>(16, C - c0);
      for (int64_t l = 0; l < n; ++l)
        for (int i = 0; i < F::taps; ++i) d[F::taps * l + i] += t[i][l];
    }
}

// Runs body(chunk, tid, team) for the chunks of every block (blocks over the team when there are
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

// The largest chunk's tile count (buffer sizes).
int64_t max_tiles(const Geo& g, const Plan& pl) { return pl.images * pl.trows * g.TW; }

template <class F>
void fwd(const Conv2dFwdArgs& a) {
  check_conv2d_fwd_args(a);
  AIM_CHECK(conv2d_fwd_plain_reason(a).empty(), "[conv2d_fwd] winograd ",
            conv2d_fwd_plain_reason(a));
  const Geo g = make_geo(a.x, a.y, a.p, F::m);
  const Plan pl = plan_of(g, F::target_tiles);
  const int64_t Tm = max_tiles(g, pl);
  const float* x = a.x.data<float>();
  const float* bias = a.bias.defined() ? a.bias.data<float>() : nullptr;
  float* y = a.y.data<float>();
  // U in the calling thread's slot 2; the blocks use slots 0 and 1 of their threads.
  float* U = thread_buffer(2, size_t(F::xis * g.K * g.C));
  weight_transform<F>(a.w.data<float>(), g.K, g.C, U, !omp_in_parallel());
  for_chunks(g, pl, false, [&](const Chunk& ch, int, bool team) {
    float* V = thread_buffer(0, size_t(F::xis * g.C * Tm));
    float* M = thread_buffer(1, size_t(F::xis * g.K * Tm));
    const int64_t T = ch.tiles(g);
    F::input_transform(x, g, ch, V, team);
    for (int64_t xi = 0; xi < F::xis; ++xi)  // M[xi] [K, T] = U[xi] [K, C] . V[xi] [C, T]
      sgemm_avx512(false, false, g.K, T, g.C, 1.0f, U + xi * g.K * g.C, g.C, V + xi * g.C * T, T,
                   0.0f, M + xi * g.K * T, T);
    F::output_transform(M, g, ch, bias, a.relu && !a.residual.defined(), y, team);
  });
  // A residual (ResNet's shortcut; its last conv is 1x1, not a Winograd one): added, then the
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

template <class F>
void bwd_data(const Conv2dBwdDataArgs& a) {
  check_conv2d_bwd_data_args(a);
  const Geo g = make_geo(a.dx, a.dy, a.p, F::m);
  const Plan pl = plan_of(g, F::target_tiles);
  const int64_t Tm = max_tiles(g, pl);
  const float* dy = a.dy.data<float>();
  float* dx = a.dx.data<float>();
  float* U = thread_buffer(2, size_t(F::xis * g.K * g.C));
  weight_transform<F>(a.w.data<float>(), g.K, g.C, U, !omp_in_parallel());
  for_chunks(g, pl, false, [&](const Chunk& ch, int, bool team) {
    float* dM = thread_buffer(0, size_t(F::xis * g.K * Tm));
    float* dV = thread_buffer(1, size_t(F::xis * g.C * Tm));
    const int64_t T = ch.tiles(g);
    if (ch.i0 == 0)  // the block's first chunk: its images' dx start from 0
      std::memset(dx + ch.n0 * g.C * g.H * g.W, 0, size_t(ch.nb * g.C * g.H * g.W) * sizeof(float));
    F::grad_output_transform(dy, g, ch, dM, team);
    for (int64_t xi = 0; xi < F::xis; ++xi)  // dV[xi] [C, T] = U[xi]^T [C, K] . dM[xi] [K, T]
      sgemm_avx512(true, false, g.C, T, g.K, 1.0f, U + xi * g.K * g.C, g.C, dM + xi * g.K * T, T,
                   0.0f, dV + xi * g.C * T, T);
    F::grad_input_transform(dV, g, ch, dx, team);
  });
}

// ordered: see conv2d_winograd.h (the *_ordered variants).
template <class F>
void bwd_filter(const Conv2dBwdFilterArgs& a, bool ordered) {
  check_conv2d_bwd_filter_args(a);
  const Geo g = make_geo(a.x, a.dy, a.p, F::m);
  const Plan pl = plan_of(g, F::target_tiles, ordered);
  const int64_t Tm = max_tiles(g, pl), usize = F::xis * g.K * g.C;
  const float* x = a.x.data<float>();
  const float* dy = a.dy.data<float>();
  // One dU per thread when the blocks run over the team, summed in thread order at the end. A
  // thread's first chunk writes its partial (beta 0), the later ones add to it: no zeroing pass
  // (36·K·C floats per thread, 38 MB at 512 channels), no read of zeros.
  const int nt = blocks_parallel(pl.blocks, ordered) ? omp_get_max_threads() : 1;
  float* dU = thread_buffer(2, size_t(nt * usize));
  std::vector<char> started(size_t(nt), 0);
  for_chunks(g, pl, ordered, [&](const Chunk& ch, int tid, bool team) {
    float* V = thread_buffer(0, size_t(F::xis * g.C * Tm));
    float* dM = thread_buffer(1, size_t(F::xis * g.K * Tm));
    const int64_t T = ch.tiles(g);
    F::input_transform(x, g, ch, V, team);
    F::grad_output_transform(dy, g, ch, dM, team);
    float* acc = dU + tid * usize;
    const float beta = started[size_t(tid)] ? 1.0f : 0.0f;
    started[size_t(tid)] = 1;
    for (int64_t xi = 0; xi < F::xis; ++xi)  // dU[xi] [K, C] += dM[xi] [K, T] . V[xi]^T [T, C]
      sgemm_avx512(false, true, g.K, g.C, T, 1.0f, dM + xi * g.K * T, T, V + xi * g.C * T, T, beta,
                   acc + xi * g.K * g.C, g.C);
  });
  std::vector<int> parts;
  for (int t = 0; t < nt; ++t)
    if (started[size_t(t)]) parts.push_back(t);
  weight_grad_transform<F>(dU, usize, parts, g.K, g.C, a.dw.data<float>());
  if (a.dbias.defined()) conv2d_bias_grad_cpu(a.dy, a.dbias);
}

}  // namespace

void conv2d_fwd_cpu_winograd(const Conv2dFwdArgs& a) { fwd<F23>(a); }
void conv2d_bwd_data_cpu_winograd(const Conv2dBwdDataArgs& a) { bwd_data<F23>(a); }
void conv2d_bwd_filter_cpu_winograd(const Conv2dBwdFilterArgs& a) { bwd_filter<F23>(a, false); }
void conv2d_bwd_filter_cpu_winograd_ordered(const Conv2dBwdFilterArgs& a) {
  bwd_filter<F23>(a, true);
}
void conv2d_fwd_cpu_winograd4(const Conv2dFwdArgs& a) { fwd<F43>(a); }
void conv2d_bwd_data_cpu_winograd4(const Conv2dBwdDataArgs& a) { bwd_data<F43>(a); }
void conv2d_bwd_filter_cpu_winograd4(const Conv2dBwdFilterArgs& a) { bwd_filter<F43>(a, false); }
void conv2d_bwd_filter_cpu_winograd4_ordered(const Conv2dBwdFilterArgs& a) {
  bwd_filter<F43>(a, true);
}
void conv2d_fwd_cpu_winograd5x5(const Conv2dFwdArgs& a) { fwd<F25>(a); }
void conv2d_bwd_data_cpu_winograd5x5(const Conv2dBwdDataArgs& a) { bwd_data<F25>(a); }
void conv2d_bwd_filter_cpu_winograd5x5(const Conv2dBwdFilterArgs& a) { bwd_filter<F25>(a, false); }
void conv2d_bwd_filter_cpu_winograd5x5_ordered(const Conv2dBwdFilterArgs& a) {
  bwd_filter<F25>(a, true);
}

#pragma GCC pop_options

}  // namespace aim::kernels
