// The NCCL backend (nccl_backend.h): one communicator per GPU, collectives on its own stream,
// completion and errors polled on the host with deadlines.
#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>

#include "tensor/allocator.h"
#include "tensor/cuda_check.h"
#include "train/dist/nccl_backend.h"

namespace aim::dist {

namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32:
      return ncclFloat32;
    case DType::f64:
      return ncclFloat64;
    case DType::f16:
      return ncclFloat16;
    case DType::bf16:
      return ncclBfloat16;
    case DType::i8:
      return ncclInt8;
    case DType::u8:
    case DType::boolean:
      return ncclUint8;
    case DType::i32:
      return ncclInt32;
    case DType::i64:
      return ncclInt64;
  }
  AIM_FAIL("dist nccl: no NCCL type for ", dtype_name(t));
}

std::string describe(CollectiveKind k, int64_t seq, const Tensor& t, int64_t count) {
  if (k == CollectiveKind::Barrier) return str("barrier #", seq);
  return str(collective_name(k), " #", seq, " (", dtype_name(t.dtype()), " x ", count, ")");
}

class NcclCommunicator;

class NcclWork final : public Work {
 public:
  NcclWork(NcclCommunicator* c, std::string what, cudaEvent_t start, cudaEvent_t end,
           std::vector<Tensor> keep)
      : c_(c),
        what_(std::move(what)),
        start_(start),
        end_(end),
        keep_(std::move(keep)),
        issued_(Clock::now()) {}
  ~NcclWork() override;
  void wait() override;
  Clock::time_point started() const override { return t0_; }
  Clock::time_point ended() const override { return t1_; }

