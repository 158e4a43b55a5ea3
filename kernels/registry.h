// Kernel variant tables (DESIGN.md §4).
//
// Each op has a table of variants named "<backend>.<idea>" (cpu.ref, cpu.blas, cuda.tiled,
// cuda.cublas, ...). A variant says which dtypes it takes and, through supports(), why it
// cannot take some arguments. Selection, per call:
//   per-call override (ScopedVariant: tests, bench) > --kernels / AIM_KERNELS ("own", "vendor",
//   or "op=variant,...") > the registered default for the tensors' backend.
// A chosen variant that cannot run is an error naming the reason, unless fallback is allowed
// (--kernels-fallback / AIM_KERNELS_FALLBACK=1): then the substitution is logged once and
// recorded (substitutions()) for the results file.
//
// Each op also carries what the registry-driven test needs: test shapes (with the names of their
// numbers, shape_fields), a case maker that fills the op's Args from a shape and returns
// to_case(args), and a tolerance. Args structs provide `Device device() const`, `DType dtype()
// const` (the dtype that variants' dtype lists refer to) and their field declaration
// (kernels/fields.h), from which the test binder and the trace's description are derived.
#pragma once
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <typeindex>
#include <vector>

#include "kernels/fields.h"
#include "kernels/math_mode.h"
#include "kernels/op.h"

namespace aim::kernels {

struct VariantInfo {
  std::string name;
  Backend backend;
  Provider provider;
  std::vector<DType> dtypes;
};

// Type-erased view of an op: what the generic test, the bench and the coverage table use.
class OpBase {
 public:
  explicit OpBase(std::string name) : name_(std::move(name)) {}
  virtual ~OpBase() = default;
  const std::string& name() const { return name_; }
  virtual std::vector<VariantInfo> variant_infos() const = 0;
  // Runs `variant` (of backend b) on a case whose tensors are on the right device. Returns ""
  // when it ran, else why the variant does not take these arguments.
  virtual std::string run_case(const std::string& variant, Backend b, const TestCase& c) = 0;
  virtual Cost case_cost(const TestCase& c) const = 0;
  virtual std::vector<std::pair<std::string, int64_t>> call_counts() const = 0;
  // The default for a backend, or for a backend and dtype when per-dtype defaults were set
  // (e.g. matmul: cpu.avx512 for f32, cpu.blas for f64, cpu.ref for 16-bit on the CPU).
  std::string default_variant(Backend b) const;
  std::string default_variant(Backend b, DType t) const;

  // Test description.
  // What each number of a test shape means, declared once per op (softmax: {"log", "mask", "dim",
  // "d0", "d1", "d2"}): every registered shape must have that many numbers; tests and aim-bench
  // print shapes with the names, and aim-bench op's --shape takes name=value.
  std::vector<std::string> shape_fields;
  void set_shape_fields(std::vector<std::string> names);
  std::string describe_shape(const TestShape& s) const;  // "log=0 mask=1 dim=-1 d0=2 ..."

  // Determinism (docs/determinism.md). A variant registered with set_nondeterministic gives
  // results that depend on the OpenMP team size (CPU) or change from run to run (CUDA atomics);
  // under --deterministic (kernels::deterministic()) selection runs `alternative` instead, or,
  // when the op has none on that backend (alternative ""), runs it and warns once.
  struct Nondeterminism {
    std::string alternative, why;
  };
  void set_nondeterministic(const std::string& variant, const std::string& alternative,
                            const std::string& why) {
    nondeterministic_[variant] = {alternative, why};
  }
  const std::map<std::string, Nondeterminism>& nondeterministic() const {
    return nondeterministic_;
  }
  std::vector<TestShape> test_shapes;
  std::function<TestCase(const TestShape&, DType, uint64_t seed)> make_case;
  std::function<Tolerance(DType, const TestShape&)> tolerance;  // empty: default_tolerance
  // A variant whose algorithm rounds more than the op's others (conv2d's cpu.winograd4: Winograd
  // F(4x4, 3x3) transforms with coefficients up to 8 and 1/24) is held to its own tolerance here.
  std::map<std::string, std::function<Tolerance(DType, const TestShape&)>> variant_tolerance;
  // The reference runs on the case with floating tensors cast to f32, unless this is set (ops
  // such as cast, whose dtypes are the point).
  bool ref_uses_case_dtype = false;
  // Shapes too large for the SIMT emulator are skipped there when this returns false.
  std::function<bool(const TestShape&)> small_enough_for_simt;
  std::string description;

