#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <tuple>
#include <vector>

#include "bindings.hpp"
#include "srift/simulator.hpp"

namespace py = pybind11;

namespace srift::bindings {

void bind_simulator(py::module_& m) {
  m.attr("MAX_GROUPS") = kMaxGroups;

  py::enum_<Infeasible>(m, "Infeasible")
      .value("none", Infeasible::none)
      .value("batch_smaller_than_workers", Infeasible::batch_smaller_than_workers)
      .value("memory", Infeasible::memory)
      .value("too_many_groups", Infeasible::too_many_groups);

  py::enum_<Bottleneck>(m, "Bottleneck")
      .value("none", Bottleneck::none)
      .value("intra", Bottleneck::intra)
      .value("network", Bottleneck::network);

  py::class_<GroupResult>(m, "GroupResult")
      .def_readonly("workers", &GroupResult::workers)
      .def_readonly("batch_low", &GroupResult::batch_low)
      .def_readonly("batch_high", &GroupResult::batch_high)
      .def_readonly("workers_high", &GroupResult::workers_high)
      .def_readonly("max_batch", &GroupResult::max_batch)
      .def_readonly("compute_s", &GroupResult::compute_s)
      .def_readonly("memory_bytes", &GroupResult::memory_bytes);

  py::class_<IterationResult>(m, "IterationResult")
      .def_property_readonly("feasible", &IterationResult::feasible)
      .def_readonly("infeasible", &IterationResult::infeasible)
      .def_readonly("workers", &IterationResult::workers)
      .def_readonly("num_groups", &IterationResult::num_groups)
      .def_readonly("accumulation_steps", &IterationResult::accumulation_steps)
      .def_readonly("micro_batch", &IterationResult::micro_batch)
      .def_readonly("iteration_s", &IterationResult::iteration_s)
      .def_readonly("compute_s", &IterationResult::compute_s)
      .def_readonly("comm_s", &IterationResult::comm_s)
      .def_readonly("exposed_comm_s", &IterationResult::exposed_comm_s)
      .def_readonly("optimizer_s", &IterationResult::optimizer_s)
      .def_readonly("interference_s", &IterationResult::interference_s)
      .def_readonly("broadcast_s", &IterationResult::broadcast_s)
      .def_readonly("samples_per_s", &IterationResult::samples_per_s)
      .def_readonly("usd_per_hour", &IterationResult::usd_per_hour)
      .def_readonly("usd_per_iteration", &IterationResult::usd_per_iteration)
      .def_readonly("bottleneck", &IterationResult::bottleneck)
      .def_readonly("bottleneck_group", &IterationResult::bottleneck_group)
      .def_readonly("ring_bandwidth", &IterationResult::ring_bandwidth)
      .def_readonly("ring_latency", &IterationResult::ring_latency)
      .def_property_readonly("groups", [](const IterationResult& r) {
        return std::vector<GroupResult>(r.groups.begin(), r.groups.begin() + r.num_groups);
      });

  py::class_<BucketEvent>(m, "BucketEvent")
      .def_readonly("ready_s", &BucketEvent::ready_s)
      .def_readonly("start_s", &BucketEvent::start_s)
      .def_readonly("end_s", &BucketEvent::end_s)
      .def_readonly("bytes", &BucketEvent::bytes);

  // groups: list of (InstanceSpec, count, ComputeModel, usd_per_hour per instance).
  m.def(
      "simulate",
      [](const Workload& workload,
         const std::vector<std::tuple<InstanceSpec, int, ComputeModel, double>>& groups,
         int global_batch, double usable_memory_fraction, bool timeline, int max_accumulation_steps,
         int max_local_batch) {
        const GroupSpecs cluster(groups);
        SimOptions options;
        options.global_batch = global_batch;
        options.usable_memory_fraction = usable_memory_fraction;
        options.max_accumulation_steps = max_accumulation_steps;
        options.max_local_batch = max_local_batch;
        std::vector<BucketEvent> events;
        IterationResult result;
        std::string why;
        {
          py::gil_scoped_release release;
          result = simulate(workload, cluster.specs, options, timeline ? &events : nullptr);
          why = describe_infeasible(result, options);
        }
        return py::make_tuple(result, events, why);
      },
      py::arg("workload"), py::arg("groups"), py::arg("global_batch"),
      py::arg("usable_memory_fraction") = 0.95, py::arg("timeline") = false,
      py::arg("max_accumulation_steps") = 1, py::arg("max_local_batch") = 0,
      "Simulate one iteration; returns (IterationResult, [BucketEvent], why_infeasible). "
      "max_accumulation_steps > 1 lets a global batch that does not fit memory run as that many "
      "gradient-accumulation micro-steps at most; max_local_batch > 0 caps the samples one GPU runs "
      "in a micro-step (0: GPU memory alone).");

  m.def("ring_allreduce_s", &ring_allreduce_s, py::arg("bytes"), py::arg("ranks"), py::arg("link"),
        "Ring allreduce seconds: 2(n-1)/n * bytes / bandwidth + 2(n-1) * latency.");
  m.def("ring_broadcast_s", &ring_broadcast_s, py::arg("bytes"), py::arg("ranks"), py::arg("link"),
        "Broadcast seconds down a ring: bytes / bandwidth + (n-1) * latency.");
}

}  // namespace srift::bindings
