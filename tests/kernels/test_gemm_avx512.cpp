// Correctness tests for aim::kernels::sgemm_avx512 against a double-precision naive reference.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "kernels/matmul/gemm_avx512.h"

namespace {

using aim::kernels::sgemm_avx512;

constexpr float kGuard = -12345.678f;
constexpr int64_t kPad = 64;  // guard elements before and after each matrix

// C's buffer is 64-byte aligned, so C (kPad floats in) is too: the non-temporal stores of a large
// C written once need aligned rows.
template <class T>
struct Aligned64 {
  using value_type = T;
  Aligned64() = default;
  template <class U>
  Aligned64(const Aligned64<U>&) {}
  T* allocate(size_t n) {
    void* p = std::aligned_alloc(64, (n * sizeof(T) + 63) / 64 * 64);
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) { std::free(p); }
  bool operator==(const Aligned64&) const { return true; }
  bool operator!=(const Aligned64&) const { return false; }
};

struct Case {
  int64_t m, n, k;
  bool ta, tb;
  float alpha, beta;
  int64_t extra_ld;  // added to every leading dimension
  bool nan_c;        // fill C with NaN (only meaningful with beta == 0)
};

std::string describe(const Case& c) {
  return "M=" + std::to_string(c.m) + " N=" + std::to_string(c.n) + " K=" + std::to_string(c.k) +
         (c.ta ? " A^T" : " A") + (c.tb ? " B^T" : " B") + " alpha=" + std::to_string(c.alpha) +
         " beta=" + std::to_string(c.beta) + " extra_ld=" + std::to_string(c.extra_ld) +
         (c.nan_c ? " nanC" : "");
}

// Runs one case and checks every element of C plus all guard values (padding before/after the
// buffers and the gaps between rows when ld > row length).
void run_case(const Case& c, uint32_t seed = 1) {
  SCOPED_TRACE(describe(c));
  // Stored shapes: A is M x K (or K x M when transposed), B is K x N (or N x K).
  const int64_t a_rows = c.ta ? c.k : c.m, a_cols = c.ta ? c.m : c.k;
  const int64_t b_rows = c.tb ? c.n : c.k, b_cols = c.tb ? c.k : c.n;
  const int64_t lda = a_cols + c.extra_ld, ldb = b_cols + c.extra_ld, ldc = c.n + c.extra_ld;

  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a(size_t(std::max<int64_t>(a_rows, 1) * lda + 2 * kPad), kGuard);
  std::vector<float> b(size_t(std::max<int64_t>(b_rows, 1) * ldb + 2 * kPad), kGuard);
  std::vector<float, Aligned64<float>> cbuf(size_t(c.m * ldc + 2 * kPad), kGuard);
  float* A = a.data() + kPad;
  float* B = b.data() + kPad;
  float* C = cbuf.data() + kPad;
  for (int64_t i = 0; i < a_rows; ++i)
    for (int64_t j = 0; j < a_cols; ++j) A[i * lda + j] = dist(rng);
  for (int64_t i = 0; i < b_rows; ++i)
    for (int64_t j = 0; j < b_cols; ++j) B[i * ldb + j] = dist(rng);
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j)
      C[i * ldc + j] = c.nan_c ? std::numeric_limits<float>::quiet_NaN() : dist(rng);
  const auto c0 = cbuf;

