#include "bench/train_step.h"

#include "autograd/engine.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/loss.h"
#include "autograd/functions/matmul.h"
#include "kernels/testing.h"

namespace aim::bench {

TrainStepAllocStats train_step_allocations(Device d, int steps) {
  using namespace aim::autograd;
  const int64_t B = 256, In = 512, Hid = 1024, Out = 10;
  Variable w1(kernels::random_tensor({Hid, In}, DType::f32, 1, -0.05, 0.05).to(d), true, "w1");
  Variable b1(Tensor::zeros({Hid}, DType::f32, d), true, "b1");
  Variable w2(kernels::random_tensor({Out, Hid}, DType::f32, 2, -0.05, 0.05).to(d), true, "w2");
  Variable b2(Tensor::zeros({Out}, DType::f32, d), true, "b2");
  const std::vector<Variable> params{w1, b1, w2, b2};
  const Tensor x = kernels::random_tensor({B, In}, DType::f32, 3).to(d);
  const Tensor y = kernels::random_indices({B}, Out, DType::i64, 4).to(d);
  Allocator& alloc = d.is_cpu() ? cpu_allocator() : cuda_allocator(d.index);
  TrainStepAllocStats r;
  for (int s = 0; s < steps; ++s) {
    const AllocatorStats before = alloc.stats();
    {
      Variable h = relu(linear(Variable(x), w1, b1));
      Variable loss = cross_entropy(linear(h, w2, b2), y);
      loss.backward();
      NoGradGuard ng;
      for (const Variable& p : params) {
        // p -= 0.1 * grad, then zero the grad for the next step (buffers are kept).
        p.mutable_data().copy_(sub(Variable(p.data()), mul(Variable(p.grad()), 0.1)).data());
        p.zero_grad();
      }
    }
    synchronize(d);
    const AllocatorStats after = alloc.stats();
    r.allocs_per_step.push_back(after.alloc_count - before.alloc_count);
    r.cache_hits_per_step.push_back(after.cache_hits - before.cache_hits);
    r.system_allocs_per_step.push_back(after.system_allocs - before.system_allocs);
  }
  return r;
}

}  // namespace aim::bench
