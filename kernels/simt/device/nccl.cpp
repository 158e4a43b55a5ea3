// The emulated NCCL: the NCCL calls of train/dist/communicator_nccl.cpp over emulated devices
// (AIM_CUDA_EMULATOR build). NCCL's semantics: one communicator per rank and device, ranks issue
// the same collectives in the same order, each on its own stream, and a collective completes when
// every rank has issued it. Here the rank that issues a collective last performs it for all
// (host memory), and until then later work on each issuing stream waits for it (state.h's
// Pending). Ranks must be threads of one process (`--gpus N`); a communicator initialised from a
// unique id (launcher ranks in several processes) is refused with the reason. Mismatched
// collectives (kind, count, type, root differ at the same position) fail every rank, naming both.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <nccl.h>

#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <vector>

#include "kernels/simt/device/device.h"
#include "kernels/simt/device/state.h"
#include "tensor/check.h"

namespace aim::simt::device {
namespace {

size_t type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

// dst[i] = op over the ranks of src_r[i] (in rank order, accumulating in f32 for 16-bit types).
template <class T, class A>
void reduce_typed(void* dst, const std::vector<const void*>& src, size_t n, ncclRedOp_t op) {
  const int R = int(src.size());
  std::vector<A> acc(n);
  for (size_t i = 0; i < n; ++i) acc[i] = A(static_cast<const T*>(src[0])[i]);
  for (int r = 1; r < R; ++r) {
    const T* s = static_cast<const T*>(src[size_t(r)]);
    for (size_t i = 0; i < n; ++i) {
      const A v = A(s[i]);
      switch (op) {
        case ncclProd:
          acc[i] *= v;
          break;
        case ncclMax:
          acc[i] = v > acc[i] ? v : acc[i];
          break;
        case ncclMin:
          acc[i] = v < acc[i] ? v : acc[i];
          break;
        default:
          acc[i] += v;
      }
    }
  }
  T* d = static_cast<T*>(dst);
  for (size_t i = 0; i < n; ++i) d[i] = T(op == ncclAvg ? acc[i] / A(R) : acc[i]);
}

void reduce(void* dst, const std::vector<const void*>& src, size_t n, ncclDataType_t t,
            ncclRedOp_t op) {
  switch (t) {
    case ncclFloat32:
      return reduce_typed<float, float>(dst, src, n, op);
    case ncclFloat64:
      return reduce_typed<double, double>(dst, src, n, op);
    case ncclFloat16:
      return reduce_typed<__half, float>(dst, src, n, op);
    case ncclBfloat16:
      return reduce_typed<__nv_bfloat16, float>(dst, src, n, op);
    case ncclInt8:
      return reduce_typed<int8_t, int64_t>(dst, src, n, op);
    case ncclUint8:
      return reduce_typed<uint8_t, int64_t>(dst, src, n, op);
    case ncclInt32:
      return reduce_typed<int32_t, int64_t>(dst, src, n, op);
    case ncclUint32:
      return reduce_typed<uint32_t, int64_t>(dst, src, n, op);
    case ncclInt64:
      return reduce_typed<int64_t, int64_t>(dst, src, n, op);
    case ncclUint64:
      return reduce_typed<uint64_t, uint64_t>(dst, src, n, op);
    default:
      AIM_FAIL("[emulated nccl] data type ", int(t), " not supported");
  }
}

enum class Kind { AllReduce, Broadcast, AllGather, ReduceScatter };
const char* kind_name(Kind k) {
  switch (k) {
    case Kind::AllReduce:
      return "ncclAllReduce";
    case Kind::Broadcast:
      return "ncclBroadcast";
    case Kind::AllGather:
      return "ncclAllGather";
    default:
      return "ncclReduceScatter";
  }
}

struct Slot {
  const void* send = nullptr;
  void* recv = nullptr;
};
struct Collective {
  Kind kind;
  size_t count;
  ncclDataType_t type;
  ncclRedOp_t op;
  int root;
  int arrived = 0;
  std::vector<Slot> slots;
  PendingPtr pending;
  std::string sig() const {
    return str(kind_name(kind), " of ", count, " x type ", int(type), " op ", int(op), " root ",
               root);
  }
};

struct Clique {
  int nranks;
  std::mutex mu;
  std::map<int64_t, Collective> ops;  // by position in the issue order
  std::map<std::pair<int, int>, std::deque<std::pair<Slot, PendingPtr>>> sends, recvs;
  std::map<std::pair<int, int>, size_t> p2p_bytes;
  std::string aborted;  // why, once a rank aborted
  std::vector<PendingPtr> live;
};

thread_local int t_group_depth = 0;
thread_local std::vector<std::function<ncclResult_t()>> t_group;
thread_local std::string t_last;

ncclResult_t fail(ncclComm_t comm, ncclResult_t r, const std::string& why);

}  // namespace
}  // namespace aim::simt::device

