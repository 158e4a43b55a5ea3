// Shared parts of the communicators: argument checks, rank runners.
#include "train/dist/communicator.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include "profiler/profiler.h"

namespace aim::dist {

void HostWork::run(const std::function<void()>& fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    t0_ = Clock::now();
  }
  std::string error;
  try {
    profiler::Scope scope(label_, profiler::ScopeKind::Phase);  // the running thread's track
    fn();
  } catch (const std::exception& e) {
    error = e.what();
  }
  std::lock_guard<std::mutex> lock(mu_);
  t1_ = Clock::now();
  error_ = std::move(error);
  done_ = true;
  cv_.notify_all();
}

void HostWork::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_; });
  if (!error_.empty()) throw Error(error_);
}

const char* reduce_op_name(ReduceOp op) { return op == ReduceOp::Sum ? "sum" : "avg"; }

const char* collective_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::AllReduce:
      return "all_reduce";
    case CollectiveKind::Broadcast:
      return "broadcast";
    case CollectiveKind::AllGather:
      return "all_gather";
    case CollectiveKind::ReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::AllToAll:
      return "all_to_all";
    case CollectiveKind::Barrier:
      return "barrier";
  }
  return "?";
}

namespace {

bool overlap(const Tensor& a, const Tensor& b) {
  if (a.storage() != b.storage()) return false;
  const int64_t a0 = a.offset() * dtype_size(a.dtype()), a1 = a0 + a.nbytes();
  const int64_t b0 = b.offset() * dtype_size(b.dtype()), b1 = b0 + b.nbytes();
  return a0 < b1 && b0 < a1;
}

void check_tensor(const Communicator& c, const char* op, const char* name, const Tensor& t) {
  AIM_CHECK(t.defined(), "[dist ", op, "] rank ", c.rank(), ": ", name, " is undefined");
  AIM_CHECK(t.is_contiguous(), "[dist ", op, "] rank ", c.rank(), ": ", name,
            " must be contiguous, got sizes ", to_string(t.sizes()), " strides ",
            to_string(t.strides()));
  AIM_CHECK(t.device() == c.device(), "[dist ", op, "] rank ", c.rank(), ": ", name, " is on ",
            t.device().str(), ", the ", c.backend(), " communicator works on ", c.device().str());
}

void check_reducible(const Communicator& c, const char* op, const Tensor& t, ReduceOp rop) {
  const DType d = t.dtype();
  AIM_CHECK(is_floating(d) || (rop == ReduceOp::Sum && (d == DType::i32 || d == DType::i64)),
            "[dist ", op, "] rank ", c.rank(), ": cannot reduce (", reduce_op_name(rop), ") a ",
            dtype_name(d), " tensor (f32, f64, f16, bf16; i32/i64 for sum only)");
}

}  // namespace

int64_t check_collective(const Communicator& c, CollectiveKind k, const Tensor& in,
                         const Tensor& out, ReduceOp rop, int root) {
  const char* op = collective_name(k);
  const int n = c.size();
  switch (k) {
    case CollectiveKind::Barrier:
      return 0;
    case CollectiveKind::AllReduce:
      check_tensor(c, op, "tensor", in);
      check_reducible(c, op, in, rop);
      return in.numel();
    case CollectiveKind::Broadcast:
      check_tensor(c, op, "tensor", in);
      AIM_CHECK(root >= 0 && root < n, "[dist broadcast] rank ", c.rank(), ": root ", root,
                " is not a rank of a group of ", n);
      return in.numel();
    default:
      break;
  }
  check_tensor(c, op, "input", in);
  check_tensor(c, op, "output", out);
  AIM_CHECK(in.dtype() == out.dtype(), "[dist ", op, "] rank ", c.rank(), ": input is ",
            dtype_name(in.dtype()), ", output is ", dtype_name(out.dtype()));
  AIM_CHECK(!overlap(in, out), "[dist ", op, "] rank ", c.rank(),
            ": input and output overlap in memory");
  if (k == CollectiveKind::AllGather) {
    AIM_CHECK(out.numel() == in.numel() * n, "[dist all_gather] rank ", c.rank(), ": output has ",
              out.numel(), " elements, expected size * input = ", n, " * ", in.numel());
    return in.numel();
  }
  if (k == CollectiveKind::ReduceScatter) {
    check_reducible(c, op, in, rop);
    AIM_CHECK(in.numel() == out.numel() * n, "[dist reduce_scatter] rank ", c.rank(),
              ": input has ", in.numel(), " elements, expected size * output = ", n, " * ",
              out.numel());
    return out.numel();
  }
  AIM_CHECK(in.numel() == out.numel() && in.numel() % n == 0, "[dist all_to_all] rank ", c.rank(),
            ": input and output need the same number of elements, a multiple of the group size ", n,
            "; got ", in.numel(), " and ", out.numel());
  return in.numel() / n;
}

