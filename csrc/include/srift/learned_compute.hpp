#pragma once
// Learned compute time of a profiled workload on a GPU type: the features the learned models
// read, and the way the engine combines the two shipped models (srift/data/models
// compute_ratio.json and compute_absolute.json) into a ComputeModel, so that a C++ scheduler
// gets the same prediction as `import srift`.
//
// Note "learned compute". Both models predict the log of what the v0 roofline gets wrong:
//   ratio model    log(t_b / t_a) - log(roof_b / roof_a)   given a measurement on GPU a
//   absolute model log(t / roof)                            no measurement anywhere
// With a measurement on GPU a the time on b is the anchored model scaled by
//   exp(roof ratio + (1 - s) [(1 - w) ratio + w (abs(b) - abs(a))] + s (abs(b) - observed(a)))
// (blend weight w, shrink s; observed(a) = log of the measurement over a's roofline at the
// measured batch), then clipped by the same prediction for the reference GPUs that b beats, or
// is beaten by, on every spec (dominance). Without one, the absolute model's corrected
// roofline, clipped the same way, is fitted on a geometric batch grid by an affine model.
//
// Note "several anchors". With measurements on several GPU types, each predicts the target and
// the predictions are averaged in log time (a geometric mean). Held out, as shipped (clipped),
// median / p90 APE by target row, one measured type at a time against the mean of all of the
// group's others (bench/accuracy.py compute_several_anchors_*): leaving the target's chip out,
// Lambda 10.2 / 28 -> 9.4 / 25 (11 types), Gavel 26.4 / 66 -> 25.0 / 57, Sia 29.1 / 95 ->
// 28.3 / 78; leaving the model out, Lambda 9.8 / 30 -> 8.4 / 23. With the models shipped before,
// an arithmetic mean let Sia's host-bound outliers through (38 / 157 unclipped), and taking only
// the type nearest by specs was worse still (Sia 42 / 488). The band stays a single anchor's
// (x0.83-x1.27): it holds 86% of Lambda's several-anchor predictions and 45% of Gavel's.
//
// Note "data edge". A GPU launched after every GPU chip the models learned from (GpuSpec::
// launch_year > the documents' data_edge.launch_year) is a generation they never saw, and on
// each past generation the forward split (srift.learn.train note "forward") found the models
// too fast: the new chip realises less of its datasheet lead than the older chips' trend says.
// Its time is multiplied by the forward split's median lean exp(p50) before the dominance
// clip (so it stays no slower than a reference it beats on every spec), and its band is the
// wider of the in-range band and the forward residuals around that lean. Anchored from a GPU
// past the edge to one inside it, the ratio is read the other way: the lean divides and the
// band is mirrored; with both past the edge the leans cancel and the band is the wider of
// both. A GPU with no launch year (0) is taken as inside the data, and so is one with, at the
// precision predicted, the specs of a GPU the models learned from (a dominance reference of
// either document; the catalog's B300 has the B200's): the models read nothing new of it.
// Pairs the ratio model does not cover (note "no fp16 path") keep the roofline's ratio and
// band. srift.learn.data_edge documents the split and the backtest.
//
// srift.learn.blend, srift.learn.dominance and srift.learn.models document the choices and
// the held-out errors behind them; the Python training code computes the same features
// (srift.learn.features), and a test holds both implementations equal.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "srift/compute.hpp"
#include "srift/hardware.hpp"
#include "srift/learned.hpp"
#include "srift/measurements.hpp"
#include "srift/workload.hpp"

namespace srift {

/// GPU-independent descriptors of a profiled workload's layers (per sample).
class WorkloadStats {
 public:
  /// `optimizer_bytes`: memory traffic of one optimizer step, bytes. Throws
  /// std::invalid_argument on an empty or invalid layer table.
  WorkloadStats(std::vector<LayerCost> layers, double optimizer_bytes);

