#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "srift/learned_compute.hpp"

#include "shipped_documents.hpp"

namespace {

using srift::GpuSpec;
using srift::LayerCost;
using srift::OpKind;
using srift::Precision;

// The JSON names of n features: the ratio model's (32) or the absolute model's (9), as the
// core computes them (LearnedCompute refuses others), else f0, f1, ...
std::string feature_names_json(int n) {
  const std::vector<std::string>& core = n == 32 ? srift::ratio_feature_names() : srift::absolute_feature_names();
  std::string names;
  for (int i = 0; i < n; ++i) {
    const std::string name = (n == 32 || n == 9) ? core[i] : "f" + std::to_string(i);
    names += (i ? ",\"" : "\"") + name + "\"";
  }
  return names;
}

// A linear model of n features: coef[i] = coef (0: constant), intercept c.
srift::LearnedModel constant_model(int n, double c, int feature = -1, double coef = 0.0) {
  const std::string names = feature_names_json(n);
  std::string coefs;
  for (int i = 0; i < n; ++i) coefs += (i ? "," : "") + std::to_string(i == feature ? coef : 0.0);
  return srift::LearnedModel::from_json(R"({"schema":"srift.learned-model/1","name":"m","features":[)" + names +
                                        R"(],"model":{"type":"linear","coef":[)" + coefs +
                                        R"(],"intercept":)" + std::to_string(c) + "}}");
}

// A compute document of a zero linear model of n features, residuals p10 -0.1 and p90 0.2,
// with `extra` members appended (each starting with a comma), named by its kind (32 features:
// compute_ratio, 9: compute_absolute), whose top-level fields it may then hold.
std::string zero_model_doc(const std::string& extra, int n) {
  const std::string names = feature_names_json(n);
  std::string coefs;
  for (int i = 0; i < n; ++i) coefs += i ? ",0" : "0";
  const std::string name = n == 32 ? "compute_ratio" : n == 9 ? "compute_absolute" : "m";
  return R"({"schema":"srift.learned-model/1","name":")" + name + R"(","features":[)" + names +
         R"(],"model":{"type":"linear","coef":[)" + coefs + R"(],"intercept":0},"residuals":{"p10":-0.1,"p90":0.2})" +
         extra + "}";
}

GpuSpec gpu(const char* name, double fp32_tflops, double fp16_tflops, double gbytes_s) {
  return GpuSpec{name, 16.0 * (1ull << 30), fp32_tflops * 1e12, 0.0, fp16_tflops * 1e12, gbytes_s * 1e9};
}

// One matmul layer (FLOP-bound everywhere) and one elementwise layer (bandwidth-bound).
srift::WorkloadStats two_layers() {
  return srift::WorkloadStats({LayerCost{OpKind::matmul, 3e9, 6e9, 1e6, 4e6}, LayerCost{OpKind::elementwise, 0, 0, 5e7, 0}},
                              8e6);
}

// A model's whole iteration at batch b (seconds): compute plus the optimizer step.
double total_at(const srift::ComputeModel& c, double b) { return c.compute_s(b) + c.optimizer_s; }

// The compute models srift ships (srift/data/models).
srift::LearnedCompute shipped_compute() {
  return srift::LearnedCompute::from_documents(srift_test::shipped_document("compute_ratio"),
                                               srift_test::shipped_document("compute_absolute"));
}

// The shipped compute models' A100-40GB ratio reference, launched in 2020 (the dominance tests
// start from it); unnamed when the shipped models hold none.
GpuSpec shipped_a100_40gb(const srift::LearnedCompute& lc) {
  GpuSpec a100;
  for (const GpuSpec& g : lc.config().ratio_references) {
    if (g.name == "A100-40GB") a100 = g;
  }
  a100.launch_year = 2020;
  return a100;
}

}  // namespace

TEST(WorkloadStats, SharesIntensityAndBandwidthBoundShare) {
  const srift::WorkloadStats w = two_layers();
  EXPECT_DOUBLE_EQ(w.flop_share(OpKind::matmul), 1.0);
  EXPECT_DOUBLE_EQ(w.flop_share(OpKind::conv), 0.0);
  EXPECT_DOUBLE_EQ(w.flops_per_sample(), 9e9);
  EXPECT_DOUBLE_EQ(w.log_intensity(), std::log10(9e9 / (3 * 5.1e7 + 4e6)));
  EXPECT_DOUBLE_EQ(w.log_work(100.0), std::log10(9e11));
  // FP32 at 60% of 10 TFLOP/s, memory at 70% of 500 GB/s: matmul 9e9/6e12 s, elementwise 1.5e8/3.5e11 s
  const GpuSpec g = gpu("g", 10, 0, 500);
  const double t_mm = 9e9 / 6e12, t_el = 1.5e8 / 3.5e11;
  EXPECT_NEAR(w.membound_share(g, Precision::fp32), t_el / (t_mm + t_el), 1e-15);
  EXPECT_THROW(srift::WorkloadStats({}, 0.0), std::invalid_argument);
  EXPECT_THROW(srift::WorkloadStats({LayerCost{OpKind::matmul, -1, 0, 0, 0}}, 0.0), std::invalid_argument);
}

TEST(LearnedComputeFeatures, SelfPairIsNeutralAndAbsoluteFeaturesAreTheSpecs) {
  const srift::WorkloadStats w = two_layers();
  const GpuSpec a = gpu("a", 15.7, 125, 900);
  const std::vector<double> f = srift::ratio_features(w, a, 32, a, 32, Precision::amp);
  ASSERT_EQ(f.size(), 32u);
  for (int i : {0, 1, 2, 3, 4}) EXPECT_DOUBLE_EQ(f[i], 0.0) << i;
  EXPECT_DOUBLE_EQ(f[5], f[6]);
  EXPECT_DOUBLE_EQ(f[7], 1.0);   // share_matmul
  EXPECT_DOUBLE_EQ(f[13], 1.0);  // prec_amp
  for (std::size_t i = 18; i < f.size(); ++i) EXPECT_DOUBLE_EQ(f[i], 0.0) << i;
  const std::vector<double> x = srift::absolute_features(w, a, 8, Precision::amp);
  ASSERT_EQ(x.size(), 9u);
  EXPECT_DOUBLE_EQ(x[0], std::log(srift::roofline_per_sample_s(w, a, Precision::amp, 8)));
  EXPECT_NEAR(x[1], std::log(125.0), 1e-12);
  EXPECT_NEAR(x[2], std::log(15.7), 1e-12);
  EXPECT_NEAR(x[3], std::log(900.0), 1e-12);
  EXPECT_DOUBLE_EQ(x[4], std::log(8.0));
  EXPECT_DOUBLE_EQ(x[6], 1.0);
  // TF32 mode without TF32 units runs FP32: no precision flag
  const std::vector<double> y = srift::absolute_features(w, a, 8, Precision::tf32);
  EXPECT_DOUBLE_EQ(y[6], 0.0);
  EXPECT_DOUBLE_EQ(y[7], 0.0);
  EXPECT_THROW(srift::absolute_features(w, a, 0, Precision::fp32), std::invalid_argument);
}

TEST(LearnedComputeFeatures, BatchGridAndRelativeFit) {
  EXPECT_EQ(srift::batch_grid(0),
            (std::vector<double>{1, 2, 3, 5, 8, 14, 25, 42, 71, 121, 207, 353, 601, 1024}));
  EXPECT_EQ(srift::batch_grid(512), srift::batch_grid(0));
  EXPECT_EQ(srift::batch_grid(5000).back(), 5000.0);
  // a local batch is an int: the grid ends there (at 1e308 it extrapolated the model 3e10x)
  EXPECT_EQ(srift::batch_grid(1e308).back(), 2147483647.0);
  EXPECT_EQ(srift::batch_grid(1e308), srift::batch_grid(3e9));
  const std::vector<double> b = {1, 10, 100};
  auto [fixed, slope] = srift::affine_relative_fit(b, {0.2 + 0.01, 0.2 + 0.1, 0.2 + 1.0});
  EXPECT_NEAR(fixed, 0.2, 1e-12);
  EXPECT_NEAR(slope, 0.01, 1e-12);
  // falling time: no positive slope, the mean per-sample time through the origin
  auto [f0, s0] = srift::affine_relative_fit(b, {3.0, 2.0, 1.0});
  EXPECT_EQ(f0, 0.0);
  EXPECT_DOUBLE_EQ(s0, (3.0 + 0.2 + 0.01) / 3);
  EXPECT_THROW(srift::affine_relative_fit(b, {1.0, 0.0, 1.0}), std::invalid_argument);
  // with a floor on the slope: a flat curve is its fixed time plus the floor's slope
  auto [f1, s1] = srift::affine_relative_fit(b, {0.5, 0.5, 0.5}, 1e-6);
  EXPECT_DOUBLE_EQ(s1, 1e-6);
  EXPECT_NEAR(f1, 0.5 - 1e-6 * 37, 1e-6);
  // a slope above the floor is left as fitted
  auto [f2, s2] = srift::affine_relative_fit(b, {0.2 + 0.01, 0.2 + 0.1, 0.2 + 1.0}, 1e-3);
  EXPECT_NEAR(f2, 0.2, 1e-12);
  EXPECT_NEAR(s2, 0.01, 1e-12);
  EXPECT_THROW(srift::affine_relative_fit(b, {1.0, 1.0, 1.0}, -1.0), std::invalid_argument);
}

TEST(LearnedCompute, BlendAndShrinkArithmetic) {
  const srift::WorkloadStats w = two_layers();
  const GpuSpec a = gpu("a", 15.7, 125, 900), b = gpu("b", 31.2, 125, 600);
  srift::LearnedComputeConfig cfg;
  cfg.blend = true;
  cfg.blend_weight = 0.4;
  cfg.shrink = 0.25;
  // ratio model: 0.3; absolute model: 0.1 * log(bandwidth in GB/s)
  const srift::LearnedCompute lc(constant_model(32, 0.3), constant_model(9, 0.0, 3, 0.1), cfg);
  const double roof = srift::ratio_features(w, a, 16, b, 16, Precision::amp)[0];
  const double ca = 0.1 * std::log(900.0), cb = 0.1 * std::log(600.0), observed = 0.05;
  const double blend = 0.6 * 0.3 + 0.4 * (cb - ca);
  EXPECT_NEAR(lc.anchored_log_ratio(w, a, b, 16, Precision::amp, observed),
              roof + 0.75 * blend + 0.25 * (cb - observed), 1e-12);
  EXPECT_NEAR(lc.anchored_log_ratio(w, a, b, 16, Precision::amp, std::nan("")), roof + blend, 1e-12);
  // no FP16 path on the target under AMP: the roofline ratio alone
  const GpuSpec k80 = gpu("k80", 4.37, 0, 240);
  EXPECT_DOUBLE_EQ(lc.anchored_log_ratio(w, a, k80, 16, Precision::amp, observed),
                   srift::ratio_features(w, a, 16, k80, 16, Precision::amp)[0]);
}

TEST(LearnedCompute, DominanceClipsAnchoredAndAbsolutePredictions) {
  const srift::WorkloadStats w = two_layers();
  const GpuSpec slow = gpu("slow", 10, 50, 400), fast = gpu("fast", 20, 100, 800), mid = gpu("mid", 15, 75, 600);
  EXPECT_TRUE(srift::dominates(fast, slow, Precision::amp));
  EXPECT_FALSE(srift::dominates(slow, fast, Precision::amp));
  EXPECT_FALSE(srift::dominates(slow, slow, Precision::amp));
  // PyTorch's FP32 runs convolutions on TF32: more FP32 and bandwidth but less TF32 is not ahead
  GpuSpec tf32_slow = fast, tf32_fast = slow;
  tf32_slow.tf32_flops = 30e12;
  tf32_fast.tf32_flops = 60e12;
  EXPECT_TRUE(srift::dominates(fast, slow, Precision::fp32));
  EXPECT_FALSE(srift::dominates(tf32_slow, tf32_fast, Precision::fp32));
  EXPECT_TRUE(srift::dominates(tf32_slow, tf32_fast, Precision::amp));  // there the FP16 peak counts
  // A ratio model that calls every target e^2 slower than its roofline ratio says: the fast
  // GPU would come out slower than the measured slow one, which dominance forbids.
  srift::LearnedComputeConfig cfg;
  cfg.ratio_references = {mid};
  const srift::LearnedCompute lc(constant_model(32, 2.0), constant_model(9, 0.0), cfg);
  EXPECT_GT(lc.anchored_log_ratio(w, slow, fast, 32, Precision::amp, std::nan("")), 0.0);
  EXPECT_LE(lc.guarded_log_ratio(w, slow, fast, 32, Precision::amp, std::nan("")), 0.0);
  // an infinite deviation is no measurement (it gave a ratio of +inf); NaN leaves the shrink out
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_THROW(lc.anchored_log_ratio(w, slow, fast, 32, Precision::amp, -inf), std::invalid_argument);
  EXPECT_THROW(lc.guarded_log_ratio(w, slow, fast, 32, Precision::amp, inf), std::invalid_argument);
  // a document without a dominance guard (no references) is not clipped at all
  const srift::LearnedCompute bare(constant_model(32, 2.0), constant_model(9, 0.0), srift::LearnedComputeConfig{});
  EXPECT_EQ(bare.guarded_log_ratio(w, slow, fast, 32, Precision::amp, std::nan("")),
            bare.anchored_log_ratio(w, slow, fast, 32, Precision::amp, std::nan("")));
  // absolute: a model that makes bandwidth slow (+1 per log GB/s) would put `fast` above
  // `slow`; clipped, `fast` is never slower than the reference it dominates
  srift::LearnedComputeConfig acfg;
  acfg.absolute_references = {slow};
  const srift::LearnedCompute abs(constant_model(32, 0.0), constant_model(9, 0.0, 3, 1.0), acfg);
  const std::vector<double> batches = {1, 64};
  const std::vector<double> c = abs.absolute_corrections(w, fast, batches, Precision::amp);
  for (std::size_t i = 0; i < batches.size(); ++i) {
    const double t_fast = std::log(srift::roofline_per_sample_s(w, fast, Precision::amp, batches[i])) + c[i];
    const double t_slow = std::log(srift::roofline_per_sample_s(w, slow, Precision::amp, batches[i])) + std::log(400.0);
    EXPECT_NEAR(t_fast, t_slow, 1e-12);
  }
}

TEST(LearnedCompute, PredictionsAnchorToMeasurementsOrFitTheRooflineGrid) {
  const srift::WorkloadStats w = two_layers();
  const GpuSpec a = gpu("a", 15.7, 125, 900), b = gpu("b", 31.2, 125, 600);
  srift::LearnedComputeConfig cfg;
  cfg.anchored_p10 = -0.2;
  cfg.anchored_p90 = 0.3;
  cfg.absolute_p90 = 0.4;
  const srift::LearnedCompute lc(constant_model(32, 0.0), constant_model(9, 0.0), cfg);
  const std::vector<srift::Measurement> meas = {{8, 0.05}, {32, 0.14}};
  const srift::LearnedComputeResult r = lc.predict_anchored(w, a, meas, b, Precision::amp);
  // two measured batches: the anchor's own line, times the ratio at each batch (note
  // "anchored batch shape"; zero corrections: the roofline ratio), fitted as a line
  const srift::ComputeModel anchored = srift::anchor_to_measurements(w.roofline(a, Precision::amp), meas);
  for (double batch : {1.0, 20.0, 100.0, 1024.0}) {
    const double k = std::exp(srift::ratio_features(w, a, batch, b, batch, Precision::amp)[0]);
    const double want = k * (anchored.compute_s(batch) + anchored.optimizer_s);
    EXPECT_NEAR(r.model.compute_s(batch) + r.model.optimizer_s, want, 0.05 * want) << batch;
  }
  // a target with the anchor's specs: the ratio is 1 at every batch and the line is the anchor's
  const GpuSpec twin = gpu("twin", 15.7, 125, 900);
  const srift::ComputeModel same = lc.predict_anchored(w, a, meas, twin, Precision::amp).model;
  for (double batch : {1.0, 8.0, 32.0, 1024.0}) {
    const double want = anchored.compute_s(batch) + anchored.optimizer_s;
    EXPECT_NEAR(same.compute_s(batch) + same.optimizer_s, want, 1e-9 * want) << batch;
  }
  EXPECT_DOUBLE_EQ(r.p10_factor, std::exp(-0.2));
  EXPECT_DOUBLE_EQ(r.p90_factor, std::exp(0.3));
  EXPECT_FALSE(r.roofline_ratio_only);
  // zero corrections: the grid fit reproduces the (affine) roofline
  const srift::LearnedComputeResult p = lc.predict_absolute(w, b, Precision::amp, 0);
  const srift::ComputeModel roof = w.roofline(b, Precision::amp);
  for (double batch : {1.0, 100.0, 1024.0}) {
    EXPECT_NEAR(p.model.compute_s(batch) + p.model.optimizer_s, roof.compute_s(batch) + roof.optimizer_s,
                1e-9 * (roof.compute_s(batch) + roof.optimizer_s));
  }
  EXPECT_DOUBLE_EQ(p.p90_factor, std::exp(0.4));
  EXPECT_THROW(lc.predict_anchored(w, a, {}, b, Precision::amp), std::invalid_argument);
  // a NaN phase is named as the caller's field, not as an internal fit's "seconds[0]"
  try {
    lc.predict_anchored(w, a, {{64, 0.5, std::nan(""), 0.2}}, b, Precision::amp);
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("measurements[0].forward_s"), std::string::npos) << e.what();
  }
}

TEST(LearnedCompute, AFlatCurveIsAFixedTimeNotALineThroughTheOrigin) {
  // An absolute model of -1 per log batch: the corrected time per sample falls as 1/b, so the
  // iteration time is flat-to-falling over the grid (a launch-bound model: NCF). Its line is the
  // fixed time plus a token slope; the mean per-sample time through the origin it got before
  // took batch 1's per-sample time for every batch (NCF ~170x at batch 1024 with no max_batch).
  // Launch-bound as NCF is: few FLOPs per sample, so a flat time at batch 1024 beats no peak
  // (two_layers' 9 GFLOP per sample would, and the note "peak floor" lifts such a curve).
  const srift::WorkloadStats w({LayerCost{OpKind::matmul, 3e5, 6e5, 1e6, 4e6}, LayerCost{OpKind::elementwise, 0, 0, 5e7, 0}},
                               2e7);
  const GpuSpec b = gpu("b", 31.2, 125, 600);
  const srift::LearnedCompute lc(constant_model(32, 0.0), constant_model(9, 0.0, 4, -1.0), srift::LearnedComputeConfig{});
  const srift::ComputeModel roof = w.roofline(b, Precision::amp);
  const std::vector<double> grid = srift::batch_grid(0);
  const std::vector<double> corr = lc.absolute_corrections(w, b, grid, Precision::amp);
  const srift::ComputeModel p = lc.predict_absolute(w, b, Precision::amp, 0).model;
  double least = std::numeric_limits<double>::infinity(), most = 0, least_per_sample = least;
  for (std::size_t i = 0; i < grid.size(); ++i) {
    const double point = (roof.compute_s(grid[i]) + roof.optimizer_s) * std::exp(corr[i]);
    least = std::min(least, point);
    most = std::max(most, point);
    least_per_sample = std::min(least_per_sample, point / grid[i]);
  }
  // the token slope: 1% of the curve's least per-sample time, at most 1% of any point
  EXPECT_NEAR(p.per_sample_s(), 0.01 * least_per_sample, 1e-9 * least_per_sample);
  ASSERT_GT(most / least, 1.2);  // the curve is not quite flat: the test has something to miss
  for (double batch : grid) {  // the line stays within the curve's range, to the token slope
    const double line = p.compute_s(batch) + p.optimizer_s;
    EXPECT_GE(line, least) << batch;
    EXPECT_LE(line, 1.05 * most) << batch;
  }
}