 protected:
  void check_shape_fields(const TestShape& s) const;
  std::string name_;
  std::map<Backend, std::string> defaults_;
  std::map<std::pair<Backend, DType>, std::string> dtype_defaults_;
  std::map<std::string, Nondeterminism> nondeterministic_;
  // Under --deterministic: the variant to run for `wanted` (its alternative when it has one);
  // `chosen` is true when the user named `wanted` for this op (--kernels op=variant): that is an
  // error naming the alternative, unless --kernels-fallback.
  std::string deterministic_choice(const std::string& wanted, bool chosen) const;
};

template <class Args>
struct Variant {
  Variant(std::string n, Backend b, Provider p, std::function<void(const Args&)> r,
          std::vector<DType> d, std::function<std::string(const Args&)> s = {})
      : name(std::move(n)),
        backend(b),
        provider(p),
        run(std::move(r)),
        dtypes(std::move(d)),
        supports(std::move(s)) {}
  std::string name;
  Backend backend;
  Provider provider;
  std::function<void(const Args&)> run;
  std::vector<DType> dtypes;
  std::function<std::string(const Args&)> supports;  // optional: "" = can run
  // Filled by the table.
  std::shared_ptr<std::atomic<int64_t>> calls = std::make_shared<std::atomic<int64_t>>(0);
  std::string range_name;  // "op/variant" for NVTX and traces
};

// Hooks for the profiler and tracing (profiler/ installs one; null when off).
class OpObserver {
 public:
  virtual ~OpObserver() = default;
  // describe(): the arguments' shapes and dtypes (describe_args); costs a string, call it only
  // when the record keeps it.
  virtual void begin(const std::string& op, const std::string& variant, Backend b, const Cost& cost,
                     const std::function<std::string()>& describe) = 0;
  virtual void end() = 0;
};
void set_op_observer(OpObserver* o);
OpObserver* op_observer();

// Runtime selection settings.
struct Selection {
  std::string mode;                           // "", "own" or "vendor"
  std::map<std::string, std::string> per_op;  // op -> variant
  bool fallback = false;
};
void set_kernel_selection(const std::string& spec, bool fallback);  // parses --kernels
const Selection& kernel_selection();

struct Substitution {
  std::string op, wanted, used, reason;
};
std::vector<Substitution> substitutions();
void record_substitution(const Substitution& s);  // logs once per (op, wanted)

// Every variant registered as not deterministic, over all ops (docs/determinism.md, the CLIs'
// --deterministic report): op, variant, alternative ("" when there is none), why.
struct NondeterministicVariant {
  std::string op, variant, alternative, why;
};
std::vector<NondeterministicVariant> nondeterministic_variants();
// Under --deterministic: the ops that ran a variant without a deterministic alternative (warned
// once each), for the results file.
std::vector<NondeterministicVariant> nondeterministic_ran();

// Per-call override for this thread: op name (or "*" for all ops) -> variant name.
class ScopedVariant {
 public:
  ScopedVariant(std::string op, std::string variant);
  ~ScopedVariant();
  ScopedVariant(const ScopedVariant&) = delete;
  ScopedVariant& operator=(const ScopedVariant&) = delete;

 private:
  std::string op_, previous_;
  bool had_previous_;
};
const std::string* variant_override(const std::string& op);

int debug_level();  // AIM_DEBUG
// Called around every dispatched call: NVTX range, debug printing, observer.
void dispatch_begin(const std::string& op, const std::string& range_name,
                    const std::string& variant, Backend b, const std::function<Cost()>& cost,
                    const std::function<std::string()>& describe);
void dispatch_end(Backend b);

[[noreturn]] void no_such_variant(const std::string& op, const std::string& variant, Device d,
                                  const std::string& available);

template <class Args>
class Op final : public OpBase {
  static_assert(declares_fields<Args>,
                "an op's Args declare their fields: static fields(S&, F&) (kernels/fields.h)");

 public:
  explicit Op(std::string name) : OpBase(std::move(name)) {}

