// Roofline estimates and anchoring to measurements.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "srift/srift.hpp"

namespace {

srift::GpuSpec v100() {
  srift::GpuSpec g;
  g.name = "V100-16GB";
  g.memory_bytes = 16.0 * (1ull << 30);
  g.fp32_flops = 15.7e12;
  g.tf32_flops = 0;
  g.fp16_flops = 125e12;
  g.memory_bandwidth = 900e9;
  return g;
}

std::vector<srift::LayerCost> layers() {
  return {{srift::OpKind::conv, 2e9, 4e9, 1e6, 4e6},
          {srift::OpKind::norm, 1e6, 2e6, 8e6, 1e3},
          {srift::OpKind::matmul, 1e9, 2e9, 1e5, 8e6}};
}

TEST(Compute, RooflineMatchesHandComputation) {
  srift::RooflineParams p;
  const srift::GpuSpec g = v100();
  const auto m = srift::roofline_compute(layers(), g, srift::Precision::fp32, 1e8, p);
  const double flops = g.fp32_flops * p.cuda_core_efficiency;
  const double bw = g.memory_bandwidth * p.memory_efficiency;
  const double fwd = std::max(2e9 / flops, 1e6 / bw) + std::max(1e6 / flops, 8e6 / bw) +
                     std::max(1e9 / flops, 1e5 / bw);
  EXPECT_NEAR(m.forward_per_sample_s, fwd, 1e-15);
  EXPECT_NEAR(m.forward_fixed_s, 3 * p.launch_overhead_s + (4e6 + 1e3 + 8e6) / bw, 1e-15);
  EXPECT_NEAR(m.optimizer_s, 1e8 / bw + 8 * p.launch_overhead_s, 1e-15);
}

TEST(Compute, TensorCoresSpeedUpMatmulsUnderAmp) {
  const auto fp32 = srift::roofline_compute(layers(), v100(), srift::Precision::fp32, 0);
  const auto amp = srift::roofline_compute(layers(), v100(), srift::Precision::amp, 0);
  EXPECT_LT(amp.per_sample_s(), fp32.per_sample_s() / 2);
  // V100 has no TF32: tf32 falls back to FP32 CUDA cores.
  const auto tf32 = srift::roofline_compute(layers(), v100(), srift::Precision::tf32, 0);
  EXPECT_DOUBLE_EQ(tf32.per_sample_s(), fp32.per_sample_s());
}

TEST(Compute, Fp32IsPyTorchsDefaultConvolutionsOnTf32MatmulsOnFp32) {
  // compute.hpp note "fp32 is PyTorch's": cuDNN may use TF32, cuBLAS matmuls may not
  srift::RooflineParams p;
  srift::GpuSpec a100 = v100();
  a100.fp32_flops = 19.5e12;
  a100.tf32_flops = 156e12;
  a100.memory_bandwidth = 1555e9;
  const std::vector<srift::LayerCost> conv = {{srift::OpKind::conv, 2e9, 4e9, 1e3, 4e6}};
  const std::vector<srift::LayerCost> rnn = {{srift::OpKind::recurrent, 2e9, 4e9, 1e3, 4e6}};
  const std::vector<srift::LayerCost> mm = {{srift::OpKind::matmul, 2e9, 4e9, 1e3, 4e6}};
  auto per_sample = [&](const std::vector<srift::LayerCost>& l, const srift::GpuSpec& g, srift::Precision prec) {
    return srift::roofline_compute(l, g, prec, 1e8, p).forward_per_sample_s;
  };
  const double tensor = a100.tf32_flops * p.tensor_core_efficiency, cuda = a100.fp32_flops * p.cuda_core_efficiency;
  EXPECT_DOUBLE_EQ(per_sample(conv, a100, srift::Precision::fp32), 2e9 / tensor);
  EXPECT_DOUBLE_EQ(per_sample(rnn, a100, srift::Precision::fp32), 2e9 / tensor);
  EXPECT_DOUBLE_EQ(per_sample(mm, a100, srift::Precision::fp32), 2e9 / cuda);
  EXPECT_DOUBLE_EQ(per_sample(mm, a100, srift::Precision::tf32), 2e9 / tensor);
  // without TF32 units everything stays on CUDA cores
  const srift::GpuSpec g = v100();
  EXPECT_DOUBLE_EQ(per_sample(conv, g, srift::Precision::fp32), 2e9 / (g.fp32_flops * p.cuda_core_efficiency));
}

TEST(Compute, TwoBatchesFitBothTerms) {
  srift::ComputeModel prior = srift::roofline_compute(layers(), v100(), srift::Precision::fp32, 1e7);
  // Truth: iteration = 0.010 + 0.002 b
  const std::vector<srift::Measurement> points = {{16, 0.010 + 0.032}, {64, 0.010 + 0.128}};
  const auto m = srift::anchor_to_measurements(prior, points);
  EXPECT_NEAR(m.per_sample_s(), 0.002, 1e-12);
  EXPECT_NEAR(m.fixed_s() + m.optimizer_s, 0.010, 1e-12);
  EXPECT_NEAR(m.compute_s(32) + m.optimizer_s, 0.010 + 0.064, 1e-12);
}

TEST(Compute, OneBatchRescalesThePrior) {
  const srift::ComputeModel prior = srift::roofline_compute(layers(), v100(), srift::Precision::fp32, 1e7);
  const auto m = srift::anchor_to_measurements(prior, {{32, 0.2}});
  EXPECT_NEAR(m.compute_s(32) + m.optimizer_s, 0.2, 1e-12);
  // The shape (fixed : per-sample) is the prior's.
  EXPECT_NEAR(m.fixed_s() / m.per_sample_s(), prior.fixed_s() / prior.per_sample_s(), 1e-9);
}

TEST(Compute, MeasuredSplitIsKept) {
  const srift::ComputeModel prior = srift::roofline_compute(layers(), v100(), srift::Precision::fp32, 1e7);
  const auto m = srift::anchor_to_measurements(prior, {{32, 0.2, 0.05, 0.14}});
  EXPECT_NEAR(m.forward_s(32) / (m.forward_s(32) + m.backward_s(32)), 0.05 / 0.19, 1e-9);
}

TEST(Compute, MeasuredSplitMeasuresTheOptimizerStep) {
  const srift::ComputeModel prior = srift::roofline_compute(layers(), v100(), srift::Precision::fp32, 1e7);
  // Truth: forward 0.002 + 0.001 b, backward 0.004 + 0.002 b, optimizer 0.3 s (Adam over
  // large embeddings): far above half the fixed compute, which the prior's share would cap.
  std::vector<srift::Measurement> points;
  for (double b : {16.0, 64.0}) {
    const double f = 0.002 + 0.001 * b, bw = 0.004 + 0.002 * b;
    points.push_back({b, f + bw + 0.3, f, bw});
  }
  const auto m = srift::anchor_to_measurements(prior, points);
  EXPECT_NEAR(m.optimizer_s, 0.3, 1e-12);
  EXPECT_NEAR(m.fixed_s(), 0.006, 1e-12);
  EXPECT_NEAR(m.per_sample_s(), 0.003, 1e-12);
  EXPECT_NEAR(m.compute_s(32), 0.006 + 0.096, 1e-12);
  // One batch: the compute is rescaled to forward + backward, the optimizer is measured.
  const auto one = srift::anchor_to_measurements(prior, {points[0]});
  EXPECT_NEAR(one.optimizer_s, 0.3, 1e-12);
  EXPECT_NEAR(one.compute_s(16), points[0].forward_s + points[0].backward_s, 1e-12);
  // Phase medians that overshoot the iteration leave no optimizer time, not a negative one.
  const auto over = srift::anchor_to_measurements(prior, {{16, 0.1, 0.05, 0.06}});
  EXPECT_EQ(over.optimizer_s, 0.0);
}

TEST(Compute, BadInputIsRejected) {
  const srift::ComputeModel prior = srift::roofline_compute(layers(), v100(), srift::Precision::fp32, 1e7);
  EXPECT_THROW(srift::anchor_to_measurements(prior, {{0, 0.2}}), std::invalid_argument);
  EXPECT_THROW(srift::anchor_to_measurements(prior, {{8, -1}}), std::invalid_argument);
  srift::GpuSpec g = v100();
  g.fp32_flops = 0;
  EXPECT_THROW(srift::roofline_compute(layers(), g, srift::Precision::fp32, 0), std::invalid_argument);
  EXPECT_THROW(srift::roofline_compute({}, v100(), srift::Precision::fp32, 0), std::invalid_argument);
}

TEST(Version, MatchesTheProject) { EXPECT_STRNE(srift::version(), "0.0.0"); }

// A prior of 1 ms + 1 ms a sample forward, twice that backward, a 1 ms optimizer step.
srift::ComputeModel small_prior() {
  srift::ComputeModel prior;
  prior.forward_fixed_s = 1e-3;
  prior.backward_fixed_s = 2e-3;
  prior.forward_per_sample_s = 1e-3;
  prior.backward_per_sample_s = 2e-3;
  prior.optimizer_s = 1e-3;
  return prior;
}

}  // namespace

