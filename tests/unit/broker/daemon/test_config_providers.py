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
