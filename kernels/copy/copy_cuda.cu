// cuda.strided: one thread per element in a grid-stride loop. The N-d offsets of src and dst
// come from a size/stride table passed by value (kernel parameters live in constant memory).
// Traffic: src read once, dst written once -> bandwidth bound; contiguous pairs skip the index
// arithmetic. Up to kMaxDims (8) dims, any dtype pair.
// cuda.fill: grid-stride store of one value (contiguous), strided through the same table.
#include "kernels/copy/copy.h"
#include "kernels/cuda_common.h"

namespace aim::kernels::AIM_CUDA_NS {
namespace {

struct Strides {
  int ndim;
  int64_t sizes[kMaxDims];
  int64_t src[kMaxDims];
  int64_t dst[kMaxDims];
};

template <class D, class S>
__host__ __device__ __forceinline__ D convert(S v) {
  if constexpr (std::is_same_v<D, bool>) {
    return to_f32(v) != 0.0f;
  } else if constexpr (std::is_same_v<S, __half> || std::is_same_v<S, __nv_bfloat16>) {
    return static_cast<D>(to_f32(v));
  } else if constexpr (std::is_same_v<D, __half> || std::is_same_v<D, __nv_bfloat16>) {
    return from_f32<D>(static_cast<float>(v));
  } else {
    return static_cast<D>(v);
  }
}

template <class S, class D>
__global__ void copy_strided_kernel(const S* src, D* dst, int64_t n, Strides st, bool contiguous) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    if (contiguous) {
      dst[i] = convert<D>(src[i]);
      continue;
    }
    int64_t rem = i, so = 0, dof = 0;
    for (int d = st.ndim - 1; d >= 0; --d) {
      const int64_t idx = rem % st.sizes[d];
      rem /= st.sizes[d];
      so += idx * st.src[d];
      dof += idx * st.dst[d];
    }
    dst[dof] = convert<D>(src[so]);
  }
}

template <class D>
__global__ void fill_kernel(D* dst, int64_t n, Strides st, D v, bool contiguous) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    if (contiguous) {
      dst[i] = v;
      continue;
    }
    int64_t rem = i, dof = 0;
    for (int d = st.ndim - 1; d >= 0; --d) {
      dof += (rem % st.sizes[d]) * st.dst[d];
      rem /= st.sizes[d];
    }
    dst[dof] = v;
  }
}

Strides make_strides(const Tensor& src, const Tensor& dst) {
  AIM_CHECK(dst.dim() <= kMaxDims, "[copy] cuda.strided handles up to ", kMaxDims, " dims, got ",
            dst.dim());
  Strides st{};
  st.ndim = int(dst.dim());
  for (int d = 0; d < st.ndim; ++d) {
    st.sizes[d] = dst.size(d);
    st.src[d] = src.defined() ? src.stride(d) : 0;
    st.dst[d] = dst.stride(d);
  }
  return st;
}

std::string dims_ok(const Tensor& t) {
  return t.dim() <= kMaxDims ? "" : str("needs at most ", kMaxDims, " dims, got ", t.dim());
}

void copy_cuda_strided(const CopyArgs& a) {
  AIM_CHECK(a.src.sizes() == a.dst.sizes(), "[copy] src ", to_string(a.src.sizes()), " and dst ",
            to_string(a.dst.sizes()), " differ in shape");
  const int64_t n = a.dst.numel();
  if (n == 0) return;
  const Strides st = make_strides(a.src, a.dst);
  const bool contiguous = a.src.is_contiguous() && a.dst.is_contiguous();
  constexpr int kThreads = 256;
  AIM_DISPATCH_CUDA_ALL_TYPES(a.src.dtype(), S, {
    AIM_DISPATCH_CUDA_ALL_TYPES(a.dst.dtype(), D, {
      AIM_LAUNCH(grid_for(n, kThreads), kThreads, 0, stream_for(a.dst.device()),
                 copy_strided_kernel<S, D>)
      (static_cast<const S*>(a.src.raw_data()), static_cast<D*>(a.dst.raw_data()), n, st,
       contiguous);
    });
  });
  AIM_CHECK_LAUNCH();
}

void fill_cuda(const FillArgs& a) {
  const int64_t n = a.dst.numel();
  if (n == 0) return;
  const Strides st = make_strides(Tensor(), a.dst);
  constexpr int kThreads = 256;
  AIM_DISPATCH_CUDA_ALL_TYPES(a.dst.dtype(), D, {
    const D v = convert<D>(a.value);
    AIM_LAUNCH(grid_for(n, kThreads), kThreads, 0, stream_for(a.dst.device()), fill_kernel<D>)
    (static_cast<D*>(a.dst.raw_data()), n, st, v, a.dst.is_contiguous());
  });
  AIM_CHECK_LAUNCH();
}

std::vector<DType> all_dtypes() { return {std::begin(kAllDTypes), std::end(kAllDTypes)}; }

}  // namespace

void register_copy_cuda(Registry& r) {
  auto& c = r.op<CopyArgs>("copy");
  c.add({"cuda.strided", AIM_CUDA_BACKEND, Provider::Own, copy_cuda_strided, all_dtypes(),
         [](const CopyArgs& a) { return dims_ok(a.dst); }});
  c.set_default(AIM_CUDA_BACKEND, "cuda.strided");
  auto& f = r.op<FillArgs>("fill");
  f.add({"cuda.fill", AIM_CUDA_BACKEND, Provider::Own, fill_cuda, all_dtypes(),
         [](const FillArgs& a) { return dims_ok(a.dst); }});
  f.set_default(AIM_CUDA_BACKEND, "cuda.fill");
}

}  // namespace aim::kernels::AIM_CUDA_NS
