#include <gtest/gtest.h>

#include <chrono>
#include <clocale>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "srift/learned.hpp"
#include "srift/learned_compute.hpp"

#include "shipped_documents.hpp"

namespace {

const char* kLinear = R"({"schema":"srift.learned-model/1","name":"lin","features":["a","b"],
  "input_scaler":{"mean":[1,2],"scale":[2,4]},"model":{"type":"linear","coef":[3,-1],"intercept":0.5},
  "residuals":{"p10":-0.1,"p90":0.2}})";

// Two stumps: x0 <= 0.5 -> 1 else 2; x1 <= -1 -> 10 else 20; base 0.25, scale 0.1.
const char* kTrees = R"({"schema":"srift.learned-model/1","name":"t","features":["x0","x1"],
  "model":{"type":"tree_ensemble","base":0.25,"scale":0.1,"float32_inputs":true,"trees":[
   {"feature":[0,-1,-1],"threshold":[0.5,0,0],"left":[1,-1,-1],"right":[2,-1,-1],"value":[0,1,2]},
   {"feature":[1,-1,-1],"threshold":[-1,0,0],"left":[1,-1,-1],"right":[2,-1,-1],"value":[0,10,20],
    "missing_left":[1,0,0]}]}})";

const char* kMlp = R"({"schema":"srift.learned-model/1","name":"m","features":["x"],
  "model":{"type":"mlp","layers":[{"weights":[[1,-1]],"bias":[0,0],"activation":"relu"},
                                   {"weights":[[2],[3]],"bias":[1],"activation":"identity"}]}})";

}  // namespace

TEST(LearnedModel, LinearWithScaler) {
  auto m = srift::LearnedModel::from_json(kLinear);
  EXPECT_EQ(m.type(), srift::LearnedModel::Type::linear);
  EXPECT_EQ(m.num_features(), 2);
  // (3-1)/2*3 + (6-2)/4*(-1) + 0.5 = 3 - 1 + 0.5
  EXPECT_DOUBLE_EQ(m.predict({3.0, 6.0}), 2.5);
  EXPECT_DOUBLE_EQ(m.residual_p90(), 0.2);
}

TEST(LearnedModel, AnMlpsRowsAreCheckedBeforeItsWeightsAreReserved) {
  // a 1.8 MB document of 200,000 empty rows under a 200,000-wide bias asked for 320 GB
  // (std::bad_alloc) before the first row's length was read
  const int n = 200000;
  std::string doc = R"({"schema":"srift.learned-model/1","name":"m","features":["x"],"model":{"type":"mlp","layers":[)";
  doc += R"({"weights":[[)";
  for (int i = 0; i < n; ++i) doc += i ? ",0" : "0";
  doc += R"(]],"bias":[)";
  for (int i = 0; i < n; ++i) doc += i ? ",0" : "0";
  doc += R"(],"activation":"relu"},{"weights":[)";
  for (int i = 0; i < n; ++i) doc += i ? ",[]" : "[]";
  doc += R"(],"bias":[)";
  for (int i = 0; i < n; ++i) doc += i ? ",0" : "0";
  doc += R"(],"activation":"relu"}]}})";
  try {
    srift::LearnedModel::from_json(doc);
    FAIL() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("layers[1].weights[0]"), std::string::npos) << e.what();
  }
}

TEST(LearnedModel, TreesFollowThresholdsAndMissing) {
  auto m = srift::LearnedModel::from_json(kTrees);
  EXPECT_DOUBLE_EQ(m.predict({0.5, -1.0}), 0.25 + 0.1 * (1 + 10));
  EXPECT_DOUBLE_EQ(m.predict({0.6, 0.0}), 0.25 + 0.1 * (2 + 20));
  EXPECT_DOUBLE_EQ(m.predict({0.0, std::nan("")}), 0.25 + 0.1 * (1 + 10));
}

TEST(LearnedModel, Mlp) {
  auto m = srift::LearnedModel::from_json(kMlp);
  EXPECT_DOUBLE_EQ(m.predict({2.0}), 1 + 2 * 2);
  EXPECT_DOUBLE_EQ(m.predict({-2.0}), 1 + 3 * 2);
  double x[2] = {2.0, -2.0}, out[2];
  m.predict_batch(x, 2, 1, out);
  EXPECT_DOUBLE_EQ(out[1], 7.0);
}

TEST(LearnedModel, RejectsBadDocuments) {
  std::string bad = kTrees;
  bad.replace(bad.find("\"left\":[1,-1,-1]"), 16, "\"left\":[0,-1,-1]");
  try {
    srift::LearnedModel::from_json(bad);
    FAIL() << "cycle accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("trees[0].left[0]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(srift::LearnedModel::from_json("{\"schema\":\"srift.learned-model/2\"}"), std::invalid_argument);
  EXPECT_THROW(srift::LearnedModel::from_json("[1,2"), std::invalid_argument);
  EXPECT_THROW(srift::LearnedModel::from_json(kLinear).predict({1.0}), std::invalid_argument);
}

TEST(LearnedModel, MeanOfMembersEachWithItsOwnScaler) {
  // member 0: linear on scaled inputs; member 1: the stumps of kTrees, unscaled
  const std::string doc = R"({"schema":"srift.learned-model/1","name":"avg","features":["x0","x1"],
    "model":{"type":"mean","members":[
      {"input_scaler":{"mean":[1,2],"scale":[2,4]},"model":{"type":"linear","coef":[3,-1],"intercept":0.5}},
      {"input_scaler":null,"model":{"type":"tree_ensemble","base":0.25,"scale":0.1,"float32_inputs":false,"trees":[
        {"feature":[0,-1,-1],"threshold":[0.5,0,0],"left":[1,-1,-1],"right":[2,-1,-1],"value":[0,1,2]}]}}]}})";
  auto m = srift::LearnedModel::from_json(doc);
  EXPECT_EQ(m.type(), srift::LearnedModel::Type::mean);
  ASSERT_EQ(m.members().size(), 2u);
  // linear: (3-1)/2*3 + (6-2)/4*(-1) + 0.5 = 2.5; trees: x0 = 3 > 0.5 -> 0.25 + 0.1 * 2
  EXPECT_DOUBLE_EQ(m.predict({3.0, 6.0}), (2.5 + 0.45) / 2);
  double x[4] = {3.0, 6.0, 3.0, 6.0}, out[2];
  m.predict_batch(x, 2, 2, out);
  EXPECT_DOUBLE_EQ(out[1], (2.5 + 0.45) / 2);
  // members may not nest, and each needs a model
  std::string nested = doc;
  nested.replace(nested.find("\"type\":\"linear\""), 15, "\"type\":\"mean\"");
  try {
    srift::LearnedModel::from_json(nested);
    FAIL() << "nested mean accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("$.model.members[0].model.type must be one of linear, tree_ensemble, mlp, got"),
              std::string::npos)
        << e.what();
  }
}

