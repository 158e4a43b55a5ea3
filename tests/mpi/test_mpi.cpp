// The mpi backend under mpirun (train/dist/mpi_backend.h): every collective and dtype on the
// ranks of the job, async calls running in issue order, mismatched collectives reported on every
// rank, and the data-parallel equivalence of train_model on MPI ranks: N ranks at batch B end
// with the parameters of one process at batch N B (DIN, tiny ResNet-50 with frozen BN; with
// SyncBatchNorm DIN bn=train and the tiny ResNet-50 with batch statistics).
//
// MpiJobEnd.*: a missing rank (deadline) and a failing rank end the whole job through MPI_Abort,
// so each runs as its own ctest entry (aim_mpi_timeout, aim_mpi_failure) that checks the message
// mpirun's output carries; they run only with AIM_MPI_JOB_END_TEST=1 (a plain run skips them).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iterator>
#include <map>
#include <sstream>
#include <thread>

#include "tests/support/common.h"
#include "tests/support/train_compare.h"
#include "train/dist/launch.h"
#include "train/dist/mpi_backend.h"
#include "train/trainer.h"

namespace aim::dist {
namespace {

using aim::testing::error_of;

const LaunchEnv& env() {
  static const LaunchEnv e = detect_launch_env();
  return e;
}

std::unique_ptr<Communicator> make_comm(
    std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  Options o;
  o.timeout = timeout;
  std::unique_ptr<Communicator> c = make_mpi_communicator(o, &env());
  EXPECT_GE(c->size(), 2) << "run under mpirun -np 2 (or more)";
  return c;
}

// Rank r's element i: small multiples of 1/4, so sums and averages are exact in every float
// dtype and every order of summation.
double value(int r, int64_t i) { return 0.5 * (r + 1) + 0.25 * double(i % 7) - 1.0; }

Tensor rank_tensor(int r, int64_t n, DType t) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = value(r, i);
  return Tensor::from_vector<double>(v, {n}).to(t);
}

// Small integers (distinct per rank and element, within every dtype's range; bool: parity).
Tensor int_tensor(int r, int64_t n, DType t, int salt = 0) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = double((13 * r + 5 * i + salt) % 97);
  Tensor f = Tensor::from_vector<double>(v, {n});
  if (t == DType::boolean)
    for (int64_t i = 0; i < n; ++i) f.data<double>()[i] = double(int64_t(v[size_t(i)]) % 2);
  return f.to(t);
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const uint8_t* p = static_cast<const uint8_t*>(t.raw_data());
  return std::vector<uint8_t>(p, p + t.nbytes());
}

const DType kReducible[] = {DType::f32,  DType::f64, DType::f16,
                            DType::bf16, DType::i32, DType::i64};

TEST(MpiComm, IdentityAndVersion) {
  auto c = make_comm();
  EXPECT_EQ(c->backend(), "mpi");
  EXPECT_TRUE(c->device().is_cpu());
  EXPECT_EQ(c->rank(), env().rank);
  EXPECT_EQ(c->size(), env().world_size);
  EXPECT_NE(mpi_version().find("MPI"), std::string::npos) << mpi_version();
  // A world MPI does not see is an error naming both.
  LaunchEnv other = env();
  other.world_size = env().world_size + 1;
  const std::string e = error_of([&] { make_mpi_communicator({}, &other); });
  EXPECT_NE(e.find("MPI sees rank " + std::to_string(env().rank) + " of " +
                   std::to_string(env().world_size)),
            std::string::npos)
      << e;
}

TEST(MpiComm, AllReduceEveryDtypeSumAndAvg) {
  auto c = make_comm();
  const int n = c->size(), r = c->rank();
  for (const DType t : kReducible)
    for (const int64_t len : {int64_t(1), int64_t(7), int64_t(4099)})
      for (const ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg}) {
        const bool integer = t == DType::i32 || t == DType::i64;
        if (integer && op == ReduceOp::Avg) continue;
        SCOPED_TRACE(std::string(dtype_name(t)) + " x " + std::to_string(len) + " " +
                     reduce_op_name(op));
        Tensor x = integer ? int_tensor(r, len, t) : rank_tensor(r, len, t);
        std::vector<double> want(size_t(len), 0.0);
        for (int q = 0; q < n; ++q) {
          const std::vector<double> v = (integer ? int_tensor(q, len, t) : rank_tensor(q, len, t))
                                            .to(DType::f64)
                                            .to_vector<double>();
          for (int64_t i = 0; i < len; ++i) want[size_t(i)] += v[size_t(i)];
        }
        if (op == ReduceOp::Avg)
          for (double& w : want) w /= n;
        c->all_reduce(x, op);
        EXPECT_EQ(bytes_of(x), bytes_of(Tensor::from_vector<double>(want, {len}).to(t)));
      }
  // Integer averages and boolean sums are refused before any MPI call.
  Tensor i = int_tensor(r, 3, DType::i32);
  EXPECT_NE(error_of([&] { c->all_reduce(i, ReduceOp::Avg); }).find("cannot reduce (avg)"),
            std::string::npos);
  Tensor b = int_tensor(r, 3, DType::boolean);
  EXPECT_NE(error_of([&] { c->all_reduce(b); }).find("cannot reduce (sum) a bool tensor"),
            std::string::npos);
  c->barrier();  // and the communicator still works
}

