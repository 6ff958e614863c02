"""The option registry (npuprof/options.py) is the one place a `run` option is declared: the README, the
defaults of ProfileConfig, the two flag parsers, the config-file reader, profiler_info and the backends'
"ignored" reports all agree with it."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
import typer

from npuprof import config as c
from npuprof.cli import run_flags
from npuprof.cli.main import get_app
from npuprof.options import BY_KEY, RUN_OPTIONS, TORCH_NPU_ONLY, markdown_table

ROOT = Path(__file__).resolve().parent.parent


def test_the_readme_flag_table_is_the_registry() -> None:
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- flags: made by[^\n]*\n(.*?)<!-- flags: end -->", readme, re.S)
    assert block is not None, "README lost its flag table markers"
    assert block[1] == markdown_table(), "README's flag table is stale: run python -m npuprof.options"
    for option in RUN_OPTIONS:
        assert f"`{option.flag}" in block[1]


def _shown_default(option_key: str, value: object) -> str:
    """The default as the README and --help must show it, derived from ProfileConfig's own value."""
    special = {
        "activities": ",".join(c.ACTIVITIES),
        "level": {v: k for k, v in c.LEVELS.items()}[c.ProfileConfig().level],
        "output": "./" + c.DEFAULT_OUTPUT,
        "step_on": "Optimizer.step",
        "ranks": "all",
        "worker_name": "the host name up to its first dot (an IP address whole)",
        "min_free_space": "5GiB or 5%, whichever is smaller",
        "poll_interval": "auto",
        "duration": "until the process ends",
    }
    if option_key in special:
        return special[option_key]
    if isinstance(value, bool):
        return "on" if value else "off"
    if value is None:
        return "off"
    if isinstance(value, (list, dict)) and not value:
        return "-"
    return str(value)


def test_every_option_is_a_config_field_with_the_default_it_shows() -> None:
    defaults = dataclasses.asdict(c.ProfileConfig())
    schedule = dataclasses.asdict(c.Schedule())
    for option in RUN_OPTIONS:
        if option.key in ("config", "metadata_json"):  # metadata_json adds to ProfileConfig.metadata
            continue
        source = schedule if option.in_schedule else defaults
        assert option.key in source, f"{option.key} is not a ProfileConfig field"
        assert option.default == _shown_default(option.key, source[option.key]), option.key
    assert c.ProfileConfig().min_free_space == c.MIN_FREE_SPACE_AUTO
    # given_as: where the others' values came from, no option of its own
    fields = {f.name for f in dataclasses.fields(c.ProfileConfig)} - {"schedule", "given_as"}
    assert fields <= set(BY_KEY), f"fields without an option: {fields - set(BY_KEY)}"


def test_both_parsers_know_every_flag_and_help_shows_each_default() -> None:
    command = typer.main.get_command(get_app()).commands["run"]
    options = [p for p in command.params if p.name != "command"]
    typer_flags = {opt for param in options for opt in (*param.opts, *param.secondary_opts)}
    assert typer_flags == set(run_flags.OPTIONS)
    for param in command.params:
        if param.name in BY_KEY and BY_KEY[param.name].default != "-":
            assert f"[default: {BY_KEY[param.name].default}]" in (param.help or "").replace("\\[", "[")


def test_a_bool_option_reaches_profiler_info_under_its_profiler_keyword() -> None:
    for option in RUN_OPTIONS:
        if option.kind != "bool" or not (option.profiler_keyword or option.npu_keywords):
            continue
        flags = {option.key: not getattr(c.ProfileConfig(), option.key)}
        if option.key == "op_attr":
            flags["export_type"] = "db"
        cfg = run_flags.build_config(None, flags)
        if option.profiler_keyword:
            assert cfg.common_config()[option.profiler_keyword] is flags[option.key]
        else:
            assert cfg.experimental_config()["_" + option.npu_keywords[0]] is flags[option.key]


