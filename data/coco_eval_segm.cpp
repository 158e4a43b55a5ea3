#include "data/coco_eval_segm.h"

#include <map>
#include <utility>

#include "tensor/check.h"

namespace aim::data {

CocoStats coco_evaluate_segm(const std::vector<CocoSegmGt>& gts,
                             const std::vector<CocoSegmDet>& dets, std::vector<int64_t> image_ids,
                             std::vector<int64_t> category_ids) {
  // One mask size per image (maskApi's IoU of masks of different sizes is -1, no overlap).
  std::map<int64_t, std::pair<int64_t, int64_t>> size_of;
  std::vector<CocoEvalObject> objects(gts.size());
  for (size_t i = 0; i < gts.size(); ++i) {
    const CocoSegmGt& g = gts[i];
    const std::string what = "coco segm eval: ground truth " + std::to_string(i);
    AIM_CHECK(g.id > 0, what, " has id ", g.id, " (COCO ids are > 0)");
    coco_rle_check(g.mask, what);
    const auto [it, fresh] = size_of.emplace(g.image_id, std::make_pair(g.mask.h, g.mask.w));
    AIM_CHECK(fresh || it->second == std::make_pair(g.mask.h, g.mask.w), what, "'s mask is ",
              g.mask.h, "x", g.mask.w, ", another mask of image ", g.image_id, " is ",
              it->second.first, "x", it->second.second);
    objects[i] = {g.image_id, g.category_id, g.area, g.iscrowd, g.iscrowd};
  }
  std::vector<CocoEvalScored> scored(dets.size());
  for (size_t i = 0; i < dets.size(); ++i) {
    const CocoSegmDet& d = dets[i];
    const std::string what = "coco segm eval: detection " + std::to_string(i);
    coco_rle_check(d.mask, what);
    const auto [it, fresh] = size_of.emplace(d.image_id, std::make_pair(d.mask.h, d.mask.w));
    AIM_CHECK(fresh || it->second == std::make_pair(d.mask.h, d.mask.w), what, "'s mask is ",
              d.mask.h, "x", d.mask.w, ", another mask of image ", d.image_id, " is ",
              it->second.first, "x", it->second.second);
    scored[i] = {d.image_id, d.category_id, double(coco_rle_area(d.mask)), d.score};
  }
  return coco_summarize_detection(coco_evaluate(
      objects, scored, std::move(image_ids), std::move(category_ids), CocoEvalParams::detection(),
      [&](size_t d, size_t g) { return coco_rle_iou(dets[d].mask, gts[g].mask, gts[g].iscrowd); }));
}

std::vector<CocoSegmGt> coco_segm_ground_truth(const CocoDataset& d) {
  std::vector<CocoSegmGt> out;
  out.reserve(d.annotations.size());
  for (const CocoAnnotation& a : d.annotations) {
    const CocoImage& im = d.images[d.image_index.at(a.image_id)];
    CocoSegmGt g;
    g.id = a.id, g.image_id = a.image_id, g.category_id = a.category_id;
    g.area = a.area, g.iscrowd = a.iscrowd;
    g.mask = coco_annotation_rle(a.segmentation, im.height, im.width,
                                 "annotation " + std::to_string(a.id) + ".segmentation");
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace aim::data
