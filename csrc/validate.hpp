#pragma once
// Input checks shared by the core's translation units: every failure names the field and
// the value so a Python user sees e.g. "global_batch must be >= 1, got 0".
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace srift {
struct Measurement;
}

namespace srift::detail {

inline std::string fmt(double v) {
  std::ostringstream s;
  s.precision(10);
  s << v;
  return s.str();
}

[[noreturn]] inline void fail(const std::string& field, const std::string& rule, double value) {
  throw std::invalid_argument(field + " must be " + rule + ", got " + fmt(value));
}

// The field's std::string is built only to report a failure (ComputeModel::validate runs for
// every offer of every search call, twice, with literal names).
inline void require_finite_nonneg(std::string_view field, double v) {
  if (!std::isfinite(v) || v < 0) fail(std::string(field), "finite and >= 0", v);
}

inline void require_positive(std::string_view field, double v) {
  if (!std::isfinite(v) || v <= 0) fail(std::string(field), "finite and > 0", v);
}

// Note "log factor": a held-out residual quantile (the log of measured over predicted time)
// becomes a band factor exp(v) of the predicted time. Past log(DBL_MAX) = 709.78 either side of
// 0 that factor is +inf or 0: a document whose residuals.p90 was 1e14 loaded, and its p90
// factor was inf (an iteration's p90 of inf s; in Python a bare OverflowError from math.exp).
// Every quantile, and every spread of two that a band takes exp() of, is refused past it
// (srift/learn/loader.py check_residual_order is the Python twin).
inline constexpr const char* kLogFactorRule =
    "a log factor whose exp() is a finite number > 0 (at most 709.78 either side of 0)";

inline bool is_log_factor(double v) { return std::isfinite(v) && std::isfinite(std::exp(std::fabs(v))); }

inline void require_log_factor(std::string_view field, double v) {
  if (!is_log_factor(v)) fail(std::string(field), kLogFactorRule, v);
}

// A feasible iteration whose time overflowed to +inf (or NaN): inputs near the largest double
// (1e308 s of fixed compute, a link of 1e-300 bytes/s) must not make a plan "feasible" in an
// infinite time. `what` names the cluster or plan.
inline void require_finite_iteration(const std::string& what, double iteration_s, double compute_s, double comm_s) {
  if (std::isfinite(iteration_s)) return;
  throw std::invalid_argument(what + ": the predicted iteration time overflows (iteration " + fmt(iteration_s) +
                              " s, compute " + fmt(compute_s) + " s, allreduce " + fmt(comm_s) +
                              " s): a compute model or link is out of any real range");
}

// An enum passed in from outside (a cast from int, a field of a struct) that names none of
// its values: Objective(5) was searched as max_throughput, Precision(7) as fp32.
inline void require_enum(const char* field, int value, int first, int last) {
  if (value < first || value > last) {
    throw std::invalid_argument(std::string(field) + " must be one of the enum's values " + std::to_string(first) +
                                ".." + std::to_string(last) + ", got " + std::to_string(value));
  }
}

// The checks of validate_measurements on one measurement, naming its fields after `prefix`
// (e.g. "measurements[2]."); defined in compute.cpp.
void validate_measurement(const Measurement& m, const std::string& prefix);

}  // namespace srift::detail
