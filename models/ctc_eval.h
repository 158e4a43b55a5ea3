// The evaluation loop the CTC models share (crnn, deepspeech): n evaluation samples in chunks,
// each batch's padded labels ("label" [B, S], "label_length") beside the model's decoded output
// ("decoded" [B, T], -1 past "decoded_length"), as class-index lists for the model's metric.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/source.h"
#include "models/model.h"

namespace aim::models {

struct DecodedSequences {
  std::vector<std::vector<int64_t>> labels, preds;  // one list per sample, in order
};

// Eval mode and no autograd for the loop (the model's mode is restored); `what` names the model in
// the error for an n outside the evaluation set.
DecodedSequences ctc_eval_sequences(Model& m, const data::BatchSource& src, int64_t n, Device dev,
                                    int64_t chunk, const std::string& what);

}  // namespace aim::models