TEST(LearnedCompute, AnchoredPredictionsKeepTheOrderOfDominatingGpusAtTheMeasurement) {
  // An absolute model that bends the anchor's measured curve (halfway to a flat one) and a ratio
  // model of 0: the target's grid points are the roofline ratio times that curve, and the line
  // fitted through them misses the points. Whatever the fit, a GPU that dominates the anchor is
  // no slower than the measurement at the measured batch, and one the anchor dominates no faster.
  const srift::WorkloadStats w = two_layers();
  const GpuSpec slow = gpu("slow", 10, 50, 400), fast = gpu("fast", 20, 100, 800);
  srift::LearnedComputeConfig cfg;
  cfg.ratio_references = {slow, fast};
  const srift::LearnedCompute lc(constant_model(32, 0.0), constant_model(9, 0.0, 4, -1.0), cfg);
  for (double batch : {1.0, 3.0, 32.0, 300.0, 5000.0}) {
    for (double seconds : {1e-4, 0.05, 3.0}) {
      const std::vector<srift::Measurement> meas = {{batch, seconds}};
      const srift::ComputeModel up = lc.predict_anchored(w, slow, meas, fast, Precision::amp).model;
      const srift::ComputeModel down = lc.predict_anchored(w, fast, meas, slow, Precision::amp).model;
      EXPECT_LE(up.compute_s(batch) + up.optimizer_s, seconds * (1 + 1e-12)) << batch << " " << seconds;
      EXPECT_GE(down.compute_s(batch) + down.optimizer_s, seconds * (1 - 1e-12)) << batch << " " << seconds;
    }
  }
}

TEST(LearnedCompute, RejectsModelsAndConfigsThatDoNotFit) {
  srift::LearnedComputeConfig cfg;
  EXPECT_THROW(srift::LearnedCompute(constant_model(9, 0), constant_model(9, 0), cfg), std::invalid_argument);
  EXPECT_THROW(srift::LearnedCompute(constant_model(32, 0), constant_model(32, 0), cfg), std::invalid_argument);
  cfg.blend_weight = -0.1;
  try {
    srift::LearnedCompute(constant_model(32, 0), constant_model(9, 0), cfg);
    FAIL() << "negative blend weight accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("blend_weight must be in [0, 1], got -0.1"), std::string::npos) << e.what();
  }
}

TEST(LearnedCompute, ConfigFromTheDocuments) {
  const auto doc = zero_model_doc;
  const std::string guard =
      R"("dominance_guard":{"references":["T4"],"reference_specs":{"T4":{"fp32_flops":8.1e12,"tf32_flops":0,)"
      R"("fp16_flops":65e12,"memory_bandwidth":320e9,"memory_bytes":17179869184}}})";
  const std::string ratio = doc(R"(,"roofline_residuals":{"p10":-0.5,"p90":0.6},"absolute_blend":{"weight":0.4,)"
                                R"("shrink":0.2,"absolute_model":"compute_absolute","residuals":{"p10":-0.3,"p90":0.35},)" +
                                    guard + "}",
                                32);
  const std::string absolute =
      doc("," + guard + R"(,"measured_band":{"noise":{"p10":0.98,"p90":1.07,"n":88},"per_e_fold":{"p10":0.67,"p90":1.49}})",
          9);
  const srift::LearnedComputeConfig cfg = srift::learned_compute_config(ratio, absolute);
  EXPECT_DOUBLE_EQ(cfg.measured_p10, 0.98);
  EXPECT_DOUBLE_EQ(cfg.measured_p90, 1.07);
  EXPECT_DOUBLE_EQ(cfg.measured_per_e_fold_p10, 0.67);
  EXPECT_DOUBLE_EQ(cfg.measured_per_e_fold_p90, 1.49);
  EXPECT_TRUE(cfg.blend);
  EXPECT_DOUBLE_EQ(cfg.blend_weight, 0.4);
  EXPECT_DOUBLE_EQ(cfg.shrink, 0.2);
  EXPECT_DOUBLE_EQ(cfg.anchored_p10, -0.3);  // the blend's, not the ratio model's
  EXPECT_DOUBLE_EQ(cfg.roofline_p90, 0.6);
  EXPECT_DOUBLE_EQ(cfg.absolute_p90, 0.2);
  ASSERT_EQ(cfg.ratio_references.size(), 1u);
  EXPECT_EQ(cfg.absolute_references[0].name, "T4");
  EXPECT_DOUBLE_EQ(cfg.absolute_references[0].fp16_flops, 65e12);
  EXPECT_NO_THROW(srift::LearnedCompute::from_documents(ratio, absolute));
  // without a blend: the ratio model's residuals, no references, no blend
  const srift::LearnedComputeConfig plain = srift::learned_compute_config(doc("", 32), doc("", 9));
  EXPECT_FALSE(plain.blend);
  EXPECT_TRUE(plain.ratio_references.empty() && plain.absolute_references.empty());
  EXPECT_DOUBLE_EQ(plain.roofline_p10, -0.1);
  EXPECT_EQ(plain.measured_p90, 1.0);  // no measured_band recorded: no band
  EXPECT_EQ(plain.measured_per_e_fold_p10, 1.0);
  // a band narrower than the prediction itself is refused, naming the field
  std::string inverted = absolute;
  const std::string wide = "\"p90\":1.49";
  inverted.replace(inverted.find(wide), wide.size(), "\"p90\":0.95");
  try {
    srift::learned_compute_config(ratio, inverted);
    FAIL() << "a per-e-fold p90 below 1 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("measured_per_e_fold_p90"), std::string::npos) << e.what();
  }
  std::string missing = absolute;
  missing.replace(missing.find("\"memory_bytes\""), 14, "\"memory_bytez\"");
  try {
    srift::learned_compute_config(ratio, missing);
    FAIL() << "a reference without memory_bytes accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("compute_absolute.dominance_guard.reference_specs.T4.memory_bytez is not a known "
                                         "field (did you mean 'memory_bytes'?)"),
              std::string::npos)
        << e.what();
  }
  missing = absolute;
  const std::string bytes = ",\"memory_bytes\":17179869184";
  missing.replace(missing.find(bytes), bytes.size(), "");
  try {
    srift::learned_compute_config(ratio, missing);
    FAIL() << "a reference without memory_bytes accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("compute_absolute.dominance_guard.reference_specs.T4.memory_bytes is missing"),
              std::string::npos)
        << e.what();
  }
}

TEST(LearnedCompute, SeveralAnchorsAverageInLogTime) {
  const srift::WorkloadStats w = two_layers();
  const GpuSpec a = gpu("a", 15.7, 125, 900), b = gpu("b", 31.2, 125, 600), target = gpu("t", 20, 100, 700);
  const srift::LearnedCompute lc(constant_model(32, 0.1), constant_model(9, 0.0), srift::LearnedComputeConfig{});
  const srift::Anchor on_a{a, {{16, 0.05}, {64, 0.17}}}, on_b{b, {{32, 0.08}}};
  // one anchor: exactly the single-anchor prediction
  const srift::LearnedComputeResult one = lc.predict_anchored(w, {on_a}, target, Precision::amp, 0);
  const srift::LearnedComputeResult direct = lc.predict_anchored(w, a, on_a.measurements, target, Precision::amp);
  EXPECT_EQ(one.model.forward_fixed_s, direct.model.forward_fixed_s);
  EXPECT_EQ(one.model.backward_per_sample_s, direct.model.backward_per_sample_s);
  // two: the geometric mean of the two predictions (up to the affine fit on the batch grid)
  const srift::LearnedComputeResult both = lc.predict_anchored(w, {on_a, on_b}, target, Precision::amp, 0);
  const srift::ComputeModel pa = direct.model;
  const srift::ComputeModel pb = lc.predict_anchored(w, b, on_b.measurements, target, Precision::amp).model;
  for (double batch : {8.0, 64.0, 512.0}) {
    const double ta = pa.compute_s(batch) + pa.optimizer_s, tb = pb.compute_s(batch) + pb.optimizer_s;
    const double t = both.model.compute_s(batch) + both.model.optimizer_s;
    EXPECT_NEAR(t / std::sqrt(ta * tb), 1.0, 0.05) << batch;
    EXPECT_GT(t, std::min(ta, tb) * 0.95);
    EXPECT_LT(t, std::max(ta, tb) * 1.05);
  }
  EXPECT_DOUBLE_EQ(both.p90_factor, direct.p90_factor);
  // under AMP an anchor with no FP16 path to the target is left out while another has one
  const srift::Anchor on_k80{gpu("k80", 4.37, 0, 240), {{32, 0.9}}};
  const srift::LearnedComputeResult skip = lc.predict_anchored(w, {on_a, on_k80}, target, Precision::amp, 0);
  EXPECT_EQ(skip.model.forward_fixed_s, direct.model.forward_fixed_s);
  EXPECT_THROW(lc.predict_anchored(w, std::vector<srift::Anchor>{}, target, Precision::amp, 0), std::invalid_argument);
}

TEST(LearnedCompute, MeasuredModelTakesTheLearnedCurveFromOneBatch) {
  // note "measured batch shape": one batch scales the learned model's curve through it, its
  // terms split as the roofline's; two batches fit their own line
  const srift::WorkloadStats w = two_layers();
  const GpuSpec g = gpu("g", 15.7, 125, 900);
  // the learned correction grows with the fixed share (feature 8): slower at small batches
  const srift::LearnedCompute lc(constant_model(32, 0.0), constant_model(9, 0.0, 8, 2.0), srift::LearnedComputeConfig{});
  const srift::ComputeModel roof = w.roofline(g, Precision::amp);
  const std::vector<srift::Measurement> one = {{32, 0.1}};
  const srift::ComputeModel m = lc.measured_model(w, g, roof, one, Precision::amp, 0);
  EXPECT_NEAR(total_at(m, 32), 0.1, 1e-15);
  const srift::ComputeModel learned = lc.predict_absolute(w, g, Precision::amp, 0).model;
  for (double b : {1.0, 4.0, 256.0}) {
    const double by_roof = total_at(roof, b) / total_at(roof, 32), by_learned = total_at(learned, b) / total_at(learned, 32);
    ASSERT_GT(std::abs(by_roof / by_learned - 1), 0.01);  // the two curves differ here
    EXPECT_NEAR(total_at(m, b), 0.1 * by_learned, 1e-12 * by_learned) << b;
  }
  const double share = roof.forward_per_sample_s / roof.per_sample_s();
  EXPECT_NEAR(m.forward_per_sample_s / m.per_sample_s(), share, 1e-12);
  const std::vector<srift::Measurement> two = {{8, 0.05}, {32, 0.14}};
  const srift::ComputeModel line = lc.measured_model(w, g, roof, two, Precision::amp, 0);
  const srift::ComputeModel fit = srift::anchor_to_measurements(roof, two);
  EXPECT_DOUBLE_EQ(total_at(line, 20), total_at(fit, 20));
  EXPECT_THROW(lc.measured_model(w, g, roof, {}, Precision::amp, 0), std::invalid_argument);
}

TEST(LearnedCompute, SeveralBatchesWithNoLineKeepTheNearerCurve) {
  // note "several batches, no line": a flat or falling pair fits no line; of the roofline's
  // curve and the learned one, scaled through the mean, the one nearer the points is kept
  const srift::WorkloadStats w = two_layers();
  const GpuSpec g = gpu("g", 15.7, 125, 900);
  const srift::LearnedCompute lc(constant_model(32, 0.0), constant_model(9, 0.0, 8, 2.0), srift::LearnedComputeConfig{});
  const srift::ComputeModel roof = w.roofline(g, Precision::amp);
  const srift::ComputeModel learned = lc.predict_absolute(w, g, Precision::amp, 0).model;
  auto misfit = [&](const srift::ComputeModel& c, const std::vector<srift::Measurement>& pts) {
    double s = 0;
    for (const auto& p : pts) s += std::pow(std::log(total_at(c, p.local_batch) / p.iteration_s), 2);
    return s;
  };
  const srift::ComputeModel learned_split = [&] {
    // the learned curve split as the roofline, as measured_model scales it
    srift::ComputeModel c = roof;
    const double fixed = learned.fixed_s() + learned.optimizer_s, per_sample = learned.per_sample_s();
    c.optimizer_s = std::min(roof.optimizer_s, 0.5 * fixed);
    const double ff = roof.fixed_s() > 0 ? roof.forward_fixed_s / roof.fixed_s() : 0.5;
    const double fs = roof.forward_per_sample_s / roof.per_sample_s();
    c.forward_fixed_s = (fixed - c.optimizer_s) * ff;
    c.backward_fixed_s = (fixed - c.optimizer_s) * (1 - ff);
    c.forward_per_sample_s = per_sample * fs;
    c.backward_per_sample_s = per_sample * (1 - fs);
    return c;
  }();
  // flat (falling by noise) over 32-64: the learned curve, with its fixed cost, is nearer
  const double t32 = total_at(learned, 32);
  const std::vector<srift::Measurement> flat = {{32, t32}, {64, t32 * 0.999}};
  const srift::ComputeModel by_roof = srift::anchor_to_measurements(roof, flat);
  const srift::ComputeModel by_learned = srift::anchor_to_measurements(learned_split, flat);
  ASSERT_LT(misfit(by_learned, flat), misfit(by_roof, flat));
  const srift::ComputeModel m = lc.measured_model(w, g, roof, flat, Precision::amp, 0);
  for (double b : {1.0, 48.0, 1024.0}) EXPECT_NEAR(total_at(m, b), total_at(by_learned, b), 1e-12 * total_at(by_learned, b)) << b;
  EXPECT_GT(total_at(m, 1), 1.5 * total_at(by_roof, 1));  // the learned curve's fixed cost, which the roofline's lacks
  // steeper than proportional (a negative intercept): the roofline's curve is nearer
  const std::vector<srift::Measurement> steep = {{32, 0.01}, {64, 0.021}};
  ASSERT_LT(srift::measured_line(steep).intercept, 0.0);
  const srift::ComputeModel s = lc.measured_model(w, g, roof, steep, Precision::amp, 0);
  const srift::ComputeModel s_roof = srift::anchor_to_measurements(roof, steep);
  ASSERT_LT(misfit(s_roof, steep), misfit(srift::anchor_to_measurements(learned_split, steep), steep));
  for (double b : {1.0, 48.0, 1024.0}) EXPECT_DOUBLE_EQ(total_at(s, b), total_at(s_roof, b)) << b;
}

TEST(LearnedCompute, OneCallsKeptEvaluationsChangeNoAnswerAndStayInTheCall) {
  // note "memo": a prediction keeps each GPU's terms and each model input it evaluated; the
  // answer is that of evaluating them again, and a call shares nothing with another (the
  // class is documented thread-safe), so two threads at once get what one thread got alone.
  const srift::WorkloadStats w = two_layers();
  const GpuSpec a = gpu("a", 15.7, 125, 900), slow = gpu("slow", 10, 50, 400), mid = gpu("mid", 15, 75, 600),
                fast = gpu("fast", 20, 100, 800);
  srift::LearnedComputeConfig cfg;
  cfg.blend = true;
  cfg.blend_weight = 0.4;
  cfg.shrink = 0.3;
  cfg.ratio_references = {slow, mid, fast};
  cfg.absolute_references = {slow, mid, fast};
  const srift::LearnedCompute lc(constant_model(32, 0.0, 1, 0.7), constant_model(9, 0.1, 8, 1.5), cfg);
  const std::vector<srift::Measurement> on_a = {{32, 0.1}};
  const std::vector<GpuSpec> targets = {slow, mid, fast, gpu("t", 25, 90, 500)};
  auto run_all = [&] {
    std::vector<double> out;
    for (const GpuSpec& t : targets) {
      for (Precision p : {Precision::amp, Precision::fp32}) {
        const srift::ComputeModel m = lc.predict_anchored(w, a, on_a, t, p, 300).model;
        const srift::ComputeModel n = lc.predict_absolute(w, t, p, 300).model;
        for (double b : {1.0, 32.0, 300.0}) {
          out.push_back(total_at(m, b));
          out.push_back(total_at(n, b));
        }
      }
    }
    return out;
  };
  // each grid point of an anchored prediction is the measured curve times the guarded ratio,
  // which a fresh call computes on its own
  const srift::ComputeModel measured = lc.measured_model(w, a, w.roofline(a, Precision::amp), on_a, Precision::amp, 300);
  const double on_a_1 = total_at(measured, 1), roof_a_1 = total_at(w.roofline(a, Precision::amp), 1);
  const double r = lc.guarded_log_ratio(w, a, targets[3], 1, Precision::amp, std::log(on_a_1 / roof_a_1));
  const srift::ComputeModel t3 = lc.predict_anchored(w, a, on_a, targets[3], Precision::amp, 300).model;
  EXPECT_NEAR(total_at(t3, 1) / (on_a_1 * std::exp(r)), 1.0, 0.05);  // the line's fit residual at batch 1
  const std::vector<double> alone = run_all();
  std::vector<double> first, second;
  std::thread t1([&] { first = run_all(); });
  std::thread t2([&] { second = run_all(); });
  t1.join();
  t2.join();
  EXPECT_EQ(first, alone);
  EXPECT_EQ(second, alone);
}

TEST(LearnedComputeFeatures, RelativeFitHoldsAtAnyMagnitude) {
  // The normal equations square 1/t: times near 1e300 underflowed them to 0 and a fixed time
  // of +inf came back; near 1e-300 a line through the origin replaced the exact fit.
  const std::vector<double> b = {1, 2};
  for (double scale : {1e300, 1.0, 1e-300}) {
    const auto [fixed, slope] = srift::affine_relative_fit(b, {1.0 * scale, 1.5 * scale}, 1e-3 * scale);
    EXPECT_NEAR(fixed / scale, 0.5, 1e-12) << scale;
    EXPECT_NEAR(slope / scale, 0.5, 1e-12) << scale;
  }
  // The fit is scaled by powers of two: the same bits as the points scaled by hand.
  const std::vector<double> batches = {1, 3, 17, 64}, t = {0.013, 0.021, 0.09, 0.31};
  for (int e : {-900, -40, 0, 40, 900}) {
    std::vector<double> scaled_t, scaled_b;
    for (double v : t) scaled_t.push_back(std::ldexp(v, e));
    for (double v : batches) scaled_b.push_back(std::ldexp(v, e / 3));
    const auto [f, s] = srift::affine_relative_fit(batches, t, 1e-4);
    const auto [fs, ss] = srift::affine_relative_fit(scaled_b, scaled_t, std::ldexp(1e-4, e - e / 3));
    EXPECT_EQ(fs, std::ldexp(f, e)) << e;
    EXPECT_EQ(ss, std::ldexp(s, e - e / 3)) << e;
  }
  // past what a double holds: refused, not inf
  EXPECT_THROW(srift::affine_relative_fit(b, {1e-300, 1e300}), std::invalid_argument);
  EXPECT_THROW(srift::affine_relative_fit({1e-300, 2e-300}, {1e300, 1.5e300}), std::invalid_argument);
}

