// Sequential (torch.nn.Sequential): children named "0", "1", ... applied in order, and MLP, a
// Sequential of Linear layers with an activation between them (PyTorch keys "0.weight",
// "2.weight", ... when each hidden Linear is followed by its activation).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "layers/module.h"

namespace aim::layers {

class Sequential : public Module {
 public:
  Sequential() = default;
  explicit Sequential(const std::vector<std::shared_ptr<Module>>& modules);
  // Appends `m` as child "<size()>".
  void push_back(std::shared_ptr<Module> m);
  Variable forward(const Variable& x) override;
  Shape count_flops(const Shape& in, double& flops) const override;
  std::string type_name() const override { return "Sequential"; }
  size_t size() const { return children().size(); }
  const std::shared_ptr<Module>& operator[](size_t i) const { return children().at(i).second; }
};

// Whether a chain's consecutive children a, b are a Conv2d then a ReLU (exact types: a subclass
// may have its own forward), which Sequential (and any loop over a chain's children) runs as one
// Conv2d::forward_relu: one kernel at inference.
bool conv_relu_pair(const Module& a, const Module& b);

// MLP over dims {in, h1, ..., out}: Linear(dims[i], dims[i+1]) for each pair, each followed by
// activation(dims[i+1]) except the last unless `activate_last`. `activation` may return nullptr
// (no activation module). Linear i is seeded with seed + i.
std::shared_ptr<Sequential> make_mlp(
    const std::vector<int64_t>& dims,
    const std::function<std::shared_ptr<Module>(int64_t channels)>& activation, uint64_t seed = 0,
    bool activate_last = false);
// The same with an activation by name (make_activation in activation.h).
std::shared_ptr<Sequential> make_mlp(const std::vector<int64_t>& dims,
                                     const std::string& activation, uint64_t seed = 0,
                                     bool activate_last = false);

}  // namespace aim::layers
