// What every target shares: an aim::Error is the reader's answer to bad input (fine); anything
// else — a crash, a sanitizer report, another exception, an allocation past -malloc_limit_mb — is
// a finding. Readers that take a path get the input through a file of their own.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "tensor/check.h"

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

template <class F>
int run(F&& f) {
  try {
    f();
  } catch (const aim::Error&) {
  }
  return 0;
}

}  // namespace aim::fuzz
