"""deploy/kubernetes (docs/kubernetes.md), checked without a cluster or a broker: the
manifests parse, refer to each other consistently, mount ONE ReadWriteMany volume in
every broker pod, derive each broker's id and advertised name from its pod, probe the
Kafka port, and pass kaas-server only flags it has (read from kaas-server/src/config.rs,
the clap definition, rather than from a built binary)."""
import re
import shlex
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "kubernetes"
CONFIG_RS = ROOT / "kaas-server" / "src" / "config.rs"
KUSTOMIZATION = "kustomization.yaml"


def manifest_files():
    return sorted(p for p in DEPLOY.iterdir() if p.suffix in (".yaml", ".yml"))


def load_docs():
    """Every non-empty YAML document under deploy/kubernetes, as (file name, document)."""
    docs = []
    for path in manifest_files():
        with path.open() as f:
            docs += [(path.name, d) for d in yaml.safe_load_all(f) if d is not None]
    return docs


@pytest.fixture
def docs():
    return load_docs()


def config_flags():
    """kaas-server's flags from `pub struct Config`: clap long name -> {env, default}.
    The long name is the field name in kebab-case unless `long = "..."` says otherwise."""
    text = CONFIG_RS.read_text()
    body = re.search(r"pub struct Config \{(.*?)\n\}", text, re.S).group(1)
    flags = {}
    attrs = ""
    for line in body.splitlines():
        line = line.strip()
        if line.startswith("///"):
            continue
        m = re.match(r"pub (\w+)\s*:", line)
        if not m:
            attrs += line
            continue
        if re.search(r"\blong\b", attrs):
            long = re.search(r'\blong\s*=\s*"([^"]+)"', attrs)
            env = re.search(r'\benv\s*=\s*"([^"]+)"', attrs)
            default = re.search(r"default_value_t\s*=\s*(-?[0-9_]+)\s*[,)]", attrs)
            flags[long.group(1) if long else m.group(1).replace("_", "-")] = {
                "env": env.group(1) if env else None,
                "default": int(default.group(1).replace("_", "")) if default else None,
            }
        attrs = ""
    return flags


def one(docs, kind):
    found = [d for _, d in docs if d.get("kind") == kind]
    assert len(found) == 1, f"expected exactly one {kind}, found {len(found)}"
    return found[0]


def by_name(docs, kind, name):
    found = [d for _, d in docs if d.get("kind") == kind and d["metadata"]["name"] == name]
    assert found, f"no {kind} named {name!r} in {DEPLOY}"
    return found[0]


def broker_container(sts):
    containers = sts["spec"]["template"]["spec"]["containers"]
    found = [c for c in containers if "kaas-server" in " ".join(c.get("command", []) + c.get("args", []))]
    assert len(found) == 1, "exactly one container of the StatefulSet must run kaas-server"
    return found[0]


def server_flags(container):
    """The --flag values the container passes to kaas-server, from command + args, looking
    inside `sh -c '...'`. Shell and kubelet variable references are normalised to ${VAR}."""
    words = list(container.get("command", [])) + list(container.get("args", []))
    if len(words) >= 3 and Path(words[0]).name in ("sh", "bash", "dash") and words[1] == "-c":
        words = shlex.split(words[2].replace("\\\n", " "))
    names = [Path(w).name for w in words]
    if "kaas-server" in names:
        words = words[names.index("kaas-server") + 1:]
    flags = {}
    i = 0
    while i < len(words):
        w = words[i]
        assert w.startswith("--"), f"unexpected word {w!r} among kaas-server's arguments"
        if "=" in w:
            name, value = w[2:].split("=", 1)
        elif i + 1 < len(words) and not words[i + 1].startswith("--"):
            name, value = w[2:], words[i + 1]
            i += 1
        else:
            name, value = w[2:], None
        flags[name] = re.sub(r"\$\((\w+)\)|\$(\w+)", lambda m: "${%s}" % (m.group(1) or m.group(2)), value or "")
        i += 1
    return flags


