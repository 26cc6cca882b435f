#include "srift/workload.hpp"

#include <string>

#include "validate.hpp"

namespace srift {

void ComputeModel::validate() const {
  detail::require_finite_nonneg("compute.forward_fixed_s", forward_fixed_s);
  detail::require_finite_nonneg("compute.forward_per_sample_s", forward_per_sample_s);
  detail::require_finite_nonneg("compute.backward_fixed_s", backward_fixed_s);
  detail::require_finite_nonneg("compute.backward_per_sample_s", backward_per_sample_s);
  detail::require_finite_nonneg("compute.optimizer_s", optimizer_s);
  detail::require_finite_nonneg("compute.accumulate_s", accumulate_s);
  // Each part may be finite and their sum not (1e308 + 1e308): every time below adds them.
  detail::require_finite_nonneg("compute.forward_fixed_s + backward_fixed_s", fixed_s());
  // A zero slope would make the batch split degenerate (any split is "balanced").
  detail::require_positive("compute.per_sample_s (forward + backward)", per_sample_s());
}

void Workload::validate() const {
  if (bucket_bytes.size() != bucket_ready_fraction.size()) {
    throw std::invalid_argument("workload.bucket_ready_fraction must have one entry per bucket (" +
                                std::to_string(bucket_bytes.size()) + "), got " +
                                std::to_string(bucket_ready_fraction.size()));
  }
  double previous = 0;
  for (std::size_t k = 0; k < bucket_bytes.size(); ++k) {
    const std::string idx = "[" + std::to_string(k) + "]";
    detail::require_finite_nonneg("workload.bucket_bytes" + idx, bucket_bytes[k]);
    const double r = bucket_ready_fraction[k];
    if (!(r >= 0 && r <= 1)) detail::fail("workload.bucket_ready_fraction" + idx, "in [0, 1]", r);
    if (r + 1e-12 < previous) {
      detail::fail("workload.bucket_ready_fraction" + idx,
                   "non-decreasing (previous " + detail::fmt(previous) + ")", r);
    }
    previous = r;
  }
  for (std::size_t k = 0; k < broadcast_bytes.size(); ++k) {
    detail::require_finite_nonneg("workload.broadcast_bytes[" + std::to_string(k) + "]", broadcast_bytes[k]);
  }
  detail::require_finite_nonneg("workload.fixed_memory_bytes", fixed_memory_bytes);
  detail::require_finite_nonneg("workload.activation_bytes_per_sample", activation_bytes_per_sample);
}

double Workload::total_gradient_bytes() const {
  double total = 0;
  for (double b : bucket_bytes) total += b;
  return total;
}

}  // namespace srift