  // Reference in double precision.
  std::vector<double> ref(size_t(c.m * c.n));
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < c.k; ++p) {
        const double av = c.ta ? A[p * lda + i] : A[i * lda + p];
        const double bv = c.tb ? B[j * ldb + p] : B[p * ldb + j];
        s += av * bv;
      }
      double r = double(c.alpha) * s;
      if (c.beta != 0.0f) r += double(c.beta) * double(c0[size_t(kPad + i * ldc + j)]);
      ref[size_t(i * c.n + j)] = r;
    }
  }

  const std::vector<float> a_before = a, b_before = b;
  sgemm_avx512(c.ta, c.tb, c.m, c.n, c.k, c.alpha, A, lda, B, ldb, c.beta, C, ldc);

  // Inputs untouched.
  ASSERT_TRUE(a == a_before) << "A was modified";
  ASSERT_TRUE(b == b_before) << "B was modified";

  // Tolerance: |inputs| <= 1, so the error of a length-K float dot product is ~K * eps.
  const double tol = 4e-7 * double(c.k + 4) * std::max(1.0f, std::fabs(c.alpha)) + 1e-6;
  int bad = 0;
  for (int64_t i = 0; i < c.m && bad < 5; ++i) {
    for (int64_t j = 0; j < c.n && bad < 5; ++j) {
      const double got = C[i * ldc + j];
      const double want = ref[size_t(i * c.n + j)];
      if (!(std::fabs(got - want) <= tol)) {
        ADD_FAILURE() << "C[" << i << "," << j << "] = " << got << ", want " << want;
        ++bad;
      }
    }
  }
  // Guards: everything outside the M x N window of C must be unchanged.
  for (size_t idx = 0; idx < cbuf.size(); ++idx) {
    const int64_t off = int64_t(idx) - kPad;
    const bool inside = off >= 0 && off < c.m * ldc && (off % ldc) < c.n;
    if (!inside && !(cbuf[idx] == c0[idx])) {
      ADD_FAILURE() << "write outside C at offset " << off;
      break;
    }
  }
}

class GemmAvx512 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!aim::kernels::cpu_has_avx512()) GTEST_SKIP() << "CPU lacks AVX-512";
  }
};

TEST_F(GemmAvx512, OddShapesAllTransposes) {
  const int64_t sizes[] = {1, 2, 7, 13, 31, 32, 33, 97, 255, 257};
  int count = 0;
  for (int64_t m : sizes)
    for (int64_t n : sizes)
      for (int64_t k : sizes) {
        // Full cube for small sizes, a sample of the big ones to keep the test fast.
        if (m * n * k > 97 * 97 * 97 && (m + n + k) % 3 != 0) continue;
        const int t = count++ % 4;
        run_case({m, n, k, (t & 1) != 0, (t & 2) != 0, 1.0f, 0.0f, 0, false});
      }
}

TEST_F(GemmAvx512, EveryTransposeOnOddShapes) {
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    run_case({13, 33, 97, ta, tb, 1.0f, 0.0f, 0, false});
    run_case({257, 31, 255, ta, tb, 0.5f, 0.0f, 0, false});
    run_case({97, 257, 33, ta, tb, -1.5f, 1.0f, 0, false});
    run_case({1, 255, 257, ta, tb, 1.0f, 0.25f, 0, false});
    run_case({255, 1, 257, ta, tb, 2.0f, -1.0f, 0, false});
    run_case({32, 32, 32, ta, tb, 1.0f, 1.0f, 0, false});
  }
}

TEST_F(GemmAvx512, AlphaBetaValues) {
  const float alphas[] = {1.0f, -1.0f, 0.5f, 3.0f};
  const float betas[] = {0.0f, 1.0f, -0.5f, 2.0f};
  for (float al : alphas)
    for (float be : betas)
      for (int t = 0; t < 4; ++t)
        run_case({31, 33, 97, (t & 1) != 0, (t & 2) != 0, al, be, 0, false});
}

TEST_F(GemmAvx512, BetaZeroIgnoresNaNInC) {
  for (int t = 0; t < 4; ++t) {
    run_case({33, 97, 13, (t & 1) != 0, (t & 2) != 0, 1.0f, 0.0f, 0, true});
    run_case({257, 255, 31, (t & 1) != 0, (t & 2) != 0, -2.0f, 0.0f, 3, true});
  }
  // K == 0 and alpha == 0 with beta == 0 also clear a NaN C.
  run_case({7, 13, 0, false, false, 1.0f, 0.0f, 0, true});
  run_case({7, 13, 5, false, false, 0.0f, 0.0f, 2, true});
}

TEST_F(GemmAvx512, DegenerateShapes) {
  run_case({7, 13, 0, false, false, 1.0f, 0.5f, 0, false});  // K == 0: C = beta * C
  run_case({7, 13, 5, true, true, 0.0f, 2.0f, 1, false});    // alpha == 0
  run_case({0, 13, 5, false, false, 1.0f, 0.0f, 0, false});  // M == 0: nothing to do
  run_case({7, 0, 5, false, false, 1.0f, 0.0f, 0, false});   // N == 0
  run_case({1, 1, 1, false, false, 1.0f, 0.0f, 0, false});
  run_case({1, 1, 1, true, true, 2.0f, 1.0f, 5, false});
}

