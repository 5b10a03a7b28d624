//! The interactive review on a terminal (crossterm): the entries on top, the selected one's preview
//! below; `a` accepts (after a `y`), `r` rejects, `enter` shows the whole preview, `q` quits.
//! Redrawn on every key and resize; colour only without `NO_COLOR`; the terminal is restored
//! however the view ends (a guard's `Drop`, also on a panic).

use super::{preview, Entry, Looks};
use crate::error::{Error, Result};
use crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use crossterm::style::{Attribute, Color, Print, ResetColor, SetAttribute, SetForegroundColor};
use crossterm::terminal::{self, ClearType};
use crossterm::{cursor, queue};
use std::io::Write;
use std::path::Path;

/// Whether the view can run here: both ends a terminal that is not `dumb`.
pub(super) fn usable(term: Option<&str>) -> bool {
    use std::io::IsTerminal;
    std::io::stdin().is_terminal() && std::io::stdout().is_terminal() && term != Some("dumb")
}

/// Raw mode and the alternate screen for as long as it lives.
struct Screen;

impl Screen {
    fn enter() -> Result<Screen> {
        let io = |e: std::io::Error| Error::io("setting up the terminal", e);
        terminal::enable_raw_mode().map_err(io)?;
        let s = Screen;
        queue!(
            std::io::stdout(),
            terminal::EnterAlternateScreen,
            cursor::Hide
        )
        .map_err(io)?;
        std::io::stdout().flush().map_err(io)?;
        Ok(s)
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let mut out = std::io::stdout();
        let _ = queue!(
            out,
            ResetColor,
            cursor::Show,
            terminal::LeaveAlternateScreen
        );
        let _ = out.flush();
        let _ = terminal::disable_raw_mode();
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    List,
    /// The whole preview, scrolled by this many lines.
    More(usize),
    /// Waiting for `y` to accept the selected entry.
    Confirm,
}

struct View {
    entries: Vec<Entry>,
    selected: usize,
    top: usize,
    mode: Mode,
    status: String,
    color: bool,
    home: String,
}

/// Cut `s` to `width` columns (one per char: every char that reaches here is escaped text).
fn fit(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    let mut out: String = s.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

impl View {
    fn draw(&mut self, runtime: &Path, out: &mut impl Write) -> std::io::Result<()> {
        let (w, h) = terminal::size().unwrap_or((80, 24));
        let (w, h) = (usize::from(w).max(20), usize::from(h).max(6));
        queue!(out, terminal::Clear(ClearType::All), cursor::MoveTo(0, 0))?;
        let title = format!(
            "claude-sandbox review: {} item(s) — a accept · r reject · enter more · j/k move · q quit",
            self.entries.len()
        );
        self.paint(out, 0, &fit(&title, w), Some(Attribute::Bold), None)?;
        if self.entries.is_empty() {
            self.paint(
                out,
                2,
                "nothing waits for your review (q quits)",
                None,
                None,
            )?;
            return self.footer(out, w, h);
        }
        if let Mode::More(scroll) = self.mode {
            let lines = preview(runtime, &self.entries[self.selected], usize::MAX);
            let room = h - 2;
            let scroll = scroll.min(lines.len().saturating_sub(room));
            self.mode = Mode::More(scroll);
            for (row, l) in lines.iter().skip(scroll).take(room).enumerate() {
                self.paint(out, row + 1, &fit(l, w), None, None)?;
            }
            return self.footer(out, w, h);
        }
        // The list takes up to 40 % of the rows, the preview the rest.
        let list_rows = (h * 2 / 5).clamp(1, self.entries.len());
        if self.selected < self.top {
            self.top = self.selected;
        } else if self.selected >= self.top + list_rows {
            self.top = self.selected + 1 - list_rows;
        }
        for (row, (i, e)) in self
            .entries
            .iter()
            .enumerate()
            .skip(self.top)
            .take(list_rows)
            .enumerate()
        {
            let marker = if i == self.selected { "> " } else { "  " };
            let line = fit(&format!("{marker}{}", e.line(&self.home)), w);
            let attr = (i == self.selected).then_some(Attribute::Reverse);
            let color = match e.kind() {
                "alert" => Color::Yellow,
                _ => Color::Red,
            };
            self.paint(out, row + 1, &line, attr, Some(color))?;
        }
        let sep = list_rows + 1;
        self.paint(out, sep, &"─".repeat(w), Some(Attribute::Dim), None)?;
        let room = h.saturating_sub(sep + 2);
        let lines = preview(runtime, &self.entries[self.selected], room.max(1));
        for (row, l) in lines.iter().take(room).enumerate() {
            self.paint(out, sep + 1 + row, &fit(l, w), None, None)?;
        }
        self.footer(out, w, h)
    }

    fn footer(&self, out: &mut impl Write, w: usize, h: usize) -> std::io::Result<()> {
        let text = match self.mode {
            Mode::Confirm => format!(
                "accept {}? it is applied to your files as shown: y yes · any other key no",
                self.entries[self.selected].id
            ),
            Mode::More(_) => "j/k/space scroll · enter or q back".into(),
            Mode::List => self.status.clone(),
        };
        self.paint(out, h - 1, &fit(&text, w), Some(Attribute::Bold), None)?;
        out.flush()
    }

    fn paint(
        &self,
        out: &mut impl Write,
        row: usize,
        text: &str,
        attr: Option<Attribute>,
        color: Option<Color>,
    ) -> std::io::Result<()> {
        queue!(
            out,
            cursor::MoveTo(0, u16::try_from(row).unwrap_or(u16::MAX))
        )?;
        if let Some(a) = attr {
            queue!(out, SetAttribute(a))?;
        }
        if let (true, Some(c)) = (self.color, color) {
            queue!(out, SetForegroundColor(c))?;
        }
        queue!(out, Print(text), SetAttribute(Attribute::Reset), ResetColor)
    }

    /// Handle one key; `false` when the view ends.
    fn key(&mut self, runtime: &Path, k: KeyEvent) -> bool {
        let ctrl_c = k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c');
        if ctrl_c {
            return false;
        }
        match self.mode {
            Mode::Confirm => {
                self.mode = Mode::List;
                if k.code == KeyCode::Char('y') {
                    let id = self.entries[self.selected].id.clone();
                    self.decide(super::accept(runtime, &id));
                } else {
                    self.status = "not accepted".into();
                }
            }
            Mode::More(scroll) => match k.code {
                KeyCode::Char('j') | KeyCode::Down => self.mode = Mode::More(scroll + 1),
                KeyCode::Char('k') | KeyCode::Up => {
                    self.mode = Mode::More(scroll.saturating_sub(1));
                }
                KeyCode::Char(' ') | KeyCode::PageDown => self.mode = Mode::More(scroll + 10),
                KeyCode::PageUp => self.mode = Mode::More(scroll.saturating_sub(10)),
                _ => self.mode = Mode::List,
            },
            Mode::List => match k.code {
                KeyCode::Char('q') | KeyCode::Esc => return false,
                KeyCode::Char('j') | KeyCode::Down => {
                    self.selected = (self.selected + 1).min(self.entries.len().saturating_sub(1));
                }
                KeyCode::Char('k') | KeyCode::Up => self.selected = self.selected.saturating_sub(1),
                KeyCode::PageDown => {
                    self.selected = (self.selected + 10).min(self.entries.len().saturating_sub(1));
                }
                KeyCode::PageUp => self.selected = self.selected.saturating_sub(10),
                KeyCode::Home | KeyCode::Char('g') => self.selected = 0,
                KeyCode::End | KeyCode::Char('G') => {
                    self.selected = self.entries.len().saturating_sub(1);
                }
                KeyCode::Enter | KeyCode::Char('m') if !self.entries.is_empty() => {
                    self.mode = Mode::More(0);
                }
                KeyCode::Char('a') if !self.entries.is_empty() => self.mode = Mode::Confirm,
                KeyCode::Char('r') if !self.entries.is_empty() => {
                    let id = self.entries[self.selected].id.clone();
                    self.decide(super::reject(runtime, &id));
                }
                _ => {}
            },
        }
        true
    }

    /// Show a decision's outcome; a decided entry leaves the list.
    fn decide(&mut self, r: Result<String>) {
        match r {
            Ok(msg) => {
                self.status = msg;
                self.entries.remove(self.selected);
                self.selected = self.selected.min(self.entries.len().saturating_sub(1));
            }
            Err(e) => self.status = crate::escape::visible(&e.to_string()).into_owned(),
        }
    }
}

/// Run the view until the human quits.
pub(super) fn run(runtime: &Path, entries: Vec<Entry>, looks: &Looks) -> Result<()> {
    let screen = Screen::enter()?;
    let mut view = View {
        entries,
        selected: 0,
        top: 0,
        mode: Mode::List,
        status: String::new(),
        color: looks.color,
        home: looks.home.to_string(),
    };
    let mut out = std::io::stdout();
    let io = |e: std::io::Error| Error::io("drawing the review", e);
    view.draw(runtime, &mut out).map_err(io)?;
    loop {
        match crossterm::event::read().map_err(|e| Error::io("reading the terminal", e))? {
            Event::Key(k) if k.kind != KeyEventKind::Release => {
                if !view.key(runtime, k) {
                    break;
                }
            }
            Event::Resize(..) => {}
            _ => continue,
        }
        view.draw(runtime, &mut out).map_err(io)?;
    }
    drop(screen);
    Ok(())
}
