/* The hand-written C peers of `cargo xtask export-bench`: the loops of the peers script's
 * "gcc C" column (../shared/peers/peers.py, variant c_vec1), written as a C programmer would,
 * compiled as it compiles them: gcc -O3 -march=native -ffast-math -fopenmp-simd, so the
 * transcendentals come from glibc's vector math (libmvec).
 *
 * Every kernel has the peers script's signature: the output, up to three inputs, a scalar
 * output slot and the element count. */
#include <math.h>

#define KP 1.2f
#define KI 0.3f
#define KD 0.05f

void gcc_k4(float *restrict o, const float *restrict a, const float *restrict b,
            const float *restrict c, float *restrict s, long n) {
  (void)c;
  (void)s;
#pragma omp simd
  for (long i = 0; i < n; i++) o[i] = sinf(a[i] * 2.0f) + b[i];
}

void gcc_k5(float *restrict o, const float *restrict a, const float *restrict b,
            const float *restrict c, float *restrict s, long n) {
  (void)c;
  (void)s;
#pragma omp simd
  for (long i = 0; i < n; i++) {
    float x = a[i], y = b[i];
    o[i] = ((x * 1.5f + y) * 0.5f - sinf(x)) * cosf(y) + expf(-x * x);
  }
}

void gcc_k6(float *restrict o, const float *restrict a, const float *restrict b,
            const float *restrict c, float *restrict s, long n) {
  (void)s;
#pragma omp simd
  for (long i = 0; i < n; i++) {
    float v = KP * a[i] + KI * b[i] + KD * c[i];
    o[i] = v > 1.0f ? 1.0f : (v < -1.0f ? -1.0f : v);
  }
}