TEST_F(GemmAvx512, LeadingDimensionsLargerThanRows) {
  for (int64_t extra : {1, 3, 16, 17}) {
    for (int t = 0; t < 4; ++t) {
      run_case({33, 31, 97, (t & 1) != 0, (t & 2) != 0, 1.0f, 0.0f, extra, false});
      run_case({97, 65, 257, (t & 1) != 0, (t & 2) != 0, 0.75f, 1.0f, extra, false});
    }
  }
}

// Shapes that cross the cache-blocking boundaries (KC, MC, NC) and the thread partition.
TEST_F(GemmAvx512, CrossesBlockBoundaries) {
  run_case({700, 130, 1000, false, false, 1.0f, 0.5f, 0, false});
  run_case({130, 700, 1000, true, false, 1.0f, 0.0f, 1, true});
  // N > NC with a column split between threads, K > KC with a shorter last K block: repeated,
  // since a packing race between the threads would only show up now and then.
  for (int rep = 0; rep < 3; ++rep) {
    run_case({30, 4200, 600, false, true, 1.0f, 1.0f, 0, false}, uint32_t(rep + 1));
    run_case({15, 8250, 600, false, false, 1.0f, 0.0f, 0, true}, uint32_t(rep + 1));
  }
  run_case({29, 4130, 771, true, true, -1.0f, 0.0f, 2, false});
  run_case({1, 4100, 130, false, false, 1.0f, 0.0f, 0, false});
  run_case({4100, 1, 130, false, false, 1.0f, 0.0f, 0, false});
}

// A thread's rows in one MC block (M <= 448 per thread): B packed 8 panels (256 columns) at a
// time, row by row, right before its micro-tiles. Groups of panels and a partial last group with a
// partial last panel (N = 549), K past one KC block, rows ending in an 8-row or shorter edge panel
// (36 = 2 x 14 + 8, 64 = 4 x 14 + 8, 61, 19), every transpose, one and two threads (pn = 2: the
// columns split between the threads, each its own groups).
TEST_F(GemmAvx512, OneRowBlockPacksPanelGroups) {
  const int saved = omp_get_max_threads();
  for (int nt : {1, 2}) {
    omp_set_num_threads(nt);
    SCOPED_TRACE("threads=" + std::to_string(nt));
    for (int64_t m : {36, 64, 61, 19, 448})
      for (int t = 0; t < 4; ++t) {
        run_case({m, 549, 600, (t & 1) != 0, (t & 2) != 0, 1.0f, 0.0f, 0, true});
        run_case({m, 300, 1100, (t & 1) != 0, (t & 2) != 0, 0.5f, 1.0f, 3, false});
      }
  }
  omp_set_num_threads(saved);
}

// The skinny-M paths (4 < M <= 32): op(B) = B through the row-copied L2 blocks (N past one
// 2048-column block, K past one 128-row block, partial 48-column panels, row groups of 8 and
// their remainders), op(B) = B^T through the transposed copies of 96 rows x 1024 k of B (N past
// one block and a partial panel, K past one block with a tail of k that is not a multiple of 16,
// K below one block); and M = 33, the first packed shape.
TEST_F(GemmAvx512, SkinnyM) {
  // B of at least 4M floats (the paths' threshold for op(B) = B), every transpose.
  for (int64_t m : {5, 16, 32, 33})
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      run_case({m, 4100, 1030, ta, tb, 1.0f, m == 16 ? 0.5f : 0.0f, m == 5 ? 3 : 0, m != 16});
    }
  run_case({9, 2100, 2000, false, false, -0.5f, 1.0f, 1, false});  // partial panels, 8 + 1 rows
  run_case({7, 500, 9000, true, true, 1.0f, 0.0f, 1, true});       // 9 k blocks, 5 + 1 panels
  run_case({16, 8200, 600, false, true, 1.0f, 1.0f, 0, false});    // K < one block, beta 1
  run_case({3, 4096, 1024, false, true, 2.0f, 0.0f, 0, true});     // M <= 4, op(B) = B^T
  // op(B) = B^T from 256K floats: a Linear's weight at a small batch (fc8: 16 x 1000 x 4096).
  run_case({16, 1000, 4096, false, true, 1.0f, 0.0f, 0, true});
  run_case({4, 520, 600, true, true, 1.0f, 0.5f, 2, false});  // 10 + 1 panels, one k block
}

