// Measured GPU ceilings with own kernels (bench/peak_cuda.cu): FMA throughput per dtype and
// STREAM-like copy / triad bandwidth, on the current device and stream. The tensor-core GEMM
// rates come from cuBLAS (bench/foundation.cpp).
//
// bench/peak_cuda.cu is compiled into aim-bench only when CMake lists it and defines
// AIM_BENCH_PEAK_CUDA (CMakeLists.txt; see docs/profiling.md); without it aim-bench peak --device
// cuda says so in place of these rows.
#pragma once
#include <cstdint>
#include <string>

namespace aim::bench {

// FMA GFLOP/s of one instruction kind: "fp32" (FFMA), "fp64" (DFMA), "fp16" (HFMA2, two FMAs per
// instruction), "bf16" (HFMA2.BF16). Many independent FMA chains per thread, enough blocks to
// fill every SM several times; the best of 3 timed runs of ~50 ms each. The result of every
// chain is stored and checked against the closed form of the recurrence, so a kernel the compiler
// shortened cannot report a rate.
double cuda_fma_gflops(const std::string& kind);

// Bandwidth of an own grid-stride kernel over n floats per array (16-byte accesses), GB/s:
// "copy" b[i] = a[i] (8 bytes per element) or "triad" a[i] = b[i] + s * c[i] (12 bytes), as
// STREAM counts them. Best of 5 after a warm-up; the output is checked afterwards.
double cuda_stream_gbps(const std::string& kind, int64_t n);

}  // namespace aim::bench
