// train/dist: every collective of the local backend on 1, 2 and 3 ranks (odd element counts,
// every float dtype, bitwise-identical results on all ranks), failures (an exception on one rank,
// a missing rank, mismatched collectives) reaching every rank within the timeout, the launcher
// environment, and the TCP rendezvous on localhost.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "train/dist/communicator.h"
#include "train/dist/launch.h"
#include "train/dist/mpi_backend.h"

namespace aim::dist {
namespace {

using std::chrono::milliseconds;

double secs_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Rank r's element i: small multiples of 1/4, exact in every float dtype.
double value(int r, int64_t i) { return 0.5 * (r + 1) + 0.25 * double(i % 7) - 1.0; }

Tensor rank_tensor(int r, int64_t n, DType t) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = value(r, i);
  return Tensor::from_vector<double>(v, {n}).to(t);
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const uint8_t* p = static_cast<const uint8_t*>(t.raw_data());
  return std::vector<uint8_t>(p, p + t.nbytes());
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const DType kFloatTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

TEST(DistLocal, AllReduceEveryDtypeAndSize) {
  for (int n : {1, 2, 3})
    for (DType t : kFloatTypes)
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg})
        for (int64_t count : {int64_t(2), int64_t(1031)}) {
          SCOPED_TRACE(str("ranks ", n, " ", dtype_name(t), " ", reduce_op_name(op), " x ", count));
          std::vector<std::vector<uint8_t>> got(static_cast<size_t>(n));
          run_local_ranks(n, [&](int r, Communicator& c) {
            EXPECT_EQ(c.rank(), r);
            EXPECT_EQ(c.size(), n);
            Tensor x = rank_tensor(r, count, t);
            c.all_reduce(x, op);
            got[size_t(r)] = bytes_of(x);
          });
          std::vector<double> want(static_cast<size_t>(count));
          for (int64_t i = 0; i < count; ++i) {
            double s = 0;
            for (int r = 0; r < n; ++r) s += value(r, i);
            want[size_t(i)] = op == ReduceOp::Avg ? s / n : s;
          }
          Tensor first = Tensor::empty({count}, t);
          std::memcpy(first.raw_data(), got[0].data(), got[0].size());
          const std::vector<double> g = first.to_vector<double>();
          const double tol = t == DType::f16 ? 1e-2 : t == DType::bf16 ? 3e-2 : 1e-6;
          for (int64_t i = 0; i < count; ++i)
            ASSERT_NEAR(g[size_t(i)], want[size_t(i)], tol * (1 + std::abs(want[size_t(i)])))
                << "element " << i;
          for (int r = 1; r < n; ++r) EXPECT_EQ(got[size_t(r)], got[0]) << "rank " << r;
        }
}

TEST(DistLocal, IntegerSumAndAvgRejected) {
  run_local_ranks(3, [&](int r, Communicator& c) {
    Tensor x = Tensor::from_vector<int64_t>({int64_t(r), int64_t(10 * r) + 1}, {2});
    c.all_reduce(x);
    EXPECT_EQ(x.to_vector<int64_t>(), (std::vector<int64_t>{3, 33}));
    const std::string e = error_of([&] { c.all_reduce(x, ReduceOp::Avg); });
    EXPECT_NE(e.find("cannot reduce (avg) a i64 tensor"), std::string::npos) << e;
  });
}

