#include "kernels/registry.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <sstream>

#include "kernels/families.h"

#ifdef AIM_CUDA
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>
#endif

namespace aim::kernels {

std::string shape_str(const TestShape& s, const char* sep) {
  std::string r;
  for (size_t i = 0; i < s.size(); ++i) r += (i ? sep : "") + std::to_string(s[i]);
  return r;
}

const Tensor& TestCase::in(const std::string& name) const {
  for (const auto& t : inputs)
    if (t.name == name) return t.tensor;
  AIM_FAIL("test case has no input '", name, "'");
}
const Tensor& TestCase::out(const std::string& name) const {
  for (const auto& t : outputs)
    if (t.name == name) return t.tensor;
  AIM_FAIL("test case has no output '", name, "'");
}
double TestCase::param(const std::string& name) const {
  auto it = params.find(name);
  AIM_CHECK(it != params.end(), "test case has no parameter '", name, "'");
  return it->second;
}

void OpBase::check_shape_fields(const TestShape& s) const {
  AIM_CHECK(shape_fields.empty() || s.size() == shape_fields.size(), "[", name_, "] test shape {",
            shape_str(s), "} has ", s.size(), " numbers; the op declares ", shape_fields.size(),
            " (", describe_shape(TestShape(shape_fields.size(), 0)), ")");
}

void OpBase::set_shape_fields(std::vector<std::string> names) {
  shape_fields = std::move(names);
  for (const TestShape& s : test_shapes) check_shape_fields(s);
}

std::string OpBase::describe_shape(const TestShape& s) const {
  if (shape_fields.size() != s.size()) return "{" + shape_str(s) + "}";
  std::string r;
  for (size_t i = 0; i < s.size(); ++i)
    r += (i ? " " : "") + shape_fields[i] + "=" + std::to_string(s[i]);
  return r;
}

void fields_detail::Binder::check_all_claimed() const {
  auto claimed_name = [&](const std::string& n) {
    for (const auto& k : claimed)
      if (k == n) return true;
    return false;
  };
  for (const auto& t : c.inputs)
    AIM_CHECK(claimed_name(t.name), "[", op, "] test case input '", t.name,
              "' is not a field of the op's arguments");
  for (const auto& t : c.outputs)
    AIM_CHECK(claimed_name(t.name), "[", op, "] test case output '", t.name,
              "' is not a field of the op's arguments");
  for (const auto& [n, v] : c.params)
    AIM_CHECK(claimed_name(n), "[", op, "] test case parameter '", n,
              "' is not a field of the op's arguments");
  for (const auto& [n, v] : c.lists)
    AIM_CHECK(claimed_name(n), "[", op, "] test case list '", n,
              "' is not a field of the op's arguments");
}

Tolerance default_tolerance(DType t) {
  switch (t) {
    case DType::f64:
      return {1e-10, 1e-10};
    case DType::f32:
      return {1e-5, 1e-5};
    case DType::f16:
      return {2e-3, 2e-3};
    case DType::bf16:
      return {1.6e-2, 1.6e-2};
    default:
      return {0, 0};
  }
}

std::string OpBase::default_variant(Backend b, DType t) const {
  auto it = dtype_defaults_.find({b, t});
  return it != dtype_defaults_.end() ? it->second : default_variant(b);
}

std::string OpBase::default_variant(Backend b) const {
  auto it = defaults_.find(b);
  if (it != defaults_.end()) return it->second;
  return b == Backend::CPU ? "cpu.ref" : "";
}

// ---- selection ------------------------------------------------------------------------------

namespace {
std::mutex g_mu;
Selection& selection_storage() {
  static Selection s;  // filled from AIM_KERNELS on first use (kernel_selection)
  return s;
}
std::vector<Substitution>& subs() {
  static std::vector<Substitution> s;
  return s;
}
// Atomic: set by the profiler on one rank's thread while the other local ranks dispatch (a data
// race found by tools/sanitize.sh thread in DataParallel's profiled runs).
std::atomic<OpObserver*> g_observer{nullptr};
thread_local std::map<std::string, std::string> t_overrides;

Selection parse_selection(const std::string& spec, bool fallback) {
  Selection s;
  s.fallback = fallback;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos) {
      AIM_CHECK(item == "own" || item == "vendor" || item == "default", "--kernels: '", item,
                "' is not own, vendor, default or op=variant");
      s.mode = item == "default" ? "" : item;
    } else {
      const std::string op = item.substr(0, eq), v = item.substr(eq + 1);
      const OpBase* o = registry().find(op);
      AIM_CHECK(o != nullptr, "--kernels: unknown op '", op, "'");
      // The variant is checked now, not at the op's first call (after the model and data are
      // built): a typo costs nothing.
      std::string names;
      bool known = false;
      for (const VariantInfo& vi : o->variant_infos()) {
        names += (names.empty() ? "" : ", ") + vi.name;
        known = known || vi.name == v;
      }
      AIM_CHECK(known, "--kernels: ", op, " has no variant '", v,
                "' in this build (registered: ", names, ")");
      AIM_CHECK(!s.per_op.count(op), "--kernels: ", op, " is given twice ('", op, "=",
                s.per_op.at(op), "' and '", item, "')");
      s.per_op[op] = v;
    }
  }
  return s;
}
}  // namespace

