// SPDX-License-Identifier: Apache-2.0
//
// feedline.io in the extension: Buffer (with the NumPy array interface and
// DLPack), image decoding, and the native image ops.
//
// Every decode runs with the GIL released. Bytes-like inputs are read in
// place (a bytes object is kept alive by the Buffer that views it); other
// buffer-protocol objects are copied once.

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
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
#include "feedline/pipeline/op.h"
#include "io_common.h"
#include "native_op.h"
#include "py_ref.h"

namespace nb = nanobind;

namespace feedline::bindings {

using media::AudioInfo;
using media::AudioOptions;
using media::check_image_options;
using media::decode_image;
using media::decode_image_batch;
using media::EncodedImage;
using media::ffmpeg_versions;
using media::image_output_shape;
using media::ImageFailure;
using media::ImageInfo;
using media::ImageOptions;
using media::Layout;
using media::load_audio;
using media::PixelFormat;
using media::probe_image;
using media::ResizeMode;
using media::set_ffmpeg_log_level;

// Bytes-like Python objects as a 1-D uint8 Buffer, read in place: a bytes
// object is kept alive by the Buffer; any other C-contiguous buffer
// (bytearray, memoryview, NumPy array) through a memoryview that holds its
// export (so a bytearray cannot be resized while viewed). Non-contiguous
// buffers are copied. Requires: the GIL.
Buffer bytes_from_python(nb::handle obj) {
  if (nb::isinstance<Buffer>(obj)) return nb::cast<Buffer>(obj);
  if (PyBytes_Check(obj.ptr())) {
    auto owner = std::make_shared<PyObj>(PyObj::borrow(obj.ptr()));
    return Buffer::view(owner, PyBytes_AS_STRING(obj.ptr()), DType::kUint8,
                        {static_cast<int64_t>(PyBytes_GET_SIZE(obj.ptr()))}, {},
                        /*writable=*/false);
  }
  if (!PyObject_CheckBuffer(obj.ptr()))
    throw InvalidArgument("expected a bytes-like object");
  PyObject* mv = PyMemoryView_FromObject(obj.ptr());
  if (mv == nullptr) {
    PyErr_Clear();
    throw InvalidArgument("expected a bytes-like object");
  }
  auto owner = std::make_shared<PyObj>(PyObj::steal(mv));
  Py_buffer* view = PyMemoryView_GET_BUFFER(mv);
  if (PyBuffer_IsContiguous(view, 'C')) {
    return Buffer::view(owner, view->buf, DType::kUint8,
                        {static_cast<int64_t>(view->len)}, {},
                        view->readonly == 0);
  }
  Buffer out =
      Buffer::allocate(DType::kUint8, {static_cast<int64_t>(view->len)});
  if (PyBuffer_ToContiguous(out.data(), view, view->len, 'C') != 0) {
    PyErr_Clear();
    throw InvalidArgument("cannot read the bytes-like object");
  }
  return out;
}

NativeOp load_op(std::string name, LoadOp::Load load) {
  return NativeOp{std::make_shared<LoadOp>(std::move(load)), std::move(name),
                  &typeid(EncodedFile), &typeid(Buffer)};
}

namespace {

// --- Buffer in Python --------------------------------------------------------

const char* typestr(DType d) {
  switch (d) {
    case DType::kBool:
      return "|b1";
    case DType::kInt8:
      return "|i1";
    case DType::kUint8:
      return "|u1";
    case DType::kInt16:
      return "<i2";
    case DType::kUint16:
      return "<u2";
    case DType::kInt32:
      return "<i4";
    case DType::kUint32:
      return "<u4";
    case DType::kInt64:
      return "<i8";
    case DType::kUint64:
      return "<u8";
    case DType::kFloat16:
      return "<f2";
    case DType::kFloat32:
      return "<f4";
    case DType::kFloat64:
      return "<f8";
    case DType::kComplex64:
      return "<c8";
    case DType::kComplex128:
      return "<c16";
  }
  return "|u1";
}

nb::dlpack::dtype dlpack_dtype(DType d) {
  using nb::dlpack::dtype_code;
  uint8_t bits = static_cast<uint8_t>(dtype_size(d) * 8);
  switch (d) {
    case DType::kBool:
      return {static_cast<uint8_t>(dtype_code::Bool), bits, 1};
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64:
      return {static_cast<uint8_t>(dtype_code::Int), bits, 1};
    case DType::kFloat16:
    case DType::kFloat32:
    case DType::kFloat64:
      return {static_cast<uint8_t>(dtype_code::Float), bits, 1};
    case DType::kComplex64:
    case DType::kComplex128:
      return {static_cast<uint8_t>(dtype_code::Complex), bits, 1};
    default:
      return {static_cast<uint8_t>(dtype_code::UInt), bits, 1};
  }
}

nb::tuple to_tuple(const std::vector<int64_t>& v) {
  nb::list l;
  for (int64_t x : v) l.append(x);
  return nb::tuple(l);
}

nb::dict array_interface(const Buffer& b) {
  nb::dict d;
  d["version"] = 3;
  d["shape"] = to_tuple(b.shape());
  d["typestr"] = typestr(b.dtype());
  d["data"] =
      nb::make_tuple(reinterpret_cast<uintptr_t>(b.data()), !b.writable());
  d["strides"] = b.contiguous() ? nb::object(nb::none())
                                : nb::object(to_tuple(b.strides()));
  return d;
}

// A DLPack capsule ("dltensor") viewing the Buffer and keeping it alive.
nb::object dlpack_capsule(const Buffer& b) {
  auto* keep = new Buffer(b);
  nb::capsule owner(keep,
                    [](void* p) noexcept { delete static_cast<Buffer*>(p); });
  std::vector<size_t> shape(b.shape().begin(), b.shape().end());
  std::vector<int64_t> strides;
  for (int64_t s : b.strides())
    strides.push_back(s / static_cast<int64_t>(dtype_size(b.dtype())));
  nb::ndarray<> arr(b.data(), shape.size(), shape.data(), owner, strides.data(),
                    dlpack_dtype(b.dtype()), nb::device::cpu::value);
  return nb::cast(arr, nb::rv_policy::reference);
}

nb::object buffer_to_python(Item& item) { return nb::cast(item.as<Buffer>()); }
nb::object encoded_to_python(Item& item) {
  const EncodedFile& f = item.as<EncodedFile>();
  return nb::bytes(f.bytes.data_as<const char>(), f.bytes.nbytes());
}

Item encoded_from_python(nb::handle obj) {
  if (PyUnicode_Check(obj.ptr()) ||
      PyObject_HasAttrString(obj.ptr(), "__fspath__")) {
    throw InvalidArgument(
        "expected encoded bytes; read paths with feedline.io.ops.read_file() "
        "first");
  }
  Buffer b = bytes_from_python(obj);
  return Item(
      EncodedFile{"<" + std::to_string(b.nbytes()) + " bytes>", std::move(b)});
}

// --- native ops
// ----------------------------------------------------------------

class ReadFileOp final : public MapOp {
 public:
  Item call(Item input) override {
    std::string path = input.take_as<std::string>();
    Buffer bytes = read_file(path);
    return Item(EncodedFile{std::move(path), std::move(bytes)});
  }
};

// A list of same-shaped Buffers (from aggregate) as one Buffer with a leading
// batch dimension.
class StackOp final : public MapOp {
 public:
  Item call(Item input) override {
    ItemBatch& batch = input.as<ItemBatch>();
    if (batch.empty()) return Item();
    const Buffer& first = batch[0].as<Buffer>();
    std::vector<int64_t> shape = first.shape();
    shape.insert(shape.begin(), static_cast<int64_t>(batch.size()));
    Buffer out = Buffer::allocate(first.dtype(), shape);
    auto* dst = out.data_as<uint8_t>();
    for (Item& item : batch) {
      const Buffer& b = item.as<Buffer>();
      if (b.shape() != first.shape() || b.dtype() != first.dtype() ||
          !b.contiguous()) {
        throw InvalidArgument("stack: items differ: " + first.to_string() +
                              " and " + b.to_string() +
                              " (resize or crop them to one size)");
      }
      std::memcpy(dst, b.data(), b.nbytes());
      dst += b.nbytes();
    }
    return Item(std::move(out));
  }
};

// A batch of encoded files (from aggregate) decoded straight into one batch
// Buffer: no per-image buffer, no copy. An image that fails is left out and
// logged; the call fails only when none decodes.
class DecodeBatchOp final : public MapOp {
 public:
  explicit DecodeBatchOp(ImageOptions options) : options_(options) {}

