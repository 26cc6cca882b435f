#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "srift/hardware.hpp"
#include "srift/workload.hpp"

namespace py = pybind11;

namespace srift::bindings {

void bind_hardware(py::module_& m) {
  py::class_<GpuSpec>(m, "GpuSpec", "Peaks of one GPU (FLOP/s, bytes/s, bytes).")
      .def(py::init<>())
      .def_readwrite("name", &GpuSpec::name)
      .def_readwrite("memory_bytes", &GpuSpec::memory_bytes)
      .def_readwrite("fp32_flops", &GpuSpec::fp32_flops)
      .def_readwrite("tf32_flops", &GpuSpec::tf32_flops)
      .def_readwrite("fp16_flops", &GpuSpec::fp16_flops)
      .def_readwrite("memory_bandwidth", &GpuSpec::memory_bandwidth)
      .def_readwrite("launch_year", &GpuSpec::launch_year)
      .def("validate", &GpuSpec::validate);

  py::class_<LinkSpec>(m, "LinkSpec", "A link class: bandwidth (bytes/s), latency (s per ring step).")
      .def(py::init<>())
      .def(py::init([](double bandwidth, double latency) { return LinkSpec{bandwidth, latency}; }),
           py::arg("bandwidth"), py::arg("latency"))
      .def_readwrite("bandwidth", &LinkSpec::bandwidth)
      .def_readwrite("latency", &LinkSpec::latency);

  py::class_<InstanceSpec>(m, "InstanceSpec", "What the simulator needs of an instance type.")
      .def(py::init<>())
      .def_readwrite("name", &InstanceSpec::name)
      .def_readwrite("gpus", &InstanceSpec::gpus)
      .def_readwrite("gpu_memory_bytes", &InstanceSpec::gpu_memory_bytes)
      .def_readwrite("intra", &InstanceSpec::intra)
      .def_readwrite("network", &InstanceSpec::network)
      .def_readwrite("comm_compute_s_per_byte", &InstanceSpec::comm_compute_s_per_byte,
                     "compute time lost per byte of allreduce traffic while computing, s/byte")
      .def("validate", &InstanceSpec::validate);

  py::class_<ComputeModel>(m, "ComputeModel", "Affine compute time of one GPU type (seconds).")
      .def(py::init<>())
      .def_readwrite("forward_fixed_s", &ComputeModel::forward_fixed_s)
      .def_readwrite("forward_per_sample_s", &ComputeModel::forward_per_sample_s)
      .def_readwrite("backward_fixed_s", &ComputeModel::backward_fixed_s)
      .def_readwrite("backward_per_sample_s", &ComputeModel::backward_per_sample_s)
      .def_readwrite("optimizer_s", &ComputeModel::optimizer_s)
      .def_readwrite("accumulate_s", &ComputeModel::accumulate_s)
      .def("forward_s", &ComputeModel::forward_s, py::arg("batch"))
      .def("backward_s", &ComputeModel::backward_s, py::arg("batch"))
      .def("compute_s", &ComputeModel::compute_s, py::arg("batch"))
      .def("per_sample_s", &ComputeModel::per_sample_s, "Forward + backward seconds per sample.")
      .def("validate", &ComputeModel::validate);

  py::class_<Workload>(m, "Workload", "Buckets (bytes, ready fractions) and memory (bytes).")
      .def(py::init<>())
      .def_readwrite("bucket_bytes", &Workload::bucket_bytes)
      .def_readwrite("bucket_ready_fraction", &Workload::bucket_ready_fraction)
      .def_readwrite("broadcast_bytes", &Workload::broadcast_bytes,
                     "DDP's buffer broadcast before each iteration's forward: one message per dtype, bytes.")
      .def_readwrite("fixed_memory_bytes", &Workload::fixed_memory_bytes)
      .def_readwrite("activation_bytes_per_sample", &Workload::activation_bytes_per_sample)
      .def("validate", &Workload::validate)
      .def("total_gradient_bytes", &Workload::total_gradient_bytes);
}

}  // namespace srift::bindings
