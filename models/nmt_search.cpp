// GNMT decoding (models/nmt.h): greedy and beam search, batched over sentences (and beams).
//
// Beam search is TensorFlow's BeamSearchDecoder (tf.contrib.seq2seq, as TF NMT uses it) step for
// step, so a Python transcription (tests/peers/nmt.py beam_search) gives the same tokens:
//   * beams start as [0, -inf, ..., -inf] so the first step expands beam 0 only;
//   * a finished beam's next log-probabilities are 0 for EOS and -inf for every other token;
//   * candidate log-probability = beam's + log_softmax(logits); candidate length for the score =
//     beam's + 1 when the beam is unfinished and the token is not EOS;
//   * score = log-probability / ((5 + length) / 6)^alpha (GNMT length penalty) + beta * coverage,
//     coverage = sum_s log(min(sum of the beam's attention weights over its steps so far,
//     including this one, 1)) over source positions with a non-zero sum, counted only for beams
//     that were already finished;
//   * the top K candidates over (beam, token) by score (ties: lower index first) become the
//     beams; the beam's kept length is its parent's + 1 unless the parent had finished;
//   * stop when every beam of every sentence has finished or after max_length steps
//     (default: twice the longest source of the batch, TF NMT's decoding_length_factor 2);
//     the result is beam 0 (the best by the last step's score), cut at its first EOS.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "autograd/functions/index.h"
#include "autograd/functions/shape.h"
#include "models/nmt.h"
#include "tensor/check.h"

namespace aim::models {

namespace ag = aim::autograd;

namespace {

// Rows of every state tensor taken by `rows` (i64, on the device).
void gather_state(NmtDecoderState& st, const Tensor& rows) {
  for (auto& h : st.h) h = ag::index_select(h, 0, rows);
  for (auto& c : st.c) c = ag::index_select(c, 0, rows);
  st.context = ag::index_select(st.context, 0, rows);
}

Tensor i64_on(const std::vector<int64_t>& v, Device d) {
  return Tensor::from_vector(v, {int64_t(v.size())}).to(d);
}

// The encoder's results with sentence b repeated K times (rows b*K .. b*K+K-1).
NmtEncoded tile(const NmtEncoded& e, int64_t K) {
  const int64_t B = e.memory.size(0);
  const Device d = e.memory.data().device();
  std::vector<int64_t> rows(size_t(B * K));
  for (int64_t i = 0; i < B * K; ++i) rows[size_t(i)] = i / K;
  const Tensor r = i64_on(rows, d);
  NmtEncoded t;
  t.memory = ag::index_select(e.memory, 0, r);
  t.keys = ag::index_select(e.keys, 0, r);
  const std::vector<int32_t> len = e.lengths.to(kCPU).to_vector<int32_t>();
  std::vector<int32_t> tl(size_t(B * K));
  for (int64_t i = 0; i < B * K; ++i) tl[size_t(i)] = len[size_t(i / K)];
  t.lengths = Tensor::from_vector(tl, {B * K}).to(d);
  t.initial = e.initial;
  gather_state(t.initial, r);
  return t;
}

int64_t decode_limit(const NmtConfig& c, const Tensor& source_length) {
  if (c.max_length > 0) return c.max_length;
  int64_t m = 1;
  for (int64_t v : source_length.to(kCPU).to(DType::i64).to_vector<int64_t>()) m = std::max(m, v);
  return 2 * m;
}

// log_softmax of each row of logits [N, V] on the host, in double.
std::vector<double> log_softmax_rows(const Tensor& logits) {
  const Tensor l = logits.to(kCPU).to(DType::f64).contiguous();
  const int64_t N = l.size(0), V = l.size(1);
  const double* p = l.data<double>();
  std::vector<double> out(size_t(N * V));
  for (int64_t n = 0; n < N; ++n) {
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t v = 0; v < V; ++v) m = std::max(m, p[n * V + v]);
    double z = 0;
    for (int64_t v = 0; v < V; ++v) z += std::exp(p[n * V + v] - m);
    const double lz = m + std::log(z);
    for (int64_t v = 0; v < V; ++v) out[size_t(n * V + v)] = p[n * V + v] - lz;
  }
  return out;
}

}  // namespace

std::vector<std::vector<int64_t>> Nmt::greedy(const Tensor& source, const Tensor& source_length) {
  autograd::NoGradGuard ng;
  const NmtEncoded enc = encode(source, source_length);
  const int64_t B = source.size(0), V = cfg_.tgt_vocab, limit = decode_limit(cfg_, source_length);
  const Device d = source.device();
  NmtDecoderState st = enc.initial;
  std::vector<int64_t> tokens(size_t(B), kNmtSos);
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(B));
  std::vector<bool> done(size_t(B), false);
  last_decode_ = {B, source.size(1), 0};
  for (int64_t t = 0; t < limit; ++t) {
    ++last_decode_.steps;
    const Tensor logits =
        decode_step(enc, i64_on(tokens, d), st).data().to(kCPU).to(DType::f64).contiguous();
    const double* p = logits.data<double>();
    bool all = true;
    for (int64_t b = 0; b < B; ++b) {
      const double* r = p + b * V;
      tokens[size_t(b)] = std::max_element(r, r + V) - r;  // first maximum
      if (!done[size_t(b)]) {
        if (tokens[size_t(b)] == kNmtEos)
          done[size_t(b)] = true;
        else
          out[size_t(b)].push_back(tokens[size_t(b)]);
      }
      all = all && done[size_t(b)];
    }
    if (all) break;
  }
  return out;
}