TEST(WorkloadStats, FeaturesRefuseWhatTheyCannotCompute) {
  // A GPU with no memory bandwidth gave a NaN share (0 x inf); a NaN batch a NaN log_work.
  const srift::WorkloadStats w = two_layers();
  GpuSpec g = gpu("g", 10, 0, 500);
  g.memory_bandwidth = 0;
  try {
    w.membound_share(g, Precision::fp32);
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("gpu 'g'.memory_bandwidth must be finite and >= 1, got 0"), std::string::npos)
        << e.what();
  }
  // a denormal peak passed "> 0": 0 x inf again (and inf roofline times in the features)
  g.memory_bandwidth = 5e-324;
  EXPECT_THROW(w.membound_share(g, Precision::fp32), std::invalid_argument);
  g = gpu("g", 10, 0, 500);
  g.tf32_flops = 5e-324;
  try {
    srift::absolute_features(w, g, 8, Precision::tf32);
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("gpu 'g'.tf32_flops must be 0 (none) or finite and >= 1, got 4.9"),
              std::string::npos)
        << e.what();
  }
  g = gpu("g", 10, 0, 500);
  EXPECT_THROW(w.membound_share(g, static_cast<Precision>(7)), std::invalid_argument);
  // FLOPs past what the slowest valid peak turns into finite seconds: refused, not NaN
  const srift::WorkloadStats heavy({LayerCost{OpKind::matmul, 1.5e308, 0, 0, 0}}, 0.0);  // / 0.6 FLOP/s: inf s
  g.fp32_flops = 1;
  EXPECT_THROW(heavy.membound_share(g, Precision::fp32), std::invalid_argument);
  for (double bad : {std::nan(""), -1.0, std::numeric_limits<double>::infinity()}) {
    try {
      w.log_work(bad);
      ADD_FAILURE() << "no throw for " << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind("batch must be finite and >= 0", 0), 0u) << e.what();
    }
  }
  EXPECT_EQ(w.log_work(0.0), 0.0);
}

TEST(WorkloadStats, LayerSumsPastADoubleAreRefused) {
  // each layer finite, their sum not: the shares were inf / inf
  const LayerCost big{OpKind::matmul, 1e308, 1e308, 0, 0};
  EXPECT_THROW(srift::WorkloadStats({big, big}, 0.0), std::invalid_argument);
  // and the roofline of one such layer on a GPU of 1 FLOP/s
  EXPECT_THROW(srift::roofline_compute({big}, gpu("g", 1e-12, 0, 500), Precision::fp32, 0.0), std::invalid_argument);
}

TEST(LearnedCompute, AGpuPastTheDataEdgeCarriesANewGenerationsLeanAndBand) {
  // Note "data edge": zero corrections (the roofline ratio), an in-range band and the forward
  // split's quantiles; a GPU launched after edge_year is moved by exp(p50) and banded.
  const srift::WorkloadStats w = two_layers();
  GpuSpec old_gpu = gpu("old", 15.7, 125, 900), new_gpu = gpu("new", 31.2, 250, 1600), unknown = new_gpu;
  old_gpu.launch_year = 2020;
  new_gpu.launch_year = 2025;
  unknown.name = "unknown";  // launch_year 0: taken as inside the data
  srift::LearnedComputeConfig cfg;
  cfg.anchored_p10 = -0.2;
  cfg.anchored_p90 = 0.25;
  cfg.absolute_p10 = -0.3;
  cfg.absolute_p90 = 0.26;
  cfg.edge_year = 2024;
  cfg.edge_anchored_p10 = -0.05, cfg.edge_anchored_p50 = 0.15, cfg.edge_anchored_p90 = 0.5;  // spread -0.2, +0.35
  cfg.edge_absolute_p10 = 0.0, cfg.edge_absolute_p50 = 0.1, cfg.edge_absolute_p90 = 0.2;     // spread -0.1, +0.1
  const srift::LearnedCompute lc(constant_model(32, 0.0), constant_model(9, 0.0), cfg);
  srift::LearnedComputeConfig inside_cfg = cfg;
  inside_cfg.edge_year = 0;  // no data_edge recorded: nothing is past it
  const srift::LearnedCompute plain(constant_model(32, 0.0), constant_model(9, 0.0), inside_cfg);
  const std::vector<srift::Measurement> meas = {{32, 0.14}};

  // no measurement: x exp(0.1), band the wider of (-0.3, 0.26) and (-0.1, 0.1)
  const srift::LearnedComputeResult past = lc.predict_absolute(w, new_gpu, Precision::amp, 0);
  const srift::LearnedComputeResult base = plain.predict_absolute(w, new_gpu, Precision::amp, 0);
  EXPECT_TRUE(past.past_data_edge);
  EXPECT_FALSE(base.past_data_edge);
  for (double b : {1.0, 64.0, 1024.0}) EXPECT_NEAR(total_at(past.model, b), std::exp(0.1) * total_at(base.model, b), 1e-12 * total_at(past.model, b));
  EXPECT_DOUBLE_EQ(past.p10_factor, std::exp(-0.3));
  EXPECT_DOUBLE_EQ(past.p90_factor, std::exp(0.26));
  // a GPU with no launch year, or one inside the data, is not moved
  EXPECT_FALSE(lc.predict_absolute(w, unknown, Precision::amp, 0).past_data_edge);
  EXPECT_FALSE(lc.predict_absolute(w, old_gpu, Precision::amp, 0).past_data_edge);

  // anchored on an older GPU: x exp(0.15), band (min(-0.2, -0.2), max(0.25, 0.35))
  const srift::LearnedComputeResult up = lc.predict_anchored(w, old_gpu, meas, new_gpu, Precision::amp);
  const srift::LearnedComputeResult up0 = plain.predict_anchored(w, old_gpu, meas, new_gpu, Precision::amp);
  EXPECT_TRUE(up.past_data_edge);
  for (double b : {8.0, 32.0, 256.0}) EXPECT_NEAR(total_at(up.model, b), std::exp(0.15) * total_at(up0.model, b), 1e-9 * total_at(up.model, b));
  EXPECT_DOUBLE_EQ(up.p10_factor, std::exp(-0.2));
  EXPECT_DOUBLE_EQ(up.p90_factor, std::exp(0.35));
  // anchored on the new GPU, predicting the older one: the ratio read the other way
  const srift::LearnedComputeResult down = lc.predict_anchored(w, new_gpu, meas, old_gpu, Precision::amp);
  const srift::LearnedComputeResult down0 = plain.predict_anchored(w, new_gpu, meas, old_gpu, Precision::amp);
  EXPECT_TRUE(down.past_data_edge);
  for (double b : {8.0, 32.0, 256.0}) {
    EXPECT_NEAR(total_at(down.model, b), std::exp(-0.15) * total_at(down0.model, b), 1e-9 * total_at(down.model, b));
  }
  EXPECT_DOUBLE_EQ(down.p10_factor, std::exp(-0.35));
  EXPECT_DOUBLE_EQ(down.p90_factor, std::exp(0.25));
  // both past the edge: the leans cancel, the band is wide enough for either direction
  GpuSpec newer = new_gpu;
  newer.name = "newer";
  newer.fp16_flops *= 1.5;
  const srift::LearnedComputeResult both = lc.predict_anchored(w, new_gpu, meas, newer, Precision::amp);
  const srift::LearnedComputeResult both0 = plain.predict_anchored(w, new_gpu, meas, newer, Precision::amp);
  EXPECT_TRUE(both.past_data_edge);
  EXPECT_NEAR(total_at(both.model, 32), total_at(both0.model, 32), 1e-12 * total_at(both.model, 32));
  EXPECT_DOUBLE_EQ(both.p10_factor, std::exp(-0.35));
  EXPECT_DOUBLE_EQ(both.p90_factor, std::exp(0.35));
  // several anchors: the band of the one past the edge (an anchor with the target's own specs
  // would be used alone: note "same specs")
  GpuSpec unknown_other = unknown;
  unknown_other.fp16_flops *= 1.2;
  const srift::LearnedComputeResult mixed = lc.predict_anchored(
      w, {srift::Anchor{unknown_other, meas}, srift::Anchor{old_gpu, meas}}, new_gpu, Precision::amp, 0);
  EXPECT_TRUE(mixed.past_data_edge);
  EXPECT_DOUBLE_EQ(mixed.p90_factor, std::exp(0.35));

  // refused: quantiles out of order, a year out of range, a GPU's year out of range
  srift::LearnedComputeConfig bad = cfg;
  bad.edge_anchored_p10 = 0.2;
  try {
    bad.validate();
    FAIL() << "p10 above p50 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("edge_anchored_p10"), std::string::npos) << e.what();
  }
  bad = cfg;
  bad.edge_year = 1850;
  EXPECT_THROW(bad.validate(), std::invalid_argument);
  GpuSpec future = new_gpu;
  future.launch_year = 20250;
  EXPECT_THROW(future.validate(), std::invalid_argument);
}

TEST(LearnedCompute, TheLeanMovesAGpuPastTheEdgeBeforeTheDominanceClip) {
  // Note "data edge": a GPU past the edge beats `ref` on every spec by a few percent; a lean of
  // e^0.5 would put it far behind, and the clip holds it at ref's prediction instead.
  const srift::WorkloadStats w = two_layers();
  GpuSpec old_gpu = gpu("old", 15.7, 125, 900), new_gpu = gpu("new", 31.2, 250, 1600);
  const GpuSpec ref = gpu("ref", 30.0, 240, 1550);  // no launch year: inside the data
  old_gpu.launch_year = 2020;
  new_gpu.launch_year = 2025;
  ASSERT_TRUE(srift::dominates(new_gpu, ref, Precision::amp));
  srift::LearnedComputeConfig cfg;
  cfg.edge_year = 2024;
  cfg.edge_anchored_p10 = 0.3, cfg.edge_anchored_p50 = 0.5, cfg.edge_anchored_p90 = 0.7;
  cfg.edge_absolute_p10 = 0.3, cfg.edge_absolute_p50 = 0.5, cfg.edge_absolute_p90 = 0.7;
  cfg.ratio_references = {ref};
  cfg.absolute_references = {ref};
  const srift::LearnedCompute lc(constant_model(32, 0.0), constant_model(9, 0.0), cfg);
  const double nan = std::nan("");
  // anchored: the lean is in the ratio, and the clip takes ref's ratio (zero models: roofline's)
  const double to_ref = lc.anchored_log_ratio(w, old_gpu, ref, 32, Precision::amp, nan);
  EXPECT_NEAR(lc.anchored_log_ratio(w, old_gpu, new_gpu, 32, Precision::amp, nan) + 0.5 - to_ref, 0.5, 0.1);
  EXPECT_DOUBLE_EQ(lc.guarded_log_ratio(w, old_gpu, new_gpu, 32, Precision::amp, nan), to_ref);
  // no clip binding (a reference it does not beat): the whole lean
  srift::LearnedComputeConfig unclipped = cfg;
  unclipped.ratio_references = {gpu("other", 40.0, 100, 500)};
  const srift::LearnedCompute free_lc(constant_model(32, 0.0), constant_model(9, 0.0), unclipped);
  EXPECT_DOUBLE_EQ(free_lc.guarded_log_ratio(w, old_gpu, new_gpu, 32, Precision::amp, nan),
                   free_lc.anchored_log_ratio(w, old_gpu, new_gpu, 32, Precision::amp, nan) + 0.5);
  // anchored from the new GPU, ref is predicted without the anchor's lean read back onto it
  // twice: the mirrored lean, then the clip against the measurement (ref is beaten: no faster)
  EXPECT_DOUBLE_EQ(lc.guarded_log_ratio(w, new_gpu, ref, 32, Precision::amp, nan), 0.0);
  // no measurement: the corrected time of the new GPU is ref's
  const std::vector<double> batches = {1, 64};
  const std::vector<double> c = lc.absolute_corrections(w, new_gpu, batches, Precision::amp);
  for (std::size_t i = 0; i < batches.size(); ++i) {
    EXPECT_NEAR(std::log(srift::roofline_per_sample_s(w, new_gpu, Precision::amp, batches[i])) + c[i],
                std::log(srift::roofline_per_sample_s(w, ref, Precision::amp, batches[i])), 1e-12);
  }
  const srift::LearnedComputeResult r = lc.predict_absolute(w, new_gpu, Precision::amp, 0);
  EXPECT_TRUE(r.past_data_edge);  // and banded as past the edge
  EXPECT_DOUBLE_EQ(r.p90_factor, std::exp(0.2));
}

TEST(LearnedCompute, AGpuPastTheEdgeWithATrainingGpusSpecsIsInsideTheData) {
  // Note "data edge": `twin` is launched after the edge with the specs of `ref`, a GPU the models
  // learned from (a dominance reference), and more memory; `odd` is launched after the edge with
  // specs no reference has (neither beating `ref` on every spec nor beaten: no clip). A ratio
  // model with a slope in the peak ratio, blended and shrunk, so that anchored paths read the GPUs.
  const srift::WorkloadStats w = two_layers();
  GpuSpec old_gpu = gpu("old", 15.7, 125, 900), ref = gpu("ref", 31.2, 250, 1600), odd = gpu("odd", 25, 300, 1700);
  old_gpu.launch_year = 2020;
  ref.launch_year = 2024;
  GpuSpec twin = ref;
  twin.name = "twin";
  twin.memory_bytes *= 1.5;
  twin.launch_year = odd.launch_year = 2025;
  srift::LearnedComputeConfig cfg;
  cfg.blend = true;
  cfg.blend_weight = 0.5;
  cfg.shrink = 0.2;
  cfg.anchored_p10 = -0.2, cfg.anchored_p90 = 0.25;
  cfg.absolute_p10 = -0.3, cfg.absolute_p90 = 0.26;
  cfg.edge_year = 2024;
  cfg.edge_anchored_p10 = -0.05, cfg.edge_anchored_p50 = 0.15, cfg.edge_anchored_p90 = 0.5;
  cfg.edge_absolute_p10 = 0.0, cfg.edge_absolute_p50 = 0.1, cfg.edge_absolute_p90 = 0.2;
  GpuSpec in_docs = ref;  // as a document's reference_specs give it: no launch year
  in_docs.launch_year = 0;
  cfg.ratio_references = {in_docs};
  cfg.absolute_references = {in_docs};
  const srift::LearnedCompute lc(constant_model(32, 0.05, 1, 0.1), constant_model(9, 0.05), cfg);
  const std::vector<srift::Measurement> meas = {{32, 0.14}};
  for (Precision p : {Precision::fp32, Precision::tf32, Precision::amp}) {
    // no measurement: the reference's own prediction, inside the data's band
    for (double max_batch : {0.0, 5000.0}) {
      const srift::LearnedComputeResult t = lc.predict_absolute(w, twin, p, max_batch);
      const srift::LearnedComputeResult r = lc.predict_absolute(w, ref, p, max_batch);
      EXPECT_FALSE(t.past_data_edge);
      for (double b : {1.0, 32.0, 1024.0}) EXPECT_DOUBLE_EQ(total_at(t.model, b), total_at(r.model, b)) << b;
      EXPECT_DOUBLE_EQ(t.p10_factor, std::exp(-0.3));
      EXPECT_DOUBLE_EQ(t.p90_factor, std::exp(0.26));
    }
    // anchored on an older GPU, and measured on the twin predicting the older GPU: as the
    // reference's (no lean read either way)
    const srift::LearnedComputeResult up = lc.predict_anchored(w, old_gpu, meas, twin, p);
    const srift::LearnedComputeResult up_ref = lc.predict_anchored(w, old_gpu, meas, ref, p);
    EXPECT_FALSE(up.past_data_edge);
    const srift::LearnedComputeResult down = lc.predict_anchored(w, twin, meas, old_gpu, p);
    const srift::LearnedComputeResult down_ref = lc.predict_anchored(w, ref, meas, old_gpu, p);
    EXPECT_FALSE(down.past_data_edge);
    for (double b : {1.0, 32.0, 1024.0}) {
      EXPECT_DOUBLE_EQ(total_at(up.model, b), total_at(up_ref.model, b)) << b;
      EXPECT_DOUBLE_EQ(total_at(down.model, b), total_at(down_ref.model, b)) << b;
    }
    EXPECT_DOUBLE_EQ(up.p10_factor, std::exp(-0.2));
    EXPECT_DOUBLE_EQ(up.p90_factor, std::exp(0.25));
    EXPECT_DOUBLE_EQ(down.p90_factor, std::exp(0.25));
    // measured on the reference: the twin is that run's curve (note "same specs")
    EXPECT_FALSE(lc.predict_anchored(w, ref, meas, twin, p).past_data_edge);
    // a GPU past the edge with specs of its own still leans: x exp(0.1) with no measurement
    srift::LearnedComputeConfig no_edge = cfg;
    no_edge.edge_year = 0;
    const srift::LearnedCompute plain(constant_model(32, 0.05, 1, 0.1), constant_model(9, 0.05), no_edge);
    const srift::LearnedComputeResult o = lc.predict_absolute(w, odd, p, 0);
    EXPECT_TRUE(o.past_data_edge);
    EXPECT_NEAR(total_at(o.model, 1024), std::exp(0.1) * total_at(plain.predict_absolute(w, odd, p, 0).model, 1024),
                1e-9 * total_at(o.model, 1024));
    EXPECT_TRUE(lc.predict_anchored(w, old_gpu, meas, odd, p).past_data_edge);
  }
  // the specs are the precision's: a twin whose FP16 peak differs is the reference's at TF32
  // (the models read no FP16 peak there) and past the edge at AMP
  GpuSpec half_twin = twin;
  half_twin.fp16_flops *= 1.3;
  EXPECT_FALSE(lc.predict_absolute(w, half_twin, Precision::tf32, 0).past_data_edge);
  EXPECT_TRUE(lc.predict_absolute(w, half_twin, Precision::amp, 0).past_data_edge);
}

