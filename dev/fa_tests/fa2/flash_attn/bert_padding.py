"""flash_attn.bert_padding: flash-attention's own file (pad_input, unpad_input), extracted
by dev/fa_tests/prepare.sh into $FA_TESTS_DIR/fa2/bert_padding.py (never committed here),
loaded in place of this module."""
import os

_path = os.path.join(os.environ.get("FA_TESTS_DIR", "carry/fa_tests"), "fa2",
                     "bert_padding.py")
with open(_path) as _f:
    exec(compile(_f.read(), _path, "exec"))
