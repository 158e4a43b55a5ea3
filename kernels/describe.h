// describe_args(args): "x=[16,64,56,56] f32 w=[64,64,3,3] f32 y=..." for any op's argument
// struct, listing the Tensor members with the common names below that the struct has and that are
// defined. Generic on purpose (no per-op code): the profiler's trace shows it in each op's args.
#pragma once
#include <string>
#include <type_traits>
#include <utility>

#include "tensor/tensor.h"

namespace aim::kernels {
namespace describe_detail {

inline void add(std::string& s, const char* name, const Tensor& t) {
  if (!t.defined()) return;
  if (!s.empty()) s += ' ';
  s += name;
  s += '=';
  s += to_string(t.sizes());
  s += ' ';
  s += dtype_name(t.dtype());
}

// One detector per member name: has_<name><A> is true when A has a Tensor member <name>.
#define AIM_DESCRIBE_FIELDS(X)                                                                \
  X(x)                                                                                        \
  X(y) X(dy) X(dx) X(a) X(b) X(c) X(w) X(dw) X(input) X(target) X(logits) X(index) X(indices) \
      X(src) X(dst) X(weight) X(out) X(param) X(grad) X(lengths) X(h0) X(hn) X(w_ih) X(w_hh)  \
          X(att) X(gamma) X(bias) X(mask) X(cond)
#define AIM_DESCRIBE_DETECT(name)                                                           \
  template <class A, class = void>                                                          \
  struct has_##name : std::false_type {};                                                   \
  template <class A>                                                                        \
  struct has_##name<A, std::enable_if_t<std::is_same_v<                                     \
                           std::decay_t<decltype(std::declval<const A&>().name)>, Tensor>>> \
      : std::true_type {};
AIM_DESCRIBE_FIELDS(AIM_DESCRIBE_DETECT)
#undef AIM_DESCRIBE_DETECT

}  // namespace describe_detail

template <class Args>
std::string describe_args_by_common_names(const Args& a) {
  std::string s;
#define AIM_DESCRIBE_ADD(name) \
  if constexpr (describe_detail::has_##name<Args>::value) describe_detail::add(s, #name, a.name);
  AIM_DESCRIBE_FIELDS(AIM_DESCRIBE_ADD)
#undef AIM_DESCRIBE_ADD
  return s;
}
#undef AIM_DESCRIBE_FIELDS

}  // namespace aim::kernels
