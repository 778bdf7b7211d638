"""flash_attn.flash_attn_interface (FlashAttention-2's Python module) on fajit: the names
tests/test_flash_attn.py imports, each translated by fa_shim."""
import fa_shim as S
from fa_shim import unsupported

USE_TRITON_ROCM = False


def _get_block_size_n(device, head_dim, is_dropout, is_causal):
    """Read only to unscramble S_dmask of a dropout run (unsupported)."""
    unsupported("the attention probabilities (S_dmask) of a dropout run")


def _ret(out, lse, return_attn_probs):
    return (out, lse, None) if return_attn_probs else out


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False,
                    window_size=(-1, -1), softcap=0.0, alibi_slopes=None, deterministic=False,
                    return_attn_probs=False):
    S.check_common(q, v, dropout_p=dropout_p)
    out, lse = S.dense(q, k, v, softmax_scale=softmax_scale, causal=causal,
                       window_size=window_size, softcap=softcap, alibi_slopes=alibi_slopes)
    return _ret(out, lse, return_attn_probs)


def flash_attn_kvpacked_func(q, kv, dropout_p=0.0, softmax_scale=None, causal=False,
                             window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                             deterministic=False, return_attn_probs=False):
    out = flash_attn_func(q, kv[:, :, 0], kv[:, :, 1], dropout_p, softmax_scale, causal,
                          window_size, softcap, alibi_slopes, deterministic, True)
    return _ret(S.forward_only(out[0], kv), out[1], return_attn_probs)


def flash_attn_qkvpacked_func(qkv, dropout_p=0.0, softmax_scale=None, causal=False,
                              window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                              deterministic=False, return_attn_probs=False):
    out = flash_attn_func(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], dropout_p, softmax_scale,
                          causal, window_size, softcap, alibi_slopes, deterministic, True)
    return _ret(S.forward_only(out[0], qkv), out[1], return_attn_probs)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           dropout_p=0.0, softmax_scale=None, causal=False,
                           window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                           deterministic=False, return_attn_probs=False, block_table=None):
    S.check_common(q, v, dropout_p=dropout_p)
    out, lse = S.varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                        softmax_scale=softmax_scale, causal=causal, window_size=window_size,
                        softcap=softcap, alibi_slopes=alibi_slopes, block_table=block_table)
    return _ret(out, lse, return_attn_probs)


def flash_attn_varlen_kvpacked_func(q, kv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                    max_seqlen_k, dropout_p=0.0, softmax_scale=None,
                                    causal=False, window_size=(-1, -1), softcap=0.0,
                                    alibi_slopes=None, deterministic=False,
                                    return_attn_probs=False):
    out = flash_attn_varlen_func(q, kv[:, 0], kv[:, 1], cu_seqlens_q, cu_seqlens_k,
                                 max_seqlen_q, max_seqlen_k, dropout_p, softmax_scale, causal,
                                 window_size, softcap, alibi_slopes, deterministic, True)
    return _ret(S.forward_only(out[0], kv), out[1], return_attn_probs)


def flash_attn_varlen_qkvpacked_func(qkv, cu_seqlens, max_seqlen, dropout_p=0.0,
                                     softmax_scale=None, causal=False, window_size=(-1, -1),
                                     softcap=0.0, alibi_slopes=None, deterministic=False,
                                     return_attn_probs=False):
    out = flash_attn_varlen_func(qkv[:, 0], qkv[:, 1], qkv[:, 2], cu_seqlens, cu_seqlens,
                                 max_seqlen, max_seqlen, dropout_p, softmax_scale, causal,
                                 window_size, softcap, alibi_slopes, deterministic, True)
    return _ret(S.forward_only(out[0], qkv), out[1], return_attn_probs)


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None,
                            rotary_sin=None, cache_seqlens=None, cache_batch_idx=None,
                            cache_leftpad=None, block_table=None, softmax_scale=None,
                            causal=False, window_size=(-1, -1), softcap=0.0,
                            rotary_interleaved=True, alibi_slopes=None, num_splits=0,
                            return_softmax_lse=False):
    S.check_common(q, v_cache)
    out, lse = S.kvcache(q, k_cache, v_cache, k=k, v=v, rotary_cos=rotary_cos,
                         cache_seqlens=cache_seqlens, cache_batch_idx=cache_batch_idx,
                         cache_leftpad=cache_leftpad, block_table=block_table,
                         softmax_scale=softmax_scale, causal=causal, window_size=window_size,
                         softcap=softcap, alibi_slopes=alibi_slopes, num_splits=num_splits)
    return (out, lse) if return_softmax_lse else out
