"""A loopback TCP proxy a test can cut, as a network partition cuts a link: after `cut()`
bytes are no longer passed either way and new connections are accepted but never served,
while every socket stays open: no RST, no FIN, as when packets are dropped on the way.
Needs no privileges; tests/cluster/test_partitions.py cuts real links (network namespaces,
veth pairs and iptables, as root) between server nodes and their database."""

from __future__ import annotations

import contextlib
import socket
import threading

from tests.support import free_port


class TcpProxy:
    """127.0.0.1:`port` -> 127.0.0.1:`target_port`, a thread per direction per connection."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self._cut = threading.Event()
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()

    def cut(self) -> None:
        self._cut.set()

    def close(self) -> None:
        self._closed.set()
        for sock in [self._listener, *self._sockets]:
            sock.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self._sockets.append(client)
            if self._cut.is_set():
                continue  # accepted, never served: the handshake of a dropped link
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            self._sockets.append(upstream)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                return
            if not data:
                if not self._cut.is_set():  # a clean end passes through, unless cut
                    with contextlib.suppress(OSError):
                        sink.shutdown(socket.SHUT_WR)  # (close() would wait for our recv)
                return
            if self._cut.is_set():
                continue  # dropped on the way
            try:
                sink.sendall(data)
            except OSError:
                return