void set_kernel_selection(const std::string& spec, bool fallback) {
  Selection s = parse_selection(spec, fallback);
  std::lock_guard<std::mutex> lock(g_mu);
  selection_storage() = s;
}

const Selection& kernel_selection() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* k = std::getenv("AIM_KERNELS");
    const char* f = std::getenv("AIM_KERNELS_FALLBACK");
    const bool fb = f && f[0] == '1';
    if (k || fb) selection_storage() = parse_selection(k ? k : "", fb);
  });
  return selection_storage();
}

std::vector<Substitution> substitutions() {
  std::lock_guard<std::mutex> lock(g_mu);
  return subs();
}

void record_substitution(const Substitution& s) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (const auto& e : subs())
    if (e.op == s.op && e.wanted == s.wanted) return;
  subs().push_back(s);
  std::fprintf(stderr, "[aim] fallback: %s wanted %s, ran %s: %s\n", s.op.c_str(), s.wanted.c_str(),
               s.used.c_str(), s.reason.c_str());
}

namespace {
std::vector<NondeterministicVariant>& ran_nondeterministic() {
  static std::vector<NondeterministicVariant> r;
  return r;
}
}  // namespace

std::string OpBase::deterministic_choice(const std::string& wanted, bool chosen) const {
  auto it = nondeterministic_.find(wanted);
  if (it == nondeterministic_.end()) return wanted;
  const Nondeterminism& n = it->second;
  if (n.alternative.empty()) {
    std::lock_guard<std::mutex> lock(g_mu);
    for (const auto& e : ran_nondeterministic())
      if (e.op == name_ && e.variant == wanted) return wanted;
    ran_nondeterministic().push_back({name_, wanted, "", n.why});
    std::fprintf(stderr,
                 "[aim] --deterministic: %s has no deterministic variant here; %s runs (%s)\n",
                 name_.c_str(), wanted.c_str(), n.why.c_str());
    return wanted;
  }
  if (chosen && !kernel_selection().fallback)
    AIM_FAIL("[", name_, "] --kernels ", name_, "=", wanted, " is not deterministic (", n.why,
             "); under --deterministic choose ", n.alternative, ", or allow --kernels-fallback");
  if (chosen) record_substitution({name_, wanted, n.alternative, "--deterministic: " + n.why});
  return n.alternative;
}

std::vector<NondeterministicVariant> nondeterministic_variants() {
  std::vector<NondeterministicVariant> r;
  for (OpBase* op : registry().ops())
    for (const auto& [variant, n] : op->nondeterministic())
      r.push_back({op->name(), variant, n.alternative, n.why});
  return r;
}

std::vector<NondeterministicVariant> nondeterministic_ran() {
  std::lock_guard<std::mutex> lock(g_mu);
  return ran_nondeterministic();
}

ScopedVariant::ScopedVariant(std::string op, std::string variant) : op_(std::move(op)) {
  auto it = t_overrides.find(op_);
  had_previous_ = it != t_overrides.end();
  if (had_previous_) previous_ = it->second;
  t_overrides[op_] = std::move(variant);
}
ScopedVariant::~ScopedVariant() {
  if (had_previous_)
    t_overrides[op_] = previous_;
  else
    t_overrides.erase(op_);
}
const std::string* variant_override(const std::string& op) {
  if (t_overrides.empty()) return nullptr;
  auto it = t_overrides.find(op);
  if (it != t_overrides.end()) return &it->second;
  it = t_overrides.find("*");
  return it != t_overrides.end() ? &it->second : nullptr;
}