TEST(LearnedCompute, TheShippedModelsPredictB300AsB200AndStillLeanTheRtxPro6000) {
  // Note "data edge", as shipped: the catalog's B300 (2025) has exactly the B200's specs
  // (srift/data/gpu_specs.csv) and more memory; B200 (2024) is a training GPU, listed with its
  // specs in both documents' dominance references. The RTX PRO 6000 (2025) has specs of its own.
  const srift::LearnedCompute lc = shipped_compute();
  const auto reference = [&](const std::string& name) {
    for (const GpuSpec& g : lc.config().absolute_references) {
      if (g.name == name) return g;
    }
    throw std::logic_error(name + " is not a shipped reference");
  };
  GpuSpec b200 = reference("B200"), h100 = reference("H100-80GB");
  b200.launch_year = 2024;
  h100.launch_year = 2022;
  GpuSpec b300 = b200;
  b300.name = "B300";
  b300.memory_bytes = 275040.0 * (1 << 20);
  b300.launch_year = 2025;
  GpuSpec t4 = gpu("T4", 8.1, 65, 320), pro = GpuSpec{"RTX-PRO-6000", 98304.0 * (1 << 20), 120e12, 240e12, 480e12, 1597e9};
  t4.launch_year = 2018;
  pro.launch_year = 2025;
  ASSERT_GT(2025, lc.config().edge_year);
  const srift::WorkloadStats w = two_layers();
  for (Precision p : {Precision::fp32, Precision::tf32, Precision::amp}) {
    const srift::LearnedComputeResult a300 = lc.predict_absolute(w, b300, p, 0), a200 = lc.predict_absolute(w, b200, p, 0);
    EXPECT_FALSE(a300.past_data_edge);
    EXPECT_DOUBLE_EQ(a300.p90_factor, a200.p90_factor);
    for (double b : {1.0, 32.0, 1024.0}) EXPECT_DOUBLE_EQ(total_at(a300.model, b), total_at(a200.model, b)) << b;
    for (const GpuSpec& anchor : {t4, h100}) {
      const std::vector<srift::Measurement> run = {{32, total_at(lc.predict_absolute(w, anchor, p, 0).model, 32)}};
      const srift::LearnedComputeResult r300 = lc.predict_anchored(w, anchor, run, b300, p);
      const srift::LearnedComputeResult r200 = lc.predict_anchored(w, anchor, run, b200, p);
      EXPECT_FALSE(r300.past_data_edge) << anchor.name;
      EXPECT_DOUBLE_EQ(r300.p90_factor, r200.p90_factor);
      // and a run on the B300 predicts the older GPU as the same run on a B200 does
      const srift::ComputeModel back300 = lc.predict_anchored(w, b300, run, anchor, p).model;
      const srift::ComputeModel back200 = lc.predict_anchored(w, b200, run, anchor, p).model;
      for (double b : {8.0, 32.0, 128.0}) {
        EXPECT_DOUBLE_EQ(total_at(r300.model, b), total_at(r200.model, b)) << anchor.name << " " << b;
        EXPECT_DOUBLE_EQ(total_at(back300, b), total_at(back200, b)) << anchor.name << " " << b;
      }
    }
    EXPECT_TRUE(lc.predict_absolute(w, pro, p, 0).past_data_edge);
    EXPECT_TRUE(lc.predict_anchored(w, t4, {{32, 0.1}}, pro, p).past_data_edge);
  }
}

TEST(LearnedCompute, DataEdgeFromTheDocuments) {
  const auto doc = zero_model_doc;
  const std::string edge_r = R"(,"data_edge":{"launch_year":2024,"p10":-0.05,"p50":0.15,"p90":0.35})";
  const std::string edge_a = R"(,"data_edge":{"launch_year":2024,"p10":-0.1,"p50":0.14,"p90":0.36})";
  const srift::LearnedComputeConfig cfg = srift::learned_compute_config(doc(edge_r, 32), doc(edge_a, 9));
  EXPECT_EQ(cfg.edge_year, 2024);
  EXPECT_DOUBLE_EQ(cfg.edge_anchored_p50, 0.15);
  EXPECT_DOUBLE_EQ(cfg.edge_absolute_p10, -0.1);
  EXPECT_DOUBLE_EQ(cfg.edge_absolute_p90, 0.36);
  EXPECT_EQ(srift::learned_compute_config(doc("", 32), doc("", 9)).edge_year, 0);  // none recorded
  // one document only, or two different years: refused, naming the field
  for (const auto& [r, a] : {std::make_pair(doc(edge_r, 32), doc("", 9)),
                             std::make_pair(doc(edge_r, 32), doc(R"(,"data_edge":{"launch_year":2023,"p10":0,"p50":0,"p90":0})", 9))}) {
    try {
      srift::learned_compute_config(r, a);
      FAIL() << "mismatched data_edge accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("data_edge.launch_year"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(srift::learned_compute_config(doc(R"(,"data_edge":{"launch_year":2024.5,"p10":0,"p50":0,"p90":0})", 32),
                                             doc(edge_a, 9)),
               std::invalid_argument);
  EXPECT_THROW(srift::learned_compute_config(doc(R"(,"data_edge":{"launch_year":2024,"p10":0.3,"p50":0,"p90":0.4})", 32),
                                             doc(edge_a, 9)),
               std::invalid_argument);
}

namespace {
// What `f` throws as std::invalid_argument ("" when it returns).
template <typename F>
std::string thrown(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

std::string swapped(std::string doc, const std::string& a, const std::string& b) {
  const std::size_t i = doc.find("\"" + a + "\""), j = doc.find("\"" + b + "\"");
  if (i == std::string::npos || j == std::string::npos || i > j) throw std::logic_error("no '" + a + "' before '" + b + "'");
  doc.replace(j, b.size() + 2, "\"" + a + "\"");
  doc.replace(i, a.size() + 2, "\"" + b + "\"");
  return doc;
}
}  // namespace

TEST(LearnedCompute, FeatureNamesAreTheOnesTheCoreComputesInOrder) {
  // Note "feature names": a document whose features were reordered or renamed was evaluated
  // with each value in the slot the core computes it for, whatever the document said.
  const srift::WorkloadStats w = two_layers();
  const GpuSpec a = gpu("a", 10, 50, 400), b = gpu("b", 20, 100, 800);
  ASSERT_EQ(srift::ratio_feature_names().size(), srift::ratio_features(w, a, 8, b, 16, Precision::amp).size());
  ASSERT_EQ(srift::absolute_feature_names().size(), srift::absolute_features(w, a, 8, Precision::amp).size());
  EXPECT_EQ(srift::ratio_feature_names()[3], "log_bw_ratio");
  EXPECT_EQ(srift::ratio_feature_names()[18], "share_matmul_x_log_peak_ratio");
  EXPECT_EQ(srift::ratio_feature_names().back(), "prec_tf32_x_log_bw_ratio");
  EXPECT_EQ(srift::absolute_feature_names()[0], "log_roof");

  const std::string ratio = zero_model_doc("", 32), absolute = zero_model_doc("", 9);
  EXPECT_NO_THROW(srift::LearnedCompute::from_documents(ratio, absolute));
  // two features swapped: same count, other order
  std::string what = thrown([&] {
    srift::LearnedCompute::from_documents(swapped(ratio, "log_bw_ratio", "log_batch_ratio"), absolute);
  });
  EXPECT_NE(what.find("compute_ratio.features[3]: expected 'log_bw_ratio', got 'log_batch_ratio'"), std::string::npos)
      << what;
  // one renamed
  std::string renamed = absolute;
  renamed.replace(renamed.find("\"membound\""), 10, "\"memory_bound\"");
  what = thrown([&] { srift::LearnedCompute::from_documents(ratio, renamed); });
  EXPECT_NE(what.find("compute_absolute.features[5]: expected 'membound', got 'memory_bound'"), std::string::npos)
      << what;
  // the constructor checks the same (a C++ embedder may build the models itself)
  what = thrown([&] {
    srift::LearnedCompute(srift::LearnedModel::from_json(ratio), srift::LearnedModel::from_json(renamed),
                          srift::LearnedComputeConfig{});
  });
  EXPECT_NE(what.find("compute_absolute.features[5]"), std::string::npos) << what;
  // names of another model entirely
  std::string other = R"({"schema":"srift.learned-model/1","name":"m","features":["x0")";
  for (int i = 1; i < 9; ++i) other += ",\"x" + std::to_string(i) + "\"";
  other += R"(],"model":{"type":"linear","coef":[0,0,0,0,0,0,0,0,0],"intercept":0}})";
  what = thrown([&] {
    srift::LearnedCompute(constant_model(32, 0), srift::LearnedModel::from_json(other), srift::LearnedComputeConfig{});
  });
  EXPECT_NE(what.find("compute_absolute.features[0]: expected 'log_roof', got 'x0'"), std::string::npos) << what;
}

TEST(LearnedCompute, UnknownKeysInTheComputeDocumentsAreRefused) {
  // A misspelled optional field ("dominance_gaurd") was skipped: no guard, no error.
  const auto doc = zero_model_doc;
  const std::string spec = R"({"fp32_flops":8.1e12,"tf32_flops":0,"fp16_flops":65e12,"memory_bandwidth":320e9,)"
                           R"("memory_bytes":17179869184})";
  const std::string guard = R"("dominance_guard":{"references":["T4"],"reference_specs":{"T4":)" + spec + "}}";
  const std::string blend = R"(,"absolute_blend":{"weight":0.4,"absolute_model":"compute_absolute",)"
                            R"("residuals":{"p10":-0.3,"p90":0.35},)" + guard + "}";
  const std::string band = R"(,"measured_band":{"noise":{"p10":0.98,"p90":1.07,"n":88,"data":"d"},)"
                           R"("per_e_fold":{"p10":0.67,"p90":1.49,"n":{"gavel":3},"coverage_from_other_source":{}}})";
  const std::string edge = R"(,"data_edge":{"launch_year":2024,"p10":-0.1,"p50":0.1,"p90":0.3,"n":9,"years":{}})";
  const std::string ratio = doc(blend + edge, 32), absolute = doc("," + guard + band + edge, 9);
  ASSERT_NO_THROW(srift::LearnedCompute::from_documents(ratio, absolute));
  struct Case {
    std::string ratio, absolute, what;
  };
  auto typo = [](const std::string& s, const std::string& from, const std::string& to) {
    std::string out = s;
    const std::size_t at = out.find(from);
    if (at == std::string::npos) throw std::logic_error("no '" + from + "'");
    return out.replace(at, from.size(), to);
  };
  const std::vector<Case> cases = {
      {ratio, typo(absolute, "\"dominance_guard\"", "\"dominance_gaurd\""),
       "compute_absolute.dominance_gaurd is not a known field of a document named 'compute_absolute' (did you mean "
       "'dominance_guard'?)"},
      {typo(ratio, "\"dominance_guard\"", "\"dominance_gaurd\""), absolute,
       "compute_ratio.absolute_blend.dominance_gaurd is not a known field (did you mean 'dominance_guard'?)"},
      {typo(ratio, "\"weight\"", "\"weight\":0.4,\"shrinkage\""), absolute,
       "compute_ratio.absolute_blend.shrinkage is not a known field"},
      {ratio, typo(absolute, "\"fp16_flops\"", "\"fp16_flop\":0,\"fp16_flops\""),
       "compute_absolute.dominance_guard.reference_specs.T4.fp16_flop is not a known field (did you mean "
       "'fp16_flops'?)"},
      {ratio, typo(absolute, "\"references\"", "\"reference\":[],\"references\""),
       "compute_absolute.dominance_guard.reference is not a known field"},
      {ratio, typo(absolute, "\"per_e_fold\"", "\"per_efold\":{},\"per_e_fold\""),
       "compute_absolute.measured_band.per_efold is not a known field (did you mean 'per_e_fold'?)"},
      {ratio, typo(absolute, "\"n\":88", "\"n\":88,\"p50\":1"), "compute_absolute.measured_band.noise.p50 is not a known field"},
      {typo(ratio, "\"launch_year\"", "\"launch\":1,\"launch_year\""), absolute,
       "compute_ratio.data_edge.launch is not a known field"},
      {typo(ratio, "\"residuals\":{\"p10\":-0.3", "\"residuals\":{\"p_10\":0,\"p10\":-0.3"), absolute,
       "compute_ratio.absolute_blend.residuals.p_10 is not a known field (did you mean 'p10'?)"},
      {doc(R"(,"roofline_residuals":{"p10":-0.5,"p90":0.6,"P50":0})", 32), doc("", 9),
       "compute_ratio.roofline_residuals.P50 is not a known field (did you mean 'p50'?)"},
  };
  for (const Case& c : cases) {
    const std::string what = thrown([&] { srift::learned_compute_config(c.ratio, c.absolute); });
    EXPECT_NE(what.find("learned model: " + c.what), std::string::npos) << what;
    EXPECT_THROW(srift::LearnedCompute::from_documents(c.ratio, c.absolute), std::invalid_argument);
  }
  // at the top level, naming the document
  std::string what =
      thrown([&] { srift::LearnedCompute::from_documents(ratio, typo(absolute, "\"residuals\"", "\"residual\"")); });
  EXPECT_NE(what.find("learned model: compute_absolute.residual is not a known field of a document named "
                      "'compute_absolute' (did you mean 'residuals'?)"),
            std::string::npos)
      << what;
  // in the model, which learned_compute_config does not read: LearnedModel::from_json's path,
  // prefixed with the document's name
  what = thrown([&] {
    srift::LearnedCompute::from_documents(typo(ratio, "\"intercept\"", "\"intercept\":0,\"intercep\""), absolute);
  });
  EXPECT_NE(what.find("compute_ratio: learned model: $.model.intercep is not a known field (did you mean "
                      "'intercept'?)"),
            std::string::npos)
      << what;
}

TEST(LearnedCompute, RunsAtAnotherPrecisionAreRefusedAndTheirOwnAnswerAsUnset) {
  // compute.hpp note "measurement precision": a set precision that is not the predicted one is
  // named (a silent wrong answer otherwise); the predicted one, or unset, predicts alike
  const srift::WorkloadStats w = two_layers();
  GpuSpec a = gpu("a", 15.7, 125, 900), b = gpu("b", 31.2, 125, 600);
  b.tf32_flops = 62e12;  // PyTorch's FP32 on a TF32 target: the restated route (note "fp32 via tf32")
  const srift::LearnedCompute lc(constant_model(32, 0.1), constant_model(9, 0.0), srift::LearnedComputeConfig{});
  const srift::ComputeModel roof = w.roofline(a, Precision::fp32);
  auto expect_refused = [](auto&& call, const std::string& field, const char* run, const char* predicted) {
    try {
      call();
      FAIL() << "no throw for " << field;
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind(field + ": the run was timed at " + run + ", the prediction is at " + predicted, 0), 0u)
          << what;
    }
  };
  for (const Precision p : {Precision::fp32, Precision::tf32, Precision::amp}) {
    const std::vector<srift::Measurement> unset = {{8, 0.05}, {32, 0.14}, {64, 0.26}};
    std::vector<srift::Measurement> set = unset;
    for (srift::Measurement& m : set) m.precision = p;
    const srift::ComputeModel u = lc.predict_anchored(w, a, unset, b, p, 128).model;
    const srift::ComputeModel s = lc.predict_anchored(w, a, set, b, p, 128).model;
    EXPECT_EQ(u.forward_fixed_s, s.forward_fixed_s);
    EXPECT_EQ(u.forward_per_sample_s, s.forward_per_sample_s);
    EXPECT_EQ(u.backward_per_sample_s, s.backward_per_sample_s);
    EXPECT_EQ(u.optimizer_s, s.optimizer_s);
    const srift::ComputeModel mu = lc.measured_model(w, a, w.roofline(a, p), {unset[1]}, p, 0);
    const srift::ComputeModel ms = lc.measured_model(w, a, w.roofline(a, p), {set[1]}, p, 0);
    EXPECT_EQ(mu.backward_per_sample_s, ms.backward_per_sample_s);
    const srift::ComputeModel su = lc.predict_anchored(w, {srift::Anchor{a, unset}, srift::Anchor{b, {{16, 0.03}}}},
                                                       gpu("t", 20, 100, 700), p, 0).model;
    const srift::ComputeModel ss = lc.predict_anchored(w, {srift::Anchor{a, set}, srift::Anchor{b, {{16, 0.03}}}},
                                                       gpu("t", 20, 100, 700), p, 0).model;
    EXPECT_EQ(su.forward_per_sample_s, ss.forward_per_sample_s);
  }
  std::vector<srift::Measurement> mixed = {{8, 0.05}, {32, 0.14, -1, -1, Precision::amp}, {64, 0.26}};
  mixed[2].precision = Precision::fp32;
  expect_refused([&] { lc.predict_anchored(w, a, mixed, b, Precision::amp); }, "measurements[2].precision", "fp32",
                 "amp");
  expect_refused([&] { lc.measured_model(w, a, roof, mixed, Precision::fp32, 0); }, "measurements[1].precision", "amp",
                 "fp32");
  expect_refused([&] { lc.predict_anchored(w, {srift::Anchor{b, {{16, 0.03}}}, srift::Anchor{a, mixed}}, b,
                                           Precision::tf32, 0); },
                 "anchors[1].measurements[1].precision", "amp", "tf32");
  // the caller's filter keeps what the prediction reads
  EXPECT_NO_THROW(lc.predict_anchored(w, a, srift::measurements_at(mixed, Precision::amp), b, Precision::amp));
  // a precision that is no Precision value is refused as such
  mixed[0].precision = static_cast<Precision>(7);
  EXPECT_THROW(lc.predict_anchored(w, a, mixed, b, Precision::fp32), std::invalid_argument);
}

namespace {
std::string shipped_doc(const std::string& name) { return srift_test::shipped_document(name); }

// `doc` with `from` (which must occur once) replaced by `to`; "" : `to` at the top level.
std::string edited(const std::string& doc, const std::string& from, const std::string& to) {
  return srift_test::edited_once(doc, from, to);
}
}  // namespace

TEST(LearnedCompute, TheShippedDocumentsLoadAndAnUnknownKeyAnywhereInThemIsRefused) {
  const std::string ratio = shipped_doc("compute_ratio"), absolute = shipped_doc("compute_absolute");
  const srift::LearnedComputeConfig cfg = srift::learned_compute_config(ratio, absolute);
  EXPECT_TRUE(cfg.blend);
  EXPECT_EQ(cfg.ratio_references.size(), cfg.absolute_references.size());
  EXPECT_GT(cfg.edge_year, 0);
  ASSERT_NO_THROW(srift::LearnedCompute::from_documents(ratio, absolute));
  // learned_compute_config checks each whole document (its role is its kind), the parts it does
  // not read included: a C++ embedder gets no silent typo there
  const std::string key = "\"zz_unknown\":1,";
  struct Case {
    bool in_ratio;
    std::string from, to, what;
  };
  const std::vector<Case> cases = {
      {false, "\"within_lab\":{", "\"within_lab\":{" + key, "compute_absolute.residuals.within_lab.zz_unknown is not a known field"},
      {false, "\"lab_shifts\":{\"gavel\":{", "\"lab_shifts\":{\"gavel\":{" + key,
       "compute_absolute.residuals.lab_shifts.gavel.zz_unknown is not a known field"},
      {false, "\"years\":{\"2021\":{", "\"years\":{\"2021\":{" + key,
       "compute_absolute.data_edge.years.2021.zz_unknown is not a known field"},
      {true, "\"years\":{\"2021\":{", "\"years\":{\"2021\":{" + key,
       "compute_ratio.data_edge.years.2021.zz_unknown is not a known field"},
      {true, "\"roofline_residuals\":{", "\"roofline_residuals\":{" + key,
       "compute_ratio.roofline_residuals.zz_unknown is not a known field"},
      {true, "", "\"measured_band\":{},",
       "compute_ratio.measured_band is not a known field of a document named 'compute_ratio' (a field of "
       "compute_absolute documents)"},
      {false, "", "\"absolute_blend\":{},",
       "compute_absolute.absolute_blend is not a known field of a document named 'compute_absolute' (a field of "
       "compute_ratio documents)"},
      // reference_specs holds each reference's specs and no other GPU's: an extra entry was skipped
      {false, "\"reference_specs\":{",
       "\"reference_specs\":{\"Gaudi3\":{\"fp32_flops\":1e13,\"tf32_flops\":0,\"fp16_flops\":0,"
       "\"memory_bandwidth\":1e12,\"memory_bytes\":1e10},",
       "compute_absolute.dominance_guard.reference_specs.Gaudi3 is not one of references: reference_specs holds the "
       "specs of each reference and of no other GPU; references: A10, A100-40GB, "},
      {true, "\"references\":[\"A10\",", "\"references\":[",
       "compute_ratio.absolute_blend.dominance_guard.reference_specs.A10 is not one of references"},
      {false, "\"A10\":{", "\"A1O\":{",
       "compute_absolute.dominance_guard.reference_specs.A1O is not one of references (did you mean 'A10'?)"},
      {false, "\"references\":[\"A10\",", "\"references\":[\"Gaudi3\",\"A10\",",
       "compute_absolute.dominance_guard.reference_specs.Gaudi3 is missing"},
  };
  for (const Case& c : cases) {
    const std::string r = c.in_ratio ? edited(ratio, c.from, c.to) : ratio;
    const std::string a = c.in_ratio ? absolute : edited(absolute, c.from, c.to);
    const std::string what = thrown([&] { srift::learned_compute_config(r, a); });
    EXPECT_NE(what.find("learned model: " + c.what), std::string::npos) << what;
    EXPECT_NE(thrown([&] { srift::LearnedCompute::from_documents(r, a); }).find(c.what), std::string::npos) << c.what;
    // LearnedModel::from_json, whose kind is the document's name, refuses the same key
    const std::string one = thrown([&] { srift::LearnedModel::from_json(c.in_ratio ? r : a); });
    const std::string at = c.what.substr(c.what.find('.'));
    EXPECT_NE(one.find("learned model: $" + at), std::string::npos) << one;
  }
}

