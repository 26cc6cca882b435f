// band.hpp: the scaling band's cell rule, an iteration's p10-p90 band (exact values), the
// chance of meeting a deadline under the band and preemption, and their errors.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "srift/srift.hpp"

namespace {

using srift::BandFactors;
using srift::GroupBand;
using srift::ScalingBand;
using srift::ScalingScope;

// A table whose cells are told apart by their values: p90 = 1 + (scope + 1) / 10 + bucket / 100.
ScalingBand numbered_table() {
  ScalingBand t;
  for (int s = 0; s < srift::kScalingScopes; ++s) {
    for (int b = 0; b < srift::kScalingBuckets; ++b) {
      t.cell(static_cast<ScalingScope>(s), b) = {0.9 - 0.01 * b, 1.0 + (s + 1) / 10.0 + b / 100.0};
    }
  }
  return t;
}

srift::ScalingLookup lookup(const ScalingBand& t, std::vector<int> gpus, std::vector<int> counts,
                            std::vector<GroupBand> bands) {
  return srift::scaling_lookup(t, gpus.data(), counts.data(), bands.data(), static_cast<int>(gpus.size()));
}

TEST(Band, BucketsOfGpusPerInstance) {
  EXPECT_EQ(srift::scaling_bucket(1), 0);
  EXPECT_EQ(srift::scaling_bucket(2), 1);
  EXPECT_EQ(srift::scaling_bucket(3), 2);
  EXPECT_EQ(srift::scaling_bucket(4), 2);
  EXPECT_EQ(srift::scaling_bucket(5), 3);
  EXPECT_EQ(srift::scaling_bucket(16), 3);
  EXPECT_THROW(srift::scaling_bucket(0), std::invalid_argument);
}

TEST(Band, ScalingCellRule) {
  const ScalingBand t = numbered_table();
  GroupBand plain, whole, pcie, intra, both;
  whole.measured_whole = true;
  pcie.link = {0.88, 1.24};
  intra.intra_probed = true;
  both.intra_probed = both.network_probed = true;

  EXPECT_FALSE(lookup(t, {1}, {1}, {plain}).applies);  // one GPU: no link
  auto one = lookup(t, {8}, {1}, {plain});
  ASSERT_TRUE(one.applies);
  EXPECT_FALSE(one.probed);
  EXPECT_DOUBLE_EQ(one.factors.p90, 1.13);  // single_instance, 5+
  EXPECT_EQ(one.instances, 1);
  EXPECT_EQ(one.gpus_per_instance, 8);
  EXPECT_FALSE(lookup(t, {8}, {1}, {whole}).applies);  // measured whole
  EXPECT_FALSE(lookup(t, {4}, {1}, {pcie}).applies);   // its own link band
  auto probed_one = lookup(t, {4}, {1}, {intra});
  EXPECT_TRUE(probed_one.probed);
  EXPECT_DOUBLE_EQ(probed_one.factors.p90, 1.32);  // probed_single_instance, 3-4

  // several instances: 1-GPU instances are a multi_instance cell too
  auto ones = lookup(t, {1}, {4}, {plain});
  ASSERT_TRUE(ones.applies);
  EXPECT_DOUBLE_EQ(ones.factors.p90, 1.2);
  EXPECT_DOUBLE_EQ(lookup(t, {2, 8}, {3, 1}, {plain, whole}).factors.p90, 1.23);  // the most GPUs decide
  EXPECT_FALSE(lookup(t, {8, 4}, {1, 2}, {whole, whole}).applies);            // all measured whole
  EXPECT_TRUE(lookup(t, {4}, {2}, {pcie}).applies);  // a PCIe line's band is about one instance
  // probed across instances: every network, and the intra link of every multi-GPU type
  GroupBand net_only;
  net_only.network_probed = true;
  EXPECT_FALSE(lookup(t, {8}, {2}, {net_only}).probed);
  EXPECT_TRUE(lookup(t, {1}, {2}, {net_only}).probed);
  auto probed_many = lookup(t, {8, 1}, {2, 3}, {both, net_only});
  EXPECT_TRUE(probed_many.probed);
  EXPECT_DOUBLE_EQ(probed_many.factors.p90, 1.43);
  EXPECT_FALSE(lookup(t, {8, 1}, {2, 3}, {both, plain}).probed);
  // a group without instances takes no part
  auto skip = lookup(t, {8, 2}, {0, 1}, {plain, intra});
  EXPECT_EQ(skip.instances, 1);
  EXPECT_EQ(skip.gpus_per_instance, 2);
  EXPECT_TRUE(skip.probed);
}

// A feasible two-group result with the given iteration and per-group compute seconds.
srift::IterationResult result_of(double iteration_s, std::vector<double> compute_s) {
  srift::IterationResult r;
  r.num_groups = static_cast<int>(compute_s.size());
  r.iteration_s = iteration_s;
  for (int j = 0; j < r.num_groups; ++j) r.groups[j].compute_s = compute_s[j];
  return r;
}

TEST(Band, IterationBandExactValues) {
  srift::InstanceSpec one_gpu, eight;
  one_gpu.gpus = 1;
  eight.gpus = 8;
  const ScalingBand t = numbered_table();
  GroupBand a, b;
  a.compute = {0.8, 1.3};
  a.compute_several = {0.7, 1.5};
  b.compute = {0.95, 1.05};
  b.compute_several = {0.95, 1.05};

  // One 1-GPU instance: the compute band alone, on the compute part of the iteration.
  {
    srift::GroupSpec g[] = {{&one_gpu, 1, {}, 1.0}};
    const auto band = srift::iteration_band(result_of(0.5, {0.4}), g, &a, 1, t);
    EXPECT_DOUBLE_EQ(band.p10_s, 0.5 - 0.4 * 0.2);
    EXPECT_DOUBLE_EQ(band.p90_s, 0.5 + 0.4 * 0.3);
    EXPECT_FALSE(band.scaling.applies);
  }
  // Two groups over several instances: the slowest group's compute_several band, and the
  // multi_instance 5+ cell (0.87, 1.23) in quadrature.
  {
    srift::GroupSpec g[] = {{&one_gpu, 2, {}, 1.0}, {&eight, 1, {}, 1.0}};
    GroupBand bands[] = {a, b};
    const auto band = srift::iteration_band(result_of(1.0, {0.6, 0.8}), g, bands, 2, t);
    EXPECT_EQ(band.compute_group, 1);
    const double lo = std::log(1.0 - 0.8 * 0.05), hi = std::log(1.0 + 0.8 * 0.05);
    EXPECT_NEAR(band.p10_s, std::exp(-std::hypot(lo, std::log(0.87))), 1e-15);
    EXPECT_NEAR(band.p90_s, std::exp(std::hypot(hi, std::log(1.23))), 1e-15);
    const BandFactors f = band.factors(1.0);
    EXPECT_DOUBLE_EQ(f.p90, band.p90_s);
  }
  // A learned PCIe link band wider than the scaling cell: the widest counts.
  {
    GroupBand p = b;
    p.link = {0.5, 2.0};
    srift::GroupSpec g[] = {{&eight, 2, {}, 1.0}};
    const auto band = srift::iteration_band(result_of(1.0, {1.0}), g, &p, 1, t);
    EXPECT_NEAR(band.p90_s, std::exp(std::hypot(std::log(1.05), std::log(2.0))), 1e-15);
    EXPECT_NEAR(band.p10_s, std::exp(-std::hypot(std::log(0.95), std::log(0.5))), 1e-15);
  }
  // An unknown compute band: no band.
  {
    GroupBand u;
    u.compute = u.compute_several = {NAN, NAN};
    srift::GroupSpec g[] = {{&eight, 1, {}, 1.0}};
    const auto band = srift::iteration_band(result_of(1.0, {1.0}), g, &u, 1, t);
    EXPECT_FALSE(band.known());
    EXPECT_TRUE(std::isnan(band.factors(1.0).p90));
  }
}

// One GPU measured at batch 32 with a +-3% noise band (note "measured batch band").
struct MeasuredAt32 {
  MeasuredAt32() {
    one_gpu.gpus = 1;
    m.compute = {0.97, 1.03};
    m.compute_several = {0.97, 1.03};
    m.measured_batch = 32;
    m.per_e_fold = {0.5, 1.5};
  }
  srift::InstanceSpec one_gpu;
  const ScalingBand t = numbered_table();
  GroupBand m;
};

TEST(Band, MeasuredBatchBandWidensAwayFromTheMeasuredBatch) {
  // band.hpp note "measured batch band": the noise and per_e_fold^|ln(b / measured)| in quadrature
  MeasuredAt32 setup;
  const ScalingBand& t = setup.t;
  GroupBand& m = setup.m;
  srift::GroupSpec g[] = {{&setup.one_gpu, 1, {}, 1.0}};
  srift::IterationResult r = result_of(1.0, {0.8});
  r.groups[0].batch_low = r.groups[0].batch_high = 32;  // at the measured batch: the noise alone
  auto band = srift::iteration_band(r, g, &m, 1, t);
  EXPECT_DOUBLE_EQ(band.compute.p10, 0.97);
  EXPECT_DOUBLE_EQ(band.compute.p90, 1.03);
  r.groups[0].batch_low = r.groups[0].batch_high = 128;  // ln 4 e-folds above
  band = srift::iteration_band(r, g, &m, 1, t);
  const double folds = std::log(4.0);
  const double lo = std::exp(-std::hypot(std::log(0.97), folds * std::log(0.5)));
  const double hi = std::exp(std::hypot(std::log(1.03), folds * std::log(1.5)));
  EXPECT_NEAR(band.compute.p10, lo, 1e-15);
  EXPECT_NEAR(band.compute.p90, hi, 1e-15);
  EXPECT_NEAR(band.p10_s, 1.0 - 0.8 * (1.0 - lo), 1e-15);
  EXPECT_NEAR(band.p90_s, 1.0 + 0.8 * (hi - 1.0), 1e-15);
  r.groups[0].batch_low = r.groups[0].batch_high = 8;  // as far below: the same band
  band = srift::iteration_band(r, g, &m, 1, t);
  EXPECT_NEAR(band.compute.p90, hi, 1e-15);
  // no measured batch, or a trivial per_e_fold: unchanged
  m.per_e_fold = {1.0, 1.0};
  EXPECT_DOUBLE_EQ(srift::iteration_band(r, g, &m, 1, t).compute.p90, 1.03);
  // bad input names the field
  m.measured_batch = -1;
  try {
    m.validate("band of x");
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("band of x.measured_batch"), std::string::npos) << e.what();
  }
  m.measured_batch = 32;
  m.per_e_fold = {std::nan(""), std::nan("")};
  EXPECT_THROW(m.validate("band of x"), std::invalid_argument);
}

