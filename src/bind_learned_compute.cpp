#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <vector>

#include "bindings.hpp"
#include "srift/learned_compute.hpp"

namespace py = pybind11;

namespace srift::bindings {

void bind_learned_compute(py::module_& m) {
  py::class_<WorkloadStats>(m, "WorkloadStats", "GPU-independent descriptors of a profiled workload's layers.")
      .def(py::init([](const py::object& kind, const DoubleArray& forward_flops, const DoubleArray& backward_flops,
                       const DoubleArray& forward_bytes, const DoubleArray& param_bytes, double optimizer_bytes) {
             return WorkloadStats(to_layers(kind, forward_flops, backward_flops, forward_bytes, param_bytes),
                                  optimizer_bytes);
           }),
           py::arg("kind"), py::arg("forward_flops"), py::arg("backward_flops"), py::arg("forward_bytes"),
           py::arg("param_bytes"), py::arg("optimizer_bytes"))
      .def("flop_share", &WorkloadStats::flop_share, py::arg("kind"))
      .def_property_readonly("log_intensity", &WorkloadStats::log_intensity)
      .def_property_readonly("flops_per_sample", &WorkloadStats::flops_per_sample)
      .def("log_work", &WorkloadStats::log_work, py::arg("batch"))
      .def("membound_share", &WorkloadStats::membound_share, py::arg("gpu"), py::arg("precision"))
      .def("roofline", &WorkloadStats::roofline, py::arg("gpu"), py::arg("precision"));

  m.def("matmul_peak_flops", &matmul_peak_flops, py::arg("gpu"), py::arg("precision"));
  m.def("dominates", &dominates, py::arg("b"), py::arg("a"), py::arg("precision"));
  m.def("has_fp16_path", &has_fp16_path, py::arg("anchor"), py::arg("target"), py::arg("precision"));
  m.def("ratio_features", &ratio_features, py::arg("workload"), py::arg("a"), py::arg("batch_a"), py::arg("b"),
        py::arg("batch_b"), py::arg("precision"), "The ratio model's features (srift.learn.features).");
  m.def("absolute_features", &absolute_features, py::arg("workload"), py::arg("gpu"), py::arg("batch"),
        py::arg("precision"), "The absolute model's features (srift.learn.features).");
  m.def("ratio_feature_names", &ratio_feature_names,
        "The names of ratio_features' values, in order: a compute_ratio document's features.");
  m.def("absolute_feature_names", &absolute_feature_names,
        "The names of absolute_features' values, in order: a compute_absolute document's features.");
  m.def("batch_grid", &batch_grid, py::arg("max_batch"));
  m.def("affine_relative_fit", &affine_relative_fit, py::arg("batches"), py::arg("seconds"),
        py::arg("min_per_sample") = 0.0);
  m.def("hold_to_measured_floor", &hold_to_measured_floor, py::arg("workload"), py::arg("gpu"), py::arg("fitted"),
        py::arg("measurements"), py::arg("precision"), py::arg("max_batch"),
        "A model fitted through measurements on `gpu` held to its peak floor (srift::hold_to_measured_floor, "
        "learned_compute.cpp note \"measured floor\").");

  py::class_<LearnedComputeConfig>(m, "LearnedComputeConfig", "How the shipped compute models combine.")
      .def(py::init<>())
      .def_readwrite("blend", &LearnedComputeConfig::blend)
      .def_readwrite("blend_weight", &LearnedComputeConfig::blend_weight)
      .def_readwrite("shrink", &LearnedComputeConfig::shrink)
      .def_readwrite("ratio_references", &LearnedComputeConfig::ratio_references)
      .def_readwrite("absolute_references", &LearnedComputeConfig::absolute_references)
      .def_readwrite("anchored_p10", &LearnedComputeConfig::anchored_p10)
      .def_readwrite("anchored_p90", &LearnedComputeConfig::anchored_p90)
      .def_readwrite("roofline_p10", &LearnedComputeConfig::roofline_p10)
      .def_readwrite("roofline_p90", &LearnedComputeConfig::roofline_p90)
      .def_readwrite("absolute_p10", &LearnedComputeConfig::absolute_p10)
      .def_readwrite("absolute_p90", &LearnedComputeConfig::absolute_p90)
      .def_readwrite("measured_p10", &LearnedComputeConfig::measured_p10)
      .def_readwrite("measured_p90", &LearnedComputeConfig::measured_p90)
      .def_readwrite("measured_per_e_fold_p10", &LearnedComputeConfig::measured_per_e_fold_p10)
      .def_readwrite("measured_per_e_fold_p90", &LearnedComputeConfig::measured_per_e_fold_p90)
      .def_readwrite("edge_year", &LearnedComputeConfig::edge_year)
      .def_readwrite("edge_anchored_p10", &LearnedComputeConfig::edge_anchored_p10)
      .def_readwrite("edge_anchored_p50", &LearnedComputeConfig::edge_anchored_p50)
      .def_readwrite("edge_anchored_p90", &LearnedComputeConfig::edge_anchored_p90)
      .def_readwrite("edge_absolute_p10", &LearnedComputeConfig::edge_absolute_p10)
      .def_readwrite("edge_absolute_p50", &LearnedComputeConfig::edge_absolute_p50)
      .def_readwrite("edge_absolute_p90", &LearnedComputeConfig::edge_absolute_p90);

  py::class_<Anchor>(m, "Anchor", "Measurements of the workload on one GPU type.")
      .def(py::init<>())
      .def(py::init([](const GpuSpec& gpu, const std::vector<Measurement>& measurements) {
             return Anchor{gpu, measurements};
           }),
           py::arg("gpu"), py::arg("measurements"))
      .def_readwrite("gpu", &Anchor::gpu)
      .def_readwrite("measurements", &Anchor::measurements);

  py::class_<LearnedComputeResult>(m, "LearnedComputeResult")
      .def_readonly("model", &LearnedComputeResult::model)
      .def_readonly("p10_factor", &LearnedComputeResult::p10_factor)
      .def_readonly("p90_factor", &LearnedComputeResult::p90_factor)
      .def_readonly("roofline_ratio_only", &LearnedComputeResult::roofline_ratio_only)
      .def_readonly("past_data_edge", &LearnedComputeResult::past_data_edge)
      .def_readonly("same_specs_anchor", &LearnedComputeResult::same_specs_anchor);

  m.def("learned_compute_config", &learned_compute_config, py::arg("ratio_json"), py::arg("absolute_json"),
        "The combination the two compute documents record; ValueError names the JSON path.");

  py::class_<LearnedCompute>(m, "LearnedCompute", "The shipped compute models combined as the engine applies them.")
      .def(py::init<LearnedModel, LearnedModel, LearnedComputeConfig>(), py::arg("ratio"), py::arg("absolute"),
           py::arg("config"))
      .def_static("from_documents", &LearnedCompute::from_documents, py::arg("ratio_json"), py::arg("absolute_json"),
                  py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("config", &LearnedCompute::config)
      .def("anchored_log_ratio", &LearnedCompute::anchored_log_ratio, py::arg("workload"), py::arg("anchor"),
           py::arg("target"), py::arg("batch"), py::arg("precision"), py::arg("observed_anchor"),
           py::call_guard<py::gil_scoped_release>())
      .def("guarded_log_ratio", &LearnedCompute::guarded_log_ratio, py::arg("workload"), py::arg("anchor"),
           py::arg("target"), py::arg("batch"), py::arg("precision"), py::arg("observed_anchor"),
           py::call_guard<py::gil_scoped_release>())
      .def("absolute_corrections", &LearnedCompute::absolute_corrections, py::arg("workload"), py::arg("target"),
           py::arg("batches"), py::arg("precision"), py::call_guard<py::gil_scoped_release>())
      .def("predict_anchored",
           py::overload_cast<const WorkloadStats&, const GpuSpec&, const std::vector<Measurement>&, const GpuSpec&,
                             Precision, double, const GridEnds&>(&LearnedCompute::predict_anchored, py::const_),
           py::arg("workload"), py::arg("anchor"), py::arg("measurements"), py::arg("target"), py::arg("precision"),
           py::arg("max_batch") = 0.0, py::arg("grid_ends") = GridEnds{}, py::call_guard<py::gil_scoped_release>())
      .def("predict_anchored_several",
           py::overload_cast<const WorkloadStats&, const std::vector<Anchor>&, const GpuSpec&, Precision, double,
                             const GridEnds&>(
               &LearnedCompute::predict_anchored, py::const_),
           py::arg("workload"), py::arg("anchors"), py::arg("target"), py::arg("precision"), py::arg("max_batch"),
           py::arg("grid_ends") = GridEnds{}, py::call_guard<py::gil_scoped_release>())
      .def("predict_absolute",
           py::overload_cast<const WorkloadStats&, const GpuSpec&, Precision, double, const GridEnds&>(
               &LearnedCompute::predict_absolute, py::const_),
           py::arg("workload"), py::arg("target"), py::arg("precision"), py::arg("max_batch"),
           py::arg("grid_ends") = GridEnds{}, py::call_guard<py::gil_scoped_release>())
      .def("measured_model",
           py::overload_cast<const WorkloadStats&, const GpuSpec&, const ComputeModel&, const std::vector<Measurement>&,
                             Precision, double, const GridEnds&>(&LearnedCompute::measured_model, py::const_),
           py::arg("workload"), py::arg("gpu"), py::arg("roofline"), py::arg("measurements"), py::arg("precision"),
           py::arg("max_batch"), py::arg("grid_ends") = GridEnds{}, py::call_guard<py::gil_scoped_release>())
      // The same through a LearnedComputeCache (srift::LearnedCompute::Cache): bit-identical.
      .def("predict_anchored_several_cached",
           py::overload_cast<LearnedCompute::Cache&, const std::vector<Anchor>&, const GpuSpec&, Precision, double,
                             const GridEnds&>(
               &LearnedCompute::predict_anchored, py::const_),
           py::arg("cache"), py::arg("anchors"), py::arg("target"), py::arg("precision"), py::arg("max_batch"),
           py::arg("grid_ends") = GridEnds{}, py::call_guard<py::gil_scoped_release>())
      .def("predict_absolute_cached",
           py::overload_cast<LearnedCompute::Cache&, const GpuSpec&, Precision, double, const GridEnds&>(
               &LearnedCompute::predict_absolute, py::const_),
           py::arg("cache"), py::arg("target"), py::arg("precision"), py::arg("max_batch"),
           py::arg("grid_ends") = GridEnds{}, py::call_guard<py::gil_scoped_release>())
      .def("measured_model_cached",
           py::overload_cast<LearnedCompute::Cache&, const GpuSpec&, const ComputeModel&,
                             const std::vector<Measurement>&, Precision, double, const GridEnds&>(
               &LearnedCompute::measured_model, py::const_),
           py::arg("cache"), py::arg("gpu"), py::arg("roofline"), py::arg("measurements"), py::arg("precision"),
           py::arg("max_batch"), py::arg("grid_ends") = GridEnds{}, py::call_guard<py::gil_scoped_release>());

  py::class_<LearnedCompute::Cache>(m, "LearnedComputeCache",
                                    "One workload's evaluations kept across LearnedCompute calls (srift::LearnedCompute::Cache).")
      .def(py::init<WorkloadStats>(), py::arg("workload"));
}

}  // namespace srift::bindings
