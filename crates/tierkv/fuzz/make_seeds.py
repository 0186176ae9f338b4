#!/usr/bin/env python3
"""Writes the seed inputs of every fuzz target to seeds/<target>/ (small, valid-shaped inputs
that the drivers turn into well-formed files by repairing their checksums). Run from anywhere;
the output is committed, so this runs only when a format changes."""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def lp(b):
    return varint(len(b)) + b


def ikey(user, seq, kind=1):
    return user + struct.pack("<Q", seq << 8 | kind)


def batch(seq, ops):
    out = struct.pack("<QI", seq, len(ops))
    for op in ops:
        if op[1] is None:
            out += b"\x00" + lp(op[0])
        else:
            out += b"\x01" + lp(op[0]) + lp(op[1])
    return out


def block(entries, interval=2):
    out, restarts, prev = bytearray(), [], b""
    for i, (k, v) in enumerate(entries):
        shared = 0
        if i % interval == 0:
            restarts.append(len(out))
        else:
            while shared < min(len(k), len(prev)) and k[shared] == prev[shared]:
                shared += 1
        out += varint(shared) + varint(len(k) - shared) + varint(len(v)) + k[shared:] + v
        prev = k
    if not restarts:
        restarts = [0]
    for r in restarts:
        out += struct.pack("<I", r)
    out += struct.pack("<I", len(restarts))
    return bytes(out)


def props():
    out = bytearray()
    rec = lambda t, v: out.extend(bytes([t]) + lp(v))
    rec(1, ikey(b"a", 1))
    rec(2, ikey(b"c", 3))
    for t in range(3, 13):
        rec(t, struct.pack("<Q", t))
    rec(13, b"\x00")
    rec(14, struct.pack("<I", 1))
    return bytes(out)


def table():
    """A one-block table without a filter; the driver repairs every checksum."""
    entries = [(ikey(b"apple", 5), b"red"), (ikey(b"banana", 3), b"yellow"), (ikey(b"cherry", 2, 0), b"")]
    data = block(entries)
    index = block([(ikey(b"cherry", 2, 0), varint(0) + varint(len(data)))], 1)
    out = bytearray()
    rec = lambda t, v: out.extend(bytes([t]) + lp(v))
    rec(1, entries[0][0])
    rec(2, entries[-1][0])
    for t, v in [(3, 3), (4, 1), (5, 2), (6, 5), (7, 40), (8, 9), (9, len(data) + 5), (10, len(index) + 5), (11, 0), (12, 1)]:
        rec(t, struct.pack("<Q", v))
    rec(13, b"\x00")
    rec(14, struct.pack("<I", 1))
    props_block = bytes(out)
    trailer = bytes(5)
    off_index = len(data) + 5
    off_props = off_index + len(index) + 5
    footer = struct.pack("<QQQQQQI", 0, 0, off_index, len(index), off_props, len(props_block), 1)
    footer += bytes(4) + b"tierkvst"
    return bytes([0]) + data + trailer + index + trailer + props_block + trailer + footer


def edit():
    out = bytearray()
    f = lambda tag, body: out.extend(varint(tag) + lp(body))
    f(1, b"db-id")
    f(7, varint(2) + lp(b"fast") + lp(b"capacity"))
    f(8, varint(1))
    f(2, varint(4))
    f(3, varint(9))
    f(4, varint(100))
    f(6, varint(0) + varint(3))
    nf = varint(1) + varint(7) + lp(b"fast") + varint(4096) + lp(ikey(b"a", 1)) + lp(ikey(b"z", 9))
    nf += varint(1) + varint(9) + varint(10) + varint(2)
    f(5, nf)
    return bytes(out)


def pieces(payloads):
    """The drivers' framing: a length byte (low 7 bits), then the payload."""
    out = bytearray()
    for p in payloads:
        assert len(p) < 128
        out += bytes([len(p)]) + p
    return bytes(out)


