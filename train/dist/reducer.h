// Reducer: data-parallel gradient averaging, overlapped with backward (DESIGN §3, §6).
//
// Buckets. The dense parameters, in REVERSE registration order (backward produces the last
// layers' gradients first), are packed into flat buckets: a bucket closes once it holds at least
// its capacity (the first bucket first_bucket_mb, like PyTorch DDP's 1 MB, so communication
// starts early; the others bucket_mb), or when the dtype or device changes. A parameter larger
// than the capacity has a bucket of its own.
//
// Gradients are views into the buckets. The first time a parameter's gradient is final, its
// tensor is copied into the bucket and the parameter's .grad is re-pointed to its slice of the
// bucket (a contiguous view with the parameter's shape); from then on the engine and the kernels
// accumulate straight into the bucket, and the averaged result is read in place, with no copies.
// optim.zero_grad() zeroes the views (it keeps them allocated), which is what the next step
// needs. Anything that replaces a parameter's .grad tensor (Module::to, to(DType), a loader) is
// detected at the next ready hook or finish(), which copies it in and re-points it again.
//
// A step: begin() (optional: the first ready hook starts the step otherwise) -> backward ->
// finish(). The engine's grad-ready hooks (autograd/variable.h) mark each parameter; when every
// parameter of a bucket is marked, the bucket is ready. Buckets are launched strictly in bucket
// order on every rank (a bucket that is ready early waits for its predecessors), each as one
// asynchronous all_reduce(avg) on the communicator, so the averaging overlaps the rest of
// backward: on the local backend it runs on the communicator's worker thread, on NCCL on its
// stream. finish() marks the parameters that got no gradient this step (zero, or their current
// .grad if defined: the same on every rank's side of the sum), which launches the remaining
// buckets, runs the sparse embedding exchange, and waits for everything. Each hook may fire once
// per step: two backward passes without finish() in between are an error naming the parameter.
//
// Sparse embedding tables (--embedding-comm sparse; ReducerOptions::sparse): no dense bucket.
// In finish(), each rank all-gathers the rows of the table's gradient that it touched (non-zero
// rows: a zero row adds nothing to the sum) as (indices, rows), padded to the largest count, and
// every rank adds all ranks' rows in rank order and divides by the world size. CPU tensors only.
//
// Unused parameters: a parameter that gets no gradient on a rank adds zeros there; a parameter
// that no rank touched ends the step with a zero (defined) gradient, whereas a single process
// would leave an undefined gradient and its optimizer would skip it on that step.
#pragma once
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "train/dist/communicator.h"

namespace aim::layers {
class Module;
}

namespace aim::dist {

using NamedParameters = std::vector<std::pair<std::string, autograd::Variable>>;

struct ReducerOptions {
  double bucket_mb = 25;       // --bucket-mb
  double first_bucket_mb = 1;  // the first bucket (the last layers' gradients)
  // Parameters (by name) reduced by the sparse all-gather of touched rows instead of a dense
  // all-reduce: 2-D embedding tables [V, C].
  std::set<std::string> sparse;
};

// Per step, host clock. On NCCL the backward interval is the host's (kernels are queued
// asynchronously), the collectives' intervals the device's.
struct ReducerStats {
  int64_t step = 0;            // steps finished
  double backward_s = 0;       // begin() (or the first hook) -> finish() called
  double comm_s = 0;           // sum of the buckets' all-reduce times
  double overlapped_s = 0;     // part of comm_s inside the backward interval
  double hidden_fraction = 0;  // overlapped_s / comm_s (0 when comm_s == 0)
  double finish_wait_s = 0;    // time finish() waited for the communication (exposed)
  double sparse_s = 0;         // the sparse embedding exchanges, inside finish()
  int64_t dense_bytes = 0;     // bytes all-reduced
  int64_t sparse_rows = 0;     // rows this rank sent in the sparse exchanges
};

struct BucketInfo {
  std::vector<std::string> params;  // in bucket order (reverse registration order)
  DType dtype = DType::f32;
  Device device;
  int64_t numel = 0;
  int64_t bytes() const { return numel * dtype_size(dtype); }
};

class Reducer {
 public:
  // `params`: the model's (name, parameter) pairs in registration order (Module::
  // named_parameters()), the same on every rank. Parameters without requires_grad are skipped.
  Reducer(Communicator& comm, NamedParameters params, ReducerOptions o = {});
  ~Reducer();  // removes its hooks
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  void begin();   // before backward: starts the step's clock
  void finish();  // after backward: every gradient averaged over the ranks when it returns

  const std::vector<BucketInfo>& buckets() const { return bucket_info_; }
  const ReducerStats& last_stats() const { return stats_; }
  // The bucket indices in the order this rank launched them in the last finished step.
  const std::vector<int>& last_launch_order() const { return last_launch_order_; }
  // Bucket plan, one line per bucket: "bucket 0: f32 1.00 MB, 3 params (fc3.bias .. fc2.weight)".
  std::string plan() const;

  struct Impl;  // reducer.cpp

 private:
  std::unique_ptr<Impl> impl_;
  std::vector<BucketInfo> bucket_info_;
  ReducerStats stats_;
  std::vector<int> last_launch_order_;
};

// Copies root's parameters and buffers (state_dict order) to every rank: initial weights.
void broadcast_parameters(Communicator& comm, const layers::Module& model, int root = 0);
// The same for a list of tensors (each contiguous on the communicator's device, or copied).
void broadcast_tensors(Communicator& comm, const std::vector<Tensor>& tensors, int root = 0);

// The sparse exchange of one embedding gradient (what the reducer runs for ReducerOptions::
// sparse): grad [V, C] on every rank -> the mean over ranks, written back into grad. Rows that
// are zero on every rank stay zero. Returns the number of rows this rank sent.
int64_t sparse_average_rows(Communicator& comm, const Tensor& grad);

}  // namespace aim::dist
