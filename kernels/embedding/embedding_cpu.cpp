// cpu.ref: the oracle. Forward copies rows; backward sums each row's gradient in position order
// in double and adds it once into dweight.
// cpu.omp: forward OpenMP over positions. Backward sort-based: validate, stable-sort positions
// by index (so equal indices stay in position order), then OpenMP over the unique indices: each
// row is summed by one thread in position order (float, double for f64) and added once:
// deterministic, no atomics, result independent of the thread count.
// Test cases: embedding_cases.cpp.
#include "kernels/embedding/embedding_cpu.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "kernels/elementwise/loops_cpu.h"
#include "kernels/embedding/embedding.h"
#include "kernels/registry.h"

namespace aim::kernels {

void embedding_index_error(const char* op, int64_t position, int64_t index, int64_t V) {
  AIM_FAIL("[", op, "] index ", index, " at position ", position, " is out of range for V = ", V,
           " (expected 0 <= index < ", V, ")");
}

namespace {
// [N, C] with each row contiguous and rows at least C apart (not overlapping).
bool rows_dense(const Tensor& t) {
  return t.dim() == 2 && (t.size(1) <= 1 || t.stride(1) == 1) &&
         (t.size(0) <= 1 || t.stride(0) >= t.size(1));
}
}  // namespace

void check_embedding_fwd_args(const EmbeddingFwdArgs& a) {
  AIM_CHECK(a.weight.dim() == 2 && a.weight.is_contiguous(),
            "[embedding_fwd] weight must be a contiguous [V, C], got ",
            to_string(a.weight.sizes()));
  AIM_CHECK(a.indices.dim() == 1 && a.indices.is_contiguous() &&
                (a.indices.dtype() == DType::i32 || a.indices.dtype() == DType::i64),
            "[embedding_fwd] indices must be a contiguous [N] i32/i64, got ",
            to_string(a.indices.sizes()), " ", dtype_name(a.indices.dtype()));
  const Shape want{a.indices.size(0), a.weight.size(1)};
  AIM_CHECK(a.out.sizes() == want && a.out.dtype() == a.weight.dtype() && rows_dense(a.out),
            "[embedding_fwd] out must be a ", to_string(want), " ", dtype_name(a.weight.dtype()),
            " with contiguous rows, got ", to_string(a.out.sizes()), " ", dtype_name(a.out.dtype()),
            " strides ", to_string(a.out.strides()));
  AIM_CHECK(a.padding_idx < a.weight.size(0), "[embedding_fwd] padding_idx ", a.padding_idx,
            " out of range for V = ", a.weight.size(0));
}

void check_embedding_bwd_args(const EmbeddingBwdArgs& a) {
  AIM_CHECK(a.dweight.dim() == 2 && a.dweight.is_contiguous(),
            "[embedding_bwd] dweight must be a contiguous [V, C], got ",
            to_string(a.dweight.sizes()));
  AIM_CHECK(a.indices.dim() == 1 && a.indices.is_contiguous() &&
                (a.indices.dtype() == DType::i32 || a.indices.dtype() == DType::i64),
            "[embedding_bwd] indices must be a contiguous [N] i32/i64, got ",
            to_string(a.indices.sizes()), " ", dtype_name(a.indices.dtype()));
  const Shape want{a.indices.size(0), a.dweight.size(1)};
  AIM_CHECK(a.dout.sizes() == want && a.dout.dtype() == a.dweight.dtype() && rows_dense(a.dout),
            "[embedding_bwd] dout must be a ", to_string(want), " ", dtype_name(a.dweight.dtype()),
            " with contiguous rows, got ", to_string(a.dout.sizes()), " ",
            dtype_name(a.dout.dtype()), " strides ", to_string(a.dout.strides()));
  AIM_CHECK(a.padding_idx < a.dweight.size(0), "[embedding_bwd] padding_idx ", a.padding_idx,
            " out of range for V = ", a.dweight.size(0));
}

namespace {

template <class I>
void check_indices(const char* op, const I* idx, int64_t N, int64_t V) {
  for (int64_t n = 0; n < N; ++n)
    if (idx[n] < 0 || int64_t(idx[n]) >= V) embedding_index_error(op, n, int64_t(idx[n]), V);
}

// ---- cpu.ref --------------------------------------------------------------------------------

template <class T, class I>
void fwd_ref(const EmbeddingFwdArgs& a) {
  const int64_t N = a.indices.size(0), V = a.weight.size(0), C = a.weight.size(1);
  const int64_t ld = embedding_row_stride(a.out);
  const I* idx = a.indices.data<I>();
  const T* w = a.weight.data<T>();
  T* out = a.out.data<T>();
  for (int64_t n = 0; n < N; ++n) {
    const int64_t v = int64_t(idx[n]);
    if (v < 0 || v >= V) embedding_index_error("embedding_fwd", n, v, V);
    for (int64_t c = 0; c < C; ++c) out[n * ld + c] = w[v * C + c];
  }
}

template <class T, class I>
void bwd_ref(const EmbeddingBwdArgs& a) {
  const int64_t N = a.indices.size(0), V = a.dweight.size(0), C = a.dweight.size(1);
  const int64_t ld = embedding_row_stride(a.dout);
  const I* idx = a.indices.data<I>();
  const T* dout = a.dout.data<T>();
  T* dw = a.dweight.data<T>();
  std::vector<double> acc(size_t(V * C), 0.0);
  std::vector<char> touched(size_t(V), 0);
  for (int64_t n = 0; n < N; ++n) {
    const int64_t v = int64_t(idx[n]);
    if (v < 0 || v >= V) embedding_index_error("embedding_bwd", n, v, V);
    if (v == a.padding_idx) continue;  // the padding row gets no gradient
    touched[size_t(v)] = 1;
    for (int64_t c = 0; c < C; ++c) acc[size_t(v * C + c)] += double(dout[n * ld + c]);
  }
  for (int64_t v = 0; v < V; ++v)
    if (touched[size_t(v)])
      for (int64_t c = 0; c < C; ++c)
        dw[v * C + c] = T(double(dw[v * C + c]) + acc[size_t(v * C + c)]);
}

void embedding_fwd_cpu_ref(const EmbeddingFwdArgs& a) {
  check_embedding_fwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.weight.dtype(), T, {
    AIM_DISPATCH_INDEX_TYPES(a.indices.dtype(), I, { fwd_ref<T, I>(a); });
  });
}

void embedding_bwd_cpu_ref(const EmbeddingBwdArgs& a) {
  check_embedding_bwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.dweight.dtype(), T, {
    AIM_DISPATCH_INDEX_TYPES(a.indices.dtype(), I, { bwd_ref<T, I>(a); });
  });
}

