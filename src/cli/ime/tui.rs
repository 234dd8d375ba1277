//! `fastsoftmax ime`: a terminal converter. Romaji typed become kana; the best conversion and
//! the n-best follow every key; number keys pick, Enter commits, and what is committed stays
//! the language model's context for what follows. Each key's latency is shown.

use std::io::IsTerminal;
use std::time::Instant;

use anyhow::{bail, Context};
use fastsoftmax_ime::{Options, Scorer, Session};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Wrap};
use ratatui::Frame;
use unicode_width::UnicodeWidthChar;

use super::{Built, WithScorer};

/// The smallest terminal the converter draws in: the committed text, the input, one candidate,
/// the latency and the keys.
pub const MIN_WIDTH: u16 = 36;
pub const MIN_HEIGHT: u16 = 12;

/// Refuses to start without a terminal on stdin and stdout.
pub fn check_terminal() -> anyhow::Result<()> {
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        bail!(
            "`fastsoftmax ime` is interactive: run it in a terminal (to convert text from a file \
             or a pipe, use `fastsoftmax ime convert` or `ime eval`)"
        );
    }
    Ok(())
}

/// Runs the converter on the terminal with the built model's scorer.
pub struct Interactive {
    /// What the title bar says about the model.
    pub title: String,
    pub options: Options,
}

impl WithScorer for Interactive {
    type Output = anyhow::Result<String>;
    fn run<S: Scorer>(self, scorer: &mut S, b: &Built) -> anyhow::Result<String> {
        let session = Session::new(scorer, &b.lexicon, b.spelling.clone(), self.options);
        App::new(session, self.title).run_terminal()
    }
}

/// The converter's state: the session, the highlighted candidate, per-key latencies.
pub struct App<'l, S: Scorer> {
    session: Session<'l, S>,
    title: String,
    /// The candidate Enter commits.
    highlight: usize,
    /// Milliseconds of every key that changed the input (typing, backspace).
    key_ms: Vec<f64>,
    /// A note on the last key (e.g. why it did nothing).
    note: Option<String>,
    quit: bool,
}

impl<'l, S: Scorer> App<'l, S> {
    pub fn new(session: Session<'l, S>, title: String) -> Self {
        App {
            session,
            title,
            highlight: 0,
            key_ms: Vec::new(),
            note: None,
            quit: false,
        }
    }