// Where no comma-decimal locale is installed (a bare CI image), glibc's localedef builds
// de_DE.UTF-8 into a temporary folder from its sources, and LOCPATH points setlocale there
// (glibc reads LOCPATH at every setlocale). Undone, folder and LOCPATH, when it goes.
class CommaLocale {
 public:
  CommaLocale() {
    for (const char* n : {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8"}) {
      if ((set_ = std::setlocale(LC_NUMERIC, n)) != nullptr) return;
    }
#if defined(__linux__)
    char dir[] = "/tmp/srift_locale_XXXXXX";
    if (::mkdtemp(dir) == nullptr) return;
    dir_ = dir;
    // -c: localedef exits non-zero on mere warnings though it wrote the locale; setlocale decides
    const int rc = std::system(("localedef -c -i de_DE -f UTF-8 " + dir_ + "/de_DE.UTF-8 >/dev/null 2>&1").c_str());
    (void)rc;
    const char* old = std::getenv("LOCPATH");
    had_locpath_ = old != nullptr;
    if (had_locpath_) old_locpath_ = old;
    ::setenv("LOCPATH", dir, 1);
    set_ = std::setlocale(LC_NUMERIC, "de_DE.UTF-8");
#endif
  }
  ~CommaLocale() {
    std::setlocale(LC_NUMERIC, "C");
#if defined(__linux__)
    if (dir_.empty()) return;
    if (had_locpath_) {
      ::setenv("LOCPATH", old_locpath_.c_str(), 1);
    } else {
      ::unsetenv("LOCPATH");
    }
    const int rc = std::system(("rm -rf '" + dir_ + "'").c_str());
    (void)rc;
#endif
  }
  CommaLocale(const CommaLocale&) = delete;
  CommaLocale& operator=(const CommaLocale&) = delete;
  bool ok() const { return set_ != nullptr; }

 private:
  const char* set_ = nullptr;
  std::string dir_, old_locpath_;
  bool had_locpath_ = false;
};

TEST(LearnedModel, NumbersParseWhateverTheProcessLocale) {
  // strtod follows LC_NUMERIC: in a program that called setlocale(LC_ALL, "de_DE.UTF-8")
  // "0.5" was malformed. An installed comma-decimal locale, else one localedef builds.
  const CommaLocale comma;  // LC_NUMERIC back to "C" however the test ends
  if (!comma.ok()) GTEST_SKIP() << "no comma-decimal locale installed, and localedef could not build one";
  ASSERT_EQ(std::string(std::localeconv()->decimal_point), ",");
  EXPECT_DOUBLE_EQ(srift::LearnedModel::from_json(kLinear).predict({3.0, 6.0}), 2.5);
}

TEST(LearnedModel, SignedNumbersAreReadAsJsonHasThem) {
  // "+-5" was taken as -5 once the reader skipped the '+' itself; exponents past a double's
  // range read as strtod reads them (infinite, then refused naming the field; or zero).
  std::string doubled(kLinear);
  doubled.replace(doubled.find("\"intercept\":0.5"), 15, "\"intercept\":+-0.5");
  EXPECT_THROW(srift::LearnedModel::from_json(doubled), std::invalid_argument);
  std::string tiny(kLinear);
  tiny.replace(tiny.find("\"intercept\":0.5"), 15, "\"intercept\":1e-400");
  EXPECT_DOUBLE_EQ(srift::LearnedModel::from_json(tiny).predict({3.0, 6.0}), 2.0);
  std::string huge(kLinear);
  huge.replace(huge.find("\"intercept\":0.5"), 15, "\"intercept\":1e400");
  EXPECT_THROW(srift::LearnedModel::from_json(huge), std::invalid_argument);
}

TEST(LearnedModel, UnicodeEscapesDecodeAsPythonsJsonDoes) {
  // The name of kLinear ("lin") replaced by `name`, as JSON text.
  auto with_name = [](const std::string& name) {
    std::string doc(kLinear);
    doc.replace(doc.find("\"name\":\"lin\""), 12, "\"name\":\"" + name + "\"");
    return doc;
  };
  // json.dumps writes U+1F680 as a surrogate pair; each half was encoded on its own (CESU-8,
  // which Python cannot decode): it is one 4-byte UTF-8 character.
  EXPECT_EQ(srift::LearnedModel::from_json(with_name("a\\ud83d\\ude80b")).name(), "a\xF0\x9F\x9A\x80" "b");
  EXPECT_EQ(srift::LearnedModel::from_json(with_name("\\u00e9\\u20AC\\u0041")).name(), "\xC3\xA9\xE2\x82\xAC" "A");
  // raw UTF-8 is kept as it is
  EXPECT_EQ(srift::LearnedModel::from_json(with_name("\xC3\xA9\xF0\x9F\x9A\x80")).name(), "\xC3\xA9\xF0\x9F\x9A\x80");
  // Python's json refuses these; strtoul read "\uZZZZ" as NUL and "\u 41x", "\u+041" as "A"
  for (const char* bad : {"\\uZZZZ", "\\u 41x", "\\u+041", "\\u-001", "\\u00e", "\\u12G4", "\\u0x41"}) {
    try {
      srift::LearnedModel::from_json(with_name(bad));
      ADD_FAILURE() << bad << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("\\u escape"), std::string::npos) << e.what();
    }
  }
  // lone or mismatched surrogates are no character
  for (const char* bad : {"\\ud83d", "\\ud83dx", "\\ude80", "\\ud83d\\u0041", "\\ud83d\\ud83d", "\\ud83d\\n"}) {
    try {
      srift::LearnedModel::from_json(with_name(bad));
      ADD_FAILURE() << bad << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("surrogate"), std::string::npos) << e.what();
    }
  }
  // bytes that are not UTF-8 (they reached Python as a str it could not decode), and raw
  // control characters, as Python's json (strict)
  for (const char* bad : {"\xff\xfe", "\xC3", "\xC3(", "\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "a\tb", "\x01"}) {
    EXPECT_THROW(srift::LearnedModel::from_json(with_name(bad)), std::invalid_argument) << bad;
  }
}