TEST(DistLocal, BroadcastAllGatherReduceScatterAllToAll) {
  for (int n : {1, 2, 3})
    for (DType t : kFloatTypes) {
      SCOPED_TRACE(str("ranks ", n, " ", dtype_name(t)));
      const int64_t c = 5;  // odd chunk
      std::mutex mu;
      std::map<int, std::vector<uint8_t>> gathered;
      run_local_ranks(n, [&](int r, Communicator& comm) {
        // broadcast from the last rank
        Tensor b = rank_tensor(r, 7, t);
        comm.broadcast(b, n - 1);
        EXPECT_EQ(bytes_of(b), bytes_of(rank_tensor(n - 1, 7, t)));
        // all_gather
        Tensor in = rank_tensor(r, c, t);
        Tensor out = Tensor::empty({n, c}, t);
        comm.all_gather(in, out);
        for (int j = 0; j < n; ++j)
          EXPECT_EQ(bytes_of(out.select(0, j).contiguous()), bytes_of(rank_tensor(j, c, t)));
        {
          std::lock_guard<std::mutex> lock(mu);
          gathered[r] = bytes_of(out);
        }
        // reduce_scatter (sum): in[j*c + i] = value(r, j*c + i)
        Tensor rs_in = rank_tensor(r, n * c, t);
        Tensor rs_out = Tensor::empty({c}, t);
        comm.reduce_scatter(rs_in, rs_out, ReduceOp::Sum);
        const std::vector<double> rs = rs_out.to_vector<double>();
        for (int64_t i = 0; i < c; ++i) {
          double s = 0;
          for (int j = 0; j < n; ++j) s += value(j, r * c + i);
          EXPECT_DOUBLE_EQ(rs[size_t(i)], s) << "reduce_scatter element " << i;
        }
        // all_to_all: rank r's chunk j holds 100*r + j; after it, chunk j holds 100*j + r.
        std::vector<double> a2a(static_cast<size_t>(n * c));
        for (int j = 0; j < n; ++j)
          for (int64_t i = 0; i < c; ++i) a2a[size_t(j * c + i)] = 100 * r + j;
        Tensor a_in =
            Tensor::from_vector<double>(a2a, {n * c}).to(t == DType::f64 ? t : DType::f32);
        Tensor a_out = Tensor::empty({n * c}, a_in.dtype());
        comm.all_to_all(a_in, a_out);
        const std::vector<double> ao = a_out.to_vector<double>();
        for (int j = 0; j < n; ++j)
          for (int64_t i = 0; i < c; ++i)
            EXPECT_EQ(ao[size_t(j * c + i)], 100 * j + r) << "all_to_all chunk " << j;
        comm.barrier();
      });
      for (int r = 1; r < n; ++r) EXPECT_EQ(gathered[r], gathered[0]);
    }
}

TEST(DistLocal, ByteCollectivesTakeIntegerTypes) {
  run_local_ranks(2, [&](int r, Communicator& c) {
    Tensor in = Tensor::from_vector<int32_t>({r, r + 10, r + 20}, {3});
    Tensor out = Tensor::empty({6}, DType::i32);
    c.all_gather(in, out);
    EXPECT_EQ(out.to_vector<int32_t>(), (std::vector<int32_t>{0, 10, 20, 1, 11, 21}));
  });
}

TEST(DistLocal, BadArgumentsNameTheTensor) {
  run_local_ranks(2, [&](int, Communicator& c) {
    Tensor in = Tensor::zeros({3});
    std::string e = error_of([&] { c.all_gather(in, Tensor::zeros({5})); });
    EXPECT_NE(e.find("output has 5 elements, expected size * input = 2 * 3"), std::string::npos)
        << e;
    e = error_of([&] { c.broadcast(in, 2); });
    EXPECT_NE(e.find("root 2 is not a rank of a group of 2"), std::string::npos) << e;
    e = error_of([&] { c.all_reduce(Tensor::zeros({4, 4}).transpose(0, 1)); });
    EXPECT_NE(e.find("must be contiguous"), std::string::npos) << e;
    Tensor buf = Tensor::zeros({8});
    e = error_of([&] { c.all_to_all(buf.narrow(0, 0, 4), buf.narrow(0, 2, 4)); });
    EXPECT_NE(e.find("overlap"), std::string::npos) << e;
  });
}

TEST(DistLocal, AsyncReturnsAtOnceAndOverlaps) {
  run_local_ranks(2, [&](int r, Communicator& c) {
    Tensor x = Tensor::full({64}, double(r + 1));
    if (r == 1) std::this_thread::sleep_for(milliseconds(150));
    const auto t0 = Clock::now();
    WorkPtr w = c.all_reduce_async(x, ReduceOp::Sum, "late peer");
    if (r == 0) {
      EXPECT_LT(secs_since(t0), 0.1);  // did not wait for rank 1
    }
    w->wait();
    EXPECT_EQ(x.to_vector<float>()[0], 3.0f);
    EXPECT_GE(w->ended(), w->started());
  });
}

TEST(DistLocal, FailingRankStopsEveryRankFast) {
  Options o;
  o.timeout = milliseconds(2000);
  std::mutex mu;
  std::map<int, std::string> errors;
  const auto t0 = Clock::now();
  const std::string e = error_of([&] {
    run_local_ranks(
        3,
        [&](int r, Communicator& c) {
          Tensor x = Tensor::ones({10});
          c.all_reduce(x);
          if (r == 1) throw std::runtime_error("loss is nan at step 7");
          try {
            c.all_reduce(x);  // pending when rank 1 fails
          } catch (const Error& err) {
            std::lock_guard<std::mutex> lock(mu);
            errors[r] = err.what();
            throw;
          }
        },
        o);
  });
  const double dt = secs_since(t0);
  EXPECT_LT(dt, 2.0) << "the failure must reach the other ranks before the timeout";
  EXPECT_EQ(e, "dist: rank 1 failed: loss is nan at step 7");
  ASSERT_EQ(errors.size(), 2u);
  for (const auto& [r, msg] : errors) EXPECT_EQ(msg, e) << "rank " << r;
}