// ---- cpu.omp --------------------------------------------------------------------------------

// One gathered row: plain copies, or (stream) non-temporal stores of its whole 32-byte pieces
// (dst 32-byte aligned), the rest copied.
template <class T>
void copy_row(const T* src, int64_t C, T* dst, bool stream) {
  if (!stream) return void(std::copy(src, src + C, dst));
  const size_t bytes = size_t(C) * sizeof(T), whole = bytes / 32 * 32;
  ew_detail::stream_bytes(dst, src, whole);
  std::memcpy(reinterpret_cast<char*>(dst) + whole, reinterpret_cast<const char*>(src) + whole,
              bytes - whole);
}

template <class T, class I>
void fwd_omp(const EmbeddingFwdArgs& a) {
  const int64_t N = a.indices.size(0), V = a.weight.size(0), C = a.weight.size(1);
  const I* idx = a.indices.data<I>();
  check_indices("embedding_fwd", idx, N, V);  // before any write: the first bad one is named
  const T* w = a.weight.data<T>();
  T* out = a.out.data<T>();
  const int64_t ld = embedding_row_stride(a.out);
  // An output beyond the L3 has left the caches before its reader runs: streamed, its lines are
  // not read for ownership first (DIN's 52 MB history keys at batch 1024: embedding_fwd 5.0 ->
  // 3.4-3.9 ms per batch in `aim-infer din --profile`).
  const bool stream = AIM_EW_CAN_STREAM && beyond_l3(N * ld * int64_t(sizeof(T))) &&
                      reinterpret_cast<uintptr_t>(out) % 32 == 0 && (ld * sizeof(T)) % 32 == 0;
#pragma omp parallel if (N * C > (int64_t(1) << 15))
  {
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) copy_row(w + int64_t(idx[n]) * C, C, out + n * ld, stream);
    if (stream) ew_detail::stream_fence();  // each thread orders its own streamed stores
  }
}

