// Measurements before a prediction reads them: their precision, and repeated runs merged
// (measurements.hpp note "repeated measurements").
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "srift/measurements.hpp"

namespace {

using srift::MeasuredRun;
using srift::Measurement;
using srift::Precision;

MeasuredRun run(double batch, double seconds, double forward = -1, double backward = -1, int steps = 1) {
  return MeasuredRun{Measurement{batch, seconds, forward, backward}, steps, seconds};
}

std::string message_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no throw";
}

void expect_same(const Measurement& a, const Measurement& b) {
  EXPECT_EQ(a.local_batch, b.local_batch);
  EXPECT_EQ(a.iteration_s, b.iteration_s);
  EXPECT_EQ(a.forward_s, b.forward_s);
  EXPECT_EQ(a.backward_s, b.backward_s);
  EXPECT_EQ(a.precision, b.precision);
}

}  // namespace

TEST(Measurements, APrecisionIsOptionalAndAggregatesKeepTheirMeaning) {
  const Measurement plain{32, 0.1};
  EXPECT_FALSE(plain.precision.has_value());
  EXPECT_EQ(plain.forward_s, -1);
  const Measurement phases{32, 0.1, 0.03, 0.06};
  EXPECT_FALSE(phases.precision.has_value());
  const Measurement at{32, 0.1, -1, -1, Precision::tf32};
  EXPECT_EQ(at.precision, Precision::tf32);
  EXPECT_STREQ(srift::precision_name(Precision::fp32), "fp32");
  EXPECT_STREQ(srift::precision_name(Precision::tf32), "tf32");
  EXPECT_STREQ(srift::precision_name(Precision::amp), "amp");
  EXPECT_THROW(srift::precision_name(static_cast<Precision>(3)), std::invalid_argument);
  Measurement bad{32, 0.1};
  bad.precision = static_cast<Precision>(-1);
  EXPECT_EQ(message_of([&] { srift::validate_measurements({plain, bad}); }).rfind("measurements[1].precision", 0), 0u);
}

TEST(Measurements, RequirePrecisionNamesTheRunAndBothPrecisions) {
  std::vector<Measurement> ms = {{8, 0.05}, {16, 0.08, -1, -1, Precision::amp}, {32, 0.14, -1, -1, Precision::fp32}};
  EXPECT_NO_THROW(srift::require_precision({ms[0]}, Precision::tf32));  // unset: vouched for
  EXPECT_NO_THROW(srift::require_precision({ms[0], ms[1]}, Precision::amp));
  EXPECT_NO_THROW(srift::require_precision({}, Precision::amp));
  const std::string what = message_of([&] { srift::require_precision(ms, Precision::amp); });
  EXPECT_EQ(what.rfind("measurements[2].precision: the run was timed at fp32, the prediction is at amp", 0), 0u)
      << what;
  const std::string named = message_of([&] { srift::require_precision(ms, Precision::fp32, "anchors[3].measurements"); });
  EXPECT_EQ(named.rfind("anchors[3].measurements[1].precision: the run was timed at amp, the prediction is at fp32", 0),
            0u)
      << named;
  // the filter keeps the unset and the predicted, in order
  const std::vector<Measurement> amp = srift::measurements_at(ms, Precision::amp);
  ASSERT_EQ(amp.size(), 2u);
  EXPECT_EQ(amp[0].local_batch, 8);
  EXPECT_EQ(amp[1].local_batch, 16);
  EXPECT_EQ(srift::measurements_at(ms, Precision::tf32).size(), 1u);
  EXPECT_THROW(srift::measurements_at(ms, static_cast<Precision>(9)), std::invalid_argument);
}

