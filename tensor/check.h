// Errors and checks. Library code throws aim::Error; the CLIs catch it in main and exit non-zero.
// Every check names the failed expression and file:line.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace aim {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
inline void append(std::ostringstream&) {}
template <class T, class... R>
void append(std::ostringstream& os, const T& v, const R&... rest) {
  os << v;
  append(os, rest...);
}
}  // namespace detail

// str("a", 1, 'b') -> "a1b": one formatting helper for every message.
template <class... A>
std::string str(const A&... a) {
  std::ostringstream os;
  detail::append(os, a...);
  return os.str();
}

[[noreturn]] inline void fail(const char* file, int line, const std::string& msg) {
  throw Error(msg + " (" + file + ":" + std::to_string(line) + ")");
}

}  // namespace aim

// AIM_CHECK(cond, "message parts", ...): throws aim::Error naming the condition when it fails.
#define AIM_CHECK(cond, ...)                                                                      \
  do {                                                                                            \
    if (!(cond)) ::aim::fail(__FILE__, __LINE__, ::aim::str(__VA_ARGS__, " [check: " #cond "]")); \
  } while (0)

#define AIM_FAIL(...) ::aim::fail(__FILE__, __LINE__, ::aim::str(__VA_ARGS__))
