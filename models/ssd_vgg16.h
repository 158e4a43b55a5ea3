// SSD300 with the VGG16 backbone (the shared detector: models/ssd.h): torchvision 0.14's
// `ssd300_vgg16(weights=None, weights_backbone=None, num_classes=N)`, its module tree and
// state_dict names, its MultiBox loss (SSD.compute_loss) and its post-processing
// (SSD.postprocess_detections). docs/detection.md, MODELS.md §6.1.
//
// Module tree (state_dict order as torchvision's):
//   backbone.scale_weight [512]                     conv4_3's L2Norm scale (init 20)
//   backbone.features.{0..22}                       VGG16 conv1_1 .. conv4_3 (+ ReLUs, pools;
//                                                   pool3 ceil_mode)
//   backbone.extra.0 = [pool4, conv5_1..conv5_3 (1, 3, 5), 7 = [pool5 3x3/1/1, fc6 3x3 pad 6
//                      dilation 6 (7.1), fc7 1x1 (7.3)]]
//   backbone.extra.{1..4} = [conv 1x1 (0), ReLU, conv 3x3 (2), ReLU]: 19 -> 10 (s2) -> 5 (s2)
//                      -> 3 -> 1
//   head.{classification,regression}_head.module_list.{0..5}: conv 3x3 pad 1 per feature map
// Feature maps 38, 19, 10, 5, 3, 1 (channels 512, 1024, 512, 256, 256, 256), 4, 6, 6, 6, 4, 4
// default boxes per cell: 8732 priors on a 300 x 300 image.
//
// Input: images [B, 3, S, S] (S = image_size, 300) in [0, 1], already resized; the model
// normalises them itself with torchvision's SSD300 constants, (x - mean) / std with mean (0.48235,
// 0.45882, 0.40784) and std 1/255 (GeneralizedRCNNTransform's normalisation; its resize to 300 x
// 300 is the identity on such images, and it is not done here).
// Init as torchvision with weights_backbone=None: VGG convs (features, conv5_x) kaiming_normal
// (fan_out, relu), fc6/fc7, the extra blocks and the heads xavier_uniform; biases 0.
#pragma once
#include <memory>
#include <vector>

#include "layers/sequential.h"
#include "models/ssd.h"

namespace aim::models {

class SsdVgg16 : public Ssd {
 public:
  // c.image_size must be 300 (the six maps 38, 19, 10, 5, 3, 1).
  explicit SsdVgg16(const SsdConfig& c = {});
  std::string type_name() const override { return "SSD"; }
  std::vector<Fp32Params> amp_fp32_params() const override;

  // conv4_3 after L2Norm, fc7, conv8_2 .. conv11_2.
  std::vector<Variable> features(const Variable& images) override;

 protected:
  double feature_flops(int64_t B, std::vector<Shape>& maps) const override;

 private:
  layers::Parameter scale_weight_;
  std::shared_ptr<layers::Sequential> features_;
  std::vector<std::shared_ptr<layers::Module>> extra_;  // backbone.extra.0 .. 4
};

}  // namespace aim::models
