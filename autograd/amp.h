// Automatic mixed precision (DESIGN §5): while an Autocast guard is alive on a thread, every
// differentiable function casts its floating-point inputs by the function's class, as PyTorch's
// autocast does:
//   lowp    — GEMM-shaped ops (matmul, linear, conv2d, conv_transpose2d, rnn) run in the
//             low-precision dtype (f16 or bf16): f32 inputs are cast down, parameters through a
//             per-step cache so each weight is cast once;
//   fp32    — ops that need range or accumulate (exp, log, pow, sqrt, rsqrt, sum, mean, var, std,
//             norm, softmax, log_softmax, layer_norm, local_response_norm, every loss) run in f32:
//             16-bit inputs are cast up;
//   promote — ops that combine tensors (add, sub, mul, div, maximum, minimum, where, concat,
//             prelu, scatter_add) cast mixed 16-bit/f32 inputs to f32;
//   native  — everything else runs in its input's dtype (views, pooling, relu/sigmoid/tanh...,
//             dropout, gather/index_select, embedding — tables stay f32 — and batch_norm, whose
//             statistics and affine parameters are f32 for 16-bit activations).
// Each differentiable function declares its class next to its definition (an amp::Declaration
// that it passes to autocast(), so the class it runs by is the class it declares) and lists it in
// its file's declarations_<file>() (autograd/functions/amp_declarations.def). `policy()` below
// builds the table from those lists; `aim-train --list-amp` prints it. f64 tensors are never cast.
//
// A model names the parameters that must stay in f32 even in lowp ops (Model::amp_fp32_params,
// regular expressions over parameter names); an op with such a parameter among its inputs runs in
// f32 instead. Casts are ordinary differentiable casts: gradients flow back to the f32 master
// parameters in f32.
#pragma once
#include <initializer_list>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "autograd/variable.h"

namespace aim::autograd::amp {

enum class OpClass { lowp, fp32, promote, native };
const char* class_name(OpClass c);  // "lowp", "fp32", "promote", "native"

// What a differentiable function declares about itself: its name in the table (a group of
// functions may share one, e.g. "views"), its class and why.
struct Declaration {
  const char* op;
  OpClass cls;
  const char* why;
};

// Reasons shared by the functions of several files (one row of the table each).
inline constexpr const char kWhyPromote[] = "mixed 16-bit/f32 inputs run in f32";
inline constexpr const char kWhyNormStats[] = "normalisation statistics";
inline constexpr const char kWhyTables[] = "tables stay f32 (sparse rows, no GEMM)";
inline constexpr const char kWhyDataMovement[] = "elementwise or data movement: the input's dtype";

// The declarations of each file of autograd/functions, in the order of amp_declarations.def.
#define AIM_AMP_FILE(f) void declarations_##f(std::vector<Declaration>& out);
#include "autograd/functions/amp_declarations.def"
#undef AIM_AMP_FILE
const std::vector<Declaration>& declarations();  // all files, in that order

// The table: one row per (class, why), classes in the order lowp, fp32, promote, native, rows of
// a class in the order of their first declaration, a row's ops in declaration order.
struct PolicyEntry {
  std::string op;
  const char* cls;  // class_name()
  std::string why;
};
const std::vector<PolicyEntry>& policy();

// The model's parameters for autocast: which stay f32, and the low-precision copies of the rest
// (made on first use, kept until clear(): once per training step, or for a whole inference
// session whose weights do not change).
class ParamCache {
 public:
  ParamCache() = default;
  ParamCache(const std::vector<std::pair<std::string, Variable>>& params,
             const std::vector<std::string>& fp32_patterns);
  void clear();
  bool keep_fp32(const VariableImpl* p) const;
  // The lowp copy of parameter p (cast on first use); nullopt when p is not a parameter here.
  std::optional<Variable> lowp_copy(const Variable& p, DType lowp);
  int64_t casts() const { return casts_; }  // copies made since construction
  const std::vector<std::string>& fp32_names() const { return fp32_names_; }

 private:
  struct Entry {
    bool keep_fp32 = false;
    Variable copy;
  };
  std::unordered_map<const VariableImpl*, Entry> entries_;
  std::vector<std::string> fp32_names_;
  int64_t casts_ = 0;
};

struct State {
  DType lowp;
  ParamCache* cache;
};

namespace detail {
extern thread_local State* current;
std::optional<std::vector<Variable>> cast_inputs(OpClass c,
                                                 std::initializer_list<const Variable*> xs);
}  // namespace detail

// Autocast to `lowp` (f16 or bf16) on this thread while alive; nests (the inner one wins).
class Autocast {
 public:
  explicit Autocast(DType lowp, ParamCache* cache = nullptr);
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  State state_;
  State* previous_;
};

inline bool active() { return detail::current != nullptr; }
inline DType lowp_dtype() { return detail::current->lowp; }

// At the top of a differentiable function: the inputs cast by class c, or nullopt when autocast
// is off or nothing needs a cast (then the function goes on with its own arguments). Undefined
// and non-float inputs pass through unchanged.
inline std::optional<std::vector<Variable>> autocast(OpClass c,
                                                     std::initializer_list<const Variable*> xs) {
  if (!detail::current || c == OpClass::native) return std::nullopt;
  return detail::cast_inputs(c, xs);
}
// The same by the function's declared class: what every declared function calls.
inline std::optional<std::vector<Variable>> autocast(const Declaration& d,
                                                     std::initializer_list<const Variable*> xs) {
  return autocast(d.cls, xs);
}

// "f32", "f16", "bf16" -> precision; anything else is an error naming `flag` and the choices.
DType parse_precision(const std::string& s, const std::string& flag);
const char* precision_name(DType t);  // f32 -> "fp32", f16 -> "fp16", bf16 -> "bf16"

}  // namespace aim::autograd::amp
