"""A budget for one HTTP request made through urllib3: an overall deadline and a cap on the bytes
read, enforced at the socket. A server that sends one byte every two seconds, or a body without
end, cannot hold a thread past the deadline or fill its memory: every read waits at most for what
is left of the deadline, and counts against the cap.

Pure urllib3 and sockets (no Kubernetes knowledge). clusters/kube.py installs the pool classes in
each of its ApiClients and sets a budget around each request (``spending``).
"""

from __future__ import annotations

import io
import socket
import threading
import time
from contextlib import contextmanager

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection


class Budget:
    """What one request may still spend: until ``deadline`` (time.monotonic()), ``bytes_left`` bytes.
    ``timed_out`` / ``too_large`` say which limit stopped it."""

    def __init__(self, deadline: float, max_bytes: int, peer_check=None):
        self.deadline = deadline
        self.bytes_left = max_bytes
        self.timed_out = False
        self.too_large = False
        # address -> why a connection may not go there ("": it may); each new connection's peer is
        # checked once connected, before TLS or a byte of the request is sent (``refused_peer``: why not)
        self.peer_check = peer_check
        self.refused_peer = ""

    def remaining(self) -> float:
        return self.deadline - time.monotonic()


class BudgetExceeded(OSError):
    """The response was larger than the budget allows."""


class RefusedPeer(OSError):
    """A new connection reached an address the budget's ``peer_check`` refuses; it was closed unused."""


_local = threading.local()


def current() -> Budget | None:
    return getattr(_local, "budget", None)


@contextmanager
def spending(budget: Budget):
    """Requests made by this thread inside the block read under ``budget``."""
    previous = current()
    _local.budget = budget
    try:
        yield budget
    finally:
        _local.budget = previous


class BudgetedSocket:
    """A connected (TLS) socket whose reads stop at the current thread's budget."""

    def __init__(self, sock):
        self.sock = sock
        self.timeout = sock.gettimeout()

    def __getattr__(self, name):
        return getattr(self.sock, name)

    def settimeout(self, value):
        self.timeout = value
        self.sock.settimeout(value)

    def gettimeout(self):
        return self.timeout

    def makefile(self, mode="r", buffering=None, **kwargs):
        if mode != "rb":
            return self.sock.makefile(mode, buffering, **kwargs)
        self.sock._io_refs += 1  # as socket.makefile does; SocketIO.close gives it back
        size = buffering if buffering and buffering > 0 else io.DEFAULT_BUFFER_SIZE
        return io.BufferedReader(socket.SocketIO(self, "rb"), size)

    def recv_into(self, buffer, nbytes=0, flags=0):
        budget = current()
        if budget is None:
            return self.sock.recv_into(buffer, nbytes, flags)
        left = budget.remaining()
        if left <= 0:
            budget.timed_out = True
            raise TimeoutError("the request's deadline has passed")
        self.sock.settimeout(left if self.timeout is None else min(left, self.timeout))
        try:
            got = self.sock.recv_into(buffer, nbytes, flags)
        except TimeoutError:
            budget.timed_out = budget.remaining() <= 0
            raise
        finally:
            self.sock.settimeout(self.timeout)
        budget.bytes_left -= got
        if budget.bytes_left < 0:
            budget.too_large = True
            raise BudgetExceeded("the response is larger than allowed")
        return got


def checked_peer(sock):
    """``sock`` (just connected) if the current budget's ``peer_check`` allows its peer; otherwise it
    is closed and RefusedPeer raised."""
    budget = current()
    if budget is None or budget.peer_check is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return sock
    try:
        address = sock.getpeername()[0]  # an OSError (reset at once): the connection ends, unused
    except OSError:
        sock.close()
        raise
    if reason := budget.peer_check(address):
        budget.refused_peer = reason
        sock.close()
        raise RefusedPeer(reason)
    return sock


class BudgetedHTTPConnection(HTTPConnection):
    def _new_conn(self):
        return checked_peer(super()._new_conn())

    def connect(self):
        super().connect()
        self.sock = BudgetedSocket(self.sock)


class BudgetedHTTPSConnection(HTTPSConnection):
    def _new_conn(self):  # the TCP connection, before the TLS handshake (a client certificate)
        return checked_peer(super()._new_conn())

    def connect(self):
        super().connect()
        self.sock = BudgetedSocket(self.sock)


class BudgetedHTTPConnectionPool(urllib3.HTTPConnectionPool):
    ConnectionCls = BudgetedHTTPConnection


class BudgetedHTTPSConnectionPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = BudgetedHTTPSConnection


def install(pool_manager: urllib3.PoolManager) -> None:
    """Make ``pool_manager``'s future connections read under the thread's budget."""
    pool_manager.pool_classes_by_scheme = {"http": BudgetedHTTPConnectionPool, "https": BudgetedHTTPSConnectionPool}
