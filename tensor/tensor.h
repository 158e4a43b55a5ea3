// Tensor: a cheap handle on shared storage with an element offset, sizes, strides, a dtype and a
// device. Views (reshape of contiguous data, permute, transpose, slice, select, expand) share
// storage; contiguous() copies only when needed. Nothing moves between devices implicitly.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tensor/allocator.h"
#include "tensor/dtype.h"

namespace aim {

using Shape = std::vector<int64_t>;
std::string to_string(const Shape& s);  // "[2, 3, 4]"
int64_t shape_numel(const Shape& s);
Shape contiguous_strides(const Shape& s);
// Broadcast two shapes, NumPy rules; throws naming both shapes when they are incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b);

struct Storage {
  void* data = nullptr;
  size_t nbytes = 0;
  Device device;
  bool pinned = false;  // CPU memory from pinned_host_allocator() (page-locked)
  Storage(size_t n, Device d, bool pinned = false);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

class Tensor {
 public:
  Tensor() = default;

  // Creation. Memory comes from the device's caching allocator; empty() leaves it uninitialised.
  static Tensor empty(const Shape& sizes, DType dtype = DType::f32, Device device = kCPU);
  static Tensor zeros(const Shape& sizes, DType dtype = DType::f32, Device device = kCPU);
  static Tensor ones(const Shape& sizes, DType dtype = DType::f32, Device device = kCPU);
  static Tensor full(const Shape& sizes, double value, DType dtype = DType::f32,
                     Device device = kCPU);
  static Tensor arange(int64_t n, DType dtype = DType::f32, Device device = kCPU);
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& sizes, Device device = kCPU);
  // A tensor over an existing storage (guard-byte tests, workspace carving).
  static Tensor from_storage(std::shared_ptr<Storage> s, int64_t offset, const Shape& sizes,
                             const Shape& strides, DType dtype);

  bool defined() const { return storage_ != nullptr; }
  int64_t dim() const { return int64_t(sizes_.size()); }
  const Shape& sizes() const { return sizes_; }
  const Shape& strides() const { return strides_; }
  int64_t size(int64_t d) const { return sizes_[wrap_dim(d)]; }
  int64_t stride(int64_t d) const { return strides_[wrap_dim(d)]; }
  int64_t numel() const { return shape_numel(sizes_); }
  int64_t nbytes() const { return numel() * dtype_size(dtype_); }
  int64_t offset() const { return offset_; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device : kCPU; }
  bool is_cuda() const { return device().is_cuda(); }
  // Page-locked host memory: copies from it to a GPU are asynchronous (tensor/allocator.h).
  bool is_pinned() const { return storage_ && storage_->pinned; }
  // A contiguous copy in page-locked host memory (this tensor when it already is one); CPU only.
  Tensor pin_memory() const;
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  int64_t wrap_dim(int64_t d) const;  // negative dims count from the end; checks range

  // Typed pointer to the first element (offset applied). Checks T against the dtype.
  template <class T>
  T* data() const {
    AIM_CHECK(dtype_of<T>() == dtype_, "data<", dtype_name(dtype_of<T>()), ">() on a ",
              dtype_name(dtype_), " tensor");
    return static_cast<T*>(raw_data());
  }
  void* raw_data() const;

  bool is_contiguous() const;
  Tensor contiguous() const;
  Tensor view(Shape sizes) const;     // contiguous only; one size may be -1
  Tensor reshape(Shape sizes) const;  // view when possible, else a contiguous copy
  Tensor flatten() const { return reshape({numel()}); }
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor transpose(int64_t a, int64_t b) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const {
    return slice(dim, start, start + length);
  }
  Tensor select(int64_t dim, int64_t index) const;
  Tensor expand(const Shape& sizes) const;  // broadcasting view (stride 0)
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze(int64_t dim) const;

  Tensor to(Device d) const;  // explicit transfer (copy); same device returns *this
  Tensor to(DType t) const;   // cast (copy); same dtype returns *this
  Tensor clone() const;
  // In-place: dst (this) = src; broadcasting src, casting dtype, any strides, across devices.
  void copy_(const Tensor& src) const;
  void fill_(double value) const;
  void zero_() const { fill_(0.0); }

  // Host access for tests and small things: copy to a CPU vector of T (cast as needed).
  template <class T>
  std::vector<T> to_vector() const;
  double item() const;  // one-element tensor, as double

 private:
  std::shared_ptr<Storage> storage_;
  int64_t offset_ = 0;
  Shape sizes_, strides_;
  DType dtype_ = DType::f32;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Same-device strided copy with dtype cast, and fill: the `copy` and `fill` ops of kernels/copy,
// a layer above tensor/ (docs/design-notes.md, "Layers"). tensor/ reaches them only through these
// two hooks, which kernels/copy installs before main (kernels/copy/copy_cpu.cpp); calling one that
// is not installed throws aim::Error naming it.
struct TensorKernelHooks {
  void (*copy)(const Tensor& src, const Tensor& dst) = nullptr;  // same device, any two dtypes
  void (*fill)(const Tensor& dst, double value) = nullptr;
};
void set_tensor_kernel_hooks(const TensorKernelHooks& hooks);
void copy_same_device(const Tensor& src, const Tensor& dst);  // runs the copy hook
void fill_tensor(const Tensor& dst, double value);            // runs the fill hook

template <class T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& sizes, Device device) {
  AIM_CHECK(int64_t(values.size()) == shape_numel(sizes), "from_vector: ", values.size(),
            " values for shape ", to_string(sizes));
  Tensor cpu = empty(sizes, dtype_of<T>(), kCPU);
  T* p = cpu.data<T>();
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return cpu.to(device);
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  Tensor c = to(kCPU).to(dtype_of<T>()).contiguous();
  const T* p = c.data<T>();
  return std::vector<T>(p, p + c.numel());
}

// Named tensors: a model's batch, inputs and outputs (models/model.h), a safetensors file's
// content.
using TensorMap = std::map<std::string, Tensor>;
// Every tensor of `m` on device `d` (tensors already there are shared, not copied).
inline TensorMap to_device(const TensorMap& m, Device d) {
  TensorMap r;
  for (const auto& [k, t] : m) r.emplace(k, t.to(d));
  return r;
}

}  // namespace aim