namespace {
// `doc` with `from`, which must occur in it exactly once, replaced by `to` (shipped_documents.hpp).
using srift_test::edited_once;

std::string what_of(const std::string& doc) {
  try {
    srift::LearnedModel::from_json(doc);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(LearnedModel, OutOfRangeDecimalsWithoutAnExponentReadAsPythonReadsThem) {
  // 400 zeros then a 1: Python reads 0.0; this reader took every out-of-range number without
  // an exponent for an overflow (infinity, then "must be finite").
  const std::string tiny = "0." + std::string(400, '0') + "1";
  EXPECT_DOUBLE_EQ(srift::LearnedModel::from_json(edited_once(kLinear, "\"intercept\":0.5", "\"intercept\":" + tiny))
                       .predict({3.0, 6.0}),
                   2.0);
  EXPECT_DOUBLE_EQ(srift::LearnedModel::from_json(edited_once(kLinear, "\"intercept\":0.5", "\"intercept\":-" + tiny))
                       .predict({3.0, 6.0}),
                   2.0);
  // and past the largest double, however written, is still refused naming the field
  const std::string huge = "1" + std::string(400, '0');
  EXPECT_NE(what_of(edited_once(kLinear, "\"intercept\":0.5", "\"intercept\":" + huge)).find("intercept"), std::string::npos);
  EXPECT_NE(what_of(edited_once(kLinear, "\"intercept\":0.5", "\"intercept\":0.001e312")).find("intercept"), std::string::npos);
  EXPECT_DOUBLE_EQ(srift::LearnedModel::from_json(edited_once(kLinear, "\"intercept\":0.5", "\"intercept\":1000e-330"))
                       .predict({3.0, 6.0}),
                   2.0);
}

TEST(LearnedModel, RepeatedKeysAreRefused) {
  // Python's json keeps the last value, this reader the first: one file, two models.
  const std::string doc = edited_once(kLinear, "\"intercept\":0.5", "\"intercept\":0.5,\"intercept\":100");
  EXPECT_NE(what_of(doc).find("duplicate key 'intercept'"), std::string::npos) << what_of(doc);
}

TEST(LearnedModel, AnObjectOfManyKeysReadsInLinearTime) {
  // The repeat check compared each key with every earlier one: 100,000 keys in a "training"
  // record took 15 s, 200,000 a minute. Hashed, well under a second; a repeat is still found.
  std::string training = "{";
  for (int i = 0; i < 200000; ++i) training += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":0";
  const std::string many = edited_once(kLinear, "\"residuals\"", "\"training\":" + training + "},\"residuals\"");
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(srift::LearnedModel::from_json(many).name(), "lin");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 5.0);
  const std::string repeated = edited_once(many, "\"k199999\":0", "\"k199999\":0,\"k7\":1");
  EXPECT_NE(what_of(repeated).find("duplicate key 'k7'"), std::string::npos) << what_of(repeated).substr(0, 200);
}

TEST(LearnedModel, MissingLeftIsZeroOrOne) {
  // stored as uint8: 256 read as 0 (NaN right), -7 as 249
  for (const char* bad : {"[256,0,0]", "[-7,0,0]", "[2,0,0]"}) {
    const std::string what = what_of(edited_once(kTrees, "\"missing_left\":[1,0,0]", std::string("\"missing_left\":") + bad));
    EXPECT_NE(what.find("missing_left[0] must be 0 or 1"), std::string::npos) << bad << ": " << what;
  }
}

TEST(LearnedModel, ResidualQuantilesMustBeInOrder) {
  const std::string what = what_of(edited_once(kLinear, "\"p10\":-0.1,\"p90\":0.2", "\"p10\":0.4,\"p90\":-0.4"));
  EXPECT_NE(what.find("$.residuals"), std::string::npos) << what;
  EXPECT_NE(what.find("p10 0.4 and p90 -0.4"), std::string::npos) << what;
  srift::LearnedComputeConfig config;
  config.absolute_p10 = 0.4;
  config.absolute_p90 = -0.4;
  EXPECT_THROW(config.validate(), std::invalid_argument);
}

TEST(LearnedModel, ResidualQuantilesMustBeLogFactorsThatExpTurnsIntoNumbers) {
  // Note "log factor" (validate.hpp): a residual quantile is a log factor of the predicted time.
  // $.residuals.p90 = 1e14 was read, and its band factor exp(1e14) was +inf (a p90 iteration of
  // inf s from a compute document, a Python OverflowError from the iteration overhead's).
  for (const char* bad : {"\"p10\":-0.1,\"p90\":1e14", "\"p10\":-710,\"p90\":0.2"}) {
    const std::string what = what_of(edited_once(kLinear, "\"p10\":-0.1,\"p90\":0.2", bad));
    const bool high = std::string(bad).find("1e14") != std::string::npos;
    EXPECT_EQ(what.rfind(std::string("learned model: $.residuals.") + (high ? "p90" : "p10") +
                             " must be a log factor whose exp() is a finite number > 0 (at most 709.78 either side of 0), got " +
                             (high ? "1e+14" : "-710"),
                         0),
              0u)
        << what;
  }
  // the largest that exp() turns into a finite factor > 0 either way still loads
  EXPECT_NO_THROW(srift::LearnedModel::from_json(edited_once(kLinear, "\"p10\":-0.1,\"p90\":0.2", "\"p10\":-709,\"p90\":709")));
  // the combination's quantiles, as a C++ caller sets them or the compute documents give them
  const auto refused = [](srift::LearnedComputeConfig c, const std::string& want) {
    try {
      c.validate();
      ADD_FAILURE() << "no throw for " << want;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind(want, 0), 0u) << e.what();
    }
  };
  srift::LearnedComputeConfig c;
  c.anchored_p90 = 1e14;
  refused(c, "anchored_p90 must be a log factor whose exp() is a finite number > 0");
  c = {};
  c.absolute_p10 = -1e3;
  refused(c, "absolute_p10 must be a log factor whose exp() is a finite number > 0");
  c = {};
  c.roofline_p90 = 800;
  refused(c, "roofline_p90 must be a log factor");
  c = {};
  c.edge_anchored_p90 = 1e14;  // the band past the data's edge: exp(p90 - p50)
  refused(c, "edge_anchored_p90 must be a log factor");
  c = {};
  c.edge_absolute_p10 = -400;  // each within range, their spread (p50 - p10 = 800) is not
  c.edge_absolute_p50 = 400;
  c.edge_absolute_p90 = 400;
  refused(c, "edge_absolute_p50 - edge_absolute_p10 must be a log factor");
  c = {};
  c.anchored_p10 = -709;
  c.anchored_p90 = 709;
  EXPECT_NO_THROW(c.validate());
}

namespace {
// A tree ensemble over features x0, x1 of one-leaf trees with these values, and `extra` fields.
std::string leaves(const std::string& head, std::initializer_list<const char*> values) {
  std::string doc = R"({"schema":"srift.learned-model/1","name":"t","features":["x0","x1"],"model":{"type":"tree_ensemble",)" +
                    head + R"(,"trees":[)";
  bool first = true;
  for (const char* v : values) {
    doc += std::string(first ? "" : ",") + R"({"feature":[-1],"threshold":[0],"left":[-1],"right":[-1],"value":[)" + v +
           "]}";
    first = false;
  }
  return doc + "]}}";
}
}  // namespace

TEST(LearnedModel, TreesAreSummedInScikitLearnsOrder) {
  // Gradient boosting adds stage by stage (out = base; out += scale * tree): 1 + 1e16 - 1e16 is
  // 0 there, where base + scale * (1e16 - 1e16) gave 1.
  const auto boosted =
      srift::LearnedModel::from_json(leaves(R"("base":1,"scale":1,"float32_inputs":true)", {"1e16", "-1e16"}));
  EXPECT_EQ(boosted.predict({0.0, 0.0}), (1.0 + 1e16) - 1e16);
  EXPECT_EQ(boosted.predict({0.0, 0.0}), 0.0);
  // A forest sums from 0 and divides by the number of trees: 5 / 3, not 5 * (1 / 3).
  const auto forest = srift::LearnedModel::from_json(
      leaves(R"("base":0,"scale":1,"average":true,"float32_inputs":true)", {"1", "2", "2"}));
  volatile double three = 3.0;
  EXPECT_EQ(forest.predict({0.0, 0.0}), 5.0 / three);
  EXPECT_NE(5.0 / three, 5.0 * (1.0 / three));
  EXPECT_NE(what_of(leaves(R"("base":0,"scale":1,"average":1,"float32_inputs":true)", {"1"})).find(
                "$.model.average must be true or false"),
            std::string::npos);
}

TEST(LearnedModel, TreesRefuseInputsTheirEstimatorRefuses) {
  // Note "tree inputs": float32 inputs hold no infinity nor any value that rounds past the
  // largest float; a NaN is refused where the document says allow_nan false.
  const auto f32 = srift::LearnedModel::from_json(kTrees);
  const double least_overflow = 0x1.ffffffp+127;  // 2^128 - 2^103: rounds (to even) to float +inf
  for (double bad : {HUGE_VAL, -HUGE_VAL, 1e39, least_overflow, -least_overflow}) {
    try {
      f32.predict({0.0, bad});
      ADD_FAILURE() << bad << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("feature x1 (index 1) is "), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("float32"), std::string::npos) << e.what();
    }
  }
  // the largest float, and every double below the rounding point, are taken (as numpy rounds them)
  EXPECT_DOUBLE_EQ(f32.predict({0.0, std::nextafter(least_overflow, 0.0)}), 0.25 + 0.1 * (1 + 20));
  EXPECT_DOUBLE_EQ(f32.predict({-3.4028234663852886e38, 0.0}), 0.25 + 0.1 * (1 + 20));
  // NaN: routed unless allow_nan is false (GradientBoostingRegressor)
  EXPECT_DOUBLE_EQ(f32.predict({0.0, std::nan("")}), 0.25 + 0.1 * (1 + 10));
  const auto no_nan = srift::LearnedModel::from_json(
      edited_once(kTrees, "\"float32_inputs\":true", "\"float32_inputs\":true,\"allow_nan\":false"));
  EXPECT_DOUBLE_EQ(no_nan.predict({0.0, 0.0}), 0.25 + 0.1 * (1 + 20));
  try {
    no_nan.predict({std::nan(""), 0.0});
    FAIL() << "NaN accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("learned model 't': feature x0 (index 0) is nan"), std::string::npos)
        << e.what();
  }
  // float64 inputs (HistGradientBoosting) take any double, infinities included
  const auto f64 = srift::LearnedModel::from_json(
      edited_once(kTrees, "\"float32_inputs\":true", "\"float32_inputs\":false"));
  EXPECT_DOUBLE_EQ(f64.predict({1e300, -HUGE_VAL}), 0.25 + 0.1 * (2 + 10));
}

