// matmul and linear. Backward, with C = op(A) op(B) and dC contiguous:
//   dA = dC op(B)^T          (stored [M,K], !trans_a)   or  op(B) dC^T  (stored [K,M], trans_a)
//   dB = op(A)^T dC          (stored [K,N], !trans_b)   or  dC^T op(A)  (stored [N,K], trans_b)
// each one GEMM with flags chosen so that no operand is ever transposed in memory. A 2-D operand
// shared across a batch gets the batch sum: one GEMM over the flattened batch when the other
// operand is not transposed ([Bt*M, K] rows), else a batched GEMM into a temporary summed over
// dim 0. linear: dx = dy W (written), dW += dy^T x (GEMM with beta = 1 into g.accum),
// db += column sum of dy (reduce kernel, then added into g.accum).
#include "autograd/functions/matmul.h"

#include "autograd/amp.h"
#include "autograd/int8.h"
#include "autograd/node.h"
#include "autograd/tensor_ops.h"
#include "kernels/matmul/matmul.h"

namespace aim::autograd {
namespace {

// c = op(a) op(b) (+ beta c) (+ bias); c allocated when undefined.
Tensor gemm(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b, Tensor c = Tensor(),
            float beta = 0, const Tensor& bias = Tensor(), const Tensor& b_packed = Tensor()) {
  if (!c.defined()) {
    const int64_t M = trans_a ? a.size(-1) : a.size(-2);
    const int64_t N = trans_b ? b.size(-2) : b.size(-1);
    Shape s{M, N};
    if (a.dim() == 3 || b.dim() == 3) s.insert(s.begin(), a.dim() == 3 ? a.size(0) : b.size(0));
    c = Tensor::empty(s, a.dtype(), a.device());
  }
  kernels::MatmulArgs m;
  m.a = a;
  m.b = b;
  m.c = c;
  m.trans_a = trans_a;
  m.trans_b = trans_b;
  m.beta = beta;
  m.bias = bias;
  m.b_packed = b_packed;
  kernels::matmul(m);
  return c;
}

// Writes into `dst` (shape of a shared 2-D operand) the batch sum of the batched product.
void gemm_batch_sum(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b,
                    const Tensor& dst) {
  dst.copy_(sum_to(gemm(a, b, trans_a, trans_b), dst.sizes()));
}

struct MatmulNode final : Node {
  Tensor a, b;  // contiguous, as stored; a saved only when b needs grad and vice versa
  bool trans_a = false, trans_b = false;
  const char* name() const override { return "Matmul"; }

  void backward(Grads& g) override {
    const Tensor& dc = g.dy();
    const bool batched = dc.dim() == 3;
    if (g.needs(0)) {
      Tensor da = g.out(0);
      if (batched && da.dim() == 2) {
        // a shared, b batched.
        if (!trans_a)
          gemm_batch_sum(dc, b, false, !trans_b, da);
        else
          gemm_batch_sum(b, dc, trans_b, true, da);
      } else if (!trans_a) {
        gemm(dc, b, false, !trans_b, da);
      } else {
        gemm(b, dc, trans_b, true, da);
      }
    }
    if (g.needs(1)) {
      Tensor db = g.out(1);
      if (batched && db.dim() == 2) {
        // b shared, a batched.
        if (!trans_a) {
          const int64_t rows = a.size(0) * a.size(1);
          const Tensor a2 = a.view({rows, a.size(2)}), dc2 = dc.view({rows, dc.size(2)});
          if (!trans_b)
            gemm(a2, dc2, true, false, db);
          else
            gemm(dc2, a2, true, false, db);
        } else if (!trans_b) {
          gemm_batch_sum(a, dc, false, false, db);  // op(A)^T = A stored [Bt,K,M]
        } else {
          gemm_batch_sum(dc, a, true, true, db);
        }
      } else if (!trans_b) {
        gemm(a, dc, !trans_a, false, db);
      } else {
        gemm(dc, a, true, trans_a, db);
      }
    }
  }
  void release() override {
    a = Tensor();
    b = Tensor();
  }
};

struct LinearNode final : Node {
  Tensor x2, weight;  // x as [M, in] (saved when weight needs grad); weight (when x needs grad)
  int64_t M = 0, in = 0, out = 0;
  const char* name() const override { return "Linear"; }