def area():
    page = 4096
    colour = 5
    meta = bytearray(page)
    meta[0:8] = b"tierkvWA"
    meta[8:12] = struct.pack("<I", 1)
    meta[16:24] = struct.pack("<Q", 3)
    meta[24:28] = struct.pack("<I", page)
    meta[28:32] = struct.pack("<I", 2)
    meta[32:40] = struct.pack("<Q", 2)
    meta[40:60] = struct.pack("<QQI", colour, 1, 0xFFFFFFFF)
    meta[64:84] = struct.pack("<QQI", 4, 1, 1)
    stream = bytearray()
    seq = 1
    for i in range(3):
        b = batch(seq, [(b"key%d" % i, b"value"), (b"gone", None)])
        stream += struct.pack("<II", len(b), 0) + b
        seq += 2
    pg = bytearray(page)
    pg[0:8] = struct.pack("<Q", colour)
    pg[12:14] = struct.pack("<H", len(stream))
    pg[14:16] = struct.pack("<H", 1)
    pg[16:24] = struct.pack("<Q", 0)
    pg[24 : 24 + len(stream)] = stream
    empty = bytearray(page)
    # Control byte 0: repair checksums, TolerateCorruptedTail, log number 0.
    return bytes([0]) + bytes(meta) + bytes(meta) + bytes(pg) + bytes(empty) * 3


def crc32c(data):
    """CRC-32C (Castagnoli), bitwise: the seeds are small."""
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def append_record(log, synced, payload):
    """An append-WAL record: crc | len | log | synced | payload, padded to 8 bytes."""
    rest = struct.pack("<IQQ", len(payload), log, synced) + payload
    rec = struct.pack("<I", crc32c(rest)) + rest
    return rec + bytes(-len(rec) % 8)


def zoned_device():
    """A zoned WAL device: LBA 512, four 4 KiB zones, zone 3 marked FULL in the table; zone 0
    holds log 5's start mark and two writes, each record in its own LBA."""
    lba, zone, zones = 512, 4096, 4
    body = b"TKVZONED" + struct.pack("<IQQQI", 1, lba, zone, zone, zones)
    dev = bytearray(lba * 2 + zone * zones)
    dev[: len(body) + 4] = body + struct.pack("<I", crc32c(body))
    entry = bytes([0x0E, 0xA5, 0xA5, 0xA5])
    dev[lba + 24 : lba + 32] = entry + struct.pack("<I", crc32c(entry))
    records = [
        append_record(5, 0, batch(1, [])),
        append_record(5, 0, batch(1, [(b"k1", b"v1"), (b"k2", None)])),
        append_record(5, 3, batch(3, [(b"k3", b"v3")])),
    ]
    for i, rec in enumerate(records):
        at = lba * 2 + i * lba
        dev[at : at + len(rec)] = rec
    return bytes(dev)


def hot_slot(seq, kind, key, value):
    """A hot-store slot's contents (docs/hot-tier.md); the rest of the slot is zeros."""
    rest = struct.pack("<QBHI", seq, kind, len(key), len(value)) + key + value
    return struct.pack("<I", crc32c(rest)) + rest


def hot_journal():
    """HOT-JOURNAL with one page image of class 0 (100-byte slots) holding one slot."""
    page = bytearray(4096)
    slot = hot_slot(0x0102, 1, b"ab", b"xyz")
    page[100 : 100 + len(slot)] = slot
    head = b"TKVHOTJ1" + struct.pack("<QQI", 4, 9, 1)
    return head + struct.pack("<HQI", 0, 2, crc32c(bytes(page))) + bytes(page)


def vlog_record(key, value):
    rest = struct.pack("<II", len(key), len(value)) + key + value
    return struct.pack("<I", crc32c(rest)) + rest


