// The test cases of the signal ops (signal_cpu.h): shapes and their fields, case makers.
#include <algorithm>

#include "kernels/signal/signal_cpu.h"
#include "kernels/testing.h"

namespace aim::kernels::signal_cpu {

// {B, L, N, hop, pad, preemph in %, window}: one frame exactly, a short tail dropped, padding
// (the context window's use), DeepSpeech's 25 ms / 10 ms at 16 kHz with every window.
std::vector<std::string> frame_shape_fields() {
  return {"B", "L", "N", "hop", "pad", "preemph_pct", "window"};
}
std::vector<TestShape> frame_shapes() {
  return {{1, 1, 1, 1, 0, 0, 0},         {2, 7, 7, 3, 0, 97, 1},
          {3, 50, 8, 5, 0, 97, 2},       {2, 20, 19, 1, 9, 0, 0},
          {1, 5, 9, 2, 2, 50, 1},        {2, 1600, 400, 160, 0, 97, 0},
          {2, 1600, 400, 160, 0, 97, 1}, {2, 1611, 400, 160, 0, 97, 2}};
}
TestCase make_frame_case(const TestShape& s, DType t, uint64_t seed) {
  SignalFrameArgs a;
  a.p.frame_length = s[2], a.p.hop = s[3], a.p.pad = s[4];
  a.p.preemph = double(s[5]) / 100.0;
  a.p.window = WindowKind(s[6]);
  a.x = random_tensor({s[0], s[1]}, t, seed);
  a.y = poison_tensor({s[0], signal_frames(s[1], a.p), s[2]}, t);
  return to_case(a);
}

// {R, N, nfft}: trivial sizes, powers of two (radix-2), zero padding to a power of two (the
// front end's 400 -> 512), and non-powers of two (Bluestein): primes, 100, 400.
std::vector<std::string> rfft_shape_fields() { return {"R", "N", "nfft"}; }
std::vector<TestShape> rfft_shapes() {
  return {{1, 1, 1},     {3, 2, 2},     {2, 5, 8},     {4, 16, 16},   {3, 7, 7},      {2, 13, 13},
          {2, 100, 100}, {5, 400, 512}, {2, 400, 400}, {1, 321, 331}, {3, 1024, 1024}};
}
TestCase make_rfft_case(const TestShape& s, DType t, uint64_t seed) {
  RfftArgs a;
  a.nfft = s[2];
  a.x = random_tensor({s[0], s[1]}, t, seed);
  a.y = poison_tensor({s[0], s[2] / 2 + 1, 2}, t);
  return to_case(a);
}
// An output is a sum of N products of magnitude <= 1: rounding grows with N (f32: ~1e-7 per
// butterfly level, log2 n levels), so the absolute tolerance scales with sqrt(N) log2(nfft).
Tolerance rfft_tolerance(DType t, const TestShape& s) {
  const double scale = std::sqrt(double(s[1])) * std::max(1.0, log2_ceil(s[2]));
  if (t == DType::f64) return {1e-12 * scale, 1e-10};
  return {2e-6 * scale, 1e-5};
}

std::vector<std::string> power_shape_fields() { return {"R", "F"}; }
std::vector<TestShape> power_shapes() { return {{1, 1}, {3, 5}, {7, 257}, {64, 129}}; }
TestCase make_power_case(const TestShape& s, DType t, uint64_t seed) {
  PowerSpectrumArgs a;
  a.x = random_tensor({s[0], s[1], 2}, t, seed, -3.0, 3.0);
  a.y = poison_tensor({s[0], s[1]}, t);
  return to_case(a);
}

// {R, F, M, log_floor exponent (0: no log; e: floor 10^-e)}: the front end's 257 bins to 26
// bands, odd sizes, with and without the log.
std::vector<std::string> mel_shape_fields() { return {"R", "F", "M", "log_floor_exp"}; }
std::vector<TestShape> mel_shapes() {
  return {{1, 1, 1, 0}, {3, 9, 4, 0}, {3, 9, 4, 10}, {17, 257, 26, 10}, {5, 129, 40, 0}};
}
TestCase make_mel_case(const TestShape& s, DType t, uint64_t seed) {
  MelFbankArgs a;
  a.x = random_tensor({s[0], s[1]}, t, seed, 0.0, 4.0);  // power is >= 0
  a.fb = random_tensor({s[1], s[2]}, t, seed + 1, 0.0, 1.0);
  a.y = poison_tensor({s[0], s[2]}, t);
  a.log_floor = s[3] > 0 ? std::pow(10.0, -double(s[3])) : 0.0;
  return to_case(a);
}

// {R, M, K, lifter}: DeepSpeech's 26 -> 26 (numcep = nfilt) with HTK's lifter 22, 40 -> 13.
std::vector<std::string> dct_shape_fields() { return {"R", "M", "K", "lifter"}; }
std::vector<TestShape> dct_shapes() {
  return {{1, 1, 1, 0}, {3, 5, 5, 0}, {4, 26, 26, 22}, {9, 40, 13, 0}, {2, 7, 3, 3}};
}
TestCase make_dct_case(const TestShape& s, DType t, uint64_t seed) {
  DctArgs a;
  a.x = random_tensor({s[0], s[1]}, t, seed, -5.0, 5.0);
  a.y = poison_tensor({s[0], s[2]}, t);
  a.lifter = s[3];
  return to_case(a);
}

// The emulator runs one fiber per output (rfft: per block thread), each walking its sum.
constexpr int64_t kSimtWork = int64_t(1) << 20;
bool frame_simt_small(const TestShape& s) {
  FrameParams p;
  p.frame_length = s[2], p.hop = s[3], p.pad = s[4];
  return s[0] * signal_frames(s[1], p) * s[2] <= kSimtWork;
}
bool rfft_simt_small(const TestShape& s) { return s[0] * s[2] * log2_ceil(s[2]) <= kSimtWork; }
bool power_simt_small(const TestShape& s) { return s[0] * s[1] <= kSimtWork; }
bool mel_simt_small(const TestShape& s) { return s[0] * s[1] * s[2] <= kSimtWork; }
bool dct_simt_small(const TestShape& s) { return s[0] * s[1] * s[2] <= kSimtWork; }

}  // namespace aim::kernels::signal_cpu
