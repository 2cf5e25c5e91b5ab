//! kaasctl's tables for people: borderless like kubectl's, laid out to the terminal's
//! width without ever splitting a word.
//!
//! What identifies a row — a transactional id, a topic, a path in an error — is what
//! an operator greps for and pastes into the next command, so it must come out whole
//! at any width. Cells are either whole ([`Out::cell`](super::Out::cell): never
//! wrapped) or prose ([`Out::text`](super::Out::text): wrapped at spaces only). A
//! word wider than its column goes on a line of its own and sticks out; a table whose
//! whole cells do not fit grows past the terminal. (comfy-table, which printed these
//! tables before, splits any word at the column edge, `evil.j` + `son`.)

use super::{ansi, Tone};
use std::fmt;
use textwrap::core::display_width;
use textwrap::{WordSeparator, WordSplitter};

/// Spaces before the first column.
const MARGIN: usize = 1;
/// Spaces between two columns.
const GAP: usize = 2;
/// A prose column is not squeezed below this many characters (nor below its
/// header) while there is room: narrower, every word would get a line of its own.
const PROSE_FLOOR: usize = 12;
/// Before the room left is shared, each prose column gets room for its longest word
/// (a quoted command, a name) up to this many characters, as far as the terminal
/// allows; longer words (paths, usually) go on a line of their own and stick out.
const WORD_FLOOR: usize = 32;

/// One cell: its text (already made [`safe`](super::safe)), its colour, and whether
/// it may wrap.
#[derive(Debug, Clone)]
pub struct Cell {
    pub(super) text: String,
    pub(super) tone: Tone,
    pub(super) wraps: bool,
}

/// Rows under a header, printed by its `Display`.
pub struct Table {
    /// Header names, `~` removed.
    pub(super) names: Vec<String>,
    /// Which columns are printed (`--wide`, `--columns`).
    pub(super) shown: Vec<bool>,
    pub(super) rows: Vec<Vec<Cell>>,
    /// The width to fit; None: every cell on one line, whatever its length.
    pub(super) width: Option<u16>,
    pub(super) color: bool,
}

impl Table {
    /// Adds a row. In a row with fewer cells than the header, the last cell spans
    /// the columns after its own (an error in place of the values, say): it does not
    /// widen its column, and wraps to the terminal's edge.
    pub fn add_row(&mut self, cells: Vec<Cell>) {
        self.rows.push(cells);
    }

    /// Whether cell `c` of `row` is the spanning last cell of a short row.
    fn spans(&self, row: &[Cell], c: usize) -> bool {
        row.len() < self.names.len() && c + 1 == row.len()
    }

