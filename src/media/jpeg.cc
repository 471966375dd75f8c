// SPDX-License-Identifier: Apache-2.0
//
// JPEG through libjpeg-turbo's libjpeg API, which can decode part of an
// image: jpeg_crop_scanline() limits the inverse DCT, upsampling and colour
// conversion to the columns asked for (rounded out to iMCU boundaries) and
// jpeg_skip_scanlines() passes over rows with only their entropy decoding.
// The pixels it does produce are the same as a full decode's.
//
// Warnings (a truncated file, a corrupt segment) are errors: a decode
// stops instead of returning an image padded with grey. libjpeg reports
// errors by calling error_exit, which must not return; it longjmps back to
// the setjmp of the step that called into libjpeg. Each such step is a
// plain function whose locals need no destructor, so that the jump skips
// nothing C++ would have to run.

#include <algorithm>
#include <csetjmp>
#include <cstddef>
#include <cstdio>  // jpeglib.h uses FILE and size_t without including them
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include <jpeglib.h>

#include "feedline/base/error.h"
#include "media/codecs.h"
#include "media/jpeg_restart.h"

namespace feedline::media {
namespace {

struct ErrorManager {
  jpeg_error_mgr pub;  // first: libjpeg sees a jpeg_error_mgr*
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

extern "C" void on_error(j_common_ptr info) {
  auto* e = reinterpret_cast<ErrorManager*>(info->err);
  (*info->err->format_message)(info, e->message);
  std::longjmp(e->jump, 1);
}

// Level -1 is a warning (corrupt or truncated data): an error here. Higher
// levels are trace messages, which are dropped.
extern "C" void on_message(j_common_ptr info, int level) {
  if (level < 0) on_error(info);
}

// One decompressor per thread, reused between images: it keeps its memory
// pools and tables, which a new one would allocate again.
struct Decompressor {
  jpeg_decompress_struct info{};
  ErrorManager err{};
  bool created = false;

