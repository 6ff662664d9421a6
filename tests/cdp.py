"""Headless Chromium driven over the DevTools protocol (a websocket), for the browser tests.

:class:`Browser` starts Debian's chromium (``conftest.chromium_binary``) with
its own profile and ``--remote-debugging-port=0``, reads the port it chose from
``DevToolsActivePort`` in the profile, and opens one page. :class:`Page` sends
protocol commands and waits for their answers and for events; conditions in the
page are awaited in the page itself (a promise that resolves when they hold),
so no test sleeps. Everything stays on 127.0.0.1.
"""

from __future__ import annotations

import base64
import json
import subprocess
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect

from conftest import chromium_binary

START_TIMEOUT = 60.0      # seconds for chromium to start listening
COMMAND_TIMEOUT = 60.0    # seconds for one protocol answer


class ProtocolError(AssertionError):
    pass


class Page:
    """One page (a target) of the browser, attached with a flat session."""

    def __init__(self, socket: ClientConnection, session: str) -> None:
        self.socket = socket
        self.session = session
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Send a command of the page's session and return its result."""
        self.next_id += 1
        ident = self.next_id
        self.socket.send(json.dumps({"id": ident, "method": method, "params": params,
                                     "sessionId": self.session}))
        while True:
            message = json.loads(self.socket.recv(timeout=COMMAND_TIMEOUT))
            if message.get("id") == ident:
                if "error" in message:
                    raise ProtocolError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    def wait_event(self, method: str) -> dict[str, Any]:
        """The next event ``method`` of the page (those already received first)."""
        for index, event in enumerate(self.events):
            if event["method"] == method:
                del self.events[:index + 1]
                return event
        while True:
            message = json.loads(self.socket.recv(timeout=COMMAND_TIMEOUT))
            if message.get("method") == method and message.get("sessionId") == self.session:
                return message

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression (a promise is awaited)."""
        result = self.send("Runtime.evaluate", expression=expression, awaitPromise=True,
                           returnByValue=True)
        if "exceptionDetails" in result:
            raise ProtocolError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def until(self, condition: str, what: str, timeout_ms: int = 30000) -> Any:
        """Wait in the page until the JavaScript expression ``condition`` is truthy
        (checked at each change of the DOM); returns its value (true for an element)."""
        value = self.evaluate(f"""new Promise((resolve, reject) => {{
            const check = () => {{
                try {{ const v = ({condition}); return v instanceof Node ? true : v; }}
                catch (e) {{ return null; }}
            }};
            const first = check();
            if (first) {{ resolve(first); return; }}
            const observer = new MutationObserver(() => {{
                const value = check();
                if (value) {{ observer.disconnect(); clearTimeout(timer); resolve(value); }}
            }});
            observer.observe(document, {{subtree: true, childList: true, attributes: true,
                                         characterData: true}});
            const timer = setTimeout(() => {{ observer.disconnect(); resolve(null); }},
                                     {timeout_ms});
        }})""")
        assert value, f"the page never showed {what}"
        return value

    def navigate(self, url: str) -> None:
        """Load ``url`` and wait for its load event (not an earlier page's)."""
        self.events.clear()
        self.send("Page.navigate", url=url)
        self.wait_event("Page.loadEventFired")

    def box(self, selector: str) -> dict[str, float]:
        """The bounding box (CSS pixels, page coordinates) of the first match of
        ``selector``, scrolled into view."""
        found = self.evaluate(f"""(() => {{
            const e = document.querySelector({json.dumps(selector)});
            if (!e) return null;
            e.scrollIntoView({{block: "center"}});
            const r = e.getBoundingClientRect();
            return {{x: r.x, y: r.y, width: r.width, height: r.height}};
        }})()""")
        assert found, f"no element {selector}"
        return found

    def click(self, selector: str) -> None:
        """A real mouse click at the centre of the first match of ``selector``."""
        box = self.box(selector)
        self.click_at(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)

    def press(self, key: str) -> None:
        """Press and release a key (``"ArrowLeft"``...)."""
        for kind in ("keyDown", "keyUp"):
            self.send("Input.dispatchKeyEvent", type=kind, key=key, code=key)

    def click_at(self, x: float, y: float) -> None:
        """A real mouse click at viewport point (x, y)."""
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left",
                      clickCount=1)

    def screenshot(self, selector: str | None = None) -> bytes:
        """A PNG of the page's viewport, or of the first match of ``selector``."""
        params: dict[str, Any] = {"format": "png"}
        if selector is not None:
            box = self.box(selector)
            params["clip"] = {**box, "scale": 1}
        return base64.b64decode(self.send("Page.captureScreenshot", **params)["data"])


class Browser:
    """Headless chromium with a page; use as a context manager."""

    def __init__(self, profile: Path, env: dict[str, str] | None = None,
                 width: int = 1280, height: int = 1000) -> None:
        self.profile = profile
        self.stack = ExitStack()
        profile.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [chromium_binary(), "--headless", "--disable-gpu", "--no-sandbox",
             "--disable-dev-shm-usage", "--no-first-run", "--hide-scrollbars",
             "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--remote-debugging-address=127.0.0.1",
             "--remote-debugging-port=0", f"--user-data-dir={profile}",
             f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        try:
            port_file = profile / "DevToolsActivePort"
            end = time.monotonic() + START_TIMEOUT
            while not (port_file.exists() and port_file.read_text().count("\n") >= 1):
                if self.process.poll() is not None:
                    raise AssertionError("chromium ended at start: "
                                         + self.process.stderr.read().decode()[-2000:])
                if time.monotonic() > end:
                    raise AssertionError("chromium did not start listening")
                time.sleep(0.05)
            port, path = port_file.read_text().split("\n")[:2]
            self.socket = self.stack.enter_context(
                connect(f"ws://127.0.0.1:{port}{path}", max_size=64 * 2**20))
            self.next_id = 0
            target = self._browser_send("Target.createTarget", url="about:blank")["targetId"]
            session = self._browser_send("Target.attachToTarget", targetId=target,
                                         flatten=True)["sessionId"]
            self.page = Page(self.socket, session)
            self.page.send("Page.enable")
            self.page.send("Runtime.enable")
            self.page.send("Emulation.setDeviceMetricsOverride", width=width, height=height,
                           deviceScaleFactor=1, mobile=False)
        except BaseException:
            self.close()
            raise

    def _browser_send(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.socket.send(json.dumps({"id": -self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv(timeout=COMMAND_TIMEOUT))
            if message.get("id") == -self.next_id:
                if "error" in message:
                    raise ProtocolError(f"{method}: {message['error']}")
                return message["result"]

    def close(self) -> None:
        self.stack.close()
        if self.process.poll() is None:
            self.process.kill()
        self.process.communicate(timeout=30)

    def __enter__(self) -> Page:
        return self.page

    def __exit__(self, *exc: object) -> None:
        self.close()
