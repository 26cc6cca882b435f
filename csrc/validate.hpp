#pragma once
// Input checks shared by the core's translation units: every failure names the field and
// the value so a Python user sees e.g. "global_batch must be >= 1, got 0".
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>

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

inline void require_finite_nonneg(const std::string& field, double v) {
  if (!std::isfinite(v) || v < 0) fail(field, "finite and >= 0", v);
}

inline void require_positive(const std::string& field, double v) {
  if (!std::isfinite(v) || v <= 0) fail(field, "finite and > 0", v);
}

}  // namespace srift::detail
