// Elementwise functions. Unary backward runs the unary_bwd kernel; binary backward composes
// binary/where kernels on dy and the saved inputs, then sums broadcast dims away (sum_to).
// Each node saves only what the gradients of the inputs that require grad read.
#include "autograd/functions/elementwise.h"

#include "autograd/amp.h"
#include "autograd/node.h"
#include "autograd/tensor_ops.h"
#include "kernels/elementwise/binary.h"
#include "kernels/elementwise/unary.h"

namespace aim::autograd {
namespace {

using kernels::BinaryKind;
using kernels::UnaryKind;

// True when gradients will flow into v (it requires grad or comes out of a recorded node).
bool tracks(const Variable& v) { return v.defined() && (v.requires_grad() || v.grad_fn()); }

bool low_precision(DType t) { return t == DType::f16 || t == DType::bf16; }

Tensor scalar_like(const Tensor& t, double v) { return Tensor::full({}, v, t.dtype(), t.device()); }

Tensor bin(const Tensor& a, const Tensor& b, BinaryKind k, float alpha = 1) {
  kernels::BinaryArgs args;
  args.a = a;
  args.b = b;
  args.y = Tensor::empty(broadcast_shapes(a.sizes(), b.sizes()),
                         kernels::is_comparison(k) ? DType::boolean : a.dtype(), a.device());
  args.kind = k;
  args.alpha = alpha;
  kernels::binary(args);
  return args.y;
}

Tensor un(const Tensor& x, UnaryKind k, float alpha = 0, float beta = 0) {
  kernels::UnaryArgs args;
  args.x = x;
  args.y = Tensor::empty(x.sizes(), x.dtype(), x.device());
  args.kind = k;
  args.alpha = alpha;
  args.beta = beta;
  kernels::unary(args);
  return args.y;
}

// cond ? a : b into `out` (allocated with the broadcast shape when undefined).
Tensor sel(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor out = Tensor()) {
  kernels::WhereArgs args;
  args.cond = cond;
  args.a = a;
  args.b = b;
  args.y =
      out.defined()
          ? out
          : Tensor::empty(broadcast_shapes(cond.sizes(), broadcast_shapes(a.sizes(), b.sizes())),
                          a.dtype(), a.device());
  kernels::where(args);
  return args.y;
}

// t * s. 16-bit tensors take s through the kernel's f32 alpha (0 + s * t) rather than rounding
// it to their own dtype.
Tensor scaled(const Tensor& t, double s) {
  if (low_precision(t.dtype())) return bin(scalar_like(t, 0), t, BinaryKind::add, float(s));
  return bin(t, scalar_like(t, s), BinaryKind::mul);
}

Tensor negated(const Tensor& t) { return un(t, UnaryKind::neg); }

// x ** e. A 16-bit x whose dtype cannot hold e exactly is raised in f32.
Tensor pow_scalar(const Tensor& x, double e) {
  if (low_precision(x.dtype()) && Tensor::full({}, e, x.dtype()).item() != e)
    return pow_scalar(x.to(DType::f32), e).to(x.dtype());
  return bin(x, scalar_like(x, e), BinaryKind::pow);
}

void check_pair(const char* op, const Variable& a, const Variable& b) {
  AIM_CHECK(a.defined() && b.defined(), op, ": both inputs must be defined");
  AIM_CHECK(a.dtype() == b.dtype(), op, ": a is ", dtype_name(a.dtype()), ", b is ",
            dtype_name(b.dtype()), ": the same dtype expected");
  AIM_CHECK(a.device() == b.device(), op, ": a on ", a.device().str(), ", b on ", b.device().str(),
            ": the same device expected");
}

// ---- unary ----------------------------------------------------------------------------------

struct UnaryNode final : Node {
  const char* label = "Unary";
  UnaryKind kind = UnaryKind::neg;
  float alpha = 0, beta = 0;
  Tensor x, y;  // saved where unary_bwd reads them (unary_bwd_reads_x / _y)
  const char* name() const override { return label; }
  // unary_bwd takes strided inputs (kernels/elementwise/README.md): the relu closing each branch
  // of a concatenation (SqueezeNet's fire modules, GoogLeNet's inceptions) reads its slice of the
  // concatenation's gradient in place, without a copy.
  bool takes_strided_dy() const override { return true; }
  void backward(Grads& g) override {
    if (!g.needs(0)) return;
    kernels::UnaryBwdArgs a;
    a.dy = g.dy();
    a.x = x;
    a.y = y;
    a.dx = g.out(0);
    a.kind = kind;
    a.alpha = alpha;
    a.beta = beta;
    kernels::unary_bwd(a);
  }
  void release() override {
    x = Tensor();
    y = Tensor();
  }
};

Variable unary_fn(const Variable& x, UnaryKind k, const char* label, float alpha = 0,
                  float beta = 0) {
  const Tensor y = un(x.data(), k, alpha, beta);
  if (!needs_grad({&x})) return Variable(y);
  auto n = std::make_shared<UnaryNode>();
  n->label = label;
  n->kind = k;
  n->alpha = alpha;
  n->beta = beta;
  if (kernels::unary_bwd_reads_x(k)) n->x = x.data();
  if (kernels::unary_bwd_reads_y(k)) n->y = y;
  return attach1(n, {x}, y);
}

// ---- binary ---------------------------------------------------------------------------------

// a + b, a - b: dy summed to each input's shape (negated for b of sub).
struct AddNode final : Node {
  bool subtract = false;
  const char* name() const override { return subtract ? "Sub" : "Add"; }
  void backward(Grads& g) override {
    const Tensor& dy = g.dy();
    if (g.needs(0)) g.set(0, sum_to(dy, input_sizes[0]));
    if (g.needs(1)) {
      const Tensor db = sum_to(dy, input_sizes[1]);
      g.set(1, subtract ? negated(db) : db);
    }
  }
};

// da = dy * b, db = dy * a.
struct MulNode final : Node {
  Tensor a, b;  // a saved when b needs grad, b when a does
  const char* name() const override { return "Mul"; }
  void backward(Grads& g) override {
    const Tensor& dy = g.dy();
    if (g.needs(0)) g.set(0, sum_to(mul(dy, b), input_sizes[0]));
    if (g.needs(1)) g.set(1, sum_to(mul(dy, a), input_sizes[1]));
  }
  void release() override {
    a = Tensor();
    b = Tensor();
  }
};

// q = dy / b; da = q, db = -q * y (= -dy * a / b^2).
struct DivNode final : Node {
  Tensor b, y;  // y saved when b needs grad
  const char* name() const override { return "Div"; }
  void backward(Grads& g) override {
    const Tensor q = bin(g.dy(), b, BinaryKind::div);
    if (g.needs(0)) g.set(0, sum_to(q, input_sizes[0]));
    if (g.needs(1)) g.set(1, negated(sum_to(mul(q, y), input_sizes[1])));
  }
  void release() override {
    b = Tensor();
    y = Tensor();
  }
};

// da = dy * b * a^(b-1) (0 where b == 0); db = dy * y * log(a) (0 where a == 0 and b >= 0).
struct PowNode final : Node {
  Tensor a, b, y;
  const char* name() const override { return "Pow"; }
  void backward(Grads& g) override {
    const Tensor& dy = g.dy();
    const Tensor zero = scalar_like(dy, 0);
    if (g.needs(0)) {
      const Tensor p = bin(a, bin(b, scalar_like(b, 1), BinaryKind::sub), BinaryKind::pow);
      const Tensor t = mul(mul(p, b), dy);
      g.set(0, sum_to(sel(bin(b, zero, BinaryKind::eq), zero, t), input_sizes[0]));
    }
    if (g.needs(1)) {
      const Tensor t = mul(mul(y, un(a, UnaryKind::log)), dy);
      const Tensor no = Tensor::full({}, 0, DType::boolean, dy.device());
      const Tensor mask = sel(bin(a, zero, BinaryKind::eq), bin(b, zero, BinaryKind::ge), no);
      g.set(1, sum_to(sel(mask, zero, t), input_sizes[1]));
    }
  }
  void release() override {
    a = Tensor();
    b = Tensor();
    y = Tensor();
  }
};

// torch.maximum: da = a == b ? dy / 2 : (a < b ? 0 : dy); db likewise with a > b (minimum:
// the comparisons swap). A NaN input passes dy to both, as in PyTorch.
struct MaxMinNode final : Node {
  bool is_max = true;
  Tensor a, b;
  const char* name() const override { return is_max ? "Maximum" : "Minimum"; }
  void backward(Grads& g) override {
    const Tensor& dy = g.dy();
    const Tensor zero = scalar_like(dy, 0);
    const Tensor tie = bin(a, b, BinaryKind::eq);
    const Tensor half = scaled(dy, 0.5);
    if (g.needs(0)) {
      const Tensor loses = bin(a, b, is_max ? BinaryKind::lt : BinaryKind::gt);
      g.set(0, sum_to(sel(tie, half, sel(loses, zero, dy)), input_sizes[0]));
    }
    if (g.needs(1)) {
      const Tensor loses = bin(a, b, is_max ? BinaryKind::gt : BinaryKind::lt);
      g.set(1, sum_to(sel(tie, half, sel(loses, zero, dy)), input_sizes[1]));
    }
  }
  void release() override {
    a = Tensor();
    b = Tensor();
  }
};

// ---- scalar -----------------------------------------------------------------------------------

struct AddScalarNode final : Node {
  const char* name() const override { return "AddScalar"; }
  void backward(Grads& g) override {
    if (g.needs(0)) g.set(0, g.dy());
  }
};

struct MulScalarNode final : Node {
  double s = 1;
  const char* name() const override { return "MulScalar"; }
  void backward(Grads& g) override {
    if (g.needs(0)) g.set(0, scaled(g.dy(), s));
  }
};

// dx = dy * e * x^(e-1); e == 0: zero.
struct PowScalarNode final : Node {
  double e = 1;
  Tensor x;
  const char* name() const override { return "PowScalar"; }
  void backward(Grads& g) override {
    if (!g.needs(0)) return;
    if (e == 0) {
      g.out(0).zero_();
      return;
    }
    g.set(0, scaled(mul(pow_scalar(x, e - 1), g.dy()), e));
  }
  void release() override { x = Tensor(); }
};

// ---- prelu, where ---------------------------------------------------------------------------

// dx = x > 0 ? dy : w * dy; dw += sum over all but the channel dim of (x > 0 ? 0 : dy * x).
struct PreluNode final : Node {
  Tensor x, w;  // w: the weight viewed to broadcast against x
  const char* name() const override { return "Prelu"; }
  void backward(Grads& g) override {
    const Tensor& dy = g.dy();
    const Tensor zero = scalar_like(dy, 0);
    const Tensor pos = bin(x, zero, BinaryKind::gt);
    if (g.needs(0)) sel(pos, dy, mul(dy, w), g.out(0));
    if (g.needs(1)) {
      const Tensor dw = sum_to(sel(pos, zero, mul(dy, x)), w.sizes());
      add_into(g.accum(1), dw.reshape(input_sizes[1]));
    }
  }
  void release() override {
    x = Tensor();
    w = Tensor();
  }
};

struct WhereNode final : Node {
  Tensor cond;
  const char* name() const override { return "Where"; }
  void backward(Grads& g) override {
    const Tensor& dy = g.dy();
    const Tensor zero = scalar_like(dy, 0);
    if (g.needs(0)) g.set(0, sum_to(sel(cond, dy, zero), input_sizes[0]));
    if (g.needs(1)) g.set(1, sum_to(sel(cond, zero, dy), input_sizes[1]));
  }
  void release() override { cond = Tensor(); }
};

Tensor compare(const char* op, const Variable& a, const Variable& b, BinaryKind k) {
  check_pair(op, a, b);
  return bin(a.data(), b.data(), k);
}

}  // namespace

// ---- binary ---------------------------------------------------------------------------------

namespace {
Variable add_sub(const Variable& a, const Variable& b, bool subtract) {
  check_pair(subtract ? "sub" : "add", a, b);
  const Tensor y = bin(a.data(), b.data(), subtract ? BinaryKind::sub : BinaryKind::add);
  if (!needs_grad({&a, &b})) return Variable(y);
  auto n = std::make_shared<AddNode>();
  n->subtract = subtract;
  return attach1(n, {a, b}, y);
}

Variable max_min(const Variable& a, const Variable& b, bool is_max) {
  check_pair(is_max ? "maximum" : "minimum", a, b);
  const Tensor y = bin(a.data(), b.data(), is_max ? BinaryKind::maximum : BinaryKind::minimum);
  if (!needs_grad({&a, &b})) return Variable(y);
  auto n = std::make_shared<MaxMinNode>();
  n->is_max = is_max;
  n->a = a.data();
  n->b = b.data();
  return attach1(n, {a, b}, y);
}
}  // namespace

// The reason several of this file's declarations share.
constexpr char kWhyRange[] = "range: exp overflows fp16 above 11.1";

constexpr amp::Declaration kAddAmp{"add", amp::OpClass::promote, amp::kWhyPromote};
Variable add(const Variable& a, const Variable& b) {
  if (auto c = amp::autocast(kAddAmp, {&a, &b})) return add((*c)[0], (*c)[1]);
  return add_sub(a, b, false);
}
constexpr amp::Declaration kSubAmp{"sub", amp::OpClass::promote, amp::kWhyPromote};
Variable sub(const Variable& a, const Variable& b) {
  if (auto c = amp::autocast(kSubAmp, {&a, &b})) return sub((*c)[0], (*c)[1]);
  return add_sub(a, b, true);
}

constexpr amp::Declaration kMulAmp{"mul", amp::OpClass::promote, amp::kWhyPromote};
Variable mul(const Variable& a, const Variable& b) {
  if (auto c = amp::autocast(kMulAmp, {&a, &b})) return mul((*c)[0], (*c)[1]);
  check_pair("mul", a, b);
  const Tensor y = bin(a.data(), b.data(), BinaryKind::mul);
  if (!needs_grad({&a, &b})) return Variable(y);
  auto n = std::make_shared<MulNode>();
  if (tracks(b)) n->a = a.data();
  if (tracks(a)) n->b = b.data();
  return attach1(n, {a, b}, y);
}

constexpr amp::Declaration kDivAmp{"div", amp::OpClass::promote, amp::kWhyPromote};
Variable div(const Variable& a, const Variable& b) {
  if (auto c = amp::autocast(kDivAmp, {&a, &b})) return div((*c)[0], (*c)[1]);
  check_pair("div", a, b);
  const Tensor y = bin(a.data(), b.data(), BinaryKind::div);
  if (!needs_grad({&a, &b})) return Variable(y);
  auto n = std::make_shared<DivNode>();
  n->b = b.data();
  if (tracks(b)) n->y = y;
  return attach1(n, {a, b}, y);
}

// Both overloads of pow.
constexpr amp::Declaration kPowAmp{"pow", amp::OpClass::fp32, kWhyRange};
Variable pow(const Variable& a, const Variable& b) {
  if (auto c = amp::autocast(kPowAmp, {&a, &b})) return pow((*c)[0], (*c)[1]);
  check_pair("pow", a, b);
  const Tensor y = bin(a.data(), b.data(), BinaryKind::pow);
  if (!needs_grad({&a, &b})) return Variable(y);
  auto n = std::make_shared<PowNode>();
  n->a = a.data();
  n->b = b.data();
  if (tracks(b)) n->y = y;
  return attach1(n, {a, b}, y);
}

constexpr amp::Declaration kMaximumAmp{"maximum", amp::OpClass::promote, amp::kWhyPromote};
Variable maximum(const Variable& a, const Variable& b) {
  if (auto c = amp::autocast(kMaximumAmp, {&a, &b})) return maximum((*c)[0], (*c)[1]);
  return max_min(a, b, true);
}
constexpr amp::Declaration kMinimumAmp{"minimum", amp::OpClass::promote, amp::kWhyPromote};
Variable minimum(const Variable& a, const Variable& b) {
  if (auto c = amp::autocast(kMinimumAmp, {&a, &b})) return minimum((*c)[0], (*c)[1]);
  return max_min(a, b, false);
}

// ---- scalar ---------------------------------------------------------------------------------

Variable add(const Variable& a, double s) {
  const Tensor& x = a.data();
  const Tensor y = low_precision(x.dtype()) ? bin(x, scalar_like(x, 1), BinaryKind::add, float(s))
                                            : bin(x, scalar_like(x, s), BinaryKind::add);
  if (!needs_grad({&a})) return Variable(y);
  return attach1(std::make_shared<AddScalarNode>(), {a}, y);
}

Variable mul(const Variable& a, double s) {
  const Tensor y = scaled(a.data(), s);
  if (!needs_grad({&a})) return Variable(y);
  auto n = std::make_shared<MulScalarNode>();
  n->s = s;
  return attach1(n, {a}, y);
}

Variable pow(const Variable& a, double e) {
  if (auto c = amp::autocast(kPowAmp, {&a})) return pow((*c)[0], e);
  // Exact special forms (as PyTorch): their own kernels and gradients.
  if (e == 2) return unary_fn(a, UnaryKind::square, "PowScalar");
  if (e == 0.5) return unary_fn(a, UnaryKind::sqrt, "PowScalar");
  if (e == -1) return unary_fn(a, UnaryKind::reciprocal, "PowScalar");
  const Tensor y = pow_scalar(a.data(), e);
  if (!needs_grad({&a})) return Variable(y);
  auto n = std::make_shared<PowScalarNode>();
  n->e = e;
  if (e != 0) n->x = a.data();
  return attach1(n, {a}, y);
}

// ---- unary ----------------------------------------------------------------------------------

Variable neg(const Variable& x) { return unary_fn(x, UnaryKind::neg, "Neg"); }
constexpr amp::Declaration kExpAmp{"exp", amp::OpClass::fp32, kWhyRange};
Variable exp(const Variable& x) {
  if (auto c = amp::autocast(kExpAmp, {&x})) return exp((*c)[0]);
  return unary_fn(x, UnaryKind::exp, "Exp");
}
constexpr amp::Declaration kLogAmp{"log", amp::OpClass::fp32, kWhyRange};
Variable log(const Variable& x) {
  if (auto c = amp::autocast(kLogAmp, {&x})) return log((*c)[0]);
  return unary_fn(x, UnaryKind::log, "Log");
}
constexpr amp::Declaration kSqrtAmp{"sqrt", amp::OpClass::fp32, kWhyRange};
Variable sqrt(const Variable& x) {
  if (auto c = amp::autocast(kSqrtAmp, {&x})) return sqrt((*c)[0]);
  return unary_fn(x, UnaryKind::sqrt, "Sqrt");
}
constexpr amp::Declaration kRsqrtAmp{"rsqrt", amp::OpClass::fp32, kWhyRange};
Variable rsqrt(const Variable& x) {
  if (auto c = amp::autocast(kRsqrtAmp, {&x})) return rsqrt((*c)[0]);
  return unary_fn(x, UnaryKind::rsqrt, "Rsqrt");
}
Variable abs(const Variable& x) { return unary_fn(x, UnaryKind::abs, "Abs"); }
constexpr amp::Declaration kReluAmp{"relu", amp::OpClass::native, amp::kWhyDataMovement};
Variable relu(const Variable& x) { return unary_fn(x, UnaryKind::relu, "Relu"); }
Variable relu_recorded(const Variable& x, const Tensor& y) {
  AIM_CHECK(y.sizes() == x.sizes() && y.dtype() == x.dtype(), "relu_recorded: output ",
            to_string(y.sizes()), " ", dtype_name(y.dtype()), " for input ", to_string(x.sizes()),
            " ", dtype_name(x.dtype()));
  if (!needs_grad({&x})) return Variable(y);
  auto n = std::make_shared<UnaryNode>();
  n->label = "Relu";
  n->kind = UnaryKind::relu;
  n->y = y;
  return attach1(n, {x}, y);
}
constexpr amp::Declaration kGeluAmp{"gelu", amp::OpClass::native, amp::kWhyDataMovement};
Variable gelu(const Variable& x, bool tanh_approximation) {
  return unary_fn(x, tanh_approximation ? UnaryKind::gelu_tanh : UnaryKind::gelu_erf, "Gelu");
}
constexpr amp::Declaration kSigmoidAmp{"sigmoid", amp::OpClass::native, amp::kWhyDataMovement};
Variable sigmoid(const Variable& x) { return unary_fn(x, UnaryKind::sigmoid, "Sigmoid"); }
constexpr amp::Declaration kTanhAmp{"tanh", amp::OpClass::native, amp::kWhyDataMovement};
Variable tanh(const Variable& x) { return unary_fn(x, UnaryKind::tanh, "Tanh"); }
Variable square(const Variable& x) { return unary_fn(x, UnaryKind::square, "Square"); }
Variable leaky_relu(const Variable& x, double slope) {
  return unary_fn(x, UnaryKind::leaky_relu, "LeakyRelu", float(slope));
}
Variable clamp(const Variable& x, double lo, double hi) {
  return unary_fn(x, UnaryKind::clamp, "Clamp", float(lo), float(hi));
}

// ---- prelu, where ---------------------------------------------------------------------------

constexpr amp::Declaration kPreluAmp{"prelu", amp::OpClass::promote, amp::kWhyPromote};
Variable prelu(const Variable& x, const Variable& weight) {
  if (auto c = amp::autocast(kPreluAmp, {&x, &weight})) return prelu((*c)[0], (*c)[1]);
  check_pair("prelu", x, weight);
  const int64_t c = weight.numel();
  Shape wshape(size_t(x.dim()), 1);
  if (c != 1) {
    AIM_CHECK(weight.dim() == 1 && x.dim() >= 1, "prelu: weight must be [C] or one element, got ",
              to_string(weight.sizes()), " for x ", to_string(x.sizes()));
    const int64_t cdim = x.dim() >= 2 ? 1 : 0;
    AIM_CHECK(x.size(cdim) == c, "prelu: weight has ", c, " channels, x ", to_string(x.sizes()),
              " has ", x.size(cdim), " along dim ", cdim);
    wshape[size_t(cdim)] = c;
  }
  const Tensor w = weight.data().reshape(wshape);
  const Tensor y = bin(x.data(), w, BinaryKind::prelu);
  if (!needs_grad({&x, &weight})) return Variable(y);
  auto n = std::make_shared<PreluNode>();
  n->x = x.data();
  n->w = w;
  return attach1(n, {x, weight}, y);
}

constexpr amp::Declaration kWhereAmp{"where", amp::OpClass::promote, amp::kWhyPromote};
Variable where(const Tensor& cond, const Variable& a, const Variable& b) {
  if (auto c = amp::autocast(kWhereAmp, {&a, &b})) return where(cond, (*c)[0], (*c)[1]);
  check_pair("where", a, b);
  const Tensor y = sel(cond, a.data(), b.data());
  if (!needs_grad({&a, &b})) return Variable(y);
  auto n = std::make_shared<WhereNode>();
  n->cond = cond;
  return attach1(n, {a, b}, y);
}

// ---- comparisons ----------------------------------------------------------------------------

Tensor eq(const Variable& a, const Variable& b) { return compare("eq", a, b, BinaryKind::eq); }
Tensor ne(const Variable& a, const Variable& b) { return compare("ne", a, b, BinaryKind::ne); }
Tensor lt(const Variable& a, const Variable& b) { return compare("lt", a, b, BinaryKind::lt); }
Tensor le(const Variable& a, const Variable& b) { return compare("le", a, b, BinaryKind::le); }
Tensor gt(const Variable& a, const Variable& b) { return compare("gt", a, b, BinaryKind::gt); }
Tensor ge(const Variable& a, const Variable& b) { return compare("ge", a, b, BinaryKind::ge); }

void amp::declarations_elementwise(std::vector<amp::Declaration>& out) {
  out.insert(out.end(), {kExpAmp, kLogAmp, kPowAmp, kSqrtAmp, kRsqrtAmp, kAddAmp, kSubAmp, kMulAmp,
                         kDivAmp, kMaximumAmp, kMinimumAmp, kWhereAmp, kPreluAmp, kReluAmp,
                         kSigmoidAmp, kTanhAmp, kGeluAmp});
}

}  // namespace aim::autograd
