"""A failing disk (issue 26): kaas-faultfs answers EIO or ENOSPC to chosen operations on
chosen paths. The broker refuses what it cannot make durable, says so in its log and
metrics, loses nothing acknowledged (checked again after a power cut, which drops
whatever a failed fsync never wrote), and goes on once the fault clears. docs/limits.md,
"A full or failing disk"."""
import os
import re
import threading
import time
import urllib.error
import urllib.request
from collections import Counter

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import KaasBroker, free_port, run_kaasctl, wait_for
from faultfs import FAULTFS, NO_REBOOTSTRAP, FaultFs, needs_fuse
from txn_helpers import read_all

pytestmark = needs_fuse


class Node:
    """One broker on a kaas-faultfs volume, with its metrics listener."""

    def __init__(self, tmp_path, args=(), env=None):
        assert FAULTFS.exists(), f"{FAULTFS} is not built (cargo build --workspace)"
        self.fs = FaultFs(tmp_path / "fs")
        self.fs.mount()
        self.data = self.fs.mnt / "data"
        self.metrics_port = free_port()
        self.broker = KaasBroker(self.data, tmp_path / "broker.log",
                                 ["--metrics-listen", f"127.0.0.1:{self.metrics_port}", *args], env=env)
        self.broker.start()
        self.bootstrap = self.broker.bootstrap

    def metric(self, name, **labels):
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10).read().decode()
        total = 0.0
        for line in text.splitlines():
            m = re.match(r"^([a-zA-Z_:][\w:]*)(\{[^}]*\})? (\S+)$", line)
            if m and m.group(1) == name:
                got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
                if all(got.get(k) == v for k, v in labels.items()):
                    total += float(m.group(3))
        return total

    def topic(self, name, partitions=1):
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(name, partitions)])[name].result(timeout=30)

    def power_cut(self, seed=None):
        """Everything not fsynced is lost, including what a failed fsync never wrote
        (with `seed`: but a random prefix of what was pending is kept). The broker dies
        first (see test_power_cut.Cutter.cut: after the unmount it would write to the
        bare mountpoint). The broker must never have panicked: a task that panicked
        and was retried would otherwise pass unseen."""
        assert "panicked" not in self.broker.log_text(), self.broker.log_text()[-3000:]
        self.broker.kill9()
        self.fs.cut(seed)
        self.fs.mount()
        self.broker.start()

    def close(self):
        self.broker.kill9()
        self.fs.close()


@pytest.fixture
def node(tmp_path):
    n = Node(tmp_path)
    try:
        yield n
    finally:
        n.close()


def produce(bootstrap, topic, values, acked, errors, partitions=1):
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                  "message.timeout.ms": 60000, **NO_REBOOTSTRAP})

    def done(err, msg):
        (errors.append(str(err)) if err else acked.append(msg.value().decode()))

    for i, v in enumerate(values):
        p.produce(topic, value=v, partition=i % partitions, on_delivery=done)
    return p


def exactly_once(bootstrap, topic, acked, partitions=1):
    got = read_all(bootstrap, topic, partitions, "read_uncommitted", expect=len(acked), settle=1.0)
    twice = [v for v, c in Counter(got).items() if c > 1]
    missing = set(acked) - set(got)
    assert not missing and not twice, f"{len(missing)} acknowledged records lost ({sorted(missing)[:3]}), " \
                                      f"{len(twice)} twice ({twice[:3]})"
    return got


