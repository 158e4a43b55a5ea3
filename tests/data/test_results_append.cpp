// --results lines are appended whole or not at all (issue 26's probe: a full disk left half a JSON
// line that made every later line unreadable), and the batch check before a run.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli/common.h"
#include "tensor/check.h"
#include "tensor/host_memory.h"

namespace aim::cli {
namespace {

TEST(ResultsAppend, WholeLinesAndAFullDiskNamed) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "aim_results_append.jsonl").string();
  std::filesystem::remove(path);
  append_results(path, {{"a", 1}});
  append_results(path, {{"b", "two"}});
  std::ifstream in(path);
  std::string l1, l2, l3;
  std::getline(in, l1);
  std::getline(in, l2);
  EXPECT_EQ(l1, R"({"a":1})");
  EXPECT_EQ(l2, R"({"b":"two"})");
  EXPECT_FALSE(std::getline(in, l3));
  std::filesystem::remove(path);
  // /dev/full: every write fails with ENOSPC.
  if (std::filesystem::exists("/dev/full")) {
    try {
      append_results("/dev/full", {{"a", 1}});
      FAIL() << "expected aim::Error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("No space left on device"), std::string::npos)
          << e.what();
    }
  }
}

TEST(ResultsAppend, FormatBytes) {
  EXPECT_EQ(format_bytes(17), "17 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(3.0 * 1024 * 1024 * 1024), "3.0 GiB");
  EXPECT_GT(host_memory_limit(), uint64_t(1) << 26);
}

}  // namespace
}  // namespace aim::cli
