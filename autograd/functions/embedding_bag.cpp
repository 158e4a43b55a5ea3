// embedding_bag: rows = embedding(weight, indices) [N, C]; an optional per-entry scale s [N]
// (per_sample_weights, times a 0/1 mask when there is a padding_idx); then per bag
//   fixed [B, L]:  sum (or mean) over the L axis of (rows * s) viewed as [B, L, C];
//   offsets:       a segment sum (index_add of each row into its bag; gradient: index_select).
// mean with padding divides each bag's sum by max(1, its count of non-padding entries).
#include "autograd/functions/embedding_bag.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "autograd/amp.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/embedding.h"
#include "autograd/functions/reduce.h"
#include "autograd/functions/shape.h"
#include "autograd/node.h"
#include "kernels/index/index.h"

namespace aim::autograd {
namespace {

// y[bag_of[n], :] += rows[n, :]: y [B, C] from rows [N, C]; the gradient of rows is dy gathered
// back by bag id.
struct BagSumNode final : Node {
  Tensor bag_of;  // [N] i64 on the rows' device
  const char* name() const override { return "EmbeddingBagSum"; }
  void backward(Grads& g) override {
    if (!g.needs(0)) return;
    kernels::IndexSelectArgs a;
    a.x = g.dy();
    a.index = bag_of;
    a.y = g.out(0);
    a.dim = 0;
    kernels::index_select(a);
  }
  void release() override { bag_of = Tensor(); }
};

Variable bag_sum(const Variable& rows, const Tensor& bag_of, int64_t B) {
  kernels::IndexAddArgs a;
  a.src = rows.data().contiguous();
  a.index = bag_of;
  a.y = Tensor::zeros({B, a.src.size(1)}, a.src.dtype(), a.src.device());
  a.dim = 0;
  kernels::index_add(a);
  if (!needs_grad({&rows})) return Variable(a.y);
  auto n = std::make_shared<BagSumNode>();
  n->bag_of = bag_of;
  return attach1(n, {rows}, a.y);
}

bool is_index_dtype(DType t) { return t == DType::i32 || t == DType::i64; }

// The bags of an offsets tensor: [start, end) of each, checked against N.
struct BagPlan {
  std::vector<int64_t> start, end;
  int64_t bags() const { return int64_t(start.size()); }
};

BagPlan plan_bags(const Tensor& offsets, int64_t N, bool include_last_offset) {
  AIM_CHECK(!offsets.is_cuda() && offsets.dim() == 1 && is_index_dtype(offsets.dtype()),
            "embedding_bag: offsets must be a 1-d i32/i64 tensor on the CPU, got ",
            to_string(offsets.sizes()), " ", dtype_name(offsets.dtype()), " on ",
            offsets.device().str());
  const std::vector<int64_t> o = offsets.to_vector<int64_t>();
  const int64_t B = int64_t(o.size()) - (include_last_offset ? 1 : 0);
  AIM_CHECK(B >= 1, "embedding_bag: offsets ", to_string(offsets.sizes()), " give no bag",
            include_last_offset ? " (include_last_offset needs B + 1 entries)" : "");
  AIM_CHECK(o[0] == 0, "embedding_bag: offsets[0] must be 0, got ", o[0]);
  BagPlan p;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t s = o[size_t(b)], e = b + 1 < int64_t(o.size()) ? o[size_t(b + 1)] : N;
    AIM_CHECK(s <= e && e <= N, "embedding_bag: offsets must be non-decreasing and at most N = ", N,
              " (the number of indices), got offsets[", b, "] = ", s, " and bag end ", e);
    p.start.push_back(s);
    p.end.push_back(e);
  }
  AIM_CHECK(!include_last_offset || o.back() == N, "embedding_bag: with include_last_offset the ",
            "last offset must equal the number of indices ", N, ", got ", o.back());
  return p;
}

}  // namespace

const char* bag_mode_name(BagMode m) { return m == BagMode::sum ? "sum" : "mean"; }

