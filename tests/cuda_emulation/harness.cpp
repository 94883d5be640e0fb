// Runs nqm/cuda/fused.cu on the CPU: one thread per block, blocks one after another, CUDA's built-ins
// emulated below. With one thread per block a warp has one lane, so the block reduction reduces to "add my
// value" and the kernels' arithmetic, counters, chunking and checkpoint logic run exactly as written.
// Built by tests/test_cuda_emulation.py with g++ and called through ctypes.
#include <cmath>
#include <cstdint>

#define __device__
#define __global__
#define __forceinline__ inline
#define __shared__ static

struct nqm_dim3 {
    unsigned x = 0, y = 0, z = 0;
};
static nqm_dim3 threadIdx, blockIdx, blockDim, gridDim;

static inline unsigned __umulhi(unsigned a, unsigned b) {
    return (unsigned)(((unsigned long long)a * (unsigned long long)b) >> 32);
}
static inline double __shfl_down_sync(unsigned, double, int) { return 0.0; }  // no other lanes
static inline void __syncthreads() {}
static inline double atomicAdd(double *p, double v) {
    const double old = *p;
    *p += v;
    return old;
}
static inline void sincospi(double x, double *s, double *c) {
    *s = std::sin(M_PI * x);
    *c = std::cos(M_PI * x);
}
static inline void sincospif(float x, float *s, float *c) {
    *s = (float)std::sin(M_PI * (double)x);
    *c = (float)std::cos(M_PI * (double)x);
}
using std::log;
using std::sqrt;

#include "fused.cu"

static void one_thread_per_block(unsigned blocks_x, unsigned blocks_y) {
    blockDim.x = blockDim.y = blockDim.z = 1;
    gridDim.x = blocks_x;
    gridDim.y = blocks_y;
    gridDim.z = 1;
    threadIdx.x = threadIdx.y = threadIdx.z = 0;
}

extern "C" void emu_philox_words(const u32 *counter, const u32 *key, u32 *out, long long n) {
    one_thread_per_block(1, 1);
    blockIdx.x = blockIdx.y = 0;
    nqm_philox_words(counter, key, out, n);
}

extern "C" void emu_init(int f32, void *theta, const double *init_sd, int d, int rows, long long row0, u32 k0, u32 k1) {
    one_thread_per_block(1, 1);
    blockIdx.x = blockIdx.y = 0;
    if (f32)
        nqm_init_f32((float *)theta, init_sd, d, rows, row0, k0, k1);
    else
        nqm_init_f64((double *)theta, init_sd, d, rows, row0, k0, k1);
}

extern "C" void emu_run(int f32, void *theta, void *prev, void *avg, const void *a, const void *s, const double *h,
                        double beta, double gamma, int d, int rows, long long row0, long long t0, long long t1,
                        const long long *ck, int n_ck, double *losses, int ld, u32 k0, u32 k1) {
    one_thread_per_block((unsigned)d, 1);
    blockIdx.y = 0;
    for (unsigned bx = 0; bx < (unsigned)d; ++bx) {
        blockIdx.x = bx;
        if (f32)
            nqm_run_f32((float *)theta, (float *)prev, (float *)avg, (const float *)a, (const float *)s, h, (float)beta,
                        (float)gamma, d, rows, row0, t0, t1, ck, n_ck, losses, ld, k0, k1);
        else
            nqm_run_f64((double *)theta, (double *)prev, (double *)avg, (const double *)a, (const double *)s, h, beta,
                        gamma, d, rows, row0, t0, t1, ck, n_ck, losses, ld, k0, k1);
    }
}
