//! `tracer top`: the live dashboard, a sink of the live source.
//!
//! As in bottom and ratatui's examples, the parts are apart: the live loop (`live`)
//! publishes a [`Frame`] per refresh on a watch channel; [`app`] holds the state and turns
//! keys into state changes and requests to the loop; [`widgets`] draws the state (and
//! scrolls each table to its selection, as ratatui's stateful `Table` does) and
//! nothing else; [`event`] merges keys, frames and signals into one stream. The terminal
//! is put back as it was on `q`, on a panic, on SIGTERM and on SIGHUP.
//!
//! Without a terminal, `--frames N` draws N refreshes with the same widgets into a
//! buffer of a fixed size and prints it as text.

use std::{
    io::{self, IsTerminal as _, Write as _},
    process::ExitCode,
    sync::{Arc, Once, mpsc},
    time::{Duration, Instant},
};

use anyhow::Context as _;

use crossterm::{
    cursor, execute,
    terminal::{EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode},
};
use ratatui::{Terminal, backend::CrosstermBackend};
use tokio::sync::watch;

use tracer_model::predict;

use crate::live::{self, Control, Frame, LiveArgs};

pub mod app;
pub mod event;
pub mod format;
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
    /// What is wrong over the last minute.
    Findings,
    /// No view: only the line per refresh (to time the live loop without the dashboard).
    None,
}

impl ViewArg {
    fn view(self) -> Option<View> {
        match self {
            ViewArg::Probes => Some(View::Probes),
            ViewArg::Cgroups => Some(View::Cgroups),
            ViewArg::Detail => Some(View::Detail),
            ViewArg::Slow => Some(View::Slow),
            ViewArg::Findings => Some(View::Findings),
            ViewArg::None => None,
        }
    }
}

/// `tracer top`: the live dashboard.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Keys: ↑↓/jk select · Tab view · Enter detail · s sort · / filter · \
p pause · r reset · +/- interval · ]/[ slow threshold · ? help · q quit

Examples:
  tracer top                                  this kernel, live
  tracer top --model umount-storm             the model, where kprobes cannot attach
  tracer top --replay cap.json --speed 10     a saved capture, ten times faster
  tracer top --frames 3 --view cgroups        three refreshes as text, for scripts"
)]
pub struct Args {
    #[command(flatten)]
    pub live: LiveArgs,
    /// Print N refreshes as text and exit (no terminal needed).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub frames: Option<u64>,
    /// Width of the text --frames prints, in columns.
    #[arg(
        long,
        default_value_t = 120,
        value_parser = clap::value_parser!(u16).range(i64::from(widgets::MIN_WIDTH)..=1000)
    )]
    pub width: u16,
    /// Height of each view --frames prints, in lines.
    #[arg(
        long,
        default_value_t = 40,
        value_parser = clap::value_parser!(u16).range(i64::from(widgets::MIN_HEIGHT)..=1000)
    )]
    pub height: u16,
    /// Views --frames prints per refresh, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "probes,cgroups,slow"
    )]
    pub view: Vec<ViewArg>,
}

