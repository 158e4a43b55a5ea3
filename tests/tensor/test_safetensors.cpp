#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "tensor/crc32c.h"
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

TEST(Safetensors, NanTensorAndDirectoryNamed) {
  const std::string p = tmp("nan.safetensors");
  Tensor w = Tensor::arange(8);
  Tensor m = Tensor::arange(4);
  m.data<float>()[1] = std::numeric_limits<float>::infinity();  // a mask may hold infinities
  save_safetensors(p, {{"mask", m}, {"w", w}});
  int64_t at = -1;
  EXPECT_EQ(first_nan_tensor(load_safetensors(p), &at), "");
  w.data<float>()[5] = std::nanf("");
  save_safetensors(p, {{"mask", m}, {"w", w.to(DType::bf16)}});
  EXPECT_EQ(first_nan_tensor(load_safetensors(p), &at), "w");
  EXPECT_EQ(at, 5);
  expect_error(std::filesystem::temp_directory_path().string(), "is a directory");
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

namespace {
std::string read_bytes(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
void write_bytes(const std::string& p, const std::string& s) {
  std::ofstream o(p, std::ios::binary | std::ios::trunc);
  o << s;
}
}  // namespace

TEST(Crc32c, KnownValues) {
  // RFC 3720 B.4 and the common check value of "123456789".
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  std::string zeros(32, '\0'), ones(32, '\xff');
  EXPECT_EQ(crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), 32), 0x62A8AB43u);
  // Continuing a range gives the checksum of the whole; odd lengths take the byte tail.
  const std::string s = "the quick brown fox jumps over the lazy dog!";
  EXPECT_EQ(crc32c(s.data() + 13, s.size() - 13, crc32c(s.data(), 13)), crc32c(s.data(), s.size()));
}

TEST(Safetensors, FlippedByteNamesTheTensor) {
  const std::string p = tmp("sum.safetensors");
  save_safetensors(p, {{"first", Tensor::arange(64)}, {"second", Tensor::arange(32, DType::i64)}},
                   {{"step", "7"}});
  const SafetensorsFile ok = load_safetensors(p);
  EXPECT_TRUE(ok.checksummed);
  EXPECT_EQ(ok.metadata.size(), 1u);  // the checksum keys are aim's, not the caller's
  const std::string bytes = read_bytes(p);
  // A flipped bit in the last tensor's bytes (the data section's end: "second").
  std::string bad = bytes;
  bad[bad.size() - 3] ^= 0x10;
  write_bytes(p, bad);
  expect_error(p, "tensor 'second' (i64 [32]) fails its checksum");
  // In the first tensor's.
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; --i) hlen = (hlen << 8) | static_cast<unsigned char>(bytes[size_t(i)]);
  bad = bytes;
  bad[8 + hlen + 5] ^= 0x01;
  write_bytes(p, bad);
  expect_error(p, "tensor 'first'");
  // In the metadata: "step": "7" -> "8" still parses, but the header fails its checksum.
  bad = bytes;
  const size_t at = bad.find("\"step\":\"7\"");
  ASSERT_NE(at, std::string::npos);
  bad[at + 8] = '8';
  write_bytes(p, bad);
  expect_error(p,
               "the header (tensor names, dtypes, shapes, offsets, metadata) fails its checksum");
  // A file of another writer (no aim checksums) loads unverified.
  const std::string foreign = R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  std::string f(8, '\0');
  f[0] = char(foreign.size());
  f += foreign + std::string(4, '\0');
  write_bytes(p, f);
  const SafetensorsFile g = load_safetensors(p);
  EXPECT_FALSE(g.checksummed);
  EXPECT_EQ(g.at("x").to_vector<float>(), std::vector<float>{0.f});
}

// A write that fails part-way (here: the file size limit, EFBIG, as a full disk's ENOSPC would)
// leaves the previous file whole, removes the temporary file and names the reason.
TEST(Safetensors, FailedWriteKeepsThePreviousFile) {
  const std::string p = tmp("full.safetensors");
  save_safetensors(p, {{"w", Tensor::arange(16)}});
  const std::string before = read_bytes(p);
  // Made before the fork: the child must not start OpenMP work (a forked child of a process with
  // an OpenMP pool hangs in libgomp); saving a contiguous CPU tensor runs none.
  const Tensor big = Tensor::arange(100000);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(fds[0]);
    ::signal(SIGXFSZ, SIG_IGN);  // the write then fails with EFBIG instead of killing
    struct rlimit rl {};
    rl.rlim_cur = rl.rlim_max = 4096;
    ::setrlimit(RLIMIT_FSIZE, &rl);
    std::string msg = "no error";
    try {
      save_safetensors(p, {{"w", big}});
    } catch (const Error& e) {
      msg = e.what();
    }
    if (::write(fds[1], msg.data(), msg.size()) < 0) _exit(2);
    _exit(0);
  }
  ::close(fds[1]);
  std::string msg;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) msg.append(buf, size_t(n));
  ::close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_NE(msg.find("write failed: " + std::string(std::strerror(EFBIG))), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("intact"), std::string::npos) << msg;
  EXPECT_EQ(read_bytes(p), before);
  EXPECT_FALSE(std::filesystem::exists(p + ".tmp"));
  EXPECT_TRUE(load_safetensors(p).checksummed);
}

}  // namespace aim
