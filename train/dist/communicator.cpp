// Shared parts of the communicators: argument checks, rank runners.
#include "train/dist/communicator.h"

#include <exception>
#include <mutex>
#include <thread>

namespace aim::dist {

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

void run_ranks(const std::vector<Communicator*>& comms,
               const std::function<void(int rank, Communicator& comm)>& fn) {
  const int n = int(comms.size());
  AIM_CHECK(n > 0, "run_ranks: no communicators");
  for (int r = 0; r < n; ++r)
    AIM_CHECK(comms[size_t(r)] && comms[size_t(r)]->rank() == r && comms[size_t(r)]->size() == n,
              "run_ranks: communicator ", r, " is not rank ", r, " of ", n);
  std::mutex mu;
  int first_rank = -1;
  std::string first_what;
  auto on_failure = [&](int r, const std::string& what) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (first_rank >= 0) return;
      first_rank = r;
      first_what = what;
    }
    comms[size_t(r)]->abort(what);
  };
  std::vector<std::thread> threads;
  threads.reserve(size_t(n));
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(r, *comms[size_t(r)]);
      } catch (const std::exception& e) {
        on_failure(r, e.what());
      } catch (...) {
        on_failure(r, "unknown exception");
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first_rank >= 0) {
    // A group error ("dist: ...") already names the rank and the reason.
    if (first_what.rfind("dist: ", 0) == 0) throw Error(first_what);
    throw Error(str("dist: rank ", first_rank, " failed: ", first_what));
  }
}

void run_local_ranks(int n, const std::function<void(int rank, Communicator& comm)>& fn,
                     Options o) {
  LocalGroup group(n, o);
  std::vector<std::unique_ptr<Communicator>> owned;
  std::vector<Communicator*> comms;
  for (int r = 0; r < n; ++r) {
    owned.push_back(group.communicator(r));
    comms.push_back(owned.back().get());
  }
  run_ranks(comms, fn);
}

}  // namespace aim::dist
