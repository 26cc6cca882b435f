#pragma once
// One synchronous data-parallel iteration (PyTorch DDP semantics) on a cluster of instance
// groups. See ../shared/DESIGN.md "The iteration model".
#include <array>
#include <string>
#include <vector>

#include "srift/hardware.hpp"
#include "srift/workload.hpp"

namespace srift {

// Note "buffer broadcast". With forward_sync_buffers=True (broadcast_buffers before torch 2.13;
// the default either way) DDP broadcasts the module's buffers from rank 0 in the forward that
// follows a synchronising backward, i.e. once per iteration, before its first micro-step's
// forward (no_sync() micro-steps skip it). The forward waits for it, so every rank starts
// computing broadcast_s later: the messages of Workload::broadcast_bytes run one after another,
// each bytes / bandwidth of the ring's bottleneck link plus the latency of a chain through
// every rank. NCCL pipelines a broadcast down its ring from the root, so its bus bandwidth is
// its algorithm bandwidth and a chunk crosses every hop once: (GPUs - 1) hops inside each
// instance at its intra-node latency and (instances - 1) network hops at the slowest NIC's.
// (An allreduce's 2(n-1) ring steps each wait for their slowest hop instead.) Nothing overlaps
// it; one rank broadcasts nothing. Not modelled: gloo (CPU ranks) broadcasts otherwise,
// measured at 2.9x and 5.2x this on 4 and 8 emulated hosts (bench/buffer_broadcast.py
// --hosts); DDP's Join adds a small allreduce before it; a buffer comm hook replaces it; and
// DDP skips it after a forward under torch.no_grad().

/// Most instance groups one cluster may have.
constexpr int kMaxGroups = 16;

/// A homogeneous group of instances inside a cluster.
struct GroupSpec {
  const InstanceSpec* instance = nullptr;  ///< not owned; must outlive the call
  int count = 0;                           ///< instances, >= 1
  ComputeModel compute;                    ///< this instance's GPU on the workload
  double usd_per_hour = 0;                 ///< price of ONE instance, USD/hour
};

struct SimOptions {
  int global_batch = 0;              ///< samples per iteration over all workers, >= workers
  double usable_memory_fraction = 0.95;  ///< of each GPU's memory the allocator can use
  /// Most forward/backward micro-steps one iteration may take when the global batch does not
  /// fit the cluster's GPU memory at once (gradient accumulation; note "accumulation" in
  /// simulator.cpp). 1: no accumulation, such a cluster is infeasible.
  int max_accumulation_steps = 1;
  /// Largest local batch one GPU may run in one micro-step, samples (the per-GPU batch a
  /// training script is written for, e.g. NVIDIA's BERT scripts); 0: GPU memory alone limits
  /// it. With max_accumulation_steps > 1 it sets how many micro-steps a global batch takes,
  /// as a fixed per-GPU micro-batch does in real scripts.
  int max_local_batch = 0;
};

/// Why a cluster cannot run the workload.
enum class Infeasible : int {
  none = 0,
  batch_smaller_than_workers = 1,  ///< fewer samples than ranks: some rank would get none
  memory = 2,                      ///< even the smallest split does not fit GPU memory (or max_local_batch) in the micro-steps allowed
  too_many_groups = 3,
};

/// The ring's bottleneck.
enum class Bottleneck : int { none = 0, intra = 1, network = 2 };

struct GroupResult {
  int workers = 0;          ///< ranks in the group (instances x GPUs)
  // Local batches of the micro-step that all-reduces (the whole iteration without accumulation).
  int batch_low = 0;        ///< local batch of (workers - workers_high) ranks
  int batch_high = 0;       ///< local batch of workers_high ranks (batch_low + 1, or equal)
  int workers_high = 0;
  int max_batch = 0;        ///< largest local batch one GPU may run: what fits its memory, capped by SimOptions::max_local_batch
  double compute_s = 0;     ///< forward + backward of the group's slowest rank over every micro-step, seconds
  double memory_bytes = 0;  ///< peak memory of the group's fullest GPU, bytes
};

struct IterationResult {
  Infeasible infeasible = Infeasible::none;
  bool feasible() const { return infeasible == Infeasible::none; }
  int workers = 0;
  int num_groups = 0;
  int accumulation_steps = 1;  ///< forward/backward micro-steps per iteration (1: no accumulation)
  int micro_batch = 0;         ///< samples of the micro-step that all-reduces (global_batch without accumulation)
  double iteration_s = 0;      ///< whole iteration, seconds
  double compute_s = 0;        ///< slowest rank's forward + backward over every micro-step, seconds
  double comm_s = 0;           ///< all bucket allreduces back to back, seconds
  double exposed_comm_s = 0;   ///< communication not hidden behind the backward, seconds
  double optimizer_s = 0;      ///< slowest rank's optimizer step, seconds
  double broadcast_s = 0;      ///< DDP's buffer broadcast before the forward (note "buffer broadcast"), seconds
  double interference_s = 0;   ///< compute lost to collectives sharing its cores, seconds
  double samples_per_s = 0;
  double usd_per_hour = 0;     ///< whole cluster, USD/hour
  double usd_per_iteration = 0;
  Bottleneck bottleneck = Bottleneck::none;
  int bottleneck_group = -1;   ///< group whose link bounds the ring, -1 if none
  double ring_bandwidth = 0;   ///< bytes/s of the bottleneck link
  double ring_latency = 0;     ///< seconds per ring step
  std::array<GroupResult, kMaxGroups> groups{};
};

/// One bucket's allreduce on the collective stream (for timelines).
struct BucketEvent {
  double ready_s = 0;   ///< all ranks have the bucket's gradients (from the iteration's start, buffer broadcast included)
  double start_s = 0;
  double end_s = 0;
  double bytes = 0;
};

/// Simulates one iteration. Validates every input and throws std::invalid_argument naming
/// the field; an infeasible cluster is reported in the result, not thrown. When `timeline`
/// is given it receives one event per bucket.
IterationResult simulate(const Workload& workload, const std::vector<GroupSpec>& groups,
                         const SimOptions& options, std::vector<BucketEvent>* timeline = nullptr);

/// The hot-path form used by the search: no validation, no allocation. `groups` points to
/// `num_groups` (1..kMaxGroups) valid groups.
void simulate_unchecked(const Workload& workload, const GroupSpec* groups, int num_groups,
                        const SimOptions& options, IterationResult& out,
                        std::vector<BucketEvent>* timeline = nullptr);

/// Largest local batch whose memory fits one GPU of `instance` (0: not even the weights,
/// gradients and optimizer state fit), capped at `global_batch`. The simulator and the
/// searches share this rule.
int max_local_batch(const Workload& workload, const InstanceSpec& instance,
                    double usable_memory_fraction, int global_batch);

/// The same rule as the simulator applies it under `options`: memory at
/// options.usable_memory_fraction, capped at options.global_batch and, when set, at
/// options.max_local_batch.
int max_local_batch(const Workload& workload, const InstanceSpec& instance, const SimOptions& options);

/// Allreduce time of `bytes` over `ranks` ranks on a ring bounded by `link`, seconds:
/// 2 (n-1)/n * bytes / bandwidth + 2 (n-1) * latency; 0 on one rank or for 0 bytes. Throws
/// std::invalid_argument naming the field for bytes < 0 or non-finite, ranks < 1, a
/// bandwidth not > 0 or a latency < 0 or non-finite, or a time past a double's range.
double ring_allreduce_s(double bytes, int ranks, const LinkSpec& link);

/// Broadcast of `bytes` from one rank to `ranks` ranks down a ring whose every hop is `link`,
/// seconds: bytes / bandwidth + (n-1) * latency; 0 on one rank or for 0 bytes. Throws
/// std::invalid_argument naming the field, as ring_allreduce_s does.
double ring_broadcast_s(double bytes, int ranks, const LinkSpec& link);

/// A sentence that says why a cluster is infeasible ("" when feasible).
std::string describe_infeasible(const IterationResult& result, const SimOptions& options);

}  // namespace srift
