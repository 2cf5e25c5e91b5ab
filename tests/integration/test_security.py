"""Security (issue 14, docs/security.md): listeners, TLS, mTLS and SASL (PLAIN,
SCRAM-SHA-256/512) with real clients — confluent-kafka, kafka-python and kafkajs — each
producing, consuming in a group and running a transaction; and the failures a client
must see: a wrong password, an unknown user, an untrusted or expired certificate, and a
connection that never authenticated.

Every certificate is made here, by the `cryptography` package, in a temporary
directory: no private key is committed."""
import datetime
import ipaddress
import json
import logging
import socket
import ssl
import struct
import subprocess
import time
from types import SimpleNamespace

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from conftest import BIN, ROOT, free_port, process_env, run_kaasctl, wait_for


JS = ROOT / "tests" / "js"
PASSWORD = "alice-secret-Ü"


# --- certificates -------------------------------------------------------------------

def _name(cn, org="kaas-tests"):
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, org), x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write(path, cert, key):
    path.with_suffix(".pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    path.with_suffix(".key").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))


def _ca(dir, name):
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(_name(name)).issuer_name(_name(name))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    _write(dir / name, cert, key)
    return cert, key


def _leaf(dir, file, ca, cn, server, valid_days=30, expired=False):
    ca_cert, ca_key = ca
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = (now - datetime.timedelta(days=10), now - datetime.timedelta(days=1)) if expired else \
        (now - datetime.timedelta(days=1), now + datetime.timedelta(days=valid_days))
    b = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(ca_cert.subject)
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(start).not_valid_after(end)
         .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
         .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]),
                        critical=False))
    if server:
        b = b.add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                         x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    _write(dir / file, b.sign(ca_key, hashes.SHA256()), key)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("certs")
    ca = _ca(d, "ca")
    _leaf(d, "broker", ca, "broker", server=True)
    _leaf(d, "writer", ca, "writer", server=False)
    _leaf(d, "expired", ca, "expired", server=False, expired=True)
    rogue = _ca(d, "rogue-ca")
    _leaf(d, "rogue-client", rogue, "mallory", server=False)
    _leaf(d, "rogue-broker", rogue, "broker", server=True)
    return d


def kaasctl(data_dir, *args, input=None):
    return run_kaasctl(data_dir, *args, input=input)


def add_user(data_dir, user, password, *mechanisms):
    r = kaasctl(data_dir, "users", "add", user, "--password-stdin",
                *[a for m in mechanisms for a in ("--mechanism", m)], input=password + "\n")
    assert r.returncode == 0, r.stderr


def secure_broker(kaas_factory, certs, client_auth="requested", server_cert="broker"):
    ports = {name: free_port() for name in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")}
    args = []
    for name, port in ports.items():
        args += ["--listener", f"{name}://127.0.0.1:{port}"]
    args += ["--ssl-certificate", str(certs / f"{server_cert}.pem"), "--ssl-key", str(certs / f"{server_cert}.key"),
             "--ssl-ca", str(certs / "ca.pem"), "--ssl-client-auth", client_auth,
             # PLAIN is off unless enabled (it sends the password itself).
             "--sasl-enabled-mechanisms", "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN"]
    b = kaas_factory(*args)
    add_user(b.data_dir, "alice", PASSWORD)
    return SimpleNamespace(broker=b, ports=ports, addr={n: f"127.0.0.1:{p}" for n, p in ports.items()}, certs=certs)


# --- client settings per protocol ---------------------------------------------------

def rdkafka_conf(s, protocol, mechanism=None, user="alice", password=PASSWORD, client_cert=None):
    conf = {"bootstrap.servers": s.addr[protocol], "security.protocol": protocol}
    if "SSL" in protocol:
        conf["ssl.ca.location"] = str(s.certs / "ca.pem")
        if client_cert:
            conf["ssl.certificate.location"] = str(s.certs / f"{client_cert}.pem")
            conf["ssl.key.location"] = str(s.certs / f"{client_cert}.key")
    if "SASL" in protocol:
        conf.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password})
    return conf


