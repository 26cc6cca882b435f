#include "srift/simulator.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "validate.hpp"

namespace srift {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Note "accumulation". When the global batch B does not fit the cluster's GPU memory at once
// (capacity C = sum over ranks of the largest local batch that fits, capped at
// SimOptions::max_local_batch when the caller sets one) and the caller allows
// gradient accumulation, an iteration runs k = ceil(B / C) forward/backward micro-steps, the
// fewest that fit (each micro-step costs at least the fixed launch cost again, so fewer is
// never slower), then one optimizer step, as DDP does with no_sync(): the first k - 1
// micro-steps only compute, each rank at its own pace; the last all-reduces its buckets as
// its backward produces them. The micro-steps split B as evenly as integers allow (B mod k
// of them one sample larger); each is split across ranks as a whole iteration would be, and
// the all-reducing micro-step is a larger one. Every micro-step must give each rank a sample,
// so B >= k x ranks, or the cluster is infeasible. A group's compute before the all-reducing
// micro-step is the sum of its slowest rank's compute in each earlier micro-step (ranks of a
// group differ by at most one sample). Every micro-step after the first also adds its
// gradients into those already held (ComputeModel::accumulate_s, k - 1 times), counted before
// the all-reducing micro-step.

// Splits the global batch into integer local batches so that ranks finish compute together.
// Continuous optimum first (water-filling over the breakpoints of the piecewise-linear
// total), then floors plus a greedy hand-out of the remainder, sample by sample to the rank
// it slows least, which minimises the slowest rank's time among integer splits (every split
// of that least time has each group at or above its floor: the continuous level is a lower
// bound on it). See simulate_unchecked for the caller's invariants.
// Note "split by level": the integer split of least slowest rank found without (t - c) / s,
// whose digits a per-sample time far below the fixed time cancels. The least level L (a
// double, found by bisection) at which every group's ranks, each at the largest batch b <= its
// cap with c + s b <= L (at least 1), hold the batch; then what is over is given back evenly,
// each group capped at the least batch T that still holds it, then one sample fewer on some
// ranks at T. Every cost is the
// expression the hand-out in split_batch compares, so the slowest rank is the least any
// integer split reaches as computed. O(groups x log cap) a bisection step: split_batch's
// fallback, not its path.
void split_by_level(const GroupSpec* groups, int n, long long global_batch, IterationResult& out) {
  auto cost = [&](int g, long long b) {
    return groups[g].compute.fixed_s() + groups[g].compute.per_sample_s() * static_cast<double>(b);
  };
  auto batch_at = [&](int g, double level) {  // the largest batch in [1, cap] costing <= level; 1 if none
    long long lo = 1, hi = out.groups[g].max_batch;
    if (cost(g, lo) > level) return lo;
    while (lo < hi) {
      const long long mid = lo + (hi - lo + 1) / 2;
      if (cost(g, mid) <= level) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  };
  auto held_at = [&](double level) {
    long long total = 0;
    for (int g = 0; g < n; ++g) total += static_cast<long long>(out.groups[g].workers) * batch_at(g, level);
    return total;
  };
  long long workers = 0, capacity = 0;
  double least = kInf, most = -kInf;
  for (int g = 0; g < n; ++g) {
    workers += out.groups[g].workers;
    capacity += static_cast<long long>(out.groups[g].workers) * out.groups[g].max_batch;
    least = std::min(least, cost(g, 1));
    most = std::max(most, cost(g, out.groups[g].max_batch));
  }
  long long take[kMaxGroups], floor_take[kMaxGroups];
  if (global_batch <= workers || global_batch >= capacity) {  // one sample a rank, or every cap
    for (int g = 0; g < n; ++g) take[g] = floor_take[g] = global_batch <= workers ? 1 : out.groups[g].max_batch;
  } else {
    // held_at(below) = workers < the batch <= capacity = held_at(most)
    double below = std::nextafter(least, -kInf), level = most;
    for (;;) {
      const double mid = below + (level - below) / 2;
      if (!(mid > below && mid < level)) break;  // adjacent doubles
      if (held_at(mid) >= global_batch) level = mid;
      else below = mid;
    }
    for (int g = 0; g < n; ++g) {
      take[g] = batch_at(g, level);
      floor_take[g] = batch_at(g, below);
    }
  }
  // Give back what is over as evenly as the level allows: each group at most T samples a rank
  // (never below what the level below holds), the least T that still holds the batch; then
  // one sample fewer on some ranks at T. Every batch given back costs no more than `level`.
  auto held_under = [&](long long top) {
    long long total = 0;
    for (int g = 0; g < n; ++g) {
      total += static_cast<long long>(out.groups[g].workers) * std::max(floor_take[g], std::min(take[g], top));
    }
    return total;
  };
  long long top_lo = 1, top_hi = 1;
  for (int g = 0; g < n; ++g) top_hi = std::max(top_hi, take[g]);
  while (top_lo < top_hi) {  // the least top whose total holds the batch (held_under(max take) does)
    const long long mid = top_lo + (top_hi - top_lo) / 2;
    if (held_under(mid) >= global_batch) top_hi = mid;
    else top_lo = mid + 1;
  }
  long long over = held_under(top_lo) - global_batch;
  for (int g = 0; g < n; ++g) {
    GroupResult& r = out.groups[g];
    const long long batch = std::max(floor_take[g], std::min(take[g], top_lo));
    r.batch_low = r.batch_high = static_cast<int>(batch);
    r.workers_high = 0;
    if (over > 0 && batch == top_lo && batch > floor_take[g] && batch > 1) {
      const long long fewer = std::min<long long>(over, r.workers);  // ranks one sample lower
      over -= fewer;
      r.batch_low = static_cast<int>(batch - 1);
      r.workers_high = static_cast<int>(r.workers - fewer);
      if (r.workers_high == 0) r.batch_high = r.batch_low;
    }
  }
}

void split_batch(const GroupSpec* groups, int n, int global_batch, IterationResult& out) {
  if (n == 1) {  // one group: an even split, the remainder one sample each (the common case)
    GroupResult& r = out.groups[0];
    r.batch_low = global_batch / r.workers;
    r.workers_high = global_batch - r.batch_low * r.workers;
    r.batch_high = r.workers_high > 0 ? r.batch_low + 1 : r.batch_low;
    return;
  }
  double breakpoints[2 * kMaxGroups];
  int nb = 0;
  for (int g = 0; g < n; ++g) {
    const double c = groups[g].compute.fixed_s(), s = groups[g].compute.per_sample_s();
    breakpoints[nb++] = c + s;                                  // local batch 1
    breakpoints[nb++] = c + s * out.groups[g].max_batch;        // local batch at the memory cap
  }
  std::sort(breakpoints, breakpoints + nb);

  auto total_at = [&](double t) {
    double total = 0;
    for (int g = 0; g < n; ++g) {
      const double c = groups[g].compute.fixed_s(), s = groups[g].compute.per_sample_s();
      const double b = std::clamp((t - c) / s, 1.0, static_cast<double>(out.groups[g].max_batch));
      total += out.groups[g].workers * b;
    }
    return total;
  };

  // total_at is non-decreasing and linear between breakpoints: find the segment holding B.
  const double target = global_batch;
  double t_lo = breakpoints[0], f_lo = total_at(t_lo), t = breakpoints[nb - 1];
  for (int i = 1; i < nb; ++i) {
    const double f_hi = total_at(breakpoints[i]);
    if (f_hi >= target) {
      const double t_hi = breakpoints[i];
      t = f_hi > f_lo ? t_lo + (target - f_lo) * (t_hi - t_lo) / (f_hi - f_lo) : t_hi;
      break;
    }
    t_lo = breakpoints[i];
    f_lo = f_hi;
  }

  long long assigned = 0, workers = 0;
  double next_cost[kMaxGroups];
  for (int g = 0; g < n; ++g) {
    GroupResult& r = out.groups[g];
    const double c = groups[g].compute.fixed_s(), s = groups[g].compute.per_sample_s();
    const double b = std::clamp((t - c) / s, 1.0, static_cast<double>(r.max_batch));
    r.batch_low = std::clamp(static_cast<int>(std::floor(b)), 1, r.max_batch);
    r.batch_high = r.batch_low;
    r.workers_high = 0;
    assigned += static_cast<long long>(r.workers) * r.batch_low;
    workers += r.workers;
    next_cost[g] = r.batch_low < r.max_batch ? c + s * (r.batch_low + 1) : kInf;
  }
  // Exact floors leave each rank less than one sample short. Over the batch, or more than a
  // sample a rank short, (t - c) / s lost its digits (a per-sample time below ~1e-12 of the
  // fixed time handed out 52,454 samples of 52,451, or left 2^31 to the hand-out below).
  if (assigned > global_batch || global_batch - assigned > workers) {
    split_by_level(groups, n, global_batch, out);
    return;
  }
  // Hand out the rest a sample at a time to the rank whose compute it raises least: each
  // group's ranks at its lower batch, then, once the whole group has moved up, the next batch
  // (a group holds at most two batches at a time). With costs increasing in the batch this
  // greedy order minimises the slowest rank; one pass over the groups did not (p4d + g4dn at
  // 257: the ninth leftover went to a T4 rank at 59.6 ms where a p4d rank at 32 takes 54.7).
  int remaining = static_cast<int>(global_batch - assigned);
  while (remaining > 0) {
    int best = -1;
    for (int g = 0; g < n; ++g) {  // the least next cost, ties to the lower group index
      if (next_cost[g] < kInf && (best < 0 || next_cost[g] < next_cost[best])) best = g;
    }
    if (best < 0) break;  // every rank at its memory cap: the caller found the batch does not fit
    GroupResult& r = out.groups[best];
    const int extra = std::min(remaining, r.workers - r.workers_high);
    remaining -= extra;
    r.batch_high = r.batch_low + 1;
    r.workers_high += extra;
    if (r.workers_high == r.workers) {  // the whole group moved up: one batch size again
      r.batch_low = r.batch_high;
      r.workers_high = 0;
      const double c = groups[best].compute.fixed_s(), s = groups[best].compute.per_sample_s();
      next_cost[best] = r.batch_low < r.max_batch ? c + s * (r.batch_low + 1) : kInf;
    }
  }
}

}  // namespace

int max_local_batch(const Workload& w, const InstanceSpec& inst, double usable_fraction,
                    int global_batch) {
  // The memory fields this rule reads; NaN cast to int below was undefined behaviour. Plain
  // comparisons first: this runs once per group of every plan simulated, and the checks'
  // field names are strings built only on failure.
  const bool ok = std::isfinite(w.fixed_memory_bytes) && w.fixed_memory_bytes >= 0 &&
                  std::isfinite(w.activation_bytes_per_sample) && w.activation_bytes_per_sample >= 0 &&
                  std::isfinite(inst.gpu_memory_bytes) && inst.gpu_memory_bytes > 0 && usable_fraction > 0 &&
                  usable_fraction <= 1 && global_batch >= 1;
  if (!ok) {
    detail::require_finite_nonneg("workload.fixed_memory_bytes", w.fixed_memory_bytes);
    detail::require_finite_nonneg("workload.activation_bytes_per_sample", w.activation_bytes_per_sample);
    detail::require_positive("instance.gpu_memory_bytes", inst.gpu_memory_bytes);
    if (!(usable_fraction > 0 && usable_fraction <= 1)) detail::fail("usable_memory_fraction", "in (0, 1]", usable_fraction);
    detail::fail("global_batch", ">= 1", global_batch);
  }
  const double free_bytes = usable_fraction * inst.gpu_memory_bytes - w.fixed_memory_bytes;
  if (free_bytes < w.activation_bytes_per_sample) return 0;
  if (w.activation_bytes_per_sample <= 0) return global_batch;
  const double cap = std::floor(free_bytes / w.activation_bytes_per_sample);
  return cap >= global_batch ? global_batch : static_cast<int>(cap);
}

int max_local_batch(const Workload& w, const InstanceSpec& inst, const SimOptions& options) {
  const int fits = max_local_batch(w, inst, options.usable_memory_fraction, options.global_batch);
  return options.max_local_batch > 0 ? std::min(fits, options.max_local_batch) : fits;
}

namespace {
// ring_allreduce_s without the checks: the simulator's inner loop, on validated inputs.
inline double ring_s(double bytes, int ranks, const LinkSpec& link) {
  if (ranks <= 1 || bytes <= 0) return 0.0;
  const double n = ranks;
  return 2.0 * (n - 1.0) / n * bytes / link.bandwidth + 2.0 * (n - 1.0) * link.latency;
}
void check_link(double bytes, int ranks, const LinkSpec& link) {
  detail::require_finite_nonneg("bytes", bytes);
  if (ranks < 1) detail::fail("ranks", ">= 1", ranks);
  if (!(link.bandwidth > 0)) detail::fail("link.bandwidth", "> 0 (bytes/s; +inf: free)", link.bandwidth);
  detail::require_finite_nonneg("link.latency", link.latency);
}
}  // namespace

namespace {
// Finite inputs can still give a time past a double (1e308 bytes over 1e-300 bytes/s).
double finite_time(const char* what, double seconds, double bytes, const LinkSpec& link) {
  if (std::isfinite(seconds)) return seconds;
  throw std::invalid_argument(std::string(what) + ": the time of " + detail::fmt(bytes) + " bytes over " +
                              detail::fmt(link.bandwidth) + " bytes/s overflows (" + detail::fmt(seconds) +
                              " s): bytes or link.bandwidth are out of any real range");
}
}  // namespace

double ring_allreduce_s(double bytes, int ranks, const LinkSpec& link) {
  check_link(bytes, ranks, link);
  return finite_time("ring_allreduce_s", ring_s(bytes, ranks, link), bytes, link);
}

double ring_broadcast_s(double bytes, int ranks, const LinkSpec& link) {
  check_link(bytes, ranks, link);
  if (ranks <= 1 || bytes <= 0) return 0.0;
  return finite_time("ring_broadcast_s", bytes / link.bandwidth + (ranks - 1.0) * link.latency, bytes, link);
}

void simulate_unchecked(const Workload& w, const GroupSpec* groups, int n,
                        const SimOptions& options, IterationResult& out,
                        std::vector<BucketEvent>* timeline) {
  // Reset only what this call writes: the result is reused across millions of calls.
  out.infeasible = Infeasible::none;
  out.workers = 0;
  out.accumulation_steps = 1;
  out.micro_batch = 0;
  out.iteration_s = out.compute_s = out.comm_s = out.exposed_comm_s = out.optimizer_s = 0;
  out.interference_s = out.broadcast_s = 0;
  out.samples_per_s = out.usd_per_hour = out.usd_per_iteration = 0;
  out.bottleneck = Bottleneck::none;
  out.bottleneck_group = -1;
  out.ring_bandwidth = out.ring_latency = 0;
  out.num_groups = n;
  if (n > kMaxGroups) {
    out.infeasible = Infeasible::too_many_groups;
    return;
  }
  // Ranks and instances in 64 bits: instances x GPUs past INT_MAX wrapped (to 0 ranks, which
  // divided by zero below). More ranks than the global batch is infeasible before any int
  // holds them, so past this check every count fits an int.
  constexpr long long kIntMax = std::numeric_limits<int>::max();
  long long workers_ll = 0, instances = 0;
  long long memory_capacity = 0;
  for (int g = 0; g < n; ++g) {
    const InstanceSpec& inst = *groups[g].instance;
    GroupResult& r = out.groups[g];
    r = GroupResult{};
    const long long group_workers = static_cast<long long>(groups[g].count) * inst.gpus;
    r.workers = static_cast<int>(std::min(group_workers, kIntMax));
    r.max_batch = max_local_batch(w, inst, options);
    workers_ll += group_workers;
    instances += groups[g].count;
    out.usd_per_hour += groups[g].count * groups[g].usd_per_hour;
  }
  out.workers = static_cast<int>(std::min(workers_ll, kIntMax));
  if (workers_ll > options.global_batch) {
    out.infeasible = Infeasible::batch_smaller_than_workers;
    return;
  }
  const int workers = static_cast<int>(workers_ll);
  bool weights_fit = true;
  for (int g = 0; g < n; ++g) {
    weights_fit = weights_fit && out.groups[g].max_batch >= 1;
    memory_capacity += static_cast<long long>(out.groups[g].workers) * out.groups[g].max_batch;
  }
  if (!weights_fit) {
    out.infeasible = Infeasible::memory;
    return;
  }
  // Micro-steps (note "accumulation"): the fewest whose batches fit memory.
  const long long global = options.global_batch;
  const long long steps = memory_capacity >= global ? 1 : (global + memory_capacity - 1) / memory_capacity;
  if (steps > options.max_accumulation_steps || steps * workers > global) {
    out.infeasible = Infeasible::memory;
    return;
  }
  const int k = static_cast<int>(steps);
  const int micro_low = static_cast<int>(global / k);
  const int micro_high_steps = static_cast<int>(global - static_cast<long long>(micro_low) * k);  // one sample larger
  const int micro_sync = micro_high_steps > 0 ? micro_low + 1 : micro_low;
  out.accumulation_steps = k;
  out.micro_batch = micro_sync;

  // Compute of the k - 1 micro-steps that do not all-reduce, per group.
  double before[kMaxGroups];
  for (int g = 0; g < n; ++g) before[g] = 0;
  if (k > 1) {
    auto add_steps = [&](int micro, int times) {
      if (times <= 0) return;
      split_batch(groups, n, micro, out);
      for (int g = 0; g < n; ++g) {
        const GroupResult& r = out.groups[g];
        before[g] += times * groups[g].compute.compute_s(r.workers_high > 0 ? r.batch_high : r.batch_low);
      }
    };
    add_steps(micro_low, k - micro_high_steps - (micro_high_steps > 0 ? 0 : 1));
    add_steps(micro_low + 1, micro_high_steps - 1);
    for (int g = 0; g < n; ++g) before[g] += (k - 1) * groups[g].compute.accumulate_s;
  }

  split_batch(groups, n, micro_sync, out);

  // Each group's slowest rank runs the larger local batch.
  double forward[kMaxGroups], backward[kMaxGroups];
  for (int g = 0; g < n; ++g) {
    GroupResult& r = out.groups[g];
    const int slowest = r.workers_high > 0 ? r.batch_high : r.batch_low;
    forward[g] = before[g] + groups[g].compute.forward_s(slowest);
    backward[g] = groups[g].compute.backward_s(slowest);
    r.compute_s = forward[g] + backward[g];
    r.memory_bytes = w.fixed_memory_bytes + w.activation_bytes_per_sample * slowest;
    out.compute_s = std::max(out.compute_s, r.compute_s);
    out.optimizer_s = std::max(out.optimizer_s, groups[g].compute.optimizer_s);
  }

  // The ring's slowest link: NICs when the ring leaves an instance, NVLink/PCIe inside one.
  double chain_latency = 0;  // a chain through every rank: each hop's own latency (note "buffer broadcast")
  if (workers > 1) {
    out.ring_bandwidth = kInf;
    double network_latency = 0;
    for (int g = 0; g < n; ++g) {
      const InstanceSpec& inst = *groups[g].instance;
      if (inst.gpus > 1) chain_latency += groups[g].count * (inst.gpus - 1.0) * inst.intra.latency;
      if (instances > 1) network_latency = std::max(network_latency, inst.network.latency);
      if (inst.gpus > 1 && inst.intra.bandwidth < out.ring_bandwidth) {
        out.ring_bandwidth = inst.intra.bandwidth;
        out.bottleneck = Bottleneck::intra;
        out.bottleneck_group = g;
      }
      out.ring_latency = std::max(out.ring_latency, inst.gpus > 1 ? inst.intra.latency : 0.0);
      if (instances > 1) {
        if (inst.network.bandwidth < out.ring_bandwidth) {
          out.ring_bandwidth = inst.network.bandwidth;
          out.bottleneck = Bottleneck::network;
          out.bottleneck_group = g;
        }
        out.ring_latency = std::max(out.ring_latency, inst.network.latency);
      }
    }
    chain_latency += (instances - 1.0) * network_latency;
  }

  // Buffers first (note "buffer broadcast" in simulator.hpp): every rank's forward waits for them.
  const LinkSpec ring{out.ring_bandwidth, out.ring_latency};
  if (workers > 1) {
    for (double bytes : w.broadcast_bytes) {
      if (bytes > 0) out.broadcast_s += bytes / ring.bandwidth + chain_latency;
    }
  }
  const double start_s = out.broadcast_s;  // every time below counts from the iteration's start

  // Buckets on one collective stream, in DDP order; each waits for the slowest rank.
  double stream_free = 0;
  const std::size_t buckets = workers > 1 ? w.bucket_bytes.size() : 0;
  bool any_interference = false;
  double overlapped[kMaxGroups];  // bytes each group's compute shared its cores with
  for (int g = 0; g < n; ++g) {
    overlapped[g] = 0;
    any_interference = any_interference || groups[g].instance->comm_compute_s_per_byte > 0;
  }
  if (buckets == 0) any_interference = false;
  for (std::size_t k = 0; k < buckets; ++k) {
    const double fraction = w.bucket_ready_fraction[k];
    double ready = forward[0] + fraction * backward[0];
    for (int g = 1; g < n; ++g) ready = std::max(ready, forward[g] + fraction * backward[g]);
    ready += start_s;
    const double duration = ring_s(w.bucket_bytes[k], workers, ring);
    const double start = std::max(ready, stream_free);
    stream_free = start + duration;
    out.comm_s += duration;
    if (any_interference && duration > 0) {
      for (int g = 0; g < n; ++g) {
        const double end = start_s + out.groups[g].compute_s;
        if (start < end) overlapped[g] += w.bucket_bytes[k] * std::min(1.0, (end - start) / duration);
      }
    }
    if (timeline != nullptr) timeline->push_back({ready, start, stream_free, w.bucket_bytes[k]});
  }

  // Interference: where collectives compete with compute for the same cores, each group's
  // compute is stretched by its cost per byte times the traffic that flowed before its
  // compute would have ended (one pass: the stretch itself is not fed back into the overlap).
  double compute_end = start_s + out.compute_s;
  if (any_interference) {
    const double traffic_per_byte = 2.0 * (workers - 1.0) / workers;
    for (int g = 0; g < n; ++g) {
      const double stretched = start_s + out.groups[g].compute_s +
                               groups[g].instance->comm_compute_s_per_byte * traffic_per_byte * overlapped[g];
      compute_end = std::max(compute_end, stretched);
    }
  }
  out.interference_s = compute_end - start_s - out.compute_s;
  out.exposed_comm_s = std::max(0.0, stream_free - compute_end);
  out.iteration_s = std::max(stream_free, compute_end) + out.optimizer_s;
  out.samples_per_s = options.global_batch / out.iteration_s;
  out.usd_per_iteration = out.usd_per_hour * out.iteration_s / 3600.0;
}

IterationResult simulate(const Workload& workload, const std::vector<GroupSpec>& groups,
                         const SimOptions& options, std::vector<BucketEvent>* timeline) {
  workload.validate();
  if (groups.empty()) throw std::invalid_argument("groups must not be empty, got 0 groups");
  if (groups.size() > static_cast<std::size_t>(kMaxGroups)) {
    detail::fail("groups (count)", "<= " + std::to_string(kMaxGroups), static_cast<double>(groups.size()));
  }
  if (options.global_batch < 1) detail::fail("global_batch", ">= 1", options.global_batch);
  if (!(options.usable_memory_fraction > 0 && options.usable_memory_fraction <= 1)) {
    detail::fail("usable_memory_fraction", "in (0, 1]", options.usable_memory_fraction);
  }
  if (options.max_accumulation_steps < 1) {
    detail::fail("max_accumulation_steps", ">= 1", options.max_accumulation_steps);
  }
  if (options.max_local_batch < 0) detail::fail("max_local_batch", ">= 0 (0: no cap)", options.max_local_batch);
  long long workers = 0;  // instances x GPUs, summed in 64 bits: an int overflow divides by 0
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const std::string f = "groups[" + std::to_string(g) + "].";
    if (groups[g].instance == nullptr) throw std::invalid_argument(f + "instance must be set");
    groups[g].instance->validate();
    if (groups[g].count < 1) detail::fail(f + "count", ">= 1", groups[g].count);
    workers += static_cast<long long>(groups[g].count) * groups[g].instance->gpus;
    if (workers > std::numeric_limits<int>::max()) {
      detail::fail(f + "count (workers: instances x GPUs over the groups)", "<= 2147483647",
                   static_cast<double>(workers));
    }
    detail::require_finite_nonneg(f + "usd_per_hour", groups[g].usd_per_hour);
    groups[g].compute.validate();
  }
  IterationResult out;
  simulate_unchecked(workload, groups.data(), static_cast<int>(groups.size()), options, out, timeline);
  if (out.feasible()) detail::require_finite_iteration("cluster", out.iteration_s, out.compute_s, out.comm_s);
  // finite prices can still sum (or, times the iteration, multiply) past a double
  if (!std::isfinite(out.usd_per_hour)) {
    detail::fail("groups' usd_per_hour (count x price, summed)", "finite (a price is out of any real range)",
                 out.usd_per_hour);
  }
  if (out.feasible() && !std::isfinite(out.usd_per_iteration)) {
    detail::fail("usd_per_iteration (usd_per_hour x iteration_s)", "finite (a price or compute model is out of any "
                 "real range)", out.usd_per_iteration);
  }
  return out;
}

