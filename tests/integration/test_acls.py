"""ACLs (issue 14, docs/security.md#acls): with `--authorizer acls`, Kafka's model —
deny wins, super users pass, prefixed and literal names — enforced where Kafka
enforces it, seen by real clients (confluent-kafka, kafka-python, kafkajs) as their
usual *_AUTHORIZATION_FAILED errors; CreateAcls / DescribeAcls / DeleteAcls through
the Admin API; `kaasctl acls` reading and writing them off the volume, picked up by the
broker without a restart.

The principals log in over SASL_PLAINTEXT with SCRAM-SHA-512: `admin` is a super user,
`alice` holds the ACLs below, `bob` holds none until a test gives him some."""
import json
import subprocess
import time
from types import SimpleNamespace

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   NewTopic, ResourcePatternType, ResourceType)

from conftest import free_port, wait_for
from test_security import JS, add_user, confluent_workload, kafka_python_workload, kaasctl

PW = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw"}

# What alice may do: everything on topics orders-*, READ on groups orders-*, WRITE on
# transactional ids orders-* — and not WRITE on orders-secret.
ALICE = [
    ("topic", "orders-", "prefixed", "ALL", "ALLOW"),
    ("group", "orders-", "prefixed", "READ", "ALLOW"),
    ("transactional-id", "orders-", "prefixed", "WRITE", "ALLOW"),
    ("topic", "orders-secret", "literal", "WRITE", "DENY"),
]


ANY_ACL = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                           AclPermissionType.ANY)


def acl_args(principal, resource, name, pattern, operation, permission):
    args = [f"--{resource}", name, "--operation", operation,
            "--allow-principal" if permission == "ALLOW" else "--deny-principal", principal]
    return args + (["--prefixed"] if pattern == "prefixed" else [])


def grant(data_dir, principal, *spec):
    r = kaasctl(data_dir, "acls", "add", *acl_args(principal, *spec))
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.fixture
def secured(kaas_factory):
    port = free_port()
    b = kaas_factory("--listener", f"SASL_PLAINTEXT://127.0.0.1:{port}", "--authorizer", "acls",
                     "--super-users", "User:admin")
    for user, pw in PW.items():
        add_user(b.data_dir, user, pw, "SCRAM-SHA-512")
    for spec in ALICE:
        grant(b.data_dir, "User:alice", *spec)
    s = SimpleNamespace(broker=b, addr=f"127.0.0.1:{port}", data_dir=b.data_dir)
    # The broker picks kaasctl's changes up at its next volume sync (about a second).
    admin = AdminClient(conf(s, "admin"))
    wait_for(lambda: len(admin.describe_acls(ANY_ACL).result(30)) == len(ALICE), what="the broker to read the ACLs")
    return s


def conf(s, user):
    return {"bootstrap.servers": s.addr, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user, "sasl.password": PW[user]}


def kp_conf(s, user):
    return {"bootstrap_servers": s.addr, "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": user, "sasl_plain_password": PW[user]}


def produce_error(c, topic, **extra):
    """The delivery error of one record (None when delivered)."""
    errors = []
    p = Producer({**c, "message.timeout.ms": 10000, **extra})
    p.produce(topic, b"x", partition=0, on_delivery=lambda err, msg: errors.append(err))
    p.flush(20)
    return errors[0] if errors else "no delivery report"