 private:
  NcclCommunicator* c_;
  std::string what_;
  cudaEvent_t start_, end_;
  std::vector<Tensor> keep_;  // inputs/outputs stay alive until the collective is done
  Clock::time_point issued_, t0_, t1_;
  bool done_ = false;
  std::string error_;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int rank, int size, int device, Options o)
      : Communicator(o), comm_(comm), rank_(rank), size_(size), dev_(device) {
    DeviceGuard g(cuda_device(dev_));
    AIM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    AIM_CUDA_CHECK(cudaEventCreate(&epoch_));
    AIM_CUDA_CHECK(cudaEventRecord(epoch_, stream_));
    AIM_CUDA_CHECK(cudaEventSynchronize(epoch_));
    epoch_host_ = Clock::now();
    AIM_CUDA_CHECK(cudaMalloc(&scratch_, sizeof(float)));
  }
  ~NcclCommunicator() override {
    DeviceGuard g(cuda_device(dev_));
    if (failed_) {
      if (!aborted_) ncclCommAbort(comm_);
    } else {
      cudaStreamSynchronize(stream_);
      ncclCommDestroy(comm_);
    }
    cudaFree(scratch_);
    cudaEventDestroy(epoch_);
    cudaStreamDestroy(stream_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }
  Device device() const override { return cuda_device(dev_); }

  WorkPtr all_reduce_async(const Tensor& t, ReduceOp op, const std::string&) override {
    const int64_t n = check_collective(*this, CollectiveKind::AllReduce, t, t, op, 0);
    return issue(CollectiveKind::AllReduce, t, n, {t}, [&] {
      return ncclAllReduce(t.raw_data(), t.raw_data(), size_t(n), nccl_type(t.dtype()),
                           op == ReduceOp::Sum ? ncclSum : ncclAvg, comm_, stream_);
    });
  }
  WorkPtr broadcast_async(const Tensor& t, int root, const std::string&) override {
    const int64_t n = check_collective(*this, CollectiveKind::Broadcast, t, t, ReduceOp::Sum, root);
    return issue(CollectiveKind::Broadcast, t, n, {t}, [&] {
      return ncclBroadcast(t.raw_data(), t.raw_data(), size_t(n), nccl_type(t.dtype()), root, comm_,
                           stream_);
    });
  }
  WorkPtr all_gather_async(const Tensor& in, const Tensor& out, const std::string&) override {
    const int64_t n = check_collective(*this, CollectiveKind::AllGather, in, out, ReduceOp::Sum, 0);
    return issue(CollectiveKind::AllGather, in, n, {in, out}, [&] {
      return ncclAllGather(in.raw_data(), out.raw_data(), size_t(n), nccl_type(in.dtype()), comm_,
                           stream_);
    });
  }
  WorkPtr reduce_scatter_async(const Tensor& in, const Tensor& out, ReduceOp op,
                               const std::string&) override {
    const int64_t n = check_collective(*this, CollectiveKind::ReduceScatter, in, out, op, 0);
    return issue(CollectiveKind::ReduceScatter, in, n, {in, out}, [&] {
      return ncclReduceScatter(in.raw_data(), out.raw_data(), size_t(n), nccl_type(in.dtype()),
                               op == ReduceOp::Sum ? ncclSum : ncclAvg, comm_, stream_);
    });
  }
  WorkPtr all_to_all_async(const Tensor& in, const Tensor& out, const std::string&) override {
    const int64_t n = check_collective(*this, CollectiveKind::AllToAll, in, out, ReduceOp::Sum, 0);
    const int64_t bytes = n * dtype_size(in.dtype());
    return issue(CollectiveKind::AllToAll, in, n, {in, out}, [&] {
      ncclResult_t r = ncclGroupStart();
      if (r != ncclSuccess) return r;
      const char* src = static_cast<const char*>(in.raw_data());
      char* dst = static_cast<char*>(out.raw_data());
      for (int p = 0; p < size_; ++p) {
        r = ncclSend(src + p * bytes, size_t(n), nccl_type(in.dtype()), p, comm_, stream_);
        if (r != ncclSuccess) break;
        r = ncclRecv(dst + p * bytes, size_t(n), nccl_type(in.dtype()), p, comm_, stream_);
        if (r != ncclSuccess) break;
      }
      const ncclResult_t e = ncclGroupEnd();
      return r != ncclSuccess ? r : e;
    });
  }
  WorkPtr barrier_async() override {
    return issue(CollectiveKind::Barrier, Tensor(), 1, {}, [&] {
      return ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, stream_);
    });
  }
  void abort(const std::string& reason) override {
    std::lock_guard<std::mutex> lock(abort_mu_);
    if (abort_reason_.empty()) abort_reason_ = str("dist: rank ", rank_, " failed: ", reason);
    abort_requested_ = true;
  }

  // ---- for NcclWork (on the owning thread) ----
  // Polls until `done()` or an error/abort/deadline; on failure aborts the communicator and
  // throws. `what` names the collective.
  template <class Done>
  void poll(const std::string& what, Clock::time_point deadline, Done&& done,
            const std::function<Clock::time_point(Clock::time_point)>& extend = nullptr) {
    for (;;) {
      if (failed_) throw Error(failure_);
      if (abort_requested_) {
        std::lock_guard<std::mutex> lock(abort_mu_);
        fail(abort_reason_);
      }
      if (done()) return;
      ncclResult_t st = ncclSuccess;
      const ncclResult_t q = ncclCommGetAsyncError(comm_, &st);
      if (q != ncclSuccess || (st != ncclSuccess && st != ncclInProgress))
        fail(str("dist: rank ", rank_, " (nccl, cuda:", dev_, "): ", what, ": NCCL error ",
                 ncclGetErrorString(q != ncclSuccess ? q : st), " (", ncclGetLastError(comm_),
                 "); communicator aborted"));
      if (extend) deadline = extend(deadline);
      if (Clock::now() > deadline)
        fail(str("dist: rank ", rank_, " (nccl, cuda:", dev_, "): ", what,
                 " did not complete within ", timeout().count(),
                 " ms: a peer failed, hangs or is lost; communicator aborted"));
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  Clock::time_point host_time(cudaEvent_t e) const {
    float ms = 0;
    AIM_CUDA_CHECK(cudaEventElapsedTime(&ms, epoch_, e));
    return epoch_host_ + std::chrono::duration_cast<Clock::duration>(
                             std::chrono::duration<double, std::milli>(ms));
  }
  int device_index() const { return dev_; }

 private:
  [[noreturn]] void fail(const std::string& msg) {
    if (!failed_) {
      failed_ = true;
      failure_ = msg;
      DeviceGuard g(cuda_device(dev_));
      ncclCommAbort(comm_);
      aborted_ = true;
    }
    throw Error(failure_);
  }

  template <class Call>
  WorkPtr issue(CollectiveKind k, const Tensor& t, int64_t count, std::vector<Tensor> keep,
                Call&& call) {
    std::lock_guard<std::mutex> lock(issue_mu_);
    if (failed_) throw Error(failure_);
    if (abort_requested_) {
      std::lock_guard<std::mutex> alock(abort_mu_);
      fail(abort_reason_);
    }
    const std::string what = describe(k, ++seq_, t, count);
    DeviceGuard g(cuda_device(dev_));
    const auto caller = static_cast<cudaStream_t>(current_stream(dev_));
    cudaEvent_t ready, start, end;
    AIM_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    AIM_CUDA_CHECK(cudaEventCreate(&start));
    AIM_CUDA_CHECK(cudaEventCreate(&end));
    AIM_CUDA_CHECK(cudaEventRecord(ready, caller));
    AIM_CUDA_CHECK(cudaStreamWaitEvent(stream_, ready, 0));
    AIM_CUDA_CHECK(cudaEventDestroy(ready));  // destruction is deferred until it completes
    AIM_CUDA_CHECK(cudaEventRecord(start, stream_));
    const ncclResult_t r = call();
    if (r == ncclInProgress) {
      // Non-blocking communicator: the enqueue completes asynchronously.
      poll(what + " (enqueue)", Clock::now() + timeout(), [&] {
        ncclResult_t st = ncclSuccess;
        ncclCommGetAsyncError(comm_, &st);
        return st == ncclSuccess;
      });
    } else if (r != ncclSuccess) {
      fail(str("dist: rank ", rank_, " (nccl, cuda:", dev_, "): ", what, ": NCCL error ",
               ncclGetErrorString(r), " (", ncclGetLastError(comm_), ")"));
    }
    AIM_CUDA_CHECK(cudaEventRecord(end, stream_));
    return std::make_shared<NcclWork>(this, what, start, end, std::move(keep));
  }

  ncclComm_t comm_;
  int rank_, size_, dev_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t epoch_ = nullptr;
  Clock::time_point epoch_host_;
  void* scratch_ = nullptr;
  int64_t seq_ = 0;
  std::mutex issue_mu_, abort_mu_;
  std::atomic<bool> abort_requested_{false};
  std::string abort_reason_;
  bool failed_ = false, aborted_ = false;
  std::string failure_;
};

NcclWork::~NcclWork() {
  cudaEventDestroy(start_);
  cudaEventDestroy(end_);
}

void NcclWork::wait() {
  if (done_) {
    if (!error_.empty()) throw Error(error_);
    return;
  }
  try {
    bool started = false;
    // The deadline runs from the issue until the collective starts on the device (it may queue
    // behind compute and earlier collectives), then from its start.
    c_->poll(
        what_, issued_ + c_->timeout(), [&] { return cudaEventQuery(end_) == cudaSuccess; },
        [&](Clock::time_point d) {
          if (!started && cudaEventQuery(start_) == cudaSuccess) {
            started = true;
            return Clock::now() + c_->timeout();
          }
          return d;
        });
    t0_ = c_->host_time(start_);
    t1_ = c_->host_time(end_);
    DeviceGuard g(cuda_device(c_->device_index()));
    AIM_CUDA_CHECK(cudaStreamWaitEvent(
        static_cast<cudaStream_t>(current_stream(c_->device_index())), end_, 0));
  } catch (const std::exception& e) {
    done_ = true;
    error_ = e.what();
    keep_.clear();
    throw;
  }
  done_ = true;
  keep_.clear();
}

// Polls a non-blocking communicator's initialisation until it is done or the deadline passes.
void await_init(ncclComm_t comm, int rank, std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  for (;;) {
    ncclResult_t st = ncclSuccess;
    AIM_NCCL_CHECK(ncclCommGetAsyncError(comm, &st));
    if (st == ncclSuccess) return;
    if (st != ncclInProgress) {
      ncclCommAbort(comm);
      AIM_FAIL("dist: rank ", rank,
               " (nccl): communicator initialisation failed: ", ncclGetErrorString(st));
    }
    if (Clock::now() > deadline) {
      ncclCommAbort(comm);
      AIM_FAIL("dist: rank ", rank, " (nccl): communicator initialisation did not finish within ",
               timeout.count(), " ms: a rank is missing or cannot be reached; aborted");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace

bool nccl_built() { return true; }

std::string nccl_version() {
  int v = 0;
  AIM_NCCL_CHECK(ncclGetVersion(&v));
  return str(v / 10000, ".", (v / 100) % 100, ".", v % 100);
}

std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(const std::vector<int>& devices,
                                                                   Options o) {
  const int n = int(devices.size());
  AIM_CHECK(n >= 1, "dist nccl: --gpus needs at least one device");
  const int have = cuda_device_count();
  for (int d : devices)
    AIM_CHECK(d >= 0 && d < have, "dist nccl: device cuda:", d, " does not exist (", have,
              " visible CUDA device(s)", have == 0 ? ": " + cuda_unavailable_reason() : "", ")");
  std::vector<ncclComm_t> comms(static_cast<size_t>(n));
  AIM_NCCL_CHECK(ncclCommInitAll(comms.data(), n, devices.data()));
  std::vector<std::unique_ptr<Communicator>> r;
  for (int i = 0; i < n; ++i)
    r.push_back(std::make_unique<NcclCommunicator>(comms[size_t(i)], i, n, devices[size_t(i)], o));
  return r;
}

std::unique_ptr<Communicator> make_nccl_communicator(const LaunchEnv& env, Options o, int device) {
  require_rendezvous(env, "a NCCL communicator under a launcher");
  const int dev = device >= 0 ? device : env.local_rank;
  const int have = cuda_device_count();
  AIM_CHECK(dev < have, "dist nccl: rank ", env.rank, " wants cuda:", dev, " (LOCAL_RANK ",
            env.local_rank, ") but ", have, " CUDA device(s) are visible",
            have == 0 ? ": " + cuda_unavailable_reason() : "");
  DeviceGuard g(cuda_device(dev));
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (env.rank == 0) AIM_NCCL_CHECK(ncclGetUniqueId(&id));
  const std::string mine =
      env.rank == 0 ? std::string(reinterpret_cast<const char*>(&id), sizeof id) : std::string();
  const std::vector<std::string> all =
      tcp_all_gather(env.master_addr, env.master_port, env.rank, env.world_size, mine, o.timeout);
  AIM_CHECK(all[0].size() == sizeof id, "dist nccl: rank 0 sent a NCCL id of ", all[0].size(),
            " bytes, expected ", sizeof id);
  std::memcpy(&id, all[0].data(), sizeof id);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t r = ncclCommInitRankConfig(&comm, env.world_size, id, env.rank, &config);
  AIM_CHECK(r == ncclSuccess || r == ncclInProgress, "dist: rank ", env.rank,
            " (nccl): ncclCommInitRankConfig failed: ", ncclGetErrorString(r));
  await_init(comm, env.rank, o.timeout);
  return std::make_unique<NcclCommunicator>(comm, env.rank, env.world_size, dev, o);
}

}  // namespace aim::dist
