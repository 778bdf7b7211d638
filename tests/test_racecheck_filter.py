#!/usr/bin/env python3
"""test_racecheck_filter.py - racecheck_filter.py on made-up logs: a report whose two accesses
carry one reviewed marker passes; a report with an unmarked side, with different markers, with
a marker that has no section, or without source lines fails; a log without a summary is an
error of its own."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = """// k.cu
/* racecheck: hand */
asm volatile("st.shared.b32 [%0], %1;" :: "r"(a), "r"(b));
x = 1;
/* racecheck: hand */
asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(a));
/* racecheck: other */
y = 2;
/* racecheck: unlisted */
z = 3;
"""
REVIEWED = "# reviewed\n\n## hand\n\nproof\n\n## other\n\nproof\n"


def report(a, b, n=64, kind="Error"):
    return ("========= %s: Race reported between Write access at k+0x10 in %s\n"
            "=========     and Read access at k+0x20 in %s [%d hazards]\n" % (kind, a, b, n))


def run(reports, summary=True):
    with tempfile.TemporaryDirectory() as d:
        open(os.path.join(d, "k.cu"), "w").write(SRC)
        open(os.path.join(d, "reviewed.md"), "w").write(REVIEWED)
        log = "".join(reports)
        if summary:
            log += "========= RACECHECK SUMMARY: %d hazards displayed (%d errors, 0 warnings)\n" % (
                len(reports), len(reports))
        open(os.path.join(d, "log"), "w").write(log)
        p = subprocess.run([sys.executable, os.path.join(HERE, "racecheck_filter.py"),
                            os.path.join(d, "log"), d, os.path.join(d, "reviewed.md")],
                           capture_output=True, text=True)
        return p.returncode, p.stdout


def main():
    ok = report("k.cu:3", "k.cu:6")
    checks = [
        ("reviewed pair", [ok], 0, "1 reviewed (hand 1), 0 unreviewed"),
        ("marker two lines up", [report("/x/k.cu:4", "k.cu:6")], 0, "1 reviewed"),
        ("one side unmarked", [ok, report("k.cu:3", "k.cu:1")], 1, "1 unreviewed"),
        ("different markers", [report("k.cu:3", "k.cu:8")], 1, "markers hand / other"),
        ("marker without a section", [report("k.cu:10", "k.cu:10")], 1, "0 reviewed"),
        ("no source lines", [report("k", "k")], 1, "markers None / None"),
        ("no summary", [ok], 2, "no RACECHECK SUMMARY"),
    ]
    bad = 0
    for name, reps, want_rc, want_text in checks:
        rc, out = run(reps, summary=name != "no summary")
        if rc != want_rc or want_text not in out:
            print("FAIL %s: rc %d (want %d), output:\n%s" % (name, rc, want_rc, out))
            bad += 1
        else:
            print("ok   %s" % name)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