def test_every_key_of_torch_npus_config_file_is_read(tmp_path: Path) -> None:
    document = c.template_json()
    mapped = {o.config_key for o in RUN_OPTIONS if o.config_key}
    composite = {"start_step", "active", "is_rank", "rank_list", "experimental_config"}
    for key in document:
        assert key in mapped | composite, key
    for key in document["experimental_config"]:
        assert f"experimental_config.{key}" in mapped, key
    # every value changed from the template reaches the config
    document = {
        **document,
        "activities": ["CPU"],
        "prof_dir": "elsewhere",
        "analyse": True,
        "record_shapes": True,
        "profile_memory": True,
        "with_stack": True,
        "with_flops": True,
        "with_modules": True,
        "start_step": 4,
        "warmup": 2,
        "active": 3,
        "is_rank": True,
        "rank_list": [1, 0],
        "metadata": {"dp": 8},
        "experimental_config": {
            "profiler_level": "Level1",
            "aic_metrics": "PipeUtilization",
            "l2_cache": True,
            "op_attr": True,
            "gc_detect_threshold": 3,
            "data_simplification": False,
            "record_op_args": True,
            "export_type": ["db"],
            "mstx": True,
        },
    }
    path = tmp_path / "profiler_config.json"
    path.write_text(json.dumps(document))
    cfg = c.load_config_file(path).validate()
    assert cfg.activities == ["cpu"] and cfg.output == "elsewhere"
    assert not cfg.analyse  # "analyse": true, but is_rank turns automatic parsing off (as torch_npu)
    assert cfg.record_shapes and cfg.profile_memory and cfg.with_stack and cfg.with_flops and cfg.with_modules
    assert dataclasses.asdict(cfg.schedule) == {
        "skip_first": 4,
        "wait": 0,
        "warmup": 2,
        "active": 3,
        "repeat": 1,
        "off": False,
    }
    assert cfg.ranks == [0, 1] and cfg.metadata == {"dp": 8}
    assert (cfg.level, cfg.aic_metrics, cfg.export_type) == ("Level1", "PipeUtilization", "db")
    assert cfg.l2_cache and cfg.op_attr and cfg.record_op_args and cfg.msprof_tx
    assert cfg.gc_detect_threshold == 3.0 and cfg.data_simplification is False


def test_keys_npuprof_has_no_use_for_are_warned_and_a_typo_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "profiler_config.json"
    path.write_text(json.dumps({"async_mode": True, "experimental_config": {"sys_io": True, "host_sys": []}}))
    heard: list[str] = []
    cfg = c.load_config_file(path, warn=heard.append)
    assert cfg == c.ProfileConfig()
    assert len(heard) == 3 and all("ignored" in line for line in heard)
    assert any("async_mode" in line for line in heard) and any(
        "experimental_config.sys_io" in line for line in heard
    )
    path.write_text(json.dumps({"with_stak": True}))
    with pytest.raises(c.ConfigError, match=r"unknown key.*with_stak.*docs/formats\.md"):
        c.load_config_file(path)


@pytest.mark.parametrize(
    "option", [o for o in RUN_OPTIONS if o.backends == TORCH_NPU_ONLY], ids=lambda o: o.key
)
def test_a_torch_npu_option_is_reported_as_ignored_on_torch_profiler(option) -> None:
    from npuprof.agent.backends.torch_backend import TorchBackend

    changed = {
        "bool": not getattr(c.ProfileConfig(), option.key),
        "str": {"level": "1", "aic_metrics": "memory", "export_type": "db"}.get(option.key),
        "float": 2.5,
    }[option.kind]
    cfg = run_flags.build_config(
        None, {option.key: changed, **({"export_type": "db"} if option.key == "op_attr" else {})}
    )
    backend = TorchBackend.__new__(TorchBackend)
    backend.use_cuda, backend.name = False, "torch-cpu"
    ignored = backend.ignored_flags(cfg)
    assert any(line.startswith(option.flag) or line.startswith("--no-" + option.flag[2:]) for line in ignored)


def test_a_config_files_key_ignored_on_the_cpu_is_named_as_the_file_wrote_it(tmp_path: Path) -> None:
    """`npuprof run --config cfg.json` on the CPU, the file setting experimental_config.profiler_level: the
    warning said "ignored on the torch-cpu backend: --level 2", a flag the user never typed. Where each
    value came from travels with the configuration to the job's processes (NPUPROF_CONFIG), and the
    warning names the file's key and value; a flag given over the file's value is named as the flag."""
    from npuprof.agent.backends.torch_backend import TorchBackend
    from npuprof.payload import read_payload

    path = tmp_path / "cfg.json"
    path.write_text('{"experimental_config": {"profiler_level": "Level2", "l2_cache": true}}')
    backend = TorchBackend.__new__(TorchBackend)
    backend.use_cuda, backend.name = False, "torch-cpu"

    def ignored_in_the_job(flags: dict[str, object]) -> list[str]:
        config, _run = read_payload(run_flags.build_config(str(path), flags).to_env({"run_id": "r1"}))
        return sorted(backend.ignored_flags(config))

    assert ignored_in_the_job({}) == [
        f"experimental_config.l2_cache true ({path})",
        f'experimental_config.profiler_level "Level2" ({path})',
    ]
    assert ignored_in_the_job({"level": "1"}) == ["--level 1", f"experimental_config.l2_cache true ({path})"]
