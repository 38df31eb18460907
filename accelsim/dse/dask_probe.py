"""Is a Dask scheduler listening at tcp://HOST:PORT? A bounded probe run before distributed.Client is
given the address: distributed trusts the first eight bytes its peer sends as the size of a message to
allocate, so anything else answering there (a web server, a peer announcing 2**62 bytes) would end in a
MemoryError or a hang. A scheduler greets every connection first with a small handshake message: eight
bytes of length, then frames whose first is a msgpack map of its settings ("python", "compression")."""
from __future__ import annotations

import socket
import struct
import time

MAX_GREETING_BYTES = 1 << 16
"""A scheduler's handshake is under a hundred bytes; a peer announcing more is not one."""
MAX_FRAMES = 16
_SIZE = "=Q"
"""distributed's frame sizes: native byte order, 8 bytes."""


class NotAScheduler(Exception):
    """What answered at the address, in words (the text completes "... at ADDRESS: ...")."""


def _shown(data: bytes) -> str:
    """The first bytes a peer sent, safe to print in one line: printable ASCII as is, the rest escaped
    (\\r, \\x00), cut at 60 characters."""
    text = "".join(chr(b) if 32 <= b < 127 and b != 92 else repr(bytes([b]))[2:-1] for b in data)
    return f"'{text[:60]}'" + ("..." if len(text) > 60 else "")


def _recv_exactly(sock: socket.socket, n: int, deadline: float, got: bytes = b"") -> bytes:
    """`n` bytes more than `got`, before `deadline` (time.monotonic()); raises NotAScheduler short of it."""
    data = bytearray(got)
    want = len(got) + n
    while len(data) < want:
        left = deadline - time.monotonic()
        if left <= 0 and not data:
            raise NotAScheduler("it accepted the connection but sent nothing in the time allowed (a Dask scheduler "
                                "greets first)")
        if left <= 0:
            raise NotAScheduler(f"it sent {len(data)} byte(s) and then nothing more in the time allowed "
                                f"({_shown(bytes(data))}): not a Dask scheduler's handshake")
        sock.settimeout(left)
        try:
            chunk = sock.recv(want - len(data))
        except socket.timeout:
            continue
        except OSError as e:
            raise NotAScheduler(f"the connection failed after {len(data)} byte(s) ({e.strerror or e})") from None
        if not chunk:
            what = f"after {len(data)} byte(s) ({_shown(bytes(data))})" if data else "without sending anything"
            raise NotAScheduler(f"it closed the connection {what}: a Dask scheduler greets with its handshake")
        data += chunk
    return bytes(data)


def _check_greeting(message: bytes) -> None:
    """The frames of a handshake: a count, each frame's length, the frames, the first a msgpack map."""
    if len(message) < 16:
        raise NotAScheduler(f"its first message ({len(message)} bytes) is too short to hold Dask frames")
    (n_frames,) = struct.unpack_from(_SIZE, message)
    if not 1 <= n_frames <= MAX_FRAMES or 8 * (1 + n_frames) > len(message):
        raise NotAScheduler(f"its first message announces {n_frames:,} frames in {len(message)} bytes: not a Dask "
                            f"handshake")
    lengths = struct.unpack_from(f"={n_frames}Q", message, 8)
    body = len(message) - 8 * (1 + n_frames)
    if sum(lengths) != body:
        raise NotAScheduler(f"its first message's frame lengths add up to {sum(lengths):,} bytes, not the "
                            f"{body:,} it holds: not a Dask handshake")
    import msgpack  # distributed's own dependency: present wherever the Client is

    start = 8 * (1 + n_frames)
    try:
        # unpackb bounds every container by the input's length: at most MAX_GREETING_BYTES here
        greeting = msgpack.unpackb(message[start:start + lengths[0]], raw=False, strict_map_key=False)
    except Exception as e:  # noqa: BLE001 - msgpack raises several kinds for bytes that are not msgpack
        raise NotAScheduler(f"its first message is not msgpack ({type(e).__name__})") from None
    if not isinstance(greeting, dict) or "python" not in greeting:
        raise NotAScheduler(f"its first message holds {str(greeting)[:80]!r}, not a Dask handshake (a map with "
                            f"the peer's python version)")


def probe_scheduler(host: str, port: int, timeout_s: float) -> None:
    """Raise NotAScheduler unless a peer at host:port sends a Dask handshake within `timeout_s`; the
    connection is closed after it (the scheduler logs a connection closed before its handshake)."""
    deadline = time.monotonic() + timeout_s
    try:
        sock = socket.create_connection((host, port), timeout=timeout_s)
    except socket.timeout:
        raise OSError(f"no answer to a connection within {timeout_s} s") from None
    with sock:
        head = _recv_exactly(sock, 8, deadline)
        (size,) = struct.unpack(_SIZE, head)
        if not 16 <= size <= MAX_GREETING_BYTES:
            raise NotAScheduler(f"it answered {_shown(head + _more(sock))}, whose first 8 bytes as a Dask frame "
                                f"header announce a first message of {size:,} bytes (a scheduler's handshake "
                                f"has 16 to {MAX_GREETING_BYTES:,})")
        _check_greeting(_recv_exactly(sock, size, deadline, head)[8:])


def _more(sock: socket.socket) -> bytes:
    """What else the peer already sent (up to 40 bytes, waiting a moment), to show what answered."""
    sock.settimeout(0.2)
    try:
        return sock.recv(40)
    except OSError:
        return b""
