"""A small hostile "API server" on 127.0.0.1 for tests: drips bytes, never ends a list, sends
bodies without end. Plain sockets, so it can misbehave in ways a real HTTP server would not."""

from __future__ import annotations

import json
import socket
import socketserver
import threading
import time

CHUNK = b"x" * 65536


class HostileServer:
    """``behaviour(path, query) -> None`` runs per request with ``send(bytes)``; see the helpers."""

    def __init__(self):
        self.requests: list[str] = []
        self.authorizations: list[str] = []  # the Authorization header of every request ("" when none)
        self.status = b"401 Unauthorized"
        self.body = b""
        self.stopped = threading.Event()
        self.mode = "drip"
        self.page_delay = 0.0
        self.items_per_page = 1
        self.keep_alive = True  # False: each answer says Connection: close and ends it (the next request opens one)
        server = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                self.request.settimeout(60)
                data = b""
                try:
                    while not server.stopped.is_set():
                        while b"\r\n\r\n" not in data:
                            more = self.request.recv(65536)
                            if not more:
                                return
                            data += more
                        head, data = data.split(b"\r\n\r\n", 1)
                        target = head.split(b"\r\n", 1)[0].split(b" ")[1].decode()
                        server.requests.append(target)
                        auth = [
                            line.split(b":", 1)[1].strip().decode()
                            for line in head.split(b"\r\n")[1:]
                            if line.lower().startswith(b"authorization:")
                        ]
                        server.authorizations.append(auth[0] if auth else "")
                        if not server.answer(self.request, target) or not server.keep_alive:
                            return
                except OSError:
                    return

        self.tcp = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.tcp.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.tcp.server_address[1]}"
        threading.Thread(target=self.tcp.serve_forever, daemon=True).start()

    def close(self):
        self.stopped.set()
        self.tcp.shutdown()
        self.tcp.server_close()

    def answer(self, sock: socket.socket, target: str) -> bool:
        """Send the answer for this mode; False when the connection should end."""
        if self.mode == "drip":  # one byte every 2 s, from the status line on (for at most 40 s)
            for byte in b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n"[:20]:
                if self.stopped.wait(2):
                    return False
                sock.sendall(bytes([byte]))
            return False
        if self.mode == "drip_body":  # headers at once, then the body one byte every 2 s
            body = json.dumps({"gitVersion": "v1.30.0", "major": "1", "minor": "30"}).encode()
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body))
            for byte in body[:20]:
                if self.stopped.wait(2):
                    return False
                sock.sendall(bytes([byte]))
            return False
        if self.mode in ("huge", "huge_error"):  # a body without end, as fast as the client reads
            status = b"200 OK" if self.mode == "huge" else b"500 Internal Server Error"
            sock.sendall(b"HTTP/1.1 " + status + b'\r\nContent-Type: application/json\r\n\r\n{"x": "')
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not self.stopped.is_set():
                sock.sendall(CHUNK)
            return False
        if self.mode == "endless_list":  # every page has a continue token
            if target.startswith("/version"):
                body = {"gitVersion": "v1.30.0", "major": "1", "minor": "30"}
            elif target.startswith(("/readyz", "/healthz")):
                body = "ok"
            else:
                if self.page_delay:
                    self.stopped.wait(self.page_delay)
                page = len(self.requests)
                items = [{"metadata": {"name": f"node-{page}-{i}"}, "status": {}} for i in range(self.items_per_page)]
                body = {"kind": "NodeList", "items": items, "metadata": {"continue": f"page-{page}"}}
            payload = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            closing = b"" if self.keep_alive else b"Connection: close\r\n"  # as in "status"
            sock.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                + closing
                + b"Content-Length: %d\r\n\r\n" % len(payload)
                + payload
            )
            return True
        if self.mode == "status":  # a fixed status with ``body`` (an error page full of whatever)
            # a server that ends the connection after this answer says so (RFC 9112 section 9.6): without the
            # header the client may send its next request on the pooled connection before the close reaches it
            closing = b"" if self.keep_alive else b"Connection: close\r\n"
            head = b"HTTP/1.1 " + self.status + b"\r\n" + closing + b"Content-Length: %d\r\n\r\n" % len(self.body)
            sock.sendall(head + self.body)
            return True
        raise AssertionError(self.mode)
