// The local backend: N ranks as threads of one process (communicator.h, LocalGroup).
//
// A collective on rank r (on r's worker thread):
//   1. publish its signature and buffers in the group's slot r, meet (all arrived, deadline);
//   2. check that every rank issued the same collective (else the group fails: no rank touches
//      another's memory);
//   3. compute r's share of the result from all ranks' buffers: all_reduce splits the elements
//      into n chunks and rank r writes chunk r into every rank's buffer; the others write only
//      r's own output;
//   4. meet again (all done), so no rank reuses a buffer another rank still reads.
// Reductions add ranks in order 0..n-1 into a double (int64 for integers) accumulator and round
// once, whichever thread computes the element: results are bitwise identical on all ranks.
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "profiler/profiler.h"
#include "train/dist/communicator.h"

namespace aim::dist {

namespace {

struct Slot {
  CollectiveKind kind = CollectiveKind::Barrier;
  DType dtype = DType::f32;
  int64_t count = 0;  // elements per chunk (check_collective)
  ReduceOp op = ReduceOp::Sum;
  int root = 0;
  int64_t seq = 0;
  const char* in = nullptr;
  char* out = nullptr;
};

std::string describe(const Slot& s) {
  std::string d = str(collective_name(s.kind), " #", s.seq);
  if (s.kind == CollectiveKind::Barrier) return d;
  d += str(" (", dtype_name(s.dtype), " x ", s.count);
  if (s.kind == CollectiveKind::AllReduce || s.kind == CollectiveKind::ReduceScatter)
    d += str(", ", reduce_op_name(s.op));
  if (s.kind == CollectiveKind::Broadcast) d += str(", root ", s.root);
  return d + ")";
}

bool same_call(const Slot& a, const Slot& b) {
  return a.kind == b.kind && a.dtype == b.dtype && a.count == b.count && a.op == b.op &&
         a.root == b.root && a.seq == b.seq;
}

// dst[k][i] = (sum over j of src[j][i]) (/ n for avg), i in [lo, hi): ranks added in order.
template <class T, class Acc>
void reduce_range(const std::vector<const T*>& src, const std::vector<T*>& dst, int64_t lo,
                  int64_t hi, bool avg) {
  constexpr int64_t kBlock = 512;
  Acc acc[kBlock];
  const Acc n = Acc(src.size());
  for (int64_t b = lo; b < hi; b += kBlock) {
    const int64_t m = std::min(kBlock, hi - b);
    for (int64_t i = 0; i < m; ++i) acc[i] = Acc(0);
    for (const T* s : src)
      for (int64_t i = 0; i < m; ++i) acc[i] += Acc(s[b + i]);
    if (avg)
      for (int64_t i = 0; i < m; ++i) acc[i] /= n;
    for (T* d : dst)
      for (int64_t i = 0; i < m; ++i) d[b + i] = T(acc[i]);
  }
}

void reduce_dispatch(DType t, const std::vector<const char*>& src, const std::vector<char*>& dst,
                     int64_t lo, int64_t hi, bool avg) {
  auto run = [&](auto tag, auto acc_tag) {
    using T = decltype(tag);
    using Acc = decltype(acc_tag);
    std::vector<const T*> s;
    std::vector<T*> d;
    for (const char* p : src) s.push_back(reinterpret_cast<const T*>(p));
    for (char* p : dst) d.push_back(reinterpret_cast<T*>(p));
    reduce_range<T, Acc>(s, d, lo, hi, avg);
  };
  switch (t) {
    case DType::f32:
      return run(float(), double());
    case DType::f64:
      return run(double(), double());
    case DType::f16:
      return run(Half(), double());
    case DType::bf16:
      return run(BFloat16(), double());
    case DType::i32:
      return run(int32_t(), int64_t());
    case DType::i64:
      return run(int64_t(), int64_t());
    default:
      AIM_FAIL("[dist local] cannot reduce ", dtype_name(t));
  }
}

}  // namespace

struct LocalGroup::State {
  int n;
  Options opt;
  std::mutex mu;
  std::condition_variable cv;
  bool failed = false;
  std::string failure;
  std::vector<Slot> slots;
  std::vector<int64_t> entered;  // per rank: meetings entered
  std::vector<bool> taken;       // communicator handed out
  int64_t gen = 0;
  int arrived = 0;

