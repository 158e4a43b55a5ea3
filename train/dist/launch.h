// Process launch for multi-process runs: the rank/world read from the launcher's environment, and
// a small TCP rendezvous (plain POSIX sockets with deadlines) through which the ranks exchange a
// few bytes (the NCCL unique id) before any communicator exists.
#pragma once
#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace aim::dist {

struct LaunchEnv {
  int rank = 0, world_size = 1, local_rank = 0;
  std::string master_addr;  // rank 0's host, for the rendezvous
  int master_port = 0;
  // Which launcher set it: "RANK/WORLD_SIZE" (torchrun and friends), "OMPI_COMM_WORLD_*"
  // (mpirun), "SLURM_*" (srun); empty when no launcher variables are set (one process).
  std::string source;
  bool launched() const { return !source.empty(); }
};

// Reads, in this order of precedence:
//   RANK, WORLD_SIZE, LOCAL_RANK
//   OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK
//   SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID
// and, when the world has more than one rank, MASTER_ADDR and MASTER_PORT (required for
// RANK/WORLD_SIZE and Slurm: the rendezvous needs rank 0's address; Slurm users export the first
// node of $SLURM_JOB_NODELIST). Under mpirun they may be left unset when neither is given (the
// mpi backend needs no rendezvous; NCCL ranks check with require_rendezvous). Malformed or
// inconsistent values are errors naming the variable.
LaunchEnv detect_launch_env();
// The same over any lookup (tests): getenv(name) returns null when the variable is unset.
LaunchEnv detect_launch_env(const std::function<const char*(const char*)>& getenv);
// Throws naming `who` ("NCCL ranks") when a world of several ranks has no MASTER_ADDR/PORT.
void require_rendezvous(const LaunchEnv& env, const std::string& who);

// Every rank sends `payload`; every rank returns all ranks' payloads in rank order. Rank 0
// listens on `port` (all IPv4 interfaces), the others connect to addr:port, retrying until rank
// 0 is up. Everything (connecting, waiting for the other ranks, reading, writing) is bounded by
// `timeout`; errors name the rank, the address and what was missing:
//   "dist rendezvous: rank 0 waited 2000 ms on port 29500 for rank(s) 2 of 3"
//   "dist rendezvous: rank 1 could not connect to 10.0.0.1:29500 within 2000 ms (Connection
//    refused): is rank 0 running, and is MASTER_ADDR/MASTER_PORT right?"
std::vector<std::string> tcp_all_gather(const std::string& addr, int port, int rank, int world,
                                        const std::string& payload,
                                        std::chrono::milliseconds timeout);

}  // namespace aim::dist
