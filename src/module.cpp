// srift._core: the pybind11 door into srift::core.
#include <pybind11/pybind11.h>

#include "bindings.hpp"
#include "srift/version.hpp"

PYBIND11_MODULE(_core, m) {
  m.doc() = "srift's C++ core: iteration simulator, compute estimates and plan search.";
  m.attr("__version__") = srift::version();
  srift::bindings::bind_hardware(m);
  srift::bindings::bind_compute(m);
  srift::bindings::bind_measurements(m);
  srift::bindings::bind_simulator(m);
  srift::bindings::bind_spot(m);
  srift::bindings::bind_band(m);
  srift::bindings::bind_search(m);
  srift::bindings::bind_learned(m);
  srift::bindings::bind_learned_compute(m);
}
