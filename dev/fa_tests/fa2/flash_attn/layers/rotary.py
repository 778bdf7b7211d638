"""flash_attn.layers.rotary: fajit applies no rotary embedding, so the tests that use it
(for their reference too) are skipped when they call it."""
from fa_shim import unsupported


def apply_rotary_emb(*args, **kwargs):
    unsupported("rotary embedding (apply_rotary_emb, rotary_cos/rotary_sin)")
