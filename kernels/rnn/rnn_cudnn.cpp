// rnn: cuDNN variant (CUDA builds only). Compiled against the cuDNN 9.19 headers; not yet run on
// a GPU (the first GPU run of aim_kernel_tests --gtest_filter='*rnn*' checks it against cpu.ref).
//
// cuda.cudnn: cuDNN 9's RNN API, one unidirectional layer, CUDNN_RNN_ALGO_STANDARD.
//   Cells: CUDNN_LSTM (linLayerID 0-3 input, 4-7 recurrent matrices in the order i, f, g, o) and
//   CUDNN_GRU (0-2 / 3-5 in the order r, z, n; cuDNN's GRU applies r after the recurrent GEMM:
//   linear_before_reset) — PyTorch's gate order, so each gate's [H, I] / [H, H] row block of
//   w_ih / w_hh and its [H] bias slice are copied as they are (cudaMemcpyAsync on the stream) to
//   the addresses cudnnGetRNNWeightParams gives; the sizes it reports are checked. Biases:
//   CUDNN_RNN_DOUBLE_BIAS, or CUDNN_RNN_NO_BIAS without b_ih/b_hh.
//   Data: x [T, B, I] and y [T, B, H] as CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED with
//   CUDNN_RNN_PADDED_IO_ENABLED, sequence lengths from the host tensor (every length T when
//   undefined) and their device copy (devSeqLengths, B ints per call); padding of y filled with 0.
//   h0/c0/hn/cn as [1, B, H] (NULL: zeros in, not written out).
//   Arithmetic: f32 in true fp32 (CUDNN_FMA_MATH: no TF32), f64 in fp64, f16 data with fp32 math
//   precision and CUDNN_TENSOR_OP_MATH. No dropout (a descriptor with p = 0, no states).
//     rnn_fwd   cudnnRNNForward, CUDNN_FWD_MODE_INFERENCE: only without a workspace (inference).
//               A training forward must write aim's workspace layout (README), which cuDNN's
//               opaque reserve space is not: that is cuda.fused's.
//     rnn_bwd   recomputes the forward in CUDNN_FWD_MODE_TRAINING into its own reserve space (the
//               workspace from whichever forward ran is not cuDNN's), then
//               cudnnRNNBackwardData_v8 (dx written, zero past the lengths; dh0, dc0 written) and
//               cudnnRNNBackwardWeights_v8 in CUDNN_WGRAD_MODE_ADD onto a weight-gradient space
//               that holds the current dw_ih/dw_hh/db_* (copied in, added to, copied out: +=).
//               So it costs one forward more than cuda.fused's backward, and it needs the
//               forward's b_ih/b_hh in RnnBwdArgs (refused when db_* is wanted without them).
//               NULL dhy/dcy (undefined dhn/dcn) are read as zeros and NULL dhx/dcx are not
//               written, as cuDNN's API reference describes; dy is always passed (zeros when
//               undefined).
//   Cannot take (supports() reasons): AUGRU, the reset-first GRU, reverse direction (cuDNN's
//   unidirectional RNN runs forward in time), a zero length (cuDNN's data descriptor needs
//   lengths >= 1), sizes beyond int, bf16 (not registered).
#include <climits>
#include <vector>

#include "kernels/cudnn_util.h"
#include "kernels/registry.h"
#include "kernels/rnn/rnn.h"
#include "kernels/vendor.h"

namespace aim::kernels {
namespace {

// RAII wrappers of the RNN descriptors (kernels/cudnn_util.h has the tensor ones).
class RnnDesc {
 public:
  RnnDesc() { AIM_CUDNN_CHECK(cudnnCreateRNNDescriptor(&d_)); }
  ~RnnDesc() { cudnnDestroyRNNDescriptor(d_); }
  RnnDesc(const RnnDesc&) = delete;
  RnnDesc& operator=(const RnnDesc&) = delete;
  operator cudnnRNNDescriptor_t() const { return d_; }

