#include "srift/version.hpp"

#ifndef SRIFT_VERSION_STRING
#define SRIFT_VERSION_STRING "0.0.0"
#endif

namespace srift {
const char* version() { return SRIFT_VERSION_STRING; }
}  // namespace srift
