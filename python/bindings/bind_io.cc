// SPDX-License-Identifier: Apache-2.0
//
// feedline.io in the extension: Buffer (with the NumPy array interface and
// DLPack), image decoding, and the native image ops.
//
// Every decode runs with the GIL released. Bytes-like inputs are read in
// place (a bytes object is kept alive by the Buffer that views it); other
// buffer-protocol objects are copied once.

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "convert.h"
#include "feedline/base/buffer.h"
#include "feedline/base/error.h"
#include "feedline/base/log.h"
#include "feedline/io/file.h"
#include "feedline/io/formats.h"
#include "feedline/media/audio.h"
#include "feedline/media/image.h"
#include "feedline/ops/av_ops.h"
#include "feedline/ops/io_ops.h"
#include "feedline/pipeline/op.h"
#include "py_ref.h"

namespace nb = nanobind;

namespace feedline::bindings {

using media::AudioInfo;
using media::AudioOptions;
using media::check_image_options;
using media::decode_image;
using media::decode_image_batch;
using media::EncodedImage;
using media::ImageFailure;
using media::ImageOptions;
using media::Layout;
using media::load_audio;
using media::PixelFormat;
using media::ResizeMode;

// Bytes-like Python objects as a 1-D uint8 Buffer, read in place: a bytes
// object is kept alive by the Buffer; any other buffer (bytearray,
// memoryview, NumPy array) through a memoryview that holds its export (so a
// bytearray cannot be resized while viewed; writable if it is), copied first
// (read-only) if it is not C-contiguous. Requires: the GIL.
Buffer bytes_from_python(nb::handle obj) {
  if (nb::isinstance<Buffer>(obj)) return nb::cast<Buffer>(obj);
  PyObject* owner = nullptr;
  void* data = nullptr;
  Py_ssize_t size = 0;
  bool writable = false;
  if (PyBytes_Check(obj.ptr())) {
    owner = nb::handle(obj).inc_ref().ptr();
    data = PyBytes_AS_STRING(owner);
    size = PyBytes_GET_SIZE(owner);
  } else if (PyObject_CheckBuffer(obj.ptr()) &&
             (owner = PyMemoryView_GetContiguous(obj.ptr(), PyBUF_READ, 'C')) !=
                 nullptr) {
    Py_buffer* view = PyMemoryView_GET_BUFFER(owner);
    data = view->buf;
    size = view->len;
    writable = view->readonly == 0;
  } else {
    PyErr_Clear();
    throw InvalidArgument("expected a bytes-like object");
  }
  return Buffer::view(std::make_shared<PyObj>(PyObj::steal(owner)), data,
                      DType::kUint8, {static_cast<int64_t>(size)}, {},
                      writable);
}

std::optional<std::string> path_from(nb::handle obj) {
  if (!PyUnicode_Check(obj.ptr()) &&
      !PyObject_HasAttrString(obj.ptr(), "__fspath__"))
    return std::nullopt;
  nb::object fs = nb::steal(PyOS_FSPath(obj.ptr()));
  if (!fs.is_valid()) throw nb::python_error();
  if (!PyUnicode_Check(fs.ptr()))
    throw InvalidArgument("expected a str path, got bytes");
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(fs.ptr(), &size);
  if (data == nullptr) throw nb::python_error();
  return std::string(data, static_cast<std::size_t>(size));
}

namespace {

// --- Buffer in Python --------------------------------------------------------

nb::tuple to_tuple(const std::vector<int64_t>& v) {
  return nb::tuple(nb::cast(v));
}

nb::dict array_interface(const Buffer& b) {
  nb::dict d;
  d["version"] = 3;
  d["shape"] = to_tuple(b.shape());
  d["typestr"] = numpy_typestr(b.dtype());
  d["data"] =
      nb::make_tuple(reinterpret_cast<uintptr_t>(b.data()), !b.writable());
  d["strides"] = b.contiguous() ? nb::object(nb::none())
                                : nb::object(to_tuple(b.strides()));
  return d;
}

// A C-contiguous copy of `b`, whatever its strides.
Buffer copy_of(const Buffer& b) {
  Buffer out = Buffer::allocate(b.dtype(), b.shape());
  if (b.nbytes() == 0) return out;
  if (b.contiguous()) {
    std::memcpy(out.data(), b.data(), b.nbytes());
    return out;
  }
  const std::size_t item = dtype_size(b.dtype());
  const auto* src = b.data_as<const uint8_t>();
  auto* dst = out.data_as<uint8_t>();
  std::vector<int64_t> index(b.shape().size(), 0);
  for (int64_t k = 0; k < b.numel(); ++k) {
    int64_t at = 0;
    for (std::size_t i = 0; i < index.size(); ++i)
      at += index[i] * b.strides()[i];
    std::memcpy(dst + static_cast<std::size_t>(k) * item, src + at, item);
    for (std::size_t i = index.size(); i-- > 0;) {
      if (++index[i] < b.shape()[i]) break;
      index[i] = 0;
    }
  }
  return out;
}

// A DLPack capsule ("dltensor") viewing the Buffer and keeping it alive.
// DLPack's capsule (the one torch takes) cannot say read-only: a read-only
// Buffer (a view of bytes, of a read-only file mapping) goes as a copy,
// which the consumer may write without changing (or faulting on) the
// memory it came from.
nb::object dlpack_capsule(const Buffer& b) {
  auto* keep = new Buffer(b.writable() ? b : copy_of(b));
  nb::capsule owner(keep,
                    [](void* p) noexcept { delete static_cast<Buffer*>(p); });
  const Buffer& e = *keep;
  std::vector<size_t> shape(e.shape().begin(), e.shape().end());
  std::vector<int64_t> strides;
  for (int64_t s : e.strides())
    strides.push_back(s / static_cast<int64_t>(dtype_size(e.dtype())));
  nb::ndarray<> arr(
      e.data(), shape.size(), shape.data(), owner, strides.data(),
      nb::dlpack::dtype{dlpack_type_code(e.dtype()),
                        static_cast<uint8_t>(dtype_size(e.dtype()) * 8), 1},
      nb::device::cpu::value);
  return nb::cast(arr, nb::rv_policy::reference);
}

nb::object encoded_to_python(Item& item) {
  const ops::EncodedFile& f = item.as<ops::EncodedFile>();
  return nb::bytes(f.bytes.data_as<const char>(), f.bytes.nbytes());
}

Item encoded_from_python(nb::handle obj) {
  if (PyUnicode_Check(obj.ptr()) ||
      PyObject_HasAttrString(obj.ptr(), "__fspath__")) {  // a path
    throw InvalidArgument(
        "expected encoded bytes; read paths with feedline.io.ops.read_file() "
        "first");
  }
  return Item(ops::EncodedFile::unnamed(bytes_from_python(obj)));
}

// --- Python functions ------------------------------------------------------

// Decodes every source (a path or bytes) into one batch: the batch (of the
// images that decoded) and why each of the others failed.
std::pair<Buffer, std::vector<ImageFailure>> py_load_image_batch(
    nb::list srcs, const ImageOptions& options,
    const std::vector<uint64_t>& indices) {
  std::vector<ops::ImageSource> sources;
  for (nb::handle s : srcs) {
    if (auto path = path_from(s)) {
      sources.emplace_back(std::move(*path));
    } else {
      sources.emplace_back(
          ops::EncodedFile{"<source " + std::to_string(sources.size()) + ">",
                           bytes_from_python(s)});
    }
  }
  std::pair<Buffer, std::vector<ImageFailure>> out;
  const ImageOptions held = options;  // Python may change `options` meanwhile
  ReleaseGil release;
  out.first =
      ops::load_image_batch(std::move(sources), held, &out.second, indices);
  return out;
}

}  // namespace

void bind_io(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("io", "Native core of feedline.io.");

  register_type(typeid(Buffer), "feedline.io.Buffer", &cast_to_python<Buffer>);
  register_type(typeid(ops::EncodedFile), "encoded file", &encoded_to_python,
                &encoded_from_python);

  nb::class_<Buffer>(
      m, "Buffer",
      "An N-d array owned by feedline. Zero-copy to NumPy (numpy.asarray, the\n"
      "array interface) and to DLPack consumers (torch.from_dlpack); the "
      "memory\n"
      "stays alive as long as any view of it.")
      .def_prop_ro("shape", [](const Buffer& b) { return to_tuple(b.shape()); })
      .def_prop_ro(
          "dtype",
          [](const Buffer& b) { return std::string(dtype_name(b.dtype())); })
      .def_prop_ro("ndim", &Buffer::ndim)
      .def_prop_ro("nbytes", &Buffer::nbytes)
      .def_prop_ro(
          "writable", &Buffer::writable,
          "False for views of read-only memory (bytes, file mappings).")
      .def_prop_ro("__array_interface__", &array_interface)
      .def(
          "__dlpack__",
          [](const Buffer& b, nb::args, nb::kwargs) {
            return dlpack_capsule(b);
          },
          "A DLPack capsule of the buffer (CPU; stream and version requests "
          "are accepted and ignored).")
      .def("__dlpack_device__",
           [](const Buffer&) { return nb::make_tuple(1, 0); })
      .def("__len__",
           [](const Buffer& b) { return b.ndim() > 0 ? b.shape()[0] : 0; })
      .def("__repr__",
           [](const Buffer& b) { return "Buffer(" + b.to_string() + ")"; });

  nb::enum_<PixelFormat>(m, "PixelFormat")
      .value("RGB", PixelFormat::kRgb)
      .value("BGR", PixelFormat::kBgr)
      .value("GRAY", PixelFormat::kGray);
  nb::enum_<Layout>(m, "Layout")
      .value("HWC", Layout::kHWC)
      .value("CHW", Layout::kCHW);
  nb::enum_<ResizeMode>(m, "ResizeMode")
      .value("STRETCH", ResizeMode::kStretch)
      .value("PAD", ResizeMode::kPad)
      .value("CROP", ResizeMode::kCrop);

  nb::class_<ImageOptions>(m, "ImageOptions")
      .def(nb::init<>())
      .def_rw("resize_width", &ImageOptions::resize_width)
      .def_rw("resize_height", &ImageOptions::resize_height)
      .def_rw("resize_mode", &ImageOptions::resize_mode)
      .def_rw("resize_shorter", &ImageOptions::resize_shorter)
      .def_rw("crop_width", &ImageOptions::crop_width)
      .def_rw("crop_height", &ImageOptions::crop_height)
      .def_rw("pixel_format", &ImageOptions::pixel_format)
      .def_rw("layout", &ImageOptions::layout)
      .def_prop_rw(
          "float32",
          [](const ImageOptions& o) { return o.dtype == DType::kFloat32; },
          [](ImageOptions& o, bool f) {
            o.dtype = f ? DType::kFloat32 : DType::kUint8;
          })
      .def_rw("mean", &ImageOptions::mean)
      .def_rw("std", &ImageOptions::std)
      .def_rw("dct_scaling", &ImageOptions::dct_scaling)
      .def_rw("partial_decode", &ImageOptions::partial_decode)
      .def_rw("max_pixels", &ImageOptions::max_pixels)
      .def_prop_rw(
          "random_resized_crop",
          [](const ImageOptions& o) {
            return std::array<int, 2>{o.random_resized_crop.width,
                                      o.random_resized_crop.height};
          },
          [](ImageOptions& o, std::array<int, 2> size) {
            o.random_resized_crop.width = size[0];
            o.random_resized_crop.height = size[1];
          },
          "Output (width, height) of the random resized crop; (0, 0): off.")
      .def_prop_rw(
          "crop_scale",
          [](const ImageOptions& o) { return o.random_resized_crop.scale; },
          [](ImageOptions& o, std::array<double, 2> v) {
            o.random_resized_crop.scale = v;
          })
      .def_prop_rw(
          "crop_ratio",
          [](const ImageOptions& o) { return o.random_resized_crop.ratio; },
          [](ImageOptions& o, std::array<double, 2> v) {
            o.random_resized_crop.ratio = v;
          })
      .def_rw("flip_probability", &ImageOptions::flip_probability)
      .def_prop_rw(
          "seed",
          [](const ImageOptions& o) {
            return o.seed.seeded ? std::optional<uint64_t>(o.seed.seed)
                                 : std::nullopt;
          },
          [](ImageOptions& o, std::optional<uint64_t> seed) {
            o.seed.seeded = seed.has_value();
            o.seed.seed = seed.value_or(0);
          })
      .def_prop_rw(
          "epoch", [](const ImageOptions& o) { return o.seed.epoch; },
          [](ImageOptions& o, uint64_t epoch) { o.seed.epoch = epoch; })
      .def("check", &check_image_options);

  m.def("decode_image",
        on_bytes<const ImageOptions&, const std::string&,
                 std::optional<uint64_t>>(&decode_image),
        nb::arg("data"), nb::arg("options"), nb::arg("name"),
        nb::arg("index").none() = nb::none());
  m.def(
      "prepare_jpeg",
      [](nb::handle data, const std::string& name, int64_t max_pixels) {
        std::vector<uint8_t> out;
        {
          Buffer bytes = bytes_from_python(data);
          ReleaseGil release;
          out = media::prepare_jpeg(bytes.bytes(), name, max_pixels);
        }
        return nb::bytes(out.data(), out.size());
      },
      nb::arg("data"), nb::arg("name"), nb::arg("max_pixels"));
  m.def(
      "transform_image",
      [](nb::handle data, const std::vector<int64_t>& shape,
         const ImageOptions& options, const std::string& name,
         std::optional<uint64_t> index) {
        Buffer bytes = bytes_from_python(data);
        Buffer pixels;
        try {
          pixels = bytes.view_as(DType::kUint8, shape);
        } catch (const InvalidArgument&) {
          throw InvalidArgument(name + ": pixels do not match their shape");
        }
        const ImageOptions held = options;
        ReleaseGil release;
        return media::transform_image(pixels, held, name, index);
      },
      nb::arg("data"), nb::arg("shape"), nb::arg("options"), nb::arg("name"),
      nb::arg("index").none());
  m.def(
      "random_resized_crop_box",
      [](int width, int height, std::array<double, 2> scale,
         std::array<double, 2> ratio, std::optional<std::vector<double>> draws,
         std::optional<uint64_t> seed, uint64_t epoch, uint64_t index) {
        if (width <= 0 || height <= 0) {
          throw InvalidArgument("image size must be positive, got " +
                                std::to_string(width) + " x " +
                                std::to_string(height));
        }
        media::RandomResizedCrop rrc;
        rrc.width = rrc.height = 1;
        rrc.scale = scale;
        rrc.ratio = ratio;
        ImageOptions check;
        check.random_resized_crop = rrc;
        check_image_options(check);
        media::CropBox box;
        if (draws) {
          std::size_t next = 0;
          box = media::sample_resized_crop(width, height, rrc, [&] {
            if (next == draws->size())
              throw InvalidArgument("random_resized_crop_box: out of draws");
            return (*draws)[next++];
          });
        } else {
          media::AugmentSeed s{seed.has_value(), seed.value_or(0), epoch};
          media::UniformDraws u(s, index, 0);
          box = media::sample_resized_crop(width, height, rrc,
                                           [&u] { return u.next(); });
        }
        return std::array<int, 4>{box.top, box.left, box.height, box.width};
      },
      nb::arg("width"), nb::arg("height"), nb::arg("scale"), nb::arg("ratio"),
      nb::arg("draws").none(), nb::arg("seed").none(), nb::arg("epoch"),
      nb::arg("index"));
  nb::class_<ImageFailure>(m, "ImageFailure",
                           "Why one image of a batch was left out.")
      .def_ro("index", &ImageFailure::index, "The source's position.")
      .def_ro("message", &ImageFailure::message);
  m.def("load_image_batch", &py_load_image_batch, nb::arg("srcs"),
        nb::arg("options"), nb::arg("indices") = std::vector<uint64_t>{});
  // Arrays, audio and archives: bytes-like data (read in place), the GIL
  // released; member names are the archive's bytes (Python decodes them).
  m.def("load_npy", on_bytes<const std::string&>(&load_npy), nb::arg("data"),
        nb::arg("name"));
  bind_archive(m);
  m.def("load_wav",
        on_bytes<const std::string&, uint64_t, std::optional<uint64_t>>(
            &load_wav),
        nb::arg("data"), nb::arg("name"), nb::arg("start_frame"),
        nb::arg("num_frames").none());
  nb::class_<WavInfo>(m, "WavInfo", "A WAV file's format and data chunk.")
      .def_ro("audio_format", &WavInfo::format)
      .def_ro("num_channels", &WavInfo::channels)
      .def_ro("sample_rate", &WavInfo::sample_rate)
      .def_ro("bits_per_sample", &WavInfo::bits_per_sample)
      .def_ro("block_align", &WavInfo::block_align)
      .def_prop_ro("num_frames", &WavInfo::num_frames)
      .def_ro("data_offset", &WavInfo::data_offset);
  m.def("parse_wav", on_bytes<const std::string&>(&parse_wav), nb::arg("data"),
        nb::arg("name"));
  m.def("read_file", &read_file, nb::arg("path"), nb::call_guard<ReleaseGil>());
  m.def("map_file", &map_file, nb::arg("path"), nb::call_guard<ReleaseGil>(),
        "The file memory-mapped read-only (no copy).");
  m.def("load_audio",
        on_bytes<const std::string&, int, int, double, std::optional<double>>(
            [](std::span<const uint8_t> b, const std::string& n, int rate,
               int channels, double start, std::optional<double> duration) {
              return load_audio(b, {rate, channels, start, duration}, n);
            }),
        nb::arg("data"), nb::arg("name"), nb::arg("sample_rate"),
        nb::arg("channels"), nb::arg("start"), nb::arg("duration").none());
  m.def("set_buffer_cache_limit", &set_buffer_cache_limit, nb::arg("bytes"));
  m.def("buffer_cache_size", &buffer_cache_size);
  m.def("library_versions", &media::library_versions);
  m.def("set_ffmpeg_log_level", &media::set_ffmpeg_log_level, nb::arg("level"));
  m.def(
      "load_audio_op",
      [](int sample_rate, int channels) {
        return NativeOp{ops::load_audio({sample_rate, channels, 0, {}}),
                        "load_audio"};
      },
      nb::arg("sample_rate"), nb::arg("channels"));
  bind_av(m);
  bind_encode(m);
  m.def("load_npy_op", [] { return NativeOp{ops::load_npy(), "load_npy"}; });
  m.def("load_wav_op", [] { return NativeOp{ops::load_wav(), "load_wav"}; });
  m.def("zip_members_op", [] {
    return NativeOp{ops::zip_members(), "zip_members"};
  });
  m.def("tar_members_op", [] {
    return NativeOp{ops::tar_members(), "tar_members"};
  });
  m.def("read_tar_members_op", [] {
    return NativeOp{ops::read_tar_members(), "read_tar_members"};
  });
  m.def("read_zip_members_op", [] {
    return NativeOp{ops::read_zip_members(), "read_zip_members"};
  });
  m.def("read_file_op", [] { return NativeOp{ops::read_file(), "read_file"}; });
  m.def("decode_image_op", [](const ImageOptions& options) {
    return NativeOp{ops::decode_image(options), "decode_image"};
  });
  m.def("decode_batch_op", [](const ImageOptions& options) {
    return NativeOp{ops::decode_batch(options), "decode_batch",
                    &typeid(ops::EncodedFile)};  // from Python values
  });
  m.def("stack_op", [] { return NativeOp{ops::stack(), "stack"}; });
  m.def("on_field", [](const NativeOp& op, ops::Field field) {
    return NativeOp{ops::on_field(op.op, std::move(field)), op.name,
                    op.element};
  });
}

}  // namespace feedline::bindings
