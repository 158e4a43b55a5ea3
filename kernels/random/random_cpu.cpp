// random: CPU variants of uniform, normal, bernoulli, dropout_fwd, dropout_bwd.
// cpu.ref: element by element through philox::uniform / philox::normal (tensor/philox.h), the
// definition of the streams. Obviously right.
// cpu.omp: one Philox block (4 elements) per iteration, OpenMP over blocks when large; the same
// numbers bitwise.
// dropout_fwd cpu.avx512 (f32/f16/bf16, the default on AVX-512 CPUs): 16 Philox blocks at once
// (64 elements), the keep test in integers; the same mask and values bitwise.
// Test cases: random_cases.cpp.
#include "kernels/random/random_cpu.h"

#include "kernels/copy/copy.h"
#include "kernels/fast_math_avx512.h"
#include "kernels/matmul/gemm_avx512.h"
#include "kernels/random/random.h"
#include "kernels/registry.h"

namespace aim::kernels {

void check_random_output(const char* op, const Tensor& y) {
  AIM_CHECK(y.is_contiguous(), "[", op, "] y must be contiguous (element i is the row-major ",
            "index), got sizes ", to_string(y.sizes()), " strides ", to_string(y.strides()));
}

namespace {
void check_p(const char* op, float p) {
  AIM_CHECK(p >= 0.0f && p <= 1.0f, "[", op, "] p must be in [0, 1], got ", p);
}
void check_like(const char* op, const Tensor& a, const char* an, const Tensor& b, const char* bn) {
  AIM_CHECK(a.sizes() == b.sizes(), "[", op, "] ", an, " ", to_string(a.sizes()), " and ", bn, " ",
            to_string(b.sizes()), " differ in shape");
  AIM_CHECK(a.device() == b.device(), "[", op, "] ", an, " on ", a.device().str(), " but ", bn,
            " on ", b.device().str());
  AIM_CHECK(a.is_contiguous() && b.is_contiguous(), "[", op, "] ", an, " and ", bn,
            " must be contiguous");
}
}  // namespace

void check_dropout_fwd(const DropoutFwdArgs& a) {
  check_p("dropout_fwd", a.p);
  check_like("dropout_fwd", a.x, "x", a.y, "y");
  check_like("dropout_fwd", a.x, "x", a.mask, "mask");
  AIM_CHECK(a.x.dtype() == a.y.dtype(), "[dropout_fwd] x is ", dtype_name(a.x.dtype()),
            " but y is ", dtype_name(a.y.dtype()));
  AIM_CHECK(a.mask.dtype() == DType::u8, "[dropout_fwd] mask must be u8, got ",
            dtype_name(a.mask.dtype()));
}

void check_dropout_bwd(const DropoutBwdArgs& a) {
  check_p("dropout_bwd", a.p);
  check_like("dropout_bwd", a.dy, "dy", a.dx, "dx");
  check_like("dropout_bwd", a.dy, "dy", a.mask, "mask");
  AIM_CHECK(a.dy.dtype() == a.dx.dtype(), "[dropout_bwd] dy is ", dtype_name(a.dy.dtype()),
            " but dx is ", dtype_name(a.dx.dtype()));
  AIM_CHECK(a.mask.dtype() == DType::u8, "[dropout_bwd] mask must be u8, got ",
            dtype_name(a.mask.dtype()));
}

namespace {

constexpr int64_t kParallelElems = int64_t(1) << 14;

// x * scale in the accumulation type (double for f64, float otherwise), rounded to T.
template <class T>
inline T scaled(T x, float scale) {
  if constexpr (std::is_same_v<T, double>) {
    return x * double(scale);
  } else {
    return cast_value<T>(float(x) * scale);
  }
}

// ---- cpu.ref ---------------------------------------------------------------------------------

void uniform_cpu_ref(const UniformArgs& a) {
  check_random_output("uniform", a.y);
  AIM_DISPATCH_FLOAT_TYPES(a.y.dtype(), T, {
    T* y = a.y.data<T>();
    for (int64_t i = 0; i < a.y.numel(); ++i)
      y[i] = cast_value<T>(uniform_value(a.lo, a.hi, philox::uniform(a.seed, a.offset, i)));
  });
}

void normal_cpu_ref(const NormalArgs& a) {
  check_random_output("normal", a.y);
  AIM_DISPATCH_FLOAT_TYPES(a.y.dtype(), T, {
    T* y = a.y.data<T>();
    for (int64_t i = 0; i < a.y.numel(); ++i)
      y[i] = cast_value<T>(normal_value(a.mean, a.std, philox::normal(a.seed, a.offset, i)));
  });
}

void bernoulli_cpu_ref(const BernoulliArgs& a) {
  check_random_output("bernoulli", a.y);
  check_p("bernoulli", a.p);
  AIM_DISPATCH_ALL_TYPES(a.y.dtype(), T, {
    T* y = a.y.data<T>();
    for (int64_t i = 0; i < a.y.numel(); ++i)
      y[i] = cast_value<T>(philox::uniform(a.seed, a.offset, i) < a.p ? 1 : 0);
  });
}

void dropout_fwd_cpu_ref(const DropoutFwdArgs& a) {
  check_dropout_fwd(a);
  const float scale = dropout_scale(a.p);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, {
    const T* x = a.x.data<T>();
    T* y = a.y.data<T>();
    uint8_t* m = a.mask.data<uint8_t>();
    for (int64_t i = 0; i < a.x.numel(); ++i) {
      const bool keep = philox::uniform(a.seed, a.offset, i) >= a.p;
      m[i] = keep ? 1 : 0;
      y[i] = keep ? scaled(x[i], scale) : cast_value<T>(0);
    }
  });
}

void dropout_bwd_cpu_ref(const DropoutBwdArgs& a) {
  check_dropout_bwd(a);
  const float scale = dropout_scale(a.p);
  AIM_DISPATCH_FLOAT_TYPES(a.dy.dtype(), T, {
    const T* dy = a.dy.data<T>();
    const uint8_t* m = a.mask.data<uint8_t>();
    T* dx = a.dx.data<T>();
    for (int64_t i = 0; i < a.dy.numel(); ++i)
      dx[i] = m[i] ? scaled(dy[i], scale) : cast_value<T>(0);
  });
}

// ---- cpu.omp ---------------------------------------------------------------------------------

// Calls f(i, words, lane) for every element i in [0, n), one Philox block per iteration.
template <class F>
void for_each_block(int64_t n, uint64_t seed, uint64_t offset, F f) {
  const int64_t blocks = int64_t(philox::blocks_for(uint64_t(n)));
#pragma omp parallel for schedule(static) if (n > kParallelElems)
  for (int64_t b = 0; b < blocks; ++b) {
    const philox::U4 w = philox::block_words(seed, offset + uint64_t(b));
    const int64_t i0 = 4 * b;
    for (int lane = 0; lane < 4 && i0 + lane < n; ++lane) f(i0 + lane, w, lane);
  }
}

template <class T>
void uniform_omp(const UniformArgs& a) {
  T* y = a.y.data<T>();
  for_each_block(a.y.numel(), a.seed, a.offset, [&](int64_t i, const philox::U4& w, int lane) {
    y[i] = cast_value<T>(uniform_value(a.lo, a.hi, philox::to_unit(philox::word(w, lane))));
  });
}

template <class T>
void normal_omp(const NormalArgs& a) {
  T* y = a.y.data<T>();
  for_each_block(a.y.numel(), a.seed, a.offset, [&](int64_t i, const philox::U4& w, int lane) {
    y[i] = cast_value<T>(normal_value(a.mean, a.std, normal_from_words(w, lane)));
  });
}

template <class T>
void bernoulli_omp(const BernoulliArgs& a) {
  T* y = a.y.data<T>();
  const T one = cast_value<T>(1), zero = cast_value<T>(0);
  for_each_block(a.y.numel(), a.seed, a.offset, [&](int64_t i, const philox::U4& w, int lane) {
    y[i] = philox::to_unit(philox::word(w, lane)) < a.p ? one : zero;
  });
}

template <class T>
void dropout_fwd_omp(const DropoutFwdArgs& a) {
  const T* x = a.x.data<T>();
  T* y = a.y.data<T>();
  uint8_t* m = a.mask.data<uint8_t>();
  const float scale = dropout_scale(a.p);
  for_each_block(a.x.numel(), a.seed, a.offset, [&](int64_t i, const philox::U4& w, int lane) {
    const bool keep = philox::to_unit(philox::word(w, lane)) >= a.p;
    m[i] = keep ? 1 : 0;
    y[i] = keep ? scaled(x[i], scale) : cast_value<T>(0);
  });
}

template <class T>
void dropout_bwd_omp(const DropoutBwdArgs& a) {
  const T* dy = a.dy.data<T>();
  const uint8_t* m = a.mask.data<uint8_t>();
  T* dx = a.dx.data<T>();
  const float scale = dropout_scale(a.p);
  const int64_t n = a.dy.numel();
#pragma omp parallel for schedule(static) if (n > kParallelElems)
  for (int64_t i = 0; i < n; ++i) dx[i] = m[i] ? scaled(dy[i], scale) : cast_value<T>(0);
}

void uniform_cpu_omp(const UniformArgs& a) {
  check_random_output("uniform", a.y);
  AIM_DISPATCH_FLOAT_TYPES(a.y.dtype(), T, { uniform_omp<T>(a); });
}
void normal_cpu_omp(const NormalArgs& a) {
  check_random_output("normal", a.y);
  AIM_DISPATCH_FLOAT_TYPES(a.y.dtype(), T, { normal_omp<T>(a); });
}
void bernoulli_cpu_omp(const BernoulliArgs& a) {
  check_random_output("bernoulli", a.y);
  check_p("bernoulli", a.p);
  AIM_DISPATCH_ALL_TYPES(a.y.dtype(), T, { bernoulli_omp<T>(a); });
}
void dropout_fwd_cpu_omp(const DropoutFwdArgs& a) {
  check_dropout_fwd(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, { dropout_fwd_omp<T>(a); });
}
void dropout_bwd_cpu_omp(const DropoutBwdArgs& a) {
  check_dropout_bwd(a);
  AIM_DISPATCH_FLOAT_TYPES(a.dy.dtype(), T, { dropout_bwd_omp<T>(a); });
}

// ---- cpu.avx512 ------------------------------------------------------------------------------

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,fma,bmi2")

// lo = a * b mod 2^32 and hi = (a * b) >> 32 for 16 lanes: _mm512_mul_epu32 multiplies the even
// lanes (64-bit products); the odd lanes go through a 32-bit shift.
inline __m512i mulhilo16(__m512i a, __m512i b, __m512i* hi) {
  const __m512i even = _mm512_mul_epu32(a, b);
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), b);
  *hi = _mm512_mask_blend_epi32(__mmask16(0xAAAA), _mm512_srli_epi64(even, 32), odd);
  return _mm512_mullo_epi32(a, b);
}