  // Python values in the batch (bytes from a Python source) become encoded
  // files, all under one GIL hold; one that does not convert is left out.
  static void convert_python_values(ItemBatch* batch,
                                    std::vector<std::string>* errors) {
    bool any = false;
    for (Item& item : *batch) any |= item.holds<PyObj>();
    if (!any) return;
    GilScope gil;
    for (Item& item : *batch) {
      if (!item.holds<PyObj>()) continue;
      PyObj obj = item.take_as<PyObj>();
      try {
        item = from_python(obj.get(), typeid(EncodedFile));
      } catch (const std::exception& e) {
        errors->push_back(e.what());
        item.reset();
      }
    }
  }

  Item call(Item input) override {
    ItemBatch& batch = input.as<ItemBatch>();
    std::vector<std::string> errors;
    convert_python_values(&batch, &errors);
    std::vector<EncodedImage> images;
    images.reserve(batch.size());
    for (Item& item : batch) {
      if (const EncodedFile* f = item.get_if<EncodedFile>()) {
        images.push_back({f->name, span_of(f->bytes)});
      }
    }
    std::vector<ImageFailure> failures;
    Buffer out = decode_image_batch(images, options_, &failures);
    for (ImageFailure& f : failures) errors.push_back(std::move(f.message));
    for (const std::string& e : errors)
      log(LogLevel::kWarning, "decode_batch: " + e);
    if (!batch.empty() && errors.size() == batch.size()) {
      throw DecodeError("decode_batch: all " + std::to_string(batch.size()) +
                        " images failed; first: " + errors[0]);
    }
    return Item(std::move(out));
  }

