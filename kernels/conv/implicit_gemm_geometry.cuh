// The geometry the two implicit-GEMM conv2d variants share (conv2d_cuda.cu: cuda.implicit_gemm,
// conv2d_cuda_tc.cu: cuda.implicit_gemm_tc): the 32-bit sizes of one chunk of images, and how
// each direction decodes a column of its gathered B operand once per thread (README.md gives the
// three GEMMs). Column offsets are of type Off: int64_t in cuda.implicit_gemm, int in
// cuda.implicit_gemm_tc (the batch chunks keep every tensor slice under 2^31 elements, conv2d.h:
// conv2d_images_per_chunk). Compiles as CUDA and, for the SIMT emulator, as C++.
#pragma once
#include <cstdint>

#include "kernels/conv/conv2d.h"
#include "kernels/cuda_common.h"

namespace aim::kernels::AIM_CUDA_NS {

// Sizes and parameters of one convolution (of one chunk of images: N), 32-bit: supports() and
// the batch chunks keep every offset in range.
struct Geo {
  int N, C, H, W, K, R, S, P, Q, G, Cg, Kg;
  int sh, sw, pt, pl, dh, dw;
};

inline Geo make_geo(const Tensor& xside, const Tensor& w, const Tensor& yside,
                    const Conv2dParams& p) {
  Geo d;
  d.N = int(xside.size(0));
  d.C = int(xside.size(1));
  d.H = int(xside.size(2));
  d.W = int(xside.size(3));
  d.K = int(w.size(0));
  d.R = int(w.size(2));
  d.S = int(w.size(3));
  d.P = int(yside.size(2));
  d.Q = int(yside.size(3));
  d.G = int(p.groups);
  d.Cg = d.C / d.G;
  d.Kg = d.K / d.G;
  d.sh = int(p.stride_h);
  d.sw = int(p.stride_w);
  d.pt = int(p.pad_top);
  d.pl = int(p.pad_left);
  d.dh = int(p.dil_h);
  d.dw = int(p.dil_w);
  return d;
}

// Elements of one image of an [N, ...] tensor.
inline int64_t per_image(const Tensor& t) { return t.size(0) > 0 ? t.numel() / t.size(0) : 0; }

// fwd, B = im2col(x): column col = output pixel (n, p, q) of N*P*Q; base = the offset in x of
// image n, channel g*Cg; (ih0, iw0) = the window's top-left input pixel (may lie in the padding).
template <class Off>
struct FwdCol {
  Off base;
  int ih0, iw0;
  bool ok;
};
template <class Off>
__device__ __forceinline__ FwdCol<Off> fwd_col(const Geo& d, int g, int col) {
  FwdCol<Off> c{0, 0, 0, col < d.N * d.P * d.Q};
  if (!c.ok) return c;
  const int PQ = d.P * d.Q, n = col / PQ, pq = col - n * PQ, p = pq / d.Q, q = pq - p * d.Q;
  c.base = (Off(n) * d.C + Off(g) * d.Cg) * d.H * d.W;
  c.ih0 = p * d.sh - d.pt;
  c.iw0 = q * d.sw - d.pl;
  return c;
}

// bwd_data, B = gather(dy): column col = input pixel (n, h, w) of N*H*W; base = the offset in dy
// of image n, channel g*Kg; (ph0, pw0) = (h + pad_top, w + pad_left): dx[h, w] takes dy[p, q]
// where ph0 - r*dil_h = p*stride_h (and w likewise).
template <class Off>
struct BwdDataCol {
  Off base;
  int ph0, pw0;
  bool ok;
};
template <class Off>
__device__ __forceinline__ BwdDataCol<Off> bwd_data_col(const Geo& d, int g, int col) {
  BwdDataCol<Off> c{0, 0, 0, col < d.N * d.H * d.W};
  if (!c.ok) return c;
  const int HW = d.H * d.W, n = col / HW, hw = col - n * HW, h = hw / d.W, wc = hw - h * d.W;
  c.base = (Off(n) * d.K + Off(g) * d.Kg) * d.P * d.Q;
  c.ph0 = h + d.pt;
  c.pw0 = wc + d.pl;
  return c;
}

// bwd_filter, B = im2col(x)^T: column col = filter tap (ch, r, s) of C/G*R*S; base = the offset
// in x (image 0) of channel g*Cg + ch; (roff, soff) = the tap's offset from the output pixel's
// strided position: ih = p*stride_h + roff, iw = q*stride_w + soff.
template <class Off>
struct BwdFilterCol {
  Off base;
  int roff, soff;
  bool ok;
};
template <class Off>
__device__ __forceinline__ BwdFilterCol<Off> bwd_filter_col(const Geo& d, int g, int col) {
  BwdFilterCol<Off> c{0, 0, 0, col < d.Cg * d.R * d.S};
  if (!c.ok) return c;
  const int RS = d.R * d.S, ch = col / RS, rs = col - ch * RS, r = rs / d.S, s = rs - r * d.S;
  c.base = (Off(g) * d.Cg + ch) * d.H * d.W;
  c.roff = r * d.dh - d.pt;
  c.soff = s * d.dw - d.pl;
  return c;
}

}  // namespace aim::kernels::AIM_CUDA_NS
