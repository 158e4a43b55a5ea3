// What every target shares: an aim::Error is the reader's answer to bad input (fine); anything
// else — a crash, a sanitizer report, another exception, an allocation past -malloc_limit_mb — is
// a finding. Readers that take a path get the input through a file of their own; readers of a
// directory get a directory of their own (split_files, write_dir).
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "tensor/check.h"
#include "tensor/tensor.h"

namespace aim::fuzz {

inline std::string as_string(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// A per-process file holding the input (libFuzzer runs one input at a time per process).
inline std::string write_input(const uint8_t* data, size_t size, const char* suffix) {
  const std::string path = "/tmp/aim_fuzz_" + std::to_string(::getpid()) + suffix;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) __builtin_trap();
  if (size) std::fwrite(data, 1, size, f);
  std::fclose(f);
  return path;
}

// Multi-file inputs: the input is cut at every occurrence of kFileSeparator into pieces; piece k
// is the content of the target's k-th file. A file without a piece is absent (the reader's
// "cannot open" path); pieces beyond the target's files are ignored. The separator is a line of
// its own so the seed corpora stay readable text; libFuzzer learns it from the memmem below.
inline constexpr char kFileSeparator[] = "\n--8<--\n";

inline std::vector<std::string> split_files(const uint8_t* data, size_t size) {
  const char* p = reinterpret_cast<const char*>(data);
  const char* end = p + size;
  const size_t sep = sizeof(kFileSeparator) - 1;
  std::vector<std::string> pieces;
  for (;;) {
    const void* hit = memmem(p, size_t(end - p), kFileSeparator, sep);
    if (!hit) {
      pieces.emplace_back(p, end);
      return pieces;
    }
    const char* h = static_cast<const char*>(hit);
    pieces.emplace_back(p, h);
    p = h + sep;
  }
}

// Writes pieces[k] to DIR/names[k] (subdirectories created) in a per-process directory
// /tmp/aim_fuzz_<pid>_<tag> and removes the files of names without a piece (left by the previous
// input); returns DIR.
inline std::string write_dir(const char* tag, const std::vector<std::string>& names,
                             const std::vector<std::string>& pieces) {
  namespace fs = std::filesystem;
  const std::string dir = "/tmp/aim_fuzz_" + std::to_string(::getpid()) + "_" + tag;
  for (size_t k = 0; k < names.size(); ++k) {
    const fs::path path = fs::path(dir) / names[k];
    if (k >= pieces.size()) {
      std::error_code ec;
      fs::remove(path, ec);
      continue;
    }
    fs::create_directories(path.parent_path());
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) __builtin_trap();
    if (!pieces[k].empty()) std::fwrite(pieces[k].data(), 1, pieces[k].size(), f);
    std::fclose(f);
  }
  return dir;
}

// Tensor::zeros / Tensor::full need the fill kernel, which kernels/copy installs in the library
// (not in this build): a plain loop over a contiguous CPU tensor for the readers that fill one
// (Planetoid's features, MJSynth's padded labels). Call from LLVMFuzzerInitialize.
inline void install_cpu_fill() {
  aim::TensorKernelHooks h;
  h.fill = [](const aim::Tensor& t, double v) {
    if (!t.device().is_cpu() || !t.is_contiguous()) __builtin_trap();
    const int64_t n = t.numel();
    switch (t.dtype()) {
      case aim::DType::f32:
        for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = float(v);
        break;
      case aim::DType::f64:
        for (int64_t i = 0; i < n; ++i) t.data<double>()[i] = v;
        break;
      case aim::DType::i32:
        for (int64_t i = 0; i < n; ++i) t.data<int32_t>()[i] = int32_t(v);
        break;
      case aim::DType::i64:
        for (int64_t i = 0; i < n; ++i) t.data<int64_t>()[i] = int64_t(v);
        break;
      default:
        __builtin_trap();  // no reader under a fuzzer fills another dtype
    }
  };
  aim::set_tensor_kernel_hooks(h);
}

// AIM_FUZZ_SHOW_ERRORS=1 prints each aim::Error: run a target on its seed files to see that they
// load (`AIM_FUZZ_SHOW_ERRORS=1 build-fuzz/fuzz_T fuzz/corpus/T/*`).
template <class F>
int run(F&& f) {
  static const bool show = std::getenv("AIM_FUZZ_SHOW_ERRORS") != nullptr;
  try {
    f();
  } catch (const aim::Error& e) {
    if (show) std::fprintf(stderr, "aim::Error: %s\n", e.what());
  }
  return 0;
}

}  // namespace aim::fuzz
