"""`--dask ADDRESS` pointed at something that is not a Dask scheduler: a web server, a peer sending garbage,
one announcing a 2**62-byte message, one that says nothing or hangs up, and an address nobody listens on.
Each is refused in one paragraph naming the address and what answered, before anything is written; never a
MemoryError, a traceback or a hang. Every server here listens on 127.0.0.1 and stops by itself."""
from __future__ import annotations

import socket
import struct
import threading
import time
from pathlib import Path

import msgpack
import pytest
import yaml

import accelsim as A
from accelsim.dse import run_sweep

pytest.importorskip("pyarrow")
pytest.importorskip("pandas")
pytest.importorskip("dask.distributed")

pytestmark = pytest.mark.timeout(120)

GRID = {"hw": "groq_like", "model": "mlp", "model_options": {"batch": 4, "sizes": [32, 16, 4]},
        "parameters": {"model.batch": [2, 4], "options.microbatches": [1, 2]}}
SERVER_LIFETIME_S = 60.0


def frames(*payloads: bytes) -> bytes:
    """Bytes framed as distributed frames them: total length, frame count, each frame's length, frames."""
    body = struct.pack(f"={len(payloads) + 1}Q", len(payloads), *map(len, payloads)) + b"".join(payloads)
    return struct.pack("=Q", len(body)) + body


HANDSHAKE = frames(msgpack.packb({"compression": None, "python": [3, 11, 7], "pickle-protocol": 5}))


class Peer:
    """A TCP server on 127.0.0.1 answering every connection with `replies` (one per connection, the last
    repeated), then holding it open (`hold`) or closing it. It stops when the test ends or after
    SERVER_LIFETIME_S, whichever comes first."""

    def __init__(self, *replies: bytes | None, hold: bool = True) -> None:
        self.replies, self.hold = replies or (None,), hold
        self.connections = 0
        self._stop = threading.Event()
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(8)
        self._sock.settimeout(0.1)
        self.address = f"tcp://127.0.0.1:{self._sock.getsockname()[1]}"
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        deadline = time.monotonic() + SERVER_LIFETIME_S
        conns = []
        while not self._stop.is_set() and time.monotonic() < deadline:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            reply = self.replies[min(self.connections, len(self.replies) - 1)]
            self.connections += 1
            try:
                if reply:
                    conn.sendall(reply)
            except OSError:
                pass
            if self.hold:
                conns.append(conn)
            else:
                conn.close()
        for conn in conns:
            conn.close()
        self._sock.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


@pytest.fixture
def peer():
    started: list[Peer] = []

    def start(*replies: bytes | None, hold: bool = True) -> Peer:
        started.append(Peer(*replies, hold=hold))
        return started[-1]

    yield start
    for p in started:
        p.stop()


def refused(address: str, out: Path, hostile) -> str:
    """run_sweep with --dask `address` raises SweepError naming the address; nothing written."""
    message = hostile.refuses(lambda: run_sweep(GRID, out=out, dask=address), address, "Dask scheduler")
    assert not out.exists(), "a refused --dask address must not leave an output directory"
    assert "\n" not in message, f"not one paragraph:\n{message}"
    return message


HOSTILE_REPLIES = {
    "length_prefix_2_62": (struct.pack("=Q", 2**62) + b"\0" * 64, ("4,611,686,018,427,387,904 bytes",)),
    "length_prefix_max": (b"\xff" * 8, ("18,446,744,073,709,551,615 bytes",)),
    "http_banner": (b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", ("HTTP/1.1 400",)),
    "ssh_banner": (b"SSH-2.0-OpenSSH_9.6\r\n", ("SSH-2.0",)),
    "garbage": (bytes(range(256)) * 4, ("not a Dask scheduler",)),
    "smtp_greeting": (b"220 mail.example ESMTP ready\r\n", ("220 mail",)),
    "length_too_small": (struct.pack("=Q", 3) + b"abc", ("3 bytes",)),
    "too_many_frames": (struct.pack("=QQQ", 16, 10**6, 0), ("1,000,000 frames",)),
    "frame_lengths_disagree": (struct.pack("=QQQ", 24, 1, 500) + b"x" * 8, ("add up to 500",)),
    "frame_not_msgpack": (frames(b"\xc1\xc1\xc1\xc1"), ("not msgpack",)),
    "msgpack_list": (frames(msgpack.packb([1, 2, 3])), ("not a Dask handshake",)),
    "msgpack_map_without_python": (frames(msgpack.packb({"compression": None})), ("not a Dask handshake",)),
    "truncated_greeting": (struct.pack("=Q", 200) + b"\1" * 20, ("nothing more",)),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_REPLIES))
