// cpu.winograd, cpu.winograd4 and cpu.winograd_5x5: conv2d_fwd / conv2d_bwd_data /
// conv2d_bwd_filter by Winograd's minimal filtering F(2x2, 3x3), F(4x4, 3x3) and F(2x2, 5x5)
// (kernels/conv/conv2d_winograd_cpu.cpp; math in kernels/conv/README.md). Internal to
// kernels/conv: registered by conv2d_cpu.cpp.
#pragma once
#include <string>

#include "kernels/conv/conv2d.h"

namespace aim::kernels {

// "" when the variant takes these arguments: f32, 3x3 (5x5 for F(2x2, 5x5)), stride 1, dilation
// 1, one group, an AVX-512 CPU; else why not.
std::string conv2d_winograd_supports(const Tensor& w, const Conv2dParams& p);
std::string conv2d_winograd4_supports(const Tensor& w, const Conv2dParams& p);
std::string conv2d_winograd5x5_supports(const Tensor& w, const Conv2dParams& p);

// conv2d_winograd_tile's answer for a 5x5 convolution that F(2x2, 5x5) takes (its tile is 2x2;
// the value names the algorithm).
inline constexpr int kWinograd5x5 = 5;
// The Winograd algorithm the default CPU f32 selection takes for this convolution (N images of
// P x Q outputs): 0 (none: not supported, or fewer than 16 input or output channels, where the
// transforms cost more than the fewer multiplications save, or an output below 2x2),
// kWinograd5x5 (cpu.winograd_5x5) for every other 5x5 stride-1 convolution with at least 256
// outputs per image (not at --winograd 2), 4 (cpu.winograd4, F(4x4, 3x3)) where its padded 4x4
// tiles need at most 0.7x F(2x2)'s products (16x16 and up, 4x25 and 8x25 (CRNN), 7x7; not 14x14: 16
// tiles of 16 for 196 outputs) and the batch has at least 192 of them (a fixed count: the choice
// must not depend on --threads), else 2 (cpu.winograd, F(2x2, 3x3)). Measured on this machine
// (kernels/conv/README.md has the table): F(4x4) 1.1-1.5x faster where both hold, slower at 14x14
// and on small batches (batch 1 at 28x28, batch 16 at 4x25: every block of tiles pays the
// transformed filters' packing and the filter gradient's accumulator again). --winograd
// (kernels/math_mode.h winograd_tile()) caps the tile: 2 (F(2x2, 3x3) only: the ~1e-4 mode) or 0
// (none).
int conv2d_winograd_tile(const Tensor& w, const Conv2dParams& p, int64_t N, int64_t P, int64_t Q);

void conv2d_fwd_cpu_winograd(const Conv2dFwdArgs& a);
void conv2d_bwd_data_cpu_winograd(const Conv2dBwdDataArgs& a);
void conv2d_bwd_filter_cpu_winograd(const Conv2dBwdFilterArgs& a);
// cpu.winograd_ordered (--deterministic): the one-thread plan, blocks one after another with the
// team inside: the same bits at any team size (docs/determinism.md).
void conv2d_bwd_filter_cpu_winograd_ordered(const Conv2dBwdFilterArgs& a);

void conv2d_fwd_cpu_winograd4(const Conv2dFwdArgs& a);
void conv2d_bwd_data_cpu_winograd4(const Conv2dBwdDataArgs& a);
void conv2d_bwd_filter_cpu_winograd4(const Conv2dBwdFilterArgs& a);
void conv2d_bwd_filter_cpu_winograd4_ordered(const Conv2dBwdFilterArgs& a);

void conv2d_fwd_cpu_winograd5x5(const Conv2dFwdArgs& a);
void conv2d_bwd_data_cpu_winograd5x5(const Conv2dBwdDataArgs& a);
void conv2d_bwd_filter_cpu_winograd5x5(const Conv2dBwdFilterArgs& a);
void conv2d_bwd_filter_cpu_winograd5x5_ordered(const Conv2dBwdFilterArgs& a);

// dbias[k] += sum over n, p, q of dy[n, k, p, q] (per-image float sums added in double), shared by
// the CPU variants.
void conv2d_bias_grad_cpu(const Tensor& dy, const Tensor& dbias);

}  // namespace aim::kernels