def kafka_python_conf(s, protocol, mechanism=None, user="alice", password=PASSWORD, client_cert=None):
    conf = {"bootstrap_servers": s.addr[protocol], "security_protocol": protocol}
    if "SSL" in protocol:
        conf["ssl_cafile"] = str(s.certs / "ca.pem")
        if client_cert:
            conf["ssl_certfile"] = str(s.certs / f"{client_cert}.pem")
            conf["ssl_keyfile"] = str(s.certs / f"{client_cert}.key")
    if "SASL" in protocol:
        conf.update({"sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password})
    return conf


def kafkajs_opts(s, protocol, mechanism=None, user="alice", password=PASSWORD, client_cert=None):
    opts = {"ssl": None, "sasl": None}
    if "SSL" in protocol:
        opts["ssl"] = {"ca": str(s.certs / "ca.pem")}
        if client_cert:
            opts["ssl"].update(cert=str(s.certs / f"{client_cert}.pem"), key=str(s.certs / f"{client_cert}.key"))
    if "SASL" in protocol:
        opts["sasl"] = {"mechanism": mechanism.lower(), "username": user, "password": password}
    return opts


# --- workloads: produce, consume in a group, a transaction ---------------------------

KEEP = [f"keep-{i}" for i in range(10)]
PLAIN = [f"plain-{i}" for i in range(5)]


def confluent_workload(conf, topic):
    admin = AdminClient(conf)
    for f in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        f.result(30)
    tx = Producer({**conf, "transactional.id": f"{topic}-tx"})
    tx.init_transactions(30)
    tx.begin_transaction()
    for i, v in enumerate(KEEP):
        tx.produce(topic, v.encode(), partition=i % 2)
    tx.commit_transaction(30)
    tx.begin_transaction()
    for i in range(10):
        tx.produce(topic, f"drop-{i}".encode(), partition=i % 2)
    tx.abort_transaction(30)
    p = Producer({**conf, "acks": "all", "enable.idempotence": True})
    for i, v in enumerate(PLAIN):
        p.produce(topic, v.encode(), partition=i % 2)
    assert p.flush(30) == 0
    c = Consumer({**conf, "group.id": f"{topic}-g", "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    c.subscribe([topic])
    seen = []
    deadline = time.time() + 60
    while len(seen) < len(KEEP) + len(PLAIN) and time.time() < deadline:
        m = c.poll(1.0)
        if m is not None and m.error() is None:
            seen.append(m.value().decode())
    c.commit(asynchronous=False)
    committed = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=30)
    ends = [c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in (0, 1)]
    c.close()
    assert sorted(seen) == sorted(KEEP + PLAIN), seen
    assert [tp.offset for tp in committed] == ends, (committed, ends)  # the group's offsets, at the end


def kafka_python_workload(conf, topic):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic as KNewTopic
    admin = KafkaAdminClient(**conf)
    admin.create_topics([KNewTopic(topic, 2, 1)])
    admin.close()
    tx = KafkaProducer(**conf, transactional_id=f"{topic}-tx")
    tx.init_transactions()
    tx.begin_transaction()
    for i, v in enumerate(KEEP):
        tx.send(topic, v.encode(), partition=i % 2)
    tx.commit_transaction()
    tx.begin_transaction()
    for i in range(10):
        tx.send(topic, f"drop-{i}".encode(), partition=i % 2)
    tx.abort_transaction()
    tx.close()
    p = KafkaProducer(**conf, acks="all")
    for i, v in enumerate(PLAIN):
        p.send(topic, v.encode(), partition=i % 2)
    p.flush(30)
    p.close()
    c = KafkaConsumer(topic, **conf, group_id=f"{topic}-g", auto_offset_reset="earliest",
                      isolation_level="read_committed", enable_auto_commit=False, consumer_timeout_ms=5000)
    seen = []
    deadline = time.time() + 60
    while len(seen) < len(KEEP) + len(PLAIN) and time.time() < deadline:
        for m in c:
            seen.append(m.value.decode())
            if len(seen) == len(KEEP) + len(PLAIN):
                break
    c.commit()
    from kafka import TopicPartition as KTP
    parts = [KTP(topic, p) for p in (0, 1)]
    committed = [c.committed(tp) for tp in parts]
    ends = c.end_offsets(parts)
    c.close()
    assert sorted(seen) == sorted(KEEP + PLAIN), seen
    assert committed == [ends[tp] for tp in parts], (committed, ends)


def kafkajs_workload(opts, addr, topic):
    r = subprocess.run(["node", str(JS / "secure.js"), addr, json.dumps({**opts, "topic": topic})],
                       capture_output=True, text=True, timeout=120, cwd=JS)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["readCommitted"] == sorted(KEEP)


def kafkajs_failure(opts, addr):
    r = subprocess.run(["node", str(JS / "secure.js"), addr, json.dumps({**opts, "expectFailure": True})],
                       capture_output=True, text=True, timeout=120, cwd=JS)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


# --- the real-client tests ----------------------------------------------------------

CASES = [
    # (protocol, SASL mechanism, client certificate)
    ("SSL", None, None),
    ("SASL_PLAINTEXT", "SCRAM-SHA-512", None),
    ("SASL_SSL", "PLAIN", None),
    ("SSL", None, "writer"),  # mTLS
]
IDS = ["ssl", "sasl_plaintext-scram-sha-512", "sasl_ssl-plain", "mtls"]


@pytest.mark.parametrize("protocol,mechanism,client_cert", CASES, ids=IDS)
def test_confluent_kafka_over_each_security_protocol(kaas_factory, certs, protocol, mechanism, client_cert):
    s = secure_broker(kaas_factory, certs, client_auth="required" if client_cert else "requested")
    confluent_workload(rdkafka_conf(s, protocol, mechanism, client_cert=client_cert), "ck")


@pytest.mark.parametrize("protocol,mechanism,client_cert", CASES, ids=IDS)
def test_kafka_python_over_each_security_protocol(kaas_factory, certs, protocol, mechanism, client_cert):
    s = secure_broker(kaas_factory, certs, client_auth="required" if client_cert else "requested")
    kafka_python_workload(kafka_python_conf(s, protocol, mechanism, client_cert=client_cert), "kp")


@pytest.mark.parametrize("protocol,mechanism,client_cert", CASES, ids=IDS)
def test_kafkajs_over_each_security_protocol(kaas_factory, certs, protocol, mechanism, client_cert):
    s = secure_broker(kaas_factory, certs, client_auth="required" if client_cert else "requested")
    kafkajs_workload(kafkajs_opts(s, protocol, mechanism, client_cert=client_cert), s.addr[protocol], "js")


def test_scram_sha_256_and_a_user_with_only_one_mechanism(kaas_factory, certs):
    """A user added for SCRAM-SHA-256 only logs in with it (and with PLAIN, checked
    against that verifier), not with SCRAM-SHA-512."""
    s = secure_broker(kaas_factory, certs)
    add_user(s.broker.data_dir, "bob", "bob-pw", "SCRAM-SHA-256")
    confluent_workload(rdkafka_conf(s, "SASL_PLAINTEXT", "SCRAM-SHA-256", user="bob", password="bob-pw"), "b256")
    assert _confluent_auth_error(rdkafka_conf(s, "SASL_PLAINTEXT", "PLAIN", user="bob", password="bob-pw")) is None
    assert _confluent_auth_error(rdkafka_conf(s, "SASL_PLAINTEXT", "SCRAM-SHA-512", user="bob", password="bob-pw"))


# --- what a client must be refused ---------------------------------------------------

def _confluent_auth_error(conf):
    """The error an AdminClient gets asking for metadata, or None when it succeeds."""
    errors = []
    admin = AdminClient({**conf, "error_cb": lambda e: errors.append(e), "log_level": 0})
    try:
        admin.list_topics(timeout=5)
        return None
    except KafkaException as e:
        deadline = time.time() + 10
        while not errors and time.time() < deadline:
            admin.poll(0.2)  # error_cb is served by poll
        return e.args[0], errors


class _Lines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def _kafka_python_error(conf):
    """kafka-python's failure to bootstrap, with what its log says about why (its
    bootstrap gives up with a timeout; the broker's error is in the log)."""
    from kafka import KafkaAdminClient
    lines = _Lines()
    logging.getLogger("kafka").addHandler(lines)
    try:
        KafkaAdminClient(**conf, request_timeout_ms=5000, bootstrap_timeout_ms=3000).close()
        return None
    except Exception as e:  # noqa: BLE001 - any failure to connect is the point
        return f"{type(e).__name__}: {e} | " + " | ".join(lines.lines)
    finally:
        logging.getLogger("kafka").removeHandler(lines)


@pytest.mark.parametrize("protocol,mechanism", [("SASL_PLAINTEXT", "SCRAM-SHA-512"), ("SASL_SSL", "PLAIN"),
                                                ("SASL_PLAINTEXT", "SCRAM-SHA-256")])
def test_wrong_password_and_unknown_user_are_authentication_failures(kaas_factory, certs, protocol, mechanism):
    s = secure_broker(kaas_factory, certs)
    for user, password in (("alice", "not-the-password"), ("nobody", PASSWORD)):
        err, errors = _confluent_auth_error(rdkafka_conf(s, protocol, mechanism, user=user, password=password))
        text = " ".join(str(e) for e in errors) + str(err)
        assert "Authentication failed" in text or "_AUTHENTICATION" in text, text
        assert any(e.code() == -169 for e in errors), errors  # RD_KAFKA_RESP_ERR__AUTHENTICATION
        e = _kafka_python_error(kafka_python_conf(s, protocol, mechanism, user=user, password=password))
        assert e is not None and "SaslAuthenticationFailedError: Authentication failed: Invalid username or password" in e, e
        js = kafkajs_failure(kafkajs_opts(s, protocol, mechanism, user=user, password=password), s.addr[protocol])
        assert js["error"] == "KafkaJSSASLAuthenticationError", js
    log = s.broker.log_text()
    # The log says which it was (the client is told the same for both).
    assert 'wrong password for user \\"alice\\"' in log and 'unknown user \\"nobody\\"' in log


def test_untrusted_and_expired_certificates_are_refused(kaas_factory, certs):
    s = secure_broker(kaas_factory, certs, client_auth="required")
    # The client does not trust the broker's CA.
    conf = {**rdkafka_conf(s, "SSL", client_cert="writer"), "ssl.ca.location": str(certs / "rogue-ca.pem")}
    err, errors = _confluent_auth_error(conf)
    assert any("certificate verify failed" in str(e) or e.code() == -195 for e in errors), errors
    # The broker does not trust the client's CA; then a client certificate expired.
    for bad in ("rogue-client", "expired"):
        err, errors = _confluent_auth_error(rdkafka_conf(s, "SSL", client_cert=bad))
        assert errors, f"{bad}: connected"
        e = _kafka_python_error(kafka_python_conf(s, "SSL", client_cert=bad))
        assert e is not None, f"kafka-python connected with {bad}"
        js = kafkajs_failure(kafkajs_opts(s, "SSL", client_cert=bad), s.addr["SSL"])
        assert js["error"] is not None, js
    # Without a certificate at all, where one is required.
    err, errors = _confluent_auth_error(rdkafka_conf(s, "SSL"))
    assert errors
    log = s.broker.log_text()
    assert "TLS handshake failed" in log
    assert "expired" in log.lower() or "CertExpired" in log or "NotValidYet" in log or "Expired" in log


def test_an_mtls_client_is_the_subject_of_its_certificate(kaas_factory, certs):
    """On an SSL listener with a client certificate, the principal is the certificate's
    subject, RFC 2253 order (as Kafka writes it); without one, User:ANONYMOUS."""
    s = secure_broker(kaas_factory, certs, client_auth="requested")
    AdminClient(rdkafka_conf(s, "SSL", client_cert="writer")).list_topics(timeout=10)
    wait_for(lambda: 'principal="User:CN=writer,O=kaas-tests"' in s.broker.log_text(), timeout=10,
             what="the client certificate's subject as the principal")
    # Without a certificate, where one is only requested: connected (as User:ANONYMOUS,
    # with no principal line of its own).
    AdminClient(rdkafka_conf(s, "SSL")).list_topics(timeout=10)
    log = s.broker.log_text()
    assert log.count("TLS client certificate accepted") == log.count('principal="User:CN=writer,O=kaas-tests"')


def test_ssl_principal_mapping_rules_name_the_principal_and_a_subject_no_rule_takes_is_refused(kaas_factory, certs):
    """ssl.principal.mapping.rules (KIP-371), Kafka's syntax: the first rule that matches
    the subject names the principal; with rules and none matching, the connection is
    closed rather than served as User:ANONYMOUS."""
    s = secure_broker(kaas_factory, certs, client_auth="requested")
    s.broker.stop()
    s.broker.extra += ["--ssl-principal-mapping-rules", "RULE:^CN=([^,]*),O=kaas-tests$/$1/U"]
    s.broker.start()
    AdminClient(rdkafka_conf(s, "SSL", client_cert="writer")).list_topics(timeout=10)
    wait_for(lambda: 'principal="User:WRITER"' in s.broker.log_text(), timeout=10, what="the mapped principal")
    # The rogue CA's client is refused by TLS; an expired one too: make one the rules
    # do not take, with another organisation.
    s.broker.stop()
    s.broker.extra[-1] = "RULE:^CN=([^,]*),O=elsewhere$/$1/"
    s.broker.start()
    conf = {**rdkafka_conf(s, "SSL", client_cert="writer"), "socket.timeout.ms": 3000}
    with pytest.raises(KafkaException):
        AdminClient(conf).list_topics(timeout=5)
    assert "no ssl.principal.mapping.rules rule applies to the client certificate's subject" in s.broker.log_text()
    r = subprocess.run([str(BIN), "--data-dir", str(s.broker.data_dir), "--ssl-principal-mapping-rules", "RULE:^CN=(.*$/$1/"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "not a regular expression" in r.stderr, r.stderr


def test_anonymous_as_a_super_user_with_a_nameless_listener_is_warned_about_at_start(kaas_factory, certs):
    s = secure_broker(kaas_factory, certs, client_auth="requested")
    s.broker.stop()
    s.broker.extra += ["--authorizer", "acls", "--super-users", "User:ANONYMOUS"]
    s.broker.start()
    warned = [line for line in s.broker.log_text().splitlines()
              if "User:ANONYMOUS is a super user (--super-users), and this listener lets clients in without a name" in line]
    assert len(warned) == 2, warned
    assert any("listener=PLAINTEXT" in line for line in warned) and any("listener=SSL" in line for line in warned)


# --- no authentication, no service ---------------------------------------------------

def _read_response(sock):
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            return None
        head += chunk
    (n,) = struct.unpack(">i", head)
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def test_an_unauthenticated_connection_gets_only_api_versions_and_sasl(kaas_factory, certs):
    """On a SASL listener, before authentication: ApiVersions is answered, and Produce,
    Fetch, OffsetCommit, InitProducerId (each a well-formed request) close the
    connection without touching anything."""
    from wire import produce_v3, record_batch, request, string
    s = secure_broker(kaas_factory, certs)
    plain = rdkafka_conf(s, "PLAINTEXT")
    admin = AdminClient(plain)
    admin.create_topics([NewTopic("guarded", 1, 1)])["guarded"].result(30)
    fetch_v4 = struct.pack(">iiiib", -1, 0, 1, 1 << 20, 0) + struct.pack(">i", 1) + string("guarded") \
        + struct.pack(">i", 1) + struct.pack(">iqi", 0, 0, 1 << 20)
    offset_commit_v2 = string("g") + struct.pack(">i", -1) + string("") + struct.pack(">q", -1) \
        + struct.pack(">i", 1) + string("guarded") + struct.pack(">i", 1) + struct.pack(">iq", 0, 5) + string("")
    init_producer_id_v0 = string("sneaky-tx") + struct.pack(">i", 60000)
    addr = ("127.0.0.1", s.ports["SASL_PLAINTEXT"])
    for name, frame in (
        ("Produce", request(0, 3, 2, produce_v3("guarded", 0, record_batch([b"x"])))),
        ("Fetch", request(1, 4, 2, fetch_v4)),
        ("OffsetCommit", request(8, 2, 2, offset_commit_v2)),
        ("InitProducerId", request(22, 0, 2, init_producer_id_v0)),
    ):
        with socket.create_connection(addr, timeout=10) as sock:
            sock.sendall(request(18, 0, 1, b""))
            assert _read_response(sock) is not None, "ApiVersions is answered before authentication"
            sock.sendall(frame)
            assert _read_response(sock) is None, f"{name} was answered before authentication"
        assert f"{name} request before SASL authentication" in s.broker.log_text(), f"{name}: no log line says why"
    # Nor after a handshake, half-way through SCRAM.
    refused = s.broker.log_text().count("Produce request before SASL authentication")
    with socket.create_connection(addr, timeout=10) as sock:
        sock.sendall(request(17, 1, 1, string("SCRAM-SHA-512")))
        handshake = _read_response(sock)
        assert handshake is not None and struct.unpack(">h", handshake[4:6])[0] == 0, "SCRAM-SHA-512 accepted"
        sock.sendall(request(0, 3, 2, produce_v3("guarded", 0, record_batch([b"x"]))))
        assert _read_response(sock) is None, "Produce answered after a handshake alone"
    wait_for(lambda: s.broker.log_text().count("Produce request before SASL authentication") == refused + 1,
             timeout=10, what="the refusal after the handshake logged")
    # A request is refused from its header alone: the broker waits for no body.
    with socket.create_connection(addr, timeout=10) as sock:
        sock.sendall(struct.pack(">ih", 100, 0))
        assert _read_response(sock) is None
    # Nor is a big frame read.
    with socket.create_connection(addr, timeout=10) as sock:
        sock.sendall(struct.pack(">ihh", 50 << 20, 18, 3))
        assert _read_response(sock) is None
    assert f"frame of {50 << 20} bytes before SASL authentication exceeds 8192 bytes" in s.broker.log_text()
    c = Consumer({**plain, "group.id": "g", "enable.auto.commit": False})
    lo, hi = c.get_watermark_offsets(TopicPartition("guarded", 0), timeout=10)
    assert (lo, hi) == (0, 0), "nothing was appended"
    assert c.committed([TopicPartition("guarded", 0)], timeout=10)[0].offset < 0, "no offset committed"
    c.close()
    r = kaasctl(s.broker.data_dir, "--output", "json", "txn", "list")
    assert r.returncode == 0, r.stderr
    assert "sneaky-tx" not in r.stdout, "InitProducerId never reached the coordinator"


# --- re-authentication (KIP-368) ------------------------------------------------------

def _sasl_plain_login(sock, user, password, correlation=1):
    """SaslHandshake v1 (PLAIN) and SaslAuthenticate v1 on a raw socket: (error code,
    session_lifetime_ms), or None when the connection closed."""
    from wire import request, string
    sock.sendall(request(17, 1, correlation, string("PLAIN")))
    r = _read_response(sock)
    if r is None:
        return None
    assert struct.unpack(">h", r[4:6])[0] == 0, "PLAIN offered"
    token = b"\0" + user.encode() + b"\0" + password.encode()
    sock.sendall(request(36, 1, correlation + 1, struct.pack(">i", len(token)) + token))
    r = _read_response(sock)
    if r is None:
        return None
    # correlation id, error code, error message (nullable string), auth bytes, session lifetime
    (code, message_len) = struct.unpack(">hh", r[4:8])
    at = 8 + max(message_len, 0)
    (auth_len,) = struct.unpack(">i", r[at:at + 4])
    at += 4 + max(auth_len, 0)
    (lifetime,) = struct.unpack(">q", r[at:at + 8])
    return code, lifetime


def _answered(sock, frame):
    try:
        sock.sendall(frame)
        return _read_response(sock) is not None
    except (OSError, ssl.SSLError):
        return False


def test_a_session_ends_after_connections_max_reauth_ms_and_a_login_again_keeps_its_principal(kaas_factory):
    """KIP-368 on the wire: SaslAuthenticate v1 tells the client its session lifetime; a
    login again (as the same user) starts a new session; a request after the session
    ended closes the connection; a login again as another user fails and closes it."""
    from wire import request, string
    port = free_port()
    b = kaas_factory("--listener", f"SASL_PLAINTEXT://127.0.0.1:{port}", "--sasl-enabled-mechanisms", "PLAIN",
                     "--connections-max-reauth-ms", "1500")
    add_user(b.data_dir, "alice", PASSWORD)
    add_user(b.data_dir, "bob", "bob-secret")
    metadata = request(3, 1, 9, struct.pack(">i", 0))  # Metadata v1, no topics
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        assert _sasl_plain_login(sock, "alice", PASSWORD) == (0, 1500)
        assert _answered(sock, metadata)
        # A login again within a second of the last is not begun (Kafka's bound: each
        # may cost a PBKDF2 turn): ILLEGAL_SASL_STATE.
        sock.sendall(request(17, 1, 5, string("PLAIN")))
        assert struct.unpack(">h", _read_response(sock)[4:6])[0] == 34
        time.sleep(1.1)
        assert _sasl_plain_login(sock, "alice", PASSWORD, correlation=10) == (0, 1500)
        time.sleep(1.0)  # past the first session's end, within the second's
        assert _answered(sock, metadata), "the second session serves"
        time.sleep(1.0)  # past the second's
        assert not _answered(sock, metadata), "served after its session ended"
    assert "session expired (connections.max.reauth.ms) without a re-authentication; closing" in b.log_text()
    assert "SASL re-authentication succeeded" in b.log_text()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        assert _sasl_plain_login(sock, "alice", PASSWORD) == (0, 1500)
        time.sleep(1.1)
        code, _ = _sasl_plain_login(sock, "bob", "bob-secret", correlation=10)
        assert code == 58, "a login again as another user is SASL_AUTHENTICATION_FAILED"
        assert not _answered(sock, metadata), "and the connection is closed"
    assert "re-authentication as bob on a connection of alice" in b.log_text()


def test_confluent_kafka_logs_in_again_and_a_deleted_user_is_cut_off_within_a_session(kaas_factory):
    """librdkafka re-authenticates on its own (KIP-368) when told a session lifetime:
    a producer keeps producing across several sessions; once its user is deleted, its
    next login fails and nothing more is delivered."""
    port = free_port()
    b = kaas_factory("--listener", f"SASL_PLAINTEXT://127.0.0.1:{port}", "--connections-max-reauth-ms", "2000")
    add_user(b.data_dir, "bob", "bob-secret")
    conf = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bob", "sasl.password": "bob-secret"}
    admin = AdminClient(conf)
    admin.create_topics([NewTopic("reauth", 1, 1)])["reauth"].result(30)
    delivered, failed, errors = [], [], []
    p = Producer({**conf, "linger.ms": 0, "message.timeout.ms": 6000,
                  "error_cb": lambda e: errors.append(e)})

    def produce_for(seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            p.produce("reauth", b"r", on_delivery=lambda err, m: (failed if err else delivered).append(time.monotonic()))
            p.poll(0.1)

    produce_for(7)
    log = b.log_text()
    assert log.count("SASL re-authentication succeeded") >= 2, "librdkafka logged in again on its connections"
    assert "session expired" not in log, "no connection outlived its session"
    assert not failed and len(delivered) > 40
    r = kaasctl(b.data_dir, "users", "delete", "bob")
    assert r.returncode == 0, r.stderr
    deleted_at = time.monotonic()
    produce_for(8)
    p.flush(10)
    late = [t for t in delivered if t > deleted_at + 2.0 + 1.5]
    assert not late, f"{len(late)} records delivered more than a session after the user was deleted"
    assert failed, "records produced after the deletion failed"
    assert "SASL authentication failed" in b.log_text()


def test_an_mtls_session_ends_after_connections_max_reauth_ms(kaas_factory, certs):
    """TLS has no re-authentication: the connection is closed at its first request after
    the session ended, and the client connects again through a handshake that checks
    its certificate anew."""
    from wire import request
    port = free_port()
    kaas_factory("--listener", f"SSL://127.0.0.1:{port}", "--ssl-certificate", str(certs / "broker.pem"),
                 "--ssl-key", str(certs / "broker.key"), "--ssl-ca", str(certs / "ca.pem"),
                 "--ssl-client-auth", "required", "--connections-max-reauth-ms", "1500")
    context = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    context.load_cert_chain(str(certs / "writer.pem"), str(certs / "writer.key"))
    api_versions = request(18, 0, 1, b"")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname="localhost") as sock:
        assert _answered(sock, api_versions)
        time.sleep(1.7)
        assert not _answered(sock, api_versions), "served after its session ended"


# --- listeners -----------------------------------------------------------------------

def test_metadata_advertises_the_listener_the_client_came_in_on(kaas_factory, certs, tmp_path):
    """Each listener advertises its own address; --advertised-listener names one."""
    ports = {n: free_port() for n in ("INTERNAL", "EXTERNAL")}
    b = kaas_factory("--listener", f"INTERNAL=PLAINTEXT://127.0.0.1:{ports['INTERNAL']}",
                     "--listener", f"EXTERNAL=SASL_PLAINTEXT://127.0.0.1:{ports['EXTERNAL']}",
                     "--advertised-listener", f"EXTERNAL=localhost:{ports['EXTERNAL']}")
    add_user(b.data_dir, "alice", PASSWORD)
    internal = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports['INTERNAL']}"}).list_topics(timeout=10)
    assert [(x.host, x.port) for x in internal.brokers.values()] == [("127.0.0.1", ports["INTERNAL"])]
    external = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports['EXTERNAL']}", "security.protocol": "SASL_PLAINTEXT",
                            "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice",
                            "sasl.password": PASSWORD}).list_topics(timeout=10)
    assert [(x.host, x.port) for x in external.brokers.values()] == [("localhost", ports["EXTERNAL"])]


def test_a_peer_without_the_listener_is_left_out_and_its_partitions_say_listener_not_found(kaas_factory, tmp_path):
    """Two brokers on one volume; only broker 0 has an EXTERNAL listener. A client on
    EXTERNAL sees broker 0 alone, and the partitions broker 1 leads answer
    LISTENER_NOT_FOUND (Kafka's answer); on PLAINTEXT it sees both."""
    from test_cluster import SHORT, settled
    data = tmp_path / "shared"
    p0, p0x, p1 = free_port(), free_port(), free_port()
    kaas_factory("--listener", f"PLAINTEXT://127.0.0.1:{p0}", "--listener", f"EXTERNAL=SASL_PLAINTEXT://127.0.0.1:{p0x}",
                 *SHORT, data_dir=data)
    kaas_factory("--broker-id", "1", "--listener", f"PLAINTEXT://127.0.0.1:{p1}", *SHORT, data_dir=data)
    add_user(data, "alice", PASSWORD)
    internal = {"bootstrap.servers": f"127.0.0.1:{p0}"}
    admin = AdminClient(internal)
    admin.create_topics([NewTopic("lt", 8, 1)])["lt"].result(30)
    placed = wait_for(lambda: settled(f"127.0.0.1:{p0}", f"127.0.0.1:{p1}", topic="lt", brokers=[0, 1]), timeout=30,
                      what="both brokers listed and every partition with its leader")
    assert 1 in placed.values() and 0 in placed.values(), placed
    external = AdminClient({"bootstrap.servers": f"127.0.0.1:{p0x}", "security.protocol": "SASL_PLAINTEXT",
                            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice", "sasl.password": PASSWORD})
    md = external.list_topics("lt", timeout=10)
    assert sorted(md.brokers) == [0] and md.brokers[0].port == p0x
    for p, m in md.topics["lt"].partitions.items():
        if placed[p] == 1:
            assert m.error is not None and m.error.code() == 72 and m.leader == -1, (p, m.error)  # LISTENER_NOT_FOUND
        else:
            assert m.error is None and m.leader == 0, (p, m.error)


def test_listener_flags_are_checked_before_anything_starts(tmp_path, certs):
    from conftest import BIN
    cases = [
        (["--listener", "SSL://127.0.0.1:0"], "needs a certificate and a key: --ssl-certificate and --ssl-key"),
        (["--listener", "PLAINTEXT://127.0.0.1:0", "--listen", "127.0.0.1:0"], "--listen and --listener cannot be used together"),
        (["--listener", "A=PLAINTEXT://127.0.0.1:0", "--listener", "A=SSL://127.0.0.1:0"], "the name A is used twice"),
        (["--listener", "X=TLS://127.0.0.1:0"], "unknown security protocol"),
        (["--listener", "SSL://127.0.0.1:0", "--ssl-certificate", str(certs / "broker.pem"),
          "--ssl-key", str(certs / "writer.key")], "do not go together"),
        (["--listener", "SSL://127.0.0.1:0", "--ssl-certificate", str(certs / "broker.pem"),
          "--ssl-key", str(certs / "broker.key"), "--ssl-client-auth", "required"], "needs --ssl-ca"),
        (["--listener", "PLAINTEXT://127.0.0.1:0", "--advertised-listener", "NOPE=a:1"], "which is not a listener"),
        (["--listener", "PLAINTEXT://127.0.0.1:0", "--listener-sasl-enabled-mechanisms", "PLAINTEXT=PLAIN"],
         "--listener-sasl-enabled-mechanisms names PLAINTEXT, which is not a SASL listener"),
        (["--listener", "PLAINTEXT://127.0.0.1:0", "--listener-ssl-client-auth", "NOPE=required"],
         "--listener-ssl-* names NOPE, which is not a listener of this broker"),
        (["--listener", "SASL_SSL://127.0.0.1:0", "--listener-sasl-enabled-mechanisms", "SASL_SSL=GSSAPI"],
         "unknown SASL mechanism"),
        (["--listener", "SSL://127.0.0.1:0", "--listener-ssl-client-auth", "SSL=required,SSL=none"],
         "--listener-ssl-client-auth names SSL twice"),
    ]
    for i, (args, message) in enumerate(cases):
        r = subprocess.run([str(BIN), "--data-dir", str(tmp_path / f"d{i}"), *args], capture_output=True, text=True,
                           timeout=30, env=process_env())
        assert r.returncode != 0, args
        assert message in r.stderr, (args, r.stderr)
        assert not (tmp_path / f"d{i}" / "__cluster" / "brokers" / "0.json").exists(), "no lease written"


def test_each_listener_has_its_own_sasl_mechanisms_and_tls_settings(kaas_factory, certs):
    """`--listener-sasl-enabled-mechanisms` and `--listener-ssl-*`: PLAIN offered on the
    SASL_SSL listener only; an internal SSL listener that requires client certificates
    from one CA beside an external one with another certificate that asks for none."""
    ports = {name: free_port() for name in ("SASL_PLAINTEXT", "SASL_SSL", "INTERNAL", "EXTERNAL")}
    b = kaas_factory(
        "--listener", f"SASL_PLAINTEXT://127.0.0.1:{ports['SASL_PLAINTEXT']}",
        "--listener", f"SASL_SSL://127.0.0.1:{ports['SASL_SSL']}",
        "--listener", f"INTERNAL=SSL://127.0.0.1:{ports['INTERNAL']}",
        "--listener", f"EXTERNAL=SSL://127.0.0.1:{ports['EXTERNAL']}",
        "--ssl-certificate", str(certs / "broker.pem"), "--ssl-key", str(certs / "broker.key"),
        "--ssl-ca", str(certs / "ca.pem"),
        "--sasl-enabled-mechanisms", "SCRAM-SHA-512",
        "--listener-sasl-enabled-mechanisms", "SASL_SSL=PLAIN,SCRAM-SHA-512",
        "--listener-ssl-client-auth", "INTERNAL=required",
        "--listener-ssl-certificate", f"EXTERNAL={certs / 'rogue-broker.pem'}",
        "--listener-ssl-key", f"EXTERNAL={certs / 'rogue-broker.key'}")
    add_user(b.data_dir, "alice", PASSWORD)
    addr = {n: f"127.0.0.1:{p}" for n, p in ports.items()}
    sasl = {"sasl.username": "alice", "sasl.password": PASSWORD}
    ca = {"ssl.ca.location": str(certs / "ca.pem")}
    # PLAIN over SASL_SSL: offered. Over SASL_PLAINTEXT: not, and the handshake says what is.
    assert _confluent_auth_error({"bootstrap.servers": addr["SASL_SSL"], "security.protocol": "SASL_SSL",
                                  "sasl.mechanism": "PLAIN", **sasl, **ca}) is None
    assert _confluent_auth_error({"bootstrap.servers": addr["SASL_PLAINTEXT"], "security.protocol": "SASL_PLAINTEXT",
                                  "sasl.mechanism": "PLAIN", **sasl})
    assert _confluent_auth_error({"bootstrap.servers": addr["SASL_PLAINTEXT"], "security.protocol": "SASL_PLAINTEXT",
                                  "sasl.mechanism": "SCRAM-SHA-512", **sasl}) is None
    from wire import request, string
    with socket.create_connection(("127.0.0.1", ports["SASL_PLAINTEXT"]), timeout=10) as sock:
        sock.sendall(request(17, 1, 1, string("PLAIN")))
        r = _read_response(sock)
        assert struct.unpack(">h", r[4:6])[0] == 33, "UNSUPPORTED_SASL_MECHANISM"
        assert struct.unpack(">i", r[6:10])[0] == 1 and b"SCRAM-SHA-512" in r and b"PLAIN" not in r[10:]
    # INTERNAL requires a certificate from ca; EXTERNAL serves the rogue CA's certificate
    # and asks for none.
    internal = {"bootstrap.servers": addr["INTERNAL"], "security.protocol": "SSL", **ca}
    assert _confluent_auth_error(internal), "INTERNAL requires a client certificate"
    assert _confluent_auth_error({**internal, "ssl.certificate.location": str(certs / "writer.pem"),
                                  "ssl.key.location": str(certs / "writer.key")}) is None
    external = {"bootstrap.servers": addr["EXTERNAL"], "security.protocol": "SSL",
                "ssl.ca.location": str(certs / "rogue-ca.pem")}
    assert _confluent_auth_error(external) is None, "EXTERNAL: its own certificate, no client certificate"
    assert _confluent_auth_error({**external, **ca}), "EXTERNAL does not serve the broker certificate of ca"


def test_a_renewed_certificate_is_served_without_a_restart(kaas_factory, certs, tmp_path):
    """The broker re-reads its certificate and key when they change, here mounted as a
    Kubernetes Secret is (tls.crt -> ..data/tls.crt, ..data -> a versioned directory,
    swapped by one rename): clients trusting only the new CA connect after the swap,
    without a restart."""
    import os as _os
    d = tmp_path / "secret"
    d.mkdir()

    def version(name, pair):
        v = d / name
        v.mkdir()
        (v / "tls.crt").write_bytes((certs / f"{pair}.pem").read_bytes())
        (v / "tls.key").write_bytes((certs / f"{pair}.key").read_bytes())
        tmp = d / "..data_tmp"
        _os.symlink(name, tmp)
        _os.rename(tmp, d / "..data")

    version("..v1", "rogue-broker")
    for f in ("tls.crt", "tls.key"):
        _os.symlink(f"..data/{f}", d / f)
    port = free_port()
    b = kaas_factory("--listener", f"PLAINTEXT://127.0.0.1:{free_port()}", "--listener", f"SSL://127.0.0.1:{port}",
                     "--ssl-certificate", str(d / "tls.crt"), "--ssl-key", str(d / "tls.key"))
    conf = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL", "ssl.ca.location": str(certs / "ca.pem")}
    assert _confluent_auth_error(conf) is not None, "the rogue certificate is not trusted by ca.pem"
    version("..v2", "broker")
    wait_for(lambda: _confluent_auth_error(conf) is None, timeout=20, what="the renewed certificate served")
    assert "TLS certificate files changed: reloaded" in b.log_text()
    assert b.alive()


# --- credentials through the Kafka API and kaasctl -----------------------------------

def test_scram_credentials_through_the_admin_api_and_kaasctl(kaas_factory, certs):
    """AlterUserScramCredentials adds a user (the client salts the password; the broker
    stores only the verifier), it logs in, DescribeUserScramCredentials and `kaasctl
    users list` show it, deleting it stops the next login; per-user errors are Kafka's."""
    from confluent_kafka.admin import (ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion,
                                       UserScramCredentialUpsertion)
    s = secure_broker(kaas_factory, certs)
    admin = AdminClient(rdkafka_conf(s, "SASL_SSL", "SCRAM-SHA-512"))
    upsert = UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"carol-pw")
    # Without an authorizer, only super users may change credentials (everyone could
    # otherwise take over every user's password), and the start-up log says so.
    assert "which only --super-users may" in s.broker.log_text()
    with pytest.raises(KafkaException) as refused:
        admin.alter_user_scram_credentials([upsert])["carol"].result(30)
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED, refused.value
    s.broker.stop()
    s.broker.extra += ["--super-users", "User:alice"]
    s.broker.start()
    admin = AdminClient(rdkafka_conf(s, "SASL_SSL", "SCRAM-SHA-512"))
    for f in admin.alter_user_scram_credentials([upsert]).values():
        f.result(30)
    assert _confluent_auth_error(rdkafka_conf(s, "SASL_PLAINTEXT", "SCRAM-SHA-512", user="carol", password="carol-pw")) is None
    assert _confluent_auth_error(rdkafka_conf(s, "SASL_PLAINTEXT", "PLAIN", user="carol", password="carol-pw")) is None
    futures = admin.describe_user_scram_credentials(["carol", "nobody"])
    carol = futures["carol"].result(30)
    assert [(i.mechanism, i.iterations) for i in carol.scram_credential_infos] == [(ScramMechanism.SCRAM_SHA_512, 8192)]
    with pytest.raises(KafkaException) as missing:
        futures["nobody"].result(30)
    assert missing.value.args[0].code() == 91, missing.value  # RESOURCE_NOT_FOUND
    stored = (s.broker.data_dir / "__cluster" / "scram-credentials.json").read_text()
    assert "carol-pw" not in stored and "carol" in stored
    listed = json.loads(kaasctl(s.broker.data_dir, "-o", "json", "users", "list").stdout)
    assert {u["user"]: [m["mechanism"] for m in u["mechanisms"]] for u in listed} == {
        "alice": ["SCRAM-SHA-256", "SCRAM-SHA-512"], "carol": ["SCRAM-SHA-512"]}
    # Kafka's per-user errors: too few iterations; deleting what is not there.
    bad = UserScramCredentialUpsertion("dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 100), b"pw")
    with pytest.raises(KafkaException) as e:
        admin.alter_user_scram_credentials([bad])["dave"].result(30)
    assert e.value.args[0].code() == 93  # UNACCEPTABLE_CREDENTIAL
    with pytest.raises(KafkaException) as e:
        admin.alter_user_scram_credentials([UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_256)])["carol"].result(30)
    assert e.value.args[0].code() == 91
    for f in admin.alter_user_scram_credentials([UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_512)]).values():
        f.result(30)
    assert _confluent_auth_error(rdkafka_conf(s, "SASL_PLAINTEXT", "SCRAM-SHA-512", user="carol", password="carol-pw"))
    # kaasctl deletes too, and says what it did; the journal records who.
    r = kaasctl(s.broker.data_dir, "users", "delete", "alice", "--mechanism", "SCRAM-SHA-256")
    assert r.returncode == 0 and "SCRAM-SHA-256 deleted" in r.stdout, r.stdout + r.stderr
    r = kaasctl(s.broker.data_dir, "users", "delete", "nobody")
    assert r.returncode != 0 and "user nobody has no" in r.stderr, r.stderr
    # Whatever $USER says, the journal records the account kaasctl runs as.
    r = run_kaasctl(s.broker.data_dir, "users", "add", "erin", "--password-stdin", input="erin-pw\n",
                    env={"USER": "mallory"})
    assert r.returncode == 0, r.stderr
    me = subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip()
    audit = json.loads(kaasctl(s.broker.data_dir, "-o", "json", "audit").stdout)
    by_target = {}
    for a in audit:
        by_target.setdefault(a["target"], []).append(a)
    assert [a["user"] for a in by_target["user erin"]] == [me]
    assert len(by_target["user alice"]) == 2  # added by the fixture, then deleted
    # The broker journals the Admin API's changes, with the principal that asked.
    carol = by_target["user carol"]
    assert len(carol) == 2 and all(a["tool"] == "broker 0" for a in carol), carol
    assert "principal=User:alice" in carol[0]["command"], carol
