#!/usr/bin/env python3
"""run_fa3.py - GPU harness for attn_fwd_sm90.cu (device machine: PyTorch + libcuda).

Loads the cubins built by build.py through the driver API (ctypes), encodes the TMA
descriptors with the library's own fj_fa3_encode_tmaps (libfa3cfg.so, fa3_config.c) and
the driver's cuTensorMapEncodeTiled, checks every cubin against a float64 reference on fresh
random inputs with poisoned outputs, and times the bench cubins against torch SDPA's FLASH
(FlashAttention-2) and CUDNN backends on the paper shapes.

  python3 run_fa3.py check [--resume]   all cubins; progress in $OUT/check_progress.json so
                                        that a rerun after a trapped kernel skips what ran
  python3 run_fa3.py bench              TFLOP/s table (bf16, 16k tokens, hidden 2048)
"""
import ctypes, itertools, json, math, os, struct, sys, time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
CUBINS = os.environ.get("FA3_CUBINS", os.path.join(HERE, "cubins"))  # FA3_CUBINS: another build
OUTDIR = os.environ.get("OUT") or "/tmp"
REP_MS = os.environ.get("FA3_REP_MS", "40")  # do_bench's rep per sample in ms (bench_attn.py: 300)
if not REP_MS.isdigit() or int(REP_MS) < 1:
    sys.exit(f"run_fa3.py: FA3_REP_MS is a whole number of milliseconds >= 1, got {REP_MS!r}")
REP_MS = int(REP_MS)

cuda = ctypes.CDLL("libcuda.so.1")
cuda.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
cuda.cuModuleLoadData.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
cuda.cuModuleGetFunction.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p]
cuda.cuFuncSetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
cuda.cuFuncGetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
cuda.cuOccupancyMaxActiveClusters.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
cuda.cuOccupancyMaxActiveBlocksPerMultiprocessor.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                                                              ctypes.c_size_t]
MAX_CLUSTERS_SEEN = set()
ENCODE = ctypes.cast(cuda.cuTensorMapEncodeTiled, ctypes.c_void_p)

cfglib = ctypes.CDLL(os.path.join(HERE, "libfa3cfg.so"))

# The dynamic schedule's tile counters (persistent 2): a ring of zeroed ints, 128 bytes apart,
# one per prepared launch (as src/api/dispatch.c does); each launch leaves its counter 0.
CTR_SLOTS = 256
CTR = None
CTR_NEXT = [0]


def counter_slot():
    global CTR
    if CTR is None:
        CTR = torch.zeros(CTR_SLOTS * 32, dtype=torch.int32, device="cuda")
    i = CTR_NEXT[0] % CTR_SLOTS
    CTR_NEXT[0] += 1
    return i


class Cfg(ctypes.Structure):
    _fields_ = [("block_m", ctypes.c_int), ("block_n", ctypes.c_int), ("overlap", ctypes.c_int),
                ("pingpong", ctypes.c_int), ("persistent", ctypes.c_int)]


cfglib.fj_fa3_encode_tmaps.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                       ctypes.c_longlong, ctypes.c_longlong, ctypes.c_void_p,
                                       ctypes.c_char_p, ctypes.c_size_t]


def ck(r, what):
    if r != 0:
        s = ctypes.c_char_p()
        cuda.cuGetErrorName(r, ctypes.byref(s))
        raise RuntimeError(f"{what}: {s.value.decode() if s.value else r}")


class Aligned:
    """n bytes at a 64-byte aligned address (kernel parameter blocks, tensor maps)."""

    def __init__(self, n):
        self.raw = ctypes.create_string_buffer(n + 64)
        self.addr = (ctypes.addressof(self.raw) + 63) & ~63


