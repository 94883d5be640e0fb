// nqm's CUDA kernels: Philox4x32-10 and the fused multi-step simulation of diagonal noisy quadratics.
//
// Compiled at run time by CuPy (cupy.RawModule, NVRTC) and, in the tests, by nvcc for sm_90 to check that it
// builds without register spills. Its semantics are mirrored line by line in NumPy by nqm/montecarlo/counter.py; the
// random words agree bit for bit with nqm/montecarlo/philox.py (counter layout: block, coordinate, replica, stream).
//
// One thread owns one (replica, coordinate) and keeps θ (and the optimiser's second state, θ̃ for the EMA) in
// registers for a whole chunk of steps; it draws its own noise (one Philox call per 4 steps, Box–Muller) and
// adds ½hθ² of its coordinate into the replica's loss at each checkpoint through a block reduction in double.
// Steps are uniform across a block, so the reductions' __syncthreads are reached by every thread.

typedef unsigned int u32;
typedef unsigned long long u64;

#define NQM_M0 0xD2511F53u
#define NQM_M1 0xCD9E8D57u
#define NQM_W0 0x9E3779B9u
#define NQM_W1 0xBB67AE85u

__device__ __forceinline__ void nqm_philox(u32 c0, u32 c1, u32 c2, u32 c3, u32 k0, u32 k1, u32 &o0, u32 &o1,
                                           u32 &o2, u32 &o3) {
#pragma unroll
    for (int r = 0; r < 10; ++r) {
        if (r) {
            k0 += NQM_W0;
            k1 += NQM_W1;
        }
        const u32 hi0 = __umulhi(NQM_M0, c0), lo0 = NQM_M0 * c0;
        const u32 hi1 = __umulhi(NQM_M1, c2), lo1 = NQM_M1 * c2;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
    }
    o0 = c0;
    o1 = c1;
    o2 = c2;
    o3 = c3;
}

// Exact uniforms in (0, 1) and Box–Muller pairs, per precision (see nqm/montecarlo/philox.py).
template <typename T> struct Real;

template <> struct Real<float> {
    static __device__ __forceinline__ float uniform(u32 w) { return ((float)(w >> 9) + 0.5f) * 1.1920928955078125e-07f; }
    static __device__ __forceinline__ void pair(u32 a, u32 b, float &z0, float &z1) {
        const float r = sqrtf(-2.0f * logf(uniform(a)));
        float s, c;
        sincospif(2.0f * uniform(b), &s, &c);
        z0 = r * c;
        z1 = r * s;
    }
};

template <> struct Real<double> {
    static __device__ __forceinline__ double uniform(u32 w) { return ((double)w + 0.5) * 2.3283064365386963e-10; }
    static __device__ __forceinline__ void pair(u32 a, u32 b, double &z0, double &z1) {
        const double r = sqrt(-2.0 * log(uniform(a)));
        double s, c;
        sincospi(2.0 * uniform(b), &s, &c);
        z0 = r * c;
        z1 = r * s;
    }
};

template <typename T>
__device__ __forceinline__ void nqm_normals(u64 block, u32 coord, u32 replica, u32 stream, u32 k0, u32 k1, T &z0,
                                            T &z1, T &z2, T &z3) {
    u32 w0, w1, w2, w3;
    nqm_philox((u32)block, coord, replica, stream | ((u32)(block >> 32) << 8), k0, k1, w0, w1, w2, w3);
    Real<T>::pair(w0, w1, z0, z1);
    Real<T>::pair(w2, w3, z2, z3);
}

// Sum of v over the block, added to *out by one thread (v in double: the loss is accumulated in float64).
__device__ __forceinline__ void nqm_block_add(double v, double *out) {
    __shared__ double partial[32];
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < (int)((blockDim.x + 31) >> 5) ? partial[lane] : 0.0;
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
        if (lane == 0) atomicAdd(out, v);
    }
    __syncthreads();  // partial[] is reused by the next checkpoint
}

// Words of explicit counters (n of them): for the known-answer tests and the GPU check.
extern "C" __global__ void nqm_philox_words(const u32 *counter, const u32 *key, u32 *out, long long n) {
    for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < n; j += (long long)gridDim.x * blockDim.x) {
        nqm_philox(counter[4 * j], counter[4 * j + 1], counter[4 * j + 2], counter[4 * j + 3], key[2 * j],
                   key[2 * j + 1], out[4 * j], out[4 * j + 1], out[4 * j + 2], out[4 * j + 3]);
    }
}