TEST(LearnedModel, TheLargestDoubleThresholdIsPlusInfinity) {
  // scikit-learn's "NaN or not" split sits at +inf (every number left, an infinite one
  // included); JSON holds the largest double in its place.
  const std::string doc = edited_once(edited_once(kTrees, "\"float32_inputs\":true", "\"float32_inputs\":false"),
                                   "\"threshold\":[-1,0,0]", "\"threshold\":[1.7976931348623157e308,0,0]");
  const auto m = srift::LearnedModel::from_json(doc);
  EXPECT_DOUBLE_EQ(m.predict({0.0, HUGE_VAL}), 0.25 + 0.1 * (1 + 10));
  EXPECT_DOUBLE_EQ(m.predict({0.0, 1.7976931348623157e308}), 0.25 + 0.1 * (1 + 10));
  EXPECT_DOUBLE_EQ(m.predict({0.0, std::nan("")}), 0.25 + 0.1 * (1 + 10));  // missing_left 1
}

TEST(LearnedModel, ResidualsNameAndFeaturesAreReadAsTheSchemaHasThem) {
  // residuals with p10 alone gave p90 0, a list was skipped; an empty name was accepted
  std::string what = what_of(edited_once(kLinear, "\"p10\":-0.1,\"p90\":0.2", "\"p10\":-0.5"));
  EXPECT_NE(what.find("$.residuals.p90 is missing"), std::string::npos) << what;
  what = what_of(edited_once(kLinear, "\"p10\":-0.1,\"p90\":0.2", "\"p90\":0.5"));
  EXPECT_NE(what.find("$.residuals.p10 is missing"), std::string::npos) << what;
  what = what_of(edited_once(kLinear, "{\"p10\":-0.1,\"p90\":0.2}", "[1,2]"));
  EXPECT_NE(what.find("$.residuals must be an object"), std::string::npos) << what;
  what = what_of(edited_once(kLinear, "{\"p10\":-0.1,\"p90\":0.2}", "null"));
  EXPECT_NE(what.find("$.residuals must be an object"), std::string::npos) << what;
  what = what_of(edited_once(kLinear, "\"p10\":-0.1", "\"p10\":\"x\""));
  EXPECT_NE(what.find("$.residuals.p10 must be a number"), std::string::npos) << what;
  what = what_of(edited_once(kLinear, "\"name\":\"lin\"", "\"name\":\"\""));
  EXPECT_NE(what.find("$.name must not be empty"), std::string::npos) << what;
  what = what_of(edited_once(kLinear, "\"features\":[\"a\",\"b\"]", "\"features\":[\"a\",\"\"]"));
  EXPECT_NE(what.find("$.features[1] must not be empty"), std::string::npos) << what;
  // a document without residuals still reads, with 0 for both
  const auto none = srift::LearnedModel::from_json(kMlp);
  EXPECT_EQ(none.residual_p10(), 0.0);
  EXPECT_EQ(none.residual_p90(), 0.0);
}

TEST(LearnedModel, AMeanModelRefusesAScalerOfItsOwn) {
  // read, then never applied: the members scale their own inputs
  const std::string doc = R"({"schema":"srift.learned-model/1","name":"avg","features":["a"],
    "input_scaler":{"mean":[100],"scale":[2]},
    "model":{"type":"mean","members":[{"model":{"type":"linear","coef":[1],"intercept":0}}]}})";
  const std::string what = what_of(doc);
  EXPECT_NE(what.find("$.input_scaler must be null for a mean model"), std::string::npos) << what;
  EXPECT_DOUBLE_EQ(srift::LearnedModel::from_json(edited_once(doc, "{\"mean\":[100],\"scale\":[2]}", "null"))
                       .predict({10.0}),
                   10.0);
}

TEST(LearnedModel, APredictionThatIsNotFiniteIsAnErrorNamingTheModel) {
  const auto lin = srift::LearnedModel::from_json(kLinear);
  try {
    lin.predict({std::nan(""), 6.0});
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("learned model 'lin'"), std::string::npos) << what;
    EXPECT_NE(what.find("feature a is nan"), std::string::npos) << what;
  }
  const auto overflow =
      srift::LearnedModel::from_json(edited_once(kLinear, "\"coef\":[3,-1]", "\"coef\":[1e308,1e308]"));
  EXPECT_THROW(overflow.predict({1e10, 1e10}), std::invalid_argument);
  // trees route a NaN by missing_left, as scikit-learn does: a finite answer
  EXPECT_TRUE(std::isfinite(srift::LearnedModel::from_json(kTrees).predict({std::nan(""), std::nan("")})));
}

