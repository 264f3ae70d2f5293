"""A small HTTP/1.1 keep-alive server on 127.0.0.1 that counts the requests it runs and
drops connections in the ways the keep-alive race and its look-alikes do.

Blocking sockets, a thread per connection: it closes a connection on its own clock,
whatever the client's event loop is doing. Every request it *runs* is counted by the
``action`` of its JSON body (``runs``), so a test can tell a request sent twice from one
sent once. Ways to drop (keyword arguments):

* ``keep_alive=S``: close a connection idle for S seconds (as uvicorn does at 5 s);
  ``idle_closes`` counts them;
* ``drop_second="reset"``: when a connection's second request arrives, close it unread
  (the kernel answers the unread bytes with a reset); ``"close"``: read it, throw it away
  and close. Either way the request is not run; ``dropped`` counts them;
* ``run_then_drop="no-answer"`` / ``"half-answer"``: run the request, then close without
  an answer or after part of one, from a connection's ``drop_from``-th request on.

``hold`` (a ``threading.Event``): answer nothing until it is set (a stuck server).
"""

from __future__ import annotations

import json
import select
import socket
import threading
from typing import Callable

_ANSWER = json.dumps({"observation": "ok", "reward": 0, "done": False}).encode()


class CountingServer:
    def __init__(self, *, keep_alive: float | None = None, drop_second: str | None = None,
                 run_then_drop: str | None = None, drop_from: int = 1,
                 hold: threading.Event | None = None) -> None:
        self.hold = hold
        self.keep_alive = keep_alive
        self.drop_second = drop_second
        self.run_then_drop = run_then_drop
        self.drop_from = drop_from
        self.listener = socket.create_server(("127.0.0.1", 0), backlog=1024)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        #: action -> times run; connections accepted; idle connections closed; requests dropped unrun
        self.runs: dict[str, int] = {}
        self.connections = 0
        self.idle_closes = 0
        self.dropped = 0
        self._changed = threading.Condition()
        self._open: list[socket.socket] = []
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> "CountingServer":
        accept = threading.Thread(target=self._accept, daemon=True)
        accept.start()
        self._threads.append(accept)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.hold is not None:
            self.hold.set()
        self.listener.shutdown(socket.SHUT_RDWR)  # wakes accept()
        self.listener.close()
        with self._changed:
            conns = list(self._open)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)  # wakes the handler's select(), which then closes it
            except OSError:
                pass
        for thread in self._threads:
            thread.join(10)

    def wait_for(self, condition: Callable[[], bool], timeout: float = 10.0) -> None:
        """Block (the calling thread, and so its event loop) until ``condition()`` holds."""
        with self._changed:
            if not self._changed.wait_for(condition, timeout):
                raise AssertionError(f"the server did not get there within {timeout} s")

    def _count(self, what: str, action: str | None = None) -> None:
        with self._changed:
            if action is not None:
                self.runs[action] = self.runs.get(action, 0) + 1
            else:
                setattr(self, what, getattr(self, what) + 1)
            self._changed.notify_all()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with self._changed:
                self._open.append(conn)
                self.connections += 1
            handler = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            handler.start()
            self._threads.append(handler)

    def _serve(self, conn: socket.socket) -> None:
        served, pending = 0, b""
        try:
            while True:
                if not pending:
                    ready, _, _ = select.select([conn], [], [], self.keep_alive)
                    if not ready:  # idle for keep_alive seconds
                        conn.close()
                        self._count("idle_closes")
                        return
                    if not conn.recv(1, socket.MSG_PEEK):  # the client closed it
                        return
                    if served == 1 and self.drop_second:
                        if self.drop_second == "close":
                            self._read_request(conn, b"")
                        conn.close()  # "reset": the request unread, so the kernel resets
                        self._count("dropped")
                        return
                request = self._read_request(conn, pending)
                if request is None:
                    return
                action, pending = request
                self._count("runs", action)
                served += 1
                if self.hold is not None:
                    self.hold.wait(30)
                if self.run_then_drop and served >= self.drop_from:
                    if self.run_then_drop == "half-answer":
                        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n" + _ANSWER[:10])
                    conn.close()
                    return
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                             b"content-length: %d\r\n\r\n%s" % (len(_ANSWER), _ANSWER))
        except OSError:
            pass
        finally:
            conn.close()

    @staticmethod
    def _read_request(conn: socket.socket, data: bytes) -> tuple[str, bytes] | None:
        """One request's ``action`` (from its JSON body) and the bytes after it; None at EOF."""
        while b"\r\n\r\n" not in data:
            more = conn.recv(65536)
            if not more:
                return None
            data += more
        head, _, rest = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(rest) < length:
            more = conn.recv(65536)
            if not more:
                return None
            rest += more
        body = json.loads(rest[:length] or b"{}")
        return str(body.get("action")), rest[length:]
