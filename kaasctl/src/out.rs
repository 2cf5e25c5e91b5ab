//! Printing: every command returns data (serde types); this module turns it into a
//! table for people or JSON for scripts, chosen once per run.

use crate::cli::{ColorChoice, OutputFormat};
use serde::Serialize;
use std::io::IsTerminal;

mod table;
pub use table::{Cell, Table};

pub struct Out {
    pub format: OutputFormat,
    pub color: bool,
    /// Table width to wrap cells at: COLUMNS when set, else the terminal's. None when
    /// stdout is not a terminal or with --wide: lines are never wrapped, so `grep`
    /// and `cut` see whole rows (UUIDs, paths and messages unbroken).
    pub width: Option<u16>,
    /// --wide: wide-only columns (headers written `~NAME`) are shown.
    pub wide: bool,
    /// --columns, upper-cased: only these columns are shown.
    columns: Vec<String>,
    /// Every header of the tables printed so far, for [`Out::check_columns`].
    headers_seen: std::cell::RefCell<std::collections::BTreeSet<String>>,
}

impl Out {
    pub fn new(format: OutputFormat, choice: ColorChoice, wide: bool, columns: &[String]) -> Out {
        let tty = std::io::stdout().is_terminal();
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let color = match choice {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => tty && !no_color,
        };
        // COLUMNS wins (scripts, tests); then the terminal's width; a pipe or file
        // gets whole lines, and so does --wide.
        let width = (!wide)
            .then(|| {
                terminal_width()
                    .or_else(|| tty.then(|| ratatui::crossterm::terminal::size().map(|(w, _)| w).unwrap_or(100)))
            })
            .flatten();
        Out {
            format,
            color,
            width,
            wide,
            columns: columns
                .iter()
                .map(|c| c.trim().to_uppercase())
                .filter(|c| !c.is_empty())
                .collect(),
            headers_seen: Default::default(),
        }
    }

    /// Structured output (JSON or YAML, as `format` says) instead of tables.
    pub fn structured(&self) -> bool {
        self.format != OutputFormat::Table
    }

    /// Which of `header`'s columns are shown (wide-only ones start with `~`), and the
    /// header names to print. With --columns, a table that has none of the named
    /// columns (another table of the same command) is shown whole.
    fn visible(&self, header: &[&str]) -> (Vec<bool>, Vec<String>) {
        let names: Vec<String> = header.iter().map(|h| h.trim_start_matches('~').to_string()).collect();
        self.headers_seen
            .borrow_mut()
            .extend(names.iter().map(|n| n.to_uppercase()));
        let picked = !self.columns.is_empty() && names.iter().any(|n| self.columns.contains(&n.to_uppercase()));
        let shown = header
            .iter()
            .zip(&names)
            .map(|(h, n)| {
                if picked {
                    self.columns.contains(&n.to_uppercase())
                } else {
                    !h.starts_with('~') || self.wide
                }
            })
            .collect();
        (shown, names)
    }

    /// Err naming the --columns that matched no table this command printed.
    pub fn check_columns(&self) -> Result<(), String> {
        if self.structured() {
            return Ok(());
        }
        let seen = self.headers_seen.borrow();
        let unknown: Vec<&String> = self.columns.iter().filter(|c| !seen.contains(*c)).collect();
        if unknown.is_empty() {
            return Ok(());
        }
        Err(format!(
            "--columns: no column {} here; this command's columns are: {}",
            unknown.iter().map(|c| format!("{c:?}")).collect::<Vec<_>>().join(", "),
            seen.iter().cloned().collect::<Vec<_>>().join(", ")
        ))
    }

    /// A table to fill with [`Table::add_row`] and print with `outln!("{t}")`.
    /// Header names starting with `~` are wide-only columns (see [`Out::visible`]).
    pub fn table(&self, header: &[&str]) -> Table {
        let (shown, names) = self.visible(header);
        Table {
            names,
            shown,
            rows: Vec::new(),
            width: self.width,
            color: self.color,
        }
    }

    /// A cell that is one word to the table, whatever spaces it holds: a name, an id,
    /// a number, a state. It is never wrapped, so `grep` finds it whole; a table too
    /// narrow for it grows past the terminal's width instead. Its text is [`safe`].
    pub fn cell(&self, text: impl ToString, tone: Tone) -> Cell {
        Cell {
            text: safe(&text.to_string()).into_owned(),
            tone,
            wraps: false,
        }
    }

    /// A cell of prose (a message, a detail, a suggested fix, a list): it may wrap,
    /// but only at spaces. A word is never split, so a path or a name in a message
    /// stays whole; one wider than its column goes on a line of its own. Its text is
    /// [`safe`].
    pub fn text(&self, text: impl ToString, tone: Tone) -> Cell {
        Cell {
            wraps: true,
            ..self.cell(text, tone)
        }
    }