class Kernel:
    def __init__(self, meta):
        self.meta = meta
        data = open(os.path.join(CUBINS, meta["file"]), "rb").read()
        self.mod = ctypes.c_void_p()
        ck(cuda.cuModuleLoadData(ctypes.byref(self.mod), data), "cuModuleLoadData")
        self.fn = ctypes.c_void_p()
        ck(cuda.cuModuleGetFunction(ctypes.byref(self.fn), self.mod, b"fj_attn_fwd_sm90"), "getfn")
        self.smem, self.threads = meta["smem"], meta["threads"]
        ck(cuda.cuFuncSetAttribute(self.fn, 8, self.smem), "set smem")
        v = ctypes.c_int()
        ck(cuda.cuFuncGetAttribute(ctypes.byref(v), 4, self.fn), "regs")
        self.regs = v.value
        ck(cuda.cuFuncGetAttribute(ctypes.byref(v), 3, self.fn), "local")
        self.local = v.value
        # CTAs per SM the driver will co-schedule (block_m 64 counts on two)
        ck(cuda.cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(v), self.fn, self.threads, self.smem),
           "occupancy")
        self.occ = v.value
        if meta["bm"] == 64 and self.occ < 2:
            print(f"WARNING {meta['file']}: {self.occ} CTA per SM (block_m 64 needs 2)", flush=True)
        self.cfg = Cfg(meta["bm"], meta["bn"], meta["overlap"], meta["pingpong"], meta["persistent"])
        # FJ_FA3_CLUSTER 2 (__cluster_dims__(2, 1, 1) in the cubin): the grid is made here, not by
        # fj_fa3_launch_shape (which knows no cluster yet): x even, the persistent grid at most
        # twice the clusters that can be co-resident (cuOccupancyMaxActiveClusters)
        self.cluster = meta.get("extra", {}).get("FJ_FA3_CLUSTER", 1)
        self.max_clusters = None
        if self.cluster == 2:
            cfg = (ctypes.c_ubyte * 64)()  # CUlaunchConfig: 7 uint, pad, stream, attrs, numAttrs
            struct.pack_into("<7I4xQQI", cfg, 0, 132, 1, 1, self.threads, 1, 1, self.smem, 0, 0, 0)
            n = ctypes.c_int()
            r = cuda.cuOccupancyMaxActiveClusters(ctypes.byref(n), self.fn, ctypes.byref(cfg))
            if r != 0:  # not fatal: the grid variant does not need it
                print(f"cuOccupancyMaxActiveClusters failed ({r}); assuming 66", flush=True)
                n.value = 66
            self.max_clusters = n.value
            if n.value not in MAX_CLUSTERS_SEEN:
                MAX_CLUSTERS_SEEN.add(n.value)
                print(f"cuOccupancyMaxActiveClusters (2 CTAs, {self.smem} B smem, {self.threads} threads):"
                      f" {n.value} ({meta['file']})", flush=True)

    def prepare(self, params, total_q, total_k, num_sms=None):
        """Encodes the tensor maps for `params` (fj_fa3_encode_tmaps), takes the grid from
        fj_fa3_launch_shape and returns a closure that launches."""
        blk = Aligned(192 + 3 * 128 + 8)
        ctypes.memmove(blk.addr, params, 192)
        self.slot = counter_slot()  # the kernel's last argument: int *sched_ctr
        ctypes.c_uint64.from_address(blk.addr + 576).value = CTR.data_ptr() + 128 * self.slot
        g3, th = (ctypes.c_uint * 3)(), ctypes.c_uint()
        cfglib.fj_fa3_launch_shape(ctypes.byref(self.cfg), ctypes.c_void_p(blk.addr), num_sms or NUM_SMS, g3,
                                   ctypes.byref(th))
        assert th.value == self.threads
        grid = tuple(g3)
        if self.cluster == 2:
            batch, hq, _hkv, _hd, sq = struct.unpack_from("<5i", params, 152)
            mb = (sq + self.cfg.block_m - 1) // self.cfg.block_m
            mb += mb & 1  # whole pairs of query blocks (the kernel's sched_of does the same)
            if self.cfg.persistent:
                n = min(num_sms or NUM_SMS, 2 * self.max_clusters)
                n = max(2, n - (n & 1))
                grid = (min(mb * hq * batch, n), 1, 1)
            else:
                grid = (mb, hq, batch)
        why = ctypes.create_string_buffer(256)
        r = cfglib.fj_fa3_encode_tmaps(ENCODE, blk.addr, self.meta["dtype"], ctypes.byref(self.cfg),
                                       total_q, total_k, blk.addr + 192, why, 256)
        if r != 0:
            raise RuntimeError("encode: " + why.value.decode())
        args = (ctypes.c_void_p * 5)(blk.addr, blk.addr + 192, blk.addr + 320, blk.addr + 448, blk.addr + 576)
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        fn, th, sm, L = self.fn, self.threads, self.smem, cuda.cuLaunchKernel

        def go(_keep=(blk, args)):
            return L(fn, grid[0], grid[1], grid[2], th, 1, 1, sm, stream, args, None)
        return go


