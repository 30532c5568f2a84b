"""The release workflow, read statically: nothing is published untested.

``.github/workflows/release.yml`` starts on a ``v*`` tag, runs the README's
test command (``pytest``) in a job of its own, and every job that publishes
(the wheel to PyPI, the image to the registry) depends on that job, directly
or through the jobs it needs. PyPI is reached by trusted publishing (an OIDC
token), never by a stored password. ``[project.urls]`` names the places a
user looks for.
"""

from __future__ import annotations

import tomllib
from typing import Any

import yaml

from tests.paths import REPO

WORKFLOW = REPO / ".github" / "workflows" / "release.yml"
PUBLISHERS = {"pypi": "pypa/gh-action-pypi-publish", "image": "docker/build-push-action"}


def _workflow() -> dict[str, Any]:
    loaded: dict[Any, Any] = yaml.safe_load(WORKFLOW.read_text())
    # YAML 1.1 reads the bare key `on` as the boolean True
    if True in loaded:
        loaded["on"] = loaded.pop(True)
    return loaded


def _needs(job: dict[str, Any]) -> list[str]:
    needs = job.get("needs", [])
    return [needs] if isinstance(needs, str) else list(needs)


def _upstream(jobs: dict[str, Any], name: str) -> set[str]:
    """Every job ``name`` waits for, through the chain of ``needs``."""
    seen: set[str] = set()
    todo = _needs(jobs[name])
    while todo:
        dep = todo.pop()
        assert dep in jobs, f"{name} needs {dep!r}, which is no job"
        if dep not in seen:
            seen.add(dep)
            todo += _needs(jobs[dep])
    return seen


def _uses(job: dict[str, Any]) -> list[str]:
    return [str(step.get("uses", "")) for step in job.get("steps", [])]


def test_a_version_tag_starts_it() -> None:
    assert _workflow()["on"]["push"]["tags"] == ["v*"]


def test_the_tests_job_runs_the_readme_test_command() -> None:
    readme = (REPO / "README.md").read_text()
    assert "&& pytest" in readme, "the README's test command is no longer `pytest`"
    runs = [str(step.get("run", "")).strip() for step in _workflow()["jobs"]["tests"]["steps"]]
    assert "pytest" in runs
    assert not any("-m" in run.split() for run in runs if run.startswith("pytest"))


def test_every_publishing_job_waits_for_the_tests() -> None:
    jobs = _workflow()["jobs"]
    for name, action in PUBLISHERS.items():
        assert any(use.startswith(action) for use in _uses(jobs[name])), (name, action)
        assert "tests" in _upstream(jobs, name), f"{name} publishes without the tests"
    # and no other job publishes behind their back
    for name, job in jobs.items():
        if name not in PUBLISHERS:
            uses = _uses(job)
            assert not any(u.startswith(tuple(PUBLISHERS.values())) for u in uses), name


def test_the_wheel_goes_to_pypi_by_trusted_publishing_on_a_tag_only() -> None:
    jobs = _workflow()["jobs"]
    pypi = jobs["pypi"]
    assert pypi["permissions"] == {"id-token": "write"}
    assert pypi["if"] == "github.ref_type == 'tag'"
    assert "wheel" in _upstream(jobs, "pypi")
    # no stored secret: neither a password input nor a secrets.* reference
    assert "secrets." not in yaml.safe_dump(pypi)
    for use in pypi["steps"]:
        assert "password" not in use.get("with", {})


def test_the_workflow_reads_only_by_default() -> None:
    assert _workflow()["permissions"] == {"contents": "read"}


def test_project_urls_name_the_places_a_user_looks() -> None:
    urls = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["urls"]
    assert set(urls) >= {"Homepage", "Documentation", "Changelog", "Issues"}
    assert all(url.startswith("https://") for url in urls.values())
    assert urls["Changelog"].endswith("/CHANGELOG.md") and (REPO / "CHANGELOG.md").is_file()
