"""Nobody can freeze the broker (issue 27): stalled headers, trickled bodies and floods of
half-open connections, on every listener type, leave a bystander's producer answered
within a second. The request memory budget (`queued.max.request.bytes`) is charged as a
frame's bytes arrive, a frame has a deadline to arrive whole, a waiting frame never
holds up one that fits, and one principal's frames take at most half of the budget
(docs/limits.md, "Request memory")."""
import socket
import ssl
import struct
import threading
import time

import pytest
from confluent_kafka import Producer

from conftest import wait_for
from test_security import (PASSWORD, add_user, certs, kafka_python_conf, rdkafka_conf,  # noqa: F401 (fixture)
                           secure_broker)
from wire import request, string

# A Metadata v3 request announcing 8 MiB (the largest non-Produce frame): the length,
# then its API key and version. Four of these froze every listener before issue 27.
METADATA_8_MIB = struct.pack(">i", (8 << 20) - 1) + struct.pack(">hh", 3, 3)

LISTENERS = [("PLAINTEXT", None), ("SSL", None), ("SASL_PLAINTEXT", "PLAIN"), ("SASL_SSL", "SCRAM-SHA-256")]


def _recv_frame(sock):
    def exactly(n):
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed by the broker")
            buf += chunk
        return buf

    (n,) = struct.unpack(">i", exactly(4))
    return exactly(n)


def raw_connection(s, protocol, user="alice", password=PASSWORD, authenticate=True):
    """A socket on the listener, through TLS where it has TLS, logged in with SASL
    PLAIN where it has SASL (unless `authenticate` is False)."""
    sock = socket.create_connection(("127.0.0.1", s.ports[protocol]), timeout=10)
    if "SSL" in protocol:
        ctx = ssl.create_default_context(cafile=str(s.certs / "ca.pem"))
        sock = ctx.wrap_socket(sock, server_hostname="localhost")
    if "SASL" in protocol and authenticate:
        sock.sendall(request(17, 1, 1, string("PLAIN")))
        assert struct.unpack(">h", _recv_frame(sock)[4:6])[0] == 0, "PLAIN offered"
        token = b"\x00" + user.encode() + b"\x00" + password.encode()
        sock.sendall(request(36, 0, 2, struct.pack(">i", len(token)) + token))
        assert struct.unpack(">h", _recv_frame(sock)[4:6])[0] == 0, "logged in"
    return sock


def bystander_worst_seconds(conf, topic, n=15, connect_within=3.0):
    """The slowest of `n` produce-and-flush rounds of a fresh confluent-kafka producer,
    after a first one (its connection, ApiVersions, Metadata, a produce) that must take
    less than `connect_within` seconds."""
    p = Producer({**conf, "linger.ms": 0, "acks": "all"})
    started = time.time()
    p.produce(topic, b"warm")
    assert p.flush(30) == 0, "the bystander's producer connects"
    connected = time.time() - started
    assert connected < connect_within, f"the bystander's first produce (with its connection) took {connected:.2f} s"
    worst = 0.0
    for i in range(n):
        started = time.time()
        p.produce(topic, f"v{i}".encode())
        assert p.flush(10) == 0
        worst = max(worst, time.time() - started)
        time.sleep(0.05)
    return worst


def kafka_python_worst_seconds(conf, topic, n=10):
    """The slowest of `n` sends of a fresh kafka-python producer, each waited for
    (after its first, which connects)."""
    from kafka import KafkaProducer
    p = KafkaProducer(**conf, acks="all", linger_ms=0, request_timeout_ms=15000)
    try:
        p.send(topic, b"warm").get(timeout=30)
        worst = 0.0
        for i in range(n):
            started = time.time()
            p.send(topic, f"kp{i}".encode()).get(timeout=10)
            worst = max(worst, time.time() - started)
            time.sleep(0.05)
        return worst
    finally:
        p.close(timeout=5)


# A Produce of 3 MB announced, 1.5 MB of it sent: a sender of real bytes that stops.
HALF_SENT_PRODUCE = struct.pack(">i", 3_000_000) + struct.pack(">hh", 0, 3) + b"\x00" * 1_500_000


