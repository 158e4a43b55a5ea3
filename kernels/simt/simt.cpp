// SIMT emulator runtime: grid -> OpenMP over blocks; block -> fibers on one OS thread.
// Design notes and measured costs: kernels/simt/README.md.
#include "kernels/simt/simt.h"

#include <omp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/context/detail/fcontext.hpp>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensor/asan.h"

// Built-in variables (declared in simt.h).
__thread uint3 threadIdx;
__thread uint3 blockIdx;
__thread dim3 blockDim;
__thread dim3 gridDim;

namespace aim::simt {
namespace detail {

namespace bctx = boost::context::detail;

__thread void* g_dyn_smem = nullptr;

namespace {

constexpr uint32_t kMaxThreads = 1024;
constexpr size_t kMaxSmem = 227 * 1024;  // largest opt-in dynamic shared memory (sm_90)

enum class State : uint8_t { Runnable, Barrier, Warp, WarpWait, Done };

struct Fiber {
  bctx::fcontext_t ctx = nullptr;
  uint3 idx{0, 0, 0};
  uint32_t linear = 0, lane = 0, warp = 0;
  State state = State::Done;
};

// What a warp collective is; lanes of one rendezvous must all do the same kind.
enum class OpKind : uint8_t {
  ShflIdx,
  ShflUp,
  ShflDown,
  ShflBfly,
  Ballot,
  Any,
  All,
  SyncWarp,
  MatchAny,
  MatchAll,
  AddU,
  AddS,
  MinU,
  MinS,
  MaxU,
  MaxS,
  And,
  Or,
  Xor,
};

const char* op_name(OpKind k) {
  static const char* const names[] = {
      "__shfl_sync",       "__shfl_up_sync",    "__shfl_down_sync",  "__shfl_xor_sync",
      "__ballot_sync",     "__any_sync",        "__all_sync",        "__syncwarp",
      "__match_any_sync",  "__match_all_sync",  "__reduce_add_sync", "__reduce_add_sync",
      "__reduce_min_sync", "__reduce_min_sync", "__reduce_max_sync", "__reduce_max_sync",
      "__reduce_and_sync", "__reduce_or_sync",  "__reduce_xor_sync"};
  return names[static_cast<int>(k)];
}

// One pending collective per warp: each lane publishes into val[lane]; the last lane to arrive
// computes every lane's result into res[] and wakes them. Results are per lane so that a lane
// that runs ahead into the next collective cannot overwrite what a slower lane still has to read.
struct WarpState {
  uint32_t live = 0;     // lanes that exist and have not returned
  uint32_t mask = 0;     // membermask of the pending collective
  uint32_t arrived = 0;  // lanes that have arrived at it
  uint32_t preds = 0;    // their predicates
  uint32_t waiting = 0;  // lanes waiting for it to finish before starting a different one
  bool pending = false;
  OpKind kind = OpKind::SyncWarp;
  uint8_t size = 0;
  int8_t src[32];
  alignas(16) unsigned char val[32][16];
  alignas(16) unsigned char res[32][16];
};

size_t stack_bytes() {
  static const size_t bytes = [] {
    size_t kb = 64;
    if (const char* e = std::getenv("AIM_SIMT_STACK_KB")) kb = std::max<long>(16, std::atol(e));
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    return (kb * 1024 + page - 1) / page * page;
  }();
  return bytes;
}

std::atomic<int> g_schedule{[] {
  const char* e = std::getenv("AIM_SIMT_SCHEDULE");
  return (e && std::string(e) == "reverse") ? int(Schedule::Reverse) : int(Schedule::Forward);
}()};

std::atomic<uint64_t> g_launch_counter{0};

// Per OS thread: the fibers of the block it is running, their pooled stacks, the run queue.
struct Worker {
  std::vector<Fiber> fibers;
  std::vector<char*> stacks;  // stacks[i]: lowest address of a guard page + stack_bytes()
  std::vector<WarpState> warps;
  std::vector<uint32_t> queue;  // ring buffer of runnable fibers, capacity = block size
  uint32_t qhead = 0, qcount = 0;
  Fiber main;  // the OS thread's own context, which runs the blocks
  uint32_t n = 0, live = 0;
  uint32_t bar_arrived = 0, bar_count = 0, bar_result = 0, bar_result_n = 0;
  bool reverse = false;
  bool failed = false;
  std::exception_ptr error;
  const LaunchSpec* spec = nullptr;
  uint64_t launch_id = ~uint64_t(0);
  char* smem = nullptr;
  size_t smem_cap = 0;