TEST(Compute, AnchorRefusesNonFiniteOrImpossiblePhases) {
  // A NaN forward_s was neither "not measured" (< 0) nor a time and gave an all-NaN model.
  const srift::ComputeModel prior = small_prior();
  const double nan = std::nan("");
  try {
    srift::anchor_to_measurements(prior, {{64, 0.5, nan, 0.2}});
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("measurements[0].forward_s"), std::string::npos) << e.what();
  }
  EXPECT_THROW(srift::anchor_to_measurements(prior, {{64, 0.5, 0.1, INFINITY}}), std::invalid_argument);
  EXPECT_THROW(srift::anchor_to_measurements(prior, {{64, 0.5, 1e300, 0.2}}), std::invalid_argument);
  // phases that sum past a double passed the "at most twice the iteration" test (inf > inf
  // is false) and fitted a NaN model; phases of zero fitted a model with no per-sample time
  try {
    srift::anchor_to_measurements(prior, {{8, 1e308, 1e308, 1e308}});
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("measurements[0].forward_s + backward_s"), std::string::npos) << e.what();
  }
  EXPECT_THROW(srift::anchor_to_measurements(prior, {{8, 1.0, 0.0, 0.0}}), std::invalid_argument);
  // valid measurements past any real range fit no usable model: named, not returned
  for (const srift::Measurement& m : {srift::Measurement{1e308, 1e-300}, srift::Measurement{5e-324, 1e308}}) {
    try {
      const srift::ComputeModel fit = srift::anchor_to_measurements(prior, {m});
      FAIL() << "returned per-sample " << fit.per_sample_s();
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("measurements: their fit is no usable compute model"), std::string::npos)
          << e.what();
    }
  }
  // noise: phases a little over the iteration are kept, not refused
  EXPECT_NO_THROW(srift::anchor_to_measurements(prior, {{64, 0.5, 0.2, 0.32}}));
  EXPECT_NO_THROW(srift::anchor_to_measurements(prior, {{64, 0.5, -1, -1}}));
  // an enum value that names none of Precision's
  EXPECT_THROW(srift::roofline_compute({}, v100(), static_cast<srift::Precision>(7), 0), std::invalid_argument);
}

