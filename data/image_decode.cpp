#include "data/image_decode.h"

// Order matters: jpeglib.h uses size_t and FILE without declaring them; jerror.h needs jpeglib.h.
// The comment lines keep clang-format from sorting these includes.
// Each library is optional in the build (CMakeLists.txt): without it, its decoder throws.
#include <cstddef>
#include <cstdio>
//
#ifdef AIM_HAVE_JPEG
#include <jpeglib.h>
//
#include <jerror.h>
#endif
#ifdef AIM_HAVE_PNG
#include <png.h>
#endif

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "tensor/check.h"

namespace aim::data {
namespace {

// Larger images are refused rather than allocated (a corrupt header can claim 65535 x 65535).
constexpr int64_t kMaxPixels = int64_t(1) << 28;

#ifdef AIM_HAVE_JPEG
// ---- JPEG ------------------------------------------------------------------------------------
// libjpeg's default error handler calls exit(); ours longjmps back to the decode function, which
// throws. setjmp/longjmp cannot skip C++ destructors here: the protected function keeps only
// plain data on its own frame, the output vectors live in the caller's.

struct JpegError {
  jpeg_error_mgr mgr;  // first member: libjpeg hands us &mgr as cinfo->err
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_fail(j_common_ptr cinfo) {
  JpegError* e = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  longjmp(e->jump, 1);
}

// Warnings (level -1) mean corrupt data that libjpeg papers over: a truncated file is "Premature
// end of JPEG file" and the missing rows come back grey. Only extraneous bytes before a marker
// lose nothing; every other warning is an error, as PIL raises "image file is truncated".
void jpeg_message(j_common_ptr cinfo, int level) {
  if (level >= 0) return;  // trace output
  if (cinfo->err->msg_code == JWRN_EXTRANEOUS_DATA) {
    cinfo->err->num_warnings++;
    return;
  }
  jpeg_fail(cinfo);
}

// Returns false (message in err->message) on a libjpeg error.
bool jpeg_decode_into(const uint8_t* data, size_t size, Image* img, std::vector<uint8_t>* row,
                      JpegError* err) {
  jpeg_decompress_struct cinfo;
  cinfo.err = jpeg_std_error(&err->mgr);
  err->mgr.error_exit = jpeg_fail;
  err->mgr.emit_message = jpeg_message;
  if (setjmp(err->jump)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  // libjpeg converts YCbCr and grayscale to RGB itself; CMYK (and YCCK, converted to CMYK) we
  // convert below.
  const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  jpeg_calc_output_dimensions(&cinfo);
  if (int64_t(cinfo.output_width) * int64_t(cinfo.output_height) > kMaxPixels) {
    std::snprintf(err->message, sizeof(err->message), "image of %ux%u pixels exceeds 2^28",
                  cinfo.output_width, cinfo.output_height);
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_start_decompress(&cinfo);
  const int64_t H = cinfo.output_height, W = cinfo.output_width;
  img->height = H;
  img->width = W;
  img->rgb.resize(size_t(H * W * 3));
  if (cmyk) row->resize(size_t(W * 4));
  // Adobe CMYK JPEGs (libjpeg writes the marker too) store inverted values, as Photoshop does.
  const bool inverted = cinfo.saw_Adobe_marker;
  while (cinfo.output_scanline < cinfo.output_height) {
    const int64_t y = cinfo.output_scanline;
    uint8_t* out = img->rgb.data() + y * W * 3;
    JSAMPROW p = cmyk ? row->data() : out;
    jpeg_read_scanlines(&cinfo, &p, 1);
    if (cmyk) {
      // With inverted C', K': R = C' * K' / 255 (PIL: (255 - c)(255 - k) / 255).
      for (int64_t x = 0; x < W; ++x) {
        const uint8_t* s = row->data() + x * 4;
        const int k = inverted ? s[3] : 255 - s[3];
        for (int c = 0; c < 3; ++c) {
          const int v = inverted ? s[c] : 255 - s[c];
          out[x * 3 + c] = uint8_t((v * k + 127) / 255);
        }
      }
    }
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return true;
}

#endif  // AIM_HAVE_JPEG

#ifdef AIM_HAVE_PNG
// ---- PNG -------------------------------------------------------------------------------------

struct PngState {
  const uint8_t* data;
  size_t size, pos;
  char message[256];
};

void png_read_bytes(png_structp png, png_bytep out, size_t n) {
  PngState* s = static_cast<PngState*>(png_get_io_ptr(png));
  if (n > s->size - s->pos) png_error(png, "unexpected end of file (truncated PNG)");
  std::memcpy(out, s->data + s->pos, n);
  s->pos += n;
}

void png_fail(png_structp png, png_const_charp msg) {
  PngState* s = static_cast<PngState*>(png_get_error_ptr(png));
  std::snprintf(s->message, sizeof(s->message), "%s", msg);
  png_longjmp(png, 1);
}

// Warnings (an odd iCCP profile, a bad ancillary chunk) leave the pixels intact.
void png_warn(png_structp, png_const_charp) {}

bool png_decode_into(PngState* st, Image* img, std::vector<png_bytep>* rows) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, st, png_fail, png_warn);
  if (!png) {
    std::snprintf(st->message, sizeof(st->message), "png_create_read_struct failed");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    std::snprintf(st->message, sizeof(st->message), "png_create_info_struct failed");
    return false;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  png_set_read_fn(png, st, png_read_bytes);
  png_read_info(png, info);
  const int64_t W = png_get_image_width(png, info), H = png_get_image_height(png, info);
  if (W * H > kMaxPixels) png_error(png, "image exceeds 2^28 pixels");
  const int color = png_get_color_type(png, info), depth = png_get_bit_depth(png, info);
  // To 8-bit RGB as PIL's convert("RGB"): palette expanded, transparency dropped (tRNS is not
  // expanded, alpha stripped), 16-bit -> high byte, gray replicated.
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if ((color & PNG_COLOR_MASK_COLOR) == 0 && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (depth == 16) png_set_strip_16(png);
  // palette_to_rgb also turns a tRNS chunk into alpha: strip that too.
  if ((color & PNG_COLOR_MASK_ALPHA) || png_get_valid(png, info, PNG_INFO_tRNS))
    png_set_strip_alpha(png);
  if ((color & PNG_COLOR_MASK_COLOR) == 0) png_set_gray_to_rgb(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_rowbytes(png, info) != size_t(W * 3)) png_error(png, "unexpected row size");
  img->height = H;
  img->width = W;
  img->rgb.resize(size_t(H * W * 3));
  rows->resize(size_t(H));
  for (int64_t y = 0; y < H; ++y) (*rows)[size_t(y)] = img->rgb.data() + y * W * 3;
  png_read_image(png, rows->data());
  png_read_end(png, nullptr);  // checks the chunks after the image data (and their CRCs)
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

#endif  // AIM_HAVE_PNG

bool has_png_signature(const uint8_t* d, size_t n) {
  static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  return n >= 8 && std::memcmp(d, sig, 8) == 0;
}
bool has_jpeg_soi(const uint8_t* d, size_t n) { return n >= 2 && d[0] == 0xFF && d[1] == 0xD8; }

std::string lower_extension(const std::string& path) {
  const size_t slash = path.find_last_of('/'), dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  std::string e = path.substr(dot);
  for (char& c : e) c = char(std::tolower(static_cast<unsigned char>(c)));
  return e;
}

// ---- Resampling ------------------------------------------------------------------------------

// Taps of one output axis: output o (of the `count` starting at `first`) reads input samples
// start[o] .. start[o] + n[o] - 1 with weights w[o * stride + k].
struct Taps {
  std::vector<int64_t> start, n;
  std::vector<float> w;
  int64_t stride = 0;
};

// Resize an axis of `in` samples to `out`, keeping outputs [first, first + count).
Taps axis_taps(int64_t in, int64_t out, int64_t first, int64_t count, bool antialias) {
  Taps t;
  t.start.resize(size_t(count));
  t.n.resize(size_t(count));
  const double scale = double(in) / double(out);
  if (antialias) {
    // PIL's precompute_coeffs for the bilinear (triangle, support 1) filter.
    const double filterscale = std::max(scale, 1.0), support = filterscale;
    t.stride = int64_t(std::ceil(support)) * 2 + 1;
    t.w.assign(size_t(count * t.stride), 0.f);
    for (int64_t o = 0; o < count; ++o) {
      const double center = (double(first + o) + 0.5) * scale;
      const int64_t lo = std::max<int64_t>(int64_t(center - support + 0.5), 0);
      const int64_t hi = std::min<int64_t>(int64_t(center + support + 0.5), in);
      double sum = 0.0, w[64];
      AIM_CHECK(hi - lo <= 64 && hi - lo <= t.stride, "resize: ", hi - lo, " taps");
      for (int64_t x = lo; x < hi; ++x) {
        const double d = std::fabs((double(x) - center + 0.5) / filterscale);
        w[x - lo] = d < 1.0 ? 1.0 - d : 0.0;
        sum += w[x - lo];
      }
      t.start[size_t(o)] = lo;
      t.n[size_t(o)] = hi - lo;
      for (int64_t k = 0; k < hi - lo; ++k)
        t.w[size_t(o * t.stride + k)] = float(sum != 0.0 ? w[k] / sum : 0.0);
    }
  } else {
    // PyTorch's upsample_bilinear2d, align_corners=False: source = (o + 0.5) * scale - 0.5.
    t.stride = 2;
    t.w.assign(size_t(count * 2), 0.f);
    for (int64_t o = 0; o < count; ++o) {
      const double src = std::max((double(first + o) + 0.5) * scale - 0.5, 0.0);
      const int64_t i0 = std::min<int64_t>(int64_t(src), in - 1);
      const double l1 = i0 < in - 1 ? src - double(i0) : 0.0;
      t.start[size_t(o)] = i0;
      t.n[size_t(o)] = i0 < in - 1 ? 2 : 1;
      t.w[size_t(o * 2)] = float(1.0 - l1);
      t.w[size_t(o * 2 + 1)] = float(l1);
    }
  }
  return t;
}

}  // namespace

Image decode_jpeg(const uint8_t* data, size_t size, const std::string& name) {
#ifndef AIM_HAVE_JPEG
  (void)data;
  (void)size;
  AIM_FAIL(name,
           ": cannot decode JPEG: aim was built without libjpeg (CMake found no JPEG; "
           "install libjpeg-turbo's headers, Debian libjpeg62-turbo-dev or Ubuntu "
           "libjpeg-turbo8-dev, and reconfigure)");
#else
  Image img;
  std::vector<uint8_t> row;
  JpegError err;
  err.message[0] = 0;
  if (!jpeg_decode_into(data, size, &img, &row, &err)) AIM_FAIL(name, ": ", err.message);
  return img;
#endif
}

Image decode_png(const uint8_t* data, size_t size, const std::string& name) {
#ifndef AIM_HAVE_PNG
  (void)data;
  (void)size;
  AIM_FAIL(name,
           ": cannot decode PNG: aim was built without libpng (CMake found no PNG; install "
           "libpng-dev and reconfigure)");
#else
  Image img;
  std::vector<png_bytep> rows;
  PngState st{data, size, 0, {0}};
  if (!png_decode_into(&st, &img, &rows)) AIM_FAIL(name, ": ", st.message);
  return img;
#endif
}

Image decode_image_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) AIM_FAIL(path, ": cannot open (", std::strerror(errno), ")");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) AIM_FAIL(path, ": read error (", std::strerror(errno), ")");
  const uint8_t* d = bytes.data();
  const size_t n = bytes.size();
  if (has_png_signature(d, n)) return decode_png(d, n, path);
  if (has_jpeg_soi(d, n)) return decode_jpeg(d, n, path);
  if (lower_extension(path) == ".png") return decode_png(d, n, path);
  return decode_jpeg(d, n, path);
}

void check_transform(const ImageTransform& t) {
  AIM_CHECK(t.crop >= 1 && t.resize >= t.crop, "image transform: need resize >= crop >= 1, got ",
            "resize ", t.resize, ", crop ", t.crop);
  for (int c = 0; c < 3; ++c)
    AIM_CHECK(t.stddev[size_t(c)] > 0.f, "image transform: stddev must be > 0, got stddev[", c,
              "] = ", t.stddev[size_t(c)]);
}

void preprocess(const Image& img, const ImageTransform& t, float* out, bool flip) {
  check_transform(t);
  const int64_t H = img.height, W = img.width, C = t.crop;
  AIM_CHECK(H >= 1 && W >= 1 && int64_t(img.rgb.size()) == H * W * 3, "preprocess: bad image ", H,
            "x", W, " with ", img.rgb.size(), " bytes");
  // torchvision: short side -> resize, long side -> int(resize * long / short).
  int64_t rh, rw;
  if (W <= H) {
    rw = t.resize;
    rh = int64_t(double(t.resize * H) / double(W));
  } else {
    rh = t.resize;
    rw = int64_t(double(t.resize * W) / double(H));
  }
  // CenterCrop: int(round((size - crop) / 2.0)), Python's round = half to even.
  const int64_t top = int64_t(std::nearbyint(double(rh - C) / 2.0));
  const int64_t left = int64_t(std::nearbyint(double(rw - C) / 2.0));
  const Taps ty = axis_taps(H, rh, top, C, t.antialias);
  const Taps tx = axis_taps(W, rw, left, C, t.antialias);
  const int64_t r0 = ty.start.front();
  const int64_t r1 = ty.start.back() + ty.n.back();  // rows [r0, r1) are read
  // Horizontal pass first (as PIL), over the needed rows only: tmp [r1 - r0, C, 3].
  std::vector<float> tmp(size_t((r1 - r0) * C * 3));
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* src = img.rgb.data() + r * W * 3;
    float* dst = tmp.data() + (r - r0) * C * 3;
    for (int64_t x = 0; x < C; ++x) {
      const float* w = tx.w.data() + x * tx.stride;
      const uint8_t* s = src + tx.start[size_t(x)] * 3;
      float a0 = 0.f, a1 = 0.f, a2 = 0.f;
      for (int64_t k = 0; k < tx.n[size_t(x)]; ++k) {
        a0 += w[k] * float(s[k * 3]);
        a1 += w[k] * float(s[k * 3 + 1]);
        a2 += w[k] * float(s[k * 3 + 2]);
      }
      dst[x * 3] = a0;
      dst[x * 3 + 1] = a1;
      dst[x * 3 + 2] = a2;
    }
  }
  // Vertical pass, then ToTensor and Normalize: (v / 255 - mean) / std.
  float scale[3], shift[3];
  for (int c = 0; c < 3; ++c) {
    scale[c] = 1.f / (255.f * t.stddev[size_t(c)]);
    shift[c] = -t.mean[size_t(c)] / t.stddev[size_t(c)];
  }
  for (int64_t y = 0; y < C; ++y) {
    const float* w = ty.w.data() + y * ty.stride;
    const int64_t s0 = ty.start[size_t(y)] - r0, n = ty.n[size_t(y)];
    for (int64_t x = 0; x < C; ++x) {
      float a[3] = {0.f, 0.f, 0.f};
      for (int64_t k = 0; k < n; ++k) {
        const float* s = tmp.data() + ((s0 + k) * C + x) * 3;
        a[0] += w[k] * s[0];
        a[1] += w[k] * s[1];
        a[2] += w[k] * s[2];
      }
      const int64_t ox = flip ? C - 1 - x : x;
      for (int c = 0; c < 3; ++c) out[(c * C + y) * C + ox] = a[c] * scale[c] + shift[c];
    }
  }
}

}  // namespace aim::data
