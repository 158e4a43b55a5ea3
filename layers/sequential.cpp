#include "layers/sequential.h"

#include <typeinfo>

#include "layers/activation.h"
#include "layers/conv.h"
#include "layers/linear.h"
#include "tensor/check.h"

namespace aim::layers {

Sequential::Sequential(const std::vector<std::shared_ptr<Module>>& modules) {
  for (const auto& m : modules) push_back(m);
}

void Sequential::push_back(std::shared_ptr<Module> m) { add_child(std::to_string(size()), m); }

Shape Sequential::count_flops(const Shape& in, double& flops) const {
  Shape s = in;
  for (const auto& c : children()) s = c.second->count_flops(s, flops);
  return s;
}

bool conv_relu_pair(const Module& a, const Module& b) {
  return typeid(a) == typeid(Conv2d) && typeid(b) == typeid(ReLU);
}

Variable Sequential::forward(const Variable& x) {
  // A Conv2d followed by a ReLU runs as Conv2d::forward_relu (VGG, SSD's VGG trunk).
  const auto& ch = children();
  Variable y = x;
  for (size_t i = 0; i < ch.size(); ++i) {
    Module& m = *ch[i].second;
    if (i + 1 < ch.size() && conv_relu_pair(m, *ch[i + 1].second)) {
      y = static_cast<Conv2d&>(m).forward_relu(y);
      ++i;
      continue;
    }
    y = m.forward(y);
  }
  return y;
}

std::shared_ptr<Sequential> make_mlp(
    const std::vector<int64_t>& dims,
    const std::function<std::shared_ptr<Module>(int64_t channels)>& activation, uint64_t seed,
    bool activate_last) {
  AIM_CHECK(dims.size() >= 2, "make_mlp: needs at least {in, out}, got ", dims.size(), " dims");
  auto seq = std::make_shared<Sequential>();
  for (size_t i = 0; i + 1 < dims.size(); ++i) {
    seq->push_back(std::make_shared<Linear>(dims[i], dims[i + 1], seed + i));
    const bool last = i + 2 == dims.size();
    if (activation && (!last || activate_last)) {
      if (auto a = activation(dims[i + 1])) seq->push_back(a);
    }
  }
  return seq;
}

std::shared_ptr<Sequential> make_mlp(const std::vector<int64_t>& dims,
                                     const std::string& activation, uint64_t seed,
                                     bool activate_last) {
  make_activation(activation, 1);  // validates the name up front
  return make_mlp(
      dims, [&](int64_t c) { return make_activation(activation, c); }, seed, activate_last);
}

}  // namespace aim::layers
