#!/usr/bin/env python3
"""patch_tests.py - the edits prepare.sh makes to flash-attention's test files once
extracted (into the git-ignored carry folder; nothing of theirs is committed here):

  fa3 (hopper/test_flash_attn.py): each loop over (dv, attention_chunk) runs only the pairs
      fajit serves (dv == d, attention_chunk 0; fa_shim.narrow; none: the test is skipped),
      so one unsupported pair does not skip the test's supported one;
  fa2 (tests/test_flash_attn.py): the backward blocks, gated upstream by
      `(d <= MAX_HEADDIM_SM8x or dropout_p == 0) or (is_sm80 or is_sm90)`, also need
      FLASH_ATTENTION_DISABLE_BACKWARD != TRUE (FA3's switch), so the forward checks after
      them run.

Each edit must match its expected number of places, else this fails (upstream changed:
review the edit). Usage: patch_tests.py fa3|fa2 FILE (edited in place)."""
import sys

EDITS = {
    "fa3": [
        ("import pytest\n", "import pytest\nimport fa_shim as _fa_shim\n", 1),
        ("itertools.product(dv_vals, attention_chunk_vals)",
         "_fa_shim.narrow(itertools.product(dv_vals, attention_chunk_vals), d)", 3),
    ],
    "fa2": [
        ("MAX_HEADDIM_SM8x = 192\n",
         "MAX_HEADDIM_SM8x = 192\n_FA_BWD = __import__('os').getenv("
         "'FLASH_ATTENTION_DISABLE_BACKWARD', 'FALSE') != 'TRUE'\n", 1),
        ("(d <= MAX_HEADDIM_SM8x or dropout_p == 0) or (is_sm80 or is_sm90)",
         "_FA_BWD and ((d <= MAX_HEADDIM_SM8x or dropout_p == 0) or (is_sm80 or is_sm90))",
         10),
    ],
}


def main():
    kind, path = sys.argv[1], sys.argv[2]
    text = open(path).read()
    for old, new, count in EDITS[kind]:
        n = text.count(old)
        if n != count:
            sys.exit(f"patch_tests: {path}: {old!r} occurs {n} times, expected {count}")
        text = text.replace(old, new)
    open(path, "w").write(text)
    print(f"patch_tests: {path}: {len(EDITS[kind])} edits")


if __name__ == "__main__":
    main()