def env_of(container):
    return {e["name"]: e for e in container.get("env", [])}


def setting(container, flag):
    """A kaas-server setting as the container gives it: the --flag value, else its
    KAAS_* env twin's value (kubelet's $(VAR) written ${VAR}) or, for valueFrom, its
    entry (a dict), else None."""
    flags = server_flags(container)
    if flag in flags:
        return flags[flag]
    entry = env_of(container).get(config_flags()[flag]["env"])
    if entry is not None and "value" in entry:
        return re.sub(r"\$\((\w+)\)", r"${\1}", entry["value"])
    return entry


def container_port(container, port):
    """A probe's or Service's port (a number or a container port name) as a number."""
    if isinstance(port, int):
        return port
    named = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
    assert port in named, f"port {port!r} is not a port name of container {container['name']}"
    return named[port]


def subset(small, big):
    return all(big.get(k) == v for k, v in small.items())


def test_the_config_rs_parser_finds_kaas_servers_flags():
    flags = config_flags()
    for name in ("data-dir", "listen", "broker-id", "advertised-listener", "broker-session-timeout-ms",
                 "shutdown-timeout-ms"):
        assert name in flags, f"--{name} not found in {CONFIG_RS}: the parser or the flag changed"
    assert flags["data-dir"]["env"] == "KAAS_DATA_DIR"
    assert flags["broker-session-timeout-ms"]["default"] == 10_000


def test_every_manifest_parses_and_every_document_has_api_version_kind_and_name(docs):
    assert manifest_files(), f"no manifests in {DEPLOY}"
    assert docs
    for name, d in docs:
        assert isinstance(d, dict), f"{name}: a document is not a mapping"
        for key in ("apiVersion", "kind"):
            assert d.get(key), f"{name}: a document has no {key}"
        assert (d.get("metadata") or {}).get("name"), f"{name}: a {d['kind']} has no metadata.name"
    kinds = {d["kind"] for _, d in docs}
    assert {"StatefulSet", "Service", "PersistentVolumeClaim", "Kustomization"} <= kinds


def test_the_kustomization_lists_exactly_the_manifest_files(docs):
    kustomization = one(docs, "Kustomization")
    listed = kustomization.get("resources", [])
    assert len(listed) == len(set(listed)), f"a resource is listed twice: {listed}"
    present = {p.name for p in manifest_files()} - {KUSTOMIZATION}
    assert set(listed) == present, f"kustomization lists {sorted(listed)}, the directory holds {sorted(present)}"


def test_the_statefulset_is_governed_by_a_headless_service_that_publishes_not_ready_pods(docs):
    sts = one(docs, "StatefulSet")
    headless = by_name(docs, "Service", sts["spec"]["serviceName"])
    assert headless["spec"].get("clusterIP") == "None", f"Service {headless['metadata']['name']} is not headless"
    assert headless["spec"].get("publishNotReadyAddresses") is True, "brokers' names must resolve before they are ready"
    kafka = [p for p in headless["spec"]["ports"] if p.get("name") == "kafka"]
    assert kafka and kafka[0]["port"] == 9092, "the headless Service has no port 9092 named kafka"
    clients = [d for _, d in docs if d["kind"] == "Service" and d["spec"].get("clusterIP") != "None"]
    assert clients, "no (non-headless) bootstrap Service for clients"
    assert any(p["port"] == 9092 for s in clients for p in s["spec"]["ports"])


def test_selectors_match_the_pod_template_labels(docs):
    sts = one(docs, "StatefulSet")
    labels = sts["spec"]["template"]["metadata"]["labels"]
    assert sts["spec"]["selector"]["matchLabels"]
    assert subset(sts["spec"]["selector"]["matchLabels"], labels)
    for _, d in docs:
        if d["kind"] == "Service":
            assert d["spec"].get("selector"), f"Service {d['metadata']['name']} selects nothing"
            assert subset(d["spec"]["selector"], labels), f"Service {d['metadata']['name']} selects no broker pod"
        if d["kind"] == "PodDisruptionBudget":
            assert subset(d["spec"]["selector"]["matchLabels"], labels)


