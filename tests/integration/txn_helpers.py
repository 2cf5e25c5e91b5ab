"""Helpers shared by the transaction suites."""
import json
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import run_kaasctl


def unless_unknown_topic(fn):
    """fn(), or None while the broker asked does not know the topic yet
    (UNKNOWN_TOPIC_OR_PART, which clients retry): a topic created through a peer
    reaches a broker at its volume sync — at once with the peer's cluster notice,
    within a second without — and a client may ask either broker (each names itself
    the controller). For a `wait_for` predicate."""
    try:
        return fn()
    except KafkaException as e:
        if e.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return None
        raise


def create_topic(bootstrap, name, partitions):
    a = AdminClient({"bootstrap.servers": bootstrap})
    a.create_topics([NewTopic(name, partitions)])[name].result(15)


def read_all(bootstrap, topic, partitions, isolation, settle=3.0, timeout=30.0, expect=None, decode=True, **conf):
    """Every record value of `topic` as `isolation` sees it (str, or bytes without
    `decode`): reads until `expect` records arrived (then `settle` more seconds to
    catch extras) or until nothing new came for `settle` seconds. `conf` adds consumer
    settings (dots as underscores: `check_crcs=True`)."""
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"reader-{time.time()}",
        "enable.auto.commit": False,
        "isolation.level": isolation,
        **{k.replace("_", "."): v for k, v in conf.items()},
    })
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out = []
    deadline = time.time() + timeout
    last_new = time.time()
    try:
        while time.time() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                out.append(m.value().decode() if decode else m.value())
                last_new = time.time()
                continue
            if expect is not None and len(out) >= expect and time.time() - last_new > settle:
                break
            if expect is None and time.time() - last_new > settle:
                break
    finally:
        c.close()
    return out


def txn_entries(data_dir):
    """The coordinator entries on a volume, as kaasctl reads them (checkpoint plus
    journal): transactional id -> `kaasctl txn list --json` row."""
    out = run_kaasctl(data_dir, "txn", "list", "--json")
    assert out.returncode in (0, 3), out.stderr
    return {t["transactional_id"]: t for t in json.loads(out.stdout)["transactions"]}
