// attention: the argument checks every variant shares, cpu.ref and the registration.
// cpu.ref: per (b, h, query i) the whole row of scores in double, then its softmax, dropout and
// the weighted sum of v; the backward recomputes the row from lse and accumulates dq, dk, dv in
// double. Obviously right, slow: the oracle of every other variant and of the gradient check.
// cpu.flash (attention_flash_cpu.cpp) and the test cases (attention_cases.cpp) beside it.
#include "kernels/attention/attention_cpu.h"

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/registry.h"

namespace aim::kernels {
namespace {

void check_like(const char* who, const Tensor& t, const char* tn, const Shape& shape, DType dtype,
                Device dev) {
  AIM_CHECK(t.defined(), who, " needs ", tn);
  AIM_CHECK(t.sizes() == shape, who, " ", tn, " is ", to_string(t.sizes()), ", expected ",
            to_string(shape));
  AIM_CHECK(t.dtype() == dtype, who, " ", tn, " is ", dtype_name(t.dtype()), ", expected ",
            dtype_name(dtype));
  AIM_CHECK(t.device() == dev, who, " ", tn, " on ", t.device().str(), ", q on ", dev.str());
  AIM_CHECK(t.is_contiguous(), who, " ", tn, " ", to_string(t.sizes()), " must be contiguous");
}

// Shapes of q, k, v, the mask and the parameters: everything both directions share.
AttentionGeometry common_geometry(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& mask, float scale, bool causal, float dropout_p,
                                  uint64_t seed, uint64_t offset, const char* who) {
  AIM_CHECK(q.defined() && k.defined() && v.defined(), who, " needs q, k and v");
  AIM_CHECK(q.dim() == 4, who, " q must be [B, NH, Tq, HS], got ", to_string(q.sizes()));
  AIM_CHECK(k.dim() == 4, who, " k must be [B, NH, Tk, HS], got ", to_string(k.sizes()));
  AIM_CHECK(is_floating(q.dtype()), who, " q must be a float tensor, got ", dtype_name(q.dtype()));
  AttentionGeometry g;
  g.B = q.size(0);
  g.NH = q.size(1);
  g.Tq = q.size(2);
  g.HS = q.size(3);
  g.Tk = k.size(2);
  check_like(who, q, "q", q.sizes(), q.dtype(), q.device());
  check_like(who, k, "k", {g.B, g.NH, g.Tk, g.HS}, q.dtype(), q.device());
  check_like(who, v, "v", {g.B, g.NH, g.Tk, g.HS}, q.dtype(), q.device());
  AIM_CHECK(std::isfinite(scale), who, " scale must be finite, got ", scale);
  g.scale = scale != 0.0f ? double(scale) : (g.HS > 0 ? 1.0 / std::sqrt(double(g.HS)) : 1.0);
  g.causal = causal;
  AIM_CHECK(dropout_p >= 0.0f && dropout_p <= 1.0f, who, " dropout_p must be in [0, 1], got ",
            dropout_p);
  g.dropout_p = dropout_p;
  g.seed = seed;
  g.offset = offset;
  if (mask.defined()) {
    AIM_CHECK(mask.dtype() == DType::f32 || mask.dtype() == q.dtype(), who,
              " mask must be f32 or q's dtype (", dtype_name(q.dtype()), "), got ",
              dtype_name(mask.dtype()));
    AIM_CHECK(mask.device() == q.device(), who, " mask on ", mask.device().str(), ", q on ",
              q.device().str());
    const bool ok = mask.dim() == 4 && (mask.size(0) == 1 || mask.size(0) == g.B) &&
                    (mask.size(1) == 1 || mask.size(1) == g.NH) &&
                    (mask.size(2) == 1 || mask.size(2) == g.Tq) && mask.size(3) == g.Tk;
    AIM_CHECK(ok, who, " mask ", to_string(mask.sizes()), " must be [B or 1, NH or 1, Tq or 1, Tk]",
              " = [", g.B, " or 1, ", g.NH, " or 1, ", g.Tq, " or 1, ", g.Tk, "]");
    AIM_CHECK(mask.stride(3) == 1 || g.Tk == 1, who, " mask's last dim must be contiguous, got ",
              "strides ", to_string(mask.strides()));
    g.has_mask = true;
    g.mask_f32 = mask.dtype() == DType::f32;
    g.mask_sb = mask.size(0) == 1 ? 0 : mask.stride(0);
    g.mask_sh = mask.size(1) == 1 ? 0 : mask.stride(1);
    g.mask_sq = mask.size(2) == 1 ? 0 : mask.stride(2);
  }
  return g;
}

void check_lse(const char* who, const Tensor& lse, const AttentionGeometry& g, DType qt,
               Device dev) {
  AIM_CHECK(lse.defined(), who, " needs lse");
  const DType lt = lse.dtype() == DType::f64 && qt == DType::f64 ? DType::f64 : DType::f32;
  check_like(who, lse, "lse (f32, or f64 for f64 inputs)", {g.B, g.NH, g.Tq}, lt, dev);
}

}  // namespace

AttentionGeometry attention_geometry(const AttentionFwdArgs& a, const char* who) {
  AttentionGeometry g =
      common_geometry(a.q, a.k, a.v, a.mask, a.scale, a.causal, a.dropout_p, a.seed, a.offset, who);
  check_like(who, a.o, "o", a.q.sizes(), a.q.dtype(), a.q.device());
  check_lse(who, a.lse, g, a.q.dtype(), a.q.device());
  g.lse_f64 = a.lse.dtype() == DType::f64;
  return g;
}

AttentionGeometry attention_bwd_geometry(const AttentionBwdArgs& a, const char* who) {
  AttentionGeometry g =
      common_geometry(a.q, a.k, a.v, a.mask, a.scale, a.causal, a.dropout_p, a.seed, a.offset, who);
  check_like(who, a.dout, "dout", a.q.sizes(), a.q.dtype(), a.q.device());
  check_like(who, a.o, "o", a.q.sizes(), a.q.dtype(), a.q.device());
  check_lse(who, a.lse, g, a.q.dtype(), a.q.device());
  check_like(who, a.dq, "dq", a.q.sizes(), a.q.dtype(), a.q.device());
  check_like(who, a.dk, "dk", a.k.sizes(), a.q.dtype(), a.q.device());
  check_like(who, a.dv, "dv", a.k.sizes(), a.q.dtype(), a.q.device());
  g.lse_f64 = a.lse.dtype() == DType::f64;
  return g;
}

namespace {

// ---- cpu.ref ------------------------------------------------------------------------------------

void store(const Tensor& t, int64_t i, double v) {
  switch (t.dtype()) {
    case DType::f32:
      static_cast<float*>(t.raw_data())[i] = float(v);
      break;
    case DType::f64:
      static_cast<double*>(t.raw_data())[i] = v;
      break;
    case DType::f16:
      static_cast<Half*>(t.raw_data())[i] = Half(v);
      break;
    case DType::bf16:
      static_cast<BFloat16*>(t.raw_data())[i] = BFloat16(v);
      break;
    default:
      AIM_FAIL("[attention] internal: no float dtype ", dtype_name(t.dtype()));
  }
}

// The scores of row (b, h, i): s[j] = scale q_i.k_j + mask, -inf where causal hides j. Returns
// the row's maximum (-inf: every key masked).
// q, k: the tensors' values in double; mask: the mask expanded to [B, NH, Tq, Tk] (values in
// double), empty without a mask.
double score_row(const AttentionGeometry& g, const std::vector<double>& q,
                 const std::vector<double>& k, const std::vector<double>& mask, int64_t b,
                 int64_t h, int64_t i, std::vector<double>& s) {
  const double inf = std::numeric_limits<double>::infinity();
  const int64_t bh = b * g.NH + h;
  double mx = -inf;
  for (int64_t j = 0; j < g.Tk; ++j) {
    if (!g.visible(i, j)) {
      s[size_t(j)] = -inf;
      continue;
    }
    double dot = 0;
    for (int64_t d = 0; d < g.HS; ++d)
      dot += q[size_t((bh * g.Tq + i) * g.HS + d)] * k[size_t((bh * g.Tk + j) * g.HS + d)];
    double v = g.scale * dot;
    if (g.has_mask) v += mask[size_t((bh * g.Tq + i) * g.Tk + j)];
    s[size_t(j)] = v;
    mx = v > mx ? v : mx;
  }
  return mx;
}

// A tensor's values in double; the mask expanded to [B, NH, Tq, Tk] first.
std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }
std::vector<double> mask_values(const AttentionGeometry& g, const Tensor& mask) {
  if (!mask.defined()) return {};
  return mask.expand({g.B, g.NH, g.Tq, g.Tk}).to_vector<double>();
}

// The dropout factor of element (bh, i, j): 1 without dropout, else kept ? 1 / (1 - p) : 0.
double dropout_factor(const AttentionGeometry& g, int64_t bh, int64_t i, int64_t j) {
  if (!g.dropout()) return 1.0;
  return g.kept(bh, i, j) ? attention_dropout_scale<double>(g.dropout_p) : 0.0;
}

}  // namespace

