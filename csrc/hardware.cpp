#include "srift/hardware.hpp"

#include "validate.hpp"

namespace srift {

void GpuSpec::validate() const {
  const std::string p = "gpu '" + name + "'.";
  detail::require_positive(p + "memory_bytes", memory_bytes);
  detail::require_positive(p + "fp32_flops", fp32_flops);
  detail::require_finite_nonneg(p + "tf32_flops", tf32_flops);
  detail::require_finite_nonneg(p + "fp16_flops", fp16_flops);
  detail::require_positive(p + "memory_bandwidth", memory_bandwidth);
}

void InstanceSpec::validate() const {
  const std::string p = "instance '" + name + "'.";
  if (gpus < 1) detail::fail(p + "gpus", ">= 1", gpus);
  detail::require_positive(p + "gpu_memory_bytes", gpu_memory_bytes);
  if (gpus > 1) detail::require_positive(p + "intra.bandwidth", intra.bandwidth);
  detail::require_finite_nonneg(p + "intra.latency", intra.latency);
  detail::require_positive(p + "network.bandwidth", network.bandwidth);
  detail::require_finite_nonneg(p + "network.latency", network.latency);
  detail::require_finite_nonneg(p + "comm_compute_s_per_byte", comm_compute_s_per_byte);
}

}  // namespace srift
