// data/coco.h: an instances file with gapped category ids (contiguous labels), crowd boxes,
// degenerate boxes skipped and counted, boxes outside the image (error or clipped), and the errors
// for malformed JSON, missing fields, duplicate ids and unknown references; segmentations
// (polygons, uncompressed and compressed RLE, pycocotools' list-of-boxes reading) and their errors.
#include <gtest/gtest.h>

#include <string>

#include "data/coco.h"
#include "data/coco_mask.h"
#include "tests/support/common.h"

namespace aim::data {
namespace {

const char* kGood = R"({
 "images": [{"id": 42, "file_name": "000000000042.jpg", "width": 640, "height": 480},
            {"id": 7, "file_name": "000000000007.jpg", "width": 100, "height": 50}],
 "categories": [{"id": 18, "name": "dog"}, {"id": 1, "name": "person"}, {"id": 90, "name": "toothbrush"}],
 "annotations": [
  {"id": 1, "image_id": 42, "category_id": 18, "bbox": [10.5, 20, 100, 50.25], "area": 5000, "iscrowd": 0},
  {"id": 2, "image_id": 42, "category_id": 1, "bbox": [0, 0, 640, 480], "area": 1, "iscrowd": 1},
  {"id": 3, "image_id": 7, "category_id": 90, "bbox": [5, 5, 0, 10]},
  {"id": 4, "image_id": 7, "category_id": 90, "bbox": [90, 40, 20, 20]}
 ]})";

