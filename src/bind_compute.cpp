#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "srift/compute.hpp"

namespace py = pybind11;

namespace srift::bindings {

std::vector<LayerCost> to_layers(const IntArray& kind, const DoubleArray& forward_flops,
                                 const DoubleArray& backward_flops, const DoubleArray& forward_bytes,
                                 const DoubleArray& param_bytes) {
  const py::ssize_t n = kind.size();
  const std::pair<const char*, py::ssize_t> sizes[] = {{"forward_flops", forward_flops.size()},
                                                       {"backward_flops", backward_flops.size()},
                                                       {"forward_bytes", forward_bytes.size()},
                                                       {"param_bytes", param_bytes.size()}};
  for (const auto& [name, size] : sizes) {
    if (size != n) {
      throw std::invalid_argument(std::string(name) + " must have one entry per layer (" +
                                  std::to_string(n) + "), got " + std::to_string(size));
    }
  }
  std::vector<LayerCost> layers(static_cast<std::size_t>(n));
  auto k = kind.unchecked<1>();
  auto ff = forward_flops.unchecked<1>();
  auto bf = backward_flops.unchecked<1>();
  auto fb = forward_bytes.unchecked<1>();
  auto pb = param_bytes.unchecked<1>();
  for (py::ssize_t i = 0; i < n; ++i) {
    layers[i] = LayerCost{static_cast<OpKind>(k(i)), ff(i), bf(i), fb(i), pb(i)};
  }
  return layers;
}

void bind_compute(py::module_& m) {
  py::enum_<Precision>(m, "Precision")
      .value("fp32", Precision::fp32)
      .value("tf32", Precision::tf32)
      .value("amp", Precision::amp);

  py::enum_<OpKind>(m, "OpKind")
      .value("matmul", OpKind::matmul)
      .value("conv", OpKind::conv)
      .value("attention", OpKind::attention)
      .value("norm", OpKind::norm)
      .value("elementwise", OpKind::elementwise)
      .value("embedding", OpKind::embedding)
      .value("pool", OpKind::pool)
      .value("recurrent", OpKind::recurrent)
      .value("other", OpKind::other);

  py::class_<RooflineParams>(m, "RooflineParams", "Efficiencies of the roofline estimate.")
      .def(py::init<>())
      .def_readwrite("tensor_core_efficiency", &RooflineParams::tensor_core_efficiency)
      .def_readwrite("cuda_core_efficiency", &RooflineParams::cuda_core_efficiency)
      .def_readwrite("memory_efficiency", &RooflineParams::memory_efficiency)
      .def_readwrite("launch_overhead_s", &RooflineParams::launch_overhead_s)
      .def_readwrite("backward_bytes_factor", &RooflineParams::backward_bytes_factor);

  py::class_<Measurement>(m, "Measurement", "A measured single-GPU iteration (seconds).")
      .def(py::init<>())
      .def(py::init([](double local_batch, double iteration_s, double forward_s, double backward_s) {
             return Measurement{local_batch, iteration_s, forward_s, backward_s};
           }),
           py::arg("local_batch"), py::arg("iteration_s"), py::arg("forward_s") = -1.0,
           py::arg("backward_s") = -1.0)
      .def_readwrite("local_batch", &Measurement::local_batch)
      .def_readwrite("iteration_s", &Measurement::iteration_s)
      .def_readwrite("forward_s", &Measurement::forward_s)
      .def_readwrite("backward_s", &Measurement::backward_s);

  m.def(
      "roofline_compute",
      [](const IntArray& kind, const DoubleArray& forward_flops, const DoubleArray& backward_flops,
         const DoubleArray& forward_bytes, const DoubleArray& param_bytes, const GpuSpec& gpu,
         Precision precision, double optimizer_bytes, const RooflineParams& params) {
        std::vector<LayerCost> layers =
            to_layers(kind, forward_flops, backward_flops, forward_bytes, param_bytes);
        py::gil_scoped_release release;
        return roofline_compute(layers, gpu, precision, optimizer_bytes, params);
      },
      py::arg("kind"), py::arg("forward_flops"), py::arg("backward_flops"), py::arg("forward_bytes"),
      py::arg("param_bytes"), py::arg("gpu"), py::arg("precision"), py::arg("optimizer_bytes"),
      py::arg("params") = RooflineParams{},
      "Roofline ComputeModel from per-layer, per-sample FLOPs and bytes.");

  m.def("gradient_accumulate_s", &gradient_accumulate_s, py::arg("gradient_bytes"), py::arg("gpu"),
        py::arg("params") = RooflineParams{},
        "Seconds to add one micro-step's gradients into the accumulated ones: 3 x gradient_bytes at the "
        "memory-bound efficiency (ComputeModel.accumulate_s).");

  m.def(
      "roofline_backward_times",
      [](const IntArray& kind, const DoubleArray& forward_flops, const DoubleArray& backward_flops,
         const DoubleArray& forward_bytes, const DoubleArray& param_bytes, const GpuSpec& gpu,
         Precision precision, double batch, const RooflineParams& params) {
        std::vector<LayerCost> layers =
            to_layers(kind, forward_flops, backward_flops, forward_bytes, param_bytes);
        std::vector<double> times;
        {
          py::gil_scoped_release release;
          times = roofline_backward_times(layers, gpu, precision, batch, params);
        }
        return DoubleArray(static_cast<py::ssize_t>(times.size()), times.data());
      },
      py::arg("kind"), py::arg("forward_flops"), py::arg("backward_flops"), py::arg("forward_bytes"),
      py::arg("param_bytes"), py::arg("gpu"), py::arg("precision"), py::arg("batch"),
      py::arg("params") = RooflineParams{},
      "Per-layer backward seconds at a local batch under the roofline.");

  m.def("anchor_to_measurements", &anchor_to_measurements, py::arg("prior"), py::arg("measurements"),
        py::call_guard<py::gil_scoped_release>(),
        "Fit (two or more batches) or rescale (one) a ComputeModel to measured iterations.");
}

}  // namespace srift::bindings
