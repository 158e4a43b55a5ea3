// The test cases of uniform, normal, bernoulli, dropout_fwd and dropout_bwd (random_cpu.h):
// shapes, case makers, tolerances.
#include "kernels/random/random_cpu.h"

namespace aim::kernels::random_cpu {
namespace {

// stream picks (seed, offset) so that the high words of both the key and the counter are
// exercised: 0: (seed, 0), 1: (seed + 2^40, 5), 2: (seed, 2^33 + 3).
uint64_t stream_seed(int64_t stream, uint64_t seed) {
  return seed + (stream == 1 ? uint64_t(1) << 40 : 0);
}
uint64_t stream_offset(int64_t stream) {
  return stream == 1 ? 5 : stream == 2 ? (uint64_t(1) << 33) + 3 : 0;
}

}  // namespace

// Fills: {a, b, stream}: y [a, b]; stream as stream_seed / stream_offset.
std::vector<std::string> fill_shape_fields() { return {"a", "b", "stream"}; }

std::vector<TestShape> fill_shapes() {
  return {{1, 1, 0}, {1, 31, 1}, {4, 8, 2}, {3, 11, 0}, {1, 97, 2}, {5, 33, 1}, {257, 515, 2}};
}

TestCase make_uniform_case(const TestShape& s, DType t, uint64_t seed) {
  UniformArgs a;
  a.y = poison_tensor({s[0], s[1]}, t);
  a.lo = -2.0f;
  a.hi = 3.0f;
  a.seed = stream_seed(s[2], seed);
  a.offset = stream_offset(s[2]);
  return to_case(a);
}

TestCase make_normal_case(const TestShape& s, DType t, uint64_t seed) {
  NormalArgs a;
  a.y = poison_tensor({s[0], s[1]}, t);
  a.mean = 0.5f;
  a.std = 2.0f;
  a.seed = stream_seed(s[2], seed);
  a.offset = stream_offset(s[2]);
  return to_case(a);
}

TestCase make_bernoulli_case(const TestShape& s, DType t, uint64_t seed) {
  BernoulliArgs a;
  a.y = poison_tensor({s[0], s[1]}, t);
  a.p = 0.3f;
  a.seed = stream_seed(s[2], seed);
  a.offset = stream_offset(s[2]);
  return to_case(a);
}

bool small_fill(const TestShape& s) { return s[0] * s[1] <= 2048; }

// Dropout: {a, b, stream, p in percent}.
std::vector<std::string> dropout_shape_fields() { return {"a", "b", "stream", "p_percent"}; }

std::vector<TestShape> dropout_shapes() {
  return {{1, 1, 0, 30},  {1, 31, 1, 50}, {4, 8, 2, 0},     {3, 11, 0, 100},
          {1, 97, 2, 10}, {5, 33, 1, 90}, {257, 515, 2, 30}};
}

TestCase make_dropout_fwd_case(const TestShape& s, DType t, uint64_t seed) {
  DropoutFwdArgs a;
  a.x = random_tensor({s[0], s[1]}, t, seed + 1);
  a.y = poison_tensor({s[0], s[1]}, t);
  a.mask = poison_tensor({s[0], s[1]}, DType::u8);
  a.p = float(double(s[3]) / 100.0);
  a.seed = stream_seed(s[2], seed);
  a.offset = stream_offset(s[2]);
  return to_case(a);
}

// dropout_bwd takes no stream: the mask is random 0/1 bytes.
TestCase make_dropout_bwd_case(const TestShape& s, DType t, uint64_t seed) {
  DropoutBwdArgs a;
  a.dy = random_tensor({s[0], s[1]}, t, seed + 1);
  a.mask = random_tensor({s[0], s[1]}, DType::u8, seed + 2, 0, 2);
  a.dx = poison_tensor({s[0], s[1]}, t);
  a.p = float(double(s[3]) / 100.0);
  return to_case(a);
}

Tolerance exact(DType, const TestShape&) { return {0, 0}; }

// normal: the GPU's double log/sin/cos may differ from the host libm in the last double bits,
// which moves the f32 result by at most one f32 ulp (then one ulp of a 16-bit output).
Tolerance normal_tolerance(DType t, const TestShape&) {
  if (t == DType::f16) return {1e-6, 1e-3};
  if (t == DType::bf16) return {1e-6, 8e-3};
  return {1e-6, 1e-6};
}

}  // namespace aim::kernels::random_cpu
