#include "data/census.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/din_export.h"  // epoch_order
#include "data/metrics.h"
#include "data/philox_draw.h"
#include "tensor/check.h"

namespace aim::data {
namespace {

const std::vector<std::string> kEducation = {
    "Bachelors",  "HS-grad",   "11th",      "Masters",   "9th",         "Some-college",
    "Assoc-acdm", "Assoc-voc", "7th-8th",   "Doctorate", "Prof-school", "5th-6th",
    "10th",       "1st-4th",   "Preschool", "12th"};
// Adult's education_num of each kEducation entry.
const std::vector<int64_t> kEducationNum = {13, 9, 7, 14, 5, 10, 12, 11, 4, 16, 15, 3, 6, 2, 1, 8};
const std::vector<std::string> kMarital = {
    "Married-civ-spouse", "Divorced", "Married-spouse-absent", "Never-married", "Separated",
    "Married-AF-spouse",  "Widowed"};
const std::vector<std::string> kRelationship = {"Husband",   "Not-in-family", "Wife",
                                                "Own-child", "Unmarried",     "Other-relative"};
const std::vector<std::string> kWorkclass = {"Self-emp-not-inc", "Private",     "State-gov",
                                             "Federal-gov",      "Local-gov",   "?",
                                             "Self-emp-inc",     "Without-pay", "Never-worked"};
const std::vector<std::string> kOccupations = {
    "Tech-support",     "Craft-repair",      "Other-service",     "Sales",        "Exec-managerial",
    "Prof-specialty",   "Handlers-cleaners", "Machine-op-inspct", "Adm-clerical", "Farming-fishing",
    "Transport-moving", "Priv-house-serv",   "Protective-serv",   "Armed-Forces", "?"};
const std::vector<int64_t> kAgeBoundaries = {18, 25, 30, 35, 40, 45, 50, 55, 60, 65};

constexpr int64_t kOffMarital = 16, kOffRelationship = 23, kOffWorkclass = 29, kOffOccupation = 38,
                  kOffAge = 38 + kCensusHashBuckets, kOffCross1 = kOffAge + 11,
                  kOffCross2 = kOffCross1 + kCensusHashBuckets;
static_assert(kOffCross2 + kCensusHashBuckets == kWidePad, "wide layout");

int64_t lookup(const std::vector<std::string>& vocab, const std::string& v) {
  for (size_t i = 0; i < vocab.size(); ++i)
    if (vocab[i] == v) return int64_t(i);
  return -1;
}

int64_t bucket(const std::string& s) { return int64_t(fnv1a64(s) % uint64_t(kCensusHashBuckets)); }

constexpr uint64_t kTagTrain = 1, kTagEval = 2;
constexpr int kRowBlockShift = 4;  // each row owns 16 counter blocks (64 words) of its stream

bool parse_int(const std::string& s, int64_t& out) {
  if (s.empty()) {
    out = 0;  // the reference's record default
    return true;
  }
  size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  if (i == s.size() || s.size() > 18) return false;
  for (size_t k = i; k < s.size(); ++k)
    if (s[k] < '0' || s[k] > '9') return false;
  out = std::stoll(s);
  return true;
}

}  // namespace

const std::vector<std::string>& census_education_vocab() { return kEducation; }
const std::vector<std::string>& census_marital_vocab() { return kMarital; }
const std::vector<std::string>& census_relationship_vocab() { return kRelationship; }
const std::vector<std::string>& census_workclass_vocab() { return kWorkclass; }
const std::vector<int64_t>& census_age_boundaries() { return kAgeBoundaries; }

bool clean_census_line(std::string& line) {
  size_t b = 0, e = line.size();
  while (b < e && std::isspace(static_cast<unsigned char>(line[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(line[e - 1]))) --e;
  std::string s = line.substr(b, e - b);
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    out.push_back(s[i]);
    if (s[i] == ',' && i + 1 < s.size() && s[i + 1] == ' ') ++i;
  }
  if (out.empty() || out.find(',') == std::string::npos) return false;
  if (out.back() == '.') out.pop_back();
  line = out;
  return true;
}

CensusRow parse_census_line(const std::string& cleaned, const std::string& where) {
  std::vector<std::string> f;
  size_t start = 0;
  while (true) {
    const size_t c = cleaned.find(',', start);
    f.push_back(cleaned.substr(start, c == std::string::npos ? std::string::npos : c - start));
    if (c == std::string::npos) break;
    start = c + 1;
  }
  AIM_CHECK(f.size() == 15, where, ": ", f.size(),
            " fields, expected 15 (age, workclass, fnlwgt, education, education_num, "
            "marital_status, occupation, relationship, race, gender, capital_gain, capital_loss, "
            "hours_per_week, native_country, income_bracket)");
  CensusRow r;
  const char* names[] = {"age",          "fnlwgt",       "education_num",
                         "capital_gain", "capital_loss", "hours_per_week"};
  const int cols[] = {0, 2, 4, 10, 11, 12};
  int64_t* dst[] = {&r.age,          &r.fnlwgt,       &r.education_num,
                    &r.capital_gain, &r.capital_loss, &r.hours_per_week};
  // Counts, ages, hours and money: none is negative (fnlwgt a census weight, education_num >= 1
  // in the data but 0 is harmless); a negative value is a broken row, not a feature.
  for (int k = 0; k < 6; ++k)
    AIM_CHECK(parse_int(f[size_t(cols[k])], *dst[k]) && *dst[k] >= 0, where, ": column ",
              cols[k] + 1, " (", names[k], ") is '", f[size_t(cols[k])],
              "', expected an integer >= 0");
  r.workclass = f[1];
  r.education = f[3];
  r.marital_status = f[5];
  r.occupation = f[6];
  r.relationship = f[7];
  r.race = f[8];
  r.gender = f[9];
  r.native_country = f[13];
  r.income_bracket = f[14];
  AIM_CHECK(r.income_bracket == ">50K" || r.income_bracket == "<=50K", where,
            ": column 15 (income_bracket) is '", r.income_bracket, "', expected >50K or <=50K");
  return r;
}

std::vector<CensusRow> read_census_csv(const std::string& path) {
  std::ifstream in(path);
  AIM_CHECK(in.good(), path, ": cannot open");
  std::vector<CensusRow> rows;
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (!clean_census_line(line)) continue;
    rows.push_back(parse_census_line(line, path + ":" + std::to_string(n)));
  }
  AIM_CHECK(!in.bad(), path, ": read error after line ", n);
  AIM_CHECK(!rows.empty(), path, ": no data rows (", n, " lines, all blank or comments)");
  return rows;
}

uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

int64_t census_age_bucket(int64_t age) {
  return int64_t(std::upper_bound(kAgeBoundaries.begin(), kAgeBoundaries.end(), age) -
                 kAgeBoundaries.begin());
}

CensusFeatures census_features(const CensusRow& r) {
  CensusFeatures x{};
  const int64_t edu = lookup(kEducation, r.education), mar = lookup(kMarital, r.marital_status),
                rel = lookup(kRelationship, r.relationship), wc = lookup(kWorkclass, r.workclass);
  const int64_t occ = bucket(r.occupation), age_b = census_age_bucket(r.age);
  auto id = [](int64_t v, int64_t off) { return v < 0 ? kWidePad : off + v; };
  x.wide = {
      id(edu, 0),
      id(mar, kOffMarital),
      id(rel, kOffRelationship),
      id(wc, kOffWorkclass),
      kOffOccupation + occ,
      kOffAge + age_b,
      kOffCross1 + bucket(r.education + "_X_" + r.occupation),
      kOffCross2 + bucket(std::to_string(age_b) + "_X_" + r.education + "_X_" + r.occupation)};
  x.dense.fill(0.f);
  x.dense[0] = float(r.age);
  x.dense[1] = float(r.education_num);
  x.dense[2] = float(r.capital_gain);
  x.dense[3] = float(r.capital_loss);
  x.dense[4] = float(r.hours_per_week);
  if (wc >= 0) x.dense[size_t(5 + wc)] = 1.f;
  if (edu >= 0) x.dense[size_t(5 + 9 + edu)] = 1.f;
  if (mar >= 0) x.dense[size_t(5 + 9 + 16 + mar)] = 1.f;
  if (rel >= 0) x.dense[size_t(5 + 9 + 16 + 7 + rel)] = 1.f;
  x.occupation = occ;
  x.label = r.income_bracket == ">50K" ? 1 : 0;
  return x;
}

TensorMap census_batch(const std::vector<CensusFeatures>& rows) {
  const int64_t b = int64_t(rows.size());
  std::vector<int64_t> wide, occ, label;
  std::vector<float> dense;
  wide.reserve(size_t(b * kCensusWideColumns));
  dense.reserve(size_t(b * kCensusDense));
  for (const CensusFeatures& x : rows) {
    wide.insert(wide.end(), x.wide.begin(), x.wide.end());
    dense.insert(dense.end(), x.dense.begin(), x.dense.end());
    occ.push_back(x.occupation);
    label.push_back(x.label);
  }
  return {{"wide", Tensor::from_vector(wide, {b, kCensusWideColumns})},
          {"dense", Tensor::from_vector(dense, {b, kCensusDense})},
          {"occupation", Tensor::from_vector(occ, {b})},
          {"label", Tensor::from_vector(label, {b})}};
}

// ---- synthetic -------------------------------------------------------------------------------

CensusSynthetic::CensusSynthetic(const CensusSyntheticConfig& cfg) : cfg_(cfg) {
  AIM_CHECK(cfg.epoch_size > 0 && cfg.eval_size > 0,
            "census synthetic: epoch_size and eval_size must be positive");
  key_train_ = philox_key(cfg.seed, kTagTrain);
  key_eval_ = philox_key(cfg.seed, kTagEval);
}

CensusRow CensusSynthetic::row(int64_t i, bool eval) const {
  PhiloxDraw d(eval ? key_eval_ : key_train_, uint64_t(i) << kRowBlockShift);
  CensusRow r;
  r.age = 17 + d.below(74);
  r.workclass = kWorkclass[size_t(d.below(9))];
  r.fnlwgt = 10000 + d.below(1000000);
  const int64_t e = d.below(16);
  r.education = kEducation[size_t(e)];
  r.education_num = kEducationNum[size_t(e)];
  r.marital_status = kMarital[size_t(d.below(7))];
  r.occupation = kOccupations[size_t(d.below(int64_t(kOccupations.size())))];
  r.relationship = kRelationship[size_t(d.below(6))];
  r.race = "White";
  r.gender = d.below(2) ? "Male" : "Female";
  r.capital_gain = d.unit() < 0.1 ? 1 + d.below(19999) : 0;
  r.capital_loss = 0;
  r.hours_per_week = 1 + d.below(99);
  r.native_country = "United-States";
  const double p = 1.0 / (1.0 + std::exp(-score(r)));
  r.income_bracket = d.unit() < p ? ">50K" : "<=50K";
  return r;
}

double CensusSynthetic::score(const CensusRow& r) {
  double s = -1.5;
  s += 0.35 * double(r.education_num - 10);
  s += r.marital_status == "Married-civ-spouse" ? 1.5 : -0.5;
  s += 0.05 * double(std::min<int64_t>(r.age, 60) - 40);
  s += 0.03 * double(r.hours_per_week - 40);
  s += r.capital_gain > 0 ? 1.0 : 0.0;
  // education x occupation interaction: +-1.5 by one bit of the pair's hash.
  s += (fnv1a64(r.education + "|" + r.occupation) >> 17 & 1) ? 1.5 : -1.5;
  return s;
}

double CensusSynthetic::attainable_auc(int64_t n) const {
  AIM_CHECK(n > 0 && n <= cfg_.eval_size, "census attainable_auc: ", n,
            " rows asked, the "
            "evaluation set has ",
            cfg_.eval_size);
  std::vector<double> s;
  std::vector<int64_t> l;
  for (int64_t i = 0; i < n; ++i) {
    const CensusRow r = row(i, true);
    s.push_back(score(r));
    l.push_back(r.income_bracket == ">50K" ? 1 : 0);
  }
  return auc(s, l);
}

std::string CensusSyntheticSource::describe() const {
  return "census-synthetic seed " + std::to_string(gen_.config().seed);
}
std::string CensusSyntheticSource::fingerprint() const {
  const auto& c = gen_.config();
  return "census-synthetic-1 seed=" + std::to_string(c.seed) +
         " epoch=" + std::to_string(c.epoch_size) + " eval=" + std::to_string(c.eval_size);
}

TensorMap CensusSyntheticSource::next(int64_t batch_size) {
  AIM_CHECK(batch_size > 0, "census synthetic: batch size must be positive, got ", batch_size);
  std::vector<CensusFeatures> rows;
  for (int64_t i = 0; i < batch_size; ++i)
    rows.push_back(census_features(gen_.row(pos_ + i, false)));
  pos_ += batch_size;
  return census_batch(rows);
}

TensorMap CensusSyntheticSource::eval_batch(int64_t start, int64_t count) const {
  AIM_CHECK(start >= 0 && count > 0 && start + count <= eval_size(),
            "census synthetic: eval rows [", start, ", ", start + count, ") outside [0, ",
            eval_size(), ")");
  std::vector<CensusFeatures> rows;
  for (int64_t i = 0; i < count; ++i) rows.push_back(census_features(gen_.row(start + i, true)));
  return census_batch(rows);
}

// ---- files -----------------------------------------------------------------------------------

CensusFileSource::CensusFileSource(const std::string& dir, uint64_t seed) : dir_(dir), seed_(seed) {
  namespace fs = std::filesystem;
  for (const char* name : {"adult.data", "adult.test"})
    AIM_CHECK(fs::is_regular_file(fs::path(dir) / name), "--data ", dir, ": no ", name,
              " (wide_deep reads a directory with adult.data and adult.test, "
              "docs/wide-deep-data.md)");
  for (const CensusRow& r : read_census_csv((fs::path(dir) / "adult.data").string()))
    train_.push_back(census_features(r));
  for (const CensusRow& r : read_census_csv((fs::path(dir) / "adult.test").string()))
    test_.push_back(census_features(r));
}

std::string CensusFileSource::describe() const { return "census " + dir_; }
std::string CensusFileSource::fingerprint() const {
  return "census-csv-1 " + dir_ + " train=" + std::to_string(train_.size()) +
         " test=" + std::to_string(test_.size()) + " seed=" + std::to_string(seed_);
}

TensorMap CensusFileSource::next(int64_t batch_size) {
  const int64_t n = epoch_size();
  AIM_CHECK(batch_size > 0 && batch_size <= n, "census: batch size ", batch_size, " outside [1, ",
            n, "] (rows of ", dir_, "/adult.data)");
  const int64_t per_epoch = (n / batch_size) * batch_size;  // last partial batch skipped
  const int64_t epoch = pos_ / per_epoch, at = pos_ % per_epoch;
  if (epoch != order_epoch_) {
    order_ = epoch_order(n, seed_, epoch);
    order_epoch_ = epoch;
  }
  std::vector<CensusFeatures> rows;
  for (int64_t i = 0; i < batch_size; ++i) rows.push_back(train_[size_t(order_[size_t(at + i)])]);
  pos_ += batch_size;
  return census_batch(rows);
}

TensorMap CensusFileSource::eval_batch(int64_t start, int64_t count) const {
  AIM_CHECK(start >= 0 && count > 0 && start + count <= eval_size(), "census: eval rows [", start,
            ", ", start + count, ") outside [0, ", eval_size(), ")");
  return census_batch({test_.begin() + start, test_.begin() + start + count});
}

}  // namespace aim::data