namespace attention_cpu {

void fwd_ref(const AttentionFwdArgs& a) {
  const AttentionGeometry g = attention_geometry(a, "[attention_fwd] cpu.ref");
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> q = values(a.q), k = values(a.k), v = values(a.v);
  const std::vector<double> mask = mask_values(g, a.mask);
  std::vector<double> s(size_t(g.Tk)), acc(size_t(g.HS));
  for (int64_t b = 0; b < g.B; ++b)
    for (int64_t h = 0; h < g.NH; ++h)
      for (int64_t i = 0; i < g.Tq; ++i) {
        const int64_t bh = b * g.NH + h, row = bh * g.Tq + i;
        const double mx = score_row(g, q, k, mask, b, h, i, s);
        if (mx == -inf) {  // fully masked row: o = 0, lse = -inf
          for (int64_t d = 0; d < g.HS; ++d) store(a.o, row * g.HS + d, 0.0);
          store(a.lse, row, -inf);
          continue;
        }
        double sum = 0;
        for (int64_t j = 0; j < g.Tk; ++j) sum += std::exp(s[size_t(j)] - mx);
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = 0; j < g.Tk; ++j) {
          const double p = std::exp(s[size_t(j)] - mx) / sum * dropout_factor(g, bh, i, j);
          for (int64_t d = 0; d < g.HS; ++d)
            acc[size_t(d)] += p * v[size_t((bh * g.Tk + j) * g.HS + d)];
        }
        for (int64_t d = 0; d < g.HS; ++d) store(a.o, row * g.HS + d, acc[size_t(d)]);
        store(a.lse, row, mx + std::log(sum));
      }
}