def test_an_fsync_error_on_a_segment_is_refused_loses_nothing_acknowledged_and_the_partition_goes_on(node):
    node.topic("seg")
    acked, errors = [], []
    assert produce(node.bootstrap, "seg", [f"a{i}" for i in range(50)], acked, errors).flush(30) == 0
    # Every fsync of the partition's log fails for a while: Linux then drops the pages
    # it could not write, and a later fsync that succeeds does not bring them back.
    node.fs.command("fault fsync data/seg-0/*.log EIO 0")
    p = produce(node.bootstrap, "seg", [f"b{i}" for i in range(50)], acked, errors)
    wait_for(lambda: node.fs.status()["faults_hit"] >= 1, timeout=30, what="the fsync fault hit")
    time.sleep(1.0)
    acked_while_failing = len(acked)
    node.fs.command("clear")
    assert p.flush(60) == 0, "the idempotent producer's retries land once the disk is back"
    assert not errors, errors
    assert acked_while_failing == 50, "nothing was acknowledged while the partition's fsync failed"
    assert node.metric("kaas_request_errors_total", error="KAFKA_STORAGE_ERROR") >= 1
    assert node.metric("kaas_volume_write_errors_total", file="log") >= 1
    log = node.broker.log_text()
    assert "fsync of the partition log failed" in log, "the failure is in the log"
    assert "the log was cut back to its last good fsync" in log, "what the disk never got is cut off"
    got = exactly_once(node.bootstrap, "seg", acked)
    assert got == [f"a{i}" for i in range(50)] + [f"b{i}" for i in range(50)], "in order"
    node.power_cut()
    exactly_once(node.bootstrap, "seg", acked)
    assert run_kaasctl(node.data, "doctor").returncode == 0


def test_a_full_disk_on_the_transaction_journal_fails_the_transaction_and_the_next_ones_commit(node):
    node.topic("tx", 3)
    p = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": "df", "transaction.timeout.ms": 20000,
                  **NO_REBOOTSTRAP})
    p.init_transactions(30)
    committed = []

    def txn(tag):
        p.begin_transaction()
        for i in range(3):
            p.produce("tx", value=f"{tag}-{i}", partition=i)
        p.commit_transaction(30)
        committed.extend(f"{tag}-{i}" for i in range(3))

    txn("t0")
    # The coordinator's slot journal finds the disk full for a while: no transaction
    # step is acknowledged meanwhile (the client keeps retrying what it is refused),
    # and the one under way commits once space returns.
    node.fs.command("fault write data/__cluster/txn_state/slot-*.journal ENOSPC 0")
    outcome = {}

    def attempt():
        try:
            txn("t1")
            outcome["ok"] = True
        except KafkaException as e:
            outcome["error"] = e

    t = threading.Thread(target=attempt)
    t.start()
    wait_for(lambda: node.fs.status()["faults_hit"] >= 2, timeout=30, what="the journal refused appends")
    time.sleep(1.0)
    assert t.is_alive() and not outcome, f"a transaction step was acknowledged while its journal was full: {outcome}"
    node.fs.command("clear")
    t.join(60)
    assert outcome.get("ok"), f"the transaction commits once space returns: {outcome}"
    txn("t2")
    assert "os error 28" in node.broker.log_text(), "the full disk is in the log"
    assert node.metric("kaas_request_errors_total") >= 1, "refusals are counted"
    assert node.metric("kaas_volume_write_errors_total", file="slot_journal") >= 1, "and the journal's failed appends"
    got = read_all(node.bootstrap, "tx", 3, "read_committed", expect=len(committed), settle=1.0)
    assert sorted(got) == sorted(committed), "exactly the committed transactions, each once"
    node.power_cut()
    got = read_all(node.bootstrap, "tx", 3, "read_committed", expect=len(committed), settle=1.0)
    assert sorted(got) == sorted(committed), "and still after a power cut"
    assert run_kaasctl(node.data, "doctor").returncode == 0


def test_a_failed_rename_of_owner_json_takes_no_leadership_and_the_next_try_does(node):
    # The rename that records a partition's leadership fails: the broker must not lead
    # on a record that is not there, and leads once a later try succeeds.
    node.fs.command("fault rename data/own-0/owner.json EIO 1")
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic("own", 1)])["own"].result(timeout=30)
    acked, errors = [], []
    assert produce(node.bootstrap, "own", [f"o{i}" for i in range(20)], acked, errors).flush(60) == 0
    assert not errors, errors
    assert node.fs.status()["faults_hit"] == 1, "the rename fault was met"
    log = node.broker.log_text()
    assert "cannot record this broker's leadership in owner.json" in log, "the failed rename is in the log"
    assert node.metric("kaas_volume_write_errors_total", file="owner") == 1, "and in the metrics, though no request waited for it"
    node.power_cut()
    exactly_once(node.bootstrap, "own", acked)
    assert run_kaasctl(node.data, "doctor").returncode == 0