// op(B) packed once (sgemm_avx512_pack_b) gives the bits of the path that copies it, at every
// thread count; a packed buffer of another matrix is what is read (the test would pass if the
// packed panels were ignored otherwise); paths other than the skinny one ignore it.
TEST_F(GemmAvx512, PackedBMatchesCopyingBits) {
  using aim::kernels::sgemm_avx512_pack_b;
  using aim::kernels::sgemm_avx512_packed_b_floats;
  using aim::kernels::sgemm_avx512_uses_packed_b;
  struct Shape {
    int64_t m, n, k;
    bool ta, tb;
    int64_t extra_ldb;
    bool skinny;  // whether the packed panels are read
  };
  const Shape shapes[] = {
      {16, 1000, 4096, false, true, 0, true},   // AlexNet's fc8: 20 panels + 40 columns
      {1, 4100, 1030, false, true, 3, true},    // batch 1, two k blocks, ldb > K
      {7, 500, 9000, true, true, 0, true},      // 9 k blocks, op(A) = A^T
      {32, 2100, 2000, false, false, 5, true},  // op(B) = B: 16 k blocks, 2 column blocks
      {9, 4096, 1100, false, false, 0, true},   // 8 + 1 rows
      {40, 1000, 4096, false, true, 0, false},  // M > 32: the packed path reads B
      {3, 4096, 1024, false, false, 0, false},  // M <= 4, op(B) = B: read in place
  };
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int saved = omp_get_max_threads();
  for (const Shape& s : shapes) {
    SCOPED_TRACE("M=" + std::to_string(s.m) + " N=" + std::to_string(s.n) +
                 " K=" + std::to_string(s.k) + (s.tb ? " B^T" : " B"));
    EXPECT_EQ(sgemm_avx512_uses_packed_b(s.ta, s.tb, s.m, s.n, s.k), s.skinny);
    const int64_t lda = s.ta ? s.m : s.k;
    const int64_t brows = s.tb ? s.n : s.k, ldb = (s.tb ? s.k : s.n) + s.extra_ldb;
    std::vector<float> a(size_t(s.m * s.k)), b(size_t(brows * ldb)), b2 = b;
    for (auto& x : a) x = dist(rng);
    for (auto& x : b) x = dist(rng);
    for (auto& x : b2) x = dist(rng);
    const size_t np = size_t(sgemm_avx512_packed_b_floats(s.n, s.k));
    std::vector<float> pb(np, kGuard), pb2(np, kGuard);
    sgemm_avx512_pack_b(s.tb, s.n, s.k, b.data(), ldb, pb.data());
    sgemm_avx512_pack_b(s.tb, s.n, s.k, b2.data(), ldb, pb2.data());
    for (int nt : {1, 2}) {
      SCOPED_TRACE("threads=" + std::to_string(nt));
      omp_set_num_threads(nt);
      for (float beta : {0.0f, 0.5f}) {
        std::vector<float> c0(size_t(s.m * s.n));
        for (auto& x : c0) x = beta == 0.0f ? std::numeric_limits<float>::quiet_NaN() : dist(rng);
        std::vector<float> copy = c0, packed = c0, other = c0, other_packed = c0;
        sgemm_avx512(s.ta, s.tb, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(), ldb, beta,
                     copy.data(), s.n);
        sgemm_avx512(s.ta, s.tb, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(), ldb, beta,
                     packed.data(), s.n, false, {}, pb.data());
        ASSERT_EQ(std::memcmp(copy.data(), packed.data(), copy.size() * sizeof(float)), 0)
            << "beta " << beta;
        // B's values with b2's panels: b2's product where the panels are read, else b's.
        sgemm_avx512(s.ta, s.tb, s.m, s.n, s.k, 1.0f, a.data(), lda, b2.data(), ldb, beta,
                     other.data(), s.n);
        sgemm_avx512(s.ta, s.tb, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(), ldb, beta,
                     other_packed.data(), s.n, false, {}, pb2.data());
        const std::vector<float>& want = s.skinny ? other : copy;
        ASSERT_EQ(std::memcmp(want.data(), other_packed.data(), want.size() * sizeof(float)), 0)
            << "beta " << beta;
      }
    }
  }
  omp_set_num_threads(saved);
}

