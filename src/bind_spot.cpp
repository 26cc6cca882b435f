#include <pybind11/pybind11.h>
#include <limits>
#include <string>

#include "bindings.hpp"
#include "srift/spot.hpp"

namespace py = pybind11;

namespace srift::bindings {

void bind_spot(py::module_& m) {
  py::class_<SpotParams>(m, "SpotParams", "Checkpoint/restart assumptions (bytes, bytes/s, seconds).")
      .def(py::init<>())
      .def_readwrite("checkpoint_bytes", &SpotParams::checkpoint_bytes)
      .def_readwrite("write_bytes_per_s", &SpotParams::write_bytes_per_s)
      .def_readwrite("read_bytes_per_s", &SpotParams::read_bytes_per_s)
      .def_readwrite("provisioning_s", &SpotParams::provisioning_s)
      .def_property_readonly("checkpoint_s", &SpotParams::checkpoint_s)
      .def_property_readonly("restart_s", &SpotParams::restart_s)
      .def("validate", &SpotParams::validate);

  py::class_<SpotEstimate>(m, "SpotEstimate", "A run under preemption (seconds; see the note 'spot model').")
      .def(py::init<>())
      .def_readonly("interruptions_per_hour", &SpotEstimate::interruptions_per_hour)
      .def_readonly("nominal_s", &SpotEstimate::nominal_s)
      .def_readonly("checkpoint_s", &SpotEstimate::checkpoint_s)
      .def_readonly("restart_s", &SpotEstimate::restart_s)
      .def_readonly("checkpoint_interval_s", &SpotEstimate::checkpoint_interval_s)
      .def_readonly("checkpoints", &SpotEstimate::checkpoints)
      .def_readonly("failure_free_s", &SpotEstimate::failure_free_s)
      .def_readonly("cost_per_interruption_s", &SpotEstimate::cost_per_interruption_s)
      .def_readonly("expected_interruptions", &SpotEstimate::expected_interruptions)
      .def_readonly("expected_lost_s", &SpotEstimate::expected_lost_s)
      .def_readonly("expected_s", &SpotEstimate::expected_s)
      .def_readonly("p90_s", &SpotEstimate::p90_s)
      .def_readonly("miss_probability", &SpotEstimate::miss_probability);

  m.def("estimate_spot", &estimate_spot, py::arg("nominal_s"), py::arg("interruptions_per_hour"),
        py::arg("params"), py::arg("deadline_s") = std::numeric_limits<double>::infinity(),
        "Expected, p90 time and deadline-miss probability of a run under preemption.");
  m.def("spot_expected_s", &spot_expected_s, py::arg("nominal_s"), py::arg("interruptions_per_hour"),
        py::arg("params"), "Expected wall time under preemption, seconds (what the search uses).");
  m.def("spot_time_quantile", &spot_time_quantile, py::arg("estimate"), py::arg("q"),
        "Wall time at quantile q of an estimate, seconds.");
  m.def("poisson_cdf", &poisson_cdf, py::arg("k"), py::arg("mean"));
  m.def("poisson_quantile", &poisson_quantile, py::arg("mean"), py::arg("q"));
  m.def(
      "interruption_rate_from_class",
      [](const std::string& frequency_class) { return interruption_rate_from_class(frequency_class.c_str()); },
      py::arg("frequency_class"),
      "Interruptions per instance-hour for an AWS Spot Advisor class ('<5%' ... '>20%', 'unknown').");
}

}  // namespace srift::bindings
