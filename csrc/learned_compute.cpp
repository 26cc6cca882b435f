#include "srift/learned_compute.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <atomic>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "json_reader.hpp"
#include "learned_document.hpp"
#include "layers_internal.hpp"
#include "srift/measurements.hpp"
#include "validate.hpp"

namespace srift {
namespace {

// The efficiencies srift.learn.features' bandwidth-bound share assumes (the v0 roofline's).
constexpr double kTensorEfficiency = 0.45;
constexpr double kCudaEfficiency = 0.60;
constexpr double kMemoryEfficiency = 0.70;
// The absolute model's batch grid (srift.learn.models note "batch grid").
constexpr double kGridMinSpan = 1024.0;
constexpr int kGridPointsPerDecade = 4;

constexpr int kRatioFeatures = 32;
constexpr int kAbsoluteFeatures = 9;

// Refuses a model whose features are not `expected`, naming the document (`doc`: compute_ratio
// or compute_absolute) and the first slot that differs.
void check_feature_names(const LearnedModel& m, const std::vector<std::string>& expected, const std::string& doc) {
  const std::vector<std::string>& got = m.feature_names();  // as many as expected: checked before
  for (std::size_t i = 0; i < got.size() && i < expected.size(); ++i) {
    if (got[i] != expected[i]) {
      throw std::invalid_argument(doc + ".features[" + std::to_string(i) + "]: expected '" + expected[i] + "', got '" +
                                  got[i] + "' (model '" + m.name() +
                                  "': the core feeds its features by position, in the order it computes them)");
    }
  }
}

bool tensor_kind(OpKind k) {
  return k == OpKind::matmul || k == OpKind::conv || k == OpKind::attention || k == OpKind::recurrent;
}

double fixed_share(const ComputeModel& m, double batch) {
  const double total = m.compute_s(batch) + m.optimizer_s;
  return (m.forward_fixed_s + m.backward_fixed_s + m.optimizer_s) / total;
}

// [amp, tf32] flags of the precision a GPU runs.
std::pair<double, double> precision_flags(Precision p) {
  return {p == Precision::amp ? 1.0 : 0.0, p == Precision::tf32 ? 1.0 : 0.0};
}

void check_batch(const std::string& field, double batch) { detail::require_positive(field, batch); }

// Note "max_batch": the largest local batch a prediction will be asked (samples), the end of its
// batch grid; <= 0 is "not known" (1 to 1024, or to the measured batches). NaN or an infinity is
// no batch: it was read as "not known" too, so a caller asking for every batch (inf) got a curve
// held to batch 1024 alone (ResNet-50 on a T4 at AMP, one run at 1.05x its floor at batch 4:
// measured_model 0.9998x the floor at batch 1e6, where max_batch 1e6 holds it at 1.0000x).
// Every public call and batch_grid refuse it, as hold_to_measured_floor did.
void check_max_batch(double max_batch) {
  if (!std::isfinite(max_batch)) {
    detail::fail("max_batch", "finite (the largest local batch the model will be asked, or <= 0 when not known)",
                 max_batch);
  }
}

// Note "own grids": each GPU's line is fitted on its own grid, which ends at what fits its memory
// (srift.Engine.memory_max_batch, passed as max_batch for the target alone), and a reference that
// bounds a target (notes "lines in order", "across the fp32 paths", "across the fp32 paths, from
// below") was fitted on the target's grid instead: a line that is not the reference's own
// prediction. Over the catalog at batches 1-8 (bench/dominance_scan.py --small) that left 457
// dominating pairs out of order, the largest the RTX PRO 6000 1.014x behind the A100-40GB
// (BERT-base at 128 tokens, FP32, batch 1, anchored on an L4): the A100 on its own grid (1..1,024)
// is 1.4% lower at batch 1 than its line refitted on the RTX PRO 6000's (1..1,098). A caller that
// knows the workload's memory passes each GPU's own grid end by its memory (GridEnds); a reference
// listed there bounds the target with its own line on its own grid (for an anchored prediction:
// its own anchored line, from the anchor's measured curve on that grid, as predict_anchored with
// its own max_batch fits it; the anchor, or a reference with its specs, with its measured line on
// its own grid), evaluated at the target's grid ends, where the lines are put in order. Batch 1 is
// every grid's first batch, so there the target is in order with each reference's own prediction
// exactly. One not listed, and every reference where the table is empty, is fitted on the
// target's grid as before. Every evaluation that reads a reference's line depends on the table
// (a reference's own line is held by its references on their own grids in turn), so a Cache keeps
// one Memo per table (memo_of), a table being the call's input as much as max_batch.
// Every grid spans at least 1..1,024 (kGridMinSpan), so ends up to 1,024, and an end not known
// (<= 0), give one grid. A reference whose grid ends before the target's (less memory) bounds it
// at the target's grid end with its line extrapolated past its own end, where it runs no batch:
// holding the target only where both run would need bounds at inner batches (line_in_order holds
// the two ends), and the table as a whole (the extrapolation with it) moves the engine's models
// at most 0.14% at their grid's end against the lines on the target's grid (the profiles of
// bench/predict_fingerprint.py; resnet50 at AMP measured on a V100: the H100-80GB 0.9986x at
// batch 1,861; a review).
GridEnds checked_grid_ends(const GridEnds& ends) {
  for (std::size_t i = 0; i < ends.size(); ++i) {
    const std::string at = "grid_ends[" + std::to_string(i) + "]";
    detail::require_positive(at + ".memory_bytes", ends[i].first);
    if (!std::isfinite(ends[i].second)) {
      detail::fail(at + ".max_batch",
                   "finite (the largest local batch that fits a GPU of that memory, or <= 0 when not known)",
                   ends[i].second);
    }
  }
  GridEnds out = ends;
  std::sort(out.begin(), out.end());
  for (std::size_t i = 1; i < out.size(); ++i) {
    if (out[i].first == out[i - 1].first) {
      detail::fail("grid_ends: memory_bytes", "listed once (each memory has one grid end)", out[i].first);
    }
  }
  return out;
}

// The least slope (a share of the target roofline's seconds per sample) of an anchored line: a
// guard against a degenerate fit where the curve is flat over the grid, not a model. The
// roofline's own slope is no floor: its assumed efficiencies make it steeper than measured
// curves (as a floor it cost NVIDIA's anchored V100/A100 pairs 8.7 -> 14.3 median APE).
constexpr double kMinSlopeShare = 0.01;
// The most a learned model may move a time from its roofline, in log: e^50 ~ 5e21x. Measured
// corrections stay within a few units; a model file whose parameters give more (an intercept of
// 1000 loaded, then every time overflowed to an error naming no model) is refused by name.
constexpr double kMaxLogCorrection = 50;

void check_gpu(const GpuSpec& g) {
  g.validate();
  detail::require_positive("gpu.fp32_flops", g.fp32_flops);
  detail::require_positive("gpu.memory_bandwidth", g.memory_bandwidth);
}

// Note "fp32 via tf32" (compute.hpp note "fp32 is PyTorch's"): the models learned FP32 only on
// GPUs without TF32, where PyTorch's default FP32 runs everything on CUDA cores. On a GPU with
// TF32 the default runs convolutions and RNNs on tensor cores and matmuls on CUDA cores: that
// mix is predicted as the TF32 prediction (learned on such GPUs: Lambda's FP32 rows ran TF32)
// times the roofline's cost of the default over all-TF32, term by term (1 for a conv net; the
// matmuls' FP32 cost for a transformer), held between two bounds that hold whatever the model:
// no faster than all-TF32 and no slower than strict FP32 (the GPU without its TF32 units, as the
// FP32 models learned it), term by term. A measurement taken at the default on such a GPU is
// brought to its TF32 equivalent by the roofline ratio before it anchors anything; anchored, the
// bounds and the default's cost apply to the total at the measured batch and scale the measured
// model, as every anchored prediction does (a GPU anchored on itself gets its measurement back
// as closely as under TF32).
bool fp32_via_tf32(const GpuSpec& g, Precision p) { return p == Precision::fp32 && g.tf32_flops > 0; }

GpuSpec without_tf32(GpuSpec g) {
  g.tf32_flops = 0;
  return g;
}

ComputeModel termwise(const ComputeModel& a, const ComputeModel& b, double (*pick)(double, double)) {
  ComputeModel out;
  out.forward_fixed_s = pick(a.forward_fixed_s, b.forward_fixed_s);
  out.forward_per_sample_s = pick(a.forward_per_sample_s, b.forward_per_sample_s);
  out.backward_fixed_s = pick(a.backward_fixed_s, b.backward_fixed_s);
  out.backward_per_sample_s = pick(a.backward_per_sample_s, b.backward_per_sample_s);
  out.optimizer_s = pick(a.optimizer_s, b.optimizer_s);
  return out;
}
double smaller(double a, double b) { return std::min(a, b); }
double larger(double a, double b) { return std::max(a, b); }

ComputeModel default_over_tf32(const WorkloadStats& w, const GpuSpec& g, const ComputeModel& tf32_model) {
  const ComputeModel def = w.roofline(g, Precision::fp32);
  const ComputeModel all = w.roofline(g, Precision::tf32);
  auto ratio = [](double num, double den) { return den > 0 ? num / den : 1.0; };
  ComputeModel out = tf32_model;
  out.forward_fixed_s *= ratio(def.forward_fixed_s, all.forward_fixed_s);
  out.forward_per_sample_s *= ratio(def.forward_per_sample_s, all.forward_per_sample_s);
  out.backward_fixed_s *= ratio(def.backward_fixed_s, all.backward_fixed_s);
  out.backward_per_sample_s *= ratio(def.backward_per_sample_s, all.backward_per_sample_s);
  out.optimizer_s *= ratio(def.optimizer_s, all.optimizer_s);
  return out;
}

// The default's model from the all-TF32 and strict-FP32 predictions of the same GPU.
ComputeModel pytorch_fp32(const WorkloadStats& w, const GpuSpec& g, const ComputeModel& tf32_model,
                          const ComputeModel& strict_model) {
  return termwise(tf32_model, termwise(default_over_tf32(w, g, tf32_model), strict_model, smaller), larger);
}

// Note "peak floor": a learned prediction is no faster than the target's FLOPs take at its very
// peak (peak_flop_seconds_per_sample: each layer on the unit the roofline gives it at the
// precision, at efficiency 1). The ratio model extrapolates far outside its rows on workloads
// unlike them: anchored on a T4 at its own no-measurement time, an attention-bound transformer
// (sequence 4096, 83% of its FLOPs in attention) at PyTorch's FP32 came out 66 ms on an H100,
// whose FP32 peak needs 155 ms for those FLOPs, and 20 ms on a B200 (138 ms); GPT-2 anchored on
// an A100 put a V100 below its FP32 peak. Every measured single-GPU row srift learns from is at
// least 1.25x its floor (bench/accuracy.py peak_floor_margin), so the floor binds only where the
// models leave the data. Anchored on a run that beats its own GPU's floor, the FLOP count is off
// by an unknown factor (more FLOPs counted than ran: causal attention counted in full, a
// stand-in model, a precision mislabelled), and the floor says nothing of the target: it is
// dropped (0). Scaling it by the anchor's excess instead would cap the target's share of its
// peak at the anchor's, which held-out data refutes: Gavel's Transformer, whose samples are not
// the stand-in's, beats the floor by 1.4-3.0x on a V100 and 1.8-2.0x on a K80, and so scaled
// the floor lifted 14 of its held-out predictions away from the truth (28.0 / 69 -> 29.1 / 70).
double peak_floor_per_sample(const WorkloadStats& w, const GpuSpec& target, Precision precision,
                             const GpuSpec* anchor = nullptr, const std::vector<Measurement>* measured = nullptr) {
  if (anchor != nullptr && measured != nullptr) {
    const double k = detail::peak_flop_seconds_per_sample_of_valid_layers(w.layers(), *anchor, precision);
    for (const Measurement& m : *measured) {
      if (m.iteration_s < k * m.local_batch) return 0.0;
    }
  }
  return detail::peak_flop_seconds_per_sample_of_valid_layers(w.layers(), target, precision);
}

void hold_to_floor(std::vector<double>& t, const std::vector<double>& grid, double per_sample_floor) {
  for (std::size_t i = 0; i < grid.size(); ++i) t[i] = std::max(t[i], per_sample_floor * grid[i]);
}

// The slope of the line fixed + per_sample x b, raised by the least that keeps it on or above the
// floor at every batch of the grid (the line fitted through held points can dip under it by the
// fit's residual); unchanged, bit for bit, where it does not dip.
double slope_held_to_floor(const std::vector<double>& grid, double fixed, double per_sample, double per_sample_floor) {
  double lift = 0;
  for (double b : grid) lift = std::max(lift, per_sample_floor - (fixed + per_sample * b) / b);
  return lift > 0 ? per_sample + lift : per_sample;
}

// Measurements taken under roofline `from`, restated under roofline `to` (the ratio at each batch).
std::vector<Measurement> restated(const std::vector<Measurement>& ms, const ComputeModel& from, const ComputeModel& to) {
  std::vector<Measurement> out = ms;
  for (Measurement& m : out) {
    m.precision.reset();  // restated at the precision of the call they are passed to
    const double k = (to.compute_s(m.local_batch) + to.optimizer_s) / (from.compute_s(m.local_batch) + from.optimizer_s);
    m.iteration_s *= k;
    if (m.forward_s >= 0) m.forward_s *= k;
    if (m.backward_s >= 0) m.backward_s *= k;
  }
  return out;
}

// What the features need of one GPU, computed once (one pass over the layers each).
struct GpuTerms {
  ComputeModel roofline;
  double membound = 0;
};

GpuTerms gpu_terms(const WorkloadStats& w, const GpuSpec& g, Precision precision) {
  check_gpu(g);
  return {w.roofline(g, precision), w.membound_share(g, precision)};
}

double per_sample_of(const ComputeModel& m, double batch) { return (m.compute_s(batch) + m.optimizer_s) / batch; }

std::vector<double> absolute_features_of(const GpuTerms& t, const GpuSpec& gpu, double batch, Precision precision) {
  // TF32 mode without TF32 units, and autocast without an FP16 path, run FP32.
  const bool runs_fp32 = (precision == Precision::tf32 && !(gpu.tf32_flops > 0)) ||
                         (precision == Precision::amp && !(gpu.fp16_flops > 0));
  const auto [amp, tf32] = precision_flags(runs_fp32 ? Precision::fp32 : precision);
  return {std::log(per_sample_of(t.roofline, batch)),
          std::log(matmul_peak_flops(gpu, precision) / 1e12),
          std::log(gpu.fp32_flops / 1e12),
          std::log(gpu.memory_bandwidth / 1e9),
          std::log(batch),
          t.membound,
          amp,
          tf32,
          fixed_share(t.roofline, batch)};
}

// The line t = fixed + per_sample * b split as the prior splits its terms: the optimizer step
// the prior's, at most half the fixed time; forward and backward in the prior's proportions
// (what anchor_to_measurements does with two points on the line, without its fallback for a
// fit with no intercept, which rounding can trigger when the line passes through the origin).
ComputeModel split_like(const ComputeModel& prior, double fixed, double per_sample) {
  const double share_fixed = prior.fixed_s() > 0 ? prior.forward_fixed_s / prior.fixed_s() : 0.5;
  const double share_slope = prior.forward_per_sample_s / prior.per_sample_s();
  ComputeModel out;
  out.optimizer_s = std::min(prior.optimizer_s, 0.5 * fixed);
  const double rest = fixed - out.optimizer_s;
  out.forward_fixed_s = rest * share_fixed;
  out.backward_fixed_s = rest * (1 - share_fixed);
  out.forward_per_sample_s = per_sample * share_slope;
  out.backward_per_sample_s = per_sample * (1 - share_slope);
  return out;
}

// The line `m` held to the floor about batch `pivot` (note "peak floor", predict_anchored's
// order at the measurement): turned about its value at `pivot` by the least slope that keeps it
// on or above the floor at every batch of the grid above `pivot`, its fixed cost lowered as much
// at `pivot` (at most to 0); then, where the floor is still not met (the line under it at
// `pivot` itself), its slope raised as slope_held_to_floor does. `m` itself, bit for bit, where
// it is on the floor's side at every batch of the grid.
// With `keep_optimizer` (a measured optimizer step: compute.cpp fit_to_measurements), the turn
// takes no time from `m`'s optimizer step: the compute's own fixed cost falls (at most to 0), and
// the step stays as measured (split_like would cap it at half the lowered fixed cost).
ComputeModel held_to_floor_about(const ComputeModel& m, const std::vector<double>& grid, double per_sample_floor,
                                 double pivot, bool keep_optimizer = false) {
  double fixed = m.fixed_s() + m.optimizer_s, per_sample = m.per_sample_s();
  if (slope_held_to_floor(grid, fixed, per_sample, per_sample_floor) == per_sample) return m;
  double lift = 0;
  for (double b : grid) {
    if (b > pivot) lift = std::max(lift, (per_sample_floor * b - (fixed + per_sample * b)) / (b - pivot));
  }
  lift = std::min(lift, (keep_optimizer ? m.fixed_s() : fixed) / pivot);  // no negative fixed cost
  fixed -= lift * pivot;
  per_sample += lift;
  ComputeModel out = split_like(m, fixed, slope_held_to_floor(grid, fixed, per_sample, per_sample_floor));
  if (keep_optimizer) {
    const double share_fixed = m.fixed_s() > 0 ? m.forward_fixed_s / m.fixed_s() : 0.5;  // as split_like's
    const double rest = std::max(0.0, fixed - m.optimizer_s);
    out.optimizer_s = m.optimizer_s;
    out.forward_fixed_s = rest * share_fixed;
    out.backward_fixed_s = rest * (1 - share_fixed);
  }
  return out;
}

// Note "lines in order": the dominance clip (note "dominance" in srift.learn.dominance) holds
// each GPU's time between the references' at every batch of the grid, but the engine uses the
// affine line fitted through those times, and two ordered curves of different shapes fit lines
// that cross: a GPU whose clipped curve is held to a slower GPU's at batch 1 and is far faster
// at the grid's end is fitted above that GPU at batch 1 by the fit's residual (a 4-layer
// d=256 transformer at AMP anchored on a T4: an A100-40GB 6.6% behind a V100 at batch 1; with
// no measurement a B200 5.0% behind a V100). The lines are therefore put in order too: the
// target's line, at the grid's two ends, is held between the references' own lines there (the
// lines each would be predicted with, fitted on the same grid: the GPUs the target dominates
// bound it from above, those that dominate it from below, the upper bound winning), and
// becomes the line through the held ends. Two lines in order at both ends of [1, B] are in
// order at every batch between, so the clip holds at every batch the line is used on, not only
// at the grid's points; and since a reference's line is held by the same rule, dominance being
// transitive, a GPU that dominates a reference is never predicted slower than that reference's
// own prediction on the same grid (the proof of srift.learn.dominance's clip, line by line).
// The line is the target's own, bit for bit, wherever it is already in order at both ends.
// Each reference's line is on or above its peak floor, which is at least the target's where
// the target dominates it, so the upper bound keeps the target on its floor; the floor is
// held again after (slope_held_to_floor), the floor winning where a degenerate case would
// cross it.
struct Line {
  double fixed = 0, per_sample = 0;
  double at(double b) const { return fixed + per_sample * b; }
};

struct LineBounds {
  double lo_first = -std::numeric_limits<double>::infinity(), lo_last = -std::numeric_limits<double>::infinity();
  double up_first = std::numeric_limits<double>::infinity(), up_last = std::numeric_limits<double>::infinity();
  void add_upper(const Line& l, double first, double last) {
    up_first = std::min(up_first, l.at(first));
    up_last = std::min(up_last, l.at(last));
  }
  void add_lower(const Line& l, double first, double last) {
    lo_first = std::max(lo_first, l.at(first));
    lo_last = std::max(lo_last, l.at(last));
  }
};

// `own` held between `bounds` at the grid's first and last batch (see note "lines in order"),
// then on or above `per_sample_floor` x b at every batch of the grid.
Line line_in_order(const Line& own, const LineBounds& bounds, const std::vector<double>& grid,
                   double per_sample_floor) {
  const double first = grid.front(), last = grid.back();
  const double v0 = own.at(first), v1 = own.at(last);
  const double h0 = std::min(std::max(v0, bounds.lo_first), bounds.up_first);
  const double h1 = std::min(std::max(v1, bounds.lo_last), bounds.up_last);
  if (h0 == v0 && h1 == v1) return own;
  Line out;
  if (last > first) {
    out.per_sample = (h1 - h0) / (last - first);
    out.fixed = h0 - out.per_sample * first;
  }
  if (!(last > first) || !(out.per_sample > 0) || out.fixed < 0) {
    // no line with a fixed cost >= 0 and a rising time passes both held ends: the one through
    // the origin under both (bounded from above where the bounds bind, the upper one winning)
    out.fixed = 0;
    out.per_sample = std::min(h0 / first, h1 / last);
  }
  out.per_sample = slope_held_to_floor(grid, out.fixed, out.per_sample, per_sample_floor);
  return out;
}

// The specs dominance compares: (matmul peak, convolutions' peak, FP32 peak, memory bandwidth).
// PyTorch's FP32 runs convolutions on TF32 (compute.hpp note "fp32 is PyTorch's"); at TF32 and
// AMP the convolutions' peak is the matmul peak.
struct Specs {
  double peak, conv_peak, fp32, bandwidth;
  bool operator==(const Specs& o) const {
    return peak == o.peak && conv_peak == o.conv_peak && fp32 == o.fp32 && bandwidth == o.bandwidth;
  }
};
// matmul_peak_flops at a precision checked already (dominance compares these thousands of
// times a catalog: checked once per specs_of, not once per peak).
double matmul_peak_of_checked(const GpuSpec& gpu, Precision precision) {
  if (precision == Precision::amp && gpu.fp16_flops > 0) return gpu.fp16_flops;
  if (precision != Precision::fp32 && gpu.tf32_flops > 0) return gpu.tf32_flops;
  return gpu.fp32_flops;
}
Specs specs_of(const GpuSpec& g, Precision p) {
  detail::require_enum("precision", static_cast<int>(p), 0, 2);
  const Precision conv = p == Precision::fp32 ? Precision::tf32 : p;
  return {matmul_peak_of_checked(g, p), matmul_peak_of_checked(g, conv), g.fp32_flops, g.memory_bandwidth};
}

// Note "same specs" (predict_anchored_memo).
bool same_specs(const GpuSpec& a, const GpuSpec& b, Precision p) { return specs_of(a, p) == specs_of(b, p); }

// A model input as its bits: a memo key equal only to the same input (NaN included).
struct FeatureHash {
  std::size_t operator()(const std::vector<double>& f) const {
    std::size_t h = f.size();
    for (double v : f) {
      std::uint64_t bits;
      std::memcpy(&bits, &v, sizeof bits);
      h ^= static_cast<std::size_t>(bits) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    }
    return h;
  }
};
struct FeatureBitsEqual {
  bool operator()(const std::vector<double>& a, const std::vector<double>& b) const {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
  }
};

// The same for a key of fixed length (no allocation to build or find it).
template <std::size_t N>
struct ArrayBitsHash {
  std::size_t operator()(const std::array<double, N>& a) const {
    // each number mixed on its own (no chain from one to the next), then the sum avalanched. The
    // sum does not see order: (anchor, target) and (target, anchor) share a bucket, which costs a
    // comparison, never a wrong entry (equality is bitwise); a position-mixed hash (splitmix64 per
    // number) was tried and built the catalog no faster (predict_fingerprint totals 190-210 ms
    // against 185-197 ms)
    std::uint64_t h = N;
    for (std::size_t i = 0; i < N; ++i) {
      std::uint64_t bits;
      std::memcpy(&bits, &a[i], sizeof bits);
      bits ^= bits >> 31;
      h += (bits + i) * 0x9e3779b97f4a7c15ULL;
    }
    h ^= h >> 32;
    h *= 0xd6e8feb86659fd93ULL;
    h ^= h >> 32;
    return static_cast<std::size_t>(h);
  }
};
template <std::size_t N>
struct ArrayBitsEqual {
  bool operator()(const std::array<double, N>& a, const std::array<double, N>& b) const {
    return std::memcmp(a.data(), b.data(), N * sizeof(double)) == 0;
  }
};

}  // namespace

// Note "memo": one prediction evaluates the same GPU's roofline terms (a pass over every layer)
// and the same model inputs many times: each reference GPU at each grid batch bounds both the
// anchor's measured curve and the target's ratio, and every grid batch walks the layers again
// for each GPU. One call keeps each result the first time it is computed, keyed by the exact
// inputs, so the answer is bit-identical to computing it again (compared with the core before
// it over 6 workloads x 7 GPUs x 3 precisions, absolute and anchored on one and two GPUs). It belongs to one workload, never shared across threads.
// Note "shared memo": since the note "lines in order" every prediction also fits the lines of
// the dominance references it is bounded by (their guarded ratios at every grid batch, each
// clipped by every reference in turn), the same for every target: the engine's 15 catalog GPUs
// anchored on a T4 took 0.25 s, 10x what they took before. A LearnedCompute::Cache keeps one
// Memo across calls for one workload and one LearnedCompute, so each is computed once. That is
// safe because every entry is keyed by all it depends on besides the workload and the models:
//   terms           the GPU's five spec numbers and the precision (gpu_terms reads no more);
//   absolute, ratio the model's input, bit for bit;
//   guarded         guarded_log_ratio_memo's inputs: both GPUs' spec numbers and launch_year
//                   (the data edge's lean), the batch, the precision, the observed deviation;
//   absolute_lines  absolute_line_memo's: the GPU's spec numbers and launch_year, the precision
//                   and the grid itself (each target's grid is its own max_batch's).
// A GPU's name is read only by error messages, and an evaluation that throws keeps nothing.
// The workload is the Cache's own copy, and the Cache refuses a LearnedCompute other than the
// one (or a copy of the one) it was first used with (id_), whose models the entries are of.
// tests/python/test_learned_compute.py test_a_shared_cache_predicts_bit_for_bit_as_fresh_calls
// compares it with fresh calls (zoo workloads x catalog GPUs x precisions x grids, anchored or not).
// Note "memo by inputs": with the shared memo, an Engine's catalog still spent most of its time
// finding what it had kept: every grid batch of every target built the ratio model's 32 features
// (ten logs) and hashed them to find a ratio computed for an earlier target, and every target
// fitted again the anchored lines of the references that bound it (note "lines in order").
// Kept now, each by all it reads besides the workload and the models, as the entries above:
//   ratio_parts      anchored_log_ratio_from's model outputs for a pair of GPUs at a batch (the
//                    roofline ratio, the ratio model's, the target's absolute correction): both
//                    GPUs' spec numbers and launch_year, the batch, the precision (the anchor's
//                    own correction and the observed deviation are combined after, as before);
//   absolute_by_gpu  the absolute model's output for a GPU at a batch: its spec numbers and
//                    launch_year, the batch, the precision;
//   anchored_lines   predict_anchored_fit's line of a GPU before the lines are put in order: the
//                    anchor's and the GPU's spec numbers and launch_year, the runs (batch, times,
//                    precision), the precision, the grid's span and whether the ratio model
//                    covers the pair (so a reference's line is fitted once per anchor and grid);
//   measured_models, absolute_results  measured_model_memo and predict_absolute_memo by every
//                    argument (the roofline's terms, the runs, max_batch), the latter also by
//                    Memo::bounding, which changes it (note "across the fp32 paths, from below").
// The fixed-size keys (guarded, ratio_parts, absolute_by_gpu) take no allocation to build or find.
// Bit-identical: each entry is the value the same computation gave; bench/predict_fingerprint.py
// compares every catalog GPU's model and five srift.predict answers (resnet50 and BERT-base, FP32
// and AMP, no measurement, anchored on one and two GPUs, measured) before and after, and
// tests/cpp ACacheKeepsApartTheRunsGridsAndGpusItsLinesAndModelsAreKeptBy fails where a key
// leaves out the runs, the grid or max_batch. The table of grid ends (note "own grids") selects
// the Memo itself: every entry above is computed under one table (ACacheKeepsEachTableOfGridEndsApart).
struct LearnedCompute::Memo {
  using Cache = std::unordered_map<std::vector<double>, double, FeatureHash, FeatureBitsEqual>;
  explicit Memo(const WorkloadStats& w, const GridEnds& ends = {}) : workload(&w), grid_ends(ends) {}
  const WorkloadStats* workload;
  // Note "own grids": the call's table, checked and sorted by memory (checked_grid_ends). Every entry
  // of this Memo is computed under it: a Cache keeps one Memo per table (memo_of).
  GridEnds grid_ends;
  // The end of g's own grid where the table lists its memory: true and `out` set; else false.
  bool own_max_batch(const GpuSpec& g, double& out) const {
    const auto it = std::lower_bound(grid_ends.begin(), grid_ends.end(), g.memory_bytes,
                                     [](const std::pair<double, double>& e, double m) { return e.first < m; });
    if (it == grid_ends.end() || it->first != g.memory_bytes) return false;
    out = it->second;
    return true;
  }
  // by the GPU's five spec numbers and the precision, bitwise as every other table (std::map's <
  // took a NaN spec for another GPU's entry; later checks refused it, this does not rely on them)
  std::unordered_map<std::array<double, 6>, GpuTerms, ArrayBitsHash<6>, ArrayBitsEqual<6>> terms;
  Cache absolute, ratio;
  // guarded_log_ratio_memo by guarded_key
  std::unordered_map<std::array<double, 15>, double, ArrayBitsHash<15>, ArrayBitsEqual<15>> guarded;
  std::unordered_map<std::vector<double>, std::pair<double, double>, FeatureHash, FeatureBitsEqual>
      absolute_lines;  // absolute_line_memo by absolute_line_key
  // Note "across the fp32 paths": a reference's own FP32 model, by reference_key. A GPU with TF32
  // is bounded by the references it beats, each bounded by those it beats in turn: without the
  // memo the same references' predictions were made again down every chain.
  std::unordered_map<std::vector<double>, ComputeModel, FeatureHash, FeatureBitsEqual> reference_models;
  // Note "memo by inputs": what anchored_log_ratio_from reads of the models for one pair of GPUs
  // at one batch, by ratio_parts_key; the ratio references' anchored lines (predict_anchored_fit)
  // by anchored_line_key; measured_model_memo and predict_absolute_memo by their inputs.
  struct RatioParts {
    double roofline_log_ratio = 0;
    bool covers = false;                                    // has_fp16_path
    double ratio = std::numeric_limits<double>::quiet_NaN();  // the ratio model's output (where it covers)
    double corr_b = std::numeric_limits<double>::quiet_NaN(); // the absolute model's (where the blend reads it)
  };
  std::unordered_map<std::array<double, 14>, RatioParts, ArrayBitsHash<14>, ArrayBitsEqual<14>> ratio_parts;
  // The absolute model's output for one GPU at one batch (absolute_features_of its terms_of),
  // by the GPU's spec numbers, the batch and the precision: no features built to find it.
  std::unordered_map<std::array<double, 8>, double, ArrayBitsHash<8>, ArrayBitsEqual<8>> absolute_by_gpu;
  double absolute_of(const LearnedModel& model, const GpuTerms& t, const GpuSpec& g, double batch, Precision precision);
  std::unordered_map<std::vector<double>, std::pair<double, double>, FeatureHash, FeatureBitsEqual> anchored_lines;
  std::unordered_map<std::vector<double>, ComputeModel, FeatureHash, FeatureBitsEqual> measured_models;
  std::unordered_map<std::vector<double>, LearnedComputeResult, FeatureHash, FeatureBitsEqual> absolute_results;
  static std::array<double, 14> ratio_parts_key(const GpuSpec& a, const GpuSpec& b, double batch, Precision precision) {
    return {a.memory_bytes, a.fp32_flops, a.tf32_flops, a.fp16_flops, a.memory_bandwidth,
            static_cast<double>(a.launch_year), b.memory_bytes, b.fp32_flops, b.tf32_flops, b.fp16_flops,
            b.memory_bandwidth, static_cast<double>(b.launch_year), batch, static_cast<double>(precision)};
  }
  static void push_measurements(std::vector<double>& key, const std::vector<Measurement>& measurements) {
    key.push_back(static_cast<double>(measurements.size()));
    for (const Measurement& m : measurements) {
      key.insert(key.end(), {m.local_batch, m.iteration_s, m.forward_s, m.backward_s,
                             m.precision ? static_cast<double>(*m.precision) : -1.0});
    }
  }
  static std::vector<double> anchored_line_key(const GpuSpec& anchor, const std::vector<Measurement>& measurements,
                                               const GpuSpec& g, Precision precision, double span, bool covers) {
    std::vector<double> key;
    key.reserve(15 + 5 * measurements.size());
    push_spec(key, anchor);
    push_spec(key, g);
    key.insert(key.end(), {static_cast<double>(precision), span, covers ? 1.0 : 0.0});
    push_measurements(key, measurements);
    return key;
  }
  static std::vector<double> measured_model_key(const GpuSpec& gpu, const ComputeModel& roofline,
                                                const std::vector<Measurement>& measurements, Precision precision,
                                                double max_batch) {
    std::vector<double> key;
    key.reserve(15 + 5 * measurements.size());
    push_spec(key, gpu);
    key.insert(key.end(), {roofline.forward_fixed_s, roofline.forward_per_sample_s, roofline.backward_fixed_s,
                           roofline.backward_per_sample_s, roofline.optimizer_s, roofline.accumulate_s,
                           static_cast<double>(precision), max_batch});
    push_measurements(key, measurements);
    return key;
  }
  // Note "across the fp32 paths, from below": true while a reference's FP32 model is predicted
  // to bound another GPU's. Such a model is held from above only (by the references it beats),
  // so every entry of reference_models is that one model, whichever call computed it first.
  bool bounding = false;
  struct Bounding {  // `bounding` set for a scope
    Bounding(Memo& memo, bool on) : memo_(memo), was_(memo.bounding) { memo.bounding = on; }
    ~Bounding() { memo_.bounding = was_; }
    Memo& memo_;
    const bool was_;
  };
  // A reference's FP32 model by reference_key, predicted by `predict` (held from above only).
  template <class Predict>
  const ComputeModel& reference_model(std::vector<double>&& key, Predict&& predict) {
    auto kept = reference_models.find(key);
    if (kept == reference_models.end()) {
      const Bounding as_bound(*this, true);
      kept = reference_models.emplace(std::move(key), predict()).first;
    }
    return kept->second;
  }
  static std::vector<double> reference_key(const GpuSpec& g, double span, const GpuSpec* anchor,
                                           const std::vector<Measurement>* measurements) {
    // The runs whole, as push_measurements keys them: the anchored prediction reads forward_s
    // and backward_s too (anchor_to_measurements fits forward + backward where every run timed
    // them), so runs differing only there took each other's reference models.
    std::vector<double> key;
    key.reserve(14 + (anchor != nullptr ? 5 * measurements->size() : 0));
    push_spec(key, g);
    key.push_back(span);
    if (anchor != nullptr) {
      push_spec(key, *anchor);
      push_measurements(key, *measurements);
    }
    return key;
  }

