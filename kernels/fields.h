// An op's argument struct declares its fields once, and everything that needs to know them is
// derived from that declaration: the trace's description of a call (describe_args), the test
// binder (bind_case: TestCase -> Args) and the case maker's skeleton (to_case: Args -> TestCase,
// the names of a case's tensors and parameters are the declaration's).
//
//   struct SoftmaxArgs {
//     Tensor x, y, mask;
//     int64_t dim = -1;
//     bool log = false;
//     template <class S, class F>
//     static void fields(S& s, F& f) {
//       f.in("x", s.x), f.out("y", s.y), f.in_opt("mask", s.mask);
//       f.param("dim", s.dim), f.param("log", s.log);
//     }
//   };
//
// Roles: in (read; must be defined), in_opt (read; may be undefined), host_in / host_in_opt (read
// on the host even when the variant runs on a GPU, e.g. sequence lengths that plan the launch: the
// test keeps them on the CPU), out (written or accumulated into; must be defined), out_opt; ins (a
// list of inputs, named <name>0, <name>1, ...); param (a number, bool or enum); list
// (std::vector<int64_t>); group (a nested parameter struct with its own `fields`, e.g.
// Conv2dParams, flattened into the parent's names). `S` is Args or const Args.
#pragma once
#include <cmath>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include "kernels/test_case.h"

namespace aim::kernels {

// Calls T::fields(obj, f) for T = obj's type without const.
template <class T, class F>
void visit_fields(T& obj, F& f) {
  std::remove_const_t<T>::fields(obj, f);
}

namespace fields_detail {

template <class T>
double param_to_double(const T& v) {
  if constexpr (std::is_enum_v<T>)
    return double(static_cast<int64_t>(v));
  else
    return double(v);
}
template <class T>
T param_from_double(double d) {
  if constexpr (std::is_enum_v<T>)
    return static_cast<T>(static_cast<std::underlying_type_t<T>>(d));
  else if constexpr (std::is_same_v<T, bool>)
    return d != 0;
  else
    return static_cast<T>(d);
}

// "x=[2, 3] f32 dim=-1 ..." in declaration order; undefined tensors are left out.
struct Describer {
  std::string s;
  void sep() {
    if (!s.empty()) s += ' ';
  }
  void tensor(const char* name, const Tensor& t) {
    if (!t.defined()) return;
    sep();
    s += name;
    s += '=';
    s += to_string(t.sizes());
    s += ' ';
    s += dtype_name(t.dtype());
  }
  void in(const char* n, const Tensor& t) { tensor(n, t); }
  void in_opt(const char* n, const Tensor& t) { tensor(n, t); }
  void host_in(const char* n, const Tensor& t) { tensor(n, t); }
  void host_in_opt(const char* n, const Tensor& t) { tensor(n, t); }
  void out(const char* n, const Tensor& t) { tensor(n, t); }
  void out_opt(const char* n, const Tensor& t) { tensor(n, t); }
  void ins(const char* n, const std::vector<Tensor>& ts) {
    for (size_t i = 0; i < ts.size(); ++i) tensor((n + std::to_string(i)).c_str(), ts[i]);
  }
  template <class T>
  void param(const char* n, const T& v) {
    sep();
    s += n;
    s += '=';
    const double d = param_to_double(v);
    const bool integral = std::isfinite(d) && std::fabs(d) < 9e18 && d == std::trunc(d);
    s += integral ? std::to_string(int64_t(d)) : std::to_string(d);
  }
  void list(const char* n, const std::vector<int64_t>& v) {
    sep();
    s += n;
    s += "=[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
    s += ']';
  }
  template <class P>
  void group(const P& p) {
    visit_fields(p, *this);
  }
};

// TestCase -> Args. Every tensor, parameter and list of the case must be claimed by a field:
// a case maker that names something the declaration does not know is an error, not ignored.
struct Binder {
  const TestCase& c;
  const std::string& op;
  std::vector<std::string> claimed;

