// The spot model (note "spot model" in spot.hpp) against values worked out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "srift/srift.hpp"

namespace {

using srift::SpotEstimate;
using srift::SpotParams;

// delta = 1e10 B / 1e9 B/s = 10 s; R = 295 s + 1e10 B / 2e9 B/s = 300 s.
SpotParams params() {
  SpotParams p;
  p.checkpoint_bytes = 1e10;
  p.write_bytes_per_s = 1e9;
  p.read_bytes_per_s = 2e9;
  p.provisioning_s = 295;
  return p;
}

TEST(Spot, NoPreemptionIsTheNominalTimeExactly) {
  const double nominal = 12345.678;
  const SpotEstimate e = srift::estimate_spot(nominal, 0.0, params(), 20000);
  EXPECT_EQ(e.expected_s, nominal);
  EXPECT_EQ(e.p90_s, nominal);
  EXPECT_EQ(e.miss_probability, 0.0);
  EXPECT_EQ(e.checkpoint_interval_s, 0.0);
  EXPECT_EQ(srift::estimate_spot(nominal, 0.0, params(), 10000).miss_probability, 1.0);
  EXPECT_EQ(srift::spot_expected_s(nominal, 0.0, params()), nominal);
}

TEST(Spot, YoungIntervalExpectedTimeAndQuantiles) {
  // W = 10 h, rate 0.1 / h -> M = 36000 s.
  // tau = sqrt(2 * 10 * 36000) = 848.528137 s; T0 = W (1 + 10 / tau) = 36424.264069 s;
  // c_f = 300 + (tau + 10) / 2 = 729.264069 s; E = T0 / (1 - c_f / M) = 37177.378692 s.
  const SpotEstimate e = srift::estimate_spot(36000, 0.1, params(), 37000);
  EXPECT_NEAR(e.checkpoint_s, 10.0, 1e-12);
  EXPECT_NEAR(e.restart_s, 300.0, 1e-12);
  EXPECT_NEAR(e.checkpoint_interval_s, 848.5281374238571, 1e-9);
  EXPECT_NEAR(e.failure_free_s, 36424.26406871193, 1e-7);
  EXPECT_NEAR(e.cost_per_interruption_s, 729.2640687119285, 1e-9);
  EXPECT_NEAR(e.expected_s, 37177.378692300575, 1e-7);
  EXPECT_NEAR(e.expected_interruptions, 1.032704963675016, 1e-12);
  EXPECT_NEAR(e.expected_lost_s, 37177.378692300575 - 36424.26406871193, 1e-7);
  EXPECT_NEAR(e.checkpoints, 36000 / 848.5281374238571, 1e-9);
  // Poisson(1.0327): P(N<=1) = 0.7237, P(N<=2) = 0.9136 -> k90 = 2; two failures cost
  // between 1.5 and 2.5 c_f (note "spot model"), 0.9 is (0.9 - P(N<=1)) / P(N=2) of the way.
  const double mu = 1.032704963675016, T0 = 36424.26406871193, cf = 729.2640687119285;
  const double below = std::exp(-mu) * (1 + mu), pmf2 = std::exp(-mu) * mu * mu / 2;
  EXPECT_NEAR(e.p90_s, T0 + (1.5 + (0.9 - below) / pmf2) * cf, 1e-7);
  EXPECT_GT(e.p90_s, T0 + 1.5 * cf);
  EXPECT_LT(e.p90_s, T0 + 2.5 * cf);
  // D = 37000: x = (D - T0) / c_f = 0.79, in the first failure's spread [0.5, 1.5):
  // P(meet) = P(N = 0) + (x - 0.5) P(N = 1).
  const double x = (37000 - T0) / cf;
  EXPECT_NEAR(e.miss_probability, 1 - std::exp(-mu) * (1 + (x - 0.5) * mu), 1e-12);
  EXPECT_EQ(srift::spot_expected_s(36000, 0.1, params()), e.expected_s);
}

TEST(Spot, ShortRunsDoNotCheckpoint) {
  // W = 600 s < tau: never checkpoint, a failure costs R + W/2 = 600 s.
  const SpotEstimate e = srift::estimate_spot(600, 0.1, params(), std::numeric_limits<double>::infinity());
  EXPECT_EQ(e.checkpoint_interval_s, 0.0);
  EXPECT_EQ(e.checkpoint_s, 0.0);
  EXPECT_NEAR(e.cost_per_interruption_s, 600.0, 1e-12);
  EXPECT_NEAR(e.expected_s, 610.1694915254237, 1e-9);
  EXPECT_EQ(e.miss_probability, 0.0);
}

TEST(Spot, NoProgressIsInfinite) {
  // M = 36 s is shorter than a restart: the run never finishes.
  const SpotEstimate e = srift::estimate_spot(36000, 100, params(), 1e9);
  EXPECT_TRUE(std::isinf(e.expected_s));
  EXPECT_EQ(e.miss_probability, 1.0);
}

TEST(Spot, ExpectedTimeIsMonotone) {
  // The search's bounds rely on this (note "bounds" in bnb.cpp).
  double previous_rate_row = 0;
  for (double rate : {0.0, 1e-4, 1e-3, 0.01, 0.05, 0.2, 1.0}) {
    double previous = 0;
    for (double w = 10; w < 1e6; w *= 1.37) {
      const double e = srift::spot_expected_s(w, rate, params());
      EXPECT_GE(e, previous) << "rate " << rate << " W " << w;
      EXPECT_GE(e, w);
      previous = e;
    }
    const double at = srift::spot_expected_s(50000, rate, params());
    EXPECT_GE(at, previous_rate_row) << "rate " << rate;
    previous_rate_row = at;
  }
}

TEST(Spot, Poisson) {
  EXPECT_NEAR(srift::poisson_cdf(0, 1.0), std::exp(-1.0), 1e-15);
  EXPECT_NEAR(srift::poisson_cdf(2, 1.0), 2.5 * std::exp(-1.0), 1e-15);
  EXPECT_EQ(srift::poisson_cdf(-1, 1.0), 0.0);
  EXPECT_EQ(srift::poisson_quantile(1.0, 0.9), 2);  // P(<=1) = 0.7358, P(<=2) = 0.9197
  EXPECT_EQ(srift::poisson_quantile(0.0, 0.9), 0);
  // A large mean does not underflow: the median of Poisson(1000) is 1000.
  EXPECT_EQ(srift::poisson_quantile(1000.0, 0.5), 1000);
  EXPECT_THROW(srift::poisson_quantile(1.0, 1.0), std::invalid_argument);
  EXPECT_THROW(srift::poisson_quantile(std::nan(""), 0.5), std::invalid_argument);
  // Large means bisect the CDF: the smallest k with CDF(k) >= q, in O(log) steps where the
  // scan took O(sqrt(mean)) and never ended past 2^53.
  for (double mean : {2e6, 1e12, 1e17, 1e300}) {
    for (double q : {0.1, 0.5, 0.9}) {
      const long long k = srift::poisson_quantile(mean, q);
      if (mean >= 4e18) {
        EXPECT_EQ(k, std::numeric_limits<long long>::max());
        continue;
      }
      EXPECT_GE(srift::poisson_cdf(k, mean), q) << mean << " " << q;
      if (mean < 1e15) {
        EXPECT_LT(srift::poisson_cdf(k - 1, mean), q) << mean << " " << q;  // resolvable there
      }
    }
  }
}

TEST(Spot, PoissonCdfEndsForAnyCount) {
  // The CDF sums only the window around the mean: past it the answer is 1, below it 0, and
  // counts up to 9e15 (the cap miss_given applies) return at once. The old sum from 0 ran
  // to k whenever rounding left it just short of 1 - 1e-15 (a recommend that never ended).
  for (double mean : {0.3, 7.0, 1234.5, 9.9e5}) {
    EXPECT_EQ(srift::poisson_cdf(9'000'000'000'000'000LL, mean), 1.0) << mean;
    // the plain sum from 0, where it is short enough to run, in long double: in double its
    // ~1e7-sized terms cancel and lose ~1e-9 near a mean of 1e6
    long double reference = 0;
    const long long k = static_cast<long long>(mean);
    const long double m = mean;
    for (long long i = 0; i <= k; ++i) {
      const long double li = static_cast<long double>(i);
      reference += std::exp(li * std::log(m) - m - std::lgamma(li + 1.0L));
    }
    EXPECT_NEAR(srift::poisson_cdf(k, mean), static_cast<double>(reference), 1e-12) << mean;
  }
  EXPECT_EQ(srift::poisson_cdf(10, 1e5), 0.0);
  // A NaN mean escaped the window (a scan to k): refused, as poisson_quantile refuses it.
  EXPECT_THROW(srift::poisson_cdf(1'000'000'000'000'000'000LL, std::nan("")), std::invalid_argument);
  EXPECT_THROW(srift::poisson_cdf(5, std::numeric_limits<double>::infinity()), std::invalid_argument);
  // A far deadline on a spot plan is met surely, and promptly.
  EXPECT_EQ(srift::spot_miss_probability(3.6e11, 0.05, params(), 3.6e17), 0.0);
}

TEST(Spot, InterruptionClasses) {
  // "<5%" of instances reclaimed in a month of 730 h: rate = -ln(0.95) / 730.
  EXPECT_NEAR(srift::interruption_rate_from_class("<5%"), 7.026478683226107e-05, 1e-18);
  EXPECT_GT(srift::interruption_rate_from_class("unknown"), srift::interruption_rate_from_class("15-20%"));
  EXPECT_EQ(srift::interruption_rate_from_class("unknown"), srift::interruption_rate_from_class(">20%"));
  EXPECT_THROW(srift::interruption_rate_from_class("often"), std::invalid_argument);
}

TEST(Spot, ParamsValidateNamingTheField) {
  SpotParams p = params();
  p.write_bytes_per_s = 0;
  try {
    p.validate();
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("spot.write_bytes_per_s"), std::string::npos);
  }
}

TEST(Spot, PlansReportTheirAssumptions) {
  // One spot group of 3 instances at 0.02 / h each: plan rate 0.06 / h.
  srift::SearchRequest r;
  r.workload.bucket_bytes = {1e7};
  r.workload.bucket_ready_fraction = {1.0};
  r.workload.fixed_memory_bytes = 1e9;
  r.workload.activation_bytes_per_sample = 1e8;
  srift::InstanceSpec inst;
  inst.name = "g";
  inst.gpus = 1;
  inst.gpu_memory_bytes = 16e9;
  inst.intra = {1e11, 1e-6};
  inst.network = {1e9, 3e-5};
  r.instances = {inst};
  srift::Offer o;
  o.instance = 0;
  o.market = srift::Market::spot;
  o.usd_per_hour = 1.0;
  o.max_count = 3;
  o.compute.forward_per_sample_s = 1e-3;
  o.compute.backward_per_sample_s = 2e-3;
  o.interruptions_per_hour = 0.02;
  r.offers = {o};
  r.global_batch = 30;
  r.iterations = 1e5;
  r.spot = params();
  r.objective = srift::Objective::max_throughput;
  r.max_types = 1;
  const srift::SearchResult res = srift::search(r);
  ASSERT_FALSE(res.plans.empty());
  const srift::Plan& p = res.plans[0];
  ASSERT_EQ(p.groups.size(), 1u);
  EXPECT_NEAR(p.spot.interruptions_per_hour, 0.02 * p.groups[0].count, 1e-15);
  EXPECT_EQ(p.total_s, p.spot.expected_s);
  EXPECT_GT(p.total_s, p.spot.nominal_s);
  EXPECT_NEAR(p.spot.nominal_s, r.iterations * p.iteration.iteration_s, 1e-6);
  EXPECT_NEAR(p.total_usd, p.iteration.usd_per_hour * p.total_s / 3600.0, 1e-9);
  EXPECT_GE(p.spot.p90_s, p.spot.failure_free_s);
}

}  // namespace

TEST(Spot, FreeInterruptionsNeverMissAndBadInputsAreNamed) {
  // An embedder's review: interruptions that cost nothing (no checkpoint, no provisioning)
  // divided 0 by 0 at a deadline equal to the nominal time (UB casting NaN), and a NaN rate or
  // a negative time came back as answers.
  SpotParams free;
  free.checkpoint_bytes = 0;
  free.provisioning_s = 0;
  const SpotEstimate e = srift::estimate_spot(3600, 0.5, free, 3600);
  EXPECT_EQ(e.miss_probability, 0.0);
  EXPECT_EQ(srift::spot_miss_probability(3600, 0.5, free, 3600), 0.0);
  EXPECT_THROW(srift::estimate_spot(3600, std::nan(""), params(), 7200), std::invalid_argument);
  EXPECT_THROW(srift::estimate_spot(-5, 0.1, params(), 7200), std::invalid_argument);
  EXPECT_THROW(srift::estimate_spot(3600, 0.1, params(), std::nan("")), std::invalid_argument);
}

TEST(Spot, HotPathFunctionsRefuseWhatEstimateSpotRefuses) {
  // spot_expected_s (bound to Python) read a NaN rate as no preemption (the nominal time came
  // back), returned a negative time for a negative one and NaN for -inf; poisson_cdf of a
  // negative mean was a certainty.
  auto expect_names = [](auto call, const std::string& field) {
    try {
      call();
      ADD_FAILURE() << "no throw for " << field;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind(field, 0), 0u) << e.what();
    }
  };
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  expect_names([&] { srift::spot_expected_s(1e5, nan, params()); }, "interruptions_per_hour must be finite and >= 0, got nan");
  expect_names([&] { srift::spot_expected_s(1e5, inf, params()); }, "interruptions_per_hour");
  expect_names([&] { srift::spot_expected_s(1e5, -0.1, params()); }, "interruptions_per_hour");
  expect_names([&] { srift::spot_expected_s(-5, 0.1, params()); }, "nominal_s must be >= 0, got -5");
  expect_names([&] { srift::spot_expected_s(-inf, 0.1, params()); }, "nominal_s");
  expect_names([&] { srift::spot_expected_s(nan, 0.0, params()); }, "nominal_s");
  expect_names([&] { srift::spot_miss_probability(nan, 0.1, params(), 7200); }, "nominal_s");
  expect_names([&] { srift::spot_miss_probability(3600, nan, params(), 7200); }, "interruptions_per_hour");
  expect_names([&] { srift::spot_miss_probability(3600, 0.1, params(), nan); }, "deadline_s");
  expect_names([&] { srift::poisson_cdf(3, -5); }, "mean must be finite and >= 0, got -5");
  expect_names([&] { srift::poisson_quantile(-5, 0.5); }, "mean");
  // the valid edges still answer
  EXPECT_EQ(srift::spot_expected_s(3600, 0, params()), 3600);
  EXPECT_EQ(srift::spot_expected_s(inf, 0, params()), inf);
  EXPECT_EQ(srift::poisson_cdf(3, 0), 1.0);
  EXPECT_EQ(srift::poisson_quantile(0, 0.5), 0);
}