  const std::vector<LayerCost>& layers() const { return layers_; }
  double optimizer_bytes() const { return optimizer_bytes_; }
  /// Share of the FLOPs (forward + backward) in layers of `kind`, in [0, 1].
  double flop_share(OpKind kind) const;
  /// log10 of FLOPs per byte of activation and parameter traffic.
  double log_intensity() const { return log_intensity_; }
  /// FLOPs per sample, forward + backward (1 when the table has none).
  double flops_per_sample() const { return flops_per_sample_; }
  /// log10 of the FLOPs of one iteration at `batch` (at least 0).
  double log_work(double batch) const;
  /// Share of the roofline's per-sample time spent in bandwidth-bound layers on `gpu`.
  double membound_share(const GpuSpec& gpu, Precision precision) const;
  /// The v0 roofline (default RooflineParams) on `gpu`.
  ComputeModel roofline(const GpuSpec& gpu, Precision precision) const;

 private:
  std::vector<LayerCost> layers_;
  double optimizer_bytes_ = 0;
  double shares_[kNumOpKinds] = {};
  double log_intensity_ = 0;
  double flops_per_sample_ = 1;
};

/// Peak FLOP/s that matmuls and convolutions run against at `precision`: FP16 tensor peak
/// under AMP where the GPU has one, else TF32 where it has one (TF32 and AMP), else FP32.
double matmul_peak_flops(const GpuSpec& gpu, Precision precision);

/// Whether GPU `b` is at least as fast as `a` on the matmul peak at `precision`, the FP32 peak
/// and the memory bandwidth, and faster on one of them.
bool dominates(const GpuSpec& b, const GpuSpec& a, Precision precision);

/// Whether the ratio model covers the pair: under AMP both GPUs need an FP16 path.
bool has_fp16_path(const GpuSpec& anchor, const GpuSpec& target, Precision precision);

/// Roofline time per sample (seconds) at `batch`: (compute + optimizer) / batch.
double roofline_per_sample_s(const WorkloadStats& w, const GpuSpec& gpu, Precision precision, double batch);

/// The ratio model's 32 features (srift.learn.features RATIO_FEATURES, in order).
std::vector<double> ratio_features(const WorkloadStats& w, const GpuSpec& a, double batch_a, const GpuSpec& b,
                                   double batch_b, Precision precision);
/// The absolute model's 9 features (srift.learn.features ABSOLUTE_FEATURES, in order).
std::vector<double> absolute_features(const WorkloadStats& w, const GpuSpec& gpu, double batch, Precision precision);

/// The names of ratio_features' 32 values and of absolute_features' 9, in order (srift.learn.
/// features RATIO_FEATURES and ABSOLUTE_FEATURES): a compute_ratio / compute_absolute document's
/// `features` must be exactly these (LearnedCompute refuses any other list, naming the slot).
const std::vector<std::string>& ratio_feature_names();
const std::vector<std::string>& absolute_feature_names();

/// Local batches (samples) of the absolute model's fit: a geometric grid, 4 points a decade,
/// rounded and deduplicated, from 1 to max(max_batch, 1024), at most 2147483647 (a local
/// batch is an int); max_batch <= 0 (not known): 1 to 1024. Throws std::invalid_argument
/// naming max_batch when it is NaN or infinite (learned_compute.cpp note "max_batch").
std::vector<double> batch_grid(double max_batch);

/// (fixed s, per-sample s) of t = fixed + per_sample * b minimising the squared relative error
/// over the points, both non-negative. `min_per_sample` (s/sample) > 0: the slope is at least
/// that, the intercept refitted under it (a flat or falling curve is a fixed time plus that
/// slope); 0: a falling curve, or one batch, gets the mean per-sample time through the origin.
/// Throws std::invalid_argument on non-positive values or a negative floor.
std::pair<double, double> affine_relative_fit(const std::vector<double>& batches, const std::vector<double>& seconds,
                                              double min_per_sample = 0);

/// `fitted`, a compute model of `gpu` fitted through `measurements` of the workload on it
/// (anchor_to_measurements of any prior: srift/engine.py fits a whole instance's DDP iterations
/// through its GPU's own curve, note "instance anchor"), held to the GPU's peak floor as
/// LearnedCompute::measured_model holds its own curves (learned_compute.cpp note "measured
/// floor"): where it is under the workload's FLOPs at the GPU's peak
/// (peak_flop_seconds_per_sample x b) at some batch of batch_grid(max(`max_batch`, the largest
/// measured batch)), turned about the measurements' mean batch, through their mean time, by the
/// least slope that puts it on the floor at the grid's end; `fitted` itself, bit for bit,
/// elsewhere and where a measurement beats its own floor (then there is none). The floor holds
/// on that grid's batches, 1 to its end: a line turned to meet it at the end is under it past
/// the end, so a caller passes as `max_batch` the largest local batch it will ask (the engine:
/// what fits the GPU's memory, as the simulator plans it).
/// `max_batch` <= 0: not known (the grid of the measured batches, at least 1024).
/// Throws std::invalid_argument on no measurements, a bad batch or time, an invalid `fitted`, a
/// `max_batch` that is NaN or infinite (named), or naming measurements[i].precision for a run
/// timed at another precision than `precision`.
ComputeModel hold_to_measured_floor(const WorkloadStats& w, const GpuSpec& gpu, const ComputeModel& fitted,
                                    const std::vector<Measurement>& measurements, Precision precision,
                                    double max_batch);

/// How the shipped compute documents combine (see note "learned compute").
struct LearnedComputeConfig {
  bool blend = false;        ///< the ratio document has an absolute_blend: weight and shrink apply
  double blend_weight = 0;   ///< w in [0, 1]
  double shrink = 0;         ///< s in [0, 1]
  std::vector<GpuSpec> ratio_references;     ///< dominance references of anchored predictions
  std::vector<GpuSpec> absolute_references;  ///< of predictions with no measurement
  /// p10/p90 log residuals: of anchored predictions (the blend's where there is one), of the
  /// roofline ratio alone (pairs the ratio model does not cover), of the absolute model (a new
  /// GPU chip in a new lab: srift.learn.lab_band note "lab band").
  double anchored_p10 = 0, anchored_p90 = 0;
  double roofline_p10 = 0, roofline_p90 = 0;
  double absolute_p10 = 0, absolute_p90 = 0;
  /// p10/p90 factors (multiply the time) of a GPU type the profile measured: host-to-host
  /// noise of the measurement itself, and per e-fold of local batch away from the measured
  /// batch (band.hpp note "measured batch band"), from compute_absolute.json's measured_band
  /// (srift.learn.measured_band note "measured band"). 1: the document records none.
  double measured_p10 = 1, measured_p90 = 1;
  double measured_per_e_fold_p10 = 1, measured_per_e_fold_p90 = 1;
  /// Note "data edge": the launch year of the newest GPU chip the models learned from (0: the
  /// documents record none, and no GPU is past the edge; nor is a GPU with the specs of one of
  /// the references above, the GPUs the models learned from), and the forward split's log
  /// residuals log(measured / predicted) of a GPU newer than its training chips, anchored on
  /// an older one and with no measurement (p10 <= p50 <= p90).
  int edge_year = 0;
  double edge_anchored_p10 = 0, edge_anchored_p50 = 0, edge_anchored_p90 = 0;
  double edge_absolute_p10 = 0, edge_absolute_p50 = 0, edge_absolute_p90 = 0;

