// The data-parallel reducer (reducer.h): bucket plan, ready hooks, in-order launches, finish.
#include "train/dist/reducer.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "layers/module.h"

namespace aim::dist {

namespace {

using autograd::Variable;
using autograd::VariableImpl;

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// FNV-1a over the bucket plan: ranks compare it once, so a model built differently on one rank
// is an error naming the ranks instead of mismatched collectives.
uint64_t fnv(uint64_t h, const void* p, size_t n) {
  const unsigned char* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

}  // namespace

struct Reducer::Impl {
  struct Param {
    std::string name;
    Variable var;
    bool sparse = false;
    int bucket = -1;
    int64_t offset = 0;
    Tensor view;  // the gradient's slice of the bucket, shaped like the parameter
    bool ready = false;
  };
  struct Bucket {
    Tensor flat;
    std::vector<int> params;
    int pending = 0;
    WorkPtr work;
  };

  Communicator& comm;
  ReducerOptions opt;
  std::vector<Param> params;
  std::vector<Bucket> buckets;
  int next_launch = 0;
  bool in_step = false;
  Clock::time_point t_begin;
  std::vector<int> launch_order;

  Impl(Communicator& c, ReducerOptions o) : comm(c), opt(std::move(o)) {}

  void begin() {
    for (const Param& p : params)
      AIM_CHECK(!p.ready,
                "dist reducer: begin() during a step whose gradients are already "
                "being reduced (",
                p.name, " is ready): call finish() first");
    for (Bucket& b : buckets) {
      b.pending = int(b.params.size());
      b.work.reset();
    }
    next_launch = 0;
    launch_order.clear();
    in_step = true;
    t_begin = Clock::now();
  }

  // Makes the parameter's .grad its view into the bucket (copying a tensor put there by the
  // engine or anyone else; zeros when it has none).
  void adopt(Param& p) {
    Tensor& g = p.var.mutable_grad();
    if (g.defined() && g.storage() == p.view.storage() && g.offset() == p.view.offset() &&
        g.sizes() == p.view.sizes() && g.dtype() == p.view.dtype())
      return;
    if (g.defined()) {
      AIM_CHECK(g.sizes() == p.view.sizes(), "dist reducer: gradient of ", p.name, " has shape ",
                to_string(g.sizes()), ", the parameter has ", to_string(p.view.sizes()));
      p.view.copy_(g);
    } else {
      p.view.zero_();
    }
    g = p.view;
  }

  void on_ready(int i) {
    if (!in_step) begin();
    Param& p = params[size_t(i)];
    AIM_CHECK(!p.ready, "dist reducer: the gradient of ", p.name,
              " became ready twice in one step (two backward passes without finish()?)");
    p.ready = true;
    if (p.sparse) return;
    adopt(p);
    if (--buckets[size_t(p.bucket)].pending == 0) launch_ready();
  }

