"""Durability: acknowledged acks=-1 records survive kill -9; a garbage tail is cut; a
crash at any step of a segment roll or of an ABORT marker loses no committed record and
reveals no aborted one to read_committed consumers."""
import struct
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import wire
from conftest import wait_for
from txn_helpers import read_all as read_isolated

N = 10_000


def read_all(bootstrap, topic, partitions, expect, timeout=60):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{time.time()}", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = []
    deadline = time.time() + timeout
    try:
        while len(got) < expect and time.time() < deadline:
            for m in c.consume(500, 0.5):
                if not m.error():
                    got.append(m)
    finally:
        c.close()
    return got


def test_acknowledged_records_survive_kill_9_and_the_log_accepts_writes(kaas):
    p = Producer({"bootstrap.servers": kaas.bootstrap, "acks": "all", "linger.ms": 2})
    acked = []
    for i in range(N):
        p.produce("durable", value=str(i).encode(), partition=0,
                  on_delivery=lambda err, msg: acked.append(int(msg.value())) if err is None else None)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    assert len(acked) == N
    kaas.kill9()
    kaas.restart()
    got = read_all(kaas.bootstrap, "durable", 1, N)
    assert sorted(int(m.value()) for m in got) == list(range(N))
    assert [m.offset() for m in got] == list(range(N))
    p2 = Producer({"bootstrap.servers": kaas.bootstrap, "acks": "all"})
    delivered = []
    p2.produce("durable", b"after", partition=0, on_delivery=lambda err, msg: delivered.append((err, msg.offset())))
    assert p2.flush(15) == 0
    assert delivered == [(None, N)]


def test_a_segment_with_garbage_appended_recovers_to_the_last_good_batch(kaas):
    p = Producer({"bootstrap.servers": kaas.bootstrap, "acks": "all"})
    for i in range(50):
        p.produce("torn", value=str(i).encode(), partition=0)
    assert p.flush(15) == 0
    assert kaas.stop() == 0
    seg = kaas.data_dir / "torn-0" / f"{0:020}.log"
    good = seg.stat().st_size
    with open(seg, "ab") as f:
        f.write(b"\xde\xad\xbe\xef" * 64)
    kaas.restart()
    assert seg.stat().st_size == good
    log = kaas.log_text()
    assert "recovery truncated a corrupt or torn log tail" in log
    assert "cut_bytes=256" in log
    got = read_all(kaas.bootstrap, "torn", 1, 50)
    assert sorted(int(m.value()) for m in got) == list(range(50))
    delivered = []
    p2 = Producer({"bootstrap.servers": kaas.bootstrap, "acks": "all"})
    p2.produce("torn", b"next", partition=0, on_delivery=lambda err, msg: delivered.append((err, msg.offset())))
    assert p2.flush(15) == 0
    assert delivered == [(None, 50)]


def test_sigterm_exits_zero_after_finishing_in_flight_requests(kaas):
    c = Consumer({"bootstrap.servers": kaas.bootstrap, "group.id": "lp", "fetch.wait.max.ms": 5000})
    c.assign([TopicPartition("quiet", 0, 0)])
    c.poll(0.5)  # a long-polling fetch is now parked on the broker
    t0 = time.time()
    assert kaas.stop() == 0
    assert time.time() - t0 < 10
    assert "kaas-server stopped cleanly" in kaas.log_text()
    c.close()


# --- Crashes inside a segment roll or an ABORT marker, under transactions -------------
#
# A broker runs with KAAS_FAILPOINTS=<name>=abort@N: it dies (abort(), as abrupt as
# kill -9) the N-th time it reaches that step, so earlier rolls and aborts — with their
# snapshots and .txnindex entries — are on disk behind the crash. It is restarted
# without the failpoint while a transactional producer keeps going, killed with -9 and
# restarted once more, and then a read_committed consumer must see every committed
# record exactly once and no aborted one, and the partition must still take
# transactions. The steps are documented in docs/testing.md ("Failpoints").

ROLL_STEPS = ["roll-after-seal", "roll-after-new-segment", "roll-before-snapshot", "roll-after-snapshot"]
ABORT_STEPS = ["abort-before-txnindex", "abort-after-txnindex-write", "abort-after-txnindex-fsync"]
TXNS = 12
PER_TXN = 10  # records per transaction, over two partitions


