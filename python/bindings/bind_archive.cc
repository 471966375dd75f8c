// SPDX-License-Identifier: Apache-2.0
//
// feedline.io's archives in the extension: tar and ZIP listing and member
// reads from bytes or a FileReader, tar streams from Python file objects,
// and the rewriters prepare-jpegs writes shards with. Member names are the
// archive's bytes (Python decodes them), but for TarStream, which gives str.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "feedline/base/buffer.h"
#include "feedline/base/error.h"
#include "feedline/io/file.h"
#include "feedline/io/formats.h"

namespace nb = nanobind;

namespace feedline::bindings {
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

void bind_archive(nb::module_& m) {
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
}

}  // namespace feedline::bindings