struct ncclComm {
  std::shared_ptr<aim::simt::device::Clique> clique;
  int rank = 0, device = 0;
  int64_t seq = 0;
  std::string last_error;
};

namespace aim::simt::device {
namespace {

ncclResult_t fail(ncclComm_t comm, ncclResult_t r, const std::string& why) {
  t_last = "[emulated nccl] " + why;
  if (comm) comm->last_error = t_last;
  return r;
}

// Performs a collective every rank has issued (clique lock held).
void perform(Collective& c, int R) {
  const size_t es = type_size(c.type), bytes = c.count * es;
  std::vector<const void*> src;
  for (const Slot& s : c.slots) src.push_back(s.send);
  switch (c.kind) {
    case Kind::AllReduce: {
      std::vector<unsigned char> tmp(bytes);
      reduce(tmp.data(), src, c.count, c.type, c.op);
      for (const Slot& s : c.slots) std::memcpy(s.recv, tmp.data(), bytes);
      break;
    }
    case Kind::Broadcast: {
      std::vector<unsigned char> tmp(bytes);
      std::memcpy(tmp.data(), c.slots[size_t(c.root)].send, bytes);
      for (const Slot& s : c.slots) std::memcpy(s.recv, tmp.data(), bytes);
      break;
    }
    case Kind::AllGather: {
      std::vector<unsigned char> tmp(bytes * size_t(R));
      for (int r = 0; r < R; ++r)
        std::memcpy(tmp.data() + size_t(r) * bytes, src[size_t(r)], bytes);
      for (const Slot& s : c.slots) std::memcpy(s.recv, tmp.data(), tmp.size());
      break;
    }
    case Kind::ReduceScatter: {
      std::vector<unsigned char> tmp(bytes * size_t(R));
      reduce(tmp.data(), src, c.count * size_t(R), c.type, c.op);
      for (int r = 0; r < R; ++r)
        std::memcpy(c.slots[size_t(r)].recv, tmp.data() + size_t(r) * bytes, bytes);
      break;
    }
  }
}

ncclResult_t check_buffers(ncclComm_t comm, const char* what, const void* send, size_t send_bytes,
                           const void* recv, size_t recv_bytes, cudaStream_t stream) {
  if (!comm || !comm->clique)
    return fail(comm, ncclInvalidArgument, str(what, ": null communicator"));
  if (stream_device(stream) != comm->device)
    return fail(comm, ncclInvalidUsage,
                str(what, ": stream of cuda:", stream_device(stream),
                    ", communicator of cuda:", comm->device));
  if (stream_capturing(stream))
    return fail(comm, ncclInvalidUsage,
                str(what,
                    ": collectives inside a CUDA graph capture "
                    "are not emulated"));
  auto ok = [&](const void* p, size_t n) {
    if (!p || n == 0) return true;
    const Where w = where(p);
    return w.found && !w.pinned && w.device == comm->device && uintptr_t(p) + n <= w.base + w.size;
  };
  if (!ok(send, send_bytes))
    return fail(comm, ncclInvalidArgument,
                str(what, " on rank ", comm->rank, ": send buffer ", send, " (", send_bytes,
                    " bytes) is not memory of cuda:", comm->device));
  if (!ok(recv, recv_bytes))
    return fail(comm, ncclInvalidArgument,
                str(what, " on rank ", comm->rank, ": receive buffer ", recv, " (", recv_bytes,
                    " bytes) is not memory of cuda:", comm->device));
  return ncclSuccess;
}

ncclResult_t arrive(ncclComm_t comm, Kind kind, const void* send, void* recv, size_t count,
                    ncclDataType_t type, ncclRedOp_t op, int root, cudaStream_t stream) {
  const size_t es = type_size(type);
  if (es == 0)
    return fail(comm, ncclInvalidArgument, str(kind_name(kind), ": data type ", int(type)));
  const int R = comm && comm->clique ? comm->clique->nranks : 1;
  const size_t send_n = kind == Kind::ReduceScatter ? count * size_t(R) : count;
  const size_t recv_n = kind == Kind::AllGather ? count * size_t(R) : count;
  const ncclResult_t b =
      check_buffers(comm, kind_name(kind), send, send_n * es, recv, recv_n * es, stream);
  if (b != ncclSuccess) return b;
  auto run = [=]() -> ncclResult_t {
    Clique& q = *comm->clique;
    std::lock_guard<std::mutex> lock(q.mu);
    if (!q.aborted.empty())
      return fail(comm, ncclInvalidUsage,
                  str(kind_name(kind), ": communicator aborted (", q.aborted, ")"));
    const int64_t seq = comm->seq++;
    auto [it, fresh] = q.ops.try_emplace(seq);
    Collective& c = it->second;
    if (fresh) {
      c = Collective{kind,
                     count,
                     type,
                     op,
                     root,
                     0,
                     std::vector<Slot>(size_t(R)),
                     std::make_shared<Pending>()};
      c.pending->what = str(kind_name(kind), " #", seq + 1, " (", count, " elements)");
      q.live.push_back(c.pending);
    } else if (c.kind != kind || c.count != count || c.type != type || c.op != op ||
               c.root != root) {
      const std::string why =
          str("collective #", seq + 1, " mismatch: rank ", comm->rank, " issued ",
              Collective{kind, count, type, op, root}.sig(), ", an earlier rank ", c.sig());
      q.aborted = why;
      for (auto& p : q.live) p->complete(why);
      return fail(comm, ncclInvalidUsage, why);
    }
    c.slots[size_t(comm->rank)] = {send, recv};
    {
      std::lock_guard<std::mutex> plock(c.pending->mu);
      if (send) c.pending->buffers.emplace_back(uintptr_t(send), send_n * es);
      if (recv) c.pending->buffers.emplace_back(uintptr_t(recv), recv_n * es);
    }
    if (fresh) register_pending(c.pending);
    stream_add_pending(stream, c.pending);
    if (++c.arrived == R) {
      const DeviceAccess access;
      perform(c, R);
      c.pending->complete();
      q.ops.erase(it);
    }
    return ncclSuccess;
  };
  if (t_group_depth > 0) {
    t_group.push_back(run);
    return ncclSuccess;
  }
  return run();
}

ncclResult_t p2p(ncclComm_t comm, bool is_send, const void* buf, size_t count, ncclDataType_t type,
                 int peer, cudaStream_t stream) {
  const size_t bytes = count * type_size(type);
  const char* what = is_send ? "ncclSend" : "ncclRecv";
  const ncclResult_t b = check_buffers(comm, what, is_send ? buf : nullptr, is_send ? bytes : 0,
                                       is_send ? nullptr : buf, is_send ? 0 : bytes, stream);
  if (b != ncclSuccess) return b;
  if (peer < 0 || peer >= comm->clique->nranks)
    return fail(comm, ncclInvalidArgument, str(what, ": peer ", peer, " out of range"));
  auto run = [=]() -> ncclResult_t {
    Clique& q = *comm->clique;
    std::lock_guard<std::mutex> lock(q.mu);
    if (!q.aborted.empty())
      return fail(comm, ncclInvalidUsage, str(what, ": communicator aborted"));
    const std::pair<int, int> key =
        is_send ? std::make_pair(comm->rank, peer) : std::make_pair(peer, comm->rank);
    auto pending = std::make_shared<Pending>();
    pending->what = str(what, " ", key.first, " -> ", key.second);
    pending->buffers.emplace_back(uintptr_t(buf), bytes);
    register_pending(pending);
    stream_add_pending(stream, pending);
    auto& other = is_send ? q.recvs[key] : q.sends[key];
    Slot mine;
    if (is_send)
      mine.send = buf;
    else
      mine.recv = const_cast<void*>(buf);
    if (other.empty()) {
      (is_send ? q.sends[key] : q.recvs[key]).push_back({mine, pending});
      q.p2p_bytes[key] = bytes;
      q.live.push_back(pending);
      return ncclSuccess;
    }
    auto [peer_slot, peer_pending] = other.front();
    other.pop_front();
    const void* src = is_send ? buf : peer_slot.send;
    void* dst = is_send ? peer_slot.recv : const_cast<void*>(buf);
    {
      const DeviceAccess access;
      std::memcpy(dst, src, bytes);
    }
    pending->complete();
    peer_pending->complete();
    return ncclSuccess;
  };
  if (t_group_depth > 0) {
    t_group.push_back(run);
    return ncclSuccess;
  }
  return run();
}

}  // namespace
}  // namespace aim::simt::device