// philox::block_words for the 16 blocks block0 + [0, 16): the four words, one block per lane.
inline void block_words16(uint64_t seed, uint64_t block0, __m512i w[4]) {
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i lo = _mm512_add_epi32(_mm512_set1_epi32(int(uint32_t(block0))), lane);
  // The high word carries when the low word wraps inside these 16 blocks.
  const __mmask16 carry = _mm512_cmplt_epu32_mask(lo, _mm512_set1_epi32(int(uint32_t(block0))));
  __m512i x = lo, y = _mm512_mask_add_epi32(_mm512_set1_epi32(int(uint32_t(block0 >> 32))), carry,
                                            _mm512_set1_epi32(int(uint32_t(block0 >> 32))),
                                            _mm512_set1_epi32(1));
  __m512i z = _mm512_setzero_si512(), ww = _mm512_setzero_si512();
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  const __m512i m0 = _mm512_set1_epi32(int(0xD2511F53u)), m1 = _mm512_set1_epi32(int(0xCD9E8D57u));
  for (int round = 0; round < 10; ++round) {
    __m512i hi0, hi1;
    const __m512i lo0 = mulhilo16(x, m0, &hi0);
    const __m512i lo1 = mulhilo16(z, m1, &hi1);
    const __m512i nx = _mm512_xor_si512(_mm512_xor_si512(hi1, y), _mm512_set1_epi32(int(k0)));
    const __m512i nz = _mm512_xor_si512(_mm512_xor_si512(hi0, ww), _mm512_set1_epi32(int(k1)));
    x = nx, y = lo1, z = nz, ww = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  w[0] = x, w[1] = y, w[2] = z, w[3] = ww;
}

// 64 elements [i0, i0 + 64) from blocks i0 / 4 + [0, 16): keep bit j of the result is element
// i0 + j's (word j % 4 of block j / 4) test, word >> 8 >= threshold.
inline uint64_t keep_bits64(uint64_t seed, uint64_t block0, uint32_t threshold) {
  __m512i w[4];
  block_words16(seed, block0, w);
  const __m512i t = _mm512_set1_epi32(int(threshold));
  uint64_t bits = 0;
  for (int j = 0; j < 4; ++j) {
    const __mmask16 k = _mm512_cmpge_epu32_mask(_mm512_srli_epi32(w[j], 8), t);
    bits |= _pdep_u64(uint64_t(k), 0x1111111111111111ull << j);
  }
  return bits;
}

template <class T>
void dropout_fwd_avx512(const DropoutFwdArgs& a) {
  const T* x = a.x.data<T>();
  T* y = a.y.data<T>();
  uint8_t* m = a.mask.data<uint8_t>();
  const int64_t n = a.x.numel();
  const __m512 scale = _mm512_set1_ps(dropout_scale(a.p));
  // to_unit(u) >= p  <=>  (u >> 8) >= p * 2^24 (exact in double)  <=>  (u >> 8) >= ceil(p 2^24).
  const uint32_t threshold = uint32_t(std::ceil(double(a.p) * 16777216.0));
  const int64_t chunks = (n + 63) / 64;
#pragma omp parallel for schedule(static) if (n > kParallelElems)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t i0 = 64 * c;
    const uint64_t bits = keep_bits64(a.seed, a.offset + uint64_t(16 * c), threshold);
    const uint64_t valid = n - i0 >= 64 ? ~0ull : (1ull << (n - i0)) - 1;
    _mm512_mask_storeu_epi8(m + i0, __mmask64(valid),
                            _mm512_maskz_mov_epi8(__mmask64(bits), _mm512_set1_epi8(1)));
    for (int q = 0; q < 4; ++q) {
      const int64_t i = i0 + 16 * q;
      const __mmask16 k = avx512::lanes_below(i, n);
      const __mmask16 keep = __mmask16(bits >> (16 * q));
      avx512::store16(y + i, k, _mm512_maskz_mul_ps(keep, avx512::load16(x + i, k), scale));
    }
  }
}