namespace {

TEST(LearnedCompute, PredictionsAreNoFasterThanThePeakAllows) {
  // Note "peak floor": a ratio model that calls every target e^5 (148x) faster than its roofline
  // ratio says, and an absolute model that puts every GPU e^5 under its roofline, would run the
  // matmul past the target's FP16 peak; held, no prediction beats its FLOPs at that peak.
  const srift::WorkloadStats w = two_layers();
  const GpuSpec slow = gpu("slow", 10, 50, 400), fast = gpu("fast", 20, 100, 800);
  const double floor_fast = srift::peak_flop_seconds_per_sample(w.layers(), fast, Precision::amp);
  const double floor_slow = srift::peak_flop_seconds_per_sample(w.layers(), slow, Precision::amp);
  EXPECT_NEAR(floor_fast, 9e9 / 100e12, 1e-18);  // the matmul's 3e9 + 6e9 FLOPs at the FP16 peak
  EXPECT_NEAR(floor_slow, 9e9 / 50e12, 1e-18);
  // at FP32 without TF32 units the matmul runs at the FP32 peak; with them, PyTorch's FP32
  // keeps matmuls on CUDA cores, TF32 moves them to the tensor cores
  GpuSpec tf32 = fast;
  tf32.tf32_flops = 80e12;
  EXPECT_NEAR(srift::peak_flop_seconds_per_sample(w.layers(), tf32, Precision::fp32), 9e9 / 20e12, 1e-18);
  EXPECT_NEAR(srift::peak_flop_seconds_per_sample(w.layers(), tf32, Precision::tf32), 9e9 / 80e12, 1e-18);

  srift::LearnedComputeConfig cfg;
  cfg.ratio_references = {slow, fast};
  const srift::LearnedCompute lc(constant_model(32, -5.0), constant_model(9, -5.0), cfg);
  for (double batch : {1.0, 32.0, 1000.0}) {
    // a plausible run on the slow GPU: its roofline time
    const srift::ComputeModel roof = w.roofline(slow, Precision::amp);
    const double seconds = roof.compute_s(batch) + roof.optimizer_s;
    const std::vector<srift::Measurement> meas = {{batch, seconds}};
    const srift::ComputeModel up = lc.predict_anchored(w, slow, meas, fast, Precision::amp, 1000).model;
    for (double b : {1.0, 8.0, 64.0, 1000.0}) {
      EXPECT_GE(up.compute_s(b) + up.optimizer_s, floor_fast * b * (1 - 1e-9)) << batch << " " << b;
    }
    // a run faster than its own GPU's floor (a FLOP count above what ran) says nothing of the
    // target's: no floor, and the faster GPU stays no slower than the measurement
    const double quick = 0.5 * floor_slow * batch;
    const srift::ComputeModel fast_run =
        lc.predict_anchored(w, slow, {{batch, quick}}, fast, Precision::amp, 1000).model;
    EXPECT_LE(fast_run.compute_s(batch) + fast_run.optimizer_s, quick * (1 + 1e-9)) << batch;
    EXPECT_LT(fast_run.compute_s(1000.0), 0.5 * floor_fast * 1000.0) << batch;
  }
  const srift::ComputeModel none = lc.predict_absolute(w, fast, Precision::amp, 1000).model;
  for (double b : {1.0, 8.0, 64.0, 1000.0}) EXPECT_GE(none.compute_s(b) + none.optimizer_s, floor_fast * b * (1 - 1e-9));
  // models that keep to physics are not moved: a ratio of 0 and an absolute correction of 0
  const srift::LearnedCompute neutral(constant_model(32, 0.0), constant_model(9, 0.0), cfg);
  const srift::ComputeModel roof_fast = w.roofline(fast, Precision::amp);
  const srift::ComputeModel plain = neutral.predict_absolute(w, fast, Precision::amp, 1000).model;
  EXPECT_NEAR(plain.compute_s(64) + plain.optimizer_s, roof_fast.compute_s(64) + roof_fast.optimizer_s,
              1e-3 * (roof_fast.compute_s(64) + roof_fast.optimizer_s));
}

}  // namespace

namespace {

TEST(LearnedCompute, ThePeakFloorHoldsThroughTheOrderAtTheMeasurement) {
  // Note "peak floor" and note "order at the measurement": NCF (its layers as the zoo profiles
  // it) at TF32 measured on an A100-40GB at batch 64, 1.3x its floor. The A100-80GB has the same
  // peaks and more bandwidth, so it is no slower than the run, and its floor is the run's GPU's.
  // The line held to the floor at the grid's far end stood above the run at batch 64, and the
  // order's scaling pulled it to 0.64x its floor at batch 1024; turned about batch 64 instead, it
  // keeps both.
  const srift::WorkloadStats ncf(
      {LayerCost{OpKind::embedding, 0, 0, 264, 35454208}, LayerCost{OpKind::embedding, 0, 0, 264, 6846464},
       LayerCost{OpKind::embedding, 0, 0, 520, 70908416}, LayerCost{OpKind::embedding, 0, 0, 520, 13692928},
       LayerCost{OpKind::matmul, 131072, 262144, 2048, 263168}, LayerCost{OpKind::matmul, 65536, 131072, 1536, 131584},
       LayerCost{OpKind::matmul, 16384, 32768, 768, 33024}, LayerCost{OpKind::matmul, 256, 512, 516, 516},
       LayerCost{OpKind::other, 0, 0, 7424, 0}},
      891312252.0);
  const GpuSpec a40{"A100-40GB", 40.0 * (1ull << 30), 19.5e12, 156e12, 312e12, 1555e9, 2020};
  const GpuSpec a80{"A100-80GB", 80.0 * (1ull << 30), 19.5e12, 156e12, 312e12, 2039e9, 2020};
  const srift::LearnedCompute lc =
      srift::LearnedCompute::from_documents(shipped_doc("compute_ratio"), shipped_doc("compute_absolute"));
  const double floor = srift::peak_flop_seconds_per_sample(ncf.layers(), a80, Precision::tf32);
  ASSERT_GT(floor, 0);
  ASSERT_EQ(floor, srift::peak_flop_seconds_per_sample(ncf.layers(), a40, Precision::tf32));
  for (double measured_batch : {16.0, 64.0, 256.0}) {
    const std::vector<srift::Measurement> run = {{measured_batch, 1.3 * floor * measured_batch}};
    const srift::ComputeModel m = lc.predict_anchored(ncf, a40, run, a80, Precision::tf32, 1024).model;
    for (double b : srift::batch_grid(1024)) {
      EXPECT_GE(m.compute_s(b) + m.optimizer_s, floor * b * (1 - 1e-12)) << measured_batch << " " << b;
    }
    const srift::ComputeModel on_anchor = lc.measured_model(ncf, a40, ncf.roofline(a40, Precision::tf32), run,
                                                            Precision::tf32, 1024);
    EXPECT_LE(m.compute_s(measured_batch) + m.optimizer_s,
              (on_anchor.compute_s(measured_batch) + on_anchor.optimizer_s) * (1 + 1e-12))
        << measured_batch;
  }
}

}  // namespace

TEST(LearnedCompute, ADefaultFp32RunOnATf32AnchorHoldsAGpuWithoutTf32BetweenItsReadings) {
  // Note "fp32 via tf32, the anchor's side": a default-FP32 run on a TF32 anchor predicting a GPU
  // without TF32 is restated to all-TF32 by the roofline, then held at least at the run read as
  // the anchor's strict-FP32 time and at most at the run read as its all-TF32 time.
  const srift::WorkloadStats w = two_layers();  // a matmul: the default runs it on FP32 cores
  GpuSpec a = gpu("a", 10, 160, 900);
  a.tf32_flops = 80e12;  // the roofline's restatement: the run 3.5x faster all-TF32
  GpuSpec strict_a = a;
  strict_a.tf32_flops = 0;
  const GpuSpec b = gpu("b", 10, 65, 500);  // no TF32; `a` beats it on every spec
  const std::vector<srift::Measurement> run = {{32, 0.1}};  // its FP32 peak needs 0.029 s
  const srift::LearnedComputeConfig config{};
  const srift::ComputeModel roof_default = w.roofline(a, Precision::fp32), roof_tf32 = w.roofline(a, Precision::tf32);
  ASSERT_GT(total_at(roof_default, 32) / total_at(roof_tf32, 32), 3.0);
  std::vector<srift::Measurement> as_tf32 = run;
  as_tf32[0].iteration_s *= total_at(roof_tf32, 32) / total_at(roof_default, 32);
  // a ratio model that follows the matmul peak less than the roofline (log ratio + 0.4 x log
  // peak ratio): the restated route puts b 2.3x under the strict reading, which binds (the
  // all-TF32 reading is 1.5x over it)
  {
    const srift::LearnedCompute lc(constant_model(32, 0.0, 1, 0.4), constant_model(9, 0.0), config);
    const double got = total_at(lc.predict_anchored(w, a, run, b, Precision::fp32).model, 32);
    const double route = total_at(lc.predict_anchored(w, a, as_tf32, b, Precision::tf32).model, 32);
    const double strict = total_at(lc.predict_anchored(w, strict_a, run, b, Precision::fp32).model, 32);
    const double unrestated = total_at(lc.predict_anchored(w, a, run, b, Precision::tf32).model, 32);
    EXPECT_LT(route, strict / 2);  // before the note, the prediction: b faster than a's own run
    EXPECT_LT(route, 0.1);
    EXPECT_NEAR(got / strict, 1.0, 1e-9);
    EXPECT_GT(unrestated, 1.4 * strict);
    EXPECT_GE(got, 0.1);  // b, beaten by a on every spec, is no faster than a's run
  }
  // one that follows it more: the route lies between the readings and is the prediction
  {
    const srift::LearnedCompute lc(constant_model(32, 0.0, 1, -0.9), constant_model(9, 0.0), config);
    const srift::ComputeModel got = lc.predict_anchored(w, a, run, b, Precision::fp32).model;
    const srift::ComputeModel route = lc.predict_anchored(w, a, as_tf32, b, Precision::tf32).model;
    const double strict = total_at(lc.predict_anchored(w, strict_a, run, b, Precision::fp32).model, 32);
    ASSERT_GT(total_at(route, 32), strict);
    for (double batch : {1.0, 32.0, 1024.0}) EXPECT_NEAR(total_at(got, batch) / total_at(route, batch), 1.0, 1e-9) << batch;
  }
}

namespace {

TEST(LearnedCompute, TheMeasuredCurveIsNoFasterThanThePeakOnItsGrid) {
  // Note "measured floor": one run at batch 4 at 1.05x the GPU's peak floor (two_layers' 9
  // GFLOP at the FP16 peak: 72 us a sample) scales the learned curve, whose fixed cost is a
  // large share of it at batch 4, down by the run's ratio, and its slope with it: 0.77x the
  // floor at batch 1024. Held, the line is turned about the run, to the floor at the grid's end.
  const srift::WorkloadStats w = two_layers();
  const GpuSpec g = gpu("g", 15.7, 125, 900);
  const srift::LearnedCompute lc(constant_model(32, 0.0), constant_model(9, 0.0, 8, 2.0), srift::LearnedComputeConfig{});
  const srift::ComputeModel roof = w.roofline(g, Precision::amp);
  const double floor = srift::peak_flop_seconds_per_sample(w.layers(), g, Precision::amp);
  ASSERT_NEAR(floor, 9e9 / 125e12, 1e-18);
  const double t0 = 1.05 * floor * 4;
  const std::vector<srift::Measurement> run = {{4, t0}};
  // the premise: the learned curve scaled through the run, as before the floor, is under it
  const srift::ComputeModel learned = lc.predict_absolute(w, g, Precision::amp, 1024).model;
  const double scale = t0 / total_at(learned, 4);
  ASSERT_LT(scale * total_at(learned, 1024), 0.9 * floor * 1024);
  const srift::ComputeModel m = lc.measured_model(w, g, roof, run, Precision::amp, 1024);
  // the pivot by hand: the line through (4, t0) and (1024, floor x 1024)
  const double slope = (floor * 1024 - t0) / (1024 - 4), fixed = t0 - slope * 4;
  EXPECT_NEAR(m.per_sample_s(), slope, 1e-12 * slope);
  EXPECT_NEAR(m.fixed_s() + m.optimizer_s, fixed, 1e-12 * t0);
  EXPECT_GT(fixed, 0);
  EXPECT_NEAR(total_at(m, 4), t0, 1e-12 * t0);
  for (double b : srift::batch_grid(1024)) EXPECT_GE(total_at(m, b), floor * b * (1 - 1e-12)) << b;
  // its forward share as the roofline's, as the unheld curve's
  EXPECT_NEAR(m.forward_per_sample_s / m.per_sample_s(), roof.forward_per_sample_s / roof.per_sample_s(), 1e-12);
  // the grid reaches the measured batch (max_batch 0, unknown, ends it at 1024)
  const std::vector<srift::Measurement> big = {{4096, 1.05 * floor * 4096}};
  const srift::ComputeModel mb = lc.measured_model(w, g, roof, big, Precision::amp, 0);
  EXPECT_NEAR(total_at(mb, 4096), 1.05 * floor * 4096, 1e-12 * floor * 4096);
  for (double b : srift::batch_grid(4096)) EXPECT_GE(total_at(mb, b), floor * b * (1 - 1e-12)) << b;

  // a run that beats its own floor (the FLOP count is off): no floor, the scaled curve as before
  const std::vector<srift::Measurement> quick = {{32, 0.5 * floor * 32}};
  const srift::ComputeModel q = lc.measured_model(w, g, roof, quick, Precision::amp, 1024);
  EXPECT_NEAR(total_at(q, 1024), 0.5 * floor * 32 / total_at(learned, 32) * total_at(learned, 1024),
              1e-12 * total_at(q, 1024));
  EXPECT_LT(total_at(q, 1024), floor * 1024);
  // a run the floor does not reach is scaled as before (bit for bit: see
  // MeasuredModelTakesTheLearnedCurveFromOneBatch)
  const std::vector<srift::Measurement> slow = {{32, 100 * floor * 32}};
  const srift::ComputeModel s = lc.measured_model(w, g, roof, slow, Precision::amp, 1024);
  EXPECT_NEAR(total_at(s, 1024), 100 * floor * 32 / total_at(learned, 32) * total_at(learned, 1024),
              1e-12 * total_at(s, 1024));
}

TEST(LearnedCompute, SeveralMeasuredBatchesTurnTheirLineAboutTheirMean) {
  // Note "measured floor": two runs whose own line is shallower than the peak floor (each run
  // above it, at 3x and 1.2x) extrapolate under it past batch 64; the line is turned about the
  // runs' mean (batch 40, their mean time), where the least-squares line passes.
  const srift::WorkloadStats w = two_layers();
  const GpuSpec g = gpu("g", 15.7, 125, 900);
  const srift::LearnedCompute lc(constant_model(32, 0.0), constant_model(9, 0.0), srift::LearnedComputeConfig{});
  const srift::ComputeModel roof = w.roofline(g, Precision::amp);
  const double f = srift::peak_flop_seconds_per_sample(w.layers(), g, Precision::amp);
  const std::vector<srift::Measurement> runs = {{16, 48 * f}, {64, 76.8 * f}};
  const srift::MeasuredLine line = srift::measured_line(runs);
  ASSERT_NEAR(line.slope, 0.6 * f, 1e-12 * f);  // its own line: 38.4 f + 0.6 f b
  ASSERT_NEAR(line.intercept, 38.4 * f, 1e-12 * f);
  const srift::ComputeModel m = lc.measured_model(w, g, roof, runs, Precision::amp, 1024);
  // by hand: through (40, 62.4 f) and (1024, 1024 f)
  const double slope = (1024 - 62.4) / (1024 - 40) * f, fixed = 62.4 * f - 40 * slope;
  EXPECT_NEAR(m.per_sample_s(), slope, 1e-12 * f);
  EXPECT_NEAR(m.fixed_s() + m.optimizer_s, fixed, 1e-12 * 62.4 * f);
  EXPECT_NEAR(total_at(m, 40), 62.4 * f, 1e-12 * 62.4 * f);
  for (double b : srift::batch_grid(1024)) EXPECT_GE(total_at(m, b), f * b * (1 - 1e-12)) << b;
  // its residuals at the runs still sum to 0, as a least-squares line's do
  EXPECT_NEAR(total_at(m, 16) - 48 * f + total_at(m, 64) - 76.8 * f, 0.0, 1e-12 * f);
  // steep enough runs keep their own line, bit for bit
  const std::vector<srift::Measurement> steep = {{16, 48 * f}, {64, 96 * f}};
  const srift::ComputeModel k = lc.measured_model(w, g, roof, steep, Precision::amp, 1024);
  const srift::ComputeModel fit = srift::anchor_to_measurements(roof, steep);
  EXPECT_EQ(k.forward_fixed_s, fit.forward_fixed_s);
  EXPECT_EQ(k.forward_per_sample_s, fit.forward_per_sample_s);
  EXPECT_EQ(k.backward_per_sample_s, fit.backward_per_sample_s);
  EXPECT_EQ(k.optimizer_s, fit.optimizer_s);
  // one run under its floor: none
  const std::vector<srift::Measurement> off = {{16, 48 * f}, {64, 0.9 * 64 * f}};
  const srift::ComputeModel o = lc.measured_model(w, g, roof, off, Precision::amp, 1024);
  const srift::ComputeModel o_fit = srift::anchor_to_measurements(roof, off);
  EXPECT_EQ(total_at(o, 1024), total_at(o_fit, 1024));
  EXPECT_LT(total_at(o, 1024), f * 1024);
}

TEST(LearnedCompute, AWholeInstancesCurveIsHeldToTheFloorAsTheGpusOwn) {
  // Note "measured floor" for a curve fitted elsewhere (srift::hold_to_measured_floor): the
  // engine scales a GPU's curve through a whole instance's iterations (anchor_to_measurements);
  // an instance run at 1.05x the floor at batch 4 scaled the learned curve to 0.77x the floor at
  // batch 1024. Held, it is turned about the run to the floor at the grid's end, as
  // measured_model turns a 1-GPU run.
  const srift::WorkloadStats w = two_layers();
  const GpuSpec g = gpu("g", 15.7, 125, 900);
  const srift::LearnedCompute lc(constant_model(32, 0.0), constant_model(9, 0.0, 8, 2.0), srift::LearnedComputeConfig{});
  const double f = srift::peak_flop_seconds_per_sample(w.layers(), g, Precision::amp);
  const srift::ComputeModel single = lc.predict_absolute(w, g, Precision::amp, 1024).model;
  const double t0 = 1.05 * f * 4;
  const std::vector<srift::Measurement> run = {{4, t0}};
  const srift::ComputeModel fitted = srift::anchor_to_measurements(single, run);
  ASSERT_LT(total_at(fitted, 1024), 0.9 * f * 1024);  // the premise: the engine's fit, under it
  const srift::ComputeModel m = srift::hold_to_measured_floor(w, g, fitted, run, Precision::amp, 1024);
  const double slope = (f * 1024 - t0) / (1024 - 4), fixed = t0 - slope * 4;  // by hand
  EXPECT_NEAR(m.per_sample_s(), slope, 1e-12 * slope);
  EXPECT_NEAR(m.fixed_s() + m.optimizer_s, fixed, 1e-12 * t0);
  EXPECT_NEAR(total_at(m, 4), t0, 1e-12 * t0);  // the instance's own run, as measured
  for (double b : srift::batch_grid(1024)) EXPECT_GE(total_at(m, b), f * b * (1 - 1e-12)) << b;
  // the same turn as measured_model's for the same run on one GPU: the same line
  const srift::ComputeModel own = lc.measured_model(w, g, w.roofline(g, Precision::amp), run, Precision::amp, 1024);
  EXPECT_NEAR(total_at(own, 1024), total_at(m, 1024), 1e-12 * f * 1024);
  EXPECT_NEAR(own.per_sample_s(), m.per_sample_s(), 1e-12 * slope);
  // two flat runs (10% apart, above the floor) extrapolate under it past batch ~8,800
  const std::vector<srift::Measurement> flat = {{2048, 2.5 * f * 2048}, {4096, 1.1 * 2.5 * f * 2048}};
  const srift::ComputeModel on_flat = srift::anchor_to_measurements(single, flat);
  ASSERT_LT(total_at(on_flat, 16384), f * 16384);  // their own line, 4608 f + 0.25 f b
  const srift::ComputeModel h = srift::hold_to_measured_floor(w, g, on_flat, flat, Precision::amp, 16384);
  // turned about their mean (3072, 5376 f) to the floor at 16384
  const double mean_t = 5376 * f;
  EXPECT_NEAR(h.per_sample_s(), (16384 * f - mean_t) / (16384 - 3072), 1e-12 * f);
  EXPECT_NEAR(total_at(h, 3072), mean_t, 1e-12 * mean_t);
  for (double b : srift::batch_grid(16384)) EXPECT_GE(total_at(h, b), f * b * (1 - 1e-12)) << b;
  // the grid reaches the measured batches: max_batch 0 ends it at the larger of them and 1024
  const std::vector<srift::Measurement> big = {{8192, 1.05 * f * 8192}};
  const srift::ComputeModel hb =
      srift::hold_to_measured_floor(w, g, srift::anchor_to_measurements(single, big), big, Precision::amp, 0);
  EXPECT_NEAR(total_at(hb, 8192), 1.05 * f * 8192, 1e-12 * f * 8192);
  for (double b : srift::batch_grid(8192)) EXPECT_GE(total_at(hb, b), f * b * (1 - 1e-12)) << b;
  // an instance slower than its GPU's curve is not touched, bit for bit
  const std::vector<srift::Measurement> slow = {{32, 3 * total_at(single, 32)}};
  const srift::ComputeModel s = srift::anchor_to_measurements(single, slow);
  const srift::ComputeModel kept = srift::hold_to_measured_floor(w, g, s, slow, Precision::amp, 1024);
  EXPECT_EQ(kept.forward_fixed_s, s.forward_fixed_s);
  EXPECT_EQ(kept.backward_per_sample_s, s.backward_per_sample_s);
  EXPECT_EQ(kept.optimizer_s, s.optimizer_s);
  // a run that beats its own floor: the FLOP count is off, no floor
  const std::vector<srift::Measurement> quick = {{32, 0.5 * f * 32}};
  const srift::ComputeModel q = srift::anchor_to_measurements(single, quick);
  EXPECT_EQ(total_at(srift::hold_to_measured_floor(w, g, q, quick, Precision::amp, 1024), 1024), total_at(q, 1024));
  // refused: no runs; a run at another precision, named
  EXPECT_THROW(srift::hold_to_measured_floor(w, g, fitted, {}, Precision::amp, 1024), std::invalid_argument);
  srift::Measurement at_fp32{4, t0};
  at_fp32.precision = Precision::fp32;
  try {
    srift::hold_to_measured_floor(w, g, fitted, {at_fp32}, Precision::amp, 1024);
    FAIL() << "no throw for a run at fp32";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("measurements[0].precision"), std::string::npos) << e.what();
  }
}

