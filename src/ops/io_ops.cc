// SPDX-License-Identifier: Apache-2.0

#include "feedline/ops/io_ops.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include "feedline/base/error.h"
#include "feedline/base/log.h"
#include "feedline/io/file.h"
#include "feedline/io/formats.h"
#include "feedline/ops/samples.h"
#include "feedline/pipeline/builder.h"

namespace feedline::ops {
namespace {

// Takes an ItemBatch from an untyped aggregate stage or a std::vector<T>
// from the typed builder's aggregate. A batch of samples (samples.h) gives
// a SampleBatch holding the records of the rows that run() kept.
template <typename T>
class BatchOp : public MapOp {
 public:
  const std::type_info* input_type() const override {
    return &typeid(ItemBatch);
  }
  const std::type_info* output_type() const override { return &typeid(Buffer); }
  bool accepts(const std::type_info& type) const override {
    return type == typeid(ItemBatch) || type == typeid(std::vector<T>);
  }
  Item call(Item input) override {
    std::vector<std::size_t> left_out;
    if (auto* typed = input.get_if<std::vector<T>>())
      return run(*typed, {}, &left_out);
    ItemBatch& batch = input.as<ItemBatch>();
    const Sample* first = batch.empty() ? nullptr : batch[0].get_if<Sample>();
    std::vector<T> elements;
    std::vector<Record> records;  // records[k]: the record of elements[k]
    std::vector<std::string> errors;
    elements.reserve(batch.size());
    for (std::size_t i = 0; i < batch.size(); ++i) {
      Item* value = &batch[i];
      Sample* sample = value->get_if<Sample>();
      if (sample != nullptr) value = &sample->payload;
      T* element = value->get_if<T>();
      if ((sample != nullptr) != (first != nullptr)) {
        errors.push_back("element " + std::to_string(i) +
                         (first ? " is not a sample" : " is a sample") +
                         ", unlike element 0");
      } else if (element == nullptr) {
        errors.push_back(element_error(i, *value));
      } else {
        elements.push_back(std::move(*element));
        if (sample != nullptr) records.push_back(std::move(sample->record));
      }
    }
    Item out = run(elements, std::move(errors), &left_out);
    if (first == nullptr || !out.has_value()) return out;
    // Drop the records of the rows left out, so records follow the rows.
    std::vector<Record> kept;
    kept.reserve(records.size());
    for (std::size_t k = 0, j = 0; k < records.size(); ++k) {
      if (j < left_out.size() && left_out[j] == k) {
        ++j;
      } else {
        kept.push_back(std::move(records[k]));
      }
    }
    return Item(SampleBatch{std::move(out), first->field, std::move(kept)});
  }

