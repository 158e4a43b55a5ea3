// autograd/amp.h: the autocast classes (lowp, fp32, promote, native), the parameter cache (one
// cast per weight, fp32-declared parameters), gradients reaching the f32 masters.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "autograd/amp.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/index.h"
#include "autograd/functions/matmul.h"
#include "autograd/functions/reduce.h"
#include "autograd/functions/shape.h"
#include "autograd/functions/softmax.h"
#include "tests/support/common.h"

namespace aim::autograd {
namespace {

Tensor randn(Shape s, uint64_t seed) {
  std::vector<float> v(size_t(shape_numel(s)));
  uint64_t x = seed * 2654435761u + 1;
  for (float& f : v) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    f = float(int64_t(x >> 40) % 2001 - 1000) / 1000.0f;
  }
  return Tensor::from_vector(v, s);
}

TEST(Amp, ClassesDecideTheDtype) {
  const Variable x(randn({4, 8}, 1)), w(randn({3, 8}, 2), true), b(randn({3}, 3), true);
  {
    amp::Autocast ac(DType::f16);
    const Variable y = linear(x, w, b);
    EXPECT_EQ(y.dtype(), DType::f16);                                   // lowp
    EXPECT_EQ(softmax(y, 1).dtype(), DType::f32);                       // fp32
    EXPECT_EQ(add(y, Variable(randn({4, 3}, 9))).dtype(), DType::f32);  // promote (mixed)
    EXPECT_EQ(add(y, y).dtype(), DType::f16);                           // uniform: as is
    EXPECT_EQ(relu(y).dtype(), DType::f16);                             // native
    EXPECT_EQ(concat({y, Variable(randn({4, 2}, 4))}, 1).dtype(), DType::f32);
  }
  EXPECT_FALSE(amp::active());
  EXPECT_EQ(linear(x, w, b).dtype(), DType::f32);
  amp::Autocast ac(DType::bf16);
  EXPECT_EQ(matmul(x, w, false, true).dtype(), DType::bf16);
}

TEST(Amp, GradientsReachF32MastersCloseToF32) {
  const Variable x(randn({16, 32}, 5)), w(randn({8, 32}, 6), true), b(randn({8}, 7), true);
  sum(linear(x, w, b), {}, false).backward();
  const std::vector<float> g32 = w.grad().to_vector<float>(), gb32 = b.grad().to_vector<float>();
  w.zero_grad();
  b.zero_grad();
  for (DType t : {DType::f16, DType::bf16}) {
    w.zero_grad();
    b.zero_grad();
    Variable loss;
    {
      amp::Autocast ac(t);
      loss = sum(linear(x, w, b), {}, false);
    }
    EXPECT_EQ(loss.dtype(), DType::f32);
    loss.backward();
    ASSERT_EQ(w.grad().dtype(), DType::f32);
    const std::vector<float> g = w.grad().to_vector<float>();
    const double tol = t == DType::f16 ? 2e-2 : 1e-1;  // x rounded to 16 bits (|x| <= 1, 16 rows)
    for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], g32[i], tol) << dtype_name(t) << i;
    EXPECT_EQ(b.grad().to_vector<float>(), gb32);  // bias grad = column sums of ones
  }
}

TEST(Amp, ParamCacheCastsOnceAndKeepsDeclaredParametersInF32) {
  const Variable x(randn({4, 8}, 1)), w1(randn({8, 8}, 2), true), w2(randn({8, 8}, 3), true);
  amp::ParamCache cache({{"enc.weight", w1}, {"head.weight", w2}}, {"^head\\."});
  EXPECT_EQ(cache.fp32_names(), (std::vector<std::string>{"head.weight"}));
  {
    amp::Autocast ac(DType::f16, &cache);
    const Variable h = linear(linear(x, w1), w1);  // w1 used twice: one cast
    EXPECT_EQ(h.dtype(), DType::f16);
    EXPECT_EQ(cache.casts(), 1);
    EXPECT_EQ(linear(h, w2).dtype(), DType::f32);  // declared fp32: the op runs in f32
    cache.clear();
    linear(x, w1);
    EXPECT_EQ(cache.casts(), 2);
  }
  AIM_EXPECT_ERROR(amp::ParamCache({{"enc.weight", w1}}, {"^emb\\."}),
                   "declares '^emb\\.' as an fp32 parameter pattern, but no parameter");
  AIM_EXPECT_ERROR(amp::ParamCache({{"enc.weight", w1}}, {"(("}), "is not a valid regex");
  AIM_EXPECT_ERROR(amp::parse_precision("fp8", "--precision"),
                   "--precision 'fp8': allowed: fp32, fp16, bf16");
}

