"""kaas-server's configuration (issue 13): a TOML file (--config), KAAS_* variables and
flags, in that order of precedence; --print-config shows each value and its source;
unknown keys and bad values in the file are errors that name the file and the key."""
import re
import socket
import subprocess

from confluent_kafka.admin import AdminClient

from conftest import BIN, free_port, process_env, wait_for


def run(*args, env=None, cwd=None):
    e = {k: v for k, v in process_env().items() if not k.startswith("KAAS_")}
    e.update(env or {})
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=30, env=e, cwd=cwd)


def effective(stdout):
    """key -> (value, source) from --print-config."""
    out = {}
    for line in stdout.splitlines():
        m = re.fullmatch(r"([a-z-]+) = (.*?)  # (.*)", line)
        if m:
            out[m.group(1)] = (m.group(2), m.group(3))
    return out


def test_flags_beat_env_beat_file_beat_defaults(tmp_path):
    cfg = tmp_path / "kaas.toml"
    cfg.write_text('# a comment\nsegment-bytes = 2000000\nsegment-ms = 1000\nretention-ms = 5000\n'
                   'data-dir = "/srv/kaas"\nauto-create-topics = false\n')
    r = run("--config", str(cfg), "--retention-ms", "7000", "--print-config",
            env={"KAAS_SEGMENT_MS": "3000", "KAAS_RETENTION_MS": "6000"})
    assert r.returncode == 0, r.stderr
    conf = effective(r.stdout)
    assert conf["segment-bytes"] == ("2000000", f"file {cfg}")
    assert conf["segment-ms"] == ("3000", "env KAAS_SEGMENT_MS")
    assert conf["retention-ms"] == ("7000", "flag")
    assert conf["data-dir"] == ('"/srv/kaas"', f"file {cfg}")
    assert conf["auto-create-topics"] == ("false", f"file {cfg}")
    assert conf["retention-bytes"] == ("-1", "default")
    assert "# metrics-listen = (not set)  # default" in r.stdout
    # Every setting is listed; the printed configuration is itself a valid config file
    # that gives the same configuration.
    assert len(conf) >= 35
    again = tmp_path / "again.toml"
    again.write_text(r.stdout)
    r2 = run("--config", str(again), "--print-config")
    assert r2.returncode == 0, r2.stderr
    assert {k: v for k, (v, _) in effective(r2.stdout).items()} == {k: v for k, (v, _) in conf.items()}


def test_print_config_quotes_what_is_not_a_number_and_follows_a_symlinked_file(tmp_path):
    """A path that looks like a number stays a string; a config file reached through a
    symbolic link (as a Kubernetes ConfigMap mounts it) is read."""
    real = tmp_path / "..data" / "kaas.toml"
    real.parent.mkdir()
    real.write_text('data-dir = "007"\nlog-cleaner-io-max-bytes-per-second = 1e5\n')
    link = tmp_path / "kaas.toml"
    link.symlink_to(real.relative_to(tmp_path))
    r = run("--config", str(link), "--print-config")
    assert r.returncode == 0, r.stderr
    conf = effective(r.stdout)
    assert conf["data-dir"] == ('"007"', f"file {link}")
    assert conf["log-cleaner-io-max-bytes-per-second"][0] == "100000"
    again = tmp_path / "again.toml"
    again.write_text(r.stdout)
    r2 = run("--config", str(again), "--print-config")
    assert r2.returncode == 0, r2.stderr
    assert effective(r2.stdout)["data-dir"][0] == '"007"'


