#include "srift/spot.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "validate.hpp"

namespace srift {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kHoursPerMonth = 730.0;

// ln P(X = k) of a Poisson(mean) count, k >= 0 and mean > 0, without std::lgamma, which
// writes glibc's global `signgam`: a data race when searches run on several threads
// (ThreadSanitizer). Past k = 10 Stirling's series for ln k! (truncation below 1e-12), with
// k ln(mean) - k ln(k) taken as k log1p((mean - k) / k): near the mean the terms of the plain
// sum are ~1e7 each and cancel to ~1, losing ~1e-9 of the probability.
double log_poisson_pmf(double k, double mean) {
  if (k < 10) {
    double factorial = 1;
    for (double i = 2; i <= k; ++i) factorial *= i;
    return k * std::log(mean) - mean - std::log(factorial);
  }
  const double inv = 1.0 / k, inv2 = inv * inv;
  constexpr double kHalfLogTwoPi = 0.91893853320467274178;
  const double series = inv * (1.0 / 12 - inv2 * (1.0 / 360 - inv2 * (1.0 / 1260 - inv2 / 1680)));
  return k * std::log1p((mean - k) / k) + (k - mean) - 0.5 * std::log(k) - kHalfLogTwoPi - series;
}

// Poisson CDF by summing terms in log space (no underflow for large means) over the window
// within 40 standard deviations (+40) of the mean, outside which the terms vanish in a
// double; for very large means the normal approximation with continuity correction is exact
// enough for a report. The window keeps the cost O(sqrt(mean)) whatever k is: summing from
// 0 to k until the sum reached 1 - 1e-15 never ended when rounding left it just below.
double poisson_cdf_impl(long long k, double mean) {
  if (k < 0) return 0.0;
  if (mean <= 0) return 1.0;
  if (mean > 1e6) {
    const double z = (static_cast<double>(k) + 0.5 - mean) / std::sqrt(mean);
    return 0.5 * std::erfc(-z / std::sqrt(2.0));
  }
  const double reach = 40.0 * std::sqrt(mean) + 40.0;
  const double hi = mean + reach;
  if (static_cast<double>(k) > hi) return 1.0;
  const long long first = static_cast<long long>(std::max(0.0, std::floor(mean - reach)));
  if (k < first) return 0.0;
  double sum = 0;
  for (long long i = first; i <= k; ++i) sum += std::exp(log_poisson_pmf(static_cast<double>(i), mean));
  return std::min(1.0, sum);
}

}  // namespace

void SpotParams::validate() const {
  detail::require_finite_nonneg("spot.checkpoint_bytes", checkpoint_bytes);
  detail::require_positive("spot.write_bytes_per_s", write_bytes_per_s);
  detail::require_positive("spot.read_bytes_per_s", read_bytes_per_s);
  detail::require_finite_nonneg("spot.provisioning_s", provisioning_s);
}

double poisson_cdf(long long k, double mean) {
  // NaN escaped the window; a negative mean came back as a certainty (1.0)
  if (!std::isfinite(mean) || mean < 0) detail::fail("mean", "finite and >= 0", mean);
  return poisson_cdf_impl(k, mean);
}

long long poisson_quantile(double mean, double q) {
  if (!(q >= 0 && q < 1)) detail::fail("q", "in [0, 1)", q);
  if (!(mean >= 0)) detail::fail("mean", ">= 0 (+inf: past any count)", mean);
  if (mean <= 0) return 0;
  if (!(mean < 4e18)) return std::numeric_limits<long long>::max();  // past what a count holds
  long long k = 0;
  double sum = 0;
  // Large means: bisect the CDF within 12 standard deviations of the mean (a scan takes
  // O(sqrt(mean)) steps, which never ends once ++k stops changing a double).
  if (mean > 1e6) {
    const double sd = std::sqrt(mean);
    long long lo = static_cast<long long>(std::max(0.0, std::floor(mean - 12 * sd)));
    long long hi = static_cast<long long>(std::ceil(mean + 12 * sd));
    if (poisson_cdf_impl(lo, mean) >= q) return lo;
    while (hi - lo > 1) {  // invariant: cdf(lo) < q <= cdf(hi)
      const long long mid = lo + (hi - lo) / 2;
      (poisson_cdf_impl(mid, mean) >= q ? hi : lo) = mid;
    }
    return hi;
  }
  for (;; ++k) {
    const double dk = static_cast<double>(k);
    sum += std::exp(log_poisson_pmf(dk, mean));
    if (sum >= q) return k;
    if (dk > mean + 60 * std::sqrt(mean) + 60) return k;  // rounding: q within 1e-15 of 1
  }
}

