"""A daemon config whose plan could name a cloud its provider cannot act in
is refused at start, one line naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.daemon.config import load_daemon_config
from markets.errors import InputError


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "daemon.yaml"
    path.write_text(text)
    return path


def test_aws_with_providers_aws_and_gcp_is_refused_naming_providers(tmp_path: Path) -> None:
    path = _config(tmp_path, "owner: o\nprovider: aws\nproviders: [aws, gcp]\n")
    with pytest.raises(InputError) as e:
        load_daemon_config(path)
    text = str(e.value)
    assert text.startswith(f"{path}: providers:") and "gcp" in text and "\n" not in text


@pytest.mark.parametrize("text", [
    pytest.param("owner: o\nprovider: aws\nproviders: [aws]\n", id="its-own"),
    pytest.param("owner: o\nprovider: sim\nproviders: [aws, gcp]\n", id="sim-serves-both"),
])  # fmt: skip
def test_providers_the_provider_acts_in_are_accepted(tmp_path: Path, text: str) -> None:
    assert load_daemon_config(_config(tmp_path, text)).launch_providers is not None


# --- several clouds ------------------------------------------------------------------

AWS = "  aws: {profile: ml, lease_scope: '123456789012', options: {launch: {us-east-1: {}}}}\n"
GCP = "  gcp: {lease_scope: ml-project, options: {project: ml-project, zones: [us-central1-a]}}\n"


def test_clouds_give_each_cloud_its_settings_and_lease(tmp_path: Path) -> None:
    cfg = load_daemon_config(_config(tmp_path, "owner: o\nclouds:\n" + AWS + GCP))
    assert cfg.launch_providers == ("aws", "gcp")
    assert cfg.cloud_settings["aws"].profile == "ml"
    assert cfg.cloud_settings["gcp"].options["project"] == "ml-project"
    assert cfg.lease_names == ("account/default", "aws/123456789012", "gcp/ml-project")


def test_a_provider_beside_clouds_is_one_more_cloud(tmp_path: Path) -> None:
    text = "owner: o\nprovider: aws\nprovider_options: {launch: {us-east-1: {}}}\nclouds:\n" + GCP
    cfg = load_daemon_config(_config(tmp_path, text))
    assert cfg.launch_providers == ("aws", "gcp")
    assert cfg.cloud_settings["aws"].options == {"launch": {"us-east-1": {}}}


def test_single_provider_configs_keep_their_meaning(tmp_path: Path) -> None:
    cfg = load_daemon_config(_config(tmp_path, "owner: o\nprovider: gcp\n"))
    assert cfg.launch_providers == ("gcp",) and cfg.lease_names == ("account/default",)
    assert load_daemon_config(_config(tmp_path, "owner: o\n")).launch_providers is None


@pytest.mark.parametrize(("text", "field"), [
    pytest.param("clouds:\n" + AWS + "providers: [aws, gcp]\n", "providers", id="no-gcp"),
    pytest.param("provider: sim\nclouds:\n" + GCP, "provider", id="sim-beside"),
    pytest.param("provider: gcp\nprovider_options: {project: x}\nclouds:\n" + GCP,
                 "provider_options", id="twice"),
    pytest.param("clouds:\n  gcp: {profile: ml}\n", "clouds.gcp.profile", id="aws-creds-on-gcp"),
    pytest.param("clouds:\n  aws: {credentials_file: k.json}\n", "clouds.aws.credentials_file",
                 id="gcp-creds-on-aws"),
    pytest.param("clouds:\n  gcp: {credentials_file: none.json}\n",
                 "clouds.gcp.credentials_file", id="no-file"),
    pytest.param("clouds:\n  azure: {}\n", "clouds.azure", id="unknown-cloud"),
    pytest.param("clouds:\n  aws: {token: abc}\n", "clouds.aws.token", id="secret-inline"),
])  # fmt: skip
def test_clouds_that_cannot_be_acted_in_are_refused_naming_the_field(
    tmp_path: Path, text: str, field: str
) -> None:
    path = _config(tmp_path, "owner: o\n" + text)
    with pytest.raises(InputError) as e:
        load_daemon_config(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}: {field}") and "\n" not in msg, msg


def test_the_cli_refuses_a_plan_cloud_without_settings_before_anything_opens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from broker.cli import main

    store = tmp_path / "state.db"
    path = _config(tmp_path, f"owner: o\nstore_url: sqlite:///{store}\nmetrics_port: 0\n"
                             "clouds:\n" + AWS + "providers: [aws, gcp]\n")  # fmt: skip
    assert main(["daemon", "--config", str(path), "--once"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "providers" in err[0] and "clouds.gcp" in err[0], err
    assert not store.exists()


def test_a_gcp_credentials_file_that_holds_no_credentials_is_one_line(tmp_path: Path) -> None:
    from broker.daemon.config import CloudSettings
    from broker.daemon.wiring import open_cloud

    bad = tmp_path / "gcp.json"
    bad.write_text('{"type": "nothing-google-knows"}')
    options = {"project": "ml-project", "zones": ["us-central1-a"], "source_image": "x"}
    cloud = CloudSettings(credentials_file=bad, options=options)
    with pytest.raises(InputError) as e:
        open_cloud("gcp", cloud, "o")
    msg = str(e.value)
    assert "credentials_file" in msg and str(bad) in msg and "\n" not in msg
