// Census (UCI Adult) data for Wide&Deep (MODELS.md §4.4): the CSV parser with the reference's
// cleaning rules (TF official census_dataset.py), the feature columns of the reference's
// build_model_columns(), the synthetic census source (default) and the file source over
// adult.data / adult.test. Definitions, the hash, the synthetic generator, its attainable AUC and
// every error message: docs/wide-deep-data.md.
//
// Batches (both sources) are CPU tensors, B rows:
//   wide       [B, 8]  i64  row ids of the wide linear model's weight [kWideRows, 1]: one per
//                           wide column (education, marital_status, relationship, workclass,
//                           occupation hash, age bucket, education x occupation,
//                           age_bucket x education x occupation), each column's ids offset into
//                           one table; an out-of-vocabulary value gets kWidePad (a zero row)
//   dense      [B, 43] f32  the deep part's 5 raw numerics (age, education_num, capital_gain,
//                           capital_loss, hours_per_week) then the one-hots of workclass (9),
//                           education (16), marital_status (7), relationship (6); an
//                           out-of-vocabulary value is all zeros (TF's default_value -1)
//   occupation [B]     i64  occupation hash bucket in [0, 1000) (deep embedding input)
//   label      [B]     i64  1 when income_bracket == ">50K"
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "data/source.h"

namespace aim::data {

// The 15 CSV columns in file order.
struct CensusRow {
  int64_t age = 0;
  std::string workclass;
  int64_t fnlwgt = 0;
  std::string education;
  int64_t education_num = 0;
  std::string marital_status, occupation, relationship, race, gender;
  int64_t capital_gain = 0, capital_loss = 0, hours_per_week = 0;
  std::string native_country, income_bracket;
};

// Reference cleaning (census_dataset.py) of one raw line: strip surrounding whitespace, replace
// ", " by ",", drop a trailing "."; returns false for a line to skip (empty, or no ',' at all:
// adult.test's "|1x3 Cross validator" header).
bool clean_census_line(std::string& line);

// Parses one cleaned line: exactly 15 fields; the 6 integer columns must be decimal integers
// (an empty field takes the reference's default 0, an empty string column ""). Errors throw
// aim::Error "<where>: what is wrong" (where = "file:line").
CensusRow parse_census_line(const std::string& cleaned, const std::string& where);

// Reads a whole adult.data / adult.test file with the rules above; errors name file:line.
std::vector<CensusRow> read_census_csv(const std::string& path);

// ---- feature columns ---------------------------------------------------------------------------

const std::vector<std::string>& census_education_vocab();     // 16, reference order
const std::vector<std::string>& census_marital_vocab();       // 7
const std::vector<std::string>& census_relationship_vocab();  // 6
const std::vector<std::string>& census_workclass_vocab();     // 9 (includes "?")
const std::vector<int64_t>& census_age_boundaries();          // 18, 25, ..., 65 -> 11 buckets
constexpr int64_t kCensusHashBuckets = 1000;                  // occupation and both crosses
constexpr int64_t kCensusWideColumns = 8;
constexpr int64_t kCensusDense = 5 + 9 + 16 + 7 + 6;  // 43
// Wide id layout: education [0,16) marital [16,23) relationship [23,29) workclass [29,38)
// occupation [38,1038) age bucket [1038,1049) edu x occ [1049,2049) age x edu x occ
// [2049,3049), then the zero row kWidePad = 3049.
constexpr int64_t kWidePad = 16 + 7 + 6 + 9 + 3 * kCensusHashBuckets + 11;
constexpr int64_t kWideRows = kWidePad + 1;

// 64-bit FNV-1a of the bytes (offset basis 0xcbf29ce484222325, prime 0x100000001b3); hash
// buckets are fnv1a64(s) % buckets. Crosses hash their values joined by "_X_" (the age bucket
// as its decimal index), e.g. "Bachelors_X_Sales". Not TF's FarmHash: bucket ids differ from
// a TF checkpoint's, the model is the same.
uint64_t fnv1a64(const std::string& s);
int64_t census_age_bucket(int64_t age);  // number of boundaries <= age, in [0, 11)

struct CensusFeatures {
  std::array<int64_t, kCensusWideColumns> wide;
  std::array<float, kCensusDense> dense;
  int64_t occupation = 0;
  int64_t label = 0;
};
CensusFeatures census_features(const CensusRow& r);
// Collates rows into the batch tensors described at the top.
TensorMap census_batch(const std::vector<CensusFeatures>& rows);

// ---- synthetic census ------------------------------------------------------------------------

struct CensusSyntheticConfig {
  uint64_t seed = 1;
  int64_t epoch_size = 32561;  // adult.data rows
  int64_t eval_size = 16281;   // adult.test rows
};

// Rows drawn per index from Philox (a pure function of (seed, split, index)): categorical
// columns uniform over their vocabularies (occupation over the 14 Adult occupations and "?"),
// education_num the education's Adult value, age uniform in [17, 90], hours uniform in [1, 99],
// capital_gain nonzero (uniform in [1, 20000)) with probability 0.1. The label is Bernoulli of
// sigmoid(score(row)), score of docs/wide-deep-data.md: main effects of education, marital
// status, age and hours plus an education x occupation interaction (only the crosses or the
// deep part can learn it).
class CensusSynthetic {
 public:
  explicit CensusSynthetic(const CensusSyntheticConfig& cfg = CensusSyntheticConfig());
  const CensusSyntheticConfig& config() const { return cfg_; }
  // Row i of the training stream (eval = false) or the evaluation set.
  CensusRow row(int64_t i, bool eval) const;
  // The true log-odds of ">50K" for a row.
  static double score(const CensusRow& r);
  // AUC of the true probability on the first n evaluation rows: no model beats it in
  // expectation.
  double attainable_auc(int64_t n) const;

 private:
  CensusSyntheticConfig cfg_;
  uint64_t key_train_, key_eval_;
};

class CensusSyntheticSource : public BatchSource {
 public:
  explicit CensusSyntheticSource(const CensusSyntheticConfig& cfg) : gen_(cfg) {}
  std::string describe() const override;
  std::string fingerprint() const override;
  TensorMap next(int64_t batch_size) override;
  int64_t position() const override { return pos_; }
  void seek(int64_t position) override { pos_ = position; }
  int64_t epoch_size() const override { return gen_.config().epoch_size; }
  int64_t eval_size() const override { return gen_.config().eval_size; }
  TensorMap eval_batch(int64_t start, int64_t count) const override;
  const CensusSynthetic& generator() const { return gen_; }

 private:
  CensusSynthetic gen_;
  int64_t pos_ = 0;
};

// DIR/adult.data (training stream, a fresh Philox permutation each epoch: epoch_order() of
// data/din_export.h, the last partial batch of an epoch skipped) and DIR/adult.test
// (evaluation set, file order).
class CensusFileSource : public BatchSource {
 public:
  CensusFileSource(const std::string& dir, uint64_t seed);
  std::string describe() const override;
  std::string fingerprint() const override;
  TensorMap next(int64_t batch_size) override;
  int64_t position() const override { return pos_; }
  void seek(int64_t position) override { pos_ = position; }
  int64_t epoch_size() const override { return int64_t(train_.size()); }
  int64_t eval_size() const override { return int64_t(test_.size()); }
  TensorMap eval_batch(int64_t start, int64_t count) const override;

 private:
  std::string dir_;
  uint64_t seed_;
  std::vector<CensusFeatures> train_, test_;
  int64_t pos_ = 0;
  int64_t order_epoch_ = -1;
  std::vector<int64_t> order_;
};

}  // namespace aim::data
