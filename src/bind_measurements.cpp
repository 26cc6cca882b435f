#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <vector>

#include "bindings.hpp"
#include "srift/measurements.hpp"

namespace py = pybind11;

namespace srift::bindings {

void bind_measurements(py::module_& m) {
  m.def("precision_name", &precision_name, py::arg("precision"), "'fp32', 'tf32' or 'amp'.");
  m.def("require_precision", &require_precision, py::arg("measurements"), py::arg("precision"),
        py::arg("name") = "measurements", py::call_guard<py::gil_scoped_release>(),
        "ValueError naming name[i].precision for a measurement timed at another precision than `precision` "
        "(None: vouched for).");
  m.def("measurements_at", &measurements_at, py::arg("measurements"), py::arg("precision"),
        py::call_guard<py::gil_scoped_release>(),
        "The measurements a prediction at `precision` may read, in order: at it, or with no precision.");
  m.attr("REPEAT_SPREAD_SHARE") = kRepeatSpreadShare;

  py::class_<MeasuredRun>(m, "MeasuredRun", "One measured run and its configuration, for merge_repeats.")
      .def(py::init<>())
      .def(py::init([](const Measurement& point, int accumulation_steps, double measured_s) {
             return MeasuredRun{point, accumulation_steps, measured_s};
           }),
           py::arg("point"), py::arg("accumulation_steps") = 1, py::arg("measured_s") = -1.0)
      .def_readwrite("point", &MeasuredRun::point)
      .def_readwrite("accumulation_steps", &MeasuredRun::accumulation_steps)
      .def_readwrite("measured_s", &MeasuredRun::measured_s);

  py::class_<RepeatGroup>(m, "RepeatGroup", "A configuration measured more than once whose repeats disagree.")
      .def_readonly("local_batch", &RepeatGroup::local_batch)
      .def_readonly("accumulation_steps", &RepeatGroup::accumulation_steps)
      .def_readonly("precision", &RepeatGroup::precision)
      .def_readonly("members", &RepeatGroup::members)
      .def_readonly("spread", &RepeatGroup::spread)
      .def_readonly("used_s", &RepeatGroup::used_s);

  py::class_<MergedRepeats>(m, "MergedRepeats", "merge_repeats' answer.")
      .def_readonly("points", &MergedRepeats::points)
      .def_readonly("disagreeing", &MergedRepeats::disagreeing);

  m.def("merge_repeats", &merge_repeats, py::arg("runs"), py::arg("spread_share") = kRepeatSpreadShare,
        py::call_guard<py::gil_scoped_release>(),
        "Runs of one configuration merged (srift::merge_repeats): three or more as their median point, the "
        "others as given, in order; and the configurations whose repeats differ by more than spread_share.");
}

}  // namespace srift::bindings
