// The registry-driven test's data: a test shape (numbers whose meaning an op declares once, in
// OpBase::shape_fields) and a test case (named tensors and parameters, whose names are those of the
// op's argument declaration, kernels/fields.h).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace aim::kernels {

using TestShape = std::vector<int64_t>;
std::string shape_str(const TestShape& s, const char* sep = ",");

struct NamedTensor {
  std::string name;
  Tensor tensor;
  bool host = false;  // an input the op reads on the host: stays on the CPU for every variant
};

// One test case: inputs (read) and outputs (written or accumulated) with their initial content,
// plus scalar parameters and integer lists. Built on the CPU by an op's case maker, usually as
// to_case(args) (kernels/fields.h).
struct TestCase {
  std::vector<NamedTensor> inputs, outputs;
  std::map<std::string, double> params;
  std::map<std::string, std::vector<int64_t>> lists;
  const Tensor& in(const std::string& name) const;
  const Tensor& out(const std::string& name) const;
  double param(const std::string& name) const;
  void add_in(const std::string& name, Tensor t, bool host = false) {
    inputs.push_back({name, std::move(t), host});
  }
  void add_out(const std::string& name, Tensor t) { outputs.push_back({name, std::move(t)}); }
};

struct Tolerance {
  double atol = 0, rtol = 0;
};
Tolerance default_tolerance(DType t);

}  // namespace aim::kernels
