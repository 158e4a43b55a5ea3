// data/dien_files.h: DIEN's real-data directory (docs/dien-data.md) — serving order (buffers
// sorted longest first), the no-click draws (uniform over review occurrences, never the clicked
// item, categories from item-info's first line), determinism and resume, errors naming file:line,
// and the registry's --data DIR path.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "data/dien_files.h"
#include "models/registry.h"
#include "tests/support/common.h"

namespace aim::data {
namespace {

using aim::testing::make_temp_dir;

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string hist(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "\x02" : "") + v[i];
  return s;
}

std::string line(int label, const std::string& u, const std::string& m, const std::string& c,
                 const std::vector<std::string>& hm, const std::vector<std::string>& hc) {
  return std::to_string(label) + "\t" + u + "\t" + m + "\t" + c + "\t" + hist(hm) + "\t" +
         hist(hc) + "\n";
}

// Items m1..m6 (ids 1..6), categories c1 (1), c2 (2); m6 has no item-info line.
std::string make_dir() {
  const std::string d = make_temp_dir("aim_dien_files");
  write(d + "/uid_voc.txt", "u0\nu1\nu2\nu3\n");
  write(d + "/mid_voc.txt", "default_mid\nm1\nm2\nm3\nm4\nm5\nm6\n");
  write(d + "/cat_voc.txt", "default_cat\nc1\nc2\n");
  write(d + "/item-info", "m1\tc1\nm2\tc2\nm1\tc2\nm3\tc1\nm4\tc2\nm5\tc1\n");
  std::string rev;
  for (int i = 0; i < 30; ++i) rev += "u" + std::to_string(i % 4) + "\tm1\t5.0\t100\n";
  for (int i = 0; i < 10; ++i) rev += "u1\tm2\t4.0\t101\n";
  rev += "u2\tm6\t3.0\t102\nu3\tunknown_asin\t1.0\t103\n";
  write(d + "/reviews-info", rev);
  std::string train;
  train += line(0, "u0", "m2", "c2", {"m1"}, {"c1"});                                      // len 1
  train += line(1, "u0", "m3", "c1", {"m1", "m2", "m3"}, {"c1", "c2", "c1"});              // len 3
  train += line(0, "u1", "m4", "c2", {"m2", "m1"}, {"c2", "c1"});                          // len 2
  train += line(1, "u1", "m5", "c1", {"m4", "m4", "m1", "m2"}, {"c2", "c2", "c1", "c2"});  // 4
  train += line(0, "u2", "m1", "c1", {"m5"}, {"c1"});                                      // 1
  train += line(1, "u3", "zz", "c9", {"m1", "m2"}, {"c1", "c2"});                          // 2
  train += line(0, "u3", "m6", "c2", {"m6", "m5", "m4"}, {"c2", "c1", "c2"});              // 3
  write(d + "/local_train_splitByUser", train);
  write(d + "/local_test_splitByUser", line(1, "u2", "m2", "c2", {"m1", "m3"}, {"c1", "c1"}) +
                                           line(0, "u2", "m4", "c2", {"m2"}, {"c2"}));
  return d;
}

std::vector<int64_t> iv(const Tensor& t) { return t.to_vector<int64_t>(); }

TEST(DienFiles, ReadsDirectoryAndServesLongestFirstPerBuffer) {
  const std::string d = make_dir();
  DienFileSource s(d, 1);
  EXPECT_EQ(s.epoch_size(), 7);
  EXPECT_EQ(s.eval_size(), 2);
  EXPECT_EQ(s.sampler().occurrences(), 42);
  EXPECT_EQ(s.sampler().items_without_category(), 2);  // default_mid and m6
  EXPECT_EQ(s.sampler().category(1), 1);               // m1: item-info's first line (c1) wins
  EXPECT_EQ(s.sampler().category(2), 2);
  EXPECT_EQ(s.sampler().category(6), 0);
  // One buffer holds the whole file (20 x 2 >= 7): longest first, ties in file order.
  EXPECT_EQ(s.serving_order(2), (std::vector<int64_t>{3, 1, 6, 2, 5, 0, 4}));
  DienFilesOptions o;
  o.buffer_batches = 1;  // buffers of 2 lines
  EXPECT_EQ(DienFileSource(d, 1, o).serving_order(2), (std::vector<int64_t>{1, 0, 3, 2, 5, 4, 6}));
  EXPECT_NE(s.describe().find("7 train, 2 test samples"), std::string::npos) << s.describe();
}

TEST(DienFiles, BatchTensorsAndNoClickDraws) {
  const std::string d = make_dir();
  DienFileSource s(d, 3);
  const TensorMap b = s.next(3);  // samples 3, 1, 6 (lengths 4, 3, 3)
  EXPECT_EQ(s.position(), 3);
  EXPECT_EQ(iv(b.at("item")), (std::vector<int64_t>{5, 3, 6}));
  EXPECT_EQ(iv(b.at("uid")), (std::vector<int64_t>{1, 0, 3}));
  EXPECT_EQ(iv(b.at("lengths")), (std::vector<int64_t>{4, 3, 3}));
  const int64_t T = 4, K = 5;
  ASSERT_EQ(b.at("noclk_items").sizes(), (Shape{3, T, K}));
  ASSERT_EQ(b.at("noclk_item").sizes(), (Shape{3, T}));
  const std::vector<int64_t> hi = iv(b.at("hist_item")), ni = iv(b.at("noclk_items")),
                             nc = iv(b.at("noclk_cates")), n1 = iv(b.at("noclk_item")),
                             c1 = iv(b.at("noclk_cate")), len = iv(b.at("lengths"));
  std::map<int64_t, int> seen;
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t k = 0; k < K; ++k) {
        const int64_t it = ni[size_t((r * T + t) * K + k)];
        if (t >= len[size_t(r)]) {
          EXPECT_EQ(it, 0) << "padding";
          continue;
        }
        EXPECT_NE(it, hi[size_t(r * T + t)]) << "a no-click is never the clicked item";
        EXPECT_TRUE(it == 0 || it == 1 || it == 2 || it == 6) << it << " is not a reviewed item";
        EXPECT_EQ(nc[size_t((r * T + t) * K + k)], s.sampler().category(it));
        ++seen[it];
      }
      EXPECT_EQ(n1[size_t(r * T + t)], ni[size_t((r * T + t) * K)]);
      EXPECT_EQ(c1[size_t(r * T + t)], nc[size_t((r * T + t) * K)]);
    }
  EXPECT_GE(seen.size(), 2u);
}

