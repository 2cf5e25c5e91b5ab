"""--log-format json: every line the broker writes is one JSON object, and lines about a
partition carry its topic and partition as fields (issue 13, logs)."""
import json

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import wait_for


def test_json_log_lines_parse_and_carry_the_partition_as_fields(kaas_factory):
    b = kaas_factory("--log-format", "json", "--log-cleaner-backoff-ms", "200")
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    a.create_topics([NewTopic("jl", 1, config={"cleanup.policy": "compact", "segment.bytes": "2000",
                                               "min.cleanable.dirty.ratio": "0.01"})])["jl"].result(10)
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
    for i in range(100):
        p.produce("jl", key=f"k{i % 5}", value="v" * 50)
        if i % 10 == 9:
            p.flush(10)

    def lines():
        return [json.loads(line) for line in b.log_text().splitlines() if line.strip()]

    cleaned = wait_for(lambda: [e for e in lines() if e["fields"].get("message") == "cleaned"], timeout=30,
                       what="a cleaning pass logged")
    e = cleaned[0]
    assert e["fields"]["topic"] == "jl" and e["fields"]["partition"] == 0
    assert e["level"] == "INFO" and e["target"].startswith("kaas_server") and e["timestamp"]
    for e in lines():
        assert {"timestamp", "level", "fields", "target"} <= set(e), e


def test_every_json_line_about_a_partition_or_transaction_carries_its_ids(kaas_factory):
    """A debug-level run with transactions (committed, aborted, one timed out by the
    reaper), retention and a deleted topic: each line whose message is about one
    partition carries `topic` and `partition`; each about one transaction or producer
    carries `transactional_id` or `producer_id` (issue 13, logs)."""
    import re
    import time

    from confluent_kafka import Producer as P

    b = kaas_factory("--log-format", "json", "--txn-reaper-interval-ms", "200", env={"RUST_LOG": "kaas_server=debug,kaas_core=debug"})
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    a.create_topics([NewTopic("lt", 2)])["lt"].result(10)
    p = P({"bootstrap.servers": b.bootstrap, "transactional.id": "log-tx"})
    p.init_transactions(30)
    for commit in (True, False, True):
        p.begin_transaction()
        for i in range(4):
            p.produce("lt", key=b"k", value=b"v", partition=i % 2)
        p.flush(10)
        (p.commit_transaction if commit else p.abort_transaction)(30)
    late = P({"bootstrap.servers": b.bootstrap, "transactional.id": "log-late", "transaction.timeout.ms": 1000})
    late.init_transactions(30)
    late.begin_transaction()
    late.produce("lt", value=b"x", partition=0)
    late.flush(10)
    wait_for(lambda: "aborting transaction past its timeout" in b.log_text(), timeout=30, what="the reaper's abort")
    a.delete_topics(["lt"])["lt"].result(10)
    time.sleep(0.5)

    lines = [json.loads(line) for line in b.log_text().splitlines() if line.strip()]
    assert len(lines) > 20
    # "partition" or "segment" in the singular: a line about one of them.
    one_partition = re.compile(r"\b(partition|segment)\b", re.I)
    one_txn = re.compile(r"\b(transaction|producer)\b(?!s)|EndTxn|InitProducerId|AddPartitionsToTxn", re.I)
    checked = 0
    for e in lines:
        f = e["fields"]
        msg = f.get("message", "")
        if one_partition.search(msg):
            assert "topic" in f and "partition" in f, e
            checked += 1
        if one_txn.search(msg):
            assert {"transactional_id", "producer_id"} & set(f), e
            checked += 1
    assert checked >= 5, f"only {checked} lines were about a partition or transaction"