void bwd_ref(const AttentionBwdArgs& a) {
  const AttentionGeometry g = attention_bwd_geometry(a, "[attention_bwd] cpu.ref");
  const double inf = std::numeric_limits<double>::infinity();
  const int64_t HS = g.HS;
  const std::vector<double> q = values(a.q), k = values(a.k), v = values(a.v);
  const std::vector<double> dout = values(a.dout), o = values(a.o), lses = values(a.lse);
  const std::vector<double> mask = mask_values(g, a.mask);
  std::vector<double> s(size_t(g.Tk));
  std::vector<double> dq(size_t(g.Tq * HS)), dk(size_t(g.Tk * HS)), dv(size_t(g.Tk * HS));
  for (int64_t b = 0; b < g.B; ++b)
    for (int64_t h = 0; h < g.NH; ++h) {
      const int64_t bh = b * g.NH + h;
      std::fill(dq.begin(), dq.end(), 0.0);
      std::fill(dk.begin(), dk.end(), 0.0);
      std::fill(dv.begin(), dv.end(), 0.0);
      const int64_t qb = bh * g.Tq * HS, kb = bh * g.Tk * HS;
      for (int64_t i = 0; i < g.Tq; ++i) {
        const double lse = lses[size_t(bh * g.Tq + i)];
        if (lse == -inf) continue;  // fully masked row: no gradient
        score_row(g, q, k, mask, b, h, i, s);
        double D = 0;  // rowsum(do * o)
        for (int64_t d = 0; d < HS; ++d)
          D += dout[size_t(qb + i * HS + d)] * o[size_t(qb + i * HS + d)];
        for (int64_t j = 0; j < g.Tk; ++j) {
          const double p = s[size_t(j)] == -inf ? 0.0 : std::exp(s[size_t(j)] - lse);
          const double z = dropout_factor(g, bh, i, j);
          double dpd = 0;  // d loss / d (dropped p)
          for (int64_t d = 0; d < HS; ++d)
            dpd += dout[size_t(qb + i * HS + d)] * v[size_t(kb + j * HS + d)];
          const double ds = p * (dpd * z - D);
          for (int64_t d = 0; d < HS; ++d) {
            dv[size_t(j * HS + d)] += p * z * dout[size_t(qb + i * HS + d)];
            dq[size_t(i * HS + d)] += g.scale * ds * k[size_t(kb + j * HS + d)];
            dk[size_t(j * HS + d)] += g.scale * ds * q[size_t(qb + i * HS + d)];
          }
        }
      }
      for (int64_t e = 0; e < g.Tq * HS; ++e) store(a.dq, qb + e, dq[size_t(e)]);
      for (int64_t e = 0; e < g.Tk * HS; ++e) {
        store(a.dk, kb + e, dk[size_t(e)]);
        store(a.dv, kb + e, dv[size_t(e)]);
      }
    }
}

}  // namespace attention_cpu

