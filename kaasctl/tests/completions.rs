//! The committed completions and man page in `completions/` are generated from the same
//! clap definition as the binary; this test fails when they are stale.
//! Regenerate with `UPDATE_COMPLETIONS=1 cargo test -p kaasctl --test completions`.

use std::path::Path;
use std::process::Command;

const FILES: &[(&[&str], &str)] = &[
    (&["completions", "bash"], "kaasctl.bash"),
    (&["completions", "zsh"], "_kaasctl"),
    (&["completions", "fish"], "kaasctl.fish"),
    (&["completions", "powershell"], "_kaasctl.ps1"),
    (&["completions", "elvish"], "kaasctl.elv"),
    (&["man"], "kaasctl.1"),
];

#[test]
fn committed_completions_and_man_page_match_the_cli() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../completions");
    let update = std::env::var_os("UPDATE_COMPLETIONS").is_some();
    let mut stale = Vec::new();
    for (args, file) in FILES {
        let out = Command::new(env!("CARGO_BIN_EXE_kaasctl"))
            .args(*args)
            .output()
            .unwrap();
        assert!(out.status.success(), "kaasctl {args:?} failed");
        let path = dir.join(file);
        if update {
            std::fs::write(&path, &out.stdout).unwrap();
        } else if std::fs::read(&path).ok().as_deref() != Some(&out.stdout[..]) {
            stale.push(file.to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "stale in completions/: {stale:?}; run UPDATE_COMPLETIONS=1 cargo test -p kaasctl --test completions"
    );
}
