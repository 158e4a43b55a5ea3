// cpu.ref: for every output element, gather the reduced values (N-d strided offsets, any x
// layout) into a double vector and reduce it with the textbook formula (two passes for var/std).
// cpu.omp: x as a contiguous [outer, R, inner] block (reduce_view). Work is cut into tasks
// (o, chunk of R, chunk of inner), run by OpenMP; each task leaves a partial per output column
// and the partials are combined in chunk order; the cut does not depend on the
// team size, so the result is the same at any thread count. Rows (inner == 1): 16 independent
// lanes per task, vectorised with `omp simd`. Columns (inner > 1, e.g. bias gradients [B, C] ->
// [C]): the inner dim is the vector dim. f32 accumulates in f32 (many short partial sums), f64 in
// f64; f16/bf16 inputs are converted to f32 once (bulk F16C/BF16 conversion) and rounded at the
// output. var/std: two passes (mean, then squared deviations).
// Test cases: reduce_cases.cpp.
#include "kernels/reduce/reduce_cpu.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/reduce/reduce.h"
#include "kernels/registry.h"
#include "kernels/strided.h"

namespace aim::kernels {

const char* reduce_kind_name(ReduceKind k) {
  switch (k) {
    case ReduceKind::sum:
      return "sum";
    case ReduceKind::mean:
      return "mean";
    case ReduceKind::max:
      return "max";
    case ReduceKind::min:
      return "min";
    case ReduceKind::prod:
      return "prod";
    case ReduceKind::var:
      return "var";
    case ReduceKind::std:
      return "std";
    case ReduceKind::norm:
      return "norm";
  }
  return "?";
}

std::vector<int64_t> normalize_reduce_dims(const Shape& s, const std::vector<int64_t>& dims) {
  const int64_t rank = int64_t(s.size());
  std::vector<int64_t> r;
  if (dims.empty()) {
    for (int64_t d = 0; d < rank; ++d) r.push_back(d);
    return r;
  }
  std::vector<bool> seen(size_t(rank), false);
  for (int64_t d : dims) {
    AIM_CHECK(d >= -rank && d < rank, "[reduce] dim ", d, " out of range for a tensor of shape ",
              to_string(s));
    const int64_t w = d < 0 ? d + rank : d;
    AIM_CHECK(!seen[size_t(w)], "[reduce] dim ", d, " repeated in the reduced dims of ",
              to_string(s));
    seen[size_t(w)] = true;
    r.push_back(w);
  }
  std::sort(r.begin(), r.end());
  return r;
}

Shape reduced_shape(const Shape& s, const std::vector<int64_t>& dims) {
  Shape r = s;
  for (int64_t d : normalize_reduce_dims(s, dims)) r[size_t(d)] = 1;
  return r;
}

ReduceView reduce_view(const Tensor& x, const std::vector<int64_t>& dims) {
  const Shape& s = x.sizes();
  const std::vector<int64_t> rd = normalize_reduce_dims(s, dims);
  std::vector<bool> is_red(s.size(), false);
  for (int64_t d : rd) is_red[size_t(d)] = true;
  // Blocks of neighbouring dims of the same kind, size-1 dims dropped.
  int reduced_blocks = 0, prev = -1;  // prev: kind of the previous kept-in-the-walk dim
  for (size_t d = 0; d < s.size(); ++d) {
    if (s[d] == 1) continue;
    const int kind = is_red[d] ? 1 : 0;
    if (kind == 1 && prev != 1) ++reduced_blocks;
    prev = kind;
  }
  ReduceView v;
  if (reduced_blocks <= 1) {
    // outer = kept dims before the reduced block, R = the block, inner = kept dims after it.
    bool after = false;
    for (size_t d = 0; d < s.size(); ++d) {
      if (s[d] == 1) continue;
      if (is_red[d]) {
        v.R *= s[d];
        after = true;
      } else if (after) {
        v.inner *= s[d];
      } else {
        v.outer *= s[d];
      }
    }
    v.copied = !x.is_contiguous();
    v.x = v.copied ? x.contiguous() : x;
    return v;
  }
  std::vector<int64_t> perm;
  for (size_t d = 0; d < s.size(); ++d)
    if (!is_red[d]) {
      perm.push_back(int64_t(d));
      v.outer *= s[d];
    }
  for (size_t d = 0; d < s.size(); ++d)
    if (is_red[d]) {
      perm.push_back(int64_t(d));
      v.R *= s[d];
    }
  v.x = x.permute(perm).contiguous();
  v.copied = true;
  return v;
}

void check_reduce_args(const ReduceArgs& a, const char* who) {
  AIM_CHECK(a.x.defined() && a.y.defined(), who, " needs x and y");
  AIM_CHECK(is_floating(a.x.dtype()), who, " x must be a float tensor, got ",
            dtype_name(a.x.dtype()));
  AIM_CHECK(a.y.dtype() == a.x.dtype(), who, " y must have x's dtype ", dtype_name(a.x.dtype()),
            ", got ", dtype_name(a.y.dtype()));
  AIM_CHECK(a.y.device() == a.x.device(), who, " x on ", a.x.device().str(), ", y on ",
            a.y.device().str());
  const Shape ys = reduced_shape(a.x.sizes(), a.dims);
  AIM_CHECK(a.y.sizes() == ys, who, " ", reduce_kind_name(a.kind), " of x ", to_string(a.x.sizes()),
            " needs y of shape ", to_string(ys), " (keepdim), got ", to_string(a.y.sizes()));
  AIM_CHECK(a.y.is_contiguous(), who, " y must be contiguous");
  const std::vector<int64_t> rd = normalize_reduce_dims(a.x.sizes(), a.dims);
  int64_t R = 1;
  for (int64_t d : rd) R *= a.x.size(d);
  if (a.kind == ReduceKind::max || a.kind == ReduceKind::min)
    AIM_CHECK(R > 0 || a.y.numel() == 0, who, " ", reduce_kind_name(a.kind),
              " of an empty set of values (x ", to_string(a.x.sizes()), ")");
  if (a.kind == ReduceKind::norm) AIM_CHECK(a.p > 0, who, " norm needs p > 0 (or inf), got ", a.p);
  if (a.indices.defined()) {
    AIM_CHECK(a.kind == ReduceKind::max || a.kind == ReduceKind::min, who,
              " indices are produced by max/min only, got kind ", reduce_kind_name(a.kind));
    AIM_CHECK(rd.size() == 1, who, " indices need exactly one reduced dim, got ", rd.size(),
              " of x ", to_string(a.x.sizes()));
    AIM_CHECK(a.indices.dtype() == DType::i64, who, " indices must be i64, got ",
              dtype_name(a.indices.dtype()));
    AIM_CHECK(a.indices.sizes() == ys && a.indices.is_contiguous(), who,
              " indices must be contiguous of shape ", to_string(ys), ", got ",
              to_string(a.indices.sizes()));
    AIM_CHECK(a.indices.device() == a.x.device(), who, " indices on ", a.indices.device().str(),
              ", x on ", a.x.device().str());
  }
}

namespace {

// ---- cpu.ref ------------------------------------------------------------------------------------

// Reduces the values v (in order) with the textbook formula; *index: position of the max/min
// (first occurrence; a NaN wins and propagates, as in PyTorch).
double reduce_values(const std::vector<double>& v, const ReduceArgs& a, int64_t* index) {
  const double n = double(v.size());
  switch (a.kind) {
    case ReduceKind::sum:
    case ReduceKind::mean: {
      double s = 0;
      for (double e : v) s += e;
      return a.kind == ReduceKind::sum ? s : s / n;
    }
    case ReduceKind::prod: {
      double p = 1;
      for (double e : v) p *= e;
      return p;
    }
    case ReduceKind::max:
    case ReduceKind::min: {
      const bool mx = a.kind == ReduceKind::max;
      size_t best = 0;
      for (size_t i = 1; i < v.size(); ++i) {
        if (std::isnan(v[best])) break;
        if (std::isnan(v[i]) || (mx ? v[i] > v[best] : v[i] < v[best])) best = i;
      }
      *index = int64_t(best);
      return v[best];
    }
    case ReduceKind::var:
    case ReduceKind::std: {
      double s = 0;
      for (double e : v) s += e;
      const double m = s / n;
      double sq = 0;
      for (double e : v) sq += (e - m) * (e - m);
      const double var = sq / std::max(0.0, n - a.correction);
      return a.kind == ReduceKind::var ? var : std::sqrt(var);
    }
    case ReduceKind::norm: {
      if (std::isinf(a.p)) {
        double m = 0;
        for (double e : v) m = std::isnan(e) || std::fabs(e) > m ? std::fabs(e) : m;
        return m;
      }
      double s = 0;
      for (double e : v) s += std::pow(std::fabs(e), a.p);
      return a.p == 1 ? s : a.p == 2 ? std::sqrt(s) : std::pow(s, 1.0 / a.p);
    }
  }
  return 0;
}

template <class T>
void reduce_ref_typed(const ReduceArgs& a) {
  const std::vector<int64_t> rd = normalize_reduce_dims(a.x.sizes(), a.dims);
  Shape rs, rst;
  for (int64_t d : rd) {
    rs.push_back(a.x.size(d));
    rst.push_back(a.x.stride(d));
  }
  const int64_t R = shape_numel(rs), n_out = a.y.numel();
  const T* x = a.x.data<T>();
  T* y = a.y.data<T>();
  int64_t* idx = a.indices.defined() ? a.indices.data<int64_t>() : nullptr;
  std::vector<double> v(size_t(R > 0 ? R : 0));
  for (int64_t j = 0; j < n_out; ++j) {
    const int64_t base = strided_offset(j, a.y.sizes(), a.x.strides());
    for (int64_t r = 0; r < R; ++r) v[size_t(r)] = double(x[base + strided_offset(r, rs, rst)]);
    int64_t index = 0;
    y[j] = T(reduce_values(v, a, &index));
    if (idx) idx[j] = index;
  }
}

void reduce_cpu_ref(const ReduceArgs& a) {
  check_reduce_args(a, "[reduce] cpu.ref");
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, reduce_ref_typed<T>(a));
}

// ---- cpu.omp ------------------------------------------------------------------------------------

// Accumulation policies: acc = comb(acc, map(x, output index)). map/comb are branch-free so the
// lane loops vectorise.
template <class A>
struct SumOp {
  A init() const { return A(0); }
  A map(A v, int64_t) const { return v; }
  A comb(A a, A b) const { return a + b; }
};
template <class A>
struct AbsOp : SumOp<A> {
  A map(A v, int64_t) const { return std::fabs(v); }
};
template <class A>
struct SqOp : SumOp<A> {
  A map(A v, int64_t) const { return v * v; }
};
template <class A>
struct PowOp : SumOp<A> {
  A p;
  A map(A v, int64_t) const { return std::pow(std::fabs(v), p); }
};
template <class A>
struct SqDevOp : SumOp<A> {
  const A* mean;  // per output
  A map(A v, int64_t j) const { return (v - mean[j]) * (v - mean[j]); }
};
template <class A>
struct ProdOp {
  A init() const { return A(1); }
  A map(A v, int64_t) const { return v; }
  A comb(A a, A b) const { return a * b; }
};
template <class A>
struct MaxAbsOp {  // inf-norm; NaN propagates
  A init() const { return A(0); }
  A map(A v, int64_t) const { return std::fabs(v); }
  A comb(A a, A b) const { return (b > a || b != b) ? b : a; }
};

// How the work is cut. Tasks: (o, rc, ic); rows use lanes along R, columns along inner.
struct Split {
  int64_t outer, R, inner;
  int64_t r_chunk, n_rc;  // R cut into n_rc chunks of r_chunk
  int64_t i_chunk, n_ic;  // inner cut into n_ic chunks of i_chunk
  int64_t tasks() const { return outer * n_rc * n_ic; }
};

// The split assumes a team of this many threads whatever the real team is: the chunks of R, and
// so the sums, are then the same at every --threads (docs/determinism.md). Splitting for 16 at 1
// thread costs one more partial per >= 64 rows (columns) or >= 4096 values (rows): noise.
constexpr int64_t kSplitTeam = 16;

Split make_split(int64_t outer, int64_t R, int64_t inner) {
  const int64_t threads = kSplitTeam;
  Split s{outer, R, inner, R, 1, inner, 1};
  if (inner > 1) {
    s.i_chunk = std::min<int64_t>(inner, 512);
    s.n_ic = (inner + s.i_chunk - 1) / s.i_chunk;
  }
  const int64_t have = outer * s.n_ic;
  const int64_t min_r = inner > 1 ? 64 : 4096;  // keep each task's R chunk worth a task
  if (have < 4 * threads && R > 2 * min_r) {
    const int64_t want = std::min((4 * threads + have - 1) / have, R / min_r);
    s.r_chunk = (R + want - 1) / want;
    s.n_rc = (R + s.r_chunk - 1) / s.r_chunk;
  }
  return s;
}

constexpr int kLanes = 16;

// Partials P[(o * n_rc + rc) * inner + i] for one accumulation policy.
template <class A, class Op>
void partials(const Op& op, const A* x, const Split& s, A* P) {
  const int64_t n = s.tasks();
#pragma omp parallel for schedule(static) if (s.outer * s.R * s.inner > 32768)
  for (int64_t t = 0; t < n; ++t) {
    const int64_t ic = t % s.n_ic, rc = (t / s.n_ic) % s.n_rc, o = t / (s.n_ic * s.n_rc);
    const int64_t r0 = rc * s.r_chunk, r1 = std::min(s.R, r0 + s.r_chunk);
    if (s.inner == 1) {
      const A* xr = x + o * s.R;
      A lane[kLanes];
      for (int l = 0; l < kLanes; ++l) lane[l] = op.init();
      int64_t r = r0;
      for (; r + kLanes <= r1; r += kLanes) {
#pragma omp simd
        for (int l = 0; l < kLanes; ++l) lane[l] = op.comb(lane[l], op.map(xr[r + l], o));
      }
      A acc = op.init();
      for (int l = 0; l < kLanes; ++l) acc = op.comb(acc, lane[l]);
      for (; r < r1; ++r) acc = op.comb(acc, op.map(xr[r], o));
      P[o * s.n_rc + rc] = acc;
    } else {
      const int64_t i0 = ic * s.i_chunk, i1 = std::min(s.inner, i0 + s.i_chunk);
      A* acc = P + (o * s.n_rc + rc) * s.inner;
      const int64_t jo = o * s.inner;
      for (int64_t i = i0; i < i1; ++i) acc[i] = op.init();
      for (int64_t r = r0; r < r1; ++r) {
        const A* xr = x + (o * s.R + r) * s.inner;
#pragma omp simd
        for (int64_t i = i0; i < i1; ++i) acc[i] = op.comb(acc[i], op.map(xr[i], jo + i));
      }
    }
  }
}

// Runs one policy and combines partials in chunk order: out[o * inner + i].
template <class A, class Op>
void accumulate(const Op& op, const A* x, const Split& s, A* out) {
  std::vector<A> P(static_cast<size_t>(s.outer * s.n_rc * s.inner));
  partials(op, x, s, P.data());
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      A acc = op.init();
      for (int64_t rc = 0; rc < s.n_rc; ++rc)
        acc = op.comb(acc, P[(o * s.n_rc + rc) * s.inner + i]);
      out[o * s.inner + i] = acc;
    }
}

