#!/usr/bin/env python3
"""lazy_emu.py - why the gpu suite's fast-kernel bound has an output-rounding term (tests/test_gpu.c).

Emulates, in numpy on the CPU, the sm90 kernel's arithmetic for one head (fp32 scores, 128-key
blocks walked from the last, P rounded to the 16-bit dtype before P V, fp32 O and row sums,
O / l rounded) with and without lazy rescaling (FJ_FA3_LAZY: the base stays while a new maximum
is within 2^8), and test_gpu.c's same-precision reference (P relative to the true row maximum).
For random inputs as the gpu suite draws them (q, k in [-2, 2), v in [-1, 1)) it counts how often
each kernel's max error against float64 exceeds 2x the reference's, and with one output ulp more.
Session 7 (`lazy_emu.py 7 1200`, 1200 cases per line, 8 lines): without lazy never; with it
0-0.75% of cases exceed 2x (its probabilities are rounded relative to another maximum, so its
output rounds to the other neighbour where the reference's did not); none of the 9600 exceed
2x + out_ulp * max |O|, the test's term (a quarter of the term at worst).
usage: python3 lazy_emu.py SEED CASES     (numpy)
"""
import sys

import numpy as np

rng = np.random.default_rng(int(sys.argv[1]))


def rnd(x, dt):
    """x rounded to bf16 (round to nearest even) or fp16, as float32"""
    if dt == 'bf16':
        a = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
        a = ((a + 0x7FFF + ((a >> 16) & 1)) >> 16) << 16
        return a.astype(np.uint32).view(np.float32).astype(np.float32)
    return np.asarray(x, np.float32).astype(np.float16).astype(np.float32)
def case(sq, sk, d, dt, T=8.0):
    q = rnd(rng.uniform(-1, 1, (sq, d)) * 2, dt); k = rnd(rng.uniform(-1, 1, (sk, d)) * 2, dt)
    v = rnd(rng.uniform(-1, 1, (sk, d)), dt)
    scale = d ** -0.5
    s32 = (q @ k.T).astype(np.float32); s = s32.astype(np.float64) * scale
    m = s.max(1, keepdims=True); p = np.exp(s - m)
    exact = (p @ v.astype(np.float64)) / p.sum(1, keepdims=True)
    pf = np.exp(s - m).astype(np.float32); l = pf.astype(np.float64).sum(1, keepdims=True)
    sp = rnd(((rnd(pf, dt).astype(np.float64) @ v.astype(np.float64)) / l).astype(np.float32), dt).astype(np.float64)
    sl2 = np.float32(scale * np.log2(np.e))
    def kern(lazy):
        mx = np.full((sq, 1), -np.inf, np.float32); L = np.zeros((sq, 1), np.float32)
        o = np.zeros((sq, d), np.float32)
        for b in reversed(range((sk + 127) // 128)):
            sb = s32[:, b * 128:(b + 1) * 128]
            mn = np.maximum(mx, sb.max(1, keepdims=True))
            if lazy:
                keep = (mn - mx) * sl2 <= T; mn = np.where(keep, mx, mn)
            alpha = np.exp2(mx * sl2 - mn * sl2).astype(np.float32)
            if lazy: alpha = np.where(keep, np.float32(1), alpha)
            pb = np.exp2(sb * sl2 - mn * sl2).astype(np.float32)
            L = L * alpha + pb.sum(1, keepdims=True, dtype=np.float32)
            o = o * alpha + (rnd(pb, dt) @ v[b * 128:(b + 1) * 128]); mx = mn
        return rnd(o / L, dt).astype(np.float64)
    es = np.abs(sp - exact).max(); mo = np.abs(exact).max()
    u = (1 / 256 if dt == 'bf16' else 1 / 2048) * max(mo, 1e-3)  # test_gpu.c: out_ulp * max |O|
    return es, np.abs(kern(False) - exact).max(), np.abs(kern(True) - exact).max(), u
n = int(sys.argv[2])
for dt in ('f16', 'bf16'):
    for sq, sk, d in ((129, 1000, 64), (64, 300, 128), (200, 2048, 64), (33, 5000, 128)):
        b0 = b1 = c1 = 0; worst = 0
        for i in range(n):
            es, e0, e1, u = case(sq, sk, d, dt)
            b0 += e0 > 2 * es + 1e-6; b1 += e1 > 2 * es + 1e-6; c1 += e1 > 2 * es + u + 1e-6
            worst = max(worst, (e1 - 2 * es) / u)
        print(f"{dt:4s} sq{sq} sk{sk} d{d}: >2x: non-lazy {b0}/{n} lazy {b1}/{n}; lazy > 2x + out_ulp*max|o|: {c1}/{n}; worst excess {worst:.2f} of that term")