// θ₀ ~ N(0, init_var): entry 0 of block 0 of stream 0, for rows [row0, row0 + rows) of the replicas.
template <typename T>
__device__ void nqm_init(T *theta, const double *init_sd, int d, int rows, long long row0, u32 k0, u32 k1) {
    const long long n = (long long)rows * d;
    for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < n; j += (long long)gridDim.x * blockDim.x) {
        const int i = (int)(j % d);
        const long long r = j / d;
        T z0, z1, z2, z3;
        nqm_normals<T>(0ull, (u32)i, (u32)(row0 + r), 0u, k0, k1, z0, z1, z2, z3);
        theta[j] = (T)((double)z0 * init_sd[i]);
    }
}

extern "C" __global__ void nqm_init_f32(float *theta, const double *init_sd, int d, int rows, long long row0, u32 k0,
                                        u32 k1) {
    nqm_init<float>(theta, init_sd, d, rows, row0, k0, k1);
}

extern "C" __global__ void nqm_init_f64(double *theta, const double *init_sd, int d, int rows, long long row0, u32 k0,
                                        u32 k1) {
    nqm_init<double>(theta, init_sd, d, rows, row0, k0, k1);
}

// Steps t0+1 … t1 on rows [row0, row0 + rows). Per coordinate the optimiser's recurrence (nqm/montecarlo/recurrence.py):
// coef holds six rows of d values, f00, f01, f10, f11, u0, u1 (u = g·σ, the noise gains times ε·p·√(c/B)):
//   kind 0 (one state, SGD):         x ← f00·x + u0·z
//   kind 1 (shift, heavy ball):      x ← f00·x + f01·y + u0·z,  y ← x       (y = θ_{t-1}; θ_{-1} = θ₀: v₀ = 0)
//   kind 2 (two states, Nesterov):   x ← f00·x + f01·y + u0·z,  y ← f10·x + f11·y + u1·z   (from the old x, y)
//   weight decay's pull (drift != nullptr: an optimum θ* ≠ 0, x = θ − θ*):  x ← x + drift, after the update
//   EMA (avg != nullptr):            x̃ ← γ(x̃ − x) + x
// Checkpoints ck[0 … n_ck) lie in [t0, t1]; the loss ½Σh x² (x = x̃ with EMA, else x) of row r at ck[k] is added
// to losses[r * ld + k]. State arrays are row-major (rows, d); 64-bit indices throughout.
template <typename T>
__device__ void nqm_run(T *theta, T *aux, T *avg, const T *coef, const T *drift, const double *h, int kind, T gamma,
                        int d, int rows, long long row0, long long t0, long long t1, const long long *ck, int n_ck,
                        double *losses, int ld, u32 k0, u32 k1) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const bool valid = i < d;
    const T f00 = valid ? coef[i] : (T)0, f01 = valid ? coef[d + i] : (T)0;
    const T f10 = valid ? coef[2 * d + i] : (T)0, f11 = valid ? coef[3 * d + i] : (T)0;
    const T u0 = valid ? coef[4 * d + i] : (T)0, u1 = valid ? coef[5 * d + i] : (T)0;
    const T pull = (drift != nullptr && valid) ? drift[i] : (T)0;
    const double hi = valid ? h[i] : 0.0;
    const bool two = aux != nullptr, ema = avg != nullptr, pulled = drift != nullptr;
    for (int r = blockIdx.y; r < rows; r += gridDim.y) {
        const long long at = (long long)r * d + i;
        T x = valid ? theta[at] : (T)0;
        T y = (two && valid) ? aux[at] : (T)0;
        T xa = (ema && valid) ? avg[at] : (T)0;
        const u32 replica = (u32)(row0 + r);
        int k = 0;
        if (k < n_ck && ck[k] == t0) {
            const double v = (double)(ema ? xa : x);
            nqm_block_add(0.5 * hi * v * v, losses + (long long)r * ld + k);
            ++k;
        }
        long long t = t0;
        while (t < t1) {
            const long long block = t >> 2;
            T z[4];
            nqm_normals<T>((u64)block, (u32)i, replica, 1u, k0, k1, z[0], z[1], z[2], z[3]);
#pragma unroll
            for (int j = 0; j < 4; ++j) {  // unrolled: z[j] stays in a register
                if (4 * block + j < t || t >= t1) continue;
                if (kind == 0) {
                    x = f00 * x + u0 * z[j];
                } else {
                    const T next = f00 * x + f01 * y + u0 * z[j];
                    y = kind == 1 ? x : f10 * x + f11 * y + u1 * z[j];
                    x = next;
                }
                if (pulled) x += pull;
                if (ema) xa = gamma * (xa - x) + x;
                ++t;
                if (k < n_ck && ck[k] == t) {
                    const double v = (double)(ema ? xa : x);
                    nqm_block_add(0.5 * hi * v * v, losses + (long long)r * ld + k);
                    ++k;
                }
            }
        }
        if (valid) {
            theta[at] = x;
            if (two) aux[at] = y;
            if (ema) avg[at] = xa;
        }
    }
}

