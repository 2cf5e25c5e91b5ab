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

    /// Each column's width; hidden columns get 0 and are skipped when printing.
    ///
    /// Every column has a natural width (its widest cell or header on one line) and
    /// a least one: a whole column's widest cell (its header may wrap at spaces), a
    /// prose column's longest header word or [`PROSE_FLOOR`]. When the naturals do
    /// not fit, every column starts at its least width and the room left is shared
    /// out (water-filling): each column takes no more than it needs, the rest share
    /// evenly what the others leave.
    fn widths(&self) -> Vec<usize> {
        let n = self.names.len();
        let mut natural: Vec<usize> = self.names.iter().map(|h| display_width(h)).collect();
        let mut widest_cell = vec![0; n];
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

    fn write_line(&self, f: &mut fmt::Formatter<'_>, widths: &[usize], cells: &[(&str, Tone)]) -> fmt::Result {
        let mut line = String::with_capacity(widths.iter().sum::<usize>() + 16);
        line.push_str(&" ".repeat(MARGIN));
        let mut first = true;
        for (c, &(text, tone)) in cells.iter().enumerate() {
            if !self.shown[c] {
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

/// `text` in lines of at most `width` columns, broken at spaces only: a word wider
/// than `width` is a line of its own.
fn wrap(text: &str, width: usize) -> Vec<std::borrow::Cow<'_, str>> {
    let options = textwrap::Options::new(width.max(1))
        .word_separator(WordSeparator::AsciiSpace)
        .word_splitter(WordSplitter::NoHyphenation)
        .break_words(false);
    textwrap::wrap(text, options)
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let widths = self.widths();
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
        // Where each column starts on the line, for spanning cells.
        let mut starts = vec![MARGIN; n];
        let mut at = MARGIN;
        for c in (0..n).filter(|&c| self.shown[c]) {
            starts[c] = at;
            at += widths[c] + GAP;
        }
        for (r, row) in std::iter::once(&header).chain(&self.rows).enumerate() {
            let lines: Vec<(Vec<std::borrow::Cow<'_, str>>, Tone)> = (0..n)
                .map(|c| match (row.get(c), self.width) {
                    _ if !self.shown[c] => (Vec::new(), Tone::Plain),
                    (Some(cell), Some(width)) if cell.wraps || self.spans(row, c) => {
                        let room = if self.spans(row, c) {
                            (width as usize).saturating_sub(starts[c]).max(widths[c])
                        } else {
                            widths[c]
                        };
                        if cell.wraps {
                            (wrap(&cell.text, room), cell.tone)
                        } else {
                            (vec![cell.text.as_str().into()], cell.tone)
                        }
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
