#pragma once
// The core's internal JSON reader (not installed): learned-model documents and the compute
// documents' combination fields are read with it. Every error names the JSON path.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <locale>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <unordered_set>
#include <utility>
#include <vector>

namespace srift::detail::json {

// ---- a minimal JSON reader (RFC 8259; strings must be UTF-8, as Python's json reads them) ---

struct Json {
  enum class T { null, boolean, number, string, array, object } t = T::null;
  bool b = false;
  double num = 0;
  std::string str;
  std::vector<Json> arr;
  std::vector<std::pair<std::string, Json>> obj;

  const Json* find(const std::string& key) const {
    for (const auto& kv : obj) {
      if (kv.first == key) return &kv.second;
    }
    return nullptr;
  }
};

class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}

  Json parse_document() {
    Json v = value(0);
    skip_ws();
    if (i_ != s_.size()) error("trailing characters after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    throw std::invalid_argument("learned model JSON: " + what + " at offset " + std::to_string(i_));
  }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t')) ++i_;
  }
  bool consume(const char* lit) {
    const std::size_t n = std::char_traits<char>::length(lit);
    if (s_.compare(i_, n, lit) == 0) {
      i_ += n;
      return true;
    }
    return false;
  }
  Json value(int depth) {
    if (depth > 64) error("nesting deeper than 64 levels");
    skip_ws();
    if (i_ >= s_.size()) error("unexpected end of input");
    Json v;
    const char c = s_[i_];
    if (c == '{') {
      v.t = Json::T::object;
      ++i_;
      skip_ws();
      if (i_ < s_.size() && s_[i_] == '}') {
        ++i_;
        return v;
      }
      // The keys read so far, hashed: a linear find() per key made an object of n keys cost
      // n^2 / 2 comparisons (a 100,000-key "training" record took 15 s).
      std::unordered_set<std::string> seen;
      while (true) {
        skip_ws();
        if (i_ >= s_.size() || s_[i_] != '"') error("expected a string key");
        std::string key = string_body();
        // Python's json keeps a repeated key's last value and this reader's find() the first:
        // one file would be two models, so a repeat is refused (srift's Python loader too).
        if (!seen.insert(key).second) error("duplicate key '" + key + "' in one object");
        skip_ws();
        if (i_ >= s_.size() || s_[i_] != ':') error("expected ':'");
        ++i_;
        v.obj.emplace_back(std::move(key), value(depth + 1));
        skip_ws();
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          continue;
        }
        if (i_ < s_.size() && s_[i_] == '}') {
          ++i_;
          return v;
        }
        error("expected ',' or '}'");
      }
    }
    if (c == '[') {
      v.t = Json::T::array;
      ++i_;
      skip_ws();
      if (i_ < s_.size() && s_[i_] == ']') {
        ++i_;
        return v;
      }
      while (true) {
        v.arr.push_back(value(depth + 1));
        skip_ws();
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          continue;
        }
        if (i_ < s_.size() && s_[i_] == ']') {
          ++i_;
          return v;
        }
        error("expected ',' or ']'");
      }
    }
    if (c == '"') {
      v.t = Json::T::string;
      v.str = string_body();
      return v;
    }
    if (consume("true")) {
      v.t = Json::T::boolean;
      v.b = true;
      return v;
    }
    if (consume("false")) {
      v.t = Json::T::boolean;
      return v;
    }
    if (consume("null")) return v;
    // Python's json writes non-finite floats as these tokens; accept them so the validator
    // can name the field instead of failing on syntax.
    if (consume("NaN")) {
      v.t = Json::T::number;
      v.num = std::nan("");
      return v;
    }
    if (consume("Infinity")) {
      v.t = Json::T::number;
      v.num = HUGE_VAL;
      return v;
    }
    if (consume("-Infinity")) {
      v.t = Json::T::number;
      v.num = -HUGE_VAL;
      return v;
    }
    return number();
  }
  Json number() {
    const std::size_t start = i_;
    if (i_ < s_.size() && (s_[i_] == '-' || s_[i_] == '+')) ++i_;
    while (i_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[i_])) || s_[i_] == '.' ||
                              s_[i_] == 'e' || s_[i_] == 'E' || s_[i_] == '-' || s_[i_] == '+')) {
      ++i_;
    }
    if (i_ == start) error("unexpected character");
    const std::string text = s_.substr(start, i_ - start);
    // A leading '+' (which strtod took) then a sign of its own: "+-5" is not a number.
    if (text.size() > 1 && text[0] == '+' && (text[1] == '-' || text[1] == '+')) {
      error("malformed number '" + text + "'");
    }
    Json v;
    v.t = Json::T::number;
    if (!parse_double(text[0] == '+' ? text.substr(1) : text, v.num)) error("malformed number '" + text + "'");
    return v;
  }
  // The whole of `text` as a double, whatever the process locale: strtod follows LC_NUMERIC,
  // and after setlocale(LC_ALL, "de_DE.UTF-8") in an embedding program "4.3e-20" was
  // malformed. std::from_chars where the library has it for double (libstdc++ 11+), else a
  // stream imbued with the classic locale. Past the largest double is infinite (a check then
  // names the field), below the smallest zero, as strtod.
  static bool parse_double(const std::string& text, double& out) {
    if (text.empty()) return false;
#if defined(__cpp_lib_to_chars) && __cpp_lib_to_chars >= 201611L && !defined(SRIFT_NO_FROM_CHARS)
    const char* const last = text.data() + text.size();
    const std::from_chars_result r = std::from_chars(text.data(), last, out);
    if (r.ptr != last || (r.ec != std::errc() && r.ec != std::errc::result_out_of_range)) return false;
    if (r.ec == std::errc::result_out_of_range) {
      const double magnitude = past_largest(text) ? HUGE_VAL : 0.0;
      out = text[0] == '-' ? -magnitude : magnitude;
    }
    return true;
#else
    // (-DSRIFT_NO_FROM_CHARS tests this branch on a library that has from_chars)
    std::istringstream in(text);
    in.imbue(std::locale::classic());
    in >> out;
    if (in.fail()) {
      // past the largest double num_get stores +-max and fails: infinite, as strtod
      if (std::fabs(out) != std::numeric_limits<double>::max()) return false;
      out = std::copysign(HUGE_VAL, out);
      in.clear();
    }
    return in.peek() == std::char_traits<char>::eof();
#endif
  }
  // Whether an out-of-range decimal is past the largest double (else below the smallest): the
  // power of ten of its first significant digit plus its exponent, read as written.
  // "0.000...0001" with 400 zeros and no exponent is tiny (it was read as infinity).
  static bool past_largest(const std::string& text) {
    std::size_t i = (text[0] == '-' || text[0] == '+') ? 1 : 0;
    long long lead = 0;  // power of ten of the first significant digit, before the exponent
    bool found = false;
    long long int_digits = 0;
    for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
      if (!found && text[i] != '0') found = true;
      if (found) ++int_digits;
    }
    if (found) lead = int_digits - 1;
    if (i < text.size() && text[i] == '.') {
      ++i;
      long long zeros = 0;
      for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
        if (!found && text[i] != '0') {
          found = true;
          lead = -(zeros + 1);
        }
        if (!found) ++zeros;
      }
    }
    long long exponent = 0;
    if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
      ++i;
      const bool negative = i < text.size() && text[i] == '-';
      if (i < text.size() && (text[i] == '-' || text[i] == '+')) ++i;
      for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
        exponent = std::min(exponent * 10 + (text[i] - '0'), 1LL << 40);  // saturates: only the sign matters
      }
      if (negative) exponent = -exponent;
    }
    return lead + exponent > 0;
  }
  // Four hex digits exactly, as Python's json: strtoul took leading blanks, a sign and a
  // partial number ("\\u 41x", "\\u+041" read as "A", "\\uZZZZ" as NUL).
  unsigned hex4() {
    if (i_ + 4 > s_.size()) error("truncated \\u escape");
    unsigned code = 0;
    for (int k = 0; k < 4; ++k) {
      const char h = s_[i_];
      unsigned digit;
      if (h >= '0' && h <= '9') digit = static_cast<unsigned>(h - '0');
      else if (h >= 'a' && h <= 'f') digit = static_cast<unsigned>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') digit = static_cast<unsigned>(h - 'A' + 10);
      else error("\\u escape needs four hex digits");
      code = code * 16 + digit;
      ++i_;
    }
    return code;
  }
  static void put_utf8(std::string& out, unsigned code) {
    if (code < 0x80) {
      out.push_back(static_cast<char>(code));
    } else if (code < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (code >> 6)));
      out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
    } else if (code < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (code >> 12)));
      out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (code >> 18)));
      out.push_back(static_cast<char>(0x80 | ((code >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
    }
  }
  // One raw UTF-8 character starting at i_ - 1 (its lead byte `lead` >= 0x80), copied to out.
  // Strings reach Python as str: bytes that are not UTF-8 failed there, not here.
  void raw_utf8(std::string& out, unsigned char lead) {
    const std::size_t start = i_ - 1;
    int extra;
    unsigned code;
    if (lead >= 0xC2 && lead <= 0xDF) extra = 1, code = lead & 0x1Fu;
    else if (lead >= 0xE0 && lead <= 0xEF) extra = 2, code = lead & 0x0Fu;
    else if (lead >= 0xF0 && lead <= 0xF4) extra = 3, code = lead & 0x07u;
    else {
      i_ = start;
      error("invalid UTF-8 byte in a string");
    }
    for (int k = 0; k < extra; ++k) {
      if (i_ >= s_.size() || (static_cast<unsigned char>(s_[i_]) & 0xC0u) != 0x80u) {
        i_ = start;
        error("invalid UTF-8 sequence in a string");
      }
      code = (code << 6) | (static_cast<unsigned char>(s_[i_]) & 0x3Fu);
      ++i_;
    }
    const unsigned least[] = {0, 0x80, 0x800, 0x10000};
    if (code < least[extra] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
      i_ = start;
      error("invalid UTF-8 sequence in a string (overlong, a surrogate or past U+10FFFF)");
    }
    out.append(s_, start, i_ - start);
  }
  std::string string_body() {
    ++i_;  // opening quote
    std::string out;
    while (i_ < s_.size()) {
      const char c = s_[i_++];
      if (c == '"') return out;
      const unsigned char u = static_cast<unsigned char>(c);
      if (u < 0x20) {  // as Python's json (strict): a raw control character is not JSON
        --i_;
        error("control character in a string");
      }
      if (u >= 0x80) {
        raw_utf8(out, u);
        continue;
      }
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (i_ >= s_.size()) break;
      const char e = s_[i_++];
      switch (e) {
        case '"': out.push_back('"'); break;
        case '\\': out.push_back('\\'); break;
        case '/': out.push_back('/'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'u': {
          unsigned code = hex4();
          // UTF-16 surrogates (Python's json.dumps writes characters past U+FFFF as a pair):
          // a high one must be followed by an escaped low one, and a lone one is no
          // character (each encoded alone was CESU-8, which Python cannot decode).
          if (code >= 0xDC00 && code <= 0xDFFF) error("lone low surrogate in a \\u escape");
          if (code >= 0xD800 && code <= 0xDBFF) {
            if (!(i_ + 1 < s_.size() && s_[i_] == '\\' && s_[i_ + 1] == 'u')) {
              error("high surrogate in a \\u escape not followed by a low one");
            }
            i_ += 2;
            const unsigned low = hex4();
            if (!(low >= 0xDC00 && low <= 0xDFFF)) error("high surrogate in a \\u escape not followed by a low one");
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
          }
          put_utf8(out, code);
          break;
        }
        default: error("bad escape");
      }
    }
    error("unterminated string");
  }

  const std::string& s_;
  std::size_t i_ = 0;
};

// ---- typed access with the JSON path in every message --------------------------------------

[[noreturn]] inline void bad(const std::string& path, const std::string& rule) {
  throw std::invalid_argument("learned model: " + path + " " + rule);
}

// A number as an error shows it, whatever the process locale (10 significant digits).
inline std::string shown_number(double x) {
  std::ostringstream s;
  s.imbue(std::locale::classic());
  s.precision(10);
  s << x;
  return s.str();
}

// What a value is, for an error: null, true or false, the number, a string (quoted, cut at 40
// characters), an array or an object. A JSON null is a value like any other: where the schema
// does not allow it, it is refused as the wrong type, never taken as the field's absence.
inline std::string shown(const Json& v) {
  switch (v.t) {
    case Json::T::null: return "null";
    case Json::T::boolean: return v.b ? "true" : "false";
    case Json::T::number: return shown_number(v.num);
    case Json::T::string: return "'" + (v.str.size() > 40 ? v.str.substr(0, 37) + "..." : v.str) + "'";
    case Json::T::array: return v.arr.empty() ? "an empty array" : "an array";
    case Json::T::object: return v.obj.empty() ? "an empty object" : "an object";
  }
  return "";
}

inline const Json& field(const Json& obj, const std::string& path, const std::string& key) {
  if (obj.t != Json::T::object) bad(path, "must be an object, got " + shown(obj));
  const Json* v = obj.find(key);
  if (v == nullptr) bad(path + "." + key, "is missing");
  return *v;
}

inline double number(const Json& v, const std::string& path) {
  if (v.t != Json::T::number) bad(path, "must be a number, got " + shown(v));
  if (!std::isfinite(v.num)) bad(path, "must be finite, got " + shown(v));
  return v.num;
}

inline std::string string(const Json& v, const std::string& path) {
  if (v.t != Json::T::string) bad(path, "must be a string, got " + shown(v));
  return v.str;
}

inline bool boolean(const Json& v, const std::string& path) {
  if (v.t != Json::T::boolean) bad(path, "must be true or false, got " + shown(v));
  return v.b;
}

inline std::vector<double> numbers(const Json& v, const std::string& path) {
  if (v.t != Json::T::array) bad(path, "must be an array of numbers, got " + shown(v));
  std::vector<double> out;
  out.reserve(v.arr.size());
  for (std::size_t i = 0; i < v.arr.size(); ++i) {
    out.push_back(number(v.arr[i], path + "[" + std::to_string(i) + "]"));
  }
  return out;
}

inline std::vector<int> integers(const Json& v, const std::string& path) {
  std::vector<double> raw = numbers(v, path);
  std::vector<int> out;
  out.reserve(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != std::floor(raw[i]) || std::abs(raw[i]) > 2e9) {
      bad(path + "[" + std::to_string(i) + "]", "must be an integer");
    }
    out.push_back(static_cast<int>(raw[i]));
  }
  return out;
}

// Edit distance of two short keys (Levenshtein), for the "did you mean" of known_keys.
inline std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The key nearest `key` among `known` where it is close enough to be a misspelling (at most
// max(2, |key| / 4) edits; srift.learn.loader nearest_key is the same rule), else "".
inline std::string nearest_key(const std::string& key, const std::vector<std::string>& known) {
  std::vector<std::string> names(known);
  std::sort(names.begin(), names.end());
  std::string nearest;
  std::size_t best = std::max<std::size_t>(2, key.size() / 4) + 1;
  for (const std::string& k : names) {
    const std::size_t d = edit_distance(key, k);
    if (d < best) best = d, nearest = k;
  }
  return nearest;
}

// Refuses a key of object `obj` (at `path`) that is not among `known`, naming its JSON path and
// the key, the nearest known key where one is close, and the keys the object may hold: a
// misspelled optional field ("residual", "dominance_gaurd") was skipped as if absent. `known`
// is the object's properties in srift/schemas/learned_model.schema.json, whose
// "additionalProperties": false refuses the same keys in Python. `of` (optional) says whose
// field it is not ("of a document named 'compute_ratio'"), and `hint` (a function of the key,
// optional) adds a parenthesis after it. Not an object: nothing to check here (the caller's own
// reads, or the caller, name the type).
template <typename Hint>
void known_keys(const Json& obj, const std::string& path, const std::vector<std::string>& known, const std::string& of,
                Hint hint) {
  if (obj.t != Json::T::object) return;
  for (const auto& kv : obj.obj) {
    const std::string& key = kv.first;
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::vector<std::string> names(known);
    std::sort(names.begin(), names.end());
    std::string list;
    for (const std::string& k : names) list += (list.empty() ? "" : ", ") + k;
    const std::string nearest = nearest_key(key, names);
    const std::string extra = hint(key);
    bad(path + "." + key, "is not a known field" + (of.empty() ? "" : " " + of) +
                              (nearest.empty() ? "" : " (did you mean '" + nearest + "'?)") +
                              (extra.empty() ? "" : " (" + extra + ")") + "; known here: " + list);
  }
}

inline void known_keys(const Json& obj, const std::string& path, const std::vector<std::string>& known) {
  known_keys(obj, path, known, "", [](const std::string&) { return std::string(); });
}

inline void known_keys(const Json& obj, const std::string& path, std::initializer_list<const char*> known) {
  known_keys(obj, path, std::vector<std::string>(known.begin(), known.end()));
}

inline void require_size(std::size_t got, std::size_t want, const std::string& path) {
  if (got != want) {
    bad(path, "must have " + std::to_string(want) + " entries, got " + std::to_string(got));
  }
}

}  // namespace srift::detail::json
