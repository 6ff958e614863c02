#!/usr/bin/env bash
# Side environment for the interop tests (tests/test_analyse_interop.py): msprof-analyze and
# HolisticTraceAnalysis, pinned to pandas<3 (both break with pandas 3). Neither needs torch, so the venv
# is a plain one (no torch, never a CUDA build); ~45 s to build on a 2-core machine. The tests read the
# workbooks msprof-analyze writes with the standard library (no openpyxl needed).
# Usage: .ci/interop.sh [VENV_DIR]   then run the tests with the printed variables, e.g.
#   eval "$(.ci/interop.sh)" && .venv/bin/pytest tests/test_analyse_interop.py
# Without them the interop tests are skipped, each with a warning and a reason in the summary (-ra).
set -euo pipefail
VENV="${1:-.venv-interop}"
PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/msprof-analyze" ] || ! "$VENV/bin/python" -c "import hta.trace_analysis" 2>/dev/null; then
    "$PY" -m venv "$VENV" >&2
    "$VENV/bin/pip" install --quiet --disable-pip-version-check \
        "msprof-analyze" "pandas<3" "HolisticTraceAnalysis" >&2
fi
if "$VENV/bin/python" -c "import torch" 2>/dev/null; then
    echo "interop.sh: torch got into $VENV; it must not (it would be a CUDA build)" >&2
    exit 1
fi
# what the interop results were obtained with (to stderr: stdout is for eval)
"$VENV/bin/python" -c "
import importlib.metadata as m
print('interop.sh:', ', '.join(f'{p} {m.version(p)}' for p in ('msprof-analyze', 'HolisticTraceAnalysis', 'pandas')))
" >&2
echo "export NPUPROF_MSPROF_ANALYZE=$(cd "$VENV" && pwd)/bin/msprof-analyze"
echo "export NPUPROF_HTA_PYTHON=$(cd "$VENV" && pwd)/bin/python"