class CrashingBroker:
    """A transactional producer driven against a broker that may die at a failpoint:
    every blocking step is retried in short slices, and a dead broker is restarted
    without its failpoint."""

    def __init__(self, broker, tid):
        self.b = broker
        self.tid = tid
        self.crashes = 0
        self.p = None

    def revive(self):
        if self.b.alive():
            return
        self.crashes += 1
        log = self.b.log_text()
        assert log.count("failpoint reached") == self.crashes, f"the broker died, but not at the failpoint:\n{log[-3000:]}"
        self.b.env = {}
        self.b.restart()

    def retry(self, fn, timeout=60):
        deadline = time.time() + timeout
        while True:
            self.revive()
            try:
                return fn()
            except KafkaException as e:
                err = e.args[0]
                if err.fatal() or err.txn_requires_abort() or not err.retriable() or time.time() > deadline:
                    raise
                time.sleep(0.1)

    def new_producer(self):
        if self.p is not None:
            self.p.purge()
        self.p = Producer({
            "bootstrap.servers": self.b.bootstrap,
            "transactional.id": self.tid,
            "linger.ms": 5,
            "message.timeout.ms": 60000,
            "transaction.timeout.ms": 60000,
        })
        self.retry(lambda: self.p.init_transactions(3))

    def flush(self, timeout=60):
        deadline = time.time() + timeout
        while self.p.flush(0.5) > 0:
            assert time.time() < deadline, "records not delivered"
            self.revive()

    def transaction(self, topic, values, commit):
        """Runs one transaction; returns what became of it: committed, aborted, or
        unknown (the producer failed fatally; the outcome must be all or nothing)."""
        p = self.p
        try:
            p.begin_transaction()
            for i, v in enumerate(values):
                p.produce(topic, value=v.encode(), partition=i % 2)
            self.flush()
            if commit:
                self.retry(lambda: p.commit_transaction(3))
                return "committed"
            self.retry(lambda: p.abort_transaction(3))
            return "aborted"
        except KafkaException as e:
            if e.args[0].txn_requires_abort():
                self.retry(lambda: p.abort_transaction(3))
                return "aborted"
            self.new_producer()
            return "unknown"


def check_read_committed(bootstrap, topic, outcomes):
    committed = [v for vals, o in outcomes if o == "committed" for v in vals]
    got = read_isolated(bootstrap, topic, 2, "read_committed", expect=len(committed), timeout=60)
    seen = set(got)
    assert len(got) == len(seen), f"duplicates: {sorted(v for v in seen if got.count(v) > 1)}"
    assert seen >= set(committed), f"lost committed records: {sorted(set(committed) - seen)}"
    for vals, o in outcomes:
        hit = seen & set(vals)
        if o == "aborted":
            assert not hit, f"aborted records visible to read_committed: {sorted(hit)}"
        elif o == "unknown":
            assert not hit or hit == set(vals), f"a transaction is partly visible: {sorted(hit)}"
    known = {v for vals, _ in outcomes for v in vals}
    assert seen <= known, f"records nobody wrote: {sorted(seen - known)}"


@pytest.mark.parametrize("failpoint", ROLL_STEPS + ABORT_STEPS)
def test_a_crash_inside_a_roll_or_an_abort_loses_no_commit_and_reveals_no_abort(kaas_factory, tmp_path, failpoint):
    # abort@3: two rolls (or two ABORT markers, one per partition of the first aborted
    # transaction) complete first, so older snapshots and index entries exist.
    b = kaas_factory(data_dir=tmp_path / "fp", env={"KAAS_FAILPOINTS": f"{failpoint}=abort@3"})
    topic = "crashy"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, 2, config={"segment.bytes": "600"})])[topic].result(15)
    run = CrashingBroker(b, f"tx-{failpoint}")
    run.new_producer()
    outcomes = []
    for t in range(TXNS):
        values = [f"t{t}-{i}" for i in range(PER_TXN)]
        outcomes.append((values, run.transaction(topic, values, commit=t % 3 != 1)))
    assert run.crashes == 1, f"the failpoint {failpoint} was never reached"
    assert any(o == "aborted" for _, o in outcomes) and any(o == "committed" for _, o in outcomes)
    check_read_committed(b.bootstrap, topic, outcomes)

    # Recovery again, now from the state the first recovery left.
    b.kill9()
    b.restart()
    assert "cannot open partition" not in b.log_text()
    check_read_committed(b.bootstrap, topic, outcomes)

    # The partitions still take transactions, both ways.
    run.new_producer()
    for t, commit in [(TXNS, True), (TXNS + 1, False), (TXNS + 2, True)]:
        values = [f"t{t}-{i}" for i in range(PER_TXN)]
        outcome = run.transaction(topic, values, commit=commit)
        assert outcome == ("committed" if commit else "aborted")
        outcomes.append((values, outcome))
    check_read_committed(b.bootstrap, topic, outcomes)
    assert b.alive()