  State(int size, Options o)
      : n(size), opt(o), slots(size_t(size)), entered(size_t(size), 0), taken(size_t(size)) {}

  void fail_locked(const std::string& msg) {
    if (!failed) {
      failed = true;
      failure = msg;
    }
    cv.notify_all();
  }
  void fail(const std::string& msg) {
    std::lock_guard<std::mutex> lock(mu);
    fail_locked(msg);
  }
  [[noreturn]] void throw_failure() const { throw Error(failure); }

  // All ranks meet; throws when the group failed or the deadline passed (then failing it, with
  // the ranks that did not arrive). `slot`, if given, is published as this rank's call.
  void meet(int rank, const Slot* slot, const std::string& where, Clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mu);
    if (failed) throw_failure();
    if (slot) slots[size_t(rank)] = *slot;
    const int64_t mine = ++entered[size_t(rank)];
    const int64_t my_gen = gen;
    if (++arrived == n) {
      arrived = 0;
      ++gen;
      cv.notify_all();
      return;
    }
    while (gen == my_gen) {
      if (failed) throw_failure();
      if (cv.wait_until(lock, deadline) == std::cv_status::timeout && gen == my_gen && !failed) {
        std::string missing;
        for (int r = 0; r < n; ++r)
          if (entered[size_t(r)] < mine) missing += (missing.empty() ? "" : ", ") + str(r);
        fail_locked(str("dist: rank ", rank, " timed out after ", opt.timeout.count(), " ms in ",
                        where, " waiting for rank(s) ", missing));
      }
    }
  }
};

namespace {

// A queued collective: the worker runs it through HostWork::run.
class LocalWork final : public HostWork {
 public:
  LocalWork(std::function<void()> run, std::string label)
      : HostWork(std::move(label)), run_(std::move(run)) {}
  void execute() { run(run_); }

