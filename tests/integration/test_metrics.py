"""The operations listener (issue 13): /metrics scraped during a transactional workload
with a real client, parsed with the Prometheus project's own OpenMetrics parser; and the
Kubernetes probes /health/live and /health/ready."""
import json
import urllib.error
import urllib.request

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from conftest import free_port, process_env, wait_for


def get(url, method="GET"):
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers.get("Content-Type"), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read().decode()


class Scrape:
    """One parsed exposition: samples by (name, labels)."""

    def __init__(self, base):
        status, ctype, text = get(base + "/metrics")
        assert status == 200 and ctype.startswith("application/openmetrics-text"), (status, ctype)
        self.families = {f.name: f for f in text_string_to_metric_families(text)}
        self.samples = {}
        for f in self.families.values():
            for s in f.samples:
                self.samples[(s.name, tuple(sorted(s.labels.items())))] = s.value

    def value(self, name, default=None, **labels):
        return self.samples.get((name, tuple(sorted((k, str(v)) for k, v in labels.items()))), default)

    def type_of(self, family):
        return self.families[family].type


def test_metrics_move_with_a_transactional_workload(kaas_factory):
    mport = free_port()
    b = kaas_factory("--metrics-listen", f"127.0.0.1:{mport}")
    base = f"http://127.0.0.1:{mport}"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("m", 1)])["m"].result(10)
    before = Scrape(base)
    assert before.type_of("kaas_transactions_completed") == "counter"
    assert before.type_of("kaas_request_duration_seconds") == "histogram"
    assert before.value("kaas_build_info", version="0.1.0") == 1
    assert before.value("kaas_lease_fresh") == 1
    assert before.value("kaas_partitions_led") == 1
    assert before.value("kaas_broker_live", broker=0) == 1
    assert 0 <= before.value("kaas_broker_lease_age_seconds", broker=0) < 5
    commits0 = before.value("kaas_transactions_completed_total", 0, result="commit")
    aborts0 = before.value("kaas_transactions_completed_total", 0, result="abort")
    in0 = before.value("kaas_topic_produced_bytes_total", 0, topic="m")
    end_txn0 = before.value("kaas_requests_total", 0, api="EndTxn")

    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "metrics-tx", "linger.ms": 5})
    p.init_transactions(30)
    key, value = b"k" * 8, b"v" * 200
    commits, aborts, per_txn = 6, 2, 25
    # One transaction left open while scraping: the open-transaction gauge, its age
    # and the LSO lag show it.
    p.begin_transaction()
    for _ in range(per_txn):
        p.produce("m", key=key, value=value)
    p.flush(10)
    during = wait_for(lambda: (s := Scrape(base)).value("kaas_transactions_open", state="Ongoing") == 1 and s,
                      what="the open transaction in kaas_transactions_open")
    assert during.value("kaas_transaction_oldest_open_age_seconds") > 0
    assert during.value("kaas_partition_lso_lag", topic="m", partition=0) == per_txn
    assert during.value("kaas_connections") >= 1
    p.commit_transaction(30)
    for i in range(commits - 1 + aborts):
        p.begin_transaction()
        for _ in range(per_txn):
            p.produce("m", key=key, value=value)
        p.flush(10)
        if i < commits - 1:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)

    after = wait_for(lambda: (s := Scrape(base)).value("kaas_transactions_completed_total", 0, result="abort")
                     >= aborts0 + aborts and s, what="the aborts counted")
    assert after.value("kaas_transactions_completed_total", result="commit") - commits0 == commits
    assert after.value("kaas_transactions_completed_total", result="abort") - aborts0 == aborts
    assert after.value("kaas_requests_total", api="EndTxn") - end_txn0 == commits + aborts
    assert after.value("kaas_request_errors_total", None, api="EndTxn", error="INVALID_TXN_STATE") is None
    for state in ("Ongoing", "PrepareCommit", "PrepareAbort"):
        assert after.value("kaas_transactions_open", state=state) == 0, state
    assert after.value("kaas_transaction_oldest_open_age_seconds") == 0
    # Bytes in: the record values and keys, plus what batches and records cost around
    # them (a 61-byte batch header per batch, a few bytes of lengths and deltas per
    # record), never less than the payload.
    records = (commits + aborts) * per_txn
    payload = records * (len(key) + len(value))
    bytes_in = after.value("kaas_topic_produced_bytes_total", topic="m") - in0
    assert payload < bytes_in <= payload + records * 12 + 61 * (commits + aborts), (bytes_in, payload)
    assert after.value("kaas_topic_produced_records_total", topic="m") == records
    assert after.value("kaas_markers_written_total") >= commits + aborts
    assert after.value("kaas_request_duration_seconds_count", api="Produce") >= commits + aborts
    assert after.value("kaas_log_fsync_duration_seconds_count") > 0
    assert after.value("kaas_txn_journal_sync_duration_seconds_count") > 0
    # The partition's offsets agree with what a client reads.
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "mg", "isolation.level": "read_committed"})
    low, high = c.get_watermark_offsets(TopicPartition("m", 0), timeout=10)
    assert after.value("kaas_partition_high_watermark", topic="m", partition=0) == high
    assert after.value("kaas_partition_last_stable_offset", topic="m", partition=0) == high
    assert after.value("kaas_partition_lso_lag", topic="m", partition=0) == 0
    assert after.value("kaas_partition_log_start_offset", topic="m", partition=0) == low == 0
    # Bytes out move with a fetch.
    c.assign([TopicPartition("m", 0, 0)])
    got = 0
    while got < commits * per_txn:
        msg = c.poll(5)
        assert msg is not None, f"only {got} committed records read"
        got += 1
    c.close()
    assert Scrape(base).value("kaas_topic_fetched_bytes_total", topic="m") >= commits * per_txn * len(value)
    assert after.value("kaas_marker_queue_entries") == 0
    assert after.value("kaas_marker_queue_oldest_entry_age_seconds") == 0
    # An error answered to a client is counted under its API and Kafka's name for it.
    try:
        admin.create_topics([NewTopic("m", 1)])["m"].result(10)
        raise AssertionError("creating an existing topic succeeded")
    except Exception as e:  # KafkaException(TOPIC_ALREADY_EXISTS)
        assert "TOPIC_ALREADY_EXISTS" in str(e) or "already exists" in str(e), e
    assert Scrape(base).value("kaas_request_errors_total", api="CreateTopics", error="TOPIC_ALREADY_EXISTS") == 1
    # A deleted topic's series go with it.
    admin.delete_topics(["m"])["m"].result(10)
    gone = wait_for(lambda: (s := Scrape(base)).value("kaas_topic_produced_bytes_total", topic="m") is None and s,
                    what="the deleted topic's series dropped")
    assert gone.value("kaas_partition_high_watermark", topic="m", partition=0) is None