#pragma GCC pop_options
#pragma GCC diagnostic pop

std::string dropout_avx512_supports(const DropoutFwdArgs&) {
  return cpu_has_avx512() ? "" : "CPU lacks AVX-512";
}
void dropout_fwd_cpu_avx512(const DropoutFwdArgs& a) {
  check_dropout_fwd(a);
  AIM_CHECK(cpu_has_avx512(), "[dropout_fwd] cpu.avx512: CPU lacks AVX-512");
  switch (a.x.dtype()) {
    case DType::f32:
      return dropout_fwd_avx512<float>(a);
    case DType::f16:
      return dropout_fwd_avx512<Half>(a);
    case DType::bf16:
      return dropout_fwd_avx512<BFloat16>(a);
    default:
      AIM_FAIL("[dropout_fwd] cpu.avx512 takes f32, f16, bf16, got ", dtype_name(a.x.dtype()));
  }
}

std::vector<DType> float_dtypes() { return {DType::f32, DType::f64, DType::f16, DType::bf16}; }
std::vector<DType> all_dtypes() { return {std::begin(kAllDTypes), std::end(kAllDTypes)}; }

}  // namespace

void uniform(const UniformArgs& a) { AIM_DISPATCH_OP(UniformArgs, "uniform", a); }
void normal(const NormalArgs& a) { AIM_DISPATCH_OP(NormalArgs, "normal", a); }
void bernoulli(const BernoulliArgs& a) { AIM_DISPATCH_OP(BernoulliArgs, "bernoulli", a); }
void dropout_fwd(const DropoutFwdArgs& a) { AIM_DISPATCH_OP(DropoutFwdArgs, "dropout_fwd", a); }
void dropout_bwd(const DropoutBwdArgs& a) { AIM_DISPATCH_OP(DropoutBwdArgs, "dropout_bwd", a); }

