// data/: DinSynthetic (determinism, shapes/mask/lengths, label rate, attainable AUC), the exact
// AUC with ties, and the DIEN TSV reader (ids, padding, truncation, errors naming path:line).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "data/dien_tsv.h"
#include "data/din_synthetic.h"
#include "data/metrics.h"

namespace aim::data {
namespace {

std::vector<int64_t> iv(const Tensor& t) { return t.to_vector<int64_t>(); }

void expect_same(const RecBatch& x, const RecBatch& y) {
  EXPECT_EQ(iv(x.uid), iv(y.uid));
  EXPECT_EQ(iv(x.item), iv(y.item));
  EXPECT_EQ(iv(x.cate), iv(y.cate));
  EXPECT_EQ(iv(x.hist_item), iv(y.hist_item));
  EXPECT_EQ(iv(x.hist_cate), iv(y.hist_cate));
  EXPECT_EQ(x.mask.to_vector<float>(), y.mask.to_vector<float>());
  EXPECT_EQ(iv(x.lengths), iv(y.lengths));
  EXPECT_EQ(iv(x.label), iv(y.label));
}

// Shapes, dtypes, mask = (t < length), padding ids 0, T = max length, ids in range.
void check_consistent(const RecBatch& b, int64_t B, int64_t n_users, int64_t n_items,
                      int64_t n_cates) {
  ASSERT_EQ(b.batch_size(), B);
  const int64_t T = b.max_len();
  for (const Tensor* t : {&b.uid, &b.item, &b.cate, &b.lengths, &b.label}) {
    EXPECT_EQ(t->dtype(), DType::i64);
    EXPECT_EQ(t->sizes(), (Shape{B}));
  }
  for (const Tensor* t : {&b.hist_item, &b.hist_cate}) {
    EXPECT_EQ(t->dtype(), DType::i64);
    EXPECT_EQ(t->sizes(), (Shape{B, T}));
  }
  EXPECT_EQ(b.mask.dtype(), DType::f32);
  EXPECT_EQ(b.mask.sizes(), (Shape{B, T}));
  const auto len = iv(b.lengths), hi = iv(b.hist_item), hc = iv(b.hist_cate);
  const auto m = b.mask.to_vector<float>();
  int64_t maxlen = 0;
  for (int64_t r = 0; r < B; ++r) {
    maxlen = std::max(maxlen, len[r]);
    ASSERT_GE(len[r], 1);
    for (int64_t t = 0; t < T; ++t) {
      const bool real = t < len[r];
      EXPECT_EQ(m[r * T + t], real ? 1.0f : 0.0f);
      if (!real) {
        EXPECT_EQ(hi[r * T + t], 0);
        EXPECT_EQ(hc[r * T + t], 0);
      } else {
        EXPECT_TRUE(hi[r * T + t] >= 0 && hi[r * T + t] < n_items);
        EXPECT_TRUE(hc[r * T + t] >= 0 && hc[r * T + t] < n_cates);
      }
    }
  }
  EXPECT_EQ(maxlen, T);
  for (int64_t u : iv(b.uid)) EXPECT_TRUE(u >= 0 && u < n_users);
  for (int64_t l : iv(b.label)) EXPECT_TRUE(l == 0 || l == 1);
}

TEST(DinDataAuc, HandMadeCases) {
  EXPECT_DOUBLE_EQ(auc({0.1, 0.2, 0.8, 0.9}, {0, 0, 1, 1}), 1.0);
  EXPECT_DOUBLE_EQ(auc({0.9, 0.8, 0.2, 0.1}, {0, 0, 1, 1}), 0.0);
  // pos {0.4, 0.8}, neg {0.3, 0.5}: pairs won 0.4>0.3, 0.8>0.3, 0.8>0.5 -> 3/4.
  EXPECT_DOUBLE_EQ(auc({0.3, 0.4, 0.5, 0.8}, {0, 1, 0, 1}), 0.75);
  // All tied: every pair counts 1/2.
  EXPECT_DOUBLE_EQ(auc({1, 1, 1, 1, 1}, {0, 1, 0, 1, 1}), 0.5);
  // pos {0.5, 0.7}, neg {0.5, 0.2}: 0.5 vs 0.5 tie 1/2, 0.5>0.2, 0.7>0.5, 0.7>0.2 -> 3.5/4.
  EXPECT_DOUBLE_EQ(auc({0.5, 0.5, 0.7, 0.2}, {1, 0, 1, 0}), 0.875);
  // Tensor overload.
  EXPECT_DOUBLE_EQ(auc(Tensor::from_vector<float>({0.3f, 0.4f, 0.5f, 0.8f}, {4}),
                       Tensor::from_vector<int64_t>({0, 1, 0, 1}, {4})),
                   0.75);
  EXPECT_THROW(auc({0.1, 0.2}, {1, 1}), Error);     // no negative
  EXPECT_THROW(auc({0.1, 0.2}, {0, 2}), Error);     // not 0/1
  EXPECT_THROW(auc({0.1, 0.2}, {0, 1, 1}), Error);  // sizes differ
}

TEST(DinDataSynthetic, DeterministicBySeed) {
  DinSynthetic a(DinSyntheticConfig::tiny(7)), b(DinSyntheticConfig::tiny(7));
  for (int k = 0; k < 3; ++k) expect_same(a.next(16), b.next(16));
  // Independent of batch size: 2 x 8 == 16 from the same position.
  DinSynthetic c(DinSyntheticConfig::tiny(7)), d(DinSyntheticConfig::tiny(7));
  const RecBatch whole = c.next(16);
  const RecBatch first = d.next(8), second = d.next(8);
  EXPECT_EQ(iv(whole.item).front(), iv(first.item).front());
  EXPECT_EQ(iv(whole.item).back(), iv(second.item).back());
  std::vector<int64_t> joined = iv(first.label), tail = iv(second.label);
  joined.insert(joined.end(), tail.begin(), tail.end());
  EXPECT_EQ(iv(whole.label), joined);
  // seek() replays; held-out set is fixed and differs from the training stream.
  c.seek(0);
  expect_same(c.next(16), whole);
  expect_same(a.heldout(0, 32), b.heldout(0, 32));
  EXPECT_NE(iv(a.heldout(0, 32).item), iv(DinSynthetic(DinSyntheticConfig::tiny(7)).next(32).item));
  // Another seed gives other data.
  EXPECT_NE(iv(DinSynthetic(DinSyntheticConfig::tiny(8)).next(32).item),
            iv(DinSynthetic(DinSyntheticConfig::tiny(7)).next(32).item));
  EXPECT_THROW(a.heldout(990, 20), Error);  // beyond heldout_size 1000
}

TEST(DinDataSynthetic, ShapesMaskLengthsFullSize) {
  DinSynthetic g;  // benchmark vocabularies
  const DinSyntheticConfig& c = g.config();
  EXPECT_EQ(c.n_users, 192403);
  EXPECT_EQ(c.n_items, 63001);
  EXPECT_EQ(c.n_cates, 801);
  ASSERT_EQ(int64_t(g.item_to_cate().size()), c.n_items);
  std::vector<int64_t> per_cate(size_t(c.n_cates), 0);
  for (int64_t cat : g.item_to_cate()) {
    ASSERT_TRUE(cat >= 0 && cat < c.n_cates);
    ++per_cate[size_t(cat)];
  }
  for (int64_t n : per_cate) EXPECT_GE(n, 1);
  EXPECT_EQ(g.cate_table().to_vector<int64_t>(), g.item_to_cate());

  int64_t min_len = 1000, max_len = 0, pos = 0, total = 0;
  for (int k = 0; k < 8; ++k) {
    const RecBatch b = g.next(256);
    check_consistent(b, 256, c.n_users, c.n_items, c.n_cates);
    const auto item = iv(b.item), cate = iv(b.cate), hi = iv(b.hist_item), hc = iv(b.hist_cate);
    for (size_t r = 0; r < item.size(); ++r) EXPECT_EQ(cate[r], g.item_to_cate()[size_t(item[r])]);
    const auto m = b.mask.to_vector<float>();
    for (size_t i = 0; i < hi.size(); ++i) {
      if (m[i] > 0) {
        EXPECT_EQ(hc[i], g.item_to_cate()[size_t(hi[i])]);
      }
    }
    for (int64_t l : iv(b.lengths)) {
      min_len = std::min(min_len, l);
      max_len = std::max(max_len, l);
    }
    for (int64_t l : iv(b.label)) pos += l;
    total += 256;
  }
  EXPECT_GE(min_len, 1);
  EXPECT_LE(max_len, 100);
  EXPECT_LE(min_len, 5);  // 2048 uniform draws in 1..100 reach both ends
  EXPECT_GE(max_len, 95);
  const double rate = double(pos) / double(total);
  EXPECT_GT(rate, 0.3);
  EXPECT_LT(rate, 0.6);
}

TEST(DinDataSynthetic, TinyConfigAndDevice) {
  DinSynthetic g(DinSyntheticConfig::tiny());
  const RecBatch b = g.next(64);
  check_consistent(b, 64, 100, 200, 10);
  EXPECT_LE(b.max_len(), 20);
  const RecBatch same = b.to(kCPU);
  expect_same(b, same);
  if (cuda_device_count() > 0) {
    const RecBatch d = b.to(cuda_device(0));
    EXPECT_TRUE(d.hist_item.is_cuda() && d.mask.is_cuda() && d.label.is_cuda());
    expect_same(b, d.to(kCPU));
  }
}

TEST(DinDataSynthetic, AttainableAucAndSignal) {
  DinSynthetic g;
  const double a = g.attainable_auc(50000);
  EXPECT_GT(a, 0.80);
  EXPECT_LT(a, 0.92);
  // The true probability is informative: AUC of p on the training stream is similar.
  std::vector<int64_t> y;
  std::vector<double> p;
  for (int64_t i = 0; i < 20000; ++i) {
    double pi = 0;
    y.push_back(g.example(DinSynthetic::Stream::train, i, &pi).label);
    p.push_back(pi);
  }
  EXPECT_NEAR(auc(p, y), a, 0.02);
  EXPECT_EQ(p, g.probabilities(DinSynthetic::Stream::train, 0, 20000));
  // A score that sees only the history-category share already carries most of the signal.
  std::vector<double> frac;
  for (int64_t i = 0; i < 20000; ++i) {
    const RecExample e = g.example(DinSynthetic::Stream::train, i);
    int64_t same = 0;
    for (int64_t c : e.hist_cate) same += c == e.cate;
    frac.push_back(double(same) / double(e.hist_cate.size()));
  }
  const double f = auc(frac, y);
  EXPECT_GT(f, 0.7);
  EXPECT_LT(f, a);
}

// --- DIEN TSV ------------------------------------------------------------------------------

std::string tmp_path(const std::string& name) { return ::testing::TempDir() + "din_data_" + name; }

std::string write(const std::string& name, const std::string& text) {
  const std::string p = tmp_path(name);
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

struct Vocabs {
  DienTsvOptions opt;
  Vocabs() {
    opt.uid_voc = write("uid.txt", "u_top\nAlice\nBob\n");
    opt.mid_voc = write("mid.txt", "default_mid\nm1\nm2\nm3\nm4\n");
    opt.cat_voc = write("cat.txt", "default_cat\nBooks\nComics\n");
  }
};

const std::string S = "\x02";

TEST(DinDataDienTsv, ReadsIdsAndPads) {
  Vocabs v;
  const std::string path =
      write("ok.tsv", "0\tAlice\tm3\tComics\tm1" + S + "m2\tBooks" + S + "Comics\n" +
                          "1\tBob\tm4\tBooks\tm2" + S + "zz" + S + "m4\tComics" + S + "Books" + S +
                          "Books\r\n" + "1\tCarol\tm9\tNovels\tm1\tBooks\n");
  DienTsvReader r(path, v.opt);
  ASSERT_EQ(r.size(), 3);
  const RecBatch b = r.batch(0, 3);
  check_consistent(b, 3, 3, 5, 3);
  EXPECT_EQ(b.max_len(), 3);
  EXPECT_EQ(iv(b.label), (std::vector<int64_t>{0, 1, 1}));
  EXPECT_EQ(iv(b.uid), (std::vector<int64_t>{1, 2, 0}));   // Carol unknown -> 0
  EXPECT_EQ(iv(b.item), (std::vector<int64_t>{3, 4, 0}));  // m9 unknown -> 0
  EXPECT_EQ(iv(b.cate), (std::vector<int64_t>{2, 1, 0}));
  EXPECT_EQ(iv(b.lengths), (std::vector<int64_t>{2, 3, 1}));
  EXPECT_EQ(iv(b.hist_item), (std::vector<int64_t>{1, 2, 0, 2, 0, 4, 1, 0, 0}));
  EXPECT_EQ(iv(b.hist_cate), (std::vector<int64_t>{1, 2, 0, 2, 1, 1, 1, 0, 0}));
  EXPECT_EQ(b.mask.to_vector<float>(), (std::vector<float>{1, 1, 0, 1, 1, 1, 1, 0, 0}));

  // Sequential batches: 2 + 1 (short last), or only 2 with drop_last.
  RecBatch x;
  ASSERT_TRUE(r.next(2, &x));
  EXPECT_EQ(x.batch_size(), 2);
  ASSERT_TRUE(r.next(2, &x));
  EXPECT_EQ(x.batch_size(), 1);
  EXPECT_EQ(x.max_len(), 1);
  EXPECT_FALSE(r.next(2, &x));
  r.reset();
  ASSERT_TRUE(r.next(2, &x, true));
  EXPECT_FALSE(r.next(2, &x, true));

  // max_hist_len keeps the most recent positions.
  DienTsvOptions o2 = v.opt;
  o2.max_hist_len = 2;
  const RecBatch t = DienTsvReader(path, o2).batch(1, 1);
  EXPECT_EQ(iv(t.hist_item), (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(iv(t.hist_cate), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(iv(t.lengths), (std::vector<int64_t>{2}));
}

void expect_error(const std::string& path, const DienTsvOptions& opt, const std::string& want) {
  try {
    DienTsvReader r(path, opt);
    ADD_FAILURE() << "no error for " << path;
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(want, 0), 0u)
        << "message '" << e.what() << "' does not start with '" << want << "'";
  }
}

TEST(DinDataDienTsv, MalformedInputNamesPathLine) {
  Vocabs v;
  const std::string good = "1\tAlice\tm1\tBooks\tm1\tBooks\n";
  std::string p = write("fields.tsv", good + "1\tAlice\tm1\tBooks\tm1\n");
  expect_error(p, v.opt, p + ":2: expected 6 tab-separated fields");
  p = write("label.tsv", good + good + "2\tAlice\tm1\tBooks\tm1\tBooks\n");
  expect_error(p, v.opt, p + ":3: label must be 0 or 1, got '2'");
  p = write("lens.tsv", "1\tAlice\tm1\tBooks\tm1" + S + "m2\tBooks\n");
  expect_error(p, v.opt, p + ":1: history lengths differ: 2 items but 1 categories");
  p = write("empty.tsv", good + "0\tAlice\tm1\tBooks\t\t\n");
  expect_error(p, v.opt, p + ":2: empty history");
  p = tmp_path("does_not_exist.tsv");
  std::remove(p.c_str());
  expect_error(p, v.opt, p + ":0: cannot open sample file");
  // Vocabulary errors.
  DienTsvOptions bad = v.opt;
  bad.mid_voc = write("dup_mid.txt", "default_mid\nm1\nm1\n");
  expect_error(write("g.tsv", good), bad, bad.mid_voc + ":3: duplicate token 'm1'");
  bad.mid_voc = write("blank_mid.txt", "default_mid\n\nm1\n");
  expect_error(write("g.tsv", good), bad, bad.mid_voc + ":2: empty token");
  bad.mid_voc = tmp_path("missing_mid.txt");
  std::remove(bad.mid_voc.c_str());
  expect_error(write("g.tsv", good), bad, bad.mid_voc + ":0: cannot open vocabulary file");
}

TEST(DinDataDienTsv, VocabLookup) {
  const Vocab v = Vocab::from_tokens({"default_cat", "A", "B"});
  EXPECT_EQ(v.size(), 3);
  EXPECT_EQ(v.id("B"), 2);
  EXPECT_EQ(v.id("nope"), 0);
  EXPECT_FALSE(v.contains("nope"));
  EXPECT_EQ(v.token(1), "A");
}

}  // namespace
}  // namespace aim::data
