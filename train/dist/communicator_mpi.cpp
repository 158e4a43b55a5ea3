// The mpi backend (mpi_backend.h): one MPI thread per process makes every MPI call; collectives
// are non-blocking MPI calls polled against their deadline; failures end the job (MPI_Abort).
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "profiler/profiler.h"
#include "train/dist/mpi_backend.h"

namespace aim::dist {

namespace {

// ---- the MPI thread ---------------------------------------------------------------------------

// Owns MPI in this process: MPI_Init_thread on its thread when first used, MPI_Finalize there
// when the process exits (the function-local static's destructor). Tasks run in FIFO order.
class MpiRuntime {
 public:
  static MpiRuntime& get() {
    static MpiRuntime rt;
    return rt;
  }

  // Queues `task` for the MPI thread.
  void post(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(task));
    }
    cv_.notify_all();
  }
  // Runs `fn` on the MPI thread and waits for it; its exception is rethrown here.
  void call(const std::function<void()>& fn) {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    std::string error;
    post([&] {
      std::string e;
      try {
        fn();
      } catch (const std::exception& x) {
        e = x.what();
      }
      std::lock_guard<std::mutex> lock(m);
      error = std::move(e);
      done = true;
      cv.notify_all();
    });
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return done; });
    if (!error.empty()) throw Error(error);
  }

  // Ends the job with `message` (on the MPI thread, which may be polling a collective); never
  // returns.
  [[noreturn]] void abort_job(const std::string& message) {
    if (std::this_thread::get_id() == thread_.get_id()) die(message);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (abort_message_.empty()) abort_message_ = message;
      abort_requested_ = true;
    }
    cv_.notify_all();
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // mpirun ends the process
  }

  // ---- on the MPI thread ----
  // Waits for `req` (MPI_Test in a loop); a deadline passed or an abort request ends the job.
  // `what` names the collective in the timeout message.
  void wait(MPI_Request* req, Clock::time_point deadline, int rank,
            const std::function<std::string()>& what, std::chrono::milliseconds timeout) {
    for (int spins = 0;; ++spins) {
      int flag = 0;
      check(MPI_Test(req, &flag, MPI_STATUS_IGNORE), rank, what);
      if (flag) return;
      if (abort_requested_) die(locked_abort_message());
      if (Clock::now() > deadline)
        die(str("dist: rank ", rank, " timed out after ", timeout.count(), " ms in ", what(),
                " waiting for the other ranks (mpi: a peer failed, hangs or is lost)"));
      // MPI progresses non-blocking collectives inside MPI_Test: poll tightly at first, then
      // leave the cores to the training threads.
      if (spins < 200)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
  void check(int rc, int rank, const std::function<std::string()>& what) {
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    die(str("dist: rank ", rank, " (mpi): ", what(),
            ": MPI error: ", std::string(msg, size_t(len))));
  }
  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }

 private:
  MpiRuntime() {
    std::mutex m;
    std::condition_variable cv;
    bool ready = false;
    thread_ = std::thread([&] {
      int provided = 0;
      const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
      std::string error;
      if (rc != MPI_SUCCESS)
        error = "dist mpi: MPI_Init_thread failed";
      else if (provided < MPI_THREAD_FUNNELED)
        error = str("dist mpi: the MPI library gives thread level ", provided,
                    ", aim needs MPI_THREAD_FUNNELED (one thread makes every MPI call)");
      if (error.empty()) {
        MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
        MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
      }
      {
        std::lock_guard<std::mutex> lock(m);
        init_error_ = error;
        ready = true;
        cv.notify_all();
      }
      if (error.empty()) loop();
    });
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return ready; });
    if (!init_error_.empty()) {
      thread_.join();
      throw Error(init_error_);
    }
  }
  ~MpiRuntime() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  void loop() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || abort_requested_ || !queue_.empty(); });
        if (abort_requested_) {
          const std::string m = abort_message_;
          lock.unlock();
          die(m);
        }
        if (queue_.empty()) break;  // stop_ and drained
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
    MPI_Finalize();
  }

  std::string locked_abort_message() {
    std::lock_guard<std::mutex> lock(mu_);
    return abort_message_;
  }

  // Prints the reason and ends the job: MPI_Abort makes mpirun kill every rank.
  [[noreturn]] static void die(const std::string& message) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s\n(mpi: this rank calls MPI_Abort, so mpirun ends every rank)\n",
                 message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::_Exit(1);  // MPI_Abort does not return; should it, the process still ends
  }

  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::atomic<bool> abort_requested_{false};
  std::string abort_message_, init_error_;
  int world_rank_ = 0, world_size_ = 1;
};