  void validate() const;
};

/// The combination the shipped documents record (srift/data/models): compute_ratio.json's
/// absolute_blend (weight, shrink, residuals, dominance_guard) and roofline_residuals,
/// compute_absolute.json's residuals, dominance_guard and measured_band (noise and per_e_fold,
/// each p10/p90 factors; optional), and both documents' data_edge (launch_year, p10, p50, p90;
/// optional, but both or neither, with one launch_year); each dominance_guard lists its
/// reference GPUs and their specs (reference_specs: FLOP/s, bytes/s, bytes). A document
/// without roofline_residuals uses its own residuals there. Throws std::invalid_argument
/// naming the JSON path of a missing or bad field, or of a key either document may not hold
/// anywhere (the top level as a compute_ratio / compute_absolute document, whatever its name;
/// every object whose keys the schema closes, read here or not; a reference_specs entry for a
/// GPU that is not one of its references; a reference listed twice), or of a value the schema
/// refuses anywhere in either (a null dominance_guard, data_edge, absolute_blend, measured_band
/// or roofline_residuals is refused, not taken for an absent one).
LearnedComputeConfig learned_compute_config(const std::string& ratio_json, const std::string& absolute_json);

/// A predicted compute model with its p10/p90 factors (multiply the predicted time).
struct LearnedComputeResult {
  ComputeModel model;
  double p10_factor = 1;
  double p90_factor = 1;
  bool roofline_ratio_only = false;  ///< anchored on a pair the ratio model does not cover
  /// Note "data edge": the target (or the anchor) is newer than every GPU the models learned
  /// from, with specs none of them has, and the prediction carries a new generation's lean and
  /// band.
  bool past_data_edge = false;
  /// Note "same specs": the target has the anchor's specs, and the model is the anchor's own
  /// measured curve (a caller widens its band away from the measured batch as the measured
  /// GPU's own: band.hpp note "measured batch band").
  bool same_specs_anchor = false;
};

/// Note "own grids" (learned_compute.cpp): the end of each GPU's own batch grid, by its memory:
/// (GpuSpec::memory_bytes, the largest local batch that fits a GPU of that memory, samples; <= 0
/// when not known), as a caller that knows the workload's memory computes it for every GPU it
/// predicts (srift.Engine.memory_max_batch). A dominance reference (or an anchor) whose memory is
/// listed bounds a target with its own line, fitted on its own grid, where it bounds it at all;
/// one not listed is fitted on the target's grid (`max_batch`). Empty: every reference on the
/// target's grid, as before the table. Each memory at most once, each entry finite, memory > 0.
/// A listed end <= 0 (not known) is, as max_batch <= 0, the least grid (1..1,024), which every
/// end up to 1,024 also gives: unlike an unlisted memory, not the target's grid. A reference whose
/// grid ends before the target's bounds it at the target's grid end with its line extrapolated
/// (note "own grids").
using GridEnds = std::vector<std::pair<double, double>>;

/// Measurements of the workload on one GPU type, to anchor predictions for others.
struct Anchor {
  GpuSpec gpu;
  std::vector<Measurement> measurements;
};

/// The two shipped compute models and how they combine. Immutable; thread-safe.
class LearnedCompute {
 public:
  /// One workload's evaluations kept across calls (learned_compute.cpp note "shared memo"):
  /// every prediction evaluates the dominance references' rooflines, model outputs, guarded
  /// ratios and lines too, the same for every target, so predicting several GPU types of one
  /// workload through one Cache computes each once. Results are bit-identical to the
  /// overloads without a Cache. Owned by the caller: it holds a copy of the workload (read by
  /// the overloads taking it in place of a WorkloadStats), grows with the distinct GPUs,
  /// batches (samples), precisions, grids and measured runs asked (learned_compute.cpp note
  /// "memo by inputs") and holds one set of evaluations per table of grid ends (GridEnds:
  /// learned_compute.cpp note "own grids"), and is bound to the first LearnedCompute (or a
  /// copy of it) that uses it: another throws std::invalid_argument. Calls through one Cache
  /// are serialized (a mutex); it is neither copyable nor movable.
  class Cache {
   public:
    explicit Cache(WorkloadStats workload);
    ~Cache();
    Cache(const Cache&) = delete;
    Cache& operator=(const Cache&) = delete;
    const WorkloadStats& workload() const { return workload_; }