    #[cfg(test)]
    fn session(&self) -> &Session<'l, S> {
        &self.session
    }

    #[cfg(test)]
    fn quit(&self) -> bool {
        self.quit
    }

    /// Draws and reads keys until a quit key; returns the committed text.
    fn run_terminal(mut self) -> anyhow::Result<String> {
        check_terminal()?;
        let mut terminal = ratatui::try_init().context("setting up the terminal")?;
        let result = self.event_loop(&mut terminal);
        ratatui::try_restore().context("restoring the terminal")?;
        result?;
        Ok(self.session.committed().to_string())
    }

    fn event_loop(&mut self, terminal: &mut ratatui::DefaultTerminal) -> anyhow::Result<()> {
        while !self.quit {
            terminal.draw(|f| self.draw(f))?;
            // A resize only needs the redraw above.
            if let Event::Key(key) = event::read()? {
                if key.kind != KeyEventKind::Release {
                    self.handle(key);
                }
            }
        }
        Ok(())
    }

    /// One key press.
    pub fn handle(&mut self, key: KeyEvent) {
        self.note = None;
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let n = self.session.candidates().len();
        match key.code {
            KeyCode::Char('c' | 'd' | 'q') if ctrl => self.quit = true,
            KeyCode::Esc => {
                if self.session.input().is_empty() {
                    self.note = Some("Esc clears the input; Ctrl-C quits".into());
                }
                self.session.clear();
            }
            KeyCode::Enter => {
                if self.session.input().is_empty() {
                    self.session.new_paragraph();
                } else if self.highlight == 0 || self.highlight >= n {
                    self.session.commit_all();
                } else {
                    self.session.commit(self.highlight);
                }
            }
            KeyCode::Backspace => {
                let t = Instant::now();
                if self.session.backspace() {
                    self.key_ms.push(t.elapsed().as_secs_f64() * 1e3);
                } else {
                    self.note = Some("nothing to delete: committed text is final".into());
                }
            }
            KeyCode::Down | KeyCode::Tab | KeyCode::Char(' ') if n > 0 => {
                self.highlight = (self.highlight + 1) % n;
                return;
            }
            KeyCode::Up | KeyCode::BackTab if n > 0 => {
                self.highlight = (self.highlight + n - 1) % n;
                return;
            }
            // Digits pick while candidates are shown, and are typed otherwise.
            KeyCode::Char(d @ '1'..='9') if n > 0 && !ctrl => {
                let k = d as usize - '1' as usize;
                if self.session.commit(k).is_none() {
                    self.note = Some(format!("no candidate {d}: {n} shown"));
                }
            }
            KeyCode::Char(c) if !ctrl && !key.modifiers.contains(KeyModifiers::ALT) => {
                let t = Instant::now();
                self.session.key(c);
                self.key_ms.push(t.elapsed().as_secs_f64() * 1e3);
            }
            _ => return,
        }
        self.highlight = 0;
    }

    /// Lays the screen out: committed text, input with its best conversion, candidates,
    /// latency, keys; or a note when the terminal is too small.
    pub fn draw(&self, frame: &mut Frame) {
        let area = frame.area();
        if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
            let text = format!(
                "Terminal too small ({}×{}): enlarge it to at least {MIN_WIDTH}×{MIN_HEIGHT}. \
                 Ctrl-C quits.",
                area.width, area.height
            );
            frame.render_widget(Paragraph::new(text).wrap(Wrap { trim: true }), area);
            return;
        }
        let [committed, input, candidates, status] = Layout::vertical([
            Constraint::Length(3),
            Constraint::Length(4),
            Constraint::Min(3),
            Constraint::Length(2),
        ])
        .areas(area);
        self.draw_committed(frame, committed);
        self.draw_input(frame, input);
        self.draw_candidates(frame, candidates);
        self.draw_status(frame, status);
    }

    fn draw_committed(&self, frame: &mut Frame, area: Rect) {
        let block = Block::bordered().title(format!(" fastsoftmax ime · {} ", self.title));
        let inner = block.inner(area);
        // The end of the last line: what was just committed.
        let last = self.session.committed().rsplit('\n').next().unwrap_or("");
        let line = Line::from(tail(last, inner.width as usize));
        frame.render_widget(Paragraph::new(line).block(block), area);
    }

    fn draw_input(&self, frame: &mut Frame, area: Rect) {
        let block = Block::bordered().title(" input ");
        let width = block.inner(area).width as usize;
        let label = |s: &'static str| Span::styled(s, Style::new().add_modifier(Modifier::DIM));
        let (kana, pending) = (self.session.kana(), self.session.pending());
        let room = width.saturating_sub(5 + text_width(pending));
        let typed = Line::from(vec![
            label("kana "),
            Span::raw(tail(kana, room)),
            Span::styled(
                tail(pending, width.saturating_sub(5)),
                Style::new().add_modifier(Modifier::UNDERLINED),
            ),
        ]);
        let best = self
            .session
            .candidates()
            .get(self.highlight)
            .map_or("", |c| c.text.as_str());
        let converted = Line::from(vec![
            label("  →  "),
            Span::styled(
                tail(best, width.saturating_sub(5)),
                Style::new().add_modifier(Modifier::BOLD),
            ),
        ]);
        frame.render_widget(Paragraph::new(vec![typed, converted]).block(block), area);
    }

    fn draw_candidates(&self, frame: &mut Frame, area: Rect) {
        let block = Block::bordered().title(" candidates (ln p) ");
        let inner = block.inner(area);
        let width = inner.width as usize;
        let lines: Vec<Line> = self
            .session
            .candidates()
            .iter()
            .enumerate()
            .take(inner.height as usize)
            .map(|(i, c)| {
                let score = format!(" {:8.2}", c.score);
                let room = width.saturating_sub(3 + score.len());
                let text = tail(&c.text, room);
                let pad = room.saturating_sub(text_width(&text));
                let line = format!("{} {}{}{score}", i + 1, text, " ".repeat(pad));
                let style = if i == self.highlight {
                    Style::new().add_modifier(Modifier::REVERSED)
                } else {
                    Style::new()
                };
                Line::styled(line, style)
            })
            .collect();
        frame.render_widget(Paragraph::new(lines).block(block), area);
    }

    fn draw_status(&self, frame: &mut Frame, area: Rect) {
        let latency = match self.key_ms.last() {
            None => "per-key latency appears as you type".to_string(),
            Some(last) => {
                let mut sorted = self.key_ms.clone();
                sorted.sort_by(f64::total_cmp);
                let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q).round() as usize];
                format!(
                    "key {last:.2} ms · median {:.2} · p99 {:.2} · max {:.2} · {} keys",
                    at(0.5),
                    at(0.99),
                    at(1.0),
                    sorted.len()
                )
            }
        };
        let keys = self.note.clone().unwrap_or_else(|| {
            "romaji types · 1-9 pick · Space/↑↓ move · Enter commit · Esc clear · Ctrl-C quit"
                .to_string()
        });
        let dim = Style::new().add_modifier(Modifier::DIM);
        let lines = vec![Line::from(latency), Line::styled(keys, dim)];
        frame.render_widget(Paragraph::new(lines), area);
    }
}

/// Display columns of `s` (CJK characters take two).
fn text_width(s: &str) -> usize {
    s.chars().map(|c| c.width().unwrap_or(0)).sum()
}

