"""An open-loop HTTP load generator, run as a child process and driven by lines on its stdin.

Arrivals are Poisson at a rate, from a seed the parent chooses (``reseed``), plus bursts at fixed times
(``burst``), until ``stop`` (or the end of stdin); each latency is counted from the request's *scheduled*
time, so queueing anywhere (client included) counts and nothing is omitted.  The child says ``READY`` once
its connections are open and ``DONE`` once it has written every request's record to a file
(:func:`read_records` reads it back: scheduled time, latency, send lateness, kind — 0 steady, 1 burst).

The parent's side: ``reseed(at, seed)``, ``burst(at, n, rate)`` and ``STOP`` are the command lines.
"""

from __future__ import annotations

import array
import collections
import heapq
import random
import select
import socket
import sys
import threading
import time

ERR = -2.0      # latency slot: the request failed
PENDING = -1.0  # latency slot: no answer (yet)
STOP = "stop"


def reseed(at: float, seed: int) -> str:
    """The command: Poisson arrivals from ``at`` (time.monotonic) on, drawn from ``seed``."""
    return f"reseed {at:.6f} {seed}"


def burst(at: float, requests: int, rate: float) -> str:
    """The command: ``requests`` more requests from ``at`` on, ``rate`` a second."""
    return f"burst {at:.6f} {requests} {rate}"


