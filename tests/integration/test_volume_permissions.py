"""The volume belongs to the brokers' user (issue 14, volume permissions): everything a
broker or kaasctl creates is its owner's alone (directories 0700, files 0600), and
kaasctl's mutating commands refuse to run as another user than the volume's owner
unless told to."""
import json
import os
import stat

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


def test_mutating_kaasctl_commands_refuse_another_user_than_the_volumes_owner(kaas):
    if os.geteuid() != 0:
        pytest.skip("needs root to give the volume to another uid")
    kaas.stop()
    os.chown(kaas.data_dir, 12345, 12345)

    def ctl(*args):
        return run_kaasctl(kaas.data_dir, *args)

    refused = ctl("txn", "repair", "--fix", "--yes")
    assert refused.returncode == 1, refused
    assert "belongs to uid 12345" in refused.stderr and "--allow-other-user" in refused.stderr, refused.stderr
    refused = ctl("txn", "abort", "anything", "--yes")
    assert refused.returncode == 1 and "belongs to uid 12345" in refused.stderr, refused.stderr
    # Reading, and planning without changing anything, are anyone's.
    assert ctl("txn", "list", "--json").returncode == 0
    assert ctl("brokers", "--json").returncode == 0
    # Told to, it runs.
    allowed = ctl("txn", "repair", "--fix", "--yes", "--allow-other-user", "--json")
    assert allowed.returncode == 0, allowed.stderr
    assert json.loads(allowed.stdout) == []