// A C of 32 MiB or more written once (beta 0, K within one KC block) is stored non-temporally:
// full tiles of a 64-byte aligned C (AlexNet's fc6 weight gradient shape, M cut to 1100), edge
// tiles (M = 78 x 14 + 8, N = 256 x 32 + 16) with plain stores, NaN in C ignored; and the cases
// that keep plain stores (beta 1, rows not a multiple of 16 floats).
TEST_F(GemmAvx512, LargeCWrittenOnceStreams) {
  run_case({1100, 8208, 16, true, false, 1.0f, 0.0f, 0, true});
  run_case({1100, 8192, 16, false, true, 2.0f, 0.0f, 0, true});
  run_case({1100, 8200, 16, true, false, 1.0f, 1.0f, 0, false});
  run_case({1030, 8192, 20, true, false, 1.0f, 0.0f, 1, true});
}

// The unpacked small-M (M <= 4, op(B) = B) and small-N (N <= 4, op(A) = A) paths, with their
// neighbours on the packed path.
TEST_F(GemmAvx512, SmallMAndSmallN) {
  for (int64_t s = 1; s <= 6; ++s) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      run_case({s, 1000, 77, ta, tb, 1.0f, 0.0f, 0, true});
      run_case({s, 4099, 300, ta, tb, -0.5f, 2.0f, 3, false});
      run_case({1000, s, 77, ta, tb, 1.0f, 0.0f, 0, true});
      run_case({2051, s, 300, ta, tb, 1.5f, -1.0f, 2, false});
      run_case({s, s, 15, ta, tb, 1.0f, 0.5f, 1, false});
    }
  }
}

// The narrow-N path (4 < N <= 96, or any N <= 96 with op(A) = A^T: op(B) packed whole, A read in
// place): every row-tile height (M = 1..15 rows past whole tiles), the six widths (1-6 vectors,
// partial last vector), K across the 512-deep blocks, every beta kind.
TEST_F(GemmAvx512, NarrowN) {
  for (int64_t n : {5, 16, 17, 40, 49, 64, 80, 96})
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      run_case({100, n, 128, ta, tb, 1.0f, 0.0f, 0, true});
      run_case({n + 13, n, 1030, ta, tb, -0.5f, 1.0f, 3, false});
      run_case({37, n, 77, ta, tb, 1.5f, 2.0f, 1, false});
    }
  for (int64_t m = 1; m <= 15; ++m) run_case({m, 80, 33, false, true, 1.0f, 0.0f, 0, true});
  run_case({2000, 3, 50, true, false, 1.0f, 0.5f, 0, false});  // N <= 4, op(A) = A^T
}

// The narrow-N path gives the packed path's bits (same k order per output, same K blocks, same
// epilogue): the first N columns of a 200-column product (packed path) equal the N-column product.
TEST_F(GemmAvx512, NarrowNMatchesPackedPathBits) {
  const int64_t wide = 200;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t n : {7, 40, 49, 80, 96})
    for (int64_t k : {128, 700})
      for (int t = 0; t < 4; ++t)
        for (float beta : {0.0f, 1.0f}) {
          const bool ta = t & 1, tb = t & 2;
          const int64_t m = 45;
          SCOPED_TRACE("N=" + std::to_string(n) + " K=" + std::to_string(k) +
                       " t=" + std::to_string(t) + " beta=" + std::to_string(beta));
          std::vector<float> a(size_t(m * k)), b(size_t(k * wide)), c0(size_t(m * wide));
          for (auto& x : a) x = dist(rng);
          for (auto& x : b) x = dist(rng);
          for (auto& x : c0) x = dist(rng);
          const int64_t lda = ta ? m : k, ldb = tb ? k : wide;  // op(B)'s first n columns: B's
          std::vector<float> cw = c0, cn = c0;                  // first n rows (B^T) or columns
          sgemm_avx512(ta, tb, m, wide, k, 1.0f, a.data(), lda, b.data(), ldb, beta, cw.data(),
                       wide);
          sgemm_avx512(ta, tb, m, n, k, 1.0f, a.data(), lda, b.data(), ldb, beta, cn.data(), wide);
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j)
              ASSERT_EQ(cn[size_t(i * wide + j)], cw[size_t(i * wide + j)])
                  << "C[" << i << "," << j << "]";
        }
}