def test_a_snapshot_of_a_lost_tail_is_never_applied_to_the_log_that_grows_back(kaas_factory, tmp_path):
    """The roll snapshot is fsynced, the batch it ends with is not: a power loss can keep
    the one and lose the other. The log then grows back past the snapshot's offset with
    other batches; the old snapshot must not come back to life there (it would answer the
    lost batch's retry as a duplicate of someone else's records: silent data loss)."""
    # No background fsync during the test: acks=1 data is only made durable by the roll.
    b = kaas_factory("--flush-interval-ms", "600000", data_dir=tmp_path / "tl")
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    # retention.ms=-1: the hand-built batches carry timestamps from 1970.
    admin.create_topics([NewTopic("timeline", 1, config={"segment.bytes": "300", "retention.ms": "-1"})])[
        "timeline"].result(15)
    part = b.data_dir / "timeline-0"

    def produce(conn, pid, seq, value):
        conn.send(wire.request(0, 3, seq, wire.produce_v3("timeline", 0, wire.record_batch(
            [value.encode()], producer=(pid, 0, seq)), acks=1)))
        resp = conn.recv_response()
        assert resp is not None, "broker closed the connection"
        [(_, _, err, base)] = wire.parse_produce_v3(resp[1])
        assert err == 0, f"produce error {err}"
        return base

    conn = wire.Conn(b.port)
    seq = 0
    while len(list(part.glob("*.log"))) < 2:  # until a roll: the last batch opens segment 2
        produce(conn, 4242, seq, f"a{seq}")
        seq += 1
        assert seq < 50, "no roll"
    conn.close()
    lost_seq = seq - 1
    lost_offset = lost_seq  # one record per batch, producer 4242 alone so far
    assert (part / "producer-state.snapshot").exists()
    b.kill9()
    # Power loss: the new segment's unsynced data is gone; the snapshot, fsynced, is not.
    new_segment = part / f"{lost_offset:020}.log"
    new_segment.write_bytes(b"")
    b.restart()
    assert "deleting a producer-state snapshot that does not belong to this log" in b.log_text()

    conn = wire.Conn(b.port)
    assert produce(conn, 5151, 0, "b0") == lost_offset  # the log grows back past the old
    assert produce(conn, 5151, 1, "b1") == lost_offset + 1  # snapshot's offset
    conn.close()
    b.kill9()
    b.restart()
    conn = wire.Conn(b.port)
    # Producer 4242 retries the batch that was never made durable: it is new data.
    assert produce(conn, 4242, lost_seq, f"a{lost_seq}") == lost_offset + 2
    conn.close()
    got = read_all(b.bootstrap, "timeline", 1, lost_seq + 3)
    values = [m.value().decode() for m in got]
    assert sorted(values) == sorted([f"a{i}" for i in range(lost_seq + 1)] + ["b0", "b1"])