void register_random_cpu(Registry& r) {
  {
    auto& op = r.op<UniformArgs>("uniform");
    op.description = "uniform fill in [lo, hi) from Philox (same numbers on CPU and CUDA)";
    op.add({"cpu.ref", Backend::CPU, Provider::Own, uniform_cpu_ref, float_dtypes()});
    op.add({"cpu.omp", Backend::CPU, Provider::Own, uniform_cpu_omp, float_dtypes()});
    op.set_default(Backend::CPU, "cpu.omp");
    op.set_cost(uniform_cost);
    op.make_case = random_cpu::make_uniform_case;
    op.ref_uses_case_dtype = true;  // bitwise comparison in the output dtype
    op.tolerance = random_cpu::exact;
    op.set_shape_fields(random_cpu::fill_shape_fields());
    op.add_test_shapes(random_cpu::fill_shapes());
    op.small_enough_for_simt = random_cpu::small_fill;
  }
  {
    auto& op = r.op<NormalArgs>("normal");
    op.description = "normal fill (Box-Muller on Philox; same numbers on CPU and CUDA)";
    op.add({"cpu.ref", Backend::CPU, Provider::Own, normal_cpu_ref, float_dtypes()});
    op.add({"cpu.omp", Backend::CPU, Provider::Own, normal_cpu_omp, float_dtypes()});
    op.set_default(Backend::CPU, "cpu.omp");
    op.set_cost(normal_cost);
    op.make_case = random_cpu::make_normal_case;
    op.ref_uses_case_dtype = true;
    op.tolerance = random_cpu::normal_tolerance;
    op.set_shape_fields(random_cpu::fill_shape_fields());
    op.add_test_shapes(random_cpu::fill_shapes());
    op.small_enough_for_simt = random_cpu::small_fill;
  }
  {
    auto& op = r.op<BernoulliArgs>("bernoulli");
    op.description = "0/1 fill with P(1) = p from Philox (same numbers on CPU and CUDA)";
    op.add({"cpu.ref", Backend::CPU, Provider::Own, bernoulli_cpu_ref, all_dtypes()});
    op.add({"cpu.omp", Backend::CPU, Provider::Own, bernoulli_cpu_omp, all_dtypes()});
    op.set_default(Backend::CPU, "cpu.omp");
    op.set_cost(bernoulli_cost);
    op.make_case = random_cpu::make_bernoulli_case;
    op.ref_uses_case_dtype = true;
    op.tolerance = random_cpu::exact;
    op.set_shape_fields(random_cpu::fill_shape_fields());
    op.add_test_shapes(random_cpu::fill_shapes());
    op.small_enough_for_simt = random_cpu::small_fill;
  }
  {
    auto& op = r.op<DropoutFwdArgs>("dropout_fwd");
    op.description = "inverted dropout: mask from Philox (same mask on CPU and CUDA)";
    op.add({"cpu.ref", Backend::CPU, Provider::Own, dropout_fwd_cpu_ref, float_dtypes()});
    op.add({"cpu.omp", Backend::CPU, Provider::Own, dropout_fwd_cpu_omp, float_dtypes()});
    op.add({"cpu.avx512",
            Backend::CPU,
            Provider::Own,
            dropout_fwd_cpu_avx512,
            {DType::f32, DType::f16, DType::bf16},
            dropout_avx512_supports});
    op.set_default(Backend::CPU, "cpu.omp");
    if (cpu_has_avx512())
      op.set_default(Backend::CPU, "cpu.avx512", {DType::f32, DType::f16, DType::bf16});
    op.set_cost(dropout_fwd_cost);
    op.make_case = random_cpu::make_dropout_fwd_case;
    op.ref_uses_case_dtype = true;  // y and mask compared bitwise in the case's dtype
    op.tolerance = random_cpu::exact;
    op.set_shape_fields(random_cpu::dropout_shape_fields());
    op.add_test_shapes(random_cpu::dropout_shapes());
    op.small_enough_for_simt = random_cpu::small_fill;
  }
  {
    auto& op = r.op<DropoutBwdArgs>("dropout_bwd");
    op.description = "dropout gradient: dy * mask / (1 - p)";
    op.add({"cpu.ref", Backend::CPU, Provider::Own, dropout_bwd_cpu_ref, float_dtypes()});
    op.add({"cpu.omp", Backend::CPU, Provider::Own, dropout_bwd_cpu_omp, float_dtypes()});
    op.set_default(Backend::CPU, "cpu.omp");
    op.set_cost(dropout_bwd_cost);
    op.make_case = random_cpu::make_dropout_bwd_case;
    op.ref_uses_case_dtype = true;
    op.tolerance = random_cpu::exact;
    op.set_shape_fields(random_cpu::dropout_shape_fields());
    op.add_test_shapes(random_cpu::dropout_shapes());
    op.small_enough_for_simt = random_cpu::small_fill;
  }
}

}  // namespace aim::kernels