  // Every number of a GPU a prediction reads (its name only names it in errors).
  static void push_spec(std::vector<double>& key, const GpuSpec& g) {
    key.insert(key.end(), {g.memory_bytes, g.fp32_flops, g.tf32_flops, g.fp16_flops, g.memory_bandwidth,
                           static_cast<double>(g.launch_year)});
  }
  static std::array<double, 15> guarded_key(const GpuSpec& anchor, const GpuSpec& target, double batch,
                                           Precision precision, double observed_anchor) {
    return {anchor.memory_bytes,
            anchor.fp32_flops,
            anchor.tf32_flops,
            anchor.fp16_flops,
            anchor.memory_bandwidth,
            static_cast<double>(anchor.launch_year),
            target.memory_bytes,
            target.fp32_flops,
            target.tf32_flops,
            target.fp16_flops,
            target.memory_bandwidth,
            static_cast<double>(target.launch_year),
            batch,
            static_cast<double>(precision),
            observed_anchor};
  }
  static std::vector<double> absolute_line_key(const GpuSpec& g, Precision precision, const std::vector<double>& grid) {
    std::vector<double> key;
    key.reserve(7 + grid.size());
    push_spec(key, g);
    key.push_back(static_cast<double>(precision));
    key.insert(key.end(), grid.begin(), grid.end());
    return key;
  }

