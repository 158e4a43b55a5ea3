#include "layers/fold.h"

#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <typeinfo>

#include "layers/batchnorm.h"
#include "layers/conv.h"

namespace aim::layers {
namespace {
thread_local FoldTrace* t_trace = nullptr;
}  // namespace

struct FoldTraceScope {
  explicit FoldTraceScope(FoldTrace& t) { t_trace = &t; }
  ~FoldTraceScope() { t_trace = nullptr; }
};

FoldTrace* FoldTrace::active() { return t_trace; }

namespace {
// FNV-1a over the tensor's 8-byte words (then its last bytes): tells a conv output from a later
// in-place result in its buffer (an in-place activation after the batch norm): the trace run
// only. Byte by byte it took ~9% of a 12-batch `aim-infer resnet50` at batch 16 (1.3 GB hashed).
uint64_t content_hash(const Tensor& t) {
  const Tensor h = t.to(kCPU).contiguous();
  const auto* p = static_cast<const unsigned char*>(h.raw_data());
  const size_t n = size_t(h.nbytes());
  uint64_t v = 1469598103934665603ull;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    v = (v ^ w) * 1099511628211ull;
  }
  for (; i < n; ++i) v = (v ^ p[i]) * 1099511628211ull;
  return v;
}
}  // namespace

void FoldTrace::conv_output(const Conv2d* conv, const Tensor& y) {
  convs_.push_back({conv, y.raw_data(), y.sizes(), content_hash(y)});
}

void FoldTrace::batchnorm_input(const BatchNorm2d* bn, const Tensor& x, bool relu) {
  // The latest conv call that produced exactly this tensor (same data, same shape).
  const void* d = x.raw_data();
  for (auto it = convs_.rbegin(); it != convs_.rend(); ++it) {
    if (it->data == d && it->sizes == x.sizes()) {
      if (it->hash != content_hash(x)) break;  // the buffer was overwritten since
      ++it->consumers;
      bns_.push_back({bn, it->conv, relu});
      return;
    }
  }
  bns_.push_back({bn, nullptr, relu});
}

void FoldTrace::batchnorm_output(const BatchNorm2d* bn, const Tensor& y) {
  bn_outs_.push_back({bn, y.raw_data(), y.sizes(), content_hash(y)});
}

void FoldTrace::conv_input(const Conv2d* conv, const Tensor& x) {
  // The latest batch-norm call that produced exactly this tensor and whose buffer still holds it.
  const void* d = x.raw_data();
  for (auto it = bn_outs_.rbegin(); it != bn_outs_.rend(); ++it) {
    if (it->data == d && it->sizes == x.sizes()) {
      if (it->hash != content_hash(x)) break;
      ++it->consumers;
      feeds_.push_back({conv, it->bn});
      return;
    }
  }
  feeds_.push_back({conv, nullptr});
}