// Column blocks (GemmColumnBlocks: several images' planes read and written in place): the bits
// of the same product on one matrix, on every path (the packed path packs and stores the blocks
// directly, with tiles across block boundaries split; the others copy them), with the gaps
// between blocks untouched. Widths below 16 put several blocks in one vector of a packed panel.
TEST_F(GemmAvx512, ColumnBlocksMatchOneMatrixBits) {
  using aim::kernels::GemmColumnBlocks;
  struct Shape {
    int64_t m, n, k, width;
    bool ta, tb;
  };
  const Shape shapes[] = {
      {37, 300, 70, 49, false, false},      // packed: tiles across blocks
      {37, 300, 700, 49, true, false},      // packed, two K blocks (C read back), A^T
      {128, 784, 96, 196, false, false},    // a 1x1 convolution at 14x14, 4 images
      {64, 150, 40, 7, false, false},       // several blocks per vector
      {45, 100, 33, 1, false, false},       // one column per block
      {900, 200, 64, 50, false, false},     // many rows: the team may share the packed B block
      {3, 200, 50, 49, false, false},       // small M (copies)
      {30, 80, 40, 20, false, false},       // narrow N (copies)
      {30, 4, 40, 2, false, false},         // small N (copies)
      {40, 120, 50, 30, false, true},       // B^T in blocks (copies)
      {20, 4200, 1000, 700, false, false},  // skinny M (copies)
  };
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int saved = omp_get_max_threads();
  for (int nt : {1, 2})
    for (const Shape& s : shapes)
      for (int which = 1; which <= 3; ++which)  // 1: B in blocks, 2: C, 3: both
        for (float beta : {0.0f, 0.5f}) {
          if ((which & 1) == 0 && s.tb) continue;
          omp_set_num_threads(nt);
          SCOPED_TRACE("M=" + std::to_string(s.m) + " N=" + std::to_string(s.n) +
                       " K=" + std::to_string(s.k) + " width=" + std::to_string(s.width) +
                       " which=" + std::to_string(which) + " beta=" + std::to_string(beta) +
                       " threads=" + std::to_string(nt));
          const int64_t nblk = (s.n + s.width - 1) / s.width;
          const int64_t lda = s.ta ? s.m : s.k;
          std::vector<float> a(size_t(s.m * s.k));
          for (auto& x : a) x = dist(rng);
          // One matrix: op(B) [K, N] (B^T: [N, K]) and C [M, N]. Blocks: each block's rows
          // ld = width + 3 apart, blocks stride = rows * ld + 5 apart, gaps holding kGuard.
          const int64_t brows = s.tb ? s.width : s.k, bcols = s.tb ? s.k : s.width;
          const int64_t ldb = bcols + 3, bstride = brows * ldb + 5;
          const int64_t ldc = s.width + 3, cstride = s.m * ldc + 5;
          std::vector<float> b1(size_t(s.n * s.k)), c1(size_t(s.m * s.n));
          for (auto& x : b1) x = dist(rng);
          for (auto& x : c1) x = beta == 0.0f ? std::numeric_limits<float>::quiet_NaN() : dist(rng);
          std::vector<float> bb(size_t(nblk * bstride), kGuard), cb(size_t(nblk * cstride), kGuard);
          for (int64_t j = 0; j < s.n; ++j) {
            const int64_t blk = j / s.width, jj = j % s.width;
            for (int64_t k = 0; k < s.k; ++k) {
              if (s.tb)
                bb[size_t(blk * bstride + jj * ldb + k)] = b1[size_t(j * s.k + k)];
              else
                bb[size_t(blk * bstride + k * ldb + jj)] = b1[size_t(k * s.n + j)];
            }
            for (int64_t i = 0; i < s.m; ++i)
              cb[size_t(blk * cstride + i * ldc + jj)] = c1[size_t(i * s.n + j)];
          }
          const bool in_b = which & 1, in_c = which & 2;
          const GemmColumnBlocks blocks{s.width, in_b ? bstride : 0, in_c ? cstride : 0};
          // The operands not in blocks are the one matrices.
          std::vector<float> c_one = c1, c_out = in_c ? cb : c1;
          sgemm_avx512(s.ta, s.tb, s.m, s.n, s.k, 1.0f, a.data(), lda, b1.data(), s.tb ? s.k : s.n,
                       beta, c_one.data(), s.n);
          sgemm_avx512(s.ta, s.tb, s.m, s.n, s.k, 1.0f, a.data(), lda, in_b ? bb.data() : b1.data(),
                       in_b ? ldb : (s.tb ? s.k : s.n), beta, c_out.data(), in_c ? ldc : s.n, false,
                       blocks);
          std::vector<float> expect = in_c ? cb : c_one;  // gaps: still kGuard
          if (in_c)
            for (int64_t j = 0; j < s.n; ++j)
              for (int64_t i = 0; i < s.m; ++i)
                expect[size_t(j / s.width * cstride + i * ldc + j % s.width)] =
                    c_one[size_t(i * s.n + j)];
          for (size_t e = 0; e < expect.size(); ++e)
            ASSERT_EQ(std::memcmp(&expect[e], &c_out[e], sizeof(float)), 0)
                << "element " << e << ": " << c_out[e] << ", expected " << expect[e];
        }
  omp_set_num_threads(saved);
}