    /// The row's cells by printed column (`names.len()` + 1 of them: the last is past
    /// the table's last column). A short row's spanning cell whose own column is hidden
    /// (`--columns`) moves to the next shown column, or past the last one, so an error
    /// is never hidden with its column. Also returns that cell's column.
    fn place<'r>(&self, row: &'r [Cell]) -> (Vec<Option<&'r Cell>>, Option<usize>) {
        let n = self.names.len();
        let mut placed: Vec<Option<&Cell>> = (0..=n).map(|c| row.get(c).filter(|_| c < n)).collect();
        if row.is_empty() || row.len() >= n {
            return (placed, None);
        }
        let own = row.len() - 1;
        let at = (own..n).find(|&c| self.shown[c]).unwrap_or(n);
        placed[own] = None;
        placed[at] = row.last();
        (placed, Some(at))
    }

    /// Each column's width; hidden columns get 0 and are skipped when printing.
    ///
    /// Every column has a natural width (its widest cell or header on one line) and
    /// a least one: a whole column's widest cell (its header may wrap at spaces), a
    /// prose column's longest header word or [`PROSE_FLOOR`], then its longest word up
    /// to [`WORD_FLOOR`] while there is room. When the naturals do
    /// not fit, every column starts at its least width and the room left is shared
    /// out (water-filling): each column takes no more than it needs, the rest share
    /// evenly what the others leave.
    fn widths(&self) -> Vec<usize> {
        let n = self.names.len();
        let mut natural: Vec<usize> = self.names.iter().map(|h| display_width(h)).collect();
        let mut widest_cell = vec![0; n];
        let mut longest_word = vec![0; n];
        let mut prose = vec![false; n];
        for row in &self.rows {
            for (c, cell) in row.iter().enumerate().take(n) {
                if self.spans(row, c) {
                    continue;
                }
                let w = display_width(&cell.text);
                natural[c] = natural[c].max(w);
                if cell.wraps {
                    prose[c] = true;
                    let words = quoted_words(&cell.text).map(|w| display_width(w.word));
                    longest_word[c] = longest_word[c].max(words.filter(|&w| w <= WORD_FLOOR).max().unwrap_or(0));
                } else {
                    widest_cell[c] = widest_cell[c].max(w);
                }
            }
        }
        let shown: Vec<usize> = (0..n).filter(|&c| self.shown[c]).collect();
        let mut widths = vec![0; n];
        for &c in &shown {
            widths[c] = natural[c];
        }
        let Some(width) = self.width else {
            return widths;
        };
        let budget = (width as usize).saturating_sub(MARGIN + GAP * shown.len().saturating_sub(1));
        if shown.iter().map(|&c| natural[c]).sum::<usize>() <= budget {
            return widths;
        }
        for &c in &shown {
            let header_word = self.names[c].split(' ').map(display_width).max().unwrap_or(0);
            let floor = if prose[c] { PROSE_FLOOR.min(natural[c]) } else { 0 };
            widths[c] = header_word.max(widest_cell[c]).max(floor);
        }
        let mut left = budget.saturating_sub(shown.iter().map(|&c| widths[c]).sum());
        // Room for each prose column's longest word first, as far as the terminal allows.
        for &c in shown.iter().filter(|&&c| prose[c]) {
            let add = longest_word[c].min(natural[c]).saturating_sub(widths[c]).min(left);
            widths[c] += add;
            left -= add;
        }
        let mut open: Vec<usize> = shown.iter().copied().filter(|&c| widths[c] < natural[c]).collect();
        while left > 0 && !open.is_empty() {
            let share = (left / open.len()).max(1);
            for &c in &open {
                let add = share.min(natural[c] - widths[c]).min(left);
                widths[c] += add;
                left -= add;
            }
            open.retain(|&c| widths[c] < natural[c]);
        }
        widths
    }

    /// One printed line: `cells` by column, with one more past the last column.
    fn write_line(&self, f: &mut fmt::Formatter<'_>, widths: &[usize], cells: &[(&str, Tone)]) -> fmt::Result {
        let mut line = String::with_capacity(widths.iter().sum::<usize>() + 16);
        line.push_str(&" ".repeat(MARGIN));
        let mut first = true;
        for (c, &(text, tone)) in cells.iter().enumerate() {
            let past_the_last = c == self.names.len();
            if past_the_last && text.is_empty() || !past_the_last && !self.shown[c] {
                continue;
            }
            if !first {
                line.push_str(&" ".repeat(GAP));
            }
            first = false;
            match (self.color, ansi(tone)) {
                (true, Some(code)) if !text.is_empty() => {
                    line.push_str(code);
                    line.push_str(text);
                    line.push_str("\x1b[0m");
                }
                _ => line.push_str(text),
            }
            line.push_str(&" ".repeat(widths[c].saturating_sub(display_width(text))));
        }
        f.write_str(line.trim_end())
    }
}

/// `text` in lines of at most `width` columns, broken at spaces only, and never
/// inside a quoted span (`"a group id"`, `` `kaasctl txn abort 'a b'` ``): names with
/// spaces and suggested commands stay whole. A word wider than `width` is a line of
/// its own.
fn wrap(text: &str, width: usize) -> Vec<std::borrow::Cow<'_, str>> {
    let options = textwrap::Options::new(width.max(1))
        .word_separator(WordSeparator::Custom(quoted_words))
        .word_splitter(WordSplitter::NoHyphenation)
        .break_words(false);
    textwrap::wrap(text, options)
}