template <class T, class I>
void bwd_omp(const EmbeddingBwdArgs& a) {
  using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const int64_t N = a.indices.size(0), V = a.dweight.size(0), C = a.dweight.size(1);
  const I* idx = a.indices.data<I>();
  check_indices("embedding_bwd", idx, N, V);
  const T* dout = a.dout.data<T>();
  const int64_t ld = embedding_row_stride(a.dout);
  T* dw = a.dweight.data<T>();
  // Positions grouped by index, each group in position order (so sums are deterministic).
  std::vector<int64_t> pos, starts;  // starts: start of each run of equal indices in pos
  if (V <= 8 * N + (int64_t(1) << 16)) {
    // Counting sort, O(N + V): DIN's 25 600 history positions over 63 001 items take ~0.2 ms
    // instead of ~2 ms for a comparison sort.
    std::vector<int64_t> offset(size_t(V) + 1, 0);
    for (int64_t n = 0; n < N; ++n)
      if (int64_t(idx[n]) != a.padding_idx) ++offset[size_t(idx[n]) + 1];
    for (int64_t v = 0; v < V; ++v) {
      if (offset[size_t(v) + 1] > 0) starts.push_back(offset[size_t(v)]);
      offset[size_t(v) + 1] += offset[size_t(v)];
    }
    pos.resize(size_t(offset[size_t(V)]));
    for (int64_t n = 0; n < N; ++n)
      if (int64_t(idx[n]) != a.padding_idx) pos[size_t(offset[size_t(idx[n])]++)] = n;
  } else {
    pos.reserve(size_t(N));
    for (int64_t n = 0; n < N; ++n)
      if (int64_t(idx[n]) != a.padding_idx) pos.push_back(n);
    std::stable_sort(pos.begin(), pos.end(),
                     [idx](int64_t p, int64_t q) { return idx[p] < idx[q]; });
    for (size_t i = 0; i < pos.size(); ++i)
      if (i == 0 || idx[pos[i]] != idx[pos[i - 1]]) starts.push_back(int64_t(i));
  }
  starts.push_back(int64_t(pos.size()));
  const int64_t runs = int64_t(starts.size()) - 1;
#pragma omp parallel if (int64_t(pos.size()) * C > (int64_t(1) << 15))
  {
    std::vector<A> acc(static_cast<size_t>(C));
#pragma omp for schedule(dynamic, 16)
    for (int64_t r = 0; r < runs; ++r) {
      std::fill(acc.begin(), acc.end(), A(0));
      for (int64_t i = starts[size_t(r)]; i < starts[size_t(r) + 1]; ++i) {
        const T* g = dout + pos[size_t(i)] * ld;
        for (int64_t c = 0; c < C; ++c) acc[size_t(c)] += A(g[c]);
      }
      T* row = dw + int64_t(idx[pos[size_t(starts[size_t(r)])]]) * C;
      for (int64_t c = 0; c < C; ++c) row[c] = T(A(row[c]) + acc[size_t(c)]);
    }
  }
}

void embedding_fwd_cpu_omp(const EmbeddingFwdArgs& a) {
  check_embedding_fwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.weight.dtype(), T, {
    AIM_DISPATCH_INDEX_TYPES(a.indices.dtype(), I, { fwd_omp<T, I>(a); });
  });
}

void embedding_bwd_cpu_omp(const EmbeddingBwdArgs& a) {
  check_embedding_bwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.dweight.dtype(), T, {
    AIM_DISPATCH_INDEX_TYPES(a.indices.dtype(), I, { bwd_omp<T, I>(a); });
  });
}

std::vector<DType> float_dtypes() { return {DType::f32, DType::f64, DType::f16, DType::bf16}; }

}  // namespace

void embedding_fwd(const EmbeddingFwdArgs& a) {
  AIM_DISPATCH_OP(EmbeddingFwdArgs, "embedding_fwd", a);
}
void embedding_bwd(const EmbeddingBwdArgs& a) {
  AIM_DISPATCH_OP(EmbeddingBwdArgs, "embedding_bwd", a);
}

void register_embedding_cpu(Registry& r) {
  const std::vector<TestShape> shapes = embedding_cpu::test_shapes();

  auto& f = r.op<EmbeddingFwdArgs>("embedding_fwd");
  f.description = "row gather (F.embedding)";
  f.add({"cpu.ref", Backend::CPU, Provider::Own, embedding_fwd_cpu_ref, float_dtypes()});
  f.add({"cpu.omp", Backend::CPU, Provider::Own, embedding_fwd_cpu_omp, float_dtypes()});
  f.set_default(Backend::CPU, "cpu.omp");
  f.set_cost(embedding_fwd_cost);
  f.make_case = embedding_cpu::make_fwd_case;
  f.set_shape_fields(embedding_cpu::shape_fields());
  f.add_test_shapes(shapes);
  f.small_enough_for_simt = embedding_cpu::simt_small;

  auto& b = r.op<EmbeddingBwdArgs>("embedding_bwd");
  b.description = "row scatter-add of the output gradient, padding row excluded";
  b.add({"cpu.ref", Backend::CPU, Provider::Own, embedding_bwd_cpu_ref, float_dtypes()});
  b.add({"cpu.omp", Backend::CPU, Provider::Own, embedding_bwd_cpu_omp, float_dtypes()});
  b.set_default(Backend::CPU, "cpu.omp");
  b.set_cost(embedding_bwd_cost);
  b.make_case = embedding_cpu::make_bwd_case;
  b.set_shape_fields(embedding_cpu::shape_fields());
  b.add_test_shapes(shapes);
  b.tolerance = embedding_cpu::bwd_tolerance;
  b.small_enough_for_simt = embedding_cpu::simt_small;
}

}  // namespace aim::kernels