TEST(Band, AMeasuredBatchBandThatOverflowsIsRefusedNamingIt) {
  // Note "measured batch band": per_e_fold p90 = 1e308 (finite, >= 1: valid alone) raised to
  // ln 4 e-folds gave a compute p90 factor of +inf and an iteration p90 of inf s, silently
  // (srift.predict with EngineConfig(measured_batch_p90_per_e_fold=1e308): p90 inf).
  MeasuredAt32 setup;
  const ScalingBand& t = setup.t;
  GroupBand& m = setup.m;
  m.per_e_fold = {0.5, 1e308};
  ASSERT_NO_THROW(m.validate("bands[0]"));
  srift::GroupSpec g[] = {{&setup.one_gpu, 1, {}, 1.0}};
  srift::IterationResult r = result_of(1.0, {0.8});
  r.groups[0].batch_low = r.groups[0].batch_high = 128;
  for (int checked = 0; checked < 2; ++checked) {
    try {
      checked ? srift::iteration_band(r, g, &m, 1, t) : srift::iteration_band_unchecked(r, g, &m, 1, t);
      ADD_FAILURE() << "no throw for a band of inf";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind("bands[0].per_e_fold.p90 = 1e+308 per e-fold over 1.386294361 e-folds "
                                            "(local batch 128, measured at 32): the iteration's p90 is not a finite "
                                            "number",
                                            0),
                0u)
          << e.what();
    }
  }
  // at the measured batch the factor is not raised: the noise alone, as before
  r.groups[0].batch_low = r.groups[0].batch_high = 32;
  EXPECT_DOUBLE_EQ(srift::iteration_band(r, g, &m, 1, t).compute.p90, 1.03);
  // a wide but finite band stays as it is: 1e20 per e-fold, ln 4 e-folds away
  m.per_e_fold = {0.5, 1e20};
  r.groups[0].batch_low = r.groups[0].batch_high = 128;
  const auto band = srift::iteration_band(r, g, &m, 1, t);
  EXPECT_TRUE(std::isfinite(band.p90_s));
  EXPECT_NEAR(band.compute.p90, std::exp(std::hypot(std::log(1.03), std::log(4.0) * std::log(1e20))), 1e-9 * band.compute.p90);
}