 private:
  cudnnRNNDescriptor_t d_ = nullptr;
};

class RnnDataDesc {
 public:
  RnnDataDesc() { AIM_CUDNN_CHECK(cudnnCreateRNNDataDescriptor(&d_)); }
  ~RnnDataDesc() { cudnnDestroyRNNDataDescriptor(d_); }
  RnnDataDesc(const RnnDataDesc&) = delete;
  RnnDataDesc& operator=(const RnnDataDesc&) = delete;
  operator cudnnRNNDataDescriptor_t() const { return d_; }

 private:
  cudnnRNNDataDescriptor_t d_ = nullptr;
};

class DropoutDesc {
 public:
  DropoutDesc() { AIM_CUDNN_CHECK(cudnnCreateDropoutDescriptor(&d_)); }
  ~DropoutDesc() { cudnnDestroyDropoutDescriptor(d_); }
  DropoutDesc(const DropoutDesc&) = delete;
  DropoutDesc& operator=(const DropoutDesc&) = delete;
  operator cudnnDropoutDescriptor_t() const { return d_; }

 private:
  cudnnDropoutDescriptor_t d_ = nullptr;
};

class NdTensorDesc {
 public:
  NdTensorDesc() { AIM_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d_)); }
  ~NdTensorDesc() { cudnnDestroyTensorDescriptor(d_); }
  NdTensorDesc(const NdTensorDesc&) = delete;
  NdTensorDesc& operator=(const NdTensorDesc&) = delete;
  operator cudnnTensorDescriptor_t() const { return d_; }

 private:
  cudnnTensorDescriptor_t d_ = nullptr;
};

// What cuda.cudnn cannot take, from the arguments the forward and the backward share.
std::string reason(RnnCell cell, bool reverse, bool lbr, const Tensor& x, const Tensor& w_hh,
                   const Tensor& lengths) {
  if (cell == RnnCell::AUGRU)
    return "AUGRU's attention-scaled update gate is not a cuDNN cell; use cuda.fused";
  if (cell == RnnCell::GRU && !lbr)
    return "cuDNN's GRU applies the reset gate after the recurrent GEMM (linear_before_reset = "
           "true); the reset-first GRU is cuda.fused's";
  if (reverse)
    return "cuDNN's unidirectional RNN runs forward in time; the reverse direction is "
           "cuda.fused's";
  const int64_t T = x.size(0), B = x.size(1), I = x.size(2), H = w_hh.size(1);
  if (T == 0 || B == 0 || I == 0)
    return str("cuDNN needs T, B, I >= 1, got x ", to_string(x.sizes()));
  if (T * B * std::max(I, H) > INT_MAX || rnn_gates(cell) * H * std::max(I, H) > INT_MAX)
    return str("cuDNN's RNN API takes int sizes, x ", to_string(x.sizes()), " with H = ", H,
               " is beyond them");
  if (lengths.defined()) {
    const int32_t* l = lengths.data<int32_t>();
    for (int64_t b = 0; b < B; ++b)
      if (l[b] < 1) return str("cuDNN needs every sequence length >= 1, got lengths[", b, "] = 0");
  }
  return "";
}

std::string supports_fwd(const RnnFwdArgs& a) {
  check_rnn_fwd_args(a);
  if (a.workspace.defined())
    return "cuDNN's reserve space is not aim's workspace layout: a training forward (workspace "
           "wanted) is cuda.fused's; cuda.cudnn runs inference forwards";
  return reason(a.cell, a.reverse, a.linear_before_reset, a.x, a.w_hh, a.lengths);
}

std::string supports_bwd(const RnnBwdArgs& a) {
  check_rnn_bwd_args(a);
  if (!a.b_ih.defined() && (a.db_ih.defined() || a.db_hh.defined()))
    return "cuda.cudnn recomputes the forward and needs its biases: db_ih/db_hh are wanted but "
           "b_ih/b_hh were not given";
  return reason(a.cell, a.reverse, a.linear_before_reset, a.x, a.w_hh, a.lengths);
}

// The descriptors, the device sequence lengths and the packed weights of one call.
struct Setup {
  RnnDesc rnn;
  DropoutDesc dropout;
  RnnDataDesc xd, yd;
  NdTensorDesc hd;  // h and c: [1, B, H]
  std::vector<int32_t> lens;
  Tensor dev_lens;  // [B] i32 on the device
  size_t weight_bytes = 0;
  Tensor weights;  // cuDNN's weight space (bytes)
};