    /// Prints a listing that may be very long (100,000 transactions): every cell is
    /// kept whole, and over `BIG_TABLE` rows nothing is wrapped at all.
    pub fn listing(&self, header: &[&str], rows: Vec<Vec<(String, Tone)>>) {
        let mut t = self.table(header);
        if rows.len() > BIG_TABLE {
            t.width = None;
        }
        t.rows = rows
            .into_iter()
            .map(|r| r.into_iter().map(|(text, tone)| self.cell(text, tone)).collect())
            .collect();
        outln!("{t}");
    }

    /// JSON on stdout. The encoder escapes C0 controls only; DEL, C1 controls and
    /// bidirectional overrides (see [`harmful`]) are escaped here as `\uXXXX`, which
    /// is the same JSON string, so no value can reach the terminal raw.
    /// JSON or YAML (per --output) on stdout.
    pub fn json<T: Serialize>(&self, value: &T) {
        outp!("{}", structured(self.format, value));
    }
}

/// `value` as JSON, or as YAML for [`OutputFormat::Yaml`], ending with a newline.
///
/// YAML: when a string holds a character [`harmful`] for a terminal, the YAML emitter
/// could write it raw, so such a document is written as its JSON instead (JSON is
/// YAML, and [`json_safe`] escapes those characters).
pub fn structured<T: Serialize>(format: OutputFormat, value: &T) -> String {
    if format == OutputFormat::Yaml {
        let yaml = serde_yaml_ng::to_string(value).expect("kaasctl output serialises as YAML");
        if !yaml.chars().any(|c| harmful(c) && c != '\n') {
            return yaml;
        }
    }
    let text = serde_json::to_string_pretty(value).expect("kaasctl output serialises");
    format!("{}\n", json_safe(&text))
}

/// Writes kaasctl's output to stdout. A closed pipe (the reader, `head` say, has
/// what it wanted) ends kaasctl at once and quietly with exit code 0, as ripgrep does;
/// any other write error ends it with the error and exit code 1. Never a panic.
pub fn emit(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_fmt(args) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        drop(stdout);
        eprintln!("kaasctl: cannot write to stdout: {e}");
        std::process::exit(1);
    }
}

/// Listings longer than this are never wrapped (see [`Out::listing`]).
pub const BIG_TABLE: usize = 1000;

fn ansi(tone: Tone) -> Option<&'static str> {
    match tone {
        Tone::Plain => None,
        Tone::Good => Some("\x1b[32m"),
        Tone::Warn => Some("\x1b[33m"),
        Tone::Bad => Some("\x1b[1;31m"),
        Tone::Dim => Some("\x1b[90m"),
        Tone::Header => Some("\x1b[1m"),
    }
}

#[derive(Debug, Clone, Copy)]
pub enum Tone {
    Plain,
    Good,
    Warn,
    Bad,
    Dim,
    /// A table's header (bold).
    Header,
}

