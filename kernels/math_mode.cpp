#include "kernels/math_mode.h"

#include <atomic>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace aim::kernels {
namespace {
// Bit 0: conv, bit 1: matmul (one atomic: a reader never sees half an update).
std::atomic<unsigned> g_tf32{1u};
}  // namespace

void set_tf32(Tf32 t) {
  g_tf32.store((t.conv ? 1u : 0u) | (t.matmul ? 2u : 0u), std::memory_order_relaxed);
}

Tf32 tf32() {
  const unsigned v = g_tf32.load(std::memory_order_relaxed);
  return Tf32{(v & 1u) != 0, (v & 2u) != 0};
}

std::string tf32_name(Tf32 t) {
  if (t.conv && t.matmul) return "on";
  if (t.conv) return "conv";
  if (t.matmul) return "matmul";
  return "off";
}

bool parse_tf32(const std::string& s, Tf32& out) {
  if (s == "on")
    out = {true, true};
  else if (s == "off")
    out = {false, false};
  else if (s == "conv")
    out = {true, false};
  else if (s == "matmul")
    out = {false, true};
  else
    return false;
  return true;
}

namespace {
std::atomic<int> g_winograd_tile{4};
}  // namespace

void set_winograd_tile(int tile) { g_winograd_tile.store(tile, std::memory_order_relaxed); }
int winograd_tile() { return g_winograd_tile.load(std::memory_order_relaxed); }

namespace {
constexpr unsigned kFtzDaz = 0x8040;  // MXCSR flush-to-zero (bit 15) and denormals-are-zero (bit 6)
void set_this_thread(bool on) {
#if defined(__x86_64__)
  const unsigned m = _mm_getcsr();
  _mm_setcsr(on ? (m | kFtzDaz) : (m & ~kFtzDaz));
#else
  (void)on;
#endif
}
}  // namespace

void set_flush_denormals(bool on) {
  set_this_thread(on);
#pragma omp parallel
  set_this_thread(on);
}

bool flush_denormals() {
#if defined(__x86_64__)
  return (_mm_getcsr() & kFtzDaz) == kFtzDaz;
#else
  return false;
#endif
}

namespace {
std::atomic<bool> g_deterministic{false};
}  // namespace

void set_deterministic(bool on) { g_deterministic.store(on); }
bool deterministic() { return g_deterministic.load(); }

}  // namespace aim::kernels
