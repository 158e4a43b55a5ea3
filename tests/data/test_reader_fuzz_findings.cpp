// Regression tests of the fuzz targets' findings in the `--data` directory readers (fuzz/README.md,
// docs/reliability.md "Readers under a fuzzer"). Each input is the one kept in the target's seed
// corpus, fuzz/corpus/<target>/regression-*.txt: the files of a directory joined by the targets'
// separator line "--8<--" (fuzz/targets/fuzz_common.h), written here the same way.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "data/din_export.h"
#include "data/graph.h"
#include "data/json_fields.h"
#include "data/mjsynth.h"
#include "data/speech.h"
#include "tests/support/common.h"

namespace aim::data {
namespace {

namespace fs = std::filesystem;

// The corpus input fuzz/corpus/<target>/<name> written as a directory: piece k -> names[k].
std::string corpus_dir(const std::string& target, const std::string& name,
                       const std::vector<std::string>& names) {
  std::ifstream in(testing::source_root() + "/fuzz/corpus/" + target + "/" + name,
                   std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing corpus input " << target << "/" << name;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string all = ss.str(), sep = "\n--8<--\n";
  const std::string dir = testing::make_temp_dir("aim_fuzz_regression");
  size_t start = 0;
  for (const std::string& n : names) {
    const size_t k = all.find(sep, start);
    fs::create_directories((fs::path(dir) / n).parent_path());
    std::ofstream(dir + "/" + n, std::ios::binary)
        << all.substr(start, k == std::string::npos ? std::string::npos : k - start);
    if (k == std::string::npos) break;
    start = k + sep.size();
  }
  return dir;
}

TEST(ReaderFuzzFindings, DinExportHugeCountsInMetaDoNotAllocate) {
  // meta.txt's `items 99999999999` sized a reservation of 800 GB before cate_list.txt's lines
  // were counted (std::length_error or an allocation past the fuzzer's limit).
  const std::string dir = corpus_dir("din_export", "regression-huge-items.txt",
                                     {"meta.txt", "cate_list.txt", "train.tsv", "test.tsv"});
  AIM_EXPECT_ERROR(DinExport::load(dir),
                   "cate_list.txt:0: 6 lines, expected items = 99999999999 (meta.txt");
  fs::remove_all(dir);
}

TEST(ReaderFuzzFindings, CocoIntegerFieldsBeyondInt64AreRefused) {
  // An annotation's "id": 1e300 (a float with an integral value) was converted to int64_t:
  // undefined behaviour (fuzz_coco_instances); an unsigned beyond INT64_MAX wrapped.
  using data::json_fields::int_field;
  const auto j = nlohmann::json::parse(
      R"({"a": 1e300, "b": 18446744073709551615, "c": -4.0, "d": 7, "e": 2.5})");
  AIM_EXPECT_ERROR(int_field(j, "a", "annotations[3]"),
                   "annotations[3].a: 1e+300 is beyond the int64 range");
  AIM_EXPECT_ERROR(int_field(j, "b", "annotations[3]"),
                   "annotations[3].b: 18446744073709551615 is beyond the int64 range");
  EXPECT_EQ(int_field(j, "c", "x"), -4);
  EXPECT_EQ(int_field(j, "d", "x"), 7);
  AIM_EXPECT_ERROR(int_field(j, "e", "annotations[3]"),
                   "annotations[3].e: expected an integer, got 2.5");
}

TEST(ReaderFuzzFindings, PlanetoidDenseFeaturesAreCheckedBeforeAllocating) {
  // meta.txt's nodes x features sized the dense feature matrix before anything backed it:
  // 4 x 2^62 wrapped to a 0-byte tensor that features.txt then wrote into; now labels.txt must
  // list the nodes first and the matrix must fit the host memory limit.
  const std::vector<std::string> files = {"meta.txt",  "features.txt", "labels.txt", "edges.txt",
                                          "train.txt", "val.txt",      "test.txt"};
  const std::string dir = corpus_dir("planetoid", "regression-dense-overflow.txt", files);
  AIM_EXPECT_ERROR(read_planetoid(dir), "meta.txt: 4 nodes x 4611686018427387904 features need");
  AIM_EXPECT_ERROR(read_planetoid(dir), "over the host memory limit");
  const std::string many = corpus_dir("planetoid", "regression-many-nodes.txt", files);
  AIM_EXPECT_ERROR(read_planetoid(many), "labels.txt: 5 labels, meta.txt says 2000000000 nodes");
  // The fuzzer's own input (5 x 4999999999999999999 overflowed int64 in the shape's element
  // count, undefined behaviour): now an error of the reader.
  const std::string fuzzed = corpus_dir("planetoid", "regression-fuzzer-overflow.txt", files);
  EXPECT_NE(testing::error_of([&] { read_planetoid(fuzzed); }), "");
  // A feature value beyond f32 became inf, and its row NaN after the normalisation.
  const std::string big = corpus_dir("planetoid", "regression-f32-range.txt", files);
  AIM_EXPECT_ERROR(read_planetoid(big), "features.txt:1: value 1e39 is outside the f32 range");
  for (const std::string& d : {dir, many, fuzzed, big}) fs::remove_all(d);
}

TEST(ReaderFuzzFindings, MjsynthImageNameTooLongIsTheLinesError) {
  // A held-out image path the system refuses to look up (a name over 255 bytes) escaped as
  // std::filesystem_error from fs::is_regular_file.
  const std::string dir =
      corpus_dir("mjsynth", "regression-long-name.txt",
                 {"lexicon.txt", "annotation_train.txt", "annotation_val.txt", "a.jpg", "b.png"});
  AIM_EXPECT_ERROR(MjsynthSource(dir, 1), "annotation_val.txt:1: image ");
  AIM_EXPECT_ERROR(MjsynthSource(dir, 1), "cannot be looked up: File name too long");
  fs::remove_all(dir);
}

TEST(ReaderFuzzFindings, LibriSpeechUtteranceIdTooLongIsTheLinesError) {
  // The same for an utterance id over 255 bytes (its .wav name).
  const std::string dir = corpus_dir("librispeech", "regression-long-id.txt",
                                     {"19/198/19-198.trans.txt", "19/198/19-198-0000.wav",
                                      "19/198/19-198-0001.wav", "19/198/19-198-0002.wav"});
  AIM_EXPECT_ERROR(read_librispeech(dir), "19-198.trans.txt:2: utterance '");
  AIM_EXPECT_ERROR(read_librispeech(dir), "cannot be looked up: File name too long");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace aim::data
