"""A real headless browser for tests: Chromium driven by chromedriver over the W3C WebDriver protocol.

Both come from the Debian packages (``apt-get install chromium chromium-driver``; ``.ci/run`` installs them).
WebDriver is plain JSON over HTTP, so this client is a few ``urllib`` calls rather than a dependency: start
chromedriver on a free loopback port, open a session whose Chromium runs headless with a new, empty profile,
load pages, run scripts in them, take screenshots, and stop everything it started.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from hack.lib.processes import free_port, stop

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
# flags that work as root in a container: no sandbox (root), no GPU, nothing fetched from the network
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1400,1600"]


def missing() -> str | None:
    """Why no browser can be driven here (None when chromium and chromedriver are both installed)."""
    if not any(shutil.which(n) for n in CHROMIUM_NAMES):
        return "chromium is not installed (apt-get install chromium chromium-driver)"
    if not shutil.which("chromedriver"):
        return "chromedriver is not installed (apt-get install chromium-driver)"
    return None


class WebDriverError(Exception):
    pass


class Browser:
    def __init__(self, *, timeout: float = 30.0):
        binary = next(path for n in CHROMIUM_NAMES if (path := shutil.which(n)))
        driver = shutil.which("chromedriver")
        assert driver, missing()
        self.profile = Path(tempfile.mkdtemp(prefix="scoria-chromium-"))
        self.port = free_port()
        self.log = self.profile.parent / f"{self.profile.name}-chromedriver.log"
        self.driver = subprocess.Popen([driver, f"--port={self.port}", "--allowed-ips=127.0.0.1",
                                        f"--log-path={self.log}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self._call("GET", "/status", timeout=2)["ready"]:
                    break
            except (OSError, WebDriverError):
                pass
            if time.monotonic() > deadline or self.driver.poll() is not None:
                self.close()
                raise WebDriverError(f"chromedriver did not start (see {self.log})")
            time.sleep(0.1)
        caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {
            "binary": binary, "args": [*FLAGS, f"--user-data-dir={self.profile}"]}}}}
        try:
            self.session = self._call("POST", "/session", caps, timeout=timeout)["sessionId"]
        except BaseException:
            self.close(session=False)
            raise

    def _call(self, method: str, path: str, body: Any = None, *, timeout: float = 30.0) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as answer:
                return json.loads(answer.read() or b"{}").get("value")
        except urllib.error.HTTPError as exc:
            try:
                value = json.loads(exc.read()).get("value") or {}
            except ValueError:
                value = {}
            raise WebDriverError(f"{method} {path}: {exc.code} {value.get('error')}: "
                                 f"{str(value.get('message'))[:500]}") from None

    def get(self, url: str) -> None:
        self._call("POST", f"/session/{self.session}/url", {"url": url})

    def run(self, script: str, *args: Any) -> Any:
        """The value of ``script`` (a function body: ``return ...``) run in the page."""
        return self._call("POST", f"/session/{self.session}/execute/sync", {"script": script, "args": list(args)})

    def wait(self, script: str, timeout: float = 20.0, what: str = "") -> Any:
        """The first truthy value of ``script``, tried every 0.2 s."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.run(script)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:g}s waiting for {what or script}")
            time.sleep(0.2)

    def screenshot(self, path: Path) -> Path:
        png = base64.b64decode(self._call("GET", f"/session/{self.session}/screenshot"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(png)
        return path

    def console_errors(self) -> list[str]:
        """What the page wrote to its console as errors (chromedriver's log of the page, where it keeps one)."""
        try:
            entries = self._call("POST", f"/session/{self.session}/se/log", {"type": "browser"}) or []
        except WebDriverError:
            return []
        return [e.get("message", "") for e in entries if e.get("level") == "SEVERE"]

    def close(self, session: bool = True) -> None:
        if session and getattr(self, "session", None):
            try:
                self._call("DELETE", f"/session/{self.session}", timeout=10)
            except (OSError, WebDriverError):
                pass
        stop(self.driver, timeout=10)
        shutil.rmtree(self.profile, ignore_errors=True)
        if os.path.exists(self.log) and os.path.getsize(self.log) == 0:
            os.unlink(self.log)
