// SegLink's training augmentation (issue 21; docs/seglink.md), as bgshih/seglink's data.py
// `train_preprocess` does it with its ops `sample_crop_bbox` and `project_polygons`. Each sample's
// augmentation is a pure function of a Philox stream (data/philox_draw.h: key, first block), so it
// depends only on (seed, stream position): deterministic and resumable.
//
//   1. the words' envelopes (axis-aligned bounds of every quadrilateral, don't-care words too:
//      the reference keeps them);
//   2. six crop samplers, min_overlap 0.1, 0.3, 0.5, 0.7, 0.9, 0 in "coverage" mode (the
//      reference's default flag): up to 50 trials each of a crop of side s ~ U(0.3, 1) x the
//      image's shorter side and aspect ar ~ U(max(0.5, (s / short)^2), min(2, (short / s)^2)),
//      w = s sqrt(ar), h = s / sqrt(ar), top left ~ U(0, W - 1 - w) x U(0, H - 1 - h), the box
//      clamped to [0, W - 1] x [0, H - 1]; a trial succeeds when some envelope has
//      area(envelope n crop) / (area(envelope) + 1e-6) >= min_overlap (so min_overlap 0 succeeds
//      whenever there is a word, and none succeeds without words);
//   3. the crop: one of {the whole image (0, 0, W - 1, H - 1)} + the successful samplers' crops,
//      uniformly; its corners rounded half to even (tf.round) give the inclusive pixel slice;
//   4. the slice resized to out_h x out_w by one of TF1's area, bicubic, bilinear, nearest resizes
//      (uniformly; align_corners false, source = destination x in / out as TF1 computes it);
//   5. the quadrilaterals projected: x' = (x - x0) / (x1 - x0 + 1e-6) x (out_w - 1), likewise y,
//      with the unrounded crop (x0, y0, x1, y1); a word is kept when at least one corner lands in
//      [0, out_w - 1] x [0, out_h - 1] (it may reach outside: the targets clip it).
// The reference has no photometric distortion ("image adjustments: pass") and no flip; neither is
// here. Draws, in order: each sampler's trials (4 words each: s, ar, x, y), the crop's index,
// the interpolation's index. The reference computes in float32; this in double.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "data/detection_augment.h"
#include "data/icdar.h"

namespace aim::data {

class PhiloxDraw;

enum class SeglinkResize { area = 0, bicubic = 1, bilinear = 2, nearest = 3 };
const char* seglink_resize_name(SeglinkResize m);

// TF1's tf.image.resize_{area,bicubic,bilinear,nearest_neighbor} (align_corners false, no
// half-pixel centres): destination pixel i samples source i x in / out. Bicubic is Keys' cubic
// (a = -0.75) on the 4 clamped neighbours (exact weights: TF tabulates them at 1/1024 steps) and
// may leave [0, 1] as TF's does; area averages the source pixels the destination pixel covers,
// weighted by the covered fraction.
FloatImage tf_resize(const FloatImage& img, int64_t out_h, int64_t out_w, SeglinkResize m);

struct SeglinkAugmentOptions {
  bool crop = true;                  // steps 2-3 (false: always the whole image)
  bool random_interpolation = true;  // step 4 (false: bilinear)
  std::vector<double> min_overlaps = {0.1, 0.3, 0.5, 0.7, 0.9, 0.0};
  bool coverage = true;  // the overlap: coverage of the envelope (true) or Jaccard (false)
  double min_aspect = 0.5, max_aspect = 2.0;
  double min_scale = 0.3, max_scale = 1.0;
  int64_t max_trials = 50;
};

// An axis-aligned box (x0, y0, x1, y1) in pixels.
using CropBox = std::array<double, 4>;

// One `sample_crop_bbox`: the first of up to max_trials crops of an H x W image that meets
// min_overlap with some envelope; false (crop untouched) when none does.
bool sample_crop_bbox(int64_t H, int64_t W, const std::vector<CropBox>& envelopes,
                      double min_overlap, const SeglinkAugmentOptions& o, PhiloxDraw& d,
                      CropBox* crop);

// `project_polygons`: the quadrilateral in the coordinates of `crop` resized to out_h x out_w;
// returns whether a corner lands inside the resized image.
bool project_quad(std::array<double, 8>& quad, const CropBox& crop, int64_t out_h, int64_t out_w);

struct SeglinkAugmentInfo {
  CropBox crop{};                  // as sampled (unrounded)
  std::array<int64_t, 4> slice{};  // x0, y0, x1, y1 inclusive pixels
  int64_t candidates = 0;          // the whole image + successful samplers
  SeglinkResize resize = SeglinkResize::bilinear;
};

// Augments img (any size) into out_h x out_w and its words into the resized image's pixels,
// dropping those the crop leaves out (steps 1-5 above). `key` and `block` select the stream
// (e.g. philox_key(seed, tag) and stream position x 1024: a sample draws at most
// 4 x 6 x 50 + 2 words, 302 blocks).
SeglinkAugmentInfo augment_seglink(FloatImage& img, std::vector<IcdarWord>& words, int64_t out_h,
                                   int64_t out_w, const SeglinkAugmentOptions& o, uint64_t key,
                                   uint64_t block);

}  // namespace aim::data
