#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>

#include "bindings.hpp"
#include "srift/learned.hpp"

namespace py = pybind11;

namespace srift::bindings {

void bind_learned(py::module_& m) {
  using DoubleArray = py::array_t<double, py::array::c_style | py::array::forcecast>;

  py::class_<LearnedModel>(m, "LearnedModel",
                           "A learned regression model (schema srift.learned-model/1) evaluated by the core.")
      .def_static(
          "from_json",
          [](const std::string& text) {
            py::gil_scoped_release release;
            return LearnedModel::from_json(text);
          },
          py::arg("text"), "Parse and validate a model document; ValueError names the bad field.")
      .def_property_readonly("name", &LearnedModel::name)
      .def_property_readonly("feature_names", &LearnedModel::feature_names)
      .def_property_readonly("num_features", &LearnedModel::num_features)
      .def_property_readonly("type", [](const LearnedModel& self) {
        switch (self.type()) {
          case LearnedModel::Type::linear: return std::string("linear");
          case LearnedModel::Type::tree_ensemble: return std::string("tree_ensemble");
          case LearnedModel::Type::mlp: return std::string("mlp");
          case LearnedModel::Type::mean: return std::string("mean");  // compute_absolute.json
        }
        return std::string("unknown");
      })
      .def_property_readonly("residual_p10", &LearnedModel::residual_p10)
      .def_property_readonly("residual_p90", &LearnedModel::residual_p90)
      .def(
          "predict",
          [](const LearnedModel& self, const DoubleArray& x) {
            if (x.ndim() == 1) {
              const double* data = x.data();
              const auto n = static_cast<std::size_t>(x.shape(0));
              double y = 0;
              {
                py::gil_scoped_release release;
                y = self.predict(data, n);
              }
              return DoubleArray(py::ssize_t{1}, &y);
            }
            if (x.ndim() != 2) throw std::invalid_argument("x must be 1-D (one row) or 2-D (rows x features)");
            const auto rows = static_cast<std::size_t>(x.shape(0));
            const auto cols = static_cast<std::size_t>(x.shape(1));
            DoubleArray out(static_cast<py::ssize_t>(rows));
            double* dst = out.mutable_data();
            const double* src = x.data();
            {
              py::gil_scoped_release release;
              self.predict_batch(src, rows, cols, dst);
            }
            return out;
          },
          py::arg("x"), "Raw predictions for rows of features (float64 array).");
}

}  // namespace srift::bindings
