#pragma once
// Per-GPU compute time of a workload: a first-principles roofline estimate from per-layer
// FLOPs and bytes, and anchoring of any estimate to measured iterations.
//
// Note "affine compute": one worker's forward or backward time at local batch b is modelled
// as fixed + per_sample * b. The fixed part (kernel launches, reading the weights) does not
// shrink with the batch; the per-sample part is the max of the FLOP time and the activation
// traffic time, summed over layers. Two or more measured batches fit both terms; one measured
// batch only rescales an estimate, never invents a slope.
#include <optional>
#include <vector>

#include "srift/hardware.hpp"
#include "srift/workload.hpp"

namespace srift {

/// Arithmetic a training run uses for matmuls and convolutions, named as PyTorch's settings.
///
/// Note "fp32 is PyTorch's": a float32 model under PyTorch's defaults runs its matmuls in FP32
/// (torch.backends.cuda.matmul.fp32_precision "none", i.e. float32_matmul_precision "highest")
/// but lets cuDNN run convolutions and RNNs on TF32 tensor cores (torch.backends.cudnn.conv and
/// .rnn fp32_precision "tf32", the legacy torch.backends.cudnn.allow_tf32 = True). `fp32` is that
/// default, so a conv net on an A100 is predicted at the TF32 peak as it runs there.
enum class Precision : int {
  fp32 = 0,  ///< PyTorch's default: matmuls and attention FP32 on CUDA cores; convolutions and
             ///< cuDNN RNNs on TF32 tensor cores where the GPU has them
  tf32 = 1,  ///< TF32 tensor cores for every matmul too (float32_matmul_precision "high"), else FP32
  amp = 2,   ///< FP16/BF16 tensor cores (torch.autocast)
};

/// Operator class of a layer; decides which peak it runs against.
enum class OpKind : int {
  matmul = 0,       ///< linear layers, batched matmuls
  conv = 1,         ///< convolutions
  attention = 2,    ///< fused attention (scaled_dot_product_attention)
  norm = 3,         ///< batch/layer norm
  elementwise = 4,  ///< activations, dropout, residual adds
  embedding = 5,    ///< table lookups
  pool = 6,         ///< pooling
  recurrent = 7,    ///< RNN/LSTM/GRU cells
  other = 8,
};
constexpr int kNumOpKinds = 9;

/// Cost of one layer for ONE sample of local batch.
struct LayerCost {
  OpKind kind = OpKind::other;
  double forward_flops = 0;   ///< FLOPs (multiply and add counted separately), per sample
  double backward_flops = 0;  ///< FLOPs of the backward pass, per sample
  double forward_bytes = 0;   ///< activation bytes read + written by the forward, per sample
  double param_bytes = 0;     ///< bytes of this layer's parameters (read once per pass)
};

/// Efficiencies of the roofline estimate: achieved / peak. Defaults are the v0 assumptions
/// stated in the README; the learned models of srift.learn replace them.
struct RooflineParams {
  double tensor_core_efficiency = 0.45;  ///< matmul/conv/attention on tensor cores
  double cuda_core_efficiency = 0.60;    ///< FP32 matmul/conv on CUDA cores
  double memory_efficiency = 0.70;       ///< bandwidth-bound kernels
  double launch_overhead_s = 6e-6;       ///< per layer per pass (forward 1, backward 2)
  double backward_bytes_factor = 2.0;    ///< backward traffic relative to forward traffic

