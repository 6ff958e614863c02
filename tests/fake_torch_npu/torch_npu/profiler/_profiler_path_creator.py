"""Stand-in for ``torch_npu.profiler._profiler_path_creator`` (tests only).

As in the real one, a process-wide singleton: ``tensorboard_trace_handler`` configures it when it is
*called* (before profiling), and each capture's ``init_trace`` creates
``{worker_name}_{pid}_{local %Y%m%d%H%M%S%f[:-3]}_ascend_pt`` under the configured directory (as torch_npu
since 2025; ``{worker_name}_{UTC ...}`` for the earlier APIs of FAKE_TORCH_NPU_API).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import warnings
from datetime import datetime, timezone

from .. import _calls
from .analysis.prof_common_func._constant import Constant, print_warn_msg

# torch_npu's PathManager (torch_npu/utils/_path_manager.py). Releases before June 2026 refuse a path too
# long, a soft link, or one with a character outside this pattern (RuntimeError; "+", ":", "=", "@", ","
# ...); the latest only warns of them. A path that is a file is refused by every release.
_PATH_PATTERN = r"(\.|/|_|-|\s|[~0-9a-zA-Z]|[\u4e00-\u9fa5])+"
MAX_PATH_LENGTH, MAX_FILE_NAME_LENGTH = 4096, 255


def _refuse(message: str) -> None:
    if os.environ.get("FAKE_TORCH_NPU_API", "latest") == "latest":
        warnings.warn(message, stacklevel=3)
    else:
        raise RuntimeError(message)


def check_input_directory_path(path: str) -> None:
    if len(path) > MAX_PATH_LENGTH or any(len(name) > MAX_FILE_NAME_LENGTH for name in path.split("/")):
        _refuse("Length of input path exceeds the limit.")
    if os.path.islink(path):
        _refuse(f"Invalid input path is a soft chain: {path}")
    if not re.fullmatch(_PATH_PATTERN, path):
        _refuse(f"Invalid input path: {path}")
    if os.path.isfile(path):
        raise RuntimeError(f"Invalid input path is a file path: {path}")


def check_directory_path_writeable(path: str) -> None:
    if os.path.islink(path):
        raise RuntimeError(f"Invalid path is a soft chain: {path}")
    if not os.access(path, os.W_OK):
        raise RuntimeError(f"The path permission check failed: {path}")


class _ProfPathCreator:
    def __init__(self) -> None:
        self._prof_path: str | None = None
        self._worker_name: str | None = None
        self._dir_path: str | None = None
        self._export_only_mode = False
        self._export_only_prof_dir = "export_only_prof_dir"
        self.is_prof_inited = False

    def init(
        self, worker_name: str | None = None, dir_name: str | None = None, export_only_mode: bool = False
    ) -> None:
        _calls.record(
            "ProfPathCreator.init",
            worker_name=worker_name,
            dir_name=dir_name,
            export_only_mode=export_only_mode,
        )
        self._export_only_mode = export_only_mode
        if worker_name is None or (
            isinstance(worker_name, str)
            and worker_name
            and len(worker_name) < Constant.MAX_WORKER_NAME_LENGTH
        ):
            self._worker_name = worker_name
        else:
            print_warn_msg("Invalid parameter worker_name, reset it to default.")
            self._worker_name = None
        if dir_name is not None and not (isinstance(dir_name, str) and dir_name):
            print_warn_msg("Invalid parameter dir_name, reset it to default.")
            dir_name = None
        if dir_name:  # ProfilerPathManager.get_realpath, then PathManager.check_input_directory_path
            if os.path.islink(os.path.expanduser(dir_name)):
                warnings.warn(f"Invalid input path is a symbolic link: {dir_name}", stacklevel=2)
            dir_name = os.path.realpath(os.path.expanduser(dir_name))
            check_input_directory_path(dir_name)
        self._dir_path = dir_name

    def _create_prof_dir_2024(self) -> None:
        self._make(self._worker_name or f"{socket.gethostname()}_{os.getpid()}", timezone.utc)

    def _create_prof_dir_2025(self) -> None:
        # torch_npu since March 2025 (!18779): its pid after any worker name; local time since September
        worker_name = "{}_{}".format(self._worker_name or socket.gethostname(), str(os.getpid()))  # noqa: UP032 (its text, as npuprof reads it)
        self._make(worker_name, None)

    # the latest release's form, or the earlier one for the earlier APIs (FAKE_TORCH_NPU_API)
    create_prof_dir = (
        _create_prof_dir_2025
        if os.environ.get("FAKE_TORCH_NPU_API", "latest") == "latest"
        else _create_prof_dir_2024
    )

    def _make(self, worker_name: str, tz: timezone | None) -> None:
        if not self._dir_path:
            dir_path = os.getenv(Constant.ASCEND_WORK_PATH)
            self._export_only_mode = self._export_only_mode and dir_path is None
            if dir_path:
                dir_path = os.path.join(os.path.abspath(dir_path), Constant.PROFILING_WORK_PATH)
            elif self._export_only_mode:
                dir_path = os.path.join(os.getcwd(), self._export_only_prof_dir)
            else:
                dir_path = os.getcwd()
        else:
            dir_path = self._dir_path
        stamp = (datetime.now(tz) if tz else datetime.now().astimezone()).strftime("%Y%m%d%H%M%S%f")[:-3]
        if os.path.exists(dir_path):
            check_directory_path_writeable(dir_path)
        self._prof_path = os.path.join(dir_path, f"{worker_name}_{stamp}_ascend_pt")
        check_input_directory_path(self._prof_path)
        os.makedirs(self._prof_path, mode=0o750)
        self.is_prof_inited = True

    def get_prof_dir(self) -> str | None:
        return self._prof_path

    def delete_export_only_prof(self) -> None:
        if self._export_only_mode:
            self.delete_prof_dir()

    def delete_prof_dir(self) -> None:
        try:
            if self._prof_path:
                shutil.rmtree(self._prof_path)
        except OSError:
            print_warn_msg("Remove temporary profiling data saving path failed.")


_INSTANCE = _ProfPathCreator()


def ProfPathCreator() -> _ProfPathCreator:
    return _INSTANCE
