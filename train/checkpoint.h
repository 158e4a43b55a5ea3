// Training checkpoints: the model's and the optimizer's state with the stream position and the
// run's metadata in one safetensors file, <dir>/checkpoint.safetensors; --resume reads it back and
// refuses a checkpoint written by a different run (model, config, optimizer, data, batch, ranks).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "layers/module.h"
#include "train/optim.h"

namespace aim::train {

std::string checkpoint_path(const std::string& dir);

// The run that writes checkpoints into `dir` (rank 0) holds <dir>/LOCK for its whole life: an
// flock'ed file holding the owner's pid, host and start time. A second run on the same directory
// is refused, naming the owner; the lock goes with the process, so a crashed run leaves none
// (the file stays, unlocked). flock is per host: runs on two hosts sharing a network filesystem
// are not kept apart (docs/checkpoints.md).
class CheckpointDirLock {
 public:
  explicit CheckpointDirLock(const std::string& dir);
  ~CheckpointDirLock();
  CheckpointDirLock(const CheckpointDirLock&) = delete;
  CheckpointDirLock& operator=(const CheckpointDirLock&) = delete;

 private:
  int fd_ = -1;
};
// Writes <dir>/checkpoint.safetensors (creating dir) atomically through save_safetensors.
void save_checkpoint(const std::string& dir, int64_t step, const layers::Module& model,
                     const Optimizer& opt, int64_t data_position,
                     const std::map<std::string, std::string>& extra_metadata = {});
struct CheckpointInfo {
  int64_t step = 0, data_position = 0;
  std::map<std::string, std::string> metadata;
};
// Loads <dir>/checkpoint.safetensors into model and optimizer (strict); errors name the file.
// `check` (optional) sees the metadata before any tensor is loaded (--resume of another model or
// optimizer is named as such, not as a list of key and shape differences).
CheckpointInfo load_checkpoint(const std::string& dir, layers::Module& model, Optimizer& opt,
                               const std::function<void(const CheckpointInfo&)>& check = {});

// --resume: the checkpoint's metadata must match this run's `meta` (its amp_* entries, the loss
// scaler's state, excepted) and its rank count `ranks`; else an error naming the difference.
void check_resume_matches(const CheckpointInfo& ci, const std::map<std::string, std::string>& meta,
                          int ranks, const std::string& path);

}  // namespace aim::train
