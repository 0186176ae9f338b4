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
