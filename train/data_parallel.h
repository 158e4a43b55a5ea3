// The data-parallel parts of a training rank (DESIGN.md §8): which samples a rank reads
// (RankShard), the gradient reducer and SyncBatchNorm's collectives set up for a model
// (setup_data_parallel), and the run's closing figures gathered over the ranks
// (summarise_data_parallel). train_rank (train/trainer.cpp) calls them; train_step uses the
// reducer they build.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <string>

#include "autograd/functions/sync_batch_norm.h"
#include "data/source.h"
#include "models/registry.h"
#include "train/dist/communicator.h"
#include "train/dist/reducer.h"
#include "train/optim.h"

namespace aim::train {

struct TrainOptions;
struct DistStats;

// Rank `rank` of `ranks` reading `source`'s training stream in interleaved blocks of `batch`
// (train/trainer.h's top comment). global_position is the position of the single-process stream
// (a multiple of ranks * batch at step boundaries).
class RankShard {
 public:
  RankShard(data::BatchSource& source, int rank, int ranks, int64_t batch, int64_t global_position);
  TensorMap next();                 // this rank's next B samples
  int64_t global_position() const;  // after the steps read so far

 private:
  data::BatchSource& src_;
  int rank_, ranks_;
  int64_t batch_;
};

// One rank of a data-parallel run (null: a single process).
struct RankCtx {
  dist::Communicator* comm = nullptr;
  int rank = 0, size = 1;
};

// The reducer's per-step figures summed over the steps after the first (it sets up).
struct DistTimes {
  double comm_s = 0, backward_s = 0, overlapped_s = 0, wait_s = 0, sparse_s = 0;
  int64_t steps = 0;
  void add(const dist::ReducerStats& rs) {
    comm_s += rs.comm_s;
    backward_s += rs.backward_s;
    overlapped_s += rs.overlapped_s;
    wait_s += rs.finish_wait_s;
    sparse_s += rs.sparse_s;
    ++steps;
  }
};

// The data-parallel parts of a rank: the gradient reducer over the parameters the optimizer
// reads (its buckets, the sparse embedding tables), and SyncBatchNorm's collectives; logs the plan.
struct DataParallel {
  std::unique_ptr<dist::Reducer> reducer;
  std::set<std::string> sparse_tables;
  std::optional<autograd::BatchStatsSync> bn_sync;  // --sync-bn
};

// Builds the reducer over the parameters `optim` reads (--bucket-mb, --embedding-comm sparse)
// and --sync-bn's collectives; logs the plan and the layers whose batch statistics are per rank.
DataParallel setup_data_parallel(dist::Communicator& c, const models::ModelEntry& entry,
                                 const models::ModelConfig& cfg, const TrainOptions& opt,
                                 layers::Module& model, Optimizer& optim, int64_t global_batch,
                                 std::ostream& log);

// The data-parallel figures of a run into `d` (every rank gets them through one all_gather);
// returns the lines rank 0 logs.
std::string summarise_data_parallel(dist::Communicator& comm, const dist::Reducer& reducer,
                                    const std::set<std::string>& sparse_tables, const DistTimes& t,
                                    double samples_per_s, DistStats& d);

// The data-parallel plan of a model (aim-train M --dist-plan; tools/scaling_table.py builds
// docs/scaling.md from it): one JSON object with the parameter count, the dense gradient bytes of
// a step, the Reducer's bucket plan at bucket_mb (the buckets' bytes, in launch order), the
// embedding tables with the rows one training step at `batch` touches (what --embedding-comm
// sparse would send), and the analytic training FLOPs of a step at `batch`. CPU, one process.
std::string data_parallel_plan(const models::ModelEntry& entry, const models::ModelConfig& cfg,
                               int64_t batch, double bucket_mb, uint64_t seed);

}  // namespace aim::train
