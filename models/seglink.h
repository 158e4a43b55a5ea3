// SegLink (MODELS.md §5.2; bgshih/seglink's model.py and model_cnn.py): oriented text detection by
// segments and links on six feature maps of an SSD-style VGG16. docs/seglink.md.
//
// Module tree (parameter names follow the reference's TF scopes, ssd/vgg16/conv1_1/weight ->
// vgg16.conv1_1.weight):
//   vgg16.conv1_1 .. conv5_3 (3x3 SAME + ReLU; 2x2/2 SAME max pools after conv1_2, conv2_2,
//     conv3_3, conv4_3), pool5 3x3/1 SAME, vgg16.fc6 (3x3, dilation 6, 1024), vgg16.fc7 (1x1,
//     1024); conv1_x and conv2_x are frozen (the reference stops the gradient after pool2)
//   conv4_3_scale [512]: conv4_3's L2 normalisation scale (init 20)
//   conv8_1 (1x1 256), conv8_2 (3x3/2 SAME 512), conv9_1 (1x1 128), conv9_2 (3x3/2 256),
//   conv10_1 (1x1 128), conv10_2 (3x3/2 256), conv11 (3x3/2 256), all + ReLU
//   det_{1..6}.conv_cls (2), .conv_lnk (2 x 8 on det_1, 2 x 12 on the others), .conv_reg (6):
//     3x3 SAME on conv4_3 (normalised), fc7, conv8_2, conv9_2, conv10_2, conv11
// Maps at 384 x 384: 48, 24, 12, 6, 3, 2. "SAME" is TensorFlow's: a stride-2 conv on an even
// side pads one row / column after, none before (layers' tf_same).
//
// Input: images [B, 3, S, S] RGB in [0, 1]; the model computes 255 x - (123, 117, 104) (the
// reference's BGR mean in RGB order: it feeds BGR, so its converted weights need conv1_1's input
// channels reversed). Init: weights xavier-uniform-like as the reference's default, biases 0.
//
// Loss (model.py build_loss): the targets of models/detection/seglink.h (segment labels, offsets
// / variances, 8 within- and 4 cross-layer link labels); segments and links each: softmax CE of
// the positives plus the k = min(3 positives, negatives) hardest negatives, mined over the whole
// batch (every image and layer together), / max(1, positives); offsets: smooth L1 (beta 1) of the
// positive segments / max(1, positive segments); the sum of the three. (Weight decay 5e-4 is the
// optimizer's, on every trainable tensor: the reference spares biases and the scale.)
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "layers/conv.h"
#include "layers/sequential.h"
#include "models/detection/seglink.h"
#include "models/model.h"

namespace aim::models {

using autograd::Variable;

struct SeglinkModelConfig {
  int64_t image_size = 384;
  int64_t width_divisor = 1;  // size=tiny: 8
  uint64_t seed = 0;
  double neg_to_pos_ratio = 3.0;
  detection::SeglinkThresholds thresholds;  // node 0.9, link 0.7 (test_ic15.json)
};

// Head outputs in models/detection/seglink.h's dense order: seg_logits [B, P, 2] (class 1 =
// text), link_logits [B, L, 2], offsets [B, P, 6] (divided by the variances).
struct SeglinkHeadOutputs {
  Variable seg_logits, link_logits, offsets;
};

struct SeglinkLoss {
  Variable seg_cls, link_cls, offset, total;
  int64_t positive_segments = 0, positive_links = 0;
};

class Seglink : public Model {
 public:
  explicit Seglink(const SeglinkModelConfig& c = {});
  std::string type_name() const override { return "SegLink"; }

  // "images" [B, 3, S, S]; to train also "quads" [B, G, 8], "num_boxes" [B], "dont_care" [B, G].
  std::vector<TensorSpec> input_specs() const override;
  std::vector<TensorSpec> label_specs() const override;
  std::vector<TensorSpec> output_specs() const override;
  TensorMap infer(const TensorMap& batch) override;
  Variable training_loss(const TensorMap& batch) override;
  double forward_flops(const TensorMap& batch) const override;
  std::vector<Fp32Params> amp_fp32_params() const override;
  TensorMap host_metadata(const TensorMap& host_batch) const override;
  // Decoding and combination per image (aim-infer --postprocess): "quads" [B, D, 8] f32, "scores"
  // [B, D] f32, "num_detections" [B] i64 (D: the most of any image, at least 1).
  bool has_postprocess() const override { return true; }
  TensorMap postprocess_outputs(const TensorMap& host_outputs) const override;

  const SeglinkModelConfig& config() const { return c_; }
  const detection::SeglinkConfig& geometry() const { return geo_; }
  const detection::SeglinkLayout& layout() const { return layout_; }

  Variable normalize(const Variable& images) const;
  // The six maps the heads read (conv4_3 after its L2 normalisation first).
  std::vector<Variable> features(const Variable& images);
  SeglinkHeadOutputs forward_heads(const Variable& images);
  // quads [B, G, 8], num_boxes [B], dont_care [B, G] (or undefined): host tensors.
  SeglinkLoss compute_loss(const SeglinkHeadOutputs& out, const Tensor& quads,
                           const Tensor& num_boxes, const Tensor& dont_care) const;
  // Per image, the combined words (softmax, decode_segments_links, combine_segments).
  std::vector<std::vector<detection::SeglinkDetection>> detect(const SeglinkHeadOutputs& out) const;
  double forward_flops(int64_t B) const;

 private:
  SeglinkModelConfig c_;
  detection::SeglinkConfig geo_;
  detection::SeglinkLayout layout_;
  std::shared_ptr<layers::Sequential> frozen_, vgg_rest_, fc_;  // conv1-pool2, conv3-conv4_3, fc
  std::shared_ptr<layers::Sequential> pool4_conv5_;
  layers::Parameter scale_;
  std::vector<std::shared_ptr<layers::Sequential>> extra_;  // conv8 .. conv11
  std::vector<std::shared_ptr<layers::Conv2d>> cls_, lnk_, reg_;
};

}  // namespace aim::models