std::string describe_infeasible(const IterationResult& r, const SimOptions& options) {
  std::ostringstream s;
  switch (r.infeasible) {
    case Infeasible::none:
      return "";
    case Infeasible::batch_smaller_than_workers:
      s << "global batch " << options.global_batch << " is smaller than the " << r.workers
        << " workers (GPUs) of this cluster: every rank needs at least one sample";
      return s.str();
    case Infeasible::too_many_groups:
      s << "a cluster may have at most " << kMaxGroups << " instance groups, got " << r.num_groups;
      return s.str();
    case Infeasible::memory: {
      long long capacity = 0;
      bool weights_fit = true;
      if (r.num_groups < 0 || r.num_groups > kMaxGroups) {  // a hand-made result: groups[] holds kMaxGroups
        detail::fail("result.num_groups", "0.." + std::to_string(kMaxGroups), r.num_groups);
      }
      // A hand-made result without a rank holds no sample: the steps below divided by 0.
      if (r.num_groups < 1) detail::fail("result.num_groups", ">= 1 for a memory-infeasible result", r.num_groups);
      for (int g = 0; g < r.num_groups; ++g) {
        if (r.groups[g].workers < 1) {
          detail::fail("result.groups[" + std::to_string(g) + "].workers", ">= 1", r.groups[g].workers);
        }
        // each term < 2^62; capped so four of them cannot overflow (past the batch is enough)
        capacity = std::min(capacity + static_cast<long long>(r.groups[g].workers) * std::max(0, r.groups[g].max_batch),
                            1LL << 62);
        if (r.groups[g].max_batch < 1) {
          weights_fit = false;
          // max_batch 0: the model's state and one sample's activations exceed the GPU (the
          // state alone is named before the simulator by the engine, with its size)
          s << "the model's weights, gradients and optimizer state with one sample's activations do not fit one GPU "
               "of group "
            << g << "; ";
        }
      }
      if (!weights_fit) {
        s << "use GPUs with more memory";
        return s.str();
      }
      bool capped = false;  // does max_local_batch, rather than memory, bind on some group?
      for (int g = 0; g < r.num_groups; ++g) capped = capped || r.groups[g].max_batch == options.max_local_batch;
      if (capped) {
        s << "GPU memory and max_local_batch = " << options.max_local_batch << " allow at most ";
      } else {
        s << "GPU memory holds at most ";
      }
      s << capacity << " samples across the cluster's " << r.workers
        << " GPUs, but the global batch is " << options.global_batch;
      const long long steps = (options.global_batch + capacity - 1) / capacity;
      if (options.max_accumulation_steps <= 1) {
        s << (capped ? " (use more GPUs, raise max_local_batch, or allow gradient accumulation)"
                     : " (use more or larger GPUs, or allow gradient accumulation)");
      } else if (steps > options.max_accumulation_steps) {
        s << ": it needs " << steps << " accumulation micro-steps, more than the "
          << options.max_accumulation_steps << " allowed";
      } else {
        s << ": its " << steps << " accumulation micro-steps would leave some of the " << r.workers
          << " GPUs without a sample (the global batch must be at least micro-steps x GPUs)";
      }
      return s.str();
    }
  }
  return "unknown";
}

}  // namespace srift
