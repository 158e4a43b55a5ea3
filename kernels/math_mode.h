// Process-wide math modes of the vendor variants: whether fp32 convolutions and fp32 matmuls may
// run on tensor cores in TF32 (10-bit mantissa inputs, fp32 accumulation). The defaults are
// PyTorch's: torch.backends.cudnn.allow_tf32 = True (convolutions), and
// torch.backends.cuda.matmul.allow_tf32 = False (matmul). aim-train and aim-infer set them from
// --tf32 on|off|conv|matmul and write the effective setting into their results. Read when a
// variant runs (cuDNN convolution: math type and algorithm cache key; cuBLAS matmul and
// cuda.im2col_cublas: compute type), so a change applies to the next call. Own kernels never use
// TF32; f64, f16 and bf16 are not affected. Tests and aim-bench's checks against the fp32 oracle
// turn it off (docs/precision.md).
#pragma once
#include <string>

namespace aim::kernels {

struct Tf32 {
  bool conv = true;     // cuDNN (and cuBLAS-lowered) fp32 convolutions
  bool matmul = false;  // cuBLAS fp32 matmul
  bool operator==(const Tf32& o) const { return conv == o.conv && matmul == o.matmul; }
};

void set_tf32(Tf32 t);
Tf32 tf32();

// "on" | "off" | "conv" | "matmul" (the --tf32 values) <-> the setting; parse_tf32 returns false
// on anything else.
std::string tf32_name(Tf32 t);
bool parse_tf32(const std::string& s, Tf32& out);

// Sets TF32 for a scope and restores the previous setting (not thread-safe: the setting is
// process-wide).
class ScopedTf32 {
 public:
  explicit ScopedTf32(Tf32 t) : previous_(tf32()) { set_tf32(t); }
  ~ScopedTf32() { set_tf32(previous_); }
  ScopedTf32(const ScopedTf32&) = delete;
  ScopedTf32& operator=(const ScopedTf32&) = delete;

 private:
  Tf32 previous_;
};

// Winograd convolutions on the CPU (kernels/conv/README.md): the largest output tile the default
// f32 selection may take for a 3x3 stride-1 convolution. 4 (the default): F(4x4, 3x3) from a
// 16x16 output up, F(2x2, 3x3) below, the fastest, rounding up to ~5e-4 away from the direct sum
// (as cuDNN's fp32 Winograd; less than TF32, PyTorch's CUDA default for convolutions); 2: F(2x2,
// 3x3) only, within 1e-4; 0: none (cpu.im2col, the direct sum's rounding, as PyTorch's CPU
// convolutions). aim-train and aim-infer set it from --winograd 4|2|off and record it in their
// results; a variant named by --kernels runs whatever this says. Read at each selection.
void set_winograd_tile(int tile);  // 0, 2 or 4
int winograd_tile();

// Sets the Winograd tile for a scope and restores the previous one (process-wide, as ScopedTf32):
// the PyTorch parity tests of deep networks run with 2, the rounding their tolerances were set
// for.
class ScopedWinogradTile {
 public:
  explicit ScopedWinogradTile(int tile) : previous_(winograd_tile()) { set_winograd_tile(tile); }
  ~ScopedWinogradTile() { set_winograd_tile(previous_); }
  ScopedWinogradTile(const ScopedWinogradTile&) = delete;
  ScopedWinogradTile& operator=(const ScopedWinogradTile&) = delete;

 private:
  int previous_;
};

// Subnormal floats on the CPU. With flushing on (MXCSR FTZ and DAZ on x86-64), results below the
// smallest normal number (f32 1.2e-38, f64 2.2e-308) become 0 and such inputs read as 0, instead
// of taking the processor's slow microcode path: tiny gradients and attention weights of padded
// positions otherwise slow BERT's f32 GEMMs about 4x on this machine (docs/precision.md).
// TensorFlow flushes on its CPU threads by default; PyTorch keeps them unless
// torch.set_flush_denormal(True). aim-train and aim-infer flush by default (--denormals
// flush|keep) and record the setting in their results. set_flush_denormals() applies to the
// calling thread and the OpenMP workers of its current team; threads started later inherit the
// setting of the thread that starts them (Linux copies the FP control state).
void set_flush_denormals(bool on);
bool flush_denormals();  // the calling thread's setting

// --deterministic (docs/determinism.md): kernel selection takes the deterministic alternative of
// every variant registered as not deterministic (kernels/registry.h), and cuDNN convolutions
// choose among the algorithms cuDNN reports as deterministic (the setting is part of their
// algorithm cache key). Off by default: the alternatives are slower on several threads.
void set_deterministic(bool on);
bool deterministic();

}  // namespace aim::kernels
