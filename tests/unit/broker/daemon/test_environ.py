"""``SPOTFOLIO_*`` environment variables over the daemon's config file
(``broker.daemon.environ``): every key has one, env beats the file, options
beat env, and a bad variable exits 2 naming it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel

from broker.cli import EXIT_INPUT, main
from broker.cli.daemon import _config
from broker.daemon.config import DaemonConfig, load_daemon_config
from broker.daemon.environ import LOADER_KEYS, env_name, read_environment
from markets.errors import InputError

EXAMPLES = Path(__file__).resolve().parents[4] / "policies" / "examples"

# Keys whose default is None (no text to set them to), or a relative path
# (which a variable reads from the working directory), get these.
SAMPLES = {
    "store_url": "postgresql+psycopg://db.internal/spotfolio",
    "workloads": str(next(EXAMPLES.glob("*.yaml"))),
    "demand": str(EXAMPLES.parent.parent / "broker" / "examples" / "demand.csv"),
    "blocks": str(EXAMPLES.parent.parent / "broker" / "examples" / "blocks.yaml"),
    "providers": "[aws, gcp]",
    "clouds": "{gcp: {options: {project: ml-project, zones: [us-central1-a]}}}",
    "horizon_start": "2026-03-01T00:00:00Z",
    "sim.start": "2026-03-01T00:00:00Z",
    "sim.state_file": "sim-state.json",
}


def config_file(tmp_path: Path, text: str = "owner: from-file\n") -> Path:
    path = tmp_path / "daemon.yaml"
    path.write_text(text)
    return path


def _keys() -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for name, info in DaemonConfig.model_fields.items():
        if name in LOADER_KEYS:  # set by the loader, not a setting
            continue
        section = info.annotation
        if isinstance(section, type) and issubclass(section, BaseModel):
            out += [(name, sub) for sub in section.model_fields]
        else:
            out.append((name,))
    return out


def _text(value: object) -> str:
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    if isinstance(value, dict | list):
        return json.dumps(value)  # JSON is YAML
    return str(value).lower() if isinstance(value, bool) else str(value)


@pytest.mark.parametrize("key", _keys(), ids=lambda k: env_name(*k))
def test_every_config_key_has_a_variable(tmp_path: Path, key: tuple[str, ...]) -> None:
    default: object = DaemonConfig(owner="x")
    for part in key:
        default = getattr(default, part)
    text = SAMPLES.get(".".join(key), _text(default))
    env = {env_name(*key): text}
    assert ".".join(key) in read_environment(DaemonConfig, env).origins
    cfg = load_daemon_config(config_file(tmp_path), environ=env)
    value: object = cfg
    for part in key:
        value = getattr(value, part)
    if ".".join(key) in SAMPLES:
        assert value is not None and value != default
    else:
        assert value == default


def test_a_variable_beats_the_file_and_an_option_beats_both(tmp_path: Path) -> None:
    path = config_file(
        tmp_path, "owner: from-file\nprovider: sim\nintervals: {reconcile_s: 30, replan_s: 1800}\n"
    )
    env = {
        "SPOTFOLIO_OWNER": "from-env",
        "SPOTFOLIO_INTERVALS__RECONCILE_S": "90",
        "spotfolio_planner": "fast",  # any case
        "SPOTFOLIO_MARKET": "gcp",
    }
    cfg = load_daemon_config(path, environ=env, market="aws")
    assert cfg.owner == "from-env" and cfg.planner == "fast"
    assert cfg.intervals.reconcile_s == 90.0
    assert cfg.intervals.replan_s == 1800.0  # the file's, in the same section
    assert cfg.market == "aws"  # --market over SPOTFOLIO_MARKET
    assert load_daemon_config(path).owner == "from-file"  # no environ: the file alone


def test_structured_values_and_free_form_sub_keys_are_read_as_yaml(tmp_path: Path) -> None:
    env = {
        "SPOTFOLIO_COMMITTED": "{aws/us-east-1/g5.xlarge: 4}",
        "SPOTFOLIO_PROVIDER_OPTIONS__QUEUE_URL": "https://sqs.example/123/q",
        "SPOTFOLIO_PROVIDER_OPTIONS__LAUNCH": "{us-east-1: {launch_template_name: gpu}}",
        "SPOTFOLIO_LIFECYCLE__RETURN_MIN_DWELL_S": "900",
        "SPOTFOLIO_ACCOUNT": "012345678901",  # a string key keeps its leading zero
        "SPOTFOLIO_SIM__REORDER": "true",
    }
    cfg = load_daemon_config(config_file(tmp_path), environ=env)
    assert cfg.committed == {"aws/us-east-1/g5.xlarge": 4}
    assert cfg.provider_options == {
        "queue_url": "https://sqs.example/123/q",
        "launch": {"us-east-1": {"launch_template_name": "gpu"}},
    }
    assert cfg.lifecycle == {"return_min_dwell_s": 900}  # a number, as in the file
    assert cfg.account == "012345678901" and cfg.sim.reorder is True


def test_relative_paths_from_a_variable_are_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    etc, run = tmp_path / "etc", tmp_path / "run"
    etc.mkdir()
    run.mkdir()
    monkeypatch.chdir(run)
    path = config_file(etc, "owner: x\ndemand: demand.csv\n")
    (etc / "demand.csv").write_text("hour,chat-api\n")
    cfg = load_daemon_config(
        path,
        environ={"SPOTFOLIO_STORE_URL": "sqlite:///state.db", "SPOTFOLIO_SIM__STATE_FILE": "s"},
    )
    assert cfg.store_url == f"sqlite:///{run / 'state.db'}"
    assert cfg.sim.state_file == run / "s"
    assert cfg.demand == etc / "demand.csv"  # the file's own: relative to the file


def test_other_spotfolio_variables_and_empty_ones_are_left_alone(tmp_path: Path) -> None:
    env = {
        "SPOTFOLIO_CONFIG_YAML": "{not: [a config key",  # the Terraform entrypoint's
        "SPOTFOLIO_HOOK_BUDGET_S": "12",
        "SPOTFOLIO_OWNER": "",
        "OWNER": "not ours",
    }
    path = config_file(tmp_path)
    assert load_daemon_config(path, environ=env) == load_daemon_config(path)


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        pytest.param("SPOTFOLIO_INTERVALS__RECONCILE_S", "-5", "> 0", id="range"),
        pytest.param("SPOTFOLIO_HORIZON_HOURS", "a day", "whole number", id="type"),
        pytest.param("SPOTFOLIO_PLANNER", "simplex", "'milp' or 'fast'", id="choice"),
        pytest.param("SPOTFOLIO_COMMITTED", "{a: [", "valid YAML", id="yaml"),
        pytest.param("SPOTFOLIO_INTERVALS__RECONCLE_S", "60", "RECONCILE_S", id="unknown-sub-key"),
        pytest.param("SPOTFOLIO_OWNER__X", "y", "no sub-keys", id="scalar-sub-key"),
        # a cross-field check caused by the variable (upkeep_s < return_lead_s)
        pytest.param("SPOTFOLIO_INTERVALS__UPKEEP_S", "600", "return_lead_s", id="cross-field"),
        pytest.param(
            "SPOTFOLIO_PROVIDER_OPTIONS__LAUNCH", "{us-east-1: [", "valid YAML", id="free-form-yaml"
        ),
    ],
)
def test_a_bad_variable_is_an_input_error_naming_it(
    tmp_path: Path, name: str, value: str, expected: str
) -> None:
    with pytest.raises(InputError) as e:
        load_daemon_config(config_file(tmp_path), environ={name: value})
    assert str(e.value).startswith(f"{name}: ") and expected in str(e.value)
    assert e.value.source == name


def test_a_bad_variable_exits_2_with_one_line_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SPOTFOLIO_INTERVALS__POLL_NOTICES_S", "600")
    code = main(["daemon", "--config", str(config_file(tmp_path)), "--once"])
    err = capsys.readouterr().err
    assert code == EXIT_INPUT
    assert err.count("\n") == 1 and "SPOTFOLIO_INTERVALS__POLL_NOTICES_S" in err
    assert "<= 60" in err and "'600'" in err


def test_a_bad_value_in_the_file_still_names_the_file(tmp_path: Path) -> None:
    path = config_file(tmp_path, "owner: x\nhorizon_hours: 0\n")
    with pytest.raises(InputError) as e:
        load_daemon_config(path, environ={"SPOTFOLIO_INTERVALS__RECONCILE_S": "60"})
    assert e.value.source == str(path) and e.value.field == "horizon_hours"


def test_the_simulated_account_without_a_file_reads_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SPOTFOLIO_SIM__SEED", "7")
    monkeypatch.setenv("SPOTFOLIO_OWNER", "env-owner")
    cfg = _config(None, provider="sim")
    assert cfg.sim.seed == 7 and cfg.owner == "env-owner" and cfg.provider == "sim"


def test_a_free_form_number_from_a_variable_still_meets_the_cross_field_check(
    tmp_path: Path,
) -> None:
    """``lifecycle.return_lead_s`` read as the number it is, so the check
    that ``intervals.upkeep_s`` is shorter runs (a string would skip it)."""
    with pytest.raises(InputError) as e:
        load_daemon_config(
            config_file(tmp_path), environ={"SPOTFOLIO_LIFECYCLE__RETURN_LEAD_S": "10"}
        )
    assert e.value.field == "intervals.upkeep_s" and "return_lead_s (10)" in str(e.value)


def test_the_loader_s_own_keys_take_no_variable(tmp_path: Path) -> None:
    # config_file says where the settings were read (for messages): the
    # loader's, whatever the environment says
    cfg = load_daemon_config(
        config_file(tmp_path), environ={"SPOTFOLIO_CONFIG_FILE": "/elsewhere.yaml"}
    )
    assert cfg.config_file == str(config_file(tmp_path))
