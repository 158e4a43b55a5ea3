// CTC (connectionist temporal classification): the loss with PyTorch's F.ctc_loss semantics, its
// gradient, and greedy / prefix-beam-search decoding. Math, gradient, conventions and the
// workspace layout: kernels/loss/CTC.md.
//
// Shapes (T time steps, B samples, C classes including the blank, S target capacity):
//   log_probs      [T, B, C] time-major, already log-softmaxed over C; f32 f64 f16 bf16
//                  (16-bit inputs are computed in f32)
//   targets        [B, S] padded (entries past target_lengths[b] are ignored), or the 1-D
//                  concatenated form [sum(target_lengths)]; i32 or i64; on log_probs' device.
//                  Every used target is in [0, C) and differs from the blank.
//   input_lengths  [B] i32/i64 on the CPU, 0 <= len <= T (the kernels plan from them; CUDA
//   target_lengths [B] i32/i64 on the CPU, 0 <= len <= S     variants copy them to the device)
//   loss           [B] (none) or [] (mean, sum); f32 for f32/f16/bf16 inputs, f64 for f64
//   log_alpha      [B, T, 2*S+1] loss dtype: the forward variables, saved for the backward.
//                  S = targets.size(1) (padded) or max(target_lengths) (1-D form):
//                  ctc_log_alpha_shape(). Entries t >= input_lengths[b] or
//                  s >= 2*target_lengths[b]+1 are -inf.
//   dloss          like loss; dlog_probs [T, B, C] log_probs' dtype: written (=)
// Decoders: labels [B, T] i64 (-1 past the decoded length), lengths [B] i64, log_prob [B] loss
// dtype; input_lengths optional (undefined: every length is T).
#pragma once
#include <vector>

#include "kernels/loss/loss.h"

