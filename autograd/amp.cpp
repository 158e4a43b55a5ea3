#include "autograd/amp.h"

#include <algorithm>
#include <regex>

#include "autograd/functions/shape.h"
#include "tensor/check.h"

namespace aim::autograd::amp {

namespace detail {
thread_local State* current = nullptr;
}  // namespace detail

const char* class_name(OpClass c) {
  switch (c) {
    case OpClass::lowp:
      return "lowp";
    case OpClass::fp32:
      return "fp32";
    case OpClass::promote:
      return "promote";
    case OpClass::native:
      return "native";
  }
  return "?";
}

const std::vector<Declaration>& declarations() {
  static const std::vector<Declaration> d = [] {
    std::vector<Declaration> out;
#define AIM_AMP_FILE(f) declarations_##f(out);
#include "autograd/functions/amp_declarations.def"
#undef AIM_AMP_FILE
    return out;
  }();
  return d;
}

const std::vector<PolicyEntry>& policy() {
  static const std::vector<PolicyEntry> p = [] {
    std::vector<PolicyEntry> rows;
    for (OpClass c : {OpClass::lowp, OpClass::fp32, OpClass::promote, OpClass::native}) {
      const size_t first = rows.size();
      for (const Declaration& d : declarations()) {
        if (d.cls != c) continue;
        auto row = std::find_if(rows.begin() + first, rows.end(),
                                [&](const PolicyEntry& e) { return e.why == d.why; });
        if (row == rows.end())
          rows.push_back({d.op, class_name(c), d.why});
        else
          row->op += std::string(", ") + d.op;
      }
    }
    return rows;
  }();
  return p;
}

ParamCache::ParamCache(const std::vector<std::pair<std::string, Variable>>& params,
                       const std::vector<std::string>& fp32_patterns) {
  std::vector<std::regex> re;
  for (const std::string& p : fp32_patterns) {
    try {
      re.emplace_back(p);
    } catch (const std::regex_error& e) {
      throw Error(str("amp: fp32 parameter pattern '", p, "' is not a valid regex: ", e.what()));
    }
  }
  std::vector<bool> used(re.size(), false);
  for (const auto& [name, v] : params) {
    Entry e;
    for (size_t i = 0; i < re.size(); ++i)
      if (std::regex_search(name, re[i])) {
        e.keep_fp32 = true;
        used[i] = true;
      }
    if (e.keep_fp32) fp32_names_.push_back(name);
    entries_[v.impl().get()] = e;
  }
  for (size_t i = 0; i < re.size(); ++i)
    AIM_CHECK(used[i], "amp: the model declares '", fp32_patterns[i],
              "' as an fp32 parameter pattern, but no parameter name matches it");
}

void ParamCache::clear() {
  for (auto& [k, e] : entries_) e.copy = Variable();
}

bool ParamCache::keep_fp32(const VariableImpl* p) const {
  const auto it = entries_.find(p);
  return it != entries_.end() && it->second.keep_fp32;
}

std::optional<Variable> ParamCache::lowp_copy(const Variable& p, DType lowp) {
  const auto it = entries_.find(p.impl().get());
  if (it == entries_.end()) return std::nullopt;
  Entry& e = it->second;
  if (!e.copy.defined() || e.copy.dtype() != lowp) {
    e.copy = cast(p, lowp);
    ++casts_;
  }
  return e.copy;
}

Autocast::Autocast(DType lowp, ParamCache* cache) : state_{lowp, cache} {
  AIM_CHECK(lowp == DType::f16 || lowp == DType::bf16, "Autocast: low precision must be f16 or ",
            "bf16, got ", dtype_name(lowp));
  previous_ = detail::current;
  detail::current = &state_;
}

Autocast::~Autocast() { detail::current = previous_; }

namespace {
bool is_autocast_float(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }
}  // namespace

std::optional<std::vector<Variable>> detail::cast_inputs(
    OpClass c, std::initializer_list<const Variable*> xs) {
  State& s = *current;
  if (c == OpClass::lowp && s.cache)
    for (const Variable* x : xs)
      if (x->defined() && s.cache->keep_fp32(x->impl().get())) c = OpClass::fp32;
  DType target = DType::f32;
  if (c == OpClass::lowp) {
    target = s.lowp;
  } else if (c == OpClass::promote) {
    // Only mixed 16-bit/f32 inputs are promoted; uniform ones run as they are.
    bool mixed = false;
    DType first = DType::f64;
    bool seen = false;
    for (const Variable* x : xs)
      if (x->defined() && is_autocast_float(x->dtype())) {
        if (seen && x->dtype() != first) mixed = true;
        first = x->dtype();
        seen = true;
      }
    if (!mixed) return std::nullopt;
  }
  bool changed = false;
  std::vector<Variable> out;
  out.reserve(xs.size());
  for (const Variable* x : xs) {
    if (!x->defined() || !is_autocast_float(x->dtype()) || x->dtype() == target) {
      out.push_back(*x);
      continue;
    }
    changed = true;
    std::optional<Variable> cached;
    if (target != DType::f32 && s.cache) cached = s.cache->lowp_copy(*x, target);
    out.push_back(cached ? *cached : cast(*x, target));
  }
  if (!changed) return std::nullopt;
  return out;
}

DType parse_precision(const std::string& s, const std::string& flag) {
  if (s == "fp32" || s == "f32") return DType::f32;
  if (s == "fp16" || s == "f16") return DType::f16;
  if (s == "bf16") return DType::bf16;
  throw Error(str(flag, " '", s, "': allowed: fp32, fp16, bf16"));
}

const char* precision_name(DType t) {
  switch (t) {
    case DType::f32:
      return "fp32";
    case DType::f16:
      return "fp16";
    case DType::bf16:
      return "bf16";
    default:
      return dtype_name(t);
  }
}

}  // namespace aim::autograd::amp
