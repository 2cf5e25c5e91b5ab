#!/usr/bin/env python3
"""Probes the KIP-360 rejoin-epoch wire contract of a live broker with hand-built
InitProducerId v4 requests (flexible versions), independent of any client library:

  1. a new transactional.id gets a fresh producer id at epoch 0;
  2. a rejoin without a claim bumps the epoch on the same producer id;
  3. a claim of the current (id, epoch) bumps again, and its retry gets the same answer;
  4. a stale claim is PRODUCER_FENCED (90);
  5. a half-set claim is INVALID_REQUEST (42), also without a transactional.id;
  6. an idempotent producer (no transactional.id) ignores a claim and gets a fresh id;
  7. an instance replaced by an unclaimed rejoin cannot claim its old (id, epoch) onto
     the new instance's epoch: PRODUCER_FENCED, every time;
  8. an empty transactional.id is INVALID_REQUEST.

Usage: kafka_txn_coordinator_probe.py HOST:PORT   (exit 0 when every step holds)
"""
import socket
import struct
import sys
import uuid


def uvarint(n):
    out = bytearray()
    while True:
        if n < 0x80:
            out.append(n)
            return bytes(out)
        out.append((n & 0x7F) | 0x80)
        n >>= 7


def read_uvarint(buf, pos):
    shift = value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


class Broker:
    def __init__(self, bootstrap):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.correlation = 0

    def init_producer_id(self, tid, pid=-1, epoch=-1, timeout_ms=60000):
        self.correlation += 1
        # Request header v2: api key 22, version 4, correlation id, client id (int16 string), no tags.
        header = struct.pack(">hhi", 22, 4, self.correlation) + struct.pack(">h", 5) + b"probe" + uvarint(0)
        if tid is None:
            body = uvarint(0)
        else:
            raw = tid.encode()
            body = uvarint(len(raw) + 1) + raw
        body += struct.pack(">iqh", timeout_ms, pid, epoch) + uvarint(0)
        frame = header + body
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", self._read(4))[0]
        resp = self._read(size)
        corr = struct.unpack(">i", resp[:4])[0]
        assert corr == self.correlation, f"correlation {corr} != {self.correlation}"
        _tags, pos = read_uvarint(resp, 4)
        _throttle, error, got_pid, got_epoch = struct.unpack(">ihqh", resp[pos:pos + 16])
        return error, got_pid, got_epoch

    def _read(self, n):
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            data += chunk
        return data


def main():
    b = Broker(sys.argv[1])
    tid = f"probe-{uuid.uuid4().hex[:8]}"
    failures = []

    def check(name, got, want):
        ok = got == want
        print(f"{'ok  ' if ok else 'FAIL'} {name}: got {got}, want {want}")
        if not ok:
            failures.append(name)

    err, pid, epoch = b.init_producer_id(tid)
    check("new transactional.id: fresh id at epoch 0", (err, epoch), (0, 0))
    check("rejoin without a claim bumps the epoch on the same id", b.init_producer_id(tid), (0, pid, 1))
    check("a claim of the current epoch bumps again", b.init_producer_id(tid, pid, 1), (0, pid, 2))
    check("the retry of that claim gets the same answer", b.init_producer_id(tid, pid, 1), (0, pid, 2))
    check("a stale claim is PRODUCER_FENCED", b.init_producer_id(tid, pid, 0)[0], 90)
    check("a claim of another producer id is PRODUCER_FENCED", b.init_producer_id(tid, pid + 100000, 2)[0], 90)
    check("a half-set claim is INVALID_REQUEST", b.init_producer_id(tid, pid, -1)[0], 42)
    check("a half-set claim without a transactional.id is INVALID_REQUEST", b.init_producer_id(None, -1, 3)[0], 42)
    err, idem_pid, idem_epoch = b.init_producer_id(None, 424242, 7)
    check("an idempotent producer ignores a claim: fresh id, epoch 0", (err, idem_epoch, idem_pid != 424242), (0, 0, True))
    tid2 = f"probe-{uuid.uuid4().hex[:8]}"
    _, pid_a, epoch_a = b.init_producer_id(tid2)
    check("instance B rejoins without a claim", b.init_producer_id(tid2), (0, pid_a, epoch_a + 1))
    check("replaced instance A claiming its old epoch is PRODUCER_FENCED", b.init_producer_id(tid2, pid_a, epoch_a)[0], 90)
    check("and stays fenced on retry", b.init_producer_id(tid2, pid_a, epoch_a)[0], 90)
    check("an empty transactional.id is INVALID_REQUEST", b.init_producer_id("")[0], 42)
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
    print("rejoin-epoch wire contract holds")


if __name__ == "__main__":
    main()