namespace {

// The expectation part of the note "spot model" (no quantiles): fills the interval, the
// failure-free time, the cost of one interruption and the expected time. Checkpointing at
// Young's interval is used only when it beats never checkpointing (short runs), which keeps
// the expected time non-decreasing in both the nominal time and the rate.
void expectation(double nominal_s, double rate, const SpotParams& p, SpotEstimate& e) {
  const double mtbf = 3600.0 / rate;
  const double delta = p.checkpoint_s();
  e.restart_s = p.restart_s();
  // Never checkpointing: a failure loses half the run so far on average.
  const double never_cf = e.restart_s + nominal_s / 2.0;
  const double never_denom = 1.0 - never_cf / mtbf;
  const double never = never_denom > 0 ? nominal_s / never_denom : kInf;
  const double tau = std::sqrt(2.0 * delta * mtbf);
  double with = kInf, with_t0 = 0, with_cf = 0;
  if (tau < nominal_s) {
    with_t0 = nominal_s * (1.0 + std::sqrt(delta / (2.0 * mtbf)));  // W (1 + δ/τ), δ may be 0
    with_cf = e.restart_s + (tau + delta) / 2.0;
    const double denom = 1.0 - with_cf / mtbf;
    if (denom > 0) with = with_t0 / denom;
  }
  if (with < never) {
    e.checkpoint_s = delta;
    e.checkpoint_interval_s = tau;
    e.checkpoints = tau > 0 ? nominal_s / tau : 0;
    e.failure_free_s = with_t0;
    e.cost_per_interruption_s = with_cf;
    e.expected_s = with;
  } else {
    e.failure_free_s = nominal_s;
    e.cost_per_interruption_s = never_cf;
    e.expected_s = never;
  }
  e.expected_interruptions = e.expected_s / mtbf;
  e.expected_lost_s = e.expected_s - e.failure_free_s;
}

// P(wall time > deadline) of an estimate whose expectation is filled and finite.
double miss_given(const SpotEstimate& e, double deadline_s) {
  if (deadline_s < e.failure_free_s) return 1.0;
  if (!std::isfinite(deadline_s)) return 0.0;
  // Interruptions that cost nothing (no checkpoint to write or read, no provisioning) cannot
  // push the run past a deadline it meets without them; the division below would be 0 / 0.
  if (!(e.cost_per_interruption_s > 0)) return 0.0;
  // Note "spot model": the loss of k failures spread over [(k - 1/2) c_f, (k + 1/2) c_f].
  const double x = (deadline_s - e.failure_free_s) / e.cost_per_interruption_s;
  const double mean = e.expected_interruptions;
  if (x < 0.5) return std::max(0.0, 1.0 - std::exp(-mean));
  if (x + 0.5 > 9e15) return std::max(0.0, 1.0 - poisson_cdf_impl(static_cast<long long>(9e15), mean));
  const double k = std::floor(x + 0.5);
  const double within = x + 0.5 - k;  // in [0, 1): how far into the k-th failure's spread
  const double met = poisson_cdf_impl(static_cast<long long>(k) - 1, mean) +
                     within * std::exp(log_poisson_pmf(k, mean));
  return std::clamp(1.0 - met, 0.0, 1.0);
}

// The run's inputs, as estimate_spot checks them (plain comparisons first: the searches call
// these per plan): a NaN rate read as "no preemption" and a negative time came back.
void check_run(double nominal_s, double interruptions_per_hour) {
  if (nominal_s >= 0 && interruptions_per_hour >= 0 && interruptions_per_hour < kInf) return;
  if (!(nominal_s >= 0)) detail::fail("nominal_s", ">= 0", nominal_s);
  detail::fail("interruptions_per_hour", "finite and >= 0", interruptions_per_hour);
}

}  // namespace

