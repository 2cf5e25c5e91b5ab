"""Markers across brokers in milliseconds (issue 24, docs/cluster.md#markers-across-brokers):
the coordinator queues a transaction's markers on the volume for each partition's
leader, then tells the leader at once with WriteTxnMarkers; the leader applies the
entry and answers when the markers are durable. The volume stays the record, so a
notification that is lost, refused, repeated, or whose leader or coordinator dies,
only leaves the entry to the leaders' marker-queue poll. Each test ends with every
marker applied exactly once and read_committed exact."""
import json
import re
import socket
import struct
import subprocess
import time
import urllib.request

from confluent_kafka import KafkaException, Producer

from conftest import free_port, run_kaasctl, wait_for
from test_cluster import _txn_slot, placement, rendezvous, settled
from test_kafkajs import JS
from test_security import add_user
from txn_helpers import create_topic, read_all

SHORT = ["--broker-session-timeout-ms", "4000"]
# The poll never runs within a test: whatever is delivered, is delivered by notification.
NO_POLL = ["--volume-poll-interval-ms", "600000"]
FAST_POLL = ["--volume-poll-interval-ms", "300"]
PARTITIONS = 6


def metrics_text(broker):
    """`broker`'s /metrics, as text."""
    return urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/metrics", timeout=10).read().decode()


