//! `kaasctl users`: the SASL/SCRAM credentials brokers check logins against
//! (`__cluster/scram-credentials.json`, docs/security.md#how-credentials-are-stored).
//! Only salted verifiers are written; a password is read from a terminal without
//! echo, or from the first line of stdin with `--password-stdin`, never from a flag.

use super::{audit, Status};
use crate::cluster::Cluster;
use crate::out::{Out, Tone};
use kaas_core::scram::{Credentials, Mechanism, ScramCredential, MAX_ITERATIONS, MIN_ITERATIONS};
use serde::Serialize;

#[derive(Serialize)]
pub struct UserRow {
    pub user: String,
    pub mechanisms: Vec<MechanismRow>,
}

#[derive(Serialize)]
pub struct MechanismRow {
    pub mechanism: &'static str,
    pub iterations: u32,
}

pub fn list(c: &Cluster, out: &Out) -> anyhow::Result<Status> {
    let creds = Credentials::read(&c.volume)?;
    let rows: Vec<UserRow> = creds
        .users
        .keys()
        .map(|user| UserRow {
            user: user.clone(),
            mechanisms: creds
                .mechanisms_of(user)
                .into_iter()
                .map(|(m, iterations)| MechanismRow {
                    mechanism: m.name(),
                    iterations,
                })
                .collect(),
        })
        .collect();
    if out.structured() {
        out.json(&rows);
    } else {
        let mut t = out.table(&["USER", "MECHANISMS"]);
        for r in &rows {
            t.add_row(vec![
                out.cell(&r.user, Tone::Plain),
                out.text(
                    r.mechanisms
                        .iter()
                        .map(|m| format!("{} ({} iterations)", m.mechanism, m.iterations))
                        .collect::<Vec<_>>()
                        .join(", "),
                    Tone::Plain,
                ),
            ]);
        }
        outln!("{t}");
    }
    Ok(Status::Ok)
}

pub fn add(
    c: &Cluster,
    user: &str,
    mechanisms: &[Mechanism],
    iterations: u32,
    password_stdin: bool,
) -> anyhow::Result<Status> {
    if user.is_empty() {
        anyhow::bail!("the user name is empty");
    }
    if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
        anyhow::bail!("--iterations {iterations} is out of range {MIN_ITERATIONS}..={MAX_ITERATIONS}");
    }
    let password = read_password(user, password_stdin)?;
    if password.trim().is_empty() {
        anyhow::bail!("the password is empty (or only spaces)");
    }
    let mechanisms: Vec<Mechanism> = if mechanisms.is_empty() {
        Mechanism::ALL.to_vec()
    } else {
        mechanisms.to_vec()
    };
    let verifiers = mechanisms
        .iter()
        .map(|&m| Ok((m, ScramCredential::from_password(m, &password, iterations)?)))
        .collect::<std::io::Result<Vec<_>>>()?;
    Credentials::update::<anyhow::Error>(&c.volume, |creds| {
        for (m, v) in verifiers {
            creds.set(user, m, v);
        }
        Ok(())
    })?;
    let names: Vec<&str> = mechanisms.iter().map(|m| m.name()).collect();
    audit(c, &format!("user {user}"))?;
    outln!("user {user}: {} set ({iterations} iterations)", names.join(", "));
    Ok(Status::Ok)
}

pub fn delete(c: &Cluster, user: &str, mechanisms: &[Mechanism]) -> anyhow::Result<Status> {
    let mechanisms: Vec<Mechanism> = if mechanisms.is_empty() {
        Mechanism::ALL.to_vec()
    } else {
        mechanisms.to_vec()
    };
    let mut removed = Vec::new();
    Credentials::update::<anyhow::Error>(&c.volume, |creds| {
        for &m in &mechanisms {
            if creds.remove(user, m) {
                removed.push(m.name());
            }
        }
        Ok(())
    })?;
    if removed.is_empty() {
        anyhow::bail!(
            "user {user} has no {} credential",
            mechanisms.iter().map(|m| m.name()).collect::<Vec<_>>().join(" or ")
        );
    }
    audit(c, &format!("user {user}"))?;
    outln!(
        "user {user}: {} deleted (connections already logged in stay until they close)",
        removed.join(", ")
    );
    Ok(Status::Ok)
}

/// The password: the first line of stdin with `--password-stdin`; otherwise asked for
/// twice on the terminal, without echo.
fn read_password(user: &str, from_stdin: bool) -> anyhow::Result<String> {
    use std::io::{BufRead, IsTerminal, Write};
    let stdin = std::io::stdin();
    if from_stdin {
        let mut line = String::new();
        stdin.lock().read_line(&mut line)?;
        return Ok(line.trim_end_matches(['\n', '\r']).to_string());
    }
    if !stdin.is_terminal() {
        anyhow::bail!("stdin is not a terminal: pass the password on stdin with --password-stdin");
    }
    let ask = |prompt: &str| -> anyhow::Result<String> {
        eprint!("{prompt}");
        std::io::stderr().flush()?;
        let line = without_echo(|| {
            let mut line = String::new();
            stdin.lock().read_line(&mut line).map(|_| line)
        })?;
        // Ctrl-C arrives as a character while signals are off (so the terminal is
        // always restored); Ctrl-D as an empty read.
        if line.contains('\u{3}') || line.is_empty() {
            anyhow::bail!("aborted");
        }
        Ok(line.trim_end_matches(['\n', '\r']).to_string())
    };
    let first = ask(&format!("Password for {user}: "))?;
    let again = ask("Again: ")?;
    if first != again {
        anyhow::bail!("the passwords differ");
    }
    Ok(first)
}

/// Runs `f` with the terminal's echo (and signal keys) off, restoring them after.
fn without_echo<T>(f: impl FnOnce() -> std::io::Result<T>) -> std::io::Result<T> {
    use rustix::termios::{tcgetattr, tcsetattr, LocalModes, OptionalActions};
    let stdin = std::io::stdin();
    let before = tcgetattr(&stdin)?;
    let mut quiet = before.clone();
    quiet.local_modes.remove(LocalModes::ECHO | LocalModes::ISIG);
    quiet.local_modes.insert(LocalModes::ECHONL);
    tcsetattr(&stdin, OptionalActions::Now, &quiet)?;
    let result = f();
    tcsetattr(&stdin, OptionalActions::Now, &before)?;
    result
}
