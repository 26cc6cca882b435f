#pragma once
// A training workload as the simulator sees it: per-GPU-type compute time as an affine
// function of the local batch, DDP gradient buckets, and memory use.
#include <cstddef>
#include <vector>

#include "srift/hardware.hpp"

namespace srift {

/// Time of one worker's compute at local batch b: fixed + per_sample * b (seconds).
/// The fixed part is kernel-launch and parameter-read overhead; the per-sample part grows
/// with the batch. See the note "affine compute" in compute.hpp.
struct ComputeModel {
  double forward_fixed_s = 0;
  double forward_per_sample_s = 0;
  double backward_fixed_s = 0;
  double backward_per_sample_s = 0;
  double optimizer_s = 0;  ///< optimizer step, independent of the batch
  /// Gradient accumulation only: adding one micro-step's gradients into those already held
  /// (every micro-step after the first), seconds; see gradient_accumulate_s in compute.hpp.
  double accumulate_s = 0;

  double forward_s(double batch) const { return forward_fixed_s + forward_per_sample_s * batch; }
  double backward_s(double batch) const { return backward_fixed_s + backward_per_sample_s * batch; }
  double compute_s(double batch) const { return forward_s(batch) + backward_s(batch); }
  double fixed_s() const { return forward_fixed_s + backward_fixed_s; }
  double per_sample_s() const { return forward_per_sample_s + backward_per_sample_s; }

  /// Throws std::invalid_argument when a term is negative/non-finite or the slope is 0.
  void validate() const;
};

/// Everything about the model that does not depend on the GPU type.
struct Workload {
  /// Gradient bucket sizes in bytes, in the order DDP reduces them (bucket 0 first: it
  /// holds the parameters whose gradients are produced first, i.e. the last layers).
  std::vector<double> bucket_bytes;
  /// For each bucket, the fraction of the backward pass elapsed when its last gradient is
  /// ready, in [0, 1] and non-decreasing.
  std::vector<double> bucket_ready_fraction;
  /// DDP's buffer broadcast (forward_sync_buffers=True, DDP's default; broadcast_buffers before
  /// torch 2.13): before the first forward of every iteration rank 0 sends the module's buffers
  /// (BatchNorm running statistics, registered masks and tables) to every rank: the messages,
  /// bytes, one per dtype, each closed once it reaches 250 MiB. Empty: no buffers, or the flag
  /// off. See the note "buffer broadcast" in simulator.hpp.
  std::vector<double> broadcast_bytes;
  /// Per-GPU memory independent of the batch: weights, gradients, DDP buckets, optimizer
  /// state and framework workspace, bytes.
  double fixed_memory_bytes = 0;
  /// Activation memory per sample of local batch, bytes.
  double activation_bytes_per_sample = 0;

  void validate() const;
  double total_gradient_bytes() const;
};

}  // namespace srift
