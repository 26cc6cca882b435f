#pragma once
// Library version, taken from pyproject.toml at build time.
namespace srift {
/// The version string of the core library, e.g. "0.1.0".
const char* version();
}  // namespace srift
