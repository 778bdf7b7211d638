"""fi_prefill.py - FlashInfer's paged prefill as a peer for fajit's paged prefill benches.

make_flashinfer_paged_prefill() wraps flashinfer 0.7.2's BatchPrefillWithPagedKVCacheWrapper
(kv_layout "NHD") around tensors in vLLM's paged layout, the layout fajit's benches use:

    q            [total_q, hq, d]                  bf16, CUDA
    k_cache      [num_pages, page_size, hkv, d]    bf16 (v_cache the same shape, own strides
                                                   equal to k_cache's: see below)
    block_table  int32 [batch, max_pages]          page ids of each sequence, in order
    seq_lens_k   int32 [batch]                     keys of each sequence (cached + new)
    cu_seqlens_q int32 [batch + 1]                 query rows of sequence b: [cu[b], cu[b+1])

It turns the block table into FlashInfer's CSR page list on the host (indptr [batch + 1],
indices [sum of pages], last_page_len [batch]: only the first ceil(seq_len / page_size)
entries of a block-table row are used), plans the wrapper once, and returns (fn, status):
fn() is one run() into a preallocated output, returning O [total_q, hq, d]; status says
which backend ran and where its kernels came from (a precompiled "AOT" module, see
dev/decode/fi_carry.sh --aot-prefill and fi_setup.sh, or a JIT build), or why nothing can
run, fn then None: flashinfer not importable, no precompiled module and no nvcc to build
one, plan() or the first call failing. Nothing here raises.

backend: "fa3" (the SM90 kernels, Hopper only), "fa2" (the FA2 kernels, any arch) or "auto"
(flashinfer's choice: fa3 on sm_90a for bf16 and head_dim 64/128/256, else fa2).

Causal masking: FlashInfer's causal is bottom-right aligned when a sequence has fewer query
rows than keys (query row i of a sequence with Lq rows and Lk keys sees keys j <= i + Lk - Lq:
hopper/mainloop_mma.cuh col_limit_right, and the diagonal=(kv_len - qo_len) of
prefill.py's docs) - the chunked-prefill / append convention, as fajit and flash_attn use.

The FA2 path loads a second "independent stride" module (never precompiled here) when
k_cache.stride() != v_cache.stride(); two separately allocated caches of one shape are fine.
"""
import math
import os
import shutil


def _aot_or_jit(fi, backend, dtype, idx_dtype, d):
    """'AOT' when flashinfer finds a precompiled module for this plan, else 'JIT'
    (None when it cannot tell). The same URI as prefill.py get_batch_prefill_module."""
    try:
        from flashinfer.jit import env as jit_env
        from flashinfer.jit.attention.modules import get_batch_prefill_uri
        uri = get_batch_prefill_uri(backend, dtype, dtype, dtype, idx_dtype, d, d, 0,
                                    False, False, False)
        if backend == "fa2":
            uri += "_kv_stride_equal"   # the FA2 "primary" module the paged run uses
        return "AOT" if jit_env.get_aot_artifacts(uri) else "JIT"
    except Exception:   # noqa: BLE001 - only a label
        return None


def _nvcc():
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home and os.access(os.path.join(home, "bin", "nvcc"), os.X_OK):
        return True
    return shutil.which("nvcc") is not None


def block_table_to_csr(block_table, seq_lens_k, page_size):
    """FlashInfer's CSR page list, on the host (int64 CPU tensors): indptr [batch + 1],
    indices [indptr[-1]] (the first ceil(seq_len / page_size) ids of each block-table row),
    last_page_len [batch] (keys on each sequence's last page, 0 for an empty sequence)."""
    import torch
    bt = block_table.to("cpu", torch.int64)
    lens = seq_lens_k.to("cpu", torch.int64)
    b = lens.numel()
    npages = (lens + page_size - 1) // page_size
    indptr = torch.zeros(b + 1, dtype=torch.int64)
    indptr[1:] = torch.cumsum(npages, 0)
    indices = torch.cat([bt[i, :int(npages[i])] for i in range(b)]) if b else bt[:0, 0]
    last = torch.where(npages > 0, lens - (npages - 1) * page_size, torch.zeros_like(lens))
    return indptr, indices, last


def make_flashinfer_paged_prefill(q, k_cache, v_cache, block_table, seq_lens_k,
                                  cu_seqlens_q, page_size, causal, backend="fa3"):
    """(fn, status): fn() runs FlashInfer's paged prefill once and returns O [total_q, hq, d]
    (the same preallocated tensor every call); status names the backend that runs and
    whether its module is precompiled. (None, reason) when it cannot run."""
    try:
        import torch
        import flashinfer
    except Exception as ex:   # noqa: BLE001 - ImportError, or a broken install
        return None, f"flashinfer not importable: {type(ex).__name__}: {str(ex)[:160]}"
    ver = getattr(flashinfer, "__version__", "?")
    try:
        dev = q.device
        hq, d = q.shape[1], q.shape[2]
        hkv = k_cache.shape[2]
        assert k_cache.shape[1] == page_size, "k_cache must be [pages, page_size, hkv, d]"
        indptr, indices, last = block_table_to_csr(block_table, seq_lens_k, page_size)
        i32 = dict(dtype=torch.int32, device=dev)
        qo_indptr = cu_seqlens_q.to(**i32)
        kv_indptr, kv_indices, kv_last = indptr.to(**i32), indices.to(**i32), last.to(**i32)

        # which module plan() will load: with none precompiled it JIT-compiles (nvcc needed)
        be = backend
        if be == "auto":
            from flashinfer.utils import determine_attention_backend
            be = determine_attention_backend(dev, 0, False, False, q.dtype, k_cache.dtype,
                                             head_dim_qk=d, head_dim_vo=d)
        src = _aot_or_jit(flashinfer, be, q.dtype, torch.int32, d)
        if src == "JIT" and not _nvcc():
            return None, (f"flashinfer {ver} {be}: no precompiled module for bf16 head_dim "
                          f"{d} and no nvcc to JIT-compile one")

        # 128 MiB float workspace (split-kv partials), zeroed
        ws = torch.zeros(128 << 20, dtype=torch.uint8, device=dev)
        w = flashinfer.BatchPrefillWithPagedKVCacheWrapper(ws, kv_layout="NHD",
                                                           backend=backend)
        w.plan(qo_indptr, kv_indptr, kv_indices, kv_last, num_qo_heads=hq, num_kv_heads=hkv,
               head_dim_qk=d, page_size=page_size, causal=bool(causal),
               sm_scale=1.0 / math.sqrt(d), q_data_type=q.dtype, kv_data_type=k_cache.dtype)
        o = torch.empty_like(q)
        kv = (k_cache, v_cache)

        def fn():
            return w.run(q, kv, out=o)

        fn()                      # first call: loads lazily built parts, surfaces errors
        torch.cuda.synchronize(dev)
        ran = getattr(w, "_backend", be)
        return fn, (f"flashinfer {ver} BatchPrefillWithPagedKVCacheWrapper backend {ran}"
                    + (f" (asked {backend})" if backend != ran else "")
                    + (f", {src} module" if src else ""))
    except Exception as ex:   # noqa: BLE001 - the peer is optional
        return None, f"flashinfer {ver} {backend}: {type(ex).__name__}: {str(ex)[:200]}"