 private:
  const ImageOptions options_;
};

// --- Python functions
// -----------------------------------------------------------

Buffer py_decode_image(nb::handle data, const ImageOptions& options,
                       const std::string& name) {
  Buffer bytes = bytes_from_python(data);
  nb::gil_scoped_release release;
  return decode_image(span_of(bytes), options, name);
}

Buffer py_load_image(const std::string& path, const ImageOptions& options) {
  nb::gil_scoped_release release;
  Buffer bytes = read_file(path);
  return decode_image(span_of(bytes), options, path);
}

// Decodes every source into one batch. Returns the batch (of the images
// that decoded) and the (index, message) of each failure.
std::pair<Buffer, std::vector<std::pair<int, std::string>>> py_load_image_batch(
    nb::list srcs, const ImageOptions& options) {
  std::vector<EncodedFile> files;
  std::vector<bool> is_path;
  for (nb::handle s : srcs) {
    if (PyUnicode_Check(s.ptr()) ||
        PyObject_HasAttrString(s.ptr(), "__fspath__")) {
      nb::object fs = nb::steal(PyOS_FSPath(s.ptr()));
      if (!fs.is_valid()) throw nb::python_error();
      files.push_back({nb::cast<std::string>(fs), Buffer()});
      is_path.push_back(true);
    } else {
      files.push_back({"<source " + std::to_string(files.size()) + ">",
                       bytes_from_python(s)});
      is_path.push_back(false);
    }
  }
  nb::gil_scoped_release release;
  std::vector<ImageFailure> failures;
  std::vector<EncodedImage> images;
  std::vector<std::size_t> index;  // images[k] is source index[k]
  for (std::size_t i = 0; i < files.size(); ++i) {
    try {
      if (is_path[i]) files[i].bytes = read_file(files[i].name);
      images.push_back({files[i].name, span_of(files[i].bytes)});
      index.push_back(i);
    } catch (const std::exception& e) {
      failures.push_back({i, e.what()});
    }
  }
  std::vector<ImageFailure> decode_failures;
  Buffer batch = decode_image_batch(images, options, &decode_failures);
  for (ImageFailure& f : decode_failures)
    failures.push_back({index[f.index], std::move(f.message)});
  std::vector<std::pair<int, std::string>> out;
  out.reserve(failures.size());
  for (ImageFailure& f : failures)
    out.emplace_back(static_cast<int>(f.index), std::move(f.message));
  return {batch, out};
}

// An archive -> one EncodedFile per member, in order, named by the member.
// `list` reads the archive's index; `read` gives one member's bytes.
template <typename Member>
class ArchiveMembersOp final : public GeneratorOp {
 public:
  using List = std::vector<Member> (*)(const EncodedFile& archive);
  using Read = Buffer (*)(const EncodedFile& archive, const Member& member);
  ArchiveMembersOp(List list, Read read) : list_(list), read_(read) {}

