//! Drawing the dashboard. Reads `App` only; never touches the volume.

use super::app::{App, Mode, Shown, View, VIEWS};
use crate::out::age;
use kaas_core::txn::TxnState;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Clear, Paragraph, Row, Sparkline, Table, TableState, Tabs, Wrap};
use ratatui::Frame;

/// Below this the dashboard shows a "too small" notice instead of views.
pub const MIN_WIDTH: u16 = 40;
pub const MIN_HEIGHT: u16 = 10;

pub fn draw(f: &mut Frame, app: &App) {
    draw_views(f, app);
    defuse(f.buffer_mut());
}

/// Replaces every cell holding a character a terminal must not receive (a control or
/// bidirectional override from a name or value a client chose; see
/// [`crate::out::harmful`]) with U+FFFD, whatever widget drew it.
fn defuse(buf: &mut ratatui::buffer::Buffer) {
    for cell in buf.content.iter_mut() {
        if cell.symbol().chars().any(crate::out::harmful) {
            cell.set_symbol("\u{fffd}");
        }
    }
}

fn draw_views(f: &mut Frame, app: &App) {
    let area = f.area();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        f.render_widget(
            Paragraph::new(format!(
                "terminal too small ({}x{}); need {MIN_WIDTH}x{MIN_HEIGHT}. q quits.",
                area.width, area.height
            ))
            .wrap(Wrap { trim: true }),
            area,
        );
        return;
    }
    if app.snap.data_dir_missing {
        f.render_widget(
            Paragraph::new("The data directory is not a kaas volume (yet): it does not exist, or has no __cluster directory (a broker makes one at its first start). kaasctl top keeps looking; check --data-dir / KAAS_DATA_DIR. q quits.")
                .block(Block::default().borders(Borders::ALL).title(" kaasctl top "))
                .wrap(Wrap { trim: true }),
            area,
        );
        return;
    }
    let (footer_text, footer_height) = footer(app, area.width);
    let footer_height = footer_height.clamp(1, (area.height / 2).max(1));
    let [tabs, body, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(footer_height),
    ])
    .areas(area);
    let titles: Vec<Line> = VIEWS
        .iter()
        .enumerate()
        .map(|(i, v)| Line::from(format!("{} {}", i + 1, v.title())))
        .collect();
    let selected = VIEWS.iter().position(|v| *v == app.view).unwrap_or(0);
    f.render_widget(
        Tabs::new(titles)
            .select(selected)
            .highlight_style(Style::default().add_modifier(Modifier::BOLD | Modifier::REVERSED)),
        tabs,
    );
    match &app.mode {
        Mode::Detail(id) => detail(f, app, id, body),
        _ => match app.view {
            View::Overview => overview(f, app, body),
            View::Transactions => transactions(f, app, body),
            View::Markers => markers(f, app, body),
            View::Fences => fences(f, app, body),
            View::Partitions => partitions(f, app, body),
            View::Groups => groups(f, app, body),
        },
    }
    f.render_widget(
        Paragraph::new(footer_text).style(Style::default().add_modifier(Modifier::DIM)),
        footer,
    );
    match &app.mode {
        Mode::Help => help(f, area),
        Mode::Confirm(shown) => confirm(f, shown, area),
        _ => {}
    }
}

/// The footer: the keys, and the last result (an abort's outcome, a sort) after them.
/// A result is never cut: when keys and result do not fit the width, the result
/// alone is shown, over as many lines as it needs (at most half the screen). Returns
/// the text and its height.
fn footer(app: &App, width: u16) -> (String, u16) {
    if let Mode::Filter = app.mode {
        return (format!("filter: {}_   (Enter/Esc done)", app.filter), 1);
    }
    let mut keys = String::from("q quit  ? help  Tab view  j/k move");
    if app.view == View::Transactions {
        keys.push_str("  / filter  s sort  Enter detail  a abort");
    }
    keys.push_str("  p pause");
    if app.paused {
        keys.push_str("  [PAUSED]");
    }
    let width = width.max(1) as usize;
    let Some(status) = &app.status else {
        return (keys, 1);
    };
    let both = format!("{keys}  | {status}");
    if textwrap::core::display_width(&both) <= width {
        return (both, 1);
    }
    let lines = wrap_words(status, width);
    let height = lines.len() as u16;
    (lines.join("\n"), height)
}

