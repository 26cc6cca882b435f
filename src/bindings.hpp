#pragma once
// Shared declarations of the binding translation units. Bindings convert types, release the
// GIL and call the core; nothing else lives here.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <tuple>
#include <vector>

#include "srift/compute.hpp"
#include "srift/simulator.hpp"

namespace srift::bindings {

/// Python's cluster groups, (InstanceSpec, count, ComputeModel, usd_per_hour per instance),
/// as the core's GroupSpecs; `specs` point into `instances`.
struct GroupSpecs {
  std::vector<InstanceSpec> instances;
  std::vector<GroupSpec> specs;
  explicit GroupSpecs(const std::vector<std::tuple<InstanceSpec, int, ComputeModel, double>>& groups) {
    instances.reserve(groups.size());
    for (const auto& g : groups) instances.push_back(std::get<0>(g));
    for (std::size_t i = 0; i < groups.size(); ++i) {
      specs.push_back({&instances[i], std::get<1>(groups[i]), std::get<2>(groups[i]), std::get<3>(groups[i])});
    }
  }
  GroupSpecs(const GroupSpecs&) = delete;  // specs point into instances
  GroupSpecs& operator=(const GroupSpecs&) = delete;
};

using DoubleArray = pybind11::array_t<double, pybind11::array::c_style | pybind11::array::forcecast>;

/// Layer columns (one entry per layer) as the core's LayerCost rows; ValueError when their
/// lengths differ. `kind` is any 1-D array of OpKind values (integers, integral floats or
/// OpKind objects): a value that is not an integer, or past an int, is a ValueError naming
/// kind[i] (a forcecast to int32 read 2**32 as matmul and 1.7 as conv).
std::vector<LayerCost> to_layers(const pybind11::object& kind, const DoubleArray& forward_flops,
                                 const DoubleArray& backward_flops, const DoubleArray& forward_bytes,
                                 const DoubleArray& param_bytes);

void bind_hardware(pybind11::module_& m);
void bind_compute(pybind11::module_& m);
void bind_measurements(pybind11::module_& m);
void bind_simulator(pybind11::module_& m);
void bind_search(pybind11::module_& m);
void bind_spot(pybind11::module_& m);
void bind_learned(pybind11::module_& m);
void bind_band(pybind11::module_& m);
void bind_learned_compute(pybind11::module_& m);

}  // namespace srift::bindings