   private:
    friend class LearnedCompute;
    struct State;
    WorkloadStats workload_;
    std::unique_ptr<State> state_;
  };

  /// Throws std::invalid_argument when a model's features are not the ones the core computes
  /// for it (ratio_feature_names(), absolute_feature_names(): count, names and order; the
  /// message names the slot, e.g. "compute_ratio.features[3]: expected 'log_bw_ratio', got
  /// ...") or the config is invalid.
  LearnedCompute(LearnedModel ratio, LearnedModel absolute, LearnedComputeConfig config);

  /// The two documents as shipped: the models and learned_compute_config of them.
  static LearnedCompute from_documents(const std::string& ratio_json, const std::string& absolute_json);

  const LearnedComputeConfig& config() const { return config_; }

  /// log(t_target / t_anchor) per sample, both at `batch`, from a measurement on `anchor`
  /// whose log deviation from its roofline at that batch is `observed_anchor` (NaN: leave the
  /// shrink term out), before the dominance clip. Throws std::invalid_argument on an
  /// observed_anchor of +-inf.
  double anchored_log_ratio(const WorkloadStats& w, const GpuSpec& anchor, const GpuSpec& target, double batch,
                            Precision precision, double observed_anchor) const;
  /// The same, moved by the data edge's lean where either GPU is past it (note "data edge") and
  /// clipped by the ratio references (note "learned compute").
  double guarded_log_ratio(const WorkloadStats& w, const GpuSpec& anchor, const GpuSpec& target, double batch,
                           Precision precision, double observed_anchor) const;
  /// The absolute model's log corrections of `target`'s roofline at `batches`, with the data
  /// edge's lean where `target` is past it, clipped by the absolute references.
  std::vector<double> absolute_corrections(const WorkloadStats& w, const GpuSpec& target,
                                           const std::vector<double>& batches, Precision precision) const;

