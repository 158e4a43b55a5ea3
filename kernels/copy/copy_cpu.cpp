// cpu.ref: one generic loop over the linear index with N-d offsets. Obviously right.
// cpu.fast: memcpy or bulk conversion when both sides are contiguous; otherwise OpenMP over the
// rows of the last dimension, with the inner loop on the two inner strides.
// Test cases: copy_cases.cpp.
#include "kernels/copy/copy_cpu.h"

#include <cstring>

#include "kernels/copy/copy.h"
#include "kernels/registry.h"
#include "kernels/strided.h"

namespace aim::kernels {
namespace {

void check_copy_args(const CopyArgs& a) {
  AIM_CHECK(a.src.sizes() == a.dst.sizes(), "[copy] src ", to_string(a.src.sizes()), " and dst ",
            to_string(a.dst.sizes()), " differ in shape");
  AIM_CHECK(a.src.device() == a.dst.device(), "[copy] src on ", a.src.device().str(), ", dst on ",
            a.dst.device().str(), ": same-device copies only");
}

void copy_cpu_ref(const CopyArgs& a) {
  check_copy_args(a);
  const int64_t n = a.dst.numel();
  AIM_DISPATCH_ALL_TYPES(a.src.dtype(), S, {
    AIM_DISPATCH_ALL_TYPES(a.dst.dtype(), D, {
      const S* s = static_cast<const S*>(a.src.raw_data());
      D* d = static_cast<D*>(a.dst.raw_data());
      for (int64_t i = 0; i < n; ++i)
        d[strided_offset(i, a.dst.sizes(), a.dst.strides())] =
            cast_value<D>(s[strided_offset(i, a.src.sizes(), a.src.strides())]);
    });
  });
}

template <class S, class D>
void copy_rows(const CopyArgs& a) {
  const S* s = static_cast<const S*>(a.src.raw_data());
  D* d = static_cast<D*>(a.dst.raw_data());
  const int64_t n = a.dst.numel();
  if (a.src.is_contiguous() && a.dst.is_contiguous()) {
    if constexpr (std::is_same_v<S, D>) {
      const int64_t bytes = n * int64_t(sizeof(S));
      const int64_t chunk = int64_t(1) << 20;
#pragma omp parallel for schedule(static) if (bytes > (int64_t(4) << 20))
      for (int64_t off = 0; off < bytes; off += chunk)
        std::memcpy(reinterpret_cast<char*>(d) + off, reinterpret_cast<const char*>(s) + off,
                    size_t(std::min(chunk, bytes - off)));
      return;
    } else if constexpr (std::is_same_v<S, float> && std::is_same_v<D, Half>) {
      convert_f32_to_f16(s, d, n);
      return;
    } else if constexpr (std::is_same_v<S, Half> && std::is_same_v<D, float>) {
      convert_f16_to_f32(s, d, n);
      return;
    } else if constexpr (std::is_same_v<S, float> && std::is_same_v<D, BFloat16>) {
      convert_f32_to_bf16(s, d, n);
      return;
    } else if constexpr (std::is_same_v<S, BFloat16> && std::is_same_v<D, float>) {
      convert_bf16_to_f32(s, d, n);
      return;
    } else {
#pragma omp parallel for schedule(static) if (n > (int64_t(1) << 16))
      for (int64_t i = 0; i < n; ++i) d[i] = cast_value<D>(s[i]);
      return;
    }
  }
  if (n == 0) return;
  const int64_t last = a.dst.dim() == 0 ? 1 : a.dst.size(-1);
  const int64_t ss = a.dst.dim() == 0 ? 0 : a.src.stride(-1);
  const int64_t ds = a.dst.dim() == 0 ? 0 : a.dst.stride(-1);
  const int64_t rows = n / last;
#pragma omp parallel for schedule(static) if (n > (int64_t(1) << 16))
  for (int64_t r = 0; r < rows; ++r) {
    const S* sr = s + strided_offset(r * last, a.src.sizes(), a.src.strides());
    D* dr = d + strided_offset(r * last, a.dst.sizes(), a.dst.strides());
    if (ss == 1 && ds == 1) {  // contiguous rows of a strided view (a narrowed gradient)
      if constexpr (std::is_same_v<S, D>) {
        std::memcpy(dr, sr, size_t(last) * sizeof(S));
      } else {
#pragma omp simd
        for (int64_t c = 0; c < last; ++c) dr[c] = cast_value<D>(sr[c]);
      }
    } else {
      for (int64_t c = 0; c < last; ++c) dr[c * ds] = cast_value<D>(sr[c * ss]);
    }
  }
}

void copy_cpu_fast(const CopyArgs& a) {
  check_copy_args(a);
  AIM_DISPATCH_ALL_TYPES(a.src.dtype(), S,
                         { AIM_DISPATCH_ALL_TYPES(a.dst.dtype(), D, { copy_rows<S, D>(a); }); });
}

void fill_cpu_ref(const FillArgs& a) {
  const int64_t n = a.dst.numel();
  AIM_DISPATCH_ALL_TYPES(a.dst.dtype(), D, {
    D* d = static_cast<D*>(a.dst.raw_data());
    const D v = cast_value<D>(a.value);
    for (int64_t i = 0; i < n; ++i) d[strided_offset(i, a.dst.sizes(), a.dst.strides())] = v;
  });
}

template <class D>
void fill_contiguous(D* d, int64_t n, D v) {
#pragma omp parallel for schedule(static) if (n > (int64_t(1) << 16))
  for (int64_t i = 0; i < n; ++i) d[i] = v;
}

void fill_cpu_fast(const FillArgs& a) {
  if (!a.dst.is_contiguous()) return fill_cpu_ref(a);
  AIM_DISPATCH_ALL_TYPES(a.dst.dtype(), D, {
    fill_contiguous(static_cast<D*>(a.dst.raw_data()), a.dst.numel(), cast_value<D>(a.value));
  });
}

std::vector<DType> all_dtypes() { return {std::begin(kAllDTypes), std::end(kAllDTypes)}; }

}  // namespace

void copy(const CopyArgs& a) { AIM_DISPATCH_OP(CopyArgs, "copy", a); }
void fill(const FillArgs& a) { AIM_DISPATCH_OP(FillArgs, "fill", a); }

void register_copy_cpu(Registry& r) {
  auto& c = r.op<CopyArgs>("copy");
  c.description = "strided copy with dtype cast";
  c.add({"cpu.ref", Backend::CPU, Provider::Own, copy_cpu_ref, all_dtypes()});
  c.add({"cpu.fast", Backend::CPU, Provider::Own, copy_cpu_fast, all_dtypes()});
  c.set_default(Backend::CPU, "cpu.fast");
  c.set_cost(copy_cost);
  c.make_case = copy_cpu::make_copy_case;
  c.ref_uses_case_dtype = true;
  c.set_shape_fields(copy_cpu::copy_shape_fields());
  c.add_test_shapes(copy_cpu::copy_test_shapes());

  auto& f = r.op<FillArgs>("fill");
  f.description = "fill with a scalar";
  f.add({"cpu.ref", Backend::CPU, Provider::Own, fill_cpu_ref, all_dtypes()});
  f.add({"cpu.fast", Backend::CPU, Provider::Own, fill_cpu_fast, all_dtypes()});
  f.set_default(Backend::CPU, "cpu.fast");
  f.set_cost(fill_cost);
  f.make_case = copy_cpu::make_fill_case;
  f.ref_uses_case_dtype = true;
  f.set_shape_fields(copy_cpu::fill_shape_fields());
  f.add_test_shapes(copy_cpu::fill_test_shapes());
}

}  // namespace aim::kernels

// The hooks tensor/ runs for Tensor::contiguous, to(dtype), copy_ and fill_ (tensor/tensor.h): the
// one static initialiser of kernels/. It registers no variant, only hands tensor/ two function
// pointers, and must run before any tensor copy, which may come before the registry is first used.
// This object is always linked with the kernels: the registry calls register_copy_cpu above.
namespace aim::kernels {
namespace {
void tensor_copy(const Tensor& src, const Tensor& dst) { copy(CopyArgs{src, dst}); }
void tensor_fill(const Tensor& dst, double value) { fill(FillArgs{dst, value}); }
[[maybe_unused]] const bool g_tensor_hooks_installed = [] {
  set_tensor_kernel_hooks(TensorKernelHooks{tensor_copy, tensor_fill});
  return true;
}();
}  // namespace
}  // namespace aim::kernels
