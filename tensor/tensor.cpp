#include "tensor/tensor.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <ostream>
#include <sstream>

namespace aim {

// Constant-initialised (no constructor runs), so kernels/copy may install them from a static
// initialiser in any order.
namespace {
TensorKernelHooks g_kernel_hooks;
}  // namespace

void set_tensor_kernel_hooks(const TensorKernelHooks& hooks) { g_kernel_hooks = hooks; }

void copy_same_device(const Tensor& src, const Tensor& dst) {
  AIM_CHECK(g_kernel_hooks.copy,
            "tensor copy: no copy kernel installed (kernels/copy installs it "
            "when the kernels library is linked; docs/design-notes.md, Layers)");
  g_kernel_hooks.copy(src, dst);
}

void fill_tensor(const Tensor& dst, double value) {
  AIM_CHECK(g_kernel_hooks.fill,
            "tensor fill: no fill kernel installed (kernels/copy installs it "
            "when the kernels library is linked; docs/design-notes.md, Layers)");
  g_kernel_hooks.fill(dst, value);
}

std::string to_string(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t v : s) n *= v;
  return n;
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (int64_t i = int64_t(s.size()) - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= std::max<int64_t>(s[i], 1);
  }
  return st;
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape r(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    AIM_CHECK(x == y || x == 1 || y == 1, "shapes ", to_string(a), " and ", to_string(b),
              " cannot be broadcast together (dim ", i, ": ", x, " vs ", y, ")");
    r[i] = x == 1 ? y : x;
  }
  return r;
}

namespace {
Allocator& allocator_for(Device d, bool pinned) {
  if (pinned) return pinned_host_allocator();
  return d.is_cpu() ? cpu_allocator() : cuda_allocator(d.index);
}
}  // namespace

Storage::Storage(size_t n, Device d, bool pin) : nbytes(n), device(d), pinned(pin) {
  AIM_CHECK(!pin || d.is_cpu(), "pinned memory is host memory, not ", d.str());
  data = allocator_for(d, pinned).allocate(n);
}

Storage::~Storage() { allocator_for(device, pinned).deallocate(data, nbytes); }

Tensor Tensor::pin_memory() const {
  AIM_CHECK(defined() && device().is_cpu(), "pin_memory: needs a CPU tensor, got ",
            defined() ? device().str() : std::string("an undefined one"));
  if (is_pinned() && is_contiguous()) return *this;
  Tensor t;
  t.storage_ = std::make_shared<Storage>(size_t(nbytes()), kCPU, true);
  t.sizes_ = sizes_;
  t.strides_ = contiguous_strides(sizes_);
  t.dtype_ = dtype_;
  t.copy_(*this);
  return t;
}