def test_services_and_probes_point_at_the_ports_kaas_server_listens_on(docs):
    sts = one(docs, "StatefulSet")
    c = broker_container(sts)
    host, _, port = setting(c, "listen").rpartition(":")
    assert host not in ("127.0.0.1", "localhost", "[::1]"), "a pod listening on loopback is unreachable"
    assert int(port) in [p["containerPort"] for p in c["ports"]]
    # The probes are the operations listener's HTTP endpoints (docs/operations.md).
    ops_host, _, ops_port = setting(c, "metrics-listen").rpartition(":")
    assert ops_host not in ("127.0.0.1", "localhost", "[::1]"), "the kubelet cannot reach a loopback listener"
    assert int(ops_port) in [p["containerPort"] for p in c["ports"]]
    for probe, path in (("readinessProbe", "/health/ready"), ("livenessProbe", "/health/live")):
        assert probe in c, f"the broker container has no {probe}"
        assert c[probe].get("httpGet", {}).get("path") == path, f"{probe} does not GET {path}"
        assert container_port(c, c[probe]["httpGet"]["port"]) == int(ops_port), f"{probe} checks another port"
    annotations = sts["spec"]["template"]["metadata"].get("annotations", {})
    assert annotations.get("prometheus.io/port") == ops_port and annotations.get("prometheus.io/path") == "/metrics"
    for _, d in docs:
        if d["kind"] == "Service":
            for p in d["spec"]["ports"]:
                assert container_port(c, p.get("targetPort", p["port"])) == int(port)


def test_every_broker_pod_mounts_the_one_read_write_many_claim_at_its_data_dir(docs):
    sts = one(docs, "StatefulSet")
    pvc = one(docs, "PersistentVolumeClaim")
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"], "every broker mounts the same volume: ReadWriteMany"
    assert not sts["spec"].get("volumeClaimTemplates"), "volumeClaimTemplates give each pod its own volume"
    volumes = [v for v in sts["spec"]["template"]["spec"]["volumes"]
               if (v.get("persistentVolumeClaim") or {}).get("claimName") == pvc["metadata"]["name"]]
    assert len(volumes) == 1, f"the pod template has no volume of claim {pvc['metadata']['name']}"
    c = broker_container(sts)
    mounts = [m for m in c.get("volumeMounts", []) if m["name"] == volumes[0]["name"]]
    assert len(mounts) == 1 and not mounts[0].get("readOnly"), "the broker container does not mount the claim read-write"
    assert setting(c, "data-dir") == mounts[0]["mountPath"], "--data-dir is not where the claim is mounted"


def test_broker_id_and_advertised_listener_come_from_the_pod(docs):
    sts = one(docs, "StatefulSet")
    c = broker_container(sts)
    env = env_of(c)
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    if "POD_NAMESPACE" in env:
        assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"

    broker_id = setting(c, "broker-id")
    if isinstance(broker_id, dict):  # KAAS_BROKER_ID from the pod-index label
        path = broker_id["valueFrom"]["fieldRef"]["fieldPath"]
        assert path == "metadata.labels['apps.kubernetes.io/pod-index']"
    else:  # the ordinal cut off the pod name / host name in the shell
        assert broker_id in ("${POD_NAME##*-}", "${HOSTNAME##*-}"), f"--broker-id {broker_id!r} is not the pod ordinal"

    headless = sts["spec"]["serviceName"]
    advertised = setting(c, "advertised-listener")
    assert isinstance(advertised, str), "the advertised listener must be built from POD_NAME"
    listen_port = setting(c, "listen").rpartition(":")[2]
    assert advertised.startswith(f"${{POD_NAME}}.{headless}."), f"{advertised!r} is not <pod>.<headless service>..."
    assert advertised.endswith(f":{listen_port}")
    if "${POD_NAMESPACE}" in advertised:
        assert advertised == f"${{POD_NAME}}.{headless}.${{POD_NAMESPACE}}.svc.cluster.local:{listen_port}"