def test_a_write_in_flight_when_its_topic_is_deleted_never_lands_in_a_topic_created_again(kaas_factory, tmp_path):
    """A produce whose append rolls the partition's segment while the topic is deleted
    (the roll held up 3 s after sealing the old segment: failpoint
    `roll-after-seal=delay:3000`), and the topic created again under the name at once:
    the roll creates its new segment by path, so it must not reach the new topic's
    directory. The deleted partition is retired under its lock before its directory is
    cleared, so the roll finishes in the old directory first and is cleared with it.
    After a restart the new topic holds nothing of the old one: no segment at the held
    roll's base, and no record but one the client itself sent to the new topic.

    The held record is answered NOT_LEADER_OR_FOLLOWER when the delete clears its
    directory before the append's leadership check; librdkafka then sends it again,
    even with `retries` 0, to the topic created again (seen in CI). That record is the
    client's, written by a Produce to the new topic at the offset its delivery report
    names: allowed here. A roll's segment in the new directory would show as a
    segment at the held roll's base, past the new topic's records."""
    # No auto-creation: the producer still sending must not create the name again first.
    b = kaas_factory("--auto-create-topics", "false", data_dir=tmp_path / "rr",
                     env={"KAAS_FAILPOINTS": "roll-after-seal=delay:3000"})
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("rr", 1, config={"segment.bytes": "600", "retention.ms": "-1"})])["rr"].result(15)
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 0, "message.timeout.ms": 15000,
                  "retries": 0})
    stop = threading.Event()
    reports = []  # (value, error, offset) of every delivery report, in order

    def report(err, msg):
        reports.append((msg.value(), err, msg.offset()))

    def send():
        for i in range(20):  # one request each: the appends roll the segment
            if stop.is_set():
                break
            p.produce("rr", f"old-{i:03d}-{'x' * 90}".encode(), on_delivery=report)
            p.flush(20)

    sender = threading.Thread(target=send)
    sender.start()
    try:
        wait_for(lambda: "failpoint reached: delaying" in b.log_text(), timeout=15, what="a roll held up")
        held_since = time.time()
        # The records the old topic acknowledged before the held one: the held roll's
        # new segment starts where they end.
        held_base = len(reports)
        assert all(err is None for _, err, _ in reports), reports
        stop.set()  # the held append is the last write to the old topic
        admin.delete_topics(["rr"], request_timeout=15)["rr"].result(20)
        admin.create_topics([NewTopic("rr", 1)])["rr"].result(15)
    finally:
        sender.join(40)
    # The held roll is over either way (it waits 3 s once it is reached).
    time.sleep(max(0.0, held_since + 3.5 - time.time()))
    b.kill9()
    b.restart()
    segments = sorted(f.name for f in (tmp_path / "rr" / "rr-0").glob("*.log"))
    assert f"{held_base:020d}.log" not in segments, \
        f"the held roll's segment (base {held_base}) is in the topic created again: {segments}"
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "rr", "enable.auto.commit": False})
    try:
        low, high = c.get_watermark_offsets(TopicPartition("rr", 0), timeout=15)
        c.assign([TopicPartition("rr", 0, 0)])
        got = []
        deadline = time.time() + 15
        while len(got) < high and time.time() < deadline:
            got += [(m.value(), m.offset()) for m in c.consume(10, 0.5) if not m.error()]
    finally:
        c.close()
    assert low == 0
    assert [o for _, o in got] == list(range(high)), "the topic created again has a gap or records past its own"
    # Anything it holds, the client sent to it: a record reported delivered at that
    # very offset after the delete (the held one, sent again), never one the old
    # topic acknowledged.
    resent = {(v, o) for v, err, o in reports[held_base:] if err is None}
    assert set(got) <= resent, f"the old topic's records are in the topic created again: {got} (reports {reports})"


def test_a_transaction_marker_below_a_moved_log_start_does_not_keep_the_partition_from_opening(kaas):
    """DeleteRecords past a committed and an aborted transaction's markers, then a
    kill -9 before any producer-state snapshot past them (no roll, no clean stop): the
    restarted broker replays the log from its first byte, the markers below the log
    start included, and serves the partition. Before the fix the replay asked the log
    for those markers through the reader clients use, which refuses offsets below the
    log start, and the partition could not be opened again."""
    from txn_helpers import create_topic
    from txn_helpers import read_all as read_isolated_values

    create_topic(kaas.bootstrap, "dr-txn", 1)
    p = Producer({"bootstrap.servers": kaas.bootstrap, "transactional.id": "dr-txn-1"})
    p.init_transactions(15)
    for tag, commit in (("a", True), ("b", False), ("c", True)):
        p.begin_transaction()
        for i in range(2):
            p.produce("dr-txn", f"{tag}{i}".encode(), partition=0)
        # Delivered before the end (an abort purges what is still queued).
        assert p.flush(15) == 0
        if commit:
            p.commit_transaction(15)
        else:
            p.abort_transaction(15)
    # Offsets: a0 a1 COMMIT(2) b0 b1 ABORT(5) c0 c1 COMMIT(8).
    admin = AdminClient({"bootstrap.servers": kaas.bootstrap})
    tp = TopicPartition("dr-txn", 0, 6)
    assert admin.delete_records([tp])[tp].result(15).low_watermark == 6
    kaas.kill9()
    kaas.restart()
    # From offset 0, below the log start: OFFSET_OUT_OF_RANGE, reset to the earliest.
    got = read_isolated_values(kaas.bootstrap, "dr-txn", 1, "read_committed", expect=2, auto_offset_reset="earliest")
    assert got == ["c0", "c1"]
    c = Consumer({"bootstrap.servers": kaas.bootstrap, "group.id": "dr-txn-w"})
    try:
        assert c.get_watermark_offsets(TopicPartition("dr-txn", 0), timeout=10) == (6, 9)
    finally:
        c.close()
    after = Producer({"bootstrap.servers": kaas.bootstrap, "acks": "all"})
    delivered = []
    after.produce("dr-txn", b"after", partition=0, on_delivery=lambda err, msg: delivered.append((err, msg.offset())))
    assert after.flush(15) == 0
    assert delivered == [(None, 9)]
    assert "cannot open partition" not in kaas.log_text()


