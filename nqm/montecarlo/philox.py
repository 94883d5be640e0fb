"""Philox4x32-10, the counter-based generator shared by the CPU and the GPU (Salmon et al. 2011).

A counter-based generator is a keyed bijection: the random words for (seed, replica, coordinate, step) are
computed from those numbers alone, with no state to carry or split. The same function, written once here for
any NumPy-like array module (NumPy or CuPy, elementwise) and once in CUDA (``nqm/montecarlo/cuda/fused.cu``), gives the
same 32-bit words and the same uniforms bit for bit, so a GPU run can be checked against a CPU run on the very
same noise.

Round (Random123's ``philox4x32round``), with M₀ = 0xD2511F53, M₁ = 0xCD9E8D57 and the key bumped by the
Weyl constants (0x9E3779B9, 0xBB67AE85) between rounds:

.. math:: (c_0, c_1, c_2, c_3) \\mapsto (\\mathrm{hi}(M_1 c_2) \\oplus c_1 \\oplus k_0,\\; \\mathrm{lo}(M_1 c_2),\\;
          \\mathrm{hi}(M_0 c_0) \\oplus c_3 \\oplus k_1,\\; \\mathrm{lo}(M_0 c_0)).

nqm's counter layout: ``(block, coordinate, replica, stream)`` with the 64-bit key from the seed. One block
gives 4 words → 4 normals (two Box–Muller pairs), the noise of steps 4·block … 4·block + 3; stream 0 draws
θ₀, stream 1 the gradient noise, stream 2 :mod:`nqm.montecarlo.skip_ahead`'s jumps, stream 3 the single steps of
:func:`nqm.one_step_improvement`. Uniforms are exact: ``(w + ½)·2⁻³²`` in float64 and ``(⌊w/2⁹⌋ + ½)·2⁻²³``
in float32 (24 significant bits), so u ∈ (0, 1) and log u is finite; float32 normals are therefore bounded by
√(2·24 ln 2) ≈ 5.8 (a tail mass of 7·10⁻⁹), float64 ones by 6.8.

Reference: J. K. Salmon, M. A. Moraes, R. O. Dror, D. E. Shaw, "Parallel random numbers: as easy as 1, 2, 3",
SC '11, doi:10.1145/2063384.2063405; test vectors from Random123's ``tests/kat_vectors``.

Example:
    >>> import numpy as np
    >>> words = philox4x32(np, np.zeros((4, 1), np.uint32), np.zeros((2, 1), np.uint32))
    >>> [f"{w:08x}" for w in words[:, 0]]
    ['6627e8d5', 'e169c58d', 'bc57ac4c', '9b00dbd8']
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "philox4x32",
    "seed_key",
    "uniforms",
    "box_muller",
    "normal_block",
    "STREAM_INIT",
    "STREAM_NOISE",
    "STREAM_ONE_STEP",
    "KNOWN_ANSWERS",
]

M0, M1 = 0xD2511F53, 0xCD9E8D57
W0, W1 = 0x9E3779B9, 0xBB67AE85
# Random123's tests/kat_vectors, rows "philox4x32 10": (counter[4], key[2]) -> words[4]; published data, used
# by the tests, the CUDA emulation and bench/gpu_check.py
KNOWN_ANSWERS = (
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
)
STREAM_INIT, STREAM_NOISE, STREAM_ONE_STEP = 0, 1, 3  # stream 2: nqm.montecarlo.skip_ahead's jumps
_LOW = 0xFFFFFFFF


def philox4x32(xp, counter, key, rounds: int = 10):
    """Philox4x32 words: ``counter`` (4, ...) and ``key`` (2, ...) uint32 arrays (broadcast) → (4, ...) uint32.

    ``xp`` is the array module (``numpy`` or ``cupy``); everything is elementwise in uint64 arithmetic.
    """
    c = [xp.asarray(counter[i]).astype(xp.uint64) for i in range(4)]
    k0, k1 = (xp.asarray(key[i]).astype(xp.uint64) for i in range(2))
    low = xp.uint64(_LOW)
    for r in range(rounds):
        if r:
            k0 = (k0 + xp.uint64(W0)) & low
            k1 = (k1 + xp.uint64(W1)) & low
        p0 = c[0] * xp.uint64(M0)  # < 2⁶⁴: an exact 32 × 32 → 64-bit product
        p1 = c[2] * xp.uint64(M1)
        c = [(p1 >> xp.uint64(32)) ^ c[1] ^ k0, p1 & low, (p0 >> xp.uint64(32)) ^ c[3] ^ k1, p0 & low]
    return xp.stack([w.astype(xp.uint32) for w in c])


def seed_key(seed) -> tuple[int, int]:
    """The 64-bit Philox key of a seed (anything ``numpy.random.SeedSequence`` accepts), as two uint32."""
    k = np.random.SeedSequence(seed).generate_state(2, np.uint32)
    return int(k[0]), int(k[1])


def uniforms(xp, words, dtype=np.float64):
    """Exact uniforms in (0, 1): ``(w + ½)·2⁻³²`` (float64) or ``(⌊w/2⁹⌋ + ½)·2⁻²³`` (float32)."""
    if np.dtype(dtype) == np.float64:
        return (words.astype(xp.float64) + 0.5) * 2.0**-32
    return ((words >> xp.uint32(9)).astype(xp.float32) + xp.float32(0.5)) * xp.float32(2.0**-23)


def box_muller(xp, u1, u2):
    """Two independent standard normals from two uniforms: r·cos(2πu₂), r·sin(2πu₂) with r = √(−2 ln u₁).

    The angle is computed in float64 and rounded once (CUDA's ``sincospi`` is within 1–2 ulp of it).
    """
    r = xp.sqrt(-2 * xp.log(u1))
    angle = (2 * np.pi) * u2.astype(xp.float64)
    return r * xp.cos(angle).astype(u1.dtype), r * xp.sin(angle).astype(u1.dtype)


def normal_block(xp, key, block, coordinate, replica, stream: int, dtype=np.float64):
    """The 4 normals of one Philox block for every (replica, coordinate) of the broadcast index arrays.

    Returns a (4, ...) array: entries j = 0…3 are the noise of steps 4·block + j (stream 1) or, at block 0 of
    stream 0, θ₀'s draw (entry 0).
    """
    block = np.uint64(block)
    counter = (
        xp.asarray(block & np.uint64(_LOW), dtype=xp.uint32),
        xp.asarray(coordinate, dtype=xp.uint32),
        xp.asarray(replica, dtype=xp.uint32),
        xp.asarray((block >> np.uint64(32)) << np.uint64(8) | np.uint64(stream), dtype=xp.uint32),
    )
    shape = xp.broadcast(*counter).shape
    counter = [xp.broadcast_to(c, shape) for c in counter]
    words = philox4x32(xp, counter, (np.uint32(key[0]), np.uint32(key[1])))
    u = uniforms(xp, words, dtype)
    z0, z1 = box_muller(xp, u[0], u[1])
    z2, z3 = box_muller(xp, u[2], u[3])
    return xp.stack([z0, z1, z2, z3])