extern "C" __global__ void nqm_run_f32(float *theta, float *aux, float *avg, const float *coef, const float *drift,
                                       const double *h, int kind, float gamma, int d, int rows, long long row0,
                                       long long t0, long long t1, const long long *ck, int n_ck, double *losses,
                                       int ld, u32 k0, u32 k1) {
    nqm_run<float>(theta, aux, avg, coef, drift, h, kind, gamma, d, rows, row0, t0, t1, ck, n_ck, losses, ld, k0, k1);
}

extern "C" __global__ void nqm_run_f64(double *theta, double *aux, double *avg, const double *coef, const double *drift,
                                       const double *h, int kind, double gamma, int d, int rows, long long row0,
                                       long long t0, long long t1, const long long *ck, int n_ck, double *losses,
                                       int ld, u32 k0, u32 k1) {
    nqm_run<double>(theta, aux, avg, coef, drift, h, kind, gamma, d, rows, row0, t0, t1, ck, n_ck, losses, ld, k0, k1);
}

// Optimisers that are not linear, elementwise (nqm/optim.py: SignSgd, Signum, RmsProp, Adam/AdamW), on diagonal
// problems. One thread owns one (replica, coordinate) and keeps θ, m and v in registers; the gradient is
// g = h·x + sd·z with sd = √(c/B). The arithmetic is each optimiser's `apply` in nqm/optim.py, operation by
// operation and rounded at each one (the _rn intrinsics forbid fused multiply-adds), so that the kernel and its
// NumPy mirror (nqm/montecarlo/counter.py, which runs `apply` itself) take the same signs:
//   kind 0 sign descent:  x ← x − lr·sign(g)
//   kind 1 signum:        m ← (m − g)·β₁ + g,  x ← x − lr·sign(m)
//   kind 2 RMSprop:       v ← (v − g²)·β₂ + g²,  x ← x − (g/(√v + eps))·lr
//   kind 3 Adam(W):       x ← x·decay;  m, v as above;  x ← x − (m/(√v + eps·√b₂))·(lr·√b₂/b₁),  b_i = 1 − β_iᵘ
//   then AdamW's pull (pull != nullptr: θ* ≠ 0, x = θ − θ*):  x ← x + pull
// at update u = t + 1. Scalars arrive in double and are rounded to T where the mirror's NumPy does so.
template <typename T> struct Exact;

template <> struct Exact<float> {
    static __device__ __forceinline__ float add(float a, float b) { return __fadd_rn(a, b); }
    static __device__ __forceinline__ float sub(float a, float b) { return __fsub_rn(a, b); }
    static __device__ __forceinline__ float mul(float a, float b) { return __fmul_rn(a, b); }
    static __device__ __forceinline__ float div(float a, float b) { return __fdiv_rn(a, b); }
    static __device__ __forceinline__ float root(float a) { return __fsqrt_rn(a); }
};

template <> struct Exact<double> {
    static __device__ __forceinline__ double add(double a, double b) { return __dadd_rn(a, b); }
    static __device__ __forceinline__ double sub(double a, double b) { return __dsub_rn(a, b); }
    static __device__ __forceinline__ double mul(double a, double b) { return __dmul_rn(a, b); }
    static __device__ __forceinline__ double div(double a, double b) { return __ddiv_rn(a, b); }
    static __device__ __forceinline__ double root(double a) { return __dsqrt_rn(a); }
};

template <typename T> __device__ __forceinline__ T nqm_sign(T a) { return (T)((a > (T)0) - (a < (T)0)); }