/// The words of `line` for [`wrap`]: split after runs of spaces, except inside a
/// span opened by `"` or `` ` `` (a backslash escapes the next character, as in the
/// Debug form of a string), which is one word however many spaces it holds.
fn quoted_words(line: &str) -> Box<dyn Iterator<Item = textwrap::core::Word<'_>> + '_> {
    let mut words = Vec::new();
    let mut start = 0;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut after_space = false;
    for (i, ch) in line.char_indices() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if ch == '\\' {
                escaped = true;
            } else if ch == q {
                quote = None;
            }
            continue;
        }
        if ch == ' ' {
            after_space = true;
            continue;
        }
        if after_space {
            words.push(textwrap::core::Word::from(&line[start..i]));
            start = i;
            after_space = false;
        }
        if ch == '"' || ch == '`' {
            quote = Some(ch);
        }
    }
    if start < line.len() {
        words.push(textwrap::core::Word::from(&line[start..]));
    }
    Box::new(words.into_iter())
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.names.len();
        // The header wraps at spaces like prose; it is the first "row".
        let header: Vec<Cell> = self
            .names
            .iter()
            .map(|h| Cell {
                text: h.clone(),
                tone: Tone::Header,
                wraps: true,
            })
            .collect();
        // Where each column starts on the line, for spanning cells; one more column
        // past the last (width 0) for a spanning cell whose own column is hidden.
        let mut widths = self.widths();
        widths.push(0);
        let mut starts = vec![MARGIN; n + 1];
        let mut at = MARGIN;
        for c in (0..=n).filter(|&c| c == n || self.shown[c]) {
            starts[c] = at;
            at += widths[c] + GAP;
        }
        for (r, row) in std::iter::once(&header).chain(&self.rows).enumerate() {
            let (placed, spanning) = if r == 0 {
                ((0..=n).map(|c| row.get(c)).collect(), None)
            } else {
                self.place(row)
            };
            let lines: Vec<(Vec<std::borrow::Cow<'_, str>>, Tone)> = (0..=n)
                .map(|c| match (placed[c], self.width) {
                    _ if c < n && !self.shown[c] => (Vec::new(), Tone::Plain),
                    (Some(cell), Some(width)) if cell.wraps => {
                        let room = if spanning == Some(c) {
                            (width as usize)
                                .saturating_sub(starts[c])
                                .max(widths[c])
                                .max(PROSE_FLOOR)
                        } else {
                            widths[c]
                        };
                        (wrap(&cell.text, room), cell.tone)
                    }
                    (Some(cell), _) => (vec![cell.text.as_str().into()], cell.tone),
                    (None, _) => (Vec::new(), Tone::Plain),
                })
                .collect();
            let height = lines.iter().map(|(l, _)| l.len()).max().unwrap_or(0).max(1);
            for i in 0..height {
                if r > 0 || i > 0 {
                    f.write_str("\n")?;
                }
                let cells: Vec<(&str, Tone)> = lines
                    .iter()
                    .map(|(l, tone)| (l.get(i).map(|s| s.as_ref()).unwrap_or(""), *tone))
                    .collect();
                self.write_line(f, &widths, &cells)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(width: Option<u16>, header: &[&str], rows: &[&[(&str, bool)]]) -> String {
        Table {
            names: header.iter().map(|h| h.to_string()).collect(),
            shown: vec![true; header.len()],
            rows: rows
                .iter()
                .map(|r| {
                    r.iter()
                        .map(|&(text, wraps)| Cell {
                            text: text.into(),
                            tone: Tone::Plain,
                            wraps,
                        })
                        .collect()
                })
                .collect(),
            width,
            color: false,
        }
        .to_string()
    }

    const PATH: &str = "/tmp/pytest-of-root/pytest-3/test_hostile_topic_files_are0/data/__cluster/topics/evil.json";

    #[test]
    fn a_path_in_prose_is_never_split_at_any_width() {
        let message = format!("{PATH}: not a regular file (a fifo); refusing to read it");
        for width in 20..=200u16 {
            let text = table(
                Some(width),
                &["TOPIC", "PARTITIONS", "TOPIC ID", "CONFIGS"],
                &[&[("(unreadable)", false), ("", false), ("", false), (&message, true)]],
            );
            assert!(text.lines().any(|l| l.contains(PATH)), "{width} columns:\n{text}");
            // Every word of the message is whole on some line.
            for word in message.split(' ') {
                assert!(text.lines().any(|l| l.contains(word)), "{width}: {word:?}\n{text}");
            }
        }
    }

    #[test]
    fn prose_wraps_at_spaces_to_fit_and_whole_cells_never_wrap() {
        let text = table(
            Some(40),
            &["ID", "DETAIL"],
            &[&[
                ("orders tx 1", false),
                ("the marker for orders-0 is queued for broker 2 since 3m", true),
            ]],
        );
        for line in text.lines() {
            assert!(line.chars().count() <= 40, "{line:?}\n{text}");
        }
        assert!(
            text.lines().nth(1).unwrap().starts_with(" orders tx 1  the marker"),
            "{text}"
        );
        assert!(text.lines().count() > 2, "{text}");
        // The prose column starts at the same place on every line.
        let at = text.lines().nth(1).unwrap().find("the").unwrap();
        for line in text.lines().skip(2) {
            assert_eq!(line.find(|c| c != ' '), Some(at), "{text}");
        }
    }

    #[test]
    fn the_last_cell_of_a_short_row_spans_the_columns_after_it() {
        let message = format!("{PATH}: not valid JSON for topic metadata: EOF while parsing a value");
        let text = table(
            Some(80),
            &["TOPIC", "PARTITIONS", "TOPIC ID", "CONFIGS"],
            &[
                &[
                    ("orders", false),
                    ("2", false),
                    ("00000000-0000-0000-0000-000000000001", false),
                    ("", true),
                ],
                &[("(unreadable)", false), (&message, true)],
            ],
        );
        // The error does not widen PARTITIONS, and wraps at the terminal's edge.
        assert!(text.starts_with(" TOPIC         PARTITIONS  TOPIC ID"), "{text}");
        assert!(
            text.lines().any(|l| l.contains(&format!("(unreadable)  {PATH}:"))),
            "{text}"
        );
        for line in text.lines().filter(|l| !l.contains(PATH)) {
            assert!(line.chars().count() <= 80, "{line:?}\n{text}");
        }
        assert!(
            text.lines()
                .any(|l| l.starts_with("               not valid JSON for topic metadata: EOF")),
            "{text}"
        );
    }

    #[test]
    fn an_error_whose_column_is_hidden_is_shown_in_the_next_or_past_the_last() {
        let render = |shown: Vec<bool>| {
            Table {
                names: vec!["TOPIC".into(), "PARTITIONS".into(), "CONFIGS".into()],
                shown,
                rows: vec![vec![
                    Cell {
                        text: "(unreadable)".into(),
                        tone: Tone::Plain,
                        wraps: false,
                    },
                    Cell {
                        text: format!("{PATH}: not a regular file"),
                        tone: Tone::Plain,
                        wraps: true,
                    },
                ]],
                width: Some(80),
                color: false,
            }
            .to_string()
        };
        // PARTITIONS hidden: the error moves to CONFIGS.
        let text = render(vec![true, false, true]);
        assert!(
            text.lines().any(|l| l.contains(PATH)) && !text.contains("PARTITIONS"),
            "{text}"
        );
        // Only TOPIC shown (`--columns TOPIC`): the error follows it.
        let text = render(vec![true, false, false]);
        assert!(
            text.lines()
                .any(|l| l.starts_with(" (unreadable)  ") && l.contains(PATH)),
            "{text}"
        );
    }

    #[test]
    fn quoted_names_and_suggested_commands_are_never_broken() {
        let detail = "\"my orders tx\" has been open 2m00s, past its timeout; now: `kaasctl txn abort 'my orders tx'`";
        for width in 20..=120u16 {
            let text = table(
                Some(width),
                &["CHECK", "FINDING"],
                &[&[("transactions", false), (detail, true)]],
            );
            assert!(text.contains("\"my orders tx\""), "{width}:\n{text}");
            assert!(text.contains("`kaasctl txn abort 'my orders tx'`"), "{width}:\n{text}");
        }
        // A Debug-escaped quote inside a name does not end the name.
        let words: Vec<String> = quoted_words(r#"a "x\" y" b"#).map(|w| w.word.to_string()).collect();
        assert_eq!(words, ["a", r#""x\" y""#, "b"]);
    }

    #[test]
    fn whole_cells_wider_than_the_terminal_grow_the_table_instead_of_splitting() {
        let id = "a-transactional-id-that-is-longer-than-the-terminal-is-wide";
        let text = table(
            Some(30),
            &["TRANSACTIONAL ID", "STATE"],
            &[&[(id, false), ("Ongoing", false)]],
        );
        assert!(text.lines().any(|l| l.contains(id) && l.contains("Ongoing")), "{text}");
    }

    #[test]
    fn without_a_width_every_row_is_one_line_and_lines_carry_no_trailing_spaces() {
        let long = "word ".repeat(60);
        let text = table(
            None,
            &["A", "B", "C"],
            &[&[("x", false), (long.trim(), true)], &[("y", false)]],
        );
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(text.lines().all(|l| !l.ends_with(' ')), "{text:?}");
        assert!(text.lines().next().unwrap().starts_with(" A  B"), "{text}");
    }
}