using namespace aim::simt::device;  // NOLINT: this file implements the C API on top of it
using aim::str;

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}
const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error";
    case ncclSystemError:
      return "unhandled system error";
    case ncclInternalError:
      return "internal error";
    case ncclInvalidArgument:
      return "invalid argument";
    case ncclInvalidUsage:
      return "invalid usage";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    default:
      return "unknown result code";
  }
}
const char* ncclGetLastError(ncclComm_t comm) {
  return comm && !comm->last_error.empty() ? comm->last_error.c_str() : t_last.c_str();
}
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::memset(id, 0, sizeof *id);
  return ncclSuccess;
}
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int, ncclUniqueId, int rank, ncclConfig_t*) {
  *comm = nullptr;
  return fail(nullptr, ncclInvalidUsage,
              str("rank ", rank,
                  ": ncclCommInitRank (ranks in several processes under a launcher) "
                  "is not emulated; the emulated device runs `--gpus N` ranks as threads"));
}
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int n, ncclUniqueId id, int rank) {
  return ncclCommInitRankConfig(comm, n, id, rank, nullptr);
}
ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  if (ndev < 1) return fail(nullptr, ncclInvalidArgument, "ncclCommInitAll: ndev < 1");
  auto q = std::make_shared<Clique>();
  q->nranks = ndev;
  for (int i = 0; i < ndev; ++i) {
    const int d = devlist ? devlist[i] : i;
    if (d < 0 || d >= device_count())
      return fail(nullptr, ncclInvalidArgument,
                  str("ncclCommInitAll: device ", d, " of ", device_count(), " emulated devices"));
    comms[i] = new ncclComm{q, i, d, 0, ""};
  }
  return ncclSuccess;
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* err) {
  if (!comm || !comm->clique) return ncclInvalidArgument;
  std::lock_guard<std::mutex> lock(comm->clique->mu);
  *err = comm->clique->aborted.empty() ? ncclSuccess : ncclRemoteError;
  if (*err != ncclSuccess) comm->last_error = "[emulated nccl] " + comm->clique->aborted;
  return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  if (comm->clique) {
    std::lock_guard<std::mutex> lock(comm->clique->mu);
    if (comm->clique->aborted.empty())
      comm->clique->aborted = str("rank ", comm->rank, " aborted the communicator");
    for (auto& p : comm->clique->live)
      if (!p->is_done()) p->complete(comm->clique->aborted);
  }
  delete comm;
  return ncclSuccess;
}
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete comm;
  return ncclSuccess;
}
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  *count = comm->clique->nranks;
  return ncclSuccess;
}
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  *device = comm->device;
  return ncclSuccess;
}
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  *rank = comm->rank;
  return ncclSuccess;
}

