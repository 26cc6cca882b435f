#pragma once
// The one header an embedder includes: everything public in srift's core.
#include "srift/band.hpp"
#include "srift/compute.hpp"
#include "srift/hardware.hpp"
#include "srift/learned.hpp"
#include "srift/learned_compute.hpp"
#include "srift/measurements.hpp"
#include "srift/search.hpp"
#include "srift/simulator.hpp"
#include "srift/version.hpp"
#include "srift/workload.hpp"
