"""The volume belongs to the brokers' user (issue 14, volume permissions): everything a
broker or kaasctl creates is its owner's alone (directories 0700, files 0600), and
kaasctl's mutating commands refuse to run as another user than the volume's owner
unless told to."""
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest
from confluent_kafka import Producer

from conftest import wait_for
from conftest import run_kaasctl
from txn_helpers import create_topic


def modes(root):
    """(path, mode) of every directory and file under root, root included."""
    out = [(root, stat.S_IMODE(os.stat(root).st_mode))]
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(dirpath, name)
            out.append((p, stat.S_IMODE(os.lstat(p).st_mode)))
    return out


def test_everything_the_broker_and_kaasctl_create_is_the_owners_alone(kaas):
    create_topic(kaas.bootstrap, "private", 2)
    p = Producer({"bootstrap.servers": kaas.bootstrap, "transactional.id": "perm-tx"})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("private", value=b"secret", partition=0)
    p.flush(10)
    # kaasctl writes too: an abort records an audit entry and writes markers.
    r = run_kaasctl(kaas.data_dir, "txn", "abort", "perm-tx", "--yes", "--wait", "0s")
    assert r.returncode == 0, r.stderr
    wait_for(lambda: any("audit" in str(p) for p, _ in modes(kaas.data_dir)), what="an audit entry")
    found = modes(kaas.data_dir)
    assert len(found) > 20
    for path, mode in found:
        want = 0o700 if os.path.isdir(path) else 0o600
        assert mode == want, f"{path} is {oct(mode)}, want {oct(want)}"


def _as_uid(uid):
    def drop():
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    return drop


def test_kaasctl_as_root_acts_as_the_volumes_owner_and_another_user_is_refused(kaas_factory):
    """Run as root on a volume that belongs to another user (the brokers'), kaasctl
    becomes that user: what it writes is theirs, and a symbolic link they planted
    (`__cluster/audit` -> a directory of root's) leads it nowhere they could not write
    already. Run as a third user, mutating commands are refused unless told to."""
    if os.geteuid() != 0:
        pytest.skip("needs root to give the volume to another uid")
    # A directory other users may cross, so the third user can reach the volume.
    base = Path(tempfile.mkdtemp(prefix="kaas-owner-"))
    try:
        os.chmod(base, 0o755)
        data = base / "data"
        b = kaas_factory(data_dir=data)
        b.stop()
        for dirpath, dirs, files in os.walk(data):
            for name in [dirpath, *(os.path.join(dirpath, n) for n in dirs + files)]:
                os.lchown(name, 12345, 12345)

        def ctl(*args, **kwargs):
            return run_kaasctl(data, *args, **kwargs)

        # Root: acts as uid 12345, so no --allow-other-user is needed, and what it
        # writes is uid 12345's.
        added = ctl("users", "add", "carol", "--password-stdin", input="carol-secret\n")
        assert added.returncode == 0, added.stderr
        assert os.stat(data / "__cluster" / "scram-credentials.json").st_uid == 12345
        audit = data / "__cluster" / "audit"
        assert [os.stat(p).st_uid for p in audit.iterdir()] == [12345] * len(list(audit.iterdir()))
        assert ctl("txn", "list", "--json").returncode == 0
        assert ctl("brokers", "--json").returncode == 0
        # A volume root that is root's (an NFS export) with the brokers' files in it:
        # the same.
        os.chown(data, 0, 0)
        os.chmod(data, 0o711)  # which the brokers' user may cross, or they could not run
        added = ctl("users", "add", "erin", "--password-stdin", input="erin-secret\n")
        assert added.returncode == 0, added.stderr
        assert os.stat(data / "__cluster" / "scram-credentials.json").st_uid == 12345
        journal = ctl("--json", "audit")
        assert journal.returncode == 0, journal.stderr
        assert {e["user"] for e in json.loads(journal.stdout)} == {"root as uid 12345"}, journal.stdout
        os.chown(data, 12345, 12345)
        os.chmod(data, 0o700)
        # The volume's owner points the audit directory at root's: root's kaasctl writes
        # nothing there (before, run with --allow-other-user, it wrote its record there).
        outside = base / "roots"
        outside.mkdir(mode=0o755)
        shutil.rmtree(audit)
        audit.symlink_to(outside)
        os.lchown(audit, 12345, 12345)
        escaped = ctl("users", "add", "dave", "--password-stdin", "--allow-other-user", input="dave-secret\n")
        assert escaped.returncode != 0 and "audit record could not be written" in escaped.stderr, escaped.stderr
        assert list(outside.iterdir()) == [], "root's rights reached past the volume"
        # A third user: refused, unless told to.
        refused = ctl("txn", "repair", "--fix", "--yes", preexec_fn=_as_uid(23456))
        assert refused.returncode == 1, refused
        assert "belongs to uid 12345" in refused.stderr and "--allow-other-user" in refused.stderr, refused.stderr
        refused = ctl("txn", "abort", "anything", "--yes", preexec_fn=_as_uid(23456))
        assert refused.returncode == 1 and "belongs to uid 12345" in refused.stderr, refused.stderr
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_data_directory_or_tls_key_others_may_read_is_warned_about_at_start(kaas_factory, tmp_path):
    """A data directory (or TLS key) made before, by hand or by a deployment tool, with
    group or other bits: the broker says so at start, and starts."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    import datetime
    from conftest import free_port
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
    (tmp_path / "broker.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path = tmp_path / "broker.key"
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    os.chmod(key_path, 0o644)
    data = tmp_path / "open-data"
    data.mkdir(mode=0o755)
    os.chmod(data, 0o755)
    b = kaas_factory("--listener", f"SSL://127.0.0.1:{free_port()}", "--ssl-certificate", str(tmp_path / "broker.pem"),
                     "--ssl-key", str(key_path), data_dir=data)
    log = b.log_text()
    assert "the data directory may be read by other users than its owner; chmod 700 it" in log, log[-3000:]
    assert 'mode="755"' in log
    assert "the TLS private key may be read by other users than its owner; chmod 600 it" in log
    assert 'mode="644"' in log