/// `text` in lines of at most `width` terminal columns (display width: a wide
/// character counts two), broken at spaces, a word longer than a line split across
/// lines.
fn wrap_words(text: &str, width: usize) -> Vec<String> {
    textwrap::wrap(text, width.max(1))
        .into_iter()
        .map(|l| l.into_owned())
        .collect()
}

fn state_style(state: &str, overdue: bool) -> Style {
    if overdue {
        return Style::default().fg(Color::Red).add_modifier(Modifier::BOLD);
    }
    match state {
        "Ongoing" => Style::default().fg(Color::Yellow),
        "PrepareCommit" | "PrepareAbort" => Style::default().fg(Color::Magenta),
        "CompleteCommit" => Style::default().fg(Color::Green),
        "CompleteAbort" => Style::default().fg(Color::Red),
        _ => Style::default(),
    }
}

fn overview(f: &mut Frame, app: &App, area: Rect) {
    let s = &app.snap;
    let items = s.needs_attention();
    // The summaries take what they need, "needs attention" the rest; the charts give
    // way first on short terminals, and to a long list.
    let summary_height = (s.brokers.len().max(1) as u16 + 8).max(11);
    let listed = 2 + items
        .iter()
        .map(|i| wrap_words(&i.text, attention_width(area.width)).len() as u16)
        .sum::<u16>()
        .max(1);
    let chart_height = match area.height {
        0..=13 => 3,
        14..=21 => 5,
        _ => 7,
    }
    .min(area.height.saturating_sub(summary_height + listed))
    .max(3);
    let [top, attention, charts] = Layout::vertical([
        Constraint::Max(summary_height),
        Constraint::Min(3),
        Constraint::Length(chart_height),
    ])
    .areas(area);
    let [left, right] = Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(top);
    needs_attention(f, &items, attention);
    let mut lines = vec![Line::from(Span::styled(
        "Brokers",
        Style::default().add_modifier(Modifier::BOLD),
    ))];
    if s.brokers.is_empty() {
        lines.push(Line::from("  none registered"));
    }
    for b in &s.brokers {
        lines.push(Line::from(vec![
            Span::raw(format!("  broker {:<3} ", b.id)),
            {
                use kaas_core::broker::Liveness;
                let colour = match b.liveness {
                    Liveness::Alive => Color::Green,
                    Liveness::Opening | Liveness::Joining | Liveness::Stale | Liveness::SteppedDown => Color::Yellow,
                    Liveness::Dead => Color::Red,
                    Liveness::Stopped => Color::DarkGray,
                };
                Span::styled(format!("{:<5}", b.liveness.as_str()), Style::default().fg(colour))
            },
            Span::raw(format!("  lease {}", age(b.lease_age_ms))),
        ]));
    }
    let lagging = s
        .partitions
        .iter()
        .filter(|p| p.last_stable_offset < p.high_watermark)
        .count();
    let fences_last_minute = s.fences.iter().filter(|x| s.now_ms - x.recorded_ms < 60_000).count();
    let queue = s.queue_depth();
    let oldest_queue = s
        .queues
        .iter()
        .flat_map(|q| q.entries.iter())
        .filter_map(|(_, e)| e.as_ref().ok())
        .map(|e| s.now_ms - e.enqueued_ms)
        .max();
    lines.push(Line::from(""));
    lines.push(Line::from(Span::styled(
        "Volume",
        Style::default().add_modifier(Modifier::BOLD),
    )));
    lines.push(Line::from(format!(
        "  marker queue depth   {queue}{}",
        oldest_queue
            .map(|a| format!(" (oldest {})", age(a)))
            .unwrap_or_default()
    )));
    lines.push(Line::from(format!("  fence events/min     {fences_last_minute}")));
    lines.push(Line::from(format!(
        "  partitions LSO < HW  {lagging} of {}",
        s.partitions.len()
    )));
    lines.push(if s.errors.is_empty() {
        Line::from("  unreadable files     0")
    } else {
        Line::from(Span::styled(
            format!("  unreadable files     {}", s.errors.len()),
            Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
        ))
    });
    f.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(" Cluster ")),
        left,
    );

    let mut t = vec![Line::from(Span::styled(
        format!("Transactions ({})", s.txn_total()),
        Style::default().add_modifier(Modifier::BOLD),
    ))];
    for st in [
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
        TxnState::Empty,
    ] {
        t.push(Line::from(vec![
            Span::raw("  "),
            Span::styled(format!("{:<15}", st.as_str()), state_style(st.as_str(), false)),
            Span::raw(format!("{:>8}", s.count(st))),
        ]));
    }
    let ongoing: Vec<_> = s.txns().filter(|x| x.state == "Ongoing").collect();
    let overdue = ongoing.iter().filter(|x| x.overdue(s.now_ms)).count();
    t.push(Line::from(vec![
        Span::raw("  "),
        Span::styled(format!("{:<15}", "overdue"), state_style("", overdue > 0)),
        Span::raw(format!("{overdue:>8}")),
    ]));
    let oldest = ongoing
        .iter()
        .filter(|x| x.txn_start_ms > 0)
        .min_by_key(|x| x.txn_start_ms);
    t.push(Line::from(match oldest {
        Some(o) => format!(
            "  oldest Ongoing: {} ({})",
            o.transactional_id,
            age(s.now_ms - o.txn_start_ms)
        ),
        None => "  oldest Ongoing: -".into(),
    }));
    f.render_widget(
        Paragraph::new(t)
            .block(Block::default().borders(Borders::ALL).title(" Transactions "))
            .wrap(Wrap { trim: false }),
        right,
    );

    let [c1, c2, c3] = Layout::horizontal([
        Constraint::Ratio(1, 3),
        Constraint::Ratio(1, 3),
        Constraint::Ratio(1, 3),
    ])
    .areas(charts);
    let series = |v: &std::collections::VecDeque<u64>| v.iter().copied().collect::<Vec<u64>>();
    let total = |v: &std::collections::VecDeque<u64>| v.iter().sum::<u64>();
    f.render_widget(
        Sparkline::default()
            .block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(format!(" commits/tick (Σ {}) ", total(&app.commits))),
            )
            .data(series(&app.commits))
            .style(Style::default().fg(Color::Green)),
        c1,
    );
    f.render_widget(
        Sparkline::default()
            .block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(format!(" aborts/tick (Σ {}) ", total(&app.aborts))),
            )
            .data(series(&app.aborts))
            .style(Style::default().fg(Color::Red)),
        c2,
    );
    f.render_widget(
        Sparkline::default()
            .block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(format!(" marker queue depth ({queue}) ")),
            )
            .data(series(&app.queue_depth))
            .style(Style::default().fg(Color::Yellow)),
        c3,
    );
}

