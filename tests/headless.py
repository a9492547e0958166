"""A headless Chromium driven over the DevTools protocol on a pipe: open a page, read its console, screenshot.

Why a pipe: ``--remote-debugging-pipe`` speaks the DevTools protocol (JSON
messages ended by a NUL byte) on file descriptors 3 and 4, so no port, no
websocket library and no browser download are needed; ``os.posix_spawn`` puts
the pipe ends on those descriptors. What the tests need from it: every console
message and uncaught exception of the page, every network request it made (an
offline page makes none beyond its own file), JavaScript evaluated in it, and a
PNG screenshot.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BINARIES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = (
    "--headless=new",
    "--disable-gpu",
    "--no-sandbox",  # root in a container: Chromium's sandbox needs user namespaces it may not have
    "--disable-background-networking",
    "--disable-sync",
    "--disable-component-update",
    "--disable-extensions",
    "--disable-default-apps",
    "--disable-dev-shm-usage",  # a small /dev/shm in containers
    "--no-first-run",
    "--no-default-browser-check",
    "--mute-audio",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
)


def find_chromium() -> str | None:
    """The first Chromium or Chrome binary on PATH (``$KERNELOPT_CHROMIUM`` first), or None."""
    explicit = os.environ.get("KERNELOPT_CHROMIUM")
    if explicit:
        return shutil.which(explicit)
    for name in BINARIES:
        found = shutil.which(name)
        if found:
            return found
    return None


@dataclass
class PageLog:
    """What a page said while it was open."""

    console: list[tuple[str, str]] = field(default_factory=list)  # (level, text)
    exceptions: list[str] = field(default_factory=list)  # uncaught ones, and dialogs the page opened
    log_entries: list[tuple[str, str]] = field(default_factory=list)  # (level, text): failed loads and the like
    requests: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and error log entries, one line each."""
        return (
            [f"console.{level}: {text}" for level, text in self.console if level in ("error", "assert")]
            + [f"exception: {text}" for text in self.exceptions]
            + [f"log.{level}: {text}" for level, text in self.log_entries if level == "error"]
        )