  void validate() const;
};

/// Roofline estimate of one GPU's compute. `optimizer_bytes` is the memory traffic of one
/// optimizer step (bytes; e.g. Adam reads/writes params, grads and two moments).
ComputeModel roofline_compute(const std::vector<LayerCost>& layers, const GpuSpec& gpu,
                              Precision precision, double optimizer_bytes,
                              const RooflineParams& params = RooflineParams{});

/// Note "peak floor": seconds per sample that the layers' FLOPs (forward + backward) take at the
/// very peak each runs against at `precision` (the roofline's choice of unit, at efficiency 1,
/// with no memory traffic and no launches). No GPU computes a sample faster; the learned
/// models, which extrapolate, are held to it (srift::LearnedCompute note "peak floor").
double peak_flop_seconds_per_sample(const std::vector<LayerCost>& layers, const GpuSpec& gpu, Precision precision);

/// Seconds to add one micro-step's gradients into the accumulated ones (ComputeModel::
/// accumulate_s): autograd's in-place add reads both and writes one, 3 x `gradient_bytes`
/// (bytes of the trainable parameters' gradients) at the memory-bound efficiency. Measured on
/// real DDP: bench/bench_accumulation.py --ddp. Throws std::invalid_argument for bad input or
/// a time past a double's range.
double gradient_accumulate_s(double gradient_bytes, const GpuSpec& gpu,
                             const RooflineParams& params = RooflineParams{});

/// Per-layer backward time (seconds) at the given local batch under the roofline; used to
/// place DDP bucket ready times inside the backward pass.
std::vector<double> roofline_backward_times(const std::vector<LayerCost>& layers,
                                            const GpuSpec& gpu, Precision precision,
                                            double batch,
                                            const RooflineParams& params = RooflineParams{});

/// One measured training iteration: of one GPU alone, or of one rank of a data-parallel run
/// on a whole instance (then the anchored model is that rank's effective compute, host
/// contention and the allreduce inside the instance included).
///
/// Note "measurement precision": a run at one precision is no evidence of another's time (on
/// tensor-core GPUs AMP is often 2-3x FP32), so a prediction at precision P anchors only on
/// runs timed at P. `precision` records what the run used; unset (std::nullopt, the default,
/// so `Measurement{batch, seconds}` keeps compiling and meaning what it did) means the caller
/// vouches that the run is at the precision of the prediction it is passed to. The functions
/// that predict at a Precision from measurements (LearnedCompute::predict_anchored,
/// LearnedCompute::measured_model) refuse a set precision that differs from the predicted one
/// (require_precision, measurements.hpp); functions without a Precision
/// (anchor_to_measurements, measured_line) read the times and ignore it.
struct Measurement {
  double local_batch = 0;   ///< samples per iteration on this GPU (> 0)
  double iteration_s = 0;   ///< forward + backward + optimizer, seconds (> 0)
  double forward_s = -1;    ///< optional, seconds; < 0 when not measured
  double backward_s = -1;   ///< optional, seconds; < 0 when not measured
  std::optional<Precision> precision = std::nullopt;  ///< what the run used; unset: the prediction's (see above)
};

/// Throws std::invalid_argument naming measurements[i] and the field for a batch or iteration
/// time that is not finite and > 0, a forward_s or backward_s that is not finite (< 0 means
/// not measured), when both are measured a forward + backward that is not finite and > 0 or is
/// above twice the iteration, or a set precision that is no Precision value.
void validate_measurements(const std::vector<Measurement>& measurements);

/// The least-squares line of measured compute time on the batch that anchor_to_measurements
/// fits: forward + backward when every measurement has both, else the iteration.
struct MeasuredLine {
  bool several_batches = false;  ///< two or more distinct batches (else no slope)
  double slope = 0;              ///< seconds per sample (0 without several batches)
  double intercept = 0;          ///< seconds at batch 0
  double mean_batch = 0;         ///< samples
  double mean_s = 0;             ///< seconds
  /// anchor_to_measurements fits this line (fixed = intercept, per-sample = slope); otherwise
  /// it scales the prior's curve through the mean, missing the measured points.
  bool fitted() const { return several_batches && slope > 0 && intercept >= 0; }
};

/// measured_line of `measurements` as anchor_to_measurements computes it, bit for bit. Throws
/// std::invalid_argument as validate_measurements does, or for no measurements.
MeasuredLine measured_line(const std::vector<Measurement>& measurements);

/// Anchors an estimate to measurements of the same GPU type. Two or more distinct batches:
/// least-squares fit of the fixed and per-sample terms (split between forward and backward
/// as measured, else as the prior splits them). One batch: the prior is scaled to match it
/// (with forward and backward measured, each phase to its measured share; a prior with no
/// time in one phase lends that phase the shape of the whole compute).
/// When every measurement has forward_s and backward_s, the terms are fitted to forward +
/// backward and the optimizer step is measured: the mean of iteration - forward - backward
/// (at least 0). Otherwise the optimizer step is the prior's, at most half the intercept.
/// Throws std::invalid_argument as validate_measurements does, or naming "measurements" when
/// they fit no model ComputeModel::validate accepts (batches and times past any real range).
ComputeModel anchor_to_measurements(const ComputeModel& prior,
                                    const std::vector<Measurement>& measurements);

}  // namespace srift