def test_a_failing_disk_under_a_groups_offsets_lock_is_refused_counted_and_the_next_commit_lands(node):
    """The group's offsets lock file cannot be opened (the disk fails under it): the
    commit it guards is not acknowledged, the failure is in the log and counted with
    the offsets file's failed writes (it was not, before), and the next commit lands
    and survives a power cut."""
    node.topic("gl")
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "gl-reader", "enable.auto.commit": False,
                  **NO_REBOOTSTRAP})

    def commit(offset):
        for tp in c.commit(offsets=[TopicPartition("gl", 0, offset)], asynchronous=False):
            if tp.error is not None:
                raise KafkaException(tp.error)

    def committed():
        return c.committed([TopicPartition("gl", 0)], timeout=30)[0].offset

    try:
        commit(3)  # the lock file exists from here on
        node.fs.command("fault open data/__cluster/groups/*.lock EIO 1")
        try:
            commit(7)  # refused, or refused once and retried by the client
        except KafkaException:
            pass
        assert node.fs.status()["faults_hit"] == 1, "the lock's open failed"
        assert "offset commit failed" in node.broker.log_text(), "the failure is in the log"
        assert node.metric("kaas_volume_write_errors_total", file="offsets") == 1, "and counted"
        assert committed() in (3, 7), "the group's offset is one that was committed"
        commit(9)
        assert committed() == 9
    finally:
        c.close()
    node.power_cut()
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "gl-reader", **NO_REBOOTSTRAP})
    try:
        assert committed() == 9, "the acknowledged commit survives a power cut"
    finally:
        c.close()


def commit_offset(node, group, topic, offset):
    """Commits `offset` for partition 0 of `topic` as `group` (a consumer that never joins)."""
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": group, "enable.auto.commit": False,
                  **NO_REBOOTSTRAP})
    try:
        c.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        c.close()


def committed_offset(node, group, topic):
    """`group`'s committed offset of partition 0 of `topic` (negative: none)."""
    reader = Consumer({"bootstrap.servers": node.bootstrap, "group.id": group, **NO_REBOOTSTRAP})
    try:
        return reader.committed([TopicPartition(topic, 0)], timeout=30)[0].offset
    finally:
        reader.close()


def test_a_failing_disk_under_a_group_delete_is_refused_counted_and_the_next_delete_lands(node):
    """DeleteGroups whose removal of the group's offsets file fails (the disk fails
    under it): refused with KAFKA_STORAGE_ERROR, counted with the offsets file's failed
    writes (it was not, before), the group's offsets still there; the next DeleteGroups
    lands."""
    node.topic("gd")
    commit_offset(node, "gd-reader", "gd", 4)
    admin = AdminClient({"bootstrap.servers": node.bootstrap, **NO_REBOOTSTRAP})

    def delete():
        admin.delete_consumer_groups(["gd-reader"], request_timeout=30)["gd-reader"].result(30)

    def committed():
        return committed_offset(node, "gd-reader", "gd")

    node.fs.command("fault unlink data/__cluster/groups/*.json EIO 1")
    with pytest.raises(KafkaException) as refused:
        delete()
    assert refused.value.args[0].code() == KafkaError.KAFKA_STORAGE_ERROR, refused.value
    assert node.fs.status()["faults_hit"] == 1, "the file's removal failed"
    assert "cannot delete group offsets" in node.broker.log_text(), "the failure is in the log"
    assert node.metric("kaas_volume_write_errors_total", file="offsets") == 1, "and counted"
    assert committed() == 4, "nothing of the group was lost"
    delete()
    assert committed() < 0, "the next delete lands"


def test_a_group_delete_retried_after_a_failed_directory_sync_is_durable_before_not_found(node):
    """DeleteGroups unlinks the group's file, then its directory's fsync fails: the
    client is told KAFKA_STORAGE_ERROR and retries. The retry finds no group and
    answers GROUP_ID_NOT_FOUND, which tools read as "deleted": it makes the removal
    durable first (before, a power cut then brought the group back)."""
    node.topic("gr")
    commit_offset(node, "gr-reader", "gr", 8)
    admin = AdminClient({"bootstrap.servers": node.bootstrap, **NO_REBOOTSTRAP})

    def delete():
        admin.delete_consumer_groups(["gr-reader"], request_timeout=30)["gr-reader"].result(30)

    node.fs.command("fault fsync data/__cluster/groups EIO 1")
    with pytest.raises(KafkaException) as refused:
        delete()
    assert refused.value.args[0].code() == KafkaError.KAFKA_STORAGE_ERROR, refused.value
    assert node.fs.status()["faults_hit"] == 1, "the directory's fsync failed"
    with pytest.raises(KafkaException) as retried:
        delete()
    assert retried.value.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND, retried.value
    node.power_cut()
    assert committed_offset(node, "gr-reader", "gr") < 0, "still deleted after a power cut"