TEST(LearnedModel, UnknownKeysAreRefusedNamingThePathAndTheKey) {
  // A misspelled optional field was skipped as if absent: "residual" left the model without its
  // band, a tree's "missing_right" routed every NaN right. Each object the core reads has a
  // closed set of keys (the schema's "additionalProperties": false).
  struct Case {
    std::string doc, what;
  };
  const std::string mean = R"({"schema":"srift.learned-model/1","name":"avg","features":["a"],
    "model":{"type":"mean","members":[{"model":{"type":"linear","coef":[1],"intercept":0}}]}})";
  const std::vector<Case> cases = {
      {edited_once(kLinear, "\"residuals\"", "\"residual\""),
       "$.residual is not a known field of a document named 'lin' (did you mean 'residuals'?); known here: "
       "description, features, input_scaler, model, name, residuals, schema, target, training"},
      {edited_once(kLinear, "\"intercept\":0.5", "\"intercept\":0.5,\"intercpt\":1"),
       "$.model.intercpt is not a known field (did you mean 'intercept'?); known here: coef, intercept, type"},
      {edited_once(kLinear, "\"scale\":[2,4]", "\"scale\":[2,4],\"std\":[2,4]"),
       "$.input_scaler.std is not a known field; known here: mean, scale"},
      {edited_once(kLinear, "\"p90\":0.2", "\"p90\":0.2,\"p95\":0.3"),
       "$.residuals.p95 is not a known field (did you mean 'p90'?)"},
      {edited_once(kTrees, "\"missing_left\":[1,0,0]", "\"missing_right\":[1,0,0]"),
       "$.model.trees[1].missing_right is not a known field; known here: feature, left, missing_left, right, "
       "threshold, value"},
      {edited_once(kTrees, "\"float32_inputs\":true", "\"float32_inputs\":true,\"allow_nans\":false"),
       "$.model.allow_nans is not a known field (did you mean 'allow_nan'?)"},
      {edited_once(kMlp, "\"activation\":\"relu\"", "\"activaton\":\"relu\",\"activation\":\"relu\""),
       "$.model.layers[0].activaton is not a known field (did you mean 'activation'?)"},
      {edited_once(mean, "{\"model\":{\"type\":\"linear\"", "{\"scaler\":null,\"model\":{\"type\":\"linear\""),
       "$.model.members[0].scaler is not a known field; known here: input_scaler, model"},
      {edited_once(mean, "\"intercept\":0}", "\"intercept\":0,\"bias\":0}"),
       "$.model.members[0].model.bias is not a known field"},
  };
  for (const Case& c : cases) {
    const std::string what = what_of(c.doc);
    EXPECT_NE(what.find("learned model: " + c.what), std::string::npos) << what;
  }
  // every optional field the schema lists for the document's kind is still read (records the
  // core does not use included): a model's own fields in any document, and each kind's (its
  // name: learned_document.hpp document_kinds) in that kind's
  const std::string residuals = "\"residuals\":{\"p10\":-0.1,\"p90\":0.2}";
  const std::string common =
      R"("residuals":{"p10":-0.1,"p50":0,"p90":0.2,"n":3,"split":"s","within_lab":{"p10":0,"p90":0},
          "convolved":{"p10":0,"p90":0},"lab_shifts":{"lab":{"log_shift":0,"factor":1,"rows":2,"cells":["c"]}}},
         "description":"d","target":"t","training":{"anything":{"goes":1},"feature_range":{"min":[0,0],"max":[1,1]},
         "domain":{"factor":2,"beyond":{"any":1}}})";
  EXPECT_EQ(what_of(edited_once(kLinear, residuals, common)), "");
  // (each with the fields the schema requires of it: its values are checked too)
  const std::string roofline = R"(,"roofline_residuals":{"p10":-0.1,"p90":0.1})";
  const std::string edge = R"(,"data_edge":{"launch_year":2024,"p10":-0.1,"p50":0,"p90":0.1})";
  const std::vector<std::pair<std::string, std::string>> kinds = {
      {"compute_ratio", roofline + edge +
                            R"(,"absolute_blend":{"weight":0.5,"absolute_model":"compute_absolute",
                                                  "residuals":{"p10":-0.1,"p90":0.1}})"},
      {"compute_absolute",
       roofline + edge +
           R"(,"dominance_guard":{"references":["G"],"reference_specs":{"G":{"fp32_flops":1e13,"tf32_flops":0,
                 "fp16_flops":0,"memory_bandwidth":1e12,"memory_bytes":1e10}}},
               "measured_band":{"noise":{"p10":0.9,"p90":1.1},"per_e_fold":{"p10":0.95,"p90":1.05}})"},
      {"iteration_overhead", R"(,"instance_anchor":{"p10":-0.1,"p90":0.1},"scaling_band":{})"},
      {"link_tcp_efficiency", ""},
      {"link_tcp_latency", ""},
      {"link_pcie_efficiency", ""}};
  for (const auto& [kind, fields] : kinds) {
    const std::string named = edited_once(kLinear, "\"name\":\"lin\"", "\"name\":\"" + kind + "\"");
    EXPECT_EQ(what_of(edited_once(named, residuals, common + fields)), "") << kind;
  }
  // a kind's field in another kind's document, or in a model of its own, is refused, naming the
  // kinds that hold it
  const std::vector<Case> elsewhere = {
      {edited_once(kLinear, residuals, residuals + ",\"scaling_band\":{}"),
       "$.scaling_band is not a known field of a document named 'lin' (a field of iteration_overhead documents); "
       "known here: description, features, input_scaler, model, name, residuals, schema, target, training"},
      {edited_once(edited_once(kLinear, "\"name\":\"lin\"", "\"name\":\"compute_ratio\""), residuals,
                residuals + ",\"measured_band\":{}"),
       "$.measured_band is not a known field of a document named 'compute_ratio' (a field of compute_absolute "
       "documents); known here: absolute_blend, data_edge, description, features, input_scaler, model, name, "
       "residuals, roofline_residuals, schema, target, training"},
      {edited_once(edited_once(kLinear, "\"name\":\"lin\"", "\"name\":\"link_tcp_latency\""), residuals,
                residuals + ",\"data_edge\":{}"),
       "$.data_edge is not a known field of a document named 'link_tcp_latency' (a field of compute_ratio and "
       "compute_absolute documents)"},
      // no name to tell the kind by: the name is missing, whichever kind's fields it holds
      {edited_once(kLinear, "\"name\":\"lin\",", "\"scaling_band\":{},"), "$.name is missing"},
      {edited_once(kLinear, "\"name\":\"lin\"", "\"nmae\":\"lin\""),
       "$.nmae is not a known field (did you mean 'name'?); known here: absolute_blend, data_edge, description, "},
  };
  for (const Case& c : elsewhere) {
    const std::string what = what_of(c.doc);
    EXPECT_NE(what.find("learned model: " + c.what), std::string::npos) << what;
  }
}

