// Census CSV lines (wide_deep's --data, data/census.h): cleaning, the 15 fields, the features.
#include "data/census.h"
#include "fuzz/targets/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string line = aim::fuzz::as_string(data, size);
  return aim::fuzz::run([&] {
    if (!aim::data::clean_census_line(line)) return;
    const aim::data::CensusRow r = aim::data::parse_census_line(line, "fuzz.csv:1");
    (void)aim::data::census_features(r);
  });
}
