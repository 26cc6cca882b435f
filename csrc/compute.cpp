#include "srift/compute.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "layers_internal.hpp"
#include "validate.hpp"

namespace srift {
namespace {

bool runs_on_tensor_cores(OpKind kind) {
  return kind == OpKind::matmul || kind == OpKind::conv || kind == OpKind::attention ||
         kind == OpKind::recurrent;
}

// cuDNN's kernels: PyTorch lets them use TF32 unless told not to (note "fp32 is PyTorch's").
bool runs_in_cudnn(OpKind kind) { return kind == OpKind::conv || kind == OpKind::recurrent; }

// Achieved FLOP/s of one op class on a GPU at a precision.
double achieved_flops(OpKind kind, const GpuSpec& gpu, Precision precision,
                      const RooflineParams& p) {
  if (runs_on_tensor_cores(kind)) {
    if (precision == Precision::amp && gpu.fp16_flops > 0) return gpu.fp16_flops * p.tensor_core_efficiency;
    const bool tf32_allowed = precision != Precision::fp32 || runs_in_cudnn(kind);
    if (tf32_allowed && gpu.tf32_flops > 0) return gpu.tf32_flops * p.tensor_core_efficiency;
  }
  return gpu.fp32_flops * p.cuda_core_efficiency;
}

// Activations are stored in half precision under autocast: half the traffic per sample.
double activation_byte_scale(Precision precision) { return precision == Precision::amp ? 0.5 : 1.0; }

struct LayerTime {
  double forward_fixed, forward_per_sample, backward_fixed, backward_per_sample;
};

LayerTime layer_time(const LayerCost& layer, const GpuSpec& gpu, Precision precision,
                     const RooflineParams& p) {
  const double flops = achieved_flops(layer.kind, gpu, precision, p);
  const double bandwidth = gpu.memory_bandwidth * p.memory_efficiency;
  const double bytes = layer.forward_bytes * activation_byte_scale(precision);
  const bool launches = layer.forward_flops > 0 || layer.forward_bytes > 0 || layer.param_bytes > 0;
  LayerTime t{};
  t.forward_per_sample = std::max(layer.forward_flops / flops, bytes / bandwidth);
  t.backward_per_sample =
      std::max(layer.backward_flops / flops, p.backward_bytes_factor * bytes / bandwidth);
  // Weights are read once per pass whatever the batch; the backward also writes gradients.
  t.forward_fixed = (launches ? p.launch_overhead_s : 0) + layer.param_bytes / bandwidth;
  t.backward_fixed = (launches ? 2 * p.launch_overhead_s : 0) + 2 * layer.param_bytes / bandwidth;
  return t;
}

}  // namespace

namespace detail {
namespace {

bool layer_ok(const LayerCost& l) {
  const int kind = static_cast<int>(l.kind);
  auto ok = [](double v) { return std::isfinite(v) && v >= 0; };
  return kind >= 0 && kind < kNumOpKinds && ok(l.forward_flops) && ok(l.backward_flops) && ok(l.forward_bytes) &&
         ok(l.param_bytes);
}

}  // namespace

void validate_layers(const std::vector<LayerCost>& layers) {
  for (std::size_t i = 0; i < layers.size(); ++i) {
    if (layer_ok(layers[i])) continue;  // the field's name is built only to report it
    const std::string f = "layers[" + std::to_string(i) + "].";
    const int kind = static_cast<int>(layers[i].kind);
    if (kind < 0 || kind >= kNumOpKinds) detail::fail(f + "kind", "a known op kind", kind);
    detail::require_finite_nonneg(f + "forward_flops", layers[i].forward_flops);
    detail::require_finite_nonneg(f + "backward_flops", layers[i].backward_flops);
    detail::require_finite_nonneg(f + "forward_bytes", layers[i].forward_bytes);
    detail::require_finite_nonneg(f + "param_bytes", layers[i].param_bytes);
  }
}

}  // namespace detail

void RooflineParams::validate() const {
  auto efficiency = [](const char* name, double v) {
    if (!(v > 0 && v <= 1)) detail::fail(std::string("roofline.") + name, "in (0, 1]", v);
  };
  efficiency("tensor_core_efficiency", tensor_core_efficiency);
  efficiency("cuda_core_efficiency", cuda_core_efficiency);
  efficiency("memory_efficiency", memory_efficiency);
  detail::require_finite_nonneg("roofline.launch_overhead_s", launch_overhead_s);
  detail::require_finite_nonneg("roofline.backward_bytes_factor", backward_bytes_factor);
}

ComputeModel roofline_compute(const std::vector<LayerCost>& layers, const GpuSpec& gpu,
                              Precision precision, double optimizer_bytes,
                              const RooflineParams& params) {
  gpu.validate();  // the checks in the order they were made before the layers' (the first failure is named)
  params.validate();
  detail::require_enum("precision", static_cast<int>(precision), 0, 2);
  detail::validate_layers(layers);
  return detail::roofline_compute_of_valid_layers(layers, gpu, precision, optimizer_bytes, params);
}

ComputeModel detail::roofline_compute_of_valid_layers(const std::vector<LayerCost>& layers, const GpuSpec& gpu,
                                                      Precision precision, double optimizer_bytes,
                                                      const RooflineParams& params) {
  gpu.validate();
  params.validate();
  detail::require_enum("precision", static_cast<int>(precision), 0, 2);
  detail::require_finite_nonneg("optimizer_bytes", optimizer_bytes);
  if (layers.empty()) throw std::invalid_argument("layers must not be empty, got 0 layers");

  ComputeModel m;
  for (const LayerCost& layer : layers) {
    const LayerTime t = layer_time(layer, gpu, precision, params);
    m.forward_fixed_s += t.forward_fixed;
    m.forward_per_sample_s += t.forward_per_sample;
    m.backward_fixed_s += t.backward_fixed;
    m.backward_per_sample_s += t.backward_per_sample;
  }
  // The optimizer is a handful of fused (foreach) kernels streaming parameters and state.
  m.optimizer_s = optimizer_bytes / (gpu.memory_bandwidth * params.memory_efficiency) +
                  8 * params.launch_overhead_s;
  if (m.per_sample_s() <= 0) {
    throw std::invalid_argument("layers have no FLOPs and no bytes: cannot estimate compute");
  }
  if (!std::isfinite(m.fixed_s()) || !std::isfinite(m.per_sample_s()) || !std::isfinite(m.optimizer_s)) {
    throw std::invalid_argument("layers' FLOPs or bytes on gpu '" + gpu.name +
                                "' take more seconds than a double holds: cannot estimate compute");
  }
  return m;
}

double peak_flop_seconds_per_sample(const std::vector<LayerCost>& layers, const GpuSpec& gpu, Precision precision) {
  gpu.validate();
  detail::require_enum("precision", static_cast<int>(precision), 0, 2);
  detail::validate_layers(layers);
  return detail::peak_flop_seconds_per_sample_of_valid_layers(layers, gpu, precision);
}

double detail::peak_flop_seconds_per_sample_of_valid_layers(const std::vector<LayerCost>& layers, const GpuSpec& gpu,
                                                            Precision precision) {
  gpu.validate();
  detail::require_enum("precision", static_cast<int>(precision), 0, 2);
  RooflineParams at_peak;
  at_peak.tensor_core_efficiency = 1.0;
  at_peak.cuda_core_efficiency = 1.0;
  double seconds = 0;
  for (const LayerCost& layer : layers) {
    seconds += (layer.forward_flops + layer.backward_flops) / achieved_flops(layer.kind, gpu, precision, at_peak);
  }
  return std::isfinite(seconds) ? seconds : 0.0;  // past a double's range: no floor (the roofline refuses it)
}

double gradient_accumulate_s(double gradient_bytes, const GpuSpec& gpu, const RooflineParams& params) {
  detail::require_finite_nonneg("gradient_bytes", gradient_bytes);
  gpu.validate();
  params.validate();
  const double seconds = 3.0 * gradient_bytes / (gpu.memory_bandwidth * params.memory_efficiency);
  if (!std::isfinite(seconds)) {  // finite bytes over a 1 B/s GPU can still overflow
    detail::fail("gradient_accumulate_s (3 x gradient_bytes / achieved memory bandwidth)",
                 "finite (gradient_bytes or memory_bandwidth out of any real range)", seconds);
  }
  return seconds;
}

std::vector<double> roofline_backward_times(const std::vector<LayerCost>& layers,
                                            const GpuSpec& gpu, Precision precision,
                                            double batch, const RooflineParams& params) {
  gpu.validate();
  params.validate();
  detail::require_enum("precision", static_cast<int>(precision), 0, 2);
  detail::validate_layers(layers);
  detail::require_positive("batch", batch);
  std::vector<double> times;
  times.reserve(layers.size());
  for (const LayerCost& layer : layers) {
    const LayerTime t = layer_time(layer, gpu, precision, params);
    times.push_back(t.backward_fixed + t.backward_per_sample * batch);
  }
  return times;
}

namespace detail {
void validate_measurement(const Measurement& m, const std::string& f) {
  require_positive(f + "local_batch", m.local_batch);
  require_positive(f + "iteration_s", m.iteration_s);
  // < 0 means "not measured"; NaN or inf is neither and gave an all-NaN model.
  if (!std::isfinite(m.forward_s)) fail(f + "forward_s", "finite (< 0: not measured)", m.forward_s);
  if (!std::isfinite(m.backward_s)) fail(f + "backward_s", "finite (< 0: not measured)", m.backward_s);
  if (m.precision) require_enum((f + "precision").c_str(), static_cast<int>(*m.precision), 0, 2);
  if (m.forward_s < 0 || m.backward_s < 0) return;
  // Medians of each phase need not add up: a forward + backward a little above the
  // iteration leaves no optimizer time rather than being an error. Twice the iteration is
  // not noise but a wrong field.
  const double both = m.forward_s + m.backward_s;  // inf where the two overflow: refused below
  if (!(both > 0 && std::isfinite(both))) {
    fail(f + "forward_s + backward_s", "finite and > 0 when both are measured", both);
  }
  if (m.forward_s / 2 + m.backward_s / 2 > m.iteration_s) {  // halves: twice a large time overflows
    fail(f + "forward_s + backward_s", "at most twice iteration_s (" + std::to_string(m.iteration_s) + " s)", both);
  }
}
}  // namespace detail

void validate_measurements(const std::vector<Measurement>& measurements) {
  for (std::size_t i = 0; i < measurements.size(); ++i) {
    detail::validate_measurement(measurements[i], "measurements[" + std::to_string(i) + "].");
  }
}

namespace {
ComputeModel fit_to_measurements(const ComputeModel& prior, const std::vector<Measurement>& measurements);

// Least squares of compute time on batch, as anchor_to_measurements fits it (one summation
// order, so measured_line reports the branch the fit takes, bit for bit).
MeasuredLine line_of(const std::vector<Measurement>& measurements, bool split_measured) {
  const double n = static_cast<double>(measurements.size());
  double mean_b = 0, mean_t = 0;
  for (const Measurement& m : measurements) {
    const double compute = split_measured ? m.forward_s + m.backward_s : m.iteration_s;
    mean_b += m.local_batch / n;
    mean_t += compute / n;
  }
  double sxx = 0, sxy = 0;
  for (const Measurement& m : measurements) {
    const double compute = split_measured ? m.forward_s + m.backward_s : m.iteration_s;
    sxx += (m.local_batch - mean_b) * (m.local_batch - mean_b);
    sxy += (m.local_batch - mean_b) * (compute - mean_t);
  }
  MeasuredLine line;
  line.several_batches = sxx > 0;
  line.slope = sxx > 0 ? sxy / sxx : 0.0;
  line.intercept = mean_t - line.slope * mean_b;
  line.mean_batch = mean_b;
  line.mean_s = mean_t;
  return line;
}

bool phases_measured(const std::vector<Measurement>& measurements) {
  for (const Measurement& m : measurements) {
    if (m.forward_s < 0 || m.backward_s < 0) return false;
  }
  return true;
}
}  // namespace

MeasuredLine measured_line(const std::vector<Measurement>& measurements) {
  if (measurements.empty()) throw std::invalid_argument("measurements must not be empty, got 0 measurements");
  validate_measurements(measurements);
  return line_of(measurements, phases_measured(measurements));
}

ComputeModel anchor_to_measurements(const ComputeModel& prior,
                                    const std::vector<Measurement>& measurements) {
  prior.validate();
  if (measurements.empty()) return prior;
  validate_measurements(measurements);
  const ComputeModel out = fit_to_measurements(prior, measurements);
  // Valid measurements can still fit no usable model where their batches and times are past
  // any real range (a time of 1e-300 s at batch 1e308 has a per-sample time of 0).
  try {
    out.validate();
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("measurements: their fit is no usable compute model (") + e.what() +
                                "): the measured batches or times are out of any real range");
  }
  return out;
}