TEST(Compute, MeasuredLineIsTheLineTheAnchorFits) {
  const srift::ComputeModel prior = small_prior();
  auto total = [](const srift::ComputeModel& m, double b) { return m.compute_s(b) + m.optimizer_s; };
  // a fitted line: the anchor's fixed and per-sample terms are its intercept and slope
  const std::vector<srift::Measurement> line = {{16, 0.05}, {32, 0.09}, {64, 0.17}};
  const srift::MeasuredLine l = srift::measured_line(line);
  ASSERT_TRUE(l.fitted());
  const srift::ComputeModel fit = srift::anchor_to_measurements(prior, line);
  EXPECT_DOUBLE_EQ(fit.per_sample_s(), l.slope);
  EXPECT_DOUBLE_EQ(total(fit, 0), l.intercept);
  // a larger batch faster: no line; the anchor goes through the mean instead
  const std::vector<srift::Measurement> contradict = {{32, 0.2}, {64, 0.1}};
  const srift::MeasuredLine c = srift::measured_line(contradict);
  EXPECT_TRUE(c.several_batches);
  EXPECT_FALSE(c.fitted());
  EXPECT_LT(c.slope, 0);
  EXPECT_NEAR(total(srift::anchor_to_measurements(prior, contradict), c.mean_batch), c.mean_s, 1e-15);
  // one batch: no slope
  EXPECT_FALSE(srift::measured_line({{32, 0.2}, {32, 0.22}}).several_batches);
  EXPECT_THROW(srift::measured_line({}), std::invalid_argument);
}

TEST(Compute, AnchorGivesAPhaseTheModelHasNoTimeInTheMeasuredShare) {
  // A prior with no forward time (a roofline over layers with only backward FLOPs): one
  // measured batch rescaled 0 forward terms by measured / 0, and NaN came back.
  srift::ComputeModel prior;
  prior.backward_fixed_s = 0.1;
  prior.backward_per_sample_s = 0.01;
  ASSERT_NO_THROW(prior.validate());
  const srift::ComputeModel m = srift::anchor_to_measurements(prior, {{8, 1.0, 0.3, 0.5}});
  ASSERT_NO_THROW(m.validate());
  EXPECT_NEAR(m.forward_s(8), 0.3, 1e-12);
  EXPECT_NEAR(m.backward_s(8), 0.5, 1e-12);
  EXPECT_NEAR(m.optimizer_s, 0.2, 1e-12);
  // the whole compute's shape (fixed : per-sample) in each phase
  EXPECT_NEAR(m.forward_fixed_s / m.forward_per_sample_s, prior.fixed_s() / prior.per_sample_s(), 1e-9);
  // no measured forward either: the forward stays empty, the backward takes it all
  const srift::ComputeModel none = srift::anchor_to_measurements(prior, {{8, 1.0, 0.0, 0.5}});
  ASSERT_NO_THROW(none.validate());
  EXPECT_EQ(none.forward_s(8), 0.0);
  EXPECT_NEAR(none.backward_s(8), 0.5, 1e-12);
  // the roofline that builds such a prior
  const std::vector<srift::LayerCost> backward_only = {{srift::OpKind::matmul, 0, 4e9, 0, 0}};
  const srift::ComputeModel roof = srift::roofline_compute(backward_only, v100(), srift::Precision::fp32, 0);
  ASSERT_EQ(roof.forward_s(32), 0.0);
  const srift::ComputeModel anchored = srift::anchor_to_measurements(roof, {{32, 0.1, 0.03, 0.05}});
  ASSERT_NO_THROW(anchored.validate());
  EXPECT_NEAR(anchored.forward_s(32), 0.03, 1e-12);
  EXPECT_NEAR(anchored.backward_s(32), 0.05, 1e-12);
}
