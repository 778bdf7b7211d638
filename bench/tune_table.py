#!/usr/bin/env python3
"""tune_table.py - every tuning row of a fajit cache with every candidate's time: what
`fajit-tune tune` measured, not only the winner. usage: tune_table.py CACHE_DIR"""
import json, sqlite3, sys

db = sqlite3.connect(f"file:{sys.argv[1]}/kernels.db?mode=ro", uri=True)
rows = db.execute("SELECT signature, bucket, config, time_ms, table_json FROM tuning "
                  "ORDER BY signature, bucket")
for sig, bucket, cfg, ms, tj in rows:
    t = json.loads(tj or "[]")
    best = {e["config"]: e["median_ms"] for e in t if e["ok"]}
    cells = " ".join(f"{c.replace('fa3:', '')}={v:.4f}" for c, v in sorted(best.items(), key=lambda x: x[1]))
    print(f"{sig} {bucket} winner {cfg} {ms:.4f} ms | {cells}")