def bystander_unslowed_by(senders, conf, topic):
    """Each socket of `senders` sends HALF_SENT_PRODUCE; then the bystander's slowest
    produce (after its first, with its connection) must take under a second. The
    sockets are closed afterwards, whatever happened."""
    try:
        for sock in senders:
            sock.sendall(HALF_SENT_PRODUCE)
        time.sleep(1.0)
        worst = bystander_worst_seconds(conf, topic)
        assert worst < 1.0, f"a bystander waited {worst:.2f} s behind the senders"
    finally:
        for sock in senders:
            sock.close()


class Trickler(threading.Thread):
    """Sends a byte of its frame every `every` seconds until told to stop or closed."""

    def __init__(self, sock, every=0.1):
        super().__init__(daemon=True)
        self.sock, self.every, self.stop = sock, every, threading.Event()
        self.closed_after = None

    def run(self):
        started = time.time()
        while not self.stop.is_set():
            try:
                self.sock.sendall(b"\x00")
            except OSError:
                self.closed_after = time.time() - started
                return
            time.sleep(self.every)


@pytest.mark.parametrize("protocol,mechanism", LISTENERS, ids=[p for p, _ in LISTENERS])
def test_stalled_headers_trickled_bodies_and_half_open_connections_leave_a_bystander_answered(
        kaas_factory, certs, protocol, mechanism):  # noqa: F811 (fixture)
    s = secure_broker(kaas_factory, certs)
    conf = rdkafka_conf(s, protocol, mechanism)
    assert bystander_worst_seconds(conf, "bystander", n=3, connect_within=10) < 5
    socks, tricklers = [], []
    try:
        # Four announce an 8 MiB Metadata request and send nothing more.
        for _ in range(4):
            sock = raw_connection(s, protocol)
            sock.sendall(METADATA_8_MIB)
            socks.append(sock)
        # Four more trickle theirs a byte at a time.
        for _ in range(4):
            sock = raw_connection(s, protocol)
            sock.sendall(METADATA_8_MIB)
            socks.append(sock)
            t = Trickler(sock)
            t.start()
            tricklers.append(t)
        # And two hundred connect and say nothing (no TLS handshake, no login).
        for _ in range(200):
            socks.append(socket.create_connection(("127.0.0.1", s.ports[protocol]), timeout=10))
        time.sleep(0.5)
        worst = bystander_worst_seconds(conf, "bystander")
        assert worst < 1.0, f"a bystander's produce took {worst:.2f} s"
        worst = kafka_python_worst_seconds(kafka_python_conf(s, protocol, mechanism), "bystander")
        assert worst < 1.0, f"a kafka-python bystander's send took {worst:.2f} s"
        assert all(t.closed_after is None for t in tricklers), "the tricklers are still within their deadline"
    finally:
        for t in tricklers:
            t.stop.set()
        for sock in socks:
            sock.close()
    assert s.broker.alive()


def test_a_trickled_frame_is_cut_off_at_its_deadline_not_at_the_idle_timeout(kaas_factory, certs):  # noqa: F811
    s = secure_broker(kaas_factory, certs)
    sock = raw_connection(s, "PLAINTEXT")
    sock.sendall(METADATA_8_MIB)
    t = Trickler(sock, every=0.2)
    t.start()
    # 5 s, and 2 s per MiB announced: 21 s for 8 MiB (connections.max.idle.ms is 600 s).
    wait_for(lambda: t.closed_after is not None, timeout=40, what="the trickler cut off")
    assert 19 <= t.closed_after <= 30, t.closed_after
    wait_for(lambda: f"frame of {(8 << 20) - 1} bytes did not arrive whole within 21 s" in s.broker.log_text(),
             timeout=10, what="the reason in the log")


def test_a_user_who_fills_half_the_budget_waits_and_another_user_is_served(kaas_factory, certs):  # noqa: F811
    """Real bytes, not a stall: a user whose frames hold half of queued.max.request.bytes
    waits for room; another user's requests go on at once."""
    s = secure_broker(kaas_factory, certs)
    add_user(s.broker.data_dir, "mallory", PASSWORD)
    s.broker.stop()
    s.broker.extra += ["--queued-max-request-bytes", "4000000"]
    s.broker.start()
    conf = rdkafka_conf(s, "SASL_PLAINTEXT", "SCRAM-SHA-256")
    assert bystander_worst_seconds(conf, "shared", n=3, connect_within=10) < 5
    # 1 MB charged per frame (a quarter of the budget): mallory's half used by two.
    bystander_unslowed_by([raw_connection(s, "SASL_PLAINTEXT", user="mallory") for _ in range(4)], conf, "shared")
    assert s.broker.alive()


