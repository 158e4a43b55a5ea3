// The single-shot detector shared by the SSD family (ssd_vgg16, ssd_resnet34, ssd_resnet18, dssd;
// docs/detection.md, MODELS.md §6): a backbone gives feature maps, one 3x3 conv per map predicts
// class logits and box codes per default box, the MultiBox loss trains them and the
// post-processing turns them into detections. A subclass builds its backbone and head convs under
// its reference's parameter names and says how the head's channels map to default boxes;
// everything after the head convs is here, once.
//
// Canonical head outputs, in the order of the model's default boxes ("priors"): cls_logits
// [B, P, num_classes], bbox_regression [B, P, 4] (codes with weights (10, 10, 5, 5), i.e.
// variances (0.1, 0.2)).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/random/random.h"
#include "layers/conv.h"
#include "layers/module.h"
#include "models/detection/box_coder.h"
#include "models/model.h"

namespace aim::models {

using autograd::Variable;

struct SsdConfig {
  int64_t num_classes = 21;  // including background (class 0): VOC
  int64_t image_size = 300;  // the model's input side (300 for SSD300; 321 for the Caffe models)
  // Every channel count divided by this (1: the reference's network; the registry's size=tiny
  // uses 8: the same maps and priors, 1/64 of the conv FLOPs).
  int64_t width_divisor = 1;
  uint64_t seed = 0;
  // Post-processing (torchvision's SSD defaults; MLPerf evaluates with 0.05, 0.5, 200).
  float score_thresh = 0.01f;
  float nms_thresh = 0.45f;
  int64_t detections_per_img = 200;
  int64_t topk_candidates = 400;
  // Loss.
  double neg_to_pos_ratio = 3.0;  // (1 - positive_fraction) / positive_fraction, 0.25
  float iou_thresh = 0.5f;        // a prior matches its best object at IoU >= this
  // torchvision's SSDMatcher (each object's best prior forced) or Caffe's bipartite then
  // per-prediction MatchBBox (models/detection/ssd_matcher.h).
  bool caffe_matching = false;
  // How the loss is normalised: torchvision divides both sums by the positives of the whole batch;
  // MLPerf's SSD (per_image) divides each image's sum by its own positives (an image without any
  // adds 0) and averages over the batch.
  bool loss_per_image = false;
};

// How a head conv's channels at one map become default boxes.
enum class SsdHeadLayout {
  // torchvision's SSDScoringHead: [N, A K, H, W] -> view(N, A, K, H, W) -> permute(0, 3, 4, 1, 2)
  // -> [N, H W A, K]: per cell (row-major) its A boxes.
  cell_major,
  // MLPerf's SSD300 (and Caffe's permute + flatten is cell_major): [N, A K, H, W] -> view(N, K,
  // A H W): channel k A + a is value k of box a; per box size every cell (size-major priors).
  size_major,
};

// The two head outputs (canonical layout, see the file comment).
struct SsdHeadOutputs {
  Variable cls_logits, bbox_regression;
};

// A batch's ground truth, padded: boxes [B, G, 4] f32 (x1, y1, x2, y2 in pixels of the S x S
// image), labels [B, G] i64 (1 .. num_classes - 1), num_boxes [B] i64 (image b's objects are its
// first num_boxes[b] rows; the rest is padding and ignored). Host or device tensors.
struct SsdTargets {
  Tensor boxes, labels, num_boxes;
};

// The loss terms, normalised as SsdConfig::loss_per_image says; the training loss is their sum
// (torchvision's references/detection/train.py sums the dict; MLPerf adds them before dividing).
struct SsdLoss {
  Variable bbox_regression;  // smooth_l1 (beta 1, sum) of positives' encoded targets / N
  Variable classification;   // (CE of positives + CE of the 3:1 hard negatives) / N
  Variable total;            // bbox_regression + classification
  int64_t num_foreground = 0;
};

// One image's detections, best first: boxes [D, 4] f32 (clipped to the image), scores [D] f32,
// labels [D] i64; D <= detections_per_img. Host tensors.
struct SsdDetections {
  Tensor boxes, scores, labels;
};

class Ssd : public Model {
 public:
  // Model (aim-train / aim-infer): batches of the detection sources (docs/detection.md): "images"
  // [B, 3, S, S] in [0, 1]; to train also "boxes" [B, G, 4], "labels" [B, G], "num_boxes" [B];
  // outputs the two head tensors (post-processing: postprocess()).
  std::vector<TensorSpec> input_specs() const override;
  std::vector<TensorSpec> label_specs() const override;
  std::vector<TensorSpec> output_specs() const override;
  TensorMap infer(const TensorMap& batch) override;
  Variable training_loss(const TensorMap& batch) override;
  double forward_flops(const TensorMap& batch) const override;
  // postprocess() on infer()'s outputs: "boxes" [B, D, 4] f32, "scores" [B, D] f32, "labels"
  // [B, D] i64 (D = detections_per_img, padded with zeros), "num_detections" [B] i64.
  bool has_postprocess() const override { return true; }
  TensorMap postprocess_outputs(const TensorMap& host_outputs) const override;
  // The targets stay on the CPU (the matching runs there): a GPU step reads nothing back.
  TensorMap host_metadata(const TensorMap& host_batch) const override;
  const SsdConfig& config() const { return c_; }
  const std::string& name() const { return name_; }

