// Device-side error flag: how own CUDA kernels report a bad index or target without a
// device-to-host read in the op. One record per device in device memory (allocated lazily
// through the tensor allocator, zeroed once); the first kernel thread that finds a bad value
// claims it with atomicCAS on the op word and writes what it found; every finder also counts
// itself. Nothing is read back by the op: the host reads the record when it wants to know --
// check_device_errors(d), e.g. at the training loop's log point, where the loss is read anyway
// -- and gets the error the CPU variant would have thrown at once, e.g.
//   "[embedding_fwd] index 5012 at position 3 is out of range for V = 5000 (flagged on cuda:0;
//    1 flag since the last check)"
// Which bad value is named when several are flagged between two checks is the one whose thread
// claimed the record first (not necessarily the smallest position). Kernels never use a bad
// value as an address: the output of a flagged element is zero or skipped (each op's header).
// Under the SIMT emulator (Backend::SIMT: the kernels run on CPU tensors) the record of Device
// cpu lives in host memory and works the same way; CPU variants keep throwing immediately.
// Device code: kernels/error_flag.cuh (record_device_error).
#pragma once
#include <cstdint>

#include "tensor/tensor.h"

namespace aim::kernels {

// Which op flagged; selects the message. 0 = no error.
enum class DeviceErrorOp : int64_t {
  none = 0,
  embedding_fwd,      // position, value (index), bound (V)
  embedding_bwd,      // as embedding_fwd
  cross_entropy_fwd,  // position, value (target), bound (V), extra (ignore_index)
  cross_entropy_bwd,  // as cross_entropy_fwd
  ctc_fwd,            // position (in the sample), sample, value (target), bound (C), extra (blank)
  ctc_bwd,            // as ctc_fwd
  index_select,       // position (in index), value, bound (size of the indexed dim)
  index_add,          // as index_select
  gather,             // as index_select
  scatter_add,        // as index_select
  one_hot,            // as index_select (bound: the number of classes)
  embedding_bag_offsets,  // position (bag), value (offset), bound (N); extra: previous offset
};
const char* device_error_op_name(DeviceErrorOp op);

// The record, 8 words of 8 bytes (64 bytes) in device memory.
struct DeviceErrorRecord {
  long long op;        // DeviceErrorOp, claimed once (atomicCAS from 0)
  long long position;  // where the bad value sits
  long long sample;    // the sample of a per-sample position (CTC), else 0
  long long value;     // the bad value
  long long bound;     // the valid range's end (V, C, N...)
  long long extra;     // op-specific (ignore_index, blank, ...)
  long long count;     // number of flags since the last check (atomicAdd; a kernel may flag one
                       // bad value from several threads)
  long long reserved;
};
constexpr int kDeviceErrorWords = 8;
static_assert(sizeof(DeviceErrorRecord) == kDeviceErrorWords * 8, "8 words");

// The record of device d (a CUDA device, or cpu for kernels run by the SIMT emulator): allocated
// and zeroed (a fill on the current stream) on first use, then the same address for the
// process's lifetime (safe to bake into CUDA graphs).
DeviceErrorRecord* device_error_record(Device d);

// The record as an i64 [8] tensor on d (shares the storage): for a caller that wants to fold
// the flag into a read it does anyway (copy it beside the loss, read both in one copy, then
// throw_device_error on the words it got).
Tensor device_error_words(Device d);

// Reads d's record (one 64-byte device-to-host copy: a stream synchronisation), and when an
// error was flagged, resets the record and throws aim::Error naming the op, the bad value and
// where it was. Without a record on d (no kernel asked for one) it reads nothing.
void check_device_errors(Device d);

// Given the 8 words of a record read by the caller: when they hold an error, resets d's record
// and throws the error; else returns.
void throw_device_error(const int64_t* words, Device d);

// The message for a record's words, "" when they hold no error (tests, logs).
std::string device_error_message(const int64_t* words, Device d);

}  // namespace aim::kernels
