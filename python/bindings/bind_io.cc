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
nb::bytes raw(const std::string& s) { return nb::bytes(s.data(), s.size()); }

// --- Tar streams from Python file objects ----------------------------------

// Up to n bytes of the file object `file` into dst: readinto() when it has
// one (no copy), else read(n). Returns what the object gave, which may be
// more than n (TarStream refuses that; only n are copied).
std::size_t read_from(nb::handle file, bool readinto, const std::string& name,
                      uint8_t* dst, std::size_t n) {
  auto no_data = [&] {
    return IoError(display_name(name) +
                   ": the stream had no data ready (a non-blocking stream "
                   "cannot be read as a tar archive)");
  };
  if (readinto) {
    nb::object view = nb::steal(PyMemoryView_FromMemory(
        reinterpret_cast<char*>(dst), static_cast<Py_ssize_t>(n), PyBUF_WRITE));
    if (!view.is_valid()) throw nb::python_error();
    // The view is released whatever happens, so that nothing the object
    // kept (or a traceback) can reach `dst` later.
    nb::object got;
    try {
      got = file.attr("readinto")(view);
    } catch (...) {
      view.attr("release")();
      throw;
    }
    view.attr("release")();
    if (got.is_none()) throw no_data();
    return nb::cast<std::size_t>(got);
  }
  nb::object got = file.attr("read")(n);
  if (got.is_none()) throw no_data();
  Py_buffer view;
  if (PyObject_GetBuffer(got.ptr(), &view, PyBUF_SIMPLE) != 0) {
    PyErr_Clear();
    throw InvalidArgument(display_name(name) + ": read() returned " +
                          nb::type_name(got.type()).c_str() + ", not bytes");
  }
  const auto k = static_cast<std::size_t>(view.len);
  std::memcpy(dst, view.buf, std::min(k, n));
  PyBuffer_Release(&view);
  return k;
}

// A TarStream over a Python file object, iterated as (name, data): the
// name a str, the data a bytes object read straight into. The garbage
// collector sees the file object it holds (tar_stream_traverse), so a cycle
// through it (a file object whose class's module holds the iterator) is
// collected, not leaked.
struct PyTarStream {
  PyTarStream(nb::object f, const std::string& name)
      : file(std::move(f)),
        readinto(nb::hasattr(file, "readinto")),
        stream(
            [this](uint8_t* dst, std::size_t n) {
              if (!file.is_valid())
                throw InvalidArgument(display_name(stream.name()) +
                                      ": the stream is gone");
              return read_from(file, readinto, stream.name(), dst, n);
            },
            name) {}

  nb::tuple next() {
    // read() may let the GIL go (a file's readinto does, around the system
    // call): a second thread must not step the same stream meanwhile.
    if (busy) {
      throw InvalidArgument(display_name(stream.name()) +
                            ": already being read by another thread");
    }
    busy = true;
    struct Done {
      bool& busy;
      ~Done() { busy = false; }
    } done{busy};
    std::optional<TarMember> m = stream.next();
    if (!m) throw nb::stop_iteration();
    if (m->size > static_cast<uint64_t>(PY_SSIZE_T_MAX))
      throw InvalidArgument(display_name(stream.name()) + ": member " +
                            display_name(m->name) + " is too large");
    nb::object data = nb::steal(
        PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(m->size)));
    if (!data.is_valid()) throw nb::python_error();
    stream.read_data({reinterpret_cast<uint8_t*>(PyBytes_AS_STRING(data.ptr())),
                      static_cast<std::size_t>(m->size)});
    // The name decoded as tarfile decodes it (bytes that are not UTF-8 kept
    // as lone surrogates).
    nb::object name = nb::steal(PyUnicode_DecodeUTF8(
        m->name.data(), static_cast<Py_ssize_t>(m->name.size()),
        "surrogateescape"));
    if (!name.is_valid()) throw nb::python_error();
    return nb::make_tuple(name, data);
  }

  nb::object file;  // null once the garbage collector cleared it
  bool readinto;
  TarStream stream;
  bool busy = false;  // under the GIL
};

int tar_stream_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nb::inst_ready(self)) return 0;
  Py_VISIT(nb::inst_ptr<PyTarStream>(self)->file.ptr());
  return 0;
}

int tar_stream_clear(PyObject* self) {
  if (nb::inst_ready(self)) nb::inst_ptr<PyTarStream>(self)->file.reset();
  return 0;
}

PyType_Slot tar_stream_slots[] = {
    {Py_tp_traverse, reinterpret_cast<void*>(tar_stream_traverse)},
    {Py_tp_clear, reinterpret_cast<void*>(tar_stream_clear)},
    {0, nullptr}};

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

