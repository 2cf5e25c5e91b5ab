//! `kaasctl top`: the live dashboard (ratatui + crossterm). Keys, ticks and finished
//! force-aborts are one `Event` stream into one loop; `App` holds the state, `ui`
//! draws it, `data::Watcher` reads the volume (only files that changed).

pub mod app;
pub mod data;
pub mod ui;

use crate::cmd::Status;
use app::{Action, App};
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{self, Event as TermEvent, KeyEventKind};
use ratatui::Terminal;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

pub struct TopOptions {
    pub data_dir: PathBuf,
    pub interval: Duration,
    pub session_timeout_ms: i64,
    pub once: bool,
    pub view: crate::cli::TopView,
    /// --allow-other-user: aborts may run as another user than the volume's owner.
    pub allow_other_user: bool,
}

/// What wakes the loop.
enum Event {
    Key(ratatui::crossterm::event::KeyEvent),
    Tick,
    Resize,
    AbortDone(Result<String, String>),
}

/// Renders one frame of the given size as plain text lines (for `--once` and tests).
pub fn render_text(app: &App, width: u16, height: u16) -> String {
    let mut term = Terminal::new(TestBackend::new(width, height)).expect("test backend");
    term.draw(|f| ui::draw(f, app)).expect("draw into a buffer");
    let buf = term.backend().buffer();
    let mut out = String::new();
    for y in 0..buf.area.height {
        let mut line = String::new();
        for x in 0..buf.area.width {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

pub fn run(opts: TopOptions) -> anyhow::Result<Status> {
    let mut watcher = data::Watcher::default();
    let mut app = App::new();
    app.view = match opts.view {
        crate::cli::TopView::Overview => app::View::Overview,
        crate::cli::TopView::Transactions => app::View::Transactions,
        crate::cli::TopView::Markers => app::View::Markers,
        crate::cli::TopView::Fences => app::View::Fences,
        crate::cli::TopView::Partitions => app::View::Partitions,
        crate::cli::TopView::Groups => app::View::Groups,
    };
    if opts.once {
        app.on_snapshot(watcher.refresh(&opts.data_dir, opts.session_timeout_ms, crate::cluster::now_ms()));
        if app.snap.data_dir_missing {
            anyhow::bail!(
                "{} is not a kaas volume, or its __cluster directory cannot be read",
                opts.data_dir.display()
            );
        }
        let width = std::env::var("COLUMNS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(120);
        let height = std::env::var("LINES").ok().and_then(|v| v.parse().ok()).unwrap_or(40);
        outp!("{}", render_text(&app, width, height));
        return Ok(Status::Ok);
    }
    // ratatui::try_init enters raw mode and the alternate screen and installs a panic
    // hook that restores the terminal; restore() below covers every other exit.
    let mut terminal = ratatui::try_init()?;
    let result = event_loop(&mut terminal, &mut watcher, &mut app, &opts);
    ratatui::restore();
    result.map(|_| Status::Ok)
}

fn event_loop(
    terminal: &mut ratatui::DefaultTerminal,
    watcher: &mut data::Watcher,
    app: &mut App,
    opts: &TopOptions,
) -> anyhow::Result<()> {
    let (tx, rx) = mpsc::channel::<Event>();
    // Input thread: terminal events become loop events.
    {
        let tx = tx.clone();
        std::thread::spawn(move || loop {
            match event::read() {
                Ok(TermEvent::Key(k)) if k.kind == KeyEventKind::Press => {
                    if tx.send(Event::Key(k)).is_err() {
                        return;
                    }
                }
                Ok(TermEvent::Resize(..)) => {
                    if tx.send(Event::Resize).is_err() {
                        return;
                    }
                }
                Ok(_) => {}
                Err(_) => return,
            }
        });
    }
    // Tick thread.
    {
        let tx = tx.clone();
        let interval = opts.interval.max(Duration::from_millis(100));
        std::thread::spawn(move || loop {
            std::thread::sleep(interval);
            if tx.send(Event::Tick).is_err() {
                return;
            }
        });
    }
    app.on_snapshot(watcher.refresh(&opts.data_dir, opts.session_timeout_ms, crate::cluster::now_ms()));
    terminal.draw(|f| ui::draw(f, app))?;
    while let Ok(ev) = rx.recv() {
        match ev {
            Event::Tick if !app.paused => {
                app.on_snapshot(watcher.refresh(&opts.data_dir, opts.session_timeout_ms, crate::cluster::now_ms()));
            }
            Event::Tick | Event::Resize => {}
            Event::AbortDone(r) => {
                app.status = Some(match r {
                    Ok(msg) => msg,
                    Err(e) => format!("abort failed: {e}"),
                });
                app.on_snapshot(watcher.refresh(&opts.data_dir, opts.session_timeout_ms, crate::cluster::now_ms()));
            }
            Event::Key(k) => match app.on_key(k) {
                Action::Quit => return Ok(()),
                Action::None => {}
                Action::Abort(shown) => {
                    // The same code path as `kaasctl txn abort`, off the UI thread.
                    let tx = tx.clone();
                    let dir = opts.data_dir.clone();
                    let session = opts.session_timeout_ms;
                    let allow = opts.allow_other_user;
                    std::thread::spawn(move || {
                        let done = crate::cluster::check_volume_owner(&dir, allow)
                            .map_err(|e| e.to_string())
                            .and_then(|()| abort(&dir, &shown, session));
                        let _ = tx.send(Event::AbortDone(done));
                    });
                }
            },
        }
        terminal.draw(|f| ui::draw(f, app))?;
    }
    Ok(())
}

/// Force-aborts the transaction the operator confirmed through the same kaas-core plan
/// and execution as `kaasctl txn abort --yes` (with a 10 s wait for queued markers, so
/// the dashboard stays responsive). Refused when the id's open transaction is no longer
/// the one shown (it ended and another began: the reaper aborted it and the application
/// restarted its producer), as `txn abort` refuses a plan that changed after it was
/// printed: the new instance is healthy and must not be fenced.
fn abort(dir: &std::path::Path, shown: &app::Shown, session_timeout_ms: i64) -> Result<String, String> {
    let id = shown.id.as_str();
    let volume = kaas_core::Volume::new(dir);
    let now = crate::cluster::now_ms();
    let live = kaas_core::admin::live_brokers(&volume, now, session_timeout_ms).map_err(|e| e.to_string())?;
    let (plan, _) = kaas_core::admin::plan_abort(&volume, id, &live).map_err(|e| e.to_string())?;
    if (plan.producer_id, plan.epoch_before, plan.txn_seq) != (shown.producer_id, shown.epoch, shown.txn_seq) {
        return Err(format!(
            "{id} changed since it was confirmed (producer {} epoch {} transaction {} shown, now producer {} epoch {} transaction {}): nothing done; look again",
            shown.producer_id, shown.epoch, shown.txn_seq, plan.producer_id, plan.epoch_before, plan.txn_seq
        ));
    }
    let actor = crate::cluster::admin_actor("kaasctl top");
    let command = vec!["kaasctl".into(), "top".into(), "abort".into(), id.into()];
    let report = kaas_core::admin::execute(&volume, &plan, &actor, &command, now, Duration::from_secs(10))
        .map_err(|e| e.to_string())?;
    Ok(format!(
        "aborted {id}: {} -> {} (epoch {} -> {})",
        report.before.state.as_str(),
        report.after.state.as_str(),
        report.before.producer_epoch,
        report.after.producer_epoch
    ))
}

#[cfg(test)]
mod tests;