def test_the_config_file_can_be_named_by_env_and_configures_a_running_broker(tmp_path):
    port = free_port()
    cfg = tmp_path / "kaas.toml"
    cfg.write_text(f'listen = "127.0.0.1:{port}"\ndata-dir = "{tmp_path / "data"}"\ndefault-partitions = 3\n')
    # The fixture passes --data-dir and --listen as flags; run the binary by hand
    # instead so the file alone configures it.
    env = {k: v for k, v in process_env().items() if not k.startswith("KAAS_")}
    env["KAAS_CONFIG"] = str(cfg)
    log = open(tmp_path / "broker.log", "ab")
    proc = subprocess.Popen([str(BIN)], stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp_path)
    try:
        wait_for(lambda: "kaas-server ready" in (tmp_path / "broker.log").read_text(errors="replace"), timeout=30,
                 what="the broker ready")
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        md = admin.list_topics("auto", timeout=10)
        assert len(md.topics["auto"].partitions) == 3, "default-partitions from the file"
        assert (tmp_path / "data" / "__cluster").is_dir(), "data-dir from the file"
    finally:
        proc.terminate()
        proc.wait(15)


def test_unknown_keys_and_bad_values_are_errors_naming_the_file_and_key(tmp_path):
    cases = {
        'segmnt-bytes = 3\n': "unknown key `segmnt-bytes` (did you mean `segment-bytes`?)",
        'no-such-thing = 1\n': "unknown key `no-such-thing`",
        'print-config = true\n': "unknown key `print-config`",
        'segment-bytes = 3\n': "key `segment-bytes`: invalid value '3'",
        'segment-bytes = [1]\n': "key `segment-bytes`: expected a string, number or boolean (or a list of strings for a list setting), found array",
        'flush-policy = "sometimes"\n': "key `flush-policy`: invalid value 'sometimes'",
        'listen = \n': "is not valid TOML: line 1, column 10",
        '[section]\nlisten = "x"\n': "unknown key `section`",
    }
    for i, (text, expected) in enumerate(cases.items()):
        cfg = tmp_path / f"bad{i}.toml"
        cfg.write_text(text)
        r = run("--config", str(cfg), "--data-dir", str(tmp_path / "d"))
        assert r.returncode == 2, (text, r.returncode, r.stderr)
        assert f"config file {cfg}" in r.stderr and expected in r.stderr, (text, r.stderr)
        assert not (tmp_path / "d").exists(), "nothing is touched before the configuration is valid"
    r = run("--config", str(tmp_path / "missing.toml"))
    assert r.returncode == 2 and f"cannot read config file {tmp_path / 'missing.toml'}" in r.stderr, r.stderr
    # A flag given on the command line is checked by clap as before.
    r = run("--segment-bytes", "3")
    assert r.returncode == 2 and "--segment-bytes" in r.stderr


def test_a_data_directory_that_is_a_file_is_said_once_and_a_new_volume_loudly(tmp_path, kaas_factory):
    """Issue 28's traps: a --data-dir that is a file (or runs through one) is one plain
    line, not an OS error twice; a broker that makes a new volume says so, naming the
    cluster id and the absolute path, once — not at the next start."""
    afile = tmp_path / "afile"
    afile.write_text("not a volume")
    for data_dir, expected in [(afile, f"the data directory {afile} is not a directory"),
                               (afile / "sub", f"the data directory {afile / 'sub'} cannot be made: part of its path is a file, not a directory")]:
        r = run("--data-dir", str(data_dir), "--listen", f"127.0.0.1:{free_port()}")
        assert r.returncode == 1, r.stderr
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        assert lines == [f"kaas-server: {expected} (--data-dir or KAAS_DATA_DIR{' names a file' if data_dir == afile else ''})"], r.stderr
        assert "os error" not in r.stderr
    workdir = tmp_path / "work"
    workdir.mkdir()
    b = kaas_factory(data_dir=workdir / "newvol")
    first = b.log_text()
    new_lines = [l for l in first.splitlines() if "NEW CLUSTER" in l]
    cluster_id = (workdir / "newvol" / "__cluster" / "cluster.json").read_text()
    assert len(new_lines) == 1, first
    assert str(workdir / "newvol") in new_lines[0] and " WARN " in new_lines[0], new_lines
    assert re.search(r"cluster id ([0-9a-f]{32})", new_lines[0]).group(1) in cluster_id
    b.stop()
    b.restart()
    assert b.log_text().count("NEW CLUSTER") == 1, "an existing volume is not announced as new"
