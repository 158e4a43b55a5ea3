// data/coco.h: an instances file with gapped category ids (contiguous labels), crowd boxes,
// degenerate boxes skipped and counted, boxes outside the image (error or clipped), and the errors
// for malformed JSON, missing fields, duplicate ids and unknown references.
#include <gtest/gtest.h>

#include <string>

#include "data/coco.h"

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

}  // namespace
}  // namespace aim::data
