// Communicator: the collectives of data-parallel training (DESIGN §6), one object per rank.
//
//   all_reduce(t, op)            t [n] on every rank -> sum (or mean) over ranks, in place
//   broadcast(t, root)           t on every rank <- root's t
//   all_gather(in, out)          in [c] -> out [size * c]: out[j*c .. (j+1)*c) = rank j's in
//   reduce_scatter(in, out, op)  in [size * c] -> out [c] = sum over ranks of in[rank*c ..)
//   all_to_all(in, out)          in, out [size * c]: out[j*c ..) on rank r = in[r*c ..) on rank j
//   barrier()
//
// Tensors are contiguous, on the communicator's device; only numel matters (shapes are free).
// all_reduce and reduce_scatter take f32, f64, f16, bf16 (and i32/i64 for Sum); the others move
// bytes and take every dtype. Inputs and outputs of a call must not overlap.
//
// Ordering: the collectives of a communicator run one after another, in the order they were
// issued; every rank must issue the same sequence (same op, dtype, element count, root). A
// mismatch is reported (local backend) instead of corrupting memory. A communicator may be
// called from several threads, but the order of issue is then theirs to keep identical on every
// rank: the reducer issues everything from the training thread.
//
// Asynchronous calls (*_async) return a Work: the collective runs on the communicator's own
// thread (local backend) or stream (NCCL) while the caller goes on; Work::wait() completes it.
// The blocking calls are *_async(...)->wait().
//
// Errors: every collective has a deadline (Options::timeout from the moment it starts to run).
// When a rank fails (an exception in its training thread, a timeout, a lost peer, an NCCL
// error), the group is marked failed and every pending and future call of every rank throws
// aim::Error naming the failing rank and the reason, within the timeout, never a hang:
//   "dist: rank 2 failed: loss is nan at step 7"
//   "dist: rank 0 timed out after 2000 ms in all_reduce #5 (f32 x 1024) waiting for rank(s) 2"
#pragma once
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "tensor/tensor.h"

namespace aim::dist {

using Clock = std::chrono::steady_clock;

enum class ReduceOp { Sum, Avg };
const char* reduce_op_name(ReduceOp op);

struct Options {
  std::chrono::milliseconds timeout{300000};  // per collective (aim-train --dist-timeout)
};

// One issued collective.
class Work {
 public:
  virtual ~Work() = default;
  // Local: blocks until the collective is done. NCCL: polls until it is done on the device
  // (checking the communicator's asynchronous errors, aborting it at the deadline), then orders
  // the caller's current stream after it. Throws aim::Error when the collective failed; calling
  // it again rethrows. Results are valid after wait() returns.
  virtual void wait() = 0;
  // When the collective started and finished running, on the host's steady clock (the device's
  // times mapped onto it for NCCL). Valid after wait().
  virtual Clock::time_point started() const = 0;
  virtual Clock::time_point ended() const = 0;
  double seconds() const { return std::chrono::duration<double>(ended() - started()).count(); }
};
using WorkPtr = std::shared_ptr<Work>;

// A collective run by a host thread of its backend (the local backend's worker, the mpi
// backend's MPI thread): that thread calls run(fn) once; fn's exception becomes wait()'s error,
// and the run is a span named `label` on that thread's track in traces.
class HostWork : public Work {
 public:
  explicit HostWork(std::string label) : label_(std::move(label)) {}
  void run(const std::function<void()>& fn);
  void wait() override;
  Clock::time_point started() const override { return t0_; }
  Clock::time_point ended() const override { return t1_; }

 private:
  std::string label_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::string error_;
  Clock::time_point t0_, t1_;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "local", "nccl"
  virtual Device device() const = 0;        // where its tensors live
  std::chrono::milliseconds timeout() const { return options_.timeout; }

  // `label` names the collective in traces ("allreduce bucket 3"); empty: the op's name.
  virtual WorkPtr all_reduce_async(const Tensor& t, ReduceOp op, const std::string& label = "") = 0;
  virtual WorkPtr broadcast_async(const Tensor& t, int root, const std::string& label = "") = 0;
  virtual WorkPtr all_gather_async(const Tensor& in, const Tensor& out,
                                   const std::string& label = "") = 0;
  virtual WorkPtr reduce_scatter_async(const Tensor& in, const Tensor& out, ReduceOp op,
                                       const std::string& label = "") = 0;
  virtual WorkPtr all_to_all_async(const Tensor& in, const Tensor& out,
                                   const std::string& label = "") = 0;
  virtual WorkPtr barrier_async() = 0;

  void all_reduce(const Tensor& t, ReduceOp op = ReduceOp::Sum) { all_reduce_async(t, op)->wait(); }
  void broadcast(const Tensor& t, int root) { broadcast_async(t, root)->wait(); }
  void all_gather(const Tensor& in, const Tensor& out) { all_gather_async(in, out)->wait(); }
  void reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op = ReduceOp::Sum) {
    reduce_scatter_async(in, out, op)->wait();
  }
  void all_to_all(const Tensor& in, const Tensor& out) { all_to_all_async(in, out)->wait(); }
  void barrier() { barrier_async()->wait(); }

  // Marks the whole group failed because of this rank ("rank <rank> failed: <reason>"): pending
  // and future calls of every rank throw. Safe from any thread; the first reason wins.
  virtual void abort(const std::string& reason) = 0;

