//! The dashboard's state. Rendering only reads it; keys, ticks and finished background
//! actions are the only things that change it (see `Event`).

use super::data::Snapshot;
use kaas_core::txn::TxnState;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::collections::{BTreeMap, VecDeque};

/// Points kept for the sparklines.
pub const SERIES_LEN: usize = 120;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    Overview,
    Transactions,
    Markers,
    Fences,
    Partitions,
    Groups,
}

pub const VIEWS: [View; 6] = [
    View::Overview,
    View::Transactions,
    View::Markers,
    View::Fences,
    View::Partitions,
    View::Groups,
];

impl View {
    pub fn title(&self) -> &'static str {
        match self {
            View::Overview => "Overview",
            View::Transactions => "Transactions",
            View::Markers => "Markers",
            View::Fences => "Fences",
            View::Partitions => "Partitions",
            View::Groups => "Groups",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    Id,
    Age,
    State,
    Pid,
}

impl Sort {
    fn next(self) -> Sort {
        match self {
            Sort::Id => Sort::Age,
            Sort::Age => Sort::State,
            Sort::State => Sort::Pid,
            Sort::Pid => Sort::Id,
        }
    }
    pub fn name(&self) -> &'static str {
        match self {
            Sort::Id => "id",
            Sort::Age => "age",
            Sort::State => "state",
            Sort::Pid => "pid",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    Normal,
    /// Typing a filter after `/`.
    Filter,
    /// The detail of one transaction.
    Detail(String),
    /// Asking before force-aborting this transaction.
    Confirm(String),
    Help,
}

/// What the main loop must do after a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    None,
    Quit,
    Abort(String),
}

pub struct App {
    pub view: View,
    pub mode: Mode,
    pub selected: usize,
    pub filter: String,
    pub sort: Sort,
    pub paused: bool,
    pub snap: Snapshot,
    pub status: Option<String>,
    pub commits: VecDeque<u64>,
    pub aborts: VecDeque<u64>,
    pub queue_depth: VecDeque<u64>,
    /// What changed per transactional id since the dashboard started: (ms, text).
    pub changes: BTreeMap<String, Vec<(i64, String)>>,
    prev: Option<BTreeMap<String, (&'static str, i16)>>,
}

impl Default for App {
    fn default() -> Self {
        App::new()
    }
}

impl App {
    pub fn new() -> App {
        App {
            view: View::Overview,
            mode: Mode::Normal,
            selected: 0,
            filter: String::new(),
            sort: Sort::Id,
            paused: false,
            snap: Snapshot::default(),
            status: None,
            commits: VecDeque::new(),
            aborts: VecDeque::new(),
            queue_depth: VecDeque::new(),
            changes: BTreeMap::new(),
            prev: None,
        }
    }

    /// Takes a fresh snapshot: counts the commits/aborts since the last one (entries
    /// that reached CompleteCommit/CompleteAbort), records what changed.
    pub fn on_snapshot(&mut self, snap: Snapshot) {
        let now: BTreeMap<String, (&'static str, i16)> = snap
            .txns
            .iter()
            .map(|t| (t.transactional_id.clone(), (t.state, t.producer_epoch)))
            .collect();
        let (mut commits, mut aborts) = (0, 0);
        if let Some(prev) = &self.prev {
            for (id, &(state, epoch)) in &now {
                let before = prev.get(id);
                if before != Some(&(state, epoch)) {
                    if state == TxnState::CompleteCommit.as_str() {
                        commits += 1;
                    } else if state == TxnState::CompleteAbort.as_str() {
                        aborts += 1;
                    }
                    let text = match before {
                        Some((s, e)) => format!("{s} -> {state} (epoch {e} -> {epoch})"),
                        None => format!("appeared as {state} (epoch {epoch})"),
                    };
                    let log = self.changes.entry(id.clone()).or_default();
                    log.push((snap.now_ms, text));
                    if log.len() > 50 {
                        log.remove(0);
                    }
                }
            }
            push(&mut self.commits, commits);
            push(&mut self.aborts, aborts);
            push(&mut self.queue_depth, snap.queue_depth() as u64);
        }
        self.prev = Some(now);
        self.snap = snap;
        let len = self.rows_in_view();
        if self.selected >= len {
            self.selected = len.saturating_sub(1);
        }
    }

    /// Transactions after the filter and sort.
    pub fn visible_txns(&self) -> Vec<&crate::cmd::txn::TxnRow> {
        let f = self.filter.to_lowercase();
        let mut rows: Vec<_> = self
            .snap
            .txns
            .iter()
            .filter(|t| {
                f.is_empty() || t.transactional_id.to_lowercase().contains(&f) || t.state.to_lowercase().contains(&f)
            })
            .collect();
        match self.sort {
            Sort::Id => {}
            Sort::Age => rows.sort_by_key(|t| std::cmp::Reverse(t.open_age_ms.unwrap_or(-1))),
            Sort::State => rows.sort_by(|a, b| a.state.cmp(b.state).then(a.transactional_id.cmp(&b.transactional_id))),
            Sort::Pid => rows.sort_by_key(|t| t.producer_id),
        }
        rows
    }

    fn rows_in_view(&self) -> usize {
        match self.view {
            View::Overview => 0,
            View::Transactions => self.visible_txns().len(),
            View::Markers => self.snap.queues.iter().map(|q| q.entries.len()).sum(),
            View::Fences => self.snap.fences.len(),
            View::Partitions => self.snap.partitions.len(),
            View::Groups => self.snap.groups.len(),
        }
    }

    fn selected_txn(&self) -> Option<String> {
        self.visible_txns()
            .get(self.selected)
            .map(|t| t.transactional_id.clone())
    }

    pub fn on_key(&mut self, key: KeyEvent) -> Action {
        if key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL) {
            return Action::Quit;
        }
        match self.mode.clone() {
            Mode::Filter => {
                match key.code {
                    KeyCode::Enter | KeyCode::Esc => self.mode = Mode::Normal,
                    KeyCode::Backspace => {
                        self.filter.pop();
                    }
                    KeyCode::Char(c) => self.filter.push(c),
                    _ => {}
                }
                self.selected = 0;
                Action::None
            }
            Mode::Confirm(id) => match key.code {
                KeyCode::Char('y') | KeyCode::Char('Y') => {
                    self.mode = Mode::Normal;
                    self.status = Some(format!("aborting {id}..."));
                    Action::Abort(id)
                }
                _ => {
                    self.mode = Mode::Normal;
                    self.status = Some("abort cancelled".into());
                    Action::None
                }
            },
            Mode::Help => {
                self.mode = Mode::Normal;
                if key.code == KeyCode::Char('q') {
                    return Action::Quit;
                }
                Action::None
            }
            Mode::Detail(id) => match key.code {
                KeyCode::Esc | KeyCode::Backspace => {
                    self.mode = Mode::Normal;
                    Action::None
                }
                KeyCode::Char('q') => Action::Quit,
                KeyCode::Char('a') => self.ask_abort(id),
                _ => Action::None,
            },
            Mode::Normal => self.on_normal_key(key),
        }
    }