def metric(broker, name, **labels):
    """The sum of a metric's samples on `broker`'s /metrics that carry `labels`."""
    text = metrics_text(broker)
    total = 0.0
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][\w:]*)(\{[^}]*\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if all(got.get(k) == v for k, v in labels.items()):
            total += float(m.group(3))
    return total


def everywhere(brokers, name, **labels):
    return sum(metric(b, name, **labels) for b in brokers if b.alive())


def brokers_on_one_volume(kaas_factory, tmp_path, count, *flags, env=None, per_broker=None):
    """`count` brokers on one volume, each with its operations listener
    (`b.metrics_port`); `per_broker(i)` adds flags or environment to broker i."""
    data = tmp_path / "shared"
    brokers = []
    for i in range(count):
        port = free_port()
        more_args, more_env = per_broker(i) if per_broker else ([], {})
        b = kaas_factory("--broker-id", str(i), "--metrics-listen", f"127.0.0.1:{port}", *flags,
                         *more_args, data_dir=data, env={**(env or {}), **more_env})
        b.metrics_port = port
        brokers.append(b)
    return data, brokers


def three_brokers(kaas_factory, tmp_path, *extra, env=None, per_broker=None):
    """Three brokers on one volume with the short session timeout (`brokers_on_one_volume`)."""
    return brokers_on_one_volume(kaas_factory, tmp_path, 3, *SHORT, *extra, env=env, per_broker=per_broker)


def spread_topic(brokers, topic):
    create_topic(brokers[0].bootstrap, topic, PARTITIONS)
    return wait_for(lambda: settled(*(b.bootstrap for b in brokers if b.alive()), topic=topic, brokers=[0, 1, 2]),
                    timeout=30, what=f"{topic} placed on the three brokers")


def coordinator_of(tid):
    return rendezvous(f"txn-slot-{_txn_slot(tid)}", [0, 1, 2])


def transactions(bootstrap, topic, tid, count, tag, abort_one=True):
    """`count` committed transactions of one record per partition (then one aborted);
    returns the committed values."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "transaction.timeout.ms": 60000})
    p.init_transactions(60)
    committed = []
    for t in range(count):
        p.begin_transaction()
        for part in range(PARTITIONS):
            p.produce(topic, value=f"{tag}-{t}-{part}".encode(), partition=part)
        p.commit_transaction(60)
        committed += [f"{tag}-{t}-{part}" for part in range(PARTITIONS)]
    if abort_one:
        p.begin_transaction()
        for part in range(PARTITIONS):
            p.produce(topic, value=f"{tag}-dropped-{part}".encode(), partition=part)
        p.flush(30)
        p.abort_transaction(60)
    return committed


def markers_exactly_once(data, topic):
    """Every partition's log: each transactional producer's data is closed by exactly
    one marker (never two markers in a row for one producer), and nothing is left open."""
    for part in range(PARTITIONS):
        dump = json.loads(run_kaasctl(data, "--json", "log", "dump", topic, str(part), "--count", "100000000",
                                      timeout=60).stdout)
        open_txn = {}
        for b in dump["batches"]:
            if not b["transactional"]:
                continue
            pid = b["producer_id"]
            if b["control"]:
                assert open_txn.get(pid), f"{topic}-{part}: a second marker for producer {pid} at {b['base_offset']}"
                open_txn[pid] = False
            else:
                open_txn[pid] = True
        assert not any(open_txn.values()), f"{topic}-{part}: a transaction left open: {open_txn}"


def drained(data):
    rows = json.loads(run_kaasctl(data, "markers", "list", "--json", timeout=30).stdout)
    return all(r["depth"] == 0 for r in rows)


def test_transactions_over_three_brokers_are_delivered_by_notification_with_real_clients(kaas_factory, tmp_path):
    """confluent-kafka and kafkajs transactional producers over partitions led by three
    brokers, with the marker-queue poll effectively off (10 minutes): every transaction
    completes, so its markers reached the other leaders by WriteTxnMarkers. On the old
    code the second transaction waits for the poll (CONCURRENT_TRANSACTIONS) and times out."""
    data, brokers = three_brokers(kaas_factory, tmp_path, *NO_POLL)
    every = ",".join(b.bootstrap for b in brokers)
    placed = spread_topic(brokers, "fast")
    assert set(placed.values()) == {0, 1, 2}, placed
    committed = transactions(every, "fast", "fast-tx", 20, "ck")
    js = subprocess.run(["node", str(JS / "cluster_transactions.js"), every, "fast", str(PARTITIONS), "10"],
                        capture_output=True, text=True, timeout=180, cwd=JS)
    assert js.returncode == 0, js.stdout + js.stderr
    assert json.loads(js.stdout.strip().splitlines()[-1])["committed"] == 10
    committed += [f"js-{t}-{p}" for t in range(10) for p in range(PARTITIONS)]
    got = read_all(every, "fast", PARTITIONS, "read_committed", expect=len(committed))
    assert sorted(got) == sorted(committed), "every committed record once, nothing aborted"
    markers_exactly_once(data, "fast")
    assert drained(data)
    notified = everywhere(brokers, "kaas_txn_marker_delivery_seconds_count", path="notified")
    assert notified >= 30, f"the transactions' markers were delivered by notification: {notified}"
    assert everywhere(brokers, "kaas_txn_marker_delivery_seconds_count", path="poll") == 0
    assert everywhere(brokers, "kaas_txn_marker_notifications_total", outcome="lost") == 0
    assert everywhere(brokers, "kaas_txn_marker_notifications_total", outcome="refused") == 0


def test_a_lost_notification_only_leaves_the_entry_to_the_poll(kaas_factory, tmp_path):
    """The coordinator's first notifications are dropped (failpoint marker-notify): the
    leaders' polls apply those entries; nothing is lost or doubled."""
    data, brokers = three_brokers(kaas_factory, tmp_path, *FAST_POLL, env={"KAAS_FAILPOINTS": "marker-notify=error*4"})
    every = ",".join(b.bootstrap for b in brokers)
    spread_topic(brokers, "lost")
    committed = transactions(every, "lost", "lost-tx", 8, "l")
    got = read_all(every, "lost", PARTITIONS, "read_committed", expect=len(committed))
    assert sorted(got) == sorted(committed)
    wait_for(lambda: drained(data), timeout=20, what="every marker queue drained")
    markers_exactly_once(data, "lost")
    seen = {f"{name} {label}": everywhere(brokers, name, **{key: label})
            for name, key, labels in (("kaas_txn_marker_notifications_total", "outcome", ("lost", "delivered", "refused")),
                                      ("kaas_txn_marker_delivery_seconds_count", "path", ("local", "notified", "poll")))
            for label in labels}
    assert seen["kaas_txn_marker_notifications_total lost"] >= 4, seen
    assert seen["kaas_txn_marker_delivery_seconds_count poll"] >= 1, seen
    assert seen["kaas_txn_marker_notifications_total delivered"] >= 1, \
        f"after the failpoint healed, notifications deliver again: {seen}"


def test_a_leader_killed_after_receiving_a_notification_leaves_its_entry_to_the_next_leader(kaas_factory, tmp_path):
    """A partition leader aborts as soon as it receives a notification (failpoint
    markers-notified), before applying anything: the transaction still completes once a
    surviving broker leads those partitions and its poll finds the entry."""
    tid = "victim-tx"
    coordinator = coordinator_of(tid)
    led = placement("victim", PARTITIONS, [0, 1, 2])
    victim = next(b for b in (0, 1, 2) if b != coordinator and b in led.values())
    data, brokers = three_brokers(
        kaas_factory, tmp_path, *FAST_POLL,
        per_broker=lambda i: ([], {"KAAS_FAILPOINTS": "markers-notified"} if i == victim else {}))
    every = ",".join(b.bootstrap for b in brokers)
    spread_topic(brokers, "victim")
    committed = transactions(every, "victim", tid, 3, "v", abort_one=False)
    wait_for(lambda: not brokers[victim].alive(), timeout=10, what="the notified leader to abort")
    survivors = [b for i, b in enumerate(brokers) if i != victim]
    rest = ",".join(b.bootstrap for b in survivors)
    got = read_all(rest, "victim", PARTITIONS, "read_committed", expect=len(committed), timeout=60)
    assert sorted(got) == sorted(committed)
    wait_for(lambda: drained(data), timeout=30, what="every marker queue drained")
    markers_exactly_once(data, "victim")
    assert "markers-notified" in brokers[victim].log_text()


def test_a_coordinator_killed_after_queueing_is_finished_from_the_volume(kaas_factory, tmp_path):
    """The coordinator aborts right after writing its queue entries (not yet fsynced,
    nothing recorded on the slot entry), before it notifies anyone (failpoint
    txn-after-queued; EndTxn was answered once PrepareCommit was durable): the broker
    the slot moves to finds the PrepareCommit entry (its reaper), writes the entries
    again and notifies their leaders, and the transaction completes, every marker once."""
    tid = "coord-tx"
    coordinator = coordinator_of(tid)
    data, brokers = three_brokers(
        kaas_factory, tmp_path, *FAST_POLL,
        per_broker=lambda i: ([], {"KAAS_FAILPOINTS": "txn-after-queued"} if i == coordinator else {}))
    every = ",".join(b.bootstrap for b in brokers)
    spread_topic(brokers, "coord")
    p = Producer({"bootstrap.servers": every, "transactional.id": tid, "transaction.timeout.ms": 60000})
    p.init_transactions(60)
    p.begin_transaction()
    for part in range(PARTITIONS):
        p.produce("coord", value=f"c-{part}".encode(), partition=part)
    p.flush(30)
    deadline = time.time() + 90
    while True:
        try:
            p.commit_transaction(30)
            break
        except KafkaException as e:
            assert e.args[0].retriable() and time.time() < deadline, e
    wait_for(lambda: not brokers[coordinator].alive(), timeout=20, what="the coordinator to abort after queueing")
    survivors = ",".join(b.bootstrap for i, b in enumerate(brokers) if i != coordinator)
    got = read_all(survivors, "coord", PARTITIONS, "read_committed", expect=PARTITIONS, timeout=60)
    assert sorted(got) == sorted(f"c-{part}" for part in range(PARTITIONS))
    wait_for(lambda: drained(data), timeout=30, what="every marker queue drained")
    markers_exactly_once(data, "coord")


def compact_string(s):
    b = s.encode()
    return uvarint(len(b) + 1) + b


def uvarint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def read_uvarint(buf, at):
    shift = value = 0
    while True:
        b = buf[at]
        at += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, at
        shift += 7


# kaas's tagged field on a WriteTxnMarkers marker: the transaction's number at its
# coordinator (docs/cluster.md, "Markers from a notice"); a leader echoes it in its
# answer when every marker is applied.
TXN_SEQ_TAG = 0x4B414153


def write_txn_markers(address, producer_id, epoch, commit, topic, partitions, txn_seq=None):
    """One WriteTxnMarkers v1 from a plain client (what a broker sends its peers), naming
    transaction `txn_seq` when given; returns {partition: error code}."""
    return write_txn_markers_answer(address, producer_id, epoch, commit, topic, partitions, txn_seq)[0]


def write_txn_markers_answer(address, producer_id, epoch, commit, topic, partitions, txn_seq=None):
    """write_txn_markers, and the transaction number the answer echoes (None when none)."""
    body = uvarint(2) + struct.pack(">qhb", producer_id, epoch, 1 if commit else 0)
    body += uvarint(2) + compact_string(topic) + uvarint(len(partitions) + 1)
    body += b"".join(struct.pack(">i", p) for p in partitions) + b"\0"  # topic's tags
    body += struct.pack(">i", 0)  # coordinator epoch
    if txn_seq is None:
        body += b"\0"  # marker's tags
    else:
        body += uvarint(1) + uvarint(TXN_SEQ_TAG) + uvarint(8) + struct.pack(">Q", txn_seq)
    body += b"\0"  # request's tags
    client = b"not-a-broker"
    header = struct.pack(">hhih", 27, 1, 7, len(client)) + client + b"\0"
    frame = header + body
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        data = b""
        while len(data) < size:
            data += s.recv(size - len(data))
    assert struct.unpack(">i", data[:4])[0] == 7
    _, at = read_uvarint(data, 4)  # header tags
    markers, at = read_uvarint(data, at)
    codes, echoed = {}, None
    for _ in range(markers - 1):
        at += 8  # producer id
        topics, at = read_uvarint(data, at)
        for _ in range(topics - 1):
            n, at = read_uvarint(data, at)
            at += n - 1
            parts, at = read_uvarint(data, at)
            for _ in range(parts - 1):
                p, code = struct.unpack(">ih", data[at:at + 6])
                codes[p] = code
                at += 6
                _, at = read_uvarint(data, at)
            _, at = read_uvarint(data, at)
        tags, at = read_uvarint(data, at)
        for _ in range(tags):
            tag, at = read_uvarint(data, at)
            size, at = read_uvarint(data, at)
            if tag == TXN_SEQ_TAG and size == 8:
                echoed = struct.unpack(">Q", data[at:at + 8])[0]
            at += size
    return codes, echoed


def test_a_repeated_or_late_notification_writes_nothing(kaas_factory, tmp_path):
    """After a transaction completed, WriteTxnMarkers for it again (a duplicate or late
    notification) writes nothing: without the transaction's number it finds no queued
    entry; naming the transaction, it finds nothing open for it. And while the
    producer's next transaction is open at the same epoch, a late notice naming an
    earlier transaction does not close it (the partition knows which one is open)."""
    data, brokers = three_brokers(kaas_factory, tmp_path, *NO_POLL)
    every = ",".join(b.bootstrap for b in brokers)
    placed = spread_topic(brokers, "dup")
    committed = transactions(every, "dup", "dup-tx", 2, "d", abort_one=False)
    # EndTxn is answered before the markers: wait until both transactions are closed
    # everywhere before counting batches.
    wait_for(lambda: all(sum(b["control"] for b in json.loads(run_kaasctl(
        data, "--json", "log", "dump", "dup", str(part), timeout=60).stdout)["batches"]) == 2
        for part in range(PARTITIONS)), timeout=20, what="both transactions' markers")
    dump = json.loads(run_kaasctl(data, "--json", "log", "dump", "dup", "0", timeout=60).stdout)
    pid = next(b["producer_id"] for b in dump["batches"] if b["transactional"])
    epoch = next(b["producer_epoch"] for b in dump["batches"] if b["transactional"])
    before = {part: len(json.loads(run_kaasctl(data, "--json", "log", "dump", "dup", str(part), timeout=60).stdout)["batches"])
              for part in range(PARTITIONS)}
    for leader in {0, 1, 2}:
        mine = [part for part, b in placed.items() if b == leader]
        for commit in (True, False):
            codes = write_txn_markers(brokers[leader].bootstrap, pid, epoch, commit, "dup", mine)
            assert codes == {part: 0 for part in mine}, codes
            # Naming either transaction (numbers 1 and 2): nothing open for it there.
            for seq in (1, 2):
                codes, echoed = write_txn_markers_answer(
                    brokers[leader].bootstrap, pid, epoch, commit, "dup", mine, txn_seq=seq)
                assert codes == {part: 0 for part in mine} and echoed == seq, (codes, echoed)
        others = [part for part, b in placed.items() if b != leader]
        assert set(write_txn_markers(brokers[leader].bootstrap, pid, epoch, True, "dup", others).values()) == {6}, \
            "NOT_LEADER_OR_FOLLOWER for partitions led elsewhere"
    after = {part: len(json.loads(run_kaasctl(data, "--json", "log", "dump", "dup", str(part), timeout=60).stdout)["batches"])
             for part in range(PARTITIONS)}
    assert after == before, "nothing written"
    # Late, while the producer's next transaction is open at the same epoch: there is
    # no queue entry of it (nothing queued yet), so no marker can close it.
    p = Producer({"bootstrap.servers": every, "transactional.id": "dup-tx", "transaction.timeout.ms": 60000})
    p.init_transactions(60)  # a new instance: the epoch is bumped
    p.begin_transaction()
    for part in range(PARTITIONS):
        p.produce("dup", value=f"open-{part}".encode(), partition=part)
    assert p.flush(30) == 0
    dump = json.loads(run_kaasctl(data, "--json", "log", "dump", "dup", "0", timeout=60).stdout)
    epoch = dump["batches"][-1]["producer_epoch"]
    before = {part: len(json.loads(run_kaasctl(data, "--json", "log", "dump", "dup", str(part), timeout=60).stdout)["batches"])
              for part in range(PARTITIONS)}
    for leader in {0, 1, 2}:
        mine = [part for part, b in placed.items() if b == leader]
        assert write_txn_markers(brokers[leader].bootstrap, pid, epoch, True, "dup", mine) == {part: 0 for part in mine}
        # Naming an earlier transaction, at the open one's epoch: a later one is open.
        for seq in (1, 2):
            codes, echoed = write_txn_markers_answer(
                brokers[leader].bootstrap, pid, epoch, True, "dup", mine, txn_seq=seq)
            assert codes == {part: 0 for part in mine} and echoed == seq, (codes, echoed)
    after = {part: len(json.loads(run_kaasctl(data, "--json", "log", "dump", "dup", str(part), timeout=60).stdout)["batches"])
             for part in range(PARTITIONS)}
    assert after == before, "no marker closed the open transaction"
    p.abort_transaction(60)
    got = read_all(every, "dup", PARTITIONS, "read_committed", expect=len(committed))
    assert sorted(got) == sorted(committed), "the open transaction's records were not committed by the late notice"
    markers_exactly_once(data, "dup")


def test_inter_broker_notifications_are_authenticated_and_need_cluster_action(kaas_factory, tmp_path):
    """Under --authorizer acls, brokers notify each other on a SASL_PLAINTEXT listener as
    the user the operator named, which holds only CLUSTER_ACTION on the cluster; a client
    without it (here anonymous, on the PLAINTEXT listener) is refused
    CLUSTER_AUTHORIZATION_FAILED and applies nothing, even with an entry queued for that
    very transaction. The coordinator's first notices are dropped (failpoint) and the
    poll is off, so that entry waits until the coordinator, restarted, announces it again."""
    data = tmp_path / "shared"
    data.mkdir()
    for user, pw in (("admin", "admin-pw"), ("kaas-broker", "broker-pw")):
        add_user(data, user, pw, "SCRAM-SHA-512")
    r = run_kaasctl(data, "acls", "add", "--cluster", "--operation", "cluster-action",
                    "--allow-principal", "User:kaas-broker")
    assert r.returncode == 0, r.stdout + r.stderr
    secret = tmp_path / "broker-password"
    secret.write_text("broker-pw\n")
    sasl_ports = [free_port() for _ in range(3)]
    plain_ports = [free_port() for _ in range(3)]

    def listeners(i):
        return ([f"--listener=INTERNAL=SASL_PLAINTEXT://127.0.0.1:{sasl_ports[i]}",
                 f"--listener=PLAINTEXT://127.0.0.1:{plain_ports[i]}",
                 "--inter-broker-listener-name", "INTERNAL",
                 "--inter-broker-sasl-mechanism", "SCRAM-SHA-512",
                 "--inter-broker-sasl-username", "kaas-broker",
                 "--inter-broker-sasl-password-file", str(secret)], {})

    tid = "sec-tx"
    coordinator = coordinator_of(tid)

    def setup(i):
        args, env = listeners(i)
        return args, ({"KAAS_FAILPOINTS": "marker-notify=error*2"} if i == coordinator else env)

    _, brokers = three_brokers(kaas_factory, tmp_path, *NO_POLL, "--authorizer", "acls", "--super-users", "User:admin",
                               per_broker=setup)
    admin = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
             "sasl.username": "admin", "sasl.password": "admin-pw"}
    every = ",".join(f"127.0.0.1:{p}" for p in sasl_ports)
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient({"bootstrap.servers": every, **admin})
    a.create_topics([NewTopic("sec", PARTITIONS, 1)])["sec"].result(30)

    def spread():
        md = a.list_topics("sec", timeout=10)
        leaders = {p: m.leader for p, m in md.topics["sec"].partitions.items()}
        return leaders if sorted(md.brokers) == [0, 1, 2] and set(leaders.values()) == {0, 1, 2} else None

    placed = wait_for(spread, timeout=30, what="sec placed on the three brokers")
    p = Producer({"bootstrap.servers": every, **admin, "transactional.id": tid})
    p.init_transactions(60)
    # The first transaction: its notices to both other leaders are dropped.
    p.begin_transaction()
    for part in range(PARTITIONS):
        p.produce("sec", value=f"s-first-{part}".encode(), partition=part)
    p.commit_transaction(60)
    # EndTxn is answered once PrepareCommit is durable; the entries follow at once.
    queued = wait_for(lambda: (lambda q: q if len(q) == 2 else None)(
        list((data / "__cluster" / "marker_queue").glob("to-*/*.json"))), timeout=20, what="two queued entries")
    # Not a broker, naming exactly the queued transaction: refused, nothing applied.
    remote = next(part for part, b in placed.items() if b != coordinator)
    codes = write_txn_markers(f"127.0.0.1:{plain_ports[placed[remote]]}",
                              json.loads(queued[0].read_text())["producer_id"],
                              json.loads(queued[0].read_text())["producer_epoch"], True, "sec", [remote])
    assert codes == {remote: 31}, codes
    assert all(q.exists() for q in queued), "the queued entries are still there"
    # The coordinator restarted (without the failpoint) finds the Prepare entry with its
    # entries queued and announces them again; nothing else would apply them here.
    brokers[coordinator].kill9()
    brokers[coordinator].env = {}
    brokers[coordinator].restart()
    wait_for(lambda: not any(q.exists() for q in queued), timeout=30, what="the queued entries applied on notice")
    for t in range(5):
        p.begin_transaction()
        for part in range(PARTITIONS):
            p.produce("sec", value=f"s-{t}-{part}".encode(), partition=part)
        p.commit_transaction(60)
    expected = [f"s-first-{part}" for part in range(PARTITIONS)]
    expected += [f"s-{t}-{part}" for t in range(5) for part in range(PARTITIONS)]
    got = read_all(every, "sec", PARTITIONS, "read_committed", expect=len(expected), **admin)
    assert sorted(got) == sorted(expected)
    assert everywhere(brokers, "kaas_txn_marker_delivery_seconds_count", path="notified") >= 5
    assert everywhere(brokers, "kaas_txn_marker_delivery_seconds_count", path="poll") == 0
    assert everywhere(brokers, "kaas_txn_marker_notifications_total", outcome="refused") == 0
    markers_exactly_once(data, "sec")