def test_a_deleted_group_stays_deleted_after_a_power_cut(node):
    """DeleteGroups is acknowledged only once the removal of the group's offsets file
    is durable (its directory fsynced): before, a power cut right after the answer
    brought the group's committed offsets back."""
    node.topic("gp")
    commit_offset(node, "gp-reader", "gp", 6)

    def committed():
        return committed_offset(node, "gp-reader", "gp")

    assert committed() == 6
    admin = AdminClient({"bootstrap.servers": node.bootstrap, **NO_REBOOTSTRAP})
    admin.delete_consumer_groups(["gp-reader"], request_timeout=30)["gp-reader"].result(30)
    assert committed() < 0, "deleted"
    node.power_cut()
    assert committed() < 0, "and still deleted after a power cut"


def ready(node):
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{node.metrics_port}/health/ready", timeout=5).status == 200
    except urllib.error.HTTPError:
        return False


def test_a_broker_whose_volume_is_unmounted_acknowledges_nothing(node):
    """The volume unmounted under a running broker (a network mount lost): its path is
    then a bare directory of the machine's own disk. The broker must not create the
    volume's directories afresh there and acknowledge what no volume keeps — it did,
    an offset commit, until the data directory was sealed at start
    (`fsutil::seal_root`). Commits and produce fail, the bare mountpoint stays empty,
    and on the volume mounted back the broker has what it acknowledged before."""
    node.topic("um")
    acked, errors = [], []
    assert produce(node.bootstrap, "um", [f"a{i}" for i in range(10)], acked, errors).flush(30) == 0
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "um-reader", "enable.auto.commit": False,
                  **NO_REBOOTSTRAP})
    try:
        c.commit(offsets=[TopicPartition("um", 0, 5)], asynchronous=False)
        node.fs.stop()  # unmounted, everything written kept
        with pytest.raises(KafkaException):
            for tp in c.commit(offsets=[TopicPartition("um", 0, 9)], asynchronous=False):
                if tp.error is not None:
                    raise KafkaException(tp.error)
        late = produce(node.bootstrap, "um", ["late"], acked, errors)
        late.flush(15)
        assert "late" not in acked, "a record was acknowledged with the volume unmounted"
        stray = sorted(str(p) for p in node.fs.mnt.rglob("*"))
        assert not stray, f"written to the bare mountpoint: {stray[:10]}"
        assert "not the directory this broker opened" in node.broker.log_text()
        # The operator sees it: the lease cannot be renewed (counted as a failed
        # volume write), and readiness fails.
        wait_for(lambda: not ready(node), timeout=30, what="readiness to fail with the volume unmounted")
        assert node.metric("kaas_volume_write_errors_total", file="lease") >= 1, "the failed lease renewals are counted"
    finally:
        c.close()
    node.broker.kill9()
    node.fs.mount()
    node.broker.start()
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "um-reader", **NO_REBOOTSTRAP})
    try:
        kept = c.committed([TopicPartition("um", 0)], timeout=30)[0].offset
    finally:
        c.close()
    assert kept == 5, f"the commit made with the volume unmounted came back as {kept}"
    exactly_once(node.bootstrap, "um", acked)