void no_such_variant(const std::string& op, const std::string& variant, Device d,
                     const std::string& available) {
  AIM_FAIL("[", op, "] no variant '", variant, "' for tensors on ", d.str(),
           "; registered: ", available.empty() ? "none" : available);
}

void set_op_observer(OpObserver* o) { g_observer.store(o, std::memory_order_release); }
OpObserver* op_observer() { return g_observer.load(std::memory_order_acquire); }

// ---- dispatch instrumentation ---------------------------------------------------------------

int debug_level() {
  static const int level = [] {
    const char* e = std::getenv("AIM_DEBUG");
    return e ? std::atoi(e) : 0;
  }();
  return level;
}

namespace {
thread_local std::vector<std::chrono::steady_clock::time_point> t_starts;
thread_local std::vector<std::string> t_names;
}  // namespace

void dispatch_begin(const std::string& op, const std::string& range_name,
                    const std::string& variant, Backend b, const std::function<Cost()>& cost,
                    const std::function<std::string()>& describe) {
#ifdef AIM_CUDA
  if (b == Backend::CUDA) nvtxRangePushA(range_name.c_str());
#endif
  const int level = debug_level();
  if (level >= 1) {
    static std::set<std::string> printed;
    std::lock_guard<std::mutex> lock(g_mu);
    if (level >= 2 || printed.insert(range_name).second) {
      if (level >= 2) {
        const Cost c = cost();
        std::fprintf(stderr, "[aim] %s -> %s (%s) flops %.4g read %.4g B written %.4g B\n",
                     op.c_str(), variant.c_str(), backend_name(b), c.flops, c.bytes_read,
                     c.bytes_written);
      } else {
        std::fprintf(stderr, "[aim] %s -> %s (%s)\n", op.c_str(), variant.c_str(), backend_name(b));
      }
    }
  }
  if (level >= 3) {
    t_starts.push_back(std::chrono::steady_clock::now());
    t_names.push_back(range_name);
  }
  if (OpObserver* o = g_observer.load(std::memory_order_acquire))
    o->begin(op, variant, b, cost(), describe);
}

void dispatch_end(Backend b) {
  if (OpObserver* o = g_observer.load(std::memory_order_acquire)) o->end();
  if (debug_level() >= 3 && !t_starts.empty()) {
#ifdef AIM_CUDA
    if (b == Backend::CUDA) cudaDeviceSynchronize();
#endif
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                                t_starts.back())
                          .count();
    std::fprintf(stderr, "[aim] %s %.3f ms\n", t_names.back().c_str(), ms);
    t_starts.pop_back();
    t_names.pop_back();
  }
#ifdef AIM_CUDA
  if (b == Backend::CUDA) nvtxRangePop();
#else
  (void)b;
#endif
}

// ---- the registry ---------------------------------------------------------------------------

OpBase* Registry::find(const std::string& name) const {
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : it->second.op.get();
}

std::vector<OpBase*> Registry::ops() const {
  std::vector<OpBase*> r;
  for (const auto& [name, e] : ops_) r.push_back(e.op.get());
  return r;
}

std::vector<std::pair<std::string, int64_t>> Registry::variants_used() const {
  std::vector<std::pair<std::string, int64_t>> r;
  for (const auto& [name, e] : ops_)
    for (const auto& [v, n] : e.op->call_counts())
      if (n > 0) r.push_back({name + "/" + v, n});
  return r;
}

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry();  // never destroyed: ops are used until exit
    register_all_ops(*reg);
    return reg;
  }();
  return *r;
}

// The list of op families, each registering its variants explicitly (no static initialisers).
void register_all_ops(Registry& r) {
#define AIM_OP_GROUP(name) register_##name##_cpu(r);
#include "kernels/families.def"
#undef AIM_OP_GROUP
#ifdef AIM_CUDA
#define AIM_OP_GROUP(name) cuda::register_##name##_cuda(r);
#include "kernels/families.def"
#undef AIM_OP_GROUP
#ifndef AIM_CUDA_EMULATED  // the emulated device has no vendor libraries
#define AIM_VENDOR_GROUP(name) register_##name(r);
#include "kernels/vendor_families.def"
#undef AIM_VENDOR_GROUP
#endif
#endif
}

}  // namespace aim::kernels