TEST(Band, RejectsBadInputNamingTheField) {
  srift::InstanceSpec eight;
  eight.gpus = 8;
  srift::GroupSpec g[] = {{&eight, 1, {}, 1.0}};
  GroupBand bad;
  bad.compute = {1.2, 1.5};
  try {
    srift::iteration_band(result_of(1.0, {1.0}), g, &bad, 1, ScalingBand{});
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("bands[0].compute.p10"), std::string::npos) << e.what();
  }
  ScalingBand t;
  t.cell(ScalingScope::probed_multi_instance, 3) = {0.9, 0.95};
  try {
    t.validate();
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("scaling_band.cells[probed_multi_instance][3].p90"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(t.cell(ScalingScope::single_instance, 4), std::out_of_range);
  srift::IterationResult infeasible = result_of(1.0, {1.0});
  infeasible.infeasible = srift::Infeasible::memory;
  EXPECT_THROW(srift::iteration_band(infeasible, g, &bad, 1, ScalingBand{}), std::invalid_argument);
  EXPECT_THROW(srift::iteration_band(result_of(1.0, {1.0, 1.0}), g, &bad, 1, ScalingBand{}),
               std::invalid_argument);
}

TEST(Band, NormalQuantileInvertsTheCdf) {
  EXPECT_NEAR(srift::normal_quantile(0.9), 1.2815515655446004, 1e-14);
  EXPECT_DOUBLE_EQ(srift::normal_quantile(0.5), 0.0);
  for (double p : {1e-12, 1e-6, 0.01, 0.02425, 0.1, 0.3, 0.7, 0.97575, 0.999, 1 - 1e-9}) {
    EXPECT_NEAR(srift::normal_cdf(srift::normal_quantile(p)), p, 1e-14 + 1e-12 * p) << p;
  }
  EXPECT_THROW(srift::normal_quantile(0.0), std::invalid_argument);
  EXPECT_THROW(srift::normal_quantile(1.0), std::invalid_argument);
  // down to the least subnormal: finite and ordered (the refinement step was inf x 0 = NaN
  // below ~1e-307, which reached the CLI as "nominal_s must be >= 0, got -nan")
  double last = -INFINITY;
  for (double p : {4.9e-324, 1e-320, 1e-315, 1e-310, 1e-307, 1e-300}) {
    const double x = srift::normal_quantile(p);
    EXPECT_TRUE(std::isfinite(x)) << p;
    EXPECT_GT(x, last) << p;
    last = x;
  }
  EXPECT_NEAR(srift::normal_quantile(1e-300), -37.0471, 1e-3);
}

TEST(Band, DeadlineProbabilityFarBelowTheBandIsTinyNotAnError) {
  // A narrow band and a deadline ~37.6 sigma below the prediction: the band alone gives a
  // subnormal probability, whose slices underflowed to 0 and made normal_quantile throw.
  srift::SpotParams spot;
  const BandFactors band{0.99, 1.07};
  const double W = 3600, sigma_lo = -std::log(band.p10) / 1.2815515655446004;
  for (double z : {-36.0, -37.6, -38.2, -38.5, -40.0}) {
    const double D = W * std::exp(z * sigma_lo);
    for (double rate : {0.0, 0.05}) {
      const double p = srift::deadline_probability(W, band, rate, spot, D);
      EXPECT_GE(p, 0.0) << z << " " << rate;
      EXPECT_LE(p, srift::normal_cdf(z) * (1 + 1e-9)) << z << " " << rate;
    }
  }
}

TEST(Band, DeadlineProbabilityWithoutSpotIsTheBandsCdf) {
  const srift::SpotParams spot;
  const BandFactors band{0.8, 1.5};
  const double W = 3600;
  // the band's edges and its median are its quantiles
  EXPECT_NEAR(srift::deadline_probability(W, band, 0, spot, W * 1.5), 0.9, 1e-12);
  EXPECT_NEAR(srift::deadline_probability(W, band, 0, spot, W * 0.8), 0.1, 1e-12);
  EXPECT_NEAR(srift::deadline_probability(W, band, 0, spot, W), 0.5, 1e-15);
  EXPECT_DOUBLE_EQ(srift::deadline_probability(W, band, 0, spot, INFINITY), 1.0);
  // no band: the deadline is met or not
  EXPECT_EQ(srift::deadline_probability(W, BandFactors{}, 0, spot, W), 1.0);
  EXPECT_EQ(srift::deadline_probability(W, BandFactors{}, 0, spot, W * 0.999), 0.0);
  EXPECT_EQ(srift::deadline_probability(W, BandFactors{NAN, NAN}, 0, spot, W * 1.2), 1.0);
}

TEST(Band, DeadlineProbabilityWithSpot) {
  srift::SpotParams spot;
  spot.checkpoint_bytes = 2e10;
  const double W = 20 * 3600, rate = 0.05, D = 26 * 3600;
  // a band of (1, 1) is the spot model's answer bit for bit
  const srift::SpotEstimate e = srift::estimate_spot(W, rate, spot, D);
  EXPECT_EQ(srift::deadline_probability(W, BandFactors{}, rate, spot, D), 1.0 - e.miss_probability);
  EXPECT_EQ(srift::spot_miss_probability(W, rate, spot, D), e.miss_probability);
  // with a band: never above either alone, and falling as the band widens or the run grows
  const BandFactors narrow{0.95, 1.05}, wide{0.8, 1.6};
  const double p_narrow = srift::deadline_probability(W, narrow, rate, spot, D);
  const double p_wide = srift::deadline_probability(W, wide, rate, spot, D);
  EXPECT_LE(p_narrow, srift::deadline_probability(W, narrow, 0, spot, D));
  EXPECT_LE(p_wide, srift::deadline_probability(W, wide, 0, spot, D));
  EXPECT_LT(p_wide, p_narrow);
  double last = 1.0;
  for (double w = 10 * 3600; w <= 30 * 3600; w += 3600) {
    const double p = srift::deadline_probability(w, wide, rate, spot, D);
    EXPECT_LE(p, last) << w;
    last = p;
  }
  // a vanishing rate is the band alone: no jump between on-demand and a spot offer that is
  // (almost) never preempted
  EXPECT_NEAR(srift::deadline_probability(W, wide, 1e-12, spot, D), srift::deadline_probability(W, wide, 0, spot, D),
              1e-9);
  // against a fine integral over the band (100,000 equal-probability slices)
  for (double rate_h : {0.01, 0.05, 0.3}) {
    for (double d : {21.0, 24.0, 28.0}) {
      const double deadline = d * 3600;
      const int n = 100000;
      double fine = 0;
      for (int i = 0; i < n; ++i) {
        const double z = srift::normal_quantile((i + 0.5) / n);
        const double f = std::exp(z * (z < 0 ? -std::log(wide.p10) : std::log(wide.p90)) / 1.2815515655446004);
        fine += 1.0 - srift::spot_miss_probability(W * f, rate_h, spot, deadline);
      }
      EXPECT_NEAR(srift::deadline_probability(W, wide, rate_h, spot, deadline), fine / n, 0.01) << rate_h << " " << d;
    }
  }
}

TEST(Band, QuantileFactorIsTheBandsQuantile) {
  const BandFactors band{0.8, 1.5};
  EXPECT_DOUBLE_EQ(srift::band_quantile_factor(band, 0.9), 1.5);
  EXPECT_EQ(srift::band_quantile_factor(band, 0.5), 1.0);
  EXPECT_EQ(srift::band_quantile_factor(BandFactors{}, 0.95), 1.0);
  EXPECT_EQ(srift::band_quantile_factor(BandFactors{NAN, NAN}, 0.95), 1.0);
  const srift::SpotParams spot;
  for (double q : {0.6, 0.75, 0.95}) {
    const double f = srift::band_quantile_factor(band, q);
    EXPECT_NEAR(srift::deadline_probability(1000, band, 0, spot, 1000 * f), q, 1e-12) << q;
  }
  EXPECT_THROW(srift::band_quantile_factor(band, 0.4), std::invalid_argument);
  // a band BandFactors::validate refuses is refused here too (it gave NaN, inf or a factor < 1)
  for (const BandFactors bad : {BandFactors{0.5, -3}, BandFactors{0.5, INFINITY}, BandFactors{0.5, 0.5},
                                BandFactors{NAN, 2}}) {
    EXPECT_THROW(srift::band_quantile_factor(bad, 0.9), std::invalid_argument) << bad.p10 << " " << bad.p90;
  }
}

TEST(Band, DeadlineProbabilityRejectsBadInput) {
  const srift::SpotParams spot;
  auto expect_field = [](auto call, const std::string& field) {
    try {
      call();
      ADD_FAILURE() << "expected std::invalid_argument for " << field;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  expect_field([&] { srift::deadline_probability(100, BandFactors{2, 3}, 0, spot, 200); }, "band.p10");
  expect_field([&] { srift::deadline_probability(100, BandFactors{0.5, 0.8}, 0, spot, 200); }, "band.p90");
  expect_field([&] { srift::deadline_probability(-1, BandFactors{}, 0, spot, 200); }, "nominal_s");
  expect_field([&] { srift::deadline_probability(100, BandFactors{}, -1, spot, 200); }, "interruptions_per_hour");
  expect_field([&] { srift::deadline_probability(100, BandFactors{}, 0, spot, 0); }, "deadline_s");
  srift::SpotParams bad = spot;
  bad.write_bytes_per_s = 0;
  expect_field([&] { srift::deadline_probability(100, BandFactors{}, 0.1, bad, 200); }, "spot.write_bytes_per_s");
  const ScalingBand t;
  GroupBand plain;
  int gpus[] = {8}, zero[] = {0}, one[] = {1}, none[] = {0};
  expect_field([&] { srift::scaling_lookup(t, gpus, zero, &plain, 1); }, "groups (instances in all)");
  expect_field([&] { srift::scaling_lookup(t, none, one, &plain, 1); }, "groups[0].gpus");
  expect_field([&] { srift::scaling_lookup(t, gpus, one, &plain, 0); }, "groups");
}

}  // namespace

TEST(Band, NullPointersAreRefusedNotDereferenced) {
  // Documented to validate and throw; a null array segfaulted.
  const ScalingBand t = numbered_table();
  const int gpus[1] = {8};
  const int counts[1] = {1};
  const GroupBand bands[1] = {GroupBand{}};
  EXPECT_THROW(srift::scaling_lookup(t, nullptr, counts, bands, 1), std::invalid_argument);
  EXPECT_THROW(srift::scaling_lookup(t, gpus, counts, nullptr, 1), std::invalid_argument);
  srift::IterationResult r;
  r.num_groups = 1;
  EXPECT_THROW(srift::iteration_band(r, nullptr, bands, 1, t), std::invalid_argument);
  // a hand-made result with more groups than IterationResult holds
  r.infeasible = srift::Infeasible::memory;
  r.num_groups = srift::kMaxGroups + 5;
  EXPECT_THROW(srift::describe_infeasible(r, srift::SimOptions{}), std::invalid_argument);
}

TEST(Band, InstanceCountsAreSummedPastAnInt) {
  // Two groups of INT_MAX instances: the int sum wrapped (-2), scaling_lookup then refused its
  // own total, and iteration_band took the cluster for a single instance (its compute band
  // instead of compute_several).
  const ScalingBand t = numbered_table();
  GroupBand bands[2];
  int gpus[] = {1, 1}, counts[] = {2147483647, 2147483647};
  try {
    srift::scaling_lookup(t, gpus, counts, bands, 2);
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("groups (instances in all) must be <= 2147483647, got 4294967294"),
              std::string::npos)
        << e.what();
  }
  const srift::ScalingLookup l = srift::scaling_lookup_unchecked(t, gpus, counts, bands, 2);
  EXPECT_EQ(l.instances, 2147483647);  // saturated: several instances
  EXPECT_TRUE(l.applies);
  EXPECT_EQ(l.factors.p90, t.cell(ScalingScope::multi_instance, 0).p90);

  srift::InstanceSpec one_gpu;
  one_gpu.gpus = 1;
  srift::GroupSpec g[] = {{&one_gpu, 2147483647, {}, 1.0}, {&one_gpu, 2147483647, {}, 1.0}};
  for (GroupBand& b : bands) {
    b.compute = {0.9, 1.1};
    b.compute_several = {0.8, 1.2};
  }
  const auto band = srift::iteration_band(result_of(1.0, {1.0, 1.0}), g, bands, 2, t);
  EXPECT_EQ(band.compute.p90, 1.2);
  EXPECT_EQ(band.scaling.instances, 2147483647);
}
