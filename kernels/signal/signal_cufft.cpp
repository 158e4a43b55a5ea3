// signal: cuFFT variant of rfft (CUDA builds only). Compiled and linked against the toolkit's
// cuFFT; not yet run on a GPU (aim_kernel_tests --gtest_filter='*rfft*' checks it against cpu.ref
// on the first GPU run).
//
// cuda.cufft: a batched real-to-complex plan (cufftPlanMany, CUFFT_R2C for f32, CUFFT_D2Z for f64)
// of nfft points over R rows, output [R, nfft / 2 + 1] complex = y's [R, F, 2] layout. cuFFT has
// no implicit zero padding, so a frame shorter than nfft is first copied (cudaMemcpy2DAsync) into
// a zeroed [R, nfft] buffer. Plans are kept per (device, stream, nfft, R, dtype) for the process's
// life (the model calls the same sizes every step), guarded by a mutex; the plan's stream is set
// on each call. Any nfft (cuFFT handles non-powers of two itself).
#include <cufft.h>

#include <map>
#include <mutex>
#include <tuple>

#include "kernels/registry.h"
#include "kernels/signal/signal.h"
#include "kernels/vendor.h"
#include "tensor/cuda_check.h"

#define AIM_CUFFT_CHECK(expr)                                                                  \
  do {                                                                                         \
    const cufftResult aim_st_ = (expr);                                                        \
    if (aim_st_ != CUFFT_SUCCESS)                                                              \
      ::aim::fail(__FILE__, __LINE__, ::aim::str("cuFFT error ", int(aim_st_), " in " #expr)); \
  } while (0)

namespace aim::kernels {
namespace {

using PlanKey = std::tuple<int, void*, int64_t, int64_t, int>;  // device, stream, nfft, R, dtype

cufftHandle plan_for(Device d, cudaStream_t st, int64_t nfft, int64_t R, DType t) {
  static std::mutex mu;
  static std::map<PlanKey, cufftHandle> plans;
  std::lock_guard<std::mutex> lock(mu);
  const PlanKey key{d.index, static_cast<void*>(st), nfft, R, int(t)};
  auto it = plans.find(key);
  if (it != plans.end()) return it->second;
  cufftHandle h = 0;
  int n[1] = {int(nfft)};
  AIM_CUFFT_CHECK(cufftPlanMany(&h, 1, n, nullptr, 1, int(nfft), nullptr, 1, int(nfft / 2 + 1),
                                t == DType::f64 ? CUFFT_D2Z : CUFFT_R2C, int(R)));
  plans.emplace(key, h);
  return h;
}

std::string rfft_cufft_supports(const RfftArgs& a) {
  if (a.nfft > (int64_t(1) << 30) || a.x.size(0) > (int64_t(1) << 30))
    return "cuda.cufft needs nfft and R to fit in int, got nfft " + std::to_string(a.nfft) +
           ", R " + std::to_string(a.x.size(0));
  return "";
}

void rfft_cuda_cufft(const RfftArgs& a) {
  check_rfft_args(a);
  const std::string why = rfft_cufft_supports(a);
  AIM_CHECK(why.empty(), "[rfft] ", why);
  const int64_t R = a.x.size(0), N = a.x.size(1), n = a.nfft;
  if (R == 0) return;
  const Device d = a.x.device();
  vendor::DeviceGuard guard(d);
  const cudaStream_t st = vendor::stream(d);
  Tensor in = a.x;
  if (N < n) {
    in = Tensor::zeros({R, n}, a.x.dtype(), d);  // on the current stream: ordered before the copy
    const size_t e = dtype_size(a.x.dtype());
    AIM_CUDA_CHECK(cudaMemcpy2DAsync(in.raw_data(), size_t(n) * e, a.x.raw_data(), size_t(N) * e,
                                     size_t(N) * e, size_t(R), cudaMemcpyDeviceToDevice, st));
  }
  const cufftHandle h = plan_for(d, st, n, R, a.x.dtype());
  AIM_CUFFT_CHECK(cufftSetStream(h, st));
  if (a.x.dtype() == DType::f64)
    AIM_CUFFT_CHECK(cufftExecD2Z(h, static_cast<cufftDoubleReal*>(in.raw_data()),
                                 static_cast<cufftDoubleComplex*>(a.y.raw_data())));
  else
    AIM_CUFFT_CHECK(cufftExecR2C(h, static_cast<cufftReal*>(in.raw_data()),
                                 static_cast<cufftComplex*>(a.y.raw_data())));
}

}  // namespace

void register_rfft_cufft(Registry& r) {
  r.op<RfftArgs>("rfft").add({"cuda.cufft",
                              Backend::CUDA,
                              Provider::Vendor,
                              rfft_cuda_cufft,
                              {DType::f32, DType::f64},
                              rfft_cufft_supports});
}

}  // namespace aim::kernels
