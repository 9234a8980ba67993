//! Everything the dashboard reacts to, as one [`Event`] stream: keys and resizes from
//! the terminal, new frames from the live loop, and the signals that must still restore
//! the terminal (SIGTERM, SIGHUP on an SSH disconnect, SIGINT).

use std::{io, sync::Arc};

use crossterm::event::{Event as TermEvent, EventStream, KeyEvent};
use futures_util::StreamExt as _;
use tokio::{
    signal::unix::{Signal as UnixSignal, SignalKind, signal},
    sync::{mpsc, watch},
};

use tracer_model::predict::Prediction;

use crate::live::Frame;

/// A signal that ends the dashboard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// SIGTERM.
    Term,
    /// SIGHUP: the terminal went away.
    Hup,
    /// SIGINT (Ctrl-C in raw mode arrives as a key instead).
    Int,
}

impl Signal {
    /// Its number, for the exit status 128+N.
    #[must_use]
    pub fn number(self) -> u8 {
        match self {
            Signal::Hup => 1,
            Signal::Int => 2,
            Signal::Term => 15,
        }
    }
}

/// One thing to react to.
#[derive(Debug)]
pub enum Event {
    /// A key was pressed.
    Key(KeyEvent),
    /// The terminal changed size, or something else asks for a redraw.
    Redraw,
    /// A new refresh.
    Frame(Arc<Frame>),
    /// The model's prediction, calibrated on the last minute (`None`: nothing it covers).
    Prediction(Option<Box<Prediction>>),
    /// The live loop ended (its last frame says why, in `error`).
    SourceStopped,
    /// A signal that ends the dashboard.
    Signal(Signal),
    /// Standard input ended or failed: nothing can be typed any more.
    InputClosed,
}

/// The merged sources of [`Event`]s.
pub struct Events {
    input: EventStream,
    input_open: bool,
    frames: watch::Receiver<Option<Arc<Frame>>>,
    frames_open: bool,
    term: UnixSignal,
    hup: UnixSignal,
    int: UnixSignal,
    /// Where model predictions computed off the drawing thread are sent.
    pub predictions: mpsc::UnboundedSender<Option<Prediction>>,
    predicted: mpsc::UnboundedReceiver<Option<Prediction>>,
}

impl Events {
    /// Listen to the terminal, `frames` and the signals.
    ///
    /// # Errors
    /// When a signal handler cannot be installed.
    pub fn new(frames: watch::Receiver<Option<Arc<Frame>>>) -> io::Result<Self> {
        let (predictions, predicted) = mpsc::unbounded_channel();
        Ok(Self {
            predictions,
            predicted,
            input: EventStream::new(),
            input_open: true,
            frames,
            frames_open: true,
            term: signal(SignalKind::terminate())?,
            hup: signal(SignalKind::hangup())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    /// The next event.
    pub async fn next(&mut self) -> Event {
        tokio::select! {
            // Signals first: a SIGTERM must win over a busy input or frame stream.
            biased;
            _ = self.term.recv() => Event::Signal(Signal::Term),
            _ = self.hup.recv() => Event::Signal(Signal::Hup),
            _ = self.int.recv() => Event::Signal(Signal::Int),
            ev = self.input.next(), if self.input_open => match ev {
                Some(Ok(TermEvent::Key(k))) => Event::Key(k),
                Some(Ok(_)) => Event::Redraw,
                // A signal interrupted the read: the signal's own branch reports it next.
                Some(Err(e)) if e.kind() == io::ErrorKind::Interrupted => Event::Redraw,
                Some(Err(_)) | None => {
                    self.input_open = false;
                    Event::InputClosed
                }
            },
            Some(p) = self.predicted.recv() => Event::Prediction(p.map(Box::new)),
            changed = self.frames.changed(), if self.frames_open => {
                if changed.is_err() {
                    // The loop is gone: its sender dropped.
                    self.frames_open = false;
                    return Event::SourceStopped;
                }
                self.frames
                    .borrow_and_update()
                    .clone()
                    .map_or(Event::Redraw, Event::Frame)
            }
        }
    }
}
