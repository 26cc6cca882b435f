#pragma once
// The p10-p90 band of one iteration's time, and the chance that a run meets a deadline under
// that band and spot preemption together.
//
// Note "iteration band" (what srift.prediction and the searches share):
// - Each group's compute carries factors (p10, p90) on its compute time: the held-out
//   residual quantiles of the model that produced it, or the measurement noise of a measured
//   GPU. The slowest group's band moves the iteration by that group's compute time:
//   p10 = t - c (1 - f10), p90 = t + c (f90 - 1).
// - Links carry factors on the whole iteration, each the held-out spread of measured steps
//   predicted from a *measured* 1-GPU step: the learned PCIe link's (per instance type,
//   GroupBand::link) and the scaling band over links srift models or a probe measured (by
//   scope and GPUs per instance, ScalingBand; srift.learn.scaling_band note "scaling band").
//   They are two estimates of one error: the widest counts.
// - The compute error and the link error are independent: they add in quadrature in log
//   space, log(p90 / t) = hypot(log(compute p90 / t), log(link p90)), and likewise below.
//   The links only ever widen the band.
// - A measurement at one batch widens its group's compute band away from that batch
//   (GroupBand note "measured batch band").
// - Where the slowest group's compute band is unknown (NaN: the plain roofline has no
//   residuals) the iteration has no band.
//
// Note "deadline probability": the iteration's factor F is taken as two-piece log-normal
// with its median at the prediction and its p10 and p90 at the band's edges (log F has
// standard deviation log(f90) / z90 above 0 and -log(f10) / z90 below, z90 = 1.2816). A
// run of nominal time W (iterations x the predicted iteration) takes W F before preemption;
// preemption (spot.hpp note "spot model") then acts on W F. So
//   P(meet D) = E_F[ 1 - miss_probability(W F, rate, D) ],
// exact (the normal CDF) without spot. With spot, preemption only adds time, so
//   P(meet D) = P(F <= D / W) x E[ 1 - miss(W F) | F <= D / W ],
// the expectation taken as the mean over 32 equal-probability slices of that conditional
// band (their midpoints): exact as the rate goes to 0, never above the band's chance alone.
// A band of (1, 1) gives the spot model's answer bit for bit. A confidence q >= 0.5 is met
// without spot exactly when the band's q-quantile run fits, W f90^(z_q / z90) <= D
// (band_quantile_factor), which the searches test directly rather than through the CDF's
// rounding.
#include <array>
#include <limits>

#include "srift/simulator.hpp"
#include "srift/spot.hpp"