  /// Compute on `target` anchored to measurements of the same workload on `anchor` (note
  /// "anchored batch shape"): at each batch of the grid of `max_batch` (samples; <= 0 when
  /// unknown; the grid reaches the measured batches too), the anchor's measured curve
  /// (measured_model) times the guarded ratio at that batch; fitted as a line and split as the
  /// target's roofline; a target that dominates the anchor (dominates()) is then no slower than
  /// the anchor's measured curve at every measured batch, one the anchor dominates no faster.
  /// At PyTorch's FP32 on a target with TF32, a ratio reference without TF32 that the target
  /// dominates also bounds it from above, as predict_anchored predicts that reference
  /// (learned_compute.cpp note "across the fp32 paths"). No grid point is faster than the
  /// target's FLOPs at its peak (peak_flop_seconds_per_sample), unless a measurement beats the
  /// anchor's own: then the FLOP count is off and there is no floor (learned_compute.cpp note
  /// "peak floor"). A target whose specs (the peaks and memory bandwidth dominates() compares)
  /// equal the anchor's, the same chip with more memory, is the anchor's measured curve itself,
  /// with the anchored band (learned_compute.cpp note "same specs").
  /// Throws std::invalid_argument on no measurements or a bad batch, a `max_batch` that is NaN
  /// or infinite (named; learned_compute.cpp note "max_batch"), or naming
  /// measurements[i].precision for a run timed at another precision than `precision`
  /// (compute.hpp note "measurement precision"; unset: vouched for by the caller).
  LearnedComputeResult predict_anchored(const WorkloadStats& w, const GpuSpec& anchor,
                                        const std::vector<Measurement>& measurements, const GpuSpec& target,
                                        Precision precision, double max_batch = 0,
                                        const GridEnds& grid_ends = {}) const;
  /// Compute on `target` from measurements on several GPU types (note "several anchors"): the
  /// geometric mean of each anchor's predicted iteration time, fitted on the batch grid of
  /// `max_batch` (as predict_absolute) and split as the target's roofline; one anchor: exactly
  /// predict_anchored. An anchor with the target's specs is used alone (note "same specs");
  /// otherwise anchors that share no FP16 path with the target under AMP are left out unless
  /// none has one. The band is a single anchor's (held-out residuals of one anchor).
  /// Throws std::invalid_argument as the one-anchor overload does, naming
  /// anchors[j].measurements[i].precision for a run at another precision, or on no anchors.
  LearnedComputeResult predict_anchored(const WorkloadStats& w, const std::vector<Anchor>& anchors,
                                        const GpuSpec& target, Precision precision, double max_batch,
                                        const GridEnds& grid_ends = {}) const;
  /// Compute on `target` with no measurement; `max_batch`: the largest local batch that fits
  /// (samples; <= 0 when unknown: the grid then ends at 1024). `grid_ends` (every prediction
  /// here takes one): each reference's own grid end by its memory (note "own grids" at GridEnds). Pass it when known, as
  /// srift.predict does: a launch-bound model whose time is flat over a short grid (NCF: 9.6 ms
  /// from batch 1 to 1024) fits no positive slope, and affine_relative_fit's fallback, the mean
  /// per-sample time through the origin, then predicted 0.42 s at batch 256 (a review; over the
  /// memory limit's grid the zoo models stay within 0.78-1.26x). Precision::fp32 on a GPU with
  /// TF32 (PyTorch's default: TF32 convolutions, FP32 matmuls) is the TF32 prediction times the
  /// roofline's default/all-TF32 ratio, term by term, in both predictions (learned_compute.cpp
  /// note "fp32 via tf32"). No grid point is faster than the target's FLOPs at its peak
  /// (learned_compute.cpp note "peak floor"). Throws std::invalid_argument naming `max_batch`
  /// when it is NaN or infinite (learned_compute.cpp note "max_batch").
  LearnedComputeResult predict_absolute(const WorkloadStats& w, const GpuSpec& target, Precision precision,
                                        double max_batch, const GridEnds& grid_ends = {}) const;
  /// Compute on a GPU type the workload was measured on (note "measured batch shape"). Two or
  /// more distinct batches fit their own line: anchor_to_measurements(roofline, measurements);
  /// where the line has no positive slope or a negative intercept, the roofline's curve or
  /// predict_absolute's scaled through their mean, whichever is nearer them (note "several
  /// batches, no line"). One batch says nothing of how the time grows with the batch, so it scales
  /// predict_absolute's line (on the batch grid of `max_batch`) through the measurement, its
  /// terms split as `roofline` (this GPU's roofline estimate, seconds). No batch of the grid of
  /// `max_batch` (samples; <= 0 when unknown; the grid reaches the measured batches too) is
  /// faster than the workload's FLOPs at this GPU's peak (peak_flop_seconds_per_sample, seconds
  /// per sample): a curve under it is turned about the measurements' mean batch, through their
  /// mean time, to the floor at the grid's end; no floor where a measurement beats its own
  /// (learned_compute.cpp note "measured floor"). The floor holds up to the grid's end only
  /// (a line under the floor's slope is under it past the end): pass as `max_batch` the
  /// largest local batch the model will be asked.
  /// Throws std::invalid_argument on no measurements or a bad batch or time, a `max_batch` that
  /// is NaN or infinite (named; learned_compute.cpp note "max_batch"), or naming
  /// measurements[i].precision for a run timed at another precision than `precision`
  /// (compute.hpp note "measurement precision"; unset: vouched for by the caller).
  ComputeModel measured_model(const WorkloadStats& w, const GpuSpec& gpu, const ComputeModel& roofline,
                              const std::vector<Measurement>& measurements, Precision precision,
                              double max_batch, const GridEnds& grid_ends = {}) const;