def test_brokers_reach_each_other_on_a_listener_they_have(docs):
    """Inter-broker notices (docs/cluster.md#markers-across-brokers) go to the listener
    --inter-broker-listener-name names: the pods' one PLAINTEXT listener (--listen)."""
    c = broker_container(one(docs, "StatefulSet"))
    assert setting(c, "inter-broker-listener-name") == "PLAINTEXT"
    assert setting(c, "listen"), "a PLAINTEXT listener (--listen)"
    assert not setting(c, "listener"), "no named listeners beside --listen"


def test_every_flag_and_kaas_env_in_the_manifests_is_one_kaas_server_has(docs):
    known = config_flags()
    envs = {f["env"] for f in known.values()}
    c = broker_container(one(docs, "StatefulSet"))
    used = server_flags(c)
    assert used or any(n.startswith("KAAS_") for n in env_of(c)), "no kaas-server flags found in the StatefulSet"
    unknown = sorted(set(used) - set(known))
    assert not unknown, f"kaas-server has no flags {unknown} (see {CONFIG_RS})"
    assert all(value for value in used.values()), f"a flag without a value: {used}"
    unknown_env = sorted(n for n in env_of(c) if n.startswith("KAAS_") and n not in envs)
    assert not unknown_env, f"kaas-server reads no environment variables {unknown_env}"


def test_the_grace_period_outlasts_a_clean_shutdown(docs):
    sts = one(docs, "StatefulSet")
    c = broker_container(sts)
    timeout_ms = setting(c, "shutdown-timeout-ms")
    timeout_ms = int(timeout_ms) if isinstance(timeout_ms, str) else config_flags()["shutdown-timeout-ms"]["default"]
    grace = sts["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30)
    # the in-flight wait, then fsync, snapshots and release of every partition
    assert grace >= timeout_ms / 1000 + 20, f"terminationGracePeriodSeconds {grace} leaves no time to stop cleanly"


def test_the_dockerfile_is_multi_stage_non_root_and_matches_the_manifests(docs):
    """deploy/Dockerfile, read statically (this machine has no Docker daemon): a build
    stage and a small runtime stage, a numeric non-root user that is the one the
    StatefulSet runs as, the ports the manifests use exposed, and only flags kaas-server
    has in its default command."""
    import json as _json

    text = (ROOT / "deploy" / "Dockerfile").read_text()
    lines = [l.strip() for l in text.splitlines() if l.strip() and not l.strip().startswith("#")]
    froms = [l for l in lines if l.upper().startswith("FROM ")]
    assert len(froms) == 2 and " AS " in froms[0].upper(), froms
    assert "slim" in froms[1] or "distroless" in froms[1], f"runtime stage is not a small image: {froms[1]}"
    runtime = lines[lines.index(froms[1]):]
    assert any("cargo build --release --locked" in l for l in lines), "the build must use the release profile and Cargo.lock"
    assert any(l.startswith("COPY --from=") for l in runtime), "the runtime stage copies only the built binaries"
    user = [l.split()[1] for l in runtime if l.upper().startswith("USER ")]
    assert user and user[-1].split(":")[0].isdigit() and user[-1].split(":")[0] != "0", f"USER {user}"
    uid = int(user[-1].split(":")[0])
    sts = one(docs, "StatefulSet")
    sc = sts["spec"]["template"]["spec"].get("securityContext", {})
    assert sc.get("runAsUser", uid) == uid and sc.get("runAsNonRoot", True), sc
    exposed = {int(p) for l in runtime if l.upper().startswith("EXPOSE ") for p in l.split()[1:]}
    c = broker_container(sts)
    assert {p["containerPort"] for p in c["ports"]} <= exposed, (exposed, c["ports"])
    cmd = _json.loads(next(l for l in runtime if l.upper().startswith("CMD "))[4:])
    known = config_flags()
    for w in cmd:
        if w.startswith("--"):
            assert w[2:].split("=")[0] in known, f"CMD passes --{w[2:]}, which kaas-server does not have"