def test_a_fence_reaches_the_other_brokers_by_notification(kaas_factory, tmp_path):
    """A new instance of a transactional producer bumps its epoch; the coordinator
    records the fence in its fence log and tells the other brokers at once, so with the
    fence-log poll effectively off (10 minutes) the brokers leading the old instance's
    partitions still refuse it, by their own producer state."""
    tid = "fenced-tx"
    coordinator = coordinator_of(tid)
    data, brokers = three_brokers(kaas_factory, tmp_path, *NO_POLL,
                                  env={"RUST_LOG": "info,kaas_server::watchers=debug"})
    every = ",".join(b.bootstrap for b in brokers)
    placed = spread_topic(brokers, "fenced")
    remote = [p for p, b in placed.items() if b != coordinator]
    zombie = Producer({"bootstrap.servers": every, "transactional.id": tid})
    zombie.init_transactions(30)
    zombie.begin_transaction()
    for p in remote:
        zombie.produce("fenced", value=f"zombie-{p}".encode(), partition=p)
    assert zombie.flush(30) == 0
    fresh = Producer({"bootstrap.servers": every, "transactional.id": tid})
    fresh.init_transactions(30)
    for b in {placed[p] for p in remote}:
        wait_for(lambda: "applying a peer's fence" in brokers[b].log_text(), timeout=10,
                 what=f"broker {b} applying the coordinator's fence without polling")
    try:
        for p in remote:
            zombie.produce("fenced", value=f"late-{p}".encode(), partition=p)
        zombie.flush(30)
        zombie.commit_transaction(30)
        raise AssertionError("the zombie committed")
    except KafkaException as e:
        assert e.args[0].fatal(), e
    fresh.begin_transaction()
    for p in range(PARTITIONS):
        fresh.produce("fenced", value=f"fresh-{p}".encode(), partition=p)
    fresh.commit_transaction(60)
    got = read_all(every, "fenced", PARTITIONS, "read_committed", expect=PARTITIONS)
    assert sorted(got) == sorted(f"fresh-{p}" for p in range(PARTITIONS))
    markers_exactly_once(data, "fenced")


