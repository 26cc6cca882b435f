#pragma once
// The learned-model documents srift ships (srift/data/models), read by the C++ tests that hold
// the core to them. SRIFT_MODELS_DIR is set by CMakeLists.txt for the test target.
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace srift_test {

/// The text of srift/data/models/<name>.json; throws std::runtime_error when it cannot be read.
inline std::string shipped_document(const std::string& name) {
  std::ifstream in(std::string(SRIFT_MODELS_DIR) + "/" + name + ".json", std::ios::binary);
  if (!in) throw std::runtime_error("cannot read the shipped " + name + ".json");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

/// `doc` with `from`, which must occur in it exactly once, replaced by `to`; an empty `from`
/// puts `to` at the top level of the JSON object `doc` (after its '{'). Throws std::logic_error
/// when `from` is missing or occurs more than once (a test whose edit would land elsewhere).
inline std::string edited_once(const std::string& doc, const std::string& from, const std::string& to) {
  if (from.empty()) return "{" + to + doc.substr(1);
  const std::size_t at = doc.find(from);
  if (at == std::string::npos || doc.find(from, at + 1) != std::string::npos) {
    throw std::logic_error("'" + from + "' is not in the document exactly once");
  }
  std::string out = doc;
  return out.replace(at, from.size(), to);
}

}  // namespace srift_test
