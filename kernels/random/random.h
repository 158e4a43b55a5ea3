// Random fills and dropout, driven by the Philox-4x32-10 generator of tensor/philox.h: element i
// of a fill with (seed, offset) uses counter block offset + i / 4, word i % 4. Every element is a
// pure function of (seed, offset, i), so CPU and CUDA give the SAME numbers (bitwise for
// uniform, bernoulli and the dropout mask; normal to the last f32 bit up to libm differences).
// Shapes: y (and x, mask, dy, dx) contiguous, any shape; element i is the row-major index.
// Math and PyTorch equivalents: kernels/random/README.md
#pragma once
#include <cmath>

#include "kernels/op.h"
#include "tensor/philox.h"

namespace aim::kernels {

// y[i] = lo + (hi - lo) * u(i), u uniform in [0, 1) with 24 random bits (torch.Tensor.uniform_).
struct UniformArgs {
  Tensor y;  // any shape, float dtype
  float lo = 0, hi = 1;
  uint64_t seed = 0, offset = 0;
  Device device() const { return y.device(); }
  DType dtype() const { return y.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.out("y", s.y);
    f.param("lo", s.lo), f.param("hi", s.hi), f.param("seed", s.seed), f.param("offset", s.offset);
  }
};

// y[i] = mean + std * z(i), z standard normal by Box-Muller (torch.Tensor.normal_).
struct NormalArgs {
  Tensor y;  // any shape, float dtype
  float mean = 0, std = 1;
  uint64_t seed = 0, offset = 0;
  Device device() const { return y.device(); }
  DType dtype() const { return y.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.out("y", s.y);
    f.param("mean", s.mean), f.param("std", s.std), f.param("seed", s.seed);
    f.param("offset", s.offset);
  }
};

// y[i] = u(i) < p ? 1 : 0 in y's dtype (torch.Tensor.bernoulli_(p)).
struct BernoulliArgs {
  Tensor y;  // any shape, any dtype
  float p = 0.5f;
  uint64_t seed = 0, offset = 0;
  Device device() const { return y.device(); }
  DType dtype() const { return y.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.out("y", s.y);
    f.param("p", s.p), f.param("seed", s.seed), f.param("offset", s.offset);
  }
};

// Inverted dropout (F.dropout in training mode): mask[i] = u(i) >= p (1 = kept),
// y[i] = mask[i] ? x[i] / (1 - p) : 0. p = 0 copies x; p = 1 gives zeros.
struct DropoutFwdArgs {
  Tensor x, y;  // same shape, float dtype
  Tensor mask;  // same shape, u8
  float p = 0.5f;
  uint64_t seed = 0, offset = 0;
  Device device() const { return y.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("x", s.x), f.out("y", s.y), f.out("mask", s.mask);
    f.param("p", s.p), f.param("seed", s.seed), f.param("offset", s.offset);
  }
};

// dx[i] = mask[i] ? dy[i] / (1 - p) : 0.
struct DropoutBwdArgs {
  Tensor dy, mask, dx;  // same shape; mask u8
  float p = 0.5f;
  Device device() const { return dx.device(); }
  DType dtype() const { return dy.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("dy", s.dy), f.in("mask", s.mask), f.out("dx", s.dx);
    f.param("p", s.p);
  }
};

inline Cost uniform_cost(const UniformArgs& a) {
  return Cost{double(a.y.numel()), 0, double(a.y.nbytes())};
}
inline Cost normal_cost(const NormalArgs& a) {
  return Cost{double(a.y.numel()), 0, double(a.y.nbytes())};
}
inline Cost bernoulli_cost(const BernoulliArgs& a) { return Cost{0, 0, double(a.y.nbytes())}; }
inline Cost dropout_fwd_cost(const DropoutFwdArgs& a) {
  return Cost{double(a.x.numel()), double(a.x.nbytes()), double(a.y.nbytes() + a.mask.nbytes())};
}
inline Cost dropout_bwd_cost(const DropoutBwdArgs& a) {
  return Cost{double(a.dy.numel()), double(a.dy.nbytes() + a.mask.nbytes()), double(a.dx.nbytes())};
}

void uniform(const UniformArgs& a);
void normal(const NormalArgs& a);
void bernoulli(const BernoulliArgs& a);
void dropout_fwd(const DropoutFwdArgs& a);
void dropout_bwd(const DropoutBwdArgs& a);

// Argument checks shared by every variant (aim::Error with the op prefix).
void check_random_output(const char* op, const Tensor& y);
void check_dropout_fwd(const DropoutFwdArgs& a);
void check_dropout_bwd(const DropoutBwdArgs& a);

// One stream of random numbers: a seed and the next unused counter block. The autograd/layers
// code owns one per device. Not thread-safe: one owner draws from it.
class Generator {
 public:
  explicit Generator(uint64_t seed = 0, uint64_t offset = 0) : seed_(seed), offset_(offset) {}
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void set_state(uint64_t seed, uint64_t offset) {
    seed_ = seed;
    offset_ = offset;
  }
  // The offset to use for an n-element fill; advances past the counter blocks it consumes.
  uint64_t next(int64_t n) {
    const uint64_t o = offset_;
    offset_ += philox::blocks_for(uint64_t(n > 0 ? n : 0));
    return o;
  }

 private:
  uint64_t seed_, offset_;
};

// ---- element math shared by every variant (host, CUDA and the SIMT emulator) ----------------

// fmaf rounds once everywhere, so CPU and CUDA agree bitwise (a plain a * b + c may or may not
// be contracted into an FMA depending on the compiler).
AIM_HOST_DEVICE float uniform_value(float lo, float hi, float u) { return fmaf(hi - lo, u, lo); }
AIM_HOST_DEVICE float normal_value(float mean, float std, float z) { return fmaf(std, z, mean); }
// The scale of kept elements: 1 / (1 - p), 0 for p = 1 (nothing is kept).
AIM_HOST_DEVICE float dropout_scale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }

// philox::normal for a block's words already computed (the CUDA variant draws one block per
// thread and uses all four lanes). Same operations, same order as tensor/philox.h.
AIM_HOST_DEVICE float normal_from_words(const philox::U4& w, int lane) {
  const int pair = lane / 2;
  const double u1 = (double((pair ? w.z : w.x) >> 8) + 1.0) * (1.0 / 16777216.0);
  const double u2 = double((pair ? w.w : w.y) >> 8) * (1.0 / 16777216.0);
  const double r = sqrt(-2.0 * log(u1));
  const double theta = 6.283185307179586 * u2;
  return float((lane % 2) ? r * sin(theta) : r * cos(theta));
}

}  // namespace aim::kernels