// The epilogue (a bias per row of C, then relu) gives the bits of the product followed by a pass
// `v = c + bias[i]; v < 0 ? 0 : v` on every path: packed (in the micro-tiles' registers: full and
// edge tiles, the last of two K blocks, C in column blocks with tiles across them, a C streamed
// past the caches) and the paths that take it as a pass (small M, narrow N, small N, skinny M,
// blocks copied). A NaN bias keeps its row NaN through the relu; nothing outside C is written.
TEST_F(GemmAvx512, EpilogueMatchesProductThenPassBits) {
  using aim::kernels::GemmColumnBlocks;
  using aim::kernels::GemmEpilogue;
  struct Shape {
    int64_t m, n, k, width;  // width > 0: B and C in column blocks of that many columns
    bool ta, tb, stream;
  };
  const Shape shapes[] = {
      {37, 300, 70, 0, false, false, false},     // packed: full and edge tiles
      {37, 300, 700, 0, true, false, false},     // packed, two K blocks (on the last one's stores)
      {64, 3136, 64, 0, false, false, true},     // a 1x1 convolution's image, streamed
      {128, 784, 96, 196, false, false, false},  // column blocks: tiles across blocks
      {3, 200, 50, 0, false, false, false},      // small M
      {30, 80, 40, 0, false, false, false},      // narrow N
      {30, 4, 40, 0, false, false, false},       // small N
      {20, 4200, 1000, 0, false, false, false},  // skinny M
      {40, 120, 50, 30, false, true, false},     // B^T in blocks: copied
  };
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int saved = omp_get_max_threads();
  for (int nt : {1, 2})
    for (const Shape& s : shapes)
      for (float beta : {0.0f, 1.0f, 0.5f})
        for (int mode = 1; mode <= 3; ++mode) {  // 1: bias, 2: relu, 3: both
          omp_set_num_threads(nt);
          const float alpha = beta == 0.5f ? 0.75f : 1.0f;
          SCOPED_TRACE("M=" + std::to_string(s.m) + " N=" + std::to_string(s.n) +
                       " K=" + std::to_string(s.k) + " width=" + std::to_string(s.width) +
                       " beta=" + std::to_string(beta) + " mode=" + std::to_string(mode) +
                       " threads=" + std::to_string(nt));
          const bool blk = s.width > 0;
          const int64_t w = blk ? s.width : s.n, nblk = (s.n + w - 1) / w;
          // op(B) [K, N] (B^T: [N, K]) and C [M, N], each a matrix per block: rows ld apart,
          // blocks stride apart (gaps hold kGuard); one block of all N columns otherwise.
          const int64_t brows = s.tb ? w : s.k, bcols = s.tb ? s.k : w;
          const int64_t ldb = bcols + (blk ? 3 : 0), bstride = brows * ldb + (blk ? 5 : 0);
          const int64_t ldc = w + (blk ? 3 : 0), cstride = s.m * ldc + (blk ? 5 : 0);
          std::vector<float> a(size_t(s.m * s.k)), bias(size_t(s.m));
          std::vector<float> b(size_t(nblk * bstride), kGuard);
          std::vector<float, Aligned64<float>> c0(size_t(nblk * cstride), kGuard);
          for (auto& x : a) x = dist(rng);
          for (auto& x : bias) x = dist(rng);
          bias[size_t(s.m / 2)] = std::numeric_limits<float>::quiet_NaN();
          for (int64_t j = 0; j < s.n; ++j) {
            for (int64_t k = 0; k < s.k; ++k)
              b[size_t(j / w * bstride + (s.tb ? j % w * ldb + k : k * ldb + j % w))] = dist(rng);
            for (int64_t i = 0; i < s.m; ++i)
              c0[size_t(j / w * cstride + i * ldc + j % w)] =
                  beta == 0.0f ? std::numeric_limits<float>::quiet_NaN() : dist(rng);
          }
          const GemmColumnBlocks blocks{blk ? w : 0, blk ? bstride : 0, blk ? cstride : 0};
          const GemmEpilogue epi{mode & 1 ? bias.data() : nullptr, (mode & 2) != 0};
          auto expect = c0, got = c0;
          sgemm_avx512(s.ta, s.tb, s.m, s.n, s.k, alpha, a.data(), s.ta ? s.m : s.k, b.data(), ldb,
                       beta, expect.data(), ldc, s.stream, blocks);
          for (int64_t j = 0; j < s.n; ++j)
            for (int64_t i = 0; i < s.m; ++i) {
              float& v = expect[size_t(j / w * cstride + i * ldc + j % w)];
              if (epi.row_bias) v += bias[size_t(i)];
              if (epi.relu && v < 0.0f) v = 0.0f;
            }
          sgemm_avx512(s.ta, s.tb, s.m, s.n, s.k, alpha, a.data(), s.ta ? s.m : s.k, b.data(), ldb,
                       beta, got.data(), ldc, s.stream, blocks, nullptr, epi);
          for (size_t e = 0; e < expect.size(); ++e)
            ASSERT_EQ(std::memcmp(&expect[e], &got[e], sizeof(float)), 0)
                << "element " << e << ": " << got[e] << ", expected " << expect[e];
        }
  omp_set_num_threads(saved);
}

