#pragma once
// Shared declarations of the binding translation units. Bindings convert types, release the
// GIL and call the core; nothing else lives here.
#include <pybind11/pybind11.h>

namespace srift::bindings {

void bind_hardware(pybind11::module_& m);
void bind_compute(pybind11::module_& m);
void bind_simulator(pybind11::module_& m);
void bind_search(pybind11::module_& m);
void bind_spot(pybind11::module_& m);
void bind_learned(pybind11::module_& m);
void bind_band(pybind11::module_& m);

}  // namespace srift::bindings