def pack_params(q, k, v, o, lse, cuq, cuk, strides, batch, hq, hkv, hd, sq, sk, wl, wr, scale):
    p = struct.pack("<7Q12q8i2f", q, k, v, o, lse, cuq, cuk, *strides, batch, hq, hkv, hd, sq, sk,
                    wl, wr, scale, scale * math.log2(math.e))
    assert len(p) == 192
    return p


DT = {0: torch.float16, 1: torch.bfloat16}


def ref_attn(qb, kb, vb, scale, wl, wr, lowp=None):
    """qb [sq,Hq,D], kb/vb [sk,Hkv,D] -> o [sq,Hq,D], lse [Hq,sq]; float64, or matmuls in
    `lowp` with P rounded to it (the same-precision reference)."""
    sq, hq, d = qb.shape
    sk, hkv = kb.shape[0], kb.shape[1]
    g = hq // hkv
    kb = kb.repeat_interleave(g, dim=1)
    vb = vb.repeat_interleave(g, dim=1)
    if lowp is None:
        qb, kb, vb = qb.double(), kb.double(), vb.double()
        s = torch.einsum("ihd,jhd->hij", qb, kb) * scale
    else:
        s = torch.einsum("ihd,jhd->hij", qb, kb).float() * scale
    i = torch.arange(sq, device=qb.device)[:, None]
    j = torch.arange(sk, device=qb.device)[None, :]
    sh = sk - sq
    vis = torch.ones(sq, sk, dtype=torch.bool, device=qb.device)
    if wl >= 0:
        vis &= j >= i + sh - wl
    if wr >= 0:
        vis &= j <= i + sh + wr
    s = s.masked_fill(~vis, float("-inf"))
    m = s.amax(-1, keepdim=True) if sk > 0 else torch.full((hq, sq, 1), float("-inf"), dtype=s.dtype,
                                                             device=s.device)
    ms = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    p = torch.exp(s - ms)
    l = p.sum(-1, keepdim=True)
    if lowp is None:
        o = torch.einsum("hij,jhd->ihd", p, vb)
    else:
        o = torch.einsum("hij,jhd->ihd", p.to(lowp), vb).float()
    o = o / torch.where(l == 0, torch.ones_like(l), l).transpose(0, 1)
    lse = torch.where(l == 0, torch.full_like(l, float("-inf")), ms + torch.log(l)).squeeze(-1)
    return o, lse


