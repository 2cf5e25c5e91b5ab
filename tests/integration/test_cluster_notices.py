"""Cluster notices (docs/cluster.md#cluster-notices), seen from outside through the
brokers' `kaas_cluster_notices_total{event}`: which admin answers tell the peers (a
change, not a refusal or a `validate_only` check), an auto-created topic, a notice to a
peer killed meanwhile counted lost, and `--inter-broker-notifications false` sending
none while the peers still learn every change at their next sync."""
import time

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions,
                                   NewTopic)
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import AlterClientQuotasRequest

from conftest import wait_for
from test_cluster_markers import brokers_on_one_volume, metric, metrics_text
from test_configs_and_records import error_of
from test_quotas import send
from txn_helpers import unless_unknown_topic

NOTICES = "kaas_cluster_notices_total"


def two_brokers(kaas_factory, tmp_path, *flags):
    return brokers_on_one_volume(kaas_factory, tmp_path, 2, *flags)[1]


def counts(broker):
    return {e: metric(broker, NOTICES, event=e) for e in ("sent", "lost", "received")}


def quiet(*brokers, seconds=1.5):
    """Waits until no broker's notice counts moved for `seconds` (the join's notices
    are over), and returns them."""
    before = [counts(b) for b in brokers]
    deadline = time.time() + 30
    while True:
        time.sleep(seconds)
        now = [counts(b) for b in brokers]
        if now == before:
            return now
        assert time.time() < deadline, f"the brokers' notices never settled: {now}"
        before = now


def result(futures):
    for f in futures.values():
        f.result(15)


def test_an_admin_change_tells_the_peer_and_a_refusal_or_a_check_tells_nobody(kaas_factory, tmp_path):
    """Each admin request answered with a change (CreateTopics, CreatePartitions,
    IncrementalAlterConfigs, AlterConfigs, AlterClientQuotas, DeleteTopics, and a topic
    auto-created for a Produce) makes broker 0 send broker 1 a cluster notice, counted
    `sent` there and `received` here; one refused (a topic that exists, fewer
    partitions) or `validate_only` sends none. Then broker 1 is killed (its lease stays
    fresh for the 20 s session timeout): the next change's notice is counted `lost`."""
    b0, b1 = two_brokers(kaas_factory, tmp_path, "--broker-session-timeout-ms", "20000")
    admin = AdminClient({"bootstrap.servers": b0.bootstrap})
    kp_admin = KafkaAdminClient(bootstrap_servers=b0.bootstrap)

    def quota(validate_only):
        entry = ([("client-id", "notices")], [("producer_byte_rate", 1048576.0, False)])
        r = send(kp_admin, AlterClientQuotasRequest(entries=[entry], validate_only=validate_only))
        assert [e.error_code for e in r.entries] == [0], r

    def produce_to_new_topic():
        p = Producer({"bootstrap.servers": b0.bootstrap, "acks": "all"})
        p.produce("auto-made", b"x")
        assert p.flush(30) == 0

    def refused(code, fn):
        def run():
            error = error_of(fn)
            assert error.code() == code, error
        return run

    changes = [
        ("CreateTopics", lambda: result(admin.create_topics([NewTopic("told", 1)]))),
        ("CreatePartitions", lambda: result(admin.create_partitions([NewPartitions("told", 2)]))),
        ("IncrementalAlterConfigs", lambda: result(admin.incremental_alter_configs([ConfigResource(
            ConfigResource.Type.TOPIC, "told",
            incremental_configs=[ConfigEntry("retention.ms", "3600000",
                                             incremental_operation=AlterConfigOpType.SET)])]))),
        ("AlterConfigs", lambda: result(admin.alter_configs([ConfigResource(
            ConfigResource.Type.TOPIC, "told", set_config={"retention.ms": "7200000"})]))),
        ("AlterClientQuotas", lambda: quota(False)),
        ("a topic auto-created for a Produce", produce_to_new_topic),
        ("DeleteTopics", lambda: result(admin.delete_topics(["told"]))),
    ]
    nothing = [
        ("CreateTopics of a topic that exists",
         refused(KafkaError.TOPIC_ALREADY_EXISTS, lambda: result(admin.create_topics([NewTopic("auto-made", 1)])))),
        ("CreateTopics validate_only", lambda: result(admin.create_topics([NewTopic("checked", 1)], validate_only=True))),
        ("CreatePartitions to fewer",
         refused(KafkaError.INVALID_PARTITIONS, lambda: result(admin.create_partitions([NewPartitions("auto-made", 1)])))),
        ("IncrementalAlterConfigs validate_only", lambda: result(admin.incremental_alter_configs([ConfigResource(
            ConfigResource.Type.TOPIC, "auto-made",
            incremental_configs=[ConfigEntry("retention.ms", "3600000",
                                             incremental_operation=AlterConfigOpType.SET)])], validate_only=True))),
        ("AlterClientQuotas validate_only", lambda: quota(True)),
    ]
    def total(event):
        return sum(metric(b, NOTICES, event=event) for b in (b0, b1))

    # An admin client sends its requests to the controller its last Metadata named:
    # each broker names itself, so either may answer; it tells the other.
    before = quiet(b0, b1)
    for what, change in changes:
        received, sent = total("received"), total("sent")
        change()
        wait_for(lambda: total("received") > received, timeout=10, what=f"the peer told of {what}")
        wait_for(lambda: total("sent") > sent, timeout=10, what=f"the notice of {what} counted sent")
        before = quiet(b0, b1)
    for what, check in nothing:
        check()
        after = quiet(b0, b1)
        assert after == before, f"{what} told the peer: {before} -> {after}"
    assert [c["lost"] for c in before] == [0, 0], before
    kp_admin.close()

    b1.kill9()
    alone = AdminClient({"bootstrap.servers": b0.bootstrap})
    # A fresh client: it asks Metadata of broker 0 alone, which names itself the
    # controller, so the request is answered by broker 0.
    result(alone.create_topics([NewTopic("told-nobody", 1)], request_timeout=30))
    wait_for(lambda: metric(b0, NOTICES, event="lost") > 0, timeout=15,
             what="the notice to the killed broker counted lost")


