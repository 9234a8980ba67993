//! `tracer top`: the live dashboard, a sink of the live source.
//!
//! As in bottom and ratatui's examples, the parts are apart: the live loop (`live`)
//! publishes a [`Frame`] per refresh on a watch channel; [`app`] holds the state and turns
//! keys into state changes and requests to the loop; [`widgets`] draws the state and
//! nothing else; [`event`] merges keys, frames and signals into one stream. The terminal
//! is put back as it was on `q`, on a panic, on SIGTERM and on SIGHUP.
//!
//! Without a terminal, `--frames N` draws N refreshes with the same widgets into a
//! buffer of a fixed size and prints it as text.

use std::{
    io::{self, IsTerminal as _, Write as _},
    process::ExitCode,
    sync::{Arc, Once, mpsc},
};

use crossterm::{
    cursor, execute,
    terminal::{EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode},
};
use ratatui::{Terminal, backend::CrosstermBackend};
use tokio::sync::watch;

use crate::live::{Control, Frame};

pub mod app;
pub mod event;
pub mod rows;
pub mod widgets;

#[cfg(test)]
mod testdata;

use app::{Action, App, View};
use event::{Event, Events};

/// A view `--frames` can print.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ViewArg {
    /// Per probe and caller.
    Probes,
    /// Per cgroup.
    Cgroups,
    /// The busiest probe's histogram and history.
    Detail,
    /// Calls over the slow threshold.
    Slow,
}

impl From<ViewArg> for View {
    fn from(v: ViewArg) -> View {
        match v {
            ViewArg::Probes => View::Probes,
            ViewArg::Cgroups => View::Cgroups,
            ViewArg::Detail => View::Detail,
            ViewArg::Slow => View::Slow,
        }
    }
}

/// How `--frames` prints.
#[derive(Clone, Debug)]
pub struct TextOptions {
    /// Refreshes to print.
    pub frames: u64,
    /// Buffer width, cells.
    pub width: u16,
    /// Buffer height, lines.
    pub height: u16,
    /// Views drawn per refresh, in this order.
    pub views: Vec<View>,
}

/// Terminal state is process-wide: put it back from anywhere (a panic, a signal).
fn restore_terminal() {
    // Each step is tried even if one before failed: a half-restored terminal is worse.
    let _ = disable_raw_mode();
    let _ = execute!(io::stdout(), LeaveAlternateScreen, cursor::Show);
}

/// Raw mode and the alternate screen while alive; put back on drop.
struct TerminalGuard;

impl TerminalGuard {
    fn enter() -> io::Result<Self> {
        static HOOK: Once = Once::new();
        HOOK.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                restore_terminal();
                previous(info);
            }));
        });
        enable_raw_mode()?;
        let guard = Self;
        execute!(io::stdout(), EnterAlternateScreen, cursor::Hide)?;
        Ok(guard)
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore_terminal();
    }
}

/// Whether both ends of the dashboard are a terminal.
#[must_use]
pub fn has_terminal() -> bool {
    io::stdout().is_terminal() && io::stdin().is_terminal()
}

/// The interactive dashboard until `q` or a signal: exit status 0, or 128+signal.
///
/// # Errors
/// When the terminal cannot be set up or drawn on.
pub async fn interactive(
    frames: watch::Receiver<Option<Arc<Frame>>>,
    control: &mpsc::Sender<Control>,
    color: bool,
) -> anyhow::Result<ExitCode> {
    use anyhow::Context as _;
    let mut app = App::new(color);
    if let Some(f) = frames.borrow().clone() {
        app.on_frame(f);
    }
    let mut events = Events::new(frames).context("installing signal handlers")?;
    let _guard = TerminalGuard::enter().context("setting up the terminal")?;
    let mut terminal =
        Terminal::new(CrosstermBackend::new(io::stdout())).context("setting up the terminal")?;
    terminal.clear().context("clearing the terminal")?;
    loop {
        terminal
            .draw(|f| f.render_widget(&app, f.area()))
            .context("drawing")?;
        match events.next().await {
            Event::Key(k) => match app.on_key(k) {
                Action::Quit => return Ok(ExitCode::SUCCESS),
                Action::Send(c) => {
                    if control.send(c).is_err() {
                        app.status = Some("the live source has stopped".to_owned());
                    }
                }
                Action::None => {}
            },
            Event::Frame(f) => app.on_frame(f),
            Event::Redraw => {}
            Event::SourceStopped => {
                app.status = Some("the live source has stopped; q quits".to_owned());
            }
            Event::Signal(s) => return Ok(ExitCode::from(128 + s.number())),
            Event::InputClosed => return Ok(ExitCode::SUCCESS),
        }
    }
}

/// Print `opts.frames` refreshes as text, each view under a separator line.
///
/// # Errors
/// When the source stops before the frames are printed (with its reason), or standard
/// output cannot be written.
pub async fn text(
    mut frames: watch::Receiver<Option<Arc<Frame>>>,
    opts: &TextOptions,
) -> anyhow::Result<()> {
    let mut app = App::new(false);
    let mut out = io::stdout().lock();
    let mut printed = 0;
    while printed < opts.frames {
        if frames.changed().await.is_err() {
            let why = frames
                .borrow()
                .as_ref()
                .and_then(|f| f.error.clone())
                .unwrap_or_else(|| "it ended".to_owned());
            anyhow::bail!(
                "the live source stopped after {printed} of {} refreshes: {why}",
                opts.frames
            );
        }
        let Some(frame) = frames.borrow_and_update().clone() else {
            continue;
        };
        app.on_frame(frame);
        printed += 1;
        let seq = app.shown.as_ref().map_or(0, |f| f.seq);
        for &view in &opts.views {
            app.view = view;
            let sep = format!(
                "──── refresh {printed}/{} (#{seq}) · {} ",
                opts.frames,
                view.title()
            );
            let pad = usize::from(opts.width).saturating_sub(sep.chars().count());
            let mut block = format!("{sep}{}\n", "─".repeat(pad));
            for line in widgets::render_text(&app, opts.width, opts.height) {
                block.push_str(&line);
                block.push('\n');
            }
            match out.write_all(block.as_bytes()).and_then(|()| out.flush()) {
                // `tracer top --frames 5 | head` is not an error.
                Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(()),
                r => r?,
            }
        }
    }
    Ok(())
}
