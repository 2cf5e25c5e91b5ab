"""Config changes (IncrementalAlterConfigs, AlterConfigs, DescribeConfigs with sources and
synonyms, dynamic broker configs on the volume), DeleteRecords and OffsetDelete, through
confluent-kafka's AdminClient and kafka-python's KafkaAdminClient against a real broker."""
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

import wire
from conftest import wait_for
from txn_helpers import unless_unknown_topic


def admin(b):
    return AdminClient({"bootstrap.servers": b.bootstrap})


def describe_topic(a, topic):
    res = ConfigResource(ResourceType.TOPIC, topic)
    return a.describe_configs([res])[res].result(10)


def incremental(a, rtype, name, entries, validate_only=False):
    res = ConfigResource(rtype, name, incremental_configs=entries)
    return a.incremental_alter_configs([res], validate_only=validate_only)[res].result(10)


def error_of(fn):
    try:
        fn()
    except KafkaException as e:
        return e.args[0]
    raise AssertionError("the call succeeded")


def test_topic_configs_are_altered_validated_described_and_survive_a_restart(kaas):
    a = admin(kaas)
    a.create_topics([NewTopic("cfg", 1)])["cfg"].result(10)
    before = describe_topic(a, "cfg")
    assert before["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert before["cleanup.policy"].value == "delete"

    incremental(a, ResourceType.TOPIC, "cfg", [
        ConfigEntry("retention.ms", "123456", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("min.cleanable.dirty.ratio", "0.2", incremental_operation=AlterConfigOpType.SET),
    ])
    after = describe_topic(a, "cfg")
    assert after["retention.ms"].value == "123456"
    assert after["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    # APPEND starts from the value in force (the default "delete").
    assert after["cleanup.policy"].value == "delete,compact"
    assert after["min.cleanable.dirty.ratio"].value == "0.2"
    # Synonyms: the override, then the broker-level default it hides.
    syn = after["retention.ms"].synonyms
    assert [(s.name, s.source) for s in syn.values()][:2] == [
        ("retention.ms", ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
        ("log.retention.ms", ConfigSource.DEFAULT_CONFIG.value),
    ]

    # validate_only: a bad value is refused, a good one checked, neither applied.
    e = error_of(lambda: incremental(a, ResourceType.TOPIC, "cfg", [
        ConfigEntry("segment.bytes", "10", incremental_operation=AlterConfigOpType.SET)], validate_only=True))
    assert e.code() == KafkaError.INVALID_CONFIG and "segment.bytes" in e.str()
    incremental(a, ResourceType.TOPIC, "cfg", [
        ConfigEntry("segment.bytes", "100000", incremental_operation=AlterConfigOpType.SET)], validate_only=True)
    assert describe_topic(a, "cfg")["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    # Unknown keys, APPEND to a non-list, unknown topics.
    e = error_of(lambda: incremental(a, ResourceType.TOPIC, "cfg", [
        ConfigEntry("flush.messages", "1", incremental_operation=AlterConfigOpType.SET)]))
    assert e.code() == KafkaError.INVALID_CONFIG and "flush.messages" in e.str()
    e = error_of(lambda: incremental(a, ResourceType.TOPIC, "cfg", [
        ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.APPEND)]))
    assert e.code() == KafkaError.INVALID_CONFIG
    e = error_of(lambda: incremental(a, ResourceType.TOPIC, "nope", [
        ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)]))
    assert e.code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    # SUBTRACT and DELETE.
    incremental(a, ResourceType.TOPIC, "cfg", [
        ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
    ])
    after = describe_topic(a, "cfg")
    assert after["cleanup.policy"].value == "compact"
    assert after["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    kaas.stop()
    kaas.restart()
    a = admin(kaas)
    after = describe_topic(a, "cfg")
    assert after["cleanup.policy"].value == "compact"
    assert after["min.cleanable.dirty.ratio"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value

    # AlterConfigs (the older call) replaces every override with what it names.
    res = ConfigResource(ResourceType.TOPIC, "cfg", set_config={"retention.bytes": "999999"})
    a.alter_configs([res])[res].result(10)
    after = describe_topic(a, "cfg")
    assert after["retention.bytes"].value == "999999"
    assert after["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value


def test_a_config_change_takes_effect_on_the_running_log(kaas):
    """segment.bytes lowered on a live topic: the next appends roll small segments."""
    a = admin(kaas)
    a.create_topics([NewTopic("live", 1)])["live"].result(10)
    p = Producer({"bootstrap.servers": kaas.bootstrap, "linger.ms": 0})
    seg_dir = kaas.data_dir / "live-0"

    def produce(n):
        for _ in range(n):
            p.produce("live", value=b"v" * 500)
            p.flush(10)

    produce(20)
    assert len(list(seg_dir.glob("*.log"))) == 1
    incremental(a, ResourceType.TOPIC, "live", [
        ConfigEntry("segment.bytes", "2000", incremental_operation=AlterConfigOpType.SET)])
    produce(20)
    assert len(list(seg_dir.glob("*.log"))) >= 5


def test_dynamic_broker_configs_are_stored_on_the_volume_and_seen_by_every_broker(kaas_factory, tmp_path):
    data = tmp_path / "shared"
    b0 = kaas_factory("--retention-ms", "500000000", data_dir=data)
    b1 = kaas_factory("--broker-id", "1", data_dir=data)
    a0, a1 = admin(b0), admin(b1)
    # Each broker lists the other once it has seen its lease renewed; until then a
    # client may drop the broker it must send broker configs to.
    for a in (a0, a1):
        wait_for(lambda: len(a.list_topics(timeout=5).brokers) == 2, what="both brokers in metadata")
    a0.create_topics([NewTopic("dyn", 1)])["dyn"].result(10)

    def on(a, broker_id, key="log.retention.ms"):
        """A broker config as that broker reports it (librdkafka sends a broker
        resource's DescribeConfigs to that broker; a topic's goes to any broker)."""
        res = ConfigResource(ResourceType.BROKER, broker_id)
        e = a.describe_configs([res])[res].result(10)[key]
        return e.value, e.source

    # Broker 0 was started with --retention-ms: a static broker config there.
    assert on(a0, "0") == ("500000000", ConfigSource.STATIC_BROKER_CONFIG.value)
    assert on(a1, "1") == ("604800000", ConfigSource.DEFAULT_CONFIG.value)

    # A cluster-wide dynamic default (broker resource ""), set through broker 0, is seen
    # by broker 1. Neither librdkafka nor kafka-python lets a caller name the resource
    # "" (Apache's Java admin does), so this one request is built by hand.
    def cluster_default(configs):
        conn = wire.Conn(b0.port)
        try:
            conn.send(wire.request(33, 0, 5, wire.alter_configs_v0([(4, "", configs)])))
            _, body = conn.recv_response()
        finally:
            conn.close()
        assert wire.parse_alter_configs_v0(body) == [(0, None, 4, "")]

    cluster_default({"log.retention.ms": "3600000"})
    assert (data / "__cluster" / "broker-configs.json").exists()
    dyn_default = ("3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    assert on(a0, "0") == dyn_default
    wait_for(lambda: on(a1, "1") == dyn_default, timeout=10, what="broker 1 to apply the cluster-wide default")
    # Topics fall back to it, on whichever broker answers.
    wait_for(lambda: "dyn" in a1.list_topics(timeout=5).topics, what="topic on broker 1")
    # That list may have come from the other broker: each is asked until it knows the
    # topic (CI of a048aa5 caught broker 0 asked 9 ms before its sync picked it up).
    for a in (a0, a1):
        e = wait_for(lambda: unless_unknown_topic(lambda: describe_topic(a, "dyn")["retention.ms"]),
                     what="topic configs")
        assert (e.value, e.source) == dyn_default
        # (confluent-kafka keys synonyms by name, so the layers of log.retention.ms show
        # as one; their order is checked in describe_configs.rs's unit tests.)
        assert "log.retention.ms" in e.synonyms
    # A per-broker dynamic config wins over the cluster-wide one, for that broker only.
    incremental(a1, ResourceType.BROKER, "1", [
        ConfigEntry("log.retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET)])
    assert on(a1, "1") == ("7200000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert on(a0, "0") == dyn_default
    res = ConfigResource(ResourceType.BROKER, "1")
    broker_cfg = a1.describe_configs([res])[res].result(10)
    assert not broker_cfg["log.retention.ms"].is_read_only and broker_cfg["broker.id"].is_read_only
    # What cannot change at run time, and bad values, are refused.
    e = error_of(lambda: incremental(a0, ResourceType.BROKER, "0", [
        ConfigEntry("broker.id", "7", incremental_operation=AlterConfigOpType.SET)]))
    assert e.code() == KafkaError.INVALID_CONFIG and "cannot be changed at run time" in e.str()
    e = error_of(lambda: incremental(a0, ResourceType.BROKER, "0", [
        ConfigEntry("log.segment.bytes", "1", incremental_operation=AlterConfigOpType.SET)]))
    assert e.code() == KafkaError.INVALID_CONFIG and "log.segment.bytes" in e.str()
    # Dropping the cluster-wide default brings the static value back on broker 0.
    cluster_default({})
    assert on(a0, "0") == ("500000000", ConfigSource.STATIC_BROKER_CONFIG.value)


def produce_values(b, topic, n, size=200):
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "acks": "all"})
    for i in range(n):
        p.produce(topic, value=f"{i:06d}".encode() + b"x" * size)
        p.flush(10)


def first_offset_read(b, topic, group):
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    try:
        m = wait_for(lambda: (lambda m: m if m is not None and not m.error() else None)(c.poll(0.5)),
                     what="a record")
        return m.offset()
    finally:
        c.close()


def test_delete_records_moves_the_log_start_for_every_client_and_deletes_whole_segments(kaas):
    a = admin(kaas)
    a.create_topics([NewTopic("dr", 1, config={"segment.bytes": "2000"})])["dr"].result(10)
    produce_values(kaas, "dr", 100)
    seg_dir = kaas.data_dir / "dr-0"
    segments_before = len(list(seg_dir.glob("*.log")))
    assert segments_before > 5

    done = a.delete_records([TopicPartition("dr", 0, 50)])
    result = done[TopicPartition("dr", 0, 50)].result(10)
    assert result.low_watermark == 50
    c = Consumer({"bootstrap.servers": kaas.bootstrap, "group.id": "w"})
    assert c.get_watermark_offsets(TopicPartition("dr", 0), timeout=10) == (50, 100)
    c.close()
    assert first_offset_read(kaas, "dr", "from-start") == 50
    segments_after = sorted(int(p.stem) for p in seg_dir.glob("*.log"))
    assert len(segments_after) < segments_before and segments_after[0] <= 50

    # Past the high watermark: refused; the start does not move.
    e = a.delete_records([TopicPartition("dr", 0, 101)])[TopicPartition("dr", 0, 101)]
    with pytest.raises(KafkaException) as err:
        e.result(10)
    assert err.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE

    kaas.stop()
    kaas.restart()
    c = Consumer({"bootstrap.servers": kaas.bootstrap, "group.id": "w"})
    assert c.get_watermark_offsets(TopicPartition("dr", 0), timeout=10) == (50, 100)
    c.close()
    # kafka-python: up to the high watermark (-1) in one call.
    from kafka.admin import KafkaAdminClient
    from kafka.structs import TopicPartition as KTP
    ka = KafkaAdminClient(bootstrap_servers=kaas.bootstrap)
    try:
        out = ka.delete_records({KTP("dr", 0): -1})
        assert list(out.values())[0]["low_watermark"] == 100
    finally:
        ka.close()
    assert len(list(seg_dir.glob("*.log"))) == 1


def test_offset_delete_drops_offsets_only_of_topics_no_member_subscribes_to(kaas):
    from kafka.admin import KafkaAdminClient
    from kafka.errors import GroupIdNotFoundError, GroupSubscribedToTopicError
    from kafka.structs import TopicPartition as KTP

    a = admin(kaas)
    for t in ("od-a", "od-b"):
        a.create_topics([NewTopic(t, 1)])[t].result(10)
        produce_values(kaas, t, 3)
    c = Consumer({"bootstrap.servers": kaas.bootstrap, "group.id": "od", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition("od-a", 0, 2), TopicPartition("od-b", 0, 3)], asynchronous=False)
    c.subscribe(["od-a"])
    wait_for(lambda: (c.poll(0.2), c.assignment())[1], what="assignment")

    ka = KafkaAdminClient(bootstrap_servers=kaas.bootstrap)
    try:
        out = ka.delete_group_offsets("od", [KTP("od-a", 0), KTP("od-b", 0)])
        errors = {tp.topic: e for tp, e in out.items()}
        # od-a: a member is subscribed, it stays; od-b: nobody is, it goes.
        assert errors["od-a"] is GroupSubscribedToTopicError, errors
        assert errors["od-b"].__name__ == "NoError", errors
        offsets = ka.list_group_offsets("od")["od"]
        assert KTP("od-a", 0) in offsets and KTP("od-b", 0) not in offsets
        # librdkafka's own DeleteConsumerGroupOffsets (confluent-kafka's library; its
        # Python AdminClient does not expose the call) gets the same answers.
        from librdkafka_admin import delete_consumer_group_offsets
        code, parts = delete_consumer_group_offsets(kaas.bootstrap, "od", [("od-a", 0), ("od-b", 0)])
        assert code == 0 and parts == {("od-a", 0): 86, ("od-b", 0): 0}, (code, parts)
        assert KTP("od-a", 0) in ka.list_group_offsets("od")["od"]
        assert delete_consumer_group_offsets(kaas.bootstrap, "never-was", [("od-a", 0)])[0] == 69
        c.close()
        # Empty now: od-a's offset may go too.
        wait_for(lambda: a.describe_consumer_groups(["od"])["od"].result(10).members == [], what="group empty")
        ka.delete_group_offsets("od", [KTP("od-a", 0)])
        assert KTP("od-a", 0) not in ka.list_group_offsets("od").get("od", {})
        with pytest.raises(GroupIdNotFoundError):
            ka.delete_group_offsets("never-was", [KTP("od-a", 0)])
    finally:
        ka.close()


def test_kafka_python_alters_validates_and_describes_topic_configs(kaas):
    from kafka.admin import ConfigResource as KConfigResource, KafkaAdminClient
    from kafka.errors import InvalidConfigurationError

    a = admin(kaas)
    a.create_topics([NewTopic("kp", 1)])["kp"].result(10)
    ka = KafkaAdminClient(bootstrap_servers=kaas.bootstrap)
    try:
        def results(out):
            return [v for per_type in out.values() for v in per_type.values()]

        # IncrementalAlterConfigs (kafka-python picks it when the broker offers it).
        out = ka.alter_configs([KConfigResource("TOPIC", "kp", {"retention.ms": "777", "cleanup.policy": "compact"})])
        assert results(out) == ["OK"], out
        # validate_only changes nothing; a bad value is refused.
        assert results(ka.alter_configs([KConfigResource("TOPIC", "kp", {"retention.ms": "888"})],
                                         validate_only=True)) == ["OK"]
        try:
            refused = results(ka.alter_configs([KConfigResource("TOPIC", "kp", {"min.cleanable.dirty.ratio": "2"})]))
        except InvalidConfigurationError as e:
            refused = [e]
        assert refused != ["OK"] and ("InvalidConfiguration" in repr(refused) or "INVALID_CONFIG" in repr(refused)), refused
        described = ka.describe_configs([KConfigResource("TOPIC", "kp")])
        text = str(described)
        assert "777" in text and "compact" in text and "888" not in text, text
        # The older AlterConfigs call (kafka-python sends the other overrides along, as
        # it replaces them all).
        ka.alter_configs([KConfigResource("TOPIC", "kp", {"retention.bytes": "5000"})], incremental=False)
        text = str(ka.describe_configs([KConfigResource("TOPIC", "kp")]))
        assert "'5000'" in text and "'777'" in text, text
    finally:
        ka.close()
    e = describe_topic(a, "kp")
    assert e["retention.bytes"].value == "5000" and e["retention.ms"].value == "777"
