// Image decoding and the evaluation preprocessing of torchvision's ImageNet recipe, for the
// image-folder reader (data/image_folder.h). Definitions, and the measured difference from
// torchvision: docs/image-data.md.
//
//   Image img = decode_image_file("/d/train/cat/x.jpg");      // 8-bit RGB, rows top to bottom
//   preprocess(img, ImageTransform(), out);                    // out: [3, crop, crop] floats
//
// Decoding: JPEG by libjpeg-turbo (grayscale and CMYK/YCCK converted to RGB), PNG by libpng
// (palette, gray, 16-bit and alpha normalised to 8-bit RGB: tRNS/alpha dropped, 16-bit -> high
// byte, as PIL's Image.convert("RGB") does). A corrupt or unreadable file throws aim::Error naming
// the file and the library's message; nothing is skipped silently.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace aim::data {

// 8-bit RGB, interleaved, row-major: pixel (y, x) channel c is rgb[(y * width + x) * 3 + c].
struct Image {
  int64_t height = 0, width = 0;
  std::vector<uint8_t> rgb;
};

// Decoders of an in-memory file; `name` is only used in error messages ("<name>: <message>").
Image decode_jpeg(const uint8_t* data, size_t size, const std::string& name);
Image decode_png(const uint8_t* data, size_t size, const std::string& name);

// Reads and decodes a file. The format is taken from the content (PNG signature, JPEG SOI
// marker 0xFF 0xD8), so a PNG named .JPEG (ImageNet has one) decodes; content that is neither goes
// to the decoder of the file extension (.png -> libpng, otherwise libjpeg), whose error names it.
Image decode_image_file(const std::string& path);

// torchvision's evaluation transform: Resize(resize) of the shorter side (the longer side becomes
// int(resize * long / short), as torchvision computes it), CenterCrop(crop) (offsets rounded
// half to even, as Python's round), ToTensor (x / 255), Normalize(mean, std).
struct ImageTransform {
  int64_t resize = 256, crop = 224;
  std::array<float, 3> mean{0.485f, 0.456f, 0.406f};
  std::array<float, 3> stddev{0.229f, 0.224f, 0.225f};
  // true: PIL's bilinear filter, which widens its triangle to the scale when downsampling
  // (torchvision's default for PIL images); false: plain 2-tap bilinear, half-pixel centres
  // (PyTorch interpolate(mode="bilinear", align_corners=False, antialias=False)).
  bool antialias = true;
};

// Checks resize >= crop >= 1, stddev > 0; throws aim::Error naming the bad field.
void check_transform(const ImageTransform& t);

// Writes the transformed image to out[3 * crop * crop] (channel-major: [3, crop, crop]).
// flip mirrors the crop horizontally (training augmentation).
void preprocess(const Image& img, const ImageTransform& t, float* out, bool flip = false);

}  // namespace aim::data
