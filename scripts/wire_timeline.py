#!/usr/bin/env python3
"""Splits a client's time from a broker's, from a packet capture of their Kafka
connections (docs/performance.md#where-a-transaction-spends-its-time).

  tcpdump -i lo -w txn.pcap tcp port 9092        # while one client runs
  scripts/wire_timeline.py txn.pcap 9092          # prints JSON

Every request is matched to its response by connection and correlation id. A
request's time in the broker runs from the packet holding its last byte to the packet
holding its response's first byte; the client's time is everything else. For a client
that sends one request at a time (a transactional producer: AddPartitionsToTxn,
Produce, EndTxn, in turn), 1 / (client time per transaction) is what it would reach
with a broker that answered in no time at all — an estimate: on one machine the
client's time includes waits for a CPU the broker is using. Whole transactions are
counted from one EndTxn answer to the next; the medians of the client's steps between
an answer and its next request are listed too.

Reads classic pcap files (what tcpdump -w writes), Ethernet or loopback link types,
IPv4 and IPv6, whole or cut short by a snap length (only the request and response
headers are needed: a connection whose frame boundaries fell in bytes not captured is
left out and counted); only the standard library. Requests other than
AddPartitionsToTxn, Produce and EndTxn count as the client's time.
"""
import json
import statistics
import struct
import sys
from collections import defaultdict

API_NAMES = {0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit",
             9: "OffsetFetch", 10: "FindCoordinator", 18: "ApiVersions", 22: "InitProducerId",
             24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn", 26: "EndTxn", 27: "WriteTxnMarkers",
             28: "TxnOffsetCommit"}


def packets(path):
    """(time, src port, dst port, payload, bytes of it captured) of every TCP packet
    with a payload; the rest of the payload, past what was captured, is zeros."""
    data = open(path, "rb").read()
    if len(data) < 24:
        raise ValueError(f"{path}: {len(data)} bytes, not a pcap file (a 24-byte header expected)")
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        endian = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        endian = ">"
    else:
        raise ValueError(f"{path}: magic {magic.hex()} at byte 0 is not a classic pcap file's "
                         "(pcapng is not read: capture with tcpdump -w)")
    nano = magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
    link = struct.unpack(endian + "I", data[20:24])[0]
    link_header = {1: 14, 0: 4, 113: 16, 276: 20}.get(link)  # Ethernet, BSD loopback, Linux SLL, SLL2
    if link_header is None:
        raise ValueError(f"{path}: link type {link} not read (Ethernet, loopback, SLL expected)")
    at = 24
    while at + 16 <= len(data):
        sec, frac, caught, _ = struct.unpack(endian + "IIII", data[at:at + 16])
        at += 16
        frame = data[at:at + caught]
        at += caught
        ip = frame[link_header:]
        if not ip:
            continue
        if ip[0] >> 4 == 4 and len(ip) >= 20:
            proto, header, total = ip[9], (ip[0] & 15) * 4, struct.unpack(">H", ip[2:4])[0]
        elif ip[0] >> 4 == 6 and len(ip) >= 40:
            proto, header, total = ip[6], 40, 40 + struct.unpack(">H", ip[4:6])[0]
        else:
            continue
        tcp = ip[header:]
        if proto != 6 or len(tcp) < 20:
            continue
        sport, dport = struct.unpack(">HH", tcp[:4])
        offset = (tcp[12] >> 4) * 4
        # Only what the IP header counts (an Ethernet frame may be padded past it);
        # bytes a small snap length left out are filled in, so frames after them are
        # still found (a frame header they hold is detected: see Stream).
        length = max(0, total - header - offset)
        payload = tcp[offset:offset + length]
        captured = len(payload)
        payload += bytes(length - captured)
        if payload:
            yield sec + frac / (1e9 if nano else 1e6), sport, dport, payload, captured


