// binary, where on the CPU.
// cpu.ref: one generic N-d index loop over y with broadcast strides; floats computed in double,
// integers in int64, each element rounded once.
// cpu.omp: the elementwise loop engine (loops_cpu.h): dims merged, so same-shape operands become
// one flat loop, a scalar operand a stride-0 input, a row broadcast rows with strides (0, 1), a
// column broadcast rows with strides (1, 0); OpenMP over chunks of the flat index (static);
// streaming stores for outputs larger than the caches. The kind is a template parameter so the
// inner loops are plain loops g++ vectorises (AVX2). Compute in f32 for f32/f16/bf16, f64 for
// f64, the integer type itself for integers.
// Test cases: binary_cases.cpp.
#include "kernels/elementwise/binary_cpu.h"

#include <cmath>

#include "kernels/elementwise/binary.h"
#include "kernels/elementwise/loops_cpu.h"
#include "kernels/registry.h"

namespace aim::kernels {

// clang-format off
#define AIM_BINARY_KINDS(X)                                                                     \
  X(add) X(sub) X(mul) X(div) X(pow) X(maximum) X(minimum) X(eq) X(ne) X(lt) X(le) X(gt)       \
  X(ge) X(prelu)
// clang-format on

const char* binary_kind_name(BinaryKind k) {
  switch (k) {
#define AIM_NAME_CASE(n) \
  case BinaryKind::n:    \
    return #n;
    AIM_BINARY_KINDS(AIM_NAME_CASE)
#undef AIM_NAME_CASE
  }
  return "?";
}

namespace {

// The broadcast of shapes a and b (NumPy rules); false when they do not broadcast.
bool broadcast_into(Shape& out, const Shape& s) {
  if (s.size() > out.size()) out.insert(out.begin(), s.size() - out.size(), 1);
  const size_t lead = out.size() - s.size();
  for (size_t i = 0; i < s.size(); ++i) {
    int64_t& o = out[lead + i];
    if (s[i] == o || s[i] == 1) continue;
    if (o != 1) return false;
    o = s[i];
  }
  return true;
}

void check_output(const char* op, const Tensor& y) {
  for (int64_t d = 0; d < y.dim(); ++d)
    AIM_CHECK(y.size(d) == 1 || y.stride(d) != 0, "[", op,
              "] y must not be a broadcast view (stride 0), got sizes ", to_string(y.sizes()),
              " strides ", to_string(y.strides()));
}

}  // namespace

void check_binary_args(const BinaryArgs& a) {
  AIM_CHECK(int(a.kind) < kNumBinaryKinds, "[binary] unknown BinaryKind ", int(a.kind));
  const char* k = binary_kind_name(a.kind);
  AIM_CHECK(a.a.defined() && a.b.defined() && a.y.defined(), "[binary] ", k,
            ": a, b and y must be defined");
  AIM_CHECK(a.a.dtype() == a.b.dtype(), "[binary] ", k,
            ": a and b must have the same dtype, got a ", dtype_name(a.a.dtype()), " and b ",
            dtype_name(a.b.dtype()));
  AIM_CHECK(a.a.device() == a.y.device() && a.b.device() == a.y.device(), "[binary] ", k, ": a on ",
            a.a.device().str(), ", b on ", a.b.device().str(), ", y on ", a.y.device().str(),
            ": same device expected");
  const DType want = is_comparison(a.kind) ? DType::boolean : a.a.dtype();
  AIM_CHECK(a.y.dtype() == want, "[binary] ", k, " of ", dtype_name(a.a.dtype()),
            " tensors writes a ", dtype_name(want), " y, got ", dtype_name(a.y.dtype()));
  Shape out = a.a.sizes();
  AIM_CHECK(broadcast_into(out, a.b.sizes()), "[binary] ", k, ": a ", to_string(a.a.sizes()),
            " and b ", to_string(a.b.sizes()), " do not broadcast");
  AIM_CHECK(a.y.sizes() == out, "[binary] ", k, ": y has shape ", to_string(a.y.sizes()),
            ", expected ", to_string(out), ", the broadcast of a ", to_string(a.a.sizes()),
            " and b ", to_string(a.b.sizes()));
  check_output("binary", a.y);
  if (is_integral(a.a.dtype()) && (a.kind == BinaryKind::add || a.kind == BinaryKind::sub))
    AIM_CHECK(std::floor(a.alpha) == a.alpha, "[binary] ", k, ": alpha must be an integer for ",
              dtype_name(a.a.dtype()), " tensors, got ", a.alpha);
}

void check_where_args(const WhereArgs& a) {
  AIM_CHECK(a.cond.defined() && a.a.defined() && a.b.defined() && a.y.defined(),
            "[where] cond, a, b and y must be defined");
  AIM_CHECK(a.cond.dtype() == DType::boolean, "[where] cond must be bool, got ",
            dtype_name(a.cond.dtype()));
  AIM_CHECK(a.a.dtype() == a.b.dtype() && a.y.dtype() == a.a.dtype(),
            "[where] a, b and y must have the same dtype, got a ", dtype_name(a.a.dtype()), ", b ",
            dtype_name(a.b.dtype()), ", y ", dtype_name(a.y.dtype()));
  AIM_CHECK(a.cond.device() == a.y.device() && a.a.device() == a.y.device() &&
                a.b.device() == a.y.device(),
            "[where] cond, a, b and y must be on one device, y is on ", a.y.device().str());
  Shape out = a.cond.sizes();
  AIM_CHECK(broadcast_into(out, a.a.sizes()) && broadcast_into(out, a.b.sizes()), "[where] cond ",
            to_string(a.cond.sizes()), ", a ", to_string(a.a.sizes()), " and b ",
            to_string(a.b.sizes()), " do not broadcast");
  AIM_CHECK(a.y.sizes() == out, "[where] y has shape ", to_string(a.y.sizes()), ", expected ",
            to_string(out), ", the broadcast of cond, a and b");
  check_output("where", a.y);
}

namespace {

// Integer division by zero traps on the CPU: refuse it with a message instead.
template <class T>
void check_no_zero_divisor(const BinaryArgs& a) {
  if constexpr (std::is_integral_v<T>) {
    if (a.kind != BinaryKind::div) return;
    const T* b = a.b.data<T>();
    const int64_t n = a.b.numel();
    for (int64_t i = 0; i < n; ++i)
      AIM_CHECK(b[strided_offset(i, a.b.sizes(), a.b.strides())] != 0, "[binary] div of ",
                dtype_name(a.b.dtype()), " tensors: integer division by zero (b ",
                to_string(a.b.sizes()), " holds a 0)");
  }
}

// ---- cpu.ref -------------------------------------------------------------------------------

template <class T>
using RefComp = std::conditional_t<std::is_integral_v<T>, int64_t, double>;

template <class T>
void binary_ref_typed(const BinaryArgs& a) {
  using C = RefComp<T>;
  check_no_zero_divisor<T>(a);
  const Shape& out = a.y.sizes();
  const Shape sa = broadcast_strides(a.a, out), sb = broadcast_strides(a.b, out);
  const T* pa = a.a.data<T>();
  const T* pb = a.b.data<T>();
  const int64_t n = a.y.numel();
  const C alpha = C(a.alpha);
  const bool cmp = is_comparison(a.kind);
  bool* yb = cmp ? a.y.data<bool>() : nullptr;
  T* yt = cmp ? nullptr : a.y.data<T>();
  for (int64_t i = 0; i < n; ++i) {
    const C va = C(pa[strided_offset(i, out, sa)]);
    const C vb = C(pb[strided_offset(i, out, sb)]);
    const int64_t yo = strided_offset(i, out, a.y.strides());
    if (cmp) {
      yb[yo] = compare_value<C>(a.kind, va, vb);
    } else {
      yt[yo] = T(binary_value<C>(a.kind, va, vb, alpha));
    }
  }
}

void binary_cpu_ref(const BinaryArgs& a) {
  check_binary_args(a);
  AIM_DISPATCH_ALL_TYPES(a.a.dtype(), T, {
    if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, int8_t> ||
                  std::is_same_v<T, uint8_t>) {
      AIM_FAIL("[binary] cpu.ref takes f32 f64 f16 bf16 i32 i64, got ", dtype_name(a.a.dtype()));
    } else {
      binary_ref_typed<T>(a);
    }
  });
}

template <class T>
void where_ref_typed(const WhereArgs& a) {
  const Shape& out = a.y.sizes();
  const Shape sc = broadcast_strides(a.cond, out), sa = broadcast_strides(a.a, out),
              sb = broadcast_strides(a.b, out);
  const bool* c = a.cond.data<bool>();
  const T* pa = a.a.data<T>();
  const T* pb = a.b.data<T>();
  T* y = a.y.data<T>();
  for (int64_t i = 0; i < a.y.numel(); ++i)
    y[strided_offset(i, out, a.y.strides())] = c[strided_offset(i, out, sc)]
                                                   ? pa[strided_offset(i, out, sa)]
                                                   : pb[strided_offset(i, out, sb)];
}

void where_cpu_ref(const WhereArgs& a) {
  check_where_args(a);
  AIM_DISPATCH_ALL_TYPES(a.a.dtype(), T, { where_ref_typed<T>(a); });
}

// ---- cpu.omp -------------------------------------------------------------------------------

template <class T>
using Comp = std::conditional_t<std::is_integral_v<T>, T,
                                std::conditional_t<std::is_same_v<T, double>, double, float>>;

template <BinaryKind K, class T>
struct BinaryLoop {
  using C = Comp<T>;
  using Out = std::conditional_t<is_comparison(K), bool, T>;
  const T* a;
  const T* b;
  C alpha;
  Out f(T x, T z) const {
    if constexpr (is_comparison(K)) {
      return compare_value<C>(K, C(x), C(z));
    } else {
      return Out(binary_value<C>(K, C(x), C(z), alpha));
    }
  }
  void operator()(Out* dst, const int64_t* off, const int64_t* st, int64_t m) const {
    const T* pa = a + off[0];
    const T* pb = b + off[1];
    const int64_t sa = st[0], sb = st[1];
    if (sa == 1 && sb == 1) {
#pragma omp simd  // element k reads inputs at k only; forces vectorising (GCC may not, see README)
      for (int64_t k = 0; k < m; ++k) dst[k] = f(pa[k], pb[k]);
    } else if (sa == 1 && sb == 0) {
      const T vb = pb[0];
#pragma omp simd  // element k reads inputs at k only; forces vectorising (GCC may not, see README)
      for (int64_t k = 0; k < m; ++k) dst[k] = f(pa[k], vb);
    } else if (sa == 0 && sb == 1) {
      const T va = pa[0];
#pragma omp simd  // element k reads inputs at k only; forces vectorising (GCC may not, see README)
      for (int64_t k = 0; k < m; ++k) dst[k] = f(va, pb[k]);
    } else {
      for (int64_t k = 0; k < m; ++k) dst[k] = f(pa[k * sa], pb[k * sb]);
    }
  }
};

template <BinaryKind K, class T>
void binary_omp_kind(const BinaryArgs& a) {
  using L = BinaryLoop<K, T>;
  const EwLayout l = make_ew_layout(a.y, {&a.a, &a.b});
  ew_cpu_run(l, a.y.data<typename L::Out>(), 2,
             L{a.a.data<T>(), a.b.data<T>(), typename L::C(a.alpha)});
}

template <class T>
void binary_omp_typed(const BinaryArgs& a) {
  check_no_zero_divisor<T>(a);
  switch (a.kind) {
#define AIM_RUN_CASE(n)                   \
  case BinaryKind::n:                     \
    binary_omp_kind<BinaryKind::n, T>(a); \
    break;
    AIM_BINARY_KINDS(AIM_RUN_CASE)
#undef AIM_RUN_CASE
  }
}

void binary_cpu_omp(const BinaryArgs& a) {
  check_binary_args(a);
  switch (a.a.dtype()) {
    case DType::f32:
      return binary_omp_typed<float>(a);
    case DType::f64:
      return binary_omp_typed<double>(a);
    case DType::f16:
      return binary_omp_typed<Half>(a);
    case DType::bf16:
      return binary_omp_typed<BFloat16>(a);
    case DType::i32:
      return binary_omp_typed<int32_t>(a);
    case DType::i64:
      return binary_omp_typed<int64_t>(a);
    default:
      AIM_FAIL("[binary] cpu.omp takes f32 f64 f16 bf16 i32 i64, got ", dtype_name(a.a.dtype()));
  }
}

template <class T>
struct WhereLoop {
  const bool* c;
  const T* a;
  const T* b;
  void operator()(T* dst, const int64_t* off, const int64_t* st, int64_t m) const {
    const bool* pc = c + off[0];
    const T* pa = a + off[1];
    const T* pb = b + off[2];
    if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
#pragma omp simd  // element k reads inputs at k only; forces vectorising (GCC may not, see README)
      for (int64_t k = 0; k < m; ++k) dst[k] = pc[k] ? pa[k] : pb[k];
    } else {
      for (int64_t k = 0; k < m; ++k) dst[k] = pc[k * st[0]] ? pa[k * st[1]] : pb[k * st[2]];
    }
  }
};

