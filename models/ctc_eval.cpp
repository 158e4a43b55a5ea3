#include "models/ctc_eval.h"

#include <algorithm>

#include "autograd/variable.h"
#include "tensor/check.h"

namespace aim::models {
namespace {

// Rows of a [B, W] index tensor cut at each row's length.
std::vector<std::vector<int64_t>> rows(const Tensor& t, const Tensor& lengths) {
  const Tensor v = t.to(kCPU).contiguous();
  const std::vector<int64_t> x = v.to_vector<int64_t>(),
                             n = lengths.to(kCPU).contiguous().to_vector<int64_t>();
  const int64_t W = v.size(1);
  std::vector<std::vector<int64_t>> r(n.size());
  for (size_t b = 0; b < n.size(); ++b)
    r[b].assign(x.begin() + int64_t(b) * W, x.begin() + int64_t(b) * W + n[b]);
  return r;
}

}  // namespace

DecodedSequences ctc_eval_sequences(Model& m, const data::BatchSource& src, int64_t n, Device dev,
                                    int64_t chunk, const std::string& what) {
  AIM_CHECK(n > 0 && n <= src.eval_size(), what, " evaluation: ", n,
            " samples asked, the evaluation set has ", src.eval_size());
  autograd::NoGradGuard ng;
  const bool was_training = m.is_training();
  m.eval();
  DecodedSequences d;
  for (int64_t s = 0; s < n; s += chunk) {
    const TensorMap b = src.eval_batch(s, std::min(chunk, n - s));
    const TensorMap out = m.infer(batch_to_device(m, b, dev));
    for (auto& r : rows(b.at("label"), b.at("label_length"))) d.labels.push_back(std::move(r));
    for (auto& r : rows(out.at("decoded"), out.at("decoded_length")))
      d.preds.push_back(std::move(r));
  }
  m.train(was_training);
  return d;
}

}  // namespace aim::models
