#include "models/deepspeech.h"

#include <algorithm>
#include <cmath>

#include "autograd/functions/ctc.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/reduce.h"
#include "autograd/functions/softmax.h"
#include "kernels/loss/ctc.h"
#include "profiler/profiler.h"
#include "tensor/check.h"

namespace aim::models {

namespace ag = aim::autograd;
namespace k = aim::kernels;

namespace {

constexpr double kNormEps = 1e-5;  // added to the standard deviation (silent utterances)

const Tensor& get(const TensorMap& b, const char* name) {
  auto it = b.find(name);
  AIM_CHECK(it != b.end() && it->second.defined(), "deepspeech batch: missing tensor '", name, "'");
  return it->second;
}

// The context window as a framing of the flattened features: frames of (2c + 1) feature vectors,
// hop one vector, c vectors of zeros on each side, no pre-emphasis, no window.
k::FrameParams context_params(const DeepSpeechConfig& c) {
  k::FrameParams p;
  p.frame_length = c.input_width();
  p.hop = c.n_mfcc;
  p.pad = c.context * c.n_mfcc;
  p.preemph = 0;
  p.window = k::WindowKind::rectangular;
  return p;
}

}  // namespace

k::FrameParams DeepSpeechConfig::frame_params() const {
  k::FrameParams p;
  p.frame_length = frame_length;
  p.hop = hop;
  p.pad = 0;
  p.preemph = preemph;
  p.window = k::WindowKind::hamming;
  return p;
}

DeepSpeech::DeepSpeech(const DeepSpeechConfig& cfg) : cfg_(cfg) {
  AIM_CHECK(cfg.hidden > 0 && cfg.rnn_hidden > 0 && cfg.classes >= 2 && cfg.context >= 0,
            "DeepSpeech: sizes must be positive");
  AIM_CHECK(cfg.nfft >= cfg.frame_length && cfg.n_mfcc <= cfg.n_mels,
            "DeepSpeech: need nfft >= frame_length and n_mfcc <= n_mels, got nfft ", cfg.nfft,
            ", frame_length ", cfg.frame_length, ", n_mfcc ", cfg.n_mfcc, ", n_mels ", cfg.n_mels);
  AIM_CHECK(cfg.decoder == "greedy" || cfg.decoder == "beam",
            "DeepSpeech: decoder must be greedy or beam, got '", cfg.decoder, "'");
  AIM_CHECK(cfg.beam_width >= 1, "DeepSpeech: beam_width must be >= 1, got ", cfg.beam_width);
  fb64_ = k::mel_filterbank(cfg.nfft / 2 + 1, 0.0, double(cfg.sample_rate) / 2, cfg.n_mels,
                            double(cfg.sample_rate), DType::f64);
  const int64_t H = cfg.hidden;
  fc1 = child("fc1", std::make_shared<layers::Linear>(cfg.input_width(), H, cfg.seed + 1));
  fc2 = child("fc2", std::make_shared<layers::Linear>(H, H, cfg.seed + 2));
  fc3 = child("fc3", std::make_shared<layers::Linear>(H, H, cfg.seed + 3));
  layers::RnnOptions ro;
  ro.bidirectional = true;
  lstm = child("lstm", std::make_shared<layers::LSTM>(H, cfg.rnn_hidden, ro, cfg.seed + 4));
  {
    // TF's BasicLSTMCell(forget_bias=1.0) adds 1 to the forget gate's pre-activation: PyTorch's
    // layout carries it in bias_ih's forget rows [R, 2R) (gate order i, f, g, o).
    const int64_t R = cfg.rnn_hidden;
    for (const char* sfx : {"_l0", "_l0_reverse"}) {
      for (auto& [name, p] : lstm->named_parameters())
        if (name == std::string("bias_ih") + sfx) {
          std::vector<float> b = p.data().to_vector<float>();
          for (int64_t i = R; i < 2 * R; ++i) b[size_t(i)] += 1.0f;
          p.data().copy_(Tensor::from_vector(b, {4 * R}));
        }
    }
  }
  fc5 = child("fc5", std::make_shared<layers::Linear>(2 * cfg.rnn_hidden, H, cfg.seed + 5));
  fc6 = child("fc6", std::make_shared<layers::Linear>(H, cfg.classes, cfg.seed + 6));
}

Tensor DeepSpeech::features(const Tensor& audio, const Tensor& frames) {
  AIM_CHECK(audio.defined() && audio.dim() == 2 &&
                (audio.dtype() == DType::f32 || audio.dtype() == DType::f64),
            "DeepSpeech: audio must be f32 or f64 [B, L], got ",
            audio.defined() ? to_string(audio.sizes()) + " " + dtype_name(audio.dtype())
                            : std::string("undefined"));
  const Device d = audio.device();
  const DType dt = audio.dtype();
  if (!fb_.defined() || fb_.device() != d || fb_.dtype() != dt) fb_ = fb64_.to(dt).to(d);
  const int64_t B = audio.size(0), L = audio.size(1);
  const k::FrameParams fp = cfg_.frame_params();
  const int64_t T = k::signal_frames(L, fp);
  AIM_CHECK(T >= 1, "DeepSpeech: audio of ", L, " samples is shorter than one frame (",
            cfg_.frame_length, ")");
  profiler::Scope s("frontend", profiler::ScopeKind::Layer);
  k::SignalFrameArgs fa;
  fa.x = audio.contiguous();
  fa.y = Tensor::empty({B, T, cfg_.frame_length}, dt, d);
  fa.p = fp;
  k::signal_frame(fa);
  const int64_t R = B * T, F = cfg_.nfft / 2 + 1;
  k::RfftArgs ra;
  ra.x = fa.y.view({R, cfg_.frame_length});
  ra.y = Tensor::empty({R, F, 2}, dt, d);
  ra.nfft = cfg_.nfft;
  k::rfft(ra);
  k::PowerSpectrumArgs pa;
  pa.x = ra.y;
  pa.y = Tensor::empty({R, F}, dt, d);
  k::power_spectrum(pa);
  k::MelFbankArgs ma;
  ma.x = pa.y;
  ma.fb = fb_;
  ma.y = Tensor::empty({R, cfg_.n_mels}, dt, d);
  ma.log_floor = cfg_.log_floor;
  k::mel_fbank(ma);
  k::DctArgs da;
  da.x = ma.y;
  da.y = Tensor::empty({R, cfg_.n_mfcc}, dt, d);
  da.lifter = cfg_.lifter;
  k::dct(da);
  return normalize(da.y.view({B, T, cfg_.n_mfcc}), frames);
}

// Per-utterance whitening over the sample's own frames (DeepSpeech 0.1's (x - mean) / std over
// the utterance's features): padded frames neither count nor change, so a sample's features do
// not depend on the batch it is in; they are set to 0 (the context window's padding value).
Tensor DeepSpeech::normalize(const Tensor& feats, const Tensor& frames) const {
  const int64_t B = feats.size(0), T = feats.size(1), K = feats.size(2);
  std::vector<double> mask(size_t(B * T), 1.0), count(size_t(B), double(T * K));
  if (frames.defined()) {
    const std::vector<int64_t> n = frames.to(kCPU).to(DType::i64).contiguous().to_vector<int64_t>();
    for (int64_t b = 0; b < B; ++b) {
      const int64_t nb = std::min<int64_t>(T, std::max<int64_t>(0, n[size_t(b)]));
      for (int64_t t = nb; t < T; ++t) mask[size_t(b * T + t)] = 0.0;
      count[size_t(b)] = double(std::max<int64_t>(1, nb) * K);
    }
  }
  profiler::Scope s("normalize", profiler::ScopeKind::Layer);
  // The mask and counts are made on the host from the host-side frame counts and uploaded
  // explicitly (no read-back; inside a CUDA graph capture the upload is staged as a fixed plan).
  const Variable m(Tensor::from_vector(mask, {B, T, 1}).to(feats.dtype()).to(feats.device()));
  const Variable n(Tensor::from_vector(count, {B, 1, 1}).to(feats.dtype()).to(feats.device()));
  const Variable x(feats);
  const Variable mean = ag::div(ag::sum(ag::mul(x, m), {1, 2}, true), n);
  const Variable c = ag::mul(ag::sub(x, mean), m);
  const Variable sd = ag::sqrt(ag::div(ag::sum(ag::mul(c, c), {1, 2}, true), n));
  return ag::div(c, ag::add(sd, kNormEps)).data();
}

Tensor DeepSpeech::frame_lengths(const Tensor& audio_length) const {
  const std::vector<int64_t> n =
      audio_length.to(kCPU).to(DType::i64).contiguous().to_vector<int64_t>();
  std::vector<int64_t> f(n.size());
  for (size_t b = 0; b < n.size(); ++b) f[b] = k::signal_frames(n[b], cfg_.frame_params());
  return Tensor::from_vector(f, {int64_t(n.size())});
}

Variable DeepSpeech::network(const Tensor& feats, const Tensor& frames) {
  const int64_t B = feats.size(0), T = feats.size(1);
  AIM_CHECK(feats.dim() == 3 && feats.size(2) == cfg_.n_mfcc,
            "DeepSpeech: features must be [B, T, ", cfg_.n_mfcc, "], got ",
            to_string(feats.sizes()));
  using profiler::Scope;
  using profiler::ScopeKind;
  Tensor x;
  {
    Scope s("context", ScopeKind::Layer);
    k::SignalFrameArgs ca;
    ca.x = feats.contiguous().view({B, T * cfg_.n_mfcc});
    ca.p = context_params(cfg_);
    ca.y = Tensor::empty({B, T, cfg_.input_width()}, feats.dtype(), feats.device());
    k::signal_frame(ca);
    x = ca.y.permute({1, 0, 2}).contiguous();  // time-major [T, B, 494]
  }
  Variable h(x);
  const double clip = cfg_.clip;
  {
    Scope s("fc1", ScopeKind::Layer);
    h = ag::clamp(fc1->forward(h), 0.0, clip);
  }
  {
    Scope s("fc2", ScopeKind::Layer);
    h = ag::clamp(fc2->forward(h), 0.0, clip);
  }
  {
    Scope s("fc3", ScopeKind::Layer);
    h = ag::clamp(fc3->forward(h), 0.0, clip);
  }
  {
    Scope s("lstm", ScopeKind::Layer);
    h = lstm->forward(h, frames).output;  // [T, B, 2R]
  }
  {
    Scope s("fc5", ScopeKind::Layer);
    h = ag::clamp(fc5->forward(h), 0.0, clip);
  }
  Scope s("fc6", ScopeKind::Layer);
  return fc6->forward(h);
}

Variable DeepSpeech::forward(const Variable& audio) {
  return network(features(audio.data(), Tensor()), Tensor());
}

Variable DeepSpeech::ctc_loss(const Variable& logits, const Tensor& frames, const Tensor& label,
                              const Tensor& label_length) const {
  AIM_CHECK(logits.dim() == 3 && logits.size(2) == cfg_.classes,
            "DeepSpeech::ctc_loss: logits must be [T, B, ", cfg_.classes, "], got ",
            to_string(logits.sizes()));
  profiler::Scope s("ctc", profiler::ScopeKind::Layer);
  const Variable lp = ag::log_softmax(logits, 2);
  const Variable l = ag::ctc_loss(lp, label, frames, label_length, cfg_.blank(), k::Reduction::none,
                                  /*zero_infinity=*/true);
  return ag::mean(l);
}

std::pair<Tensor, Tensor> DeepSpeech::decode(const Tensor& logits, const Tensor& frames) const {
  const int64_t T = logits.size(0), B = logits.size(1);
  Tensor labels = Tensor::empty({B, T}, DType::i64, logits.device());
  Tensor lengths = Tensor::empty({B}, DType::i64, logits.device());
  profiler::Scope s("decode", profiler::ScopeKind::Layer);
  if (cfg_.decoder == "greedy") {
    k::CtcGreedyDecodeArgs a;
    a.log_probs = logits;  // argmax of the logits = argmax of their log_softmax
    a.input_lengths = frames;
    a.labels = labels;
    a.lengths = lengths;
    a.blank = cfg_.blank();
    a.merge_repeated = true;
    k::ctc_greedy_decode(a);
  } else {
    k::CtcBeamDecodeArgs a;
    a.log_probs = ag::log_softmax(Variable(logits), 2).data();
    a.input_lengths = frames;
    a.labels = labels;
    a.lengths = lengths;
    a.log_prob = Tensor::empty({B}, k::loss_dtype(logits.dtype()), logits.device());
    a.blank = cfg_.blank();
    a.beam_width = cfg_.beam_width;
    a.merge_repeated = false;  // repeats separated by a blank are two characters
    k::ctc_beam_decode(a);
  }
  return {labels, lengths};
}

std::vector<TensorSpec> DeepSpeech::input_specs() const {
  return {
      {"audio", DType::f32, {"B", "L"}, "mono samples in [-1, 1) at the model's rate, 0-padded"},
      {"audio_length", DType::i64, {"B"}, "samples of each utterance (<= L)"}};
}
std::vector<TensorSpec> DeepSpeech::label_specs() const {
  return {{"label", DType::i64, {"B", "S"}, "classes 0 space, 1-26 a-z, 27 apostrophe, -1 padded"},
          {"label_length", DType::i64, {"B"}, "characters in each label (<= S)"}};
}
std::vector<TensorSpec> DeepSpeech::output_specs() const {
  const std::string C = std::to_string(cfg_.classes);
  return {{"logits", DType::f32, {"T", "B", C}, "time-major class scores, blank = last class"},
          {"output", DType::f32, {"T", "B", C}, "the same logits"},
          {"decoded", DType::i64, {"B", "T"}, "decoded classes, -1 past decoded_length"},
          {"decoded_length", DType::i64, {"B"}, "characters decoded"}};
}

TensorMap DeepSpeech::host_metadata(const TensorMap& host_batch) const {
  TensorMap m;
  for (const char* n : {"audio_length", "label_length"}) {
    auto it = host_batch.find(n);
    if (it != host_batch.end() && it->second.defined()) m[n] = it->second;
  }
  return m;
}

TensorMap DeepSpeech::infer(const TensorMap& batch) {
  check_batch(input_specs(), batch, "deepspeech inputs");
  const Tensor frames = frame_lengths(get(batch, "audio_length"));
  const Tensor logits = network(features(batch.at("audio"), frames), frames).data();
  auto [labels, lengths] = decode(logits, frames);
  return {{"logits", logits}, {"output", logits}, {"decoded", labels}, {"decoded_length", lengths}};
}

Variable DeepSpeech::training_loss(const TensorMap& batch) {
  std::vector<TensorSpec> specs = input_specs();
  for (const TensorSpec& s : label_specs()) specs.push_back(s);
  check_batch(specs, batch, "deepspeech batch");
  const Tensor frames = frame_lengths(get(batch, "audio_length"));
  const Variable logits = network(features(batch.at("audio"), frames), frames);
  return ctc_loss(logits, frames, get(batch, "label"), get(batch, "label_length"));
}

double DeepSpeech::frontend_flops(int64_t B, int64_t L) const {
  const int64_t T = k::signal_frames(L, cfg_.frame_params());
  const double R = double(B * T), F = double(cfg_.nfft / 2 + 1), M = double(cfg_.n_mels);
  double f = 3.0 * R * double(cfg_.frame_length);                   // signal_frame
  f += R * 2.5 * double(cfg_.nfft) * k::log2_ceil(cfg_.nfft);       // rfft
  f += 3.0 * R * F;                                                 // power_spectrum
  f += 2.0 * R * F * M + (cfg_.log_floor > 0 ? 2.0 * R * M : 0.0);  // mel_fbank (+ log)
  f += 2.0 * R * M * double(cfg_.n_mfcc);                           // dct
  // normalize (per feature): mask product, sum, subtract, mask, square, sum, divide = 7; per
  // sample: two divisions, sqrt, add.
  f += 7.0 * R * double(cfg_.n_mfcc) + 4.0 * double(B);
  return f;
}

double DeepSpeech::network_flops(int64_t B, int64_t T) const {
  double f = 3.0 * double(B * T * cfg_.input_width());  // the context framing
  Shape s = {T, B, cfg_.input_width()};
  for (const auto& fc : {fc1, fc2, fc3}) {
    s = fc->count_flops(s, f);
    f += 2.0 * double(shape_numel(s));  // clamp
  }
  s = lstm->count_flops(s, f);
  s = fc5->count_flops(s, f);
  f += 2.0 * double(shape_numel(s));
  fc6->count_flops(s, f);
  return f;
}

double DeepSpeech::forward_flops(const TensorMap& batch) const {
  const Tensor& audio = get(batch, "audio");
  const int64_t B = audio.size(0), L = audio.size(1);
  const int64_t T = k::signal_frames(L, cfg_.frame_params());
  const double n = double(T * B * cfg_.classes);
  double f = frontend_flops(B, L) + network_flops(B, T);
  if (!is_training()) {
    if (cfg_.decoder == "greedy") return f + n;
    return f + 5 * n + 6 * n * double(cfg_.beam_width);
  }
  const double S = double(get(batch, "label").size(1));
  return f + 5 * n + 8 * double(T * B) * (2 * S + 1) + double(B);
}

int64_t edit_distance(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  std::vector<int64_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = int64_t(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = int64_t(i);
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

namespace {
// Words of a class sequence as ids (one per distinct word text), split at class 0 (space).
std::vector<std::vector<int64_t>> split_words(const std::vector<int64_t>& s) {
  std::vector<std::vector<int64_t>> w(1);
  for (int64_t c : s) {
    if (c == 0) {
      if (!w.back().empty()) w.emplace_back();
    } else {
      w.back().push_back(c);
    }
  }
  if (w.back().empty()) w.pop_back();
  return w;
}
}  // namespace

ErrorRates error_rates(const std::vector<std::vector<int64_t>>& refs,
                       const std::vector<std::vector<int64_t>>& hyps) {
  AIM_CHECK(refs.size() == hyps.size() && !refs.empty(), "error_rates: ", refs.size(),
            " references and ", hyps.size(), " hypotheses (need equal, > 0)");
  int64_t char_edits = 0, chars = 0, word_edits = 0, words = 0;
  for (size_t i = 0; i < refs.size(); ++i) {
    char_edits += edit_distance(refs[i], hyps[i]);
    chars += int64_t(refs[i].size());
    // Words compared as whole tokens: map each distinct word to an id.
    const auto rw = split_words(refs[i]), hw = split_words(hyps[i]);
    std::vector<std::vector<int64_t>> dict;
    auto id = [&](const std::vector<int64_t>& w) {
      for (size_t k2 = 0; k2 < dict.size(); ++k2)
        if (dict[k2] == w) return int64_t(k2);
      dict.push_back(w);
      return int64_t(dict.size() - 1);
    };
    std::vector<int64_t> ra, ha;
    for (const auto& w : rw) ra.push_back(id(w));
    for (const auto& w : hw) ha.push_back(id(w));
    word_edits += edit_distance(ra, ha);
    words += int64_t(ra.size());
  }
  ErrorRates r;
  r.cer = chars > 0 ? double(char_edits) / double(chars) : 0.0;
  r.wer = words > 0 ? double(word_edits) / double(words) : 0.0;
  return r;
}

}  // namespace aim::models