TEST(MpiComm, BroadcastAllGatherAllToAllEveryDtype) {
  auto c = make_comm();
  const int n = c->size(), r = c->rank();
  for (const DType t : kAllDTypes) {
    SCOPED_TRACE(dtype_name(t));
    for (const int root : {0, n - 1}) {
      Tensor x = int_tensor(r, 37, t, root);
      c->broadcast(x, root);
      EXPECT_EQ(bytes_of(x), bytes_of(int_tensor(root, 37, t, root))) << "root " << root;
    }
    const int64_t k = 5;
    Tensor out = Tensor::empty({n * k}, t);
    c->all_gather(int_tensor(r, k, t), out);
    for (int q = 0; q < n; ++q) {
      const std::vector<uint8_t> got = bytes_of(out.slice(0, q * k, (q + 1) * k).contiguous());
      EXPECT_EQ(got, bytes_of(int_tensor(q, k, t))) << "chunk " << q;
    }
    // all_to_all: chunk j of rank q's input goes to chunk q of rank j's output.
    auto a2a_in = [&](int q) { return int_tensor(q, n * k, t, 31); };
    Tensor got = Tensor::empty({n * k}, t);
    c->all_to_all(a2a_in(r), got);
    for (int q = 0; q < n; ++q)
      EXPECT_EQ(bytes_of(got.slice(0, q * k, (q + 1) * k).contiguous()),
                bytes_of(a2a_in(q).slice(0, r * k, (r + 1) * k).contiguous()))
          << "from rank " << q;
  }
  c->barrier();
}

TEST(MpiComm, ReduceScatterEveryReducibleDtype) {
  auto c = make_comm();
  const int n = c->size(), r = c->rank();
  const int64_t k = 9;
  for (const DType t : kReducible)
    for (const ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg}) {
      const bool integer = t == DType::i32 || t == DType::i64;
      if (integer && op == ReduceOp::Avg) continue;
      SCOPED_TRACE(std::string(dtype_name(t)) + " " + reduce_op_name(op));
      auto input = [&](int q) {
        return integer ? int_tensor(q, n * k, t) : rank_tensor(q, n * k, t);
      };
      std::vector<double> want(size_t(k), 0.0);
      for (int q = 0; q < n; ++q) {
        const std::vector<double> v = input(q).to(DType::f64).to_vector<double>();
        for (int64_t i = 0; i < k; ++i) want[size_t(i)] += v[size_t(r * k + i)];
      }
      if (op == ReduceOp::Avg)
        for (double& w : want) w /= n;
      Tensor out = Tensor::empty({k}, t);
      c->reduce_scatter(input(r), out, op);
      EXPECT_EQ(bytes_of(out), bytes_of(Tensor::from_vector<double>(want, {k}).to(t)));
    }
}

