// box_iou, nms: own CUDA variants.
// box_iou cuda.grid: one thread per (image, i, j) output, grid-stride; boxes through L1/L2.
// nms cuda.bitmask (torchvision's CUDA NMS decomposition, with the ordering done in place):
//   1. order: positions filled with -1, then one thread per candidate computes its rank among
//      the image's candidates (score > threshold; decreasing score, ties by lower index: the CPU's
//      stable order) by comparing with every other score, O(K^2) per image, and writes its index
//      there;
//   2. mask: blocks of 64 x 64 (sorted row block r, column block c >= r); the 64 column boxes,
//      areas and groups staged in shared memory; thread i sets bit u of word mask[i][c] when
//      sorted candidate c*64 + u comes later, is in i's group and has IoU > threshold with it;
//   3. scan: one warp per image walks the sorted candidates in order, keeps those whose bit in
//      the removed-words (shared memory) is clear, ORs each kept row's words into them (lanes
//      over words), stops at max_out, writes keep (then -1) and count.
// hard_negatives cuda.rank: one block per image, each negative's rank among the image's
//   negatives by comparing with all of them (O(P^2)); chosen when rank < k.
// Traffic: nms step 2 writes K * ceil(K / 64) words per image (1.1 MB at K = 3000); step 3 reads
// the kept rows only. Bound: step 1's K^2 comparisons for large K (no device sort yet); step 3 is
// sequential per image. Limits: ceil(K / 64) <= 6144 (the removed words in 48 KB of shared
// memory: K <= 393216). Not yet timed on a GPU.
#include "kernels/cuda_common.h"
// (cuda_common.h first, as every *_cuda.cu)
#include "kernels/boxes/boxes.h"

namespace aim::kernels::AIM_CUDA_NS {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxWords = 6144;

template <class T>
__global__ void box_iou_kernel(const T* a, const T* b, T* out, int64_t N, int64_t M,
                               int64_t total) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = e / M, j = e % M, img = r / N;
    const T* p = a + r * 4;
    const T* q = b + (img * M + j) * 4;
    out[e] = box_iou_value(p, box_area(p), q, box_area(q));
  }
}

__global__ void fill_minus_one(int64_t* p, int64_t n) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x)
    p[e] = -1;
}

// Step 1: order[img][rank] = i for every candidate i of image blockIdx.y.
template <class T>
__global__ void rank_kernel(const T* scores, int64_t* order, int64_t K, double score_threshold) {
  const int64_t img = blockIdx.y;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= K) return;
  const T* s = scores + img * K;
  const T si = s[i];
  if (!(double(si) > score_threshold)) return;
  int64_t rank = 0;
  for (int64_t j = 0; j < K; ++j) {
    const T sj = s[j];
    if (!(double(sj) > score_threshold)) continue;
    rank += (sj > si) || (j < i && !(si > sj));
  }
  order[img * K + rank] = i;
}

// Step 2: mask[img][i][c], bits of the later candidates of block c that sorted candidate i
// suppresses. Grid (c, r, img), 64 threads.
template <class T>
__global__ void mask_kernel(const T* boxes, const int64_t* groups, const int64_t* order,
                            unsigned long long* mask, int64_t K, int64_t W, double iou_threshold) {
  const int64_t c = blockIdx.x, r = blockIdx.y, img = blockIdx.z;
  if (c < r) return;
  __shared__ T col_box[64 * 4];
  __shared__ T col_area[64];
  __shared__ int64_t col_group[64];
  __shared__ int64_t col_valid[64];
  const int t = threadIdx.x;
  const int64_t* ord = order + img * K;
  const int64_t j = c * 64 + t;
  const int64_t oj = j < K ? ord[j] : -1;
  col_valid[t] = oj;
  if (oj >= 0) {
    const T* q = boxes + (img * K + oj) * 4;
    for (int k = 0; k < 4; ++k) col_box[t * 4 + k] = q[k];
    col_area[t] = box_area(q);
    col_group[t] = groups ? groups[img * K + oj] : 0;
  }
  __syncthreads();
  const int64_t i = r * 64 + t;
  if (i >= K) return;
  const int64_t oi = ord[i];
  if (oi < 0) return;
  T p[4];
  const T* src = boxes + (img * K + oi) * 4;
  for (int k = 0; k < 4; ++k) p[k] = src[k];
  const T area_p = box_area(p);
  const int64_t gi = groups ? groups[img * K + oi] : 0;
  unsigned long long bits = 0;
  for (int u = 0; u < 64; ++u) {
    const int64_t jj = c * 64 + u;
    if (jj <= i || col_valid[u] < 0 || col_group[u] != gi) continue;
    if (double(box_iou_value(p, area_p, col_box + u * 4, col_area[u])) > iou_threshold)
      bits |= 1ull << u;
  }
  mask[(img * K + i) * W + c] = bits;
}

