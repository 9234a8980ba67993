//! The dashboard's styles.

use ratatui::style::{Color, Modifier, Style};

/// Styles, all plain when colour is off (`NO_COLOR`): emphasis then comes from bold and
/// reverse video only.
#[derive(Clone, Copy, Debug)]
pub(super) struct Theme {
    pub(super) color: bool,
}

impl Theme {
    fn fg(self, c: Color) -> Style {
        if self.color {
            Style::default().fg(c)
        } else {
            Style::default()
        }
    }
    pub(super) fn title(self) -> Style {
        self.fg(Color::Cyan).add_modifier(Modifier::BOLD)
    }
    pub(super) fn header(self) -> Style {
        self.fg(Color::Yellow).add_modifier(Modifier::BOLD)
    }
    pub(super) fn selected() -> Style {
        Style::default().add_modifier(Modifier::REVERSED)
    }
    pub(super) fn dim(self) -> Style {
        self.fg(Color::DarkGray)
    }
    pub(super) fn warn(self) -> Style {
        self.fg(Color::Yellow)
    }
    pub(super) fn error(self) -> Style {
        self.fg(Color::Red).add_modifier(Modifier::BOLD)
    }
    pub(super) fn good(self) -> Style {
        self.fg(Color::Green).add_modifier(Modifier::BOLD)
    }
    pub(super) fn bar(self) -> Style {
        self.fg(Color::Cyan)
    }
}
