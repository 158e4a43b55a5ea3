#include "train/checkpoint.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "tensor/check.h"
#include "tensor/safetensors.h"

namespace aim::train {
namespace {

int64_t parse_i64(const std::map<std::string, std::string>& md, const std::string& key,
                  const std::string& path) {
  auto it = md.find(key);
  AIM_CHECK(it != md.end(), "checkpoint ", path, " has no metadata '", key, "'");
  try {
    size_t used = 0;
    const int64_t v = std::stoll(it->second, &used);
    if (used == it->second.size()) return v;
  } catch (const std::exception&) {
  }
  AIM_FAIL("checkpoint ", path, ": metadata '", key, "' = '", it->second, "' is not an integer");
}

}  // namespace

std::string checkpoint_path(const std::string& dir) {
  return (std::filesystem::path(dir) / "checkpoint.safetensors").string();
}

CheckpointDirLock::CheckpointDirLock(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  AIM_CHECK(!ec, "--checkpoint-dir ", dir, ": cannot create the directory: ", ec.message());
  const std::string path = (std::filesystem::path(dir) / "LOCK").string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  AIM_CHECK(fd_ >= 0, "--checkpoint-dir ", dir, ": cannot open ", path, ": ", std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char owner[256] = {0};
    const ssize_t n = ::pread(fd_, owner, sizeof owner - 1, 0);
    ::close(fd_);
    fd_ = -1;
    std::string who = n > 0 ? std::string(owner, size_t(n)) : std::string("(owner unknown)");
    while (!who.empty() && (who.back() == '\n' || who.back() == ' ')) who.pop_back();
    AIM_CHECK(err != EWOULDBLOCK, "--checkpoint-dir ", dir, " is in use by another run (", who,
              "; ", path,
              "): two runs writing one checkpoint directory would overwrite each "
              "other's checkpoints; give this run another --checkpoint-dir, or wait");
    AIM_FAIL("--checkpoint-dir ", dir, ": cannot lock ", path, ": ", std::strerror(err));
  }
  char host[128] = {0};
  ::gethostname(host, sizeof host - 1);
  const std::string me = "pid " + std::to_string(::getpid()) + " on host " + host + " since " +
                         std::to_string(std::time(nullptr)) + " (unix time)\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) != ssize_t(me.size()))
    AIM_FAIL("--checkpoint-dir ", dir, ": cannot write ", path, ": ", std::strerror(errno));
}

CheckpointDirLock::~CheckpointDirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

void save_checkpoint(const std::string& dir, int64_t step, const layers::Module& model,
                     const Optimizer& opt, int64_t data_position,
                     const std::map<std::string, std::string>& extra_metadata) {
  AIM_CHECK(!dir.empty(), "save_checkpoint: empty checkpoint directory");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  AIM_CHECK(!ec, "save_checkpoint: cannot create directory ", dir, ": ", ec.message());
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [k, t] : model.state_dict()) tensors.emplace_back("model." + k, t);
  for (const auto& [k, t] : opt.state_dict()) tensors.emplace_back("optim." + k, t);
  std::map<std::string, std::string> md = extra_metadata;
  md["format"] = "aim-train-checkpoint-1";
  md["step"] = std::to_string(step);
  md["data_position"] = std::to_string(data_position);
  save_safetensors(checkpoint_path(dir), tensors, md);
}

CheckpointInfo load_checkpoint(const std::string& dir, layers::Module& model, Optimizer& opt,
                               const std::function<void(const CheckpointInfo&)>& check) {
  const std::string path = checkpoint_path(dir);
  AIM_CHECK(std::filesystem::exists(path), "no checkpoint to resume from: ", path,
            " does not exist");
  const SafetensorsFile f = load_safetensors(path);
  CheckpointInfo info;
  info.metadata = f.metadata;
  info.step = parse_i64(f.metadata, "step", path);
  info.data_position = parse_i64(f.metadata, "data_position", path);
  if (check) check(info);
  int64_t at = 0;
  const std::string nan = first_nan_tensor(f, &at);
  AIM_CHECK(nan.empty(), "checkpoint ", path, ": tensor '", nan, "' holds NaN (element ", at,
            "): the run that wrote it had diverged; resume from an earlier checkpoint");
  layers::StateDict msd;
  OptimizerState osd;
  for (const auto& [k, t] : f.tensors) {
    if (k.rfind("model.", 0) == 0)
      msd.emplace_back(k.substr(6), t);
    else if (k.rfind("optim.", 0) == 0)
      osd.emplace_back(k.substr(6), t);
    else
      AIM_FAIL("checkpoint ", path, ": tensor '", k, "' has neither a model. nor an optim. prefix");
  }
  try {
    model.load_state_dict(msd, true);
    opt.load_state_dict(osd);
  } catch (const Error& e) {
    AIM_FAIL("checkpoint ", path, ": ", e.what());
  }
  return info;
}

void check_resume_matches(const CheckpointInfo& ci, const std::map<std::string, std::string>& meta,
                          int ranks, const std::string& path) {
  const auto md = [&](const std::map<std::string, std::string>& m, const char* k) {
    const auto i = m.find(k);
    return i == m.end() ? std::string("(unknown)") : i->second;
  };
  // Another model or optimizer: say what the checkpoint is, before any detail.
  for (const char* k : {"model", "optimizer"})
    AIM_CHECK(!meta.count(k) || md(ci.metadata, k) == meta.at(k), "checkpoint ", path, " is a ",
              md(ci.metadata, "model"), " checkpoint (optimizer ", md(ci.metadata, "optimizer"),
              ", config ", md(ci.metadata, "config"), "); this run is ", md(meta, "model"),
              " (optimizer ", md(meta, "optimizer"),
              "): resume with the same model and optimizer, or give another --checkpoint-dir");
  const auto it = ci.metadata.find("ranks");
  const std::string theirs = it == ci.metadata.end() ? "1" : it->second;
  AIM_CHECK(theirs == std::to_string(ranks), "checkpoint ", path, " was written by a run of ",
            theirs, " rank(s), this run has ", ranks,
            ": resume with the same rank count (the global batch would change)");
  for (const auto& [k, v] : meta) {
    if (k.compare(0, 4, "amp_") == 0 || k == "ranks") continue;
    auto m = ci.metadata.find(k);
    AIM_CHECK(m != ci.metadata.end() && m->second == v, "checkpoint ", path, ": ", k, " '",
              m == ci.metadata.end() ? std::string("(missing)") : m->second,
              "' differs from this run's '", v, "'");
  }
}

}  // namespace aim::train