  std::unique_ptr<ItemGenerator> start(Item input) override {
    EncodedFile archive = input.take_as<EncodedFile>();
    std::vector<Member> members = list_(archive);
    return std::make_unique<Generator>(std::move(archive), std::move(members),
                                       read_);
  }

 private:
  class Generator final : public ItemGenerator {
   public:
    Generator(EncodedFile archive, std::vector<Member> members, Read read)
        : archive_(std::move(archive)),
          members_(std::move(members)),
          read_(read) {}
    bool next(Item* out) override {
      if (next_ == members_.size()) return false;
      const Member& m = members_[next_++];
      *out = Item(EncodedFile{m.name, read_(archive_, m)});
      return true;
    }

   private:
    EncodedFile archive_;
    std::vector<Member> members_;
    Read read_;
    std::size_t next_ = 0;
  };

  const List list_;
  const Read read_;
};

// TAR: regular files, as views of the archive.
std::vector<TarMember> list_tar_members(const EncodedFile& archive) {
  return list_tar(span_of(archive.bytes), archive.name);
}
Buffer view_tar_member(const EncodedFile& archive, const TarMember& m) {
  return Buffer::view(archive.bytes.owner(),
                      archive.bytes.data_as<uint8_t>() + m.offset,
                      DType::kUint8, {static_cast<int64_t>(m.size)}, {},
                      archive.bytes.writable());
}

// ZIP: members but directories (names ending in '/'); stored ones as views,
// deflated ones inflated.
std::vector<ZipEntry> list_zip_files(const EncodedFile& archive) {
  std::vector<ZipEntry> entries =
      list_zip(span_of(archive.bytes), archive.name);
  std::erase_if(entries, [](const ZipEntry& e) {
    return !e.name.empty() && e.name.back() == '/';
  });
  return entries;
}
Buffer read_zip_member(const EncodedFile& archive, const ZipEntry& e) {
  return read_zip_entry(archive.bytes, e, archive.name + ":" + e.name);
}

AudioOptions audio_options(int sample_rate, int channels, double start,
                           std::optional<double> duration) {
  AudioOptions o;
  o.sample_rate = sample_rate;
  o.channels = channels;
  o.start = start;
  o.duration = duration;
  return o;
}

nb::list zip_entries(const std::vector<ZipEntry>& entries) {
  nb::list out;
  for (const ZipEntry& e : entries) {
    out.append(nb::make_tuple(e.name, e.data_offset, e.compressed_size, e.size,
                              e.method));
  }
  return out;
}

}  // namespace

void bind_io(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("io", "Native core of feedline.io.");

  register_to_python(typeid(Buffer), &buffer_to_python);
  register_to_python(typeid(EncodedFile), &encoded_to_python);
  register_from_python(typeid(EncodedFile), &encoded_from_python);
  register_type_name(typeid(Buffer), "feedline.io.Buffer");
  register_type_name(typeid(EncodedFile), "encoded file");

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
          "are "
          "accepted and ignored).")
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
      .def_rw("max_pixels", &ImageOptions::max_pixels)
      .def("check", &check_image_options)
      .def("output_shape", [](const ImageOptions& o, int w, int h) {
        return to_tuple(image_output_shape(w, h, o));
      });

