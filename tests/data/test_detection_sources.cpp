// The detection sources on tiny data sets written by the test (PNG content in .jpg files, which
// the decoder sniffs). data/voc_source.h: the image lists, difficult objects dropped from training
// and flagged in evaluation, boxes in resized-image pixels (VOC's 1-based inclusive -> continuous),
// augmentation determinism by stream position, resumption, and the errors for a missing list, a
// missing image, an image whose size disagrees with its annotation. data/coco_source.h: crowd
// boxes left out of the targets but kept in the evaluation ground truth, [x, y, w, h] boxes,
// contiguous labels, image ids, a missing image.
#include <gtest/gtest.h>
#include <png.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "data/coco_source.h"
#include "data/voc_source.h"

namespace aim::data {
namespace {

namespace fs = std::filesystem;

void write_png_rgb(const fs::path& p, int w, int h, const std::vector<uint8_t>& rgb) {
  fs::create_directories(p.parent_path());
  FILE* f = std::fopen(p.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  ASSERT_EQ(setjmp(png_jmpbuf(png)), 0);
  png_init_io(png, f);
  png_set_IHDR(png, info, png_uint_32(w), png_uint_32(h), 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < h; ++y) png_write_row(png, rgb.data() + size_t(y) * size_t(w) * 3);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  std::fclose(f);
}

struct Obj {
  const char* name;
  int xmin, ymin, xmax, ymax, difficult;
};

void write_image(const fs::path& root, const std::string& id, int w, int h,
                 const std::vector<Obj>& objs) {
  std::vector<uint8_t> rgb(size_t(w * h * 3), 0);
  for (const Obj& o : objs)  // white rectangles where the objects are
    for (int y = o.ymin - 1; y < o.ymax; ++y)
      for (int x = o.xmin - 1; x < o.xmax; ++x)
        for (int c = 0; c < 3; ++c) rgb[size_t((y * w + x) * 3 + c)] = 255;
  write_png_rgb(root / "JPEGImages" / (id + ".jpg"), w, h, rgb);
  std::ostringstream x;
  x << "<annotation><filename>" << id << ".jpg</filename><size><width>" << w << "</width><height>"
    << h << "</height><depth>3</depth></size>";
  for (const Obj& o : objs)
    x << "<object><name>" << o.name << "</name><difficult>" << o.difficult
      << "</difficult><bndbox><xmin>" << o.xmin << "</xmin><ymin>" << o.ymin << "</ymin><xmax>"
      << o.xmax << "</xmax><ymax>" << o.ymax << "</ymax></bndbox></object>";
  x << "</annotation>";
  fs::create_directories(root / "Annotations");
  std::ofstream(root / "Annotations" / (id + ".xml")) << x.str();
}

struct VocDir {
  fs::path root;
  VocDir() {
    root = fs::temp_directory_path() / ("aim_voc_" + std::to_string(getpid()));
    fs::remove_all(root);
    write_image(root, "000001", 40, 30, {{"dog", 5, 5, 20, 25, 0}, {"cat", 25, 2, 38, 12, 1}});
    write_image(root, "000002", 32, 32, {{"person", 1, 1, 32, 32, 0}});
    write_image(root, "000003", 50, 20, {{"car", 10, 5, 30, 15, 0}, {"car", 31, 4, 49, 19, 0}});
    fs::create_directories(root / "ImageSets" / "Main");
    std::ofstream(root / "ImageSets" / "Main" / "trainval.txt") << "000001\n000002\n\n";
    std::ofstream(root / "ImageSets" / "Main" / "test.txt") << "000001\n000003\n";
  }
  ~VocDir() { fs::remove_all(root); }
};

TEST(VocSource, EvaluationBatchesAndTrainingTargets) {
  VocDir d;
  VocSourceConfig c;
  c.train_sets = {d.root.string() + ":trainval"};
  c.eval_set = d.root.string() + ":test";
  c.size = 20;
  c.augment = false;
  VocSource s(c);
  EXPECT_EQ(s.epoch_size(), 2);
  EXPECT_EQ(s.eval_size(), 2);
  EXPECT_EQ(s.max_objects(), 2);
  const TensorMap e = s.eval_batch(0, 2);
  EXPECT_EQ(e.at("images").sizes(), (std::vector<int64_t>{2, 3, 20, 20}));
  EXPECT_EQ(e.at("num_boxes").to_vector<int64_t>(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(e.at("difficult").to_vector<uint8_t>(), (std::vector<uint8_t>{0, 1, 0, 0}));
  EXPECT_EQ(e.at("labels").to_vector<int64_t>(), (std::vector<int64_t>{12, 8, 7, 7}));
  EXPECT_EQ(e.at("orig_size").to_vector<int64_t>(), (std::vector<int64_t>{30, 40, 20, 50}));
  // Dog: xmin 5 .. xmax 20 of 40 -> [4, 20) * 0.5 = [2, 10); ymin 5 .. 25 of 30 -> [4, 25) * 2/3.
  const std::vector<float> b = e.at("boxes").to_vector<float>();
  EXPECT_FLOAT_EQ(b[0], 2.0f);
  EXPECT_FLOAT_EQ(b[2], 10.0f);
  EXPECT_NEAR(b[1], 4.0f * 20 / 30, 1e-5);
  EXPECT_NEAR(b[3], 25.0f * 20 / 30, 1e-5);
  // Training drops the difficult cat; without augmentation the two images of an epoch are both
  // visited, in the epoch's order.
  const TensorMap t = s.next(2);
  const std::vector<int64_t> n = t.at("num_boxes").to_vector<int64_t>();
  EXPECT_EQ(n[0] + n[1], 2);
  EXPECT_EQ(t.count("difficult"), 0u);
}

TEST(VocSource, AugmentationIsAFunctionOfThePosition) {
  VocDir d;
  VocSourceConfig c;
  c.train_sets = {d.root.string() + ":trainval", d.root.string() + ":test"};
  c.eval_set = d.root.string() + ":test";
  c.size = 24;
  VocSource a(c), b(c);
  const TensorMap x = a.next(3);
  b.seek(1);
  const TensorMap y = b.next(2);
  EXPECT_EQ(y.at("images").to_vector<float>(),
            x.at("images").narrow(0, 1, 2).contiguous().to_vector<float>());
  EXPECT_EQ(y.at("boxes").to_vector<float>(),
            x.at("boxes").narrow(0, 1, 2).contiguous().to_vector<float>());
}

TEST(VocSource, Errors) {
  VocDir d;
  auto error_of = [&](const VocSourceConfig& c) -> std::string {
    try {
      VocSource s(c);
      s.eval_batch(0, s.eval_size());
    } catch (const std::exception& e) {
      return e.what();
    }
    return "(no error)";
  };
  VocSourceConfig c;
  c.train_sets = {d.root.string() + ":train"};
  c.eval_set = d.root.string() + ":test";
  EXPECT_NE(error_of(c).find("ImageSets/Main/train.txt: cannot open the image list"),
            std::string::npos);
  c.train_sets = {d.root.string()};
  EXPECT_NE(error_of(c).find("must be DIR:split"), std::string::npos);
  c.train_sets = {d.root.string() + ":trainval"};
  fs::remove(d.root / "JPEGImages" / "000003.jpg");
  EXPECT_NE(error_of(c).find("000003.jpg"), std::string::npos) << error_of(c);
  // A 16x16 image under an annotation that says 50x20.
  write_image(d.root, "000004", 16, 16, {});
  fs::copy_file(d.root / "JPEGImages" / "000004.jpg", d.root / "JPEGImages" / "000003.jpg",
                fs::copy_options::overwrite_existing);
  std::ofstream(d.root / "Annotations" / "000003.xml")
      << "<annotation><filename>x</filename><size><width>50</width><height>20</height></size>"
         "</annotation>";
  EXPECT_NE(error_of(c).find("the image is 16x16 but its annotation says 50x20"), std::string::npos)
      << error_of(c);
}

TEST(CocoSource, BatchesAndEvaluationGroundTruth) {
  const fs::path root = fs::temp_directory_path() / ("aim_coco_" + std::to_string(getpid()));
  fs::remove_all(root);
  std::vector<uint8_t> rgb(size_t(40 * 20 * 3), 0);
  write_png_rgb(root / "img" / "a.jpg", 40, 20, rgb);
  write_png_rgb(root / "img" / "b.jpg", 40, 20, rgb);
  std::ofstream(root / "inst.json") << R"({
    "images": [{"id": 9, "file_name": "a.jpg", "width": 40, "height": 20},
               {"id": 4, "file_name": "b.jpg", "width": 40, "height": 20}],
    "categories": [{"id": 5, "name": "x"}, {"id": 2, "name": "y"}],
    "annotations": [
      {"id": 1, "image_id": 9, "category_id": 5, "bbox": [4, 2, 10, 8], "area": 60, "iscrowd": 0},
      {"id": 2, "image_id": 9, "category_id": 2, "bbox": [0, 0, 40, 20], "area": 500, "iscrowd": 1},
      {"id": 3, "image_id": 4, "category_id": 2, "bbox": [20, 10, 20, 10], "area": 200}]})";
  CocoSourceConfig c;
  c.train_images = c.eval_images = (root / "img").string();
  c.train_annotations = c.eval_annotations = (root / "inst.json").string();
  c.size = 10;
  c.augment = false;
  CocoSource s(c);
  EXPECT_EQ(s.max_objects(), 1);
  EXPECT_EQ(s.eval_image_id(0), 9);
  EXPECT_EQ(s.category_ids(), (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(s.eval_ground_truth().size(), 3u);  // the crowd box too
  const TensorMap e = s.eval_batch(0, 2);
  EXPECT_EQ(e.at("labels").to_vector<int64_t>(), (std::vector<int64_t>{2, 1}));
  // [4, 2, 10, 8] in 40x20 -> (4, 2, 14, 10) -> x * 0.25, y * 0.5.
  const std::vector<float> b = e.at("boxes").to_vector<float>();
  EXPECT_FLOAT_EQ(b[0], 1.0f);
  EXPECT_FLOAT_EQ(b[1], 1.0f);
  EXPECT_FLOAT_EQ(b[2], 3.5f);
  EXPECT_FLOAT_EQ(b[3], 5.0f);
  fs::remove(root / "img" / "b.jpg");
  try {
    s.eval_batch(1, 1);
    ADD_FAILURE() << "no error";
  } catch (const std::exception& ex) {
    EXPECT_NE(std::string(ex.what()).find("b.jpg"), std::string::npos) << ex.what();
  }
  fs::remove_all(root);
}

}  // namespace
}  // namespace aim::data