constexpr amp::Declaration kEmbeddingBagAmp{"embedding_bag", amp::OpClass::native, amp::kWhyTables};
Variable embedding_bag(const Variable& weight, const Tensor& indices, const Tensor& offsets,
                       BagMode mode, const Variable& per_sample_weights, int64_t padding_idx,
                       bool include_last_offset) {
  AIM_CHECK(weight.defined() && weight.dim() == 2, "embedding_bag: weight must be [V, C], got ",
            weight.defined() ? to_string(weight.sizes()) : std::string("undefined"));
  AIM_CHECK(indices.defined() && is_index_dtype(indices.dtype()),
            "embedding_bag: indices must be an i32/i64 tensor");
  const bool fixed = !offsets.defined();
  AIM_CHECK(fixed ? indices.dim() == 2 : indices.dim() == 1,
            "embedding_bag: indices must be [B, L] without offsets or [N] with offsets, got ",
            to_string(indices.sizes()), fixed ? " and no offsets" : " with offsets");
  AIM_CHECK(!fixed || !include_last_offset,
            "embedding_bag: include_last_offset needs offsets (indices [N])");
  const Variable& psw = per_sample_weights;
  if (psw.defined()) {
    AIM_CHECK(mode == BagMode::sum, "embedding_bag: per_sample_weights need mode sum, got ",
              bag_mode_name(mode));
    AIM_CHECK(psw.sizes() == indices.sizes() && psw.dtype() == weight.dtype() &&
                  psw.device() == weight.device(),
              "embedding_bag: per_sample_weights must be ", to_string(indices.sizes()), " ",
              dtype_name(weight.dtype()), " on ", weight.device().str(), " (indices' shape, ",
              "weight's dtype and device), got ", to_string(psw.sizes()), " ",
              dtype_name(psw.dtype()), " on ", psw.device().str());
  }
  const int64_t V = weight.size(0), C = weight.size(1), N = indices.numel();
  AIM_CHECK(padding_idx < V, "embedding_bag: padding_idx ", padding_idx, " out of range for ", V,
            " embeddings");
  const bool has_pad = padding_idx >= 0;
  const Tensor idx = indices.to(weight.device()).contiguous().view({N});

  const Variable rows = embedding(weight, idx, padding_idx);  // [N, C]
  Tensor mask;                                                // [N] 0/1 in weight's dtype
  Variable s;                                                 // [N] per-entry scale
  if (has_pad) {
    const Tensor pad = Tensor::full({}, double(padding_idx), idx.dtype(), idx.device());
    mask = ne(Variable(idx), Variable(pad)).to(weight.dtype());
    s = Variable(mask);
  }
  if (psw.defined()) s = s.defined() ? mul(reshape(psw, {N}), s) : reshape(psw, {N});
  const Variable weighted = s.defined() ? mul(rows, reshape(s, {N, 1})) : rows;

  if (fixed) {
    const int64_t B = indices.size(0), L = indices.size(1);
    const Variable bags3 = reshape(weighted, {B, L, C});
    if (mode == BagMode::sum || (!has_pad && L == 0)) return sum(bags3, {1});
    if (!has_pad) return mean(bags3, {1});
    const Variable count = sum(Variable(mask.view({B, L})), {1}, /*keepdim=*/true);  // [B, 1]
    return div(sum(bags3, {1}), clamp(count, 1, std::numeric_limits<double>::infinity()));
  }

  const BagPlan plan = plan_bags(offsets, N, include_last_offset);
  const int64_t B = plan.bags();
  // The bags tile [0, N) (plan_bags checks it), so every entry gets its bag's id.
  std::vector<int64_t> bag_of(static_cast<size_t>(N));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t n = plan.start[size_t(b)]; n < plan.end[size_t(b)]; ++n) bag_of[size_t(n)] = b;
  const Tensor bag_of_t = Tensor::from_vector(bag_of, {N}, weight.device());
  const Variable bags = bag_sum(weighted, bag_of_t, B);  // [B, C]
  if (mode == BagMode::sum) return bags;
  Tensor denom;  // [B, 1]: max(1, entries counted in each bag)
  if (has_pad) {
    denom = clamp(bag_sum(Variable(mask.view({N, 1})), bag_of_t, B), 1,
                  std::numeric_limits<double>::infinity())
                .data();
  } else {
    std::vector<double> c(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b)
      c[size_t(b)] = double(std::max<int64_t>(1, plan.end[size_t(b)] - plan.start[size_t(b)]));
    denom = Tensor::from_vector(c, {B, 1}, weight.device()).to(weight.dtype());
  }
  return div(bags, Variable(denom));
}

void amp::declarations_embedding_bag(std::vector<amp::Declaration>& out) {
  out.insert(out.end(), {kEmbeddingBagAmp});
}

}  // namespace aim::autograd