TEST(Amp, F64IsNeverCast) {
  const Variable x(randn({2, 3}, 1).to(DType::f64)), w(randn({4, 3}, 2).to(DType::f64));
  amp::Autocast ac(DType::f16);
  EXPECT_EQ(linear(x, w).dtype(), DType::f64);
}

// The table --list-amp prints is built from the functions' own declarations: one row per
// (class, reason) holding exactly the functions declared with them, and nothing else.
TEST(Amp, PolicyIsBuiltFromTheDeclarations) {
  using Row = std::tuple<std::string, std::string, std::string>;  // class, reason, functions
  std::vector<Row> expected, got;
  for (const amp::Declaration& d : amp::declarations()) {
    auto row = std::find_if(expected.begin(), expected.end(), [&](const Row& r) {
      return std::get<0>(r) == amp::class_name(d.cls) && std::get<1>(r) == d.why;
    });
    if (row == expected.end())
      expected.emplace_back(amp::class_name(d.cls), d.why, d.op);
    else
      std::get<2>(*row) += std::string(", ") + d.op;
  }
  for (const amp::PolicyEntry& e : amp::policy()) got.emplace_back(e.cls, e.why, e.op);
  std::sort(expected.begin(), expected.end());
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, expected);
  EXPECT_GE(amp::declarations().size(), size_t(40));
  // Native functions never cast, even under autocast.
  const Variable x(randn({2, 3}, 8));
  amp::Autocast ac(DType::f16);
  EXPECT_FALSE(amp::autocast(amp::Declaration{"t", amp::OpClass::native, ""}, {&x}).has_value());
  EXPECT_TRUE(amp::autocast(amp::Declaration{"t", amp::OpClass::lowp, ""}, {&x}).has_value());
}

// Every call of amp::autocast in autograd/functions passes the calling function's declaration
// (so the class it runs by is the declared one), and every declaration is listed in its file's
// declarations_<file>(), a file named in amp_declarations.def: a function that autocasts cannot
// be missing from the --list-amp table. (concat promotes its parts one by one: its per-part
// casts name the class, next to a static_assert on its declaration.)
TEST(Amp, EveryAutocastingFunctionIsDeclared) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(aim::testing::source_root()) / "autograd" / "functions";
  auto read = [](const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  const std::string def = read(dir / "amp_declarations.def");
  ASSERT_FALSE(def.empty()) << "cannot read " << dir / "amp_declarations.def";
  const std::regex call_re(R"(amp::autocast\(\s*([\w:]+))"),
      decl_re(R"(constexpr amp::Declaration (\w+))");
  int calls = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".cpp") continue;
    const std::string src = read(e.path()), stem = e.path().stem().string();
    SCOPED_TRACE(e.path().filename().string());
    std::string list;  // the body of declarations_<stem>()
    const size_t at = src.find("amp::declarations_" + stem + "(");
    if (at != std::string::npos) list = src.substr(at, src.find('}', at) - at);
    for (std::sregex_iterator m(src.begin(), src.end(), decl_re), end; m != end; ++m) {
      EXPECT_NE(list.find((*m)[1].str()), std::string::npos)
          << (*m)[1] << " is declared but not listed in amp::declarations_" << stem << "()";
      EXPECT_NE(def.find("AIM_AMP_FILE(" + stem + ")"), std::string::npos)
          << stem << " declares autocast classes but is not in amp_declarations.def";
    }
    for (std::sregex_iterator m(src.begin(), src.end(), call_re), end; m != end; ++m) {
      ++calls;
      const std::string arg = (*m)[1];
      if (arg.rfind("amp::OpClass::", 0) == 0) {
        EXPECT_TRUE(stem == "index" &&
                    src.find("static_assert(kConcatAmp.cls") != std::string::npos)
            << "amp::autocast(" << arg << ", ...) names a class instead of a declaration";
        continue;
      }
      EXPECT_NE(src.find("constexpr amp::Declaration " + arg + "{"), std::string::npos)
          << arg << " is not a declaration of this file";
      EXPECT_NE(list.find(arg), std::string::npos)
          << arg << " is not listed in amp::declarations_" << stem << "()";
    }
  }
  EXPECT_GE(calls, 30);  // the scan found the functions
}

}  // namespace
}  // namespace aim::autograd
