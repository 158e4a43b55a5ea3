#include "data/batch_fits.h"

#include <algorithm>

#include "tensor/check.h"
#include "tensor/host_memory.h"

namespace aim::data {

double bytes_per_sample(const BatchSource& src) {
  const int64_t n = std::min<int64_t>(2, src.eval_size());
  if (n <= 0) return 0;
  double bytes = 0;
  for (const auto& [name, t] : src.eval_batch(0, n)) bytes += double(t.nbytes());
  return bytes / double(n);
}

void check_batch_fits(const BatchSource& src, int64_t batch, int64_t batches_held,
                      const std::string& flag) {
  const double per = bytes_per_sample(src);
  const double need = per * double(batch) * double(std::max<int64_t>(1, batches_held));
  const double limit = double(host_memory_limit());
  if (per <= 0 || need <= limit) return;
  AIM_FAIL(flag, " ", batch, ": ", std::max<int64_t>(1, batches_held), " batch(es) of ",
           src.describe(), " hold ", format_bytes(need), " of input tensors alone (",
           format_bytes(per), " per sample), above the host memory limit of ", format_bytes(limit),
           " (this machine's memory; AIM_CPU_MEMORY_LIMIT sets it); at most about ",
           int64_t(limit / per / double(std::max<int64_t>(1, batches_held))),
           " samples fit, before any activation");
}

}  // namespace aim::data