namespace aim::kernels {

struct CtcFwdArgs {
  Tensor log_probs;                      // [T, B, C]
  Tensor targets;                        // [B, S] or [sum(target_lengths)], i32/i64
  Tensor input_lengths, target_lengths;  // [B] i32/i64 on the CPU
  Tensor loss;                           // [B] (none) or []: written
  Tensor log_alpha;                      // [B, T, 2S+1]: written (the backward's workspace)
  int64_t blank = 0;
  Reduction reduction = Reduction::mean;
  bool zero_infinity = false;  // infinite losses (infeasible samples) become 0
  Device device() const { return log_probs.device(); }
  DType dtype() const { return log_probs.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("log_probs", s.log_probs), f.in("targets", s.targets);
    f.host_in("input_lengths", s.input_lengths);
    f.host_in("target_lengths", s.target_lengths);
    f.out("loss", s.loss), f.out("log_alpha", s.log_alpha);
    f.param("blank", s.blank), f.param("reduction", s.reduction);
    f.param("zero_infinity", s.zero_infinity);
  }
};

struct CtcBwdArgs {
  Tensor dloss;                                              // [B] (none) or []
  Tensor log_probs, targets, input_lengths, target_lengths;  // as the forward
  Tensor log_alpha;                                          // the forward's
  Tensor dlog_probs;                                         // [T, B, C]: written (=)
  int64_t blank = 0;
  Reduction reduction = Reduction::mean;
  bool zero_infinity = false;
  Device device() const { return log_probs.device(); }
  DType dtype() const { return log_probs.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("dloss", s.dloss), f.in("log_probs", s.log_probs), f.in("targets", s.targets);
    f.host_in("input_lengths", s.input_lengths);
    f.host_in("target_lengths", s.target_lengths);
    f.in("log_alpha", s.log_alpha), f.out("dlog_probs", s.dlog_probs);
    f.param("blank", s.blank), f.param("reduction", s.reduction);
    f.param("zero_infinity", s.zero_infinity);
  }
};

// Best path: argmax class per step, repeats merged (when merge_repeated), blanks dropped.
struct CtcGreedyDecodeArgs {
  Tensor log_probs;      // [T, B, C] (any monotone scores give the same labels)
  Tensor input_lengths;  // [B] i32/i64 on the CPU, or undefined (all T)
  Tensor labels;         // [B, T] i64: written, -1 past lengths[b]
  Tensor lengths;        // [B] i64: written
  Tensor log_prob;       // [B] loss dtype: sum over steps of the max log_prob, or undefined
  int64_t blank = 0;
  bool merge_repeated = true;  // TF's ctc_greedy_decoder default
  Device device() const { return log_probs.device(); }
  DType dtype() const { return log_probs.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("log_probs", s.log_probs), f.host_in_opt("input_lengths", s.input_lengths);
    f.out("labels", s.labels), f.out("lengths", s.lengths), f.out_opt("log_prob", s.log_prob);
    f.param("blank", s.blank), f.param("merge_repeated", s.merge_repeated);
  }
};

// Prefix beam search (TF's ctc_beam_search_decoder, top path only): keeps the beam_width most
// probable label prefixes, each scored by its probability summed over all its alignments.
struct CtcBeamDecodeArgs {
  Tensor log_probs;      // [T, B, C], log-softmaxed
  Tensor input_lengths;  // [B] i32/i64 on the CPU, or undefined (all T)
  Tensor labels;         // [B, T] i64: written, -1 past lengths[b]
  Tensor lengths;        // [B] i64: written
  Tensor log_prob;       // [B] loss dtype: log-probability of the best prefix: written
  int64_t blank = 0;
  int64_t beam_width = 100;  // TF's default
  // TF's default: consecutive equal labels of the best prefix are merged in the output (also
  // when the prefix has a blank between them, as TF does).
  bool merge_repeated = true;
  Device device() const { return log_probs.device(); }
  DType dtype() const { return log_probs.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("log_probs", s.log_probs), f.host_in_opt("input_lengths", s.input_lengths);
    f.out("labels", s.labels), f.out("lengths", s.lengths), f.out("log_prob", s.log_prob);
    f.param("blank", s.blank), f.param("beam_width", s.beam_width);
    f.param("merge_repeated", s.merge_repeated);
  }
};

// What every variant needs from the host: sizes, per-sample lengths and where each sample's
// targets start in `targets` (validated: the "[op] ..." errors name the tensor and the value).
struct CtcPlan {
  int64_t T = 0, B = 0, C = 0;
  int64_t S = 0, L = 1;  // target capacity; extended length 2S+1 (the workspace's last dim)
  std::vector<int64_t> input_len, target_len, target_off;  // [B] each
};
// check_labels: validate the used targets on the host when they are on the CPU (false: the
// caller checks them on the device -- the CUDA variants, also when emulated on CPU tensors).
CtcPlan check_ctc_fwd_args(const CtcFwdArgs& a, bool check_labels = true);
CtcPlan check_ctc_bwd_args(const CtcBwdArgs& a, bool check_labels = true);
CtcPlan check_ctc_greedy_args(const CtcGreedyDecodeArgs& a);
CtcPlan check_ctc_beam_args(const CtcBeamDecodeArgs& a);
// "[op] target <v> at targets[<b>, <i>] ..." (the CPU check's message; CUDA variants record a bad
// target on the device, and kernels::check_device_errors throws the same text: error_flag.h).
[[noreturn]] void ctc_target_error(const char* op, int64_t b, int64_t i, int64_t value, int64_t C,
                                   int64_t blank);

// The shape of log_alpha for these arguments ([B, T, 2S+1]; target_lengths on the CPU).
Shape ctc_log_alpha_shape(const Tensor& log_probs, const Tensor& targets,
                          const Tensor& target_lengths);

// ---- costs: compulsory work from shapes (alpha/beta: ~8 flops per lattice node) ----
inline Cost ctc_fwd_cost(const CtcFwdArgs& a) {
  const double T = double(a.log_probs.size(0)), B = double(a.log_probs.size(1)),
               L = double(a.log_alpha.size(2));
  const double e = double(dtype_size(a.log_probs.dtype())),
               s = double(dtype_size(loss_dtype(a.log_probs.dtype())));
  return Cost{8 * T * B * L, T * B * L * e + double(a.targets.nbytes()),
              T * B * L * s + double(a.loss.nbytes())};
}
inline Cost ctc_bwd_cost(const CtcBwdArgs& a) {
  const double T = double(a.log_probs.size(0)), B = double(a.log_probs.size(1)),
               C = double(a.log_probs.size(2)), L = double(a.log_alpha.size(2));
  const double e = double(dtype_size(a.log_probs.dtype())),
               s = double(dtype_size(loss_dtype(a.log_probs.dtype())));
  return Cost{12 * T * B * L + 3 * T * B * C,
              T * B * C * e + T * B * L * s + double(a.targets.nbytes()), T * B * C * e};
}
inline Cost ctc_greedy_decode_cost(const CtcGreedyDecodeArgs& a) {
  const double n = double(a.log_probs.numel()), T = double(a.log_probs.size(0)),
               B = double(a.log_probs.size(1));
  return Cost{n, n * double(dtype_size(a.log_probs.dtype())), (T + 2) * B * 8};
}
inline Cost ctc_beam_decode_cost(const CtcBeamDecodeArgs& a) {
  const double n = double(a.log_probs.numel()), T = double(a.log_probs.size(0)),
               B = double(a.log_probs.size(1)), W = double(a.beam_width);
  return Cost{6 * n * W, n * double(dtype_size(a.log_probs.dtype())), (T + 2) * B * 8};
}

void ctc_fwd(const CtcFwdArgs& a);
void ctc_bwd(const CtcBwdArgs& a);
void ctc_greedy_decode(const CtcGreedyDecodeArgs& a);
void ctc_beam_decode(const CtcBeamDecodeArgs& a);

}  // namespace aim::kernels