def test_a_peer_that_is_not_a_scheduler_is_refused_naming_what_answered(case, peer, hostile, tmp_path):
    reply, words = HOSTILE_REPLIES[case]
    server = peer(reply)
    message = refused(server.address, tmp_path / "out", hostile)
    hostile.names(message, "not a Dask scheduler", *words)


def test_a_peer_that_accepts_and_says_nothing_is_refused_after_the_timeout(peer, hostile, tmp_path):
    server = peer(None)
    hostile.names(refused(server.address, tmp_path / "out", hostile), "sent nothing", "greets first")


def test_a_peer_that_hangs_up_at_once_is_refused(peer, hostile, tmp_path):
    server = peer(None, hold=False)
    hostile.names(refused(server.address, tmp_path / "out", hostile), "closed the connection", "without sending")


def test_a_peer_that_hangs_up_mid_header_is_refused(peer, hostile, tmp_path):
    server = peer(b"\x01\x02\x03", hold=False)
    hostile.names(refused(server.address, tmp_path / "out", hostile), "closed the connection", "after 3 byte(s)")


def test_a_peer_that_greets_like_a_scheduler_then_sends_a_2_62_byte_message_is_refused(peer, hostile, tmp_path):
    """The probe passes (a real handshake), then the Client's own connection gets a hostile size: the
    Client's failure is still one SweepError."""
    server = peer(HANDSHAKE, HANDSHAKE + struct.pack("=Q", 2**62) + b"\0" * 64)
    message = hostile.refuses(lambda: run_sweep(GRID, out=tmp_path / "out", dask=server.address), server.address)
    hostile.names(message, ("Dask scheduler", "scheduler"))
    assert server.connections >= 2  # the probe's connection, then the Client's


def test_an_address_nobody_listens_on_is_refused(hostile, tmp_path):
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there now
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    message = refused(f"tcp://127.0.0.1:{port}", tmp_path / "out", hostile)
    hostile.names(message, "cannot reach a Dask scheduler", "--dask local")


def test_a_tls_address_nobody_listens_on_is_refused_as_unreachable(hostile, tmp_path):
    # before: "the peer there answered the handshake", about a port where nothing listens
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    message = refused(f"tls://127.0.0.1:{port}", tmp_path / "out", hostile)
    hostile.names(message, "cannot reach a Dask scheduler")
    assert "answered" not in message


def test_a_tls_scheduler_without_dask_s_tls_settings_is_refused_naming_them(peer, hostile, tmp_path, monkeypatch):
    for key in ("CA_FILE", "CLIENT__CERT", "CLIENT__KEY"):
        monkeypatch.delenv(f"DASK_DISTRIBUTED__COMM__TLS__{key}", raising=False)
    server = peer(b"\x16\x03\x01")  # a TLS record header: something that speaks TLS is listening
    address = server.address.replace("tcp://", "tls://")
    message = refused(address, tmp_path / "out", hostile)
    hostile.names(message, "TLS settings", "distributed.comm.tls", "tcp://")


@pytest.mark.parametrize("case", ["length_prefix_2_62", "http_banner"])
def test_the_cli_refuses_a_peer_that_is_not_a_scheduler_with_exit_1(case, peer, hostile, tmp_path):
    server = peer(HOSTILE_REPLIES[case][0])
    spec = hostile.write("grid.yaml", yaml.safe_dump(GRID))
    run = hostile.cli_refuses(["sweep", spec, "--out", tmp_path / "out", "--dask", server.address],
                              server.address, "not a Dask scheduler", "dask scheduler", codes=(1,))
    assert run.err.count("\n") == 1 and not (tmp_path / "out").exists()
    assert "MemoryError" not in run.text


@pytest.mark.timeout(300)
def test_a_real_scheduler_passes_the_probe_and_runs_the_sweep(tmp_path):
    import logging

    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None,
                      silence_logs=logging.ERROR) as cluster:
        run = run_sweep(GRID, out=tmp_path / "out", dask=cluster.scheduler_address)
    assert (run.new, run.reused, run.failed) == (4, 0, 0)
    assert list(run.results["makespan_cycles"]) == list(A.sweep(GRID)["makespan_cycles"])
