// Key buckets: the deterministic counting sort of positions by integer key behind the own
// deterministic scatter-adds (embedding_bwd, index_add, scatter_add, roi_pool_bwd cuda.sorted).
// Compiles as CUDA and, for the SIMT emulator, as C++. Include after kernels/cuda_common.h.
//
// Input: n positions 0 .. n-1, each with a key in [0, nkeys) or -1 (skipped), given by a key
// function (below). Output, in scratch memory (KeyBuckets):
//   offsets[nkeys + 1]: the positions with key v are sorted[offsets[v] .. offsets[v + 1]);
//   sorted[n]: the positions grouped by key, increasing within each key;
//   uniq[0 .. meta[0]): the keys that occur, increasing.
// Stages (one launch each, on one stream, no host synchronisation: fit for graph capture):
//   1. count: count[v] = number of positions with key v, by integer atomicAdd (exact, so the
//      order of the adds does not matter). Also the one call per position where the key function
//      may record bad input (kernels/error_flag.h).
//   2. scan: one block of kKeyBucketsScanThreads: exclusive scan of count -> offsets, and the
//      compacted list uniq; count is reset to 0 for reuse as the bucket cursor.
//   3. place: bucket[offsets[v] + atomicAdd(cursor[v], 1)] = position. The slot a position gets
//      inside its bucket depends on the scheduling...
//   4. rank: ...so each position's final slot is offsets[v] + (number of smaller positions in its
//      bucket), which does not: sorted is a function of the keys alone. O(sum of bucket sizes^2):
//      fine for spread keys, quadratic in the size of one huge bucket.
// A consumer that reduces each bucket in sorted order (e.g. one thread per uniq key) therefore
// gets the same bits on every run, whatever the scheduling.
// Scratch: int32, (stored keys ? n : 0) + 2 * nkeys + 2 * n + min(n, nkeys) + 2.
// Limits: n and nkeys < 2^31 - 2 (int32 positions, offsets and keys).
#pragma once
#include <algorithm>

#include "kernels/cuda_common.h"

namespace aim::kernels::AIM_CUDA_NS {

// A key function is a small struct passed by value to the kernels with
//   __device__ int operator()(int64_t i, bool check) const
// giving position i's key, or -1 to skip it. check is true in stage 1 only (once per position):
// where it records bad input; later stages call it with false and must get the same key.

// Keys written beforehand into KeyBuckets::keys (by the caller's own kernel).
struct StoredKeys {
  const int* keys;
  __device__ __forceinline__ int operator()(int64_t i, bool) const { return keys[i]; }
};

constexpr int kKeyBucketsThreads = 256;
constexpr int kKeyBucketsScanThreads = 1024;

// Stage 1. count == nullptr: only the key function's checks run (a validation pass).
template <class Key>
__global__ void key_buckets_count_kernel(Key key, int64_t n, int* count) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int v = key(i, true);
    if (count && v >= 0) atomicAdd(count + v, 1);
  }
}

// Stage 2, one block. offsets[v] = sum of count[u < v], offsets[V] = total; uniq = the v with
// count > 0 in increasing order, meta[0] = their number. count is reset to 0 (bucket cursor).
// A template only so that the header can define it in every file that includes it.
template <int kThreads>
__global__ void key_buckets_scan_kernel(int* count, int* offsets, int* uniq, int* meta, int64_t V) {
  __shared__ int tot_c[kThreads];
  __shared__ int tot_u[kThreads];
  const int64_t per = ceil_div(V, kThreads);
  const int64_t v0 = int64_t(threadIdx.x) * per;
  const int64_t v1 = v0 + per < V ? v0 + per : V;
  int sc = 0, su = 0;
  for (int64_t v = v0; v < v1; ++v) {
    sc += count[v];
    su += count[v] > 0;
  }
  tot_c[threadIdx.x] = sc;
  tot_u[threadIdx.x] = su;
  __syncthreads();
  if (threadIdx.x == 0) {  // kThreads serial steps: negligible next to the other stages
    int ac = 0, au = 0;
    for (int t = 0; t < kThreads; ++t) {
      const int c = tot_c[t], u = tot_u[t];
      tot_c[t] = ac;
      tot_u[t] = au;
      ac += c;
      au += u;
    }
    offsets[V] = ac;
    meta[0] = au;
  }
  __syncthreads();
  int oc = tot_c[threadIdx.x], ou = tot_u[threadIdx.x];
  for (int64_t v = v0; v < v1; ++v) {
    const int k = count[v];
    offsets[v] = oc;
    if (k > 0) uniq[ou++] = int(v);
    oc += k;
    count[v] = 0;
  }
}

