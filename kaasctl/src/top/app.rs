//! The dashboard's state. Rendering only reads it; keys, ticks and finished background
//! actions are the only things that change it (see `Event`).

use super::data::{Snapshot, TxnView};
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
            Sort::Age => Sort::State,
            Sort::State => Sort::Pid,
            Sort::Pid => Sort::Id,
            Sort::Id => Sort::Age,
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
    /// Asking before force-aborting this transaction: the one shown, and only it.
    Confirm(Shown),
    Help,
}

/// What the main loop must do after a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    None,
    Quit,
    /// Force-abort the transaction the operator confirmed (and no other: one that
    /// began since, under the same id, is left alone).
    Abort(Shown),
}

/// The open transaction a confirmation was asked for: its id and, as the dialog showed
/// them, its producer, epoch and number in the slot (`txn_seq`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    pub id: String,
    pub producer_id: i64,
    pub epoch: i16,
    pub txn_seq: u64,
    pub partitions: usize,
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
    /// Whether a first snapshot has been seen (changes count from the second).
    seen: bool,
    /// The filtered, sorted transactions as (slot, row) pairs; rebuilt only when a
    /// slot file, the filter or the sort changed, not on every frame.
    visible: Vec<(u32, u32)>,
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
            // The oldest open transaction first: what an operator looks for.
            sort: Sort::Age,
            paused: false,
            snap: Snapshot::default(),
            status: None,
            commits: VecDeque::new(),
            aborts: VecDeque::new(),
            queue_depth: VecDeque::new(),
            changes: BTreeMap::new(),
            seen: false,
            visible: Vec::new(),
        }
    }

    /// Takes a fresh snapshot: counts the commits/aborts since the last one (entries
    /// that reached CompleteCommit/CompleteAbort), records what changed. Only slots
    /// whose file changed are compared.
    pub fn on_snapshot(&mut self, snap: Snapshot) {
        let (mut commits, mut aborts) = (0u64, 0u64);
        let mut changed = !self.seen || snap.slots.len() != self.snap.slots.len();
        for (i, new) in snap.slots.iter().enumerate() {
            let old = self.snap.slots.get(i).cloned().flatten();
            let same = match (&old, new) {
                (Some(a), Some(b)) => std::sync::Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            };
            if same {
                continue;
            }
            changed = true;
            if !self.seen {
                continue;
            }
            let before: BTreeMap<&str, &TxnView> = old
                .iter()
                .flat_map(|d| d.rows.iter())
                .map(|r| (r.transactional_id.as_str(), r))
                .collect();
            for r in new.iter().flat_map(|d| d.rows.iter()) {
                let prev = before.get(r.transactional_id.as_str());
                if prev.is_some_and(|p| p.state == r.state && p.producer_epoch == r.producer_epoch) {
                    continue;
                }
                if r.state == TxnState::CompleteCommit.as_str() {
                    commits += 1;
                } else if r.state == TxnState::CompleteAbort.as_str() {
                    aborts += 1;
                }
                let text = match prev {
                    Some(p) => format!(
                        "{} -> {} (epoch {} -> {})",
                        p.state, r.state, p.producer_epoch, r.producer_epoch
                    ),
                    None => format!("appeared as {} (epoch {})", r.state, r.producer_epoch),
                };
                let log = self.changes.entry(r.transactional_id.clone()).or_default();
                log.push((snap.now_ms, text));
                if log.len() > 50 {
                    log.remove(0);
                }
            }
        }
        if self.seen {
            push(&mut self.commits, commits);
            push(&mut self.aborts, aborts);
            push(&mut self.queue_depth, snap.queue_depth() as u64);
        }
        self.seen = true;
        self.snap = snap;
        if changed {
            self.rebuild_visible();
        }
        let len = self.rows_in_view();
        if self.selected >= len {
            self.selected = len.saturating_sub(1);
        }
    }

    fn rebuild_visible(&mut self) {
        let f = self.filter.to_lowercase();
        let mut rows: Vec<(u32, u32)> = Vec::new();
        for (s, d) in self.snap.slots.iter().enumerate() {
            for (i, t) in d.iter().flat_map(|d| d.rows.iter()).enumerate() {
                if f.is_empty() || t.transactional_id.to_lowercase().contains(&f) || t.state.to_lowercase().contains(&f)
                {
                    rows.push((s as u32, i as u32));
                }
            }
        }
        let row = |&(s, i): &(u32, u32)| -> &TxnView {
            &self.snap.slots[s as usize].as_ref().expect("indexed slot").rows[i as usize]
        };
        match self.sort {
            Sort::Id => rows.sort_by(|a, b| row(a).transactional_id.cmp(&row(b).transactional_id)),
            // Oldest open first; the start time orders ages without the clock; the
            // rest by id.
            Sort::Age => rows.sort_by(|a, b| {
                let (a, b) = (row(a), row(b));
                let key = |t: &TxnView| (!t.is_open(), if t.is_open() { t.txn_start_ms } else { 0 });
                key(a)
                    .cmp(&key(b))
                    .then_with(|| a.transactional_id.cmp(&b.transactional_id))
            }),
            Sort::State => rows.sort_by(|a, b| {
                row(a)
                    .state
                    .cmp(row(b).state)
                    .then(row(a).transactional_id.cmp(&row(b).transactional_id))
            }),
            Sort::Pid => rows.sort_by_key(|r| row(r).producer_id),
        }
        self.visible = rows;
    }

    /// Number of transactions after the filter.
    pub fn visible_len(&self) -> usize {
        self.visible.len()
    }

    /// The visible transactions in `range` (only those are drawn).
    pub fn visible_rows(&self, range: std::ops::Range<usize>) -> impl Iterator<Item = &TxnView> {
        let end = range.end.min(self.visible.len());
        let start = range.start.min(end);
        self.visible[start..end]
            .iter()
            .map(|&(s, i)| &self.snap.slots[s as usize].as_ref().expect("indexed slot").rows[i as usize])
    }

    fn rows_in_view(&self) -> usize {
        match self.view {
            View::Overview => 0,
            View::Transactions => self.visible.len(),
            View::Markers => self.snap.queues.iter().map(|q| q.entries.len()).sum(),
            View::Fences => self.snap.fences.len(),
            View::Partitions => self.snap.partitions.len(),
            View::Groups => self.snap.groups.len(),
        }
    }

    fn selected_txn(&self) -> Option<String> {
        self.visible_rows(self.selected..self.selected + 1)
            .next()
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
                self.rebuild_visible();
                Action::None
            }
            Mode::Confirm(shown) => match key.code {
                KeyCode::Char('y') | KeyCode::Char('Y') => {
                    self.mode = Mode::Normal;
                    self.status = Some(format!("aborting {}...", shown.id));
                    Action::Abort(shown)
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
        match self.snap.entry(&id).filter(|e| e.state == TxnState::Ongoing) {
            Some(e) => {
                self.mode = Mode::Confirm(Shown {
                    producer_id: e.producer_id,
                    epoch: e.producer_epoch,
                    txn_seq: e.txn_seq,
                    partitions: e.partitions.len(),
                    id,
                })
            }
            None => self.status = Some(format!("{id} has no open transaction to abort")),
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
                self.rebuild_visible();
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
                self.rebuild_visible();
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