// ---- collectives ------------------------------------------------------------------------------

// The MPI type that moves elements of `t` (bit patterns for f16/bf16/bool/i8/u8).
MPI_Datatype move_type(DType t) {
  switch (dtype_size(t)) {
    case 1:
      return MPI_UINT8_T;
    case 2:
      return MPI_UINT16_T;
    case 4:
      return t == DType::f32 ? MPI_FLOAT : MPI_UINT32_T;
    default:
      return t == DType::f64 ? MPI_DOUBLE : MPI_UINT64_T;
  }
}

// The MPI type a reduction of `t` runs in (f16/bf16: f32 after widening).
MPI_Datatype reduce_type(DType t) {
  switch (t) {
    case DType::f32:
    case DType::f16:
    case DType::bf16:
      return MPI_FLOAT;
    case DType::f64:
      return MPI_DOUBLE;
    case DType::i32:
      return MPI_INT32_T;
    case DType::i64:
      return MPI_INT64_T;
    default:
      AIM_FAIL("dist mpi: cannot reduce ", dtype_name(t));
  }
}

bool widened(DType t) { return t == DType::f16 || t == DType::bf16; }

// f16/bf16 -> f32 (n elements).
void widen(DType t, const void* src, float* dst, int64_t n) {
  if (t == DType::f16)
    convert_f16_to_f32(static_cast<const Half*>(src), dst, n);
  else
    convert_bf16_to_f32(static_cast<const BFloat16*>(src), dst, n);
}
void narrow(DType t, const float* src, void* dst, int64_t n) {
  if (t == DType::f16)
    convert_f32_to_f16(src, static_cast<Half*>(dst), n);
  else
    convert_f32_to_bf16(src, static_cast<BFloat16*>(dst), n);
}

// x[0, n) /= k in the reduction type.
void divide(DType t, void* x, int64_t n, int k) {
  if (t == DType::f64) {
    double* p = static_cast<double*>(x);
    for (int64_t i = 0; i < n; ++i) p[i] /= double(k);
  } else {
    float* p = static_cast<float*>(x);
    for (int64_t i = 0; i < n; ++i) p[i] /= float(k);
  }
}

struct Call {
  CollectiveKind kind = CollectiveKind::Barrier;
  DType dtype = DType::u8;
  int64_t count = 0;  // elements per chunk (check_collective)
  ReduceOp op = ReduceOp::Sum;
  int root = 0;
  int64_t seq = 0;
  Tensor in, out;  // kept alive until the collective is done
};

std::string describe(CollectiveKind kind, DType dtype, int64_t count, ReduceOp op, int root,
                     int64_t seq) {
  std::string d = str(collective_name(kind), " #", seq);
  if (kind == CollectiveKind::Barrier) return d;
  d += str(" (", dtype_name(dtype), " x ", count);
  if (kind == CollectiveKind::AllReduce || kind == CollectiveKind::ReduceScatter)
    d += str(", ", reduce_op_name(op));
  if (kind == CollectiveKind::Broadcast) d += str(", root ", root);
  return d + ")";
}
std::string describe(const Call& c) {
  return describe(c.kind, c.dtype, c.count, c.op, c.root, c.seq);
}