std::vector<std::string> fold_batchnorm(Module& root, const std::function<void()>& run,
                                        std::vector<std::string>* into_next) {
  FoldTrace trace;
  {
    FoldTraceScope scope(trace);
    run();
  }
  // A pair: every call of the batch norm read an output of the same conv, and every call of that
  // conv fed exactly one batch-norm call of that layer.
  std::map<const BatchNorm2d*, std::set<const Conv2d*>> sources;
  std::map<const Conv2d*, std::set<const BatchNorm2d*>> sinks;
  std::map<const Conv2d*, int> conv_calls, conv_fed;
  std::map<const BatchNorm2d*, bool> always_relu;
  for (const FoldTrace::Use& u : trace.bns_) {
    sources[u.bn].insert(u.conv);
    if (u.conv) sinks[u.conv].insert(u.bn);
    auto [it, fresh] = always_relu.emplace(u.bn, u.relu);
    if (!fresh) it->second = it->second && u.relu;
  }
  for (const FoldTrace::Call& c : trace.convs_) {
    ++conv_calls[c.conv];
    if (c.consumers == 1) ++conv_fed[c.conv];
  }
  // Names of the modules, to report (and to find the non-const objects to change).
  std::map<const Module*, std::pair<std::string, Module*>> names;
  std::vector<const Module*> order;  // the module tree in registration order
  std::function<void(Module&, const std::string&)> walk = [&](Module& m, const std::string& n) {
    names[&m] = {n, &m};
    order.push_back(&m);
    for (const auto& [cn, c] : m.children()) walk(*c, n.empty() ? cn : n + "." + cn);
  };
  walk(root, "");

  std::vector<std::string> folded;
  std::set<const BatchNorm2d*> folded_bns;
  for (const Module* mod : order) {  // model order, so the report does not depend on addresses
    const auto* as_bn = dynamic_cast<const BatchNorm2d*>(mod);
    if (!as_bn) continue;
    auto src = sources.find(as_bn);
    if (src == sources.end()) continue;
    const BatchNorm2d* bn = src->first;
    const std::set<const Conv2d*>& convs = src->second;
    if (convs.size() != 1 || *convs.begin() == nullptr) continue;
    const Conv2d* conv = *convs.begin();
    if (sinks[conv].size() != 1 || conv_fed[conv] != conv_calls[conv]) continue;
    if (typeid(*bn) != typeid(BatchNorm2d) || typeid(*conv) != typeid(Conv2d)) continue;
    auto bi = names.find(bn), ci = names.find(conv);
    if (bi == names.end() || ci == names.end()) continue;  // not inside root
    auto* b = static_cast<BatchNorm2d*>(bi->second.second);
    auto* c = static_cast<Conv2d*>(ci->second.second);
    std::vector<double> scale, shift;
    if (!b->eval_scale_shift(scale, shift)) continue;
    c->fold_scale_shift(scale, shift);
    const bool relu = always_relu[bn];
    c->set_fused_relu(relu);
    b->set_folded(relu);
    folded.push_back(bi->second.first);
    folded_bns.insert(bn);
  }

  // Into the conv after: every call of the batch norm fed exactly one call of one pointwise conv,
  // and every call of that conv read that batch norm's output.
  if (!into_next) return folded;
  std::map<const BatchNorm2d*, int> bn_calls, bn_fed;
  std::map<const BatchNorm2d*, std::set<const Conv2d*>> fed_convs;
  std::map<const Conv2d*, std::set<const BatchNorm2d*>> conv_sources;
  std::map<const BatchNorm2d*, bool> any_relu;
  for (const FoldTrace::Use& u : trace.bns_) any_relu[u.bn] = any_relu[u.bn] || u.relu;
  for (const FoldTrace::BnOut& o : trace.bn_outs_) {
    ++bn_calls[o.bn];
    if (o.consumers == 1) ++bn_fed[o.bn];
  }
  for (const FoldTrace::Feed& f : trace.feeds_) {
    conv_sources[f.conv].insert(f.bn);
    if (f.bn) fed_convs[f.bn].insert(f.conv);
  }
  for (const Module* mod : order) {
    const auto* bn = dynamic_cast<const BatchNorm2d*>(mod);
    if (!bn || folded_bns.count(bn) || !bn_calls.count(bn)) continue;
    if (bn_fed[bn] != bn_calls[bn] || fed_convs[bn].size() != 1) continue;
    const Conv2d* conv = *fed_convs[bn].begin();
    if (conv_sources[conv].size() != 1) continue;  // (its one source is bn)
    const bool relu = always_relu[bn];
    if (relu != any_relu[bn]) continue;  // called with and without its relu
    if (typeid(*bn) != typeid(BatchNorm2d) || typeid(*conv) != typeid(Conv2d)) continue;
    auto bi = names.find(bn), ci = names.find(conv);
    if (bi == names.end() || ci == names.end()) continue;
    auto* b = static_cast<BatchNorm2d*>(bi->second.second);
    auto* c = static_cast<Conv2d*>(ci->second.second);
    if (!c->pointwise() || c->has_input_affine() || !c->weight.data().device().is_cpu()) continue;
    std::vector<double> scale, shift;
    if (!b->eval_scale_shift(scale, shift)) continue;
    c->set_input_affine(scale, shift, relu);
    b->set_folded(relu);
    folded.push_back(bi->second.first);
    into_next->push_back(bi->second.first);
  }
  return folded;
}

}  // namespace aim::layers
