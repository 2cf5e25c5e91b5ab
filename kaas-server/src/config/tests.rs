use super::*;

const BEGIN: &str = "<!-- config-reference:begin (generated from kaas-server/src/config.rs) -->\n";
const END: &str = "<!-- config-reference:end -->";

/// docs/operations.md carries the reference generated from the flags; with
/// KAAS_UPDATE_DOCS=1 this test rewrites it.
#[test]
fn the_configuration_reference_in_the_docs_is_generated_from_the_flags() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/operations.md");
    let doc = std::fs::read_to_string(&path).expect("docs/operations.md");
    let start = doc.find(BEGIN).expect("begin marker") + BEGIN.len();
    let end = doc.find(END).expect("end marker");
    let generated = reference_markdown();
    if doc[start..end] != generated {
        if std::env::var_os("KAAS_UPDATE_DOCS").is_some() {
            std::fs::write(&path, format!("{}{}{}", &doc[..start], generated, &doc[end..])).expect("write");
        } else {
            panic!("docs/operations.md's configuration reference is out of date: run KAAS_UPDATE_DOCS=1 cargo test -p kaas-server configuration_reference");
        }
    }
}

/// docs/configuration.md is written by hand (grouped, with links); every flag must
/// have its row there, so a new flag cannot land without its page.
#[test]
fn every_flag_has_a_row_in_the_configuration_page() {
    use clap::CommandFactory;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/configuration.md");
    let doc = std::fs::read_to_string(&path).expect("docs/configuration.md");
    let rows: Vec<&str> = doc.lines().filter(|l| l.starts_with("| `--")).collect();
    let missing: Vec<String> = Config::command()
        .get_arguments()
        .filter_map(|arg| arg.get_long())
        .filter(|long| *long != "help")
        .map(|long| format!("`--{long}"))
        .filter(|flag| {
            !rows
                .iter()
                .any(|row| row.contains(&format!("{flag} ")) || row.contains(&format!("{flag}`")))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "flags without a row in docs/configuration.md: {missing:?}"
    );
}

/// Listeners as a TOML list; `--print-config` of such a configuration reads back
/// as the same configuration (`listen`, unused, is commented out).
#[test]
fn listener_lists_in_the_file_and_print_config_round_trip() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("k.toml");
    std::fs::write(
        &file,
        "listener = [\"PLAINTEXT://127.0.0.1:0\", \"ext=SASL_SSL://127.0.0.1:0\"]\nadvertised-listener = [\"EXT=kaas.example:9094\"]\n",
    )
    .expect("write");
    let c = Config::load_from(["kaas-server", "--config", file.to_str().unwrap()]).expect("loads");
    let names: Vec<&str> = c.listeners.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["PLAINTEXT", "EXT"]);
    assert_eq!(c.resolved_listeners().expect("resolves").len(), 2);
    let printed = dir.path().join("printed.toml");
    std::fs::write(&printed, c.render_effective()).expect("write");
    let again = Config::load_from(["kaas-server", "--config", printed.to_str().unwrap()]).expect("reads back");
    assert_eq!(again.listeners, c.listeners);
    assert_eq!(again.advertised_listeners, c.advertised_listeners);
    assert!(
        again.resolved_listeners().is_ok(),
        "listen is not given beside listener"
    );
    std::fs::write(&file, "data-dir = [\"a\", \"b\"]\n").expect("write");
    assert!(
        Config::load_from(["kaas-server", "--config", file.to_str().unwrap()]).is_err(),
        "a list only where a setting takes several"
    );
}

/// A list setting whose delimiter is not a comma (super.users takes `;`, since a
/// certificate principal holds commas) is joined and printed with its own.
#[test]
fn super_users_with_commas_in_the_file_and_print_config_round_trip() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("k.toml");
    std::fs::write(&file, "super-users = [\"User:admin\", \"User:CN=ops,O=example\"]\n").expect("write");
    let c = Config::load_from(["kaas-server", "--config", file.to_str().unwrap()]).expect("loads");
    assert_eq!(c.super_users, ["User:admin", "User:CN=ops,O=example"]);
    let printed = dir.path().join("printed.toml");
    std::fs::write(&printed, c.render_effective()).expect("write");
    let again = Config::load_from(["kaas-server", "--config", printed.to_str().unwrap()]).expect("reads back");
    assert_eq!(again.super_users, c.super_users);
}