def test_with_notifications_off_no_notice_goes_and_a_peer_learns_at_its_sync(kaas_factory, tmp_path):
    """`--inter-broker-notifications false`: a join, a topic created, a config changed
    and a clean stop send and receive no cluster notice; the peer still serves the new
    topic and its config, found at its next volume sync (every second)."""
    b0, b1 = two_brokers(kaas_factory, tmp_path, "--inter-broker-notifications", "false")
    a0 = AdminClient({"bootstrap.servers": b0.bootstrap})
    result(a0.create_topics([NewTopic("quietly", 2)]))

    def set_retention():
        # The client may send this to the other broker, which knows the topic only
        # from its next sync, up to a second later with notices off.
        result(a0.incremental_alter_configs([ConfigResource(
            ConfigResource.Type.TOPIC, "quietly", incremental_configs=[
                ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])]))
        return True

    wait_for(lambda: unless_unknown_topic(set_retention), timeout=10, what="the topic's config set")
    a1 = AdminClient({"bootstrap.servers": b1.bootstrap})

    def seen_by_broker_1():
        try:
            if "quietly" not in a1.list_topics(timeout=10).topics:
                return False
            [config] = a1.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "quietly")]).values()
            return config.result(10)["retention.ms"].value == "3600000"
        except KafkaException:  # not known there yet
            return False

    wait_for(seen_by_broker_1, timeout=10, what="broker 1 serving the topic and its config")
    none = {"sent": 0, "lost": 0, "received": 0}
    # The counters are exported (at 0): a zero below is a count, not a missing name.
    text = metrics_text(b0)
    assert f'{NOTICES}{{event="sent"}} 0' in text, text
    assert (counts(b0), counts(b1)) == (none, none)
    assert b1.stop() == 0
    time.sleep(1.5)
    assert counts(b0) == none, "the clean stop told nobody"


def test_a_flood_of_notices_renews_the_lease_at_once_but_at_most_once_per_10_ms(kaas_factory):
    """A cluster notice makes the broker renew its lease at once, however it is rung at
    most once per 10 ms (docs/cluster.md#cluster-notices): notices sent back to back
    for half a second by a plain client (no authorizer: it may send them; a thousand
    or more here) raise the lease's
    `renewal` count by more than the once-a-second renewals would, and by no more than
    one per 10 ms of the flood plus those."""
    import json

    from test_cluster_markers import write_txn_markers

    b = kaas_factory("--broker-session-timeout-ms", "10000")  # a renewal a second
    lease = b.data_dir / "__cluster" / "brokers" / "0.json"

    def renewal():
        return json.loads(lease.read_text())["renewal"]

    first = renewal()
    started = time.time()
    sent = 0
    while time.time() - started < 0.5 and sent < 20_000:
        assert write_txn_markers(b.bootstrap, -1, -1, False, "notice", []) == {}
        sent += 1
    elapsed = time.time() - started
    time.sleep(0.2)  # the last rung renewal written
    renewals = renewal() - first
    periodic = int(elapsed + 0.2) + 1
    assert renewals > periodic + 2, f"{renewals} renewals in {elapsed:.2f} s: the notices rang none"
    # Rung ones: one per 10 ms of the flood, and the last ring's after it. (With the
    # gap taken out, a debug build renewed 64 to 269 times in four runs of five and
    # failed this, each renewal's own write its only brake; with it, 29 to 38.)
    assert renewals <= elapsed / 0.010 + 2 + periodic, f"{renewals} renewals in {elapsed:.2f} s"