  ~Worker() {
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    for (char* s : stacks) munmap(s, stack_bytes() + page);
    std::free(smem);
  }

  void push(uint32_t i) {
    uint32_t t = qhead + qcount;
    if (t >= n) t -= n;
    queue[t] = i;
    ++qcount;
  }
  uint32_t pop() {
    const uint32_t i = queue[qhead];
    if (++qhead == n) qhead = 0;
    --qcount;
    return i;
  }
  void wake(uint32_t i) {
    fibers[i].state = State::Runnable;
    push(i);
  }
  // Wakes the lanes in `lanes` of warp w, in schedule order.
  void wake_lanes(uint32_t w, uint32_t lanes) {
    const uint32_t base = w * 32;
    if (!reverse) {
      for (; lanes; lanes &= lanes - 1) wake(base + uint32_t(__builtin_ctz(lanes)));
    } else {
      for (; lanes; lanes &= ~(1u << (31 - __builtin_clz(lanes))))
        wake(base + uint32_t(31 - __builtin_clz(lanes)));
    }
  }
};

thread_local Worker t_worker;
__thread Worker* g_w = nullptr;
__thread Fiber* g_cur = nullptr;

std::string where(const Worker& w, const Fiber* f) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "kernel '%s' block (%u,%u,%u) thread (%u,%u,%u)",
                w.spec ? w.spec->name : "?", blockIdx.x, blockIdx.y, blockIdx.z, f ? f->idx.x : 0u,
                f ? f->idx.y : 0u, f ? f->idx.z : 0u);
  return buf;
}

[[noreturn]] void fail_here(const std::string& what) {
  Worker* w = g_w;
  throw std::runtime_error("[simt] " + what + (w && g_cur ? " (" + where(*w, g_cur) + ")" : ""));
}

[[noreturn]] __attribute__((noinline, cold)) void fail_outside() {
  throw std::runtime_error("[simt] device synchronisation called outside a kernel");
}
inline Fiber* current() {
  Fiber* f = g_cur;
  if (__builtin_expect(!f, 0)) fail_outside();
  return f;
}

void switch_to(Fiber* from, Fiber* to) {
  g_cur = to;
  threadIdx = to->idx;
  const bctx::transfer_t t = bctx::jump_fcontext(to->ctx, from);
  static_cast<Fiber*>(t.data)->ctx = t.fctx;  // save the context of whoever switched to us
}

std::string describe_deadlock(const Worker& w) {
  std::string s = "deadlock in kernel '" + std::string(w.spec->name) + "' block (" +
                  std::to_string(blockIdx.x) + "," + std::to_string(blockIdx.y) + "," +
                  std::to_string(blockIdx.z) + "): ";
  uint32_t at_bar = 0;
  for (const Fiber& f : w.fibers)
    if (f.state == State::Barrier) ++at_bar;
  s += std::to_string(at_bar) + " of " + std::to_string(w.live) +
       " live threads wait at __syncthreads";
  for (size_t i = 0; i < w.warps.size(); ++i) {
    const WarpState& ws = w.warps[i];
    if (!ws.pending) continue;
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "; warp %zu: lanes 0x%08x wait in %s(mask 0x%08x) for lanes 0x%08x", i,
                  ws.arrived, op_name(ws.kind), ws.mask, ws.mask & ws.live & ~ws.arrived);
    s += buf;
  }
  return s;
}

// Leaves the current fiber (which must already be Runnable-and-queued, blocked or done) and
// resumes the next runnable one, or the scheduler when there is none.
void run_next(Worker& w, Fiber* self) {
  if (w.qcount) {
    Fiber* next = &w.fibers[w.pop()];
    if (next != self)
      switch_to(self, next);
    else
      self->state = State::Runnable;
    return;
  }
  if (w.live != 0 && !w.failed) {  // nobody can run, yet threads are alive
    w.failed = true;
    w.error = std::make_exception_ptr(std::runtime_error("[simt] " + describe_deadlock(w)));
  }
  switch_to(self, &w.main);  // a blocked fiber never comes back: the block is abandoned
}