  const GpuTerms& terms_of(const GpuSpec& g, Precision precision) {
    const std::array<double, 6> key{g.memory_bytes, g.fp32_flops,       g.tf32_flops,
                                    g.fp16_flops,   g.memory_bandwidth, static_cast<double>(precision)};
    auto it = terms.find(key);
    if (it == terms.end()) it = terms.emplace(key, gpu_terms(*workload, g, precision)).first;
    return it->second;
  }
  static double predict(std::unordered_map<std::vector<double>, double, FeatureHash, FeatureBitsEqual>& cache,
                        const LearnedModel& model, std::vector<double>&& f) {
    auto it = cache.find(f);
    if (it != cache.end()) return it->second;
    const double v = model.predict(f);
    cache.emplace(std::move(f), v);
    return v;
  }
};

double LearnedCompute::Memo::absolute_of(const LearnedModel& model, const GpuTerms& t, const GpuSpec& g, double batch,
                                         Precision precision) {
  const std::array<double, 8> key{g.memory_bytes,     g.fp32_flops,
                                  g.tf32_flops,       g.fp16_flops,
                                  g.memory_bandwidth, static_cast<double>(g.launch_year),
                                  batch,              static_cast<double>(precision)};
  const auto kept = absolute_by_gpu.find(key);
  if (kept != absolute_by_gpu.end()) return kept->second;
  const double v = predict(absolute, model, absolute_features_of(t, g, batch, precision));
  absolute_by_gpu.emplace(key, v);
  return v;
}

WorkloadStats::WorkloadStats(std::vector<LayerCost> layers, double optimizer_bytes)
    : layers_(std::move(layers)), optimizer_bytes_(optimizer_bytes) {
  detail::require_finite_nonneg("optimizer_bytes", optimizer_bytes);
  if (layers_.empty()) throw std::invalid_argument("layers must not be empty, got 0 layers");
  double flops = 0, activation = 0, params = 0;
  double by_kind[kNumOpKinds] = {};
  detail::validate_layers(layers_);
  for (const LayerCost& l : layers_) {
    by_kind[static_cast<int>(l.kind)] += l.forward_flops + l.backward_flops;
    flops += l.forward_flops + l.backward_flops;
    activation += l.forward_bytes;
    params += l.param_bytes;
  }
  if (!std::isfinite(flops) || !std::isfinite(activation) || !std::isfinite(params)) {  // inf / inf shares: NaN
    throw std::invalid_argument("layers' FLOPs or bytes sum past what a double holds (FLOPs " + detail::fmt(flops) +
                                ", forward bytes " + detail::fmt(activation) + ", parameter bytes " +
                                detail::fmt(params) + ")");
  }
  const double total = flops > 0 ? flops : 1.0;
  for (int k = 0; k < kNumOpKinds; ++k) shares_[k] = by_kind[k] / total;
  const double traffic = 3 * activation + params;
  log_intensity_ = std::log10(std::max(total, 1.0) / (traffic > 0 ? traffic : 1.0));
  flops_per_sample_ = total;
}

double WorkloadStats::flop_share(OpKind kind) const {
  const int k = static_cast<int>(kind);
  if (k < 0 || k >= kNumOpKinds) throw std::out_of_range("kind must be a known op kind, got " + std::to_string(k));
  return shares_[k];
}

double WorkloadStats::log_work(double batch) const {
  // NaN came back as NaN (std::max(NaN, 1.0) is NaN), a feature no model had seen
  if (!(batch >= 0 && batch < std::numeric_limits<double>::infinity())) detail::fail("batch", "finite and >= 0", batch);
  return std::log10(std::max(flops_per_sample_ * batch, 1.0));
}

double WorkloadStats::membound_share(const GpuSpec& gpu, Precision precision) const {
  gpu.validate();  // a memory_bandwidth of 0 gave 0 x inf: NaN
  const double peak = matmul_peak_flops(gpu, precision);
  const double tensor_peak =
      peak * ((precision != Precision::fp32 && peak > gpu.fp32_flops) ? kTensorEfficiency : kCudaEfficiency);
  const double cuda_peak = gpu.fp32_flops * kCudaEfficiency;
  const double scale = precision == Precision::amp ? 0.5 : 1.0;
  const double bandwidth = gpu.memory_bandwidth * kMemoryEfficiency;
  double total = 0, bound = 0;
  for (const LayerCost& l : layers_) {
    const double t_flop = (l.forward_flops + l.backward_flops) / (tensor_kind(l.kind) ? tensor_peak : cuda_peak);
    const double t_mem = 3 * l.forward_bytes * scale / bandwidth;
    const double t = std::max(t_flop, t_mem);
    total += t;
    if (t_mem > t_flop) bound += t;
  }
  if (!std::isfinite(total)) {  // inf / inf: a NaN share
    throw std::invalid_argument("the layers' roofline time on gpu '" + gpu.name +
                                "' is not finite (FLOPs or bytes past what its peaks turn into seconds)");
  }
  return bound / (total > 0 ? total : 1.0);
}

ComputeModel WorkloadStats::roofline(const GpuSpec& gpu, Precision precision) const {
  // the layers were validated by the constructor and never change
  return detail::roofline_compute_of_valid_layers(layers_, gpu, precision, optimizer_bytes_, RooflineParams{});
}

double matmul_peak_flops(const GpuSpec& gpu, Precision precision) {
  detail::require_enum("precision", static_cast<int>(precision), 0, 2);
  return matmul_peak_of_checked(gpu, precision);
}

bool dominates(const GpuSpec& b, const GpuSpec& a, Precision precision) {
  const Specs sb = specs_of(b, precision), sa = specs_of(a, precision);
  return sb.peak >= sa.peak && sb.conv_peak >= sa.conv_peak && sb.fp32 >= sa.fp32 && sb.bandwidth >= sa.bandwidth &&
         !(sb == sa);
}

bool has_fp16_path(const GpuSpec& anchor, const GpuSpec& target, Precision precision) {
  return precision != Precision::amp || (anchor.fp16_flops > 0 && target.fp16_flops > 0);
}

double roofline_per_sample_s(const WorkloadStats& w, const GpuSpec& gpu, Precision precision, double batch) {
  check_batch("batch", batch);
  const ComputeModel m = w.roofline(gpu, precision);
  return (m.compute_s(batch) + m.optimizer_s) / batch;
}

namespace {

// ratio_features from each GPU's terms (computed once per GPU where a caller pairs one GPU with
// many: the anchor with every reference).
std::vector<double> ratio_features_of(const WorkloadStats& w, const GpuTerms& ta, const GpuSpec& a, double batch_a,
                                      const GpuTerms& tb, const GpuSpec& b, double batch_b, Precision precision) {
  const double ra = per_sample_of(ta.roofline, batch_a), rb = per_sample_of(tb.roofline, batch_b);
  const double peak = std::log(matmul_peak_flops(b, precision) / matmul_peak_flops(a, precision));
  const double bw = std::log(b.memory_bandwidth / a.memory_bandwidth);
  const auto [amp, tf32] = precision_flags(precision);
  const double shared[7] = {w.flop_share(OpKind::matmul), w.flop_share(OpKind::conv), w.flop_share(OpKind::attention),
                            w.flop_share(OpKind::recurrent), w.flop_share(OpKind::embedding), amp, tf32};
  std::vector<double> f = {std::log(rb / ra), peak, std::log(b.fp32_flops / a.fp32_flops), bw,
                           std::log(batch_b / batch_a), ta.membound, tb.membound,
                           shared[0], shared[1], shared[2], shared[3], shared[4], w.log_intensity(), amp, tf32,
                           w.log_work(batch_b), fixed_share(ta.roofline, batch_a), fixed_share(tb.roofline, batch_b)};
  f.reserve(kRatioFeatures);
  for (double v : shared) {
    f.push_back(v * peak);
    f.push_back(v * bw);
  }
  return f;
}

}  // namespace

std::vector<double> ratio_features(const WorkloadStats& w, const GpuSpec& a, double batch_a, const GpuSpec& b,
                                   double batch_b, Precision precision) {
  check_batch("batch_a", batch_a);
  check_batch("batch_b", batch_b);
  return ratio_features_of(w, gpu_terms(w, a, precision), a, batch_a, gpu_terms(w, b, precision), b, batch_b,
                           precision);
}

std::vector<double> absolute_features(const WorkloadStats& w, const GpuSpec& gpu, double batch, Precision precision) {
  check_batch("batch", batch);
  return absolute_features_of(gpu_terms(w, gpu, precision), gpu, batch, precision);
}

// Note "feature names": what ratio_features_of and absolute_features_of compute, slot by slot,
// named as srift.learn.features names them (RATIO_FEATURES, ABSOLUTE_FEATURES; a Python test
// holds the two equal). A model document lists the features it was trained on; the core feeds
// it these values by position, so a document whose list differs (reordered, renamed, from
// another srift) is refused by name rather than evaluated with features in the wrong slots.
const std::vector<std::string>& ratio_feature_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out = {"log_roof_ratio", "log_peak_ratio", "log_fp32_ratio", "log_bw_ratio",
                                    "log_batch_ratio", "membound_a", "membound_b", "share_matmul", "share_conv",
                                    "share_attention", "share_recurrent", "share_embedding", "log_intensity",
                                    "prec_amp", "prec_tf32", "log_work", "fixed_share_a", "fixed_share_b"};
    // ratio_features_of's products: each shared feature times the peak, then the bandwidth ratio
    for (const char* shared : {"share_matmul", "share_conv", "share_attention", "share_recurrent", "share_embedding",
                               "prec_amp", "prec_tf32"}) {
      for (const char* spec : {"log_peak_ratio", "log_bw_ratio"}) out.push_back(std::string(shared) + "_x_" + spec);
    }
    return out;
  }();
  return names;
}

const std::vector<std::string>& absolute_feature_names() {
  static const std::vector<std::string> names = {"log_roof", "log_peak",  "log_fp32",   "log_bw", "log_batch",
                                                 "membound", "prec_amp", "prec_tf32", "fixed_share"};
  return names;
}