class MpiCommunicator final : public IssuingCommunicator {
 public:
  MpiCommunicator(MPI_Comm comm, int rank, int size, Options o)
      : IssuingCommunicator(o), rt_(MpiRuntime::get()), comm_(comm), rank_(rank), size_(size) {}
  ~MpiCommunicator() override {
    // After every queued collective (FIFO); a pending one completes or ends the job at its
    // deadline, so this returns.
    try {
      rt_.call([this] { MPI_Comm_free(&comm_); });
    } catch (const std::exception&) {
      // MPI_Comm_free reports nothing we could act on in a destructor
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }
  Device device() const override { return kCPU; }

  void abort(const std::string& reason) override {
    rt_.abort_job(reason.rfind("dist: ", 0) == 0 ? reason
                                                 : str("dist: rank ", rank_, " failed: ", reason));
  }

 private:
  WorkPtr issue(CollectiveKind k, const Tensor& in, const Tensor& out, ReduceOp op, int root,
                const std::string& label) override {
    Call c;
    c.kind = k;
    c.count = check_collective(*this, k, in, out, op, root);
    c.dtype = in.defined() ? in.dtype() : DType::u8;
    c.op = op;
    c.root = root;
    c.in = in;
    c.out = out;
    // MPI counts are ints: the largest message is a chunk times the group size (all_gather's
    // output, reduce_scatter's input) or one tensor.
    const int64_t biggest = k == CollectiveKind::AllGather || k == CollectiveKind::ReduceScatter ||
                                    k == CollectiveKind::AllToAll
                                ? c.count * size_
                                : c.count;
    AIM_CHECK(biggest <= INT_MAX, "[dist ", collective_name(k), "] rank ", rank_, ": ", biggest,
              " elements exceed MPI's int element count (", INT_MAX, "): split the tensor");
    auto w = std::make_shared<HostWork>(label.empty() ? std::string(collective_name(k)) : label);
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.empty()) throw Error(failure_);
    c.seq = ++seq_;
    rt_.post([this, w, c] { w->run([&] { execute(c); }); });
    return w;
  }

  // Fails this communicator (every later call throws) and throws.
  [[noreturn]] void fail(const std::string& msg) {
    std::lock_guard<std::mutex> lock(mu_);
    if (failure_.empty()) failure_ = msg;
    throw Error(failure_);
  }