#[test]
fn a_file_sets_what_flags_leave_unset_and_flags_win() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("k.toml");
    std::fs::write(
        &file,
        "segment-bytes = 5000\nretention-ms = 9\nmetrics-listen = \"127.0.0.1:9100\"\n",
    )
    .expect("write");
    let c = Config::load_from([
        "kaas-server",
        "--config",
        file.to_str().unwrap(),
        "--retention-ms",
        "11",
    ])
    .expect("loads");
    assert_eq!(c.segment_bytes, 5000);
    assert_eq!(c.retention_ms, 11);
    assert_eq!(c.metrics_listen, Some("127.0.0.1:9100".parse().unwrap()));
    assert_eq!(c.sources["segment_bytes"].origin, Origin::File(file.clone()));
    assert_eq!(c.sources["retention_ms"].origin, Origin::Flag);
    assert_eq!(c.sources["segment_ms"].origin, Origin::Default);
    // Values from the file count as given (STATIC_BROKER_CONFIG in DescribeConfigs).
    assert!(c.given("segment_bytes") && !c.given("segment_ms"));
    std::fs::write(&file, "segment-byte = 5000\n").expect("write");
    let e = Config::load_from(["kaas-server", "--config", file.to_str().unwrap()]).unwrap_err();
    assert!(
        matches!(&e, ConfigError::UnknownKey { key, hint, .. } if key == "segment-byte" && hint.contains("segment-bytes")),
        "{e}"
    );
}

#[test]
fn per_listener_settings_override_the_brokers_for_their_listener_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("k.toml");
    std::fs::write(
        &file,
        "listener-sasl-enabled-mechanisms = [\"SASL_SSL=PLAIN,SCRAM-SHA-512\", \"internal=scram-sha-256\"]\n\
         listener-ssl-client-auth = [\"INTERNAL=required\"]\n",
    )
    .expect("write");
    let c = Config::load_from([
        "kaas-server",
        "--config",
        file.to_str().unwrap(),
        "--listener-ssl-certificate",
        "EXTERNAL=/etc/kaas/external.pem",
    ])
    .expect("loads");
    use crate::config::SaslMechanism::{Plain, Scram};
    use kaas_core::scram::Mechanism::{ScramSha256, ScramSha512};
    assert_eq!(c.sasl_mechanisms_for("SASL_SSL"), [Plain, Scram(ScramSha512)]);
    assert_eq!(c.sasl_mechanisms_for("INTERNAL"), [Scram(ScramSha256)]);
    assert_eq!(
        c.sasl_mechanisms_for("SASL_PLAINTEXT"),
        c.sasl_enabled_mechanisms.as_slice()
    );
    assert_eq!(c.ssl_client_auth_for("INTERNAL"), ClientAuth::Required);
    assert_eq!(c.ssl_client_auth_for("EXTERNAL"), ClientAuth::None);
    assert_eq!(
        crate::config::for_listener(&c.listener_ssl_certificate, "EXTERNAL"),
        Some(&std::path::PathBuf::from("/etc/kaas/external.pem"))
    );
    for bad in ["SASL_SSL", "SASL_SSL=", "SASL_SSL=PLAIN,", "bad name=PLAIN", "X=GSSAPI"] {
        assert!(crate::config::parse_listener_mechanisms(bad).is_err(), "{bad}");
    }
    assert!(crate::config::parse_listener_client_auth("X=sometimes").is_err());
    assert!(crate::config::parse_listener_path("X=").is_err());
}

#[test]
fn a_negative_broker_id_is_refused_with_a_hint_from_a_flag_or_a_file() {
    let e = <Config as clap::Parser>::try_parse_from(["kaas-server", "--broker-id=-1"]).unwrap_err();
    assert!(e.to_string().contains("kaas does not assign one"), "{e}");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("k.toml");
    std::fs::write(&file, "broker-id = -1\n").expect("write");
    let e = Config::load_from(["kaas-server", "--config", file.to_str().unwrap()]).unwrap_err();
    assert!(e.to_string().contains("broker ids are 0 or more, not -1"), "{e}");
    assert_eq!(crate::config::parse_broker_id("2"), Ok(2));
}

/// `--segment-ms 0` (or less, through the environment or a config file) was accepted
/// as the broker's default `segment.ms`, which as a topic config is refused below 1:
/// every append to a non-empty segment then rolled a new one.
#[test]
fn a_segment_ms_below_one_is_refused() {
    for bad in ["0", "-5"] {
        assert!(
            <Config as clap::Parser>::try_parse_from(["kaas-server", "--segment-ms", bad, "--retention-ms", "1"])
                .is_err(),
            "{bad}"
        );
    }
    assert!(<Config as clap::Parser>::try_parse_from(["kaas-server", "--segment-ms", "1"]).is_ok());
}