  // images [B, 3, S, S] in [0, 1] -> (images - mean) / std, checked for shape.
  Variable normalize(const Variable& images) const;
  // images [B, 3, S, S] in [0, 1] -> the feature maps the heads read, largest first.
  virtual std::vector<Variable> features(const Variable& images) = 0;
  SsdHeadOutputs forward_heads(const Variable& images);
  // SSDMatcher per image on the host, then the MultiBox loss on the head outputs' device.
  // Hard negatives are kernels/boxes' hard_negatives: k = min(3 positives, negatives) per image;
  // torchvision's `idx.sort(1)[1] < num_negative` (and MLPerf's rank) equals it unless 3 positives
  // > negatives (over a quarter of the priors positive), where it would count positives' losses a
  // second time.
  SsdLoss compute_loss(const SsdHeadOutputs& out, const SsdTargets& targets) const;
  SsdLoss training_loss(const Variable& images, const SsdTargets& targets) {
    return compute_loss(forward_heads(images), targets);
  }
  // torchvision's postprocess_detections (host): softmax, decode, clip, per class score >
  // score_thresh and top-k, batched NMS, keep detections_per_img. Equal scores go lower prior
  // first (top-k) and lower candidate first (NMS); torch's topk leaves the order of exact ties
  // unspecified, so only then can the order of two detections differ.
  std::vector<SsdDetections> postprocess(const SsdHeadOutputs& out) const;

  // The default boxes (x1, y1, x2, y2) in pixels, [P, 4] f32 on the host, in the heads' order.
  const Tensor& anchors() const { return anchors_; }
  int64_t num_priors() const { return anchors_.size(0); }
  // Analytic forward FLOPs (normalisation, backbone, heads) of a batch of B images.
  double forward_flops(int64_t B) const;

 protected:
  Ssd(std::string name, const SsdConfig& c);
  // Subclasses call these from their constructors, after building their backbone.
  // The head convs per feature map (registered as the subclass's children under its names), the
  // default boxes per cell of each map and how the channels are laid out.
  void set_heads(std::vector<std::shared_ptr<layers::Conv2d>> cls,
                 std::vector<std::shared_ptr<layers::Conv2d>> reg, std::vector<int64_t> per_cell,
                 SsdHeadLayout layout);
  // The expected feature map sizes (checked on every forward) and the default boxes as (x1, y1,
  // x2, y2) in pixels, [P, 4], in the heads' order.
  void set_priors(std::vector<int64_t> map_sizes, const Tensor& anchors_xyxy);
  // Per-channel normalisation of the [0, 1] input: (x - mean) / std.
  void set_normalization(const std::vector<double>& mean, const std::vector<double>& stdv);
  // FLOPs of features() for a batch of B images; the output shapes of the maps into `maps`.
  virtual double feature_flops(int64_t B, std::vector<Shape>& maps) const = 0;
  // Checks the maps' count and sizes (after features()).
  void check_maps(const std::vector<Variable>& maps) const;

  SsdConfig c_;

 private:
  std::string name_;
  std::vector<std::shared_ptr<layers::Conv2d>> cls_, reg_;
  std::vector<int64_t> per_cell_, map_sizes_;
  SsdHeadLayout layout_ = SsdHeadLayout::cell_major;
  Tensor anchors_;     // [P, 4] xyxy pixels
  Tensor mean_, std_;  // [1, 3, 1, 1] f64 (cast to the input's dtype/device on use)
  detection::BoxCoderWeights coder_;
};

// Building blocks the SSD models share (their references' inits and containers).
namespace ssd_parts {

// A named container (torchvision's SSDFeatureExtractorVGG, SSDHead, ...): only holds parameters
// and children under their names; the model runs the computation.
class Container : public layers::Module {
 public:
  explicit Container(std::string type) : type_(std::move(type)) {}
  std::string type_name() const override { return type_; }
  layers::Parameter add_param(const std::string& name, Tensor t) {
    return param(name, std::move(t));
  }
  template <class M>
  std::shared_ptr<M> add(const std::string& name, std::shared_ptr<M> m) {
    return child(name, std::move(m));
  }

 private:
  std::string type_;
};

std::shared_ptr<layers::Conv2d> conv(int64_t in, int64_t out, int64_t k,
                                     const layers::ConvOptions& o, uint64_t& seed);
// Re-initialisations as PyTorch's nn.init (weights; biases 0 where the reference zeroes them).
void kaiming_fan_out(layers::Conv2d& c, kernels::Generator& gen);
void xavier_uniform(layers::Conv2d& c, kernels::Generator& gen, bool zero_bias = true);
// Every Conv2d below m, in registration order.
void for_each_conv(layers::Module& m, const std::function<void(layers::Conv2d&)>& f);
std::string shape_str(const Shape& s);

}  // namespace ssd_parts

}  // namespace aim::models
