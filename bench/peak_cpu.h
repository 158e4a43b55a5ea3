// Measured CPU ceilings: FMA throughput and memory bandwidth (bench/peak_cpu.cpp).
#pragma once
#include <cstdint>

namespace aim::bench {

// fp32 FMA GFLOP/s with independent accumulators on all OpenMP threads: AVX-512 when the CPU has
// it (zmm), else AVX2 (ymm). `isa` receives "avx512" or "avx2".
double peak_fma_gflops(const char** isa);
// The same with fp64 lanes (half as many per vector).
double peak_fma_gflops_f64();
// STREAM-like triad a[i] = b[i] + s * c[i] over n floats per array, all OpenMP threads, normal
// or non-temporal (streaming) stores; GB/s counting 12 bytes per element (2 reads, 1 write), as
// STREAM does (the read-for-ownership of normal stores is real traffic not counted).
double triad_gbps(int64_t n, int reps, bool streaming = false);

}  // namespace aim::bench