// max/min with the position (first occurrence; NaN wins).
template <bool kMax, class A>
inline bool better(A v, A best) {
  return (kMax ? v > best : v < best) || (v != v && best == best);
}

template <bool kMax, class A>
void arg_accumulate(const A* x, const Split& s, A* out, int64_t* out_idx) {
  const int64_t n = s.tasks(), np = s.outer * s.n_rc * s.inner;
  std::vector<A> PV(static_cast<size_t>(np));
  std::vector<int64_t> PI(static_cast<size_t>(np));
#pragma omp parallel for schedule(static) if (s.outer * s.R * s.inner > 32768)
  for (int64_t t = 0; t < n; ++t) {
    const int64_t ic = t % s.n_ic, rc = (t / s.n_ic) % s.n_rc, o = t / (s.n_ic * s.n_rc);
    const int64_t r0 = rc * s.r_chunk, r1 = std::min(s.R, r0 + s.r_chunk);
    if (s.inner == 1) {
      const A* xr = x + o * s.R;
      A bv = xr[r0];
      int64_t bi = r0;
      int64_t r = r0;
      if (r1 - r0 >= kLanes) {
        A lv[kLanes];
        int64_t li[kLanes];
        for (int l = 0; l < kLanes; ++l) lv[l] = xr[r0 + l], li[l] = r0 + l;
        for (r = r0 + kLanes; r + kLanes <= r1; r += kLanes) {
#pragma omp simd
          for (int l = 0; l < kLanes; ++l) {
            const bool b = better<kMax>(xr[r + l], lv[l]);
            lv[l] = b ? xr[r + l] : lv[l];
            li[l] = b ? r + l : li[l];
          }
        }
        bv = lv[0], bi = li[0];
        for (int l = 1; l < kLanes; ++l)
          if (better<kMax>(lv[l], bv) ||
              ((lv[l] == bv || (lv[l] != lv[l] && bv != bv)) && li[l] < bi))
            bv = lv[l], bi = li[l];
      }
      for (; r < r1; ++r)
        if (better<kMax>(xr[r], bv)) bv = xr[r], bi = r;
      PV[size_t(o * s.n_rc + rc)] = bv;
      PI[size_t(o * s.n_rc + rc)] = bi;
    } else {
      const int64_t i0 = ic * s.i_chunk, i1 = std::min(s.inner, i0 + s.i_chunk);
      A* bv = PV.data() + (o * s.n_rc + rc) * s.inner;
      int64_t* bi = PI.data() + (o * s.n_rc + rc) * s.inner;
      const A* x0 = x + (o * s.R + r0) * s.inner;
      for (int64_t i = i0; i < i1; ++i) bv[i] = x0[i], bi[i] = r0;
      for (int64_t r = r0 + 1; r < r1; ++r) {
        const A* xr = x + (o * s.R + r) * s.inner;
#pragma omp simd
        for (int64_t i = i0; i < i1; ++i) {
          const bool b = better<kMax>(xr[i], bv[i]);
          bv[i] = b ? xr[i] : bv[i];
          bi[i] = b ? r : bi[i];
        }
      }
    }
  }
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      A v = PV[size_t(o * s.n_rc * s.inner + i)];
      int64_t k = PI[size_t(o * s.n_rc * s.inner + i)];
      for (int64_t rc = 1; rc < s.n_rc; ++rc) {
        const size_t p = size_t((o * s.n_rc + rc) * s.inner + i);
        if (better<kMax>(PV[p], v)) v = PV[p], k = PI[p];
      }
      out[o * s.inner + i] = v;
      if (out_idx) out_idx[o * s.inner + i] = k;
    }
}

