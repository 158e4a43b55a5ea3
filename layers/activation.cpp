#include "layers/activation.h"

#include "layers/batchnorm.h"
#include "tensor/check.h"

namespace aim::layers {

Dice::Dice(int64_t channels, double eps, double momentum, double alpha_init)
    : alpha(param("alpha", Tensor::full({channels}, alpha_init))),
      channels_(channels),
      eps_(eps),
      momentum_(momentum),
      running_mean_(buffer("running_mean", Tensor::zeros({channels}))),
      running_var_(buffer("running_var", Tensor::ones({channels}))) {
  AIM_CHECK(channels > 0, "Dice: channels must be positive, got ", channels);
}

Variable Dice::forward(const Variable& x) {
  AIM_CHECK(x.dim() >= 2 && x.size(-1) == channels_, "Dice: expected input [..., ", channels_,
            "] with a batch dim, got ", to_string(x.sizes()));
  const Variable xhat =
      batch_normalize(x, -1, is_training(), running_mean_, running_var_, momentum_, eps_);
  const Variable p = autograd::sigmoid(xhat);
  const Variable one_minus_p = autograd::add(autograd::neg(p), 1.0);
  return autograd::add(autograd::mul(p, x), autograd::mul(autograd::mul(one_minus_p, alpha), x));
}

std::shared_ptr<Module> make_activation(const std::string& name, int64_t channels) {
  if (name.empty() || name == "none") return nullptr;
  if (name == "relu") return std::make_shared<ReLU>();
  if (name == "sigmoid") return std::make_shared<Sigmoid>();
  if (name == "prelu") return std::make_shared<PReLU>(channels);
  if (name == "dice") return std::make_shared<Dice>(channels);
  AIM_FAIL("make_activation: unknown activation \"", name, "\" (relu, sigmoid, prelu, dice, none)");
}

}  // namespace aim::layers