  /// The same four predictions of `cache.workload()`, keeping their evaluations in `cache`
  /// (see Cache): bit-identical to the overloads above, which each start an empty one.
  LearnedComputeResult predict_anchored(Cache& cache, const GpuSpec& anchor,
                                        const std::vector<Measurement>& measurements, const GpuSpec& target,
                                        Precision precision, double max_batch = 0,
                                        const GridEnds& grid_ends = {}) const;
  LearnedComputeResult predict_anchored(Cache& cache, const std::vector<Anchor>& anchors, const GpuSpec& target,
                                        Precision precision, double max_batch, const GridEnds& grid_ends = {}) const;
  LearnedComputeResult predict_absolute(Cache& cache, const GpuSpec& target, Precision precision,
                                        double max_batch, const GridEnds& grid_ends = {}) const;
  ComputeModel measured_model(Cache& cache, const GpuSpec& gpu, const ComputeModel& roofline,
                              const std::vector<Measurement>& measurements, Precision precision,
                              double max_batch, const GridEnds& grid_ends = {}) const;

 private:
  // Evaluations kept by their inputs (learned_compute.cpp note "memo"). The public functions
  // above each start one, or use a Cache's; these overloads share it.
  struct Memo;
  LearnedComputeResult predict_anchored_memo(const WorkloadStats& w, const GpuSpec& anchor,
                                        const std::vector<Measurement>& measurements, const GpuSpec& target,
                                        Precision precision, double max_batch, Memo& memo) const;
  LearnedComputeResult predict_anchored_memo(const WorkloadStats& w, const std::vector<Anchor>& anchors,
                                        const GpuSpec& target, Precision precision, double max_batch,
                                        Memo& memo) const;
  // A target with the anchor's specs: the anchor's measured curve (learned_compute.cpp note
  // "same specs").
  LearnedComputeResult on_same_specs(const WorkloadStats& w, const GpuSpec& anchor,
                                     const std::vector<Measurement>& measurements, Precision precision,
                                     double max_batch, Memo& memo) const;
  // predict_anchored before its order guard (learned_compute.cpp note "order at the measurement").
  LearnedComputeResult predict_anchored_fit(const WorkloadStats& w, const GpuSpec& anchor,
                                            const std::vector<Measurement>& measurements, const GpuSpec& target,
                                            Precision precision, double max_batch, Memo& memo) const;
  LearnedComputeResult predict_absolute_memo(const WorkloadStats& w, const GpuSpec& target, Precision precision,
                                        double max_batch, Memo& memo) const;
  LearnedComputeResult predict_absolute_fresh(const WorkloadStats& w, const GpuSpec& target, Precision precision,
                                              double max_batch, Memo& memo) const;
  // (fixed s, per-sample s) of the line predict_absolute fits for `g` on `grid` before the
  // lines are put in order (learned_compute.cpp note "lines in order").
  std::pair<double, double> absolute_line_memo(const WorkloadStats& w, const GpuSpec& g, Precision precision,
                                               const std::vector<double>& grid, Memo& memo) const;
  std::pair<double, double> absolute_line_fresh(const WorkloadStats& w, const GpuSpec& g, Precision precision,
                                                const std::vector<double>& grid, Memo& memo) const;
  ComputeModel measured_model_memo(const WorkloadStats& w, const GpuSpec& gpu, const ComputeModel& roofline,
                              const std::vector<Measurement>& measurements, Precision precision, double max_batch,
                              Memo& memo) const;
  ComputeModel measured_model_fresh(const WorkloadStats& w, const GpuSpec& gpu, const ComputeModel& roofline,
                                    const std::vector<Measurement>& measurements, Precision precision,
                                    double max_batch, Memo& memo) const;
  std::vector<double> absolute_corrections_memo(const GpuSpec& target,
                                           const std::vector<double>& batches, Precision precision,
                                           Memo& memo) const;
  double guarded_log_ratio_memo(const WorkloadStats& w, const GpuSpec& anchor, const GpuSpec& target, double batch,
                           Precision precision, double observed_anchor, Memo& memo) const;
  double guarded_log_ratio_fresh(const WorkloadStats& w, const GpuSpec& anchor, const GpuSpec& target, double batch,
                                 Precision precision, double observed_anchor, Memo& memo) const;
  struct AnchorTerms;  // what every ratio from one anchor shares (learned_compute.cpp)
  AnchorTerms anchor_terms(const GpuSpec& anchor, double batch, Precision precision,
                           Memo& memo) const;
  double anchored_log_ratio_from(const WorkloadStats& w, const AnchorTerms& at, const GpuSpec& anchor,
                                 const GpuSpec& target, double batch, Precision precision, double observed_anchor,
                                 Memo& memo) const;

  // The Memo of `cache` for this model and `grid_ends` (locked by the caller); throws when
  // another model's (learned_compute.cpp note "own grids": one Memo per table).
  Memo& memo_of(Cache& cache, const GridEnds& grid_ends) const;

  LearnedModel ratio_;
  LearnedModel absolute_;
  LearnedComputeConfig config_;
  std::uint64_t id_ = 0;  // shared by copies (same models and config): which Cache memos are this one's
};

}  // namespace srift
