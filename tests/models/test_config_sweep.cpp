// Every model's --config keys with hostile values (issue 26, the `--config` strings): each value
// is refused with an aim::Error that names the key (the parser's, the model's own check, or the
// CPU allocator's refusal while building, whose context names the --config keys), or the model
// builds, its synthetic source makes a batch and the model infers on it. Nothing else may happen:
// no crash, no sanitizer report (tools/sanitize.sh runs this), no other exception, no tensor past a
// 2 GiB host limit. What fuzzing the parser alone would not find: the values reach every model's
// builder.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <typeinfo>
#include <vector>

#include "autograd/variable.h"
#include "models/registry.h"
#include "profiler/profiler.h"
#include "tensor/check.h"
#include "tensor/host_memory.h"

namespace aim {
namespace {

struct HostLimit {
  explicit HostLimit(uint64_t bytes) { set_host_memory_limit(bytes); }
  ~HostLimit() { set_host_memory_limit(0); }
};

// Empty, signs, fractions, non-numbers, overflow of every integer width, sizes too large for
// memory, surrounding space.
const std::vector<std::string> kHostile = {
    "",    "0",   "-1",    "-9223372036854775808", "1.5",        "abc",
    "nan", "inf", "1e999", "99999999999999999999", "2147483648", "1000000000",
    " 2",  "2 "};

TEST(ConfigSweep, HostileValuesAreRefusedNamingTheKeyOrBuild) {
  const HostLimit limit(uint64_t(2) << 30);
  int built = 0, refused = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (const models::ModelEntry& e : models::model_registry()) {
    bool has_size = false;
    for (const models::ConfigKey& k : e.config) has_size = has_size || k.key == "size";
    for (const models::ConfigKey& k : e.config) {
      // A key with a list of allowed values: one value outside it (the parser's check).
      const std::vector<std::string> values =
          k.allowed.empty() ? kHostile : std::vector<std::string>{"bogus"};
      for (const std::string& v : values) {
        std::vector<std::string> kvs;
        if (has_size && k.key != "size") kvs.push_back("size=tiny");
        kvs.push_back(k.key + "=" + v);
        const std::string what = e.name + " --config " + k.key + "='" + v + "'";
        if (std::getenv("AIM_SWEEP_VERBOSE")) std::cerr << what << std::endl;
        try {
          const models::ModelConfig cfg = e.parse_config(kvs);
          std::unique_ptr<models::Model> m;
          {
            profiler::ContextScope ctx(models::building_context(e, cfg));
            m = e.build(cfg, 1);
          }
          // The value reaches the data and the forward too (beam widths, lengths, penalties).
          auto source = e.source(cfg, "synthetic", 1);
          const TensorMap batch = source->next(1);
          autograd::NoGradGuard no_grad;
          m->eval();
          (void)m->infer(batch);
          ++built;
        } catch (const Error& err) {
          ++refused;
          const std::string msg = err.what();
          EXPECT_NE(msg.find(k.key), std::string::npos)
              << what << ": the error does not name the key: " << msg;
        } catch (const std::exception& x) {
          ADD_FAILURE() << what << ": " << typeid(x).name() << ": " << x.what();
        }
      }
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "config sweep: " << built << " built, " << refused << " refused (" << s << " s)\n";
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace aim
