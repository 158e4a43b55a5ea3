#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "tensor/safetensors.h"

namespace aim {
namespace {
std::string tmp(const char* name) { return std::string(::testing::TempDir()) + name; }

void expect_error(const std::string& path, const std::string& needle) {
  try {
    load_safetensors(path);
    FAIL() << "no error for " << path;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}
}  // namespace

TEST(Safetensors, RoundTrip) {
  const std::string p = tmp("rt.safetensors");
  Tensor a = Tensor::arange(6).view({2, 3});
  Tensor b = Tensor::arange(4, DType::i64);
  Tensor c = Tensor::arange(5).to(DType::bf16);
  save_safetensors(p, {{"a", a.transpose(0, 1)}, {"b", b}, {"c", c}}, {{"k", "v"}});
  const SafetensorsFile f = load_safetensors(p);
  EXPECT_EQ(f.at("a").sizes(), (Shape{3, 2}));
  EXPECT_EQ(f.at("a").to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(f.at("b").to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(f.at("c").dtype(), DType::bf16);
  EXPECT_EQ(f.metadata.at("k"), "v");
  EXPECT_FALSE(f.has("zzz"));
}

TEST(Safetensors, CorruptFilesNameWhatIsWrong) {
  const std::string p = tmp("bad.safetensors");
  save_safetensors(p, {{"w", Tensor::arange(100)}});
  std::ifstream in(p, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto write = [&](const std::string& s) {
    std::ofstream o(p, std::ios::binary | std::ios::trunc);
    o << s;
  };
  write(bytes.substr(0, bytes.size() - 10));
  expect_error(p, "outside the data section");
  write(bytes.substr(0, 5));
  expect_error(p, "not a safetensors file");
  std::string bad = bytes;
  bad[8] = '#';  // the header's opening brace
  write(bad);
  expect_error(p, "JSON");
  expect_error(tmp("does-not-exist.safetensors"), "cannot open");
}

}  // namespace aim