    fn ask_abort(&mut self, id: String) -> Action {
        let ongoing = self.snap.entries.get(&id).is_some_and(|e| e.state == TxnState::Ongoing);
        if ongoing {
            self.mode = Mode::Confirm(id);
        } else {
            self.status = Some(format!("{id} has no open transaction to abort"));
        }
        Action::None
    }

    fn on_normal_key(&mut self, key: KeyEvent) -> Action {
        let len = self.rows_in_view();
        match key.code {
            KeyCode::Char('q') => return Action::Quit,
            KeyCode::Char('?') => self.mode = Mode::Help,
            KeyCode::Char('p') => {
                self.paused = !self.paused;
                self.status = Some(if self.paused { "paused".into() } else { "resumed".into() });
            }
            KeyCode::Tab | KeyCode::Right => self.switch(1),
            KeyCode::BackTab | KeyCode::Left => self.switch(VIEWS.len() - 1),
            KeyCode::Char(c @ '1'..='6') => {
                self.view = VIEWS[(c as u8 - b'1') as usize];
                self.selected = 0;
            }
            KeyCode::Down | KeyCode::Char('j') if len > 0 => self.selected = (self.selected + 1).min(len - 1),
            KeyCode::Up | KeyCode::Char('k') => self.selected = self.selected.saturating_sub(1),
            KeyCode::PageDown => self.selected = (self.selected + 10).min(len.saturating_sub(1)),
            KeyCode::PageUp => self.selected = self.selected.saturating_sub(10),
            KeyCode::Home | KeyCode::Char('g') => self.selected = 0,
            KeyCode::End | KeyCode::Char('G') => self.selected = len.saturating_sub(1),
            KeyCode::Char('/') if self.view == View::Transactions => self.mode = Mode::Filter,
            KeyCode::Char('s') if self.view == View::Transactions => {
                self.sort = self.sort.next();
                self.status = Some(format!("sorted by {}", self.sort.name()));
            }
            KeyCode::Enter if self.view == View::Transactions => {
                if let Some(id) = self.selected_txn() {
                    self.mode = Mode::Detail(id);
                }
            }
            KeyCode::Char('a') if self.view == View::Transactions => {
                if let Some(id) = self.selected_txn() {
                    return self.ask_abort(id);
                }
            }
            KeyCode::Esc => {
                self.filter.clear();
                self.status = None;
            }
            _ => {}
        }
        Action::None
    }

    fn switch(&mut self, by: usize) {
        let i = VIEWS.iter().position(|v| *v == self.view).unwrap_or(0);
        self.view = VIEWS[(i + by) % VIEWS.len()];
        self.selected = 0;
    }
}

fn push(series: &mut VecDeque<u64>, v: u64) {
    if series.len() == SERIES_LEN {
        series.pop_front();
    }
    series.push_back(v);
}