/// The overview's list of what to look at first, the worst first; what does not fit
/// is counted, never cut off silently.
/// The width an attention item's text wraps at, in an area `width` wide (borders, and
/// the mark before each item).
fn attention_width(width: u16) -> usize {
    (width as usize).saturating_sub(2 + 4).max(8)
}

fn needs_attention(f: &mut Frame, items: &[super::data::Attention], area: Rect) {
    use super::data::Severity;
    let rows = area.height.saturating_sub(2) as usize;
    // Each item wrapped under its mark; an item that does not fit whole is left for
    // the count below.
    let text_width = attention_width(area.width);
    let mut lines: Vec<Line> = Vec::new();
    if items.is_empty() {
        lines.push(Line::from(Span::styled(
            "  nothing: every broker live, no transaction late or pinning an LSO, marker queues draining, every file readable",
            Style::default().fg(Color::Green),
        )));
    }
    let wrapped: Vec<Vec<String>> = items.iter().map(|i| wrap_words(&i.text, text_width)).collect();
    // All of them, if they fit; else as many as fit above the "more" line — at least
    // the first, its end cut (and marked) if even it does not fit.
    let room = if wrapped.iter().map(Vec::len).sum::<usize>() <= rows {
        rows
    } else {
        rows.saturating_sub(1)
    };
    let mut shown = 0;
    for (item, mut wrapped) in items.iter().zip(wrapped) {
        let (mark, colour) = match item.severity {
            Severity::Problem => ("  ! ", Color::Red),
            Severity::Warning => ("  • ", Color::Yellow),
        };
        if lines.len() + wrapped.len() > room {
            if shown > 0 || room == 0 {
                break;
            }
            wrapped.truncate(room);
            if let Some(last) = wrapped.last_mut() {
                // Room for the mark: the line cut to its width less two columns.
                let cut = textwrap::wrap(last, text_width.saturating_sub(2).max(1));
                *last = format!("{} …", cut.first().map_or("", |c| c.as_ref()));
            }
        }
        for (n, text) in wrapped.into_iter().enumerate() {
            lines.push(Line::from(vec![
                Span::styled(
                    if n == 0 { mark } else { "    " },
                    Style::default().fg(colour).add_modifier(Modifier::BOLD),
                ),
                Span::styled(text, Style::default().fg(colour)),
            ]));
        }
        shown += 1;
    }
    if shown < items.len() {
        lines.push(Line::from(format!("  … and {} more", items.len() - shown)));
    }
    let problems = items.iter().filter(|i| i.severity == Severity::Problem).count();
    f.render_widget(
        Paragraph::new(lines).block(
            Block::default()
                .borders(Borders::ALL)
                .title(format!(
                    " Needs attention ({} problem(s), {} warning(s)) ",
                    problems,
                    items.len() - problems
                ))
                .border_style(if problems > 0 {
                    Style::default().fg(Color::Red)
                } else if items.is_empty() {
                    Style::default()
                } else {
                    Style::default().fg(Color::Yellow)
                }),
        ),
        area,
    );
}