// A: f32 or f64 (16-bit inputs arrive converted to f32). Writes the results to `res` (A).
template <class A>
void omp_reduce(const ReduceArgs& a, const A* x, const Split& s, A* res, int64_t* idx) {
  const int64_t n_out = s.outer * s.inner;
  const A R = A(s.R);
  switch (a.kind) {
    case ReduceKind::sum:
    case ReduceKind::mean:
      accumulate(SumOp<A>{}, x, s, res);
      if (a.kind == ReduceKind::mean)
        for (int64_t j = 0; j < n_out; ++j) res[j] /= R;
      return;
    case ReduceKind::prod:
      accumulate(ProdOp<A>{}, x, s, res);
      return;
    case ReduceKind::max:
      arg_accumulate<true>(x, s, res, idx);
      return;
    case ReduceKind::min:
      arg_accumulate<false>(x, s, res, idx);
      return;
    case ReduceKind::var:
    case ReduceKind::std: {
      std::vector<A> mean(static_cast<size_t>(n_out));
      accumulate(SumOp<A>{}, x, s, mean.data());
      for (auto& m : mean) m /= R;
      SqDevOp<A> op;
      op.mean = mean.data();
      accumulate(op, x, s, res);
      const A div = A(std::max(0.0, double(s.R) - a.correction));
      for (int64_t j = 0; j < n_out; ++j) {
        res[j] /= div;
        if (a.kind == ReduceKind::std) res[j] = std::sqrt(res[j]);
      }
      return;
    }
    case ReduceKind::norm:
      if (std::isinf(a.p)) {
        accumulate(MaxAbsOp<A>{}, x, s, res);
      } else if (a.p == 1) {
        accumulate(AbsOp<A>{}, x, s, res);
      } else if (a.p == 2) {
        accumulate(SqOp<A>{}, x, s, res);
        for (int64_t j = 0; j < n_out; ++j) res[j] = std::sqrt(res[j]);
      } else {
        PowOp<A> op;
        op.p = A(a.p);
        accumulate(op, x, s, res);
        for (int64_t j = 0; j < n_out; ++j) res[j] = std::pow(res[j], A(1) / op.p);
      }
      return;
  }
}