template <typename T>
__device__ void nqm_adaptive_run(T *theta, T *mom, T *sec, const T *sd, const T *pull, const double *h, int kind,
                                 double lr, double beta1, double beta2, double eps, double decay, int d, int rows,
                                 long long row0, long long t0, long long t1, const long long *ck, int n_ck,
                                 double *losses, int ld, u32 k0, u32 k1) {
    typedef Exact<T> E;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const bool valid = i < d;
    const T hx = valid ? (T)h[i] : (T)0, s = valid ? sd[i] : (T)0;
    const T shift = (pull != nullptr && valid) ? pull[i] : (T)0;
    const double hi = valid ? h[i] : 0.0;
    const T lr_t = (T)lr, b1 = (T)beta1, b2 = (T)beta2, eps_t = (T)eps, decay_t = (T)decay;
    for (int r = blockIdx.y; r < rows; r += gridDim.y) {
        const long long at = (long long)r * d + i;
        T x = valid ? theta[at] : (T)0;
        T m = (mom != nullptr && valid) ? mom[at] : (T)0;
        T v = (sec != nullptr && valid) ? sec[at] : (T)0;
        const u32 replica = (u32)(row0 + r);
        int k = 0;
        if (k < n_ck && ck[k] == t0) {
            nqm_block_add(0.5 * hi * (double)x * (double)x, losses + (long long)r * ld + k);
            ++k;
        }
        long long t = t0;
        while (t < t1) {
            const long long block = t >> 2;
            T z[4];
            nqm_normals<T>((u64)block, (u32)i, replica, 1u, k0, k1, z[0], z[1], z[2], z[3]);
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                if (4 * block + j < t || t >= t1) continue;
                const T g = E::add(E::mul(z[j], s), E::mul(x, hx));
                if (kind == 0) {
                    x = E::sub(x, E::mul(nqm_sign(g), lr_t));
                } else if (kind == 1) {
                    m = E::add(E::mul(E::sub(m, g), b1), g);
                    x = E::sub(x, E::mul(nqm_sign(m), lr_t));
                } else if (kind == 2) {
                    const T g2 = E::mul(g, g);
                    v = E::add(E::mul(E::sub(v, g2), b2), g2);
                    x = E::sub(x, E::mul(E::div(g, E::add(E::root(v), eps_t)), lr_t));
                } else {
                    const double u = (double)(t + 1), root_b2 = sqrt(1.0 - pow(beta2, u));
                    if (decay != 1.0) x = E::mul(x, decay_t);
                    m = E::add(E::mul(E::sub(m, g), b1), g);
                    const T g2 = E::mul(g, g);
                    v = E::add(E::mul(E::sub(v, g2), b2), g2);
                    const T den = E::add(E::root(v), (T)(eps * root_b2));
                    x = E::sub(x, E::mul(E::div(m, den), (T)(lr * root_b2 / (1.0 - pow(beta1, u)))));
                }
                if (pull != nullptr) x = E::add(x, shift);
                ++t;
                if (k < n_ck && ck[k] == t) {
                    nqm_block_add(0.5 * hi * (double)x * (double)x, losses + (long long)r * ld + k);
                    ++k;
                }
            }
        }
        if (valid) {
            theta[at] = x;
            if (mom != nullptr) mom[at] = m;
            if (sec != nullptr) sec[at] = v;
        }
    }
}

extern "C" __global__ void nqm_adaptive_run_f32(float *theta, float *mom, float *sec, const float *sd, const float *pull,
                                                const double *h, int kind, double lr, double beta1, double beta2,
                                                double eps, double decay, int d, int rows, long long row0,
                                                long long t0, long long t1, const long long *ck, int n_ck,
                                                double *losses, int ld, u32 k0, u32 k1) {
    nqm_adaptive_run<float>(theta, mom, sec, sd, pull, h, kind, lr, beta1, beta2, eps, decay, d, rows, row0, t0, t1,
                            ck, n_ck, losses, ld, k0, k1);
}

extern "C" __global__ void nqm_adaptive_run_f64(double *theta, double *mom, double *sec, const double *sd,
                                                const double *pull, const double *h, int kind, double lr,
                                                double beta1, double beta2, double eps, double decay, int d, int rows,
                                                long long row0, long long t0, long long t1, const long long *ck,
                                                int n_ck, double *losses, int ld, u32 k0, u32 k1) {
    nqm_adaptive_run<double>(theta, mom, sec, sd, pull, h, kind, lr, beta1, beta2, eps, decay, d, rows, row0, t0, t1,
                             ck, n_ck, losses, ld, k0, k1);
}