TEST(DienFiles, DrawsFollowReviewOccurrences) {
  const std::string d = make_dir();
  DienFileSource s(d, 1);
  // Occurrences: m1 30, m2 10, m6 1, unknown (id 0) 1. Excluding m2 (the positive):
  // p(m1) = 30/32.
  std::map<int64_t, int> n;
  const int draws = 20000;
  for (int i = 0; i < draws; ++i) ++n[s.sampler().draw(12345, i, i % 7, i % 5, 2)];
  EXPECT_EQ(n.count(2), 0u);
  EXPECT_NEAR(double(n[1]) / draws, 30.0 / 32.0, 0.01);
  EXPECT_NEAR(double(n[6]) / draws, 1.0 / 32.0, 0.006);
  EXPECT_NEAR(double(n[0]) / draws, 1.0 / 32.0, 0.006);
}

TEST(DienFiles, DeterministicResumableAndFreshEachEpoch) {
  const std::string d = make_dir();
  DienFileSource a(d, 7), b(d, 7);
  std::vector<TensorMap> ea;
  for (int i = 0; i < 6; ++i) ea.push_back(a.next(2));  // 3 batches per epoch (7 / 2)
  b.seek(8);                                            // epoch 1, second batch
  EXPECT_EQ(iv(b.next(2).at("noclk_items")), iv(ea[4].at("noclk_items")));
  // Same samples in epochs 0 and 1, drawn afresh.
  EXPECT_EQ(iv(ea[0].at("item")), iv(ea[3].at("item")));
  std::vector<int64_t> e0, e1;
  for (int i = 0; i < 3; ++i) {
    const std::vector<int64_t> x = iv(ea[size_t(i)].at("noclk_items")),
                               y = iv(ea[size_t(i + 3)].at("noclk_items"));
    e0.insert(e0.end(), x.begin(), x.end());
    e1.insert(e1.end(), y.begin(), y.end());
  }
  EXPECT_NE(e0, e1);
  // Evaluation: file order, fixed draws, no effect on the stream.
  const int64_t pos = a.position();
  EXPECT_EQ(iv(a.eval_batch(0, 2).at("noclk_items")), iv(b.eval_batch(0, 2).at("noclk_items")));
  EXPECT_EQ(iv(a.eval_batch(0, 2).at("item")), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(a.position(), pos);
  AIM_EXPECT_ERROR(a.eval_batch(1, 2), "outside the test file's 2 samples");
  a.seek(3);
  AIM_EXPECT_ERROR(a.next(2), "not a multiple of the batch size 2");
}

TEST(DienFiles, MalformedFilesNameFileAndLine) {
  {
    const std::string d = make_dir();
    write(d + "/item-info", "m1\tc1\nm2\n");
    AIM_EXPECT_ERROR(DienFileSource(d, 1), d + "/item-info:2: expected 2 tab-separated fields");
  }
  {
    const std::string d = make_dir();
    write(d + "/reviews-info", "u1\tm1\t5\t1\nu2\tm1\t4\t2\n");
    AIM_EXPECT_ERROR(DienFileSource(d, 1), "every review names the same item");
  }
  {
    const std::string d = make_dir();
    write(d + "/reviews-info", "u1\tx1\t5\t1\nu2\tx2\t4\t2\n");  // another data set's items
    AIM_EXPECT_ERROR(DienFileSource(d, 1),
                     "none of its 2 reviewed items is in the item vocabulary (mid_voc, 7 items)");
    write(d + "/reviews-info", "u1\n");
    AIM_EXPECT_ERROR(DienFileSource(d, 1),
                     "expected 2 tab-separated fields (user asin [rating "
                     "unixtime]), got 1");
  }
  {
    const std::string d = make_dir();
    std::remove((d + "/reviews-info").c_str());
    AIM_EXPECT_ERROR(DienFileSource(d, 1), d + "/reviews-info:0: cannot open");
  }
  {
    const std::string d = make_dir();
    write(d + "/local_test_splitByUser", "1\tu1\tm1\tc1\tm2\n");
    AIM_EXPECT_ERROR(DienFileSource(d, 1), d + "/local_test_splitByUser:1: expected 6");
  }
  {
    const std::string d = make_dir();
    std::remove((d + "/cat_voc.txt").c_str());
    AIM_EXPECT_ERROR(DienFileSource(d, 1), d + "/cat_voc.txt:0: cannot open");
  }
}

TEST(DienFiles, RegistrySourceAndVocabularyLimits) {
  const std::string d = make_dir();
  const models::ModelEntry& e = models::find_model("dien");
  const models::ModelConfig tiny = e.parse_config({"size=tiny"});
  auto src = e.source(tiny, d, 1);
  EXPECT_NE(src->describe().find("dien-files"), std::string::npos);
  std::string cats;
  for (int i = 0; i < 30; ++i) cats += "c" + std::to_string(i) + "\n";
  write(d + "/cat_voc.txt", cats);  // the tiny model has 20 category rows
  AIM_EXPECT_ERROR(e.source(tiny, d, 1), "cat_voc.txt (categories) has 30 entries");
}

}  // namespace
}  // namespace aim::data