  void backward(Grads& g) override {
    const Tensor dy2 = g.dy().view({M, out});
    if (g.needs(0)) gemm(dy2, weight, false, false, g.out(0).view({M, in}));
    if (g.needs(1)) {
      float beta = 1.0f;
      const Tensor dw = g.accum_or_overwrite(1, beta);
      gemm(dy2, x2, true, false, dw, beta);
    }
    if (g.needs(2)) {
      float beta = 1.0f;
      const Tensor db = g.accum_or_overwrite(2, beta);
      if (beta == 0.0f)
        db.copy_(sum_to(dy2, {out}));
      else
        add_into(db, sum_to(dy2, {out}));
    }
  }
  void release() override {
    x2 = Tensor();
    weight = Tensor();
  }
};

}  // namespace

// The reason both of this file's declarations share.
constexpr char kWhyGemm[] = "GEMM: tensor cores on GPU; fp32 accumulation in every variant";

constexpr amp::Declaration kMatmulAmp{"matmul", amp::OpClass::lowp, kWhyGemm};
Variable matmul(const Variable& a, const Variable& b, bool trans_a, bool trans_b) {
  if (auto c = amp::autocast(kMatmulAmp, {&a, &b}))
    return matmul((*c)[0], (*c)[1], trans_a, trans_b);
  AIM_CHECK(a.defined() && b.defined(), "matmul: undefined operand");
  AIM_CHECK((a.dim() == 2 || a.dim() == 3) && (b.dim() == 2 || b.dim() == 3),
            "matmul: operands must be 2-D or 3-D, got ", to_string(a.sizes()), " and ",
            to_string(b.sizes()));
  const Tensor ac = a.data().contiguous(), bc = b.data().contiguous();
  const Tensor c = gemm(ac, bc, trans_a, trans_b);
  if (!needs_grad({&a, &b})) return Variable(c);
  auto n = std::make_shared<MatmulNode>();
  n->trans_a = trans_a;
  n->trans_b = trans_b;
  Variable y = attach1(n, {a, b}, c);
  if (n->next[1].needs_grad()) n->a = ac;
  if (n->next[0].needs_grad()) n->b = bc;
  return y;
}

constexpr amp::Declaration kLinearAmp{"linear", amp::OpClass::lowp, kWhyGemm};
Variable linear(const Variable& x, const Variable& weight, const Variable& bias,
                const Tensor& weight_packed) {
  if (auto y = int8::linear(x, weight, bias)) return *y;
  if (auto c = amp::autocast(kLinearAmp, {&x, &weight, &bias}))
    return linear((*c)[0], (*c)[1], (*c)[2]);  // 16-bit copies: the f32 packing does not apply
  AIM_CHECK(x.defined() && weight.defined(), "linear: undefined input or weight");
  AIM_CHECK(weight.dim() == 2, "linear: weight must be [out, in], got ", to_string(weight.sizes()));
  AIM_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(1), "linear: x ", to_string(x.sizes()),
            " does not match weight ", to_string(weight.sizes()));
  const int64_t in = weight.size(1), out = weight.size(0);
  const int64_t M = in ? x.numel() / in : 0;
  if (bias.defined())
    AIM_CHECK(bias.sizes() == Shape{out}, "linear: bias must be [", out, "], got ",
              to_string(bias.sizes()));
  const Tensor x2 = x.data().contiguous().view({M, in});
  const Tensor w = weight.data().contiguous();
  const Tensor y2 = gemm(x2, w, false, true, Tensor(), 0,
                         bias.defined() ? bias.data().contiguous() : Tensor(), weight_packed);
  Shape ys = x.sizes();
  ys.back() = out;
  const Tensor y = y2.view(ys);
  if (!needs_grad({&x, &weight, &bias})) return Variable(y);
  auto n = std::make_shared<LinearNode>();
  n->M = M;
  n->in = in;
  n->out = out;
  Variable r = attach1(n, {x, weight, bias}, y);
  if (n->next[1].needs_grad()) n->x2 = x2;
  if (n->next[0].needs_grad()) n->weight = w;
  return r;
}

void amp::declarations_matmul(std::vector<amp::Declaration>& out) {
  out.insert(out.end(), {kMatmulAmp, kLinearAmp});
}

}  // namespace aim::autograd