namespace {

// What the rank threads share with run_ranks; owned jointly, so a thread run_ranks abandons
// (below) never outlives it.
struct RunState {
  std::mutex mu;
  std::condition_variable cv;
  int running = 0;
  std::vector<bool> done;
  int first_rank = -1;
  std::string first_what;
  Clock::time_point failed_at;
  std::vector<Communicator*> comms;
  std::function<void(int, Communicator&)> fn;
};

}  // namespace

void run_ranks(const std::vector<Communicator*>& comms,
               const std::function<void(int rank, Communicator& comm)>& fn,
               std::chrono::milliseconds abandon_after, bool* abandoned) {
  const int n = int(comms.size());
  AIM_CHECK(n > 0, "run_ranks: no communicators");
  for (int r = 0; r < n; ++r)
    AIM_CHECK(comms[size_t(r)] && comms[size_t(r)]->rank() == r && comms[size_t(r)]->size() == n,
              "run_ranks: communicator ", r, " is not rank ", r, " of ", n);
  if (abandoned) *abandoned = false;
  auto st = std::make_shared<RunState>();
  st->running = n;
  st->done.assign(size_t(n), false);
  st->comms = comms;
  st->fn = fn;
  std::vector<std::thread> threads;
  threads.reserve(size_t(n));
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([st, r] {
      std::string what;
      bool failed = false;
      try {
        st->fn(r, *st->comms[size_t(r)]);
      } catch (const std::exception& e) {
        failed = true;
        what = e.what();
      } catch (...) {
        failed = true;
        what = "unknown exception";
      }
      bool first = false;
      {
        std::lock_guard<std::mutex> lock(st->mu);
        if (failed && st->first_rank < 0) {
          st->first_rank = r;
          st->first_what = what;
          st->failed_at = Clock::now();
          first = true;
        }
      }
      // The first failure aborts the group: the other ranks' collectives throw at once.
      if (first) st->comms[size_t(r)]->abort(what);
      std::lock_guard<std::mutex> lock(st->mu);
      st->done[size_t(r)] = true;
      --st->running;
      st->cv.notify_all();
    });
  }
  // Wait for every rank; after a failure, a rank still running one timeout later is stuck outside
  // any collective (nothing can interrupt it): it is left behind instead of hanging the caller.
  std::vector<int> stuck;
  {
    std::unique_lock<std::mutex> lock(st->mu);
    for (;;) {
      if (st->running == 0) break;
      if (st->first_rank < 0 || abandon_after.count() <= 0) {
        st->cv.wait(lock);
        continue;
      }
      const Clock::time_point give_up = st->failed_at + abandon_after;
      if (st->cv.wait_until(lock, give_up) == std::cv_status::timeout && st->running > 0) {
        for (int r = 0; r < n; ++r)
          if (!st->done[size_t(r)]) stuck.push_back(r);
        break;
      }
    }
  }
  for (int r = 0; r < n; ++r) {
    if (std::find(stuck.begin(), stuck.end(), r) != stuck.end())
      threads[size_t(r)].detach();
    else
      threads[size_t(r)].join();
  }
  if (!stuck.empty()) {
    if (abandoned) *abandoned = true;
    std::string ranks;
    for (int r : stuck) ranks += (ranks.empty() ? "" : ", ") + str(r);
    const std::string what = st->first_what.rfind("dist: ", 0) == 0
                                 ? st->first_what
                                 : str("dist: rank ", st->first_rank, " failed: ", st->first_what);
    throw AbandonedRanksError(str(what, "; rank(s) ", ranks, " still running ",
                                  abandon_after.count(),
                                  " ms later (stuck outside any collective) were abandoned"));
  }
  if (st->first_rank >= 0) {
    // A group error ("dist: ...") already names the rank and the reason.
    if (st->first_what.rfind("dist: ", 0) == 0) throw Error(st->first_what);
    throw Error(str("dist: rank ", st->first_rank, " failed: ", st->first_what));
  }
}

void run_local_ranks(int n, const std::function<void(int rank, Communicator& comm)>& fn, Options o,
                     std::chrono::milliseconds abandon_after) {
  LocalGroup group(n, o);
  std::vector<std::unique_ptr<Communicator>> owned;
  std::vector<Communicator*> comms;
  for (int r = 0; r < n; ++r) {
    owned.push_back(group.communicator(r));
    comms.push_back(owned.back().get());
  }
  bool abandoned = false;
  try {
    run_ranks(comms, fn, abandon_after, &abandoned);
  } catch (...) {
    // An abandoned rank thread may still hold its communicator: keep them all (the group has
    // failed, so any collective it issues throws at once).
    if (abandoned)
      for (auto& c : owned) c.release();
    throw;
  }
}

}  // namespace aim::dist