std::vector<double> batch_grid(double max_batch) {
  check_max_batch(max_batch);  // note "max_batch"
  // A local batch is an int: a grid past INT_MAX samples only extrapolated the model (at 1e308
  // the per-sample time fell 3e10x).
  constexpr double kLargestBatch = 2147483647.0;
  const double hi = (std::isfinite(max_batch) && max_batch > 0)
                        ? std::min(std::max(max_batch, kGridMinSpan), kLargestBatch)
                        : kGridMinSpan;
  const int n = std::max(3, static_cast<int>(std::ceil(std::log10(hi) * kGridPointsPerDecade)) + 1);
  // As numpy.geomspace: 10 ** linspace(0, log10(hi), n), endpoints exact; then rounded half
  // to even (numpy.round), at least 1, sorted and unique.
  const double stop = std::log10(hi);
  const double step = stop / (n - 1);
  std::vector<double> grid;
  grid.reserve(n);
  for (int i = 0; i < n; ++i) {
    const double v = i == 0 ? 1.0 : (i == n - 1 ? hi : std::pow(10.0, i * step));
    grid.push_back(std::max(1.0, std::nearbyint(v)));
  }
  std::sort(grid.begin(), grid.end());
  grid.erase(std::unique(grid.begin(), grid.end()), grid.end());
  return grid;
}

namespace {

// affine_relative_fit on points scaled to magnitudes near 1 (see there).
std::pair<double, double> affine_relative_fit_scaled(const std::vector<double>& batches,
                                                     const std::vector<double>& seconds, bool floored,
                                                     double min_per_sample) {
  // Least squares of [1, b] / t against 1: the normal equations of two unknowns.
  double s00 = 0, s01 = 0, s11 = 0, r0 = 0, r1 = 0, mean_per_sample = 0;
  for (std::size_t i = 0; i < batches.size(); ++i) {
    const double u = 1.0 / seconds[i], v = batches[i] / seconds[i];
    s00 += u * u;
    s01 += u * v;
    s11 += v * v;
    r0 += u;
    r1 += v;
    mean_per_sample += seconds[i] / batches[i];
  }
  mean_per_sample /= static_cast<double>(batches.size());
  // squares past a double even at the scale of the points' middle: no fit (the caller throws)
  const double sums[] = {s00, s01, s11, r0, r1, mean_per_sample};
  for (double v : sums) {
    if (!(v > 0 && v < std::numeric_limits<double>::infinity())) {
      return {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::quiet_NaN()};
    }
  }
  const double det = s00 * s11 - s01 * s01;
  const bool one_batch = !(std::abs(det) > 1e-12 * s00 * s11);
  double fixed = one_batch ? 0.0 : (r0 * s11 - r1 * s01) / det;
  double per_sample = one_batch ? 0.0 : (s00 * r1 - s01 * r0) / det;
  if (floored) {
    // The slope held at its floor where it falls short; the intercept refitted under it.
    if (one_batch || !(per_sample >= min_per_sample)) {
      per_sample = min_per_sample;
      fixed = (r0 - per_sample * s01) / s00;
    }
    if (fixed < 0) return {0.0, std::max(min_per_sample, r1 / s11)};
    return {fixed, per_sample};
  }
  if (one_batch) return {0.0, mean_per_sample};
  if (!(per_sample > 0)) return {0.0, mean_per_sample};
  if (fixed < 0) return {0.0, r1 / s11};  // through the origin: sum(b/t) / sum((b/t)^2)
  return {fixed, per_sample};
}

}  // namespace

std::pair<double, double> affine_relative_fit(const std::vector<double>& batches, const std::vector<double>& seconds,
                                              double min_per_sample) {
  if (batches.size() != seconds.size() || batches.empty()) {
    throw std::invalid_argument("batches and seconds must have the same, non-zero length, got " +
                                std::to_string(batches.size()) + " and " + std::to_string(seconds.size()));
  }
  for (std::size_t i = 0; i < batches.size(); ++i) {
    detail::require_positive("batches[" + std::to_string(i) + "]", batches[i]);
    detail::require_positive("seconds[" + std::to_string(i) + "]", seconds[i]);
  }
  detail::require_finite_nonneg("min_per_sample", min_per_sample);
  // The normal equations square 1/t and b/t: seconds near 1e300 underflowed them to 0 (a fixed
  // time of +inf came back), near 1e-300 overflowed them. Fit on seconds and batches scaled
  // by powers of two to around 1, then scale back: exact, so wherever nothing under- or
  // overflowed the fit is the same to the bit.
  const auto [t_lo, t_hi] = std::minmax_element(seconds.begin(), seconds.end());
  const auto [b_lo, b_hi] = std::minmax_element(batches.begin(), batches.end());
  const int et = (std::ilogb(*t_lo) + std::ilogb(*t_hi)) / 2;
  const int eb = (std::ilogb(*b_lo) + std::ilogb(*b_hi)) / 2;
  std::vector<double> b(batches.size()), t(seconds.size());
  for (std::size_t i = 0; i < batches.size(); ++i) {
    b[i] = std::scalbn(batches[i], -eb);
    t[i] = std::scalbn(seconds[i], -et);
  }
  auto [fixed, per_sample] =
      affine_relative_fit_scaled(b, t, min_per_sample > 0, std::scalbn(min_per_sample, eb - et));
  fixed = std::scalbn(fixed, et);
  per_sample = std::scalbn(per_sample, et - eb);
  if (!std::isfinite(fixed) || !std::isfinite(per_sample)) {
    throw std::invalid_argument("seconds / batches span too wide a range to fit (seconds " + detail::fmt(*t_lo) +
                                " to " + detail::fmt(*t_hi) + ", batches " + detail::fmt(*b_lo) + " to " +
                                detail::fmt(*b_hi) + "): the fit is not a finite number");
  }
  return {fixed, per_sample};
}

void LearnedComputeConfig::validate() const {
  auto unit = [](const char* field, double v) {
    if (!(v >= 0 && v <= 1)) detail::fail(field, "in [0, 1]", v);
  };
  unit("blend_weight", blend_weight);
  unit("shrink", shrink);
  const std::pair<const char*, double> finite[] = {{"anchored_p10", anchored_p10}, {"anchored_p90", anchored_p90},
                                                   {"roofline_p10", roofline_p10}, {"roofline_p90", roofline_p90},
                                                   {"absolute_p10", absolute_p10}, {"absolute_p90", absolute_p90}};
  for (const auto& [field, v] : finite) detail::require_log_factor(field, v);  // validate.hpp note "log factor"
  // Log residual quantiles: an inverted pair made p10 factors above p90 (a band of no width).
  const std::pair<const char*, std::pair<double, double>> pairs[] = {{"anchored_p10", {anchored_p10, anchored_p90}},
                                                                     {"roofline_p10", {roofline_p10, roofline_p90}},
                                                                     {"absolute_p10", {absolute_p10, absolute_p90}}};
  for (const auto& [field, pair] : pairs) {
    if (pair.first > pair.second) detail::fail(field, "<= its p90 (" + detail::fmt(pair.second) + ")", pair.first);
  }
  const std::pair<const char*, std::pair<double, double>> bands[] = {
      {"measured", {measured_p10, measured_p90}}, {"measured_per_e_fold", {measured_per_e_fold_p10, measured_per_e_fold_p90}}};
  for (const auto& [field, band] : bands) {
    // Factors around the prediction: p10 in (0, 1], p90 >= 1 (and finite).
    if (!(band.first > 0 && band.first <= 1)) detail::fail(std::string(field) + "_p10", "in (0, 1]", band.first);
    if (!(band.second >= 1 && std::isfinite(band.second))) {
      detail::fail(std::string(field) + "_p90", "finite and >= 1", band.second);
    }
  }
  if (edge_year != 0 && (edge_year < 1990 || edge_year > 2100)) {
    detail::fail("edge_year", "0 (none) or in 1990-2100", edge_year);
  }
  const std::pair<const char*, std::array<double, 3>> edges[] = {
      {"edge_anchored", {edge_anchored_p10, edge_anchored_p50, edge_anchored_p90}},
      {"edge_absolute", {edge_absolute_p10, edge_absolute_p50, edge_absolute_p90}}};
  for (const auto& [field, q] : edges) {
    const std::string f = field;
    for (std::size_t i = 0; i < 3; ++i) {  // validate.hpp note "log factor"
      detail::require_log_factor(f + (i == 0 ? "_p10" : i == 1 ? "_p50" : "_p90"), q[i]);
    }
    if (q[0] > q[1]) detail::fail(f + "_p10", "<= its p50 (" + detail::fmt(q[1]) + ")", q[0]);
    if (q[1] > q[2]) detail::fail(f + "_p50", "<= its p90 (" + detail::fmt(q[2]) + ")", q[1]);
    // at_data_edge takes exp() of the spreads about the lean
    detail::require_log_factor(f + "_p90 - " + f + "_p50", q[2] - q[1]);
    detail::require_log_factor(f + "_p50 - " + f + "_p10", q[1] - q[0]);
  }
  for (std::size_t i = 0; i < ratio_references.size(); ++i) ratio_references[i].validate();
  for (std::size_t i = 0; i < absolute_references.size(); ++i) absolute_references[i].validate();
}

namespace {

using detail::json::Json;

// {"p10": .., "p90": ..} at `path` as log residuals.
std::pair<double, double> p10_p90(const Json& obj, const std::string& path) {
  return {detail::json::number(detail::json::field(obj, path, "p10"), path + ".p10"),
          detail::json::number(detail::json::field(obj, path, "p90"), path + ".p90")};
}

// A dominance_guard's reference GPUs with their specs; none where the object has no guard (a
// null is no guard: document_structure refused it, as the schema does).
std::vector<GpuSpec> guard_references(const Json& owner, const std::string& path) {
  std::vector<GpuSpec> out;
  const Json* guard = owner.find("dominance_guard");
  if (guard == nullptr) return out;
  const std::string g = path + ".dominance_guard";
  const Json& keys = detail::json::field(*guard, g, "references");
  const Json& specs = detail::json::field(*guard, g, "reference_specs");
  if (keys.t != Json::T::array || keys.arr.empty()) detail::json::bad(g + ".references", "must be a non-empty array");
  for (std::size_t i = 0; i < keys.arr.size(); ++i) {
    const std::string key = detail::json::string(keys.arr[i], g + ".references[" + std::to_string(i) + "]");
    const std::string sp = g + ".reference_specs." + key;
    const Json& spec = detail::json::field(specs, g + ".reference_specs", key);
    GpuSpec gpu;
    gpu.name = key;
    gpu.fp32_flops = detail::json::number(detail::json::field(spec, sp, "fp32_flops"), sp + ".fp32_flops");
    gpu.tf32_flops = detail::json::number(detail::json::field(spec, sp, "tf32_flops"), sp + ".tf32_flops");
    gpu.fp16_flops = detail::json::number(detail::json::field(spec, sp, "fp16_flops"), sp + ".fp16_flops");
    gpu.memory_bandwidth =
        detail::json::number(detail::json::field(spec, sp, "memory_bandwidth"), sp + ".memory_bandwidth");
    gpu.memory_bytes = detail::json::number(detail::json::field(spec, sp, "memory_bytes"), sp + ".memory_bytes");
    try {
      check_gpu(gpu);
    } catch (const std::invalid_argument& e) {
      detail::json::bad(sp, std::string("is not a valid GPU: ") + e.what());
    }
    out.push_back(gpu);
  }
  return out;
}

// A document's data_edge (note "data edge"): {launch_year, p10, p50, p90}; launch_year 0 where
// the document has none.
struct DataEdge {
  int launch_year = 0;
  double p10 = 0, p50 = 0, p90 = 0;
};

DataEdge data_edge(const Json& doc, const std::string& path) {
  DataEdge e;
  const Json* edge = doc.find("data_edge");
  if (edge == nullptr) return e;
  const std::string p = path + ".data_edge";
  const double year = detail::json::number(detail::json::field(*edge, p, "launch_year"), p + ".launch_year");
  if (!(year >= 1990 && year <= 2100 && year == std::floor(year))) {
    detail::json::bad(p + ".launch_year", "must be a whole year in 1990-2100, got " + detail::fmt(year));
  }
  e.launch_year = static_cast<int>(year);
  e.p10 = detail::json::number(detail::json::field(*edge, p, "p10"), p + ".p10");
  e.p50 = detail::json::number(detail::json::field(*edge, p, "p50"), p + ".p50");
  e.p90 = detail::json::number(detail::json::field(*edge, p, "p90"), p + ".p90");
  return e;
}

}  // namespace

LearnedComputeConfig learned_compute_config(const std::string& ratio_json, const std::string& absolute_json) {
  const Json ratio = detail::json::Parser(ratio_json).parse_document();
  const Json absolute = detail::json::Parser(absolute_json).parse_document();
  if (ratio.t != Json::T::object) detail::json::bad("compute_ratio", "must be an object");
  if (absolute.t != Json::T::object) detail::json::bad("compute_absolute", "must be an object");
  // Every key of each document the schema refuses is refused first, naming it, whether this
  // reads it or not (learned_document.hpp document_structure; the kind is the argument's
  // role), so that a misspelled optional field is no silent default; so is every value the
  // schema refuses, a null included (a null dominance_guard, data_edge, absolute_blend,
  // measured_band or roofline_residuals was taken for an absent one).
  detail::json::document_structure(ratio, "compute_ratio", std::string("compute_ratio"));
  detail::json::document_structure(absolute, "compute_absolute", std::string("compute_absolute"));
  LearnedComputeConfig cfg;
  std::tie(cfg.anchored_p10, cfg.anchored_p90) =
      p10_p90(detail::json::field(ratio, "compute_ratio", "residuals"), "compute_ratio.residuals");
  const Json* roof = ratio.find("roofline_residuals");
  std::tie(cfg.roofline_p10, cfg.roofline_p90) =
      roof != nullptr ? p10_p90(*roof, "compute_ratio.roofline_residuals")
                      : std::make_pair(cfg.anchored_p10, cfg.anchored_p90);
  if (const Json* blend = ratio.find("absolute_blend"); blend != nullptr) {
    const std::string b = "compute_ratio.absolute_blend";
    cfg.blend = true;
    cfg.blend_weight = detail::json::number(detail::json::field(*blend, b, "weight"), b + ".weight");
    const Json* shrink = blend->find("shrink");
    cfg.shrink = shrink != nullptr ? detail::json::number(*shrink, b + ".shrink") : 0.0;
    std::tie(cfg.anchored_p10, cfg.anchored_p90) = p10_p90(detail::json::field(*blend, b, "residuals"), b + ".residuals");
    cfg.ratio_references = guard_references(*blend, b);
  }
  std::tie(cfg.absolute_p10, cfg.absolute_p90) =
      p10_p90(detail::json::field(absolute, "compute_absolute", "residuals"), "compute_absolute.residuals");
  cfg.absolute_references = guard_references(absolute, "compute_absolute");
  if (const Json* band = absolute.find("measured_band"); band != nullptr) {
    const std::string m = "compute_absolute.measured_band";
    std::tie(cfg.measured_p10, cfg.measured_p90) = p10_p90(detail::json::field(*band, m, "noise"), m + ".noise");
    std::tie(cfg.measured_per_e_fold_p10, cfg.measured_per_e_fold_p90) =
        p10_p90(detail::json::field(*band, m, "per_e_fold"), m + ".per_e_fold");
  }
  const DataEdge ratio_edge = data_edge(ratio, "compute_ratio"), absolute_edge = data_edge(absolute, "compute_absolute");
  if (ratio_edge.launch_year != absolute_edge.launch_year) {
    detail::json::bad("compute_ratio.data_edge.launch_year",
                      "must equal compute_absolute.data_edge.launch_year (" +
                          std::to_string(absolute_edge.launch_year) + "; 0: no data_edge), got " +
                          std::to_string(ratio_edge.launch_year));
  }
  cfg.edge_year = ratio_edge.launch_year;
  std::tie(cfg.edge_anchored_p10, cfg.edge_anchored_p50, cfg.edge_anchored_p90) =
      std::make_tuple(ratio_edge.p10, ratio_edge.p50, ratio_edge.p90);
  std::tie(cfg.edge_absolute_p10, cfg.edge_absolute_p50, cfg.edge_absolute_p90) =
      std::make_tuple(absolute_edge.p10, absolute_edge.p50, absolute_edge.p90);
  cfg.validate();
  return cfg;
}