// f(data, args...) as a Python function: `data` is any bytes-like object,
// read in place and given to f as a Buffer or a span; f runs with the GIL
// released.
template <typename... Args, typename F>
auto on_bytes(F f) {
  return [f](nb::handle data, Args... args) {
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

// The archive `data` with new data for members given as (index, bytes), by
// `Replace` (replace_tar_members or replace_zip_members). The result is a
// view of the C++ vector, not a copy: a shard can be a gigabyte.
template <auto Replace>
Buffer replace_members(
    nb::handle data, const std::string& name,
    const std::vector<std::pair<std::size_t, nb::handle>>& replacements) {
  Buffer bytes = bytes_from_python(data);
  std::vector<Buffer> held;
  held.reserve(replacements.size());
  std::vector<ArchiveReplacement> spans;
  for (const auto& [index, new_data] : replacements) {
    held.push_back(bytes_from_python(new_data));
    spans.push_back({index, held.back().bytes()});
  }
  auto out = std::make_shared<std::vector<uint8_t>>();
  {
    ReleaseGil release;
    *out = Replace(bytes.bytes(), name, std::move(spans));
  }
  const auto size = static_cast<int64_t>(out->size());
  return Buffer::view(out, out->data(), DType::kUint8, {size});
}

// An ArchiveRewriter writing a file, holding the input it reads: bytes
// (`data`) or a FileReader (`input`, a Python reference to it).
class FileRewriter {
 public:
  using Make = std::unique_ptr<ArchiveRewriter> (*)(std::span<const uint8_t>,
                                                    std::string_view, ByteSink);
  using MakeFromFile = std::unique_ptr<ArchiveRewriter> (*)(const FileReader&,
                                                            ByteSink);

  FileRewriter(Make make, nb::handle data, const std::string& name,
               const std::string& path)
      : data_(bytes_from_python(data)) {
    open(path, [&](ByteSink sink) {
      return make(data_.bytes(), name, std::move(sink));
    });
  }
  FileRewriter(MakeFromFile make, nb::handle input, const std::string& path)
      : input_(nb::borrow(input)) {
    const FileReader& file = nb::cast<const FileReader&>(input);
    open(path, [&](ByteSink sink) { return make(file, std::move(sink)); });
  }

  const std::vector<std::size_t>& order() const { return rewriter_->order(); }

  void replace(std::size_t index, nb::handle data) {
    Buffer bytes = bytes_from_python(data);
    ReleaseGil release;
    rewriter_->replace(index, bytes.bytes());
  }

  void finish() {
    ReleaseGil release;
    rewriter_->finish();
    file_->close();
  }

 private:
  template <typename F>
  void open(const std::string& path, F make) {
    ReleaseGil release;
    // Parsed first, so that a damaged archive leaves no file behind.
    rewriter_ = make([this](std::span<const uint8_t> b) { file_->write(b); });
    file_ = std::make_unique<FileWriter>(path);
  }

  Buffer data_;
  nb::object input_;
  std::unique_ptr<FileWriter> file_;
  std::unique_ptr<ArchiveRewriter> rewriter_;
};

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
  nb::class_<ZipEntry>(m, "ZipEntry", "One member of a ZIP archive.")
      .def_prop_ro("name", [](const ZipEntry& e) { return raw(e.name); })
      .def_ro("data_offset", &ZipEntry::data_offset)
      .def_ro("compressed_size", &ZipEntry::compressed_size)
      .def_ro("size", &ZipEntry::size, "Uncompressed size in bytes.")
      .def_ro("method", &ZipEntry::method, "0 stored, 8 deflate.")
      .def_ro("flags", &ZipEntry::flags,
              "General purpose bits (1: encrypted, 8: data descriptor).");
  // Archives in files, read a piece at a time; the overloads taking a
  // FileReader come first, as the bytes ones take any object.
  nb::class_<FileReader>(m, "FileReader",
                         "A file read at any offset (pread), from any thread.")
      .def(nb::init<const std::string&>(), nb::arg("path"),
           nb::call_guard<ReleaseGil>())
      .def_prop_ro("path", &FileReader::path)
      .def_prop_ro("size", &FileReader::size)
      .def(
          "read",
          [](const FileReader& f, uint64_t offset, uint64_t n) {
            return f.read(offset, n);
          },
          nb::arg("offset"), nb::arg("n"), nb::call_guard<ReleaseGil>(),
          "The n bytes at `offset` (a new uint8 Buffer).");
  m.def("list_zip", nb::overload_cast<const FileReader&>(&list_zip),
        nb::arg("file"), nb::call_guard<ReleaseGil>());
  m.def("list_tar", nb::overload_cast<const FileReader&>(&list_tar),
        nb::arg("file"), nb::call_guard<ReleaseGil>());
  m.def("read_zip_entry",
        nb::overload_cast<const FileReader&, const ZipEntry&, uint64_t>(
            &read_zip_entry),
        nb::arg("file"), nb::arg("entry"), nb::arg("max_size"),
        nb::call_guard<ReleaseGil>());
  m.def("list_zip",
        on_bytes<const std::string&>(
            nb::overload_cast<std::span<const uint8_t>, std::string_view>(
                &list_zip)),
        nb::arg("data"), nb::arg("name"));
  m.def("read_zip_entry",
        on_bytes<const ZipEntry&, const std::string&, uint64_t>(
            nb::overload_cast<const Buffer&, const ZipEntry&, std::string_view,
                              uint64_t>(&read_zip_entry)),
        nb::arg("archive"), nb::arg("entry"), nb::arg("name"),
        nb::arg("max_size"));
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
  nb::class_<TarMember>(m, "TarMember", "One regular file of a tar archive.")
      .def_prop_ro("name", [](const TarMember& t) { return raw(t.name); })
      .def_ro("offset", &TarMember::offset, "Of the member's data.")
      .def_ro("size", &TarMember::size)
      .def_ro("header", &TarMember::header, "Of the member's header block.")
      .def_ro("pax_size", &TarMember::pax_size,
              "Whether its size is a pax record's.");
  m.def("list_tar",
        on_bytes<const std::string&>(
            nb::overload_cast<std::span<const uint8_t>, std::string_view>(
                &list_tar)),
        nb::arg("data"), nb::arg("name"));
  nb::class_<PyTarStream>(
      m, "TarStream", nb::type_slots(tar_stream_slots),
      "A tar archive read front to back from a file object (readinto() or "
      "read(n)), one member at a time; iterates (name, data bytes). A "
      "damaged header or a cut raises FormatError when reached.")
      .def(nb::init<nb::object, const std::string&>(), nb::arg("file"),
           nb::arg("name"))
      .def(
          "__iter__", [](nb::handle self) { return nb::borrow(self); },
          nb::sig("def __iter__(self) -> TarStream"))
      .def("__next__", &PyTarStream::next,
           nb::sig("def __next__(self) -> tuple[str, bytes]"));
  m.def("replace_tar_members", &replace_members<&replace_tar_members>,
        nb::arg("data"), nb::arg("name"), nb::arg("replacements"),
        "The archive (uint8) with new data for the members at the given "
        "indices of list_tar().");
  m.def("replace_zip_members", &replace_members<&replace_zip_members>,
        nb::arg("data"), nb::arg("name"), nb::arg("replacements"),
        "The archive (uint8) with new data, stored, for the members at the "
        "given indices of list_zip().");
  nb::class_<FileRewriter>(
      m, "ArchiveRewriter",
      "Writes a copy of a tar or ZIP archive to a file member by member, "
      "with new data for the members given in the order of order(): only "
      "the input and one member are held. After an exception the file "
      "holds part of an archive.")
      .def("order", &FileRewriter::order,
           "Member indices in the order their data lies in the archive.")
      .def("replace", &FileRewriter::replace, nb::arg("index"), nb::arg("data"),
           "Writes the archive up to the end of member `index`, with `data` "
           "as its new data (stored, for ZIP).")
      .def("finish", &FileRewriter::finish,
           "Writes the rest of the archive and closes the file.");
  m.def(
      "rewrite_tar",
      [](const FileReader& file, const std::string& path) {
        return std::make_unique<FileRewriter>(
            nb::overload_cast<const FileReader&, ByteSink>(&rewrite_tar),
            nb::find(file), path);
      },
      nb::arg("file"), nb::arg("path"),
      "An ArchiveRewriter from the tar archive in `file` (a FileReader, "
      "kept alive) to the file `path`.");
  m.def(
      "rewrite_zip",
      [](const FileReader& file, const std::string& path) {
        return std::make_unique<FileRewriter>(
            nb::overload_cast<const FileReader&, ByteSink>(&rewrite_zip),
            nb::find(file), path);
      },
      nb::arg("file"), nb::arg("path"),
      "An ArchiveRewriter from the ZIP archive in `file` (a FileReader, "
      "kept alive) to the file `path`.");
  m.def(
      "rewrite_tar",
      [](nb::handle data, const std::string& name, const std::string& path) {
        return std::make_unique<FileRewriter>(
            static_cast<FileRewriter::Make>(&rewrite_tar), data, name, path);
      },
      nb::arg("data"), nb::arg("name"), nb::arg("path"),
      "An ArchiveRewriter from the tar archive `data` to the file `path`.");
  m.def(
      "rewrite_zip",
      [](nb::handle data, const std::string& name, const std::string& path) {
        return std::make_unique<FileRewriter>(
            static_cast<FileRewriter::Make>(&rewrite_zip), data, name, path);
      },
      nb::arg("data"), nb::arg("name"), nb::arg("path"),
      "An ArchiveRewriter from the ZIP archive `data` to the file `path`.");
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