fn table<'a>(
    f: &mut Frame,
    area: Rect,
    title: String,
    header: &'a [&'a str],
    widths: &[Constraint],
    rows: Vec<Row<'a>>,
    selected: usize,
) {
    let empty = rows.is_empty();
    let t = Table::new(rows, widths.to_vec())
        .header(Row::new(header.iter().map(|h| Cell::from(*h))).style(Style::default().add_modifier(Modifier::BOLD)))
        .block(Block::default().borders(Borders::ALL).title(title))
        .row_highlight_style(Style::default().add_modifier(Modifier::REVERSED));
    let mut state = TableState::default();
    if !empty {
        state.select(Some(selected));
    }
    f.render_stateful_widget(t, area, &mut state);
}

fn transactions(f: &mut Frame, app: &App, area: Rect) {
    // Only the page holding the selection is built and drawn (cheap with 100,000 ids).
    let page = area.height.saturating_sub(3).max(1) as usize;
    let start = app.selected / page * page;
    let now = app.snap.now_ms;
    let rows: Vec<Row> = app
        .visible_rows(start..start + page)
        .map(|t| {
            let overdue = t.overdue(now);
            let open = t.open_age_ms(now);
            Row::new(vec![
                Cell::from(t.transactional_id.clone()),
                Cell::from(t.producer_id.to_string()),
                Cell::from(t.producer_epoch.to_string()),
                Cell::from(t.state).style(state_style(t.state, overdue)),
                Cell::from(t.partitions.to_string()),
                Cell::from(open.map(age).unwrap_or_else(|| "-".into())),
                Cell::from(age(t.timeout_ms as i64)),
                Cell::from(match open {
                    Some(o) if t.state == "Ongoing" => super::data::left(t.timeout_ms as i64 - o),
                    _ => "-".into(),
                })
                .style(state_style("", overdue)),
                Cell::from(
                    app.snap
                        .coordinator(t.slot)
                        .map(|c| c.to_string())
                        .unwrap_or_else(|| "-".into()),
                ),
            ])
        })
        .collect();
    let title = format!(
        " Transactions: {} shown, sort {}{} ",
        app.visible_len(),
        app.sort.name(),
        if app.filter.is_empty() {
            String::new()
        } else {
            format!(", filter \"{}\"", app.filter)
        }
    );
    table(
        f,
        area,
        title,
        &[
            "TRANSACTIONAL ID",
            "PID",
            "EPOCH",
            "STATE",
            "PARTS",
            "AGE",
            "TIMEOUT",
            "LEFT",
            "COORD",
        ],
        &[
            Constraint::Min(16),
            // Transactional producer ids are 2^48 and up: 15 digits.
            Constraint::Length(16),
            Constraint::Length(6),
            Constraint::Length(15),
            Constraint::Length(6),
            Constraint::Length(7),
            Constraint::Length(7),
            // "late 23h59m"
            Constraint::Length(11),
            Constraint::Length(6),
        ],
        rows,
        app.selected - start,
    );
}