TEST(LearnedModel, AScalerRefusesAnInfiniteInputAsScikitLearnsStandardScalerDoes) {
  // Note "scaler inputs": Pipeline(StandardScaler, HistGradientBoostingRegressor).predict raises
  // on an infinity (the scaler's check of X), where the trees alone take it; a NaN passes the
  // scaler (a missing value) and is routed by the trees.
  const std::string scaled_hgb = edited_once(edited_once(kTrees, "\"float32_inputs\":true", "\"float32_inputs\":false"),
                                          "\"model\"", "\"input_scaler\":{\"mean\":[0,1],\"scale\":[1,2]},\"model\"");
  const auto m = srift::LearnedModel::from_json(scaled_hgb);
  for (double bad : {HUGE_VAL, -HUGE_VAL}) {
    try {
      m.predict({0.0, bad});
      ADD_FAILURE() << bad << " accepted";
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("learned model 't': feature x1 (index 1) is " + std::string(bad > 0 ? "inf" : "-inf") +
                          ": its input_scaler"),
                std::string::npos)
          << what;
    }
  }
  EXPECT_DOUBLE_EQ(m.predict({0.0, std::nan("")}), 0.25 + 0.1 * (1 + 10));  // missing_left 1
  EXPECT_DOUBLE_EQ(m.predict({1e308, -1e308}), 0.25 + 0.1 * (2 + 10));     // finite inputs: taken
  // the same trees without a scaler take an infinity (HistGradientBoosting's own predict does)
  const auto bare = srift::LearnedModel::from_json(edited_once(kTrees, "\"float32_inputs\":true", "\"float32_inputs\":false"));
  EXPECT_DOUBLE_EQ(bare.predict({0.0, HUGE_VAL}), 0.25 + 0.1 * (1 + 20));
  // a linear model behind a scaler, and a mean model's scaled member: the scaler's refusal
  std::string what = "";
  try {
    srift::LearnedModel::from_json(kLinear).predict({HUGE_VAL, 0.0});
  } catch (const std::invalid_argument& e) {
    what = e.what();
  }
  EXPECT_NE(what.find("feature a (index 0) is inf: its input_scaler"), std::string::npos) << what;
  const std::string mean = R"({"schema":"srift.learned-model/1","name":"avg","features":["x0","x1"],
    "model":{"type":"mean","members":[
      {"input_scaler":null,"model":{"type":"tree_ensemble","base":0,"scale":1,"float32_inputs":false,"trees":[
        {"feature":[0,-1,-1],"threshold":[0.5,0,0],"left":[1,-1,-1],"right":[2,-1,-1],"value":[0,1,2]}]}},
      {"input_scaler":{"mean":[0,0],"scale":[1,1]},"model":{"type":"tree_ensemble","base":0,"scale":1,
        "float32_inputs":false,"trees":[{"feature":[1,-1,-1],"threshold":[0.5,0,0],"left":[1,-1,-1],
        "right":[2,-1,-1],"value":[0,1,2]}]}}]}})";
  what = "";
  try {
    srift::LearnedModel::from_json(mean).predict({-HUGE_VAL, 0.0});
  } catch (const std::invalid_argument& e) {
    what = e.what();
  }
  EXPECT_NE(what.find("learned model 'avg': feature x0 (index 0) is -inf: its input_scaler"), std::string::npos)
      << what;
}

// ---- the shipped documents (srift/data/models) ------------------------------------------------

namespace {
// srift's own models, by document name (learned_document.hpp document_kinds).
const char* const kShipped[] = {"compute_ratio",    "compute_absolute", "iteration_overhead",
                                "link_tcp_efficiency", "link_tcp_latency", "link_pcie_efficiency"};

std::string shipped(const std::string& name) { return srift_test::shipped_document(name); }

// `doc` with `text` inserted after `anchor`, which must occur in it exactly once (the shipped
// documents are compact JSON: an anchor ending in '{' opens the object to insert into); "": at
// the top level.
std::string inserted(const std::string& doc, const std::string& anchor, const std::string& text) {
  return srift_test::edited_once(doc, anchor, anchor.empty() ? text : anchor + text);
}
}  // namespace

TEST(ShippedDocuments, EveryShippedDocumentLoads) {
  for (const char* name : kShipped) {
    const std::string doc = shipped(name);
    EXPECT_EQ(what_of(doc), "") << name;
    EXPECT_EQ(srift::LearnedModel::from_json(doc).name(), name);
  }
}

TEST(ShippedDocuments, AnUnknownKeyAtAnyClosedLevelIsRefusedNamingItsPath) {
  // A misspelled key in a part only Python reads (compute_absolute's lab band, the overhead
  // model's scaling band, a link model's feature_range) was accepted by the core, so a C++
  // embedder loading a document took a typo the schema refuses; every object whose keys are a
  // fixed set in the schema is now closed in the core too (learned_document.hpp), read or not.
  struct Case {
    const char* doc;
    const char* anchor;  // the object to add "zz_unknown" to opens here
    const char* path;    // its JSON path
  };
  const Case cases[] = {
      {"compute_absolute", "", "$"},
      {"compute_absolute", "\"residuals\":{", "$.residuals"},
      {"compute_absolute", "\"within_lab\":{", "$.residuals.within_lab"},
      {"compute_absolute", "\"convolved\":{", "$.residuals.convolved"},
      {"compute_absolute", "\"lab_shifts\":{\"gavel\":{", "$.residuals.lab_shifts.gavel"},
      {"compute_absolute", "\"roofline_residuals\":{", "$.roofline_residuals"},
      {"compute_absolute", "\"dominance_guard\":{", "$.dominance_guard"},
      {"compute_absolute", "\"A10\":{", "$.dominance_guard.reference_specs.A10"},
      {"compute_absolute", "\"measured_band\":{", "$.measured_band"},
      {"compute_absolute", "\"noise\":{", "$.measured_band.noise"},
      {"compute_absolute", "\"per_e_fold\":{", "$.measured_band.per_e_fold"},
      {"compute_absolute", "\"data_edge\":{", "$.data_edge"},
      {"compute_absolute", "\"years\":{\"2021\":{", "$.data_edge.years.2021"},
      {"compute_absolute", "\"members\":[{", "$.model.members[0]"},
      {"compute_ratio", "\"input_scaler\":{", "$.input_scaler"},
      {"compute_ratio", "\"model\":{", "$.model"},
      {"compute_ratio", "\"absolute_blend\":{", "$.absolute_blend"},
      {"compute_ratio", "\"dominance_guard\":{", "$.absolute_blend.dominance_guard"},
      {"compute_ratio", "\"A10\":{", "$.absolute_blend.dominance_guard.reference_specs.A10"},
      {"compute_ratio", "\"years\":{\"2021\":{", "$.data_edge.years.2021"},
      {"iteration_overhead", "", "$"},
      {"iteration_overhead", "\"instance_anchor\":{", "$.instance_anchor"},
      {"iteration_overhead", "\"scaling_band\":{", "$.scaling_band"},
      {"iteration_overhead", "\"multi_instance\":{", "$.scaling_band.multi_instance"},
      {"iteration_overhead", "\"multi_instance\":{\"1\":{", "$.scaling_band.multi_instance.1"},
      {"link_tcp_efficiency", "\"feature_range\":{", "$.training.feature_range"},
      {"link_pcie_efficiency", "\"domain\":{", "$.training.domain"},
      {"link_tcp_latency", "", "$"},
  };
  for (const Case& c : cases) {
    const std::string what = what_of(inserted(shipped(c.doc), c.anchor, "\"zz_unknown\":1,"));
    EXPECT_NE(what.find(std::string("learned model: ") + c.path + ".zz_unknown is not a known field"), std::string::npos)
        << c.doc << ": " << what;
  }
  // a misspelled year, lab record field and scaling-band bucket name the nearest known key
  const std::string years = inserted(shipped("compute_ratio"), "\"years\":{", "\"2O24\":{\"p10\":0,\"p90\":0},");
  EXPECT_NE(what_of(years).find("$.data_edge.years.2O24 is not a launch year (four digits)"), std::string::npos)
      << what_of(years);
  const std::string shift =
      inserted(shipped("compute_absolute"), "\"lab_shifts\":{\"gavel\":{", "\"log_shfit\":0,");
  EXPECT_NE(what_of(shift).find("$.residuals.lab_shifts.gavel.log_shfit is not a known field (did you mean "
                                "'log_shift'?); known here: cells, factor, log_shift, rows"),
            std::string::npos)
      << what_of(shift);
  const std::string bucket = inserted(shipped("iteration_overhead"), "\"multi_instance\":{", "\"3-5\":{},");
  EXPECT_NE(what_of(bucket).find("$.scaling_band.multi_instance.3-5 is not a known field (did you mean '3-4'?); "
                                 "known here: 1, 2, 3-4, 5+"),
            std::string::npos)
      << what_of(bucket);
  // a field of another kind at the top level names the kind that holds it
  const std::string other = inserted(shipped("compute_ratio"), "", "\"scaling_band\":{},");
  EXPECT_NE(what_of(other).find("$.scaling_band is not a known field of a document named 'compute_ratio' (a field "
                                "of iteration_overhead documents)"),
            std::string::npos)
      << what_of(other);
  // the records stay open: training (but for feature_range and domain), selections, scores
  for (const char* name : kShipped) {
    EXPECT_EQ(what_of(inserted(shipped(name), "\"training\":{", "\"zz_unknown\":{\"any\":1},")), "") << name;
  }
  EXPECT_EQ(what_of(inserted(shipped("compute_absolute"), "\"lab_shifts\":{", "\"new_lab\":{\"log_shift\":0},")), "");
}