void complete_barrier(Worker& w) {
  w.bar_result = w.bar_count;
  w.bar_result_n = w.bar_arrived;
  w.bar_arrived = 0;
  w.bar_count = 0;
  if (!w.reverse) {
    for (uint32_t i = 0; i < w.n; ++i)
      if (w.fibers[i].state == State::Barrier) w.wake(i);
  } else {
    for (uint32_t i = w.n; i-- > 0;)
      if (w.fibers[i].state == State::Barrier) w.wake(i);
  }
}

void complete_warp(Worker& w, WarpState& ws, uint32_t warp) {
  const uint32_t arrived = ws.arrived;
  const unsigned size = ws.size;
  switch (ws.kind) {
    case OpKind::ShflIdx:
    case OpKind::ShflUp:
    case OpKind::ShflDown:
    case OpKind::ShflBfly:
      for (uint32_t m = arrived; m; m &= m - 1) {
        const int l = __builtin_ctz(m);
        const int j = ws.src[l];
        if (j == l || ((arrived >> j) & 1u))
          std::memcpy(ws.res[l], ws.val[j], 16);
        else  // source lane exited or is not in the mask: undefined on hardware -> poison
          std::memset(ws.res[l], 0xff, 16);
      }
      break;
    case OpKind::Ballot:
    case OpKind::Any:
    case OpKind::All:
    case OpKind::SyncWarp: {
      const uint32_t r[2] = {ws.preds & arrived, arrived};
      for (uint32_t m = arrived; m; m &= m - 1) std::memcpy(ws.res[__builtin_ctz(m)], r, 8);
      break;
    }
    case OpKind::MatchAny:
    case OpKind::MatchAll: {
      uint32_t all_equal = 1;
      for (uint32_t m = arrived; m; m &= m - 1) {
        const int l = __builtin_ctz(m);
        uint32_t same = 0;
        for (uint32_t k = arrived; k; k &= k - 1) {
          const int o = __builtin_ctz(k);
          if (std::memcmp(ws.val[o], ws.val[l], size) == 0) same |= 1u << o;
        }
        if (same != arrived) all_equal = 0;
        std::memcpy(ws.res[l], &same, 4);
      }
      if (ws.kind == OpKind::MatchAll) {
        const uint32_t r[2] = {all_equal ? arrived : 0u, all_equal};
        for (uint32_t m = arrived; m; m &= m - 1) std::memcpy(ws.res[__builtin_ctz(m)], r, 8);
      }
      break;
    }
    default: {
      uint32_t acc = 0;
      bool first = true;
      for (uint32_t m = arrived; m; m &= m - 1) {
        uint32_t v;
        std::memcpy(&v, ws.val[__builtin_ctz(m)], 4);
        if (first) {
          acc = v;
          first = false;
          continue;
        }
        switch (ws.kind) {
          case OpKind::AddU:
          case OpKind::AddS:
            acc += v;
            break;
          case OpKind::MinU:
            acc = std::min(acc, v);
            break;
          case OpKind::MaxU:
            acc = std::max(acc, v);
            break;
          case OpKind::MinS:
            acc = uint32_t(std::min(int32_t(acc), int32_t(v)));
            break;
          case OpKind::MaxS:
            acc = uint32_t(std::max(int32_t(acc), int32_t(v)));
            break;
          case OpKind::And:
            acc &= v;
            break;
          case OpKind::Or:
            acc |= v;
            break;
          case OpKind::Xor:
            acc ^= v;
            break;
          default:
            break;
        }
      }
      for (uint32_t m = arrived; m; m &= m - 1) std::memcpy(ws.res[__builtin_ctz(m)], &acc, 4);
      break;
    }
  }
  ws.pending = false;
  ws.arrived = 0;
  w.wake_lanes(warp, arrived | ws.waiting);
  ws.waiting = 0;
}

// Error paths of warp_op, out of line so that the hot path keeps a small frame.
[[noreturn]] __attribute__((noinline, cold)) void fail_not_in_mask(OpKind kind, uint32_t mask,
                                                                   uint32_t lane) {
  char buf[120];
  std::snprintf(buf, sizeof buf, "%s(mask 0x%08x) called by lane %u, which is not in the mask",
                op_name(kind), mask, lane);
  fail_here(buf);
}
[[noreturn]] __attribute__((noinline, cold)) void fail_mismatch(OpKind kind, uint32_t mask,
                                                                uint32_t lane,
                                                                const WarpState& ws) {
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "lane %u calls %s(mask 0x%08x) while lanes 0x%08x wait in %s(mask 0x%08x)", lane,
                op_name(kind), mask, ws.arrived, op_name(ws.kind), ws.mask);
  fail_here(buf);
}

