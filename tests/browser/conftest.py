"""A live JupyterLab and a headless Chromium for the widget browser tests.

Needs: Chromium at /usr/bin/chromium (Debian's package; `.ci/install-browser.sh`) or the
path in $MGPU_LAB_CHROMIUM, and the Python packages jupyterlab, anywidget, ipykernel and
playwright. Playwright drives the system Chromium; it never downloads a browser. When any
piece is missing the tests are skipped with the reason.

JupyterLab runs on a free local port with token and XSRF checks off, in a temporary root
directory holding a copy of the test notebook, with its own config/runtime directories so
the user's settings and workspaces do not leak in. The server and its kernels find this checkout
first on PYTHONPATH (not another install of mgpu_lab), and the fixtures through
$MGPU_LAB_WIDGET_FIXTURES.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).parent
ARTIFACTS = REPO / "test-artifacts" / "browser"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str:
    return os.environ.get("MGPU_LAB_CHROMIUM", "/usr/bin/chromium")


def missing_reason() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if not Path(chromium_path()).exists():
        return f"no Chromium at {chromium_path()} (install it with .ci/install-browser.sh or set MGPU_LAB_CHROMIUM)"
    for module, package in (
        ("jupyterlab", "jupyterlab"),
        ("playwright", "playwright"),
        ("anywidget", "anywidget"),
        ("ipykernel", "ipykernel"),
    ):
        if importlib.util.find_spec(module) is None:
            return f"the Python package {package} is not installed (pip install 'mgpu_lab[dev]')"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = missing_reason()
    if reason is None:
        return
    for item in items:
        if "browser" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=reason))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_server(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"JupyterLab exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
        try:
            with urllib.request.urlopen(f"{url}api/status", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.3)
    raise RuntimeError(f"JupyterLab did not answer at {url} within {timeout:.0f}s:\n{log.read_text()[-4000:]}")


@pytest.fixture(scope="session")
def jupyter_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of a JupyterLab serving a temp dir that holds the test notebook."""
    root = tmp_path_factory.mktemp("lab-root")
    home = tmp_path_factory.mktemp("lab-home")
    for notebook in HERE.glob("*.ipynb"):
        shutil.copy(notebook, root / notebook.name)
    port = _free_port()
    env = dict(os.environ)
    env.update(
        {
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")])),
            "MGPU_LAB_WIDGET_FIXTURES": str(REPO / "tests" / "fixtures" / "widgets"),
            "MGPU_LAB_REPO": str(REPO),
            "JUPYTER_CONFIG_DIR": str(home / "config"),
            "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
            "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
            "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
            "IPYTHONDIR": str(home / "ipython"),
            "MPLBACKEND": "Agg",
        }
    )
    # No "official Jupyter news?" toast: it would cover the widgets in screenshots.
    news = home / "settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    news.parent.mkdir(parents=True, exist_ok=True)
    news.write_text('{"fetchNews": "false"}')
    # Start the notebook's kernel without the "Select Kernel" dialog, which would block Run All,
    # and render every cell: windowed notebooks leave cells out of view out of the DOM.
    tracker = home / "settings" / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
    tracker.parent.mkdir(parents=True, exist_ok=True)
    tracker.write_text('{"autoStartDefaultKernel": true, "windowingMode": "none"}')
    # The server extension pip enables through etc/jupyter (this checkout's copy of its config:
    # the environment's own may belong to another install).
    server_config = home / "config" / "jupyter_server_config.d"
    server_config.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "jupyter-config" / "jupyter_server_config.d" / "mgpu_lab.json", server_config / "mgpu_lab.json")
    log = home / "jupyterlab.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyterlab",
                "--no-browser",
                f"--ServerApp.port={port}",
                "--ServerApp.port_retries=0",
                "--ServerApp.ip=127.0.0.1",
                "--IdentityProvider.token=",
                "--ServerApp.password=",
                "--ServerApp.disable_check_xsrf=True",
                "--ServerApp.open_browser=False",
                f"--ServerApp.root_dir={root}",
                "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
                # No PyPI look-ups from the extension manager: the tests run offline.
                "--LabApp.extension_manager=readonly",
                # Containers and CI runners often run as root, which Jupyter refuses by default.
                *(["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []),
            ],
            cwd=root,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}/"
    try:
        _wait_for_server(url, proc, log)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(log, ARTIFACTS / "jupyterlab.log")


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    """A headless system Chromium driven by Playwright."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()
