#include "kernels/variant_check.h"

#include <cmath>
#include <cstring>

#include "kernels/math_mode.h"
#include "kernels/testing.h"

namespace aim::kernels {
namespace {

constexpr int64_t kGuardBytes = 256;
constexpr unsigned char kGuardByte = 0xA5;

Tensor transfer_view(const Tensor& t, Device d, DType target) {
  // Whole storage moves, so views (slices, transposes, expands) stay views.
  const auto& st = t.storage();
  const int64_t elems = int64_t(st->nbytes) / dtype_size(t.dtype());
  Tensor flat = Tensor::from_storage(st, 0, {elems}, {1}, t.dtype());
  Tensor moved = flat.to(target).to(d);
  return Tensor::from_storage(moved.storage(), t.offset(), t.sizes(), t.strides(), target);
}

Tensor guarded_copy(const Tensor& t, Device d, DType target) {
  AIM_CHECK(t.is_contiguous() && t.offset() == 0, "test outputs must be fresh contiguous tensors");
  const int64_t e = dtype_size(target);
  const int64_t body = t.numel() * e;
  std::vector<unsigned char> host(size_t(body + 2 * kGuardBytes), kGuardByte);
  Tensor src = t.to(target);
  if (body) std::memcpy(host.data() + kGuardBytes, src.raw_data(), size_t(body));
  auto st = std::make_shared<Storage>(host.size(), d);
  copy_bytes(st->data, d, host.data(), kCPU, host.size());
  return Tensor::from_storage(st, kGuardBytes / e, t.sizes(), contiguous_strides(t.sizes()),
                              target);
}

std::string check_guards(const Tensor& t) {
  const auto& st = t.storage();
  std::vector<unsigned char> host(st->nbytes);
  copy_bytes(host.data(), kCPU, st->data, st->device, st->nbytes);
  const size_t body = size_t(t.nbytes());
  for (size_t i = 0; i < size_t(kGuardBytes); ++i) {
    if (host[i] != kGuardByte) return str("write before the output at byte -", kGuardBytes - i);
    if (host[kGuardBytes + body + i] != kGuardByte)
      return str("write past the end of the output at byte +", i);
  }
  return "";
}

bool close(double got, double ref, const Tolerance& tol) {
  if (std::isnan(ref)) return std::isnan(got);
  if (std::isinf(ref)) return got == ref;
  return std::fabs(got - ref) <= tol.atol + tol.rtol * std::fabs(ref);
}

}  // namespace

Device device_for(Backend b) { return b == Backend::CUDA ? cuda_device(0) : kCPU; }

TestCase transfer_case(const TestCase& c, Device d, bool cast_floats, DType float_dtype,
                       bool guard_outputs) {
  TestCase r;
  r.params = c.params;
  r.lists = c.lists;
  auto target = [&](const Tensor& t) {
    return cast_floats && is_floating(t.dtype()) ? float_dtype : t.dtype();
  };
  for (const auto& [name, t, host] : c.inputs)
    r.add_in(name, t.defined() && !host ? transfer_view(t, d, target(t)) : t, host);
  for (const NamedTensor& o : c.outputs) {
    const Tensor& t = o.tensor;
    if (!t.defined()) {
      r.add_out(o.name, t);
    } else if (guard_outputs) {
      r.add_out(o.name, guarded_copy(t, d, target(t)));
    } else {
      r.add_out(o.name, t.to(target(t)).clone().to(d));
    }
  }
  return r;
}

CheckResult check_variant(OpBase& op, const std::string& variant, Backend b, const TestShape& s,
                          DType dtype, uint64_t seed) {
  // The tolerances are fp32's: vendor fp32 variants run without TF32 while they are checked
  // (kernels/math_mode.h; the setting is restored afterwards).
  const ScopedTf32 exact(Tf32{false, false});
  const TestCase base = op.make_case(s, dtype, seed);
  TestCase ref = transfer_case(base, kCPU, !op.ref_uses_case_dtype, ref_dtype(dtype), false);
  const std::string ref_why = op.run_case("cpu.ref", Backend::CPU, ref);
  AIM_CHECK(ref_why.empty(), "[", op.name(), "] cpu.ref cannot run its own test case: ", ref_why);
  TestCase got = transfer_case(base, device_for(b), false, dtype, true);
  const std::string why = op.run_case(variant, b, got);
  if (!why.empty()) return {CheckStatus::Unsupported, why};
  if (b == Backend::CUDA) synchronize(device_for(b));

  for (size_t o = 0; o < got.outputs.size(); ++o) {
    const Tensor& g = got.outputs[o].tensor;
    if (!g.defined()) continue;
    const std::string& name = got.outputs[o].name;
    if (std::string gw = check_guards(g); !gw.empty())
      return {CheckStatus::Fail, str("output '", name, "': ", gw)};
    const auto own = op.variant_tolerance.find(variant);
    const Tolerance tol = !is_floating(g.dtype())             ? Tolerance{0, 0}
                          : own != op.variant_tolerance.end() ? own->second(g.dtype(), s)
                          : op.tolerance                      ? op.tolerance(g.dtype(), s)
                                                              : default_tolerance(g.dtype());
    const std::vector<double> gv = g.to_vector<double>();
    const std::vector<double> rv = ref.outputs[o].tensor.to_vector<double>();
    AIM_CHECK(gv.size() == rv.size(), "output '", name, "' sizes differ");
    int64_t bad = 0, first = -1;
    double max_err = 0;
    for (size_t i = 0; i < gv.size(); ++i) {
      if (!close(gv[i], rv[i], tol)) {
        if (first < 0) first = int64_t(i);
        ++bad;
      }
      if (std::isfinite(gv[i]) && std::isfinite(rv[i]))
        max_err = std::max(max_err, std::fabs(gv[i] - rv[i]));
    }
    if (bad)
      return {CheckStatus::Fail,
              str("output '", name, "' ", to_string(g.sizes()), ": ", bad, " of ", gv.size(),
                  " elements differ; first at flat index ", first, ": got ", gv[size_t(first)],
                  ", cpu.ref ", rv[size_t(first)], " (atol ", tol.atol, ", rtol ", tol.rtol,
                  "); max abs error ", max_err)};
  }
  return {CheckStatus::Pass, ""};
}

}  // namespace aim::kernels
