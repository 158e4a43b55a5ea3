// Fused bias + GELU: y = gelu(x + bias), the bias broadcast over rows (a Linear's bias followed
// by F.gelu, as in BERT's intermediate layer), and its gradient. h = x + bias is never stored: the
// backward recomputes it from x and bias.
// Shapes: x, y, dy, dx [N, C] contiguous; bias, dbias [C] contiguous (dbias optional).
// gelu: the exact erf form (F.gelu(x)), or with tanh = true the tanh approximation
// (F.gelu(x, approximate='tanh')): unary's gelu_erf / gelu_tanh (unary.h's scalar math).
// Dtypes: f32, f64, f16, bf16 (16-bit types compute in f32). Math, gradient and cost:
// kernels/elementwise/README.md, "bias_gelu".
#pragma once
#include "kernels/elementwise/unary.h"
#include "kernels/op.h"

namespace aim::kernels {

struct BiasGeluFwdArgs {
  Tensor x, bias;  // x: [N, C]; bias: [C]
  Tensor y;        // [N, C], x's dtype: written
  bool tanh = false;
  Device device() const { return x.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("x", s.x), f.in("bias", s.bias), f.out("y", s.y);
    f.param("tanh", s.tanh);
  }
};

struct BiasGeluBwdArgs {
  Tensor dy, x, bias;  // dy, x: [N, C] (x: the forward's input, before the bias); bias: [C]
  Tensor dx;           // [N, C]: written (=)
  Tensor dbias;        // [C]: accumulated (+=); undefined = not wanted
  bool tanh = false;
  Device device() const { return x.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("dy", s.dy), f.in("x", s.x), f.in("bias", s.bias);
    f.out("dx", s.dx), f.out_opt("dbias", s.dbias);
    f.param("tanh", s.tanh);
  }
};

// The unary kind whose scalar math the fused op applies to x + bias.
constexpr UnaryKind bias_gelu_kind(bool tanh) {
  return tanh ? UnaryKind::gelu_tanh : UnaryKind::gelu_erf;
}

// Compulsory work: one add per element plus gelu (unary's count); x read once, bias once, y
// written once. Backward: the add, gelu' and the product with dy (unary_bwd's count), plus one
// add per element for dbias; dy and x read, dx written, dbias read and written.
inline Cost bias_gelu_fwd_cost(const BiasGeluFwdArgs& a) {
  const double N = double(a.x.size(0)), C = double(a.x.size(1)),
               e = double(dtype_size(a.x.dtype()));
  return Cost{/*flops=*/N * C * (1 + unary_flops_per_element(bias_gelu_kind(a.tanh))),
              /*bytes_read=*/(N * C + C) * e, /*bytes_written=*/N * C * e};
}
inline Cost bias_gelu_bwd_cost(const BiasGeluBwdArgs& a) {
  const double N = double(a.x.size(0)), C = double(a.x.size(1)),
               e = double(dtype_size(a.x.dtype()));
  const double db = a.dbias.defined() ? C * e : 0;
  return Cost{
      /*flops=*/N * C *
          (1 + unary_bwd_flops_per_element(bias_gelu_kind(a.tanh)) + (a.dbias.defined() ? 1 : 0)),
      /*bytes_read=*/(2 * N * C + C) * e + db, /*bytes_written=*/N * C * e + db};
}

// Host-side validation shared by every variant (throws "[bias_gelu_fwd] ..." messages).
void check_bias_gelu_fwd_args(const BiasGeluFwdArgs& a);
void check_bias_gelu_bwd_args(const BiasGeluBwdArgs& a);

void bias_gelu_fwd(const BiasGeluFwdArgs& a);  // runs the selected variant
void bias_gelu_bwd(const BiasGeluBwdArgs& a);  // gradient rules: autograd/node.h

}  // namespace aim::kernels
