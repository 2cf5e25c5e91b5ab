"""Wire fuzzer (issue 11). Real clients (confluent-kafka producer, consumer group,
transactions, admin) talk to a broker through a recording proxy; every request frame
they send is kept. Then mutations of those frames, and random frames, are sent to the
broker for a bounded time: KAAS_FUZZ_SECONDS (20 in CI; set it higher to fuzz longer),
from a seed printed in the log (KAAS_FUZZ_SEED reproduces a run). Between mutations a
well-formed client must be answered, the broker must stay up, and its memory must stay
within a bound. Every API the broker serves is fuzzed: APIs the clients did not use are
added as minimal hand-built requests."""
import os
import random
import socket
import struct
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, NewTopic

from conftest import KaasBroker, free_port
from wire import Conn, request, string

FUZZ_SECONDS = float(os.environ.get("KAAS_FUZZ_SECONDS", "20"))
RSS_BOUND_KIB = 400 * 1024


class RecordingProxy:
    """Forwards client connections to the broker and keeps every request frame."""

    def __init__(self, upstream_port):
        self.upstream = upstream_port
        self.port = free_port()
        self.frames = []
        self.lock = threading.Lock()
        self.server = socket.socket()
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(("127.0.0.1", self.port))
        self.server.listen(64)
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stopped:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            try:
                up = socket.create_connection(("127.0.0.1", self.upstream))
            except OSError:
                client.close()
                continue
            threading.Thread(target=self._pump, args=(client, up, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(up, client, False), daemon=True).start()

    def _pump(self, src, dst, record):
        """Copies src to dst; client-to-broker traffic is also cut into frames and kept."""
        buf = b""
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
                if not record:
                    continue
                buf += data
                while len(buf) >= 4:
                    (n,) = struct.unpack(">i", buf[:4])
                    if len(buf) < 4 + n:
                        break
                    with self.lock:
                        self.frames.append(buf[:4 + n])
                    buf = buf[4 + n:]
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.stopped = True
        self.server.close()


def drive_real_clients(bootstrap):
    """Exercises every API a client library uses against the proxy."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("fz", 2)])["fz"].result(timeout=20)
    admin.create_partitions([NewPartitions("fz", 3)])["fz"].result(timeout=20)
    admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "fz")])
    res = ConfigResource(ConfigResource.Type.TOPIC, "fz", set_config={"retention.ms": "600000"})
    admin.alter_configs([res])[res].result(timeout=20)
    res = ConfigResource(ConfigResource.Type.TOPIC, "fz", incremental_configs=[
        ConfigEntry("segment.ms", "600000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(timeout=20)
    time.sleep(0.5)
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(20):
        p.produce("fz", b"v%d" % i, key=b"k%d" % (i % 3))
    p.flush(20)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "fz-group", "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
    c.subscribe(["fz"])
    got = 0
    deadline = time.time() + 20
    while got < 20 and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got += 1
    c.commit(asynchronous=False)
    c.committed([TopicPartition("fz", 0)], timeout=10)
    c.get_watermark_offsets(TopicPartition("fz", 0), timeout=10)
    c.offsets_for_times([TopicPartition("fz", 0, 0)], timeout=10)
    admin.delete_records([TopicPartition("fz", 2, 0)])[TopicPartition("fz", 2, 0)].result(timeout=20)
    tp = Producer({"bootstrap.servers": bootstrap, "transactional.id": "fz-tx"})
    tp.init_transactions(20)
    tp.begin_transaction()
    tp.produce("fz", b"txn", partition=0)
    tp.send_offsets_to_transaction([TopicPartition("fz", 0, 1)], c.consumer_group_metadata(), 20)
    tp.commit_transaction(20)
    tp.begin_transaction()
    tp.produce("fz", b"aborted", partition=1)
    tp.abort_transaction(20)
    c.close()
    admin.list_consumer_groups().result(timeout=20)
    admin.describe_consumer_groups(["fz-group"])["fz-group"].result(timeout=20)
    admin.delete_consumer_groups(["fz-group"])["fz-group"].result(timeout=20)
    admin.describe_cluster().result(timeout=20) if hasattr(admin, "describe_cluster") else None
    # A KIP-848 consumer group: ConsumerGroupHeartbeat, OffsetCommit/OffsetFetch v9,
    # ConsumerGroupDescribe.
    k = Consumer({"bootstrap.servers": bootstrap, "group.id": "fz-848", "group.protocol": "consumer",
                  "auto.offset.reset": "earliest"})
    k.subscribe(["fz"])
    deadline = time.time() + 20
    while not k.assignment() and time.time() < deadline:
        k.poll(0.2)
    k.poll(0.5)
    # Explicit offsets: a commit of what was consumed fails when nothing was yet.
    k.commit(offsets=[TopicPartition(tp.topic, tp.partition, 0) for tp in k.assignment()], asynchronous=False)
    admin.describe_consumer_groups(["fz-848"])["fz-848"].result(timeout=20)
    k.close()
    admin.create_topics([NewTopic("fz-doomed", 1)])["fz-doomed"].result(timeout=20)
    admin.delete_topics(["fz-doomed"])["fz-doomed"].result(timeout=20)


def hand_built_requests():
    """Minimal valid requests (non-flexible versions) of APIs clients may not send."""
    frames = {
        # DescribeProducers v0: topics [name, partitions [int32]]
        61: request(61, 0, 1, struct.pack(">i", 1) + string("fz") + struct.pack(">ii", 1, 0)),
        # DescribeLogDirs v1: topics (nullable) [name, partitions [int32]]
        35: request(35, 1, 1, struct.pack(">i", 1) + string("fz") + struct.pack(">ii", 1, 0)),
        # DescribeTransactions v0: transactional ids [string]
        65: request(65, 0, 1, struct.pack(">i", 1) + string("fz-tx")),
        # ListTransactions v0: state filters [], producer id filters []
        66: request(66, 0, 1, struct.pack(">ii", 0, 0)),
        # ListGroups v0: empty body
        16: request(16, 0, 1, b""),
        # DescribeGroups v0: groups [string]
        15: request(15, 0, 1, struct.pack(">i", 1) + string("fz-group")),
        # DeleteGroups v0: groups [string]
        42: request(42, 0, 1, struct.pack(">i", 1) + string("nobody")),
        # FindCoordinator v0: key
        10: request(10, 0, 1, string("fz-group")),
        # Heartbeat v0: group, generation, member
        12: request(12, 0, 1, string("fz-group") + struct.pack(">i", 1) + string("m")),
        # LeaveGroup v0: group, member
        13: request(13, 0, 1, string("fz-group") + string("m")),
        # SyncGroup v0: group, generation, member, assignments []
        14: request(14, 0, 1, string("fz-group") + struct.pack(">i", 1) + string("m") + struct.pack(">i", 0)),
        # AddOffsetsToTxn v0: txn id, pid, epoch, group
        25: request(25, 0, 1, string("fz-tx") + struct.pack(">qh", 1, 0) + string("fz-group")),
        # TxnOffsetCommit v0: txn id, group, pid, epoch, topics []
        28: request(28, 0, 1, string("fz-tx") + string("fz-group") + struct.pack(">qhi", 1, 0, 0)),
        # EndTxn v0: txn id, pid, epoch, committed
        26: request(26, 0, 1, string("fz-tx") + struct.pack(">qh?", 1, 0, True)),
        # DeleteRecords v0: topics [name, partitions [index, offset]], timeout
        21: request(21, 0, 1, struct.pack(">i", 1) + string("fz") + struct.pack(">iiqi", 1, 0, 0, 1000)),
        # AlterConfigs v0: resources [type, name, configs [name, value]], validate_only
        33: request(33, 0, 1, struct.pack(">ib", 1, 2) + string("fz") + struct.pack(">i", 1)
                    + string("retention.ms") + string("60000") + b"\x01"),
        # IncrementalAlterConfigs v0: resources [type, name, configs [name, op, value]], validate_only
        44: request(44, 0, 1, struct.pack(">ib", 1, 2) + string("fz") + struct.pack(">i", 1)
                    + string("cleanup.policy") + b"\x02" + string("compact") + b"\x01"),
        # OffsetDelete v0: group, topics [name, partitions [index]]
        47: request(47, 0, 1, string("fz-group") + struct.pack(">i", 1) + string("fz") + struct.pack(">ii", 1, 0)),
        # OffsetForLeaderEpoch v2: topics [name, partitions [index, current leader epoch, leader epoch]]
        23: request(23, 2, 1, struct.pack(">i", 1) + string("fz") + struct.pack(">iiii", 1, 0, -1, 0)),
        # DescribeCluster v0 is flexible: header v2 (empty tagged fields) + include_authorized_operations + tags
        60: struct.pack(">i", 0),  # replaced below
    }
    payload = struct.pack(">hhi", 60, 0, 1) + string("fz") + b"\x00" + b"\x00" + b"\x00"
    frames[60] = struct.pack(">i", len(payload)) + payload
    # SaslHandshake v1: mechanism. SaslAuthenticate v0: auth bytes (ILLEGAL_SASL_STATE
    # on this PLAINTEXT listener, as Kafka answers).
    # The ACL APIs, v1 (not flexible). A filter: resource type, name (nullable), pattern,
    # principal (nullable), host (nullable), operation, permission.
    acl = struct.pack(">b", 2) + string("fz") + struct.pack(">b", 3) + string("User:fz") + string("*") + struct.pack(">bb", 3, 3)
    frames[30] = request(30, 1, 1, struct.pack(">i", 1) + acl)  # CreateAcls: creations [acl]
    frames[29] = request(29, 1, 1, acl)  # DescribeAcls: one filter
    frames[31] = request(31, 1, 1, struct.pack(">i", 1) + acl)  # DeleteAcls: filters [acl]
    frames[17] = request(17, 1, 1, string("PLAIN"))
    frames[36] = request(36, 0, 1, struct.pack(">i", 7) + b"\x00fz\x00pw\x00")

    def flexible(key, body, version=0):  # header v2: client id, then empty tagged fields
        payload = struct.pack(">hhi", key, version, 1) + string("fz") + b"\x00" + body
        return struct.pack(">i", len(payload)) + payload

    # WriteTxnMarkers v1 (what brokers send each other): markers [pid, epoch, result,
    # topics [name, partitions], coordinator epoch] (compact), tags. Nothing is queued
    # on this volume, so no mutation can make it write a marker.
    frames[27] = flexible(27, b"\x02" + struct.pack(">qhb", 1, 0, 1) + b"\x02" + b"\x03fz"
                          + b"\x02" + struct.pack(">i", 0) + b"\x00" + struct.pack(">i", 0) + b"\x00" + b"\x00",
                          version=1)

    # DescribeUserScramCredentials v0: users [name] (compact), tags
    frames[50] = flexible(50, b"\x02" + b"\x03fz" + b"\x00" + b"\x00")
    # AlterUserScramCredentials v0: deletions [], upsertions [name, mechanism, iterations,
    # salt, salted password] (compact), tags. 100 iterations: refused (a mutation may
    # make it valid and store a user on this throwaway volume).
    frames[51] = flexible(51, b"\x01" + b"\x02" + b"\x03fz" + struct.pack(">bi", 2, 100)
                          + b"\x05salt" + b"\x05hash" + b"\x00" + b"\x00")
    # DescribeClientQuotas v0: components [entity type, match type, match (nullable)],
    # strict.
    frames[48] = request(48, 0, 1, struct.pack(">i", 1) + string("user") + b"\x00" + string("fz") + b"\x00")
    # AlterClientQuotas v0: entries [entity [type, name (nullable)], ops [key, value
    # (float64), remove]], validate_only (set: a mutation must flip it to write, and
    # user fz is not the anonymous fuzzer).
    frames[49] = request(49, 0, 1, struct.pack(">ii", 1, 1) + string("user") + string("fz") + struct.pack(">i", 1)
                         + string("producer_byte_rate") + struct.pack(">d?", 1048576.0, False) + b"\x01")
    return frames


BOUNDARY = [0, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]


def mutate(frame: bytes, rng: random.Random) -> bytes:
    body = bytearray(frame[4:])
    kind = rng.randrange(9)
    if kind == 0 and body:  # flip bits
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(body))
            body[i] ^= 1 << rng.randrange(8)
    elif kind == 1 and len(body) > 8:  # a boundary integer at a random place
        width = rng.choice([1, 2, 4])
        i = rng.randrange(len(body) - width)
        v = rng.choice(BOUNDARY) & ((1 << (8 * width)) - 1)
        body[i:i + width] = v.to_bytes(width, "big")
    elif kind == 2 and len(body) > 10:  # truncate
        body = body[:rng.randrange(10, len(body))]
    elif kind == 3:  # insert random bytes
        i = rng.randrange(len(body) + 1)
        body[i:i] = os.urandom(rng.randint(1, 32))
    elif kind == 4 and len(body) > 4:  # another version of the same API
        body[2:4] = struct.pack(">h", rng.randint(-1, 20))
    elif kind == 5 and len(body) > 12:  # duplicate a region
        i = rng.randrange(len(body) - 4)
        j = rng.randrange(i, min(len(body), i + 256))
        body[j:j] = body[i:j]
    elif kind == 6:  # a random frame
        body = bytearray(struct.pack(">hhi", rng.randint(0, 70), rng.randint(0, 12), rng.randint(0, 1000)) + os.urandom(rng.randint(0, 200)))
    elif kind == 7 and len(body) > 8:  # a length field claiming a huge array or string
        i = rng.randrange(8, len(body) - 4) if len(body) > 12 else 8
        body[i:i + 4] = struct.pack(">i", rng.choice([0x7FFFFFF0, 0x10000000, -2]))
    else:  # a varint run (flexible versions)
        i = rng.randrange(len(body) + 1)
        body[i:i] = b"\xff" * rng.randint(1, 10)
    return struct.pack(">i", len(body)) + bytes(body)


def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def well_formed_client_is_answered(port) -> bool:
    c = Conn(port)
    try:
        if not c.api_versions_ok():
            return False
        c.send(request(3, 1, 5, struct.pack(">i", 0)))  # Metadata v1, no topics
        resp = c.recv_response()
        return resp is not None and resp[0] == 5
    finally:
        c.close()


def send_and_read(port, frame, timeout=1.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(frame)
        try:
            s.recv(65536)
        except (socket.timeout, OSError):
            pass
    finally:
        s.close()


def test_mutated_and_random_frames_never_take_the_broker_down(tmp_path):
    broker_port = free_port()
    proxy = RecordingProxy(broker_port)
    broker = KaasBroker(tmp_path / "data", tmp_path / "broker.log", [
        "--advertised-listener", f"127.0.0.1:{proxy.port}",
        "--max-partitions", "300",
        "--group-min-session-timeout-ms", "100",
        "--connections-max-idle-ms", "5000",
        # Every request runs through the authorizer (the anonymous client passes as a
        # super user), and the ACL APIs are live.
        "--authorizer", "acls", "--super-users", "User:ANONYMOUS",
    ])
    broker.port = broker_port
    try:
        broker.start()
        drive_real_clients(f"127.0.0.1:{proxy.port}")
        with proxy.lock:
            captured = list(proxy.frames)
        proxy.close()
        keys = {struct.unpack(">h", f[4:6])[0] for f in captured}
        extra = hand_built_requests()
        corpus = captured + [f for k, f in extra.items() if k not in keys]
        served = served_api_keys(broker_port)
        covered = keys | set(extra)
        assert served <= covered, f"APIs served but not fuzzed: {sorted(served - covered)}"
        seed = int(os.environ.get("KAAS_FUZZ_SEED", str(random.randrange(1 << 32))))
        print(f"wire fuzz seed {seed}: {len(captured)} captured frames of {len(keys)} APIs, {FUZZ_SECONDS} s")
        rng = random.Random(seed)
        deadline = time.time() + FUZZ_SECONDS
        sent = 0
        worst_rss = 0
        while time.time() < deadline:
            frame = mutate(rng.choice(corpus), rng)
            send_and_read(broker_port, frame, timeout=0.3)
            sent += 1
            if sent % 25 == 0:
                assert broker.alive(), f"seed {seed}: broker died after {sent} frames\n{broker.log_text()[-4000:]}"
                assert well_formed_client_is_answered(broker_port), f"seed {seed}: a well-formed client was not answered"
                worst_rss = max(worst_rss, rss_kib(broker.proc.pid))
                assert worst_rss < RSS_BOUND_KIB, f"seed {seed}: RSS {worst_rss} KiB"
        assert broker.alive()
        assert well_formed_client_is_answered(broker_port)
        assert "panicked" not in broker.log_text(), broker.log_text()[-4000:]
        print(f"wire fuzz seed {seed}: {sent} frames, peak RSS {worst_rss // 1024} MiB")
        assert sent > 100
    finally:
        proxy.close()
        broker.kill9()


def served_api_keys(port):
    """The API keys the broker's ApiVersions response lists."""
    c = Conn(port)
    c.send(request(18, 0, 9, b""))
    _, body = c.recv_response()
    c.close()
    (count,) = struct.unpack(">i", body[2:6])
    return {struct.unpack(">h", body[6 + 6 * i:8 + 6 * i])[0] for i in range(count)}