 private:
  std::function<void()> run_;
};

class LocalCommunicator final : public IssuingCommunicator {
 public:
  LocalCommunicator(std::shared_ptr<LocalGroup::State> g, int rank)
      : IssuingCommunicator(g->opt), g_(std::move(g)), rank_(rank) {
    worker_ = std::thread([this] { loop(); });
  }
  ~LocalCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(qmu_);
      const size_t pending = queue_.size() + (busy_ ? 1 : 0);
      if (pending > 0)
        g_->fail(str("dist: rank ", rank_, " destroyed its communicator with ", pending,
                     " collective(s) pending"));
      stop_ = true;
    }
    qcv_.notify_all();
    worker_.join();
  }

  int rank() const override { return rank_; }
  int size() const override { return g_->n; }
  std::string backend() const override { return "local"; }
  Device device() const override { return kCPU; }

  void abort(const std::string& reason) override {
    g_->fail(str("dist: rank ", rank_, " failed: ", reason));
  }

 private:
  WorkPtr issue(CollectiveKind k, const Tensor& in, const Tensor& out, ReduceOp op, int root,
                const std::string& label) override {
    Slot s;
    s.kind = k;
    s.count = check_collective(*this, k, in, out, op, root);
    s.dtype = in.defined() ? in.dtype() : DType::u8;
    s.op = op;
    s.root = root;
    s.in = in.defined() ? static_cast<const char*>(in.raw_data()) : nullptr;
    s.out = out.defined() ? static_cast<char*>(out.raw_data()) : nullptr;
    std::lock_guard<std::mutex> lock(qmu_);
    s.seq = ++seq_;
    // The tensors ride along so their storage lives until the collective is done.
    auto run = [this, s, in, out]() {
      (void)in;
      (void)out;
      execute(s);
    };
    auto w = std::make_shared<LocalWork>(std::move(run),
                                         label.empty() ? std::string(collective_name(k)) : label);
    queue_.push_back(w);
    qcv_.notify_one();
    return w;
  }

  void loop() {
    for (;;) {
      std::shared_ptr<LocalWork> w;
      {
        std::unique_lock<std::mutex> lock(qmu_);
        qcv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stop_ and drained
        w = queue_.front();
        queue_.pop_front();
        busy_ = true;
      }
      w->execute();
      std::lock_guard<std::mutex> lock(qmu_);
      busy_ = false;
    }
  }

  // Runs one collective on this rank's worker thread (see the top of the file).
  void execute(const Slot& s) {
    const std::string where = describe(s);
    const Clock::time_point deadline = Clock::now() + options_.timeout;
    State& g = *g_;
    const int n = g.n;
    g.meet(rank_, &s, where, deadline);
    for (int r = 0; r < n; ++r) {
      if (same_call(g.slots[size_t(r)], s)) continue;
      g.fail(str("dist: collective mismatch: rank ", rank_, " issued ", where, ", rank ", r,
                 " issued ", describe(g.slots[size_t(r)]),
                 " (every rank must issue the same collectives in the same order)"));
      g.throw_failure();
    }
    const int64_t es = dtype_size(s.dtype), c = s.count;
    auto in_of = [&](int r) { return g.slots[size_t(r)].in; };
    auto out_of = [&](int r) { return g.slots[size_t(r)].out; };
    switch (s.kind) {
      case CollectiveKind::AllReduce: {
        std::vector<const char*> src;
        std::vector<char*> dst;
        for (int r = 0; r < n; ++r) {
          src.push_back(in_of(r));
          dst.push_back(out_of(r));
        }
        reduce_dispatch(s.dtype, src, dst, c * rank_ / n, c * (rank_ + 1) / n,
                        s.op == ReduceOp::Avg);
        break;
      }
      case CollectiveKind::ReduceScatter: {
        std::vector<const char*> src;
        for (int r = 0; r < n; ++r) src.push_back(in_of(r) + rank_ * c * es);
        reduce_dispatch(s.dtype, src, {s.out}, 0, c, s.op == ReduceOp::Avg);
        break;
      }
      case CollectiveKind::Broadcast:
        if (rank_ != s.root && c > 0) std::memcpy(s.out, in_of(s.root), size_t(c * es));
        break;
      case CollectiveKind::AllGather:
        for (int r = 0; r < n && c > 0; ++r)
          std::memcpy(s.out + r * c * es, in_of(r), size_t(c * es));
        break;
      case CollectiveKind::AllToAll:
        for (int r = 0; r < n && c > 0; ++r)
          std::memcpy(s.out + r * c * es, in_of(r) + rank_ * c * es, size_t(c * es));
        break;
      case CollectiveKind::Barrier:
        break;
    }
    g.meet(rank_, nullptr, where + " (leaving)", Clock::now() + options_.timeout);
  }

  using State = LocalGroup::State;
  std::shared_ptr<State> g_;
  int rank_;
  int64_t seq_ = 0;
  std::thread worker_;
  std::mutex qmu_;
  std::condition_variable qcv_;
  std::deque<std::shared_ptr<LocalWork>> queue_;
  bool busy_ = false, stop_ = false;
};

}  // namespace

LocalGroup::LocalGroup(int size, Options o) {
  AIM_CHECK(size >= 1, "dist local: group size must be >= 1, got ", size);
  AIM_CHECK(o.timeout.count() > 0, "dist local: timeout must be positive, got ", o.timeout.count(),
            " ms");
  state_ = std::make_shared<State>(size, o);
}

LocalGroup::~LocalGroup() = default;

int LocalGroup::size() const { return state_->n; }

std::unique_ptr<Communicator> LocalGroup::communicator(int rank) {
  AIM_CHECK(rank >= 0 && rank < state_->n, "dist local: rank ", rank, " is not in a group of ",
            state_->n);
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    AIM_CHECK(!state_->taken[size_t(rank)], "dist local: the communicator of rank ", rank,
              " was already created");
    state_->taken[size_t(rank)] = true;
  }
  return std::make_unique<LocalCommunicator>(state_, rank);
}

}  // namespace aim::dist
