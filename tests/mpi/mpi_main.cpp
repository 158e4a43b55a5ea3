// aim_mpi_tests' main: GoogleTest under mpirun (tests/CMakeLists.txt runs it with
// `mpirun -np 2`). Rank 0 prints the usual report; the other ranks print only their failures,
// prefixed with their rank, so the log stays readable. Each rank exits with its own result, and
// mpirun exits non-zero when any rank does. MPI is finalised at exit (train/dist/mpi_backend.h).
#include <gtest/gtest.h>

#include <cstdio>

#include "train/dist/launch.h"

namespace {

class FailuresOnly : public ::testing::EmptyTestEventListener {
 public:
  explicit FailuresOnly(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                 r.file_name() ? r.file_name() : "?", r.line_number(), r.summary());
  }
  void OnTestEnd(const ::testing::TestInfo& t) override {
    if (t.result()->Failed())
      std::fprintf(stderr, "[rank %d] FAILED %s.%s\n", rank_, t.test_suite_name(), t.name());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const aim::dist::LaunchEnv env = aim::dist::detect_launch_env();
  if (env.rank != 0) {
    ::testing::TestEventListeners& l = ::testing::UnitTest::GetInstance()->listeners();
    delete l.Release(l.default_result_printer());
    l.Append(new FailuresOnly(env.rank));
  }
  return RUN_ALL_TESTS();
}
