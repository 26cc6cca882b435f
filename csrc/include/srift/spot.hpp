#pragma once
// Spot instances: expected wall time of a training run under preemption, with periodic
// checkpoints, restarts and lost work; its quantiles and the chance of missing a deadline.
//
// Note "spot model" (first-order, after Young 1974 and Daly 2006):
// - Interruptions arrive as a Poisson process. Each spot INSTANCE of a plan is reclaimed at
//   its offer's rate (per hour), independently; a synchronous job stops when any instance
//   stops, so the plan's rate is Λ = Σ over spot groups of count × rate and the mean time
//   between failures is M = 3600 / Λ seconds. On-demand instances have rate 0.
// - The job writes a checkpoint of `checkpoint_bytes` every τ seconds of work; a write costs
//   δ = checkpoint_bytes / write_bytes_per_s. Young's optimum τ = sqrt(2 δ M), capped at the
//   nominal work W. Checkpointing is used only when it lowers the expected time; otherwise
//   (short runs) the job never checkpoints and a failure loses half the run on average.
// - A failure costs a restart R = provisioning_s + checkpoint_bytes / read_bytes_per_s plus
//   the work since the last checkpoint, (τ + δ) / 2 on average.
// - Failure-free time T0 = W (1 + δ/τ); each failure adds c_f = R + (τ + δ) / 2. Failures
//   occur over the whole wall time, so E[T] = T0 + (E[T] / M) c_f, i.e.
//   E[T] = T0 / (1 - c_f / M); when c_f >= M the job never finishes (E[T] = inf).
// - The number of failures N is taken as Poisson with mean E[T] / M. What k >= 1 failures
//   cost varies (each loses between nothing and a whole interval since its checkpoint), so
//   their loss is spread evenly over [(k - 1/2) c_f, (k + 1/2) c_f], centred on k c_f (the
//   mean is unchanged); no failure costs nothing. With x = (D - T0) / c_f,
//   P(meet D) = G(x): PoissonCDF(0) for x < 1/2, else PoissonCDF(k - 1) + (x - k + 1/2)
//   PoissonPMF(k) with k = floor(x + 1/2); a quantile q of the wall time is T0 + x_q c_f with
//   G(x_q) = q (x_q = 0 when q <= PoissonCDF(0)). With the loss a point mass at k c_f, the
//   probability jumped by a whole Poisson term wherever x crossed an integer: Young's interval
//   shrinks as the rate rises, so a 0.3% higher rate took P(miss) from 33% to 6% (a review).
// - Cost bills every instance for the whole expected wall time (reclaimed spot instances are
//   replaced; restarts are billed): total USD = cluster USD/hour x E[T] / 3600. This slightly
//   overstates the cost of the restart gaps: conservative.
// With Λ = 0 every formula reduces to T = W exactly (no checkpoints): v0 behaviour.

namespace srift {

/// How a run checkpoints and restarts. Units: bytes, bytes/s, seconds.
struct SpotParams {
  double checkpoint_bytes = 0;      ///< state written per checkpoint (weights + optimizer), bytes
  double write_bytes_per_s = 1e9;   ///< checkpoint write bandwidth to durable storage, bytes/s (> 0)
  double read_bytes_per_s = 1e9;    ///< reload bandwidth after a restart, bytes/s (> 0)
  double provisioning_s = 300;      ///< getting a replacement instance and restarting, seconds

  double checkpoint_s() const { return checkpoint_bytes / write_bytes_per_s; }
  double restart_s() const { return provisioning_s + checkpoint_bytes / read_bytes_per_s; }
  /// Throws std::invalid_argument naming the field.
  void validate() const;
};

/// A plan's run under preemption: the assumptions and the resulting times (seconds).
struct SpotEstimate {
  double interruptions_per_hour = 0;  ///< plan rate Λ (0: no spot instance)
  double nominal_s = 0;               ///< W: iterations x iteration time, no preemption
  double checkpoint_s = 0;            ///< δ: one checkpoint write (0 when never written)
  double restart_s = 0;               ///< R: provisioning + reload
  double checkpoint_interval_s = 0;   ///< τ: work between checkpoints (0: no checkpoints)
  double checkpoints = 0;             ///< W / τ checkpoints written (0 when no spot)
  double failure_free_s = 0;          ///< T0 = W (1 + δ/τ)
  double cost_per_interruption_s = 0; ///< c_f = R + (τ + δ) / 2
  double expected_interruptions = 0;  ///< E[T] / M
  double expected_lost_s = 0;         ///< E[T] - T0: restarts plus recomputed work
  double expected_s = 0;              ///< E[T]; +inf when the job cannot make progress
  double p90_s = 0;                   ///< 90th percentile of the wall time
  double miss_probability = 0;        ///< P(T > deadline); 0 or 1 without spot
};

/// Applies the note "spot model" to a run of `nominal_s` seconds (>= 0) on a plan with
/// `interruptions_per_hour` (>= 0). `deadline_s` may be +inf. Does not validate `params`.
SpotEstimate estimate_spot(double nominal_s, double interruptions_per_hour, const SpotParams& params,
                           double deadline_s);

/// E[T] of estimate_spot alone, seconds (the search's hot path: no quantiles). Equals
/// nominal_s exactly when the rate is 0; non-decreasing in nominal_s and in the rate.
/// Throws std::invalid_argument, as estimate_spot, for a nominal_s that is not >= 0 or a rate
/// that is not finite and >= 0. Does not validate `params`.
double spot_expected_s(double nominal_s, double interruptions_per_hour, const SpotParams& params);

/// estimate_spot's miss_probability alone (no quantiles), for the searches' hot path; throws
/// as estimate_spot on a bad nominal_s, rate or NaN deadline.
double spot_miss_probability(double nominal_s, double interruptions_per_hour, const SpotParams& params,
                             double deadline_s);

/// Wall time at quantile q in [0, 1) of an estimate (q = 0.9 gives p90_s), seconds.
double spot_time_quantile(const SpotEstimate& estimate, double q);

/// P(N <= k) for N ~ Poisson(mean); k < 0 gives 0. Throws std::invalid_argument for a
/// mean that is not finite and >= 0. Costs O(sqrt(mean)) whatever k is.
double poisson_cdf(long long k, double mean);

/// Smallest k with P(N <= k) >= q for N ~ Poisson(mean), q in [0, 1); mean >= 0 (+inf gives
/// the largest long long). Throws std::invalid_argument otherwise.
long long poisson_quantile(double mean, double q);

/// Maps an interruption frequency class of the AWS Spot Advisor ("<5%", "5-10%", "10-15%",
/// "15-20%", ">20%": share of instances reclaimed in a month) to a rate per instance-hour,
/// taking the class's upper edge (and 30% for ">20%") so the estimate is conservative.
/// "unknown" (or "") maps to the ">20%" rate. Throws std::invalid_argument on anything else.
double interruption_rate_from_class(const char* frequency_class);

}  // namespace srift