  const Tensor* find(const std::vector<NamedTensor>& v, const std::string& name) {
    for (const auto& t : v)
      if (t.name == name) {
        claimed.push_back(name);
        return &t.tensor;
      }
    return nullptr;
  }
  void in(const char* n, Tensor& t) {
    const Tensor* p = find(c.inputs, n);
    AIM_CHECK(p, "[", op, "] test case has no input '", n, "'");
    t = *p;
  }
  void in_opt(const char* n, Tensor& t) {
    if (const Tensor* p = find(c.inputs, n)) t = *p;
  }
  void host_in(const char* n, Tensor& t) { in(n, t); }
  void host_in_opt(const char* n, Tensor& t) { in_opt(n, t); }
  void out(const char* n, Tensor& t) {
    const Tensor* p = find(c.outputs, n);
    AIM_CHECK(p, "[", op, "] test case has no output '", n, "'");
    t = *p;
  }
  void out_opt(const char* n, Tensor& t) {
    if (const Tensor* p = find(c.outputs, n)) t = *p;
  }
  void ins(const char* n, std::vector<Tensor>& ts) {
    ts.clear();
    while (const Tensor* p = find(c.inputs, n + std::to_string(ts.size()))) ts.push_back(*p);
  }
  template <class T>
  void param(const char* n, T& v) {  // absent: the field keeps its default
    auto it = c.params.find(n);
    if (it == c.params.end()) return;
    claimed.push_back(n);
    v = param_from_double<T>(it->second);
  }
  void list(const char* n, std::vector<int64_t>& v) {
    auto it = c.lists.find(n);
    if (it == c.lists.end()) return;
    claimed.push_back(n);
    v = it->second;
  }
  template <class P>
  void group(P& p) {
    visit_fields(p, *this);
  }
  void check_all_claimed() const;  // registry.cpp
};

// Args -> TestCase (the case maker's skeleton).
struct CaseWriter {
  TestCase& c;
  const char* args_type;
  void in(const char* n, const Tensor& t) {
    AIM_CHECK(t.defined(), "test case for ", args_type, ": input '", n, "' left undefined");
    c.add_in(n, t);
  }
  void in_opt(const char* n, const Tensor& t) {
    if (t.defined()) c.add_in(n, t);
  }
  void host_in(const char* n, const Tensor& t) {
    AIM_CHECK(t.defined(), "test case for ", args_type, ": input '", n, "' left undefined");
    c.add_in(n, t, true);
  }
  void host_in_opt(const char* n, const Tensor& t) {
    if (t.defined()) c.add_in(n, t, true);
  }
  void out(const char* n, const Tensor& t) {
    AIM_CHECK(t.defined(), "test case for ", args_type, ": output '", n, "' left undefined");
    c.add_out(n, t);
  }
  void out_opt(const char* n, const Tensor& t) {
    if (t.defined()) c.add_out(n, t);
  }
  void ins(const char* n, const std::vector<Tensor>& ts) {
    for (size_t i = 0; i < ts.size(); ++i) in((n + std::to_string(i)).c_str(), ts[i]);
  }
  template <class T>
  void param(const char* n, const T& v) {
    const double d = param_to_double(v);
    AIM_CHECK(param_from_double<T>(d) == v, "test case for ", args_type, ": parameter '", n,
              "' is not exact as a double");
    c.params[n] = d;
  }
  void list(const char* n, const std::vector<int64_t>& v) { c.lists[n] = v; }
  template <class P>
  void group(const P& p) {
    visit_fields(p, *this);
  }
};

template <class A, class = void>
struct has_fields : std::false_type {};
template <class A>
struct has_fields<
    A, std::void_t<decltype(A::fields(std::declval<const A&>(), std::declval<Describer&>()))>>
    : std::true_type {};

}  // namespace fields_detail

template <class Args>
constexpr bool declares_fields = fields_detail::has_fields<Args>::value;

// The trace's description of a call: every declared field, in order.
template <class Args>
std::string describe_args(const Args& a) {
  fields_detail::Describer d;
  visit_fields(a, d);
  return d.s;
}

// The op's test binder, derived from the declaration.
template <class Args>
Args bind_case(const TestCase& c, const std::string& op) {
  Args a;
  fields_detail::Binder b{c, op, {}};
  visit_fields(a, b);
  b.check_all_claimed();
  return a;
}

// A case maker fills a typed Args (inputs with their content, outputs with their initial
// content, parameters) and returns to_case(a).
template <class Args>
TestCase to_case(const Args& a) {
  TestCase c;
  fields_detail::CaseWriter w{c, typeid(Args).name()};
  visit_fields(a, w);
  return c;
}

}  // namespace aim::kernels