/// Run `tracer top`: exit status 0; 2 without a terminal and without `--frames`;
/// 128+N when signal N ended it.
///
/// # Errors
/// When the source cannot be opened, or the terminal cannot be used.
pub fn main(args: &Args) -> anyhow::Result<ExitCode> {
    if args.frames.is_none() && !has_terminal() {
        eprintln!(
            "tracer top: not a terminal. Run it in a terminal, or print refreshes as text \
             with `tracer top --frames N` (for example `--frames 5 --view probes,cgroups`)."
        );
        return Ok(ExitCode::from(2));
    }
    let (source, mut opts) = live::open(&args.live, "tracer top")?;
    // Only Detail shows the 60 s window: the live loop keeps it while Detail is on screen
    // (asked for by the dashboard), or throughout for `--frames` that print Detail.
    opts.last_60s =
        args.frames.is_some() && args.view.iter().any(|v| v.view() == Some(View::Detail));
    // The dashboard shows counts since start per row, not each series.
    opts.series_totals = false;
    let handle = live::spawn(source, opts).context("starting the live loop")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let frames = handle.frames.clone();
    if args.frames.is_none() {
        // The dashboard owns the terminal: the kernel programs' messages wait for its end.
        tracer_loader::kernel_log::hold();
    }
    let result = runtime.block_on(async {
        match args.frames {
            Some(n) => text(
                frames,
                &TextOptions {
                    frames: n,
                    width: args.width,
                    height: args.height,
                    views: args.view.iter().filter_map(|v| v.view()).collect(),
                },
            )
            .await
            .map(|()| ExitCode::SUCCESS),
            None => interactive(frames, &handle.control, tracer_core::color_stdout()).await,
        }
    });
    // After the terminal is back: detaching probes can take a moment.
    handle.stop();
    tracer_loader::kernel_log::release();
    result
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
    let mut app = App::new(color);
    if let Some(f) = frames.borrow().clone() {
        app.on_frame(f);
    }
    let mut events = Events::new(frames).context("installing signal handlers")?;
    let _guard = TerminalGuard::enter().context("setting up the terminal")?;
    let mut terminal =
        Terminal::new(CrosstermBackend::new(io::stdout())).context("setting up the terminal")?;
    terminal.clear().context("clearing the terminal")?;
    let mut model = Predictions::default();
    // The loop starts without the 60 s window (see `tracer::tui::main`).
    let mut asked = app::Wants {
        last_60s: false,
        focus: None,
    };
    loop {
        let wants = app.wants();
        if wants != asked {
            // The live loop keeps the 60 s window and a cgroup's history only for Detail.
            if wants.last_60s != asked.last_60s {
                let _ = control.send(Control::KeepLast60s(wants.last_60s));
            }
            if wants.focus != asked.focus {
                let _ = control.send(Control::Focus(wants.focus));
            }
            asked = wants;
        }
        if app.view == View::Detail {
            model.refresh(&app, &events.predictions);
        }
        terminal
            .draw(|f| f.render_widget(&mut app, f.area()))
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
            Event::Prediction(p) => {
                model.running = false;
                app.prediction = p.map(|p| Arc::new(*p));
            }
            Event::Redraw => {}
            Event::SourceStopped => {
                app.status = Some("the live source has stopped; q quits".to_owned());
            }
            Event::Signal(s) => return Ok(ExitCode::from(128 + s.number())),
            Event::InputClosed => return Ok(ExitCode::SUCCESS),
        }
    }
}

/// The model's prediction for the Detail view, calibrated on the last minute: run off the
/// drawing thread (a model run takes a while), at most every [`Predictions::EVERY`].
#[derive(Default)]
struct Predictions {
    running: bool,
    last: Option<Instant>,
}

impl Predictions {
    const EVERY: Duration = Duration::from_secs(10);

    fn refresh(
        &mut self,
        app: &App,
        to: &tokio::sync::mpsc::UnboundedSender<Option<predict::Prediction>>,
    ) {
        if self.running || self.last.is_some_and(|t| t.elapsed() < Self::EVERY) {
            return;
        }
        // Calibrated on the last minute: wait for the first frame that holds it.
        let Some(frame) = app.shown.clone().filter(|f| f.last_60s_kept) else {
            return;
        };
        self.running = true;
        self.last = Some(Instant::now());
        let to = to.clone();
        tokio::task::spawn_blocking(move || {
            let _ = to.send(predict::predict(
                &frame.last_60s,
                frame.info.kernel.as_deref(),
            ));
        });
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
        printed += 1;
        if opts.views.is_empty() {
            let line = format!("──── refresh {printed}/{} (#{})\n", opts.frames, frame.seq);
            match out.write_all(line.as_bytes()).and_then(|()| out.flush()) {
                Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(()),
                r => r?,
            }
            continue;
        }
        app.on_frame(frame);
        if opts.views.contains(&View::Detail) {
            app.prediction = app
                .shown
                .as_ref()
                .and_then(|f| predict::predict(&f.last_60s, f.info.kernel.as_deref()))
                .map(Arc::new);
        }
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
            for line in widgets::render_text(&mut app, opts.width, opts.height) {
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