fn markers(f: &mut Frame, app: &App, area: Rect) {
    let s = &app.snap;
    let mut rows = Vec::new();
    for q in &s.queues {
        for (path, e) in &q.entries {
            rows.push(match e {
                Ok(e) => Row::new(vec![
                    Cell::from(format!("{}{}", q.broker, if q.alive { "" } else { " (dead)" })),
                    Cell::from(e.transactional_id.clone()),
                    Cell::from(format!("{}/{}", e.producer_id, e.producer_epoch)),
                    Cell::from(format!("{:?}", e.result)),
                    Cell::from(
                        e.partitions
                            .iter()
                            .map(|p| format!("{}-{}", p.topic, p.partition))
                            .collect::<Vec<_>>()
                            .join(","),
                    ),
                    Cell::from(age(s.now_ms - e.enqueued_ms)),
                ]),
                Err(err) => Row::new(vec![
                    Cell::from(q.broker.to_string()),
                    Cell::from(format!("unreadable {}: {err}", path.display())).style(Style::default().fg(Color::Red)),
                ]),
            });
        }
    }
    let depth: Vec<String> = s
        .queues
        .iter()
        .map(|q| format!("to-{}: {}", q.broker, q.entries.len()))
        .collect();
    table(
        f,
        area,
        format!(
            " Marker queue {} ",
            if depth.is_empty() {
                "(empty)".into()
            } else {
                depth.join("  ")
            }
        ),
        &["TO", "TRANSACTIONAL ID", "PRODUCER", "RESULT", "PARTITIONS", "AGE"],
        &[
            Constraint::Length(9),
            Constraint::Min(14),
            // pid/epoch: up to 15 + 1 + 5 characters.
            Constraint::Length(22),
            Constraint::Length(7),
            Constraint::Min(12),
            Constraint::Length(7),
        ],
        rows,
        app.selected,
    );
}

fn fences(f: &mut Frame, app: &App, area: Rect) {
    let s = &app.snap;
    let rows: Vec<Row> = s
        .fences
        .iter()
        .map(|x| {
            Row::new(vec![
                Cell::from(x.writer.clone()),
                Cell::from(x.producer_id.to_string()),
                Cell::from(x.epoch.to_string()),
                Cell::from(x.transactional_id.clone().unwrap_or_else(|| "-".into())),
                Cell::from(age(s.now_ms - x.recorded_ms)),
            ])
        })
        .collect();
    table(
        f,
        area,
        format!(" Fences ({}) ", rows.len()),
        &["FROM", "PRODUCER", "EPOCH", "TRANSACTIONAL ID", "AGE"],
        &[
            Constraint::Length(6),
            Constraint::Length(16),
            Constraint::Length(6),
            Constraint::Min(16),
            Constraint::Length(8),
        ],
        rows,
        app.selected,
    );
}

fn partitions(f: &mut Frame, app: &App, area: Rect) {
    let rows: Vec<Row> = app
        .snap
        .partitions
        .iter()
        .map(|p| {
            let lagging = p.last_stable_offset < p.high_watermark;
            Row::new(vec![
                Cell::from(format!("{}-{}", p.topic, p.partition)),
                Cell::from(p.leader.map(|l| l.to_string()).unwrap_or_else(|| "-".into())),
                Cell::from(p.high_watermark.to_string()),
                Cell::from(p.last_stable_offset.to_string()).style(if lagging {
                    Style::default().fg(Color::Yellow)
                } else {
                    Style::default()
                }),
                Cell::from(p.open.len().to_string()),
                Cell::from(p.producers.to_string()),
                // A broken partition's error first (nothing else of it is known for
                // sure); else the transaction holding its LSO back.
                match (&p.error, &p.pinned_by) {
                    (Some(e), _) => Cell::from(e.clone()).style(Style::default().fg(Color::Red)),
                    (None, Some(pin)) => match &pin.transactional_id {
                        Some(tid) if pin.hanging => Cell::from(format!(
                            "producer {} (hanging: {tid} is {}; kaasctl txn repair --fix)",
                            pin.producer_id, pin.state
                        ))
                        .style(Style::default().fg(Color::Red)),
                        Some(tid) => Cell::from(format!(
                            "{tid} ({}{})",
                            pin.state,
                            if pin.txn_start_ms > 0 {
                                format!(" {}", age(app.snap.now_ms - pin.txn_start_ms))
                            } else {
                                String::new()
                            },
                        ))
                        .style(Style::default().fg(Color::Yellow)),
                        None if app.snap.unreadable_slots > 0 => Cell::from(format!(
                            "producer {} (no readable coordinator entry: a slot file is unreadable)",
                            pin.producer_id
                        ))
                        .style(Style::default().fg(Color::Red)),
                        None => Cell::from(format!(
                            "producer {} (hanging: no coordinator entry; kaasctl txn repair --fix)",
                            pin.producer_id
                        ))
                        .style(Style::default().fg(Color::Red)),
                    },
                    (None, None) => Cell::from(""),
                },
            ])
        })
        .collect();
    table(
        f,
        area,
        format!(" Partitions ({}) ", rows.len()),
        &[
            "PARTITION",
            "LEADER",
            "HW",
            "LSO",
            "OPEN TXNS",
            "PRODUCERS",
            "PINNED BY / PROBLEM",
        ],
        &[
            Constraint::Length(18),
            Constraint::Length(7),
            Constraint::Length(9),
            Constraint::Length(9),
            Constraint::Length(10),
            Constraint::Length(10),
            Constraint::Fill(1),
        ],
        rows,
        app.selected,
    );
}

