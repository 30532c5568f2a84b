"""The GCP Terraform module (terraform/modules/gcp) read as text, against the
code it deploys: the custom roles hold exactly ``markets.gcp.sdk``'s
``GCP_IAM_PERMISSIONS``; deletion, setLabels and setMetadata are conditioned
on the name prefix
``markets.gcp.labels.owner_prefix`` gives (IAM cannot test labels); the
runtime's service account is the module's own; variables are typed, described,
validated and carry no secret; the rendered configuration's keys are fields the
daemon knows. ``terraform validate`` needs hashicorp/google in the offline
plugin directory, which these machines lack: that test skips saying so.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from broker.daemon.config import DaemonConfig
from markets.gcp.labels import owner_prefix
from markets.gcp.sdk import GCP_IAM_PERMISSIONS
from markets.gcp.settings import GcpProviderSettings
from tests.terraform.hcl import TF_ROOT, attr, blocks, strings, top_level

GCP = TF_ROOT / "modules" / "gcp"
EXAMPLE = TF_ROOT / "examples" / "gcp"
PLUGIN_DIR = Path(os.environ.get("SPOTFOLIO_TF_PLUGIN_DIR", "/opt/tf-plugins"))


def _text(where: Path = GCP) -> str:
    return "".join(p.read_text() for p in sorted(where.glob("*.tf")))


def _locals() -> str:
    return "".join(blocks(_text(), r"(?m)^locals"))


def _resource(kind: str, name: str) -> str:
    (body,) = blocks(_text(), rf'resource "{kind}" "{name}"')
    return body


# What acts on one VM: granted only on our own VMs (the name condition).
OWN_VM = {
    "compute.instances.delete",
    "compute.instances.setLabels",
    "compute.instances.setMetadata",
}


def test_custom_roles_hold_exactly_the_permissions_the_code_needs() -> None:
    daemon = set(strings(attr(_locals(), "daemon_permissions")))
    own = set(strings(attr(_locals(), "own_vm_permissions")))
    assert daemon | own == GCP_IAM_PERMISSIONS, (
        f"missing: {sorted(GCP_IAM_PERMISSIONS - daemon - own)}, "
        f"not needed: {sorted((daemon | own) - GCP_IAM_PERMISSIONS)}"
    )
    assert own == OWN_VM and not daemon & own
    for role, local in (("daemon", "daemon_permissions"), ("own_vms", "own_vm_permissions")):
        body = _resource("google_project_iam_custom_role", role)
        assert attr(body, "permissions") == f"local.{local}"
    # No predefined compute role (roles/compute.*) is granted anywhere.
    assert not re.search(r'"roles/compute\.', _text())


def test_no_permission_that_rewrites_a_vm_is_granted_without_the_condition() -> None:
    """setMetadata (startup script, ssh keys) and setLabels (the
    owner label) project-wide would let the daemon rewrite any VM."""
    daemon = set(strings(attr(_locals(), "daemon_permissions")))
    assert not daemon & OWN_VM
    # Every binding of the own-VM role is conditioned on the name prefix.
    text = _text()
    bindings = [
        b
        for b in blocks(text, r'resource "google_project_iam_member" "\w+"')
        if "google_project_iam_custom_role.own_vms" in b
    ]
    assert len(bindings) == 1
    (condition,) = top_level(bindings[0], "condition")
    assert attr(condition, "expression") == "local.own_vm_condition"
    # The renamed resources keep their state (no re-creation of the role).
    for kind in ("google_project_iam_custom_role", "google_project_iam_member"):
        assert re.search(rf"from\s*=\s*{kind}\.delete\s+to\s*=\s*{kind}\.own_vms", text)


def test_own_vm_permissions_are_conditioned_on_the_codes_name_prefix() -> None:
    (condition,) = top_level(_resource("google_project_iam_member", "own_vms"), "condition")
    assert attr(condition, "expression") == "local.own_vm_condition"
    expr = attr(_locals(), "own_vm_condition")
    assert "instances/${local.owner_prefix}" in expr and "var.zones" in expr
    # local.owner_prefix is markets.gcp.labels.owner_prefix written in HCL:
    # "sf-" + the first 8 hex of sha256("owner" 0x1f owner) + "-".
    prefix = attr(_locals(), "owner_prefix")
    assert prefix == '"sf-${substr(sha256("owner\\u001f${var.owner}"), 0, 8)}-"'
    owner = "team-ml-prod"
    digest = hashlib.sha256(("owner" + "\x1f" + owner).encode()).hexdigest()
    assert owner_prefix(owner) == f"sf-{digest[:8]}-"
    # The daemon role's binding has no condition (list permissions would fail it).
    assert not top_level(_resource("google_project_iam_member", "daemon"), "condition")


def test_runtime_runs_as_the_modules_own_service_account() -> None:
    vm = _resource("google_compute_instance", "daemon")
    (sa,) = top_level(vm, "service_account")
    assert attr(sa, "email") == "google_service_account.daemon.email"
    assert "-compute@developer.gserviceaccount.com" not in _text()
    assert not top_level(vm, "access_config")  # no external IP
    (scheduling,) = top_level(vm, "scheduling")
    assert attr(scheduling, "provisioning_model") == '"STANDARD"'
    # actAs is bound on the launch service account only, never the project.
    act_as = _resource("google_service_account_iam_member", "act_as_vm_account")
    assert attr(act_as, "role") == '"roles/iam.serviceAccountUser"'
    assert "var.launch.service_account" in attr(act_as, "service_account_id")
    assert not re.search(r'google_project_iam_\w+"[^{]*\{[^}]*serviceAccountUser', _text())


def test_no_preemption_feed_is_created() -> None:
    # The daemon polls zone operations itself (markets.gcp.preemption).
    assert not re.search(r'resource "google_(pubsub|logging)_\w+"', _text())
    assert {"compute.zoneOperations.list", "compute.zoneOperations.get"} <= GCP_IAM_PERMISSIONS


@pytest.mark.parametrize("where", [GCP, EXAMPLE], ids=["module", "example"])
def test_variables_are_validated_and_hold_no_secret(where: Path) -> None:
    text = _text(where)
    names = re.findall(r'^variable "(\w+)"', text, re.M)
    secretish = re.compile(r"password|secret|token|key$|credential", re.I)
    for name, body in zip(names, blocks(text, r'(?m)^variable "\w+"'), strict=True):
        assert "sensitive" not in body
        if secretish.search(name) and name != "kms_key_name":
            pytest.fail(f"variable {name} looks like a secret")
        if re.search(r"^\s*default\s*=", body, re.M):
            default = attr(body, "default")
            assert not re.search(r"(?i)password|BEGIN .*PRIVATE KEY|AIza", default), name
        if where == GCP and attr(body, "type") != "bool":
            assert "validation" in body, f"modules/gcp variable {name} is not validated"


def test_rendered_configuration_uses_fields_the_daemon_knows() -> None:
    config = (GCP / "config.tf").read_text()
    (managed,) = blocks(config, r"managed_config = merge\(\s*")
    keys = set(re.findall(r"^[ ]*(\w+)[ ]*=", managed, re.M))
    assert keys <= set(DaemonConfig.model_fields), keys - set(DaemonConfig.model_fields)
    (settings,) = blocks(_text(), r'variable "daemon_settings"')
    assert set(strings(attr(settings, "condition"))) == keys
    (launch,) = blocks(_text(), r'variable "launch"')
    attrs = set(re.findall(r"^\s*(\w+)\s*=\s*optional\(", launch, re.M))
    assert attrs | {"project", "zones"} <= set(GcpProviderSettings.model_fields)


def test_a_configuration_of_the_modules_shape_loads() -> None:
    """What config.tf renders, written by hand: DaemonConfig with provider gcp,
    then the provider's settings (the composition root adds owner)."""
    cfg = DaemonConfig.model_validate(
        {
            "owner": "team-ml-prod",
            "account": "my-gpu-project",
            "store_url": "sqlite:////var/lib/spotfolio/state.db",
            "market": "gcp",
            "market_options": {"project": "my-gpu-project", "regions": "us-central1"},
            "provider": "gcp",
            "provider_options": {
                "project": "my-gpu-project",
                "zones": ["us-central1-a", "us-central1-c"],
                "instance_template": "global/instanceTemplates/spotfolio-gpu",
            },
            "metrics_port": 9108,
        }
    )
    settings = GcpProviderSettings.model_validate({"owner": cfg.owner, **cfg.provider_options})
    assert settings.zones == ("us-central1-a", "us-central1-c")


