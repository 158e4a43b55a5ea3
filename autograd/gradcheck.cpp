#include "autograd/gradcheck.h"

#include <cmath>

#include "autograd/engine.h"
#include "kernels/registry.h"
#include "kernels/testing.h"

namespace aim::autograd {

GradcheckResult gradcheck(const std::function<Variable(const std::vector<Variable>&)>& f,
                          const std::vector<Variable>& inputs, const GradcheckOptions& o) {
  kernels::ScopedVariant use_ref("*", "cpu.ref");
  for (const Variable& v : inputs)
    AIM_CHECK((v.dtype() == DType::f64 && v.device().is_cpu()) || !v.requires_grad(),
              "gradcheck: inputs that require grad must be f64 on cpu, got ", dtype_name(v.dtype()),
              " on ", v.device().str());

  // Analytic.
  for (const Variable& v : inputs)
    if (v.requires_grad()) v.mutable_grad() = Tensor();
  Variable out = f(inputs);
  const Tensor w = kernels::random_tensor(out.sizes(), DType::f64, o.seed, -1, 1);
  const std::vector<double> wv = w.to_vector<double>();
  backward({out}, {w});

  auto weighted = [&]() {
    NoGradGuard ng;
    const std::vector<double> y = f(inputs).data().to_vector<double>();
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += y[i] * wv[i];
    return s;
  };

  for (size_t k = 0; k < inputs.size(); ++k) {
    const Variable& v = inputs[k];
    if (!v.requires_grad()) continue;
    AIM_CHECK(v.data().is_contiguous(), "gradcheck: input ", k, " must be contiguous");
    const std::vector<double> analytic = v.grad().defined()
                                             ? v.grad().to_vector<double>()
                                             : std::vector<double>(size_t(v.numel()), 0.0);
    double* x = v.data().data<double>();
    for (int64_t i = 0; i < v.numel(); ++i) {
      const double saved = x[i];
      x[i] = saved + o.eps;
      const double plus = weighted();
      x[i] = saved - o.eps;
      const double minus = weighted();
      x[i] = saved;
      const double numeric = (plus - minus) / (2 * o.eps);
      const double a = analytic[size_t(i)];
      if (!(std::fabs(a - numeric) <= o.atol + o.rtol * std::fabs(numeric)))
        return {false, str("input ", k, " (", v.name().empty() ? "unnamed" : v.name(), ", shape ",
                           to_string(v.sizes()), ") element ", i, ": analytic ", a, ", numerical ",
                           numeric)};
    }
  }
  return {true, ""};
}

}  // namespace aim::autograd
