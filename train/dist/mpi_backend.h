// The mpi backend (train/dist/communicator_mpi.cpp, built when CMake finds MPI): CPU processes
// under mpirun, one rank per process. This header has no MPI types, so any code can name the
// factory; in a build without MPI it throws aim::Error saying how to get it (mpi_unavailable.cpp).
//
//   mpirun -np 2 aim-train din --device cpu --config size=tiny     (docs/scaling.md)
//
// Threads. One thread per process (the "MPI thread", started on first use) makes every MPI call,
// MPI_Init_thread and MPI_Finalize included, so MPI_THREAD_FUNNELED is all it needs from the MPI
// library; the collectives of every communicator of the process run on it one after another, in
// the order they were issued (that is what makes *_async overlap the caller's work, as the local
// backend's worker does). MPI is finalised when the process exits normally.
//
// A collective is two non-blocking MPI calls polled with MPI_Test: first an all-gather of its
// signature (op, dtype, element count, reduce op, root, sequence number), so a rank that issued a
// different collective is an error on every rank naming each rank's call (the communicator is
// then failed: every later call throws) instead of corrupted memory; then the collective itself
// (MPI_Iallreduce, MPI_Ibcast, MPI_Iallgather, MPI_Ireduce_scatter_block, MPI_Ialltoall,
// MPI_Ibarrier). f32, f64, i32 and i64 reduce in their own type; f16 and bf16 have no MPI type:
// they are widened to f32, reduced in f32 and rounded back once (no user-defined MPI op). Avg is
// the sum divided by the group size. The order in which MPI adds the ranks' values is the MPI
// library's (not rank order as in the local backend): results agree across ranks and runs to
// rounding, not bit for bit, which the data-parallel equivalence (1e-5) allows.
//
// Failures end the job. An MPI collective cannot be cancelled, so nothing can be retried or
// recovered once a rank is missing; instead:
//   - the deadline (Options::timeout, from the moment the collective starts on the MPI thread):
//     the rank prints "dist: rank R timed out after T ms in all_reduce #k (f32 x n, sum) ..." to
//     stderr and calls MPI_Abort(MPI_COMM_WORLD, 1);
//   - abort(reason) (a rank's training failed: aim-train calls it with the error): the rank
//     prints "dist: rank R failed: <reason>" and calls MPI_Abort; abort() does not return;
//   - an MPI error code from any call: the rank prints it and calls MPI_Abort.
// mpirun then kills every other rank of the job (OpenMPI prints its own "MPI_ABORT was invoked
// on rank R" banner after the message) and exits non-zero: every rank stops within the timeout,
// never a hang. Mismatched collectives are detected before any data moves and throw instead.
#pragma once
#include <memory>
#include <string>

#include "train/dist/communicator.h"
#include "train/dist/launch.h"

namespace aim::dist {

bool mpi_built();           // false in builds without MPI
std::string mpi_version();  // the MPI library's version line ("Open MPI v4.1.4, ..."); throws
                            // without MPI

// The communicator of this process in MPI_COMM_WORLD (a duplicate of it: each communicator is
// its own message space). Initialises MPI on first use. When `expect` names a launcher world
// (detect_launch_env()), MPI's rank and size must match it: a world MPI does not see (e.g. a
// torchrun environment, or a program not started by mpirun, which MPI sees as 1 process) is an
// error naming both. Creating it is collective: every rank must call it (bounded by o.timeout).
std::unique_ptr<Communicator> make_mpi_communicator(Options o = {},
                                                    const LaunchEnv* expect = nullptr);

}  // namespace aim::dist
