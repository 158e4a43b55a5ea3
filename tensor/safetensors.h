// safetensors files (https://github.com/huggingface/safetensors format): weights exchanged with
// PyTorch, checkpoints. Header: u64 little-endian length, JSON {name: {dtype, shape,
// data_offsets}, "__metadata__": {string: string}}, then the raw little-endian data.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace aim {

struct SafetensorsFile {
  std::vector<std::pair<std::string, Tensor>> tensors;  // in file order, CPU
  std::map<std::string, std::string> metadata;
  const Tensor& at(const std::string& name) const;  // error names the file's tensors
  bool has(const std::string& name) const;
  std::string path;
};

// Reads and validates a file: a truncated, corrupt or inconsistent file is an aim::Error naming
// the path and what is wrong.
SafetensorsFile load_safetensors(const std::string& path);

// Writes tensors (any device; copied to host, made contiguous) to a temporary file next to `path`
// and renames it over `path`, so a crash never leaves a half-written file.
void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

const char* safetensors_dtype(DType t);

}  // namespace aim