  m.def("decode_image", &py_decode_image, nb::arg("data"), nb::arg("options"),
        nb::arg("name"));
  m.def("load_image", &py_load_image, nb::arg("path"), nb::arg("options"));
  m.def("load_image_batch", &py_load_image_batch, nb::arg("srcs"),
        nb::arg("options"));
  m.def("probe_image", [](nb::handle data, const std::string& name) {
    Buffer bytes = bytes_from_python(data);
    ImageInfo info = probe_image(span_of(bytes), name);
    return nb::make_tuple(info.width, info.height, info.format);
  });

  // Arrays, audio and archives. Each takes bytes-like data (bytes are read in
  // place) and runs with the GIL released.
  m.def(
      "load_npy",
      [](nb::handle data, const std::string& name) {
        Buffer bytes = bytes_from_python(data);
        nb::gil_scoped_release release;
        return load_npy(bytes, name);
      },
      nb::arg("data"), nb::arg("name"));
  m.def(
      "list_zip",
      [](nb::handle data, const std::string& name) {
        Buffer bytes = bytes_from_python(data);
        std::vector<ZipEntry> entries;
        {
          nb::gil_scoped_release release;
          entries = list_zip(span_of(bytes), name);
        }
        return nb::make_tuple(bytes, zip_entries(entries));
      },
      nb::arg("data"), nb::arg("name"),
      "(archive Buffer, [(name, data_offset, compressed_size, size, method)])");
  m.def(
      "read_zip_entry",
      [](const Buffer& archive, nb::tuple t, const std::string& name,
         uint64_t max_size) {
        ZipEntry e{nb::cast<std::string>(t[0]), nb::cast<uint64_t>(t[1]),
                   nb::cast<uint64_t>(t[2]), nb::cast<uint64_t>(t[3]),
                   nb::cast<uint16_t>(t[4])};
        nb::gil_scoped_release release;
        return read_zip_entry(archive, e, name, max_size);
      },
      nb::arg("archive"), nb::arg("entry"), nb::arg("name"),
      nb::arg("max_size"));
  m.def(
      "load_wav",
      [](nb::handle data, const std::string& name, uint64_t start,
         std::optional<uint64_t> frames) {
        Buffer bytes = bytes_from_python(data);
        nb::gil_scoped_release release;
        return load_wav(bytes, name, start, frames);
      },
      nb::arg("data"), nb::arg("name"), nb::arg("start_frame"),
      nb::arg("num_frames").none());
  m.def(
      "parse_wav",
      [](nb::handle data, const std::string& name) {
        Buffer bytes = bytes_from_python(data);
        WavInfo w = parse_wav(span_of(bytes), name);
        nb::dict d;
        d["audio_format"] = w.format;
        d["num_channels"] = w.channels;
        d["sample_rate"] = w.sample_rate;
        d["bits_per_sample"] = w.bits_per_sample;
        d["block_align"] = w.block_align;
        d["num_frames"] = w.num_frames();
        d["data_offset"] = w.data_offset;
        return d;
      },
      nb::arg("data"), nb::arg("name"));
  m.def(
      "list_tar",
      [](nb::handle data, const std::string& name) {
        Buffer bytes = bytes_from_python(data);
        std::vector<TarMember> members;
        {
          nb::gil_scoped_release release;
          members = list_tar(span_of(bytes), name);
        }
        nb::list out;
        for (const TarMember& t : members)
          out.append(nb::make_tuple(t.name, t.offset, t.size));
        return nb::make_tuple(bytes, out);
      },
      nb::arg("data"), nb::arg("name"),
      "(archive Buffer, [(name, offset, size)])");
  m.def(
      "read_file",
      [](const std::string& path) {
        nb::gil_scoped_release release;
        return read_file(path);
      },
      nb::arg("path"));
  m.def(
      "map_file",
      [](const std::string& path) {
        nb::gil_scoped_release release;
        return map_file(path);
      },
      nb::arg("path"), "The file memory-mapped read-only (no copy).");
  m.def(
      "load_audio",
      [](nb::handle data, const std::string& name, int sample_rate,
         int channels, double start, std::optional<double> duration) {
        Buffer bytes = bytes_from_python(data);
        AudioOptions o = audio_options(sample_rate, channels, start, duration);
        AudioInfo info;
        Buffer out;
        {
          nb::gil_scoped_release release;
          out = load_audio(span_of(bytes), o, name, &info);
        }
        return nb::make_tuple(out, info.sample_rate, info.codec);
      },
      nb::arg("data"), nb::arg("name"), nb::arg("sample_rate"),
      nb::arg("channels"), nb::arg("start"), nb::arg("duration").none());
  m.def("set_buffer_cache_limit", &set_buffer_cache_limit, nb::arg("bytes"));
  m.def("buffer_cache_size", &buffer_cache_size);
  m.def("ffmpeg_versions", &ffmpeg_versions);
  m.def("set_ffmpeg_log_level", &set_ffmpeg_log_level, nb::arg("level"));
  m.def(
      "load_audio_op",
      [](int sample_rate, int channels) {
        AudioOptions o = audio_options(sample_rate, channels, 0, std::nullopt);
        return load_op("load_audio", [o](const EncodedFile& f) {
          return load_audio(span_of(f.bytes), o, f.name);
        });
      },
      nb::arg("sample_rate"), nb::arg("channels"));
  bind_av(m);
  m.def("load_npy_op", [] {
    return load_op("load_npy", [](const EncodedFile& f) {
      return load_npy(f.bytes, f.name);
    });
  });
  m.def("load_wav_op", [] {
    return load_op("load_wav", [](const EncodedFile& f) {
      return load_wav(f.bytes, f.name);
    });
  });
  m.def("zip_members_op", [] {
    return NativeOp{std::make_shared<ArchiveMembersOp<ZipEntry>>(
                        &list_zip_files, &read_zip_member),
                    "zip_members", &typeid(EncodedFile), &typeid(EncodedFile)};
  });
  m.def("tar_members_op", [] {
    return NativeOp{std::make_shared<ArchiveMembersOp<TarMember>>(
                        &list_tar_members, &view_tar_member),
                    "tar_members", &typeid(EncodedFile), &typeid(EncodedFile)};
  });

  m.def("read_file_op", [] {
    return NativeOp{std::make_shared<ReadFileOp>(), "read_file",
                    &typeid(std::string), &typeid(EncodedFile)};
  });
  m.def("decode_image_op", [](const ImageOptions& options) {
    check_image_options(options);
    return load_op("decode_image", [options](const EncodedFile& f) {
      return decode_image(span_of(f.bytes), options, f.name);
    });
  });
  m.def("decode_batch_op", [](const ImageOptions& options) {
    check_image_options(options);
    if (options.resize_width == 0 && options.crop_width == 0) {
      throw InvalidArgument(
          "decode_batch needs one output size: give width and height, or crop");
    }
    return NativeOp{std::make_shared<DecodeBatchOp>(options), "decode_batch",
                    &typeid(ItemBatch), &typeid(Buffer)};
  });
  m.def("stack_op", [] {
    return NativeOp{std::make_shared<StackOp>(), "stack", &typeid(ItemBatch),
                    &typeid(Buffer)};
  });
}

}  // namespace feedline::bindings
