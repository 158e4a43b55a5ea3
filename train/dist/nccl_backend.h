// The NCCL backend (train/dist/communicator_nccl.cpp, CUDA builds). This header has no CUDA or
// NCCL types, so CPU code can name the factories; in a build without CUDA they throw aim::Error
// saying so (nccl_unavailable.cpp).
//
// A NCCL communicator works on one GPU. Its collectives run on its own CUDA stream: a collective
// first waits (cudaStreamWaitEvent) for the work queued so far on the issuing thread's current
// stream of that GPU (tensor/allocator.h), which produced its inputs, then runs on the
// communicator's stream, so the issuing thread goes on queueing compute work that overlaps it.
// Work::wait() polls the collective's completion event on the host together with
// ncclCommGetAsyncError; an asynchronous NCCL error, the deadline (Options::timeout from the
// moment the collective started on the device, or from its issue while it has not started) or
// an abort() of the group makes it call ncclCommAbort and throw aim::Error naming the rank, the
// collective and the reason; every later call of that communicator throws the same. Then it
// makes the issuing thread's current stream wait for the collective.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "train/dist/communicator.h"
#include "train/dist/launch.h"

namespace aim::dist {

bool nccl_built();           // false in builds without CUDA
std::string nccl_version();  // "2.28.3"; throws without CUDA

// `aim-train --gpus N`: one process, one communicator per device (ncclCommInitAll); rank r works
// on devices[r]. Drive them with one thread per rank (run_ranks).
std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(const std::vector<int>& devices,
                                                                   Options o = {});

// Under an external launcher: one process per GPU. This process is env.rank of env.world_size
// and works on GPU `device` (< 0: env.local_rank). Rank 0 creates the NCCL unique id and the
// ranks share it through tcp_all_gather at env.master_addr:env.master_port; the communicator is
// created non-blocking and its initialisation is polled against the timeout.
std::unique_ptr<Communicator> make_nccl_communicator(const LaunchEnv& env, Options o = {},
                                                     int device = -1);

}  // namespace aim::dist
