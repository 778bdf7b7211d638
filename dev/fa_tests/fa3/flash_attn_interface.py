"""flash_attn_interface (FlashAttention-3's Python module, hopper/) on fajit: the names and
signatures hopper/test_flash_attn.py imports, each translated by fa_shim."""
import fa_shim as S
from fa_shim import unsupported


def flash_attn_func(q, k, v, softmax_scale=None, causal=False, qv=None, q_descale=None,
                    k_descale=None, v_descale=None, window_size=(-1, -1), attention_chunk=0,
                    softcap=0.0, num_splits=1, pack_gqa=None, deterministic=False,
                    sm_margin=0, return_attn_probs=False):
    S.check_common(q, v, qv=qv, attention_chunk=attention_chunk)
    out, lse = S.dense(q, k, v, softmax_scale=softmax_scale, causal=causal,
                       window_size=window_size, softcap=softcap, k_descale=k_descale,
                       v_descale=v_descale)
    return (out, lse) if return_attn_probs else out


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           seqused_q=None, seqused_k=None, softmax_scale=None, causal=False,
                           qv=None, q_descale=None, k_descale=None, v_descale=None,
                           window_size=(-1, -1), attention_chunk=0, softcap=0.0,
                           num_splits=1, pack_gqa=None, deterministic=False, sm_margin=0,
                           return_attn_probs=False):
    S.check_common(q, v, qv=qv, attention_chunk=attention_chunk)
    out, lse = S.varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                        softmax_scale=softmax_scale, causal=causal, window_size=window_size,
                        softcap=softcap, seqused_q=seqused_q, seqused_k=seqused_k,
                        num_splits=num_splits, q_descale=q_descale, k_descale=k_descale,
                        v_descale=v_descale)
    return (out, lse) if return_attn_probs else out


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, qv=None, rotary_cos=None,
                            rotary_sin=None, cache_seqlens=None, cache_batch_idx=None,
                            cache_leftpad=None, page_table=None, cu_seqlens_q=None,
                            cu_seqlens_k_new=None, max_seqlen_q=None, rotary_seqlens=None,
                            q_descale=None, k_descale=None, v_descale=None,
                            softmax_scale=None, causal=False, window_size=(-1, -1),
                            attention_chunk=0, softcap=0.0, rotary_interleaved=True,
                            scheduler_metadata=None, num_splits=0, pack_gqa=None,
                            sm_margin=0, return_softmax_lse=False):
    S.check_common(q, v_cache, qv=qv, attention_chunk=attention_chunk)
    out, lse = S.kvcache(q, k_cache, v_cache, k=k, v=v, rotary_cos=rotary_cos,
                         cache_seqlens=cache_seqlens, cache_batch_idx=cache_batch_idx,
                         cache_leftpad=cache_leftpad, block_table=page_table,
                         cu_seqlens_q=cu_seqlens_q, max_seqlen_q=max_seqlen_q,
                         softmax_scale=softmax_scale, causal=causal, window_size=window_size,
                         softcap=softcap, num_splits=num_splits, k_descale=k_descale,
                         v_descale=v_descale)
    return (out, lse) if return_softmax_lse else out


def flash_attn_combine(out_partial, lse_partial, out=None, out_dtype=None):
    unsupported("flash_attn_combine (fajit.merge_attention merges two 16-bit results, not "
                "N float32 partials)")


def get_scheduler_metadata(*args, **kwargs):
    """fajit plans on the host per call: no metadata (the calls take None)."""
    return None