void setup(Setup& s, cudnnHandle_t h, RnnCell cell, bool bias, const Tensor& x, const Tensor& w_hh,
           const Tensor& lengths) {
  const DType t = x.dtype();
  const Device dev = x.device();
  const int T = int(x.size(0)), B = int(x.size(1)), I = int(x.size(2)), H = int(w_hh.size(1));
  const cudnnDataType_t dt = cudnn::data_type(t);
  const cudnnDataType_t math = t == DType::f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  const cudnnMathType_t mt = t == DType::f16   ? CUDNN_TENSOR_OP_MATH
                             : t == DType::f32 ? CUDNN_FMA_MATH
                                               : CUDNN_DEFAULT_MATH;
  // Dropout applies between layers only; one layer: p = 0 and no states.
  AIM_CUDNN_CHECK(cudnnSetDropoutDescriptor(s.dropout, h, 0.0f, nullptr, 0, 0));
  AIM_CUDNN_CHECK(cudnnSetRNNDescriptor_v8(
      s.rnn, CUDNN_RNN_ALGO_STANDARD, cell == RnnCell::LSTM ? CUDNN_LSTM : CUDNN_GRU,
      bias ? CUDNN_RNN_DOUBLE_BIAS : CUDNN_RNN_NO_BIAS, CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT,
      dt, math, mt, I, H, /*projSize=*/H, /*numLayers=*/1, s.dropout, CUDNN_RNN_PADDED_IO_ENABLED));
  s.lens.assign(size_t(B), T);
  if (lengths.defined()) {
    const int32_t* l = lengths.data<int32_t>();
    for (int b = 0; b < B; ++b) s.lens[size_t(b)] = l[b];
  }
  s.dev_lens = Tensor::from_vector(s.lens, {B}, dev);
  double fill = 0.0;  // zero bits: 0 in every data type (read as the data type)
  AIM_CUDNN_CHECK(cudnnSetRNNDataDescriptor(s.xd, dt, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, T,
                                            B, I, s.lens.data(), &fill));
  AIM_CUDNN_CHECK(cudnnSetRNNDataDescriptor(s.yd, dt, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, T,
                                            B, H, s.lens.data(), &fill));
  const int dims[3] = {1, B, H}, strides[3] = {B * H, H, 1};
  AIM_CUDNN_CHECK(cudnnSetTensorNdDescriptor(s.hd, dt, 3, dims, strides));
  AIM_CUDNN_CHECK(cudnnGetRNNWeightSpaceSize(h, s.rnn, &s.weight_bytes));
  s.weights = Tensor::zeros({int64_t(s.weight_bytes)}, DType::u8, dev);
}

// One gate's matrix and bias in cuDNN's weight space (or in the weight-gradient space).
struct GateSlot {
  void* m = nullptr;
  void* b = nullptr;
};
GateSlot gate_slot(cudnnHandle_t h, const Setup& s, const Tensor& space, int lin, int64_t expect_m,
                   int64_t expect_b) {
  NdTensorDesc md, bd;
  GateSlot g;
  AIM_CUDNN_CHECK(cudnnGetRNNWeightParams(h, s.rnn, 0, s.weight_bytes, space.raw_data(), lin, md,
                                          &g.m, bd, &g.b));
  auto numel = [](cudnnTensorDescriptor_t d) {
    cudnnDataType_t t;
    int n = 0, dims[8], strides[8];
    AIM_CUDNN_CHECK(cudnnGetTensorNdDescriptor(d, 8, &t, &n, dims, strides));
    int64_t e = 1;
    for (int i = 0; i < n; ++i) e *= dims[i];
    return e;
  };
  AIM_CHECK(g.m && numel(md) == expect_m, "[rnn] cuda.cudnn: cuDNN's matrix ", lin, " holds ",
            g.m ? numel(md) : 0, " values, expected ", expect_m);
  if (expect_b)
    AIM_CHECK(g.b && numel(bd) == expect_b, "[rnn] cuda.cudnn: cuDNN's bias ", lin, " holds ",
              g.b ? numel(bd) : 0, " values, expected ", expect_b);
  return g;
}

