// aim side of tests/parity/run_parity.py: reads a case's inputs (safetensors), runs aim's
// differentiable functions forward and backward on CPU, writes the outputs.
#include <cstdio>
#include <string>

#include "autograd/engine.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/embedding.h"
#include "autograd/functions/layer_norm.h"
#include "autograd/functions/loss.h"
#include "autograd/functions/softmax.h"
#include "tensor/safetensors.h"

using namespace aim;
using namespace aim::autograd;

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: aim_parity_dump CASE IN.safetensors OUT.safetensors\n");
    return 2;
  }
  try {
    const std::string c = argv[1];
    const SafetensorsFile in = load_safetensors(argv[2]);
    std::vector<std::pair<std::string, Tensor>> out;
    if (c == "gelu") {
      for (bool approx : {false, true}) {
        Variable x(in.at("x").clone(), true);
        Variable y = gelu(x, approx);
        y.backward(in.at("dy"));
        out.push_back({approx ? "y_tanh" : "y_erf", y.data()});
        out.push_back({approx ? "dx_tanh" : "dx_erf", x.grad()});
      }
    } else if (c == "layernorm") {
      Variable x(in.at("x").clone(), true), w(in.at("weight").clone(), true),
          b(in.at("bias").clone(), true);
      Variable y = layer_norm(x, w, b, 1e-5);
      y.backward(in.at("dy"));
      out = {{"y", y.data()}, {"dx", x.grad()}, {"dweight", w.grad()}, {"dbias", b.grad()}};
    } else if (c == "cross_entropy") {
      Variable l(in.at("logits").clone(), true);
      Variable loss = cross_entropy(l, in.at("target"), kernels::Reduction::mean, -100, 0.1);
      loss.backward();
      out = {{"loss", loss.data()}, {"dlogits", l.grad()}};
    } else if (c == "masked_softmax") {
      Variable x(in.at("x").clone(), true);
      Variable y = softmax(x, -1, in.at("mask"));
      y.backward(in.at("dy"));
      out = {{"y", y.data()}, {"dx", x.grad()}};
    } else if (c == "embedding") {
      Variable w(in.at("weight").clone(), true);
      Variable y = embedding(w, in.at("indices"), /*padding_idx=*/2);
      y.backward(in.at("dout"));
      out = {{"out", y.data()}, {"dweight", w.grad()}};
    } else {
      std::fprintf(stderr, "unknown case '%s'\n", c.c_str());
      return 2;
    }
    save_safetensors(argv[3], out);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "aim_parity_dump: %s\n", e.what());
    return 1;
  }
}