fn groups(f: &mut Frame, app: &App, area: Rect) {
    let rows: Vec<Row> = app
        .snap
        .groups
        .iter()
        .map(|g| {
            Row::new(vec![
                Cell::from(g.group.clone()),
                Cell::from(format!("{}-{}", g.topic, g.partition)),
                Cell::from(g.committed.to_string()),
                Cell::from(g.lag.to_string()),
                Cell::from(g.real_lag.to_string()),
                Cell::from(g.blocked.to_string()).style(if g.blocked > 0 {
                    Style::default().fg(Color::Yellow)
                } else {
                    Style::default()
                }),
                Cell::from(g.staged.to_string()),
            ])
        })
        .collect();
    table(
        f,
        area,
        format!(" Consumer groups ({} partitions) ", rows.len()),
        &["GROUP", "PARTITION", "COMMITTED", "LAG", "REAL", "BLOCKED", "STAGED"],
        &[
            Constraint::Min(12),
            Constraint::Min(12),
            Constraint::Length(10),
            Constraint::Length(8),
            Constraint::Length(8),
            Constraint::Length(8),
            Constraint::Length(7),
        ],
        rows,
        app.selected,
    );
}

fn detail(f: &mut Frame, app: &App, id: &str, area: Rect) {
    let s = &app.snap;
    let mut lines = Vec::new();
    match s.entry(id) {
        None => lines.push(Line::from(format!("{id}: no longer on the volume"))),
        Some(e) => {
            let slot = kaas_core::txn::slot_for(id);
            lines.push(Line::from(vec![
                Span::styled(format!("{id}  "), Style::default().add_modifier(Modifier::BOLD)),
                Span::styled(e.state.as_str(), state_style(e.state.as_str(), e.is_overdue(s.now_ms))),
                Span::raw(format!(
                    "  producer {} epoch {}  timeout {}",
                    e.producer_id,
                    e.producer_epoch,
                    age(e.timeout_ms as i64)
                )),
            ]));
            let open = e.txn_start_ms > 0
                && !matches!(
                    e.state,
                    TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
                );
            lines.push(Line::from(format!(
                "slot {slot}  coordinator {}  open for {}",
                s.coordinator(slot)
                    .map(|c| c.to_string())
                    .unwrap_or_else(|| "none alive".into()),
                if open {
                    age(s.now_ms - e.txn_start_ms)
                } else {
                    "-".into()
                }
            )));
            lines.push(Line::from(""));
            lines.push(Line::from(Span::styled(
                "Partitions",
                Style::default().add_modifier(Modifier::BOLD),
            )));
            if e.partitions.is_empty() {
                lines.push(Line::from("  none"));
            }
            for tp in &e.partitions {
                let p = s
                    .partitions
                    .iter()
                    .find(|p| p.topic == tp.topic && p.partition == tp.partition);
                lines.push(Line::from(match p {
                    Some(p) => format!(
                        "  {}-{}  leader {}  HW {}  LSO {}  {}",
                        tp.topic,
                        tp.partition,
                        p.leader.map(|l| l.to_string()).unwrap_or_else(|| "-".into()),
                        p.high_watermark,
                        p.last_stable_offset,
                        if p.open.iter().any(|(pid, _)| *pid == e.producer_id) {
                            "marker pending"
                        } else {
                            "marker landed"
                        }
                    ),
                    None => format!("  {}-{}  (unknown partition)", tp.topic, tp.partition),
                }));
            }
            lines.push(Line::from(Span::styled(
                "Staged offsets",
                Style::default().add_modifier(Modifier::BOLD),
            )));
            match s.staged.get(&e.producer_id) {
                Some(st) => {
                    for (g, t, p, o) in st {
                        lines.push(Line::from(format!("  {g}: {t}-{p} -> {o}")));
                    }
                }
                None => lines.push(Line::from("  none")),
            }
            lines.push(Line::from(Span::styled(
                "Queued markers",
                Style::default().add_modifier(Modifier::BOLD),
            )));
            let mut any = false;
            for q in &s.queues {
                for (_, m) in &q.entries {
                    if let Ok(m) = m {
                        if m.producer_id == e.producer_id {
                            any = true;
                            lines.push(Line::from(format!(
                                "  {:?} epoch {} for broker {} ({} partitions)",
                                m.result,
                                m.producer_epoch,
                                q.broker,
                                m.partitions.len()
                            )));
                        }
                    }
                }
            }
            if !any {
                lines.push(Line::from("  none"));
            }
            lines.push(Line::from(Span::styled(
                "Changes since the dashboard started",
                Style::default().add_modifier(Modifier::BOLD),
            )));
            match app.changes.get(id) {
                Some(ch) => {
                    for (at, text) in ch.iter().rev().take(10) {
                        lines.push(Line::from(format!("  {} ago: {text}", age(s.now_ms - at))));
                    }
                }
                None => lines.push(Line::from("  none")),
            }
        }
    }
    f.render_widget(
        Paragraph::new(lines)
            .block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(" Transaction (Esc back, a abort) "),
            )
            .wrap(Wrap { trim: false }),
        area,
    );
}

fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect::new(area.x + (area.width - w) / 2, area.y + (area.height - h) / 2, w, h)
}

fn help(f: &mut Frame, area: Rect) {
    let r = centered(area, 64, 15);
    f.render_widget(Clear, r);
    let keys = [
        ("Tab / ← →, 1-6", "switch view"),
        ("↑ ↓ / j k", "move"),
        ("PgUp PgDn Home End", "jump"),
        ("/", "filter transactions"),
        ("s", "cycle sort: age, state, pid, id"),
        ("Enter", "transaction detail"),
        ("Esc", "back / clear filter"),
        ("a", "force-abort the selected transaction"),
        ("p", "pause / resume refresh"),
        ("?", "this help"),
        ("q, Ctrl-C", "quit"),
    ];
    let lines: Vec<Line> = keys
        .iter()
        .map(|(k, v)| {
            Line::from(vec![
                Span::styled(format!(" {k:<20}"), Style::default().add_modifier(Modifier::BOLD)),
                Span::raw(*v),
            ])
        })
        .collect();
    f.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(" Keys (any key closes) ")),
        r,
    );
}

/// What is asked is what was selected: the transaction `shown` (an entry that moved on
/// since is refused when confirmed, see `top::abort`).
fn confirm(f: &mut Frame, shown: &Shown, area: Rect) {
    let r = centered(area, 60, 8);
    f.render_widget(Clear, r);
    let text = vec![
        Line::from(Span::styled(
            format!("Force-abort {}?", shown.id),
            Style::default().add_modifier(Modifier::BOLD),
        )),
        Line::from(format!(
            "producer {} epoch {} -> {}, transaction {}, {} partition(s)",
            shown.producer_id,
            shown.epoch,
            shown.epoch.saturating_add(1),
            shown.txn_seq,
            shown.partitions
        )),
        Line::from("ABORT markers, staged offsets discarded, producer fenced."),
        Line::from(""),
        Line::from("y: abort   any other key: cancel"),
    ];
    f.render_widget(
        Paragraph::new(text).block(
            Block::default()
                .borders(Borders::ALL)
                .title(" Confirm ")
                .style(Style::default().fg(Color::Red)),
        ),
        r,
    );
}
