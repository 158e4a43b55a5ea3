// The batch chunks of the own CUDA conv2d variants (kernels/conv/conv2d.h): their kernels index
// with 32-bit ints and the launchers split a batch whose tensors reach 2^31 elements into chunks
// of whole images. The emulator cannot allocate such tensors cheaply, so these tests lower the
// chunk limit to a few images and check that every own variant (fwd, bwd_data, bwd_filter;
// cuda.implicit_gemm and cuda.implicit_gemm_tc) still equals cpu.ref over several chunks, and
// that a call whose single image exceeds the limit is refused by supports(), naming why.
#include <gtest/gtest.h>

#include <algorithm>

#include "kernels/conv/conv2d.h"
#include "kernels/registry.h"
#include "kernels/variant_check.h"

namespace aim::kernels {
namespace {

// Lowers the chunk limit for a scope.
struct ChunkLimit {
  explicit ChunkLimit(int64_t elems) { set_conv2d_chunk_elems(elems); }
  ~ChunkLimit() { set_conv2d_chunk_elems(0); }
};

// {N, C, H, W, K, R, S, stride, pad (-1: TF SAME), dil, groups, bias}: the registry's layout.
int64_t out_size(const TestShape& s, int64_t in, int64_t k) {
  if (s[8] < 0) return (in + s[7] - 1) / s[7];
  return conv2d_out_size(in, k, s[7], s[8], s[8], s[9]);
}
// The larger of one image of x and one image of y, in elements.
int64_t image_elems(const TestShape& s) {
  return std::max(s[1] * s[2] * s[3], s[4] * out_size(s, s[2], s[5]) * out_size(s, s[3], s[6]));
}

const char* const kOps[] = {"conv2d_fwd", "conv2d_bwd_data", "conv2d_bwd_filter"};

// Runs fn(op, variant) for every SIMT variant of the three conv2d ops.
template <class Fn>
int for_each_simt_variant(Fn fn) {
  int n = 0;
  for (OpBase* op : registry().ops()) {
    if (std::find(std::begin(kOps), std::end(kOps), op->name()) == std::end(kOps)) continue;
    for (const VariantInfo& v : op->variant_infos())
      if (v.backend == Backend::SIMT) {
        fn(*op, v);
        ++n;
      }
  }
  return n;
}

TEST(Simt_conv2d_chunks, SeveralChunksOfImagesEqualCpuRef) {
  struct Case {
    TestShape shape;
    int64_t images_per_chunk;
  };
  const Case cases[] = {
      {{7, 5, 4, 6, 9, 3, 3, 1, 1, 1, 1, 1}, 2},    // 4 chunks, the last one image
      {{9, 6, 3, 5, 4, 1, 1, 1, 0, 1, 2, 1}, 2},    // grouped pointwise
      {{6, 4, 5, 7, 6, 2, 2, 2, -1, 1, 1, 0}, 2},   // strided TF SAME (asymmetric pads)
      {{5, 3, 9, 11, 7, 3, 3, 1, 1, 1, 1, 1}, 3},   // chunks of 3 and 2
      {{4, 2, 24, 24, 3, 3, 3, 1, 1, 1, 1, 1}, 2},  // bwd_filter: several splits per chunk
  };
  uint64_t seed = 99;
  const int variants = for_each_simt_variant([&](OpBase& op, const VariantInfo& v) {
    for (const Case& c : cases) {
      const int64_t per = image_elems(c.shape);
      // The limit admits exactly images_per_chunk images (and the filter).
      ChunkLimit limit(c.images_per_chunk * per + per / 2);
      for (DType t : v.dtypes) {
        SCOPED_TRACE(op.name() + " " + v.name + " " + dtype_name(t) + " {" + shape_str(c.shape) +
                     "} limit " + std::to_string(conv2d_chunk_elems()));
        const CheckResult r = check_variant(op, v.name, v.backend, c.shape, t, seed++);
        EXPECT_EQ(r.status, CheckStatus::Pass) << r.message;
      }
    }
  });
  EXPECT_GE(variants, 6) << "cuda.implicit_gemm and cuda.implicit_gemm_tc, three directions each";
}

TEST(Simt_conv2d_chunks, ImagesPerChunkFollowTheLimit) {
  const int64_t before = conv2d_chunk_elems();               // 2^31 - 1, or AIM_CONV_MAX_ELEMS_TEST
  const Tensor x = Tensor::zeros({7, 5, 4, 6}, DType::f32);  // 120 elements per image
  const Tensor y = Tensor::zeros({7, 9, 4, 6}, DType::f32);  // 216 per image
  if (before >= 7 * 216) {
    EXPECT_EQ(conv2d_images_per_chunk(x, y), 7);  // one chunk
  }
  {
    ChunkLimit limit(2 * 216 + 100);
    EXPECT_EQ(conv2d_images_per_chunk(x, y), 2);
  }
  {
    ChunkLimit limit(216);
    EXPECT_EQ(conv2d_images_per_chunk(x, y), 1);
  }
  EXPECT_EQ(conv2d_chunk_elems(), before);  // restored
}

TEST(Simt_conv2d_chunks, OneImageOverTheLimitIsRefused) {
  const TestShape shape = {3, 2, 6, 6, 3, 3, 3, 1, 1, 1, 1, 1};  // w: 54 elements, y image: 108
  ChunkLimit limit(image_elems(shape) - 1);
  for_each_simt_variant([&](OpBase& op, const VariantInfo& v) {
    SCOPED_TRACE(op.name() + " " + v.name);
    const CheckResult r = check_variant(op, v.name, v.backend, shape, v.dtypes.front(), 7);
    EXPECT_EQ(r.status, CheckStatus::Unsupported) << r.message;
    EXPECT_NE(r.message.find("one image under"), std::string::npos) << r.message;
  });
}

}  // namespace
}  // namespace aim::kernels
