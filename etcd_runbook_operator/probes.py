"""/healthz (the process loop is alive) and /readyz (able to do its job) on one small server."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def serve_probes(
    host: str, port: int, healthy: Callable[[], bool], ready: Callable[[], bool]
) -> ThreadingHTTPServer:
    checks = {"/healthz": healthy, "/readyz": ready}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            check = checks.get(self.path.split("?")[0])
            if check is None:
                self.send_error(404)
                return
            ok = check()
            body = b"ok\n" if ok else b"not ok\n"
            self.send_response(200 if ok else 503)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            """Probes every few seconds would drown the log."""

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="probes", daemon=True).start()
    return server