namespace srift {

/// Factors on a time at its 10th and 90th percentiles. (1, 1): no spread; NaN: unknown.
struct BandFactors {
  double p10 = 1.0;  ///< in (0, 1]
  double p90 = 1.0;  ///< >= 1
  bool known() const;
  bool trivial() const { return p10 == 1.0 && p90 == 1.0; }
  /// Throws std::invalid_argument naming `field` unless 0 < p10 <= 1 <= p90 < inf, or both
  /// NaN (unknown).
  void validate(const char* field) const;
};

/// What srift knows about the spread of one instance type's part of an iteration.
struct GroupBand {
  /// On one rank's compute time when the cluster is a single instance.
  BandFactors compute;
  /// The same in a cluster of several instances (a whole-instance measurement did not see
  /// the network, so it may be wider).
  BandFactors compute_several;
  /// On the whole iteration: the learned PCIe link's held-out step residuals where this
  /// type's GPUs exchange gradients over it; (1, 1) elsewhere. A type whose link band is not
  /// (1, 1) carries its own link evidence: the scaling band does not apply to it alone.
  BandFactors link;
  /// Note "measured batch band": where the compute scales a measurement taken at one local
  /// batch (samples; 0: none), the compute band widens away from it. At the slowest group's
  /// local batch b, `compute` (the measurement's noise) and `per_e_fold` raised to
  /// |ln(b / measured_batch)| add in quadrature in log space.
  double measured_batch = 0;
  /// The compute band's factors per e-fold of local batch away from measured_batch: the
  /// held-out spread of a measured GPU predicted at another batch; (1, 1): none.
  BandFactors per_e_fold;
  bool measured_whole = false;  ///< the profile timed a DDP iteration on the whole instance
  bool intra_probed = false;    ///< `srift probe-network` measured the link inside it
  bool network_probed = false;  ///< ... and the network between such instances
  void validate(const char* field) const;
};

/// Scopes of the scaling band, as stored in the model file.
enum class ScalingScope : int { single_instance = 0, multi_instance = 1, probed_single_instance = 2,
                                probed_multi_instance = 3 };
constexpr int kScalingScopes = 4;
/// GPUs-per-instance buckets: 1, 2, 3-4, 5+.
constexpr int kScalingBuckets = 4;

/// The bucket of an instance with `gpus_per_instance` ranks (>= 1): 0 for 1, 1 for 2, 2 for
/// 3-4, 3 for 5 and more. Throws std::invalid_argument below 1.
int scaling_bucket(int gpus_per_instance);

/// The held-out spread of multi-GPU steps over modelled or probed links, by scope and GPUs
/// per instance (srift.learn.scaling_band). All (1, 1) by default: no band.
struct ScalingBand {
  std::array<std::array<BandFactors, kScalingBuckets>, kScalingScopes> cells{};
  const BandFactors& cell(ScalingScope scope, int bucket) const;
  BandFactors& cell(ScalingScope scope, int bucket);
  /// Every cell known and valid (BandFactors::validate), else std::invalid_argument naming
  /// `scaling_band.cells[scope][bucket]`.
  void validate() const;
};

/// Which scaling band cell a cluster takes, and why.
struct ScalingLookup {
  bool applies = false;       ///< false: the iteration carries its own evidence (factors 1, 1)
  bool probed = false;        ///< the probed scope: every link that matters was measured
  int instances = 0;          ///< instances of the cluster
  int gpus_per_instance = 0;  ///< the most GPUs on one of them
  BandFactors factors;
};

/// The note's rule for a cluster of `n` groups (count[j] >= 1 instances of gpus[j] GPUs each,
/// with bands[j]): one GPU, a single instance measured whole or on its own link band, and
/// several instances of types all measured whole take (1, 1). Otherwise the probed scope where
/// the links that matter were probed (a lone instance's intra link; across several, every
/// network and every multi-GPU type's intra link), the modelled scope elsewhere.
/// Validates (n in 1..kMaxGroups, gpus >= 1, counts >= 0 with at least one instance, every
/// band and the table) and throws std::invalid_argument naming the field.
ScalingLookup scaling_lookup(const ScalingBand& table, const int* gpus, const int* counts,
                             const GroupBand* bands, int n);
/// The hot-path form: no validation.
ScalingLookup scaling_lookup_unchecked(const ScalingBand& table, const int* gpus, const int* counts,
                                       const GroupBand* bands, int n);

/// One iteration's band (note "iteration band").
struct IterationBand {
  double p10_s = std::numeric_limits<double>::quiet_NaN();  ///< seconds; NaN: no band
  double p90_s = std::numeric_limits<double>::quiet_NaN();
  int compute_group = -1;  ///< the slowest group, whose compute band counts
  BandFactors compute;     ///< its factors, on its compute time
  BandFactors link;        ///< the widest learned-link band, on the iteration
  ScalingLookup scaling;   ///< the scaling band, on the iteration
  bool known() const { return p10_s == p10_s && p90_s == p90_s; }
  /// (p10_s / t, p90_s / t) for an iteration of t seconds; NaN when unknown.
  BandFactors factors(double iteration_s) const;
};

/// The band of a feasible iteration `result` of `groups` (as given to simulate) with one
/// GroupBand per group. Throws std::invalid_argument on a mismatch (n, an infeasible result)
/// or a bad band, and where factors each valid make a p90 that is not a finite number (a
/// per_e_fold raised to the e-folds from the measured batch, named); validates nothing else.
IterationBand iteration_band(const IterationResult& result, const GroupSpec* groups, const GroupBand* bands,
                             int n, const ScalingBand& table);

/// The hot-path form for the searches: no validation, no allocation (but the same
/// std::invalid_argument where the p90 is not a finite number).
IterationBand iteration_band_unchecked(const IterationResult& result, const GroupSpec* groups,
                                       const GroupBand* bands, int n, const ScalingBand& table);

/// Standard normal CDF and its inverse (p in (0, 1); relative error ~1e-15).
double normal_cdf(double x);
double normal_quantile(double p);

/// Chance that a run of `nominal_s` predicted seconds meets `deadline_s` when the iteration
/// time carries `band` (factors on it; (1, 1) or unknown: exact) and the plan is preempted
/// at `interruptions_per_hour` (note "deadline probability"). `deadline_s` may be +inf.
/// Throws std::invalid_argument naming the field (nominal_s, band, interruptions_per_hour,
/// params, deadline_s).
double deadline_probability(double nominal_s, const BandFactors& band, double interruptions_per_hour,
                            const SpotParams& params, double deadline_s);
/// The hot-path form: no validation.
double deadline_probability_unchecked(double nominal_s, const BandFactors& band, double interruptions_per_hour,
                                      const SpotParams& params, double deadline_s);

/// The band's factor at quantile q in [0.5, 1): f90^(z_q / z90) (1 for an unknown or (1, 1)
/// band). A run of W predicted seconds meets a deadline D with probability >= q without
/// preemption exactly when W x this <= D. Throws std::invalid_argument on q outside [0.5, 1)
/// or a band BandFactors::validate refuses.
double band_quantile_factor(const BandFactors& band, double q);

}  // namespace srift