// Rendezvous of the calling lane with the other lanes of `mask`; returns its result slot.
const unsigned char* warp_op(OpKind kind, uint32_t mask, const void* in, unsigned size, int src,
                             int pred) {
  Fiber* self = current();
  Worker& w = *g_w;
  const uint32_t bit = 1u << self->lane;
  WarpState& ws = w.warps[self->warp];
  if (!(mask & bit)) fail_not_in_mask(kind, mask, self->lane);
  while (ws.pending && ws.mask != mask) {
    if (ws.mask & bit) fail_mismatch(kind, mask, self->lane, ws);
    self->state = State::WarpWait;  // a disjoint group of lanes is mid-collective: let it finish
    ws.waiting |= bit;
    run_next(w, self);
  }
  if (ws.pending) {
    if (ws.kind != kind) fail_mismatch(kind, mask, self->lane, ws);
  } else {
    ws.pending = true;
    ws.mask = mask;
    ws.kind = kind;
    ws.arrived = 0;
    ws.preds = 0;
    ws.size = uint8_t(size);
  }
  if (size) std::memcpy(ws.val[self->lane], in, size);
  ws.src[self->lane] = int8_t(src);
  if (pred) ws.preds |= bit;
  ws.arrived |= bit;
  self->state = State::Warp;
  if ((mask & ws.live & ~ws.arrived) == 0) complete_warp(w, ws, self->warp);
  run_next(w, self);
  return ws.res[self->lane];
}

void thread_exit(Worker& w, Fiber* self) {
  self->state = State::Done;
  --w.live;
  WarpState& ws = w.warps[self->warp];
  ws.live &= ~(1u << self->lane);
  if (ws.pending && (ws.mask & ws.live & ~ws.arrived) == 0) complete_warp(w, ws, self->warp);
  if (w.bar_arrived != 0 && w.bar_arrived == w.live) complete_barrier(w);
}

void fiber_entry(bctx::transfer_t t) {
  static_cast<Fiber*>(t.data)->ctx = t.fctx;
  Worker& w = *g_w;
  Fiber* self = g_cur;
  try {
    w.spec->thunk(w.spec->state);
  } catch (...) {
    if (!w.failed) {
      w.failed = true;
      w.error = std::current_exception();
    }
  }
  if (w.failed) switch_to(self, &w.main);  // abandon the block; never resumed
  thread_exit(w, self);
  run_next(w, self);
  std::abort();  // unreachable: a finished fiber is never resumed
}

Worker& worker() {
  Worker* w = g_w;
  if (!w) w = g_w = &t_worker;
  return *w;
}