double spot_expected_s(double nominal_s, double interruptions_per_hour, const SpotParams& params) {
  check_run(nominal_s, interruptions_per_hour);
  if (!(interruptions_per_hour > 0)) return nominal_s;
  SpotEstimate e;
  expectation(nominal_s, interruptions_per_hour, params, e);
  return e.expected_s;
}

SpotEstimate estimate_spot(double nominal_s, double interruptions_per_hour, const SpotParams& p,
                           double deadline_s) {
  check_run(nominal_s, interruptions_per_hour);
  if (std::isnan(deadline_s)) detail::fail("deadline_s", "a number (inf: none)", deadline_s);
  SpotEstimate e;
  e.interruptions_per_hour = interruptions_per_hour;
  e.nominal_s = nominal_s;
  if (!(interruptions_per_hour > 0)) {
    // No preemption: exactly the nominal time (the v0 objective, bit for bit).
    e.failure_free_s = e.expected_s = e.p90_s = nominal_s;
    e.miss_probability = nominal_s > deadline_s ? 1.0 : 0.0;
    return e;
  }
  expectation(nominal_s, interruptions_per_hour, p, e);
  if (!std::isfinite(e.expected_s)) {
    e.p90_s = kInf;
    e.miss_probability = 1.0;
    return e;
  }
  e.p90_s = spot_time_quantile(e, 0.9);
  e.miss_probability = miss_given(e, deadline_s);
  return e;
}

double spot_miss_probability(double nominal_s, double interruptions_per_hour, const SpotParams& p,
                             double deadline_s) {
  check_run(nominal_s, interruptions_per_hour);
  if (std::isnan(deadline_s)) detail::fail("deadline_s", "a number (inf: none)", deadline_s);
  if (!(interruptions_per_hour > 0)) return nominal_s > deadline_s ? 1.0 : 0.0;
  SpotEstimate e;
  expectation(nominal_s, interruptions_per_hour, p, e);
  if (!std::isfinite(e.expected_s)) return 1.0;
  return miss_given(e, deadline_s);
}

double spot_time_quantile(const SpotEstimate& e, double q) {
  if (!(q >= 0 && q < 1)) detail::fail("q", "in [0, 1)", q);
  if (!(e.interruptions_per_hour > 0)) return e.expected_s;
  if (!std::isfinite(e.expected_s)) return kInf;
  // Note "spot model": x_q with G(x_q) = q; the k failures the Poisson quantile counts cost
  // between (k - 1/2) c_f and (k + 1/2) c_f.
  const double mean = e.expected_interruptions;
  const long long k = poisson_quantile(mean, q);
  if (k == 0) return e.failure_free_s;
  const double below = poisson_cdf_impl(k - 1, mean), pmf = std::exp(log_poisson_pmf(static_cast<double>(k), mean));
  const double within = pmf > 0 ? std::clamp((q - below) / pmf, 0.0, 1.0) : 1.0;
  return e.failure_free_s + (static_cast<double>(k) - 0.5 + within) * e.cost_per_interruption_s;
}

double interruption_rate_from_class(const char* frequency_class) {
  const std::string c = frequency_class == nullptr ? "" : frequency_class;
  double monthly;
  if (c == "<5%") monthly = 0.05;
  else if (c == "5-10%") monthly = 0.10;
  else if (c == "10-15%") monthly = 0.15;
  else if (c == "15-20%") monthly = 0.20;
  else if (c == ">20%" || c == "unknown" || c.empty()) monthly = 0.30;
  else {
    throw std::invalid_argument(
        "frequency_class must be one of \"<5%\", \"5-10%\", \"10-15%\", \"15-20%\", \">20%\", "
        "\"unknown\", got \"" + c + "\"");
  }
  // P(reclaimed within a month) = 1 - exp(-rate * hours) for a Poisson process.
  return -std::log(1.0 - monthly) / kHoursPerMonth;
}

}  // namespace srift