namespace {
// A review: with each failure's loss a point mass at c_f, P(miss) jumped by a whole Poisson
// term where (D - T0) / c_f crossed an integer, and Young's interval shrinks as the rate
// rises: 23 vs 24 spot instances (rate +4%) took P(miss) from 0.203 to 0.024 on a 20 h run
// with a 20.4 h deadline. Spread over each failure's range it moves by little per small step.
TEST(Spot, TheMissProbabilityMovesLittleWithTheRate) {
  SpotParams p = params();
  p.checkpoint_bytes = 5.44e9;
  const double nominal = 20 * 3600.0, deadline = 20.4 * 3600.0;
  double previous = -1, previous_p90 = -1, worst = 0, worst_p90 = 0;
  bool previous_failure_free = true;
  for (double rate = 0.004; rate < 0.08; rate *= 1.003) {
    const SpotEstimate e = srift::estimate_spot(nominal, rate, p, deadline);
    ASSERT_GE(e.miss_probability, 0.0);
    ASSERT_LE(e.miss_probability, 1.0);
    ASSERT_GE(e.p90_s, e.failure_free_s);
    // p90 leaves the no-failure atom (P(N = 0) falls below 0.9) by a jump to a first failure's
    // least cost, (1/2) c_f; past it p90 moves continuously
    if (previous >= 0 && !previous_failure_free) {
      worst_p90 = std::max(worst_p90, std::abs(e.p90_s - previous_p90) / previous_p90);
    }
    if (previous >= 0) worst = std::max(worst, std::abs(e.miss_probability - previous));
    previous = e.miss_probability;
    previous_p90 = e.p90_s;
    previous_failure_free = e.p90_s == e.failure_free_s;
  }
  EXPECT_LT(worst, 0.02);       // was 0.18 in one 0.3% step
  EXPECT_LT(worst_p90, 0.002);
}
}  // namespace