namespace {

// Note "data edge": a GPU launched after the data's edge is past it unless it has, at this
// precision, the specs of a GPU the models learned from (a dominance reference of either
// document: srift.learn.train lists every training GPU there, with its specs). Such a GPU is
// new in nothing the models read (the features are its peaks and bandwidth, specs_of), and the
// lean is what a new generation's unseen specs cost. The catalog's B300 has the B200's specs:
// with the lean it came out up to 17% slower than the B200 (x1.00-x1.17 over the shipped
// workloads, precisions and batches 8-128, no measurement or anchored on a T4, A10G or H100;
// bench/edge_same_specs.py), and a run on it predicted other GPUs up to 15% faster than the
// same run on a B200. A document without dominance references has no training specs to match.
bool past_edge(const LearnedComputeConfig& c, const GpuSpec& gpu, Precision precision) {
  if (!(c.edge_year > 0 && gpu.launch_year > c.edge_year)) return false;
  for (const std::vector<GpuSpec>* refs : {&c.ratio_references, &c.absolute_references}) {
    for (const GpuSpec& g : *refs) {
      if (same_specs(g, gpu, precision)) return false;
    }
  }
  return true;
}

// Note "data edge": the log lean of `gpu`'s time, anchored (or with no measurement), where it is
// past the data's edge; 0 inside it. It moves a prediction before the dominance clip, so a GPU
// past the edge stays no slower than the references it beats on every spec: moved after the
// clip, the lean put a B300 up to 15% behind an H200 (ResNet-18 at batch 8) and an RTX PRO 6000
// 5% behind an A100, where the measured data has no dominating GPU more than 2% behind.
double edge_lean(const LearnedComputeConfig& c, const GpuSpec& gpu, Precision precision, bool anchored) {
  if (!past_edge(c, gpu, precision)) return 0.0;
  return anchored ? c.edge_anchored_p50 : c.edge_absolute_p50;
}

// Note "data edge": the band of `r` (of `target`, anchored on `anchor` or, null, with no
// measurement), where either GPU is past the data's edge; the lean itself was applied before
// the clip (edge_lean).
void at_data_edge(const LearnedComputeConfig& c, LearnedComputeResult& r, const GpuSpec* anchor,
                  const GpuSpec& target, Precision precision) {
  const bool target_past = past_edge(c, target, precision),
             anchor_past = anchor != nullptr && past_edge(c, *anchor, precision);
  if (!target_past && !anchor_past) return;
  const double p10 = anchor != nullptr ? c.edge_anchored_p10 : c.edge_absolute_p10;
  const double p50 = anchor != nullptr ? c.edge_anchored_p50 : c.edge_absolute_p50;
  const double p90 = anchor != nullptr ? c.edge_anchored_p90 : c.edge_absolute_p90;
  const double up_lo = p10 - p50, up_hi = p90 - p50;  // the forward residuals around their lean
  double lo = std::log(r.p10_factor), hi = std::log(r.p90_factor);
  if (target_past && !anchor_past) {
    lo = std::min(lo, up_lo);
    hi = std::max(hi, up_hi);
  } else if (anchor_past && !target_past) {  // the same ratio read the other way
    lo = std::min(lo, -up_hi);
    hi = std::max(hi, -up_lo);
  } else {  // both past the edge: the leans cancel
    lo = std::min({lo, up_lo, -up_hi});
    hi = std::max({hi, up_hi, -up_lo});
  }
  r.p10_factor = std::exp(lo);
  r.p90_factor = std::exp(hi);
  r.past_data_edge = true;
}

// Note "fp32 via tf32" with note "data edge": the strict-FP32 bound of `g` (the GPU without its
// TF32 units) is `g` predicted another way, past the data's edge exactly when `g` is at FP32.
// Without its TF32 peak it has no training GPU's specs, so a B300 (the B200's specs) took the
// lean through its strict bound alone: its transformers at FP32 up to x1.15 the B200 with no
// measurement and x1.17 anchored on an H100 (bench/edge_same_specs.py).
GpuSpec strict_fp32(const LearnedComputeConfig& c, const GpuSpec& g) {
  GpuSpec s = without_tf32(g);
  if (past_edge(c, s, Precision::fp32) && !past_edge(c, g, Precision::fp32)) s.launch_year = 0;
  return s;
}

}  // namespace

namespace {
// The model of one compute document, its errors prefixed with the document's name: the
// reader's JSON paths ("$.model.coef") do not say which of the two documents they are in.
LearnedModel model_of(const std::string& json, const char* doc) {
  try {
    return LearnedModel::from_json(json);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string(doc) + ": " + e.what());
  }
}
}  // namespace

LearnedCompute LearnedCompute::from_documents(const std::string& ratio_json, const std::string& absolute_json) {
  // In this order (a function's arguments are evaluated in none): the combination first, whose
  // paths name their document, then each model.
  LearnedComputeConfig config = learned_compute_config(ratio_json, absolute_json);
  LearnedModel ratio = model_of(ratio_json, "compute_ratio");
  LearnedModel absolute = model_of(absolute_json, "compute_absolute");
  return LearnedCompute(std::move(ratio), std::move(absolute), std::move(config));
}

namespace {
std::atomic<std::uint64_t> next_learned_compute_id{0};  // note "shared memo"
}  // namespace

LearnedCompute::LearnedCompute(LearnedModel ratio, LearnedModel absolute, LearnedComputeConfig config)
    : ratio_(std::move(ratio)), absolute_(std::move(absolute)), config_(std::move(config)) {
  if (ratio_.num_features() != kRatioFeatures) {
    throw std::invalid_argument("ratio model must take " + std::to_string(kRatioFeatures) + " features, got " +
                                std::to_string(ratio_.num_features()));
  }
  if (absolute_.num_features() != kAbsoluteFeatures) {
    throw std::invalid_argument("absolute model must take " + std::to_string(kAbsoluteFeatures) +
                                " features, got " + std::to_string(absolute_.num_features()));
  }
  check_feature_names(ratio_, ratio_feature_names(), "compute_ratio");  // note "feature names"
  check_feature_names(absolute_, absolute_feature_names(), "compute_absolute");
  config_.validate();
  id_ = ++next_learned_compute_id;  // note "shared memo"
}


// Note "shared memo": a Cache's state, locked for each call through it.
struct LearnedCompute::Cache::State {
  explicit State(const WorkloadStats& w) : workload(&w) {}
  const WorkloadStats* workload;
  std::mutex mutex;
  std::uint64_t owner = 0;  // the id_ of the LearnedCompute its entries are of (0: none yet)
  // Note "own grids": one Memo per table of grid ends (checked and sorted), by its numbers bitwise.
  std::unordered_map<std::vector<double>, std::unique_ptr<Memo>, FeatureHash, FeatureBitsEqual> memos;
};

LearnedCompute::Cache::Cache(WorkloadStats workload)
    : workload_(std::move(workload)), state_(std::make_unique<State>(workload_)) {}

LearnedCompute::Cache::~Cache() = default;

LearnedCompute::Memo& LearnedCompute::memo_of(Cache& cache, const GridEnds& grid_ends) const {
  Cache::State& st = *cache.state_;
  if (st.owner == 0) st.owner = id_;
  if (st.owner != id_) {
    throw std::invalid_argument(
        "cache: holds another LearnedCompute's evaluations (a Cache is bound to the first LearnedCompute that uses it)");
  }
  GridEnds ends = checked_grid_ends(grid_ends);
  std::vector<double> key;
  key.reserve(2 * ends.size());
  for (const auto& [memory, end] : ends) key.insert(key.end(), {memory, end});
  auto it = st.memos.find(key);
  if (it == st.memos.end()) it = st.memos.emplace(std::move(key), std::make_unique<Memo>(*st.workload, ends)).first;
  return *it->second;
}

LearnedComputeResult LearnedCompute::predict_anchored(Cache& cache, const GpuSpec& anchor,
                                                      const std::vector<Measurement>& measurements,
                                                      const GpuSpec& target, Precision precision,
                                                      double max_batch, const GridEnds& grid_ends) const {
  check_max_batch(max_batch);  // note "max_batch"
  require_precision(measurements, precision);  // note "measurement precision" (compute.hpp)
  const std::lock_guard<std::mutex> lock(cache.state_->mutex);
  return predict_anchored_memo(cache.workload_, anchor, measurements, target, precision, max_batch,
                               memo_of(cache, grid_ends));
}

LearnedComputeResult LearnedCompute::predict_anchored(Cache& cache, const std::vector<Anchor>& anchors,
                                                      const GpuSpec& target, Precision precision,
                                                      double max_batch, const GridEnds& grid_ends) const {
  check_max_batch(max_batch);  // note "max_batch"
  for (std::size_t i = 0; i < anchors.size(); ++i) {  // note "measurement precision" (compute.hpp)
    require_precision(anchors[i].measurements, precision, "anchors[" + std::to_string(i) + "].measurements");
  }
  const std::lock_guard<std::mutex> lock(cache.state_->mutex);
  return predict_anchored_memo(cache.workload_, anchors, target, precision, max_batch, memo_of(cache, grid_ends));
}

LearnedComputeResult LearnedCompute::predict_absolute(Cache& cache, const GpuSpec& target, Precision precision,
                                                      double max_batch, const GridEnds& grid_ends) const {
  check_max_batch(max_batch);  // note "max_batch"
  const std::lock_guard<std::mutex> lock(cache.state_->mutex);
  return predict_absolute_memo(cache.workload_, target, precision, max_batch, memo_of(cache, grid_ends));
}

ComputeModel LearnedCompute::measured_model(Cache& cache, const GpuSpec& gpu, const ComputeModel& roofline,
                                            const std::vector<Measurement>& measurements, Precision precision,
                                            double max_batch, const GridEnds& grid_ends) const {
  check_max_batch(max_batch);  // note "max_batch"
  require_precision(measurements, precision);  // note "measurement precision" (compute.hpp)
  const std::lock_guard<std::mutex> lock(cache.state_->mutex);
  return measured_model_memo(cache.workload_, gpu, roofline, measurements, precision, max_batch,
                             memo_of(cache, grid_ends));
}

// What every anchored ratio from one anchor shares: its terms and its absolute correction.
struct LearnedCompute::AnchorTerms {
  GpuTerms terms;
  double correction = 0;  // the absolute model's, at the batch (0 when no blend needs it)
};

LearnedCompute::AnchorTerms LearnedCompute::anchor_terms(const GpuSpec& anchor, double batch,
                                                         Precision precision, Memo& memo) const {
  check_batch("batch", batch);
  AnchorTerms t{memo.terms_of(anchor, precision), 0.0};
  if (config_.blend && (config_.blend_weight != 0.0 || config_.shrink != 0.0)) {
    t.correction = memo.absolute_of(absolute_, t.terms, anchor, batch, precision);
  }
  return t;
}

double LearnedCompute::anchored_log_ratio_from(const WorkloadStats& w, const AnchorTerms& at, const GpuSpec& anchor,
                                               const GpuSpec& target, double batch, Precision precision,
                                               double observed_anchor, Memo& memo) const {
  // Note "memo by inputs": the models' outputs for the pair at the batch, kept by those inputs
  // (with `at` = anchor_terms(anchor, batch, precision), as every caller passes it).
  const double weight = config_.blend ? config_.blend_weight : 0.0;
  const double shrink = config_.blend ? config_.shrink : 0.0;
  const std::array<double, 14> key = Memo::ratio_parts_key(anchor, target, batch, precision);
  auto kept = memo.ratio_parts.find(key);
  if (kept == memo.ratio_parts.end()) {
    const GpuTerms& tb = memo.terms_of(target, precision);
    std::vector<double> f = ratio_features_of(w, at.terms, anchor, batch, tb, target, batch, precision);
    Memo::RatioParts parts;
    parts.roofline_log_ratio = f[0];
    parts.covers = has_fp16_path(anchor, target, precision);
    if (parts.covers) {
      parts.ratio = Memo::predict(memo.ratio, ratio_, std::move(f));
      if (weight != 0.0 || shrink != 0.0) {
        parts.corr_b = memo.absolute_of(absolute_, tb, target, batch, precision);
      }
    }
    kept = memo.ratio_parts.emplace(key, parts).first;
  }
  const Memo::RatioParts& parts = kept->second;
  const double roofline_log_ratio = parts.roofline_log_ratio;
  if (!parts.covers) return roofline_log_ratio;
  const double ratio = parts.ratio;
  if (weight == 0.0 && shrink == 0.0) return roofline_log_ratio + ratio;
  const double corr_b = parts.corr_b;
  const double blend = (1.0 - weight) * ratio + weight * (corr_b - at.correction);
  const double toward = corr_b - observed_anchor;
  return roofline_log_ratio + (std::isnan(toward) ? blend : (1.0 - shrink) * blend + shrink * toward);
}

namespace {
// A log deviation or NaN (leave the shrink term out); +-inf gave a ratio of +-inf.
void check_observed(double observed_anchor) {
  if (std::isinf(observed_anchor)) {
    detail::fail("observed_anchor", "a finite log deviation, or NaN (no shrink term)", observed_anchor);
  }
}
}  // namespace

double LearnedCompute::anchored_log_ratio(const WorkloadStats& w, const GpuSpec& anchor, const GpuSpec& target,
                                          double batch, Precision precision, double observed_anchor) const {
  check_observed(observed_anchor);
  Memo memo(w);
  return anchored_log_ratio_from(w, anchor_terms(anchor, batch, precision, memo), anchor, target, batch, precision,
                                 observed_anchor, memo);
}

double LearnedCompute::guarded_log_ratio(const WorkloadStats& w, const GpuSpec& anchor, const GpuSpec& target,
                                         double batch, Precision precision, double observed_anchor) const {
  check_observed(observed_anchor);
  Memo memo(w);
  return guarded_log_ratio_memo(w, anchor, target, batch, precision, observed_anchor, memo);
}

double LearnedCompute::guarded_log_ratio_memo(const WorkloadStats& w, const GpuSpec& anchor, const GpuSpec& target,
                                         double batch, Precision precision, double observed_anchor,
                                         Memo& memo) const {
  // Note "shared memo": kept by every input it reads.
  const std::array<double, 15> key = Memo::guarded_key(anchor, target, batch, precision, observed_anchor);
  const auto kept = memo.guarded.find(key);
  if (kept != memo.guarded.end()) return kept->second;
  const double out = guarded_log_ratio_fresh(w, anchor, target, batch, precision, observed_anchor, memo);
  memo.guarded.emplace(key, out);
  return out;
}

