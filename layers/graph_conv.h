// GraphConvolution (Kipf & Welling 2017; pygcn's layers.GraphConvolution): y = A (x W) + b with
// A the normalised adjacency (a constant CSR, kernels/sparse/csr.h) and its transpose for the
// backward. x [nodes, in] -> [nodes, out]. Parameters as pygcn: weight [in, out], bias [out].
// Init as Kipf's TF code (the published results): Glorot uniform weight, zero bias, drawn from
// Philox(seed). x W first: the dense GEMM shrinks the features before the sparse product.
#pragma once
#include <cmath>
#include <cstdint>

#include "autograd/functions/elementwise.h"
#include "autograd/functions/matmul.h"
#include "autograd/functions/sparse.h"
#include "kernels/random/random.h"
#include "layers/init.h"
#include "layers/module.h"

namespace aim::layers {

class GraphConvolution : public Module {
 public:
  GraphConvolution(int64_t in_features, int64_t out_features, uint64_t seed = 0, bool bias = true)
      : in_features_(in_features), out_features_(out_features) {
    AIM_CHECK(in_features > 0 && out_features > 0,
              "GraphConvolution: features must be positive, got in=", in_features,
              " out=", out_features);
    kernels::Generator gen(seed);
    const double r = std::sqrt(6.0 / double(in_features + out_features));  // Glorot uniform
    weight = param("weight", uniform_init({in_features, out_features}, -r, r, gen));
    if (bias) this->bias = param("bias", Tensor::zeros({out_features}));
  }
  Variable forward(const Variable& x, const kernels::Csr& a, const kernels::Csr& a_t) const {
    AIM_CHECK(x.dim() == 2 && x.size(1) == in_features_, "GraphConvolution(", in_features_, " -> ",
              out_features_, "): expected x [nodes, ", in_features_, "], got ",
              to_string(x.sizes()));
    Variable y = autograd::spmm(a, a_t, autograd::matmul(x, weight));
    return bias.defined() ? autograd::add(y, bias) : y;
  }
  // x W (2 nodes in out) + A (xW) (2 nnz out) + bias (nodes out).
  double flops(int64_t nodes, int64_t nnz) const {
    return 2.0 * double(nodes) * double(in_features_) * double(out_features_) +
           2.0 * double(nnz) * double(out_features_) +
           (bias.defined() ? double(nodes) * double(out_features_) : 0.0);
  }
  std::string type_name() const override { return "GraphConvolution"; }
  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }

  Parameter weight;  // [in, out]
  Parameter bias;    // [out], undefined when bias = false

 private:
  int64_t in_features_, out_features_;
};

}  // namespace aim::layers
