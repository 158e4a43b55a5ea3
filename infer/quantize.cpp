#include "infer/quantize.h"

#include <algorithm>
#include <cmath>
#include <regex>

#include "tensor/check.h"
#include "tensor/safetensors.h"

namespace aim::infer {
namespace {

using autograd::VariableImpl;

// Per-weight input statistics: exact max |x|, and a strided sample of |x| for percentiles.
class RangeObserver : public autograd::int8::Observer {
 public:
  struct Stats {
    float absmax = 0;
    std::vector<float> sample;
    int64_t calls = 0;
  };
  void observe(const VariableImpl* w, const Tensor& x) override {
    Stats& s = stats[w];
    ++s.calls;
    const std::vector<float> v = x.to(kCPU).to(DType::f32).contiguous().to_vector<float>();
    const size_t step = std::max<size_t>(1, v.size() / 65536);
    for (size_t i = 0; i < v.size(); ++i) {
      const float a = std::fabs(v[i]);
      AIM_CHECK(std::isfinite(a), "int8 calibration: a layer input holds ", v[i]);
      s.absmax = std::max(s.absmax, a);
      if (i % step == 0) s.sample.push_back(a);
    }
  }
  std::unordered_map<const VariableImpl*, Stats> stats;
};

float input_scale(RangeObserver::Stats& s, const CalibrationOptions& opt) {
  float range = s.absmax;
  if (opt.method == "percentile" && !s.sample.empty()) {
    const size_t k = std::min(s.sample.size() - 1,
                              size_t(std::ceil(opt.percentile / 100.0 * double(s.sample.size()))));
    std::nth_element(s.sample.begin(), s.sample.begin() + long(k), s.sample.end());
    range = std::min(range, s.sample[k]);
  }
  return kernels::channel_scale(range);
}

int64_t reduction_size(const Tensor& w) { return w.numel() / std::max<int64_t>(1, w.size(0)); }

}  // namespace

QuantizedModel calibrate(models::Model& model, const std::vector<TensorMap>& batches,
                         const CalibrationOptions& opt) {
  AIM_CHECK(opt.method == "max" || opt.method == "percentile", "--calib '", opt.method,
            "': allowed: max, percentile");
  AIM_CHECK(opt.percentile > 50 && opt.percentile <= 100, "--calib-percentile ", opt.percentile,
            " must be in (50, 100]");
  AIM_CHECK(!batches.empty(), "int8 calibration needs at least one batch (--calib-batches)");
  RangeObserver obs;
  {
    autograd::NoGradGuard ng;
    autograd::int8::Mode mode(&obs);
    for (const TensorMap& b : batches) model.infer(b);
  }
  std::vector<std::regex> keep;
  std::vector<std::string> why;
  for (const models::Model::Fp32Params& f : model.amp_fp32_params()) {
    keep.emplace_back(f.pattern);
    why.push_back(f.why);
  }
  QuantizedModel q;
  for (const auto& [name, p] : model.named_parameters()) {
    auto it = obs.stats.find(p.impl().get());
    if (it == obs.stats.end()) continue;  // not a linear/conv weight, or never used
    std::string reason;
    for (size_t i = 0; i < keep.size() && reason.empty(); ++i)
      if (std::regex_search(name, keep[i])) reason = why[i];
    if (reason.empty() && reduction_size(p.data()) > kernels::kQMaxReduction)
      reason = str("reduction of ", reduction_size(p.data()), " > ", kernels::kQMaxReduction,
                   " overflows the int32 accumulator");
    if (!reason.empty()) {
      q.kept.emplace_back(name, reason);
      continue;
    }
    autograd::int8::QuantLayer l;
    l.w = kernels::quantize_weight(p.data().to(DType::f32).contiguous(), 0);
    l.x_scale = input_scale(it->second, opt);
    q.layers[p.impl().get()] = std::move(l);
    q.quantized.push_back(name);
  }
  q.calibration = opt.method == "max" ? str("max |x| over ", batches.size(), " batches")
                                      : str("percentile ", opt.percentile, " of |x| over ",
                                            batches.size(), " batches");
  return q;
}

void save_quantized(const std::string& path, const models::Model& model, const QuantizedModel& q,
                    const std::map<std::string, std::string>& metadata) {
  std::vector<std::pair<std::string, Tensor>> t;
  for (const auto& [name, p] : model.named_parameters()) {
    auto it = q.layers.find(p.impl().get());
    if (it == q.layers.end()) continue;
    t.emplace_back(name + ".int8", it->second.w.q.to(kCPU));
    t.emplace_back(name + ".scales", it->second.w.scales.to(kCPU));
    t.emplace_back(name + ".x_scale",
                   Tensor::from_vector(std::vector<float>{it->second.x_scale}, {1}));
  }
  std::map<std::string, std::string> meta = metadata;
  meta["format"] = "aim-int8";
  meta["calibration"] = q.calibration;
  save_safetensors(path, t, meta);
}

QuantizedModel load_quantized(const std::string& path, const models::Model& model) {
  const SafetensorsFile f = load_safetensors(path);
  auto fmt = f.metadata.find("format");
  AIM_CHECK(fmt != f.metadata.end() && fmt->second == "aim-int8", path,
            ": not an aim int8 file (metadata format '",
            fmt == f.metadata.end() ? std::string("(missing)") : fmt->second,
            "', expected 'aim-int8'; write one with aim-infer --int8 --save-quantized)");
  std::map<std::string, autograd::Variable> params;
  for (const auto& [name, p] : model.named_parameters()) params[name] = p;
  QuantizedModel q;
  for (const auto& [key, t] : f.tensors) {
    const size_t dot = key.rfind('.');
    const std::string name = key.substr(0, dot), part = key.substr(dot + 1);
    AIM_CHECK(part == "int8" || part == "scales" || part == "x_scale", path, ": tensor '", key,
              "' is not <weight>.int8, .scales or .x_scale");
    auto it = params.find(name);
    AIM_CHECK(it != params.end(), path, ": tensor '", key, "' names no parameter of the model");
    if (part != "int8") continue;
    const Tensor& w = it->second.data();
    AIM_CHECK(t.dtype() == DType::i8 && t.sizes() == w.sizes(), path, ": ", key, " is ",
              dtype_name(t.dtype()), " ", to_string(t.sizes()), ", expected i8 ",
              to_string(w.sizes()));
    const Tensor& s = f.at(name + ".scales");
    AIM_CHECK(s.dtype() == DType::f32 && s.sizes() == Shape{w.size(0)}, path, ": ", name,
              ".scales is ", dtype_name(s.dtype()), " ", to_string(s.sizes()), ", expected f32 [",
              w.size(0), "]");
    const Tensor& xs = f.at(name + ".x_scale");
    AIM_CHECK(xs.dtype() == DType::f32 && xs.numel() == 1, path, ": ", name,
              ".x_scale must be one f32");
    const float x_scale = xs.to_vector<float>()[0];
    AIM_CHECK(x_scale > 0 && std::isfinite(x_scale), path, ": ", name, ".x_scale is ", x_scale);
    for (float v : s.to_vector<float>())
      AIM_CHECK(v > 0 && std::isfinite(v), path, ": ", name, ".scales holds ", v);
    autograd::int8::QuantLayer l;
    l.w.q = t.to(w.device());
    l.w.scales = s.to(w.device());
    l.w.axis = 0;
    l.x_scale = x_scale;
    q.layers[it->second.impl().get()] = std::move(l);
    q.quantized.push_back(name);
  }
  AIM_CHECK(!q.layers.empty(), path, ": no quantized layers");
  q.metadata = f.metadata;
  q.calibration = "loaded from " + path + " (" +
                  (f.metadata.count("calibration") ? f.metadata.at("calibration") : "?") + ")";
  return q;
}

OutputDiff compare_outputs(const std::string& name, const Tensor& lowp, const Tensor& ref) {
  AIM_CHECK(lowp.sizes() == ref.sizes(), "compare ", name, ": shapes ", to_string(lowp.sizes()),
            " and ", to_string(ref.sizes()), " differ");
  const std::vector<float> a = lowp.to(kCPU).to(DType::f32).contiguous().to_vector<float>();
  const std::vector<float> b = ref.to(kCPU).to(DType::f32).contiguous().to_vector<float>();
  double dot = 0, na = 0, nb = 0, nd = 0;
  OutputDiff d;
  d.output = name;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += double(a[i]) * b[i];
    na += double(a[i]) * a[i];
    nb += double(b[i]) * b[i];
    nd += double(a[i] - b[i]) * (a[i] - b[i]);
    d.max_abs = std::max(d.max_abs, std::fabs(double(a[i]) - b[i]));
  }
  d.cosine = na > 0 && nb > 0 ? dot / std::sqrt(na * nb) : (na == nb ? 1.0 : 0.0);
  d.rel_l2 = nb > 0 ? std::sqrt(nd / nb) : std::sqrt(nd);
  return d;
}

OutputDiff compare_integer_outputs(const std::string& name, const Tensor& lowp, const Tensor& ref) {
  AIM_CHECK(lowp.sizes() == ref.sizes() && lowp.dim() >= 1, "compare ", name, ": shapes ",
            to_string(lowp.sizes()), " and ", to_string(ref.sizes()), " differ");
  const std::vector<int64_t> a = lowp.to(kCPU).to(DType::i64).contiguous().to_vector<int64_t>();
  const std::vector<int64_t> b = ref.to(kCPU).to(DType::i64).contiguous().to_vector<int64_t>();
  OutputDiff d;
  d.output = name;
  d.samples = lowp.size(0);
  const size_t row = d.samples > 0 ? a.size() / size_t(d.samples) : 0;
  int64_t same = 0;
  for (int64_t i = 0; i < d.samples; ++i)
    same += std::equal(a.begin() + long(i * row), a.begin() + long((i + 1) * row),
                       b.begin() + long(i * row));
  d.agreement = d.samples > 0 ? double(same) / double(d.samples) : 1.0;
  return d;
}

}  // namespace aim::infer
