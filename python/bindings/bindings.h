// SPDX-License-Identifier: Apache-2.0
//
// Registration functions of the extension module feedline._feedline_ext, and
// the Python handles of native ops and sources.
//
// Each binding area has one bind_<area>() in bind_<area>.cc; module.cc calls
// them in dependency order (a class must be bound before a function that
// returns it) and adds the exception classes and the extension capsule.

#pragma once

#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>

#include <nanobind/nanobind.h>

#include "feedline/base/buffer.h"
#include "feedline/pipeline/op.h"
#include "feedline/pipeline/pipeline.h"
#include "feedline/pipeline/spec.h"
#include "py_ref.h"

namespace feedline::media {
class Packets;
}  // namespace feedline::media

namespace feedline::bindings {

// The Python handle of a native op (feedline.io.ops.decode_image, an
// extension's op): the engine op plus what it takes and gives. The Python
// PipelineBuilder recognises it and installs the op directly, so the op runs
// without the GIL and passes native items on unconverted.
struct NativeOp {
  OpPtr op;  // declares the types it takes and gives (Op::input_type())
  std::string name;
  const std::type_info* element = nullptr;  // a batch op's, from Python
};

struct NativeSource {
  SourceFactory factory;
  std::string name;
  const std::type_info* output = nullptr;  // null: unknown
};

// The path of a str or os.PathLike object; nullopt for any other object.
// Throws: InvalidArgument for a bytes path; nanobind::python_error if
// __fspath__ fails.
std::optional<std::string> path_from(nanobind::handle obj);

// A bytes-like Python object as a 1-D uint8 Buffer, read in place where it
// can be (see bind_io.cc). Requires the GIL.
Buffer bytes_from_python(nanobind::handle obj);

// f(data, args...) as a Python function: `data` is any bytes-like object,
// read in place and given to f as a Buffer or a span; f runs with the GIL
// released.
template <typename... Args, typename F>
auto on_bytes(F f) {
  return [f](nanobind::handle data, Args... args) {
    Buffer bytes = bytes_from_python(data);
    // Copies: an options object held by Python could be changed by another
    // thread while f reads it.
    std::tuple<std::decay_t<Args>...> held(args...);
    ReleaseGil release;
    return std::apply(
        [&](const auto&... a) {
          if constexpr (std::is_invocable_v<F, const Buffer&, Args...>) {
            return f(bytes, a...);
          } else {
            return f(bytes.bytes(), a...);
          }
        },
        held);
  };
}

// Packets and Frames are shared with Python: while a call works on one with
// the GIL released, another thread may read it, consume it or extend it.
// So such a call works on a private copy made under the GIL (it shares
// every payload, viewed ones too: nothing is copied; see private_copy), and a
// call that consumed the clone consumes the original under the GIL when it
// returns or throws. Of two calls that consume one object concurrently, the one
// that finishes second raises ObjectConsumed and its result is dropped: the
// object is consumed once. T: media::Packets or media::Frames.

// The private copy: Packets.share() (clone() would copy viewed payloads),
// Frames.clone().
template <typename T>
std::unique_ptr<T> private_copy(const T& obj) {
  if constexpr (std::is_base_of_v<media::Packets, T>) {
    return obj.share();
  } else {
    return obj.clone();
  }
}

// f(copy) with the GIL released; f only reads.
template <typename T, typename F>
auto reading_detached(const T& obj, F&& f) {
  std::unique_ptr<T> copy = private_copy(obj);
  ReleaseGil release;
  return f(static_cast<const T&>(*copy));
}

// f(std::move(copy)) with the GIL released; f may consume the copy.
template <typename T, typename F>
auto consuming_detached(T& obj, F&& f) {
  std::unique_ptr<T> copy = private_copy(obj);
  auto run = [&] {
    ReleaseGil release;
    return f(std::move(*copy));
  };
  try {
    if constexpr (std::is_void_v<decltype(run())>) {
      run();
      if (copy->consumed()) obj.take();
    } else {
      auto result = run();
      if (copy->consumed()) obj.take();
      return result;
    }
  } catch (...) {
    if (copy->consumed() && !obj.consumed()) obj.take();
    throw;
  }
}

// Adds the statistics snapshot classes (PipelineStats, StageStats, ...).
void bind_stats(nanobind::module_& m);

// Adds the consumer's end of a pipeline (_NativePipeline), FailureBudget and
// the log hooks.
void bind_pipeline(nanobind::module_& m);

// Returns `pipeline` as a Python _NativePipeline.
nanobind::object wrap_pipeline(Pipeline pipeline);

// Adds NativeOp, NativeSource and _PipelineSpec, which builds pipelines from
// feedline.pipeline's stages.
void bind_spec(nanobind::module_& m);

// Adds the submodule `io`: Buffer, image, array and archive functions and
// their native ops; bind_av() adds the FFmpeg objects to it.
void bind_io(nanobind::module_& m);
// Adds the archives to feedline.io: tar and ZIP listing and reading, tar
// streams and the shard rewriters.
void bind_archive(nanobind::module_& io);
void bind_av(nanobind::module_& io);
// Adds feedline.io's encoding: Muxer, Encoder, encode configs, frames from
// arrays, encode_image.
void bind_encode(nanobind::module_& io);

// Adds the shared-memory arena (_SharedArena, _ArenaUnit, _ArenaLease).
void bind_arena(nanobind::module_& m);

}  // namespace feedline::bindings