ncclResult_t ncclGroupStart() {
  ++t_group_depth;
  return ncclSuccess;
}
ncclResult_t ncclGroupEnd() {
  if (t_group_depth == 0)
    return fail(nullptr, ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--t_group_depth > 0) return ncclSuccess;
  std::vector<std::function<ncclResult_t()>> ops;
  ops.swap(t_group);
  ncclResult_t r = ncclSuccess;
  for (auto& op : ops) {
    const ncclResult_t e = op();
    if (r == ncclSuccess) r = e;
  }
  return r;
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return arrive(comm, Kind::AllReduce, send, recv, count, type, op, 0, stream);
}
ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t type,
                           int root, ncclComm_t comm, cudaStream_t stream) {
  // Only the root's send buffer is read.
  return arrive(comm, Kind::Broadcast, comm && comm->rank == root ? send : nullptr, recv, count,
                type, ncclSum, root, stream);
}
ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t type,
                           ncclComm_t comm, cudaStream_t stream) {
  return arrive(comm, Kind::AllGather, send, recv, count, type, ncclSum, 0, stream);
}
ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t count, ncclDataType_t type,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return arrive(comm, Kind::ReduceScatter, send, recv, count, type, op, 0, stream);
}
ncclResult_t ncclSend(const void* buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return p2p(comm, true, buf, count, type, peer, stream);
}
ncclResult_t ncclRecv(void* buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return p2p(comm, false, buf, count, type, peer, stream);
}

}  // extern "C"