  // Launches buckets strictly in order: each waits for its predecessors to be launched.
  void launch_ready() {
    while (next_launch < int(buckets.size()) && buckets[size_t(next_launch)].pending == 0) {
      Bucket& b = buckets[size_t(next_launch)];
      b.work = comm.all_reduce_async(b.flat, ReduceOp::Avg,
                                     "allreduce bucket " + std::to_string(next_launch));
      launch_order.push_back(next_launch);
      ++next_launch;
    }
  }
};

namespace {

struct ReducerHook {
  Reducer::Impl* impl;
  int index;
  void operator()(VariableImpl&) const { impl->on_ready(index); }
};

}  // namespace

Reducer::Reducer(Communicator& comm, NamedParameters named, ReducerOptions o)
    : impl_(std::make_unique<Impl>(comm, std::move(o))) {
  Impl& m = *impl_;
  AIM_CHECK(m.opt.bucket_mb > 0 && m.opt.first_bucket_mb > 0,
            "dist reducer: bucket sizes must be positive, got bucket_mb=", m.opt.bucket_mb,
            " first_bucket_mb=", m.opt.first_bucket_mb);
  std::set<std::string> unknown_sparse = m.opt.sparse;
  for (auto& [name, v] : named) {
    AIM_CHECK(v.defined(), "dist reducer: parameter ", name, " is undefined");
    unknown_sparse.erase(name);
    if (!v.requires_grad()) continue;
    Impl::Param p;
    p.name = name;
    p.var = v;
    p.sparse = m.opt.sparse.count(name) > 0;
    if (p.sparse)
      AIM_CHECK(v.dim() == 2, "dist reducer: sparse parameter ", name,
                " must be a 2-D embedding table [V, C], got ", to_string(v.sizes()));
    m.params.push_back(std::move(p));
  }
  if (!unknown_sparse.empty()) {
    std::string names;
    for (const auto& s : unknown_sparse) names += (names.empty() ? "" : ", ") + s;
    AIM_FAIL("dist reducer: sparse parameters not in the model: ", names);
  }

  // Buckets over the dense parameters in reverse registration order.
  const double kMB = 1024.0 * 1024.0;
  bool closed = true;  // the last bucket is full (or there is none)
  for (int i = int(m.params.size()) - 1; i >= 0; --i) {
    Impl::Param& p = m.params[size_t(i)];
    if (p.sparse) continue;
    const DType t = p.var.dtype();
    const Device d = p.var.device();
    // A parameter at least as large as the open bucket's capacity gets a bucket of its own
    // (DIN's 16 MB item table must not hold the small layers' gradients back until it is ready).
    const double open_cap =
        (bucket_info_.size() <= 1 ? m.opt.first_bucket_mb : m.opt.bucket_mb) * kMB;
    const bool own = !closed && double(p.var.numel() * dtype_size(t)) >= open_cap;
    if (closed || own || bucket_info_.back().dtype != t || bucket_info_.back().device != d) {
      bucket_info_.push_back(BucketInfo{{}, t, d, 0});
      m.buckets.emplace_back();
      closed = false;
    }
    BucketInfo& b = bucket_info_.back();
    p.bucket = int(m.buckets.size()) - 1;
    p.offset = b.numel;
    b.numel += p.var.numel();
    b.params.push_back(p.name);
    m.buckets.back().params.push_back(i);
    const double cap = (bucket_info_.size() == 1 ? m.opt.first_bucket_mb : m.opt.bucket_mb) * kMB;
    closed = double(b.bytes()) >= cap;
  }
  for (size_t k = 0; k < m.buckets.size(); ++k) {
    const BucketInfo& b = bucket_info_[k];
    m.buckets[k].flat = Tensor::zeros({b.numel}, b.dtype, b.device);
    for (int i : m.buckets[k].params) {
      Impl::Param& p = m.params[size_t(i)];
      p.view = m.buckets[k].flat.narrow(0, p.offset, p.var.numel()).view(p.var.sizes());
    }
  }

  // Every rank must have the same plan.
  uint64_t h = 1469598103934665603ull;
  for (const Impl::Param& p : m.params) {
    h = fnv(h, p.name.data(), p.name.size());
    const int64_t meta[3] = {p.var.numel(), int64_t(p.var.dtype()), p.sparse ? 1 : 0};
    h = fnv(h, meta, sizeof meta);
  }
  for (const BucketInfo& b : bucket_info_) h = fnv(h, &b.numel, sizeof b.numel);
  const int n = comm.size();
  Tensor mine = Tensor::from_vector<int64_t>({int64_t(h)}, {1}, comm.device());
  Tensor all = Tensor::empty({n}, DType::i64, comm.device());
  comm.all_gather(mine, all);
  const std::vector<int64_t> hs = all.to_vector<int64_t>();
  for (int r = 0; r < n; ++r)
    AIM_CHECK(hs[size_t(r)] == hs[0], "dist reducer: rank ", r,
              "'s parameters (names, sizes, dtypes, sparse set) differ from rank 0's: every rank "
              "must build the same model");

  for (size_t i = 0; i < m.params.size(); ++i)
    m.params[i].var.add_grad_ready_hook(ReducerHook{impl_.get(), int(i)});
}

Reducer::~Reducer() {
  for (Impl::Param& p : impl_->params) {
    auto& hooks = p.var.impl()->grad_ready_hooks;
    hooks.erase(std::remove_if(hooks.begin(), hooks.end(),
                               [&](const std::function<void(VariableImpl&)>& f) {
                                 const ReducerHook* r = f.target<ReducerHook>();
                                 return r && r->impl == impl_.get();
                               }),
                hooks.end());
  }
}

void Reducer::begin() { impl_->begin(); }

void Reducer::finish() {
  Impl& m = *impl_;
  if (!m.in_step) m.begin();
  const Clock::time_point t_bwd_end = Clock::now();
  m.in_step = false;  // a failure below leaves the next step to start afresh
  // Parameters without a gradient this step: zeros (or whatever .grad holds) into the sum.
  for (Impl::Param& p : m.params) {
    if (p.ready || p.sparse) continue;
    p.ready = true;
    m.adopt(p);
    --m.buckets[size_t(p.bucket)].pending;
  }
  m.launch_ready();
  AIM_CHECK(m.next_launch == int(m.buckets.size()), "dist reducer: only ", m.next_launch, " of ",
            m.buckets.size(), " buckets launched at finish()");
  ReducerStats s;
  s.step = stats_.step + 1;
  s.backward_s = seconds(m.t_begin, t_bwd_end);
  const Clock::time_point t_wait = Clock::now();
  for (Impl::Bucket& b : m.buckets) {
    b.work->wait();
    const double d = b.work->seconds();
    s.comm_s += d;
    const Clock::time_point a = std::max(b.work->started(), m.t_begin);
    const Clock::time_point e = std::min(b.work->ended(), t_bwd_end);
    if (e > a) s.overlapped_s += seconds(a, e);
    s.dense_bytes += b.flat.nbytes();
  }
  const Clock::time_point t_sparse = Clock::now();
  s.finish_wait_s = seconds(t_wait, t_sparse);
  for (Impl::Param& p : m.params) {
    if (!p.sparse) continue;
    Tensor& g = p.var.mutable_grad();
    if (!g.defined()) g = Tensor::zeros(p.var.sizes(), p.var.dtype(), p.var.device());
    s.sparse_rows += sparse_average_rows(m.comm, g);
  }
  s.sparse_s = seconds(t_sparse, Clock::now());
  s.hidden_fraction = s.comm_s > 0 ? s.overlapped_s / s.comm_s : 0.0;
  for (Impl::Param& p : m.params) p.ready = false;
  stats_ = s;
  last_launch_order_ = m.launch_order;
}

std::string Reducer::plan() const {
  std::string out;
  for (size_t k = 0; k < bucket_info_.size(); ++k) {
    const BucketInfo& b = bucket_info_[k];
    char mb[32];
    std::snprintf(mb, sizeof mb, "%.2f", double(b.bytes()) / (1024.0 * 1024.0));
    out += str("bucket ", k, ": ", dtype_name(b.dtype), " ", mb, " MB on ", b.device.str(), ", ",
               b.params.size(), " params (", b.params.front(), " .. ", b.params.back(), ")\n");
  }
  for (const Impl::Param& p : impl_->params)
    if (p.sparse) out += str("sparse: ", p.name, " ", to_string(p.var.sizes()), "\n");
  return out;
}

void broadcast_tensors(Communicator& comm, const std::vector<Tensor>& tensors, int root) {
  for (const Tensor& t : tensors) {
    if (t.is_contiguous() && t.device() == comm.device()) {
      comm.broadcast(t, root);
    } else {
      Tensor tmp = t.contiguous().to(comm.device());
      comm.broadcast(tmp, root);
      t.copy_(tmp);
    }
  }
}

void broadcast_parameters(Communicator& comm, const layers::Module& model, int root) {
  std::vector<Tensor> ts;
  for (const auto& [name, t] : model.state_dict()) ts.push_back(t);
  broadcast_tensors(comm, ts, root);
}

int64_t sparse_average_rows(Communicator& comm, const Tensor& grad) {
  AIM_CHECK(grad.dim() == 2 && grad.is_contiguous() && is_floating(grad.dtype()),
            "dist sparse_average_rows: gradient must be a contiguous float [V, C] tensor, got ",
            to_string(grad.sizes()), " ", dtype_name(grad.dtype()));
  AIM_CHECK(grad.device().is_cpu() && comm.device().is_cpu(),
            "dist sparse_average_rows: CPU tensors and a CPU communicator only (got a gradient "
            "on ",
            grad.device().str(), ", a ", comm.backend(), " communicator on ", comm.device().str(),
            "): use the dense all-reduce (--embedding-comm dense) on GPUs");
  const int n = comm.size();
  const int64_t V = grad.size(0), C = grad.size(1);
  int64_t sent = 0;
  AIM_DISPATCH_FLOAT_TYPES(grad.dtype(), T, {
    T* g = grad.data<T>();
    std::vector<int64_t> rows;
    for (int64_t v = 0; v < V; ++v)
      for (int64_t c = 0; c < C; ++c)
        if (float(g[v * C + c]) != 0.0f) {
          rows.push_back(v);
          break;
        }
    sent = int64_t(rows.size());
    Tensor cnt = Tensor::from_vector<int64_t>({sent}, {1});
    Tensor cnts = Tensor::empty({n}, DType::i64);
    comm.all_gather(cnt, cnts);
    const std::vector<int64_t> counts = cnts.to_vector<int64_t>();
    const int64_t kmax = *std::max_element(counts.begin(), counts.end());
    if (kmax > 0) {
      Tensor idx = Tensor::full({kmax}, -1.0, DType::i64);
      Tensor vals = Tensor::zeros({kmax, C}, grad.dtype());
      int64_t* ip = idx.data<int64_t>();
      T* vp = vals.data<T>();
      for (int64_t k = 0; k < sent; ++k) {
        ip[k] = rows[size_t(k)];
        std::copy(g + rows[size_t(k)] * C, g + (rows[size_t(k)] + 1) * C, vp + k * C);
      }
      Tensor all_idx = Tensor::empty({n * kmax}, DType::i64);
      Tensor all_vals = Tensor::empty({n * kmax, C}, grad.dtype());
      comm.all_gather(idx, all_idx);
      comm.all_gather(vals, all_vals);
      // Entries (row, position), stably sorted by row: rank order is kept within a row, so the
      // sum adds ranks in order 0..n-1 in double and rounds once, as the local all_reduce does.
      const int64_t* ai = all_idx.data<int64_t>();
      const T* av = all_vals.data<T>();
      std::vector<std::pair<int64_t, int64_t>> entries;
      for (int64_t e = 0; e < n * kmax; ++e) {
        if (ai[e] < 0) continue;
        AIM_CHECK(ai[e] < V, "dist sparse_average_rows: row ", ai[e], " from rank ", e / kmax,
                  " is outside the table of ", V, " rows");
        entries.emplace_back(ai[e], e);
      }
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      std::vector<double> acc(static_cast<size_t>(C));
      for (size_t a = 0; a < entries.size();) {
        size_t b = a;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (; b < entries.size() && entries[b].first == entries[a].first; ++b)
          for (int64_t c = 0; c < C; ++c) acc[size_t(c)] += double(av[entries[b].second * C + c]);
        T* dst = g + entries[a].first * C;
        for (int64_t c = 0; c < C; ++c) dst[c] = T(acc[size_t(c)] / double(n));
        a = b;
      }
    }
  });
  return sent;
}

}  // namespace aim::dist
