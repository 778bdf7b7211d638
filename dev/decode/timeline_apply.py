#!/usr/bin/env python3
"""timeline_apply.py - lab: puts per-CTA %globaltimer stamps into a copy of the
decode kernel, for dev/decode/timeline.py. Run in a scratch worktree, never on main:

    git worktree add /tmp/tl HEAD && cd /tmp/tl && python3 <main>/dev/decode/timeline_apply.py
    meson setup build -Dbuildtype=debugoptimized && ninja -C build libfajit.so.0.1.0

Edits src/kernels_src/attn_decode.cu (FJ_DEC_TIMELINE: thread 0 of each split CTA writes
stamp k to ((u64 *)p.err)[cta * 16 + k]) and src/families/decode.c (the preamble defines
FJ_DEC_TIMELINE 1; p.err = the address in the environment variable FJ_LAB_TL when set).
Stamps: 0 entry, 1 after griddepcontrol.wait, 2 first page ids asked for, 3 seqused_k
arrived, 4 tile 0's ids clipped, 5 the prologue issued (loop start), 6 tile 0 landed, 7
loop end, 8 epilogue 1, 9 partials stored, 10 the merger known (arrival barrier) or the
cluster's first barrier passed, 11 merge: partials staged (last CTA), 12 merge done, 13 the
cluster's second barrier passed, 15 smid | ntiles << 16 (anchors updated in session 23 for
the cluster merge). Fails loudly when an anchor
is gone (the kernel moved on: adapt the anchors).
--twice: the last CTA merges twice (the same result; stamp 11 is then the second pass's
staging, 13 its end): how much of the first pass is its code's first run."""
import sys

KU = "src/kernels_src/attn_decode.cu"
DC = "src/families/decode.c"
TL = r'''
#if FJ_DEC_TIMELINE   /* lab: per-CTA globaltimer stamps into p.err ([cta][16] u64) */
#define DEC_TL_AT(k) (((unsigned long long *)p.err)[(((fj_i64)blockIdx.z * gridDim.y + \
        blockIdx.y) * gridDim.x + blockIdx.x) * 16 + (k)])
#define DEC_TL(k) do { if (threadIdx.x == 0 && p.err) { unsigned long long t_; \
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t_) :: "memory"); DEC_TL_AT(k) = t_; } } while (0)
#else
#define DEC_TL(k) do { } while (0)
#endif
'''
KEDITS = [  # (anchor, text before it, text after it)
    ("#define DEC_STAGE_MAX 49152\n", "", TL),
    ("    fj_pdl_wait();      /* (launched", "    DEC_TL(0);\n", ""),
    ("    fj_pdl_trigger();   /* the next kernel", "    DEC_TL(1);\n", ""),
    ("    const dec_seq sq = dec_seq_of(p, b);\n", "    DEC_TL(2);\n", ""),
    ("    /* The CTA's key range [kb, ke)",
     "#if FJ_DEC_TIMELINE\n    if (threadIdx.x == 0 && p.err) {\n        if (len == -0x7ffffff0)"
     " asm volatile(\"trap;\");   /* (waits for len) */\n        DEC_TL(3);\n    }\n#endif\n", ""),
    ("#pragma unroll\n        for (int s = 0; s < STAGES - 1; ++s) {\n            if (s < ntiles)\n"
     "                dec_issue(", "        DEC_TL(4);\n", ""),
    ("    for (int t = 0; t < ntiles; ++t) {\n", "    DEC_TL(5);\n", ""),
    ("        __syncthreads();  /* tile t landed for all; every warp is done with tile t - 1 */\n",
     "", "        if (t == 0) DEC_TL(6);\n"),
    ("    __syncthreads();  /* every warp is done with Q and K/V: the epilogue overlays them */\n",
     "", "    DEC_TL(7);\n"),
    ("\n    /* Epilogue 2: merge the WN warps", "    DEC_TL(8);\n", ""),
    ("#if DEC_CLUSTER\n    if (CL_FITS && clu) {   /* (the host sets it only with splits > 1) */\n",
     "    DEC_TL(9);\n#if FJ_DEC_TIMELINE\n    if (threadIdx.x == 0 && p.err) {\n"
     "        unsigned smid_;\n        asm volatile(\"mov.u32 %0, %%smid;\" : \"=r\"(smid_));\n"
     "        DEC_TL_AT(15) = smid_ | ((unsigned long long)ntiles << 16);\n    }\n#endif\n", ""),
    ("        dec_cluster_sync();   /* every split's partials are in its shared memory */\n", "",
     "        DEC_TL(10);\n"),
    ("        dec_cluster_sync();   /* no CTA leaves while another reads its partials */\n",
     "        DEC_TL(12);\n", "        DEC_TL(13);\n"),
    ("        if (__syncthreads_or(last)) {", "        DEC_TL(10);\n", ""),
    ("    /* A warp per row (shuffle trees)", "    DEC_TL(11);\n", ""),
    ("                dec_merge_direct(p, b, so, r0, rows, hk, G, tid);\n", "",
     "            __syncthreads();\n            DEC_TL(12);\n"),
]
DEDITS = [
    ('"#define FJ_DEC_CHECKED %d\\n%s%s",', "", ""),
    ("    p->err = env->report;\n", "",
     "    { const char *tl_ = getenv(\"FJ_LAB_TL\");\n"
     "      if (tl_ && *tl_) p->err = (uintptr_t)strtoull(tl_, NULL, 0); }\n"),
    ("#include <stdio.h>\n", "", "#include <stdlib.h>\n"),
]


def edit(path, edits):
    s = open(path).read()
    for anchor, before, after in edits:
        n = s.count(anchor)
        if n != 1:
            sys.exit(f"{path}: anchor found {n} times: {anchor!r}")
        s = s.replace(anchor, before + anchor + after)
    return s


k = edit(KU, KEDITS)
# mark the point after either merge (the else branch is one statement)
k = k.replace("            else\n                dec_merge_direct(p, b, so, r0, rows, hk, G, tid);\n"
              "            __syncthreads();\n",
              "            else\n                dec_merge_direct(p, b, so, r0, rows, hk, G, tid);\n"
              "            __syncthreads();   /* (lab: both merges end here) */\n")
if "--twice" in sys.argv[1:]:
    a = "            const int rows = min(MT, nrows - r0);\n"
    b = "            __syncthreads();   /* (lab: both merges end here) */\n            DEC_TL(12);\n"
    assert k.count(a) == 1 and k.count(b) == 1
    k = k.replace(a, a + "#pragma unroll 1\n            for (int rep_ = 0; rep_ < 2; ++rep_) {   /* (lab: twice) */\n")
    k = k.replace(b, "            __syncthreads();\n            if (rep_) DEC_TL(13); else DEC_TL(12);\n"
                  "            }\n")
d = edit(DC, DEDITS).replace('"#define FJ_DEC_CHECKED %d\\n%s%s",',
                             '"#define FJ_DEC_CHECKED %d\\n#define FJ_DEC_TIMELINE 1\\n%s%s",')
open(KU, "w").write(k)
open(DC, "w").write(d)
print("timeline stamps in", KU, "and", DC)