def run_case(kern, hq, hkv, seqs, varlen, wl, wr, layout="plain", seed=0, qscale=1.0, sms=None):
    meta = kern.meta
    dt, hd = DT[meta["dtype"]], meta["hd"]
    dev = "cuda"
    g = torch.Generator(device=dev)
    g.manual_seed(seed)
    B = len(seqs)
    scale = 1.0 / math.sqrt(hd)
    sqs, sks = [s[0] for s in seqs], [s[1] for s in seqs]
    max_sq, max_sk = max(sqs), max(sks)
    rnd = lambda *shape: torch.randn(*shape, device=dev, dtype=torch.float32, generator=g).to(dt)
    tq = tk = 0
    if varlen:
        tq, tk = sum(sqs), sum(sks)
        q, k, v = rnd(max(tq, 1), hq, hd), rnd(max(tk, 1), hkv, hd), rnd(max(tk, 1), hkv, hd)
        obuf = torch.full((max(tq, 1), hq, hd + 8), 7.0, device=dev, dtype=dt)
        o = obuf[..., :hd]
        cuq = torch.tensor([0] + list(itertools.accumulate(sqs)), dtype=torch.int32, device=dev)
        cuk = torch.tensor([0] + list(itertools.accumulate(sks)), dtype=torch.int32, device=dev)
        lse = torch.full((hq, max(tq, 1)), float("nan"), device=dev)
        st = [0, q.stride(0), q.stride(1), 0, k.stride(0), k.stride(1), 0, v.stride(0), v.stride(1),
              0, o.stride(0), o.stride(1)]
        ptrs = (q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr(), cuq.data_ptr(),
                cuk.data_ptr())
        sq_p, sk_p = max_sq, max_sk
    else:
        sq_p, sk_p = sqs[0], sks[0]
        if layout == "qkv":  # q, k, v interleaved in one buffer (hq == hkv, sq == sk)
            qkv = rnd(B, sq_p, 3, hq, hd)
            q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        else:
            q, k, v = rnd(B, sq_p, hq, hd), rnd(B, sk_p, hkv, hd), rnd(B, sk_p, hkv, hd)
        obuf = torch.full((B, sq_p, hq, hd + 8), 7.0, device=dev, dtype=dt)
        o = obuf[..., :hd]
        lse = torch.full((B, hq, sq_p), float("nan"), device=dev)
        st = [q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
              v.stride(0), v.stride(1), v.stride(2), o.stride(0), o.stride(1), o.stride(2)]
        ptrs = (q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr(), 0, 0)
    if qscale != 1.0:  # large scores: the running max keeps moving (rescale path)
        q.mul_(qscale)
    o.fill_(float("nan"))  # poison (the pad columns keep 7.0)
    params = pack_params(*ptrs, st, B, hq, hkv, hd, sq_p, sk_p, wl, wr, scale)
    worst = dict(err=0.0, base=0.0, lse_err=0.0, bad=0, err_chunk=[], bad_rows=[])
    if sq_p > 0:
        go = kern.prepare(params, tq, tk, sms)
        ck(go(), "launch")
        torch.cuda.synchronize()
        if meta["persistent"] == 2:  # the kernel must leave its counter 0; a second launch
            worst["ctr_after"] = int(CTR[32 * kern.slot].item())  # on the same counter
            o.fill_(float("nan"))
            lse.fill_(float("nan"))
            ck(go(), "launch 2")
            torch.cuda.synchronize()
            worst["ctr_after"] += int(CTR[32 * kern.slot].item())
            worst["bad"] += 1000 * worst["ctr_after"]
    torch.cuda.synchronize()
    q0 = k0 = 0
    for b, (sq, sk) in enumerate(seqs):
        if varlen:
            qb, kb, vb, ob, lb = q[q0:q0 + sq], k[k0:k0 + sk], v[k0:k0 + sk], o[q0:q0 + sq], lse[:, q0:q0 + sq]
        else:
            qb, kb, vb, ob, lb = q[b], k[b], v[b], o[b], lse[b]
        if sq > 0:
            ro, rl = ref_attn(qb, kb, vb, scale, wl, wr)
            po, _ = ref_attn(qb, kb, vb, scale, wl, wr, lowp=dt)
            of = ob.double()
            nonfin = ~torch.isfinite(of)
            if nonfin.any():
                worst["bad"] += int(nonfin.sum())
                worst["bad_rows"] = sorted(set(torch.nonzero(nonfin)[:, 0].tolist()))[:8]
            d = (of - ro).abs().nan_to_num(1e9)
            err = d.max().item() if of.numel() else 0.0
            if of.numel():
                ec = [round(d[..., c:c + 64].max().item(), 4) for c in range(0, hd, 64)]
                worst["err_chunk"] = [max(a, b_) for a, b_ in itertools.zip_longest(worst["err_chunk"], ec, fillvalue=0)]
            base = (po.double() - ro).abs().max().item() if of.numel() else 0.0
            li, ri = torch.isinf(lb), torch.isinf(rl)
            if not torch.equal(li, ri) or torch.isnan(lb).any():
                worst["bad"] += 1 + int((li != ri).sum()) + int(torch.isnan(lb).sum())
            fin = ~ri & ~li
            le = (lb.double()[fin] - rl[fin]).abs().max().item() if fin.any() else 0.0
            worst["err"] = max(worst["err"], err)
            worst["base"] = max(worst["base"], base)
            worst["lse_err"] = max(worst["lse_err"], le)
        q0 += sq
        k0 += sk
    if not (obuf[..., hd:] == 7.0).all():
        worst["bad"] += 1000000  # wrote outside O
    eps = 2 * (torch.tensor(1.0, dtype=dt) + 0.3 - 0.3 - 1.0).abs().item()
    worst["pass"] = (worst["bad"] == 0 and worst["err"] <= 2 * worst["base"] + eps
                     and worst["lse_err"] <= 2e-3)
    return worst


