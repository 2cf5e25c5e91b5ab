"""Hand-built Kafka frames for the bad-input tests (real clients cannot send these)."""
import socket
import struct


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def varint(v: int) -> bytes:
    z = (v << 1) ^ (v >> 63)
    out = bytearray()
    while True:
        if z < 0x80:
            out.append(z)
            return bytes(out)
        out.append((z & 0x7F) | 0x80)
        z >>= 7


def record_batch(values, base_offset=0, producer=(-1, -1, -1)) -> bytes:
    """A valid v2 batch of uncompressed records with null keys; `producer` is
    (producer id, epoch, base sequence) for an idempotent batch."""
    body = b""
    for i, v in enumerate(values):
        rec = b"\x00" + varint(0) + varint(i) + varint(-1) + varint(len(v)) + v + varint(0)
        body += varint(len(rec)) + rec
    pid, epoch, seq = producer
    after_crc = struct.pack(">hiqqqhii", 0, len(values) - 1, 1000, 1000, pid, epoch, seq, len(values)) + body
    crc = crc32c(after_crc)
    after_len = struct.pack(">ib", 0, 2) + struct.pack(">I", crc) + after_crc
    return struct.pack(">qi", base_offset, len(after_len)) + after_len


def string(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def request(api_key: int, version: int, correlation_id: int, body: bytes, client_id="wire-test") -> bytes:
    """Header v1 (non-flexible) + body, length-prefixed."""
    payload = struct.pack(">hhi", api_key, version, correlation_id) + string(client_id) + body
    return struct.pack(">i", len(payload)) + payload


def produce_v3(topic: str, partition: int, records: bytes, acks=-1) -> bytes:
    body = struct.pack(">hhi", -1, acks, 10000)  # null transactional id, acks, timeout
    body += struct.pack(">i", 1) + string(topic) + struct.pack(">i", 1)
    body += struct.pack(">i", partition) + struct.pack(">i", len(records)) + records
    return body


def parse_produce_v3(body: bytes):
    """[(topic, partition, error_code, base_offset)] from a v3 response body."""
    out = []
    pos = 0
    (n,) = struct.unpack_from(">i", body, pos)
    pos += 4
    for _ in range(n):
        (ln,) = struct.unpack_from(">h", body, pos)
        name = body[pos + 2:pos + 2 + ln].decode()
        pos += 2 + ln
        (np,) = struct.unpack_from(">i", body, pos)
        pos += 4
        for _ in range(np):
            part, err, base, _ts = struct.unpack_from(">ihqq", body, pos)
            pos += 22
            out.append((name, part, err, base))
    return out


class Conn:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)

    def send(self, data: bytes):
        self.sock.sendall(data)

    def recv_response(self):
        """(correlation id, body) of the next response; None if the broker closed."""
        head = self._read(4)
        if head is None:
            return None
        (n,) = struct.unpack(">i", head)
        data = self._read(n)
        if data is None:
            return None
        return struct.unpack(">i", data[:4])[0], data[4:]

    def closed_by_peer(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def _read(self, n):
        buf = b""
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            buf += chunk
        return buf

    def api_versions_ok(self) -> bool:
        self.send(request(18, 0, 77, b""))
        resp = self.recv_response()
        return resp is not None and resp[0] == 77 and struct.unpack(">h", resp[1][:2])[0] == 0

    def close(self):
        self.sock.close()


def txn_batch(values, producer_id: int, epoch: int, base_sequence: int) -> bytes:
    """A valid v2 transactional batch (attributes 0x10) of uncompressed records."""
    body = b""
    for i, v in enumerate(values):
        rec = b"\x00" + varint(0) + varint(i) + varint(-1) + varint(len(v)) + v + varint(0)
        body += varint(len(rec)) + rec
    after_crc = struct.pack(">hiqqqhii", 0x10, len(values) - 1, 1000, 1000, producer_id, epoch, base_sequence,
                            len(values)) + body
    crc = crc32c(after_crc)
    after_len = struct.pack(">ib", 0, 2) + struct.pack(">I", crc) + after_crc
    return struct.pack(">qi", 0, len(after_len)) + after_len


class TxnWire(Conn):
    """A raw-protocol transactional producer: InitProducerId v1, AddPartitionsToTxn v1,
    Produce v3 with a transactional id, EndTxn v1 — what a client does, frame by frame."""

    def __init__(self, port, tid):
        super().__init__(port)
        self.tid = tid
        self.corr = 0

    def call(self, api_key, version, body):
        self.corr += 1
        self.send(request(api_key, version, self.corr, body))
        corr, resp = self.recv_response()
        assert corr == self.corr
        return resp

    def init_producer_id(self, timeout_ms=60000):
        resp = self.call(22, 1, string(self.tid) + struct.pack(">i", timeout_ms))
        _throttle, err, pid, epoch = struct.unpack(">ihqh", resp[:16])
        return err, pid, epoch

    def add_partitions(self, pid, epoch, topic, partition):
        body = string(self.tid) + struct.pack(">qh", pid, epoch)
        body += struct.pack(">i", 1) + string(topic) + struct.pack(">ii", 1, partition)
        resp = self.call(24, 1, body)
        # throttle, [topic, [partition, error]]
        pos = 4 + 4
        (ln,) = struct.unpack_from(">h", resp, pos)
        pos += 2 + ln + 4
        _part, err = struct.unpack_from(">ih", resp, pos)
        return err

    def produce(self, topic, partition, records):
        body = string(self.tid) + struct.pack(">hi", -1, 10000)
        body += struct.pack(">i", 1) + string(topic) + struct.pack(">i", 1)
        body += struct.pack(">i", partition) + struct.pack(">i", len(records)) + records
        [(_t, _p, err, base)] = parse_produce_v3(self.call(0, 3, body))
        return err, base

    def end_txn(self, pid, epoch, commit):
        resp = self.call(26, 1, string(self.tid) + struct.pack(">qhb", pid, epoch, 1 if commit else 0))
        return struct.unpack(">ih", resp[:6])[1]


def create_topics_v2(name: str, partitions: int, validate_only=False) -> bytes:
    """A CreateTopics v2 body creating one topic (replication factor -1, no configs)."""
    topic = string(name) + struct.pack(">ihii", partitions, -1, 0, 0)
    return struct.pack(">i", 1) + topic + struct.pack(">i?", 20000, validate_only)


def parse_create_topics_v2(body: bytes):
    """(name, error code, error message) of each topic of a CreateTopics v2 answer."""
    (count,) = struct.unpack(">i", body[4:8])
    at, out = 8, []
    for _ in range(count):
        (n,) = struct.unpack(">h", body[at:at + 2])
        name = body[at + 2:at + 2 + n].decode()
        at += 2 + n
        (error,) = struct.unpack(">h", body[at:at + 2])
        message, at = read_nullable_string(body, at + 2)
        out.append((name, error, message))
    return out


def read_nullable_string(body: bytes, at: int):
    """(the nullable string at `at`, the position after it)."""
    (n,) = struct.unpack(">h", body[at:at + 2])
    if n < 0:
        return None, at + 2
    return body[at + 2:at + 2 + n].decode(), at + 2 + n


def join_group_v1(group: str, protocols, member_id="", session_timeout_ms=10000, rebalance_timeout_ms=10000) -> bytes:
    """A JoinGroup v1 body: (name, metadata bytes) protocols of type "consumer"."""
    body = string(group) + struct.pack(">ii", session_timeout_ms, rebalance_timeout_ms) + string(member_id) + string("consumer")
    parts = [body, struct.pack(">i", len(protocols))]
    for name, meta in protocols:
        parts.append(string(name) + struct.pack(">i", len(meta)) + meta)
    return b"".join(parts)


def nullable_string(s) -> bytes:
    return struct.pack(">h", -1) if s is None else string(s)


def alter_configs_v0(resources, validate_only=False) -> bytes:
    """An AlterConfigs v0 body: [(resource type, resource name, {name: value})]. Real
    clients cannot name the cluster-wide broker resource (""); this can."""
    parts = [struct.pack(">i", len(resources))]
    for rtype, name, configs in resources:
        parts.append(struct.pack(">b", rtype) + string(name) + struct.pack(">i", len(configs)))
        for k, v in configs.items():
            parts.append(string(k) + nullable_string(v))
    parts.append(struct.pack(">?", validate_only))
    return b"".join(parts)


def parse_alter_configs_v0(body: bytes):
    """[(error code, error message, resource type, resource name)] of an AlterConfigs v0 answer."""
    (count,) = struct.unpack(">i", body[4:8])
    at, out = 8, []
    for _ in range(count):
        (error,) = struct.unpack(">h", body[at:at + 2])
        message, at = read_nullable_string(body, at + 2)
        (rtype, n) = struct.unpack(">bh", body[at:at + 3])
        name = body[at + 3:at + 3 + n].decode()
        at += 3 + n
        out.append((error, message, rtype, name))
    return out
