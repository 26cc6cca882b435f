#include "srift/band.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "validate.hpp"

namespace srift {
namespace {

constexpr double kZ90 = 1.2815515655446004;  // standard normal 90th percentile
constexpr double kSqrt2Pi = 2.5066282746310002;
// Equal-probability slices of the band below the deadline for the spot case (note "deadline
// probability").
constexpr int kBandNodes = 32;

bool is_nan(double v) { return v != v; }

const char* kScopeNames[kScalingScopes] = {"single_instance", "multi_instance", "probed_single_instance",
                                           "probed_multi_instance"};

}  // namespace

bool BandFactors::known() const { return !is_nan(p10) && !is_nan(p90); }

namespace {
// Whether BandFactors::validate passes (both NaN, or p10 in (0, 1] and p90 finite and >= 1),
// its one statement: GroupBand::validate asks first and names a field only to report it.
bool factors_valid(const BandFactors& b) {
  return (is_nan(b.p10) && is_nan(b.p90)) || ((b.p10 > 0 && b.p10 <= 1) && (b.p90 >= 1 && std::isfinite(b.p90)));
}
}  // namespace

void BandFactors::validate(const char* field) const {
  if (factors_valid(*this)) return;
  // the field's name is built only to report it: band_quantile_factor checks a band per plan
  if (!(p10 > 0 && p10 <= 1)) detail::fail(std::string(field) + ".p10", "in (0, 1] (or p10 and p90 both NaN)", p10);
  detail::fail(std::string(field) + ".p90", "finite and >= 1 (or p10 and p90 both NaN)", p90);
}

void GroupBand::validate(const char* field) const {
  // Each field's name is built only to report it: a search checks every offer's band per call.
  auto f = [field](const char* suffix) { return std::string(field) + suffix; };
  if (!factors_valid(compute)) compute.validate(f(".compute").c_str());
  if (!factors_valid(compute_several)) compute_several.validate(f(".compute_several").c_str());
  if (!factors_valid(link)) link.validate(f(".link").c_str());
  if (!link.known()) detail::fail(f(".link.p10"), "known ((1, 1) where the link has no band of its own)", link.p10);
  if (!(std::isfinite(measured_batch) && measured_batch >= 0)) {
    detail::fail(f(".measured_batch"), "a finite local batch >= 0 (0: none)", measured_batch);
  }
  if (!factors_valid(per_e_fold)) per_e_fold.validate(f(".per_e_fold").c_str());
  if (!per_e_fold.known()) {
    detail::fail(f(".per_e_fold.p10"), "known ((1, 1) where no measurement is extrapolated)", per_e_fold.p10);
  }
}

int scaling_bucket(int gpus_per_instance) {
  if (gpus_per_instance < 1) detail::fail("gpus_per_instance", ">= 1", gpus_per_instance);
  if (gpus_per_instance <= 2) return gpus_per_instance - 1;
  return gpus_per_instance <= 4 ? 2 : 3;
}

const BandFactors& ScalingBand::cell(ScalingScope scope, int bucket) const {
  const int s = static_cast<int>(scope);
  if (s < 0 || s >= kScalingScopes) throw std::out_of_range("scope must be 0..3, got " + std::to_string(s));
  if (bucket < 0 || bucket >= kScalingBuckets) {
    throw std::out_of_range("bucket must be 0..3, got " + std::to_string(bucket));
  }
  return cells[s][bucket];
}

BandFactors& ScalingBand::cell(ScalingScope scope, int bucket) {
  return const_cast<BandFactors&>(static_cast<const ScalingBand&>(*this).cell(scope, bucket));
}

void ScalingBand::validate() const {
  for (int s = 0; s < kScalingScopes; ++s) {
    for (int b = 0; b < kScalingBuckets; ++b) {
      const std::string field = std::string("scaling_band.cells[") + kScopeNames[s] + "][" + std::to_string(b) + "]";
      cells[s][b].validate(field.c_str());
      if (!cells[s][b].known()) detail::fail(field + ".p10", "known", cells[s][b].p10);
    }
  }
}

ScalingLookup scaling_lookup_unchecked(const ScalingBand& table, const int* gpus, const int* counts,
                                       const GroupBand* bands, int n) {
  ScalingLookup out;
  bool all_whole = true, all_probed = true;
  int only = -1;  // the group of a lone instance
  long long instances = 0;  // summed in 64 bits: two groups of INT_MAX instances wrapped
  for (int j = 0; j < n; ++j) {
    if (counts[j] < 1) continue;  // a group without instances takes no part
    only = j;
    instances += counts[j];
    out.gpus_per_instance = std::max(out.gpus_per_instance, gpus[j]);
    all_whole = all_whole && bands[j].measured_whole;
    // the probed band's steps had both links calibrated: every network, and the link inside
    // every multi-GPU instance
    all_probed = all_probed && bands[j].network_probed && (gpus[j] == 1 || bands[j].intra_probed);
  }
  // saturated: only 0, 1 and "several" matter below (scaling_lookup rejects more than an int)
  out.instances = static_cast<int>(std::min<long long>(instances, std::numeric_limits<int>::max()));
  if (out.instances < 1 || out.gpus_per_instance < 1) return out;
  if (out.instances == 1) {
    const GroupBand& band = bands[only];
    if (out.gpus_per_instance == 1 || band.measured_whole || !band.link.trivial()) return out;
    out.probed = band.intra_probed;
  } else {
    if (all_whole) return out;
    out.probed = all_probed;
  }
  const bool single = out.instances == 1;
  const ScalingScope scope = out.probed ? (single ? ScalingScope::probed_single_instance
                                                  : ScalingScope::probed_multi_instance)
                                        : (single ? ScalingScope::single_instance : ScalingScope::multi_instance);
  out.applies = true;
  out.factors = table.cells[static_cast<int>(scope)][scaling_bucket(out.gpus_per_instance)];
  return out;
}

ScalingLookup scaling_lookup(const ScalingBand& table, const int* gpus, const int* counts, const GroupBand* bands,
                             int n) {
  if (n < 1 || n > kMaxGroups) detail::fail("groups", "1.." + std::to_string(kMaxGroups) + " groups", n);
  if (gpus == nullptr || counts == nullptr || bands == nullptr) {
    throw std::invalid_argument("scaling_lookup: gpus, counts and bands must point to n entries, got a null pointer");
  }
  table.validate();
  long long instances = 0;  // 64 bits: counts of INT_MAX each wrapped to a negative total
  for (int j = 0; j < n; ++j) {
    const std::string field = "groups[" + std::to_string(j) + "]";
    if (gpus[j] < 1) detail::fail(field + ".gpus", ">= 1", gpus[j]);
    if (counts[j] < 0) detail::fail(field + ".count", ">= 0", counts[j]);
    bands[j].validate(("bands[" + std::to_string(j) + "]").c_str());
    instances += counts[j];
  }
  if (instances < 1) detail::fail("groups (instances in all)", ">= 1", static_cast<double>(instances));
  if (instances > std::numeric_limits<int>::max()) {  // ScalingLookup::instances is an int
    detail::fail("groups (instances in all)", "<= 2147483647", static_cast<double>(instances));
  }
  return scaling_lookup_unchecked(table, gpus, counts, bands, n);
}

BandFactors IterationBand::factors(double iteration_s) const {
  BandFactors f;
  if (!known() || !(iteration_s > 0)) {
    f.p10 = f.p90 = std::numeric_limits<double>::quiet_NaN();
    return f;
  }
  f.p10 = p10_s / iteration_s;
  f.p90 = p90_s / iteration_s;
  return f;
}

IterationBand iteration_band_unchecked(const IterationResult& result, const GroupSpec* groups,
                                       const GroupBand* bands, int n, const ScalingBand& table) {
  IterationBand out;
  int gpus[kMaxGroups], counts[kMaxGroups];
  long long instances = 0;  // 64 bits: groups of INT_MAX instances each wrapped to one instance
  for (int j = 0; j < n; ++j) {
    gpus[j] = groups[j].instance->gpus;
    counts[j] = groups[j].count;
    instances += counts[j];
  }
  int slowest = 0;
  for (int j = 1; j < n; ++j) {
    if (result.groups[j].compute_s > result.groups[slowest].compute_s) slowest = j;
  }
  out.compute_group = slowest;
  out.compute = instances > 1 ? bands[slowest].compute_several : bands[slowest].compute;
  const GroupBand& own = bands[slowest];
  if (own.measured_batch > 0 && !own.per_e_fold.trivial() && out.compute.known()) {
    // note "measured batch band": the measurement's noise and the batch curve's error, in quadrature
    const double folds = std::abs(std::log(result.groups[slowest].batch_high / own.measured_batch));
    out.compute.p10 = std::exp(-std::hypot(std::log(out.compute.p10), folds * std::log(own.per_e_fold.p10)));
    out.compute.p90 = std::exp(std::hypot(std::log(out.compute.p90), folds * std::log(own.per_e_fold.p90)));
    // A factor per e-fold that is finite alone overflows raised to the e-folds (1e308 at ln 4
    // of them: a compute p90 factor of inf and an iteration p90 of inf s, in silence).
    if (!std::isfinite(out.compute.p90)) {
      throw std::invalid_argument(
          "bands[" + std::to_string(slowest) + "].per_e_fold.p90 = " + detail::fmt(own.per_e_fold.p90) +
          " per e-fold over " + detail::fmt(folds) + " e-folds (local batch " +
          detail::fmt(result.groups[slowest].batch_high) + ", measured at " + detail::fmt(own.measured_batch) +
          "): the iteration's p90 is not a finite number (its compute factor is " + detail::fmt(out.compute.p90) + ")");
    }
  }
  out.scaling = scaling_lookup_unchecked(table, gpus, counts, bands, n);
  out.link = BandFactors{};
  for (int j = 0; j < n; ++j) {
    out.link.p10 = std::min(out.link.p10, bands[j].link.p10);
    out.link.p90 = std::max(out.link.p90, bands[j].link.p90);
  }
  const double t = result.iteration_s;
  if (!out.compute.known() || !(t > 0)) return out;
  const double spread = result.groups[slowest].compute_s;
  double p10 = t - spread * (1.0 - out.compute.p10);
  double p90 = t + spread * (out.compute.p90 - 1.0);
  // the widest link band; then compute and links in quadrature (note "iteration band")
  const double link_lo = std::min(std::log(out.link.p10), std::log(out.scaling.factors.p10));
  const double link_hi = std::max(std::log(out.link.p90), std::log(out.scaling.factors.p90));
  if (link_lo < 0.0 || link_hi > 0.0) {
    const double compute_lo = p10 > 0 ? std::min(0.0, std::log(p10 / t)) : -std::numeric_limits<double>::infinity();
    const double compute_hi = std::max(0.0, std::log(p90 / t));
    p10 = t * std::exp(-std::hypot(compute_lo, link_lo));
    p90 = t * std::exp(std::hypot(compute_hi, link_hi));
  }
  if (!std::isfinite(p90)) {  // factors each finite, their product with the time not
    throw std::invalid_argument("the iteration's p90 overflows (iteration " + detail::fmt(t) + " s, compute factor " +
                                detail::fmt(out.compute.p90) + ", link factor " + detail::fmt(out.link.p90) +
                                ", scaling factor " + detail::fmt(out.scaling.factors.p90) +
                                "): a band out of any real range");
  }
  out.p10_s = std::max(0.0, p10);
  out.p90_s = p90;
  return out;
}

IterationBand iteration_band(const IterationResult& result, const GroupSpec* groups, const GroupBand* bands, int n,
                             const ScalingBand& table) {
  if (n < 1 || n > kMaxGroups) detail::fail("groups", "1.." + std::to_string(kMaxGroups) + " groups", n);
  if (groups == nullptr || bands == nullptr) {
    throw std::invalid_argument("iteration_band: groups and bands must point to n entries, got a null pointer");
  }
  if (!result.feasible()) {
    throw std::invalid_argument("result must be a feasible iteration (the band of an infeasible cluster is undefined)");
  }
  if (result.num_groups != n) detail::fail("bands", "one per group of the result (" + std::to_string(result.num_groups) + ")", n);
  table.validate();
  for (int j = 0; j < n; ++j) {
    const std::string field = "groups[" + std::to_string(j) + "]";
    if (groups[j].instance == nullptr) throw std::invalid_argument(field + ".instance must not be null");
    if (groups[j].count < 1) detail::fail(field + ".count", ">= 1", groups[j].count);
    if (groups[j].instance->gpus < 1) detail::fail(field + ".instance.gpus", ">= 1", groups[j].instance->gpus);
    bands[j].validate(("bands[" + std::to_string(j) + "]").c_str());
  }
  return iteration_band_unchecked(result, groups, bands, n, table);
}

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

double normal_quantile(double p) {
  if (!(p > 0 && p < 1)) detail::fail("p", "in (0, 1)", p);
  // Acklam's rational approximation (relative error 1.15e-9), then one Halley step on
  // normal_cdf, which brings it to machine precision.
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                             1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01, -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  const double lo = 0.02425, hi = 1 - lo;
  double x;
  if (p < lo) {
    const double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p <= hi) {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  } else {
    const double q = std::sqrt(-2 * std::log(1 - p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  const double e = normal_cdf(x) - p;
  const double u = e * kSqrt2Pi * std::exp(x * x / 2);
  // Past |x| ~ 37.5 (p below ~1e-307) exp(x^2/2) overflows and the step is inf x 0: NaN. The
  // approximation alone is kept there (a deadline probability of 1e-308 needs no ninth digit).
  if (!std::isfinite(u)) return x;
  return x - u / (1 + x * u / 2);
}

double deadline_probability_unchecked(double nominal_s, const BandFactors& band, double interruptions_per_hour,
                                      const SpotParams& params, double deadline_s) {
  const bool spread = band.known() && !band.trivial();
  if (!spread) return 1.0 - spot_miss_probability(nominal_s, interruptions_per_hour, params, deadline_s);
  const double sigma_lo = -std::log(band.p10) / kZ90;
  const double sigma_hi = std::log(band.p90) / kZ90;
  double band_alone;  // exact: the normal CDF of log(deadline / nominal)
  if (!(nominal_s > 0) || !std::isfinite(deadline_s)) {
    band_alone = nominal_s <= deadline_s ? 1.0 : 0.0;
  } else if (!(deadline_s > 0)) {
    band_alone = 0.0;
  } else {
    const double x = std::log(deadline_s / nominal_s);
    if (x >= 0) band_alone = sigma_hi > 0 ? normal_cdf(x / sigma_hi) : 1.0;
    else band_alone = sigma_lo > 0 ? normal_cdf(x / sigma_lo) : 0.0;
  }
  if (!(interruptions_per_hour > 0) || !(band_alone > 0)) return band_alone;
  // Preemption only adds time: runs of the band past the deadline miss it anyway, so average
  // over the slices of the band below it (note "deadline probability").
  double met = 0;
  for (int i = 0; i < kBandNodes; ++i) {
    // a subnormal band_alone underflows the slice's quantile to 0: the least positive double
    const double u = std::max((i + 0.5) / kBandNodes * band_alone, std::numeric_limits<double>::denorm_min());
    const double z = u >= 1.0 ? 8.0 : normal_quantile(u);
    const double f = std::exp(z * (z < 0 ? sigma_lo : sigma_hi));
    met += 1.0 - spot_miss_probability(nominal_s * f, interruptions_per_hour, params, deadline_s);
  }
  return std::min(band_alone, band_alone * met / kBandNodes);
}

double deadline_probability(double nominal_s, const BandFactors& band, double interruptions_per_hour,
                            const SpotParams& params, double deadline_s) {
  detail::require_finite_nonneg("nominal_s", nominal_s);
  band.validate("band");
  detail::require_finite_nonneg("interruptions_per_hour", interruptions_per_hour);
  params.validate();
  if (!(deadline_s > 0)) detail::fail("deadline_s", "> 0 (+inf: none)", deadline_s);
  return deadline_probability_unchecked(nominal_s, band, interruptions_per_hour, params, deadline_s);
}

double band_quantile_factor(const BandFactors& band, double q) {
  if (!(q >= 0.5 && q < 1)) detail::fail("q", "in [0.5, 1)", q);
  band.validate("band");
  if (!band.known() || band.trivial()) return 1.0;
  return std::exp(normal_quantile(q) / kZ90 * std::log(band.p90));
}

}  // namespace srift