double LearnedCompute::guarded_log_ratio_fresh(const WorkloadStats& w, const GpuSpec& anchor, const GpuSpec& target,
                                               double batch, Precision precision, double observed_anchor,
                                               Memo& memo) const {
  const AnchorTerms at = anchor_terms(anchor, batch, precision, memo);
  // Note "data edge": each GPU's lean, read from the anchor's, before the clip.
  const double anchor_lean = edge_lean(config_, anchor, precision, true);
  auto moved_ratio = [&](const GpuSpec& g) {
    return anchored_log_ratio_from(w, at, anchor, g, batch, precision, observed_anchor, memo) +
           (edge_lean(config_, g, precision, true) - anchor_lean);
  };
  const double own = moved_ratio(target);
  if (config_.ratio_references.empty()) return own;
  // The anchor is a reference (log ratio 0: the measurement is exact), so is any reference
  // with its specs; every other reference's prediction is first clipped against the anchor.
  const Specs anchor_specs = specs_of(anchor, precision);
  auto reference_ratio = [&](const GpuSpec& g) {
    if (specs_of(g, precision) == anchor_specs) return 0.0;
    const double r = moved_ratio(g);
    if (dominates(g, anchor, precision)) return std::min(r, 0.0);
    return dominates(anchor, g, precision) ? std::max(r, 0.0) : r;
  };
  double lower = -std::numeric_limits<double>::infinity(), upper = std::numeric_limits<double>::infinity();
  auto bound_by = [&](const GpuSpec& g) {
    if (dominates(target, g, precision)) upper = std::min(upper, reference_ratio(g));
    else if (dominates(g, target, precision)) lower = std::max(lower, reference_ratio(g));
  };
  for (const GpuSpec& g : config_.ratio_references) bound_by(g);
  bound_by(anchor);
  const double out = std::min(std::max(own, lower), upper);  // the upper bound wins where they cross
  if (!(std::abs(out) <= kMaxLogCorrection)) {
    detail::fail("the ratio model's (compute_ratio.json) log ratio of " + target.name + " to " + anchor.name +
                     " at batch " + detail::fmt(batch),
                 "within +-" + detail::fmt(kMaxLogCorrection) + " (its parameters are out of any real range)", out);
  }
  return out;
}

std::vector<double> LearnedCompute::absolute_corrections(const WorkloadStats& w, const GpuSpec& target,
                                                         const std::vector<double>& batches,
                                                         Precision precision) const {
  Memo memo(w);
  return absolute_corrections_memo(target, batches, precision, memo);
}

std::vector<double> LearnedCompute::absolute_corrections_memo(const GpuSpec& target,
                                                         const std::vector<double>& batches, Precision precision,
                                                         Memo& memo) const {
  for (std::size_t i = 0; i < batches.size(); ++i) {
    if (!(std::isfinite(batches[i]) && batches[i] > 0)) check_batch("batches[" + std::to_string(i) + "]", batches[i]);
  }
  // log time per sample of one GPU at every batch: its roofline corrected by the model
  auto log_times = [&](const GpuSpec& g) {
    const GpuTerms& t = memo.terms_of(g, precision);
    const double lean = edge_lean(config_, g, precision, false);  // note "data edge": before the clip
    std::vector<double> out(batches.size());
    for (std::size_t i = 0; i < batches.size(); ++i) {
      out[i] = std::log(per_sample_of(t.roofline, batches[i])) +
               memo.absolute_of(absolute_, t, g, batches[i], precision) + lean;
    }
    return out;
  };
  std::vector<double> own = log_times(target);
  std::vector<double> lower(batches.size(), -std::numeric_limits<double>::infinity());
  std::vector<double> upper(batches.size(), std::numeric_limits<double>::infinity());
  for (const GpuSpec& g : config_.absolute_references) {
    const bool below = dominates(target, g, precision);  // the target is never slower than g
    if (!below && !dominates(g, target, precision)) continue;
    const std::vector<double> t = log_times(g);
    for (std::size_t i = 0; i < batches.size(); ++i) {
      if (below) upper[i] = std::min(upper[i], t[i]);
      else lower[i] = std::max(lower[i], t[i]);
    }
  }
  const GpuTerms& terms = memo.terms_of(target, precision);
  for (std::size_t i = 0; i < batches.size(); ++i) {
    const double t = std::min(std::max(own[i], lower[i]), upper[i]);  // the upper bound wins where they cross
    if (!std::isfinite(t)) detail::fail("log time of " + target.name, "finite", t);
    own[i] = t - std::log(per_sample_of(terms.roofline, batches[i]));
    if (!(std::abs(own[i]) <= kMaxLogCorrection)) {
      detail::fail("the absolute model's (compute_absolute.json) log correction of " + target.name + "'s roofline at batch " +
                       detail::fmt(batches[i]),
                   "within +-" + detail::fmt(kMaxLogCorrection) + " (its parameters are out of any real range)", own[i]);
    }
  }
  return own;
}

// Note "anchored batch shape": a plan runs its own local batch, rarely the one measured, so the
// anchored prediction is a curve over the batch, built in two moves: along the anchor GPU, from
// the measured batch to each batch b of the grid, by the measured GPU's own curve
// (measured_model: note "measured batch shape"); then across GPUs at b, by the ratio at b
// (guarded_log_ratio, the anchor's deviation from its roofline taken at b). The ratio at the
// measured batch applied to the anchor's roofline curve, as srift did before, moved along the
// roofline's curve instead, whose fixed cost is too small: NVIDIA DeepLearningExamples' V100/A100
// pairs, most measured at 2-8x different batches, went 16.4 / 48 -> 8.7 / 25 median / p90 APE
// (bench/external_nvidia.py one_gpu_anchored), and Lambda's held-out chips 10.3 / 30 ->
// 10.1 / 27 (bench/accuracy.py compute_leave_one_gpu_out_engine_path).
// Note "order at the measurement": the guarded ratio keeps every grid point of a target that
// dominates the anchor at or below the anchor's measured curve (and of one it dominates at or
// above), but the line fitted through the points can cross the measured curve by the fit's
// residual (NCF measured on an H100 at batch 32: an A100, slower on every spec, was predicted
// 0.006% faster than the measurement there). The line is scaled by the least factor that puts it
// back on its side at every measured batch: a no-op wherever the fit already keeps the order.
// Scaled down, a line the note "peak floor" held up at the grid's far end is turned about the
// measured batch instead where the scaling would put it under the floor (held_to_floor_about).
LearnedComputeResult LearnedCompute::predict_anchored(const WorkloadStats& w, const GpuSpec& anchor,
                                                      const std::vector<Measurement>& measurements,
                                                      const GpuSpec& target, Precision precision,
                                                      double max_batch, const GridEnds& grid_ends) const {
  check_max_batch(max_batch);  // note "max_batch"
  require_precision(measurements, precision);  // note "measurement precision" (compute.hpp)
  Memo memo(w, checked_grid_ends(grid_ends));
  return predict_anchored_memo(w, anchor, measurements, target, precision, max_batch, memo);
}

// Note "same specs": a target whose specs are the anchor's at this precision (specs_of: the
// peaks and the memory bandwidth; the same chip with more memory, as V100-SXM2 16 and 32 GB)
// runs as the anchor ran, and is predicted as the anchor's own measured curve
// (measured_model, on the target's grid). Through the ratio model it was not: its output at
// no spec difference is its bias, and the blend's shrink pulls the target towards the
// absolute model's prediction, away from a measurement of the very chip (GPT-2 at FP32
// measured on a V100-16GB: the V100-32GB 1.23x slower at every batch, the measured one
// included; ResNet-50 0.88x). No lean past the data's edge: a run on these specs is the
// evidence. The band is the anchored one (wider than a measured GPU's noise: a catalog type is
// another host than the one timed), and `same_specs_anchor` tells the caller that it widens away
// from the measured batch as the measured GPU's own does (band.hpp note "measured batch band":
// the engine's group band; before, it was x0.81-x1.28 at 4x the measured batch, where the
// measured GPU's was x0.67-x1.49).
LearnedComputeResult LearnedCompute::on_same_specs(const WorkloadStats& w, const GpuSpec& anchor,
                                                   const std::vector<Measurement>& measurements, Precision precision,
                                                   double max_batch, Memo& memo) const {
  double span = (std::isfinite(max_batch) && max_batch > 0) ? max_batch : 0.0;
  for (const Measurement& m : measurements) span = std::max(span, m.local_batch);
  LearnedComputeResult r;
  r.model = measured_model_memo(w, anchor, w.roofline(anchor, precision), measurements, precision, span, memo);
  r.p10_factor = std::exp(config_.anchored_p10);
  r.p90_factor = std::exp(config_.anchored_p90);
  r.same_specs_anchor = true;
  return r;
}

LearnedComputeResult LearnedCompute::predict_anchored_memo(const WorkloadStats& w, const GpuSpec& anchor,
                                                      const std::vector<Measurement>& measurements,
                                                      const GpuSpec& target, Precision precision, double max_batch,
                                                      Memo& memo) const {
  if (same_specs(target, anchor, precision)) return on_same_specs(w, anchor, measurements, precision, max_batch, memo);
  LearnedComputeResult r = predict_anchored_fit(w, anchor, measurements, target, precision, max_batch, memo);
  const bool no_slower = dominates(target, anchor, precision);
  const bool no_faster = dominates(anchor, target, precision);
  if (!no_slower && !no_faster) return r;
  // The anchor's measured curve at the measured batches, as predict_anchored_fit built it.
  double span = (std::isfinite(max_batch) && max_batch > 0) ? max_batch : 0.0;
  for (const Measurement& m : measurements) span = std::max(span, m.local_batch);
  const ComputeModel measured =
      measured_model_memo(w, anchor, w.roofline(anchor, precision), measurements, precision, span, memo);
  double factor = 1.0, pivot = 0.0;  // pivot: the measured batch that sets the factor
  for (const Measurement& m : measurements) {
    const double b = m.local_batch;
    const double ratio = (measured.compute_s(b) + measured.optimizer_s) / (r.model.compute_s(b) + r.model.optimizer_s);
    if (no_slower ? ratio < factor : ratio > factor) {
      factor = ratio;
      pivot = b;
    }
  }
  if (factor != 1.0) {
    ComputeModel& m = r.model;
    for (double* term : {&m.forward_fixed_s, &m.forward_per_sample_s, &m.backward_fixed_s, &m.backward_per_sample_s,
                         &m.optimizer_s}) {
      *term *= factor;
    }
  }
  if (factor < 1.0) {
    // Note "peak floor" through the order: scaled down, the line held to the floor at the
    // grid's far end falls under it there (NCF at TF32 measured on an A100-40GB at batch 64
    // at 1.3x its floor: an A100-80GB, whose peaks are the same, 0.64x its floor at batch
    // 1024). The line is turned about its value at the measured batch that set the factor,
    // its slope raised by the least that puts it back on the floor above that batch (so the
    // order there is kept); only where that leaves no fixed cost does the floor win there.
    const double floor = peak_floor_per_sample(w, target, precision, &anchor, &measurements);
    r.model = held_to_floor_about(r.model, batch_grid(span), floor, pivot);
  }
  return r;
}

