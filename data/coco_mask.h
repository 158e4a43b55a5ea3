// COCO's mask API (issue 22; pycocotools' maskApi.c, the same results bit for bit): binary masks
// as run-length encodings, polygons rasterised the way the COCO annotations were, areas, boxes,
// unions and IoUs of masks for the segmentation evaluation (data/coco_eval_segm.h).
//
// An RLE runs down the columns (pixel (y, x) is element x * h + y) and alternates zeros and ones,
// starting with zeros: [0 0 1 1 1 0 1] (one column of 7) is {2, 3, 1, 1}, an all-ones mask starts
// with a 0 count. The compressed `counts` string of the COCO JSON: each count, from the fourth on
// less the count two before it, in 5-bit groups low first, 6 bits a character ('0' + group, 0x20
// set while more groups follow, the last group's 0x10 the sign), as rleToString / rleFrString.
//
// Masks given to or returned by this API are row-major [h, w] bytes (0 background, else object);
// the column-major order is the RLE's alone.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace aim::data {

struct CocoRle {
  int64_t h = 0, w = 0;
  std::vector<uint32_t> counts;  // runs, zeros first; they sum to h * w
};

// rleEncode / rleDecode. mask: [h, w] row-major, nonzero is the object.
CocoRle coco_rle_encode(const uint8_t* mask, int64_t h, int64_t w);
CocoRle coco_rle_encode(const std::vector<uint8_t>& mask, int64_t h, int64_t w);
std::vector<uint8_t> coco_rle_decode(const CocoRle& rle);  // [h, w] row-major, 0 or 1

// Errors (prefixed with `what`) unless h, w >= 0 and the counts sum to h * w (maskApi reads or
// writes past its buffers otherwise).
void coco_rle_check(const CocoRle& rle, const std::string& what);

// rleToString / rleFrString. Errors name the character (its position) that is outside '0'..'o'
// and a string that ends inside a count; the counts are not checked against h * w here.
std::string coco_rle_to_string(const CocoRle& rle);
CocoRle coco_rle_from_string(const std::string& counts, int64_t h, int64_t w,
                             const std::string& what = "coco rle");

// rleFrPoly: one polygon x0, y0, x1, y1, ... in pixel coordinates (pixel centres at integers,
// COCO's convention), rasterised on a 5x finer grid along its edges. Errors for an odd or empty
// coordinate list, an empty image and coordinates beyond +-1e6 (maskApi would overflow or
// allocate without bound).
CocoRle coco_rle_from_polygon(const std::vector<double>& xy, int64_t h, int64_t w,
                              const std::string& what = "coco polygon");
// rleFrBbox: the box [x, y, width, height] as the polygon of its corners.
CocoRle coco_rle_from_bbox(const std::array<double, 4>& xywh, int64_t h, int64_t w);

// rleMerge: the union (or the intersection) of masks of one size; one mask is returned as is.
// Errors for an empty list or different sizes (maskApi returns an empty RLE).
CocoRle coco_rle_merge(const std::vector<CocoRle>& rles, bool intersect = false);

// rleArea: the number of object pixels.
uint64_t coco_rle_area(const CocoRle& rle);

// rleToBbox: [x, y, width, height] of the object pixels' bounding box (whole pixels), zeros when
// the mask is empty. A run of ones that spans two columns counts as reaching the top and bottom
// rows (maskApi's shortcut, kept for identical boxes).
std::array<double, 4> coco_rle_to_bbox(const CocoRle& rle);

// rleIou of a detection with a ground-truth mask of the same size (an error otherwise): the
// intersection over the union, or over the detection's area when the object is a crowd; 0 when
// they do not intersect.
double coco_rle_iou(const CocoRle& dt, const CocoRle& gt, bool iscrowd);

}  // namespace aim::data