/// `text` made harmless for a terminal: control characters (C0, DEL, C1: escape
/// sequences, carriage returns, bells) and the Unicode bidirectional controls that can
/// make text read as something else are shown as `\x1b`-style escapes. Everything
/// kaasctl prints for people that came from a client (topic and group names,
/// transactional ids, record keys and values, error messages quoting them) passes
/// through here; JSON output is escaped by its encoder.
pub fn safe(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(harmful) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if harmful(c) && (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if harmful(c) => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Encoded JSON with every [`harmful`] character the encoder leaves (DEL and beyond:
/// it escapes C0 controls in strings itself, and the pretty printer's newlines must
/// stay) written as a `\uXXXX` escape; such characters only occur inside strings.
pub fn json_safe(json: &str) -> std::borrow::Cow<'_, str> {
    let left = |c: char| c as u32 >= 0x7f && harmful(c);
    if !json.chars().any(left) {
        return std::borrow::Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if left(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Characters a terminal must never receive from data: controls (C0, DEL, C1), the
/// bidirectional marks, overrides and isolates (U+061C, U+200E/F, U+202A-E,
/// U+2066-9), and the line and paragraph separators (U+2028/9), which break lines
/// like a newline.
pub fn harmful(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

fn terminal_width() -> Option<u16> {
    std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok())
}

/// `word` as one shell word, for a command kaasctl suggests: as it is when it holds
/// only characters no shell treats specially, else in single quotes (a quote inside
/// written `'\''`), so a transactional id with spaces or quotes pastes as one argument.
pub fn shell_word(word: &str) -> std::borrow::Cow<'_, str> {
    let plain = |c: char| c.is_ascii_alphanumeric() || "._-/:=@+,%".contains(c);
    // zsh expands a word that starts with `=` (`=ls` is `/bin/ls`).
    if !word.is_empty() && !word.starts_with('=') && word.chars().all(plain) {
        return std::borrow::Cow::Borrowed(word);
    }
    std::borrow::Cow::Owned(format!("'{}'", word.replace('\'', "'\\''")))
}

/// The command that force-aborts `transactional_id`, as kaasctl suggests it: the id
/// one shell word, after `--` when it starts with `-` (else it would read as a flag).
pub fn abort_command(transactional_id: &str) -> String {
    let dashes = if transactional_id.starts_with('-') { "-- " } else { "" };
    format!("kaasctl txn abort {dashes}{}", shell_word(transactional_id))
}

/// A point in time for JSON: RFC 3339 and epoch milliseconds side by side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Time {
    pub rfc3339: String,
    pub epoch_ms: i64,
}

impl Time {
    /// None for the "no time" markers (-1, 0).
    pub fn from_ms(ms: i64) -> Option<Time> {
        if ms <= 0 {
            return None;
        }
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms as u64);
        Some(Time {
            rfc3339: humantime::format_rfc3339_millis(t).to_string(),
            epoch_ms: ms,
        })
    }
}

/// "3m12s"-style age for tables.
pub fn age(ms: i64) -> String {
    if ms < 0 {
        return "-".into();
    }
    let secs = ms / 1000;
    match secs {
        0..=59 => format!("{}.{}s", secs, (ms % 1000) / 100),
        60..=3599 => format!("{}m{:02}s", secs / 60, secs % 60),
        3600..=86399 => format!("{}h{:02}m", secs / 3600, (secs % 3600) / 60),
        _ => format!("{}d{:02}h", secs / 86400, (secs % 86400) / 3600),
    }
}

/// A timestamp for tables: RFC 3339 to the second, UTC.
pub fn when(ms: i64) -> String {
    match Time::from_ms(ms) {
        Some(t) => t.rfc3339.chars().take(19).collect::<String>().replace('T', " "),
        None => "-".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_shown_escaped_never_sent_to_the_terminal() {
        assert_eq!(safe("plain name.v1"), "plain name.v1");
        assert_eq!(safe("\x1b]0;pwned\x07"), "\\x1b]0;pwned\\x07");
        assert_eq!(safe("a\r\nb\tc\x7f"), "a\\r\\nb\\tc\\x7f");
        assert_eq!(safe("\u{9b}31m"), "\\x9b31m");
        assert_eq!(safe("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(safe("a\u{2028}b\u{61c}"), "a\\u{2028}b\\u{061c}");
        assert_eq!(safe("ünï ✓"), "ünï ✓");
        let json = serde_json::to_string(&"a\u{9b}b\u{7f}\u{202e}").unwrap();
        let escaped = json_safe(&json);
        assert_eq!(escaped, "\"a\\u009bb\\u007f\\u202e\"");
        assert_eq!(
            serde_json::from_str::<String>(&escaped).unwrap(),
            "a\u{9b}b\u{7f}\u{202e}"
        );
    }

    #[test]
    fn yaml_is_the_same_data_and_never_carries_terminal_controls_raw() {
        let value =
            serde_json::json!({"id": "orders-1", "n": 3, "parts": [{"topic": "t", "partition": 0}], "none": null});
        let yaml = structured(OutputFormat::Yaml, &value);
        assert!(yaml.starts_with("id: orders-1\n"), "{yaml}");
        assert_eq!(serde_yaml_ng::from_str::<serde_json::Value>(&yaml).unwrap(), value);
        // A bidirectional override: the document is written as (escaped) JSON, which
        // YAML parsers read as the same data.
        let tricky = serde_json::json!({"id": "abc\u{202e}fed\u{9b}"});
        let text = structured(OutputFormat::Yaml, &tricky);
        assert!(!text.chars().any(|c| harmful(c) && c != '\n'), "{text:?}");
        assert_eq!(serde_yaml_ng::from_str::<serde_json::Value>(&text).unwrap(), tricky);
    }

    #[test]
    fn suggested_commands_quote_what_a_shell_would_split() {
        assert_eq!(shell_word("orders-tx.1"), "orders-tx.1");
        assert_eq!(shell_word("my tx"), "'my tx'");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
        assert_eq!(shell_word(""), "''");
        assert_eq!(shell_word("a;rm -rf"), "'a;rm -rf'");
        assert_eq!(shell_word("=ls"), "'=ls'");
        assert_eq!(abort_command("orders-tx"), "kaasctl txn abort orders-tx");
        assert_eq!(abort_command("--dry-run"), "kaasctl txn abort -- --dry-run");
        assert_eq!(abort_command("my tx"), "kaasctl txn abort 'my tx'");
    }

    #[test]
    fn ages_and_times_read_well() {
        assert_eq!(age(1_500), "1.5s");
        assert_eq!(age(192_000), "3m12s");
        assert_eq!(age(3_600_000 * 2 + 60_000 * 5), "2h05m");
        assert_eq!(age(86_400_000 * 3), "3d00h");
        assert_eq!(Time::from_ms(0), None);
        let t = Time::from_ms(1_700_000_000_123).unwrap();
        assert_eq!(t.rfc3339, "2023-11-14T22:13:20.123Z");
        assert_eq!(when(1_700_000_000_123), "2023-11-14 22:13:20");
    }
}