def consume_error(c, topic, group):
    """The first error a group consumer of `topic` sees."""
    consumer = Consumer({**c, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is not None:
                return m.error().code()
        return None
    finally:
        consumer.close()


def test_alice_runs_her_workloads_with_what_her_acls_allow(secured):
    """Produce, a transaction (with its abort), an idempotent producer, a consumer group
    committing offsets: confluent-kafka and kafka-python, under alice's ACLs only."""
    confluent_workload(conf(secured, "alice"), "orders-confluent")
    kafka_python_workload(kp_conf(secured, "alice"), "orders-kafka-python")


def test_an_idempotent_producer_allowed_by_topic_write_logs_no_denial(secured):
    """InitProducerId without a transactional id needs IDEMPOTENT_WRITE on the cluster or
    WRITE on some topic (Kafka's rule). A producer allowed by its topic WRITE alone
    logged a denial of IDEMPOTENT_WRITE at every start, using up the audit log's budget
    (20 lines a second) that real denials need; the denial is logged only when both
    checks refuse (Kafka's logIfDenied = false for the first; a producer refused both
    ways is CLUSTER_AUTHORIZATION_FAILED, test_each_denied_acl_gives_confluent_kafka_its_error)."""
    b = secured.broker
    assert produce_error(conf(secured, "alice"), "orders-idem", **{"enable.idempotence": True}) is None
    denied = [l for l in b.log_text().splitlines() if "denied" in l and "IDEMPOTENT_WRITE" in l]
    assert not denied, denied


def test_a_topic_creation_and_a_group_listing_allowed_without_cluster_acls_log_no_denial(secured):
    """CreateTopics asks CREATE on the cluster, then on the topic; ListGroups asks
    DESCRIBE on the cluster, then lists the groups the client may describe. Both cluster
    checks were logged as denials for a client allowed by its topic CREATE (the usual
    grant) or listing what it may see, though nothing was refused: audit lines that use
    up the budget (20 a second) real denials need. Asked quietly, as Kafka's
    logIfDenied = false."""
    b = secured.broker
    admin = AdminClient(conf(secured, "alice"))
    admin.create_topics([NewTopic("orders-quiet", 1, 1)])["orders-quiet"].result(30)
    admin.list_consumer_groups().result(30)
    denied = [l for l in b.log_text().splitlines() if "denied" in l and "kafka-cluster" in l]
    assert not denied, denied


def test_each_denied_acl_gives_confluent_kafka_its_error(secured):
    s = secured
    admin = AdminClient(conf(s, "admin"))
    for f in admin.create_topics([NewTopic("orders-1", 1, 1), NewTopic("orders-secret", 1, 1)]).values():
        f.result(30)
    alice, bob = conf(s, "alice"), conf(s, "bob")
    assert produce_error(alice, "orders-1") is None
    # WRITE on a topic.
    assert produce_error(bob, "orders-1").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # DENY wins over alice's ALLOW ALL on orders-*.
    assert produce_error(alice, "orders-secret").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # IDEMPOTENT_WRITE (or WRITE on some topic) for an idempotent producer.
    idempotent = Producer({**bob, "enable.idempotence": True, "error_cb": lambda e: None})
    with pytest.raises(KafkaException) as e:
        for _ in range(60):  # librdkafka raises the fatal error from poll
            idempotent.poll(0.5)
    assert e.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED, e.value
    # WRITE on a transactional id.
    tx = Producer({**bob, "transactional.id": "orders-1-tx"})
    with pytest.raises(KafkaException) as e:
        tx.init_transactions(20)
    assert e.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, e.value
    # READ on a group, then (given the group) READ on the topic.
    assert consume_error(bob, "orders-1", "orders-g") == KafkaError.GROUP_AUTHORIZATION_FAILED
    grant(s.data_dir, "User:bob", "group", "orders-g", "literal", "READ", "ALLOW")
    assert wait_for(lambda: consume_error(bob, "orders-1", "orders-g") == KafkaError.TOPIC_AUTHORIZATION_FAILED,
                    timeout=60, what="bob's group ACL to take effect")
    # CREATE and DELETE on topics, ALTER_CONFIGS, and the ACL APIs (ALTER / DESCRIBE on
    # the cluster).
    bob_admin = AdminClient(bob)
    with pytest.raises(KafkaException) as e:
        bob_admin.create_topics([NewTopic("orders-2", 1, 1)])["orders-2"].result(30)
    assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as e:
        bob_admin.delete_topics(["orders-1"])["orders-1"].result(30)
    assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # (librdkafka does not raise DescribeAcls' top-level error; kafka-python's test
    # checks that one.)
    mine = AclBinding(ResourceType.TOPIC, "orders-1", ResourcePatternType.LITERAL, "User:bob", "*",
                      AclOperation.WRITE, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as e:
        bob_admin.create_acls([mine])[mine].result(30)
    assert e.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # Metadata of all topics shows bob nothing; alice sees her topics.
    assert "orders-1" not in bob_admin.list_topics(timeout=20).topics
    assert "orders-1" in AdminClient(alice).list_topics(timeout=20).topics
    # A topic bob may describe and write but not create is not created for him by a
    # metadata request or a produce (TOPIC_AUTHORIZATION_FAILED, as Kafka answers).
    grant(s.data_dir, "User:bob", "topic", "orders-auto", "literal", "WRITE", "ALLOW")
    wait_for(lambda: len(admin.describe_acls(ANY_ACL).result(30)) == len(ALICE) + 2, what="bob's ACL to be read")
    assert produce_error(bob, "orders-auto").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert "orders-auto" not in admin.list_topics(timeout=20).topics
    grant(s.data_dir, "User:bob", "topic", "orders-auto", "literal", "CREATE", "ALLOW")
    assert wait_for(lambda: produce_error(bob, "orders-auto") is None, timeout=60, what="CREATE to take effect")


def test_a_principal_without_transactional_id_write_cannot_fence_anothers_producer(secured):
    """Bob's InitProducerId for alice's transactional id is refused before it touches
    the coordinator: alice's open transaction is not fenced and commits."""
    s = secured
    alice, bob = conf(s, "alice"), conf(s, "bob")
    grant(s.data_dir, "User:bob", "topic", "orders-", "prefixed", "ALL", "ALLOW")
    a = Producer({**alice, "transactional.id": "orders-tx"})
    a.init_transactions(30)
    a.begin_transaction()
    a.produce("orders-fence", b"alice-1", partition=0)
    a.flush(20)
    intruder = Producer({**bob, "transactional.id": "orders-tx"})
    with pytest.raises(KafkaException) as e:
        intruder.init_transactions(20)
    assert e.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, e.value
    a.produce("orders-fence", b"alice-2", partition=0)
    a.commit_transaction(30)
    c = Consumer({**alice, "group.id": "orders-fence-g", "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed"})
    c.assign([TopicPartition("orders-fence", 0, 0)])
    seen = []
    deadline = time.time() + 30
    while len(seen) < 2 and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            seen.append(m.value())
    c.close()
    assert seen == [b"alice-1", b"alice-2"]
    # The coordinator's entry is alice's producer at the epoch she was given.
    shown = json.loads(kaasctl(s.data_dir, "-o", "json", "txn", "show", "orders-tx").stdout)
    assert shown["state"] == "CompleteCommit", shown


def test_a_plain_batch_under_anothers_producer_id_cannot_fence_its_transaction(kaas_factory):
    """Producer ids are no secret (batch headers, DescribeProducers). A client with WRITE
    on the topic but not on alice's transactional id sends plain batches under her
    producer id — at the highest epoch (a fence) and at her next sequence numbers (so
    that her next batch would pass for a duplicate) — during her transaction and
    between her transactions: all are refused with INVALID_TXN_STATE, and her
    transactions commit whole."""
    from wire import Conn, parse_produce_v3, produce_v3, record_batch, request
    sasl, plain = free_port(), free_port()
    b = kaas_factory("--listener", f"SASL_PLAINTEXT://127.0.0.1:{sasl}", "--listener", f"PLAINTEXT://127.0.0.1:{plain}",
                     "--authorizer", "acls")
    add_user(b.data_dir, "alice", PW["alice"], "SCRAM-SHA-512")
    for spec in ALICE:
        grant(b.data_dir, "User:alice", *spec)
    grant(b.data_dir, "User:ANONYMOUS", "topic", "orders-", "prefixed", "ALL", "ALLOW")
    alice = {"bootstrap.servers": f"127.0.0.1:{sasl}", "security.protocol": "SASL_PLAINTEXT",
             "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice", "sasl.password": PW["alice"]}
    # Once the broker has read the ACLs, the anonymous client may create the topic.
    wait_for(lambda: produce_error({"bootstrap.servers": f"127.0.0.1:{plain}"}, "orders-fence") is None,
             timeout=30, what="the ACLs to be read")
    a = Producer({**alice, "transactional.id": "orders-tx"})
    a.init_transactions(30)
    a.begin_transaction()
    a.produce("orders-fence", b"alice-1", partition=0)
    a.flush(20)
    shown = json.loads(kaasctl(b.data_dir, "-o", "json", "txn", "show", "orders-tx").stdout)
    pid, epoch = shown["producer_id"], shown["producer_epoch"]
    conn = Conn(plain)

    def attack():
        # A fence (the highest epoch, sequence 0) and a sequence grab (her epoch, her
        # next sequence numbers), each refused with INVALID_TXN_STATE.
        for e, seq in [(32767, 0), (epoch, 1), (epoch, 2)]:
            conn.send(request(0, 3, 1, produce_v3("orders-fence", 0, record_batch([b"mallory"], producer=(pid, e, seq)))))
            [(_, _, code, _)] = parse_produce_v3(conn.recv_response()[1])
            assert code == 48, (e, seq, code)

    attack()  # while her transaction is open
    a.produce("orders-fence", b"alice-2", partition=0)
    a.commit_transaction(30)
    attack()  # and between her transactions
    conn.close()
    a.begin_transaction()
    a.produce("orders-fence", b"alice-3", partition=0)
    a.commit_transaction(30)
    c = Consumer({**alice, "group.id": "orders-fence-g", "isolation.level": "read_committed"})
    c.assign([TopicPartition("orders-fence", 0, 0)])
    seen = []
    deadline = time.time() + 30
    while b"alice-3" not in seen and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            seen.append(m.value())
    c.close()
    assert [v for v in seen if v != b"x"] == [b"alice-1", b"alice-2", b"alice-3"], seen


def test_each_denied_acl_gives_kafka_python_its_error(secured):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic as KNewTopic
    from kafka.admin import (ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePatternFilter,
                             ResourceType as KResourceType)
    from kafka.errors import (ClusterAuthorizationFailedError, GroupAuthorizationFailedError,
                              TopicAuthorizationFailedError, TransactionalIdAuthorizationFailedError)
    s = secured
    admin = KafkaAdminClient(**kp_conf(s, "admin"))
    admin.create_topics([KNewTopic("orders-kp", 1, 1)])
    admin.close()
    bob = kp_conf(s, "bob")
    p = KafkaProducer(**bob, max_block_ms=10000)
    with pytest.raises(TopicAuthorizationFailedError):
        p.send("orders-kp", b"x").get(timeout=20)
    p.close()
    tx = KafkaProducer(**bob, transactional_id="orders-kp-tx", max_block_ms=10000)
    with pytest.raises(TransactionalIdAuthorizationFailedError):
        tx.init_transactions()
    tx.close()
    c = KafkaConsumer("orders-kp", **bob, group_id="orders-kp-g", consumer_timeout_ms=5000)
    with pytest.raises(GroupAuthorizationFailedError):
        for _ in range(20):
            c.poll(500)
    c.close()
    bob_admin = KafkaAdminClient(**bob)
    with pytest.raises(TopicAuthorizationFailedError):
        bob_admin.create_topics([KNewTopic("orders-kp2", 1, 1)])
    with pytest.raises(ClusterAuthorizationFailedError):
        bob_admin.describe_acls(ACLFilter(principal=None, host=None, operation=ACLOperation.ANY,
                                          permission_type=ACLPermissionType.ANY,
                                          resource_pattern=ResourcePatternFilter(KResourceType.ANY, None,
                                                                                 ACLResourcePatternType.ANY)))
    bob_admin.close()


def test_kafkajs_sees_each_denied_acl_as_its_authorization_failure(secured):
    s = secured
    admin = AdminClient(conf(s, "admin"))
    admin.create_topics([NewTopic("orders-js", 1, 1)])["orders-js"].result(30)

    def run():
        r = subprocess.run(["node", str(JS / "acls.js"), s.addr,
                            json.dumps({"user": "bob", "password": PW["bob"], "topic": "orders-js"})],
                           capture_output=True, text=True, timeout=120, cwd=JS)
        assert r.returncode == 0, r.stdout + r.stderr
        return json.loads(r.stdout.strip().splitlines()[-1])

    # No ACLs: WRITE on the topic; an idempotent producer id (kafkajs asks for one
    # when its transactional producer connects) needs WRITE on some topic.
    assert run() == {"produce": "TOPIC_AUTHORIZATION_FAILED", "transaction": "CLUSTER_AUTHORIZATION_FAILED"}
    # WRITE on the topic: it produces. DESCRIBE but not WRITE on the transactional id:
    # it finds the coordinator, whose InitProducerId refuses it. (Without DESCRIBE,
    # FindCoordinator refuses it first, and kafkajs reports only "Failed to find group
    # coordinator", dropping the broker's TRANSACTIONAL_ID_AUTHORIZATION_FAILED.)
    grant(s.data_dir, "User:bob", "topic", "orders-js", "literal", "WRITE", "ALLOW")
    grant(s.data_dir, "User:bob", "transactional-id", "orders-js-tx", "literal", "DESCRIBE", "ALLOW")
    seen = []
    wait_for(lambda: seen.append(run()) or seen[-1]["produce"] is None, timeout=60,
             what="bob's topic ACL to take effect")
    assert seen[-1] == {"produce": None, "transaction": "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"}, seen


def test_acls_through_the_admin_api_and_kaasctl(secured):
    """CreateAcls / DescribeAcls / DeleteAcls from confluent-kafka and kafka-python as a
    super user; `kaasctl acls list` sees the same file; both journal who changed what."""
    s = secured
    admin = AdminClient(conf(s, "admin"))
    carol = AclBinding(ResourceType.TOPIC, "reports", ResourcePatternType.LITERAL, "User:carol", "*",
                       AclOperation.READ, AclPermissionType.ALLOW)
    bad = AclBinding(ResourceType.BROKER, "not-the-cluster", ResourcePatternType.LITERAL, "User:carol", "*",
                     AclOperation.ALTER, AclPermissionType.ALLOW)
    results = admin.create_acls([carol, bad])
    assert results[carol].result(30) is None
    with pytest.raises(KafkaException) as e:
        results[bad].result(30)
    assert e.value.args[0].code() == KafkaError.INVALID_REQUEST, e.value
    listed = json.loads(kaasctl(s.data_dir, "-o", "json", "acls", "list", "--topic", "reports").stdout)
    assert listed == [{"resource_type": "TOPIC", "pattern_type": "LITERAL", "name": "reports", "principal": "User:carol",
                       "host": "*", "operation": "READ", "permission": "ALLOW"}], listed
    # MATCH: every ACL that applies to orders-eu (alice's prefixed ones).
    match = AclBindingFilter(ResourceType.TOPIC, "orders-eu", ResourcePatternType.MATCH, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)
    found = admin.describe_acls(match).result(30)
    assert [(b.name, b.resource_pattern_type, b.operation) for b in found] == [
        ("orders-", ResourcePatternType.PREFIXED, AclOperation.ALL)], found
    # Alice is not a super user: she may not change ACLs.
    alice_admin = AdminClient(conf(s, "alice"))
    with pytest.raises(KafkaException) as e:
        alice_admin.create_acls([carol])[carol].result(30)
    assert e.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # kafka-python describes and deletes.
    from kafka.admin import (ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, KafkaAdminClient,
                             ResourcePatternFilter, ResourceType as KResourceType)
    kp = KafkaAdminClient(**kp_conf(s, "admin"))
    flt = ACLFilter(principal="User:carol", host="*", operation=ACLOperation.ANY,
                    permission_type=ACLPermissionType.ANY,
                    resource_pattern=ResourcePatternFilter(KResourceType.ANY, None, ACLResourcePatternType.ANY))
    acls, error = kp.describe_acls(flt)
    assert [a.resource_pattern.resource_name for a in acls] == ["reports"], (acls, error)
    [(_, matched, error)] = kp.delete_acls([flt])
    assert [a.resource_pattern.resource_name for a in matched] == ["reports"], (matched, error)
    kp.close()
    assert json.loads(kaasctl(s.data_dir, "-o", "json", "acls", "list", "--principal", "User:carol").stdout) == []
    # kaasctl's own changes and the broker's are journalled with who made them.
    audit = json.loads(kaasctl(s.data_dir, "-o", "json", "audit").stdout)
    targets = [(a["tool"], a["target"]) for a in audit if "carol" in a["target"]]
    assert targets == [("broker 0", "acl ALLOW User:carol from * to READ TOPIC reports (LITERAL)")] * 2, targets
    commands = [a["command"] for a in audit if "carol" in a["target"]]
    assert commands[0][0] == "CreateAcls" and commands[1][0] == "DeleteAcls", commands
    # kaasctl refuses what is not an ACL, and deleting what is not there.
    r = kaasctl(s.data_dir, "acls", "add", "--cluster", "--operation", "fly", "--allow-principal", "User:x")
    assert r.returncode == 2 and "unknown operation" in r.stderr, r.stderr
    r = kaasctl(s.data_dir, "acls", "delete", "--topic", "t", "--operation", "read", "--allow-principal", "User:x")
    assert r.returncode == 1 and "no such ACL" in r.stderr, r.stderr


def test_without_the_authorizer_everyone_may_do_everything_and_the_acl_apis_say_so(kaas_factory):
    b = kaas_factory()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    acl = AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:x", "*", AclOperation.READ,
                     AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as e:
        admin.create_acls([acl])[acl].result(30)
    assert e.value.args[0].code() == KafkaError.SECURITY_DISABLED
    assert produce_error({"bootstrap.servers": b.bootstrap}, "anything") is None


def test_an_anonymous_plaintext_client_is_user_anonymous(kaas_factory):
    """On a PLAINTEXT listener the principal is User:ANONYMOUS: denied by default,
    allowed by an ACL naming it."""
    port = free_port()
    b = kaas_factory("--listener", f"PLAINTEXT://127.0.0.1:{port}", "--authorizer", "acls")
    c = {"bootstrap.servers": f"127.0.0.1:{port}"}
    assert produce_error(c, "open").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # acks=0 gets no answer: a refused one closes the connection (as Kafka does), so
    # the client notices.
    from wire import Conn, produce_v3, record_batch, request
    conn = Conn(port)
    conn.send(request(0, 3, 1, produce_v3("open", 0, record_batch([b"x"]), acks=0)))
    assert conn.closed_by_peer()
    grant(b.data_dir, "User:ANONYMOUS", "topic", "open", "literal", "ALL", "ALLOW")
    assert wait_for(lambda: produce_error(c, "open") is None, timeout=60, what="the ACL to take effect")
    conn = Conn(port)
    conn.send(request(0, 3, 1, produce_v3("open", 0, record_batch([b"x"]), acks=0)))
    assert conn.api_versions_ok(), "an accepted acks=0 produce leaves the connection open"
    conn.close()



def test_a_list_offsets_refused_for_one_topic_logs_one_denial(kaas_factory):
    """ListOffsets authorizes each topic once: it asked twice (once to confirm the log
    ends, once to answer), so every refused topic logged two denials and used up the
    audit log's budget (20 lines a second) twice as fast (found by a review of
    authorization). Asked with a hand-built frame: every client asks Metadata first,
    is refused there, and never sends the ListOffsets."""
    import struct

    from wire import Conn, request, string
    b = kaas_factory()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("lo-secret", 1, 1)])["lo-secret"].result(30)
    b.stop()
    b.extra += ["--authorizer", "acls"]  # no ACL: User:ANONYMOUS may do nothing
    b.start()
    # ListOffsets v1: replica -1, one topic, partition 0 at LATEST.
    body = struct.pack(">ii", -1, 1) + string("lo-secret") + struct.pack(">iiq", 1, 0, -1)
    c = Conn(b.port)
    c.send(request(2, 1, 7, body))
    correlation, answer = c.recv_response()
    assert correlation == 7
    (topics,) = struct.unpack(">i", answer[:4])
    (name_len,) = struct.unpack(">h", answer[4:6])
    at = 6 + name_len
    (partitions, partition, error) = struct.unpack(">iih", answer[at:at + 10])
    assert (topics, answer[6:at], partitions, partition, error) == (1, b"lo-secret", 1, 0, 29)
    denied = [l for l in b.log_text().splitlines() if "denied" in l and "lo-secret" in l]
    assert len(denied) == 1, denied
