//! Aligned text tables and ANSI styling, shared by the text report and compare.
//!
//! Cells are padded first and coloured after, so escape codes never count toward a
//! column's width; with colour off the output holds no escape byte at all.

use std::fmt::Write as _;

/// How a cell is drawn when colour is on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Style {
    /// As is.
    #[default]
    Plain,
    /// Headings.
    Bold,
    /// Context that matters less (attach details, units).
    Dim,
    /// Failures and losses.
    Red,
    /// Warnings (absent probes, ratios that got worse).
    Yellow,
    /// Ratios that got better.
    Green,
    /// Histogram bars.
    Cyan,
}

impl Style {
    fn code(self) -> Option<&'static str> {
        match self {
            Style::Plain => None,
            Style::Bold => Some("1"),
            Style::Dim => Some("2"),
            Style::Red => Some("31"),
            Style::Yellow => Some("33"),
            Style::Green => Some("32"),
            Style::Cyan => Some("36"),
        }
    }
}

/// Applies styles, or not.
#[derive(Clone, Copy, Debug)]
pub struct Painter {
    /// Whether to emit ANSI escapes.
    pub color: bool,
}

impl Painter {
    /// `text` in `style`.
    #[must_use]
    pub fn paint(self, text: &str, style: Style) -> String {
        match style.code() {
            Some(code) if self.color && !text.is_empty() => format!("\x1b[{code}m{text}\x1b[0m"),
            _ => text.to_owned(),
        }
    }

    /// A section heading line.
    #[must_use]
    pub fn heading(self, text: &str) -> String {
        format!("{}\n", self.paint(text, Style::Bold))
    }
}

/// Column alignment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    /// Text.
    Left,
    /// Numbers.
    Right,
}

/// One cell.
#[derive(Clone, Debug, Default)]
pub struct Cell {
    text: String,
    style: Style,
}

impl Cell {
    /// A cell drawn in `style`.
    #[must_use]
    pub fn styled(text: impl Into<String>, style: Style) -> Self {
        Self {
            text: text.into(),
            style,
        }
    }
}

impl From<String> for Cell {
    fn from(text: String) -> Self {
        Self {
            text,
            style: Style::Plain,
        }
    }
}

impl From<&str> for Cell {
    fn from(text: &str) -> Self {
        Self::from(text.to_owned())
    }
}

/// A table: a header row, then rows; columns two spaces apart.
#[derive(Debug)]
pub struct Table {
    header: Vec<String>,
    align: Vec<Align>,
    rows: Vec<Vec<Cell>>,
}

impl Table {
    /// A table with these column titles and alignments.
    #[must_use]
    pub fn new(columns: &[(&str, Align)]) -> Self {
        Self {
            header: columns.iter().map(|(t, _)| (*t).to_owned()).collect(),
            align: columns.iter().map(|(_, a)| *a).collect(),
            rows: Vec::new(),
        }
    }

    /// Add a row; missing trailing cells are blank.
    pub fn row(&mut self, cells: Vec<Cell>) {
        self.rows.push(cells);
    }

    /// Whether no row was added.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table, each line indented by `indent` spaces, trailing blanks trimmed.
    #[must_use]
    pub fn render(&self, paint: Painter, indent: usize) -> String {
        let ncol = self.align.len();
        let mut width: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, c) in row.iter().enumerate().take(ncol) {
                width[i] = width[i].max(c.text.chars().count());
            }
        }
        let mut out = String::new();
        let header: Vec<Cell> = self
            .header
            .iter()
            .map(|h| Cell::styled(h.clone(), Style::Dim))
            .collect();
        for row in std::iter::once(&header).chain(&self.rows) {
            let mut line = " ".repeat(indent);
            for (i, (w, align)) in width.iter().zip(&self.align).enumerate() {
                let cell = row.get(i).cloned().unwrap_or_default();
                let pad = " ".repeat(w - cell.text.chars().count());
                let text = paint.paint(&cell.text, cell.style);
                if i > 0 {
                    line.push_str("  ");
                }
                match align {
                    Align::Left => {
                        line.push_str(&text);
                        line.push_str(&pad);
                    }
                    Align::Right => {
                        line.push_str(&pad);
                        line.push_str(&text);
                    }
                }
            }
            let _ = writeln!(out, "{}", line.trim_end());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_whatever_the_colour() {
        let mut t = Table::new(&[("probe", Align::Left), ("calls", Align::Right)]);
        t.row(vec![
            "synchronize_srcu".into(),
            Cell::styled("300", Style::Red),
        ]);
        t.row(vec!["d_delete".into(), "12".into()]);
        let plain = t.render(Painter { color: false }, 2);
        assert_eq!(
            plain,
            "  probe             calls\n  synchronize_srcu    300\n  d_delete             12\n"
        );
        let colored = t.render(Painter { color: true }, 2);
        assert!(colored.contains("\x1b[31m300\x1b[0m"));
        let stripped = colored
            .replace("\x1b[31m", "")
            .replace("\x1b[2m", "")
            .replace("\x1b[0m", "");
        assert_eq!(stripped, plain);
    }
}