namespace {
// `doc` with the JSON value after `key` (which must occur in it exactly once, e.g.
// "\"data_edge\":") replaced by `to`: an object or array up to its closing bracket, a string,
// or a number or literal up to the next ',', '}' or ']'.
std::string value_replaced(const std::string& doc, const std::string& key, const std::string& to) {
  const std::string marked = edited_once(doc, key, key + "\x01");  // throws unless exactly once
  const std::size_t start = marked.find('\x01');
  std::size_t end = start + 1;
  if (marked[end] == '{' || marked[end] == '[') {
    int depth = 0;
    bool in_string = false;
    for (; end < marked.size(); ++end) {
      const char c = marked[end];
      if (in_string) {
        if (c == '\\') ++end;
        else if (c == '"') in_string = false;
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if ((c == '}' || c == ']') && --depth == 0) {
        ++end;
        break;
      }
    }
  } else if (marked[end] == '"') {
    end = marked.find('"', end + 1) + 1;
  } else {
    end = marked.find_first_of(",}]", end);
  }
  return marked.substr(0, start) + to + marked.substr(end);
}

// The core's error on the two compute documents (srift::learned_compute_config), "" if it takes them.
std::string config_what(const std::string& ratio, const std::string& absolute) {
  try {
    srift::learned_compute_config(ratio, absolute);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(ShippedDocuments, ANullIsRefusedWhereTheSchemaHasNoNull) {
  // The reader took a JSON null for an absent field: a null dominance_guard, data_edge,
  // absolute_blend, measured_band or roofline_residuals was no guard, edge, blend or band, and a
  // tree's null missing_left sent every NaN right; the schema allows null for input_scaler alone.
  struct Case {
    const char* doc;
    const char* key;
    const char* path;  // under the document: "$" from from_json, the role from the config
  };
  const Case cases[] = {
      {"compute_absolute", "\"dominance_guard\":", ".dominance_guard"},
      {"compute_absolute", "\"measured_band\":", ".measured_band"},
      {"compute_absolute", "\"noise\":", ".measured_band.noise"},
      {"compute_absolute", "\"data_edge\":", ".data_edge"},
      {"compute_absolute", "\"roofline_residuals\":", ".roofline_residuals"},
      {"compute_ratio", "\"absolute_blend\":", ".absolute_blend"},
      {"compute_ratio", "\"dominance_guard\":", ".absolute_blend.dominance_guard"},
      {"compute_ratio", "\"data_edge\":", ".data_edge"},
      {"compute_ratio", "\"roofline_residuals\":", ".roofline_residuals"},
      {"compute_ratio", "\"absolute_model\":", ".absolute_blend.absolute_model"},
      {"iteration_overhead", "\"instance_anchor\":", ".instance_anchor"},
      {"iteration_overhead", "\"multi_instance\":", ".scaling_band.multi_instance"},
      {"link_pcie_efficiency", "\"domain\":", ".training.domain"},
  };
  for (const Case& c : cases) {
    const std::string doc = value_replaced(shipped(c.doc), c.key, "null");
    const std::string what = what_of(doc);
    EXPECT_NE(what.find(std::string("learned model: $") + c.path + " must be "), std::string::npos) << c.key << what;
    EXPECT_NE(what.find("got null"), std::string::npos) << c.key << what;
    if (std::string(c.doc).rfind("compute_", 0) == 0) {
      const bool ratio = std::string(c.doc) == "compute_ratio";
      const std::string in_config = config_what(ratio ? doc : shipped("compute_ratio"),
                                                ratio ? shipped("compute_absolute") : doc);
      EXPECT_NE(in_config.find(std::string(c.doc) + c.path + " must be "), std::string::npos) << c.key << in_config;
    }
  }
  const std::string what = what_of(edited_once(kTrees, "\"missing_left\":[1,0,0]", "\"missing_left\":null"));
  EXPECT_NE(what.find("$.model.trees[1].missing_left must be an array of numbers, got null"), std::string::npos)
      << what;
  // an input_scaler may be null (and a mean model's must be), a document's or a member's
  EXPECT_EQ(what_of(edited_once(kLinear, "{\"mean\":[1,2],\"scale\":[2,4]}", "null")), "");
  EXPECT_EQ(what_of(shipped("compute_absolute")), "");
}

TEST(ShippedDocuments, AReferenceListedTwiceIsRefusedNamingIt) {
  // One GPU read as two references (its specs twice): refused, by the loader's schema
  // (uniqueItems) and here alike.
  for (const char* name : {"compute_absolute", "compute_ratio"}) {
    const std::string doc = edited_once(shipped(name), "\"references\":[\"A10\",", "\"references\":[\"A10\",\"A10\",");
    const std::string where = std::string(name) == "compute_absolute" ? "" : ".absolute_blend";
    const std::string said = where + ".dominance_guard.references[1] is 'A10', already references[0]: each "
                                     "reference GPU is listed once";
    EXPECT_NE(what_of(doc).find("learned model: $" + said), std::string::npos) << what_of(doc);
    const bool ratio = std::string(name) == "compute_ratio";
    const std::string in_config =
        config_what(ratio ? doc : shipped("compute_ratio"), ratio ? shipped("compute_absolute") : doc);
    EXPECT_NE(in_config.find(name + said), std::string::npos) << in_config;
  }
}

namespace {
// A shipped document with one value replaced (`key` followed by `to`), and what its reading must say.
struct ReplacedValue {
  const char* doc;
  const char* key;
  const char* to;
  const char* what;
};

void expect_refused(const ReplacedValue& c, const std::string& what_suffix = "") {
  const std::string what = what_of(value_replaced(shipped(c.doc), c.key, c.to));
  EXPECT_NE(what.find(std::string("learned model: ") + c.what + what_suffix), std::string::npos)
      << c.doc << " " << c.to << ": " << what;
}
}  // namespace

TEST(ShippedDocuments, TheValuesOfPartsTheCoreDoesNotReadAreCheckedAsTheSchemaHasThem) {
  // The core checked the keys of every part but the values only of what it reads: a negative
  // count, a string for a number, a year out of range, an inverted instance_anchor, a NaN in a
  // record passed here and failed the schema (and the Python loader).
  const ReplacedValue cases[] = {
      {"compute_absolute", "\"lab_shifts\":", R"({"new":{"log_shift":0,"rows":-1}})",
       "$.residuals.lab_shifts.new.rows must be an integer >= 0, got -1"},
      {"compute_absolute", "\"lab_shifts\":", R"({"new":{"factor":1}})", "$.residuals.lab_shifts.new.log_shift is missing"},
      {"compute_absolute", "\"lab_shifts\":", R"({"new":{"log_shift":0,"cells":[1]}})",
       "$.residuals.lab_shifts.new.cells[0] must be a string, got 1"},
      {"compute_absolute", "\"within_lab\":", R"({"p10":0.2,"p90":0.1})",
       "$.residuals.within_lab must have p10 <= p90, got p10 0.2 and p90 0.1"},
      {"compute_absolute", "\"within_lab\":", R"({"p10":0,"p90":0.1,"n":2.5})",
       "$.residuals.within_lab.n must be an integer, got 2.5"},
      {"compute_absolute", "\"noise\":", R"({"p10":0.9,"p90":1.1,"n":-3})",
       "$.measured_band.noise.n must be an integer >= 0, got -3"},
      {"compute_absolute", "\"A10\":", R"({"fp32_flops":0,"tf32_flops":0,"fp16_flops":0,"memory_bandwidth":1,"memory_bytes":1})",
       "$.dominance_guard.reference_specs.A10.fp32_flops must be > 0, got 0"},
      {"compute_ratio", "\"launch_year\":", "1980", "$.data_edge.launch_year must be an integer in 1990-2100, got 1980"},
      {"compute_ratio", "\"years\":", R"({"2021":{"p10":0}})", "$.data_edge.years.2021.p90 is missing"},
      {"compute_ratio", "\"absolute_model\":", "\"compute_ratio\"",
       "$.absolute_blend.absolute_model must be 'compute_absolute', got 'compute_ratio'"},
      {"compute_ratio", "\"candidates\":", "[1]", "$.absolute_blend.dominance_guard.candidates[0] must be an object, got 1"},
      {"iteration_overhead", "\"instance_anchor\":", R"({"p10":0.2,"p90":0.1})",
       "$.instance_anchor must have p10 <= p90, got p10 0.2 and p90 0.1"},
      {"iteration_overhead", "\"multi_instance\":", R"({"1":{"p10":"x","p90":0}})",
       "$.scaling_band.multi_instance.1.p10 must be a number, got 'x'"},
      {"link_pcie_efficiency", "\"domain\":", R"({"factor":"2"})", "$.training.domain.factor must be a number, got '2'"},
      {"link_tcp_efficiency", "\"training\":", R"({"x":[1,NaN]})", "$.training.x[1] must be finite, got nan"},
  };
  for (const ReplacedValue& c : cases) expect_refused(c);
  // a guard's scores are a record (an object); a null is no object
  for (const char* scores : {"[]", "null"}) {
    const std::string what =
        what_of(inserted(shipped("compute_absolute"), "\"dominance_guard\":{", std::string("\"scores\":") + scores + ","));
    EXPECT_NE(what.find(std::string("$.dominance_guard.scores must be an object, got ") +
                        (scores[0] == '[' ? "an empty array" : "null")),
              std::string::npos)
        << what;
  }
  // and the top level's description and target are strings
  EXPECT_NE(what_of(edited_once(kLinear, "", "\"description\":3,")).find("$.description must be a string, got 3"),
            std::string::npos);
  EXPECT_NE(what_of(edited_once(kLinear, "", "\"target\":null,")).find("$.target must be a string, got null"),
            std::string::npos);
  // the blend's weight, refused by the compute configuration before, now by the reader as well
  EXPECT_NE(what_of(value_replaced(shipped("compute_ratio"), "\"absolute_model\":", "\"compute_absolute\",\"weight\":1.5"))
                .find("duplicate key 'weight'"),
            std::string::npos);
}

TEST(ShippedDocuments, EveryResidualPairIsALogFactorAsThePythonLoaderHasIt) {
  // Note "log factor" (validate.hpp): the Python loader refused a quantile past 709.78 from 0 in
  // every pair it orders (within_lab, convolved, instance_anchor), the core took them: a C++
  // embedder loaded $.instance_anchor.p90 = 1e14, whose factor exp(1e14) is inf. Nor did either
  // reader check the scaling band's cells (band_factors: a bare OverflowError in any multi-GPU
  // predict) or the data edge's quantiles by their path.
  const std::string rule = " must be a log factor whose exp() is a finite number > 0 (at most 709.78 either side of 0), got ";
  const ReplacedValue cases[] = {
      {"compute_absolute", "\"within_lab\":", R"({"p10":-1000,"p90":0.1})", "$.residuals.within_lab.p10"},
      {"compute_absolute", "\"convolved\":", R"({"p10":0,"p90":1e14})", "$.residuals.convolved.p90"},
      {"iteration_overhead", "\"instance_anchor\":", R"({"p10":0,"p90":1e14})", "$.instance_anchor.p90"},
      {"iteration_overhead", "\"multi_instance\":", R"({"1":{"p10":0,"p90":800}})", "$.scaling_band.multi_instance.1.p90"},
      {"iteration_overhead", "\"single_instance\":", R"({"2":{"p10":-1e14,"p90":0}})",
       "$.scaling_band.single_instance.2.p10"},
      {"compute_ratio", "\"data_edge\":", R"({"launch_year":2024,"p10":-0.1,"p50":0,"p90":1e14})", "$.data_edge.p90"},
      {"compute_absolute", "\"data_edge\":", R"({"launch_year":2024,"p10":-0.1,"p50":-710,"p90":0.1})",
       "$.data_edge.p50"},
  };
  for (const ReplacedValue& c : cases) expect_refused(c, rule);
  // a scaling band cell is a pair in order, as validate_scaling_band has it
  EXPECT_NE(what_of(value_replaced(shipped("iteration_overhead"), "\"multi_instance\":", R"({"1":{"p10":0.2,"p90":0.1}})"))
                .find("learned model: $.scaling_band.multi_instance.1 must have p10 <= p90, got p10 0.2 and p90 0.1"),
            std::string::npos);
  // the largest either side that exp() turns into a finite factor > 0 still loads
  EXPECT_EQ(what_of(value_replaced(shipped("compute_absolute"), "\"within_lab\":", R"({"p10":-709,"p90":709})")), "");
  EXPECT_EQ(what_of(value_replaced(shipped("iteration_overhead"), "\"multi_instance\":", R"({"1":{"p10":-709,"p90":709}})")),
            "");
}
