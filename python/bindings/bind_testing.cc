// SPDX-License-Identifier: Apache-2.0
//
// feedline._feedline_ext.testing: small native ops and sources for the tests
// and benchmarks of the Python pipeline API (the seam between native and
// Python stages). Not a public API.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "bindings.h"
#include "convert.h"
#include "feedline/base/error.h"
#include "native_op.h"
#include "py_ref.h"

namespace nb = nanobind;

namespace feedline::bindings {
namespace {

template <typename F>
class LambdaMapOp final : public MapOp {
 public:
  explicit LambdaMapOp(F f) : f_(std::move(f)) {}
  Item call(Item input) override { return f_(std::move(input)); }

 private:
  F f_;
};

template <typename F>
NativeOp map_op(std::string name, const std::type_info* input,
                const std::type_info* output, F f) {
  return NativeOp{std::make_shared<LambdaMapOp<F>>(std::move(f)),
                  std::move(name), input, output};
}

class RepeatGenerator final : public ItemGenerator {
 public:
  RepeatGenerator(int64_t value, int64_t times) : value_(value), left_(times) {}
  bool next(Item* out) override {
    if (left_ == 0) return false;
    --left_;
    *out = Item(value_);
    return true;
  }

 private:
  int64_t value_;
  int64_t left_;
};

class RepeatOp final : public GeneratorOp {
 public:
  explicit RepeatOp(int64_t times) : times_(times) {}
  std::unique_ptr<ItemGenerator> start(Item input) override {
    return std::make_unique<RepeatGenerator>(input.as<int64_t>(), times_);
  }

 private:
  int64_t times_;
};

class RangeSource final : public ItemSource {
 public:
  explicit RangeSource(int64_t n) : n_(n) {}
  bool next(Item* out) override {
    if (i_ == n_) return false;
    *out = Item(i_++);
    return true;
  }

 private:
  int64_t n_;
  int64_t i_ = 0;
};

}  // namespace

void bind_testing(nb::module_& parent) {
  nb::module_ m = parent.def_submodule(
      "testing", "Native ops for tests (not a public API).");
  const std::type_info* kInt = &typeid(int64_t);

  m.def(
      "identity",
      [] {
        return map_op("identity", nullptr, nullptr, [](Item x) { return x; });
      },
      "Passes any item on unchanged, without looking at it.");
  m.def(
      "add",
      [kInt](int64_t n) {
        return map_op("add", kInt, kInt,
                      [n](Item x) { return Item(x.as<int64_t>() + n); });
      },
      nb::arg("n"), "int -> int + n.");
  m.def(
      "fail_on_multiple",
      [kInt](int64_t k) {
        return map_op("fail_on_multiple", kInt, kInt, [k](Item x) {
          int64_t v = x.as<int64_t>();
          if (v % k == 0)
            throw DecodeError("value " + std::to_string(v) +
                              " is a multiple of " + std::to_string(k));
          return x;
        });
      },
      nb::arg("k"),
      "Passes ints on; raises feedline.DecodeError on multiples of k.");
  m.def(
      "to_str",
      [kInt] {
        return map_op("to_str", kInt, &typeid(std::string), [](Item x) {
          return Item(std::to_string(x.as<int64_t>()));
        });
      },
      "int -> str.");
  m.def(
      "str_len",
      [kInt] {
        return map_op("str_len", &typeid(std::string), kInt, [](Item x) {
          return Item(static_cast<int64_t>(x.as<std::string>().size()));
        });
      },
      "str (or os.PathLike) -> its length in bytes.");
  m.def(
      "gil_probe",
      [](bool take_gil) {
        return map_op("gil_probe", nullptr, &typeid(bool), [take_gil](Item) {
          if (!take_gil) return Item(holds_gil());
          GilScope gil;  // the control: the probe must see a GIL it holds
          return Item(holds_gil());
        });
      },
      nb::arg("take_gil") = false,
      "Replaces each item by whether the calling thread held the GIL; with "
      "take_gil, after taking it.");
  m.def(
      "repeat",
      [kInt](int64_t times) {
        return NativeOp{std::make_shared<RepeatOp>(times), "repeat", kInt,
                        kInt};
      },
      nb::arg("times"), "Generator: each int `times` times.");
  m.def(
      "range_source",
      [](int64_t n) {
        return NativeSource{[n] { return std::make_unique<RangeSource>(n); },
                            "range", &typeid(int64_t)};
      },
      nb::arg("n"), "A native source of the ints 0 .. n-1.");
  m.def(
      "conversion_counts",
      [] {
        ConversionCounts& c = conversion_counts();
        return nb::make_tuple(c.to_python.load(), c.from_python.load());
      },
      "(native -> Python, Python -> native) conversions so far.");
}

}  // namespace feedline::bindings