 protected:
  explicit Communicator(Options o) : options_(o) {}
  Options options_;
};

// ---- argument checks shared by the backends (errors name the op, the rank and the tensor) ----
enum class CollectiveKind { AllReduce, Broadcast, AllGather, ReduceScatter, AllToAll, Barrier };
const char* collective_name(CollectiveKind k);
// Validates the arguments of one call on `c` and returns the element count per rank-chunk
// (all_reduce, broadcast: numel; all_gather: in.numel; reduce_scatter: out.numel; all_to_all:
// in.numel / size).
int64_t check_collective(const Communicator& c, CollectiveKind k, const Tensor& in,
                         const Tensor& out, ReduceOp op, int root);

// A backend whose collectives all go through one issue(kind, in, out, op, root, label) path (local,
// mpi): the public calls forward to it (in == out for all_reduce and broadcast, both undefined for
// barrier; op Sum and root 0 where the call has none).
class IssuingCommunicator : public Communicator {
 public:
  WorkPtr all_reduce_async(const Tensor& t, ReduceOp op, const std::string& label) override {
    return issue(CollectiveKind::AllReduce, t, t, op, 0, label);
  }
  WorkPtr broadcast_async(const Tensor& t, int root, const std::string& label) override {
    return issue(CollectiveKind::Broadcast, t, t, ReduceOp::Sum, root, label);
  }
  WorkPtr all_gather_async(const Tensor& in, const Tensor& out, const std::string& label) override {
    return issue(CollectiveKind::AllGather, in, out, ReduceOp::Sum, 0, label);
  }
  WorkPtr reduce_scatter_async(const Tensor& in, const Tensor& out, ReduceOp op,
                               const std::string& label) override {
    return issue(CollectiveKind::ReduceScatter, in, out, op, 0, label);
  }
  WorkPtr all_to_all_async(const Tensor& in, const Tensor& out, const std::string& label) override {
    return issue(CollectiveKind::AllToAll, in, out, ReduceOp::Sum, 0, label);
  }
  WorkPtr barrier_async() override {
    return issue(CollectiveKind::Barrier, Tensor(), Tensor(), ReduceOp::Sum, 0, "");
  }

 protected:
  using Communicator::Communicator;
  virtual WorkPtr issue(CollectiveKind k, const Tensor& in, const Tensor& out, ReduceOp op,
                        int root, const std::string& label) = 0;
};

// ---- running ranks -----------------------------------------------------------------------
// Runs fn(rank, comm) on one thread per communicator (comms[r] must have rank r). The first
// failure (an exception in fn) aborts every communicator with "rank k failed: <what>", so the
// other ranks' collectives throw instead of waiting; all threads are joined and the first
// failure is rethrown as aim::Error("dist: rank k failed: <what>"). A rank that hangs outside
// any collective cannot be interrupted: its peers time out in their next collective, and
// run_ranks then waits for it, unless abandon_after > 0: a thread still running that long after
// the first failure is detached and left behind ("...; rank(s) 1 still running 2000 ms later
// (stuck outside any collective) were abandoned"; *abandoned = true), so the caller never hangs.
// An abandoned thread keeps running fn if it ever wakes: only callers that end the process right
// after (aim-train) may ask for it, and they must keep the communicators alive (run_local_ranks
// then leaks its own).
// The error run_ranks throws when it abandoned rank threads: the caller must end the process
// without running destructors under them (aim-train: std::_Exit after printing it).
class AbandonedRanksError : public Error {
 public:
  using Error::Error;
};
void run_ranks(const std::vector<Communicator*>& comms,
               const std::function<void(int rank, Communicator& comm)>& fn,
               std::chrono::milliseconds abandon_after = std::chrono::milliseconds(0),
               bool* abandoned = nullptr);

// N ranks as threads of this process on the `local` backend (below): creates the group, runs
// fn on every rank through run_ranks, destroys the group.
void run_local_ranks(int n, const std::function<void(int rank, Communicator& comm)>& fn,
                     Options o = {},
                     std::chrono::milliseconds abandon_after = std::chrono::milliseconds(0));

// ---- the local backend: ranks as threads in one process ---------------------------------------
// A shared-memory group: the ranks meet at each collective (two barriers with deadlines: all
// arrived, all done), each rank then computes its share of the result directly from the other
// ranks' buffers. Reductions add the ranks' values in rank order 0, 1, ..., n-1 in double (f32,
// f64, f16, bf16; int64 for integers) and round once, so results are bitwise identical on all
// ranks and reproducible run to run. Each communicator has one worker thread running its
// collectives in issue order (that is what makes *_async overlap the caller's work).
class LocalGroup {
 public:
  LocalGroup(int size, Options o = {});
  ~LocalGroup();
  LocalGroup(const LocalGroup&) = delete;
  LocalGroup& operator=(const LocalGroup&) = delete;
  int size() const;
  // The communicator of `rank`; each rank's once. It must not outlive the group. Destroying a
  // communicator with collectives still queued aborts the group (its peers would wait forever).
  std::unique_ptr<Communicator> communicator(int rank);

  struct State;  // shared with the communicators (communicator_local.cpp)

 private:
  std::shared_ptr<State> state_;
};

}  // namespace aim::dist