// Stage 3: slot order inside a bucket is arbitrary.
template <class Key>
__global__ void key_buckets_place_kernel(Key key, int64_t n, const int* offsets, int* cursor,
                                         int* bucket) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int v = key(i, false);
    if (v >= 0) bucket[offsets[v] + atomicAdd(cursor + v, 1)] = int(i);
  }
}

// Stage 4: rank = number of smaller positions in the bucket: deterministic.
template <class Key>
__global__ void key_buckets_rank_kernel(Key key, int64_t n, const int* offsets, const int* bucket,
                                        int* sorted) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int v = key(i, false);
    if (v < 0) continue;
    const int b = offsets[v], e = offsets[v + 1];
    int r = 0;
    for (int j = b; j < e; ++j) r += bucket[j] < int(i);
    sorted[b + r] = int(i);
  }
}

// The scratch of one sort (caching allocator, on dev) and the pipeline on it.
struct KeyBuckets {
  Tensor scratch;
  int* keys = nullptr;  // [n] when allocated with stored_keys, for StoredKeys
  int *count, *offsets, *bucket, *sorted, *uniq, *meta;
  int64_t n, nkeys, max_uniq;  // max_uniq = min(n, nkeys): the size of uniq

  KeyBuckets(int64_t positions, int64_t keys_count, Device dev, bool stored_keys)
      : n(positions), nkeys(keys_count), max_uniq(std::min(positions, keys_count)) {
    const int64_t nk = stored_keys ? n : 0;
    scratch = Tensor::empty({nk + 2 * nkeys + 2 * n + max_uniq + 2}, DType::i32, dev);
    int* p = scratch.data<int32_t>();
    if (stored_keys) keys = p;
    count = p + nk;
    offsets = count + nkeys;
    bucket = offsets + nkeys + 1;
    sorted = bucket + n;
    uniq = sorted + n;
    meta = uniq + max_uniq;
    memset_zero(count, size_t(nkeys) * 4, dev);
  }

  // Stages 1-4 on `stream`, positions 0 .. n-1 keyed by `key` (StoredKeys{keys} once the keys
  // are written). n > 0.
  template <class Key>
  void sort(Key key, cudaStream_t stream) const {
    const unsigned grid = grid_for(n, kKeyBucketsThreads);
    AIM_LAUNCH(grid, kKeyBucketsThreads, 0, stream, key_buckets_count_kernel<Key>)(key, n, count);
    AIM_CHECK_LAUNCH();
    AIM_LAUNCH(1, kKeyBucketsScanThreads, 0, stream,
               key_buckets_scan_kernel<kKeyBucketsScanThreads>)
    (count, offsets, uniq, meta, nkeys);
    AIM_CHECK_LAUNCH();
    AIM_LAUNCH(grid, kKeyBucketsThreads, 0, stream, key_buckets_place_kernel<Key>)
    (key, n, offsets, count, bucket);
    AIM_CHECK_LAUNCH();
    AIM_LAUNCH(grid, kKeyBucketsThreads, 0, stream, key_buckets_rank_kernel<Key>)
    (key, n, offsets, bucket, sorted);
    AIM_CHECK_LAUNCH();
  }
};

// Below this, positions and keys fit the int32 scratch.
constexpr int64_t kKeyBucketsLimit = int64_t(0x7fffffff) - 2;

}  // namespace aim::kernels::AIM_CUDA_NS
