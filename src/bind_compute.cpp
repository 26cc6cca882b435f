#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "srift/compute.hpp"

namespace py = pybind11;

namespace srift::bindings {

namespace {

[[noreturn]] void bad_kind(py::ssize_t i, const std::string& value) {
  throw std::invalid_argument("kind[" + std::to_string(i) + "] must be an integer OpKind value, got " + value);
}

int checked_kind(py::ssize_t i, long long v) {
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) bad_kind(i, std::to_string(v));
  return static_cast<int>(v);  // the core names a value that is no OpKind
}

// The kinds as ints, refusing what an int32 forcecast wrapped or truncated.
std::vector<int> to_kinds(const py::object& kind_object) {
  const py::array kind = py::array::ensure(kind_object);  // a list, a tuple, an array
  if (!kind) throw std::invalid_argument("kind must be an array of integer OpKind values (one per layer)");
  if (kind.ndim() != 1) {
    throw std::invalid_argument("kind must be 1-D (one entry per layer), got " + std::to_string(kind.ndim()) +
                                " dimensions");
  }
  const py::ssize_t n = kind.size();
  std::vector<int> out(static_cast<std::size_t>(n));
  const char k = kind.dtype().kind();
  if (k == 'i' || k == 'b') {
    const auto a = py::array_t<long long, py::array::c_style | py::array::forcecast>::ensure(kind);
    auto r = a.unchecked<1>();
    for (py::ssize_t i = 0; i < n; ++i) out[i] = checked_kind(i, r(i));
  } else if (k == 'u') {
    const auto a = py::array_t<unsigned long long, py::array::c_style | py::array::forcecast>::ensure(kind);
    auto r = a.unchecked<1>();
    for (py::ssize_t i = 0; i < n; ++i) {
      if (r(i) > static_cast<unsigned long long>(std::numeric_limits<int>::max())) bad_kind(i, std::to_string(r(i)));
      out[i] = static_cast<int>(r(i));
    }
  } else if (k == 'f') {
    const auto a = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(kind);
    auto r = a.unchecked<1>();
    for (py::ssize_t i = 0; i < n; ++i) {
      const double v = r(i);
      if (!(v == std::floor(v)) || v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
        bad_kind(i, py::str(py::float_(v)).cast<std::string>());
      }
      out[i] = static_cast<int>(v);
    }
  } else if (k == 'O') {  // e.g. a list of OpKind members
    for (py::ssize_t i = 0; i < n; ++i) {
      py::object item = kind.attr("item")(i);
      if (PyFloat_Check(item.ptr())) {  // __index__ refuses it below, but name a whole float's value
        const double v = item.cast<double>();
        if (!(v == std::floor(v)) || std::abs(v) > 2147483647.0) bad_kind(i, py::str(item).cast<std::string>());
        out[i] = static_cast<int>(v);
        continue;
      }
      PyObject* index = PyNumber_Index(item.ptr());
      if (index == nullptr) {
        PyErr_Clear();
        bad_kind(i, py::repr(item).cast<std::string>());
      }
      const long long v = py::reinterpret_steal<py::int_>(index).cast<long long>();  // OverflowError past 64 bits
      out[i] = checked_kind(i, v);
    }
  } else {
    throw std::invalid_argument("kind must hold integer OpKind values, got an array of dtype " +
                                py::str(kind.dtype()).cast<std::string>());
  }
  return out;
}

}  // namespace

std::vector<LayerCost> to_layers(const py::object& kind_array, const DoubleArray& forward_flops,
                                 const DoubleArray& backward_flops, const DoubleArray& forward_bytes,
                                 const DoubleArray& param_bytes) {
  const std::vector<int> kind = to_kinds(kind_array);
  const py::ssize_t n = static_cast<py::ssize_t>(kind.size());
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
  auto ff = forward_flops.unchecked<1>();
  auto bf = backward_flops.unchecked<1>();
  auto fb = forward_bytes.unchecked<1>();
  auto pb = param_bytes.unchecked<1>();
  for (py::ssize_t i = 0; i < n; ++i) {
    layers[i] = LayerCost{static_cast<OpKind>(kind[static_cast<std::size_t>(i)]), ff(i), bf(i), fb(i), pb(i)};
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

  py::class_<Measurement>(m, "Measurement",
                          "A measured single-GPU iteration (seconds). precision: what the run used; None: the "
                          "precision of the prediction it is passed to (the caller vouches for it).")
      .def(py::init<>())
      .def(py::init([](double local_batch, double iteration_s, double forward_s, double backward_s,
                       std::optional<Precision> precision) {
             return Measurement{local_batch, iteration_s, forward_s, backward_s, precision};
           }),
           py::arg("local_batch"), py::arg("iteration_s"), py::arg("forward_s") = -1.0,
           py::arg("backward_s") = -1.0, py::arg("precision") = py::none())
      .def_readwrite("local_batch", &Measurement::local_batch)
      .def_readwrite("iteration_s", &Measurement::iteration_s)
      .def_readwrite("forward_s", &Measurement::forward_s)
      .def_readwrite("backward_s", &Measurement::backward_s)
      .def_readwrite("precision", &Measurement::precision);

  m.def(
      "roofline_compute",
      [](const py::object& kind, const DoubleArray& forward_flops, const DoubleArray& backward_flops,
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

  m.def(
      "peak_flop_seconds_per_sample",
      [](const py::object& kind, const DoubleArray& forward_flops, const DoubleArray& backward_flops,
         const DoubleArray& forward_bytes, const DoubleArray& param_bytes, const GpuSpec& gpu, Precision precision) {
        std::vector<LayerCost> layers =
            to_layers(kind, forward_flops, backward_flops, forward_bytes, param_bytes);
        py::gil_scoped_release release;
        return peak_flop_seconds_per_sample(layers, gpu, precision);
      },
      py::arg("kind"), py::arg("forward_flops"), py::arg("backward_flops"), py::arg("forward_bytes"),
      py::arg("param_bytes"), py::arg("gpu"), py::arg("precision"),
      "Seconds per sample the layers' FLOPs take at the very peak each runs against (note \"peak floor\"): "
      "no GPU computes a sample faster, and the learned models are held to it.");

  m.def("gradient_accumulate_s", &gradient_accumulate_s, py::arg("gradient_bytes"), py::arg("gpu"),
        py::arg("params") = RooflineParams{},
        "Seconds to add one micro-step's gradients into the accumulated ones: 3 x gradient_bytes at the "
        "memory-bound efficiency (ComputeModel.accumulate_s).");

  m.def(
      "roofline_backward_times",
      [](const py::object& kind, const DoubleArray& forward_flops, const DoubleArray& backward_flops,
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

  py::class_<MeasuredLine>(m, "MeasuredLine", "The line anchor_to_measurements fits to measured compute times.")
      .def_readonly("several_batches", &MeasuredLine::several_batches)
      .def_readonly("slope", &MeasuredLine::slope)
      .def_readonly("intercept", &MeasuredLine::intercept)
      .def_readonly("mean_batch", &MeasuredLine::mean_batch)
      .def_readonly("mean_s", &MeasuredLine::mean_s)
      .def_property_readonly("fitted", &MeasuredLine::fitted);
  m.def("measured_line", &measured_line, py::arg("measurements"), py::call_guard<py::gil_scoped_release>(),
        "The least-squares line anchor_to_measurements fits (bit for bit).");
}

}  // namespace srift::bindings
