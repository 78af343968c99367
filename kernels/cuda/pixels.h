// The pixel decode (pixels.cu): kernels/pixels.h's pixel_value per element, the host decode's
// bits. Plain declarations: launchers.h includes this list into brigade::emu and brigade::cuda
// (include that header, not this file).

// bytes: (n) uint8, y: (n) float. y[i] = bytes[i] / 255 (IEEE division, rounded to nearest).
void decode_pixels(const uint8_t* bytes, float* y, int64_t n, const Stream& stream);
