// The kernel ops a piece of code calls, counted by name through the profiler (tests that check a
// fusion removed a pass).
#pragma once
#include <functional>
#include <map>
#include <string>

#include "profiler/profiler.h"

namespace aim::testing {

inline std::map<std::string, int> count_ops(const std::function<void()>& run) {
  std::map<std::string, int> n;
  profiler::start();
  run();
  profiler::stop();
  for (const profiler::Event& e : profiler::events())
    if (e.kind == profiler::ScopeKind::Op) ++n[e.name];
  return n;
}

}  // namespace aim::testing
