// CRC-32C (Castagnoli, the iSCSI / ext4 / RocksDB checksum) of a byte range: the checksum aim
// writes beside every tensor of a safetensors file (tensor/safetensors.h). SSE4.2's crc32
// instruction where the CPU has it (checked at run time), else a table: same value either way.
#pragma once
#include <cstddef>
#include <cstdint>

namespace aim {

// crc32c(data, n) of the whole range; pass the previous result as `crc` to continue a range.
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);

}  // namespace aim
