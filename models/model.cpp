#include "models/model.h"

#include <algorithm>
#include <cctype>

#include "tensor/check.h"
#include "tensor/safetensors.h"

namespace aim::models {

std::string TensorSpec::shape_str() const {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + dims[i];
  return s + "]";
}

TensorMap Model::postprocess_outputs(const TensorMap& host_outputs) const {
  (void)host_outputs;
  AIM_FAIL(type_name(), " has no post-processing (--postprocess is for detectors)");
}

namespace {

std::string shape_of(const Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}

bool is_number(const std::string& d) {
  return !d.empty() && std::all_of(d.begin(), d.end(), [](char c) { return std::isdigit(c); });
}

}  // namespace

void Model::check_batch(const std::vector<TensorSpec>& specs, const TensorMap& batch,
                        const std::string& where) {
  std::map<std::string, int64_t> bound;  // letter -> size, from the first tensor that has it
  std::map<std::string, std::string> bound_by;
  for (const TensorSpec& s : specs) {
    auto it = batch.find(s.name);
    if (it == batch.end()) {
      std::string have;
      for (const auto& [k, v] : batch) have += (have.empty() ? "" : ", ") + k;
      AIM_FAIL(where, ": missing tensor '", s.name, "' ", dtype_name(s.dtype), " ", s.shape_str(),
               " (has: ", have.empty() ? "nothing" : have, ")");
    }
    const Tensor& t = it->second;
    AIM_CHECK(t.dtype() == s.dtype, where, ": ", s.name, " has dtype ", dtype_name(t.dtype()),
              ", expected ", dtype_name(s.dtype));
    AIM_CHECK(t.dim() == int64_t(s.dims.size()), where, ": ", s.name, " has shape ", shape_of(t),
              ", expected ", s.shape_str());
    for (size_t d = 0; d < s.dims.size(); ++d) {
      const std::string& name = s.dims[d];
      const int64_t n = t.size(int64_t(d));
      if (is_number(name)) {
        AIM_CHECK(n == std::stoll(name), where, ": ", s.name, " has shape ", shape_of(t),
                  ", expected ", s.shape_str());
        continue;
      }
      auto [b, fresh] = bound.emplace(name, n);
      if (fresh) {
        bound_by[name] = s.name;
        continue;
      }
      AIM_CHECK(b->second == n, where, ": ", s.name, " has shape ", shape_of(t), ", expected ",
                s.shape_str(), " with ", name, " = ", b->second, " (from ", bound_by[name], ")");
    }
  }
}

TensorMap Model::pad_batch(const TensorMap& batch,
                           const std::map<std::string, Shape>& shapes) const {
  for (const auto& [k, t] : batch) {
    auto it = shapes.find(k);
    AIM_CHECK(it == shapes.end() || it->second == t.sizes(), "batch tensor ", k, " has shape ",
              to_string(t.sizes()), ", the captured step ", to_string(it->second),
              ": this model cannot pad its batches (a CUDA graph replays one shape)");
  }
  return batch;
}

TensorMap batch_to_device(const Model& m, const TensorMap& host_batch, Device d) {
  TensorMap r = to_device(host_batch, d);
  for (auto& [k, t] : m.host_metadata(host_batch)) r[k] = t.to(kCPU);
  return r;
}

void load_weights_file(Model& m, const std::string& model_name, const std::string& path,
                       const std::string& flag) {
  SafetensorsFile f;
  try {
    f = load_safetensors(path);
  } catch (const Error& e) {
    AIM_FAIL(flag, " ", e.what());
  }
  int64_t at = 0;
  const std::string nan = first_nan_tensor(f, &at);
  AIM_CHECK(nan.empty(), flag, " ", path, ": tensor '", nan, "' holds NaN (element ", at,
            "): the run that wrote it had diverged");
  const auto meta = [&](const char* k) {
    const auto it = f.metadata.find(k);
    return it == f.metadata.end() ? std::string() : it->second;
  };
  const std::string theirs = meta("model");
  AIM_CHECK(theirs.empty() || theirs == model_name, flag, " ", path, ": holds ", theirs,
            " weights, this run is ", model_name);
  layers::StateDict sd;
  if (meta("format") == "aim-train-checkpoint-1") {
    // A training checkpoint: the weights are its model.* tensors (optim.* is the optimizer).
    for (const auto& [k, t] : f.tensors)
      if (k.rfind("model.", 0) == 0) sd.emplace_back(k.substr(6), t);
  } else {
    sd = f.tensors;
  }
  try {
    m.load_state_dict(sd, true);
  } catch (const Error& e) {
    AIM_FAIL(flag, " ", path, ": ", e.what());
  }
}

}  // namespace aim::models
