// The test cases of softmax / softmax_bwd (softmax_cpu.h): shapes and their field names, case
// makers.
#include <algorithm>

#include "kernels/softmax/softmax_cpu.h"
#include "kernels/testing.h"

namespace aim::kernels::softmax_cpu {
namespace {

// Test shape: {log, mask code, dim, d0, d1, d2}. Mask codes: 0 none; 1 x's shape, random;
// 2 [d0, 1, d2] broadcast over dim 1; 3 [d2] (leading dims missing); 4 x's shape with every
// third row along `dim` fully masked.
Tensor make_mask(const TestShape& s, uint64_t seed) {
  const Shape x{s[3], s[4], s[5]};
  const uint64_t ms = seed ^ 0x5bd1e995u;
  switch (s[1]) {
    case 1:
      return random_tensor(x, DType::boolean, ms);
    case 2:
      return random_tensor({s[3], 1, s[5]}, DType::boolean, ms);
    case 3:
      return random_tensor({s[5]}, DType::boolean, ms);
    case 4: {
      Tensor m = random_tensor(x, DType::boolean, ms);
      const int64_t d = s[2] < 0 ? s[2] + 3 : s[2];
      int64_t outer = 1, inner = 1;
      for (int64_t k = 0; k < d; ++k) outer *= x[size_t(k)];
      for (int64_t k = d + 1; k < 3; ++k) inner *= x[size_t(k)];
      const int64_t C = x[size_t(d)];
      bool* p = m.data<bool>();
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i)
          if ((o * inner + i) % 3 == 0)
            for (int64_t c = 0; c < C; ++c) p[(o * C + c) * inner + i] = false;
      return m;
    }
    default:
      return Tensor();
  }
}

}  // namespace

TestCase make_softmax_case(const TestShape& s, DType t, uint64_t seed) {
  const Shape x{s[3], s[4], s[5]};
  SoftmaxArgs a;
  a.x = random_tensor(x, t, seed, -4, 4);
  a.mask = make_mask(s, seed);
  a.y = poison_tensor(x, t);
  a.log = s[0] != 0;
  a.dim = s[2];
  return to_case(a);
}

TestCase make_softmax_bwd_case(const TestShape& s, DType t, uint64_t seed) {
  const Shape x{s[3], s[4], s[5]};
  SoftmaxBwdArgs a;
  a.dy = random_tensor(x, t, seed, -1, 1);
  // y: probabilities summing to about 1 along dim (softmax) or log-probabilities (log-softmax).
  const int64_t C = x[size_t(s[2] < 0 ? s[2] + 3 : s[2])];
  a.y = s[0] ? random_tensor(x, t, seed + 7, -6, 0)
             : random_tensor(x, t, seed + 7, 0, 2.0 / double(C));
  a.mask = make_mask(s, seed);
  a.dx = poison_tensor(x, t);
  a.log = s[0] != 0;
  a.dim = s[2];
  return to_case(a);
}

// Test shape fields: mask codes as make_mask.
std::vector<std::string> softmax_shape_fields() { return {"log", "mask", "dim", "d0", "d1", "d2"}; }

std::vector<TestShape> softmax_test_shapes() {
  std::vector<TestShape> v;
  for (int64_t log : {0, 1})
    for (int64_t mask = 0; mask <= 4; ++mask) {
      for (int64_t dim : {-1, 1, 0}) {
        v.push_back({log, mask, dim, 2, 31, 33});
        v.push_back({log, mask, dim, 3, 5, 97});
      }
      v.push_back({log, mask, -1, 1, 1, 1});
      v.push_back({log, mask, 1, 3, 32, 32});
      if (mask == 0 || mask == 4) {
        v.push_back({log, mask, -1, 4, 7, 1000});  // the largest warp_row row
        v.push_back({log, mask, -1, 2, 3, 1500});  // block_row, row in registers
      }
    }
  for (int64_t log : {0, 1})
    for (int64_t mask : {0, 4}) {
      v.push_back({log, mask, -1, 1, 2, 200});     // block_row: 256 threads, 1 per thread
      v.push_back({log, mask, -1, 1, 1, 3000});    // block_row: 16 per thread
      v.push_back({log, mask, -1, 1, 1, 5000});    // block_row: 32 per thread
      v.push_back({log, mask, -1, 1, 2, 9001});    // block_row, streamed row (C > 8192)
      v.push_back({log, mask, -1, 1, 256, 4096});  // larger: skipped under SIMT
      v.push_back({log, mask, 1, 4, 2049, 33});    // larger, strided dim
    }
  return v;
}

}  // namespace aim::kernels::softmax_cpu
