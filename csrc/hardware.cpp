#include "srift/hardware.hpp"

#include <cmath>

#include "validate.hpp"

namespace srift {

void GpuSpec::validate() const {
  // The field's name is built only to report a failure: a learned prediction validates the
  // same GPUs thousands of times (learned_compute.cpp note "memo").
  const auto p = [&] { return "gpu '" + name + "'."; };
  if (!(std::isfinite(memory_bytes) && memory_bytes > 0)) detail::require_positive(p() + "memory_bytes", memory_bytes);
  // Peaks are divided into: a denormal one (5e-324 FLOP/s) passed "> 0" and turned the
  // roofline times into inf and the features built on them into NaN. 1 per second is no GPU,
  // but a floor that keeps those quotients finite.
  auto peak = [&](const char* field, double v, bool zero_means_none) {
    if (zero_means_none && v == 0) return;
    if (!(v >= 1 && std::isfinite(v))) {
      detail::fail(p() + field, zero_means_none ? "0 (none) or finite and >= 1" : "finite and >= 1", v);
    }
  };
  peak("fp32_flops", fp32_flops, false);
  peak("tf32_flops", tf32_flops, true);
  peak("fp16_flops", fp16_flops, true);
  peak("memory_bandwidth", memory_bandwidth, false);
  if (launch_year != 0 && (launch_year < 1990 || launch_year > 2100)) {
    detail::fail(p() + "launch_year", "0 (unknown) or in 1990-2100", launch_year);
  }
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
