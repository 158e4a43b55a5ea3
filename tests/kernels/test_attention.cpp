// attention beyond the registry-driven comparison: the float64 gradient check of the backward
// against finite differences of the forward's cpu.ref (causal, masks, dropout, fully masked rows),
// the dropout numbering (the elements dropout_fwd drops), the scale's default, the fully masked
// row's convention, and argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/attention/attention.h"
#include "kernels/random/random.h"
#include "kernels/registry.h"
#include "kernels/testing.h"
#include "tests/support/common.h"

namespace aim::kernels {
namespace {

const double kInf = std::numeric_limits<double>::infinity();

std::vector<std::string> cpu_variants(const std::string& op) {
  std::vector<std::string> r;
  for (const VariantInfo& v : registry().find(op)->variant_infos())
    if (v.backend == Backend::CPU) r.push_back(v.name);
  return r;
}

struct Problem {
  int64_t B = 1, NH = 2, Tq = 3, Tk = 4, HS = 5;
  bool causal = false;
  float dropout_p = 0;
  float scale = 0;
  Tensor mask;  // f64 or undefined
};

// The forward in f64 with an f64 lse.
AttentionFwdArgs fwd_args(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v) {
  AttentionFwdArgs a;
  a.q = q;
  a.k = k;
  a.v = v;
  a.mask = p.mask;
  a.o = Tensor::zeros({p.B, p.NH, p.Tq, p.HS}, DType::f64);
  a.lse = Tensor::zeros({p.B, p.NH, p.Tq}, DType::f64);
  a.scale = p.scale;
  a.causal = p.causal;
  a.dropout_p = p.dropout_p;
  a.seed = 77;
  a.offset = 5;
  return a;
}

// loss = sum(o * w) through the forward's cpu.ref.
double loss(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& w) {
  const AttentionFwdArgs a = fwd_args(p, q, k, v);
  ScopedVariant sv("attention_fwd", "cpu.ref");
  attention_fwd(a);
  const std::vector<double> o = a.o.to_vector<double>(), wv = w.to_vector<double>();
  double s = 0;
  for (size_t e = 0; e < o.size(); ++e) s += o[e] * wv[e];
  return s;
}

// Every CPU variant's dq, dk, dv against central differences of the loss (f64, eps 1e-6).
void gradcheck(const Problem& p) {
  const Tensor q = random_tensor({p.B, p.NH, p.Tq, p.HS}, DType::f64, 11, -1.5, 1.5);
  const Tensor k = random_tensor({p.B, p.NH, p.Tk, p.HS}, DType::f64, 12, -1.5, 1.5);
  const Tensor v = random_tensor({p.B, p.NH, p.Tk, p.HS}, DType::f64, 13, -1, 1);
  const Tensor w = random_tensor({p.B, p.NH, p.Tq, p.HS}, DType::f64, 14, -1, 1);
  const AttentionFwdArgs f = fwd_args(p, q, k, v);
  {
    ScopedVariant sv("attention_fwd", "cpu.ref");
    attention_fwd(f);
  }
  // Finite differences, one element at a time.
  const double eps = 1e-6;
  std::vector<std::vector<double>> numeric;
  for (const Tensor* t : {&q, &k, &v}) {
    std::vector<double> g(size_t(t->numel()));
    double* x = t->data<double>();
    for (int64_t e = 0; e < t->numel(); ++e) {
      const double x0 = x[e];
      x[e] = x0 + eps;
      const double up = loss(p, q, k, v, w);
      x[e] = x0 - eps;
      const double down = loss(p, q, k, v, w);
      x[e] = x0;
      g[size_t(e)] = (up - down) / (2 * eps);
    }
    numeric.push_back(g);
  }
  for (const std::string& variant : cpu_variants("attention_bwd")) {
    SCOPED_TRACE(variant);
    AttentionBwdArgs a;
    a.dout = w;
    a.q = q;
    a.k = k;
    a.v = v;
    a.o = f.o;
    a.lse = f.lse;
    a.mask = p.mask;
    a.dq = poison_tensor(q.sizes(), DType::f64);
    a.dk = poison_tensor(k.sizes(), DType::f64);
    a.dv = poison_tensor(v.sizes(), DType::f64);
    a.scale = p.scale;
    a.causal = p.causal;
    a.dropout_p = p.dropout_p;
    a.seed = f.seed;
    a.offset = f.offset;
    ScopedVariant sv("attention_bwd", variant);
    attention_bwd(a);
    const char* names[] = {"dq", "dk", "dv"};
    const Tensor* got[] = {&a.dq, &a.dk, &a.dv};
    for (int t = 0; t < 3; ++t) {
      const std::vector<double> g = got[t]->to_vector<double>();
      for (size_t e = 0; e < g.size(); ++e)
        EXPECT_NEAR(g[e], numeric[size_t(t)][e], 1e-7 + 1e-6 * std::fabs(numeric[size_t(t)][e]))
            << names[t] << " element " << e;
    }
  }
}

TEST(AttentionGrad, FiniteDifferencesPlain) { gradcheck(Problem{}); }

TEST(AttentionGrad, FiniteDifferencesCausalTqBelowTkExplicitScale) {
  Problem p;
  p.Tq = 3;
  p.Tk = 5;
  p.causal = true;
  p.scale = 0.7f;
  gradcheck(p);
}

TEST(AttentionGrad, FiniteDifferencesCausalWithMaskAndFullyMaskedRows) {
  Problem p;
  p.B = 2;
  p.Tq = 5;
  p.Tk = 3;  // causal with Tq > Tk: queries 0 and 1 see no key
  p.causal = true;
  // [B, NH, Tq, Tk] additive: random, one -inf element, one -10000 element.
  p.mask = random_tensor({p.B, p.NH, p.Tq, p.Tk}, DType::f64, 21, -1, 1);
  double* m = p.mask.data<double>();
  m[2 * p.Tk + 1] = -kInf;
  m[4 * p.Tk + 0] = -10000.0;
  gradcheck(p);
}

TEST(AttentionGrad, FiniteDifferencesPaddingMaskAndDropout) {
  Problem p;
  p.B = 2;
  p.Tq = 4;
  p.Tk = 6;
  p.dropout_p = 0.3f;
  p.mask = Tensor::zeros({p.B, 1, 1, p.Tk}, DType::f64);
  double* m = p.mask.data<double>();
  m[4] = m[5] = -kInf;     // batch 0: keys 4, 5 padded
  m[p.Tk + 5] = -10000.0;  // batch 1: key 5 padded, BERT style
  gradcheck(p);
}

TEST(AttentionGrad, FiniteDifferencesCausalMaskDropout) {
  Problem p;
  p.Tq = 6;
  p.Tk = 6;
  p.HS = 3;
  p.causal = true;
  p.dropout_p = 0.25f;
  p.mask = random_tensor({1, p.NH, 1, p.Tk}, DType::f64, 22, -0.5, 0.5);
  gradcheck(p);
}

// The keep decision of element (b, h, i, j) is the one dropout_fwd takes for element
// ((b NH + h) Tq + i) Tk + j of a [B, NH, Tq, Tk] tensor with the same seed and offset: with
// q = 0 every p is 1 / Tk, and with v = the identity (HS = Tk) o[i][j] = p_ij z_ij.
TEST(Attention, DropoutNumberingIsDropoutFwds) {
  const int64_t B = 2, NH = 3, Tq = 5, Tk = 9;
  const float p = 0.4f;
  Tensor v = Tensor::zeros({B, NH, Tk, Tk});
  for (int64_t bh = 0; bh < B * NH; ++bh)
    for (int64_t j = 0; j < Tk; ++j) v.data<float>()[(bh * Tk + j) * Tk + j] = 1.0f;
  DropoutFwdArgs d;
  d.x = Tensor::ones({B, NH, Tq, Tk});
  d.y = Tensor::empty({B, NH, Tq, Tk});
  d.mask = Tensor::empty({B, NH, Tq, Tk}, DType::u8);
  d.p = p;
  d.seed = 1234567;
  d.offset = 11;
  dropout_fwd(d);
  const std::vector<double> keep = d.mask.to_vector<double>();
  for (const std::string& variant : cpu_variants("attention_fwd")) {
    SCOPED_TRACE(variant);
    AttentionFwdArgs a;
    a.q = Tensor::zeros({B, NH, Tq, Tk});
    a.k = random_tensor({B, NH, Tk, Tk}, DType::f32, 3);
    a.v = v;
    a.o = Tensor::empty({B, NH, Tq, Tk});
    a.lse = Tensor::empty({B, NH, Tq});
    a.dropout_p = p;
    a.seed = d.seed;
    a.offset = d.offset;
    ScopedVariant sv("attention_fwd", variant);
    attention_fwd(a);
    const std::vector<double> o = a.o.to_vector<double>();
    int64_t kept = 0;
    for (size_t e = 0; e < o.size(); ++e) {
      EXPECT_NEAR(o[e], keep[e] / (Tk * (1.0 - p)), 1e-6) << "element " << e;
      kept += keep[e] != 0;
    }
    EXPECT_GT(kept, 0);
    EXPECT_LT(kept, int64_t(o.size()));
    for (double l : a.lse.to_vector<double>()) EXPECT_NEAR(l, std::log(double(Tk)), 1e-5);
  }
}

// Every key masked (-inf padding of a whole batch element, or causal with Tq > Tk): o = 0,
// lse = -inf, and no gradient (dq = 0 for those rows; dk, dv get nothing from them).
TEST(Attention, FullyMaskedRows) {
  const int64_t B = 2, NH = 2, Tq = 6, Tk = 4, HS = 8;
  Tensor mask = Tensor::zeros({B, 1, 1, Tk});
  for (int64_t j = 0; j < Tk; ++j) mask.data<float>()[Tk + j] = -INFINITY;  // batch 1
  for (const std::string& variant : cpu_variants("attention_fwd")) {
    SCOPED_TRACE(variant);
    AttentionFwdArgs a;
    a.q = random_tensor({B, NH, Tq, HS}, DType::f32, 1);
    a.k = random_tensor({B, NH, Tk, HS}, DType::f32, 2);
    a.v = random_tensor({B, NH, Tk, HS}, DType::f32, 3);
    a.mask = mask;
    a.causal = true;  // queries 0, 1 see no key
    a.o = poison_tensor({B, NH, Tq, HS}, DType::f32);
    a.lse = poison_tensor({B, NH, Tq}, DType::f32);
    {
      ScopedVariant sv("attention_fwd", variant);
      attention_fwd(a);
    }
    const std::vector<float> o = a.o.to_vector<float>(), lse = a.lse.to_vector<float>();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < NH; ++h)
        for (int64_t i = 0; i < Tq; ++i) {
          const int64_t row = (b * NH + h) * Tq + i;
          const bool masked = b == 1 || i < Tq - Tk;
          if (masked) {
            EXPECT_EQ(lse[size_t(row)], -INFINITY) << "row " << row;
            for (int64_t d = 0; d < HS; ++d) EXPECT_EQ(o[size_t(row * HS + d)], 0.0f);
          } else {
            EXPECT_TRUE(std::isfinite(lse[size_t(row)])) << "row " << row;
          }
        }
    AttentionBwdArgs g;
    g.dout = random_tensor({B, NH, Tq, HS}, DType::f32, 4);
    g.q = a.q;
    g.k = a.k;
    g.v = a.v;
    g.o = a.o;
    g.lse = a.lse;
    g.mask = mask;
    g.causal = true;
    g.dq = poison_tensor(a.q.sizes(), DType::f32);
    g.dk = poison_tensor(a.k.sizes(), DType::f32);
    g.dv = poison_tensor(a.v.sizes(), DType::f32);
    {
      ScopedVariant sv("attention_bwd", variant);
      attention_bwd(g);
    }
    const std::vector<float> dq = g.dq.to_vector<float>(), dk = g.dk.to_vector<float>(),
                             dv = g.dv.to_vector<float>();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < NH; ++h) {
        for (int64_t i = 0; i < Tq; ++i) {
          if (!(b == 1 || i < Tq - Tk)) continue;
          for (int64_t d = 0; d < HS; ++d)
            EXPECT_EQ(dq[size_t(((b * NH + h) * Tq + i) * HS + d)], 0.0f);
        }
        if (b == 1)
          for (int64_t e = 0; e < Tk * HS; ++e) {
            EXPECT_EQ(dk[size_t((b * NH + h) * Tk * HS + e)], 0.0f);
            EXPECT_EQ(dv[size_t((b * NH + h) * Tk * HS + e)], 0.0f);
          }
      }
  }
}