class Browser:
    """One headless Chromium with one page; use as a context manager."""

    def __init__(self, binary: str, width: int = 1280, height: int = 1000, timeout_s: float = 30.0) -> None:
        self.timeout_s = timeout_s
        self.log = PageLog()
        self._profile = tempfile.TemporaryDirectory(prefix="kernelopt-chromium-")
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []
        to_browser_r, to_browser_w = os.pipe()
        from_browser_r, from_browser_w = os.pipe()
        # Above 4, so that placing them on 3 and 4 in the child cannot overwrite one with the other.
        child_r = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD_CLOEXEC, 10)
        child_w = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD_CLOEXEC, 10)
        for fd in (to_browser_r, from_browser_w):
            os.close(fd)
        self._stderr = open(Path(self._profile.name) / "stderr.log", "wb")  # noqa: SIM115 - closed in close()
        argv = [
            binary,
            *FLAGS,
            f"--window-size={width},{height}",
            f"--user-data-dir={self._profile.name}",
            "about:blank",
        ]
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, self._stderr.fileno(), 1),
            (os.POSIX_SPAWN_DUP2, self._stderr.fileno(), 2),
            (os.POSIX_SPAWN_DUP2, child_r, 3),
            (os.POSIX_SPAWN_DUP2, child_w, 4),
        ]
        try:
            self.pid = os.posix_spawn(binary, argv, dict(os.environ), file_actions=actions, setsid=True)
        finally:
            os.close(child_r)
            os.close(child_w)
        self._write, self._read = to_browser_w, from_browser_r
        self._session: str | None = None

    def __enter__(self) -> Browser:
        try:
            target = self.command("Target.createTarget", {"url": "about:blank"})["targetId"]
            self._session = self.command("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Page", "Runtime", "Log", "Network"):
                self.command(f"{domain}.enable")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the protocol --------------------------------------------------------------------

    def command(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one command (to the page once attached) and return its result; an error reply raises."""
        wanted = self._send(method, params)
        reply = self._wait(lambda m: m.get("id") == wanted, f"the reply to {method}")
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def _send(self, method: str, params: dict[str, Any] | None = None) -> int:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if self._session is not None and not method.startswith(("Target.", "Browser.")):
            message["sessionId"] = self._session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        return self._next_id

    def _wait(self, done: Any, what: str, timeout_s: float | None = None) -> dict[str, Any]:
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        while True:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                message = json.loads(raw)
                if "method" in message:
                    self._record(message)
                if done(message):
                    return message
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"headless Chromium: no {what} within {timeout_s or self.timeout_s:g} s")
            ready, _, _ = select.select([self._read], [], [], left)
            if ready:
                chunk = os.read(self._read, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"headless Chromium exited before {what}; its log: {self.stderr_tail()}")
                self._buffer += chunk

    def _record(self, event: dict[str, Any]) -> None:
        method, params = event["method"], event.get("params", {})
        if method == "Runtime.consoleAPICalled":
            text = " ".join(str(arg.get("value", arg.get("description", ""))) for arg in params.get("args", []))
            self.log.console.append((params.get("type", "log"), text))
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            description = (details.get("exception") or {}).get("description") or details.get("text", "")
            self.log.exceptions.append(str(description).splitlines()[0] if description else "exception")
        elif method == "Log.entryAdded":
            entry = params.get("entry", {})
            self.log.log_entries.append((entry.get("level", ""), f"{entry.get('text', '')} {entry.get('url', '')}"))
        elif method == "Network.requestWillBeSent":
            self.log.requests.append(params.get("request", {}).get("url", ""))
        elif method == "Page.javascriptDialogOpening":  # alert(): what an injected script would do first
            self.log.exceptions.append(f"a {params.get('type')} dialog opened: {params.get('message')}")
            self._send("Page.handleJavaScriptDialog", {"accept": True})  # or the page stays blocked

    # -- what the tests do -----------------------------------------------------------------

    def open(self, path: Path) -> None:
        """Navigate to a local file and wait for its load event."""
        self.command("Page.navigate", {"url": path.resolve().as_uri()})
        self._wait(lambda m: m.get("method") == "Page.loadEventFired", "load event")

    def evaluate(self, expression: str) -> Any:
        """The JSON value of ``expression`` in the page (awaited when it is a promise)."""
        result = self.command(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True}
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails'].get('text')}")
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout_s: float = 20.0) -> Any:
        """Poll ``expression`` until it is truthy; its value."""
        deadline = time.monotonic() + timeout_s
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"{expression} stayed false for {timeout_s:g} s")
            self._drain(0.05)

    def _drain(self, seconds: float) -> None:
        try:
            self._wait(lambda m: False, "nothing", timeout_s=seconds)
        except TimeoutError:
            pass

    def screenshot(
        self, path: Path, full_page: bool = False, max_height: int = 6000, selector: str | None = None
    ) -> Path:
        """A PNG of the viewport, of the whole page up to ``max_height`` pixels, or of one element."""
        params: dict[str, Any] = {"format": "png"}
        if selector is not None:
            box = self.evaluate(
                f"(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();"
                " return {x: r.left + window.scrollX, y: r.top + window.scrollY, width: r.width, height: r.height}; })()"
            )
            params.update(
                captureBeyondViewport=True, clip={**box, "height": min(box["height"], max_height), "scale": 1}
            )
        elif full_page:
            size = self.command("Page.getLayoutMetrics")["cssContentSize"]
            params.update(
                captureBeyondViewport=True,
                clip={"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], max_height), "scale": 1},
            )
        data = self.command("Page.captureScreenshot", params)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def stderr_tail(self, chars: int = 2000) -> str:
        self._stderr.flush()
        return (Path(self._profile.name) / "stderr.log").read_text(errors="replace")[-chars:]

    def close(self) -> None:
        try:
            if self._session is not None:
                self.command("Browser.close")
        except (OSError, RuntimeError, TimeoutError):
            pass
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            pid, _ = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                break
            time.sleep(0.05)
        else:
            try:
                os.killpg(self.pid, signal.SIGKILL)  # its own session: the browser and every helper it started
            except ProcessLookupError:
                pass
            os.waitpid(self.pid, 0)
        for fd in (self._write, self._read):
            try:
                os.close(fd)
            except OSError:
                pass
        self._stderr.close()
        self._profile.cleanup()
