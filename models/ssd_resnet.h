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

#include "layers/batchnorm.h"
#include "layers/conv.h"
#include "layers/pooling.h"
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

// SsdResnet18: AI Matrix's SSD_ResNet18_Caffe (MODELS.md §6.2: DSSD's Caffe,
// examples/ssd/ssd_pascal_resnet18_321.py with model_libs.py's ResNet18Body), 321 x 321. Its
// Caffe layers under torchvision resnet18's names for the trunk (Caffe's conv + BatchNorm + Scale
// is one conv + BatchNorm2d), extras.* and loc.* / conf.* for the rest:
//   conv1 7x7/2 pad 3, bn1, ReLU, max pool 3/2 (Caffe's rounding up: 161 -> 80)
//   layer1..layer4 (res2a..res5b): 2 BasicBlocks each, 64, 128, 256, 512; every stage's first
//                 block projects (downsample.{0,1}: res2a too, unlike torchvision); 80, 40, 20, 10
//   extras.{0,1}  conv6 1x1 256 (no bias) + BN, ReLU; extras.{3,4} conv7 3x3/2 pad 1 512 + BN,
//                 ReLU: 5 x 5
//   loc.{0..3}, conf.{0..3}: conv 3x3 pad 1 (biases) on res3b_relu (layer2, 40), res4b_relu
//                 (layer3, 20), res5b_relu (layer4, 10), conv7_relu (5): 8 boxes per cell, Caffe's
//                 permute + flatten (SsdHeadLayout::cell_major); 17000 priors
// Priors: Caffe's PriorBox (detection::ssd_resnet18_321_prior_layers()). BNs with Caffe's eps
// 1e-3 and moving_average_fraction 0.999: the buffers torchvision's average at momentum 0.001,
// evaluation dividing out its start (0, 1) as Caffe's scale factor does (Caffe's unbiased
// estimate; ssd_resnet.cpp's CaffeBatchNorm2d). BN in training mode (batch statistics): the
// reference's ConvBNLayer leaves use_global_stats unset, which Caffe takes as false in TRAIN. Input
// [0, 1] RGB, 255 x - mean with Caffe's means 104, 117, 123 (BGR) given to their colours, then
// reordered to BGR as dssd does. Init: the reference's fillers (it starts from a pretrained
// resnet-18.caffemodel, not reproduced): convs before a BN gaussian std 0.01, BN 1 and 0, heads
// Caffe's xavier (uniform
// +-sqrt(3 / fan_in)) with biases 0.
// Loss (reference_config): MultiBoxLoss with PER_PREDICTION matching at 0.5 (caffe_matching),
// MAX_NEGATIVE 3:1, loc_weight 1, normalisation VALID (both sums / the batch's matches);
// post-processing as its DetectionOutput (score 0.01, top 400, NMS 0.45, keep 200): SsdConfig's
// defaults.
class SsdResnet18 : public Ssd {
 public:
  static SsdConfig reference_config();
  // c.image_size must be 321 (the maps 40, 20, 10, 5).
  explicit SsdResnet18(const SsdConfig& c = reference_config());
  std::string type_name() const override { return "SSD_ResNet18"; }
  std::vector<Fp32Params> amp_fp32_params() const override;

  // layer2's, layer3's, layer4's and conv7's outputs.
  std::vector<Variable> features(const Variable& images) override;

 protected:
  double feature_flops(int64_t B, std::vector<Shape>& maps) const override;

 private:
  std::shared_ptr<layers::Conv2d> conv1_;
  std::shared_ptr<layers::BatchNorm2d> bn1_;
  std::shared_ptr<layers::MaxPool2d> maxpool_;
  std::vector<std::shared_ptr<layers::Sequential>> layers_;  // layer1 .. layer4
  std::shared_ptr<layers::Sequential> extras_;
};

}  // namespace aim::models
