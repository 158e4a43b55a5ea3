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
  bool checksummed = false;  // the file carried aim's checksums, and every one matched
};

// Reads and validates a file: a truncated, corrupt or inconsistent file is an aim::Error naming
// the path and what is wrong. A file aim wrote carries CRC-32C checksums of every tensor's bytes
// and of the header (metadata aim_crc32c_tensors / aim_crc32c_header, left out of `metadata`):
// a damaged byte is an error naming the tensor (or the header). Files of other writers have none
// and load unverified.
SafetensorsFile load_safetensors(const std::string& path);

// Writes tensors (any device; copied to host, made contiguous) with their checksums to a temporary
// file next to `path`, syncs it and renames it over `path`: a crash, a full disk (ENOSPC) or a
// failed write (EIO) never leaves a half-written file, and on an error the previous file is intact,
// the temporary one removed, and the aim::Error names the file and the system's reason.
void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

const char* safetensors_dtype(DType t);
// A loaded file's first floating tensor holding a NaN ("" when none) and the element's index:
// weights and checkpoints of a run that had diverged are refused on load, naming the tensor,
// instead of surfacing later as a NaN loss blamed on another tensor. (Infinities pass: a buffer
// such as an attention mask may hold them.)
std::string first_nan_tensor(const SafetensorsFile& f, int64_t* index = nullptr);

}  // namespace aim