// Copies between aim's w_ih/w_hh/b_ih/b_hh (undefined ones skipped) and a cuDNN weight space.
void copy_params(cudnnHandle_t h, const Setup& s, const Tensor& space, DType t, RnnCell cell,
                 bool bias, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                 const Tensor& b_hh, int64_t I, int64_t H, bool into_space, cudaStream_t st) {
  const int G = int(rnn_gates(cell));
  const size_t e = size_t(dtype_size(t));
  for (int lin = 0; lin < 2 * G; ++lin) {
    const bool input = lin < G;
    const int g = input ? lin : lin - G;
    const int64_t cols = input ? I : H;
    const GateSlot slot = gate_slot(h, s, space, lin, H * cols, bias ? H : 0);
    auto move = [&](const Tensor& t, void* cudnn_ptr, int64_t offset, int64_t n) {
      if (!t.defined()) return;
      char* aim_ptr = static_cast<char*>(t.raw_data()) + size_t(offset) * e;
      AIM_CUDA_CHECK(cudaMemcpyAsync(into_space ? cudnn_ptr : aim_ptr,
                                     into_space ? aim_ptr : cudnn_ptr, size_t(n) * e,
                                     cudaMemcpyDeviceToDevice, st));
    };
    move(input ? w_ih : w_hh, slot.m, g * H * cols, H * cols);
    if (bias) move(input ? b_ih : b_hh, slot.b, g * H, H);
  }
}

const void* ptr_or_null(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }
void* mut_or_null(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }

void rnn_fwd_cuda_cudnn(const RnnFwdArgs& a) {
  const std::string why = supports_fwd(a);
  AIM_CHECK(why.empty(), "[rnn_fwd] cuda.cudnn: ", why);
  const Device dev = a.x.device();
  vendor::DeviceGuard guard(dev);
  cudnnHandle_t h = vendor::cudnn(dev);
  const cudaStream_t st = vendor::stream(dev);
  const bool bias = a.b_ih.defined();
  Setup s;
  setup(s, h, a.cell, bias, a.x, a.w_hh, a.lengths);
  copy_params(h, s, s.weights, a.x.dtype(), a.cell, bias, a.w_ih, a.w_hh, a.b_ih, a.b_hh,
              a.x.size(2), a.w_hh.size(1), /*into_space=*/true, st);
  size_t work_bytes = 0, reserve_bytes = 0;
  AIM_CUDNN_CHECK(cudnnGetRNNTempSpaceSizes(h, s.rnn, CUDNN_FWD_MODE_INFERENCE, s.xd, &work_bytes,
                                            &reserve_bytes));
  const vendor::Workspace w = vendor::workspace(dev, work_bytes);
  const bool lstm = a.cell == RnnCell::LSTM;
  AIM_CUDNN_CHECK(cudnnRNNForward(
      h, s.rnn, CUDNN_FWD_MODE_INFERENCE, static_cast<const int32_t*>(s.dev_lens.raw_data()), s.xd,
      a.x.raw_data(), s.yd, a.y.raw_data(), s.hd, ptr_or_null(a.h0), mut_or_null(a.hn), s.hd,
      lstm ? ptr_or_null(a.c0) : nullptr, lstm ? mut_or_null(a.cn) : nullptr, s.weight_bytes,
      s.weights.raw_data(), w.bytes, w.data, 0, nullptr));
}