def mask_windows(mask):
    if mask == 0:
        return [(-1, -1)]
    if mask == 1:
        return [(-1, 0)]
    return [(17, 5), (0, 0), (-1, 40), (200, 3)]


def cases_for(meta):
    mask, full = meta["mask"], meta["role"] == "check"
    out = []
    for wi, (wl, wr) in enumerate(mask_windows(mask)):
        out.append(("gqa", 4, 2, [(197, 197), (197, 197)], False, wl, wr, "plain", 1.0))
        out.append(("hot", 2, 1, [(333, 700)], False, wl, wr, "plain", 8.0))
        if not full or wi > 0:
            if not full:
                out.append(("long", 8, 2, [(1100, 1500)], False, wl, wr, "plain", 1.0))
            continue
        out.append(("long hot", 4, 4, [(900, 2100)], False, wl, wr, "plain", 6.0))
        out.append(("mqa sq<sk", 3, 1, [(64, 300)], False, wl, wr, "plain", 1.0))
        out.append(("sq>sk", 2, 2, [(300, 77)], False, wl, wr, "plain", 1.0))
        out.append(("varlen", 4, 2, [(0, 10), (1, 0), (150, 255), (129, 64), (5, 5)], True, wl, wr, "plain", 1.0))
        out.append(("qkv strided", 2, 2, [(130, 130)] * 2, False, wl, wr, "qkv", 1.0))
        out.append(("tiny", 1, 1, [(1, 1)], False, wl, wr, "plain", 1.0))
        out.append(("exact", 2, 1, [(256, 512)], False, wl, wr, "plain", 1.0))
    if meta["persistent"]:  # more tiles than SMs: several tiles per CTA at the real SM count
        out.append(("many", 16, 4, [(700, 900)] * 3, False, -1, 0 if mask else -1, "plain", 1.0))
        out.append(("many varlen", 16, 8, [(300, 420), (0, 5), (129, 129), (511, 700), (64, 1)] * 2, True,
                    -1, 0 if mask else -1, "plain", 1.0))
    return out


def check(resume):
    prog_path = os.path.join(OUTDIR, "check_progress.json")
    prog = json.load(open(prog_path)) if resume and os.path.exists(prog_path) else dict(done={}, results=[])
    man = [m for m in json.load(open(os.path.join(CUBINS, "manifest.json"))) if m["ok"]]
    # the likeliest to be right first: serial schedule, then the defaults
    man.sort(key=lambda m: (m["persistent"], m["overlap"], m["role"] != "check", m["hd"] != 128, m["file"]))
    t0 = time.time()
    for n, meta in enumerate(man):
        if meta["file"] in prog["done"]:
            continue
        prog["done"][meta["file"]] = "running"  # a crash leaves this mark
        json.dump(prog, open(prog_path, "w"))
        try:
            kern = Kernel(meta)
        except Exception as e:  # noqa
            prog["results"].append(dict(file=meta["file"], case="load", pass_=False, error=str(e)[:200]))
            prog["done"][meta["file"]] = "load error"
            continue
        ok = True
        for ci, c in enumerate(cases_for(meta)):
            name, hq, hkv, seqs, varlen, wl, wr, layout, qs = c
            # persistent kernels run on 5 CTAs (many tiles each), except the "many" cases
            sms = 5 if meta["persistent"] and not name.startswith("many") else None
            try:
                r = run_case(kern, hq, hkv, seqs, varlen, wl, wr, layout, seed=1000 * n + ci, qscale=qs, sms=sms)
            except Exception as e:  # noqa
                r = dict(error=str(e)[:200])
                r["pass"] = False
                prog["results"].append(dict(r, file=meta["file"], case=name, wl=wl, wr=wr))
                ok = False
                print("ERROR", meta["file"], name, r["error"], flush=True)
                if not r["error"].startswith("encode"):  # the context is gone: restart (--resume)
                    prog["done"][meta["file"]] = "crashed in " + name
                    json.dump(prog, open(prog_path, "w"))
                    sys.exit(3)
                break
            r.update(file=meta["file"], case=name, wl=wl, wr=wr, regs=kern.regs, local=kern.local)
            prog["results"].append(r)
            if not r["pass"]:
                ok = False
                print("FAIL", json.dumps(r), flush=True)
        prog["done"][meta["file"]] = "pass" if ok else "fail"
        json.dump(prog, open(prog_path, "w"))
    res = prog["results"]
    crashed = [f for f, s in prog["done"].items() if s == "running"]
    for f in crashed:
        prog["done"][f] = "crashed"
    json.dump(prog, open(prog_path, "w"))
    npass = sum(r["pass"] for r in res)
    print(f"check: {npass}/{len(res)} cases passed over {len(prog['done'])} cubins "
          f"({time.time() - t0:.0f}s this process); crashed: {crashed or 'none'}")
    for k in ("bf16", "f16"):
        rs = [r for r in res if ("d1_" in r["file"]) == (k == "bf16") and "err" in r]
        if rs:
            print(f"  {k}: max |O-ref64| {max(r['err'] for r in rs):.3g} (same-precision ref "
                  f"{max(r['base'] for r in rs):.3g}), max |LSE err| {max(r['lse_err'] for r in rs):.3g}")
    print("  per cubin:", " ".join(f"{f.replace('.cubin', '')}:{s}" for f, s in sorted(prog["done"].items())))
    return 0 if npass == len(res) and not crashed else 1