LearnedComputeResult LearnedCompute::predict_anchored_fit(const WorkloadStats& w, const GpuSpec& anchor,
                                                          const std::vector<Measurement>& measurements,
                                                          const GpuSpec& target, Precision precision,
                                                          double max_batch, Memo& memo) const {
  if (measurements.empty()) throw std::invalid_argument("measurements must not be empty, got 0 measurements");
  validate_measurements(measurements);  // named here, not as an internal fit's "seconds[0]"
  // The grid reaches every measured batch, so no part of the curve is extrapolated from it.
  double span = (std::isfinite(max_batch) && max_batch > 0) ? max_batch : 0.0;
  for (const Measurement& m : measurements) {
    check_batch("measurements.local_batch", m.local_batch);
    span = std::max(span, m.local_batch);
  }
  const std::vector<double> grid = batch_grid(span);
  auto total = [](const ComputeModel& m, double b) { return m.compute_s(b) + m.optimizer_s; };
  // Note "own grids": the span of GPU g's own grid where the table lists its memory (reaching the
  // measured batches, as `span` does), else the target's.
  const auto span_of = [&](const GpuSpec& g) {
    double own = 0;
    if (!memo.own_max_batch(g, own)) return span;
    own = own > 0 ? own : 0.0;
    for (const Measurement& m : measurements) own = std::max(own, m.local_batch);
    return own;
  };
  if (fp32_via_tf32(anchor, precision) || fp32_via_tf32(target, precision)) {  // note "fp32 via tf32"
    // The target predicted from the measurements' TF32 equivalent, times the default's cost
    // over all-TF32 on the target at each batch; on a TF32 target at most the strict-FP32
    // prediction and at least the all-TF32 one.
    const ComputeModel measured_roof = w.roofline(anchor, Precision::fp32);
    LearnedComputeResult r = predict_anchored_memo(
        w, anchor, restated(measurements, measured_roof, w.roofline(anchor, Precision::tf32)), target,
        Precision::tf32, span, memo);
    const ComputeModel target_default = w.roofline(target, Precision::fp32);
    const ComputeModel target_tf32 = w.roofline(target, Precision::tf32);
    ComputeModel strict;
    const bool clamp = fp32_via_tf32(target, precision);
    if (clamp) {
      const GpuSpec strict_anchor = strict_fp32(config_, anchor);
      strict = predict_anchored_memo(w, strict_anchor,
                                     restated(measurements, measured_roof, w.roofline(strict_anchor, Precision::fp32)),
                                     strict_fp32(config_, target), Precision::fp32, span, memo)
                   .model;
    }
    // Note "fp32 via tf32, the anchor's side": a default-FP32 run on a TF32 anchor predicting a
    // GPU without TF32 had no bounds; the roofline's restatement alone set how much faster the
    // run would have been all-TF32, and the roofline's matmul peaks say far more than the models
    // do (an LSTM language model whose decoder matmul is 91% of its FLOPs: 2.6x on an H100, the
    // absolute model 1.4x), so a T4 anchored on an H100 came out 4.5x the H100's time where
    // anchored on the T4 the H100 came out at 1/9.1 of the T4's and with no measurement 1/7.9.
    // The mirror of the bounds a TF32 target gets: the run is no faster than all-TF32 and no
    // slower than strict FP32, so the target is at least what the run read as the anchor's
    // strict-FP32 time predicts (the anchor without its TF32 units) and at most what the run
    // read as its all-TF32 time predicts (the upper bound wins where they cross). Anchored
    // either way, the pair's ratio now agrees (9.1x both ways for that LSTM).
    const bool mirror = !clamp && fp32_via_tf32(anchor, precision);
    ComputeModel as_strict, as_tf32;
    if (mirror) {
      as_strict =
          predict_anchored_memo(w, strict_fp32(config_, anchor), measurements, target, Precision::fp32, span, memo).model;
      as_tf32 = predict_anchored_memo(w, anchor, restated(measurements, measured_roof, measured_roof), target,
                                      Precision::tf32, span, memo)
                    .model;
    }
    LineBounds across;  // note "across the fp32 paths", line by line
    std::vector<double> t(grid.size());
    for (std::size_t i = 0; i < grid.size(); ++i) {
      const double all_tf32 = total(r.model, grid[i]);
      t[i] = all_tf32 * total(target_default, grid[i]) / total(target_tf32, grid[i]);
      if (clamp) t[i] = std::max(all_tf32, std::min(t[i], total(strict, grid[i])));
      if (mirror) t[i] = std::min(std::max(t[i], total(as_strict, grid[i])), total(as_tf32, grid[i]));
    }
    if (clamp) {
      // Note "across the fp32 paths": a GPU without TF32 is predicted by the TF32 route alone,
      // this one through the strict bound too, so the dominance clip inside each route does not
      // order the two. A reference without TF32 that this GPU beats on every spec bounds it from
      // above, as that reference's own prediction (the upper bound wins, as in the clip).
      // Anchored on an H100 at FP32, an A100 came out up to 1.34x slower than a V100 (GPT-2 at
      // batch 8), 212 of 179,172 dominating pairs over the zoo's models. A reference with TF32
      // that it beats bounds it too, as that reference's own FP32 prediction: each is the max
      // of its all-TF32 and (the lesser of) restated and strict curves, each fitted with its own
      // residual, so two GPUs with TF32 met nowhere either (BERT-base at batch 1 anchored on an L4:
      // an RTX PRO 6000, ahead on FP32, TF32 and bandwidth, 1.18x behind an A100-40GB, whose
      // line fitted over 1..145 sits 18% under its curve at batch 1). The recursion ends:
      // dominance is a strict order.
      // Each reference `keep` selects, once per distinct peaks and grid (references differing
      // only in memory predict alike on one grid; note "own grids": each on its own), as its FP32
      // model held from above only (Memo::reference_model).
      const auto each_reference = [&](const auto& keep, const auto& use) {
        std::vector<std::array<double, 6>> seen;
        for (const GpuSpec& g : config_.ratio_references) {
          if (!keep(g)) continue;
          const double g_span = span_of(g);
          const std::array<double, 6> peaks{g.fp32_flops, g.tf32_flops, g.fp16_flops, g.memory_bandwidth,
                                            static_cast<double>(g.launch_year), g_span};
          if (std::find(seen.begin(), seen.end(), peaks) != seen.end()) continue;
          seen.push_back(peaks);
          use(ComputeModel(memo.reference_model(Memo::reference_key(g, g_span, &anchor, &measurements), [&] {
            return predict_anchored_memo(w, anchor, measurements, g, precision, g_span, memo).model;
          })));
        }
      };
      each_reference([&](const GpuSpec& g) { return dominates(target, g, precision); },
                     [&](const ComputeModel& other) {
                       for (std::size_t i = 0; i < grid.size(); ++i) t[i] = std::min(t[i], total(other, grid[i]));
                       // note "lines in order": the fitted line too, at the grid's ends
                       across.add_upper({other.fixed_s() + other.optimizer_s, other.per_sample_s()}, grid.front(),
                                        grid.back());
                     });
      // Note "across the fp32 paths, from below": a reference that beats this GPU on every
      // spec bounds its line from below, as that reference's own FP32 model held from above
      // only (the upper bound still wins). Those models are what the bounds above read too; a
      // reference's full prediction would recurse back up the order (it is bounded from below
      // by the references above it, each bounded from above by those under it, this GPU among
      // them), and the order needs no more: the highest of the lower bounds is at least every
      // bound a dominating reference's own prediction is held to.
      if (!memo.bounding) {
        each_reference([&](const GpuSpec& g) { return dominates(g, target, precision); },
                       [&](const ComputeModel& other) {
                         across.add_lower({other.fixed_s() + other.optimizer_s, other.per_sample_s()}, grid.front(),
                                          grid.back());
                       });
      }
    }
    // Note "across the fp32 paths, from below": the anchor's measured line bounds the line too,
    // as on the other paths (note "lines in order"; the measurement is exact), the order at the
    // measurement (predict_anchored_memo) holding it only at the measured batches: anchored at
    // FP32 on an H100-80GB at 1.4x its own time at batch 32, the RTX 3090 (FP32 and TF32 35.6
    // TFLOPS, 936 GB/s) came out 10% under the measured line at batch 1, and with it the
    // H100-PCIe it bounds from above (BERT-base at 128 tokens, grid 1..1024: the H100-80GB
    // 1.11x behind the H100-PCIe at batch 1). Held from above only, a reference's model keeps
    // this bound: it is no recursion.
    if (dominates(target, anchor, precision) || dominates(anchor, target, precision)) {
      // note "own grids": the anchor's own measured line, on its own grid where the table lists it
      const ComputeModel m =
          measured_model_memo(w, anchor, measured_roof, measurements, precision, span_of(anchor), memo);
      const Line measured_line{m.fixed_s() + m.optimizer_s, m.per_sample_s()};
      if (dominates(target, anchor, precision)) across.add_upper(measured_line, grid.front(), grid.back());
      else across.add_lower(measured_line, grid.front(), grid.back());
    }
    const double floor = peak_floor_per_sample(w, target, precision, &anchor, &measurements);  // note "peak floor"
    hold_to_floor(t, grid, floor);
    const auto [fixed, per_sample] = affine_relative_fit(grid, t, kMinSlopeShare * target_default.per_sample_s());
    const Line line = line_in_order({fixed, slope_held_to_floor(grid, fixed, per_sample, floor)}, across, grid, floor);
    r.model = split_like(target_default, line.fixed, line.per_sample);
    return r;
  }
  const ComputeModel roof = w.roofline(anchor, precision);
  const ComputeModel measured = measured_model_memo(w, anchor, roof, measurements, precision, span, memo);
  const ComputeModel target_roof = w.roofline(target, precision);
  LearnedComputeResult r;
  const bool ratio_model_covers = has_fp16_path(anchor, target, precision);
  // The line of GPU `g` anchored on the measurements, before the lines are put in order: at each
  // batch of the grid the anchor's measured curve times g's guarded ratio there, held to g's
  // peak floor, fitted.
  // Note "own grids": on the grid of `line_span` (the target's, or a reference's own), from the
  // anchor's measured curve on that grid, as predict_anchored fits g with that max_batch.
  const auto measured_on = [&](double line_span) {
    return line_span == span ? measured
                             : measured_model_memo(w, anchor, roof, measurements, precision, line_span, memo);
  };
  const auto anchored_line = [&](const GpuSpec& g, double line_span) {
    const std::vector<double> g_grid = line_span == span ? grid : batch_grid(line_span);
    const ComputeModel on_grid = measured_on(line_span);
    const ComputeModel g_roof = memo.terms_of(g, precision).roofline;
    std::vector<double> t(g_grid.size());
    for (std::size_t i = 0; i < g_grid.size(); ++i) {
      const double b = g_grid[i], on_anchor = total(on_grid, b);
      if (!ratio_model_covers) {
        // No FP16 path on one side: the roofline ratio, with the roofline's own interval.
        t[i] = on_anchor * total(g_roof, b) / total(roof, b);
        continue;
      }
      const double observed =
          config_.blend ? std::log(on_anchor / total(roof, b)) : std::numeric_limits<double>::quiet_NaN();
      t[i] = on_anchor * std::exp(guarded_log_ratio_memo(w, anchor, g, b, precision, observed, memo));
    }
    const double floor = peak_floor_per_sample(w, g, precision, &anchor, &measurements);  // note "peak floor"
    hold_to_floor(t, g_grid, floor);
    // A flat or falling curve (a fixed cost the grid's batches do not grow) is that cost plus a
    // token slope (kMinSlopeShare), not a line through the origin.
    const auto [fixed, per_sample] = affine_relative_fit(g_grid, t, kMinSlopeShare * g_roof.per_sample_s());
    return Line{fixed, slope_held_to_floor(g_grid, fixed, per_sample, floor)};
  };
  // Note "memo by inputs": each GPU's line kept by all it reads (the anchor, the runs, the GPU,
  // the precision, the grid's span and whether the ratio model covers the pair), so a reference's
  // line is fitted once per anchor and grid, not once per target it bounds.
  const auto kept_line = [&](const GpuSpec& g, double line_span) {
    std::vector<double> key =
        Memo::anchored_line_key(anchor, measurements, g, precision, line_span, ratio_model_covers);
    auto kept = memo.anchored_lines.find(key);
    if (kept == memo.anchored_lines.end()) {
      const Line l = anchored_line(g, line_span);
      kept = memo.anchored_lines.emplace(std::move(key), std::make_pair(l.fixed, l.per_sample)).first;
    }
    return Line{kept->second.first, kept->second.second};
  };
  Line line = kept_line(target, span);
  if (ratio_model_covers && !config_.ratio_references.empty()) {
    // Note "lines in order": held between the references' own anchored lines on this grid and
    // the anchor's measured line (the measurement is exact: a reference with the anchor's specs
    // predicts it).
    // Note "own grids": each reference's own line, the anchor's (or a reference with its specs)
    // its measured line, each on its own grid where the table lists its memory.
    const Specs anchor_specs = specs_of(anchor, precision);
    LineBounds bounds;
    auto bound_by = [&](const GpuSpec& g, bool is_anchor) {
      const bool below = dominates(target, g, precision);
      if (!below && !dominates(g, target, precision)) return;
      const double g_span = span_of(g);
      Line l;
      if (is_anchor || specs_of(g, precision) == anchor_specs) {
        const ComputeModel m = measured_on(g_span);
        l = {m.fixed_s() + m.optimizer_s, m.per_sample_s()};
      } else {
        l = kept_line(g, g_span);
      }
      if (below) bounds.add_upper(l, grid.front(), grid.back());
      else bounds.add_lower(l, grid.front(), grid.back());
    };
    for (const GpuSpec& g : config_.ratio_references) bound_by(g, false);
    bound_by(anchor, true);
    line = line_in_order(line, bounds, grid, peak_floor_per_sample(w, target, precision, &anchor, &measurements));
  }
  r.model = split_like(target_roof, line.fixed, line.per_sample);
  if (!ratio_model_covers) {
    r.p10_factor = std::exp(config_.roofline_p10);
    r.p90_factor = std::exp(config_.roofline_p90);
    r.roofline_ratio_only = true;
  } else {
    r.p10_factor = std::exp(config_.anchored_p10);
    r.p90_factor = std::exp(config_.anchored_p90);
    // Note "data edge": the band (the lean is in the guarded ratio). (The TF32 path above is
    // built from this path's predictions, so it is banded once, here.)
    at_data_edge(config_, r, &anchor, target, precision);
  }
  return r;
}

LearnedComputeResult LearnedCompute::predict_anchored(const WorkloadStats& w, const std::vector<Anchor>& anchors,
                                                      const GpuSpec& target, Precision precision,
                                                      double max_batch, const GridEnds& grid_ends) const {
  check_max_batch(max_batch);  // note "max_batch"
  for (std::size_t i = 0; i < anchors.size(); ++i) {  // note "measurement precision" (compute.hpp)
    require_precision(anchors[i].measurements, precision, "anchors[" + std::to_string(i) + "].measurements");
  }
  Memo memo(w, checked_grid_ends(grid_ends));
  return predict_anchored_memo(w, anchors, target, precision, max_batch, memo);
}

LearnedComputeResult LearnedCompute::predict_anchored_memo(const WorkloadStats& w, const std::vector<Anchor>& anchors,
                                                      const GpuSpec& target, Precision precision, double max_batch,
                                                      Memo& memo) const {
  if (anchors.empty()) throw std::invalid_argument("anchors must not be empty, got 0 anchors");
  std::vector<const Anchor*> use;
  // Note "same specs": a run on the target's specs says more than any ratio from another GPU.
  for (const Anchor& a : anchors) {
    if (same_specs(a.gpu, target, precision)) use.push_back(&a);
  }
  for (const Anchor& a : anchors) {
    if (!use.empty() && same_specs(use.front()->gpu, target, precision)) break;
    if (has_fp16_path(a.gpu, target, precision)) use.push_back(&a);
  }
  if (use.empty()) {
    for (const Anchor& a : anchors) use.push_back(&a);
  }
  if (use.size() == 1) {
    return predict_anchored_memo(w, use[0]->gpu, use[0]->measurements, target, precision, max_batch, memo);
  }
  std::vector<LearnedComputeResult> each;
  each.reserve(use.size());
  for (const Anchor* a : use) {
    each.push_back(predict_anchored_memo(w, a->gpu, a->measurements, target, precision, max_batch, memo));
  }
  const std::vector<double> grid = batch_grid(max_batch);
  std::vector<double> t(grid.size(), 0.0);
  for (std::size_t i = 0; i < grid.size(); ++i) {
    for (const LearnedComputeResult& r : each) t[i] += std::log(r.model.compute_s(grid[i]) + r.model.optimizer_s);
    t[i] = std::exp(t[i] / static_cast<double>(each.size()));
  }
  const ComputeModel target_roof = w.roofline(target, precision);
  const auto [fixed, per_sample] = affine_relative_fit(grid, t, kMinSlopeShare * target_roof.per_sample_s());
  // The band: one anchor's, one past the data's edge where there is one (note "data edge").
  LearnedComputeResult out = each.front();
  for (const LearnedComputeResult& r : each) {
    if (r.past_data_edge) {
      out = r;
      break;
    }
  }
  out.model = split_like(target_roof, fixed, per_sample);
  return out;
}

std::pair<double, double> LearnedCompute::absolute_line_memo(const WorkloadStats& w, const GpuSpec& g,
                                                            Precision precision, const std::vector<double>& grid,
                                                            Memo& memo) const {
  // Note "shared memo": kept by every input it reads, the grid included.
  std::vector<double> key = Memo::absolute_line_key(g, precision, grid);
  const auto kept = memo.absolute_lines.find(key);
  if (kept != memo.absolute_lines.end()) return kept->second;
  const std::pair<double, double> out = absolute_line_fresh(w, g, precision, grid, memo);
  memo.absolute_lines.emplace(std::move(key), out);
  return out;
}

std::pair<double, double> LearnedCompute::absolute_line_fresh(const WorkloadStats& w, const GpuSpec& g,
                                                              Precision precision, const std::vector<double>& grid,
                                                              Memo& memo) const {
  const ComputeModel prior = memo.terms_of(g, precision).roofline;
  const std::vector<double> corr = absolute_corrections_memo(g, grid, precision, memo);
  std::vector<double> t(grid.size());
  double least_per_sample = std::numeric_limits<double>::infinity();
  const double floor_per_sample = peak_floor_per_sample(w, g, precision);  // note "peak floor"
  for (std::size_t i = 0; i < grid.size(); ++i) {
    t[i] = std::max((prior.compute_s(grid[i]) + prior.optimizer_s) * std::exp(corr[i]), floor_per_sample * grid[i]);
    least_per_sample = std::min(least_per_sample, t[i] / grid[i]);
  }
  // A flat or falling curve (a launch-bound model over a short grid) is its fixed time plus a
  // token slope, kMinSlopeShare of its own least per-sample time (at most 1% of the curve at
  // any batch of the grid). Without a floor, the mean per-sample time through the origin took
  // batch 1's per-sample time for every batch: NCF, 9.6 ms flat over batches 1-1024, was
  // predicted 0.42 s at 256. (The anchored predictions' floor, a share of the roofline's slope,
  // is no token here: where the learned curve sits far below the roofline it outgrew the curve.)
  const auto [fixed, per_sample] = affine_relative_fit(grid, t, kMinSlopeShare * least_per_sample);
  return {fixed, slope_held_to_floor(grid, fixed, per_sample, floor_per_sample)};
}

LearnedComputeResult LearnedCompute::predict_absolute(const WorkloadStats& w, const GpuSpec& target,
                                                      Precision precision, double max_batch,
                                                      const GridEnds& grid_ends) const {
  check_max_batch(max_batch);  // note "max_batch"
  Memo memo(w, checked_grid_ends(grid_ends));
  return predict_absolute_memo(w, target, precision, max_batch, memo);
}

LearnedComputeResult LearnedCompute::predict_absolute_memo(const WorkloadStats& w, const GpuSpec& target,
                                                           Precision precision, double max_batch, Memo& memo) const {
  // Note "memo by inputs": kept by the GPU's spec numbers, the precision and max_batch, and
  // whether it is predicted to bound another GPU (note "across the fp32 paths, from below": such
  // a model is held from above only, so it is not the GPU's own prediction).
  std::vector<double> key;
  Memo::push_spec(key, target);
  key.insert(key.end(), {static_cast<double>(precision), max_batch, memo.bounding ? 1.0 : 0.0});
  const auto kept = memo.absolute_results.find(key);
  if (kept != memo.absolute_results.end()) return kept->second;
  const LearnedComputeResult out = predict_absolute_fresh(w, target, precision, max_batch, memo);
  memo.absolute_results.emplace(std::move(key), out);
  return out;
}

