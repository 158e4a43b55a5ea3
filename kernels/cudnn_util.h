// Shared helpers of the cuDNN variants (*_cudnn.cpp): dtype -> cudnnDataType_t, scaling factors,
// RAII descriptor wrappers, the int-range check of cuDNN's legacy API, and the process-wide record
// of the convolution algorithms chosen so far. Which API each variant uses, what it cannot take and
// what is verified: docs/cudnn.md.
//
// The record (cudnn_conv_algorithms_summary) is declared in every build so the trainer can write it
// into results unconditionally; it is empty in CPU-only builds. The rest needs the CUDA toolkit.
#pragma once
#include <string>

namespace aim::kernels {

// One line per convolution key chosen so far in this process, "key -> algorithm (details)",
// sorted by key; "" when none was chosen (or no CUDA build).
std::string cudnn_conv_algorithms_summary();
// Records (or replaces) the algorithm chosen for a key; called by kernels/conv/conv2d_cudnn.cpp.
void record_cudnn_conv_algorithm(const std::string& key, const std::string& algorithm);

}  // namespace aim::kernels

#ifdef AIM_CUDA
#include <cudnn.h>

#include <climits>
#include <cstdint>

#include "tensor/cuda_check.h"
#include "tensor/tensor.h"

namespace aim::kernels::cudnn {

// Tensor element type; f32/f64/f16/bf16 only (the variants' dtype lists keep other types away).
inline cudnnDataType_t data_type(DType t) {
  switch (t) {
    case DType::f32:
      return CUDNN_DATA_FLOAT;
    case DType::f64:
      return CUDNN_DATA_DOUBLE;
    case DType::f16:
      return CUDNN_DATA_HALF;
    case DType::bf16:
      return CUDNN_DATA_BFLOAT16;
    default:
      AIM_FAIL("[cudnn] takes f32, f64, f16, bf16 tensors, got ", dtype_name(t));
  }
}

// Arithmetic type of a convolution (the descriptor's computeType): fp32 for 16-bit data
// (PSEUDO_HALF / PSEUDO_BFLOAT16 configurations), else the data type.
inline cudnnDataType_t compute_type(DType t) {
  return t == DType::f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
}

// alpha/beta blend factors live in host memory: double for DOUBLE tensors, float for the others.
class Scale {
 public:
  Scale(DType t, double v) : is_double_(t == DType::f64), d_(v), f_(float(v)) {}
  const void* ptr() const { return is_double_ ? static_cast<const void*>(&d_) : &f_; }

 private:
  bool is_double_;
  double d_;
  float f_;
};

// cuDNN's status as a supports() reason: "cuDNN rejects <what>: CUDNN_STATUS_...".
inline std::string rejects(const std::string& what, cudnnStatus_t st) {
  return str("cuDNN rejects ", what, ": ", cudnnGetErrorString(st));
}

// "" when every dimension and the element count of t fit cuDNN's legacy int arguments.
inline std::string int_range_reason(const char* name, const Tensor& t) {
  int64_t biggest = t.numel();
  for (int64_t s : t.sizes()) biggest = s > biggest ? s : biggest;
  if (biggest > INT_MAX)
    return str("cuDNN's legacy API takes int sizes (<= ", INT_MAX, "), ", name, " is ",
               to_string(t.sizes()), " (", t.numel(), " elements)");
  return "";
}

// RAII wrappers: create on construction, destroy on scope exit, convert to the raw handle.
// Setters return cuDNN's status so supports() can turn a refusal into a reason.
class TensorDesc {
 public:
  TensorDesc() { AIM_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d_)); }
  ~TensorDesc() { cudnnDestroyTensorDescriptor(d_); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  operator cudnnTensorDescriptor_t() const { return d_; }
  // Packed NCHW.
  [[nodiscard]] cudnnStatus_t set(DType t, int64_t n, int64_t c, int64_t h, int64_t w) {
    return cudnnSetTensor4dDescriptor(d_, CUDNN_TENSOR_NCHW, data_type(t), int(n), int(c), int(h),
                                      int(w));
  }

 private:
  cudnnTensorDescriptor_t d_ = nullptr;
};

class FilterDesc {
 public:
  FilterDesc() { AIM_CUDNN_CHECK(cudnnCreateFilterDescriptor(&d_)); }
  ~FilterDesc() { cudnnDestroyFilterDescriptor(d_); }
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
  operator cudnnFilterDescriptor_t() const { return d_; }
  // [K, C/groups, R, S] packed.
  [[nodiscard]] cudnnStatus_t set(DType t, int64_t k, int64_t c, int64_t r, int64_t s) {
    return cudnnSetFilter4dDescriptor(d_, data_type(t), CUDNN_TENSOR_NCHW, int(k), int(c), int(r),
                                      int(s));
  }

 private:
  cudnnFilterDescriptor_t d_ = nullptr;
};

class ConvDesc {
 public:
  ConvDesc() { AIM_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d_)); }
  ~ConvDesc() { cudnnDestroyConvolutionDescriptor(d_); }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
  operator cudnnConvolutionDescriptor_t() const { return d_; }

 private:
  cudnnConvolutionDescriptor_t d_ = nullptr;
};

class PoolDesc {
 public:
  PoolDesc() { AIM_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&d_)); }
  ~PoolDesc() { cudnnDestroyPoolingDescriptor(d_); }
  PoolDesc(const PoolDesc&) = delete;
  PoolDesc& operator=(const PoolDesc&) = delete;
  operator cudnnPoolingDescriptor_t() const { return d_; }

 private:
  cudnnPoolingDescriptor_t d_ = nullptr;
};

}  // namespace aim::kernels::cudnn
#endif  // AIM_CUDA