  void add(Variant<Args> v) {
    for (const auto& e : variants_)
      AIM_CHECK(!(e.name == v.name && e.backend == v.backend), "[", name_, "] variant ", v.name,
                " registered twice");
    v.range_name = name_ + "/" + v.name;
    variants_.push_back(std::move(v));
  }
  void set_default(Backend b, const std::string& variant) { defaults_[b] = variant; }
  void set_default(Backend b, const std::string& variant, std::initializer_list<DType> dtypes) {
    for (DType t : dtypes) dtype_defaults_[{b, t}] = variant;
  }
  // A per-call refinement of the default on backend b: `rule(args)` names the variant to run by
  // default for these arguments (e.g. conv2d: cpu.winograd for 3x3 stride-1 shapes, else the
  // registered default), or "" for the registered default. The variant it names is the one
  // selected, recorded and traced, so what ran stays known (DESIGN §4); --kernels and per-call
  // overrides still win over it.
  void set_default_rule(Backend b, std::function<std::string(const Args&)> rule) {
    default_rules_[b] = std::move(rule);
  }
  void set_cost(std::function<Cost(const Args&)> f) { cost_ = std::move(f); }
  void add_test_shapes(std::vector<TestShape> shapes) {
    for (auto& s : shapes) {
      check_shape_fields(s);
      test_shapes.push_back(std::move(s));
    }
  }

  // Runs the selected variant.
  void operator()(const Args& a) {
    const Variant<Args>& v = select(a);
    // Kernels launch on the current device: make it the tensors' (a rank thread, a copy to
    // another GPU). Nothing for CPU tensors.
    const DeviceGuard device_guard(a.device());
    v.calls->fetch_add(1, std::memory_order_relaxed);
    dispatch_begin(
        name_, v.range_name, v.name, v.backend, [&] { return cost_ ? cost_(a) : Cost{}; },
        [&] { return describe_args(a); });
    v.run(a);
    dispatch_end(v.backend);
  }

  Cost cost(const Args& a) const { return cost_ ? cost_(a) : Cost{}; }

  const Variant<Args>& select(const Args& a) {
    const bool on_cuda = a.device().is_cuda();
    const Backend b = on_cuda ? Backend::CUDA : Backend::CPU;
    std::string def;  // this call's default: the rule's choice, else the registered one
    if (auto r = default_rules_.find(b); r != default_rules_.end()) def = r->second(a);
    if (def.empty()) def = default_variant(b, a.dtype());
    std::string wanted;
    if (const std::string* o = variant_override(name_)) {
      wanted = *o;
    } else {
      const Selection& s = kernel_selection();
      auto it = s.per_op.find(name_);
      if (it != s.per_op.end())
        wanted = it->second;
      else if (!s.mode.empty())
        wanted = preferred(b, s.mode, def);
    }
    if (wanted.empty()) wanted = def;
    if (deterministic() && !variant_override(name_)) {
      const bool chosen = kernel_selection().per_op.count(name_) > 0;
      wanted = deterministic_choice(wanted, chosen);
      def = deterministic_choice(def, false);
    }
    const Variant<Args>* v = find_for(wanted, on_cuda);
    if (!v) no_such_variant(name_, wanted, a.device(), list_names());
    std::string why = reason(*v, a);
    if (why.empty()) return *v;
    if (kernel_selection().fallback && wanted != def) {
      const Variant<Args>* d = find_for(def, on_cuda);
      if (d && reason(*d, a).empty()) {
        record_substitution({name_, wanted, def, why});
        return *d;
      }
    }
    AIM_FAIL("[", name_, "] ", v->name, ": ", why);
  }

  // OpBase
  std::vector<VariantInfo> variant_infos() const override {
    std::vector<VariantInfo> r;
    for (const auto& v : variants_) r.push_back({v.name, v.backend, v.provider, v.dtypes});
    return r;
  }
  std::string run_case(const std::string& variant, Backend b, const TestCase& c) override {
    const Variant<Args>* v = nullptr;
    for (const auto& e : variants_)
      if (e.name == variant && e.backend == b) v = &e;
    AIM_CHECK(v, "[", name_, "] no variant ", variant, " on ", backend_name(b));
    const Args a = bind(c);
    std::string why = reason(*v, a);
    if (!why.empty()) return why;
    v->calls->fetch_add(1, std::memory_order_relaxed);
    v->run(a);
    return "";
  }
  Cost case_cost(const TestCase& c) const override { return cost_ ? cost_(bind(c)) : Cost{}; }
  std::vector<std::pair<std::string, int64_t>> call_counts() const override {
    std::vector<std::pair<std::string, int64_t>> r;
    for (const auto& v : variants_) r.push_back({v.name, v.calls->load()});
    return r;
  }
  const std::vector<Variant<Args>>& variants() const { return variants_; }