TEST(Measurements, OneOrTwoRepeatsStayAsTheyAreThreeBecomeTheirMedian) {
  // runs interleaved: a group's median stands in each of its runs' places, order kept
  const std::vector<MeasuredRun> runs = {run(32, 0.30), run(64, 0.50), run(32, 0.10), run(16, 0.07),
                                         run(32, 0.20), run(64, 0.52)};
  const srift::MergedRepeats m = srift::merge_repeats(runs);
  ASSERT_EQ(m.points.size(), runs.size());
  for (std::size_t i : {0u, 2u, 4u}) {
    EXPECT_EQ(m.points[i].local_batch, 32);
    EXPECT_EQ(m.points[i].iteration_s, 0.20);
    EXPECT_EQ(m.points[i].forward_s, -1);
  }
  expect_same(m.points[1], runs[1].point);  // two: kept (a least-squares fit reads their mean)
  expect_same(m.points[5], runs[5].point);
  expect_same(m.points[3], runs[3].point);
  // 0.10 to 0.30: 200% apart, reported with their median; 0.50 and 0.52 agree
  ASSERT_EQ(m.disagreeing.size(), 1u);
  const srift::RepeatGroup& g = m.disagreeing[0];
  EXPECT_EQ(g.local_batch, 32);
  EXPECT_EQ(g.accumulation_steps, 1);
  EXPECT_EQ(g.members, (std::vector<std::size_t>{0, 2, 4}));
  EXPECT_EQ(g.spread, 0.30 / 0.10 - 1);
  EXPECT_EQ(g.used_s, 0.20);
  EXPECT_TRUE(srift::merge_repeats({}).points.empty());
}

TEST(Measurements, AnEvenCountTakesTheMeanOfTheMiddleTwoAndPhasesOnlyWhereEveryRunHasThem) {
  const std::vector<MeasuredRun> four = {run(8, 0.40, 0.1, 0.2), run(8, 0.10, 0.02, 0.05), run(8, 0.30, 0.09, 0.15),
                                         run(8, 0.20, 0.05, 0.1)};
  const Measurement m = srift::merge_repeats(four).points[0];
  EXPECT_EQ(m.iteration_s, (0.0 + 0.20 + 0.30) / 2);
  EXPECT_EQ(m.forward_s, (0.0 + 0.05 + 0.09) / 2);  // the middle runs' by iteration time
  EXPECT_EQ(m.backward_s, (0.0 + 0.1 + 0.15) / 2);
  std::vector<MeasuredRun> partial = four;
  partial[3].point.backward_s = -1;  // one run without its backward: no phases
  const Measurement p = srift::merge_repeats(partial).points[2];
  EXPECT_EQ(p.iteration_s, (0.20 + 0.30) / 2);
  EXPECT_EQ(p.forward_s, -1);
  EXPECT_EQ(p.backward_s, -1);
  // ties in iteration time keep the runs' order (a stable sort): the earlier tied run's phases
  const std::vector<MeasuredRun> tied = {run(8, 0.2, 0.05, 0.1), run(8, 0.2, 0.07, 0.11), run(8, 0.2, 0.06, 0.12)};
  const Measurement t = srift::merge_repeats(tied).points[0];
  EXPECT_EQ(t.forward_s, 0.07);
  EXPECT_EQ(t.backward_s, 0.11);
  const std::vector<MeasuredRun> tied4 = {run(8, 0.3, 0.1, 0.1), run(8, 0.2, 0.05, 0.1), run(8, 0.2, 0.07, 0.11),
                                          run(8, 0.2, 0.06, 0.12)};
  const Measurement t4 = srift::merge_repeats(tied4).points[0];  // middle two: runs 2 and 3
  EXPECT_EQ(t4.forward_s, (0.0 + 0.07 + 0.06) / 2);
  // two repeats that disagree are reported with their mean
  const srift::MergedRepeats two = srift::merge_repeats({run(8, 0.2), run(8, 0.3)});
  ASSERT_EQ(two.disagreeing.size(), 1u);
  EXPECT_EQ(two.disagreeing[0].used_s, (0.2 + 0.3) / 2);
}

