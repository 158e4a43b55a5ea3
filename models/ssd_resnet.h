// The SSD detectors on ResNet-18/34 trunks (the shared detector: models/ssd.h; MODELS.md §6.2,
// §6.4; docs/detection.md).
//
// SsdResnet34: MLPerf training's SSD300 (mlcommons/training single_stage_detector/ssd, the
// ResNet-34 reference of v0.5 .. v1.1: ssd300.py, base_model.py, utils.py), its module tree and
// state_dict names:
//   model.layer1.{0..5}   torchvision resnet34's conv1 (0), bn1 (1), relu, maxpool 3/2/1,
//                         layer1 (4: 3 BasicBlocks, 64), layer2 (5: 4 BasicBlocks, 128, stride 2)
//   model.layer2.0        torchvision's layer3 (6 BasicBlocks, 256) with its first block's
//                         stride set to 1 (conv1 and downsample.0): 38 x 38 x 256
//   additional_blocks.{0..4}.{0,2}: conv 1x1 -> ReLU -> conv 3x3 -> ReLU (biases): 256 -> 512 s2
//                         (19), 512 -> 512 s2 (10), 512 -> 256 s2 (5), 256 -> 256 valid (3),
//                         256 -> 256 valid (1); the 1x1 widths 256, 256, 128, 128, 128
//   loc.{0..5}, conf.{0..5}: conv 3x3 pad 1, nd 4 and nd num_classes channels (nd 4, 6, 6, 6, 4, 4)
// Heads in the reference's [N, 4, nd H W] / [N, C, nd H W] view (SsdHeadLayout::size_major), its
// default boxes (DefaultBoxes(300, [38, 19, 10, 5, 3, 1], [8, 16, 32, 64, 100, 300],
// [21 .. 315], ARs [[2], [2, 3], [2, 3], [2, 3], [2], [2]]): size-major, clamped, 8732).
// Input [0, 1] RGB normalised with ImageNet's mean (0.485, 0.456, 0.406) and std (0.229, 0.224,
// 0.225) (its SSDTransformer). BN in training mode (batch statistics) as the reference trains.
// Init: the trunk as torchvision's resnet34 without weights (convs kaiming_normal fan_out, BN 1,
// 0); the additional blocks' and heads' weights xavier_uniform, their biases PyTorch's default
// (the reference re-initialises only parameters of dim > 1).
// Loss (reference_config): its Loss module: per image (smooth L1 of positives + CE of positives and
// 3:1 hard negatives) / the image's positives, 0 for an image without any, mean over the batch
// (loss_per_image); its Encoder matches a prior at IoU > 0.5 (strictly; see reference_config).
#pragma once
#include <memory>
#include <vector>

#include "layers/sequential.h"
#include "models/ssd.h"

namespace aim::models {

class SsdResnet34 : public Ssd {
 public:
  // The reference's settings on top of SsdConfig's defaults: loss_per_image; iou_thresh the f32
  // after 0.5 (the shared matcher takes IoU >= threshold, the reference's Encoder IoU > 0.5: for
  // f32 IoUs the same); the evaluation's post-processing (coco_eval + Encoder.decode_batch):
  // score > 0.05, the best 200 per class, NMS dropping IoU >= 0.5 (nms_thresh the f32 before 0.5,
  // as the shared NMS drops IoU > threshold), 200 per image.
  static SsdConfig reference_config();
  // c.image_size must be 300 (the six maps 38, 19, 10, 5, 3, 1).
  explicit SsdResnet34(const SsdConfig& c = reference_config());
  std::string type_name() const override { return "SSD300"; }
  std::vector<Fp32Params> amp_fp32_params() const override;

  // layer3's output (38 x 38), then the five additional blocks'.
  std::vector<Variable> features(const Variable& images) override;

 protected:
  double feature_flops(int64_t B, std::vector<Shape>& maps) const override;

 private:
  std::shared_ptr<layers::Sequential> layer1_, layer2_;     // model.layer1, model.layer2
  std::vector<std::shared_ptr<layers::Sequential>> extra_;  // additional_blocks.0 .. 4
};

}  // namespace aim::models
