"""Bad input on a real socket: the offending connection gets the right error or is
closed, the broker does not die, and a bystander connection keeps working."""
import struct

import pytest
from confluent_kafka import KafkaError, Producer

from wire import Conn, parse_produce_v3, produce_v3, record_batch, request


@pytest.fixture
def broker(kaas_factory):
    return kaas_factory("--max-request-bytes", "1048576", "--message-max-bytes", "20000")


def check_bystander(broker, bystander):
    assert broker.alive(), broker.log_text()[-2000:]
    assert bystander.api_versions_ok()
    p = Producer({"bootstrap.servers": broker.bootstrap})
    p.produce("bystander", b"still fine")
    assert p.flush(15) == 0


@pytest.mark.parametrize(
    "name,frame,log_words",
    [
        ("oversize", struct.pack(">i", 50_000_000) + b"\x00" * 16, "exceeds --max-request-bytes"),
        ("negative length", struct.pack(">i", -5), "shorter than a request header"),
        ("shorter than a header", struct.pack(">i", 4) + b"\x00\x03\x00\x00", "shorter than a request header"),
        ("unknown api key", request(9999, 0, 1, b""), "unknown api key 9999"),
        ("version out of range", request(3, 99, 1, b""), "Metadata v99 is not supported"),
        ("undecodable body", request(3, 1, 1, struct.pack(">i", 5) + b"\x00\x01"), "undecodable Metadata v1 request body"),
        ("huge array count", request(3, 0, 1, bytes.fromhex("7fffffff")), "undecodable Metadata v0 request body"),
        ("huge produce topic count", request(0, 3, 1, struct.pack(">hhi", -1, 1, 1000) + bytes.fromhex("7ffffff0")), "undecodable Produce v3"),
        ("huge compact array", b"", "undecodable Metadata v9"),
    ],
)
def test_bad_frames_close_only_their_connection(broker, name, frame, log_words):
    if name == "huge compact array":
        # Metadata v9 is flexible: header v2 (tagged fields), compact array count as varint.
        payload = struct.pack(">hhi", 3, 9, 1) + struct.pack(">h", 1) + b"x" + b"\x00" + bytes.fromhex("ffffffff07")
        frame = struct.pack(">i", len(payload)) + payload
    bystander = Conn(broker.port)
    assert bystander.api_versions_ok()
    bad = Conn(broker.port)
    bad.send(frame)
    assert bad.closed_by_peer(), f"{name}: connection left open"
    check_bystander(broker, bystander)
    assert log_words in broker.log_text(), broker.log_text()[-3000:]


def test_api_versions_at_an_unknown_version_answers_v0_with_unsupported_version(broker):
    c = Conn(broker.port)
    c.send(request(18, 99, 42, b""))
    corr, body = c.recv_response()
    assert corr == 42
    error, count = struct.unpack(">hi", body[:6])
    assert error == 35
    keys = {struct.unpack(">hhh", body[6 + 6 * i:12 + 6 * i])[0] for i in range(count)}
    assert {0, 1, 3, 18} <= keys
    assert c.api_versions_ok(), "the connection stays usable"


def test_a_corrupt_batch_is_answered_corrupt_message_and_nothing_is_written(broker):
    batch = bytearray(record_batch([b"hello", b"world"]))
    batch[-1] ^= 0xFF  # payload byte: CRC no longer matches
    bystander = Conn(broker.port)
    c = Conn(broker.port)
    c.send(request(0, 3, 5, produce_v3("wire", 0, bytes(batch))))
    corr, body = c.recv_response()
    assert corr == 5
    assert parse_produce_v3(body) == [("wire", 0, 2, -1)]
    # The same connection then writes a good batch at offset 0: nothing was appended.
    c.send(request(0, 3, 6, produce_v3("wire", 0, record_batch([b"ok"]))))
    assert parse_produce_v3(c.recv_response()[1]) == [("wire", 0, 0, 0)]
    assert "rejected produce batch" in broker.log_text() and "CRC32C" in broker.log_text()
    check_bystander(broker, bystander)


def test_a_truncated_batch_is_corrupt_message(broker):
    good = record_batch([b"hello"])
    c = Conn(broker.port)
    c.send(request(0, 3, 5, produce_v3("wire2", 0, good[:-3])))
    assert parse_produce_v3(c.recv_response()[1]) == [("wire2", 0, 2, -1)]


def test_a_batch_over_max_message_bytes_is_message_too_large(broker):
    bystander = Conn(broker.port)
    c = Conn(broker.port)
    c.send(request(0, 3, 9, produce_v3("big", 0, record_batch([b"x" * 30000]))))
    assert parse_produce_v3(c.recv_response()[1]) == [("big", 0, 10, -1)]
    # A real client sees the same error.
    p = Producer({"bootstrap.servers": broker.bootstrap, "message.max.bytes": 1_000_000, "compression.type": "none"})
    errors = []
    p.produce("big", b"y" * 50_000, on_delivery=lambda err, msg: errors.append(err))
    p.flush(15)
    # Broker error 10 (not librdkafka's local size check, which allows 1 MB here).
    assert errors and errors[0] is not None and errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE == 10
    check_bystander(broker, bystander)


def test_invalid_acks_are_rejected(broker):
    c = Conn(broker.port)
    c.send(request(0, 3, 5, produce_v3("acks", 0, record_batch([b"x"]), acks=7)))
    assert parse_produce_v3(c.recv_response()[1]) == [("acks", 0, 21, -1)]


def test_huge_array_counts_under_an_address_space_limit_close_only_their_connection(tmp_path):
    """Under `ulimit -v` (here 4 GiB of address space) even the allocation guard's
    reserved mappings fail: the decoder itself must not reserve for counts the frame
    cannot hold (vendor/kafka-protocol/KAAS-PATCH.md)."""
    from conftest import KaasBroker
    broker = KaasBroker(tmp_path / "data", tmp_path / "broker.log", [],
                        wrapper=["prlimit", f"--as={4 << 30}", "--"])
    try:
        broker.start()
        bystander = Conn(broker.port)
        assert bystander.api_versions_ok()
        payload = struct.pack(">hhi", 3, 9, 1) + struct.pack(">h", 1) + b"x" + b"\x00" + bytes.fromhex("ffffffff07")
        frames = [
            request(3, 0, 1, bytes.fromhex("7fffffff")),  # Metadata v0: 2^31-1 topics
            request(3, 0, 1, bytes.fromhex("00989680")),  # 10,000,000 topics: under the 1 GiB guard
            request(0, 3, 1, struct.pack(">hhi", -1, 1, 1000) + bytes.fromhex("7ffffff0")),
            struct.pack(">i", len(payload)) + payload,  # a compact array count of 2^32-2
            # The largest frame a Metadata may have, nearly all of it left after a count
            # of 2^31-1: reserving per element counted, not per byte, would want
            # tens of gigabytes.
            request(3, 0, 1, bytes.fromhex("7fffffff") + b"\x00" * ((8 << 20) - 64)),
            # Past the bound for requests other than Produce: closed unread.
            request(3, 0, 1, bytes.fromhex("00000001") + b"\x00" * (9 << 20)),
        ]
        for frame in frames:
            bad = Conn(broker.port)
            try:
                bad.send(frame)
            except (BrokenPipeError, ConnectionResetError):
                pass  # closed before the whole frame was sent
            assert bad.closed_by_peer()
            assert broker.alive(), broker.log_text()[-3000:]
        check_bystander(broker, bystander)
    finally:
        broker.kill9()