def test_health_probes_answer_for_kubernetes(kaas_factory):
    mport = free_port()
    b = kaas_factory("--metrics-listen", f"127.0.0.1:{mport}")
    base = f"http://127.0.0.1:{mport}"
    status, _, body = get(base + "/health/live")
    assert status == 200 and body == "live\n"
    status, ctype, body = get(base + "/health/ready")
    ready = json.loads(body)
    assert status == 200 and ctype == "application/json", body
    assert ready["status"] == "ready"
    assert set(ready["checks"]) == {"serving", "volume_readable", "volume_writable", "lease_held",
                                    "listener_accepting"}
    assert all(c["ok"] for c in ready["checks"].values()), ready
    assert b.bootstrap in ready["checks"]["listener_accepting"]["detail"]
    assert get(base + "/nope")[0] == 404
    assert get(base + "/metrics", method="POST")[0] == 405
    # A stopped broker answers nothing: the probe fails, as Kubernetes expects.
    assert b.stop() == 0
    try:
        get(base + "/health/live")
        raise AssertionError("the operations listener outlived the broker")
    except urllib.error.URLError:
        pass


def test_a_broker_that_cannot_write_its_lease_is_not_ready(kaas_factory, tmp_path):
    """The lease is renewed every second; a broker whose renewals fail for half the
    session timeout steps down, and readiness says so. A directory put where the lease
    file is makes every renewal fail (its rename cannot replace a directory), also for
    root, which file permissions would not stop."""
    import shutil

    mport = free_port()
    data = tmp_path / "leaseless"
    kaas_factory("--metrics-listen", f"127.0.0.1:{mport}", "--broker-session-timeout-ms", "2000", data_dir=data)
    base = f"http://127.0.0.1:{mport}"
    assert get(base + "/health/ready")[0] == 200
    lease = data / "__cluster" / "brokers" / "0.json"
    saved = lease.read_bytes()
    lease.unlink()
    lease.mkdir()
    (lease / "blocker").write_text("x")
    try:
        # Unreadable at once; not writable once the lease is half a session timeout old.
        checks = wait_for(lambda: (r := get(base + "/health/ready"))[0] == 503
                          and not (c := json.loads(r[2])["checks"])["volume_writable"]["ok"] and c,
                          timeout=15, what="readiness to fail on volume_writable")
        assert not checks["lease_held"]["ok"] and not checks["volume_readable"]["ok"], checks
        assert checks["listener_accepting"]["ok"] and checks["serving"]["ok"], checks
        assert get(base + "/health/live")[0] == 200, "liveness does not depend on the volume"
        assert Scrape(base).value("kaas_lease_fresh") == 0
        assert Scrape(base).value("kaas_lease_stepdowns_total") >= 1
    finally:
        shutil.rmtree(lease)
        if not lease.exists():
            lease.write_bytes(saved)
    wait_for(lambda: get(base + "/health/ready")[0] == 200, timeout=15, what="readiness back once writable")