// Step 3: one warp per image.
__global__ void scan_kernel(const int64_t* order, const unsigned long long* mask, int64_t* keep,
                            int64_t* count, int64_t K, int64_t W, int64_t max_out) {
  AIM_DYNAMIC_SHARED(unsigned long long, removed);
  const int64_t img = blockIdx.x;
  const int lane = threadIdx.x;
  for (int64_t w = lane; w < W; w += 32) removed[w] = 0;
  __syncwarp();
  const int64_t* ord = order + img * K;
  int64_t* kp = keep + img * K;
  int64_t kept = 0;
  for (int64_t i = 0; i < K; ++i) {
    const int64_t oi = ord[i];
    if (oi < 0) break;  // past the candidates
    const int64_t word = i / 64;
    if ((removed[word] >> (i % 64)) & 1ull) continue;
    if (max_out > 0 && kept == max_out) break;
    if (lane == 0) kp[kept] = oi;
    ++kept;
    const unsigned long long* row = mask + (img * K + i) * W;
    for (int64_t w = word + lane; w < W; w += 32) removed[w] |= row[w];
    __syncwarp();
  }
  for (int64_t r = kept + lane; r < K; r += 32) kp[r] = -1;
  if (lane == 0) count[img] = kept;
}

// hard_negatives: one block per image. The positives and negatives counted (shared atomics on
// integers: exact), then each thread ranks its negatives among the image's by comparing with every
// other (O(P^2) per image: 76M comparisons at SSD's 8732 priors, through L1/L2).
template <class T>
__global__ void hard_negatives_kernel(const T* loss, const int64_t* labels, uint8_t* out, int64_t P,
                                      double ratio) {
  __shared__ unsigned long long counts[2];
  const int64_t img = blockIdx.x;
  const T* l = loss + img * P;
  const int64_t* lab = labels + img * P;
  if (threadIdx.x < 2) counts[threadIdx.x] = 0;
  __syncthreads();
  unsigned long long pos = 0, neg = 0;
  for (int64_t p = threadIdx.x; p < P; p += blockDim.x) {
    pos += lab[p] > 0;
    neg += lab[p] == 0;
  }
  atomicAdd(&counts[0], pos);
  atomicAdd(&counts[1], neg);
  __syncthreads();
  const int64_t k = hard_negative_count(ratio, int64_t(counts[0]), int64_t(counts[1]));
  for (int64_t p = threadIdx.x; p < P; p += blockDim.x) {
    uint8_t chosen = 0;
    if (lab[p] == 0 && k > 0) {
      const T lp = l[p];
      int64_t rank = 0;
      for (int64_t q = 0; q < P && rank < k; ++q)
        rank += lab[q] == 0 && (l[q] > lp || (q < p && !(lp > l[q])));
      chosen = rank < k;
    }
    out[img * P + p] = chosen;
  }
}

void hard_negatives_cuda_rank(const HardNegativesArgs& a) {
  check_hard_negatives_args(a);
  const int64_t B = a.loss.size(0), P = a.loss.size(1);
  if (B == 0 || P == 0) return;
  AIM_CHECK(B <= 2147483647, "[hard_negatives] cuda.rank: at most 2^31 - 1 images");
  auto launch = [&](auto tag) {
    using T = decltype(tag);
    AIM_LAUNCH(unsigned(B), kThreads, 0, stream_for(a.loss.device()), hard_negatives_kernel<T>)
    (static_cast<const T*>(a.loss.raw_data()), a.labels.data<int64_t>(),
     a.negatives.data<uint8_t>(), P, a.ratio);
    AIM_CHECK_LAUNCH();
  };
  if (a.loss.dtype() == DType::f32)
    launch(float{});
  else
    launch(double{});
}

std::string nms_supports(const NmsArgs& a) {
  const int64_t W = ceil_div(a.boxes.size(1), 64);
  if (W > kMaxWords)
    return str("cuda.bitmask: at most ", kMaxWords * 64, " boxes per image, got ", a.boxes.size(1));
  if (a.boxes.size(0) > 65535) return "cuda.bitmask: at most 65535 images per call";
  return "";
}