TEST(LearnedCompute, HoldToMeasuredFloorRefusesAMaxBatchThatIsNoNumber) {
  // A NaN or infinite max_batch read as "not known" (<= 0): the grid ended at 1024 and the
  // curve was turned to meet the floor there, so past it the held curve is under the floor at
  // batches the caller asked it to hold (e.g. inf for "every batch").
  const srift::WorkloadStats w = two_layers();
  const GpuSpec g = gpu("g", 15.7, 125, 900);
  const srift::LearnedCompute lc(constant_model(32, 0.0), constant_model(9, 0.0, 8, 2.0), srift::LearnedComputeConfig{});
  const double f = srift::peak_flop_seconds_per_sample(w.layers(), g, Precision::amp);
  const std::vector<srift::Measurement> run = {{4, 1.05 * f * 4}};
  const srift::ComputeModel fitted = srift::anchor_to_measurements(lc.predict_absolute(w, g, Precision::amp, 1024).model, run);
  for (double bad : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                     -std::numeric_limits<double>::infinity()}) {
    try {
      srift::hold_to_measured_floor(w, g, fitted, run, Precision::amp, bad);
      FAIL() << "no throw for max_batch " << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("max_batch must be finite"), std::string::npos) << e.what();
    }
  }
  // <= 0 is "not known": the grid of the measured batches (1024 here), as before
  const srift::ComputeModel unknown = srift::hold_to_measured_floor(w, g, fitted, run, Precision::amp, -1);
  const srift::ComputeModel at_1024 = srift::hold_to_measured_floor(w, g, fitted, run, Precision::amp, 1024);
  EXPECT_EQ(unknown.per_sample_s(), at_1024.per_sample_s());
  // a finite grid end holds there: on or above the floor at 1e6
  const srift::ComputeModel far = srift::hold_to_measured_floor(w, g, fitted, run, Precision::amp, 1e6);
  EXPECT_GE(total_at(far, 1e6), f * 1e6 * (1 - 1e-12));
  EXPECT_LT(total_at(at_1024, 1e6), f * 1e6);  // the premise: the 1024 grid's turn is under it there
}

TEST(LearnedCompute, EveryCallRefusesAMaxBatchThatIsNoNumber) {
  // As hold_to_measured_floor: NaN or an infinity is no largest batch. The four predictions
  // (and batch_grid) read it as "not known" (<= 0) and ended the grid at 1024, so a caller
  // asking for every batch (inf) got a curve held to batch 1024 alone (ResNet-50 on a T4 at
  // AMP, one run at 1.05x its floor at batch 4: measured_model 0.9998x the floor at batch 1e6).
  const srift::WorkloadStats w = two_layers();
  const GpuSpec g = gpu("g", 15.7, 125, 900), a = gpu("a", 10, 50, 400);
  const srift::LearnedCompute lc(constant_model(32, 0.0), constant_model(9, 0.0, 8, 2.0), srift::LearnedComputeConfig{});
  srift::LearnedCompute::Cache cache(w);
  const srift::ComputeModel roof = w.roofline(g, Precision::amp);
  const std::vector<srift::Measurement> runs = {{4, 0.01}};
  const std::vector<srift::Anchor> anchors = {{a, runs}};
  const std::vector<std::pair<const char*, std::function<void(double)>>> calls = {
      {"batch_grid", [&](double mb) { srift::batch_grid(mb); }},
      {"predict_absolute", [&](double mb) { lc.predict_absolute(w, g, Precision::amp, mb); }},
      {"predict_anchored", [&](double mb) { lc.predict_anchored(w, a, runs, g, Precision::amp, mb); }},
      {"predict_anchored (anchors)", [&](double mb) { lc.predict_anchored(w, anchors, g, Precision::amp, mb); }},
      {"measured_model", [&](double mb) { lc.measured_model(w, g, roof, runs, Precision::amp, mb); }},
      {"predict_absolute (cache)", [&](double mb) { lc.predict_absolute(cache, g, Precision::amp, mb); }},
      {"predict_anchored (cache)", [&](double mb) { lc.predict_anchored(cache, a, runs, g, Precision::amp, mb); }},
      {"predict_anchored (cache, anchors)", [&](double mb) { lc.predict_anchored(cache, anchors, g, Precision::amp, mb); }},
      {"measured_model (cache)", [&](double mb) { lc.measured_model(cache, g, roof, runs, Precision::amp, mb); }},
      // an anchor with the target's specs takes the "same specs" path
      {"predict_anchored (same specs)", [&](double mb) { lc.predict_anchored(w, g, runs, g, Precision::amp, mb); }},
  };
  for (const auto& [name, call] : calls) {
    for (double bad : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                       -std::numeric_limits<double>::infinity()}) {
      try {
        call(bad);
        ADD_FAILURE() << name << ": no throw for max_batch " << bad;
      } catch (const std::invalid_argument& e) {
        const std::string what = e.what();
        EXPECT_EQ(what.rfind("max_batch must be finite", 0), 0u) << name << ": " << what;
        EXPECT_NE(what.find(std::isnan(bad) ? "got nan" : bad > 0 ? "got inf" : "got -inf"), std::string::npos)
            << name << ": " << what;
      }
    }
    call(-1.0);  // <= 0 is "not known", as before
    call(0.0);
  }
  // <= 0: the grid of 1 to 1024 (or the measured batches), as documented
  EXPECT_EQ(srift::batch_grid(-5), srift::batch_grid(0));
  EXPECT_EQ(srift::batch_grid(0).back(), 1024.0);
  const srift::ComputeModel unknown = lc.predict_absolute(w, g, Precision::amp, -1).model;
  const srift::ComputeModel zero = lc.predict_absolute(w, g, Precision::amp, 0).model;
  EXPECT_EQ(unknown.forward_fixed_s, zero.forward_fixed_s);
  EXPECT_EQ(unknown.per_sample_s(), zero.per_sample_s());
}

TEST(LearnedCompute, MeasuredCurvesStayOnTheFloorAcrossRunsAndGrids) {
  // Invariants of note "measured floor" over runs at 1x-3x the floor and grids: through the run
  // at its batch, never under the floor on the grid, a fixed cost >= 0.
  const srift::WorkloadStats w = two_layers();
  const GpuSpec g = gpu("g", 15.7, 125, 900);
  const srift::LearnedCompute lc(constant_model(32, 0.0), constant_model(9, 0.0, 8, 2.0), srift::LearnedComputeConfig{});
  const double f = srift::peak_flop_seconds_per_sample(w.layers(), g, Precision::amp);
  const srift::ComputeModel roof = w.roofline(g, Precision::amp);
  for (double batch : {1.0, 7.0, 32.0, 300.0, 1024.0}) {
    for (double k : {1.0, 1.01, 1.3, 2.0, 3.0}) {
      for (double max_batch : {0.0, 64.0, 1024.0, 100000.0}) {
        const std::vector<srift::Measurement> run = {{batch, k * f * batch}};
        const srift::ComputeModel m = lc.measured_model(w, g, roof, run, Precision::amp, max_batch);
        EXPECT_NEAR(total_at(m, batch), k * f * batch, 1e-12 * k * f * batch) << batch << " " << k << " " << max_batch;
        EXPECT_GE(m.fixed_s() + m.optimizer_s, 0.0);
        for (double b : srift::batch_grid(std::max(max_batch, batch))) {
          EXPECT_GE(total_at(m, b), f * b * (1 - 1e-12)) << batch << " " << k << " " << max_batch << " " << b;
        }
      }
    }
  }
}

}  // namespace

