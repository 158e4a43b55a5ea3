// binary, where: own CUDA variants.
// cuda.vec (binary and where): the elementwise kernels of loops_cuda.cuh. After merging dims,
// same-shape contiguous operands (or one of them a single value) take the vectorised kernel:
// one thread per 16 bytes of the widest operand in a grid-stride loop, 16-byte loads of each
// input and one store of the outputs (a bool y of a comparison: 4 bytes for f32 inputs) when
// every pointer is aligned, single accesses otherwise; row/column broadcasts and strided views
// take the strided kernel (size/stride table, up to 8 merged dims, one element per thread).
// The kind is a run-time switch in the element functor (warp-uniform). Traffic: each input read
// once (a broadcast input from cache), y written once: bandwidth bound; the target for a
// contiguous f32 add is >= 80% of the device's copy bandwidth. Integer division by zero is
// undefined here (as in PyTorch on CUDA); the CPU variants refuse it.
#include "kernels/elementwise/binary.h"
#include "kernels/elementwise/loops_cuda.cuh"

namespace aim::kernels::AIM_CUDA_NS {
namespace {

template <class T>
struct BinaryArithOp {
  using C = EwComp<T>;
  BinaryKind kind;
  C alpha;
  __device__ T operator()(T a, T b) const {
    return ew_from<T>(binary_value<C>(kind, ew_to<C>(a), ew_to<C>(b), alpha));
  }
};

template <class T>
struct BinaryCompareOp {
  using C = EwComp<T>;
  BinaryKind kind;
  __device__ bool operator()(T a, T b) const {
    return compare_value<C>(kind, ew_to<C>(a), ew_to<C>(b));
  }
};

template <class T>
struct WhereOp {
  __device__ T operator()(bool c, T a, T b) const { return c ? a : b; }
};

std::string binary_supports(const BinaryArgs& a) {
  return ew_layout_supported(make_ew_layout(a.y, {&a.a, &a.b}));
}

template <class T>
void binary_typed(const BinaryArgs& a, const EwLayout& l) {
  using C = EwComp<T>;
  const T* pa = static_cast<const T*>(a.a.raw_data());
  const T* pb = static_cast<const T*>(a.b.raw_data());
  if (is_comparison(a.kind)) {
    ew_launch<2>("binary", l, a.y.device(), BinaryCompareOp<T>{a.kind},
                 static_cast<bool*>(a.y.raw_data()), pa, pb);
  } else {
    ew_launch<2>("binary", l, a.y.device(), BinaryArithOp<T>{a.kind, C(a.alpha)},
                 static_cast<T*>(a.y.raw_data()), pa, pb);
  }
}

void binary_cuda_vec(const BinaryArgs& a) {
  check_binary_args(a);
  const EwLayout l = make_ew_layout(a.y, {&a.a, &a.b});
  switch (a.a.dtype()) {
    case DType::f32:
      return binary_typed<float>(a, l);
    case DType::f64:
      return binary_typed<double>(a, l);
    case DType::f16:
      return binary_typed<__half>(a, l);
    case DType::bf16:
      return binary_typed<__nv_bfloat16>(a, l);
    case DType::i32:
      return binary_typed<int32_t>(a, l);
    case DType::i64:
      return binary_typed<int64_t>(a, l);
    default:
      AIM_FAIL("[binary] cuda.vec takes f32 f64 f16 bf16 i32 i64, got ", dtype_name(a.a.dtype()));
  }
}

std::string where_supports(const WhereArgs& a) {
  return ew_layout_supported(make_ew_layout(a.y, {&a.cond, &a.a, &a.b}));
}

void where_cuda_vec(const WhereArgs& a) {
  check_where_args(a);
  const EwLayout l = make_ew_layout(a.y, {&a.cond, &a.a, &a.b});
  AIM_DISPATCH_CUDA_ALL_TYPES(a.a.dtype(), T, {
    ew_launch<3>("where", l, a.y.device(), WhereOp<T>{}, static_cast<T*>(a.y.raw_data()),
                 static_cast<const bool*>(a.cond.raw_data()), static_cast<const T*>(a.a.raw_data()),
                 static_cast<const T*>(a.b.raw_data()));
  });
}

std::vector<DType> binary_dtypes() {
  return {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64};
}
std::vector<DType> all_dtypes() { return {std::begin(kAllDTypes), std::end(kAllDTypes)}; }

}  // namespace

void register_binary_cuda(Registry& r) {
  auto& b = r.op<BinaryArgs>("binary");
  b.add({"cuda.vec", AIM_CUDA_BACKEND, Provider::Own, binary_cuda_vec, binary_dtypes(),
         binary_supports});
  b.set_default(AIM_CUDA_BACKEND, "cuda.vec");
  auto& w = r.op<WhereArgs>("where");
  w.add(
      {"cuda.vec", AIM_CUDA_BACKEND, Provider::Own, where_cuda_vec, all_dtypes(), where_supports});
  w.set_default(AIM_CUDA_BACKEND, "cuda.vec");
}

}  // namespace aim::kernels::AIM_CUDA_NS