  Decompressor() {
    info.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = on_error;
    err.pub.emit_message = on_message;
  }
  ~Decompressor() {
    if (created) jpeg_destroy_decompress(&info);
  }
  Decompressor(const Decompressor&) = delete;
  Decompressor& operator=(const Decompressor&) = delete;
};

// Each step returns false after an error, with the message in d->err; the
// decompressor is then reset to take the next image.
bool create(Decompressor* d) {
  if (setjmp(d->err.jump) != 0) return false;
  jpeg_create_decompress(&d->info);
  d->created = true;
  return true;
}

bool read_header(Decompressor* d, const uint8_t* data, std::size_t size) {
  jpeg_decompress_struct* c = &d->info;
  if (setjmp(d->err.jump) != 0) {
    jpeg_abort_decompress(c);
    return false;
  }
  jpeg_mem_src(c, data, static_cast<unsigned long>(size));
  jpeg_read_header(c, TRUE);
  return true;
}

// Starts a decode at 1/scale_denom or, with begin false, only sets the
// output size for one (reading nothing).
bool start(Decompressor* d, unsigned scale_denom, J_COLOR_SPACE space,
           bool begin = true) {
  jpeg_decompress_struct* c = &d->info;
  if (setjmp(d->err.jump) != 0) {
    jpeg_abort_decompress(c);
    return false;
  }
  c->scale_num = 1;
  c->scale_denom = scale_denom;
  c->out_color_space = space;
  if (begin) {
    jpeg_start_decompress(c);
  } else {
    jpeg_calc_output_dimensions(c);
  }
  return true;
}

// Decodes only columns [*x, *x + *w) of the output and an iMCU on either
// side (three on the left for a progressive file); libjpeg widens that to
// whole iMCUs and sets *x and *w to what it decodes. The extra iMCU
// matters: a cropped decode upsamples the chroma at its own left and right
// edges as if they were the image's, which changes the pixels there (by up
// to 3 levels on 4:2:0 photos). A progressive file whose scans stop before
// every coefficient is complete is also smoothed: libjpeg-turbo estimates
// the missing low frequencies of each block from the DC values of the
// blocks up to two away, and at a cropped decode's first block column it
// takes the blocks left of it for copies of that column (on the right it
// reads the image's own blocks). Three iMCUs keep every block the window
// needs (and the chroma sample left of it that upsampling reads) at least
// two blocks in from that column, in every component.
bool crop(Decompressor* d, JDIMENSION* x, JDIMENSION* w) {
  jpeg_decompress_struct* c = &d->info;
  if (setjmp(d->err.jump) != 0) {
    jpeg_abort_decompress(c);
    return false;
  }
  const auto imcu =
      static_cast<JDIMENSION>(c->max_h_samp_factor * c->min_DCT_scaled_size);
  const JDIMENSION left = c->progressive_mode ? 3 * imcu : imcu;
  const JDIMENSION lo = *x > left ? *x - left : 0;
  const JDIMENSION hi = std::min(*x + *w + imcu, c->output_width);
  if (hi - lo < c->output_width) {
    *x = lo;
    *w = hi - lo;
    jpeg_crop_scanline(c, x, w);
  } else {
    *x = 0;
    *w = c->output_width;
  }
  return true;
}

// Reads rows [y, y + h) into out (stride bytes apart) and passes over the
// others, then finishes the image. Rows below the window are skipped up to
// the last one, which is read into `tail` (one row): libjpeg-turbo skips
// rows by entropy-decoding them, except that a skip to the very end stops
// reading, and damage or a truncation there would go unnoticed.
bool read_rows(Decompressor* d, JDIMENSION y, JDIMENSION h, uint8_t* out,
               std::ptrdiff_t stride, uint8_t* tail) {
  jpeg_decompress_struct* c = &d->info;
  if (setjmp(d->err.jump) != 0) {
    jpeg_abort_decompress(c);
    return false;
  }
  if (y > 0) jpeg_skip_scanlines(c, y);
  while (c->output_scanline < y + h) {
    JSAMPROW row =
        out + static_cast<std::ptrdiff_t>(c->output_scanline - y) * stride;
    jpeg_read_scanlines(c, &row, 1);
  }
  if (c->output_scanline + 1 < c->output_height)
    jpeg_skip_scanlines(c, c->output_height - 1 - c->output_scanline);
  if (c->output_scanline < c->output_height) jpeg_read_scanlines(c, &tail, 1);
  jpeg_finish_decompress(c);
  return true;
}

Decompressor& decompressor() {
  thread_local std::unique_ptr<Decompressor> d;
  if (!d) {
    auto fresh = std::make_unique<Decompressor>();
    if (!create(fresh.get())) {
      throw Internal(std::string("libjpeg-turbo: cannot create a decoder: ") +
                     fresh->err.message);
    }
    d = std::move(fresh);
  }
  return *d;
}

// Resets the decompressor for the next image when a C++ exception leaves
// a decode between two libjpeg steps.
struct AbortOnExit {
  Decompressor* d;
  ~AbortOnExit() { jpeg_abort_decompress(&d->info); }
};

[[noreturn]] void fail(const Decompressor& d, std::string_view name,
                       const char* what) {
  throw DecodeError(std::string(name) + ": " + what + ": " + d.err.message);
}

void header(Decompressor& d, std::span<const uint8_t> data,
            std::string_view name) {
  if (!read_header(&d, data.data(), data.size()))
    fail(d, name, "invalid JPEG header");
}

// Pixel memory for one decode, kept by the thread for its next one: a
// fresh allocation of this size comes from mmap and pays a page fault per
// 4 KiB on every image. Larger images get memory of their own, so that a
// thread does not hold on to a huge buffer.
uint8_t* scratch(std::size_t bytes, std::unique_ptr<uint8_t[]>* owned) {
  constexpr std::size_t kKeep = std::size_t{16} << 20;
  if (bytes > kKeep) {
    owned->reset(new uint8_t[bytes]);
    return owned->get();
  }
  thread_local std::unique_ptr<uint8_t[]> memory;
  thread_local std::size_t capacity = 0;
  if (capacity < bytes) {
    memory.reset(new uint8_t[bytes]);
    capacity = bytes;
  }
  return memory.get();
}

// Adobe-style inverted CMYK (what libjpeg returns for CMYK and YCCK JPEGs)
// to RGB, as Pillow converts it.
void cmyk_to_format(const uint8_t* cmyk, std::size_t n, PixelFormat format,
                    uint8_t* out) {
  for (std::size_t i = 0; i < n; ++i) {
    int k = cmyk[4 * i + 3];
    uint8_t r = static_cast<uint8_t>(cmyk[4 * i + 0] * k / 255);
    uint8_t g = static_cast<uint8_t>(cmyk[4 * i + 1] * k / 255);
    uint8_t b = static_cast<uint8_t>(cmyk[4 * i + 2] * k / 255);
    switch (format) {
      case PixelFormat::kRgb:
        out[3 * i] = r, out[3 * i + 1] = g, out[3 * i + 2] = b;
        break;
      case PixelFormat::kBgr:
        out[3 * i] = b, out[3 * i + 1] = g, out[3 * i + 2] = r;
        break;
      case PixelFormat::kGray:
        out[i] =
            static_cast<uint8_t>((r * 299 + g * 587 + b * 114 + 500) / 1000);
        break;
    }
  }
}

// The JPEG cut from a restart-indexed file, kept by the thread for its
// next one like scratch(); CutMemoryTrim lets go of one over 16 MiB.
std::vector<uint8_t>& cut_memory() {
  thread_local std::vector<uint8_t> memory;
  return memory;
}

struct CutMemoryTrim {
  ~CutMemoryTrim() {
    if (cut_memory().capacity() > (std::size_t{16} << 20))
      std::vector<uint8_t>().swap(cut_memory());
  }
};

struct Offset {
  int x = 0;
  int y = 0;
};

// For a restart-indexed file (see media/jpeg_restart.h) and a region
// smaller than the image: replaces the decoder's input by a JPEG of the MCU
// rows and restart intervals that cover the region, moves *region
// into that JPEG's pixels and returns where they start. Otherwise leaves
// both alone and returns (0, 0). Either way the header of what is to be
// decoded has been read. An indexed file whose scan does not match its
// CRC has been damaged since it was written: an error, whatever the
// region, even where libjpeg-turbo would find nothing wrong.
Offset cut_to_region(Decompressor& d, std::span<const uint8_t> data,
                     unsigned denom, Region* region, std::string_view name) {
  thread_local RestartLayout layout;
  if (!parse_restart_layout(data, &layout)) return {};
  if (restart_scan_crc(data, layout) != layout.stored_crc) {
    throw DecodeError(std::string(name) +
                      ": corrupt JPEG data: the scan does not match the "
                      "CRC-32 prepare_jpeg() stored with it");
  }
  const int out_w = static_cast<int>(d.info.output_width);
  const int out_h = static_cast<int>(d.info.output_height);
  if (region->w == out_w && region->h == out_h) return {};
  const int unit = static_cast<int>(denom);
  const int mcu_w = layout.mcu_w / unit;  // in output pixels
  const int mcu_h = layout.mcu_h / unit;
  const int span_w = mcu_w * layout.interval;
  // Fancy upsampling makes the first and last row and column of a decode
  // from the chroma samples at its edge alone: a region that starts or
  // ends that close to where a cut would begin or end takes one MCU row
  // or interval more.
  constexpr int kEdge = 2;
  const int lo_x = std::max(0, region->x - kEdge);
  const int hi_x = std::min(out_w, region->x + region->w + kEdge);
  const int lo_y = std::max(0, region->y - kEdge);
  const int hi_y = std::min(out_h, region->y + region->h + kEdge);
  const int col0 = lo_x / span_w;
  const int col1 =
      std::min(layout.intervals_per_row, (hi_x + span_w - 1) / span_w);
  const int row0 = lo_y / mcu_h;
  const int row1 = std::min(layout.mcu_rows, (hi_y + mcu_h - 1) / mcu_h);
  if (col0 == 0 && row0 == 0 && col1 == layout.intervals_per_row &&
      row1 == layout.mcu_rows) {
    return {};
  }
  std::vector<uint8_t>& cut = cut_memory();
  cut_restart_layout(data, layout, row0, row1, col0, col1, &cut);
  const J_COLOR_SPACE space = d.info.out_color_space;
  jpeg_abort_decompress(&d.info);
  header(d, cut, name);
  if (!start(&d, denom, space, false)) fail(d, name, "corrupt JPEG data");
  const Offset at{col0 * span_w, row0 * mcu_h};
  region->x -= at.x;
  region->y -= at.y;
  return at;
}

}  // namespace

bool is_jpeg(std::span<const uint8_t> data) {
  return data.size() >= 3 && data[0] == 0xFF && data[1] == 0xD8 &&
         data[2] == 0xFF;
}

ImageInfo probe_jpeg(std::span<const uint8_t> data, std::string_view name) {
  Decompressor& d = decompressor();
  header(d, data, name);
  ImageInfo info{static_cast<int>(d.info.image_width),
                 static_cast<int>(d.info.image_height), "jpeg"};
  jpeg_abort_decompress(&d.info);
  return info;
}

DecodedPixels decode_jpeg(std::span<const uint8_t> data, PixelFormat format,
                          unsigned scale_denom, int64_t max_pixels,
                          std::string_view name, const RegionFor& region_for) {
  Decompressor& d = decompressor();
  header(d, data, name);
  AbortOnExit reset{&d};
  const int width = static_cast<int>(d.info.image_width);
  const int height = static_cast<int>(d.info.image_height);
  check_dimensions(width, height, max_pixels, name);
  const unsigned denom = scale_denom;

  const J_COLOR_SPACE source = d.info.jpeg_color_space;
  const bool cmyk = source == JCS_CMYK || source == JCS_YCCK;
  // libjpeg-turbo cannot convert CMYK to RGB itself.
  const J_COLOR_SPACE space = cmyk                           ? JCS_CMYK
                              : format == PixelFormat::kGray ? JCS_GRAYSCALE
                              : format == PixelFormat::kBgr  ? JCS_EXT_BGR
                                                             : JCS_RGB;
  if (!start(&d, denom, space, false)) fail(d, name, "corrupt JPEG data");

  DecodedPixels out;
  out.width = static_cast<int>(d.info.output_width);
  out.height = static_cast<int>(d.info.output_height);
  out.extent_w = static_cast<double>(width) / denom;
  out.extent_h = static_cast<double>(height) / denom;
  out.channels = format == PixelFormat::kGray ? 1 : 3;
  Region want{0, 0, out.width, out.height};
  if (region_for)
    want = region_for(out.width, out.height, out.extent_w, out.extent_h);
  want.x = std::clamp(want.x, 0, out.width - 1);
  want.y = std::clamp(want.y, 0, out.height - 1);
  want.w = std::clamp(want.w, 1, out.width - want.x);
  want.h = std::clamp(want.h, 1, out.height - want.y);

  // (x0, y0): where the decoded stream starts in the image, in output
  // pixels; not 0 when only part of a restart-indexed file is decoded.
  CutMemoryTrim trim;  // before `reset` aborts the decode, which reads no input
  const Offset at = cut_to_region(d, data, denom, &want, name);
  if (!start(&d, denom, space)) fail(d, name, "corrupt JPEG data");
  auto x = static_cast<JDIMENSION>(want.x);
  auto w = static_cast<JDIMENSION>(want.w);
  if (!crop(&d, &x, &w)) fail(d, name, "corrupt JPEG data");
  out.left = static_cast<int>(x) + at.x;
  out.top = want.y + at.y;
  const int decoded_channels = cmyk ? 4 : out.channels;
  const std::ptrdiff_t decoded_stride =
      static_cast<std::ptrdiff_t>(w) * decoded_channels;
  out.stride = static_cast<std::ptrdiff_t>(w) * out.channels;
  // One row more than the window: the tail row read_rows() needs.
  const std::size_t rows = static_cast<std::size_t>(want.h);
  if (!cmyk) {
    uint8_t* pixels = scratch(
        static_cast<std::size_t>(decoded_stride) * (rows + 1), &out.owned);
    if (!read_rows(&d, static_cast<JDIMENSION>(want.y),
                   static_cast<JDIMENSION>(want.h), pixels, decoded_stride,
                   pixels + decoded_stride * want.h)) {
      fail(d, name, "corrupt JPEG data");
    }
    out.data = pixels;
    return out;
  }
  std::unique_ptr<uint8_t[]> tmp(
      new uint8_t[static_cast<std::size_t>(decoded_stride) * (rows + 1)]);
  if (!read_rows(&d, static_cast<JDIMENSION>(want.y),
                 static_cast<JDIMENSION>(want.h), tmp.get(), decoded_stride,
                 tmp.get() + decoded_stride * want.h)) {
    fail(d, name, "corrupt JPEG data");
  }
  const std::size_t n = static_cast<std::size_t>(w) * rows;
  uint8_t* pixels =
      scratch(n * static_cast<std::size_t>(out.channels), &out.owned);
  cmyk_to_format(tmp.get(), n, format, pixels);
  out.data = pixels;
  return out;
}

namespace {

// The restart interval prepare_jpeg() gives an image: the largest divisor
// of the MCUs in a row that cuts the row into at least 8 intervals (or a
// single MCU when none does: a row of a prime number of MCUs), so that
// crops skip columns as well as rows; a row of fewer than 8 MCUs is one
// interval.
// Each interval costs about 4 bytes (its marker, the padding to a byte,
// the first DC coefficient coded in full): 1-2% of a photograph.
unsigned restart_interval_for(const jpeg_decompress_struct& c) {
  const unsigned mcu_w = c.num_components == 1
                             ? 8U
                             : 8U * static_cast<unsigned>(c.max_h_samp_factor);
  const unsigned per_row = (c.image_width + mcu_w - 1) / mcu_w;
  for (unsigned k = std::max(1U, per_row / 8); k > 1; --k) {
    if (per_row % k == 0) return k;
  }
  return per_row / 8 == 0 ? per_row : 1;
}

struct Transcode {
  Decompressor* d;
  jpeg_compress_struct out{};
  bool out_created = false;
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
};

// Copies the DCT coefficients of `data` into one baseline scan with
// restart markers and optimised Huffman tables, keeping APP1-APP13 and COM
// segments and adding a placeholder APP15 restart index.
bool transcode(Transcode* t, const uint8_t* data, std::size_t size) {
  jpeg_decompress_struct* c = &t->d->info;
  jpeg_compress_struct* cc = &t->out;
  if (setjmp(t->d->err.jump) != 0) {
    if (t->out_created) jpeg_abort_compress(cc);
    jpeg_abort_decompress(c);
    return false;
  }
  cc->err = &t->d->err.pub;
  jpeg_create_compress(cc);
  t->out_created = true;
  jpeg_mem_src(c, data, static_cast<unsigned long>(size));
  jpeg_save_markers(c, JPEG_COM, 0xFFFF);
  for (int m = 1; m <= 13; ++m) jpeg_save_markers(c, JPEG_APP0 + m, 0xFFFF);
  jpeg_read_header(c, TRUE);
  jvirt_barray_ptr* coefficients = jpeg_read_coefficients(c);
  jpeg_copy_critical_parameters(c, cc);
  cc->arith_code = FALSE;
  cc->optimize_coding = TRUE;
  cc->restart_interval = restart_interval_for(*c);
  jpeg_mem_dest(cc, &t->buffer, &t->size);
  jpeg_write_coefficients(cc, coefficients);
  JOCTET index[kRestartIndexPayload] = {};
  std::memcpy(index, kRestartIndexId, sizeof(kRestartIndexId));
  index[sizeof(kRestartIndexId)] = kRestartIndexVersion;
  jpeg_write_marker(cc, JPEG_APP0 + 15, index, kRestartIndexPayload);
  for (jpeg_saved_marker_ptr m = c->marker_list; m != nullptr; m = m->next)
    jpeg_write_marker(cc, m->marker, m->data, m->data_length);
  jpeg_finish_compress(cc);
  jpeg_finish_decompress(c);
  return true;
}

}  // namespace

std::vector<uint8_t> prepare_jpeg(std::span<const uint8_t> data,
                                  std::string_view name, int64_t max_pixels) {
  if (!is_jpeg(data)) {
    throw UnsupportedFormat(std::string(name) + ": not a JPEG image");
  }
  // The rewrite holds every DCT coefficient (3 bytes a pixel at 4:2:0):
  // the header's size is checked before any of it is allocated.
  const ImageInfo info = probe_jpeg(data, name);
  check_dimensions(info.width, info.height, max_pixels, name);
  // A decompressor of its own: saving markers would stay switched on in
  // the thread's shared one.
  Decompressor d;
  if (!create(&d)) {
    throw Internal(std::string("libjpeg-turbo: cannot create a decoder: ") +
                   d.err.message);
  }
  Transcode t{&d};
  const bool ok = transcode(&t, data.data(), data.size());
  std::vector<uint8_t> out;
  if (ok) out.assign(t.buffer, t.buffer + t.size);
  std::free(t.buffer);
  if (t.out_created) jpeg_destroy_compress(&t.out);
  if (!ok) fail(d, name, "cannot rewrite JPEG");
  RestartLayout layout;
  if (!parse_restart_layout(out, &layout)) {
    throw UnsupportedFormat(std::string(name) +
                            ": JPEG cannot take a restart index (more than "
                            "4 components or samples of more than 8 bits)");
  }
  const uint32_t crc = restart_scan_crc(out, layout);
  for (int i = 0; i < 4; ++i)
    out[layout.crc_at + i] = static_cast<uint8_t>(crc >> (24 - 8 * i));
  return out;
}

}  // namespace feedline::media