namespace {

srift::Measurement timed(double batch, double forward_s, double backward_s, double optimizer_s) {
  srift::Measurement m;
  m.local_batch = batch;
  m.forward_s = forward_s;
  m.backward_s = backward_s;
  m.iteration_s = forward_s + backward_s + optimizer_s;
  return m;
}

TEST(LearnedCompute, TheMeasuredFloorKeepsAMeasuredOptimizerStep) {
  // Note "measured floor" where every run timed its forward and backward: the optimizer step is
  // measured (iteration - forward - backward, compute.cpp) and the turn takes nothing from it.
  // Before, split_like capped it at half the lowered fixed cost: two runs with a 15 f step came
  // out with 12.9 f, the rest moved into the forward and backward (k accumulation micro-steps
  // count it k times).
  const srift::WorkloadStats w = two_layers();
  const GpuSpec g = gpu("g", 15.7, 125, 900);
  const srift::LearnedCompute lc(constant_model(32, 0.0), constant_model(9, 0.0, 8, 2.0), srift::LearnedComputeConfig{});
  const srift::ComputeModel roof = w.roofline(g, Precision::amp);
  const double f = srift::peak_flop_seconds_per_sample(w.layers(), g, Precision::amp);
  // compute 33 f and 66.6 f (its line 21.8 f + 0.7 f b, under the floor past batch ~73), step 15 f
  const std::vector<srift::Measurement> runs = {timed(16, 11 * f, 22 * f, 15 * f), timed(64, 22.2 * f, 44.4 * f, 15 * f)};
  const srift::ComputeModel m = lc.measured_model(w, g, roof, runs, Precision::amp, 1024);
  EXPECT_NEAR(m.optimizer_s, 15 * f, 1e-12 * f);
  // the turn by hand, as without the phases: through (40, 64.8 f) and (1024, 1024 f)
  const double slope = (1024 - 64.8) / (1024 - 40) * f;
  EXPECT_NEAR(m.per_sample_s(), slope, 1e-12 * f);
  EXPECT_NEAR(m.fixed_s(), 64.8 * f - 40 * slope - 15 * f, 1e-12 * f);
  EXPECT_GT(m.fixed_s(), 0);
  for (double b : srift::batch_grid(1024)) EXPECT_GE(total_at(m, b), f * b * (1 - 1e-12)) << b;
  // the measured forward share (1/3) in both terms
  EXPECT_NEAR(m.forward_fixed_s / m.fixed_s(), 1.0 / 3, 1e-12);
  EXPECT_NEAR(m.forward_per_sample_s / m.per_sample_s(), 1.0 / 3, 1e-12);

  // one run, 20% of it the step: the learned curve scaled through it is under the floor at 1024;
  // held, it keeps the run's forward + backward at its batch and its step
  const srift::Measurement one = timed(4, 4.16 * f / 3, 2 * 4.16 * f / 3, 1.04 * f);
  const srift::ComputeModel o = lc.measured_model(w, g, roof, {one}, Precision::amp, 1024);
  const srift::ComputeModel unheld =
      srift::anchor_to_measurements(lc.predict_absolute(w, g, Precision::amp, 1024).model, {one});
  ASSERT_LT(unheld.compute_s(1024) / 1024, f);  // the premise: the floor binds
  EXPECT_NEAR(o.optimizer_s, 1.04 * f, 1e-12 * f);
  EXPECT_NEAR(o.compute_s(4), 4.16 * f, 1e-12 * f);
  EXPECT_NEAR(total_at(o, 1024), f * 1024, 1e-9 * f * 1024);
  EXPECT_GE(o.fixed_s(), 0);

  // a run whose forward + backward beats the floor (0.9x; its iteration, 1.4x, does not) beats
  // its own: the FLOPs are theirs, and no floor (before, the turn had to cut the step to pass
  // through the run)
  const srift::Measurement fast = timed(4, 1.2 * f, 2.4 * f, 2 * f);
  const srift::ComputeModel q = lc.measured_model(w, g, roof, {fast}, Precision::amp, 1024);
  EXPECT_NEAR(q.optimizer_s, 2 * f, 1e-12 * f);
  EXPECT_NEAR(q.compute_s(4), 3.6 * f, 1e-12 * f);
  EXPECT_LT(total_at(q, 1024), f * 1024);
}

TEST(LearnedCompute, AGpuWithTheAnchorsSpecsIsTheAnchorsMeasuredCurve) {
  // Note "same specs": the same chip with more memory (V100-SXM2 16 and 32 GB). The ratio model's
  // output at no spec difference is its bias (here 0.2, x1.22), and the blend's shrink pulls the
  // target towards the absolute model's prediction; neither is a difference in the GPUs.
  const srift::WorkloadStats w = two_layers();
  const GpuSpec small = gpu("v100-16", 15.7, 125, 900);
  GpuSpec large = gpu("v100-32", 15.7, 125, 900);
  large.memory_bytes = 32.0 * (1ull << 30);
  srift::LearnedComputeConfig cfg;
  cfg.blend = true;
  cfg.blend_weight = 0.4;
  cfg.shrink = 0.25;
  cfg.anchored_p10 = -0.2;
  cfg.anchored_p90 = 0.3;
  const srift::LearnedCompute lc(constant_model(32, 0.2), constant_model(9, 0.0, 3, 0.1), cfg);
  for (Precision p : {Precision::fp32, Precision::amp}) {
    for (const std::vector<srift::Measurement>& runs :
         {std::vector<srift::Measurement>{{8, 0.05}}, std::vector<srift::Measurement>{{8, 0.05}, {32, 0.14}}}) {
      for (double max_batch : {0.0, 64.0, 4096.0}) {
        const srift::LearnedComputeResult r = lc.predict_anchored(w, small, runs, large, p, max_batch);
        double span = max_batch;
        for (const srift::Measurement& m : runs) span = std::max(span, m.local_batch);
        const srift::ComputeModel own = lc.measured_model(w, small, w.roofline(small, p), runs, p, span);
        for (double b : {1.0, 8.0, 32.0, 1024.0}) EXPECT_DOUBLE_EQ(total_at(r.model, b), total_at(own, b)) << b;
        EXPECT_DOUBLE_EQ(r.p10_factor, std::exp(-0.2));
        EXPECT_DOUBLE_EQ(r.p90_factor, std::exp(0.3));
        EXPECT_TRUE(r.same_specs_anchor);  // a caller widens its band away from the measured batch
        // and the other way round
        const srift::ComputeModel back = lc.predict_anchored(w, large, runs, small, p, max_batch).model;
        for (double b : {1.0, 8.0, 1024.0}) EXPECT_DOUBLE_EQ(total_at(back, b), total_at(own, b)) << b;
      }
    }
  }
  // the premise: a target one FLOP/s slower and one byte/s faster (neither dominates) goes
  // through the ratio model, off the run by far
  GpuSpec nearly = small;
  nearly.fp32_flops -= 1;
  nearly.fp16_flops -= 1;
  nearly.memory_bandwidth += 1;
  const srift::ComputeModel through_ratio = lc.predict_anchored(w, small, {{8, 0.05}}, nearly, Precision::amp, 0).model;
  EXPECT_GT(std::abs(total_at(through_ratio, 8) / 0.05 - 1), 0.1);
  EXPECT_FALSE(lc.predict_anchored(w, small, {{8, 0.05}}, nearly, Precision::amp, 0).same_specs_anchor);
  // several anchors: the one with the target's specs alone
  const srift::Anchor on_small{small, {{8, 0.05}}}, on_other{gpu("other", 31.2, 250, 1600), {{8, 0.02}}};
  const srift::ComputeModel several = lc.predict_anchored(w, {on_other, on_small}, large, Precision::amp, 0).model;
  const srift::ComputeModel alone = lc.predict_anchored(w, small, on_small.measurements, large, Precision::amp, 0).model;
  for (double b : {1.0, 8.0, 1024.0}) EXPECT_DOUBLE_EQ(total_at(several, b), total_at(alone, b)) << b;
  EXPECT_TRUE(lc.predict_anchored(w, {on_other, on_small}, large, Precision::amp, 0).same_specs_anchor);
  EXPECT_FALSE(lc.predict_anchored(w, {on_other}, large, Precision::amp, 0).same_specs_anchor);
}

TEST(LearnedCompute, LinesOfDominatingGpusStayInOrderAtEveryBatch) {
  // Note "lines in order": models that slow a GPU by its roofline's fixed share (launch-bound
  // small batches) put the faster GPU's raw times above the slower's at small batches; the clip
  // holds it to the slower's there, but it is far faster at the grid's end, and the line fitted
  // through its clipped times crossed the slower GPU's line at batch 1 (by 5-6% for small
  // models on real GPUs). Two lines in order at both ends of the grid are in order at every
  // batch between; each stays on its peak floor.
  const srift::WorkloadStats w({LayerCost{OpKind::matmul, 3e7, 6e7, 1e5, 4e5}, LayerCost{OpKind::elementwise, 0, 0, 2e5, 0},
                                LayerCost{OpKind::norm, 0, 0, 1e5, 0}},
                               8e6);
  const GpuSpec slow = gpu("slow", 10, 50, 400), fast = gpu("fast", 20, 100, 800), odd = gpu("odd", 30, 60, 300);
  ASSERT_TRUE(srift::dominates(fast, slow, Precision::amp));
  srift::LearnedComputeConfig cfg;
  cfg.absolute_references = {slow};  // the slow GPU's times bound the fast one's, not the reverse
  cfg.ratio_references = {slow};
  int crossed_points = 0;
  for (double coef : {12.0, 20.0, 30.0}) {
    const srift::LearnedCompute lc(constant_model(32, 0.0, 17, coef), constant_model(9, 0.0, 8, coef), cfg);
    for (double max_batch : {0.0, 5000.0, 300000.0}) {
      const double hi = srift::batch_grid(max_batch).back();
      const std::vector<srift::Measurement> meas = {{4, 2e-3}};
      const srift::ComputeModel abs_fast = lc.predict_absolute(w, fast, Precision::amp, max_batch).model;
      const srift::ComputeModel abs_slow = lc.predict_absolute(w, slow, Precision::amp, max_batch).model;
      const srift::ComputeModel anc_fast = lc.predict_anchored(w, odd, meas, fast, Precision::amp, max_batch).model;
      const srift::ComputeModel anc_slow = lc.predict_anchored(w, odd, meas, slow, Precision::amp, max_batch).model;
      const double floor_fast = srift::peak_flop_seconds_per_sample(w.layers(), fast, Precision::amp);
      for (double b = 1; b <= hi; b *= 1.5) {
        EXPECT_LE(total_at(abs_fast, b), total_at(abs_slow, b) * (1 + 1e-9)) << coef << " " << max_batch << " " << b;
        EXPECT_LE(total_at(anc_fast, b), total_at(anc_slow, b) * (1 + 1e-9)) << coef << " " << max_batch << " " << b;
        EXPECT_GE(total_at(abs_fast, b), floor_fast * b * (1 - 1e-9)) << coef << " " << max_batch << " " << b;
        EXPECT_GE(total_at(anc_fast, b), floor_fast * b * (1 - 1e-9)) << coef << " " << max_batch << " " << b;
      }
      // the clip binds at the grid's points: the test has crossings to hold
      const std::vector<double> c = lc.absolute_corrections(w, fast, {1.0}, Precision::amp);
      const std::vector<double> raw = lc.absolute_corrections(w, slow, {1.0}, Precision::amp);
      crossed_points += std::abs(std::log(srift::roofline_per_sample_s(w, fast, Precision::amp, 1.0)) + c[0] -
                                 std::log(srift::roofline_per_sample_s(w, slow, Precision::amp, 1.0)) - raw[0]) < 1e-12;
    }
  }
  EXPECT_GT(crossed_points, 0);
}

TEST(LearnedCompute, AtFp32AGpuWithTf32StaysAheadOfTheReferencesWithTf32ItBeats) {
  // Note "across the fp32 paths": at PyTorch's FP32 a GPU with TF32 is the max of its all-TF32
  // curve and the lesser of its restated and strict curves, fitted with its own residual, and it
  // was bounded only by the references without TF32 it beats: two GPUs with TF32 met nowhere.
  // BERT-base at batch 1 anchored on an L4 (bench/dominance_scan.py --small) put an RTX PRO 6000
  // (FP32 120, TF32 240 TFLOPS, 1,597 GB/s) 1.18x behind an A100-40GB (19.5, 156, 1,555). Here
  // BERT-base's layers summed by kind, as shipped, on one grid: the lines in order at every batch.
  const srift::LearnedCompute lc = shipped_compute();
  const GpuSpec a100 = shipped_a100_40gb(lc);
  ASSERT_EQ(a100.name, "A100-40GB");
  GpuSpec pro{"RTX-PRO-6000", 98304.0 * (1 << 20), 120e12, 240e12, 480e12, 1597e9};
  pro.launch_year = 2025;
  GpuSpec l4{"L4", 22888.0 * (1 << 20), 30.3e12, 60e12, 121e12, 300e9};
  l4.launch_year = 2023;
  ASSERT_TRUE(srift::dominates(pro, a100, Precision::fp32));
  ASSERT_GT(a100.tf32_flops, 0);
  const srift::WorkloadStats w({LayerCost{OpKind::matmul, 6.523e10, 1.305e11, 2.56e8, 3.401e8},
                                LayerCost{OpKind::attention, 5.436e9, 1.359e10, 5.684e7, 0},
                                LayerCost{OpKind::norm, 0, 0, 5.898e7, 1.536e5},
                                LayerCost{OpKind::elementwise, 0, 0, 2.572e8, 0},
                                LayerCost{OpKind::embedding, 0, 0, 2.957e6, 9.534e7},
                                LayerCost{OpKind::other, 0, 0, 6.49e6, 0}},
                               3.049e9);
  const double own = total_at(lc.predict_absolute(w, l4, Precision::fp32, 75).model, 1);
  for (double factor : {0.7, 1.0, 1.4}) {
    const std::vector<srift::Measurement> run = {{1, factor * own}};
    for (double span : {145.0, 366.0}) {
      const srift::ComputeModel p = lc.predict_anchored(w, l4, run, pro, Precision::fp32, span).model;
      const srift::ComputeModel a = lc.predict_anchored(w, l4, run, a100, Precision::fp32, span).model;
      for (double b = 1; b <= span; b *= 2) {
        EXPECT_LE(total_at(p, b), total_at(a, b) * (1 + 1e-9)) << factor << " " << span << " " << b;
      }
      EXPECT_LE(total_at(p, span), total_at(a, span) * (1 + 1e-9)) << factor << " " << span;
    }
  }
  for (double span : {145.0, 366.0}) {  // and with no measurement
    const srift::ComputeModel p = lc.predict_absolute(w, pro, Precision::fp32, span).model;
    const srift::ComputeModel a = lc.predict_absolute(w, a100, Precision::fp32, span).model;
    for (double b = 1; b <= span; b *= 2) EXPECT_LE(total_at(p, b), total_at(a, b) * (1 + 1e-9)) << span << " " << b;
  }
}

TEST(LearnedCompute, AtFp32AReferenceThatBeatsAGpuWithTf32BoundsItFromBelow) {
  // Note "across the fp32 paths, from below": at PyTorch's FP32 a GPU with TF32 was held under
  // the references it beats and over none, not even the measured GPU's line. BERT-base (layers
  // summed by kind, as shipped) anchored on an H100-80GB at 1.4x its own time at batch 32 put
  // the H100-80GB, the measurement itself, 1.10x behind an H100-PCIe and an RTX 3090 at batch 1;
  // anchored on a V100 at 0.7x, an RTX A6000 (FP32 38.7, TF32 77.4 TFLOPS, 768 GB/s) up to 1.02x
  // behind an A10G (35, 35, 600). Now no reference (nor the anchor) that beats a GPU on every
  // spec at FP32 is predicted slower than it at any batch of the grid.
  const srift::LearnedCompute lc = shipped_compute();
  const std::vector<GpuSpec>& refs = lc.config().ratio_references;
  std::vector<GpuSpec> gpus = refs;
  GpuSpec a10g{"A10G", 22888.0 * (1 << 20), 35e12, 35e12, 70e12, 600e9};
  a10g.launch_year = 2021;
  gpus.push_back(a10g);
  const auto named = [&](const std::string& name) {
    for (const GpuSpec& g : refs) {
      if (g.name == name) return g;
    }
    ADD_FAILURE() << name << " is no reference";
    return GpuSpec{};
  };
  // srift.learn.workloads' bert_base layer by layer (the roofline is per layer), grouped
  std::vector<LayerCost> layers;
  for (const auto& [n, layer] : std::vector<std::pair<int, LayerCost>>{
           {1, LayerCost{OpKind::embedding, 0, 0, 1182720, 93763584}},
           {1, LayerCost{OpKind::embedding, 0, 0, 591360, 1572864}},
           {1, LayerCost{OpKind::embedding, 0, 0, 1182720, 6144}},
           {25, LayerCost{OpKind::norm, 0, 0, 2359296, 6144}},
           {25, LayerCost{OpKind::elementwise, 0, 0, 2359296, 0}},
           {1, LayerCost{OpKind::other, 0, 0, 6489600, 0}},
           {48, LayerCost{OpKind::matmul, 452984832, 905969664, 2359296, 2362368}},
           {12, LayerCost{OpKind::attention, 452984832, 1132462080, 4737024, 0}},
           {24, LayerCost{OpKind::elementwise, 0, 0, 3538944, 0}},
           {12, LayerCost{OpKind::matmul, 1811939328, 3623878656, 5898240, 9449472}},
           {12, LayerCost{OpKind::elementwise, 0, 0, 9437184, 0}},
           {12, LayerCost{OpKind::matmul, 1811939328, 3623878656, 5898240, 9440256}},
           {1, LayerCost{OpKind::matmul, 1179648, 2359296, 1182720, 6152}}}) {
    layers.insert(layers.end(), n, layer);
  }
  const srift::WorkloadStats w(layers, 3049010800.0);
  int pairs = 0;
  for (const char* anchor_name : {"H100-80GB", "V100-16GB"}) {
    const GpuSpec anchor = named(anchor_name);
    const double own = total_at(lc.predict_absolute(w, anchor, Precision::fp32, 0).model, 32);
    for (double factor : {0.7, 1.4}) {
      const std::vector<srift::Measurement> run = {{32, factor * own}};
      for (double span : {0.0, 4096.0}) {
        std::vector<srift::ComputeModel> m;
        for (const GpuSpec& g : gpus) m.push_back(lc.predict_anchored(w, anchor, run, g, Precision::fp32, span).model);
        for (std::size_t i = 0; i < refs.size(); ++i) {  // gpus[i] is refs[i]
          for (std::size_t j = 0; j < gpus.size(); ++j) {
            if (!srift::dominates(gpus[i], gpus[j], Precision::fp32)) continue;
            ++pairs;
            for (double b : srift::batch_grid(span)) {
              EXPECT_LE(total_at(m[i], b), total_at(m[j], b) * (1 + 1e-9))
                  << gpus[i].name << " behind " << gpus[j].name << " anchored on " << anchor_name << " at "
                  << factor << "x, grid to " << span << ", batch " << b;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(pairs, 400);
}

TEST(LearnedCompute, ACacheGivesTheFreshCallsAnswersBitForBitAndKeepsToItsModels) {
  // Note "shared memo": one workload's evaluations kept across calls through a Cache.
  const srift::WorkloadStats w = two_layers();
  const GpuSpec slow = gpu("slow", 10, 50, 400), mid = gpu("mid", 15, 75, 600), fast = gpu("fast", 20, 100, 800);
  srift::LearnedComputeConfig cfg;
  cfg.blend = true;
  cfg.blend_weight = 0.4;
  cfg.shrink = 0.25;
  cfg.ratio_references = cfg.absolute_references = {slow, mid, fast};
  const srift::LearnedCompute lc(constant_model(32, 0.1, 1, 0.3), constant_model(9, 0.0, 3, 0.1), cfg);
  srift::LearnedCompute::Cache cache(w);
  const std::vector<srift::Measurement> runs = {{8, 0.05}};
  const auto same = [](const srift::LearnedComputeResult& a, const srift::LearnedComputeResult& b) {
    EXPECT_EQ(a.model.forward_fixed_s, b.model.forward_fixed_s);
    EXPECT_EQ(a.model.forward_per_sample_s, b.model.forward_per_sample_s);
    EXPECT_EQ(a.model.backward_fixed_s, b.model.backward_fixed_s);
    EXPECT_EQ(a.model.backward_per_sample_s, b.model.backward_per_sample_s);
    EXPECT_EQ(a.model.optimizer_s, b.model.optimizer_s);
    EXPECT_EQ(a.p10_factor, b.p10_factor);
    EXPECT_EQ(a.p90_factor, b.p90_factor);
  };
  for (int pass = 0; pass < 2; ++pass) {  // the second pass reads what the first kept
    for (Precision p : {Precision::fp32, Precision::amp}) {
      for (double max_batch : {0.0, 96.0, 3000.0}) {
        for (const GpuSpec& target : {slow, mid, fast}) {
          same(lc.predict_absolute(cache, target, p, max_batch), lc.predict_absolute(w, target, p, max_batch));
          same(lc.predict_anchored(cache, mid, runs, target, p, max_batch),
               lc.predict_anchored(w, mid, runs, target, p, max_batch));
        }
      }
    }
  }
  // another LearnedCompute (its own models) may not read this one's evaluations
  const srift::LearnedCompute other(constant_model(32, 0.0), constant_model(9, 0.0), cfg);
  EXPECT_THROW(other.predict_absolute(cache, fast, Precision::amp, 0), std::invalid_argument);
}

TEST(LearnedCompute, ACacheKeepsApartTheRunsGridsAndGpusItsLinesAndModelsAreKeptBy) {
  // Note "memo by inputs": a Cache keeps each GPU's anchored line, the models' outputs per GPU
  // pair and batch, and whole measured and no-measurement models, each by what it reads. With
  // the shipped models (a line and 150 boosted trees: note "flat nodes"), one Cache asked, in
  // an interleaved order, for one anchor GPU under two sets of runs, for one target on two
  // grids, and for GPUs that differ only in memory or in launch year, answers each as a fresh
  // call does, bit for bit: a key that left out the runs, the grid or the year would hand one
  // call's line to another.
  const srift::LearnedCompute lc = srift::LearnedCompute::from_documents(
      srift_test::shipped_document("compute_ratio"), srift_test::shipped_document("compute_absolute"));
  const srift::WorkloadStats w({LayerCost{OpKind::conv, 4e9, 8e9, 2e7, 1e6}, LayerCost{OpKind::matmul, 3e9, 6e9, 1e6, 4e6},
                                LayerCost{OpKind::elementwise, 0, 0, 5e7, 0}},
                               8e6);
  const double gib = 1ull << 30;
  const GpuSpec t4{"T4", 16 * gib, 8.1e12, 0, 65e12, 320e9, 2018};
  const GpuSpec v100{"V100", 16 * gib, 15.7e12, 0, 125e12, 900e9, 2017};
  const GpuSpec v100_32{"V100-32", 32 * gib, 15.7e12, 0, 125e12, 900e9, 2017};  // only the memory differs
  const GpuSpec a100{"A100", 40 * gib, 19.5e12, 156e12, 312e12, 1555e9, 2020};
  // specs no reference has (so past the data's edge when launched after it), and only the year apart
  const GpuSpec novel{"novel", 48 * gib, 30e12, 200e12, 400e12, 2000e9, 2021};
  const GpuSpec novel_later{"novel-later", 48 * gib, 30e12, 200e12, 400e12, 2000e9, 2099};
  const GpuSpec h100{"H100", 80 * gib, 67e12, 495e12, 990e12, 3350e9, 2022};
  // the last: the first's run with its forward and backward timed (a reference's FP32 model
  // anchored on it reads them: note "across the fp32 paths")
  const std::vector<std::vector<srift::Measurement>> run_sets = {
      {{32, 0.21}}, {{32, 0.15}}, {{8, 0.06}, {64, 0.4}}, {{32, 0.21, 0.05, 0.09}}};
  const auto same = [](const srift::ComputeModel& a, const srift::ComputeModel& b, const std::string& what) {
    EXPECT_EQ(a.forward_fixed_s, b.forward_fixed_s) << what;
    EXPECT_EQ(a.forward_per_sample_s, b.forward_per_sample_s) << what;
    EXPECT_EQ(a.backward_fixed_s, b.backward_fixed_s) << what;
    EXPECT_EQ(a.backward_per_sample_s, b.backward_per_sample_s) << what;
    EXPECT_EQ(a.optimizer_s, b.optimizer_s) << what;
  };
  srift::LearnedCompute::Cache cache(w);
  int checked = 0;
  for (Precision p : {Precision::fp32, Precision::amp, Precision::tf32}) {
    for (double max_batch : {0.0, 200.0, 3000.0}) {
      for (const GpuSpec* target : {&v100, &v100_32, &a100, &novel, &novel_later, &h100, &t4}) {
        const std::string at = target->name + " p" + std::to_string(static_cast<int>(p)) + " max_batch " +
                               std::to_string(max_batch);
        same(lc.predict_absolute(cache, *target, p, max_batch).model, lc.predict_absolute(w, *target, p, max_batch).model,
             "absolute " + at);
        for (std::size_t r = 0; r < run_sets.size(); ++r) {
          const srift::LearnedComputeResult got = lc.predict_anchored(cache, t4, run_sets[r], *target, p, max_batch);
          const srift::LearnedComputeResult fresh = lc.predict_anchored(w, t4, run_sets[r], *target, p, max_batch);
          same(got.model, fresh.model, "anchored on runs " + std::to_string(r) + ", " + at);
          EXPECT_EQ(got.p10_factor, fresh.p10_factor) << at;
          EXPECT_EQ(got.p90_factor, fresh.p90_factor) << at;
          EXPECT_EQ(got.past_data_edge, fresh.past_data_edge) << at;
          const srift::ComputeModel roof = w.roofline(*target, p);
          same(lc.measured_model(cache, *target, roof, run_sets[r], p, max_batch),
               lc.measured_model(w, *target, roof, run_sets[r], p, max_batch), "measured on runs " + std::to_string(r) + ", " + at);
          checked += 3;
        }
      }
    }
  }
  EXPECT_EQ(checked, 3 * 3 * 7 * 4 * 3);
  // the keys are not vacuous: the runs, the grid and the year each move some answer (the memory
  // only through the grid a caller asks for: the same grid, the same answer)
  const auto fp32_on = [&](const GpuSpec& target, const std::vector<srift::Measurement>& runs, double max_batch) {
    return total_at(lc.predict_anchored(cache, t4, runs, target, Precision::fp32, max_batch).model, 1.0);
  };
  EXPECT_NE(fp32_on(a100, run_sets[0], 200), fp32_on(a100, run_sets[1], 200));
  EXPECT_NE(fp32_on(a100, run_sets[0], 200), fp32_on(a100, run_sets[0], 3000));
  EXPECT_EQ(fp32_on(v100, run_sets[0], 0), fp32_on(v100_32, run_sets[0], 0));
  EXPECT_NE(fp32_on(novel, run_sets[0], 200), fp32_on(novel_later, run_sets[0], 200)) << "the data edge's lean";
}

}  // namespace

namespace {

// srift.learn.workloads' bert_base_128 (BERT-base at 128 tokens) layer by layer, grouped.
srift::WorkloadStats bert_base_128() {
  std::vector<LayerCost> layers;
  for (const auto& [n, layer] : std::vector<std::pair<int, LayerCost>>{
           {1, LayerCost{OpKind::embedding, 0, 0, 394240, 93763584}},
           {1, LayerCost{OpKind::embedding, 0, 0, 197120, 1572864}},
           {1, LayerCost{OpKind::embedding, 0, 0, 394240, 6144}},
           {25, LayerCost{OpKind::norm, 0, 0, 786432, 6144}},
           {25, LayerCost{OpKind::elementwise, 0, 0, 786432, 0}},
           {1, LayerCost{OpKind::other, 0, 0, 2163200, 0}},
           {48, LayerCost{OpKind::matmul, 150994944, 301989888, 786432, 2362368}},
           {12, LayerCost{OpKind::attention, 50331648, 125829120, 1579008, 0}},
           {24, LayerCost{OpKind::elementwise, 0, 0, 1179648, 0}},
           {12, LayerCost{OpKind::matmul, 603979776, 1207959552, 1966080, 9449472}},
           {12, LayerCost{OpKind::elementwise, 0, 0, 3145728, 0}},
           {12, LayerCost{OpKind::matmul, 603979776, 1207959552, 1966080, 9440256}},
           {1, LayerCost{OpKind::matmul, 393216, 786432, 394240, 6152}}}) {
    layers.insert(layers.end(), n, layer);
  }
  return srift::WorkloadStats(std::move(layers), 3049010800.0);
}

void expect_same_model(const srift::ComputeModel& a, const srift::ComputeModel& b, const std::string& what) {
  EXPECT_EQ(a.forward_fixed_s, b.forward_fixed_s) << what;
  EXPECT_EQ(a.forward_per_sample_s, b.forward_per_sample_s) << what;
  EXPECT_EQ(a.backward_fixed_s, b.backward_fixed_s) << what;
  EXPECT_EQ(a.backward_per_sample_s, b.backward_per_sample_s) << what;
  EXPECT_EQ(a.optimizer_s, b.optimizer_s) << what;
}

}  // namespace

TEST(LearnedCompute, AReferenceBoundsATargetWithItsOwnLineOnItsOwnGrid) {
  // Note "own grids": each GPU's grid ends at what fits its memory, and a reference that bounds a
  // target was refitted on the target's grid, not its own prediction. BERT-base at FP32 anchored
  // on an L4 at batch 1 (0.7x its own time) as bench/dominance_scan.py --small predicts it, the
  // engine's limits (BERT-base at 128 tokens: L4 226, A100-40GB 435, RTX PRO 6000 1,098): the
  // RTX PRO 6000, ahead of the A100-40GB on every spec, 1.014x behind it at batch 1 when each is
  // predicted on its own grid with the references on the target's; in order with the table.
  const srift::LearnedCompute lc = shipped_compute();
  const GpuSpec a100 = shipped_a100_40gb(lc);
  ASSERT_EQ(a100.name, "A100-40GB");
  const GpuSpec pro{"RTX-PRO-6000", 96.0 * (1ull << 30), 120e12, 240e12, 480e12, 1597e9, 2025};
  const GpuSpec l4{"L4", 22.352 * (1ull << 30), 30.3e12, 60e12, 121e12, 300e9, 2023};
  const srift::GridEnds ends = {{l4.memory_bytes, 226}, {a100.memory_bytes, 435}, {pro.memory_bytes, 1098}};
  const srift::WorkloadStats w = bert_base_128();
  const double own = total_at(lc.predict_absolute(w, l4, Precision::fp32, 226, ends).model, 1);
  const std::vector<srift::Measurement> run = {{1, 0.7 * own}};
  const auto at_1 = [&](const GpuSpec& g, double max_batch, const srift::GridEnds& table) {
    return total_at(lc.predict_anchored(w, l4, run, g, Precision::fp32, max_batch, table).model, 1);
  };
  // before: the A100's line refitted on the RTX PRO 6000's grid bounds it, not the A100's own
  EXPECT_GT(at_1(pro, 1098, {}), at_1(a100, 435, {}) * 1.01);
  // now: in order at batch 1, every grid's first batch, exactly; and near it
  EXPECT_LE(at_1(pro, 1098, ends), at_1(a100, 435, ends) * (1 + 1e-12));
  for (double b : {2.0, 4.0, 8.0}) {
    const double p = total_at(lc.predict_anchored(w, l4, run, pro, Precision::fp32, 1098, ends).model, b);
    const double a = total_at(lc.predict_anchored(w, l4, run, a100, Precision::fp32, 435, ends).model, b);
    EXPECT_LE(p, a * (1 + 1e-4)) << b;
  }
  // with no measurement too, at batch 1 (each on its own grid)
  EXPECT_LE(total_at(lc.predict_absolute(w, pro, Precision::fp32, 1098, ends).model, 1),
            total_at(lc.predict_absolute(w, a100, Precision::fp32, 435, ends).model, 1) * (1 + 1e-12));
}

TEST(LearnedCompute, NoGridEndsOrEndsThatAreTheTargetsOwnChangeNothing) {
  // Note "own grids": a caller that passes no table gets the prediction as before it, bit for
  // bit; so does one whose table lists no reference's memory, or lists every memory with the
  // target's own max_batch (every reference then on the target's grid, as before).
  const srift::LearnedCompute lc = shipped_compute();
  const srift::WorkloadStats w = bert_base_128();
  const GpuSpec l4{"L4", 22888.0 * (1 << 20), 30.3e12, 60e12, 121e12, 300e9, 2023};
  const GpuSpec pro{"RTX-PRO-6000", 98304.0 * (1 << 20), 120e12, 240e12, 480e12, 1597e9, 2025};
  const GpuSpec t4{"T4", 16.0 * (1ull << 30), 8.1e12, 0, 65e12, 320e9, 2018};
  std::vector<double> memories;
  for (const GpuSpec& g : lc.config().ratio_references) memories.push_back(g.memory_bytes);
  for (const GpuSpec& g : lc.config().absolute_references) memories.push_back(g.memory_bytes);
  for (const GpuSpec& g : {l4, pro, t4}) memories.push_back(g.memory_bytes);
  std::sort(memories.begin(), memories.end());
  memories.erase(std::unique(memories.begin(), memories.end()), memories.end());
  const std::vector<srift::Measurement> run = {{8, 0.05}};
  for (Precision p : {Precision::fp32, Precision::tf32, Precision::amp}) {
    for (double max_batch : {0.0, 300.0, 1098.0}) {
      srift::GridEnds targets_own, unlisted = {{12345.0 * (1 << 20), 7}};
      for (double m : memories) targets_own.push_back({m, max_batch});
      for (const GpuSpec& target : {pro, t4, l4}) {
        const std::string at = target.name + " p" + std::to_string(static_cast<int>(p)) + " " + std::to_string(max_batch);
        const srift::ComputeModel abs = lc.predict_absolute(w, target, p, max_batch).model;
        const srift::ComputeModel anc = lc.predict_anchored(w, l4, run, target, p, max_batch).model;
        for (const srift::GridEnds* table : {&unlisted, &targets_own}) {
          expect_same_model(lc.predict_absolute(w, target, p, max_batch, *table).model, abs, "absolute " + at);
          expect_same_model(lc.predict_anchored(w, l4, run, target, p, max_batch, *table).model, anc, "anchored " + at);
        }
      }
    }
  }
}

TEST(LearnedCompute, ACacheKeepsEachTableOfGridEndsApart) {
  // Note "own grids" and note "memo by inputs": every line a reference bounds with depends on the
  // table, so one Cache asked the same targets with no table, with one and with another that
  // moves one reference's end, in turn, answers each as a fresh call does, bit for bit; a Memo
  // shared across tables would hand one table's lines to another.
  const srift::LearnedCompute lc = shipped_compute();
  const srift::WorkloadStats w = bert_base_128();
  const GpuSpec a100 = shipped_a100_40gb(lc);
  ASSERT_EQ(a100.name, "A100-40GB");
  const GpuSpec pro{"RTX-PRO-6000", 98304.0 * (1 << 20), 120e12, 240e12, 480e12, 1597e9, 2025};
  const GpuSpec l4{"L4", 22888.0 * (1 << 20), 30.3e12, 60e12, 121e12, 300e9, 2023};
  const GpuSpec h100{"H100", 80.0 * (1ull << 30), 67e12, 495e12, 990e12, 3350e9, 2022};
  const srift::GridEnds one = {{l4.memory_bytes, 226}, {a100.memory_bytes, 435}, {pro.memory_bytes, 1098}};
  const srift::GridEnds other = {{pro.memory_bytes, 1098}, {l4.memory_bytes, 226}, {a100.memory_bytes, 5000}};
  const std::vector<const srift::GridEnds*> tables = {nullptr, &one, &other};
  const std::vector<srift::Measurement> run = {{1, 0.02}};
  srift::LearnedCompute::Cache cache(w);
  for (int pass = 0; pass < 2; ++pass) {
    for (Precision p : {Precision::fp32, Precision::amp}) {
      for (const GpuSpec* target : {&pro, &h100, static_cast<const GpuSpec*>(&a100)}) {
        for (std::size_t t = 0; t < tables.size(); ++t) {
          const srift::GridEnds table = tables[t] ? *tables[t] : srift::GridEnds{};
          const std::string at = target->name + " table " + std::to_string(t) + " pass " + std::to_string(pass);
          expect_same_model(lc.predict_absolute(cache, *target, p, 1098, table).model,
                            lc.predict_absolute(w, *target, p, 1098, table).model, "absolute " + at);
          expect_same_model(lc.predict_anchored(cache, l4, run, *target, p, 1098, table).model,
                            lc.predict_anchored(w, l4, run, *target, p, 1098, table).model, "anchored " + at);
          const srift::ComputeModel roof = w.roofline(*target, p);
          expect_same_model(lc.measured_model(cache, *target, roof, run, p, 1098, table),
                            lc.measured_model(w, *target, roof, run, p, 1098, table), "measured " + at);
        }
      }
    }
  }
  // the tables are not vacuous: each moves the RTX PRO 6000's line at FP32
  const auto at_1 = [&](const srift::GridEnds& table) {
    return total_at(lc.predict_anchored(cache, l4, run, pro, Precision::fp32, 1098, table).model, 1);
  };
  EXPECT_NE(at_1({}), at_1(one));
  EXPECT_NE(at_1(one), at_1(other));
}

TEST(LearnedCompute, GridEndsAreRefusedByName) {
  const srift::LearnedCompute lc = shipped_compute();
  const srift::WorkloadStats w = two_layers();
  const GpuSpec g = gpu("g", 10, 50, 400);
  const auto message = [&](const srift::GridEnds& table) {
    try {
      lc.predict_absolute(w, g, Precision::amp, 100, table);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  EXPECT_NE(message({{16e9, 100}, {0, 100}}).find("grid_ends[1].memory_bytes"), std::string::npos);
  EXPECT_NE(message({{nan, 100}}).find("grid_ends[0].memory_bytes"), std::string::npos);
  EXPECT_NE(message({{16e9, inf}}).find("grid_ends[0].max_batch"), std::string::npos);
  EXPECT_NE(message({{16e9, nan}}).find("grid_ends[0].max_batch"), std::string::npos);
  EXPECT_NE(message({{16e9, 100}, {16e9, 200}}).find("grid_ends: memory_bytes"), std::string::npos);
  srift::LearnedCompute::Cache cache(w);
  EXPECT_THROW(lc.predict_absolute(cache, g, Precision::amp, 100, {{16e9, nan}}), std::invalid_argument);
  EXPECT_EQ(message({{16e9, -1}, {32e9, 0}}), "no error");  // <= 0: not known, as max_batch
}

TEST(LearnedCompute, OneCacheAnswersEveryEntryPointAsFreshCallsInAnyOrderAndUnderAnyTable) {
  // Note "own grids" with note "memo by inputs": a Cache keeps one Memo per table of grid ends,
  // found by the table checked and sorted by memory. One Cache asked the four entry points
  // (predict_absolute, predict_anchored on one anchor and on several, measured_model on one batch
  // and on two) for targets that bound one another, under no table, a table, the same table in
  // another order, that table with an unlisted memory, one with a reference's end unknown (<= 0)
  // and one with that end past the target's, in one order and then in the reverse order, answers
  // each call as a fresh call does, bit for bit; a table equal up to order, or with a memory no
  // GPU asked has, answers as that table.
  const srift::LearnedCompute lc = shipped_compute();
  const srift::WorkloadStats w = bert_base_128();
  const GpuSpec a100 = shipped_a100_40gb(lc);
  ASSERT_EQ(a100.name, "A100-40GB");
  const GpuSpec pro{"RTX-PRO-6000", 96.0 * (1ull << 30), 120e12, 240e12, 480e12, 1597e9, 2025};
  const GpuSpec l4{"L4", 22.352 * (1ull << 30), 30.3e12, 60e12, 121e12, 300e9, 2023};
  const GpuSpec t4{"T4", 16.0 * (1ull << 30), 8.1e12, 0, 65e12, 320e9, 2018};
  const GpuSpec h100{"H100", 80.0 * (1ull << 30), 67e12, 495e12, 990e12, 3350e9, 2022};
  const srift::GridEnds one = {{l4.memory_bytes, 226}, {a100.memory_bytes, 435}, {pro.memory_bytes, 1098},
                               {h100.memory_bytes, 900}, {t4.memory_bytes, 150}};
  const srift::GridEnds reordered = {one[3], one[1], one[4], one[0], one[2]};
  srift::GridEnds unlisted = one;
  unlisted.push_back({12345.0 * (1 << 20), 7});
  srift::GridEnds unknown = one, past = one;
  unknown[1].second = -1;  // the A100-40GB's end not known: its grid 1..1,024
  past[1].second = 5000;   // past every target's
  const std::vector<srift::GridEnds> tables = {{}, one, reordered, unlisted, unknown, past};
  const std::vector<srift::Measurement> run = {{1, 0.02}}, runs = {{4, 0.03}, {32, 0.12}};
  const std::vector<srift::Anchor> anchors = {{l4, run}, {t4, {{8, 0.2}}}};
  struct Call {
    std::string what;
    std::function<srift::ComputeModel(srift::LearnedCompute::Cache*)> model;
  };
  std::vector<Call> calls;
  for (Precision p : {Precision::fp32, Precision::amp}) {
    for (std::size_t t = 0; t < tables.size(); ++t) {
      const srift::GridEnds& table = tables[t];
      for (const GpuSpec* g : {&pro, &h100, static_cast<const GpuSpec*>(&a100)}) {
        const std::string at = g->name + " p" + std::to_string(static_cast<int>(p)) + " table " + std::to_string(t);
        const double mb = g == &pro ? 1098 : g == &h100 ? 900 : 435;
        calls.push_back({"absolute " + at, [&lc, &w, g, p, mb, &table](srift::LearnedCompute::Cache* c) {
                           return c ? lc.predict_absolute(*c, *g, p, mb, table).model
                                    : lc.predict_absolute(w, *g, p, mb, table).model;
                         }});
        calls.push_back({"anchored " + at, [&, g, p, mb](srift::LearnedCompute::Cache* c) {
                           return c ? lc.predict_anchored(*c, l4, run, *g, p, mb, table).model
                                    : lc.predict_anchored(w, l4, run, *g, p, mb, table).model;
                         }});
        calls.push_back({"several " + at, [&, g, p, mb](srift::LearnedCompute::Cache* c) {
                           return c ? lc.predict_anchored(*c, anchors, *g, p, mb, table).model
                                    : lc.predict_anchored(w, anchors, *g, p, mb, table).model;
                         }});
        for (const std::vector<srift::Measurement>* m : {&run, &runs}) {
          calls.push_back({"measured " + std::to_string(m->size()) + " " + at, [&, g, p, mb, m](srift::LearnedCompute::Cache* c) {
                             const srift::ComputeModel roof = w.roofline(*g, p);
                             return c ? lc.measured_model(*c, *g, roof, *m, p, mb, table)
                                      : lc.measured_model(w, *g, roof, *m, p, mb, table);
                           }});
        }
      }
    }
  }
  std::vector<srift::ComputeModel> fresh;
  for (const Call& c : calls) fresh.push_back(c.model(nullptr));
  srift::LearnedCompute::Cache forward(w), backward(w);
  for (std::size_t i = 0; i < calls.size(); ++i) expect_same_model(calls[i].model(&forward), fresh[i], "forward " + calls[i].what);
  for (std::size_t i = calls.size(); i-- > 0;) {
    expect_same_model(calls[i].model(&forward), fresh[i], "forward, again in reverse " + calls[i].what);
    expect_same_model(calls[i].model(&backward), fresh[i], "backward " + calls[i].what);
  }
  // a table is a set: in another order, or with a memory no GPU here has, it answers as itself;
  // an end not known (<= 0) is the least grid, 1..1,024, as the A100-40GB's own 435 is
  const std::size_t per_table = calls.size() / (2 * tables.size());
  for (std::size_t p = 0; p < 2; ++p) {
    for (std::size_t i = 0; i < per_table; ++i) {
      const std::size_t at_one = (p * tables.size() + 1) * per_table + i;
      for (std::size_t t : {2u, 3u, 4u}) {
        expect_same_model(fresh[(p * tables.size() + t) * per_table + i], fresh[at_one], "as table 1: " + calls[at_one].what);
      }
    }
  }
  // and the tables are not vacuous: the table, and the A100-40GB's end moved past the RTX PRO
  // 6000's, each move the RTX PRO 6000 anchored at FP32
  const auto pro_at_1 = [&](std::size_t t) { return total_at(fresh[t * per_table + 1], 1); };
  EXPECT_NE(pro_at_1(0), pro_at_1(1));
  EXPECT_NE(pro_at_1(1), pro_at_1(5));
}
