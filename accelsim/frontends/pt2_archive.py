"""Check a .pt2 archive (a zip file, as torch.export.save writes it) before torch reads it (bytes -> None or
FrontendError): every member's declared size, each and together, within ReadLimits.max_file_bytes, and every
member unpacked with a cap to exactly its declared size and CRC, so a 15 MB zip bomb is refused in one
paragraph instead of filling memory, and a member whose header lies is refused instead of trusted."""
from __future__ import annotations

import io
import struct
import zipfile
import zlib

from accelsim.errors import FrontendError
from accelsim.limits import ReadLimits, bytes_str

CHUNK_BYTES = 2**20
LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")  # the zip local file header, 30 bytes
LOCAL_MAGIC = b"PK\x03\x04"
METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflated"}
"""torch.export.save stores members; deflate is accepted too (an archive re-zipped by a tool)."""
MAX_ARCHIVE_MEMBERS = 100_000
"""torch.export.save writes a few files plus one per tensor (GPT-2 small: about 160). zipfile builds an object
of ~0.5 KiB for every entry of the central directory as it opens an archive, and an entry takes 46 bytes of
the file: a 2 GiB archive could declare 40 million of them, ~20 GiB of Python objects, before any member
size is seen. The end record's count is read first and refused above this."""
EOCD = struct.Struct("<4s4H2LH")  # end of central directory record, 22 bytes
EOCD_MAGIC, ZIP64_LOCATOR_MAGIC, ZIP64_EOCD_MAGIC = b"PK\x05\x06", b"PK\x06\x07", b"PK\x06\x06"
ZIP64_LOCATOR = struct.Struct("<4sLQL")  # 20 bytes, just before the end record
ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")  # 56 bytes


def _refuse(label: str, problem: str) -> FrontendError:
    return FrontendError(f"{label}: not a usable saved torch.export program: {problem}")


def check_archive(data: bytes, label: str, limits: ReadLimits) -> None:
    """FrontendError naming the member, its size and the limit, unless the archive unpacks within limits
    to exactly what its directory declares."""
    declared = declared_members(data)
    if declared is not None and declared > MAX_ARCHIVE_MEMBERS:
        raise _refuse(label, f"its zip directory declares {declared:,} members, above the {MAX_ARCHIVE_MEMBERS:,} "
                             "a saved program has room for (one per tensor and a few more); the file is damaged "
                             "or not a torch.export archive")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError, struct.error) as e:
        raise _refuse(label, f"it is not a zip archive ({e}); the file is truncated or in another format "
                             "(torch.export.save writes a zip archive)") from None
    if not members:
        raise _refuse(label, "the zip archive is empty")
    total, limit = 0, limits.max_file_bytes
    for info in members:
        total += info.file_size
        if info.file_size > limit:
            what = f"member {info.filename!r} declares {info.file_size:,} bytes unpacked"
        elif total > limit:
            what = f"member {info.filename!r} brings the members' unpacked bytes to {total:,}"
        else:
            continue
        raise _refuse(label, f"{what}, above the limit of {bytes_str(limit)} on the bytes read for one model; "
                             f"{ReadLimits.how_to_raise('max_file_bytes')}")
    for info in members:
        _check_member(data, info, label)


def declared_members(data: bytes) -> int | None:
    """The entry count a zip's end record (or its zip64 end record) declares; None where there is no end
    record to read (zipfile refuses such a file itself)."""
    at = data.rfind(EOCD_MAGIC, max(0, len(data) - EOCD.size - 0xFFFF))
    if at < 0 or at + EOCD.size > len(data):
        return None
    count = EOCD.unpack_from(data, at)[4]
    locator = at - ZIP64_LOCATOR.size
    if count != 0xFFFF or locator < 0 or data[locator:locator + 4] != ZIP64_LOCATOR_MAGIC:
        return count
    record = ZIP64_LOCATOR.unpack_from(data, locator)[2]
    if record + ZIP64_EOCD.size > len(data) or data[record:record + 4] != ZIP64_EOCD_MAGIC:
        return count
    return ZIP64_EOCD.unpack_from(data, record)[7]


def _check_member(data: bytes, info: zipfile.ZipInfo, label: str) -> None:
    """The member's bytes unpack to exactly info.file_size bytes with CRC info.CRC, never reading past that."""
    where = f"member {info.filename!r}"
    if info.compress_type not in METHODS:
        raise _refuse(label, f"{where} is compressed with method {info.compress_type}; a .pt2 archive's members "
                             "are stored or deflated")
    start = info.header_offset
    if start + LOCAL_HEADER.size > len(data):
        raise _refuse(label, f"{where} starts at byte {start:,}, past the end of the {len(data):,}-byte file "
                             "(truncated)")
    fields = LOCAL_HEADER.unpack_from(data, start)
    if fields[0] != LOCAL_MAGIC:
        raise _refuse(label, f"{where} has no local header at byte {start:,} (the archive's directory is corrupt)")
    begin = start + LOCAL_HEADER.size + fields[-2] + fields[-1]  # name and extra field lengths
    end = begin + info.compress_size
    if end > len(data):
        raise _refuse(label, f"{where} declares {info.compress_size:,} packed bytes, past the end of the "
                             f"{len(data):,}-byte file (truncated)")
    packed = memoryview(data)[begin:end]
    unpacked, crc = _unpack(packed, info, label, where)
    if unpacked != info.file_size or crc != info.CRC:
        got = f"{unpacked:,} bytes" if unpacked != info.file_size else "a different CRC"
        raise _refuse(label, f"{where} declares {info.file_size:,} bytes unpacked but holds {got} (its header "
                             "lies, or the file is corrupt)")


def _unpack(packed: memoryview, info: zipfile.ZipInfo, label: str, where: str) -> tuple[int, int]:
    """(bytes unpacked, their CRC-32), stopping one byte past the declared size."""
    if info.compress_type == zipfile.ZIP_STORED:
        return len(packed), zlib.crc32(packed)
    cap = info.file_size + 1
    inflate = zlib.decompressobj(-zlib.MAX_WBITS)
    n, crc = 0, 0
    try:
        for k in range(0, len(packed), CHUNK_BYTES):
            pending = packed[k:k + CHUNK_BYTES].tobytes()
            while pending and n < cap:
                out = inflate.decompress(pending, min(CHUNK_BYTES, cap - n))
                n, crc = n + len(out), zlib.crc32(out, crc)
                pending = inflate.unconsumed_tail
            if n >= cap:
                break
        if n < cap:
            out = inflate.flush(cap - n)
            n, crc = n + len(out), zlib.crc32(out, crc)
    except zlib.error as e:
        raise _refuse(label, f"{where} cannot be unpacked ({e}); the file is corrupt") from None
    return n, crc
