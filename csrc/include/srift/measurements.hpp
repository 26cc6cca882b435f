#pragma once
// What a caller does with a workload's measured iterations before a prediction reads them, as
// `import srift` does (srift/engine.py): keep only runs at the predicted precision (compute.hpp
// note "measurement precision") and merge repeated runs of one configuration (note "repeated
// measurements" below), so that a C++ scheduler gets the points the Python engine fits.
//
// Note "repeated measurements". Runs of one configuration (local batch, micro-steps per
// optimizer step and precision; of one GPU or of one rank of a whole instance) are repeats of
// one measurement: two enter a fit as their mean (a least-squares fit on their batch reads
// them so, so they are kept as they are), three or more as their median, each repeat replaced
// by it (the fit keeps their weight), so that one run that timed a warm-up or a busy host does
// not move the curve. Repeats whose slowest is more than kRepeatSpreadShare over their fastest
// disagree more than runs of one configuration do: of 6,494 pairs of Lambda's hosts running
// one benchmark on one GPU configuration 0.8% differ by more, and of Sia's 1,520 pairs of
// repeated multi-node steps 0.7% (the median pair differs by 0.4% and 2.0%); merge_repeats
// reports them, and the Python engine warns of them (docs/accuracy.md, "Repeated runs that
// disagree").
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "srift/compute.hpp"

namespace srift {

/// "fp32", "tf32" or "amp" (srift's and PyTorch's names); throws std::invalid_argument for a
/// value that is none of them.
const char* precision_name(Precision precision);

/// Note "measurement precision" (compute.hpp): throws std::invalid_argument naming
/// `name`[i].precision, its precision and `precision` for the first measurement whose
/// precision is set and is not `precision` (unset: the caller vouches for it). `name` names
/// the vector in the message ("measurements", "anchors[1].measurements"). The functions that
/// predict at a Precision from measurements call it; a caller may call it first.
void require_precision(const std::vector<Measurement>& measurements, Precision precision,
                       const std::string& name = "measurements");

/// The measurements a prediction at `precision` may read, in order: those whose precision is
/// `precision` or unset (vouched for by the caller). For a caller that holds runs at several
/// precisions and predicts at each; the Python engine filters so and names what it leaves out.
std::vector<Measurement> measurements_at(const std::vector<Measurement>& measurements, Precision precision);

/// Share by which the slowest of a configuration's repeats may exceed their fastest before
/// merge_repeats reports them (note "repeated measurements"): 0.20.
constexpr double kRepeatSpreadShare = 0.20;

/// One measured run and its configuration, for merge_repeats.
struct MeasuredRun {
  /// The run as a fit reads it (e.g. an accumulated run as the plain iteration it implies);
  /// point.local_batch, point.precision and accumulation_steps are its configuration.
  Measurement point;
  int accumulation_steps = 1;  ///< micro-steps per optimizer step as run (>= 1)
  double measured_s = -1;      ///< the run's time as measured, seconds (> 0); < 0: point.iteration_s
};

/// A configuration measured more than once whose repeats disagree (note "repeated measurements").
struct RepeatGroup {
  double local_batch = 0;      ///< samples per GPU
  int accumulation_steps = 1;  ///< micro-steps per optimizer step
  std::optional<Precision> precision = std::nullopt;  ///< the runs' (unset: as given)
  std::vector<std::size_t> members;    ///< indices of its runs, ascending (2 or more)
  double spread = 0;  ///< slowest / fastest measured time - 1 (> the share given)
  double used_s = 0;  ///< what the fit reads of their measured times: the mean of 2, the median of 3+, seconds
};

/// merge_repeats' answer.
struct MergedRepeats {
  /// One point per run, in the runs' order: each run of a configuration measured three or more
  /// times replaced by their median point (merge_repeats), the others as given.
  std::vector<Measurement> points;
  /// The configurations whose repeats' measured times differ by more than the share given,
  /// in the order of their first run.
  std::vector<RepeatGroup> disagreeing;
};

/// Merges repeated runs of one configuration (note "repeated measurements"): runs group by
/// (point.local_batch, accumulation_steps, point.precision, an unset precision a value of its
/// own). A group of three or more runs becomes its median point: the middle run by
/// point.iteration_s (stable among equal times), or the mean of the middle two for an even
/// count; its forward_s and backward_s are the same runs' where every run of the group has both,
/// else -1. Reports each group whose slowest measured time (measured_s) is more than
/// (1 + spread_share) times its fastest. Throws std::invalid_argument naming runs[i] and the
/// field for a point validate_measurements refuses, accumulation_steps < 1, a measured_s that
/// is 0 or not finite, or a spread_share that is not finite and >= 0.
MergedRepeats merge_repeats(const std::vector<MeasuredRun>& runs, double spread_share = kRepeatSpreadShare);

}  // namespace srift
