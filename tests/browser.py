"""A page rendered by a real headless browser: Debian's Chromium.

``render_page(html, workdir)`` loads a copy of ``html`` with a probe script
inserted first in its ``<head>`` (it records every resource the page
requests, every load or script error and every ``console.error``), waits for
the load (``--virtual-time-budget``), and returns the DOM Chromium built,
what the probe saw and a screenshot. Host names resolve to nothing
(``--host-resolver-rules``), so a page that needs the network shows it as a
resource and an error instead of passing by luck. The probe is the test's, not
the page's: the page under test carries no script of its own.

``CHROMIUM`` is the browser's path, ``None`` when it is not installed
(``apt-get install chromium``; ``.ci/run`` installs it).
"""

from __future__ import annotations

import html as html_lib
import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
NO_CHROMIUM = "chromium not installed (Debian: apt-get install chromium; .ci/run installs it)"

_PROBE = """<script>
window.__errors = [];
window.addEventListener('error', e => window.__errors.push(
  String(e.message || (e.target && (e.target.src || e.target.href)) || 'error')), true);
const __ce = console.error;
console.error = (...a) => { window.__errors.push(a.join(' ')); __ce(...a); };
window.addEventListener('load', () => {
  const r = performance.getEntriesByType('resource').map(x => x.name);
  document.documentElement.setAttribute('data-probe',
    JSON.stringify({resources: r, errors: window.__errors}));
});
</script>"""


@dataclass(frozen=True)
class Rendered:
    dom: str  # the DOM after load, serialised by Chromium
    resources: list[str]  # what the page requested
    errors: list[str]  # load errors, uncaught errors, console.error
    screenshot: Path


def _flags(workdir: Path) -> list[str]:
    assert CHROMIUM is not None
    return [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--user-data-dir={workdir / 'profile'}",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--virtual-time-budget=5000",
    ]


def render_page(page: Path, workdir: Path) -> Rendered:
    text = page.read_text(encoding="utf-8")
    probed = workdir / f"probed-{page.name}"
    probed.write_text(re.sub(r"<head>", "<head>" + _PROBE, text, count=1), encoding="utf-8")
    url = probed.resolve().as_uri()
    dom = subprocess.run(
        [*_flags(workdir), "--dump-dom", url],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    shot = workdir / f"{page.stem}.png"
    subprocess.run(
        [*_flags(workdir), f"--screenshot={shot}", "--window-size=1100,2400", url],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    found = re.search(r'data-probe="([^"]*)"', dom)
    assert found is not None, "the probe did not run: the page never finished loading"
    probe = json.loads(html_lib.unescape(found.group(1)))
    return Rendered(dom, list(probe["resources"]), list(probe["errors"]), shot)
