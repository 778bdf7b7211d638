#!/usr/bin/env python3
# hpack_model.py - lab (session 29): `python3 dev/decode/hpack_model.py`; exact (0 error) when
# the index math holds; a wrong column offset shows errors ~1.6 (checked by editing c0).
# A pure-Python model of head packing's index math (attn_decode.cu with FJ_DEC_HP): Q rows
# packed per CTA (zero outside their head's columns), wide K/V rows read from flat memory with
# the host's strides (heads_kv / HP, head stride x HP), O from the row's own columns; against
# per-head reference attention.
import math, random
random.seed(1)
def softmax_rows(S):
    out = []
    for row in S:
        m = max(row); e = [math.exp(x - m) for x in row]; t = sum(e)
        out.append([x / t for x in e])
    return out
def mm(A, B):   # A [n][k] x B [k][m]
    return [[sum(a * B[k][j] for k, a in enumerate(r)) for j in range(len(B[0]))] for r in A]
def T(A): return [list(x) for x in zip(*A)]
def run(B, HK, G0, HD, HP, QL, SK, MT=16):
    HQ = HK * G0
    q = [[[[random.gauss(0, 1) for _ in range(HD)] for _ in range(HQ)] for _ in range(QL)] for _ in range(B)]
    fk = [random.gauss(0, 1) for _ in range(B * SK * HK * HD)]
    fv = [random.gauss(0, 1) for _ in range(B * SK * HK * HD)]
    rs, bs = HK * HD, SK * HK * HD
    scale = HD ** -0.5
    err = 0.0
    ref = {}
    for b in range(B):
        for h in range(HQ):
            hk = h // G0
            Kh = [fk[b * bs + j * rs + hk * HD:][:HD] for j in range(SK)]
            Vh = [fv[b * bs + j * rs + hk * HD:][:HD] for j in range(SK)]
            Qh = [q[b][i][h] for i in range(QL)]
            P = softmax_rows([[x * scale for x in r] for r in mm(Qh, T(Kh))])
            O = mm(P, Vh)
            for i in range(QL):
                ref[b, i, h] = O[i]
    hkv = HK // HP; G = HQ // hkv; HV = HD * HP; hstride = HD * HP
    nrows = QL * G
    seen = set()
    for b in range(B):
        for hv in range(hkv):
            Kw = [fk[b * bs + j * rs + hv * hstride:][:HV] for j in range(SK)]
            Vw = [fv[b * bs + j * rs + hv * hstride:][:HV] for j in range(SK)]
            for r0 in range(0, nrows, MT):
                rows = list(range(r0, min(r0 + MT, nrows)))
                Qw = []
                for r in rows:
                    i = r // G; h = hv * G + (r - i * G)
                    c0 = (r - i * G) // (G // HP) * HD
                    row = [0.0] * HV; row[c0:c0 + HD] = q[b][i][h]; Qw.append(row)
                P = softmax_rows([[x * scale for x in r] for r in mm(Qw, T(Kw))])
                Ow = mm(P, Vw)
                for k, r in enumerate(rows):
                    i = r // G; h = hv * G + (r - i * G)
                    cs = r % G // (G // HP) * HD
                    o = Ow[k][cs:cs + HD]
                    err = max(err, max(abs(x - y) for x, y in zip(o, ref[b, i, h])))
                    seen.add((b, i, h))
    assert len(seen) == B * QL * HQ, "rows not covered"
    return err
for cfg in [(2, 8, 4, 8, 2, 1, 12), (2, 8, 4, 8, 4, 3, 10), (1, 4, 3, 16, 2, 4, 9),
            (3, 2, 1, 16, 2, 5, 7), (1, 8, 16, 8, 4, 2, 5), (2, 6, 5, 8, 2, 3, 6)]:
    print(cfg, "max err %.2e" % run(*cfg))