TEST(DistLocal, MissingRankTimesOutNamingIt) {
  Options o;
  o.timeout = milliseconds(400);
  std::mutex mu;
  std::map<int, std::pair<std::string, double>> seen;
  const auto t0 = Clock::now();
  const std::string e = error_of([&] {
    run_local_ranks(
        3,
        [&](int r, Communicator& c) {
          Tensor x = Tensor::ones({10});
          if (r == 2) std::this_thread::sleep_for(milliseconds(900));  // a stuck rank
          try {
            c.all_reduce(x);
          } catch (const Error& err) {
            std::lock_guard<std::mutex> lock(mu);
            seen[r] = {err.what(), secs_since(t0)};
            throw;
          }
        },
        o);
  });
  EXPECT_NE(e.find("timed out after 400 ms in all_reduce #1 (f32 x 10, sum) waiting for rank(s) 2"),
            std::string::npos)
      << e;
  ASSERT_EQ(seen.size(), 3u);
  for (int r : {0, 1}) {
    EXPECT_EQ(seen[r].first, e);
    EXPECT_GE(seen[r].second, 0.35);
    EXPECT_LT(seen[r].second, 0.8) << "rank " << r << " must stop within the timeout";
  }
  EXPECT_EQ(seen[2].first, e);  // the late rank's call fails at once too
}

TEST(DistLocal, MismatchedCollectivesAreAnError) {
  const std::string e = error_of([&] {
    run_local_ranks(2, [&](int r, Communicator& c) {
      Tensor x = Tensor::zeros({r == 0 ? 10 : 11});
      c.all_reduce(x);
    });
  });
  EXPECT_NE(e.find("collective mismatch"), std::string::npos) << e;
  EXPECT_NE(e.find("all_reduce #1 (f32 x 10, sum)"), std::string::npos) << e;
  EXPECT_NE(e.find("all_reduce #1 (f32 x 11, sum)"), std::string::npos) << e;
}

TEST(DistLaunch, Environment) {
  auto env = [](std::map<std::string, std::string> m) {
    return [m](const char* n) -> const char* {
      auto it = m.find(n);
      return it == m.end() ? nullptr : it->second.c_str();
    };
  };
  LaunchEnv e = detect_launch_env(env({}));
  EXPECT_FALSE(e.launched());
  EXPECT_EQ(e.world_size, 1);
  e = detect_launch_env(env({{"RANK", "3"},
                             {"WORLD_SIZE", "8"},
                             {"LOCAL_RANK", "3"},
                             {"MASTER_ADDR", "node0"},
                             {"MASTER_PORT", "29500"}}));
  EXPECT_EQ(e.source, "RANK/WORLD_SIZE");
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.master_addr, "node0");
  EXPECT_EQ(e.master_port, 29500);
  e = detect_launch_env(env({{"OMPI_COMM_WORLD_RANK", "1"},
                             {"OMPI_COMM_WORLD_SIZE", "2"},
                             {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                             {"MASTER_ADDR", "h"},
                             {"MASTER_PORT", "1234"}}));
  EXPECT_EQ(e.source, "OMPI_COMM_WORLD_*");
  EXPECT_EQ(e.local_rank, 1);
  e = detect_launch_env(env({{"SLURM_PROCID", "5"},
                             {"SLURM_NTASKS", "16"},
                             {"SLURM_LOCALID", "1"},
                             {"MASTER_ADDR", "h"},
                             {"MASTER_PORT", "1234"}}));
  EXPECT_EQ(e.source, "SLURM_*");
  EXPECT_EQ(e.rank, 5);
  std::string err = error_of([&] {
    detect_launch_env(env({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}}));
  });
  EXPECT_NE(err.find("RANK='2' is not an integer in [0, 1]"), std::string::npos) << err;
  err = error_of([&] {
    detect_launch_env(env({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}}));
  });
  EXPECT_NE(err.find("MASTER_ADDR and MASTER_PORT are not both set"), std::string::npos) << err;
  err = error_of([&] { detect_launch_env(env({{"WORLD_SIZE", "2"}})); });
  EXPECT_NE(err.find("WORLD_SIZE is set but RANK is not"), std::string::npos) << err;
  // mpirun without MASTER_ADDR/PORT: the mpi backend needs no rendezvous; NCCL ranks do.
  e = detect_launch_env(env({{"OMPI_COMM_WORLD_RANK", "1"},
                             {"OMPI_COMM_WORLD_SIZE", "2"},
                             {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}}));
  EXPECT_EQ(e.source, "OMPI_COMM_WORLD_*");
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.master_port, 0);
  err = error_of([&] { require_rendezvous(e, "NCCL ranks"); });
  EXPECT_NE(err.find("NCCL ranks needs the TCP rendezvous, but OMPI_COMM_WORLD_* gives a world of "
                     "2 ranks and MASTER_ADDR and MASTER_PORT are not both set"),
            std::string::npos)
      << err;
  // Half of the pair is still an error, under mpirun too.
  err = error_of([&] {
    detect_launch_env(env({{"OMPI_COMM_WORLD_RANK", "0"},
                           {"OMPI_COMM_WORLD_SIZE", "2"},
                           {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                           {"MASTER_ADDR", "h"}}));
  });
  EXPECT_NE(err.find("MASTER_ADDR and MASTER_PORT are not both set"), std::string::npos) << err;
  e = detect_launch_env(env({{"RANK", "0"},
                             {"WORLD_SIZE", "2"},
                             {"LOCAL_RANK", "0"},
                             {"MASTER_ADDR", "h"},
                             {"MASTER_PORT", "1234"}}));
  EXPECT_EQ(error_of([&] { require_rendezvous(e, "NCCL ranks"); }), "");
}