LearnedComputeResult LearnedCompute::predict_absolute_fresh(const WorkloadStats& w, const GpuSpec& target,
                                                      Precision precision, double max_batch, Memo& memo) const {
  if (fp32_via_tf32(target, precision)) {  // note "fp32 via tf32"
    LearnedComputeResult r = predict_absolute_memo(w, target, Precision::tf32, max_batch, memo);
    const LearnedComputeResult strict =
        predict_absolute_memo(w, strict_fp32(config_, target), Precision::fp32, max_batch, memo);
    r.model = pytorch_fp32(w, target, r.model, strict.model);
    // Note "across the fp32 paths" (predict_anchored_fit), with no measurement, line by line
    // (note "lines in order"): a reference that this GPU beats on every spec, with TF32 or
    // without, bounds its line from above, as that reference's own prediction. (Before, the two
    // routes met nowhere: a depthwise-separable conv net at FP32 put an A100-40GB 3.3% behind a V100 at batch 1.)
    // A reference that beats this GPU bounds it from below (note "across the fp32 paths, from
    // below"), as its own model held from above only.
    const std::vector<double> grid = batch_grid(max_batch);
    LineBounds across;
    bool bound = false;
    for (const GpuSpec& g : config_.absolute_references) {
      const bool below = dominates(target, g, precision);  // the target is never slower than g
      // note "across the fp32 paths, from below": g's model held from above only
      if (!below && (memo.bounding || !dominates(g, target, precision))) continue;
      // note "own grids": g's own prediction, on its own grid where the table lists its memory
      double own = max_batch;
      memo.own_max_batch(g, own);
      const ComputeModel other = memo.reference_model(Memo::reference_key(g, own, nullptr, nullptr), [&] {
        return predict_absolute_memo(w, g, precision, own, memo).model;
      });
      const Line l{other.fixed_s() + other.optimizer_s, other.per_sample_s()};
      if (below) across.add_upper(l, grid.front(), grid.back());
      else across.add_lower(l, grid.front(), grid.back());
      bound = true;
    }
    if (bound) {
      const Line own{r.model.fixed_s() + r.model.optimizer_s, r.model.per_sample_s()};
      const Line held = line_in_order(own, across, grid, peak_floor_per_sample(w, target, precision));
      if (held.fixed != own.fixed || held.per_sample != own.per_sample) {
        r.model = split_like(r.model, held.fixed, held.per_sample);
      }
    }
    return r;
  }
  const ComputeModel prior = w.roofline(target, precision);
  const std::vector<double> grid = batch_grid(max_batch);
  const auto [fixed, per_sample] = absolute_line_memo(w, target, precision, grid, memo);
  Line line{fixed, per_sample};
  if (!config_.absolute_references.empty()) {
    // Note "lines in order": held between the references' own lines on this grid.
    LineBounds bounds;
    for (const GpuSpec& g : config_.absolute_references) {
      const bool below = dominates(target, g, precision);  // the target is never slower than g
      if (!below && !dominates(g, target, precision)) continue;
      // note "own grids": g's own line, on its own grid where the table lists its memory
      double own = 0;
      const auto [f, s] = memo.own_max_batch(g, own) ? absolute_line_memo(w, g, precision, batch_grid(own), memo)
                                                     : absolute_line_memo(w, g, precision, grid, memo);
      if (below) bounds.add_upper({f, s}, grid.front(), grid.back());
      else bounds.add_lower({f, s}, grid.front(), grid.back());
    }
    line = line_in_order(line, bounds, grid, peak_floor_per_sample(w, target, precision));
  }
  LearnedComputeResult r;
  r.model = split_like(prior, line.fixed, line.per_sample);
  r.p10_factor = std::exp(config_.absolute_p10);
  r.p90_factor = std::exp(config_.absolute_p90);
  // Note "data edge": the band (the lean is in the corrections; the TF32 path above is built
  // from this path's predictions: banded once).
  at_data_edge(config_, r, nullptr, target, precision);
  return r;
}

namespace {
// The sum of squared log errors of `m` at the measured points: of compute (forward + backward)
// where every point measured both phases, else of the whole iteration, as anchor_to_measurements
// fits them.
double log_misfit(const ComputeModel& m, const std::vector<Measurement>& measurements) {
  bool phases = true;
  for (const Measurement& p : measurements) phases = phases && p.forward_s >= 0 && p.backward_s >= 0;
  double sum = 0;
  for (const Measurement& p : measurements) {
    const double predicted = m.compute_s(p.local_batch) + (phases ? 0.0 : m.optimizer_s);
    const double e = std::log(predicted / (phases ? p.forward_s + p.backward_s : p.iteration_s));
    sum += e * e;
  }
  return sum;
}

// The measured GPU's own curve `m` held to its peak floor (note "measured floor" at
// measured_model): turned about the measurements' mean batch on batch_grid of `max_batch` or the
// largest measured batch. `m` itself, bit for bit, where it is not under the floor, and where a
// measurement beats its own floor (then there is none). Where every run timed its forward and
// backward, `m`'s optimizer step is measured and the turn keeps it (held_to_floor_about), and a
// run beats its floor where its forward + backward does (the FLOPs are theirs).
ComputeModel measured_held_to_floor(const ComputeModel& m, const WorkloadStats& w, const GpuSpec& gpu,
                                    const std::vector<Measurement>& measurements, Precision precision,
                                    double max_batch) {
  // A line with a fixed cost >= 0 dips under floor x b only where its slope is under the floor:
  // the curves the floor does not touch cost one pass over the layers, and no grid.
  if (!(m.per_sample_s() < peak_floor_per_sample(w, gpu, precision))) return m;
  const double floor = peak_floor_per_sample(w, gpu, precision, &gpu, &measurements);  // 0: a run beats it
  if (!(m.per_sample_s() < floor)) return m;
  double span = (std::isfinite(max_batch) && max_batch > 0) ? max_batch : 0.0;
  double mean_batch = 0;  // summed as the least-squares fit sums it (compute.cpp line_of)
  const double n = static_cast<double>(measurements.size());
  bool phases = true;  // every run timed its forward and backward: the optimizer step is measured
  for (const Measurement& p : measurements) {
    span = std::max(span, p.local_batch);
    mean_batch += p.local_batch / n;
    phases = phases && p.forward_s >= 0 && p.backward_s >= 0;
  }
  if (phases) {
    // The FLOPs are the forward's and the backward's: a run whose forward + backward beats the
    // floor beats its own (no floor). Else the compute at the mean batch is on or above the
    // floor there, and the turn that keeps the measured step leaves a fixed cost >= 0.
    for (const Measurement& p : measurements) {
      if (p.forward_s + p.backward_s < floor * p.local_batch) return m;
    }
  }
  return held_to_floor_about(m, batch_grid(span), floor, mean_batch, phases);
}
}  // namespace

// Note "measured floor" for a curve fitted elsewhere: the engine's whole-instance runs (note
// "instance anchor" in srift.learn.comm) scale the GPU's own curve through the instance's
// iterations (anchor_to_measurements), and an instance run faster than that curve, or two whose
// line is shallower than the floor, took it under the floor as one fast 1-GPU run did (over the
// zoo x catalog GPUs x precisions, an instance run at 1.25-4x its floor put 3,336 of 7,560
// curves under it, down to 0.0012x: bench/accuracy.py instance_floor_sweep). The same turn
// holds them.
ComputeModel hold_to_measured_floor(const WorkloadStats& w, const GpuSpec& gpu, const ComputeModel& fitted,
                                    const std::vector<Measurement>& measurements, Precision precision,
                                    double max_batch) {
  if (measurements.empty()) throw std::invalid_argument("measurements must not be empty, got 0 measurements");
  validate_measurements(measurements);
  require_precision(measurements, precision);  // note "measurement precision" (compute.hpp)
  fitted.validate();
  check_gpu(gpu);
  check_max_batch(max_batch);  // note "max_batch"
  return measured_held_to_floor(fitted, w, gpu, measurements, precision, max_batch);
}

// Note "measured batch shape": every DDP plan runs its own local batch (the global batch over
// its GPUs), so a GPU measured at one batch is predicted at others, along a curve scaled through
// the measurement. The roofline's curve leaves the fixed per-iteration cost too small; the
// learned model's (predict_absolute) is shipped. On Gavel's and Sia's pairs of 1-GPU rows at two
// batches, median / p90 APE (bench/accuracy.py compute_measured_other_batch):
//                                      roofline     halfway (in log)   learned
//   absolute model held out by chip    25.4 / 98    19.4 / 75          16.0 / 56
//   ... held out by workload           25.4 / 98    19.9 / 78          17.2 / 62
// and on NVIDIA's one-GPU rows (bench/external_nvidia.py) other batch 6.9 / 23, 5.1 / 16,
// 1.7 / 8; anchored on another GPU 8.7 / 25 (halfway), 7.2 / 19 (learned). Halfway was shipped
// until a flat learned curve stopped being fitted through the origin (changelog "A flat curve
// stays flat"; the learned column read 20.3 / 84). What the learned curve still gets wrong:
// NCF's multi-GPU rows at 1/8-1/16 of the 1 M batch the 1-GPU row measured come out 25-71% too
// slow (halfway +1 to +28%); every NCF row it trained on is at 2.5-10 M.
// Note "several batches, no line": two or more batches whose least-squares line has no positive
// slope (noise on a flat curve: Sia's NCF, ~10 ms from batch 32 to 32,768) or a negative
// intercept fit no line, and anchor_to_measurements scales its prior's curve through their mean.
// The roofline's curve is nearly proportional to the batch and the learned one carries a fixed
// cost: the one nearer the measurements (log_misfit) is kept. On pairs of 1-GPU rows predicting
// a third batch of the same source, model and GPU (bench/accuracy.py
// compute_measured_two_batches), median / p90 APE, roofline's curve / learned curve / the nearer:
//   flat or falling   Sia (3,124) 18.6 / 90, 9.5 / 30, 9.5 / 30   Gavel (9) 51.7 / 121, 21.5 / 69, 21.5 / 69
//   negative intercept Sia (317)  11.1 / 35, 27.4 / 50, 11.1 / 35  Gavel (15) 62.4 / 97, 45.0 / 108, 62.4 / 97
// (the intercept clamped at 0 instead: Sia 15.0 / 52, Gavel 66.8 / 94; not shipped).
// Note "measured floor": the note "peak floor" holds here too, on the grid the curve is used on
// (batch_grid of max_batch or the largest measured batch). One fast run scaled the learned
// curve down by its ratio and the slope with it (NCF on a T4 at batch 8 at 3x its FP32 floor:
// 0.024x the floor at batch 1024), and two runs whose own line is shallower than the floor
// extrapolate under it past the larger batch. The curve is turned about the runs' mean batch, at
// their mean time, where every curve above passes (one run: the run itself), by the least slope
// that puts it on the floor at the grid's end; its fixed cost stays >= 0, since no run beats its
// floor (else there is none, as for an anchor) and so neither does their mean. Turned about the
// mean, a least-squares line keeps its residuals summing to 0; on the 71 of Sia's and Gavel's
// two-batch predictions it moves (bench/accuracy.py compute_measured_two_batches,
// peak_floor_moved), median / mean APE 13.3 / 22.1 -> 6.5 / 18.6 (Gavel, 15) and 35.5 / 36.2 ->
// 32.6 / 34.3 (Sia, 56); turned about the larger batch instead 8.0 / 20.1 and 33.3 / 34.4, the
// least-squares line constrained to the floor at the grid's end 6.5 / 18.6 and 32.6 / 34.3. On
// the data's one-batch pairs it moves none (compute_measured_other_batch).
// The floor holds on the grid, 1 to its end, and not past it: a line turned to meet the floor at
// the end, or left as measured with a slope under the floor's, is under it past the end (two runs
// at 2**19 and 2**20, 10% apart: 0.43x the floor at 2**22). So the grid's end is the largest
// local batch the caller asks: the engine passes what fits the GPU's memory, the simulator's own
// limit on a plan's local batch, accumulation micro-steps included (srift/engine.py
// memory_max_batch); with no activation memory the simulator plans up to the global batch, and
// the engine's grid then ends at the largest int (2**20 before). A whole instance's runs are held
// the same way (hold_to_measured_floor).
ComputeModel LearnedCompute::measured_model(const WorkloadStats& w, const GpuSpec& gpu, const ComputeModel& roofline,
                                            const std::vector<Measurement>& measurements, Precision precision,
                                            double max_batch, const GridEnds& grid_ends) const {
  check_max_batch(max_batch);  // note "max_batch"
  require_precision(measurements, precision);  // note "measurement precision" (compute.hpp)
  Memo memo(w, checked_grid_ends(grid_ends));
  return measured_model_memo(w, gpu, roofline, measurements, precision, max_batch, memo);
}

ComputeModel LearnedCompute::measured_model_memo(const WorkloadStats& w, const GpuSpec& gpu, const ComputeModel& roofline,
                                                 const std::vector<Measurement>& measurements, Precision precision,
                                                 double max_batch, Memo& memo) const {
  // Note "memo by inputs": kept by the GPU's spec numbers, the roofline, the runs, the precision
  // and max_batch (an evaluation that throws keeps nothing, so a bad input is refused each time).
  std::vector<double> key = Memo::measured_model_key(gpu, roofline, measurements, precision, max_batch);
  const auto kept = memo.measured_models.find(key);
  if (kept != memo.measured_models.end()) return kept->second;
  const ComputeModel out = measured_model_fresh(w, gpu, roofline, measurements, precision, max_batch, memo);
  memo.measured_models.emplace(std::move(key), out);
  return out;
}

ComputeModel LearnedCompute::measured_model_fresh(const WorkloadStats& w, const GpuSpec& gpu, const ComputeModel& roofline,
                                            const std::vector<Measurement>& measurements, Precision precision,
                                            double max_batch, Memo& memo) const {
  if (measurements.empty()) throw std::invalid_argument("measurements must not be empty, got 0 measurements");
  validate_measurements(measurements);
  roofline.validate();
  bool one_batch = true;
  for (const Measurement& m : measurements) one_batch = one_batch && m.local_batch == measurements.front().local_batch;
  // The learned curve scaled through the measurements, its terms split as the roofline's.
  const auto on_learned_curve = [&] {
    // the GPU's own prediction, whatever it bounds (note "across the fp32 paths, from below":
    // a measured line is the same line as a bound and as a prediction)
    const Memo::Bounding own(memo, false);
    const ComputeModel learned = predict_absolute_memo(w, gpu, precision, max_batch, memo).model;
    return anchor_to_measurements(split_like(roofline, learned.fixed_s() + learned.optimizer_s, learned.per_sample_s()),
                                  measurements);
  };
  // Note "measured floor": each curve below is held to the GPU's peak floor about the mean batch.
  const auto held = [&](const ComputeModel& m) {
    return measured_held_to_floor(m, w, gpu, measurements, precision, max_batch);
  };
  if (one_batch) return held(on_learned_curve());
  const ComputeModel on_roofline = anchor_to_measurements(roofline, measurements);
  const MeasuredLine line = measured_line(measurements);
  if (line.slope > 0 && line.intercept >= 0) return held(on_roofline);  // their own line (the prior only splits it)
  // Note "several batches, no line": the fit fell back to a curve scaled through the mean; of
  // the two, keep the one nearer the measurements (see the note above).
  const ComputeModel on_learned = on_learned_curve();
  return held(log_misfit(on_learned, measurements) < log_misfit(on_roofline, measurements) ? on_learned : on_roofline);
}

}  // namespace srift
