//! Runs the real kaasctl binary against volumes built with kaas-core's own writers.

use kaas_core::topic::TopicMeta;
use kaas_core::Volume;
use std::process::Command;

fn kaasctl(dir: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kaasctl"))
        .arg("--data-dir")
        .arg(dir)
        .args(args)
        .output()
        .expect("kaasctl runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn topics_lists_what_the_volume_holds_as_table_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let volume = Volume::new(dir.path());
    let mut configs = std::collections::BTreeMap::new();
    configs.insert("retention.ms".to_string(), "1000".to_string());
    TopicMeta::new("orders", 3, configs, 0).write(&volume).unwrap();
    let (code, out, _) = kaasctl(dir.path(), &["topics"]);
    assert_eq!(code, 0);
    assert!(out.contains("orders") && out.contains("retention.ms=1000"), "{out}");
    let (code, out, _) = kaasctl(dir.path(), &["topics", "--json"]);
    assert_eq!(code, 0);
    let rows: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(rows[0]["name"], "orders");
    assert_eq!(rows[0]["partitions"], 3);
}

#[test]
fn an_unreadable_topic_file_is_reported_with_exit_code_3() {
    let dir = tempfile::tempdir().unwrap();
    let volume = Volume::new(dir.path());
    std::fs::create_dir_all(volume.topics_dir()).unwrap();
    std::fs::write(volume.topic_file("bad"), b"{").unwrap();
    let (code, out, _) = kaasctl(dir.path(), &["topics"]);
    assert_eq!(code, 3);
    assert!(out.contains("(unreadable)"), "{out}");
    let (code, out, _) = kaasctl(dir.path(), &["topics", "--json"]);
    assert_eq!(code, 3);
    let rows: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(rows[0]["error"].as_str().unwrap().contains("bad.json"), "{out}");
}

#[test]
fn a_missing_data_dir_is_an_error() {
    let (code, _, err) = kaasctl(std::path::Path::new("/nonexistent/kaas"), &["topics"]);
    assert_eq!(code, 1);
    assert!(err.contains("does not exist"), "{err}");
}

/// `txn describe`, the name kafka-transactions.sh users type, is `txn show`.
#[test]
fn txn_describe_is_txn_show() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(Volume::new(dir.path()).cluster_dir()).unwrap();
    let shown = kaasctl(dir.path(), &["txn", "show", "nobody-tx"]);
    let described = kaasctl(dir.path(), &["txn", "describe", "nobody-tx"]);
    assert_eq!(shown, described);
    assert!(!described.2.contains("unrecognized subcommand"), "{described:?}");
}