// Per OS thread, once per launch: fiber indices, stacks, built-in dims, shared memory.
void prepare(Worker& w, const LaunchSpec& s, uint64_t id) {
  if (w.launch_id == id) return;
  w.launch_id = id;
  w.spec = &s;
  blockDim = s.block;
  gridDim = s.grid;
  const uint32_t n = s.block.x * s.block.y * s.block.z;
  w.n = n;
  if (w.fibers.size() < n) w.fibers.resize(n);
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  while (w.stacks.size() < n) {
    void* p = mmap(nullptr, stack_bytes() + page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("[simt] cannot allocate a fiber stack");
    mprotect(p, page, PROT_NONE);  // guard page: a stack overflow faults instead of corrupting
    w.stacks.push_back(static_cast<char*>(p));
  }
  for (uint32_t i = 0; i < n; ++i) {
    Fiber& f = w.fibers[i];
    f.linear = i;
    f.idx = uint3{i % s.block.x, (i / s.block.x) % s.block.y, i / (s.block.x * s.block.y)};
    f.lane = i & 31;
    f.warp = i >> 5;
  }
  w.warps.resize((n + 31) / 32);
  w.queue.resize(n);
  const size_t want = std::max<size_t>(s.smem, 16);
  if (w.smem_cap < want) {
    std::free(w.smem);
    w.smem_cap = (want + 127) / 128 * 128;
    w.smem = static_cast<char*>(std::aligned_alloc(128, w.smem_cap));
    if (!w.smem) throw std::runtime_error("[simt] cannot allocate shared memory");
  }
  g_dyn_smem = w.smem;
  w.reverse = g_schedule.load(std::memory_order_relaxed) == int(Schedule::Reverse);
}

void run_block(Worker& w, uint3 bidx) {
  blockIdx = bidx;
  const LaunchSpec& s = *w.spec;
  if (s.smem) std::memset(w.smem, 0xff, s.smem);
  const uint32_t n = w.n;
  const size_t page = size_t(sysconf(_SC_PAGESIZE)), bytes = stack_bytes();
  for (uint32_t i = 0; i < n; ++i) {
    Fiber& f = w.fibers[i];
    // Stack tops 64 KiB apart would all map to the same L1/L2 sets; stagger them by cache lines.
    const size_t colour = (i % 61) * 64;
    // Under ASan: a fiber ends by switching away, never returning, so the redzones of its last
    // frames (and all of an abandoned block's) stay poisoned on the pooled stack, and the next
    // fiber's frames there read as stack-buffer-overflows (found by tools/sanitize.sh address emu).
    AIM_ASAN_UNPOISON(w.stacks[i] + page, bytes);
    f.ctx = bctx::make_fcontext(w.stacks[i] + page + bytes - colour, bytes - colour, &fiber_entry);
    f.state = State::Runnable;
  }
  for (size_t k = 0; k < w.warps.size(); ++k) {
    WarpState& ws = w.warps[k];
    const uint32_t lanes = std::min<uint32_t>(32, n - uint32_t(k) * 32);
    ws.live = lanes == 32 ? ~0u : ((1u << lanes) - 1);
    ws.pending = false;
    ws.arrived = ws.preds = ws.waiting = 0;
  }
  w.qhead = 0;
  w.qcount = 0;
  for (uint32_t i = 0; i < n; ++i) w.push(w.reverse ? n - 1 - i : i);
  w.live = n;
  w.bar_arrived = w.bar_count = 0;
  w.failed = false;
  w.error = nullptr;

  switch_to(&w.main, &w.fibers[w.pop()]);
  g_cur = nullptr;  // back on the scheduler: the block finished or was abandoned
  if (w.failed) {
    std::exception_ptr e = w.error;
    w.error = nullptr;
    w.failed = false;
    std::rethrow_exception(e);
  }
}

void validate(const LaunchSpec& s) {
  auto bad = [&](const std::string& why) {
    throw std::runtime_error(std::string("[simt] launch of '") + (s.name ? s.name : "?") +
                             "': " + why);
  };
  auto d3 = [](dim3 d) {
    return std::to_string(d.x) + "x" + std::to_string(d.y) + "x" + std::to_string(d.z);
  };
  if (s.block.x == 0 || s.block.y == 0 || s.block.z == 0)
    bad("block " + d3(s.block) + " has a zero dimension");
  if (s.grid.x == 0 || s.grid.y == 0 || s.grid.z == 0)
    bad("grid " + d3(s.grid) + " has a zero dimension");
  const uint64_t threads = uint64_t(s.block.x) * s.block.y * s.block.z;
  if (threads > kMaxThreads || s.block.x > 1024 || s.block.y > 1024 || s.block.z > 64)
    bad("block " + d3(s.block) + " (" + std::to_string(threads) +
        " threads) exceeds the limits 1024 threads, 1024x1024x64");
  if (s.grid.y > 65535 || s.grid.z > 65535) bad("grid " + d3(s.grid) + " exceeds y,z <= 65535");
  if (s.smem > kMaxSmem)
    bad("dynamic shared memory " + std::to_string(s.smem) + " bytes exceeds " +
        std::to_string(kMaxSmem));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
int block_sync(int pred, int* arrived) {
  Fiber* self = current();
  Worker& w = *g_w;
  self->state = State::Barrier;
  ++w.bar_arrived;
  if (pred) ++w.bar_count;
  if (w.bar_arrived == w.live) complete_barrier(w);
  run_next(w, self);
  *arrived = int(w.bar_result_n);
  return int(w.bar_result);
}

void shfl(unsigned mask, const void* in, void* out, unsigned size, ShflMode mode, int b, int c) {
  // Source lane exactly as PTX shfl.sync computes it (c = clamp value | segment mask << 8).
  const int lane = int(current()->lane);
  const int bval = b & 31, cval = c & 31, segmask = (c >> 8) & 31;
  const int max_lane = (lane & segmask) | (cval & ~segmask);
  const int min_lane = lane & segmask;
  int j = lane;
  bool ok = false;
  OpKind kind = OpKind::ShflIdx;
  switch (mode) {
    case ShflMode::Up:
      j = lane - bval;
      ok = j >= max_lane;
      kind = OpKind::ShflUp;
      break;
    case ShflMode::Down:
      j = lane + bval;
      ok = j <= max_lane;
      kind = OpKind::ShflDown;
      break;
    case ShflMode::Bfly:
      j = lane ^ bval;
      ok = j <= max_lane;
      kind = OpKind::ShflBfly;
      break;
    case ShflMode::Idx:
      j = min_lane | (bval & ~segmask);
      ok = j <= max_lane;
      break;
  }
  if (!ok) j = lane;
  std::memcpy(out, warp_op(kind, mask, in, size, j, 0), size);
}

unsigned vote(unsigned mask, int pred, VoteKind k, unsigned* participating) {
  static constexpr OpKind kinds[] = {OpKind::Ballot, OpKind::Any, OpKind::All, OpKind::SyncWarp};
  const unsigned char* r = warp_op(kinds[int(k)], mask, nullptr, 0, 0, pred);
  uint32_t v[2];
  std::memcpy(v, r, 8);
  if (participating) *participating = v[1];
  return v[0];
}

unsigned match(unsigned mask, const void* v, unsigned size, bool all, int* pred) {
  const unsigned char* r = warp_op(all ? OpKind::MatchAll : OpKind::MatchAny, mask, v, size, 0, 0);
  uint32_t out[2];
  std::memcpy(out, r, 8);
  if (pred) *pred = int(out[1]);
  return out[0];
}

unsigned reduce(unsigned mask, unsigned v, ReduceOp op) {
  static constexpr OpKind kinds[] = {OpKind::AddU, OpKind::AddS, OpKind::MinU,
                                     OpKind::MinS, OpKind::MaxU, OpKind::MaxS,
                                     OpKind::And,  OpKind::Or,   OpKind::Xor};
  uint32_t out;
  std::memcpy(&out, warp_op(kinds[int(op)], mask, &v, 4, 0, 0), 4);
  return out;
}

unsigned active_mask() {
  Fiber* self = current();
  return g_w->warps[self->warp].live;
}

void fail(const char* what) { fail_here(what); }

}  // namespace detail

void set_schedule(Schedule s) { detail::g_schedule.store(int(s)); }
Schedule schedule() { return Schedule(detail::g_schedule.load()); }

void execute(const LaunchSpec& spec) {
  using namespace detail;
  validate(spec);
  if (g_cur) throw std::runtime_error("[simt] kernel launch from inside a kernel is not supported");
  const uint64_t id = g_launch_counter.fetch_add(1) + 1;
  const dim3 g = spec.grid;
  const int64_t nblocks = int64_t(g.x) * g.y * g.z;
  std::atomic<bool> abort{false};
  std::exception_ptr first;
  std::mutex mu;
  auto body = [&](int64_t b) {
    if (abort.load(std::memory_order_relaxed)) return;
    try {
      Worker& w = worker();
      prepare(w, spec, id);
      const uint3 bidx{uint32_t(b % g.x), uint32_t((b / g.x) % g.y),
                       uint32_t(b / (int64_t(g.x) * g.y))};
      run_block(w, bidx);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!first) first = std::current_exception();
      abort = true;
    }
  };
  const int nth = omp_get_max_threads();
  if (nblocks == 1 || nth <= 1 || omp_in_parallel()) {
    for (int64_t b = 0; b < nblocks; ++b) body(b);
  } else {
#pragma omp parallel for schedule(dynamic, 1) num_threads(int(std::min <int64_t>(nth, nblocks)))
    for (int64_t b = 0; b < nblocks; ++b) body(b);
  }
  // The workers' spec pointer dangles after return; launch_id forces a fresh prepare().
  if (first) std::rethrow_exception(first);
}

}  // namespace aim::simt