def test_a_consumer_past_group_max_size_is_told_so_and_the_others_keep_consuming(kaas_factory):
    from confluent_kafka import Consumer, KafkaError
    from confluent_kafka.admin import AdminClient, NewTopic
    broker = kaas_factory("--group-max-size", "2")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("sized", 3)])["sized"].result(30)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(30):
        p.produce("sized", f"v{i}".encode(), partition=i % 3)
    assert p.flush(30) == 0
    conf = {"bootstrap.servers": broker.bootstrap, "group.id": "sized", "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000}
    members = [Consumer(conf) for _ in range(2)]
    for c in members:
        c.subscribe(["sized"])
    got = 0
    deadline = time.time() + 30
    while got < 30 and time.time() < deadline:
        for c in members:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got += 1
    assert got == 30, "two members consume everything"
    third = Consumer(conf)
    third.subscribe(["sized"])
    refused = None
    deadline = time.time() + 20
    while refused is None and time.time() < deadline:
        m = third.poll(0.5)
        if m is not None and m.error() is not None:
            refused = m.error()
        for c in members:
            c.poll(0)
    assert refused is not None and refused.code() == KafkaError.GROUP_MAX_SIZE_REACHED, refused
    assert "join refused: group.max.size reached" in broker.log_text()
    third.close()
    for c in members:
        c.close()


def test_an_address_opening_connections_too_fast_is_refused_and_a_listener_limit_holds(kaas_factory, certs):  # noqa: F811
    s = secure_broker(kaas_factory, certs)
    s.broker.stop()
    s.broker.extra += ["--max-connection-creation-rate-per-ip", "20", "--listener-max-connections", "SSL=5"]
    s.broker.start()
    flood = []
    try:
        for _ in range(200):
            sock = socket.socket()
            sock.bind(("127.0.0.2", 0))
            sock.settimeout(5)
            sock.connect(("127.0.0.1", s.ports["PLAINTEXT"]))
            sock.settimeout(None)  # blocking: a MSG_DONTWAIT read answers at once
            flood.append(sock)

        def still_open():
            alive = 0
            for sock in flood:
                try:
                    if sock.recv(1, socket.MSG_DONTWAIT) != b"":
                        alive += 1
                except BlockingIOError:
                    alive += 1
                except OSError:
                    pass
            return alive

        wait_for(lambda: still_open() <= 40, timeout=10, what="connections past the rate closed")
        assert "connection refused: connection.creation.rate reached" in s.broker.log_text()
        # Another address is not slowed.
        assert bystander_worst_seconds(rdkafka_conf(s, "PLAINTEXT"), "rated") < 1.0
        # Five silent connections fill the SSL listener; a sixth is closed at once, and
        # the other listeners still take clients.
        for _ in range(5):
            flood.append(socket.create_connection(("127.0.0.1", s.ports["SSL"]), timeout=5))
        time.sleep(0.2)
        sixth = socket.create_connection(("127.0.0.1", s.ports["SSL"]), timeout=5)
        assert sixth.recv(1) == b"", "closed by the broker"
        sixth.close()
        assert "connection refused: listener.name.max.connections reached" in s.broker.log_text()
        assert bystander_worst_seconds(rdkafka_conf(s, "SASL_PLAINTEXT", "SCRAM-SHA-256"), "rated", n=3, connect_within=10) < 5
    finally:
        for sock in flood:
            sock.close()


def test_an_anonymous_sender_filling_its_share_leaves_anonymous_clients_elsewhere_served(kaas_factory):
    """On PLAINTEXT every client is User:ANONYMOUS: their frames are charged per address
    (an IPv6 /64), so a sender of real bytes from one address takes at most half of
    the budget from the clients of the others."""
    broker = kaas_factory("--queued-max-request-bytes", "4000000")
    conf = {"bootstrap.servers": broker.bootstrap}
    assert bystander_worst_seconds(conf, "anon", n=3, connect_within=10) < 5
    senders = []
    for _ in range(4):
        sock = socket.socket()
        sock.bind(("127.0.0.2", 0))
        sock.settimeout(10)
        sock.connect(("127.0.0.1", broker.port))
        senders.append(sock)
    bystander_unslowed_by(senders, conf, "anon")
