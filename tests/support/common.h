// What the tests share: the source tree, a temporary directory, running a command, the rule for a
// missing Python module (skip, but fail under CI), and checking an aim::Error's message.
#pragma once
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "tensor/check.h"
#include "tensor/tensor.h"

namespace aim::testing {

inline constexpr const char* kPython = "/usr/bin/python3";

// AIM_SOURCE_DIR, else the tree this header sits in (<root>/tests/support/peer.h).
inline std::string source_root() {
  if (const char* r = std::getenv("AIM_SOURCE_DIR")) return r;
  std::string f = __FILE__;
  for (int i = 0; i < 3; ++i) f = f.substr(0, f.find_last_of('/'));
  return f;
}

// A fresh directory /tmp/<prefix>_XXXXXX (mkdtemp's unique suffix).
inline std::string make_temp_dir(const std::string& prefix) {
  std::string tmpl = "/tmp/" + prefix + "_XXXXXX";
  AIM_CHECK(mkdtemp(tmpl.data()) != nullptr, "mkdtemp failed for ", tmpl);
  return tmpl;
}

// Runs cmd through the shell; its exit status (-1 when it did not run or was killed).
inline int run_command(const std::string& cmd) {
  const int rc = std::system(cmd.c_str());
  return rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// The message of the aim::Error fn() throws ("" when it does not throw).
inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// max |a - b| / max |b| over two tensors of the same size (the models' parity tests).
inline double rel_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  EXPECT_EQ(x.size(), y.size());
  double d = 0, m = 0;
  for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
    d = std::max(d, std::fabs(x[i] - y[i]));
    m = std::max(m, std::fabs(y[i]));
  }
  return m > 0 ? d / m : d;
}

}  // namespace aim::testing

// Expects stmt to throw an aim::Error whose message contains substr.
#define AIM_EXPECT_ERROR(stmt, substr)                                                         \
  do {                                                                                         \
    const std::string msg_ = ::aim::testing::error_of([&] { stmt; });                          \
    EXPECT_NE(msg_.find(substr), std::string::npos)                                            \
        << "expected an aim::Error containing \"" << (substr) << "\", got \"" << msg_ << "\""; \
  } while (0)

// Skips the test when kPython cannot import `mod`; a CI machine (CI set) must have it.
#define AIM_REQUIRE_PYTHON_MODULE(mod)                                                  \
  do {                                                                                  \
    if (::aim::testing::run_command(std::string(::aim::testing::kPython) +              \
                                    " -c 'import " mod "' >/dev/null 2>&1") != 0) {     \
      if (std::getenv("CI"))                                                            \
        FAIL() << ::aim::testing::kPython << " cannot import " mod << " but CI is set"; \
      GTEST_SKIP() << ::aim::testing::kPython << " cannot import " mod;                 \
    }                                                                                   \
  } while (0)