namespace {
ComputeModel fit_to_measurements(const ComputeModel& prior, const std::vector<Measurement>& measurements) {
  const bool split_measured = phases_measured(measurements);

  // With forward and backward measured, the rest of the iteration is the optimizer step (and
  // zero_grad), measured rather than estimated: it does not scale with the batch and can
  // dominate (Adam over large embeddings), so it must not be mistaken for fixed compute.
  // Least squares of compute time on batch; a slope needs two distinct batches.
  const double n = static_cast<double>(measurements.size());
  double mean_opt = 0, measured_fwd = 0, measured_both = 0;
  if (split_measured) {
    for (const Measurement& m : measurements) {
      const double compute = m.forward_s + m.backward_s;
      mean_opt += std::max(0.0, m.iteration_s - compute) / n;
      measured_fwd += m.forward_s;
      measured_both += compute;
    }
  }
  const MeasuredLine line = line_of(measurements, split_measured);
  const double mean_b = line.mean_batch, mean_t = line.mean_s, slope = line.slope, intercept = line.intercept;

  // Share of the forward in each term: measured when every point has both parts.
  double forward_share_fixed = prior.fixed_s() > 0 ? prior.forward_fixed_s / prior.fixed_s() : 0.5;
  double forward_share_slope = prior.forward_per_sample_s / prior.per_sample_s();
  const bool shares_measured = split_measured && measured_both > 0;
  if (shares_measured) forward_share_fixed = forward_share_slope = measured_fwd / measured_both;

  ComputeModel out = prior;
  if (slope > 0 && intercept >= 0) {
    // Two or more batches with a sane fit. Without a measured optimizer step, keep the
    // prior's share of the intercept for it.
    out.optimizer_s = split_measured ? mean_opt : std::min(prior.optimizer_s, 0.5 * intercept);
    const double fixed = split_measured ? intercept : intercept - out.optimizer_s;
    out.forward_fixed_s = fixed * forward_share_fixed;
    out.backward_fixed_s = fixed * (1 - forward_share_fixed);
    out.forward_per_sample_s = slope * forward_share_slope;
    out.backward_per_sample_s = slope * (1 - forward_share_slope);
    return out;
  }
  // One batch (or a fit the noise made meaningless): rescale the prior's shape to the mean
  // (the optimizer with it unless it was measured).
  const double scale = mean_t / (prior.compute_s(mean_b) + (split_measured ? 0.0 : prior.optimizer_s));
  out.forward_fixed_s = prior.forward_fixed_s * scale;
  out.backward_fixed_s = prior.backward_fixed_s * scale;
  out.forward_per_sample_s = prior.forward_per_sample_s * scale;
  out.backward_per_sample_s = prior.backward_per_sample_s * scale;
  out.optimizer_s = split_measured ? mean_opt : prior.optimizer_s * scale;
  if (shares_measured) {
    const double compute = out.compute_s(mean_b);
    const double f = forward_share_fixed;
    if (out.forward_s(mean_b) > 0 && out.backward_s(mean_b) > 0) {
      const double fwd_scale = f * compute / out.forward_s(mean_b);
      const double bwd_scale = (1 - f) * compute / out.backward_s(mean_b);
      out.forward_fixed_s *= fwd_scale;
      out.forward_per_sample_s *= fwd_scale;
      out.backward_fixed_s *= bwd_scale;
      out.backward_per_sample_s *= bwd_scale;
    } else {
      // A prior with no time in one phase (a roofline over layers with only backward FLOPs)
      // has no shape to rescale there: 0 x (measured / 0) was NaN. Split the whole compute's
      // shape by the measured share instead; compute_s(mean_b) stays the measured mean.
      const double fixed = out.fixed_s(), per_sample = out.per_sample_s();
      out.forward_fixed_s = f * fixed;
      out.forward_per_sample_s = f * per_sample;
      out.backward_fixed_s = (1 - f) * fixed;
      out.backward_per_sample_s = (1 - f) * per_sample;
    }
  }
  return out;
}
}  // namespace

}  // namespace srift
