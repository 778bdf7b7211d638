/* presets.c - built-in specs of common models, written in the spec format itself
 * (docs/spec-format.md) so that they go through the same parser and checks as a file.
 * Attention shapes from each model's published config.json. */
#include <stddef.h>
#include <strings.h>

#include "spec.h"

/* Prefill at 512..16k tokens and decode (one query) against 512..16k keys, batch 1. */
#define LENGTHS "prefill = 512..16k\n" \
                "decode = 512..16k\n" \
                "batch = 1\n"

static const struct {
    const char *name;
    const char *text;
} presets[] = {
    { "llama-3-8b",
      "[model llama-3-8b]\n"
      "dtype = bf16\nhead_dim = 128\nheads_q = 32\nheads_kv = 8\nmask = causal\n" LENGTHS },
    { "llama-3-70b",
      "[model llama-3-70b]\n"
      "dtype = bf16\nhead_dim = 128\nheads_q = 64\nheads_kv = 8\nmask = causal\n" LENGTHS },
    { "qwen2.5-7b",
      "[model qwen2.5-7b]\n"
      "dtype = bf16\nhead_dim = 128\nheads_q = 28\nheads_kv = 4\nmask = causal\n" LENGTHS },
    /* Mistral-7B v0.1: causal attention over the last 4096 keys (sliding_window). */
    { "mistral-7b",
      "[model mistral-7b]\n"
      "dtype = bf16\nhead_dim = 128\nheads_q = 32\nheads_kv = 8\nmask = window\n"
      "window = 4096\n" LENGTHS },
    /* Serving Llama-3-8B from a paged cache (16-key pages, as vLLM's default): decode steps
     * at batch 1 and 64, speculative decode of 4 and 8 tokens, and a chunked-prefill chunk
     * of 512 tokens over a 4k prefix. */
    { "llama-3-8b-paged",
      "[model llama-3-8b-paged]\n"
      "dtype = bf16\nhead_dim = 128\nheads_q = 32\nheads_kv = 8\nmask = causal\n"
      "page_size = 16\ndecode = 1k..32k\nshapes = 4:4k, 8:4k, 512:4608\nbatch = 1, 64\n" },
    /* The same serving shapes for Llama-3.2-1B: head_dim 64, whose decode tiles differ from
     * head_dim 128's on sm_90 (src/families/decode_rules.c). */
    { "llama-3.2-1b-paged",
      "[model llama-3.2-1b-paged]\n"
      "dtype = bf16\nhead_dim = 64\nheads_q = 32\nheads_kv = 8\nmask = causal\n"
      "page_size = 16\ndecode = 1k..32k\nshapes = 4:4k, 8:4k, 512:4608\nbatch = 1, 64\n" },
    /* GPT-OSS 20B and 120B (one attention shape): 64 query and 8 KV heads of 64 columns,
     * an attention sink per head on every layer, and layers alternating between a
     * 128-token sliding window (window_left 127: the key itself and 127 before it) and
     * full causal attention; served from a paged cache. */
    { "gpt-oss",
      "[model gpt-oss-sliding]\n"
      "dtype = bf16\nhead_dim = 64\nheads_q = 64\nheads_kv = 8\nmask = window\n"
      "window = 127\nsinks = yes\n"
      "page_size = 16\ndecode = 1k..32k\nshapes = 4:4k, 512:4608\nbatch = 1, 64\n"
      "[model gpt-oss-full]\n"
      "dtype = bf16\nhead_dim = 64\nheads_q = 64\nheads_kv = 8\nmask = causal\n"
      "sinks = yes\n"
      "page_size = 16\ndecode = 1k..32k\nshapes = 4:4k, 512:4608\nbatch = 1, 64\n" },
    /* DeepSeek-V2/V3 prefill through MLA as vLLM serves it on FA3: the latent K/V expanded
     * per head, Q and K of 192 columns (128 without position + 64 rotary), V and O of 128,
     * 128 query heads and as many K/V heads (config.json: qk_nope_head_dim 128,
     * qk_rope_head_dim 64, v_head_dim 128, num_attention_heads 128). Its decode runs on the
     * latent cache (576 / 512 columns), which no family serves. */
    { "deepseek-mla",
      "[model deepseek-mla]\n"
      "dtype = bf16\nhead_dim = 192\nhead_dim_v = 128\nheads_q = 128\nheads_kv = 128\n"
      "mask = causal\nprefill = 512..16k\nbatch = 1\n" },
};

const char *fj_spec_preset_name(int i)
{
    return i >= 0 && (size_t)i < sizeof presets / sizeof presets[0] ? presets[i].name : NULL;
}

const char *fj_spec_preset_text(const char *name)
{
    for (size_t i = 0; name && i < sizeof presets / sizeof presets[0]; i++)
        if (strcasecmp(presets[i].name, name) == 0)
            return presets[i].text;
    return NULL;
}