def test_an_acks_all_produce_to_several_partitions_waits_for_their_fsyncs_together(kaas_factory, tmp_path):
    """An acks=all Produce naming two partitions waited for their fsyncs one after the
    other: the answer took the sum of them, and with every log fsync taking 600 ms
    (failpoint `log-fsync=delay:600`) and the request's 1 s timeout, the second
    partition was answered REQUEST_TIMED_OUT though its own fsync took 600 ms. Apache
    waits for all of a request's partitions at once; so does kaas now. One request
    carrying both partitions, as librdkafka and Java send to one broker."""
    b = kaas_factory(data_dir=tmp_path / "both", env={"KAAS_FAILPOINTS": "log-fsync=delay:600"})
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("both", 2)])["both"].result(15)
    records = [wire.record_batch([f"v{p}".encode()]) for p in range(2)]
    body = struct.pack(">hhi", -1, -1, 1000)  # no transactional id, acks=all, timeout 1 s
    body += struct.pack(">i", 1) + wire.string("both") + struct.pack(">i", 2)
    for p in range(2):
        body += struct.pack(">i", p) + struct.pack(">i", len(records[p])) + records[p]
    conn = wire.Conn(b.port)
    try:
        started = time.time()
        conn.send(wire.request(0, 3, 41, body))
        corr, resp = conn.recv_response()
        took = time.time() - started
    finally:
        conn.close()
    assert corr == 41
    print(f"answered in {took:.3f} s")
    answers = sorted(wire.parse_produce_v3(resp))
    assert [(p, err) for _, p, err, _ in answers] == [(0, 0), (1, 0)], (answers, took)


def test_a_delete_cut_short_by_a_crash_leaves_no_partition_directory_after_a_restart(kaas_factory, tmp_path):
    """DeleteTopics removes the topic's file, then its partitions' directories: a broker
    that dies in between (failpoint `topic-file-removed`, as abrupt as kill -9) left
    the directories, and nothing ever looked for directories no topic names — the
    deleted records stayed on the volume for good (found by a review of topic
    lifecycle). The volume sync sweeps them, at its first round and every minute (each
    under its lock, once untouched for a minute: the test ages the directories
    instead of waiting)."""
    import os
    b = kaas_factory(env={"KAAS_FAILPOINTS": "topic-file-removed"})
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("orph", 2, 1)])["orph"].result(30)
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all"})
    for i in range(10):
        p.produce("orph", value=f"deleted {i}".encode(), partition=i % 2)
    assert p.flush(30) == 0
    del p  # its metadata refreshes would create the topic again (auto-create)
    with pytest.raises(KafkaException):
        admin.delete_topics(["orph"], request_timeout=10)["orph"].result(30)
    b.proc.wait(30)
    dirs = [b.data_dir / f"orph-{q}" for q in range(2)]
    assert all(d.exists() for d in dirs), "the crash came between the topic's file and its directories"
    hour_ago = time.time() - 3600
    for d in dirs:
        os.utime(d, (hour_ago, hour_ago))
    b.env = {}
    b.start()
    wait_for(lambda: not any(d.exists() for d in dirs), timeout=15, what="the deleted topic's directories swept")
    assert b.log_text().count("removed the directory of a partition no topic names") == 2
    assert "orph" not in AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=30).topics
