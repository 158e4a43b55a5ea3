// MjsynthSource: the MJSynth / Synth90k layout CRNN's reference reads (MODELS.md §5.1,
// docs/crnn.md):
//   DIR/lexicon.txt               one word per line; line k (0-based) is lexicon index k
//   DIR/annotation_train.txt      lines "<relative image path> <lexicon index>" (training stream)
//   DIR/annotation_val.txt        the same (held-out set; annotation_test.txt when there is no
//                                 annotation_val.txt)
// Image paths are relative to DIR (MJSynth's "./3000/7/182_slinking_71711.jpg"). The label is
// the lexicon word lowercased, as class indices (0-9 -> 0..9, a-z -> 10..35). Every annotation
// line is checked when the source is built: a malformed line, an index outside the lexicon, a
// word with a character outside 0-9a-z or longer than 25 characters (the reference's maximum)
// is an error "file:line: what is wrong". Images are decoded when a batch is made (JPEG/PNG,
// data/image_decode.h), converted to BGR and resized to 32x100 with cv2.INTER_LINEAR's rule
// (half-pixel centres, edge clamp, no antialiasing; rounded to 8 bits), as the reference's
// write_tfrecords.py does.
//
// Batches: "input" f32 [B, 3, 32, 100] BGR in [0, 255], "label" i64 [B, S] (-1 padded, S = the
// longest label of the batch), "label_length" i64 [B]. The training stream walks
// annotation_train.txt in a Philox-keyed permutation per epoch (seed, epoch).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/source.h"

namespace aim::data {

// One annotation file parsed and checked against the lexicon.
struct MjsynthSplit {
  std::string file;                // the annotation file (for messages)
  std::vector<std::string> paths;  // absolute image paths
  std::vector<std::string> words;  // lowercased lexicon words
};

// Parses `annotation` (lines "<relpath> <lexicon index>", paths relative to root) against the
// lexicon; errors name file:line.
MjsynthSplit read_mjsynth_split(const std::string& root, const std::string& annotation,
                                const std::vector<std::string>& lexicon,
                                const std::string& lexicon_file);
// The lexicon's words, one per line (trailing '\r' removed); an empty line is an error.
std::vector<std::string> read_mjsynth_lexicon(const std::string& path);

// cv2.resize(img, (out_w, out_h), interpolation=INTER_LINEAR) of 8-bit RGB `rgb` [h, w, 3],
// written as BGR planes out[3, out_h, out_w] (float pixel values, rounded to integers).
void resize_bgr_planes(const uint8_t* rgb, int64_t h, int64_t w, int64_t out_h, int64_t out_w,
                       float* out);

class MjsynthSource : public BatchSource {
 public:
  static constexpr int64_t kHeight = 32, kWidth = 100, kMaxLabel = 25;

  MjsynthSource(const std::string& root, uint64_t seed);

  std::string describe() const override;
  std::string fingerprint() const override;
  TensorMap next(int64_t batch_size) override;
  int64_t position() const override { return pos_; }
  void seek(int64_t position) override;
  int64_t epoch_size() const override { return int64_t(train_.paths.size()); }
  int64_t eval_size() const override { return int64_t(eval_.paths.size()); }
  TensorMap eval_batch(int64_t start, int64_t count) const override;

  const MjsynthSplit& train() const { return train_; }
  const MjsynthSplit& eval() const { return eval_; }

 private:
  TensorMap batch(const MjsynthSplit& s, const std::vector<int64_t>& rows) const;
  int64_t train_row(int64_t position);  // the annotation row of stream position

  std::string root_;
  uint64_t seed_;
  MjsynthSplit train_, eval_;
  int64_t pos_ = 0;
  int64_t perm_epoch_ = -1;
  std::vector<int64_t> perm_;
};

}  // namespace aim::data