def test_brokers_notify_each_other_over_mutual_tls(kaas_factory, tmp_path):
    """The inter-broker listener is SSL with client certificates required: each broker
    checks its peers' certificates against the CA (--ssl-ca) and presents its own
    (--ssl-certificate) as a client. With the poll off, transactions over the three
    brokers complete, so their notices got through."""
    import datetime
    import ipaddress
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID
    from test_security import _ca, _name, _write

    certs = tmp_path / "certs"
    certs.mkdir()
    ca_cert, ca_key = _ca(certs, "ca")
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    # One certificate for every broker: a server's for its listener, a client's for
    # its peers.
    peer = (x509.CertificateBuilder().subject_name(_name("kaas-peer")).issuer_name(ca_cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    _write(certs / "peer", peer, key)
    tls_ports = [free_port() for _ in range(3)]
    plain_ports = [free_port() for _ in range(3)]

    def listeners(i):
        return ([f"--listener=INTERNAL=SSL://127.0.0.1:{tls_ports[i]}",
                 f"--listener=PLAINTEXT://127.0.0.1:{plain_ports[i]}",
                 "--ssl-certificate", str(certs / "peer.pem"), "--ssl-key", str(certs / "peer.key"),
                 "--ssl-ca", str(certs / "ca.pem"), "--ssl-client-auth", "required",
                 "--inter-broker-listener-name", "INTERNAL"], {})

    data, brokers = three_brokers(kaas_factory, tmp_path, *NO_POLL, per_broker=listeners)
    every = ",".join(f"127.0.0.1:{p}" for p in plain_ports)
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient({"bootstrap.servers": every})
    # A name whose partitions the rendezvous places on all three brokers.
    topic = next(f"mtls-{k}" for k in range(100) if set(placement(f"mtls-{k}", PARTITIONS, [0, 1, 2]).values()) == {0, 1, 2})
    a.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)

    def spread():
        md = a.list_topics(topic, timeout=10)
        leaders = {p: m.leader for p, m in md.topics[topic].partitions.items()}
        return leaders if sorted(md.brokers) == [0, 1, 2] and set(leaders.values()) == {0, 1, 2} else None

    wait_for(spread, timeout=30, what=f"{topic} placed on the three brokers")
    committed = transactions(every, topic, "mtls-tx", 5, "m")
    got = read_all(every, topic, PARTITIONS, "read_committed", expect=len(committed))
    assert sorted(got) == sorted(committed)
    markers_exactly_once(data, topic)
    assert everywhere(brokers, "kaas_txn_marker_delivery_seconds_count", path="notified") >= 5
    assert everywhere(brokers, "kaas_txn_marker_notifications_total", outcome="lost") == 0
