"""Helpers shared by the transaction suites."""
import time

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def create_topic(bootstrap, name, partitions):
    a = AdminClient({"bootstrap.servers": bootstrap})
    a.create_topics([NewTopic(name, partitions)])[name].result(15)


def read_all(bootstrap, topic, partitions, isolation, settle=3.0, timeout=30.0, expect=None):
    """Every record value of `topic` as `isolation` sees it: reads until `expect`
    records arrived (then `settle` more seconds to catch extras) or until nothing new
    came for `settle` seconds."""
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"reader-{time.time()}",
        "enable.auto.commit": False,
        "isolation.level": isolation,
    })
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out = []
    deadline = time.time() + timeout
    last_new = time.time()
    try:
        while time.time() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                out.append(m.value().decode())
                last_new = time.time()
                continue
            if expect is not None and len(out) >= expect and time.time() - last_new > settle:
                break
            if expect is None and time.time() - last_new > settle:
                break
    finally:
        c.close()
    return out