Tensor Tensor::empty(const Shape& sizes, DType dtype, Device device) {
  for (int64_t s : sizes) AIM_CHECK(s >= 0, "negative size in shape ", to_string(sizes));
  Tensor t;
  t.storage_ = std::make_shared<Storage>(size_t(shape_numel(sizes) * dtype_size(dtype)), device);
  t.sizes_ = sizes;
  t.strides_ = contiguous_strides(sizes);
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::from_storage(std::shared_ptr<Storage> s, int64_t offset, const Shape& sizes,
                            const Shape& strides, DType dtype) {
  AIM_CHECK(sizes.size() == strides.size(), "from_storage: sizes ", to_string(sizes),
            " and strides ", to_string(strides), " differ in rank");
  Tensor t;
  t.storage_ = std::move(s);
  t.offset_ = offset;
  t.sizes_ = sizes;
  t.strides_ = strides;
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::zeros(const Shape& sizes, DType dtype, Device device) {
  return full(sizes, 0.0, dtype, device);
}
Tensor Tensor::ones(const Shape& sizes, DType dtype, Device device) {
  return full(sizes, 1.0, dtype, device);
}
Tensor Tensor::full(const Shape& sizes, double value, DType dtype, Device device) {
  Tensor t = empty(sizes, dtype, device);
  t.fill_(value);
  return t;
}
Tensor Tensor::arange(int64_t n, DType dtype, Device device) {
  Tensor t = empty({n}, DType::f64, kCPU);
  double* p = t.data<double>();
  for (int64_t i = 0; i < n; ++i) p[i] = double(i);
  return t.to(dtype).to(device);
}

int64_t Tensor::wrap_dim(int64_t d) const {
  const int64_t n = dim();
  AIM_CHECK(d >= -n && d < std::max<int64_t>(n, 1), "dim ", d, " out of range for a ", n,
            "-d tensor of shape ", to_string(sizes_));
  return d < 0 ? d + n : d;
}

void* Tensor::raw_data() const {
  AIM_CHECK(defined(), "data access on an undefined tensor");
  return static_cast<char*>(storage_->data) + offset_ * dtype_size(dtype_);
}

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;  // no element to misplace, whatever the strides (as PyTorch)
  int64_t expected = 1;
  for (int64_t i = dim() - 1; i >= 0; --i) {
    if (sizes_[i] == 1) continue;
    if (strides_[i] != expected) return false;
    expected *= sizes_[i];
  }
  return true;
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  Tensor out = empty(sizes_, dtype_, device());
  copy_same_device(*this, out);
  return out;
}

Tensor Tensor::view(Shape sizes) const {
  int64_t infer = -1, known = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1) {
      AIM_CHECK(infer < 0, "view: more than one -1 in ", to_string(sizes));
      infer = int64_t(i);
    } else {
      known *= sizes[i];
    }
  }
  if (infer >= 0) {
    AIM_CHECK(known != 0 && numel() % known == 0, "view: cannot infer -1 in ", to_string(sizes),
              " for ", numel(), " elements");
    sizes[infer] = numel() / known;
  }
  AIM_CHECK(shape_numel(sizes) == numel(), "view: shape ", to_string(sizes), " has ",
            shape_numel(sizes), " elements, tensor ", to_string(sizes_), " has ", numel());
  AIM_CHECK(is_contiguous(), "view of a non-contiguous tensor ", to_string(sizes_), " strides ",
            to_string(strides_), "; use reshape()");
  Tensor t = *this;
  t.sizes_ = sizes;
  t.strides_ = contiguous_strides(sizes);
  return t;
}

Tensor Tensor::reshape(Shape sizes) const {
  return is_contiguous() ? view(std::move(sizes)) : contiguous().view(std::move(sizes));
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  AIM_CHECK(int64_t(dims.size()) == dim(), "permute: ", dims.size(), " dims for a ", dim(),
            "-d tensor");
  Tensor t = *this;
  std::vector<bool> seen(dim(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim(dims[i]);
    AIM_CHECK(!seen[d], "permute: dim ", d, " repeated");
    seen[d] = true;
    t.sizes_[i] = sizes_[d];
    t.strides_[i] = strides_[d];
  }
  return t;
}

Tensor Tensor::transpose(int64_t a, int64_t b) const {
  a = wrap_dim(a);
  b = wrap_dim(b);
  Tensor t = *this;
  std::swap(t.sizes_[a], t.sizes_[b]);
  std::swap(t.strides_[a], t.strides_[b]);
  return t;
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  d = wrap_dim(d);
  const int64_t n = sizes_[d];
  AIM_CHECK(step > 0, "slice: step must be positive, got ", step);
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Tensor t = *this;
  t.offset_ += start * strides_[d];
  t.sizes_[d] = (end - start + step - 1) / step;
  t.strides_[d] *= step;
  return t;
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  d = wrap_dim(d);
  AIM_CHECK(index >= -sizes_[d] && index < sizes_[d], "select: index ", index,
            " out of range for dim ", d, " of size ", sizes_[d]);
  if (index < 0) index += sizes_[d];
  Tensor t = *this;
  t.offset_ += index * strides_[d];
  t.sizes_.erase(t.sizes_.begin() + d);
  t.strides_.erase(t.strides_.begin() + d);
  return t;
}

Tensor Tensor::expand(const Shape& sizes) const {
  AIM_CHECK(sizes.size() >= sizes_.size(), "expand: cannot expand ", to_string(sizes_), " to ",
            to_string(sizes));
  const size_t lead = sizes.size() - sizes_.size();
  Tensor t = *this;
  t.sizes_ = sizes;
  t.strides_.assign(sizes.size(), 0);
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i < lead) continue;
    const int64_t s = sizes_[i - lead];
    if (s == sizes[i]) {
      t.strides_[i] = strides_[i - lead];
    } else {
      AIM_CHECK(s == 1, "expand: dim ", i, " of ", to_string(sizes_), " is ", s,
                ", cannot expand to ", to_string(sizes));
    }
  }
  return t;
}