void box_iou_cuda_grid(const BoxIouArgs& a) {
  check_box_iou_args(a);
  const int64_t total = a.iou.numel();
  if (total == 0) return;
  const Device dev = a.a.device();
  const int64_t N = a.a.size(1), M = a.b.size(1);
  auto launch = [&](auto tag) {
    using T = decltype(tag);
    AIM_LAUNCH(grid_for(total, kThreads), kThreads, 0, stream_for(dev), box_iou_kernel<T>)
    (static_cast<const T*>(a.a.raw_data()), static_cast<const T*>(a.b.raw_data()),
     static_cast<T*>(a.iou.raw_data()), N, M, total);
    AIM_CHECK_LAUNCH();
  };
  if (a.a.dtype() == DType::f32)
    launch(float{});
  else
    launch(double{});
}

void nms_cuda_bitmask(const NmsArgs& a) {
  check_nms_args(a);
  if (auto why = nms_supports(a); !why.empty()) AIM_FAIL("[nms] ", why);
  const int64_t B = a.boxes.size(0), K = a.boxes.size(1), W = ceil_div(K, 64);
  if (B == 0) return;
  const Device dev = a.boxes.device();
  const cudaStream_t st = stream_for(dev);
  Tensor order = Tensor::empty({std::max<int64_t>(B * K, 1)}, DType::i64, dev);
  Tensor mask = Tensor::empty({std::max<int64_t>(B * K * W, 1)}, DType::i64, dev);
  int64_t* ord = order.data<int64_t>();
  if (K > 0) {
    AIM_LAUNCH(grid_for(B * K, kThreads), kThreads, 0, st, fill_minus_one)(ord, B * K);
    AIM_CHECK_LAUNCH();
  }
  auto steps = [&](auto tag) {
    using T = decltype(tag);
    const T* boxes = static_cast<const T*>(a.boxes.raw_data());
    const T* scores = static_cast<const T*>(a.scores.raw_data());
    if (K > 0) {
      const dim3 rank_grid{unsigned(ceil_div(K, kThreads)), unsigned(B)};
      AIM_LAUNCH(rank_grid, kThreads, 0, st, rank_kernel<T>)
      (scores, ord, K, a.score_threshold);
      AIM_CHECK_LAUNCH();
      const dim3 mask_grid{unsigned(W), unsigned(W), unsigned(B)};
      AIM_LAUNCH(mask_grid, 64, 0, st, mask_kernel<T>)
      (boxes, a.groups.defined() ? a.groups.data<int64_t>() : nullptr, ord,
       reinterpret_cast<unsigned long long*>(mask.data<int64_t>()), K, W, a.iou_threshold);
      AIM_CHECK_LAUNCH();
    }
  };
  if (a.boxes.dtype() == DType::f32)
    steps(float{});
  else
    steps(double{});
  AIM_LAUNCH(unsigned(B), 32, size_t(std::max<int64_t>(W, 1)) * 8, st, scan_kernel)
  (ord, reinterpret_cast<const unsigned long long*>(mask.data<int64_t>()), a.keep.data<int64_t>(),
   a.count.data<int64_t>(), K, W, a.max_out);
  AIM_CHECK_LAUNCH();
}

}  // namespace

void register_boxes_cuda(Registry& r) {
  const std::vector<DType> dt = {DType::f32, DType::f64};
  r.op<BoxIouArgs>("box_iou").add(
      {"cuda.grid", AIM_CUDA_BACKEND, Provider::Own, box_iou_cuda_grid, dt});
  r.op<NmsArgs>("nms").add(
      {"cuda.bitmask", AIM_CUDA_BACKEND, Provider::Own, nms_cuda_bitmask, dt, nms_supports});
  r.op<HardNegativesArgs>("hard_negatives")
      .add({"cuda.rank", AIM_CUDA_BACKEND, Provider::Own, hard_negatives_cuda_rank, dt});
  r.op<HardNegativesArgs>("hard_negatives").set_default(AIM_CUDA_BACKEND, "cuda.rank");
  r.op<BoxIouArgs>("box_iou").set_default(AIM_CUDA_BACKEND, "cuda.grid");
  r.op<NmsArgs>("nms").set_default(AIM_CUDA_BACKEND, "cuda.bitmask");
}

}  // namespace aim::kernels::AIM_CUDA_NS
