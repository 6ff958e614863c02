"""Run every bench, one after the other, and print their tables (under 10 minutes on 2 cores).

.venv/bin/python bench/run_all.py            # the figures of bench/README.md
.venv/bin/python bench/run_all.py --quick    # seconds: checks that every bench runs
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHES = [
    "startup.py",
    "overhead.py",
    "export_stall.py",
    "dynamic_latency.py",
    "marks.py",
    "marks_capture.py",
    "handover.py",
    "scale.py",
]
ANALYSE_BENCH = "analyse_bench.py"
ANALYSE_SIZE_MB = "256"  # modest: the 1 GB figure takes minutes (bench/analyse_bench.py --size-mb 1024)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes: checks the benches run, nothing more"
    )
    args = parser.parse_args()
    commands = [[sys.executable, str(HERE / name), *(["--quick"] if args.quick else [])] for name in BENCHES]
    if (HERE / ANALYSE_BENCH).exists():
        size = "8" if args.quick else ANALYSE_SIZE_MB
        commands.append([sys.executable, str(HERE / ANALYSE_BENCH), "--size-mb", size])
    else:
        print(f"\n{ANALYSE_BENCH}: not there yet, skipped")
    failed = 0
    start = time.perf_counter()
    for cmd in commands:
        began = time.perf_counter()
        code = subprocess.run(cmd).returncode
        print(f"  [{Path(cmd[1]).name}: exit {code}, {time.perf_counter() - began:.0f} s]", flush=True)
        failed += code != 0
    print(f"\nall benches: {time.perf_counter() - start:.0f} s, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