class LoadClient:
    """Open-loop HTTP load over keep-alive connections: a sender thread sends at scheduled times
    (``time.sleep`` is precise to tens of µs; epoll timeouts round up to whole ms), a receiver
    thread waits in epoll and stamps each answer as it arrives.  A request due while every
    connection is busy waits for one; its latency still runs from its scheduled time."""

    REQUEST = b"GET / HTTP/1.1\r\nHost: bench\r\n\r\n"

    def __init__(self, port: int, rate: float, connections: int):
        self.port, self.rate = port, rate
        self.lock = threading.Lock()
        self.epoll = select.epoll()
        self.socks, self.bufs, self.inflight = {}, {}, {}   # fd -> socket, bytes so far, request index
        self.idle, self.waiting = collections.deque(), collections.deque()
        self.sched, self.lat, self.late, self.kind = array.array("d"), array.array("d"), array.array("d"), array.array("d")
        self.stopping = threading.Event()
        for _ in range(connections):
            self.idle.append(self._connect())

    def _connect(self):
        s = socket.create_connection(("127.0.0.1", self.port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        self.socks[s.fileno()], self.bufs[s.fileno()] = s, b""
        self.epoll.register(s.fileno(), select.EPOLLIN)
        return s

    def _drop(self, fd: int) -> None:
        """A connection that closed or failed: its request failed; a fresh connection replaces it."""
        sock = self.socks.pop(fd)
        self.epoll.unregister(fd)
        sock.close()
        idx = self.inflight.pop(fd, None)
        if idx is not None:
            self.lat[idx] = ERR
        self._release(self._connect())

    def _send_on(self, sock, idx: int) -> None:  # holding the lock
        self.inflight[sock.fileno()] = idx
        self.late[idx] = time.monotonic() - self.sched[idx]
        try:
            sock.send(self.REQUEST)
        except OSError:
            self._drop(sock.fileno())

    def _release(self, sock) -> None:  # holding the lock
        if self.waiting:
            self._send_on(sock, self.waiting.popleft())
        else:
            self.idle.append(sock)

    def dispatch(self, t: float, kind: int) -> None:
        with self.lock:
            idx = len(self.sched)
            self.sched.append(t)
            self.lat.append(PENDING)
            self.late.append(0.0)
            self.kind.append(kind)
            if self.idle:
                self._send_on(self.idle.popleft(), idx)
            else:
                self.waiting.append(idx)

    def receive(self) -> None:
        deadline = None
        while True:
            if self.stopping.is_set():
                deadline = deadline or time.monotonic() + 2.0
                if not self.inflight and not self.waiting or time.monotonic() > deadline:
                    return
            for fd, _ in self.epoll.poll(0.1):
                sock = self.socks.get(fd)
                if sock is None:
                    continue
                try:
                    data = sock.recv(65536)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                now = time.monotonic()
                with self.lock:
                    if not data:
                        self._drop(fd)
                    else:
                        self._answer(fd, sock, self.bufs[fd] + data, now)

    def _answer(self, fd: int, sock, buf: bytes, now: float) -> None:  # holding the lock
        head_end = buf.find(b"\r\n\r\n")
        length = 0
        if head_end >= 0:
            for line in buf[:head_end].split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
        if head_end < 0 or len(buf) < head_end + 4 + length:
            self.bufs[fd] = buf
            return
        self.bufs[fd] = buf[head_end + 4 + length:]
        idx = self.inflight.pop(fd, None)
        if idx is not None:
            self.lat[idx] = now - self.sched[idx] if buf.startswith(b"HTTP/1.1 200") else ERR
        self._release(sock)

    def send_loop(self, commands) -> None:
        """Arrivals: Poisson at ``rate`` from each ``reseed`` on (its own seed), plus the bursts."""
        rng, next_t, bursts, stop_at = None, float("inf"), [], float("inf")
        reseeds: list[tuple[float, int]] = []
        while True:
            for cmd in commands.drain():
                if cmd[0] == "reseed":
                    reseeds.append((float(cmd[1]), int(cmd[2])))
                    reseeds.sort()
                elif cmd[0] == "burst":
                    t0, n, burst_rate = float(cmd[1]), int(cmd[2]), float(cmd[3])
                    for i in range(n):
                        heapq.heappush(bursts, t0 + i / burst_rate)
                elif cmd[0] == STOP:
                    stop_at = min(stop_at, time.monotonic())
            if reseeds and reseeds[0][0] <= next_t:
                at, seed = reseeds.pop(0)
                rng = random.Random(seed)
                next_t = at + rng.expovariate(self.rate)
            t = min(next_t, bursts[0] if bursts else float("inf"))
            if t >= stop_at and stop_at < float("inf"):
                return
            wait = t - time.monotonic()
            if wait > 0:
                time.sleep(min(wait, 0.01))  # wake at least every 10 ms for new commands
                continue
            if bursts and bursts[0] <= next_t:
                self.dispatch(heapq.heappop(bursts), 1)
            else:
                self.dispatch(next_t, 0)
                next_t += rng.expovariate(self.rate)

    def write(self, out: str) -> None:
        with self.lock, open(out, "wb") as f:
            array.array("d", [len(self.sched)]).tofile(f)
            for a in (self.sched, self.lat, self.late, self.kind):
                a.tofile(f)


class Commands:
    """Lines from stdin, read on a thread of their own."""

    def __init__(self):
        self.lock, self.items = threading.Lock(), []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in sys.stdin:
            with self.lock:
                self.items.append(line.split())
        with self.lock:
            self.items.append([STOP])

    def drain(self) -> list[list[str]]:
        with self.lock:
            items, self.items = self.items, []
        return items


def run_client(port: int, rate: float, connections: int, out: str) -> None:
    """The child process: load on ``127.0.0.1:port`` as stdin commands it, the records to ``out``."""
    client = LoadClient(port, rate, connections)
    print("READY", flush=True)
    receiver = threading.Thread(target=client.receive, daemon=True)
    receiver.start()
    client.send_loop(Commands())
    client.stopping.set()
    receiver.join()
    client.write(out)
    print("DONE", flush=True)


def read_records(path):
    """What :meth:`LoadClient.write` wrote: a 4×n numpy array — scheduled time, latency (or ERR, PENDING),
    send lateness, kind — one column per request."""
    import numpy as np  # here, not above: the child processes that import this module start without numpy
    data = np.fromfile(path)
    n = int(data[0])
    return data[1:].reshape(4, n)
