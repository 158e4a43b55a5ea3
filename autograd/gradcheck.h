// Finite-difference gradient check in f64 on cpu.ref (every op forced to its reference variant).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "autograd/variable.h"

namespace aim::autograd {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-4;
  uint64_t seed = 7;
};

struct GradcheckResult {
  bool ok = true;
  std::string message;  // first mismatch: input, element, analytic, numerical
};

// f maps f64 CPU variables to one output Variable. The check compares the analytic gradient of
// sum(f(x) * w), with w random, against central differences, for every input that requires grad.
GradcheckResult gradcheck(const std::function<Variable(const std::vector<Variable>&)>& f,
                          const std::vector<Variable>& inputs, const GradcheckOptions& o = {});

}  // namespace aim::autograd
