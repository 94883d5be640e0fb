// Runs nqm/montecarlo/cuda/fused.cu on the CPU with CUDA's built-ins emulated. Built by tests/test_cuda_emulation.py with
// g++ and called through ctypes, in two forms:
//   * NQM_EMU_THREADS undefined: one thread per block, blocks one after another; the block reduction reduces to
//     "add my value", and the kernels' arithmetic, counters, chunking and checkpoints run exactly as written;
//   * NQM_EMU_THREADS = n (a multiple of 32): n OS threads per block, with __syncthreads as a block barrier,
//     warp shuffles through a per-warp exchange buffer and a warp barrier, and atomicAdd under a lock, so the
//     block reduction (warp shuffles, shared memory, the partial-warp guard) runs as on a GPU.
#include <barrier>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#define __device__
#define __global__
#define __forceinline__ inline
#define __shared__ static

struct nqm_dim3 {
    unsigned x = 0, y = 0, z = 0;
};
static thread_local nqm_dim3 threadIdx;
static nqm_dim3 blockIdx, blockDim, gridDim;

static inline unsigned __umulhi(unsigned a, unsigned b) {
    return (unsigned)(((unsigned long long)a * (unsigned long long)b) >> 32);
}

#ifdef NQM_EMU_THREADS
static std::barrier<> *block_barrier;
static std::barrier<> *warp_barrier[NQM_EMU_THREADS / 32];
static double exchange[NQM_EMU_THREADS];
static std::mutex atomic_lock;

static inline void __syncthreads() { block_barrier->arrive_and_wait(); }
static inline double __shfl_down_sync(unsigned, double v, int offset) {
    const unsigned lane = threadIdx.x & 31, base = threadIdx.x & ~31u;
    std::barrier<> *warp = warp_barrier[threadIdx.x >> 5];
    exchange[threadIdx.x] = v;
    warp->arrive_and_wait();
    const double out = lane + offset < 32 ? exchange[base + lane + offset] : v;
    warp->arrive_and_wait();  // nobody overwrites exchange[] before every lane has read it
    return out;
}
static inline double atomicAdd(double *p, double v) {
    std::lock_guard<std::mutex> hold(atomic_lock);
    const double old = *p;
    *p += v;
    return old;
}
#else
static inline void __syncthreads() {}
static inline double __shfl_down_sync(unsigned, double, int) { return 0.0; }  // no other lanes
static inline double atomicAdd(double *p, double v) {
    const double old = *p;
    *p += v;
    return old;
}
#endif

static inline void sincospi(double x, double *s, double *c) {
    *s = std::sin(M_PI * x);
    *c = std::cos(M_PI * x);
}
static inline void sincospif(float x, float *s, float *c) {
    *s = (float)std::sin(M_PI * (double)x);
    *c = (float)std::cos(M_PI * (double)x);
}
// Correctly rounded single operations: on the CPU a plain operation is one (no FMA instructions without -mfma).
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fsqrt_rn(float a) { return std::sqrt(a); }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline double __dsqrt_rn(double a) { return std::sqrt(a); }
using std::log;
using std::pow;
using std::sqrt;

#include "fused.cu"

// Launch `body` on a grid of (blocks_x, blocks_y) blocks, one block after another.
template <typename Body> static void launch(unsigned blocks_x, unsigned blocks_y, Body body) {
#ifdef NQM_EMU_THREADS
    const unsigned threads = NQM_EMU_THREADS;
#else
    const unsigned threads = 1;
#endif
    blockDim = {threads, 1, 1};
    gridDim = {blocks_x, blocks_y, 1};
    for (unsigned by = 0; by < blocks_y; ++by) {
        for (unsigned bx = 0; bx < blocks_x; ++bx) {
            blockIdx = {bx, by, 0};
#ifdef NQM_EMU_THREADS
            std::barrier<> block(threads);
            for (unsigned w = 0; w < threads / 32; ++w) warp_barrier[w] = new std::barrier<>(32);
            block_barrier = &block;
            std::vector<std::thread> pool;
            for (unsigned t = 0; t < threads; ++t) pool.emplace_back([t, &body] {
                threadIdx = {t, 0, 0};
                body();
            });
            for (auto &th : pool) th.join();
            for (unsigned w = 0; w < threads / 32; ++w) delete warp_barrier[w];
#else
            threadIdx = {0, 0, 0};
            body();
#endif
        }
    }
}

extern "C" void emu_philox_words(const u32 *counter, const u32 *key, u32 *out, long long n) {
    launch(1, 1, [&] { nqm_philox_words(counter, key, out, n); });
}

extern "C" void emu_init(int f32, void *theta, const double *init_sd, int d, int rows, long long row0, u32 k0, u32 k1) {
    launch(1, 1, [&] {
        if (f32)
            nqm_init_f32((float *)theta, init_sd, d, rows, row0, k0, k1);
        else
            nqm_init_f64((double *)theta, init_sd, d, rows, row0, k0, k1);
    });
}

extern "C" void emu_run(int f32, void *theta, void *aux, void *avg, const void *coef, const void *drift, const double *h,
                        int kind, double gamma, int d, int rows, long long row0, long long t0, long long t1,
                        const long long *ck, int n_ck, double *losses, int ld, u32 k0, u32 k1, unsigned grid_y) {
#ifdef NQM_EMU_THREADS
    const unsigned threads = NQM_EMU_THREADS;
#else
    const unsigned threads = 1;
#endif
    launch((d + threads - 1) / threads, grid_y, [&] {
        if (f32)
            nqm_run_f32((float *)theta, (float *)aux, (float *)avg, (const float *)coef, (const float *)drift, h, kind,
                        (float)gamma, d, rows, row0, t0, t1, ck, n_ck, losses, ld, k0, k1);
        else
            nqm_run_f64((double *)theta, (double *)aux, (double *)avg, (const double *)coef, (const double *)drift, h,
                        kind, gamma, d, rows, row0, t0, t1, ck, n_ck, losses, ld, k0, k1);
    });
}

extern "C" void emu_adaptive_run(int f32, void *theta, void *mom, void *sec, const void *sd, const void *pull,
                                 const double *h, int kind, double lr, double beta1, double beta2, double eps,
                                 double decay, int d, int rows, long long row0, long long t0, long long t1,
                                 const long long *ck, int n_ck, double *losses, int ld, u32 k0, u32 k1,
                                 unsigned grid_y) {
#ifdef NQM_EMU_THREADS
    const unsigned threads = NQM_EMU_THREADS;
#else
    const unsigned threads = 1;
#endif
    launch((d + threads - 1) / threads, grid_y, [&] {
        if (f32)
            nqm_adaptive_run_f32((float *)theta, (float *)mom, (float *)sec, (const float *)sd, (const float *)pull, h,
                                 kind, lr, beta1, beta2, eps, decay, d, rows, row0, t0, t1, ck, n_ck, losses, ld, k0,
                                 k1);
        else
            nqm_adaptive_run_f64((double *)theta, (double *)mom, (double *)sec, (const double *)sd,
                                 (const double *)pull, h, kind, lr, beta1, beta2, eps, decay, d, rows, row0, t0, t1, ck,
                                 n_ck, losses, ld, k0, k1);
    });
}