template <class T>
void where_omp_typed(const WhereArgs& a) {
  const EwLayout l = make_ew_layout(a.y, {&a.cond, &a.a, &a.b});
  ew_cpu_run(l, a.y.data<T>(), 3, WhereLoop<T>{a.cond.data<bool>(), a.a.data<T>(), a.b.data<T>()});
}

void where_cpu_omp(const WhereArgs& a) {
  check_where_args(a);
  AIM_DISPATCH_ALL_TYPES(a.a.dtype(), T, { where_omp_typed<T>(a); });
}

std::vector<DType> binary_dtypes() {
  return {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64};
}
std::vector<DType> all_dtypes() { return {std::begin(kAllDTypes), std::end(kAllDTypes)}; }

}  // namespace

void binary(const BinaryArgs& a) { AIM_DISPATCH_OP(BinaryArgs, "binary", a); }
void where(const WhereArgs& a) { AIM_DISPATCH_OP(WhereArgs, "where", a); }

void register_binary_cpu(Registry& r) {
  auto& b = r.op<BinaryArgs>("binary");
  b.description =
      "elementwise y = f(a, b) with broadcasting: add sub mul div pow max min cmp prelu";
  b.add({"cpu.ref", Backend::CPU, Provider::Own, binary_cpu_ref, binary_dtypes()});
  b.add({"cpu.omp", Backend::CPU, Provider::Own, binary_cpu_omp, binary_dtypes()});
  b.set_default(Backend::CPU, "cpu.omp");
  b.set_cost(binary_cost);
  b.make_case = binary_cpu::make_binary_case;
  b.set_shape_fields(binary_cpu::binary_shape_fields());
  b.add_test_shapes(binary_cpu::binary_test_shapes());
  b.small_enough_for_simt = binary_cpu::binary_small_enough_for_simt;
  b.tolerance = binary_cpu::binary_tolerance;

  auto& w = r.op<WhereArgs>("where");
  w.description = "y = cond ? a : b with broadcasting";
  w.add({"cpu.ref", Backend::CPU, Provider::Own, where_cpu_ref, all_dtypes()});
  w.add({"cpu.omp", Backend::CPU, Provider::Own, where_cpu_omp, all_dtypes()});
  w.set_default(Backend::CPU, "cpu.omp");
  w.set_cost(where_cost);
  w.make_case = binary_cpu::make_where_case;
  w.set_shape_fields(binary_cpu::where_shape_fields());
  w.add_test_shapes(binary_cpu::where_test_shapes());
  w.small_enough_for_simt = binary_cpu::where_small_enough_for_simt;
}

}  // namespace aim::kernels