def test_a_deleted_topic_stays_deleted_after_a_power_cut(node):
    """DeleteTopics is acknowledged only once the topic's removal is durable: a power
    cut right after the answer must not bring the topic back (it did: the topic file's
    unlink was not synced). A topic created again under the name afterwards starts
    empty, with no committed offsets, whatever of the old partition directories the
    cut kept."""
    node.topic("tp-gone", partitions=2)
    acked, errors = [], []
    assert produce(node.bootstrap, "tp-gone", [f"r{i}" for i in range(20)], acked, errors, partitions=2).flush(30) == 0
    commit_offset(node, "tp-reader", "tp-gone", 5)
    admin = AdminClient({"bootstrap.servers": node.bootstrap, **NO_REBOOTSTRAP})
    admin.delete_topics(["tp-gone"], request_timeout=30)["tp-gone"].result(30)
    assert "tp-gone" not in admin.list_topics(timeout=30).topics, "deleted"
    node.power_cut()
    admin = AdminClient({"bootstrap.servers": node.bootstrap, **NO_REBOOTSTRAP})
    assert "tp-gone" not in admin.list_topics(timeout=30).topics, "and still deleted after a power cut"
    node.topic("tp-gone", partitions=2)
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "tp-reader", **NO_REBOOTSTRAP})
    try:
        assert c.committed([TopicPartition("tp-gone", 0)], timeout=30)[0].offset < 0, "no offset of the old topic"
        for p in (0, 1):
            low, high = c.get_watermark_offsets(TopicPartition("tp-gone", p), timeout=30)
            assert (low, high) == (0, 0), f"partition {p} of the new topic holds the old one's records"
    finally:
        c.close()


@pytest.fixture
def admin_node(tmp_path):
    """A node on which any client may change SCRAM credentials (no authorizer)."""
    n = Node(tmp_path, ["--allow-scram-changes-without-authorizer", "true"])
    try:
        yield n
    finally:
        n.close()


def test_every_acknowledged_admin_change_survives_a_power_cut(admin_node):
    """What these admin APIs acknowledge is on the volume for good: a topic created,
    partitions added, a topic config set, records deleted below an offset, committed
    offsets altered, a SCRAM credential added and another deleted — each read back
    after a power cut right after the last answer. (ACLs, client quotas, broker configs
    and OffsetDelete are written the same way, `fsutil::atomic_write`, and not in it.)"""
    from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions,
                                       ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion,
                                       UserScramCredentialUpsertion)
    from confluent_kafka import ConsumerGroupTopicPartitions
    node = admin_node
    admin = AdminClient({"bootstrap.servers": node.bootstrap, **NO_REBOOTSTRAP})
    admin.create_topics([NewTopic("adm", 1)])["adm"].result(30)
    acked, errors = [], []
    assert produce(node.bootstrap, "adm", [f"r{i}" for i in range(10)], acked, errors).flush(30) == 0
    admin.create_partitions([NewPartitions("adm", 3)])["adm"].result(30)
    res = ConfigResource("TOPIC", "adm", incremental_configs=[
        ConfigEntry("retention.ms", "4242000", incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([res]).values():
        f.result(30)
    for f in admin.delete_records([TopicPartition("adm", 0, 4)]).values():
        f.result(30)
    for f in admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions("adm-group", [TopicPartition("adm", 0, 7)])]).values():
        f.result(30)
    sha = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    for f in admin.alter_user_scram_credentials([UserScramCredentialUpsertion("kept", sha, b"pw-kept"),
                                                 UserScramCredentialUpsertion("dropped", sha, b"pw-dropped")]).values():
        f.result(30)
    for f in admin.alter_user_scram_credentials([UserScramCredentialDeletion("dropped", ScramMechanism.SCRAM_SHA_256)]).values():
        f.result(30)

    node.power_cut()

    admin = AdminClient({"bootstrap.servers": node.bootstrap, **NO_REBOOTSTRAP})
    assert len(admin.list_topics("adm", timeout=30).topics["adm"].partitions) == 3, "the partitions added"
    described = list(admin.describe_configs([ConfigResource("TOPIC", "adm")]).values())[0].result(30)
    assert described["retention.ms"].value == "4242000", "the config set"
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "adm-group", **NO_REBOOTSTRAP})
    try:
        low, high = c.get_watermark_offsets(TopicPartition("adm", 0), timeout=30)
        assert (low, high) == (4, 10), "the records deleted below offset 4"
        assert c.committed([TopicPartition("adm", 0)], timeout=30)[0].offset == 7, "the offsets altered"
    finally:
        c.close()
    futures = admin.describe_user_scram_credentials(["kept", "dropped"])
    assert futures["kept"].result(30).scram_credential_infos, "the credential added"
    with pytest.raises(KafkaException) as dropped:
        futures["dropped"].result(30)
    assert dropped.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND, "the credential deleted"