 private:
  // The test binder, derived from the Args' field declaration (kernels/fields.h).
  Args bind(const TestCase& c) const { return bind_case<Args>(c, name_); }
  static bool backend_fits(Backend b, bool on_cuda) {
    return on_cuda ? b == Backend::CUDA : (b == Backend::CPU || b == Backend::SIMT);
  }
  const Variant<Args>* find_for(const std::string& n, bool on_cuda) const {
    for (const auto& e : variants_)
      if (e.name == n && backend_fits(e.backend, on_cuda)) return &e;
    return nullptr;
  }
  std::string reason(const Variant<Args>& v, const Args& a) const {
    const bool on_cuda = a.device().is_cuda();
    if (!backend_fits(v.backend, on_cuda))
      return str("runs on ", backend_name(v.backend), ", tensors are on ", a.device().str());
    bool dtype_ok = false;
    std::string names;
    for (DType t : v.dtypes) {
      dtype_ok |= t == a.dtype();
      names += std::string(names.empty() ? "" : " ") + dtype_name(t);
    }
    if (!dtype_ok) return str("takes dtypes {", names, "}, got ", dtype_name(a.dtype()));
    return v.supports ? v.supports(a) : std::string();
  }
  // --kernels own|vendor: this call's default when it is of that provider, else the first variant
  // of that provider.
  std::string preferred(Backend b, const std::string& mode, const std::string& def) const {
    const Provider want = mode == "vendor" ? Provider::Vendor : Provider::Own;
    for (const auto& e : variants_)
      if (e.backend == b && e.name == def && e.provider == want) return def;
    for (const auto& e : variants_)
      if (e.backend == b && e.provider == want && e.name != "cpu.ref") return e.name;
    return def;  // the op has no variant of that provider on this backend: nothing to substitute
  }
  std::string list_names() const {
    std::string r;
    for (const auto& e : variants_)
      r += (r.empty() ? "" : ", ") + e.name + " (" + backend_name(e.backend) + ")";
    return r;
  }

  std::vector<Variant<Args>> variants_;
  std::map<Backend, std::function<std::string(const Args&)>> default_rules_;
  std::function<Cost(const Args&)> cost_;
};

class Registry {
 public:
  template <class Args>
  Op<Args>& op(const std::string& name) {
    auto it = ops_.find(name);
    if (it == ops_.end()) {
      it = ops_.emplace(name, Entry{std::make_unique<Op<Args>>(name), typeid(Args)}).first;
    } else {
      AIM_CHECK(it->second.args_type == std::type_index(typeid(Args)), "op ", name,
                " registered with two different argument types");
    }
    return static_cast<Op<Args>&>(*it->second.op);
  }
  OpBase* find(const std::string& name) const;
  std::vector<OpBase*> ops() const;  // sorted by name
  // "op/variant: calls" for every variant that ran (results files).
  std::vector<std::pair<std::string, int64_t>> variants_used() const;

 private:
  struct Entry {
    std::unique_ptr<OpBase> op;
    std::type_index args_type;
  };
  std::map<std::string, Entry> ops_;
};

// The process-wide registry, filled on first use by register_all_ops() (kernels/registry.cpp:
// one explicit call per op family and backend — no static initialisers).
Registry& registry();
void register_all_ops(Registry& r);

// Entry point helper: `void foo(const FooArgs& a) { AIM_DISPATCH_OP(FooArgs, "foo", a); }`
#define AIM_DISPATCH_OP(ArgsType, op_name, args)          \
  do {                                                    \
    static ::aim::kernels::Op<ArgsType>& aim_op_ =        \
        ::aim::kernels::registry().op<ArgsType>(op_name); \
    aim_op_(args);                                        \
  } while (0)

}  // namespace aim::kernels