 protected:
  // The batch of `batch`; the indices (ascending) of the elements it leaves
  // out go to `*left_out`.
  virtual Item run(const std::vector<T>& batch, std::vector<std::string> errors,
                   std::vector<std::size_t>* left_out) = 0;
  virtual std::string element_error(std::size_t index, const Item& item) = 0;
};

class StackOp final : public BatchOp<Buffer> {
 protected:
  Item run(const std::vector<Buffer>& batch, std::vector<std::string> errors,
           std::vector<std::size_t>* /*left_out*/) override {
    if (!errors.empty()) throw InvalidArgument(errors.front());
    if (batch.empty()) return Item();
    const Buffer& first = batch[0];
    std::vector<int64_t> shape = first.shape();
    shape.insert(shape.begin(), static_cast<int64_t>(batch.size()));
    Buffer out = Buffer::allocate(first.dtype(), shape);
    auto* dst = out.data_as<uint8_t>();
    for (const Buffer& b : batch) {
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
  std::string element_error(std::size_t index, const Item& item) override {
    return "stack: element " + std::to_string(index) + " is a " +
           type_name(item.type()) + ", not a Buffer";
  }
};

class DecodeBatchOp final : public BatchOp<EncodedFile> {
 public:
  explicit DecodeBatchOp(const media::ImageOptions& options)
      : options_(options) {}

 protected:
  Item run(const std::vector<EncodedFile>& batch,
           std::vector<std::string> errors,
           std::vector<std::size_t>* left_out) override {
    const std::size_t total = batch.size() + errors.size();
    std::vector<media::ImageFailure> failures;
    Buffer out = decode_files(batch, options_, &failures);
    for (media::ImageFailure& f : failures) {
      left_out->push_back(f.index);
      errors.push_back(std::move(f.message));
    }
    std::sort(left_out->begin(), left_out->end());
    const bool all_failed = total > 0 && errors.size() == total;
    // Each image left out is a failure of the stage; when none is left the
    // call fails, which counts the first one.
    for (std::size_t i = all_failed ? 1 : 0; i < errors.size(); ++i) {
      std::string what = "decode_batch: " + errors[i];
      if (!report_element_failure(std::make_exception_ptr(DecodeError(what))))
        log(LogLevel::kWarning, what);
    }
    if (all_failed) {
      throw DecodeError("decode_batch: all " + std::to_string(total) +
                        " images failed; first: " + errors[0]);
    }
    return Item(std::move(out));
  }
  std::string element_error(std::size_t index, const Item& item) override {
    return "element " + std::to_string(index) + " is a " +
           type_name(item.type()) + ", not an encoded file";
  }

 private:
  const media::ImageOptions options_;
};

// An archive -> one EncodedFile per member, in order. `Input` is what the
// op takes (bytes, or a path), `Archive` what the format's functions read
// (with a `name` and `named`).
template <typename Input, typename Archive, typename Member>
class ArchiveMembersOp final : public GeneratorOp {
 public:
  struct Format {
    Archive (*open)(Input input);
    std::vector<Member> (*list)(const Archive& archive);
    Buffer (*read)(const Archive& archive, const Member& member);
  };
  explicit ArchiveMembersOp(Format format) : format_(format) {}

  const std::type_info* input_type() const override { return &typeid(Input); }
  const std::type_info* output_type() const override {
    return &typeid(EncodedFile);
  }
  std::unique_ptr<ItemGenerator> start(Item input) override {
    Archive archive = format_.open(input.take_as<Input>());
    std::vector<Member> members = format_.list(archive);
    return std::make_unique<Generator>(std::move(archive), std::move(members),
                                       format_.read);
  }

 private:
  class Generator final : public ItemGenerator {
   public:
    using Read = Buffer (*)(const Archive& archive, const Member& member);
    Generator(Archive archive, std::vector<Member> members, Read read)
        : archive_(std::move(archive)),
          members_(std::move(members)),
          read_(read) {}
    bool next(Item* out) override {
      if (next_ == members_.size()) return false;
      const Member& m = members_[next_++];
      try {
        // The name is for messages, which reach Python as UTF-8 text: a
        // member name that is not UTF-8 (Latin-1, say) is shown escaped. It
        // names the archive too, which also keys seeded augmentation apart
        // for members of one name in two shards. Members of unnamed bytes
        // are keyed by their contents, as the bytes would be.
        *out = Item(EncodedFile{archive_.name + ":" + display_name(m.name),
                                read_(archive_, m), archive_.named});
      } catch (const std::exception&) {
        // A damaged member (a bad CRC, a corrupt deflate stream) costs
        // itself, a counted failure of the stage, not the members after it.
        if (!report_element_failure(std::current_exception())) throw;
      }
      return true;
    }

   private:
    Archive archive_;
    std::vector<Member> members_;
    Read read_;
    std::size_t next_ = 0;
  };

  const Format format_;
};

EncodedFile as_is(EncodedFile archive) { return archive; }

std::vector<TarMember> list_tar_members(const EncodedFile& archive) {
  return list_tar(archive.span(), archive.name);
}
Buffer view_tar_member(const EncodedFile& archive, const TarMember& m) {
  return Buffer::view(archive.bytes.owner(),
                      archive.bytes.data_as<uint8_t>() + m.offset,
                      DType::kUint8, {static_cast<int64_t>(m.size)}, {},
                      archive.bytes.writable());
}

// A ZIP's directories are not members.
std::vector<ZipEntry> files_only(std::vector<ZipEntry> entries) {
  std::erase_if(entries, [](const ZipEntry& e) {
    return !e.name.empty() && e.name.back() == '/';
  });
  return entries;
}

std::vector<ZipEntry> list_zip_files(const EncodedFile& archive) {
  return files_only(list_zip(archive.span(), archive.name));
}
Buffer read_zip_member(const EncodedFile& archive, const ZipEntry& e) {
  return read_zip_entry(archive.bytes, e,
                        archive.name + ":" + display_name(e.name));
}

// An archive at a path, opened: its headers or directory are read when the
// op starts on it, each member when the op gives it.
struct ArchiveFile {
  std::string name;  // the path
  std::unique_ptr<const FileReader> file;
  bool named = true;
};

ArchiveFile open_archive(std::string path) {
  auto file = std::make_unique<const FileReader>(path);
  return {std::move(path), std::move(file)};
}

std::vector<TarMember> list_tar_file(const ArchiveFile& archive) {
  return list_tar(*archive.file);
}
Buffer read_tar_member(const ArchiveFile& archive, const TarMember& m) {
  return archive.file->read(m.offset, m.size);
}

std::vector<ZipEntry> list_zip_file(const ArchiveFile& archive) {
  return files_only(list_zip(*archive.file));
}
Buffer read_zip_file_member(const ArchiveFile& archive, const ZipEntry& e) {
  return read_zip_entry(*archive.file, e);
}

}  // namespace

OpPtr read_file() {
  return make_map_op<std::string>([](std::string path) {
    Buffer bytes = feedline::read_file(path);
    return EncodedFile{std::move(path), std::move(bytes)};
  });
}

OpPtr decode_image(const media::ImageOptions& options) {
  media::check_image_options(options);
  return make_map_op<EncodedFile>([options](const EncodedFile& f) {
    return media::decode_image(f.span(), options, f.name,
                               f.sample_key(options.seed));
  });
}

OpPtr decode_batch(const media::ImageOptions& options) {
  media::check_image_options(options);
  if (options.resize_width == 0 && options.crop_width == 0 &&
      options.random_resized_crop.width == 0) {
    throw InvalidArgument(
        "decode_batch needs one output size: give width and height, crop, or "
        "random_resized_crop");
  }
  return std::make_shared<DecodeBatchOp>(options);
}

OpPtr stack() { return std::make_shared<StackOp>(); }

OpPtr load_npy() {
  return make_map_op<EncodedFile>(
      [](const EncodedFile& f) { return feedline::load_npy(f.bytes, f.name); });
}

OpPtr load_wav() {
  return make_map_op<EncodedFile>(
      [](const EncodedFile& f) { return feedline::load_wav(f.bytes, f.name); });
}

OpPtr tar_members() {
  using Op = ArchiveMembersOp<EncodedFile, EncodedFile, TarMember>;
  return std::make_shared<Op>(
      Op::Format{&as_is, &list_tar_members, &view_tar_member});
}

OpPtr zip_members() {
  using Op = ArchiveMembersOp<EncodedFile, EncodedFile, ZipEntry>;
  return std::make_shared<Op>(
      Op::Format{&as_is, &list_zip_files, &read_zip_member});
}

OpPtr read_tar_members() {
  using Op = ArchiveMembersOp<std::string, ArchiveFile, TarMember>;
  return std::make_shared<Op>(
      Op::Format{&open_archive, &list_tar_file, &read_tar_member});
}

OpPtr read_zip_members() {
  using Op = ArchiveMembersOp<std::string, ArchiveFile, ZipEntry>;
  return std::make_shared<Op>(
      Op::Format{&open_archive, &list_zip_file, &read_zip_file_member});
}

Buffer decode_files(const std::vector<EncodedFile>& files,
                    const media::ImageOptions& options,
                    std::vector<media::ImageFailure>* failures,
                    std::span<const uint64_t> sample_indices) {
  if (!sample_indices.empty() && sample_indices.size() != files.size()) {
    throw InvalidArgument(
        "decode_files: " + std::to_string(files.size()) + " files but " +
        std::to_string(sample_indices.size()) + " sample indices");
  }
  std::vector<media::EncodedImage> images;
  images.reserve(files.size());
  for (std::size_t i = 0; i < files.size(); ++i) {
    std::optional<uint64_t> key;
    if (!sample_indices.empty()) {
      key = sample_indices[i];
    } else {
      key = files[i].sample_key(options.seed);
    }
    images.push_back({files[i].name, files[i].span(), key});
  }
  return media::decode_image_batch(images, options, failures);
}

Buffer load_image_batch(std::vector<ImageSource> sources,
                        const media::ImageOptions& options,
                        std::vector<media::ImageFailure>* failures,
                        std::span<const uint64_t> sample_indices) {
  if (!sample_indices.empty() && sample_indices.size() != sources.size()) {
    throw InvalidArgument(
        "load_image_batch: " + std::to_string(sources.size()) +
        " sources but " + std::to_string(sample_indices.size()) +
        " sample indices");
  }
  std::vector<EncodedFile> files;
  std::vector<uint64_t> keys;
  std::vector<std::size_t> index;  // files[k] is sources[index[k]]
  for (std::size_t i = 0; i < sources.size(); ++i) {
    try {
      if (auto* path = std::get_if<std::string>(&sources[i])) {
        files.push_back({*path, feedline::read_file(*path)});
      } else {
        files.push_back(std::move(std::get<EncodedFile>(sources[i])));
      }
      index.push_back(i);
      if (!sample_indices.empty()) keys.push_back(sample_indices[i]);
    } catch (const std::exception& e) {
      failures->push_back({i, e.what()});
    }
  }
  std::vector<media::ImageFailure> decode_failures;
  Buffer batch = decode_files(files, options, &decode_failures, keys);
  for (media::ImageFailure& f : decode_failures)
    failures->push_back({index[f.index], std::move(f.message)});
  return batch;
}

}  // namespace feedline::ops
