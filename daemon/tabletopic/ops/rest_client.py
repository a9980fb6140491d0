"""The operator's CLI against a running daemon: ``tabletopic status|offsets --url URL`` call its REST API.

The same paths any Connect tool calls (``curl``, ``kcctl``), so what the CLI shows and
changes is exactly what the REST API does.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
from typing import Any


class RestError(RuntimeError):
    """The daemon answered with an error (Connect's ``error_code`` and ``message``), or did not answer."""


class RestClient:
    def __init__(self, url: str, user: str | None = None, cacert: str | None = None) -> None:
        self._url = url.rstrip("/")
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if user:
            self._headers["Authorization"] = "Basic " + base64.b64encode(user.encode()).decode()
        self._context = ssl.create_default_context(cafile=cacert) if cacert else None

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self._url + path, data=data, method=method, headers=self._headers)
        try:
            with urllib.request.urlopen(request, timeout=120, context=self._context) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as exc:
            text = exc.read().decode(errors="replace")
            try:
                message = json.loads(text).get("message", text)
            except (ValueError, AttributeError):
                message = text
            raise RestError(f"{method} {path}: {exc.code} {message}") from None
        except OSError as exc:
            raise RestError(f"cannot reach {self._url}: {exc}") from None
        return json.loads(text) if text.strip() else None


def status_lines(client: RestClient, connector: str | None) -> list[str]:
    """Each connector's state, its tasks, topics and the offsets its tables hold."""
    names = [connector] if connector else client.call("GET", "/connectors")
    lines = []
    for name in names:
        status = client.call("GET", f"/connectors/{name}/status")
        top = status["connector"]
        lines.append(f"connector {name}: {top['state']} (worker {top['worker_id']})"
                     + (f": {top['trace']}" if top.get("trace") else ""))
        for task in status["tasks"]:
            lines.append(f"  task {task['id']} on {task['worker_id']}: {task['state']}"
                         + (f": {task['trace'].splitlines()[0]}" if task.get("trace") else ""))
        topics = client.call("GET", f"/connectors/{name}/topics")[name]["topics"]
        lines.append(f"  topics: {', '.join(topics) or '-'}")
        offsets = client.call("GET", f"/connectors/{name}/offsets")["offsets"]
        for entry in offsets:
            p = entry["partition"]
            lines.append(f"  {p['kafka_topic']}[{p['kafka_partition']}]: tables {entry['offset']['kafka_offset']}")
    return lines
