#include "train/amp.h"

#include <cmath>
#include <sstream>

#include "autograd/functions/elementwise.h"
#include "kernels/optim/optim.h"
#include "tensor/check.h"

namespace aim::train {

LossScaler::LossScaler(const LossScalerOptions& o) : o_(o), scale_(o.init_scale) {
  AIM_CHECK(o.init_scale > 0 && std::isfinite(o.init_scale) && o.growth_factor > 1 &&
                o.backoff_factor > 0 && o.backoff_factor < 1 && o.growth_interval > 0,
            "LossScaler: need init_scale > 0, growth_factor > 1, 0 < backoff_factor < 1, "
            "growth_interval > 0");
}

Tensor LossScaler::unscale_flag(const NamedParameters& params) {
  // One flag per flag dtype (f32; f64 for f64 gradients), combined on the device at the end.
  std::map<std::pair<std::string, DType>, Tensor> flags;
  for (const auto& [name, p] : params) {
    const Tensor& g = p.grad();
    if (!g.defined()) continue;
    const DType fd = kernels::optim_state_dtype(g.dtype());
    Tensor& flag = flags[{g.device().str(), fd}];
    if (!flag.defined()) flag = Tensor::zeros({1}, fd, g.device());
    kernels::AmpUnscaleArgs a;
    a.grad = g;
    a.found_inf = flag;
    a.inv_scale = 1.0 / scale_;
    kernels::amp_unscale(a);
  }
  Tensor found;
  for (const auto& [k, f] : flags) {
    const Tensor f32 = f.to(DType::f32);  // a flag is 0 or 1: exact in any dtype
    AIM_CHECK(!found.defined() || found.device() == f32.device(),
              "LossScaler: gradients on several devices (", found.device().str(), ", ",
              f32.device().str(), ")");
    found = found.defined()
                ? autograd::maximum(autograd::Variable(found), autograd::Variable(f32)).data()
                : f32;
  }
  return found.defined() ? found : Tensor::zeros({1}, DType::f32);
}

void LossScaler::update(bool found_inf) {
  if (found_inf) {
    scale_ *= o_.backoff_factor;
    clean_ = 0;
    ++skipped_;
    return;
  }
  if (++clean_ == o_.growth_interval) {
    const double grown = scale_ * o_.growth_factor;
    if (std::isfinite(grown)) scale_ = grown;
    clean_ = 0;
  }
}

std::map<std::string, std::string> LossScaler::state() const {
  std::ostringstream s;
  s.precision(17);
  s << scale_;
  return {{"amp_scale", s.str()},
          {"amp_clean_steps", std::to_string(clean_)},
          {"amp_skipped_steps", std::to_string(skipped_)}};
}

void LossScaler::load_state(const std::map<std::string, std::string>& meta,
                            const std::string& where) {
  for (const char* k : {"amp_scale", "amp_clean_steps", "amp_skipped_steps"})
    AIM_CHECK(meta.count(k), where, ": metadata lacks ", k,
              " (the checkpoint is not from a --precision fp16 run)");
  scale_ = std::stod(meta.at("amp_scale"));
  clean_ = std::stoll(meta.at("amp_clean_steps"));
  skipped_ = std::stoll(meta.at("amp_skipped_steps"));
  AIM_CHECK(scale_ > 0 && std::isfinite(scale_), where, ": amp_scale ", scale_, " is not > 0");
}

}  // namespace aim::train