def test_fetch_config_writes_the_secret_then_execs(tmp_path: Path) -> None:
    """The container entrypoint against a local stand-in for the metadata
    server and Secret Manager."""
    import base64
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    seen: list[tuple[str, str | None]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append((self.path, self.headers.get("Authorization")))
            if self.path.endswith("/token"):
                assert self.headers.get("Metadata-Flavor") == "Google"
                body = {"access_token": "tok"}
            else:
                body = {"payload": {"data": base64.b64encode(b"owner: x\n").decode()}}  # type: ignore[dict-item]
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}"
    path = tmp_path / "config.yaml"
    env = {
        "PATH": os.environ["PATH"],
        "SPOTFOLIO_METADATA_URL": url,
        "SPOTFOLIO_SECRETS_URL": url,
        "SPOTFOLIO_CONFIG_SECRET": "projects/p/secrets/s/versions/latest",
        "SPOTFOLIO_CONFIG_PATH": str(path),
    }
    stand_in = [sys.executable, "-c", "import sys; print(sys.argv[1:])", "ran"]
    try:
        run = subprocess.run(
            [sys.executable, str(GCP / "fetch_config.py"), *stand_in],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        server.shutdown()
        server.server_close()
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "['ran']"
    assert path.read_text() == "owner: x\n" and path.stat().st_mode & 0o077 == 0
    assert seen[1] == ("/v1/projects/p/secrets/s/versions/latest:access", "Bearer tok")


def test_every_gcp_checkov_suppression_says_why() -> None:
    skips = re.findall(r"#\s*checkov:skip=(CKV2?_GCP_\d+)(?::(.*))?", _text())
    assert skips
    assert not [c for c, why in skips if len(why.strip()) < 30]


def _google_plugin() -> Path:
    return PLUGIN_DIR / "registry.terraform.io" / "hashicorp" / "google"


def test_validate_needs_the_google_provider_offline() -> None:
    """``terraform validate`` of modules/gcp and examples/gcp: the registry is
    out of reach, so init needs registry.terraform.io/hashicorp/google in the
    plugin directory. Skips with that reason while it is absent."""
    google = _google_plugin()
    if not google.is_dir():
        pytest.skip(
            f"hashicorp/google is not in the offline plugin directory {PLUGIN_DIR} "
            f"(no {google}); terraform init/validate cannot run for modules/gcp or examples/gcp"
        )
    pytest.fail(f"{google} exists: run terraform validate here (tests/terraform/test_aws.py)")