  // ---- on the MPI thread ----
  void execute(const Call& c) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!failure_.empty()) throw Error(failure_);
    }
    const std::string where = describe(c);
    const auto what = [&where] { return where; };
    const Clock::time_point deadline = Clock::now() + options_.timeout;
    MPI_Request req = MPI_REQUEST_NULL;

    // 1. Every rank issued the same collective? (All ranks see the same signatures, so all
    //    detect a mismatch before any data moves.)
    int64_t sig[6] = {int64_t(c.kind), int64_t(c.dtype), c.count, int64_t(c.op), c.root, c.seq};
    std::vector<int64_t> sigs(size_t(6 * size_));
    rt_.check(MPI_Iallgather(sig, 6, MPI_INT64_T, sigs.data(), 6, MPI_INT64_T, comm_, &req), rank_,
              what);
    rt_.wait(&req, deadline, rank_, what, options_.timeout);
    for (int r = 0; r < size_; ++r) {
      const int64_t* s = sigs.data() + 6 * r;
      if (std::equal(s, s + 6, sig)) continue;
      std::string calls;
      for (int q = 0; q < size_; ++q) {
        const int64_t* t = sigs.data() + 6 * q;
        calls +=
            str(q ? ", " : "", "rank ", q, " ",
                describe(CollectiveKind(t[0]), DType(t[1]), t[2], ReduceOp(t[3]), int(t[4]), t[5]));
      }
      fail(str("dist: collective mismatch (mpi): ", calls,
               " (every rank must issue the same collectives in the same order)"));
    }

    // 2. The collective.
    const int n = int(c.count);
    const DType t = c.dtype;
    void* in = c.in.defined() ? c.in.raw_data() : nullptr;
    void* out = c.out.defined() ? c.out.raw_data() : nullptr;
    const int64_t widen_n = c.kind == CollectiveKind::ReduceScatter ? c.count * size_ : c.count;
    std::vector<float> wide_in, wide_out;  // f16/bf16 reductions run in f32
    int rc = MPI_SUCCESS;
    switch (c.kind) {
      case CollectiveKind::AllReduce: {
        void* buf = out;
        if (widened(t)) {
          wide_in.resize(size_t(widen_n));
          widen(t, in, wide_in.data(), widen_n);
          buf = wide_in.data();
        }
        rc = MPI_Iallreduce(MPI_IN_PLACE, buf, n, reduce_type(t), MPI_SUM, comm_, &req);
        break;
      }
      case CollectiveKind::ReduceScatter: {
        const void* src = in;
        void* dst = out;
        if (widened(t)) {
          wide_in.resize(size_t(widen_n));
          widen(t, in, wide_in.data(), widen_n);
          wide_out.resize(size_t(c.count));
          src = wide_in.data();
          dst = wide_out.data();
        }
        rc = MPI_Ireduce_scatter_block(src, dst, n, reduce_type(t), MPI_SUM, comm_, &req);
        break;
      }
      case CollectiveKind::Broadcast:
        rc = MPI_Ibcast(out, n, move_type(t), c.root, comm_, &req);
        break;
      case CollectiveKind::AllGather:
        rc = MPI_Iallgather(in, n, move_type(t), out, n, move_type(t), comm_, &req);
        break;
      case CollectiveKind::AllToAll:
        rc = MPI_Ialltoall(in, n, move_type(t), out, n, move_type(t), comm_, &req);
        break;
      case CollectiveKind::Barrier:
        rc = MPI_Ibarrier(comm_, &req);
        break;
    }
    rt_.check(rc, rank_, what);
    rt_.wait(&req, deadline, rank_, what, options_.timeout);

    // 3. Averages and narrowing.
    if (c.kind == CollectiveKind::AllReduce || c.kind == CollectiveKind::ReduceScatter) {
      const bool all = c.kind == CollectiveKind::AllReduce;
      void* result =
          widened(t) ? (all ? static_cast<void*>(wide_in.data()) : wide_out.data()) : out;
      if (c.op == ReduceOp::Avg) divide(t, result, c.count, size_);
      if (widened(t)) narrow(t, static_cast<const float*>(result), out, c.count);
    }
  }

  MpiRuntime& rt_;
  MPI_Comm comm_;
  int rank_, size_;
  std::mutex mu_;
  int64_t seq_ = 0;
  std::string failure_;
};

}  // namespace

bool mpi_built() { return true; }

std::string mpi_version() {
  char v[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(v, &len);  // allowed before MPI_Init, from any thread
  std::string s(v, size_t(len));
  const size_t eol = s.find_first_of("\r\n");
  if (eol != std::string::npos) s.resize(eol);
  while (!s.empty() && (s.back() == ' ' || s.back() == ',')) s.pop_back();
  return s;
}

std::unique_ptr<Communicator> make_mpi_communicator(Options o, const LaunchEnv* expect) {
  AIM_CHECK(o.timeout.count() > 0, "dist mpi: timeout must be positive, got ", o.timeout.count(),
            " ms");
  MpiRuntime& rt = MpiRuntime::get();
  const int rank = rt.world_rank(), size = rt.world_size();
  if (expect && expect->launched()) {
    AIM_CHECK(
        expect->world_size == size && expect->rank == rank, "dist mpi: the launcher (",
        expect->source, ") says rank ", expect->rank, " of ", expect->world_size,
        " but MPI sees rank ", rank, " of ", size,
        ": the mpi backend needs the processes started by mpirun (mpirun -np N aim-train ...)");
  }
  MPI_Comm comm = MPI_COMM_NULL;
  rt.call([&] {
    const auto what = [] { return std::string("creating the communicator (MPI_Comm_idup)"); };
    MPI_Request req = MPI_REQUEST_NULL;
    rt.check(MPI_Comm_idup(MPI_COMM_WORLD, &comm, &req), rank, what);
    rt.wait(&req, Clock::now() + o.timeout, rank, what, o.timeout);
    rt.check(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), rank, what);
  });
  return std::make_unique<MpiCommunicator>(comm, rank, size, o);
}

}  // namespace aim::dist