// scale = 0 means 1 / sqrt(HS); an explicit scale is used as given.
TEST(Attention, ScaleDefault) {
  const int64_t HS = 16;
  for (const std::string& variant : cpu_variants("attention_fwd")) {
    SCOPED_TRACE(variant);
    ScopedVariant sv("attention_fwd", variant);
    AttentionFwdArgs a;
    a.q = random_tensor({1, 1, 7, HS}, DType::f32, 1, -3, 3);
    a.k = random_tensor({1, 1, 9, HS}, DType::f32, 2, -3, 3);
    a.v = random_tensor({1, 1, 9, HS}, DType::f32, 3);
    a.o = Tensor::empty({1, 1, 7, HS});
    a.lse = Tensor::empty({1, 1, 7});
    AttentionFwdArgs b = a;
    b.o = Tensor::empty({1, 1, 7, HS});
    b.lse = Tensor::empty({1, 1, 7});
    b.scale = 0.25f;
    attention_fwd(a);
    attention_fwd(b);
    const std::vector<float> ao = a.o.to_vector<float>(), bo = b.o.to_vector<float>();
    for (size_t e = 0; e < ao.size(); ++e) EXPECT_NEAR(ao[e], bo[e], 1e-6);
    b.scale = 0.5f;
    attention_fwd(b);
    double diff = 0;
    for (size_t e = 0; e < ao.size(); ++e)
      diff = std::max(diff, double(std::fabs(ao[e] - b.o.to_vector<float>()[e])));
    EXPECT_GT(diff, 1e-3);
  }
}