void reduce_cpu_omp(const ReduceArgs& a) {
  check_reduce_args(a, "[reduce] cpu.omp");
  if (a.y.numel() == 0) return;
  ReduceView v = reduce_view(a.x, a.dims);
  const Split s = make_split(v.outer, v.R, v.inner);
  int64_t* idx = a.indices.defined() ? a.indices.data<int64_t>() : nullptr;
  if (a.x.dtype() == DType::f64) {
    omp_reduce<double>(a, v.x.data<double>(), s, a.y.data<double>(), idx);
    return;
  }
  if (a.x.dtype() == DType::f32) {
    omp_reduce<float>(a, v.x.data<float>(), s, a.y.data<float>(), idx);
    return;
  }
  // f16/bf16: compute in f32, round at the output.
  const Tensor xf = v.x.to(DType::f32);
  Tensor yf = Tensor::empty(a.y.sizes(), DType::f32, a.y.device());
  omp_reduce<float>(a, xf.data<float>(), s, yf.data<float>(), idx);
  a.y.copy_(yf);
}

}  // namespace

void reduce(const ReduceArgs& a) { AIM_DISPATCH_OP(ReduceArgs, "reduce", a); }

void register_reduce_cpu(Registry& r) {
  auto& op = r.op<ReduceArgs>("reduce");
  op.description = "sum/mean/max/min/prod/var/std/p-norm over any dims (keepdim), argmax/argmin";
  const std::vector<DType> floats{DType::f32, DType::f64, DType::f16, DType::bf16};
  op.add({"cpu.ref", Backend::CPU, Provider::Own, reduce_cpu_ref, floats});
  op.add({"cpu.omp", Backend::CPU, Provider::Own, reduce_cpu_omp, floats});
  op.set_default(Backend::CPU, "cpu.omp");
  op.set_cost(reduce_cost);
  op.make_case = reduce_cpu::make_reduce_case;
  op.tolerance = reduce_cpu::reduce_tolerance;
  op.set_shape_fields(reduce_cpu::reduce_shape_fields());
  op.add_test_shapes(reduce_cpu::reduce_test_shapes());
  op.small_enough_for_simt = reduce_cpu::reduce_small_enough_for_simt;
}

}  // namespace aim::kernels
