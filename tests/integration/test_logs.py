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
