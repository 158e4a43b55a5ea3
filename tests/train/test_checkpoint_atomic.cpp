// A save killed part-way (SIGKILL: no destructor, no cleanup) must leave the previous checkpoint
// whole: save_checkpoint writes <dir>/checkpoint.safetensors.tmp and renames it over the old file.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "models/din.h"
#include "tensor/safetensors.h"
#include "train/trainer.h"

namespace aim::train {
namespace {

TEST(Checkpoint, KilledSaveLeavesPreviousIntact) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("aim_ckpt_kill_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  // Full-size DIN with Adam state: ~50 MB per checkpoint, so a save takes long enough to be
  // interrupted mid-write.
  models::Din model{models::DinConfig()};
  auto opt = make_optimizer("adam", model.named_parameters(), 1e-3);
  for (const auto& [name, p] : model.named_parameters())
    p.mutable_grad() = Tensor::zeros(p.sizes());
  opt->step();
  save_checkpoint(dir.string(), 1, model, *opt, 100);
  const std::string path = checkpoint_path(dir.string()), tmp = path + ".tmp";
  const auto size_before = std::filesystem::file_size(path);

  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // keeps saving newer checkpoints until killed (no OpenMP used here)
    for (int64_t step = 2;; ++step) save_checkpoint(dir.string(), step, model, *opt, 100 * step);
  }
  // Kill it while a temporary file is being written.
  bool saw_tmp = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    std::error_code ec;
    if (std::filesystem::exists(tmp, ec) && std::filesystem::file_size(tmp, ec) > 0 && !ec) {
      saw_tmp = true;
      break;
    }
  }
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(saw_tmp) << "the child never started writing " << tmp;
  EXPECT_TRUE(WIFSIGNALED(status));

  // Whatever the child managed, checkpoint.safetensors is a complete checkpoint: it loads
  // strictly into a fresh model and optimizer and has the full size.
  EXPECT_EQ(std::filesystem::file_size(path), size_before);
  models::Din fresh{models::DinConfig()};
  auto fresh_opt = make_optimizer("adam", fresh.named_parameters(), 1e-3);
  const CheckpointInfo ci = load_checkpoint(dir.string(), fresh, *fresh_opt);
  EXPECT_GE(ci.step, 1);
  EXPECT_EQ(ci.data_position, 100 * ci.step);
  EXPECT_EQ(fresh.state_dict().front().second.to_vector<float>(),
            model.state_dict().front().second.to_vector<float>());
  std::filesystem::remove_all(dir);
}

// A second run on the same --checkpoint-dir is refused, naming the owner; the lock goes with its
// holder.
TEST(Checkpoint, SecondWriterIsRefused) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("aim_ckpt_lock_" + std::to_string(::getpid())))
          .string();
  std::filesystem::remove_all(dir);
  {
    CheckpointDirLock first(dir);
    try {
      CheckpointDirLock second(dir);
      FAIL() << "a second lock of " << dir << " was granted";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("is in use by another run (pid " + std::to_string(::getpid())),
                std::string::npos)
          << m;
      EXPECT_NE(m.find(dir), std::string::npos) << m;
    }
  }
  CheckpointDirLock again(dir);  // released with its holder
  std::filesystem::remove_all(dir);
}

// --resume of a checkpoint with a damaged byte is an error naming the tensor.
TEST(Checkpoint, DamagedTensorIsNamedOnResume) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("aim_ckpt_flip_" + std::to_string(::getpid())))
          .string();
  std::filesystem::remove_all(dir);
  models::DinConfig cfg;
  cfg.n_mid = 50, cfg.n_cat = 10;
  models::Din model{cfg};
  auto opt = make_optimizer("sgd", model.named_parameters(), 1e-3);
  save_checkpoint(dir, 3, model, *opt, 30);
  const std::string path = checkpoint_path(dir);
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  bytes[bytes.size() - 2] ^= 0x40;  // the last tensor's bytes
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
  }
  models::Din fresh{cfg};
  auto fresh_opt = make_optimizer("sgd", fresh.named_parameters(), 1e-3);
  try {
    load_checkpoint(dir, fresh, *fresh_opt);
    FAIL() << "a damaged checkpoint loaded";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("fails its checksum"), std::string::npos) << m;
    EXPECT_NE(m.find("tensor 'model."), std::string::npos) << m;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace aim::train