Tensor Tensor::unsqueeze(int64_t d) const {
  const int64_t n = dim();
  AIM_CHECK(d >= -n - 1 && d <= n, "unsqueeze: dim ", d, " out of range for ", n, "-d tensor");
  if (d < 0) d += n + 1;
  Tensor t = *this;
  const int64_t st = d < n ? strides_[d] * sizes_[d] : 1;
  t.sizes_.insert(t.sizes_.begin() + d, 1);
  t.strides_.insert(t.strides_.begin() + d, st);
  return t;
}

Tensor Tensor::squeeze(int64_t d) const {
  d = wrap_dim(d);
  AIM_CHECK(sizes_[d] == 1, "squeeze: dim ", d, " has size ", sizes_[d], ", not 1");
  Tensor t = *this;
  t.sizes_.erase(t.sizes_.begin() + d);
  t.strides_.erase(t.strides_.begin() + d);
  return t;
}

Tensor Tensor::to(Device d) const {
  if (d == device()) return *this;
  Tensor src = contiguous();
  Tensor out = empty(sizes_, dtype_, d);
  copy_bytes(out.raw_data(), d, src.raw_data(), src.device(), size_t(nbytes()));
  return out;
}

Tensor Tensor::to(DType t) const {
  if (t == dtype_) return *this;
  Tensor out = empty(sizes_, t, device());
  copy_same_device(*this, out);
  return out;
}

Tensor Tensor::clone() const {
  Tensor out = empty(sizes_, dtype_, device());
  copy_same_device(*this, out);
  return out;
}

void Tensor::copy_(const Tensor& src) const {
  Tensor s = src.sizes() == sizes_ ? src : src.expand(sizes_);
  if (s.device() != device()) {
    // Cast on the source side, move contiguous bytes, then scatter into our strides.
    s = s.to(dtype_).contiguous().to(device());
  }
  copy_same_device(s, *this);
}

void Tensor::fill_(double value) const { fill_tensor(*this, value); }

double Tensor::item() const {
  AIM_CHECK(numel() == 1, "item() on a tensor with ", numel(), " elements, shape ",
            to_string(sizes_));
  return to_vector<double>()[0];
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "Tensor(undefined)";
  os << "Tensor(" << to_string(t.sizes()) << ", " << dtype_name(t.dtype()) << ", "
     << t.device().str() << ")";
  const std::vector<double> v = t.to_vector<double>();
  // Print the last dimension as rows; at most 8 rows of 8 values, elided in the middle.
  const int64_t cols = t.dim() == 0 ? 1 : std::max<int64_t>(t.size(-1), 1);
  const int64_t rows = int64_t(v.size()) / cols;
  auto fmt = [&](double x) {
    std::ostringstream s;
    if (is_floating(t.dtype()))
      s << std::setprecision(6) << std::setw(11) << x;
    else
      s << int64_t(x);
    return s.str();
  };
  for (int64_t r = 0; r < rows; ++r) {
    if (rows > 8 && r == 4) {
      os << "\n  ...";
      r = rows - 4;
    }
    os << "\n  [";
    for (int64_t c = 0; c < cols; ++c) {
      if (cols > 8 && c == 4) {
        os << " ...";
        c = cols - 4;
      }
      os << (c ? " " : "") << fmt(v[r * cols + c]);
    }
    os << "]";
  }
  return os;
}

}  // namespace aim