def seeds():
    b1 = batch(7, [(b"k", b"v"), (b"k2", None)])
    b2 = batch(9, [(b"a" * 10, b"b" * 20)])
    entries = [(ikey(b"apple", 5), b"red"), (ikey(b"apricot", 4), b"orange"),
               (ikey(b"banana", 3), b"yellow"), (ikey(b"cherry", 2, 0), b"")]
    index = [(ikey(b"b", 9), varint(0) + varint(120)), (ikey(b"d", 9), varint(125) + varint(80))]
    footer = struct.pack("<QQQQQQI", 0, 0, 300, 40, 345, 60, 1) + b"\0\0\0\0" + b"tierkvst"
    return {
        "wal_log": [bytes([0]) + b"\0\0" + pieces([b1, b2, b""]), bytes([2 | 3 << 3]) + b"\0\x15" + pieces([b1, b2])],
        "write_batch": [b1, b2, batch(1, [])],
        "wal_area": [area()],
        "sst_block": [bytes([0]) + b"banana\0\0" + block(entries), bytes([0]) + b"zz\0\0\0\0\0\0" + block(entries, 16)],
        "sst_index": [block(index, 1)],
        "sst_filter": [bytes([0x5A] * 16) + bytes([6])],
        "sst_footer": [bytes([1]) + footer],
        "sst_properties": [props()],
        "sst_table": [table()],
        "manifest_edit": [edit(), pieces([edit()[:100], b"\x02\x01\x05"])],
        "tier_current": [b"tierkv-tier 1\ndb_id=fuzz\nname=fast\n\x00MANIFEST-000001\n"],
        "wal_append": [
            bytes([0]) + pieces([batch(7, [(b"k", b"v")]), batch(8, [(b"k2", None)])]),
            bytes([0]) + pieces([b1]) + bytes([0x80 | len(b2)]) + b2,
            bytes([1]) + append_record(5, 0, batch(7, [(b"k", b"v")])) + append_record(5, 8, batch(8, [])),
        ],
        "wal_zoned": [bytes([0]) + zoned_device(), bytes([2 | 5 << 3]) + zoned_device()],
        "hot_slot": [
            bytes([0]) + hot_slot(0x0102, 1, b"ab", b"xyz"),
            bytes([12]) + hot_slot(7, 2, b"gone", b""),
            bytes([3]) + hot_slot(9, 3, b"large", b""),
            bytes([0]),
        ],
        "hot_journal": [bytes([0]) + hot_journal()],
        "hot_partitions": [b"4\n", b"64\n"],
        "vlog_value": [
            bytes([0]) + vlog_record(b"k1", b"val"),
            bytes([0, 1, 3, 0xAC, 0x02, 17]),
            bytes([0, 0]) + b"x",
        ],
        # VLOGGC: checksum (repaired by the driver), version 1, garbage [(3, 4096), (7, 5)],
        # retired [2], kept [5, 6], cursor (3, 300); and the empty state.
        "vlog_state": [
            bytes([0]) + bytes(4) + (1).to_bytes(4, "little")
            + bytes([2, 3, 0x80, 0x20, 7, 5, 1, 2, 2, 5, 6, 1, 3, 0xAC, 0x02]),
            bytes([0]) + bytes(4) + (1).to_bytes(4, "little") + bytes(4),
        ],
        "options_toml": [
            b'[[tier]]\nname = "fast"\npath = "/tmp/a"\ncapacity = "1GiB"\n[[tier]]\nname = "cap"\npath = "/tmp/b"\n'
            b'[memtable]\nwrite_buffer_size = "4MiB"\n[wal]\nmode = "parallel"\n',
            b'[[tier]]\nname = "fast"\npath = "/tmp/a"\nwrite_buffer_size = 65536\nwal = "group"\nlevels_on_fast = 3\n',
        ],
    }


for target, inputs in seeds().items():
    d = os.path.join(HERE, "seeds", target)
    os.makedirs(d, exist_ok=True)
    for i, data in enumerate(inputs):
        with open(os.path.join(d, "seed-%d" % i), "wb") as f:
            f.write(data)