void rnn_bwd_cuda_cudnn(const RnnBwdArgs& a) {
  const std::string why = supports_bwd(a);
  AIM_CHECK(why.empty(), "[rnn_bwd] cuda.cudnn: ", why);
  const Device dev = a.x.device();
  const DType t = a.x.dtype();
  vendor::DeviceGuard guard(dev);
  cudnnHandle_t h = vendor::cudnn(dev);
  const cudaStream_t st = vendor::stream(dev);
  const int64_t I = a.x.size(2), H = a.w_hh.size(1);
  const bool bias = a.b_ih.defined(), lstm = a.cell == RnnCell::LSTM;
  Setup s;
  setup(s, h, a.cell, bias, a.x, a.w_hh, a.lengths);
  copy_params(h, s, s.weights, a.x.dtype(), a.cell, bias, a.w_ih, a.w_hh, a.b_ih, a.b_hh, I, H,
              true, st);
  size_t work_bytes = 0, reserve_bytes = 0;
  AIM_CUDNN_CHECK(cudnnGetRNNTempSpaceSizes(h, s.rnn, CUDNN_FWD_MODE_TRAINING, s.xd, &work_bytes,
                                            &reserve_bytes));
  const vendor::Workspace w = vendor::workspace(dev, work_bytes);
  const Tensor reserve = Tensor::empty({int64_t(reserve_bytes)}, DType::u8, dev);
  const int32_t* dev_lens = static_cast<const int32_t*>(s.dev_lens.raw_data());
  // The forward again, in training mode, for cuDNN's reserve space (its y is the forward's y).
  const Tensor y = Tensor::empty(a.y.sizes(), t, dev);
  const void* hx = ptr_or_null(a.h0);
  const void* cx = lstm ? ptr_or_null(a.c0) : nullptr;
  AIM_CUDNN_CHECK(cudnnRNNForward(h, s.rnn, CUDNN_FWD_MODE_TRAINING, dev_lens, s.xd, a.x.raw_data(),
                                  s.yd, y.raw_data(), s.hd, hx, nullptr, s.hd, cx, nullptr,
                                  s.weight_bytes, s.weights.raw_data(), w.bytes, w.data,
                                  reserve_bytes, reserve.raw_data()));
  // cuDNN writes dx always (scratch when unwanted) and needs dy (zeros when undefined); dx past
  // the lengths is zeroed first (PADDED_IO leaves the padding alone).
  const Tensor dy = a.dy.defined() ? a.dy : Tensor::zeros(a.y.sizes(), t, dev);
  const Tensor dx = a.dx.defined() ? a.dx : Tensor::empty(a.x.sizes(), t, dev);
  if (a.lengths.defined()) dx.zero_();
  AIM_CUDNN_CHECK(cudnnRNNBackwardData_v8(
      h, s.rnn, dev_lens, s.yd, y.raw_data(), dy.raw_data(), s.xd, dx.raw_data(), s.hd, hx,
      ptr_or_null(a.dhn), mut_or_null(a.dh0), s.hd, cx, lstm ? ptr_or_null(a.dcn) : nullptr,
      lstm ? mut_or_null(a.dc0) : nullptr, s.weight_bytes, s.weights.raw_data(), w.bytes, w.data,
      reserve_bytes, reserve.raw_data()));
  if (!a.dw_ih.defined() && !a.dw_hh.defined() && !a.db_ih.defined() && !a.db_hh.defined()) return;
  // dW +=: the gradient space starts as the current gradients, cuDNN adds, they are copied back.
  const Tensor dweights = Tensor::zeros({int64_t(s.weight_bytes)}, DType::u8, dev);
  copy_params(h, s, dweights, t, a.cell, bias, a.dw_ih, a.dw_hh, a.db_ih, a.db_hh, I, H, true, st);
  AIM_CUDNN_CHECK(cudnnRNNBackwardWeights_v8(
      h, s.rnn, CUDNN_WGRAD_MODE_ADD, dev_lens, s.xd, a.x.raw_data(), s.hd, hx, s.yd, y.raw_data(),
      s.weight_bytes, dweights.raw_data(), w.bytes, w.data, reserve_bytes, reserve.raw_data()));
  copy_params(h, s, dweights, t, a.cell, bias, a.dw_ih, a.dw_hh, a.db_ih, a.db_hh, I, H, false, st);
}

}  // namespace

void register_rnn_cudnn(Registry& r) {
  const std::vector<DType> types = {DType::f32, DType::f64, DType::f16};
  r.op<RnnFwdArgs>("rnn_fwd").add(
      {"cuda.cudnn", Backend::CUDA, Provider::Vendor, rnn_fwd_cuda_cudnn, types, supports_fwd});
  r.op<RnnBwdArgs>("rnn_bwd").add(
      {"cuda.cudnn", Backend::CUDA, Provider::Vendor, rnn_bwd_cuda_cudnn, types, supports_bwd});
}

}  // namespace aim::kernels