TEST(DistMpi, BuiltOrAClearError) {
  // The mpi backend itself runs under mpirun (aim_mpi_tests, tests/mpi/); here only what needs
  // no MPI job: the library's version, or the error of a build without MPI.
  if (mpi_built()) {
    EXPECT_NE(mpi_version().find("MPI"), std::string::npos) << mpi_version();
  } else {
    const std::string err = error_of([] { make_mpi_communicator(); });
    EXPECT_NE(err.find("aim was built without MPI: install libopenmpi-dev (tools/deps.sh) and "
                       "rebuild"),
              std::string::npos)
        << err;
  }
}

int free_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  EXPECT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(s);
  return ntohs(a.sin_port);
}

TEST(DistRendezvous, ThreeRanksOnLocalhost) {
  const int port = free_port();
  std::vector<std::vector<std::string>> got(3);
  std::vector<std::thread> ts;
  for (int r = 2; r >= 0; --r)  // clients first: they retry until rank 0 listens
    ts.emplace_back([&, r] {
      got[size_t(r)] = tcp_all_gather("127.0.0.1", port, r, 3, "payload of " + std::to_string(r),
                                      milliseconds(3000));
    });
  for (auto& t : ts) t.join();
  const std::vector<std::string> want = {"payload of 0", "payload of 1", "payload of 2"};
  for (int r = 0; r < 3; ++r) EXPECT_EQ(got[size_t(r)], want) << "rank " << r;
}

TEST(DistRendezvous, MissingRankAndNoServerTimeOut) {
  const int port = free_port();
  std::string e0, e1;
  const auto t0 = Clock::now();
  std::thread root([&] {
    e0 = error_of([&] { tcp_all_gather("127.0.0.1", port, 0, 3, "id", milliseconds(500)); });
  });
  std::thread one([&] {
    e1 = error_of([&] { tcp_all_gather("127.0.0.1", port, 1, 3, "", milliseconds(1500)); });
  });
  root.join();
  one.join();
  EXPECT_LT(secs_since(t0), 1.4);  // rank 1 hears rank 0's reason, well before its own timeout
  EXPECT_NE(e0.find("rank 0 waited 500 ms on port " + std::to_string(port) + " for rank(s) 2 of 3"),
            std::string::npos)
      << e0;
  EXPECT_NE(e1.find("for rank(s) 2 of 3"), std::string::npos) << e1;

  const auto t1 = Clock::now();
  const std::string e2 =
      error_of([&] { tcp_all_gather("127.0.0.1", free_port(), 1, 2, "", milliseconds(300)); });
  EXPECT_LT(secs_since(t1), 1.0);
  EXPECT_NE(e2.find("rank 1 could not connect to 127.0.0.1:"), std::string::npos) << e2;
}

TEST(DistRendezvous, WorldSizeMismatchIsReported) {
  const int port = free_port();
  std::string e0, e1;
  std::thread root([&] {
    e0 = error_of([&] { tcp_all_gather("127.0.0.1", port, 0, 2, "", milliseconds(2000)); });
  });
  std::thread one([&] {
    e1 = error_of([&] { tcp_all_gather("127.0.0.1", port, 1, 3, "", milliseconds(2000)); });
  });
  root.join();
  one.join();
  EXPECT_NE(e0.find("rank 1 has a world of 3 ranks, rank 0 has 2"), std::string::npos) << e0;
  EXPECT_NE(e1.find("rank 1 has a world of 3 ranks, rank 0 has 2"), std::string::npos) << e1;
}

}  // namespace
}  // namespace aim::dist