class Stream:
    """One direction of one connection, cut into Kafka frames (4-byte size first).
    Frames are found by their sizes; a frame whose size or header (API key, version,
    correlation id) lies in bytes the capture left out, or a size no frame has, means
    the framing is lost: the stream is given up and counted, never guessed at."""

    def __init__(self, min_size):
        self.min_size = min_size
        self.buf, self.first_at, self.lost = b"", None, False
        self.pos = 0        # stream offset of buf[0]
        self.missing = []   # [start, end) stream offsets of bytes not captured

    def feed(self, t, payload, captured):
        """Yields (time of the frame's first byte, time of its last byte, frame)."""
        if self.lost:
            return
        if not self.buf:
            self.first_at = t
        end = self.pos + len(self.buf)
        if captured < len(payload):
            self.missing.append((end + captured, end + len(payload)))
        self.buf += payload
        while len(self.buf) >= 4:
            if self.overlaps_missing(self.pos, self.pos + 4 + self.min_size):
                self.lost, self.buf = True, b""
                return
            size = struct.unpack(">i", self.buf[:4])[0]
            if size < self.min_size:
                self.lost, self.buf = True, b""
                return
            if len(self.buf) < 4 + size:
                break
            frame, self.buf = self.buf[4:4 + size], self.buf[4 + size:]
            self.pos += 4 + size
            self.missing = [m for m in self.missing if m[1] > self.pos]
            yield self.first_at, t, frame
            self.first_at = t

    def overlaps_missing(self, start, end):
        return any(a < end and start < b for a, b in self.missing)


def timeline(path, port):
    """Every request to the broker(s) listening on `port` (one port, or several for a
    cluster: then the brokers' requests to each other, WriteTxnMarkers, are in it too),
    as (sent, answered, API name), and how many connections could not be followed."""
    # A request has at least its API key, version and correlation id (8 bytes); a
    # response at least its correlation id (4; Heartbeat v0 answers 6 bytes).
    ports = {port} if isinstance(port, int) else set(port)
    streams = {}
    pending, events = {}, []
    for t, sport, dport, payload, captured in packets(path):
        if dport in ports:
            stream = streams.setdefault((sport, "in"), Stream(8))
            for _, last, frame in stream.feed(t, payload, captured):
                if len(frame) >= 8:
                    key, _, corr = struct.unpack(">hhi", frame[:8])
                    pending[(sport, corr)] = (last, key)
        elif sport in ports:
            stream = streams.setdefault((dport, "out"), Stream(4))
            for first, _, frame in stream.feed(t, payload, captured):
                if len(frame) >= 4:
                    corr = struct.unpack(">i", frame[:4])[0]
                    if (dport, corr) in pending:
                        sent, key = pending.pop((dport, corr))
                        events.append((sent, first, API_NAMES.get(key, f"api {key}")))
    lost = sum(1 for st in streams.values() if st.lost)
    return sorted(events), lost


TXN_APIS = ("AddPartitionsToTxn", "Produce", "EndTxn")


def summary(events, lost=0):
    broker = defaultdict(list)
    for sent, answered, api in events:
        broker[api].append((answered - sent) * 1e3)
    out = {"requests": {api: {"count": len(v), "median_ms": round(statistics.median(v), 3)}
                        for api, v in sorted(broker.items())}}
    if lost:
        out["connections_not_followed"] = lost
    # Whole transactions: from one EndTxn's answer to the last one's, split into time
    # with a transaction request in the broker and time without (the client's).
    txn = [e for e in events if e[2] in TXN_APIS]
    ends = [e for e in txn if e[2] == "EndTxn"]
    if len(ends) < 2:
        return out
    start, end = ends[0][1], ends[-1][1]
    in_broker, last = 0.0, start
    for sent, answered, _ in txn:
        sent, answered = max(sent, last), min(answered, end)
        if answered > sent:
            in_broker += answered - sent
            last = answered
    n = len(ends) - 1
    total = end - start
    client = total - in_broker
    # The client's time between an answer and its next request, per step.
    gaps = defaultdict(list)
    for (_, answered, api), (sent, _, next_api) in zip(txn, txn[1:]):
        if sent >= answered:
            gaps[f"{api} -> {next_api}"].append((sent - answered) * 1e3)
    out.update({
        "transactions": n,
        "wall_ms_per_txn": round(total / n * 1e3, 3),
        "broker_ms_per_txn": round(in_broker / n * 1e3, 3),
        "client_ms_per_txn": round(client / n * 1e3, 3),
        "client_gaps_median_ms": {k: round(statistics.median(v), 3) for k, v in gaps.items() if len(v) * 10 >= n},
        "txn_per_s": round(n / total, 1),
        "ceiling_txn_per_s_with_an_instant_broker": round(n / client, 1) if client > 0 else None,
    })
    return out


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    try:
        events, lost = timeline(sys.argv[1], [int(p) for p in sys.argv[2].split(",")])
    except (OSError, ValueError) as e:
        raise SystemExit(f"wire_timeline: {e}")
    print(json.dumps(summary(events, lost), indent=2))


if __name__ == "__main__":
    main()