std::vector<std::vector<int64_t>> Nmt::beam_search(const Tensor& source,
                                                   const Tensor& source_length) {
  autograd::NoGradGuard ng;
  const int64_t K = cfg_.beam_width;
  AIM_CHECK(K >= 1, "nmt: beam_width must be >= 1, got ", K);
  const NmtEncoded enc0 = encode(source, source_length);
  const NmtEncoded enc = tile(enc0, K);
  const int64_t B = source.size(0), N = B * K, V = cfg_.tgt_vocab, S = source.size(1),
                limit = decode_limit(cfg_, source_length);
  const Device d = source.device();
  const double inf = std::numeric_limits<double>::infinity();
  const bool coverage = cfg_.coverage_penalty != 0;
  NmtDecoderState st = enc.initial;
  std::vector<int64_t> tokens(size_t(N), kNmtSos), lengths(size_t(N), 0);
  std::vector<double> logp(size_t(N), 0.0), acc_att(coverage ? size_t(N * S) : 0, 0.0);
  for (int64_t i = 0; i < N; ++i) logp[size_t(i)] = i % K == 0 ? 0.0 : -inf;
  std::vector<bool> finished(size_t(N), false);
  std::vector<std::vector<int64_t>> hist(static_cast<size_t>(N));  // tokens of each beam so far
  auto penalty = [&](int64_t len) {
    return std::pow((5.0 + double(len)) / 6.0, cfg_.length_penalty);
  };
  last_decode_ = {N, S, 0};
  for (int64_t t = 0; t < limit; ++t) {
    ++last_decode_.steps;
    const std::vector<double> lp = log_softmax_rows(decode_step(enc, i64_on(tokens, d), st).data());
    std::vector<double> cov(size_t(N), 0.0);
    if (coverage) {
      const Tensor al = st.align.data().to(kCPU).to(DType::f64).contiguous();
      const double* a = al.data<double>();
      for (int64_t i = 0; i < N; ++i) {
        double c = 0;
        for (int64_t s = 0; s < S; ++s) {
          const double x = (acc_att[size_t(i * S + s)] += a[i * S + s]);
          if (x != 0) c += std::log(std::min(x, 1.0));
        }
        cov[size_t(i)] = finished[size_t(i)] ? cfg_.coverage_penalty * c : 0.0;
      }
    }
    std::vector<int64_t> rows(static_cast<size_t>(N)), next_tokens(static_cast<size_t>(N)),
        next_len(static_cast<size_t>(N));
    std::vector<double> next_logp(static_cast<size_t>(N));
    std::vector<bool> next_finished(static_cast<size_t>(N));
    std::vector<std::vector<int64_t>> next_hist(static_cast<size_t>(N));
    std::vector<double> score(size_t(K * V)), total(size_t(K * V));
    std::vector<int64_t> order(size_t(K * V));
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t k = 0; k < K; ++k) {
        const int64_t i = b * K + k;
        for (int64_t v = 0; v < V; ++v) {
          const double step =
              finished[size_t(i)] ? (v == kNmtEos ? 0.0 : -inf) : lp[size_t(i * V + v)];
          const double tot = logp[size_t(i)] + step;
          const int64_t len = lengths[size_t(i)] + (!finished[size_t(i)] && v != kNmtEos ? 1 : 0);
          total[size_t(k * V + v)] = tot;
          score[size_t(k * V + v)] = tot / penalty(len) + cov[size_t(i)];
        }
      }
      std::iota(order.begin(), order.end(), int64_t(0));
      std::partial_sort(order.begin(), order.begin() + K, order.end(), [&](int64_t x, int64_t y) {
        return score[size_t(x)] > score[size_t(y)] ||
               (score[size_t(x)] == score[size_t(y)] && x < y);
      });
      for (int64_t k = 0; k < K; ++k) {
        const int64_t w = order[size_t(k)], parent = b * K + w / V, tok = w % V, i = b * K + k;
        rows[size_t(i)] = parent;
        next_tokens[size_t(i)] = tok;
        next_logp[size_t(i)] = total[size_t(w)];
        next_len[size_t(i)] = lengths[size_t(parent)] + (finished[size_t(parent)] ? 0 : 1);
        next_finished[size_t(i)] = finished[size_t(parent)] || tok == kNmtEos;
        next_hist[size_t(i)] = hist[size_t(parent)];
        next_hist[size_t(i)].push_back(tok);
      }
    }
    if (coverage) {
      std::vector<double> a(size_t(N * S));
      for (int64_t i = 0; i < N; ++i)
        std::copy_n(acc_att.begin() + rows[size_t(i)] * S, S, a.begin() + i * S);
      acc_att.swap(a);
    }
    gather_state(st, i64_on(rows, d));
    tokens.swap(next_tokens);
    lengths.swap(next_len);
    logp.swap(next_logp);
    finished.swap(next_finished);
    hist.swap(next_hist);
    if (std::all_of(finished.begin(), finished.end(), [](bool f) { return f; })) break;
  }
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t tok : hist[size_t(b * K)]) {
      if (tok == kNmtEos) break;
      out[size_t(b)].push_back(tok);
    }
  }
  return out;
}

}  // namespace aim::models
