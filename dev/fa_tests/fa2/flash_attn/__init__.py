"""flash_attn (FlashAttention-2's package) on fajit: the names tests/test_flash_attn.py
imports. Only the attention functions; see dev/fa_tests/README.md."""
__version__ = "2.8.4+fajit-shim"

from flash_attn.flash_attn_interface import (  # noqa: E402,F401
    flash_attn_func,
    flash_attn_kvpacked_func,
    flash_attn_qkvpacked_func,
    flash_attn_varlen_func,
    flash_attn_varlen_kvpacked_func,
    flash_attn_varlen_qkvpacked_func,
    flash_attn_with_kvcache,
)