def test_idle_clients_cannot_take_every_operations_connection(kaas_factory):
    """At most 8 operations connections per address (32 in all): silent clients from one
    address hold only their share, and their slots come back when they go."""
    import socket

    mport = free_port()
    kaas_factory("--metrics-listen", f"127.0.0.1:{mport}")
    base = f"http://127.0.0.1:{mport}"
    idle = [socket.create_connection(("127.0.0.1", mport), timeout=5) for _ in range(8)]
    try:
        wait_for(lambda: _refused(base), timeout=10, what="a ninth connection from the same address refused")
    finally:
        for s in idle:
            s.close()
    # The broker frees a slot when it reads the client's close; until then a new
    # connection may still be refused, so a refusal here means "not yet".
    wait_for(lambda: _answers(base), timeout=10, what="probes answered again")


def _answers(base):
    try:
        return get(base + "/health/live")[0] == 200
    except (urllib.error.URLError, ConnectionError, OSError):
        return False


def _refused(base):
    try:
        get(base + "/health/live")
        return False
    except (urllib.error.URLError, ConnectionError, OSError):
        return True


def test_a_taken_metrics_port_stops_the_broker_before_it_writes_its_lease(tmp_path):
    """The operations listener is bound before the lease: a broker that cannot have its
    port never appears live to its peers."""
    import socket
    import subprocess

    from conftest import BIN

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        data = tmp_path / "d"
        r = subprocess.run([str(BIN), "--data-dir", str(data), "--listen", f"127.0.0.1:{free_port()}",
                            "--metrics-listen", f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=30,
                           env=process_env())
    assert r.returncode != 0 and f"--metrics-listen 127.0.0.1:{port}" in r.stderr, r.stderr
    assert not (data / "__cluster" / "brokers" / "0.json").exists(), "no lease written"


def test_a_cleanly_stopped_peer_has_no_lease_age_and_counts_as_not_live(kaas_factory, tmp_path):
    mport = free_port()
    data = tmp_path / "shared"
    kaas_factory("--metrics-listen", f"127.0.0.1:{mport}", data_dir=data)
    peer = kaas_factory("--broker-id", "1", data_dir=data)
    base = f"http://127.0.0.1:{mport}"
    wait_for(lambda: Scrape(base).value("kaas_broker_live", broker=1) == 1, what="the peer live")
    assert Scrape(base).value("kaas_broker_lease_age_seconds", broker=1) is not None
    assert peer.stop() == 0
    s = wait_for(lambda: (s := Scrape(base)).value("kaas_broker_live", broker=1) == 0 and s, what="the peer not live")
    assert s.value("kaas_broker_lease_age_seconds", None, broker=1) is None, "a stopped broker has no lease age"
    assert s.value("kaas_broker_lease_age_seconds", broker=0) is not None