void attention_fwd(const AttentionFwdArgs& a) {
  AIM_DISPATCH_OP(AttentionFwdArgs, "attention_fwd", a);
}
void attention_bwd(const AttentionBwdArgs& a) {
  AIM_DISPATCH_OP(AttentionBwdArgs, "attention_bwd", a);
}

void register_attention_cpu(Registry& r) {
  const std::vector<DType> floats{DType::f32, DType::f64, DType::f16, DType::bf16};

  auto& f = r.op<AttentionFwdArgs>("attention_fwd");
  f.description = "fused scaled dot-product attention: additive/causal mask, dropout, lse";
  f.add({"cpu.ref", Backend::CPU, Provider::Own, attention_cpu::fwd_ref, floats});
  f.add({"cpu.flash", Backend::CPU, Provider::Own, attention_cpu::fwd_flash, floats});
  f.set_default(Backend::CPU, "cpu.flash");
  f.set_cost(attention_fwd_cost);
  f.make_case = attention_cpu::make_fwd_case;
  f.set_shape_fields(attention_cpu::shape_fields());
  f.add_test_shapes(attention_cpu::test_shapes());
  f.tolerance = attention_cpu::fwd_tolerance;
  f.small_enough_for_simt = attention_cpu::small_enough_for_simt;

  auto& b = r.op<AttentionBwdArgs>("attention_bwd");
  b.description = "gradient of fused attention (dq, dk, dv) from o and lse";
  b.add({"cpu.ref", Backend::CPU, Provider::Own, attention_cpu::bwd_ref, floats});
  b.add({"cpu.flash", Backend::CPU, Provider::Own, attention_cpu::bwd_flash, floats});
  b.set_default(Backend::CPU, "cpu.flash");
  b.set_cost(attention_bwd_cost);
  b.make_case = attention_cpu::make_bwd_case;
  b.set_shape_fields(attention_cpu::shape_fields());
  b.add_test_shapes(attention_cpu::test_shapes());
  b.tolerance = attention_cpu::bwd_tolerance;
  b.small_enough_for_simt = attention_cpu::small_enough_for_simt;
}

}  // namespace aim::kernels