TEST(Measurements, AConfigurationIsItsBatchMicroStepsAndPrecision) {
  std::vector<MeasuredRun> runs = {run(8, 0.1), run(8, 0.3, -1, -1, 2), run(8, 0.2), run(8, 0.25), run(8, 0.9)};
  runs[4].point.precision = Precision::amp;  // its own configuration
  runs[3].point.precision = Precision::fp32;  // set is not unset: its own too
  const srift::MergedRepeats m = srift::merge_repeats(runs, 0.5);
  for (std::size_t i = 0; i < runs.size(); ++i) expect_same(m.points[i], runs[i].point);  // no group of 3
  ASSERT_EQ(m.disagreeing.size(), 1u);  // 0.1 and 0.2 (unset, 1 step): 100% apart
  EXPECT_EQ(m.disagreeing[0].members, (std::vector<std::size_t>{0, 2}));
  // a group with a precision carries it into its median
  std::vector<MeasuredRun> amp = {run(8, 0.1), run(8, 0.2), run(8, 0.15)};
  for (MeasuredRun& r : amp) r.point.precision = Precision::amp;
  EXPECT_EQ(srift::merge_repeats(amp).points[0].precision, Precision::amp);
  EXPECT_EQ(srift::merge_repeats(amp).points[0].iteration_s, 0.15);
}

TEST(Measurements, TheSpreadReadsTheMeasuredTimesAndItsShare) {
  // an accumulated run's point is its plain iteration; the spread is of the times as measured
  std::vector<MeasuredRun> runs = {run(8, 0.1), run(8, 0.1)};
  runs[1].measured_s = 0.125;
  const srift::MergedRepeats m = srift::merge_repeats(runs);
  ASSERT_EQ(m.disagreeing.size(), 1u);
  EXPECT_EQ(m.disagreeing[0].spread, 0.125 / 0.1 - 1);
  EXPECT_EQ(m.disagreeing[0].used_s, (0.1 + 0.125) / 2);
  EXPECT_TRUE(srift::merge_repeats(runs, 0.3).disagreeing.empty());
  runs[1].measured_s = -1;  // < 0: the point's time
  EXPECT_TRUE(srift::merge_repeats(runs, 0).disagreeing.empty());
  // at the share exactly: agreeing (the slowest is not more than 1.2x the fastest)
  EXPECT_TRUE(srift::merge_repeats({run(8, 1.0), run(8, 1.2)}).disagreeing.empty());
  EXPECT_EQ(srift::kRepeatSpreadShare, 0.20);
}

TEST(Measurements, MergeRepeatsNamesWhatItRefuses) {
  auto first_words = [](const std::vector<MeasuredRun>& runs, double share = srift::kRepeatSpreadShare) {
    const std::string what = message_of([&] { srift::merge_repeats(runs, share); });
    return what.substr(0, what.find(" must"));
  };
  EXPECT_EQ(first_words({run(8, 0.1), run(8, -0.1)}), "runs[1].point.iteration_s");
  EXPECT_EQ(first_words({run(0, 0.1)}), "runs[0].point.local_batch");
  EXPECT_EQ(first_words({run(8, 0.1, std::nan(""), 0.05)}), "runs[0].point.forward_s");
  EXPECT_EQ(first_words({run(8, 0.1, 0.5, 0.5)}), "runs[0].point.forward_s + backward_s");
  EXPECT_EQ(first_words({run(8, 0.1, -1, -1, 0)}), "runs[0].accumulation_steps");
  std::vector<MeasuredRun> runs = {run(8, 0.1)};
  runs[0].measured_s = 0;
  EXPECT_EQ(first_words(runs), "runs[0].measured_s");
  runs[0].measured_s = std::numeric_limits<double>::infinity();
  EXPECT_EQ(first_words(runs), "runs[0].measured_s");
  EXPECT_EQ(first_words({run(8, 0.1)}, -0.1), "spread_share");
  EXPECT_EQ(first_words({run(8, 0.1)}, std::nan("")), "spread_share");
}