TEST(Attention, BadArguments) {
  AttentionFwdArgs a;
  a.q = Tensor::zeros({2, 3, 4, 8});
  a.k = Tensor::zeros({2, 3, 5, 8});
  a.v = Tensor::zeros({2, 3, 5, 8});
  a.o = Tensor::zeros({2, 3, 4, 8});
  a.lse = Tensor::zeros({2, 3, 4});
  attention_fwd(a);  // fine
  AttentionFwdArgs m = a;
  m.mask = Tensor::zeros({2, 1, 4, 4});
  AIM_EXPECT_ERROR(attention_fwd(m), "mask [2, 1, 4, 4] must be [B or 1, NH or 1, Tq or 1, Tk]");
  m.mask = Tensor::zeros({2, 1, 1, 5}, DType::i32);
  AIM_EXPECT_ERROR(attention_fwd(m), "mask must be f32 or q's dtype");
  AttentionFwdArgs l = a;
  l.lse = Tensor::zeros({2, 3, 4}, DType::f64);
  AIM_EXPECT_ERROR(attention_fwd(l), "lse (f32, or f64 for f64 inputs) is f64, expected f32");
  AttentionFwdArgs v = a;
  v.v = Tensor::zeros({2, 3, 4, 8});
  AIM_EXPECT_ERROR(attention_fwd(v), "[attention_fwd] cpu.flash v is [2, 3, 4, 8], expected");
  AttentionFwdArgs d = a;
  d.dropout_p = 1.5f;
  AIM_EXPECT_ERROR(attention_fwd(d), "dropout_p must be in [0, 1], got 1.5");
}

}  // namespace
}  // namespace aim::kernels