TEST_F(GemmAvx512, ThreadCounts) {
  const int saved = omp_get_max_threads();
  for (int nt : {1, 2, 3}) {
    omp_set_num_threads(nt);
    SCOPED_TRACE("threads=" + std::to_string(nt));
    run_case({97, 257, 255, false, false, 1.0f, 0.0f, 0, false});
    run_case({257, 97, 400, true, true, 1.0f, 1.0f, 1, false});
    run_case({13, 1000, 500, false, true, 1.0f, 0.0f, 0, true});
  }
  omp_set_num_threads(saved);
}

// Called from inside an OpenMP parallel region: each thread runs its own GEMM (single-threaded
// inside) on its own data.
TEST_F(GemmAvx512, CalledFromParallelRegion) {
  const int64_t m = 65, n = 97, k = 130;
  std::vector<float> a(size_t(m * k)), b(size_t(k * n));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto& x : a) x = dist(rng);
  for (auto& x : b) x = dist(rng);
  std::vector<double> ref(size_t(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p)
        ref[size_t(i * n + j)] += double(a[size_t(i * k + p)]) * b[size_t(p * n + j)];
  int failures = 0;
#pragma omp parallel num_threads(2) reduction(+ : failures)
  {
    std::vector<float> c(size_t(m * n), std::numeric_limits<float>::quiet_NaN());
    for (int rep = 0; rep < 3; ++rep)
      sgemm_avx512(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
    for (size_t i = 0; i < c.size(); ++i)
      if (!(std::fabs(c[i] - ref[i]) <= 1e-4)) ++failures;
  }
  EXPECT_EQ(failures, 0);
}

TEST_F(GemmAvx512, RandomShapes) {
  std::mt19937 rng(123);
  std::uniform_int_distribution<int> dim(1, 300);
  std::uniform_int_distribution<int> flag(0, 1);
  for (int i = 0; i < 40; ++i) {
    const float beta = flag(rng) ? 0.0f : 0.5f;
    run_case({dim(rng), dim(rng), dim(rng), flag(rng) != 0, flag(rng) != 0, 1.0f, beta,
              flag(rng) ? 0 : 5, beta == 0.0f},
             uint32_t(i + 10));
  }
}

}  // namespace
