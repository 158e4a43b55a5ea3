// What every op shares: its cost model type, where a variant runs, and who wrote it.
#pragma once
#include <cstdint>

#include "tensor/tensor.h"

namespace aim::kernels {

// Compulsory work of one call, from shapes alone (independent of how a variant does it).
// The profiler, the roofline, the benchmarks and model FLOP counts all read it.
struct Cost {
  double flops = 0, bytes_read = 0, bytes_written = 0;
  double bytes() const { return bytes_read + bytes_written; }
  double intensity() const { return bytes() > 0 ? flops / bytes() : 0.0; }  // FLOP per byte
  Cost& operator+=(const Cost& o) {
    flops += o.flops;
    bytes_read += o.bytes_read;
    bytes_written += o.bytes_written;
    return *this;
  }
};

// CPU: host code on CPU tensors. CUDA: own or vendor GPU code on CUDA tensors.
// SIMT: an own CUDA kernel compiled as C++ and run by the CPU emulator on CPU tensors
// (kernels/simt); registered only in the emulator test build.
enum class Backend : uint8_t { CPU, CUDA, SIMT };
enum class Provider : uint8_t { Own, Vendor };

inline const char* backend_name(Backend b) {
  return b == Backend::CPU ? "cpu" : b == Backend::CUDA ? "cuda" : "simt";
}
inline const char* provider_name(Provider p) { return p == Provider::Own ? "own" : "vendor"; }

}  // namespace aim::kernels
