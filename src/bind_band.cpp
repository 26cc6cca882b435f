#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "bindings.hpp"
#include "srift/band.hpp"

namespace py = pybind11;

namespace srift::bindings {

void bind_band(py::module_& m) {
  py::class_<BandFactors>(m, "BandFactors", "Factors on a time at its p10 and p90; (1, 1): no spread, NaN: unknown.")
      .def(py::init<>())
      .def(py::init([](double p10, double p90) { return BandFactors{p10, p90}; }), py::arg("p10"), py::arg("p90"))
      .def_readwrite("p10", &BandFactors::p10)
      .def_readwrite("p90", &BandFactors::p90)
      .def_property_readonly("known", &BandFactors::known)
      .def_property_readonly("trivial", &BandFactors::trivial)
      .def("validate", &BandFactors::validate, py::arg("field"))
      .def("__repr__", [](const BandFactors& f) {
        return "BandFactors(p10=" + std::to_string(f.p10) + ", p90=" + std::to_string(f.p90) + ")";
      });

  py::class_<GroupBand>(m, "GroupBand")
      .def(py::init<>())
      .def_readwrite("compute", &GroupBand::compute)
      .def_readwrite("compute_several", &GroupBand::compute_several)
      .def_readwrite("link", &GroupBand::link)
      .def_readwrite("measured_batch", &GroupBand::measured_batch)
      .def_readwrite("per_e_fold", &GroupBand::per_e_fold)
      .def_readwrite("measured_whole", &GroupBand::measured_whole)
      .def_readwrite("intra_probed", &GroupBand::intra_probed)
      .def_readwrite("network_probed", &GroupBand::network_probed)
      .def("validate", &GroupBand::validate, py::arg("field"));

  py::enum_<ScalingScope>(m, "ScalingScope")
      .value("single_instance", ScalingScope::single_instance)
      .value("multi_instance", ScalingScope::multi_instance)
      .value("probed_single_instance", ScalingScope::probed_single_instance)
      .value("probed_multi_instance", ScalingScope::probed_multi_instance);

  py::class_<ScalingBand>(m, "ScalingBand")
      .def(py::init<>())
      .def("cell", [](const ScalingBand& b, ScalingScope s, int bucket) { return b.cell(s, bucket); },
           py::arg("scope"), py::arg("bucket"))
      .def("set_cell", [](ScalingBand& b, ScalingScope s, int bucket, const BandFactors& f) { b.cell(s, bucket) = f; },
           py::arg("scope"), py::arg("bucket"), py::arg("factors"))
      .def("validate", &ScalingBand::validate);

  py::class_<ScalingLookup>(m, "ScalingLookup")
      .def_readonly("applies", &ScalingLookup::applies)
      .def_readonly("probed", &ScalingLookup::probed)
      .def_readonly("instances", &ScalingLookup::instances)
      .def_readonly("gpus_per_instance", &ScalingLookup::gpus_per_instance)
      .def_readonly("factors", &ScalingLookup::factors);

  py::class_<IterationBand>(m, "IterationBand")
      .def_readonly("p10_s", &IterationBand::p10_s)
      .def_readonly("p90_s", &IterationBand::p90_s)
      .def_readonly("compute_group", &IterationBand::compute_group)
      .def_readonly("compute", &IterationBand::compute)
      .def_readonly("link", &IterationBand::link)
      .def_readonly("scaling", &IterationBand::scaling)
      .def_property_readonly("known", &IterationBand::known)
      .def("factors", &IterationBand::factors, py::arg("iteration_s"));

  m.def("scaling_bucket", &scaling_bucket, py::arg("gpus_per_instance"));

  // groups: list of (GPUs per instance, instance count, GroupBand); counts may be 0.
  m.def(
      "scaling_lookup",
      [](const ScalingBand& table, const std::vector<std::tuple<int, int, GroupBand>>& groups) {
        std::vector<int> gpus, counts;
        std::vector<GroupBand> bands;
        for (const auto& [g, c, band] : groups) {
          gpus.push_back(g);
          counts.push_back(c);
          bands.push_back(band);
        }
        return scaling_lookup(table, gpus.data(), counts.data(), bands.data(), static_cast<int>(groups.size()));
      },
      py::arg("table"), py::arg("groups"),
      "Which scaling band cell a cluster of (gpus per instance, count, GroupBand) groups takes.");

  // groups as for simulate: (InstanceSpec, count, ComputeModel, usd_per_hour per instance).
  m.def(
      "iteration_band",
      [](const IterationResult& result,
         const std::vector<std::tuple<InstanceSpec, int, ComputeModel, double>>& groups,
         const std::vector<GroupBand>& bands, const ScalingBand& table) {
        if (bands.size() != groups.size()) {
          throw py::value_error("bands: expected one per group (" + std::to_string(groups.size()) + "), got " +
                                std::to_string(bands.size()));
        }
        const GroupSpecs cluster(groups);
        return iteration_band(result, cluster.specs.data(), bands.data(), static_cast<int>(cluster.specs.size()),
                              table);
      },
      py::arg("result"), py::arg("groups"), py::arg("bands"), py::arg("table"),
      "The p10-p90 band of a feasible iteration (band.hpp note \"iteration band\").");

  m.def("normal_cdf", &normal_cdf, py::arg("x"));
  m.def("normal_quantile", &normal_quantile, py::arg("p"));
  m.def("deadline_probability", &deadline_probability, py::arg("nominal_s"), py::arg("band"),
        py::arg("interruptions_per_hour"), py::arg("params"), py::arg("deadline_s"),
        "Chance that a run of nominal_s predicted seconds meets deadline_s under the iteration band "
        "and spot preemption (band.hpp note \"deadline probability\").");
  m.def("band_quantile_factor", &band_quantile_factor, py::arg("band"), py::arg("q"),
        "The band's factor at quantile q in [0.5, 1): f90^(z_q / z90).");
}

}  // namespace srift::bindings