TEST(MpiComm, AsyncCallsRunInIssueOrder) {
  auto c = make_comm();
  const int n = c->size(), r = c->rank();
  // Issued back to back, waited for in reverse: each ran after the one issued before it.
  std::vector<Tensor> ts;
  std::vector<WorkPtr> ws;
  for (int k = 0; k < 8; ++k) {
    ts.push_back(Tensor::full({1000 + k}, float(r + k)));
    ws.push_back(k % 3 == 2 ? c->broadcast_async(ts.back(), k % n, "bcast " + std::to_string(k))
                            : c->all_reduce_async(ts.back(), ReduceOp::Sum));
  }
  for (int k = 7; k >= 0; --k) ws[size_t(k)]->wait();
  for (int k = 0; k < 8; ++k) {
    const float want = k % 3 == 2 ? float(k % n + k) : float(n * k + n * (n - 1) / 2);
    const std::vector<float> v = ts[size_t(k)].to_vector<float>();
    EXPECT_EQ(v.front(), want) << k;
    EXPECT_EQ(v.back(), want) << k;
    if (k > 0) {
      EXPECT_LE(ws[size_t(k - 1)]->ended(), ws[size_t(k)]->started()) << k;
    }
    EXPECT_LE(ws[size_t(k)]->started(), ws[size_t(k)]->ended());
  }
  // The caller goes on while the collective waits for a late peer: rank 0 issues at once, the
  // others 300 ms later; rank 0's issue returns long before its wait does.
  Tensor t = Tensor::full({16}, 1.0f);
  if (r != 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto t0 = Clock::now();
  WorkPtr w = c->all_reduce_async(t, ReduceOp::Sum);
  const double issue_s = std::chrono::duration<double>(Clock::now() - t0).count();
  w->wait();
  const double wait_s = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_EQ(t.to_vector<float>()[0], float(n));
  if (r == 0) {
    EXPECT_LT(issue_s, 0.05);
    EXPECT_GT(wait_s, 0.2);
  }
}

TEST(MpiComm, MismatchedCollectivesAreAnErrorOnEveryRank) {
  auto c = make_comm();
  const int r = c->rank();
  Tensor x = Tensor::full({r == 0 ? 4 : 5}, 1.0f);
  const std::string e = error_of([&] { c->all_reduce(x); });
  EXPECT_NE(e.find("dist: collective mismatch (mpi): rank 0 all_reduce #1 (f32 x 4, sum), rank 1 "
                   "all_reduce #1 (f32 x 5, sum)"),
            std::string::npos)
      << e;
  EXPECT_EQ(x.to_vector<float>()[0], 1.0f) << "no data moved";
  // The communicator has failed: later calls throw the same at once.
  EXPECT_EQ(error_of([&] { c->barrier(); }), e);
  // A new one works.
  auto d = make_comm();
  d->barrier();
}

// ---- data-parallel training on MPI ranks -------------------------------------------------------

const models::ModelEntry& din() { return models::find_model("din"); }
const models::ModelEntry& resnet() { return models::find_model("resnet50"); }

train::TrainOptions on_mpi(train::TrainOptions o) {
  o.dist.backend = "mpi";
  o.dist.ranks = env().world_size;
  o.dist.timeout_s = 120;
  o.dist.bucket_mb = 0.005;  // several buckets even for the tiny models
  return o;
}

// A directory every rank names the same (rank 0 creates it, the others only pass the name on).
std::string shared_dir(Communicator& c, const std::string& prefix) {
  std::string d = c.rank() == 0 ? aim::testing::make_temp_dir(prefix) : std::string();
  Tensor buf = Tensor::zeros({256}, DType::u8);
  if (c.rank() == 0) std::copy(d.begin(), d.end(), buf.data<uint8_t>());
  c.broadcast(buf, 0);
  return std::string(reinterpret_cast<const char*>(buf.data<uint8_t>()));
}

// Trains one process at N * batch and the MPI ranks at batch; rank 0 compares the weights.
double max_diff_one_vs_ranks(const models::ModelEntry& e, const models::ModelConfig& cfg,
                             train::TrainOptions o, int64_t batch, const std::string& tag,
                             std::string* where, bool sync_bn = false,
                             bool parameters_only = false) {
  auto c = make_comm();
  const std::string dir = shared_dir(*c, "aim_mpi_" + tag);
  const int n = c->size();
  o.batch_size = n * batch;
  if (c->rank() == 0) aim::testing::train_to_file(e, cfg, o, dir, "one");
  o.batch_size = batch;
  o.sync_batchnorm = sync_bn;
  train::TrainResult r;
  const std::string many = aim::testing::train_to_file(e, cfg, on_mpi(o), dir, "many", &r);
  EXPECT_EQ(r.dist.backend, "mpi");
  EXPECT_EQ(r.dist.ranks, n);
  EXPECT_EQ(r.losses.size(), size_t(o.steps));
  if (c->rank() != 0) return 0;
  EXPECT_EQ(r.dist.rank_samples_per_s.size(), size_t(n));
  EXPECT_GT(r.dist.bucket_bytes.size(), 1u);
  std::map<std::string, Tensor> a = aim::testing::load_weights(dir + "/one.safetensors");
  std::map<std::string, Tensor> b = aim::testing::load_weights(many);
  if (parameters_only)
    for (auto* m : {&a, &b})
      for (auto it = m->begin(); it != m->end();)
        it = it->first.find("running_") != std::string::npos ? m->erase(it) : std::next(it);
  return aim::testing::max_abs_diff(a, b, where);
}

TEST(MpiTrain, DinRanksEqualOneProcessAtTheWholeBatch) {
  const models::ModelConfig cfg = din().parse_config({"size=tiny"});
  for (const char* optim : {"sgd", "adam"}) {
    SCOPED_TRACE(optim);
    train::TrainOptions o = aim::testing::dp_options(5, 16);
    o.optim.name = optim;
    if (std::string(optim) == "adam") {
      o.optim.momentum = 0;
      // Adam divides each gradient by its own scale, so the f32 rounding of sums split
      // differently (B vs N B rows, the OpenMP thread count) shows in near-zero gradients'
      // updates: at lr 1e-2 up to 1.9e-5 after 5 steps (OMP_NUM_THREADS=1, 3, 4); 1e-3 keeps
      // the rounding under the 1e-5 bar on any thread count.
      o.optim.lr = 1e-3;
    }
    std::string where;
    EXPECT_LT(max_diff_one_vs_ranks(din(), cfg, o, 16, "din", &where), 1e-5)
        << "worst at " << where;
  }
}

TEST(MpiTrain, TinyResnetWithFrozenBnEqualsOneProcess) {
  const models::ModelConfig cfg = resnet().parse_config({"size=tiny"});
  train::TrainOptions o = aim::testing::dp_options(5, 4);
  o.optim.lr = 0.002;  // frozen BN does not normalise: keep the steps small
  o.eval_samples = 16;
  o.freeze_batchnorm = true;
  std::string where;
  EXPECT_LT(max_diff_one_vs_ranks(resnet(), cfg, o, 4, "resnet", &where), 1e-5)
      << "worst at " << where;
}

TEST(MpiTrain, SyncBatchNormDinWithBatchStatisticsEqualsOneProcess) {
  // DIN bn=train: BatchNorm1d with batch statistics, synchronised over the MPI ranks (--sync-bn).
  const models::ModelConfig cfg = din().parse_config({"size=tiny", "bn=train"});
  std::string where;
  EXPECT_LT(max_diff_one_vs_ranks(din(), cfg, aim::testing::dp_options(5, 16), 16, "din_sync",
                                  &where, /*sync_bn=*/true),
            1e-5)
      << "worst at " << where;
}

TEST(MpiTrain, SyncBatchNormTinyResnetEqualsOneProcess) {
  // As DataParallel.SyncBatchNormTinyResnetEqualsOneProcess (tests/train/test_data_parallel.cpp,
  // which says why the bar is 1e-3 for this badly conditioned model): the parameters.
  const models::ModelConfig cfg = resnet().parse_config({"size=tiny"});
  train::TrainOptions o = aim::testing::dp_options(5, 8);
  o.optim.lr = 1e-5;
  o.eval_samples = 16;
  std::string where;
  EXPECT_LT(max_diff_one_vs_ranks(resnet(), cfg, o, 8, "resnet_sync", &where, /*sync_bn=*/true,
                                  /*parameters_only=*/true),
            1e-3)
      << "worst at " << where;
}

// ---- failures end the job (own ctest entries: see the top of the file) --------------------------

bool job_end_test_enabled() {
  const char* v = std::getenv("AIM_MPI_JOB_END_TEST");
  return v && std::string(v) == "1";
}

TEST(MpiJobEnd, RankThatDoesNotJoinTimesOut) {
  if (!job_end_test_enabled()) GTEST_SKIP() << "ends the MPI job: ctest aim_mpi_timeout runs it";
  auto c = make_comm(std::chrono::milliseconds(1000));
  if (c->rank() != 0) {
    std::this_thread::sleep_for(std::chrono::seconds(300));  // never joins; mpirun kills it
    return;
  }
  Tensor x = Tensor::full({4}, 1.0f);
  c->all_reduce(x);  // prints "dist: rank 0 timed out after 1000 ms in all_reduce #1 ..." and
                     // ends the job
  ADD_FAILURE() << "the all_reduce returned without its peer";
}

TEST(MpiJobEnd, FailingRankEndsTheJob) {
  if (!job_end_test_enabled()) GTEST_SKIP() << "ends the MPI job: ctest aim_mpi_failure runs it";
  train::TrainOptions o = on_mpi(aim::testing::dp_options(10, 16));
  o.testing.fail_rank = env().world_size - 1;
  o.testing.fail_step = 3;
  std::ostringstream log;
  // The failing rank prints "dist: rank 1 failed: injected failure at step 3 ..." and calls
  // MPI_Abort; mpirun kills the others (waiting in their step-3 collectives).
  train::train_model(din(), din().parse_config({"size=tiny"}), o, log);
  ADD_FAILURE() << "train_model returned although rank " << o.testing.fail_rank << " failed";
}

}  // namespace
}  // namespace aim::dist
