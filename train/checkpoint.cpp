#include "train/checkpoint.h"

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

CheckpointInfo load_checkpoint(const std::string& dir, layers::Module& model, Optimizer& opt) {
  const std::string path = checkpoint_path(dir);
  AIM_CHECK(std::filesystem::exists(path), "no checkpoint to resume from: ", path,
            " does not exist");
  const SafetensorsFile f = load_safetensors(path);
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
  CheckpointInfo info;
  info.metadata = f.metadata;
  info.step = parse_i64(f.metadata, "step", path);
  info.data_position = parse_i64(f.metadata, "data_position", path);
  return info;
}

void check_resume_matches(const CheckpointInfo& ci, const std::map<std::string, std::string>& meta,
                          int ranks, const std::string& path) {
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