std::string error_of(const std::string& text) {
  try {
    parse_coco_instances(text, "inst.json");
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

std::string replace(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

TEST(Coco, ReadsInstancesWithContiguousLabels) {
  const CocoDataset d = parse_coco_instances(kGood, "inst.json", /*clip_boxes=*/true);
  EXPECT_EQ(d.category_ids, (std::vector<int64_t>{1, 18, 90}));
  EXPECT_EQ(d.category_names, (std::vector<std::string>{"person", "dog", "toothbrush"}));
  ASSERT_EQ(d.images.size(), 2u);
  EXPECT_EQ(d.image_index.at(7), 1u);
  ASSERT_EQ(d.annotations.size(), 3u);
  EXPECT_EQ(d.skipped_degenerate, 1);
  EXPECT_EQ(d.annotations[0].label, 2);
  EXPECT_DOUBLE_EQ(d.annotations[0].x, 10.5);
  EXPECT_TRUE(d.annotations[1].iscrowd);
  EXPECT_EQ(d.images[0].annotations, (std::vector<size_t>{0, 1}));
  // Clipped to 100x50: [90, 40, 10, 10].
  EXPECT_DOUBLE_EQ(d.annotations[2].w, 10);
  EXPECT_DOUBLE_EQ(d.annotations[2].h, 10);
}

TEST(Coco, ErrorsNameTheElement) {
  EXPECT_NE(error_of(kGood).find("annotations[3]: bbox [90, 40, 20, 20] reaches outside image 7"),
            std::string::npos)
      << error_of(kGood);
  EXPECT_NE(error_of("{").find("inst.json: malformed JSON"), std::string::npos);
  // Found by tools/fuzz.sh: a number past double's range is nlohmann's out_of_range, not a
  // parse_error; it was not caught (fuzz/corpus/coco_instances/regression-number-overflow.json).
  EXPECT_NE(
      error_of("{\"images\": [{\"id\": 444444444e44444441}]}").find("inst.json: malformed JSON"),
      std::string::npos);
  EXPECT_NE(
      error_of(replace(kGood, "\"width\": 640, ", "")).find("images[0]: missing field 'width'"),
      std::string::npos);
  EXPECT_NE(error_of(replace(kGood, "{\"id\": 7,", "{\"id\": 42,"))
                .find("images[1]: duplicate image id 42"),
            std::string::npos);
  EXPECT_NE(error_of(replace(kGood, "\"image_id\": 7, \"category_id\": 90, \"bbox\": [5",
                             "\"image_id\": 8, \"category_id\": 90, \"bbox\": [5"))
                .find("annotations[2]: image_id 8 is not in images"),
            std::string::npos);
  EXPECT_NE(error_of(replace(kGood, "\"category_id\": 18", "\"category_id\": 19"))
                .find("annotations[0]: category_id 19 is not in categories"),
            std::string::npos);
  EXPECT_NE(error_of(replace(kGood, "[10.5, 20, 100, 50.25]", "[10.5, 20, 100]"))
                .find("annotations[0].bbox: expected [x, y, width, height] numbers"),
            std::string::npos);
  EXPECT_NE(error_of(replace(kGood, "\"id\": 1, \"image_id\"", "\"id\": \"1\", \"image_id\""))
                .find("annotations[0].id: expected an integer"),
            std::string::npos);
}

// Image 5 is 6x4 (h x w); three objects of one category.
std::string with_segmentations(const std::string& s0, const std::string& s1,
                               const std::string& s2) {
  return std::string(R"({"images": [{"id": 5, "file_name": "a.jpg", "width": 4, "height": 6}],
 "categories": [{"id": 3, "name": "thing"}],
 "annotations": [
  {"id": 1, "image_id": 5, "category_id": 3, "bbox": [0, 0, 2, 2], "segmentation": )") +
         s0 + R"(},
  {"id": 2, "image_id": 5, "category_id": 3, "bbox": [0, 0, 2, 2], "iscrowd": 1, "segmentation": )" +
         s1 + R"(},
  {"id": 3, "image_id": 5, "category_id": 3, "bbox": [0, 0, 2, 2], "segmentation": )" +
         s2 + "}]}";
}

TEST(Coco, ReadsSegmentations) {
  // Two squares (pixels 0..1 x 0..1 and 2..3 x 3..4), an uncompressed crowd RLE (column 0 rows
  // 1..3 and column 1 row 0), the same as a compressed string.
  CocoRle crowd;
  crowd.h = 6, crowd.w = 4, crowd.counts = {1, 3, 2, 1, 17};
  const std::string counts = coco_rle_to_string(crowd);
  const CocoDataset d = parse_coco_instances(
      with_segmentations("[[0, 0, 2, 0, 2, 2, 0, 2], [2, 3, 4, 3, 4, 5, 2, 5]]",
                         R"({"counts": [1, 3, 2, 1, 17], "size": [6, 4]})",
                         R"({"counts": ")" + counts + R"(", "size": [6, 4]})"),
      "seg.json");
  ASSERT_EQ(d.annotations.size(), 3u);
  using Kind = CocoSegmentation::Kind;
  const CocoSegmentation& s0 = d.annotations[0].segmentation;
  ASSERT_EQ(s0.kind, Kind::polygons);
  EXPECT_EQ(s0.polygons.size(), 2u);
  const CocoRle m0 = coco_annotation_rle(s0, 6, 4, "a0");
  EXPECT_EQ(coco_rle_area(m0), 8u);
  EXPECT_EQ(coco_rle_to_bbox(m0), (std::array<double, 4>{0, 0, 4, 5}));
  const std::vector<uint8_t> px = coco_rle_decode(m0);
  EXPECT_EQ(px[0 * 4 + 0], 1);
  EXPECT_EQ(px[4 * 4 + 3], 1);
  EXPECT_EQ(px[2 * 4 + 0], 0);
  for (int i : {1, 2}) {
    const CocoSegmentation& s = d.annotations[size_t(i)].segmentation;
    ASSERT_EQ(s.kind, Kind::rle);
    EXPECT_EQ(coco_annotation_rle(s, 6, 4, "a").counts, crowd.counts) << i;
  }
  // pycocotools reads a list whose first polygon has 4 numbers as boxes [x, y, width, height].
  const CocoDataset b = parse_coco_instances(
      with_segmentations("[[0, 0, 2, 3]]", "[[1, 1, 1, 1], [2, 2, 1, 1]]", "[[0, 0, 1, 0, 1, 1]]"),
      "seg.json");
  EXPECT_EQ(coco_rle_area(coco_annotation_rle(b.annotations[0].segmentation, 6, 4, "b")),
            coco_rle_area(coco_rle_from_bbox({0, 0, 2, 3}, 6, 4)));
  EXPECT_EQ(coco_rle_area(coco_annotation_rle(b.annotations[1].segmentation, 6, 4, "b")), 2u);
  AIM_EXPECT_ERROR(coco_annotation_rle(d.annotations[1].segmentation, 7, 4, "crowd"),
                   "crowd: RLE of size 6x4 on an image of 7x4");
  AIM_EXPECT_ERROR(coco_annotation_rle(CocoSegmentation{}, 6, 4, "none"), "none: no segmentation");
}

TEST(Coco, SegmentationErrorsNameTheElement) {
  auto err = [](const std::string& s0) {
    return error_of(with_segmentations(s0, "[[0, 0, 1, 0, 1, 1]]", "[[0, 0, 1, 0, 1, 1]]"));
  };
  EXPECT_NE(err("[[0, 0, 2, 0, 2, 2, 0, 2], [1, 2, 3]]")
                .find("annotations[0].segmentation[1]: 3 coordinates"),
            std::string::npos)
      << err("[[0, 0, 2, 0, 2, 2, 0, 2], [1, 2, 3]]");
  EXPECT_NE(err("[]").find("annotations[0].segmentation: an empty polygon list"),
            std::string::npos);
  EXPECT_NE(err("[[0, 0]]").find("annotations[0].segmentation[0]: 2 coordinates"),
            std::string::npos);
  EXPECT_NE(err("[[0, 0, 1, 1], [0, 0, 1, 0, 1, 1]]")
                .find("annotations[0].segmentation[1]: 6 coordinates in a list of boxes"),
            std::string::npos);
  EXPECT_NE(err("[[0, \"a\", 1, 1, 2, 2]]").find("annotations[0].segmentation[0]: expected"),
            std::string::npos);
  EXPECT_NE(err(R"({"counts": [1, 2], "size": [6, 4]})")
                .find("annotations[0].segmentation: the counts sum to 3, not h * w"),
            std::string::npos);
  EXPECT_NE(err(R"({"counts": [1, -2], "size": [6, 4]})")
                .find("annotations[0].segmentation.counts[1]: expected a run length"),
            std::string::npos);
  EXPECT_NE(err(R"({"counts": "0!", "size": [6, 4]})")
                .find("annotations[0].segmentation.counts: counts character 1"),
            std::string::npos);
  EXPECT_NE(err(R"({"counts": "08", "size": [4, 6]})")
                .find("annotations[0].segmentation.size: [4, 6] is not image 5's [6, 4]"),
            std::string::npos);
  EXPECT_NE(err(R"({"size": [6, 4]})").find("annotations[0].segmentation: expected a list"),
            std::string::npos);
}

}  // namespace
}  // namespace aim::data
