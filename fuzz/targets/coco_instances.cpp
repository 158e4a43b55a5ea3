// COCO instances JSON (data/coco.h) and each annotation's segmentation decoded to RLE
// (polygons, RLE counts, compressed strings: data/coco_mask.h).
#include "data/coco.h"
#include "fuzz/targets/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string json = aim::fuzz::as_string(data, size);
  return aim::fuzz::run([&] {
    const aim::data::CocoDataset d = aim::data::parse_coco_instances(json, "fuzz.json", true);
    for (const auto& img : d.images)
      for (const size_t a : img.annotations) {
        const auto& ann = d.annotations[a];
        // Masks of at most 4 M pixels: the decoder's cost is the image's area.
        if (img.height * img.width <= (int64_t(1) << 22))
          aim::fuzz::run([&] {
            (void)aim::data::coco_annotation_rle(ann.segmentation, img.height, img.width, "fuzz");
          });
      }
  });
}