def test_a_topic_created_again_after_power_cuts_mid_delete_starts_empty(node):
    """A deleted topic's partition directories are removed so that a power cut at any
    point leaves either nothing of a partition or what a topic created again under the
    name recognises as another topic's (its `owner.json`); and the topic created again
    clears what is left durably before it records itself as the partition's owner.
    One round per seed: a cut keeping a random prefix of what was pending right after
    DeleteTopics' answer, the topic created again, another such cut: the new topic is
    empty each time. Directories are listed in reverse order, so `owner.*` comes
    before the segments, as it may on ext4 (each mount starts sorted)."""
    for seed in range(1, 17):
        name = f"rc{seed}"
        node.fs.command("order reverse")
        node.topic(name, partitions=2)
        acked, errors = [], []
        assert produce(node.bootstrap, name, [f"r{i}" for i in range(10)], acked, errors, partitions=2).flush(30) == 0
        admin = AdminClient({"bootstrap.servers": node.bootstrap, **NO_REBOOTSTRAP})
        admin.delete_topics([name], request_timeout=30)[name].result(30)
        node.power_cut(seed)
        node.fs.command("order reverse")
        node.topic(name, partitions=2)
        for cut in ("the delete", "the topic created again"):
            if cut != "the delete":
                node.power_cut(seed + 100)
            c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "rc", **NO_REBOOTSTRAP})
            try:
                for p in (0, 1):
                    marks = c.get_watermark_offsets(TopicPartition(name, p), timeout=30)
                    assert marks == (0, 0), f"seed {seed}, a cut after {cut}: {name}-{p} holds {marks}, the old topic's"
            finally:
                c.close()


def test_a_crash_right_after_a_topics_file_is_removed_leaves_no_offsets_of_it(tmp_path):
    """DeleteTopics drops the groups' committed offsets of the topic before its file's
    removal is durable: a broker that dies right after it (failpoint
    `topic-file-removed`, as abrupt as kill -9) leaves no offsets a topic created again
    under the name would inherit (before, they were dropped last, and nothing dropped
    them after a restart: the new topic's consumers started from the old offset)."""
    node = Node(tmp_path, env={"KAAS_FAILPOINTS": "topic-file-removed"})
    try:
        node.topic("fo")
        commit_offset(node, "fo-reader", "fo", 5)
        admin = AdminClient({"bootstrap.servers": node.bootstrap, **NO_REBOOTSTRAP})
        with pytest.raises(KafkaException):
            admin.delete_topics(["fo"], request_timeout=10)["fo"].result(30)
        node.broker.proc.wait(30)
        node.broker.env = {}
        node.broker.start()
        admin = AdminClient({"bootstrap.servers": node.bootstrap, **NO_REBOOTSTRAP})
        assert "fo" not in admin.list_topics(timeout=30).topics, "the removal was durable"
        node.topic("fo")
        assert committed_offset(node, "fo-reader", "fo") < 0, "the old topic's offset is gone"
    finally:
        node.close()


def test_a_topic_whose_offsets_cannot_be_dropped_is_not_deleted(node):
    """DeleteTopics whose drop of a group's committed offsets of the topic fails (the
    disk fails under the group's lock) is refused and leaves the topic as it was
    (before, the topic was deleted and the offsets kept, for a topic created again
    under the name to inherit); the next DeleteTopics deletes both."""
    node.topic("fd")
    commit_offset(node, "fd-reader", "fd", 3)
    admin = AdminClient({"bootstrap.servers": node.bootstrap, **NO_REBOOTSTRAP})
    node.fs.command("fault open data/__cluster/groups/*.lock EIO 1")
    with pytest.raises(KafkaException):
        admin.delete_topics(["fd"], request_timeout=30)["fd"].result(30)
    assert node.fs.status()["faults_hit"] == 1
    assert "fd" in admin.list_topics(timeout=30).topics, "the topic is still there"
    assert committed_offset(node, "fd-reader", "fd") == 3, "with its offsets"
    acked, errors = [], []
    assert produce(node.bootstrap, "fd", ["after"], acked, errors).flush(30) == 0, "and takes records"
    admin.delete_topics(["fd"], request_timeout=30)["fd"].result(30)
    assert "fd" not in admin.list_topics(timeout=30).topics
    node.topic("fd")
    assert committed_offset(node, "fd-reader", "fd") < 0, "no offset of the old topic"
