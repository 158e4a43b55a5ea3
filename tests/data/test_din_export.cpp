// data/din_export: hand-written export directories (values, batches, truncation, every malformed
// case with its "path:line:" message), epoch_order, and the pickle -> export -> reader path
// through tests/data/make_fake_din_pickle.py and tools/din_pickle_export.py.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "data/din_export.h"
#include "data/metrics.h"
#include "tensor/check.h"
#include "tests/support/common.h"

namespace aim::data {
namespace {

using ::aim::testing::source_root;

// Temporary directories, removed when the test program exits.
std::string make_temp_dir() {
  struct Registry {
    std::vector<std::string> dirs;
    ~Registry() {
      for (const std::string& d : dirs) std::filesystem::remove_all(d);
    }
  };
  static Registry registry;
  char tmpl[] = "/tmp/aim_din_export_XXXXXX";
  AIM_CHECK(mkdtemp(tmpl) != nullptr, "mkdtemp failed");
  registry.dirs.push_back(tmpl);
  return tmpl;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A valid export: 3 users, 6 items, 3 categories (item k -> k % 3).
struct Files {
  std::string meta = "format aim-din-export-1\nusers 3\nitems 6\ncates 3\ntrain 3\ntest 4\n";
  std::string cate = "0\n1\n2\n0\n1\n2\n";
  std::string train = "0\t4\t1\t1 2 3\n2\t5\t0\t5\n1\t0\t1\t3 1\n";
  std::string test = "0\t2\t1\t1 2 3 4\n0\t1\t0\t1 2 3 4\n2\t3\t1\t5 0\n2\t0\t0\t5 0\n";

  std::string write() const {
    const std::string dir = make_temp_dir();
    write_file(dir + "/meta.txt", meta);
    write_file(dir + "/cate_list.txt", cate);
    write_file(dir + "/train.tsv", train);
    write_file(dir + "/test.tsv", test);
    return dir;
  }
};

std::vector<int64_t> i64(const Tensor& t) { return t.to_vector<int64_t>(); }

TEST(DinExport, LoadsValuesAndCategories) {
  const DinExport d = DinExport::load(Files().write());
  EXPECT_EQ(d.n_users(), 3);
  EXPECT_EQ(d.n_items(), 6);
  EXPECT_EQ(d.n_cates(), 3);
  EXPECT_EQ(d.cate_list(), (std::vector<int64_t>{0, 1, 2, 0, 1, 2}));
  ASSERT_EQ(d.train().size(), 3u);
  ASSERT_EQ(d.test().size(), 4u);
  const RecExample& e = d.train()[0];
  EXPECT_EQ(e.uid, 0);
  EXPECT_EQ(e.item, 4);
  EXPECT_EQ(e.cate, 1);
  EXPECT_EQ(e.label, 1);
  EXPECT_EQ(e.hist_item, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(e.hist_cate, (std::vector<int64_t>{1, 2, 0}));
  EXPECT_EQ(d.train()[1].hist_item, (std::vector<int64_t>{5}));
  EXPECT_EQ(d.train()[1].label, 0);
  EXPECT_EQ(d.test()[2].cate, 0);
  EXPECT_EQ(d.test()[2].hist_cate, (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(d.test_uids(), (std::vector<int64_t>{0, 0, 2, 2}));
}

TEST(DinExport, BatchPadsToLongestHistory) {
  const DinExport d = DinExport::load(Files().write());
  const RecBatch b = d.batch(DinSplit::Train, 1, 2);  // histories {5} and {3, 1}
  EXPECT_EQ(b.batch_size(), 2);
  EXPECT_EQ(b.max_len(), 2);
  EXPECT_EQ(i64(b.uid), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(i64(b.item), (std::vector<int64_t>{5, 0}));
  EXPECT_EQ(i64(b.cate), (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(i64(b.hist_item), (std::vector<int64_t>{5, 0, 3, 1}));
  EXPECT_EQ(i64(b.hist_cate), (std::vector<int64_t>{2, 0, 0, 1}));
  EXPECT_EQ(b.mask.to_vector<float>(), (std::vector<float>{1, 0, 1, 1}));
  EXPECT_EQ(i64(b.lengths), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(i64(b.label), (std::vector<int64_t>{0, 1}));

  const RecBatch g = d.gather(DinSplit::Test, {3, 0, 2}, 1, 2);  // test samples 0 and 2
  EXPECT_EQ(i64(g.item), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(i64(g.hist_item), (std::vector<int64_t>{1, 2, 3, 4, 5, 0, 0, 0}));
  EXPECT_EQ(i64(g.label), (std::vector<int64_t>{1, 1}));

  EXPECT_THROW(d.batch(DinSplit::Train, 2, 2), Error);  // past the end
  EXPECT_THROW(d.batch(DinSplit::Test, 0, 0), Error);
  EXPECT_THROW(d.gather(DinSplit::Train, {0, 7}, 0, 2), Error);  // index outside the split
  EXPECT_THROW(d.gather(DinSplit::Train, {0, 1}, 1, 2), Error);  // past the order's end
}

TEST(DinExport, MaxHistLenKeepsMostRecent) {
  const DinExport d = DinExport::load(Files().write(), DinExportOptions{2});
  EXPECT_EQ(d.train()[0].hist_item, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(d.train()[0].hist_cate, (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(d.train()[1].hist_item, (std::vector<int64_t>{5}));
  EXPECT_EQ(d.test()[0].hist_item, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(DinExport::load(Files().write()).test()[0].hist_item.size(), 4u);  // 0 = keep all
  EXPECT_THROW(DinExport::load(Files().write(), DinExportOptions{-1}), Error);
}

TEST(DinExport, ToleratesCrlf) {
  Files f;
  for (std::string* s : {&f.meta, &f.cate, &f.train, &f.test}) {
    std::string crlf;
    for (char c : *s) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
    *s = crlf;
  }
  const DinExport d = DinExport::load(f.write());
  EXPECT_EQ(d.train()[0].hist_item, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(d.test()[3].hist_item, (std::vector<int64_t>{5, 0}));
  EXPECT_EQ(d.cate_list().back(), 2);
}

TEST(DinExport, LastLineWithoutNewline) {
  Files f;
  f.train.pop_back();
  f.cate.pop_back();
  const DinExport d = DinExport::load(f.write());
  EXPECT_EQ(d.train().back().hist_item, (std::vector<int64_t>{3, 1}));
}

struct BadCase {
  const char* name;
  std::string Files::*file;
  std::string text;
  std::string file_name;  // file the message must name
  std::string expected;   // message after "<dir>/<file_name>"
};

TEST(DinExport, MalformedInputNamesFileAndLine) {
  const std::string meta_tail = "cates 3\ntrain 3\ntest 4\n";
  const std::vector<BadCase> cases = {
      {"meta no space", &Files::meta, "format aim-din-export-1\nusers\n", "meta.txt",
       ":2: expected 'key value' (one space), got 'users'"},
      {"meta two spaces", &Files::meta, "format  aim-din-export-1\n", "meta.txt",
       ":1: expected 'key value' (one space)"},
      {"meta format", &Files::meta, "format aim-din-export-2\n", "meta.txt",
       ":1: format 'aim-din-export-2' is not supported (expected aim-din-export-1)"},
      {"meta unknown key", &Files::meta, "format aim-din-export-1\nusers 3\nitems 6\nvocab 3\n",
       "meta.txt", ":4: unknown key 'vocab' (expected format, users, items, cates, train, test)"},
      {"meta duplicate", &Files::meta, "format aim-din-export-1\nusers 3\nusers 4\n", "meta.txt",
       ":3: duplicate key 'users' (first at line 2)"},
      {"meta not a count", &Files::meta, "format aim-din-export-1\nusers 3x\n", "meta.txt",
       ":2: users '3x' is not a count (expected a non-negative integer)"},
      {"meta negative", &Files::meta, "format aim-din-export-1\nitems -6\n", "meta.txt",
       ":2: items '-6' is not a count"},
      {"meta missing key", &Files::meta,
       "format aim-din-export-1\nusers 3\nitems 6\n" + meta_tail.substr(8), "meta.txt",
       ":0: missing key 'cates'"},
      {"meta zero users", &Files::meta, "format aim-din-export-1\nusers 0\nitems 6\n" + meta_tail,
       "meta.txt", ":2: users must be >= 1, got 0"},
      {"cate range", &Files::cate, "0\n1\n2\n3\n1\n2\n", "cate_list.txt",
       ":4: category 3 out of range (expected 0 <= category < cates = 3)"},
      {"cate not int", &Files::cate, "0\n1\nx\n0\n1\n2\n", "cate_list.txt",
       ":3: category 'x' is not an integer (expected a decimal id)"},
      {"cate empty line", &Files::cate, "0\n\n2\n0\n1\n2\n", "cate_list.txt",
       ":2: category '' is not an integer"},
      {"cate too few", &Files::cate, "0\n1\n2\n0\n1\n", "cate_list.txt",
       ":0: 5 lines, expected items = 6 (meta.txt; line k+1 = item k)"},
      {"cate too many", &Files::cate, "0\n1\n2\n0\n1\n2\n0\n", "cate_list.txt",
       ":7: more lines than items = 6"},
      {"train columns", &Files::train, "0\t4\t1\t1 2 3\n2\t5\t0\n", "train.tsv",
       ":2: expected 4 tab-separated fields (uid item label hist), got 3"},
      {"train uid range", &Files::train, "3\t4\t1\t1 2 3\n", "train.tsv",
       ":1: uid 3 out of range (expected 0 <= uid < users = 3)"},
      {"train item range", &Files::train, "0\t6\t1\t1 2 3\n", "train.tsv",
       ":1: item 6 out of range (expected 0 <= item < items = 6)"},
      {"train negative item", &Files::train, "0\t-1\t1\t1 2 3\n", "train.tsv",
       ":1: item -1 out of range"},
      {"train label", &Files::train, "0\t4\t1\t1 2 3\n0\t4\t2\t1\n", "train.tsv",
       ":2: label must be 0 or 1, got '2'"},
      {"train empty hist", &Files::train, "0\t4\t1\t\n", "train.tsv",
       ":1: empty history (expected at least one item id)"},
      {"train double space", &Files::train, "0\t4\t1\t1  2\n", "train.tsv",
       ":1: empty history token (expected item ids joined by one space)"},
      {"train trailing space", &Files::train, "0\t4\t1\t1 2 \n", "train.tsv",
       ":1: empty history token"},
      {"train hist range", &Files::train, "0\t4\t1\t1 9 3\n", "train.tsv",
       ":1: history item 9 out of range (expected 0 <= history item < items = 6)"},
      {"train hist not int", &Files::train, "0\t4\t1\t1 2.5\n", "train.tsv",
       ":1: history item '2.5' is not an integer"},
      {"train count", &Files::train, "0\t4\t1\t1 2 3\n", "train.tsv",
       ":0: 1 samples, expected train = 3 (meta.txt)"},
      {"test count", &Files::test, "0\t2\t1\t1\n0\t1\t0\t1\n2\t3\t1\t5\n2\t0\t0\t5\n2\t0\t0\t5\n",
       "test.tsv", ":0: 5 samples, expected test = 4 (meta.txt)"},
      {"test uid", &Files::test, "0\t2\t1\t1\nu7\t1\t0\t1\n", "test.tsv",
       ":2: uid 'u7' is not an integer"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    Files f;
    f.*(c.file) = c.text;
    const std::string dir = f.write();
    try {
      DinExport::load(dir);
      ADD_FAILURE() << "expected aim::Error";
    } catch (const Error& e) {
      const std::string want = dir + "/" + c.file_name + c.expected;
      EXPECT_EQ(std::string(e.what()).substr(0, want.size()), want) << e.what();
    }
  }
}

TEST(DinExport, MissingFiles) {
  try {
    DinExport::load("/nonexistent/aim_din");
    FAIL() << "expected aim::Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/aim_din/meta.txt:0: cannot open meta file for reading");
  }
  const std::string dir = Files().write();
  ASSERT_EQ(std::remove((dir + "/test.tsv").c_str()), 0);
  try {
    DinExport::load(dir);
    FAIL() << "expected aim::Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), dir + "/test.tsv:0: cannot open sample file for reading");
  }
}

TEST(DinExport, EpochOrderIsDeterministicPermutation) {
  const int64_t n = 1000;
  const std::vector<int64_t> a = epoch_order(n, 7, 0);
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(sorted[size_t(i)], i);
  EXPECT_EQ(epoch_order(n, 7, 0), a);  // resumable: same (seed, epoch) -> same order
  EXPECT_NE(epoch_order(n, 7, 1), a);  // reshuffled each epoch
  EXPECT_NE(epoch_order(n, 8, 0), a);
  int64_t fixed = 0;
  for (int64_t i = 0; i < n; ++i) fixed += a[size_t(i)] == i;
  EXPECT_LT(fixed, 10);  // a shuffle, not the identity (expected about 1 fixed point)
  EXPECT_TRUE(epoch_order(0, 7, 3).empty());
  EXPECT_EQ(epoch_order(1, 7, 3), std::vector<int64_t>{0});
  EXPECT_THROW(epoch_order(-1, 7, 0), Error);
  EXPECT_THROW(epoch_order(5, 7, -1), Error);
  // Every position is roughly uniform: element 0 lands in each half about equally often.
  int64_t first_half = 0;
  for (int64_t e = 0; e < 400; ++e) {
    const std::vector<int64_t> o = epoch_order(10, 3, e);
    first_half += std::find(o.begin(), o.end(), 0) - o.begin() < 5;
  }
  EXPECT_NEAR(double(first_half) / 400.0, 0.5, 0.1);
}

// Runs cmd through the shell; returns its exit status (-1 when it did not run).
int run(const std::string& cmd) {
  const int rc = std::system(cmd.c_str());
  return rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

const char* kPython = "/usr/bin/python3";

// Python with numpy (the fake pickle holds numpy values like the reference's); skipped when
// missing, but a CI machine must have it.
#define REQUIRE_PYTHON_NUMPY()                                                              \
  do {                                                                                      \
    if (run(std::string(kPython) + " -c 'import numpy' >/dev/null 2>&1") != 0) {            \
      if (std::getenv("CI")) FAIL() << kPython << " with numpy is required when CI is set"; \
      GTEST_SKIP() << kPython << " with numpy not available";                               \
    }                                                                                       \
  } while (0)

TEST(DinExport, PickleToReaderEndToEnd) {
  REQUIRE_PYTHON_NUMPY();
  const std::string root = source_root(), dir = make_temp_dir();
  const std::string pkl = dir + "/dataset.pkl", out = dir + "/export";
  ASSERT_EQ(run(str(kPython, " ", root, "/tests/data/make_fake_din_pickle.py ", pkl)), 0);
  ASSERT_EQ(run(str(kPython, " ", root, "/tools/din_pickle_export.py ", pkl, " ", out, " > ", dir,
                    "/log.txt 2>&1")),
            0)
      << read_file(dir + "/log.txt");
  const DinExport d = DinExport::load(out);
  // The fake world (make_fake_din_pickle.py): 6 users, 30 items, 4 categories, item k -> k % 4,
  // user u has 3 + u positives -> (3 + u - 2) * 2 train samples and one test pair.
  EXPECT_EQ(d.n_users(), 6);
  EXPECT_EQ(d.n_items(), 30);
  EXPECT_EQ(d.n_cates(), 4);
  int64_t n_train = 0;
  for (int u = 0; u < 6; ++u) n_train += 2 * (1 + u);
  ASSERT_EQ(d.size(DinSplit::Train), n_train);
  ASSERT_EQ(d.size(DinSplit::Test), 12);
  for (int64_t k = 0; k < 30; ++k) EXPECT_EQ(d.cate_list()[size_t(k)], k % 4);

  // Test pairs: (pos, 1) then (neg, 0), same uid and history; each user once; history length
  // n_u - 1; the negative is not among the user's positives.
  std::map<int64_t, std::vector<int64_t>> full;  // uid -> all positives (test hist + pos)
  for (size_t k = 0; k < d.test().size(); k += 2) {
    const RecExample &p = d.test()[k], &n = d.test()[k + 1];
    EXPECT_EQ(p.label, 1);
    EXPECT_EQ(n.label, 0);
    EXPECT_EQ(p.uid, n.uid);
    EXPECT_EQ(p.hist_item, n.hist_item);
    EXPECT_EQ(int64_t(p.hist_item.size()), 3 + p.uid - 1);
    EXPECT_EQ(p.cate, p.item % 4);
    for (size_t t = 0; t < p.hist_item.size(); ++t) EXPECT_EQ(p.hist_cate[t], p.hist_item[t] % 4);
    std::vector<int64_t> all = p.hist_item;
    all.push_back(p.item);
    EXPECT_EQ(std::count(all.begin(), all.end(), n.item), 0);
    EXPECT_TRUE(full.emplace(p.uid, all).second) << "uid " << p.uid << " twice in test";
  }
  EXPECT_EQ(full.size(), 6u);
  // Train samples: history = a prefix pos[:i] (1 <= i <= n-2) of the user's positives; label 1
  // items are pos[i], label 0 items are not positives of the user.
  for (const RecExample& e : d.train()) {
    const std::vector<int64_t>& all = full.at(e.uid);
    const size_t i = e.hist_item.size();
    ASSERT_TRUE(i >= 1 && i + 2 <= all.size()) << "uid " << e.uid << " hist " << i;
    EXPECT_TRUE(std::equal(e.hist_item.begin(), e.hist_item.end(), all.begin()));
    if (e.label == 1)
      EXPECT_EQ(e.item, all[i]);
    else
      EXPECT_EQ(std::count(all.begin(), all.end(), e.item), 0);
    EXPECT_EQ(e.cate, e.item % 4);
  }
  // GAUC groups come straight from the reader.
  std::vector<double> scores;
  std::vector<int64_t> labels;
  for (const RecExample& e : d.test()) {
    scores.push_back(e.label ? 1.0 : 0.0);  // a perfect scorer
    labels.push_back(e.label);
  }
  EXPECT_DOUBLE_EQ(gauc(scores, labels, d.test_uids()), 1.0);
}

TEST(DinExport, PickleExporterNamesBadRecord) {
  REQUIRE_PYTHON_NUMPY();
  const std::string root = source_root(), dir = make_temp_dir();
  const std::map<std::string, std::string> expected = {
      {"train_tuple",
       "din_pickle_export: train_set[3]: expected a tuple of 4 fields (uid, hist, item, label), "
       "got 3"},
      {"item_range",
       "din_pickle_export: test_set[2] pos: 30 out of range (expected 0 <= id < item_count = 30)"},
      {"empty_hist", "din_pickle_export: train_set[5]: empty history"},
      {"cate_range",
       "din_pickle_export: cate_list[7]: 4 out of range (expected 0 <= id < cate_count = 4)"},
  };
  for (const auto& [kind, want] : expected) {
    SCOPED_TRACE(kind);
    const std::string pkl = dir + "/" + kind + ".pkl", out = dir + "/out_" + kind;
    ASSERT_EQ(run(str(kPython, " ", root, "/tests/data/make_fake_din_pickle.py ", pkl, " --break ",
                      kind)),
              0);
    EXPECT_EQ(run(str(kPython, " ", root, "/tools/din_pickle_export.py ", pkl, " ", out, " > ", dir,
                      "/err.txt 2>&1")),
              1);
    const std::string err = read_file(dir + "/err.txt");
    EXPECT_EQ(err.substr(0, want.size()), want) << err;
    std::ifstream meta(out + "/meta.txt");
    EXPECT_FALSE(meta.good()) << "no export may be left behind";
  }
}

}  // namespace
}  // namespace aim::data