/// The end of `s` that fits in `cols` display columns, `…` first when cut.
fn tail(s: &str, cols: usize) -> String {
    if text_width(s) <= cols {
        return s.to_string();
    }
    let mut kept = Vec::new();
    let mut used = 1; // the ellipsis
    for c in s.chars().rev() {
        let w = c.width().unwrap_or(0);
        if used + w > cols {
            break;
        }
        used += w;
        kept.push(c);
    }
    if cols == 0 {
        return String::new();
    }
    std::iter::once('…').chain(kept.into_iter().rev()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use fastsoftmax_ime::{ImeModel, IvsScorer, Repair, Sample};
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    /// The shipped converter.
    fn model() -> ImeModel {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/models/ime-ja");
        ImeModel::load(&dir).unwrap()
    }

    /// The converter as `fastsoftmax ime` runs it: IVS with the top 400.
    fn app(m: &ImeModel) -> App<'_, IvsScorer<'_>> {
        let scorer = IvsScorer::new(&m.lm, Sample::Top(400), Repair::Incremental).unwrap();
        let session = Session::new(scorer, &m.lexicon, m.spelling.clone(), Options::default());
        App::new(session, "test".into())
    }

    fn press(app: &mut App<'_, IvsScorer<'_>>, code: KeyCode) {
        app.handle(KeyEvent::new(code, KeyModifiers::NONE));
    }

    fn screen(app: &App<'_, IvsScorer<'_>>, w: u16, h: u16) -> String {
        let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
        terminal.draw(|f| app.draw(f)).unwrap();
        let buf = terminal.backend().buffer();
        let mut out = String::new();
        for y in 0..h {
            let mut x = 0;
            // A wide character's second cell holds a filler, skipped.
            while x < w {
                let symbol = buf[(x, y)].symbol();
                out.push_str(symbol);
                x += text_width(symbol).max(1) as u16;
            }
            out.push('\n');
        }
        out
    }

    #[test]
    fn keys_type_pick_commit_and_quit() {
        let m = model();
        let mut app = app(&m);
        // With no candidates a digit is typed.
        press(&mut app, KeyCode::Char('1'));
        assert_eq!(app.session().input(), "1");
        press(&mut app, KeyCode::Esc);
        for c in "tenkiga".chars() {
            press(&mut app, KeyCode::Char(c));
        }
        assert_eq!(app.session().kana(), "てんきが");
        let second = app.session().candidates()[1].text.clone();
        assert!(screen(&app, 60, 20).contains(&second));
        // 2 commits the second candidate; the input is empty again.
        press(&mut app, KeyCode::Char('2'));
        assert_eq!(app.session().committed(), second);
        assert!(app.session().input().is_empty());
        press(&mut app, KeyCode::Backspace);
        assert!(screen(&app, 80, 20).contains("committed text is final"));
        // Space moves the highlight; Enter commits the highlighted one.
        for c in "ii".chars() {
            press(&mut app, KeyCode::Char(c));
        }
        let next = app.session().candidates()[1].text.clone();
        press(&mut app, KeyCode::Char(' '));
        press(&mut app, KeyCode::Enter);
        assert_eq!(app.session().committed(), format!("{second}{next}"));
        press(&mut app, KeyCode::Enter);
        assert!(app.session().committed().ends_with('\n'));
        assert_eq!(app.key_ms.len(), 10, "every typed key is timed");
        assert!(!app.quit());
        app.handle(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
        assert!(app.quit());
    }

    /// A long input with keys that are not romaji draws at every size, down to 1×1, and a
    /// terminal too small says so.
    #[test]
    fn long_odd_input_draws_at_every_size() {
        let m = model();
        let mut app = app(&m);
        for c in "watashihanihongo@#wo~benkyoushiteimasu"
            .chars()
            .cycle()
            .take(300)
        {
            press(&mut app, KeyCode::Char(c));
        }
        assert!(app.session().kana().chars().count() > 150);
        assert!(app.session().kana().contains('@'));
        for (w, h) in [
            (1, 1),
            (20, 5),
            (MIN_WIDTH - 1, MIN_HEIGHT),
            (MIN_WIDTH, MIN_HEIGHT - 1),
        ] {
            let s = screen(&app, w, h);
            if w >= 20 {
                assert!(s.contains("Terminal"), "{s}");
            }
        }
        for (w, h) in [(MIN_WIDTH, MIN_HEIGHT), (80, 24), (200, 60)] {
            let s = screen(&app, w, h);
            assert!(s.contains("candidates") && s.contains('…'), "{s}");
        }
    }

    #[test]
    fn tails_fit_their_columns() {
        assert_eq!(tail("きょうは", 8), "きょうは");
        assert_eq!(tail("きょうは", 7), "…ょうは");
        assert_eq!(tail("abc", 0), "");
        assert_eq!(tail("今日", 1), "…");
        for cols in 0..12 {
            assert!(text_width(&tail("今日はいい天気ですね", cols)) <= cols);
        }
    }
}
