// cpu.winograd: conv2d_fwd / conv2d_bwd_data / conv2d_bwd_filter by Winograd's minimal filtering
// F(2x2, 3x3) (kernels/conv/conv2d_winograd_cpu.cpp; math in kernels/conv/README.md). Internal to
// kernels/conv: registered by conv2d_cpu.cpp.
#pragma once
#include <string>

#include "kernels/conv/conv2d.h"

namespace aim::kernels {

// "" when the variant takes these arguments: f32, 3x3, stride 1, dilation 1, one group, an AVX-512
// CPU; else why not.
std::string conv2d_winograd_supports(const Tensor& w, const Conv2dParams& p);
// Whether the default CPU f32 selection should take cpu.winograd for this convolution: supported,
// at least 16 input and output channels (below that the transforms cost more than the 2.25x
// fewer multiplications save) and an output of at least 2x2.
bool conv2d_winograd_preferred(const Tensor& w, const Conv2dParams& p, int64_t P, int64_t Q);

void conv2d_fwd_cpu_winograd(const Conv2dFwdArgs& a);
void conv2d_bwd_data_cpu_winograd(const Conv2dBwdDataArgs& a);
void conv2d_bwd_filter_cpu_winograd(const Conv2dBwdFilterArgs& a);
// cpu.winograd_ordered (--deterministic): the one-thread plan, blocks one after another with the
// team inside: the same bits at any team size (docs/determinism.md).
void conv2d_bwd_filter_cpu_winograd_ordered(const Conv2dBwdFilterArgs& a);

// dbias[k] += sum over n, p, q of dy[n, k, p, q] (per-image float sums added in double), shared by
// the CPU variants.
void conv2d_bias_grad_cpu(const Tensor& dy, const Tensor& dbias);

}  // namespace aim::kernels