def bench():
    import triton.testing as tt
    from torch.nn.attention import sdpa_kernel, SDPBackend
    man = [m for m in json.load(open(os.path.join(CUBINS, "manifest.json"))) if m["ok"] and m["role"] == "bench"]
    prog_path = os.path.join(OUTDIR, "check_progress.json")
    status = json.load(open(prog_path))["done"] if os.path.exists(prog_path) else {}
    kerns, rows = {}, []
    SEQS = [int(s) for s in os.environ.get("FA3_SEQS", "512,2048,8192,16384").split(",")]
    for hd in (128, 64, 256):
        for causal in (0, 1):
            # (FJ_FA3_ONESUM 2 computes no row sums: a timing diagnostic that fails its checks)
            cands = [m for m in man if m["hd"] == hd and m["mask"] == causal and
                     (status.get(m["file"]) == "pass" or
                      (m.get("extra", {}).get("FJ_FA3_ONESUM") == 2 and status.get(m["file"]) == "fail"))]
            skip = os.environ.get("FA3_SKIP_EMPTY", os.environ.get("FA3_SKIPEMPTY")) == "1"
            if not cands and skip:
                continue  # no variant of ours for this (hd, mask): CUDNN alone is not timed
            for S in SEQS:
                B, H = 16384 // S, 2048 // hd
                flops = 4 * B * H * S * S * hd / (2 if causal else 1)
                q = torch.randn(B, S, H, hd, device="cuda", dtype=torch.bfloat16)
                k, v = torch.randn_like(q), torch.randn_like(q)
                o = torch.empty_like(q)
                lse = torch.empty(B, H, S, device="cuda")
                qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
                row = dict(hd=hd, causal=causal, S=S, c={})
                st = [q.stride(0), q.stride(1), q.stride(2)] * 3 + [o.stride(0), o.stride(1), o.stride(2)]
                # FA3_REPS rounds, interleaved (every variant once per round); medians kept
                samples, gos, owner, ref = {}, {}, {}, None
                for rnd in range(int(os.environ.get("FA3_REPS", "1"))):
                    for name, be in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
                        if name == "flash" and os.environ.get("FA3_NOFLASH") == "1":
                            samples.setdefault(name, []).append(float("nan"))
                            continue
                        try:
                            with sdpa_kernel(be):
                                f = lambda: torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=bool(causal))
                                ref = f()
                                samples.setdefault(name, []).append(
                                    flops / tt.do_bench(f, warmup=10, rep=REP_MS, return_mode="median") / 1e9)
                        except Exception as e:  # noqa
                            samples.setdefault(name, []).append(float("nan"))
                    # odd rounds walk the variants backwards (no fixed position in the round)
                    for m in (cands if rnd % 2 == 0 else cands[::-1]):
                        if m["file"] not in kerns:
                            kerns[m["file"]] = Kernel(m)
                        kern = kerns[m["file"]]
                        tag = (("B:" if m.get("extra", {}).get("BASE") else "")
                               + ("C2:" if m.get("extra", {}).get("FJ_FA3_CLUSTER") == 2 else "")
                               + ("X:" if m.get("extra", {}).get("FJ_FA3_XTILE") == 1 else "")
                               + ("X0:" if m.get("extra", {}).get("FJ_FA3_XTILE") == 0 else "")
                               + ("G0:" if m.get("extra", {}).get("FJ_FA3_L2GROUP") == 0 else "")
                               + ("O0:" if m.get("extra", {}).get("FJ_FA3_OSMEM") == 0 else "")
                               + ("OQ:" if m.get("extra", {}).get("FJ_FA3_OQ") == 1 else "")
                               + ("C:" if m.get("extra", {}).get("FJ_FA3_OCOPY") == 1 else "")
                               + (f"L{m['extra']['FJ_FA3_L2_BYTES'] >> 20}:" if "FJ_FA3_L2_BYTES" in m.get("extra", {}) else "")
                               + (f"LS{m['extra']['FJ_FA3_L2_BYTES_SHORT'] >> 20}:"
                                  if "FJ_FA3_L2_BYTES_SHORT" in m.get("extra", {}) else "")
                               + (f"PF{m['extra']['FJ_FA3_L2PF']}:" if m.get("extra", {}).get("FJ_FA3_L2PF") else "")
                               + ("".join(f"{k[7]}{v}" for k, v in m.get("extra", {}).items()
                                          if k in ("FJ_FA3_OBUF", "FJ_FA3_FASTEPI")) + ":"
                                  if "FJ_FA3_FASTEPI" in m.get("extra", {}) else "")
                               + (f"S{m['extra']['FJ_FA3_STAGES']}:" if m.get("extra", {}).get("FJ_FA3_STAGES") else "")
                               + (f"E{m['extra']['FJ_FA3_POLYEXP']}:" if "FJ_FA3_POLYEXP" in m.get("extra", {}) else "")
                               + (f"U{m['extra']['FJ_FA3_ONESUM']}:" if "FJ_FA3_ONESUM" in m.get("extra", {}) else "")
                               + ("R1:" if m.get("extra", {}).get("FJ_FA3_ONESUM_ORDER") == 1 else "")
                               + (f"Z{m['extra']['FJ_FA3_LAZY']}:" if m.get("extra", {}).get("FJ_FA3_LAZY") else "")
                               + "".join(f"{k[7:]}{v}:" for k, v in m.get("extra", {}).items()
                                         if k in ("FJ_FA3_UCW", "FJ_FA3_WGSKIP", "FJ_FA3_WGSKIP_PP", "FJ_FA3_HALF", "FJ_FA3_QBUF2", "FJ_FA3_VISEXP", "FJ_FA3_ENDSKIP", "FJ_FA3_QREG", "FJ_FA3_PP3", "FJ_FA3_TILEW", "FJ_FA3_FASTDIV", "FJ_FA3_AHEAD", "FJ_FA3_TAIL", "FJ_FA3_QHALF", "FJ_FA3_POLYEXP", "FJ_FA3_TREEMAX", "FJ_FA3_SPLITSM"))
                               + f"{m['bm']}x{m['bn']}{'' if m['pingpong'] else 'np'}{['', 'P', 'D'][m['persistent']]}")
                        # one tag per cubin: a knob without a tag above would time one cubin twice
                        if owner.setdefault(tag, m["file"]) != m["file"]:
                            raise SystemExit(f"bench: {m['file']} and {owner[tag]} share the tag {tag}")
                        if tag not in gos:
                            prm = pack_params(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr(), 0, 0,
                                              st, B, H, H, hd, S, S, -1, 0 if causal else -1, hd ** -0.5)
                            go = kern.prepare(prm, 0, 0)
                            o.fill_(float("nan"))
                            ck(go(), "launch")
                            torch.cuda.synchronize()
                            err = (o.float() - ref.transpose(1, 2).float()).abs().max().item()
                            gos[tag] = (go, err)
                        go, err = gos[tag]
                        t = tt.do_bench(go, warmup=10, rep=REP_MS, return_mode="median")
                        samples.setdefault(tag, []).append(flops / t / 1e9)
                        row["c"][tag] = dict(err=err, regs=kern.regs)
                med = lambda xs: sorted(xs)[len(xs) // 2]
                row["flash"], row["cudnn"] = med(samples["flash"]), med(samples["cudnn"])
                for tag in row["c"]:
                    row["c"][tag].update(tflops=med(samples[tag]), all=[round(x, 1) for x in samples[tag]])
                row["cudnn_all"] = [round(x, 1) for x in samples["cudnn"]]
                rows.append(row)
                best = max(row["c"].items(), key=lambda kv: kv[1]["tflops"]) if row["c"] else ("-", dict(tflops=0, err=0))
                print(f"hd{hd} {'causal' if causal else 'full  '} S={S:5d} FLASH {row['flash']:6.1f} CUDNN {row['cudnn']:6.1f}  "
                      + " ".join(f"{k}:{v['tflops']:.0f}(e{v['err']:.0e})" for k, v in row["c"].items())
                      + f"  best {best[0]} {best[1]['tflops'] / row['cudnn']:.2f}x cudnn", flush=True)
                del q, k, v, o, lse, ref, gos
    json.dump(rows, open(os.path.join(OUTDIR, "bench.json"), "w"))
    print("\nTFLOP/s, bf16, batch*seqlen = 16k, hidden 2048: CUDNN / before (HEAD kernel + default) / "
          "fajit-sm90 default / best [tile] (default/CUDNN)")
    print("| hdim | mask | " + " | ".join(str(S) for S in SEQS) + " |")
    for hd in (64, 128, 256):
        for causal in (0, 1):
            rs = [r for r in rows if r["hd"] == hd and r["causal"] == causal]
            cells = []
            for r in rs:
                if r["c"]:
                    first = next(iter(r["c"].values()))["tflops"]
                    bse = next((v["tflops"] for k, v in r["c"].items() if k.startswith("B:")), float("nan"))
                    bk, bv = max(r["c"].items(), key=lambda kv: kv[1]["tflops"])
                    cells.append(f"{r['cudnn']:.0f} / {bse:.0f} / {first:.0f} / {bv['tflops']:.0f} [{bk}] "
                                 f"({first / r['cudnn']:.2f}x)")
                else:
                    cells.append(f"{r['flash']:.0f} / {r['cudnn']:.0f} / - / -")
            print(f"| {hd} | {'causal' if causal else 'none'} | " + " | ".join(cells) + " |")


NUM_SMS = 132

if __name__ == "__main__":
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    NUM_SMS = torch.cuda.get_device_properties(0).multi_processor_count
    mode = sys.argv[1] if len(sys.argv) > 1 else "check"
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    if mode == "check":
        sys.exit(check("--resume" in sys.argv))
    elif mode == "bench":
        bench()
    elif mode == "prof":  # run_fa3.py prof FILE S [FILE S ...]: bench shape, 2 launches each (ncu)
        man = {m["file"]: m for m in json.load(open(os.path.join(CUBINS, "manifest.json")))}
        for f, S in zip(sys.argv[2::2], sys.argv[3::2]):
            meta, S = man[f], int(S)
            hd, causal = meta["hd"], meta["mask"]
            B, H = 16384 // S, 2048 // hd
            q = torch.randn(B, S, H, hd, device="cuda", dtype=torch.bfloat16)
            k, v, o = torch.randn_like(q), torch.randn_like(q), torch.empty_like(q)
            lse = torch.empty(B, H, S, device="cuda")
            st = [q.stride(0), q.stride(1), q.stride(2)] * 3 + [o.stride(0), o.stride(1), o.stride(2)]
            prm = pack_params(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr(), 0, 0,
                              st, B, H, H, hd, S, S, -1, 0 if causal else -1, hd ** -0.5)
            go = Kernel(meta).prepare(prm, 0, 0)
            for _ in range(2):
                ck(go(), "launch")
            torch.cuda.synchronize()
            print("prof:", f, S, flush=True)
    elif mode == "one":  # one small case of one cubin (for compute-sanitizer): run_fa3.py one FILE
        meta = next(m for m in json.load(open(os.path.join(CUBINS, "manifest.json"))) if m["file"] == sys.argv[2])
        kern = Kernel(meta)
        wr = 0 if meta["mask"] else -1
        # persistent: 3 CTAs, so each walks several tiles (and both Q buffers)
        r = run_case(kern, 4, 2, [(300, 300), (200, 260)], False, -1, wr, seed=7,
                     sms=3 if meta["persistent"] else None)
        print("one:", sys.argv[2], "PASS" if r["pass"] else "FAIL", json.dumps(r), flush=True)
        sys.exit(0 if r["pass"] else 1)
