// unary, unary_bwd: own CUDA variants.
// cuda.vec (unary and unary_bwd): the elementwise kernels of loops_cuda.cuh. Contiguous (after
// merging dims) tensors take the vectorised kernel: one thread per 16 bytes of the widest operand
// in a grid-stride loop, 16-byte loads and stores when every pointer is aligned; anything else
// the strided kernel (size/stride table, up to 8 merged dims). The kind is a run-time switch
// inside the element functor (warp-uniform, no divergence). Traffic: x (dy, and x or y for the
// gradient) read once, y (dx) written once: bandwidth bound except for gelu/erf-heavy kinds on
// f64. 16-bit types compute in f32.
#include "kernels/elementwise/loops_cuda.cuh"
#include "kernels/elementwise/unary.h"

namespace aim::kernels::AIM_CUDA_NS {
namespace {

template <class T>
struct UnaryOp {
  using C = EwComp<T>;
  UnaryKind kind;
  C alpha, beta;
  __device__ T operator()(T x) const {
    return ew_from<T>(unary_value<C>(kind, ew_to<C>(x), alpha, beta));
  }
};

template <class T>
struct UnaryBwdOp {
  using C = EwComp<T>;
  UnaryKind kind;
  C alpha, beta;
  __device__ T operator()(T dy, T x, T y) const {
    return ew_from<T>(
        unary_bwd_value<C>(kind, ew_to<C>(dy), ew_to<C>(x), ew_to<C>(y), alpha, beta));
  }
};

std::string unary_supports(const UnaryArgs& a) {
  return ew_layout_supported(make_ew_layout(a.y, {&a.x}));
}

void unary_cuda_vec(const UnaryArgs& a) {
  check_unary_args(a);
  const EwLayout l = make_ew_layout(a.y, {&a.x});
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.x.dtype(), T, {
    using C = EwComp<T>;
    const UnaryOp<T> op{a.kind, C(a.alpha), C(a.beta)};
    ew_launch<1>("unary", l, a.y.device(), op, static_cast<T*>(a.y.raw_data()),
                 static_cast<const T*>(a.x.raw_data()));
  });
}

// x or y that a kind does not read may be undefined: dy is read in its place (same shape, and
// the same addresses as the dy loads, so no extra memory traffic).
const Tensor& or_dy(const Tensor& t, const UnaryBwdArgs& a, bool reads) { return reads ? t : a.dy; }

EwLayout unary_bwd_layout(const UnaryBwdArgs& a) {
  const Tensor& xt = or_dy(a.x, a, unary_bwd_reads_x(a.kind));
  const Tensor& yt = or_dy(a.y, a, unary_bwd_reads_y(a.kind));
  return make_ew_layout(a.dx, {&a.dy, &xt, &yt});
}

std::string unary_bwd_supports(const UnaryBwdArgs& a) {
  return ew_layout_supported(unary_bwd_layout(a));
}

void unary_bwd_cuda_vec(const UnaryBwdArgs& a) {
  check_unary_bwd_args(a);
  const EwLayout l = unary_bwd_layout(a);
  const Tensor& xt = or_dy(a.x, a, unary_bwd_reads_x(a.kind));
  const Tensor& yt = or_dy(a.y, a, unary_bwd_reads_y(a.kind));
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.dy.dtype(), T, {
    using C = EwComp<T>;
    const UnaryBwdOp<T> op{a.kind, C(a.alpha), C(a.beta)};
    ew_launch<3>("unary_bwd", l, a.dx.device(), op, static_cast<T*>(a.dx.raw_data()),
                 static_cast<const T*>(a.dy.raw_data()), static_cast<const T*>(xt.raw_data()),
                 static_cast<const T*>(yt.raw_data()));
  });
}

std::vector<DType> float_dtypes() { return {DType::f32, DType::f64, DType::f16, DType::bf16}; }

}  // namespace

void register_unary_cuda(Registry& r) {
  auto& u = r.op<UnaryArgs>("unary");
  u.add({"cuda.vec", AIM_CUDA_BACKEND, Provider::Own, unary_cuda_vec, float_dtypes(),
         unary_supports});
  u.set_default(AIM_CUDA_BACKEND, "cuda.vec");
  auto& b = r.op<UnaryBwdArgs>("unary_bwd");
  b.add({"cuda.vec", AIM_CUDA_BACKEND, Provider::Own, unary_bwd_cuda_vec, float_dtypes(),
         unary_bwd_supports});
  b.set_default(AIM_CUDA_BACKEND, "cuda.vec");
}

}  // namespace aim::kernels::AIM_CUDA_NS
