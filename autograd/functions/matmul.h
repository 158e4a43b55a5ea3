// Differentiable GEMM (kernels/matmul): matmul with the kernel's transpose flags, and linear
// (torch.nn.functional.linear) with the bias fused into the GEMM.
// Inputs may be strided views (they are made contiguous); outputs are contiguous. All operands
// share one dtype and one device.
#pragma once
#include "autograd/variable.h"

namespace aim::autograd {

// op(a) @ op(b), kernels/matmul/matmul.h convention: a stored [M,K] ([K,M] when trans_a), b stored
// [K,N] ([N,K] when trans_b). 2-D, or 3-D batched [Bt, ., .] with c [Bt,M,N]; a 2-D operand is
// shared by every batch element (its gradient is summed over the batch). Gradients are written
// in each operand's stored layout.
Variable matmul(const Variable& a, const Variable& b, bool trans_a = false, bool trans_b = false);

// y = x @ weight^T + bias. x [..., in] (leading dims flattened; 1-D x gives [out]),
// weight [out, in], bias [out] or undefined. Weight and bias gradients are accumulated (+=)
// straight into the leaves' .grad (node.h: g.accum); bias grad = column sum of dy.
// weight_packed (optional): kernels::matmul_pack_b(weight, true) of this weight's current values,
// read by the GEMM where it can (MatmulArgs::b_packed; the same bits as without).
Variable linear(const Variable& x, const Variable& weight, const Variable& bias = Variable(),
                const Tensor& weight_packed = Tensor());

}  // namespace aim::autograd
